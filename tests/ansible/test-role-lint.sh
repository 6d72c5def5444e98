#!/bin/sh
# SPDX-License-Identifier: GPL-2.0-or-later
# The Ansible role without a node (issue 24, item 5): ansible-lint finds nothing
# (production profile), meta/argument_specs.yml names every variable of
# defaults/main.yml (and the token) and refuses a wrong type by the variable's name.
. "$(dirname "$0")/../packaging/lib.sh"

for tool in ansible-lint ansible-playbook; do
	command -v "$tool" >/dev/null 2>&1 || die "$tool not installed (scripts/deps.sh installs it)"
done
make_scratch
S=$SCRATCH
export HOME="$S/home" ANSIBLE_LOCAL_TEMP="$S/ansible-local" ANSIBLE_REMOTE_TEMP="$S/ansible-remote" \
	ANSIBLE_NOCOLOR=1 ANSIBLE_FORCE_COLOR=0 ANSIBLE_RETRY_FILES_ENABLED=0
mkdir -p "$HOME"
A=$NA_SOURCE_DIR/packaging/ansible
R=$A/roles/nodeagent

# 1. ansible-lint, offline, on the playbook and the role.
(cd "$NA_SOURCE_DIR" && ansible-lint --offline --nocolor -p packaging/ansible/site.yml packaging/ansible/roles/nodeagent) \
	>"$S/lint.out" 2>&1 || { cat "$S/lint.out" >&2; die "ansible-lint found problems"; }
grep -q 'Passed with production profile: 0 failure(s), 0 warning(s)' "$S/lint.out" ||
	{ cat "$S/lint.out" >&2; die "ansible-lint did not pass with the production profile"; }
info "$(tail -n 1 "$S/lint.out")"

# 2. Every variable of defaults/main.yml, and the token, is in the argument spec, and
#    the spec names nothing the role does not have.
[ -f "$R/meta/argument_specs.yml" ] || die "meta/argument_specs.yml missing"
sed -n 's/^\(nodeagent_[a-z_]*\):.*/\1/p' "$R/defaults/main.yml" | sort >"$S/defaults"
[ "$(wc -l <"$S/defaults")" -ge 20 ] || die "cannot read defaults/main.yml"
sed -n 's/^      \(nodeagent_[a-z_]*\):$/\1/p' "$R/meta/argument_specs.yml" | sort >"$S/spec"
printf 'nodeagent_token\n' | sort -m - "$S/defaults" >"$S/want"
diff "$S/want" "$S/spec" >"$S/spec.diff" || fail "argument_specs.yml and defaults/main.yml differ: $(cat "$S/spec.diff")"

# 3. The spec is enforced: a wrong type fails before the role's first task, naming
#    the variable; the role's own asserts never run.
cat >"$S/play.yml" <<EOP
- name: argument spec
  hosts: localhost
  gather_facts: false
  roles:
    - role: nodeagent
EOP
rc=0
ANSIBLE_ROLES_PATH="$A/roles" ansible-playbook -c local -i localhost, "$S/play.yml" \
	-e '{"nodeagent_max_parallel_jobs": "many", "nodeagent_package_state": "newest"}' >"$S/spec.out" 2>&1 || rc=$?
[ "$rc" -ne 0 ] || fail "a wrong type and a wrong choice were accepted"
grep -q "Validating arguments against arg spec 'main'" "$S/spec.out" || fail "no argument validation task: $(cat "$S/spec.out")"
grep -q "nodeagent_max_parallel_jobs" "$S/spec.out" || fail "the wrong type is not named: $(cat "$S/spec.out")"
grep -q "nodeagent_package_state" "$S/spec.out" || fail "the wrong choice is not named: $(cat "$S/spec.out")"
grep -q "Refuse a missing or malformed node id" "$S/spec.out" && fail "the role's tasks ran after a failed validation"

# 4. The role's own checks (tag nodeagent_assert: nothing is installed or written) after
#    the spec: a clear token with a space is refused, a good one passes them all.
cat >"$S/vars-ok.yml" <<EOV
nodeagent_node_id: 6f1c2a3b-4c5d-4e6f-8a9b-0c1d2e3f4a5b
nodeagent_controller_url: https://api.example.net/agent/v1
nodeagent_token_allow_clear: true
nodeagent_token: tok-good
EOV
sed 's/^nodeagent_token: .*/nodeagent_token: "tok bad"/' "$S/vars-ok.yml" >"$S/vars-bad.yml"
rc=0
ANSIBLE_ROLES_PATH="$A/roles" ansible-playbook -c local -i localhost, "$S/play.yml" --tags nodeagent_assert \
	-e "@$S/vars-bad.yml" >"$S/bad.out" 2>&1 || rc=$?
[ "$rc" -ne 0 ] || fail "a token with a space passed the checks"
grep -q 'nodeagent_token must be one line of printable ASCII' "$S/bad.out" || fail "bad token: $(tail -n 5 "$S/bad.out")"
rc=0
ANSIBLE_ROLES_PATH="$A/roles" ansible-playbook -c local -i localhost, "$S/play.yml" --tags nodeagent_assert \
	-e "@$S/vars-ok.yml" >"$S/ok.out" 2>&1 || rc=$?
[ "$rc" -eq 0 ] || fail "good input failed the checks: $(tail -n 15 "$S/ok.out")"
finish
