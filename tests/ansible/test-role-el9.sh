#!/bin/sh
# SPDX-License-Identifier: GPL-2.0-or-later
# The role's EL9 path, as far as a Debian machine allows (issue 24, item 5): a
# check-mode run (--check: nothing is written) against a fake EL9 fact set (Rocky 9,
# os_family RedHat, dnf, systemd) served from a fact cache, with a stand-in systemctl
# first on PATH that answers Ansible's systemd module and changes nothing.
#   1. the .rpm path: the .deb and apt steps are skipped and the .rpm goes to dnf,
#      which stops the run here because Debian has no dnf Python module;
#   2. the repository path: apt skipped, dnf chosen, the same stop;
#   3. the rest without the package step: the token, the configuration, enable,
#      the restart and reload handlers and start all run (check mode) on EL9 facts.
# Not exercised: dnf itself and a real EL9 systemd (no EL9 machine or container here).
. "$(dirname "$0")/../packaging/lib.sh"

command -v ansible-playbook >/dev/null 2>&1 || die "ansible-playbook not installed (scripts/deps.sh installs it)"
: "${NA_NODEAGENTD:=$NA_BUILD_DIR/agent/nodeagentd}"
[ -x "$NA_NODEAGENTD" ] || die "$NA_NODEAGENTD is not built"
make_scratch
S=$SCRATCH
mkdir -p "$S/home" "$S/facts" "$S/bin" "$S/node"
export HOME="$S/home" ANSIBLE_LOCAL_TEMP="$S/ansible-local" ANSIBLE_REMOTE_TEMP="$S/ansible-remote" \
	ANSIBLE_NOCOLOR=1 ANSIBLE_FORCE_COLOR=0 ANSIBLE_RETRY_FILES_ENABLED=0 ANSIBLE_STDOUT_CALLBACK=default \
	ANSIBLE_LOAD_CALLBACK_PLUGINS=0 ANSIBLE_ROLES_PATH="$NA_SOURCE_DIR/packaging/ansible/roles" \
	ANSIBLE_GATHERING=explicit ANSIBLE_CACHE_PLUGIN=jsonfile ANSIBLE_CACHE_PLUGIN_CONNECTION="$S/facts" \
	FAKE_SYSTEMCTL_LOG="$S/systemctl.log" PATH="$S/bin:$PATH"

cat >"$S/facts/el9" <<'EOF2'
{"ansible_os_family": "RedHat", "ansible_distribution": "Rocky", "ansible_distribution_major_version": "9",
 "ansible_distribution_version": "9.4", "ansible_pkg_mgr": "dnf", "ansible_service_mgr": "systemd",
 "ansible_system": "Linux", "ansible_architecture": "x86_64"}
EOF2
cat >"$S/bin/systemctl" <<'EOF2'
#!/bin/sh
# EL9's systemctl as the systemd module sees it before nodeagent was ever started.
echo "$*" >>"$FAKE_SYSTEMCTL_LOG"
case "$*" in
*show*) printf 'Id=nodeagent.service\nNames=nodeagent.service\nLoadState=loaded\nActiveState=inactive\nSubState=dead\nUnitFileState=disabled\nFragmentPath=/usr/lib/systemd/system/nodeagent.service\n' ;;
*is-enabled*) echo disabled; exit 1 ;;
*is-active*) echo inactive; exit 3 ;;
*) exit 0 ;;
esac
EOF2
chmod 755 "$S/bin/systemctl"
(umask 077 && printf 'tok-el9\n' >"$S/token")
: >"$S/nodeagent-0.1.0-1.x86_64.rpm"
cat >"$S/inventory.yml" <<EOI
all:
  hosts:
    el9:
      ansible_connection: local
      ansible_python_interpreter: /usr/bin/python3
      nodeagent_node_id: 6f1c2a3b-4c5d-4e6f-8a9b-0c1d2e3f4a5b
      nodeagent_controller_url: https://api.example.net/agent/v1
      nodeagent_token_src: $S/token
      nodeagent_daemon: $NA_NODEAGENTD
      nodeagent_config_path: $S/node/nodeagent.conf
      nodeagent_token_path: $S/node/token
      nodeagent_package_cache_dir: $S/node/cache
      nodeagent_wait_for_link: false
EOI
cat >"$S/play.yml" <<EOP
- name: nodeagent role on EL9 facts
  hosts: all
  gather_facts: false
  roles:
    - role: nodeagent
EOP
play() { # NAME ARGS...
	_n=$1
	shift
	rc=0
	ansible-playbook -i "$S/inventory.yml" "$S/play.yml" --check "$@" >"$S/$_n.out" 2>&1 || rc=$?
}
task() { # OUT TITLE: the task's result lines
	sed -n "/TASK \[nodeagent : $2\]/,/^\$/p" "$S/$1.out"
}
no_dnf="Could not import the dnf python module"

# 1. The .rpm path.
play rpm -e "nodeagent_package_file=$S/nodeagent-0.1.0-1.x86_64.rpm"
[ "$rc" -ne 0 ] || fail "rpm: the run passed: dnf cannot run here, so it never reached dnf"
task rpm 'Install the .deb' | grep -q '^skipping: \[el9\]' || fail "rpm: the .deb step was not skipped"
task rpm 'Copy the package file to the node' | grep -q '^changed: \[el9\]' || fail "rpm: the package file was not copied"
task rpm 'Install the .rpm' | grep -q "$no_dnf" || fail "rpm: the .rpm did not go to dnf: $(tail -n 20 "$S/rpm.out")"

# 2. The repository path.
play repo
[ "$rc" -ne 0 ] || fail "repo: the run passed: dnf cannot run here, so it never reached dnf"
task repo 'Install from the repository (apt)' | grep -q '^skipping: \[el9\]' || fail "repo: apt was not skipped"
task repo 'Install from the repository (dnf)' | grep -q "$no_dnf" || fail "repo: dnf was not chosen: $(tail -n 20 "$S/repo.out")"

# 3. Everything after the package step.
: >"$S/systemctl.log"
play rest --skip-tags nodeagent_install
[ "$rc" -eq 0 ] || fail "rest: the run failed: $(tail -n 30 "$S/rest.out")"
for t in 'Write the configuration (validated before it replaces the old one)' 'Enable the service' 'Start the service'; do
	task rest "$t" | grep -q '^changed: \[el9\]' || fail "rest: '$t' did not run: $(task rest "$t")"
done
grep -q 'RUNNING HANDLER \[nodeagent : Restart nodeagent\]' "$S/rest.out" || fail "rest: the restart handler did not run"
task rest 'Say why the service steps are skipped' | grep -q '^skipping: \[el9\]' ||
	fail "rest: the service steps were said to be skipped on EL9 facts (systemd)"
grep -q 'is-enabled nodeagent' "$S/systemctl.log" || fail "rest: systemctl was not asked whether nodeagent is enabled"
grep -q 'os_family.*RedHat\|RedHat' "$S/facts/el9" || die "fact cache lost"
# Check mode: nothing was written on the "node".
[ -z "$(ls -A "$S/node")" ] || fail "check mode wrote on the node: $(ls -A "$S/node")"
grep -q 'tok-el9' "$S"/*.out && fail "the token appears in the output"
info "EL9 facts: package steps reach dnf (stop: $no_dnf), configuration and service steps pass in check mode"
finish
