#!/bin/sh
# SPDX-License-Identifier: GPL-2.0-or-later
# The Ansible role packaging/ansible/roles/nodeagent against this machine
# (ansible-playbook -c local), with the .deb of the packaging-build fixture.  Nothing
# on the host changes: role-steps.sh runs in a private mount and network namespace
# with overlays on /etc, /usr, /var and /run whose upper layers are in a scratch
# directory removed at the end.  Outside the namespace this script prepares what the
# control node holds: a vault password, the token as an inline vault value, the test
# controller's certificates, the inventory and the playbook.  role-steps.sh says what
# is run and checked.
. "$(dirname "$0")/../packaging/lib.sh"

[ "$(id -u)" -eq 0 ] || skip "needs root (overlay mounts, dpkg)"
command -v unshare >/dev/null 2>&1 || skip "unshare not installed"
unshare -m -n --propagation private true 2>/dev/null || skip "no private mount and network namespaces"
for tool in ansible-playbook ansible-vault dpkg ip openssl; do
	command -v "$tool" >/dev/null 2>&1 || die "$tool not installed (scripts/deps.sh installs it)"
done
deb=$(build_package DEB)
make_scratch
S=$SCRATCH
# Ansible's own files (~/.ansible, temporary modules) go to the scratch directory.
export HOME="$S/home" ANSIBLE_LOCAL_TEMP="$S/ansible-local" ANSIBLE_REMOTE_TEMP="$S/ansible-remote"
mkdir -p "$HOME"

# The sample playbook and inventory shipped next to the role parse.
A=$NA_SOURCE_DIR/packaging/ansible
ansible-inventory -i "$A/inventory.sample" --list >"$S/sample-inventory.json" 2>"$S/sample.err" ||
	die "ansible-inventory of inventory.sample: $(cat "$S/sample.err")"
grep -q '"driver": "none"' "$S/sample-inventory.json" || die "inventory.sample: hv02's nodeagent_config_extra is not a mapping"
ansible-playbook --syntax-check -i "$A/inventory.sample" "$A/site.yml" >"$S/syntax.out" 2>&1 ||
	die "ansible-playbook --syntax-check site.yml: $(cat "$S/syntax.out")"

sh "$NA_SOURCE_DIR/tests/controller/mkcerts.sh" "$S/certs" || die "mkcerts.sh failed"
NODE_ID=$(cat /proc/sys/kernel/random/uuid)
TOKEN="tok-$(od -An -N12 -tx1 /dev/urandom | tr -d ' \n')"
printf 'vault-pass-%s\n' "$(od -An -N8 -tx1 /dev/urandom | tr -d ' \n')" >"$S/vault-pass"
ansible-vault encrypt_string --vault-password-file "$S/vault-pass" --name nodeagent_token "$TOKEN" \
	>"$S/vaulted" 2>"$S/vault.err" || die "ansible-vault encrypt_string: $(cat "$S/vault.err")"
grep -q '!vault' "$S/vaulted" || die "ansible-vault printed no vault value"
# The same token as a file on the control node (nodeagent_token_src, host bad_value).
(umask 077 && printf '%s\n' "$TOKEN" >"$S/token-src")
vaulted=$(sed 's/^/      /' "$S/vaulted")
PORT=8443

cat >"$S/inventory.yml" <<EOI
all:
  vars:
    ansible_connection: local
    ansible_python_interpreter: /usr/bin/python3
    nodeagent_controller_url: https://127.0.0.1:$PORT/agent/v1
    nodeagent_package_file: $deb
    nodeagent_ca_src: $S/certs/ca.pem
    nodeagent_pinned_pubkey: "$(cat "$S/certs/server.pin")"
    nodeagent_config_extra:
      agent:
        seccomp: true
      controller:
        poll_wait_sec: 5
      vm:
        driver: none
      apps:
        enabled: false
      firewall:
        enabled: false
  hosts:
    good:
      nodeagent_node_id: $NODE_ID
$vaulted
    bad_value:
      nodeagent_node_id: $NODE_ID
      nodeagent_token_src: $S/token-src
      nodeagent_max_parallel_jobs: 999
    bad_nodeid:
$vaulted
    bad_url:
      nodeagent_node_id: $NODE_ID
      nodeagent_controller_url: http://127.0.0.1:$PORT/agent/v1
$vaulted
    clear_token:
      nodeagent_node_id: $NODE_ID
      nodeagent_token: $TOKEN
EOI
cat >"$S/play.yml" <<EOP
- name: nodeagent role test
  hosts: all
  gather_facts: false
  roles:
    - role: nodeagent
EOP

# What the host has of nodeagent before: it must be the same after.
host_state() {
	dpkg-query -W -f='${Status} ${Version}\n' nodeagent 2>&1 || true
	ls -la --time-style=full-iso /etc/nodeagent /var/cache/nodeagent /var/lib/nodeagent /run/nodeagent 2>&1 || true
}
host_state >"$S/host.before"
rc=0
env S="$S" NODE_ID="$NODE_ID" TOKEN="$TOKEN" PORT="$PORT" TEST_NAME="$TEST_NAME" \
	ANSIBLE_ROLES_PATH="$NA_SOURCE_DIR/packaging/ansible/roles" ANSIBLE_NOCOLOR=1 ANSIBLE_FORCE_COLOR=0 \
	ANSIBLE_RETRY_FILES_ENABLED=0 ANSIBLE_PIPELINING=1 ANSIBLE_STDOUT_CALLBACK=default ANSIBLE_LOAD_CALLBACK_PLUGINS=0 \
	unshare -m -n --propagation private sh "$NA_SOURCE_DIR/tests/ansible/role-steps.sh" || rc=$?
host_state >"$S/host.after"
cmp -s "$S/host.before" "$S/host.after" || fail "the host changed: $(diff "$S/host.before" "$S/host.after")"
[ "$rc" -eq 0 ] || die "role-steps.sh failed (exit $rc)"
finish
