#!/bin/sh
# SPDX-License-Identifier: GPL-2.0-or-later
# The steps of test-role.sh, run by it inside a private mount and network namespace
# (never on its own: it mounts overlays over /etc, /usr, /var and /run).
#   1. install + configure from the inventory's "good" host: the package installed,
#      nodeagent.conf from the variables, the token file 0600, the token never in
#      the output, the service steps skipped (PID 1 is not systemd here) with a message;
#   2. the agent started by hand against the test controller, the role run again
#      with nodeagent_wait_for_link=true: zero changes, the wait sees the link up;
#      then SIGTERM (what the unit's stop sends): the agent drains and exits 0;
#   3. in one run, one host each: a bad value (max_parallel_jobs = 999, the token
#      from nodeagent_token_src) that nodeagentd --check-config refuses, the old
#      nodeagent.conf staying byte-identical; and the bad inputs (no node id, an
#      http:// URL, a token in clear), each refused with its message; nothing on the
#      node changes.
. "$NA_SOURCE_DIR/tests/packaging/lib.sh"
: "${S:?}" "${NODE_ID:?}" "${TOKEN:?}" "${PORT:?}"

for d in etc usr var run; do
	mkdir -p "$S/ov/$d.upper" "$S/ov/$d.work"
	mount -t overlay "na-ansible-$d" -o "lowerdir=/$d,upperdir=$S/ov/$d.upper,workdir=$S/ov/$d.work" "/$d" ||
		die "overlay on /$d"
done
ip link set lo up || die "ip link set lo up"

python3 -B "$NA_SOURCE_DIR/tests/controller/controller.py" --certs "$S/certs" --port "$PORT" \
	--admin-port $((PORT + 1)) --node-id "$NODE_ID" --token "$TOKEN" --poll-wait 5 >"$S/controller.log" 2>&1 &
controller=$!
agent=""
cleanup() {
	[ -z "$agent" ] || kill "$agent" 2>/dev/null
	kill "$controller" 2>/dev/null
	wait 2>/dev/null
}
trap cleanup EXIT

# play NAME [ansible-playbook arguments]: the output in $S/NAME.out, the exit status in $rc.
# --diff: a task that shows a secret in its diff without no_log would leak it there.
play() {
	_name=$1
	shift
	_t0=$(date +%s)
	rc=0
	ansible-playbook -c local --diff -i "$S/inventory.yml" --vault-password-file "$S/vault-pass" "$@" "$S/play.yml" \
		>"$S/$_name.out" 2>&1 || rc=$?
	info "$_name: exit $rc in $(($(date +%s) - _t0)) s"
}
# recap HOST: the host's PLAY RECAP line of the last run.
recap() {
	grep -E "^$1 +: ok=" "$S/$_name.out" | tail -n 1
}
show() {
	echo "---- $S/$1.out" >&2
	cat "$S/$1.out" >&2
}
# A listing of everything the runs could have changed (the overlays' upper layers).
snapshot() {
	(cd "$S/ov" && find etc.upper usr.upper var.upper run.upper -printf '%p %y %m %s %T@\n' | sort)
}

# 1. install and configure
play install --limit good
[ "$rc" -eq 0 ] || { show install; die "first run failed"; }
recap good | grep -q 'failed=0' || fail "first run: $(recap good)"
recap good | grep -Eq 'changed=[1-9]' || fail "first run changed nothing: $(recap good)"
dpkg -s nodeagent 2>/dev/null | grep -q '^Status: install ok installed' || fail "nodeagent not installed by the role"
conf=/etc/nodeagent/nodeagent.conf
grep -qx "node_id = $NODE_ID" $conf || fail "nodeagent.conf has no node_id = $NODE_ID"
grep -qx "url = https://127.0.0.1:$PORT/agent/v1" $conf || fail "nodeagent.conf has not the controller URL"
grep -qx "ca_file = /etc/nodeagent/controller-ca.pem" $conf || fail "nodeagent.conf has no ca_file"
grep -qx "pinned_pubkey = $(cat "$S/certs/server.pin")" $conf || fail "nodeagent.conf has no pinned_pubkey"
grep -qx "driver = none" $conf || fail "nodeagent.conf lacks the extra key [vm] driver"
grep -qx "enabled = false" $conf || fail "nodeagent.conf: a boolean extra key is not written as false"
cmp -s "$S/certs/ca.pem" /etc/nodeagent/controller-ca.pem || fail "the CA bundle was not copied"
[ "$(stat -c '%a %U' /etc/nodeagent/token)" = "600 root" ] ||
	fail "token file: mode/owner $(stat -c '%a %U' /etc/nodeagent/token), want 600 root"
[ "$(cat /etc/nodeagent/token)" = "$TOKEN" ] || fail "the token file does not hold the token"
/usr/sbin/nodeagentd --check-config -c $conf >/dev/null 2>"$S/check.err" ||
	fail "the written configuration does not pass --check-config: $(cat "$S/check.err")"
grep -q 'not systemd: enabling, starting and restarting nodeagent are skipped' "$S/install.out" ||
	fail "first run: no message that the service steps were skipped"
grep -Eq 'TASK \[nodeagent : Start the service\]' "$S/install.out" || fail "first run: no 'Start the service' task"
sed -n '/TASK \[nodeagent : Start the service\]/,/^$/p' "$S/install.out" | grep -q '^skipping:' ||
	fail "first run: 'Start the service' was not skipped"

# 2. the agent runs (started by hand: no systemd here); the second run changes nothing
mkdir -p /run/nodeagent
/usr/sbin/nodeagentd -c $conf >"$S/agent.log" 2>&1 &
agent=$!
play again --limit good -e nodeagent_wait_for_link=true
[ "$rc" -eq 0 ] || { show again; cat "$S/agent.log" >&2; die "second run failed"; }
recap good | grep -q 'changed=0 ' || { show again; fail "second run is not idempotent: $(recap good)"; }
grep -q 'nodeagent: good: controller link connected' "$S/again.out" ||
	{ show again; fail "second run: the wait did not see the link up"; }
# SIGTERM: the agent drains and stops (what the unit's stop does on a restart).
kill -TERM "$agent"
wait "$agent" || fail "the agent exited with status $? on SIGTERM"
agent=""

# 3 and 4 in one run (one host each, checks and configuration tags only: the package
# step is the slow one): a value nodeagentd refuses, and the bad inputs.  Nothing on
# the node may change: the overlays' upper layers are compared before and after.
cp -p $conf "$S/conf.before"
snapshot >"$S/snap.before"
play bad --limit bad_value,bad_nodeid,bad_url,clear_token --tags nodeagent_assert,nodeagent_config
[ "$rc" -ne 0 ] || fail "bad values and inputs did not fail the run"
for h in bad_value bad_nodeid bad_url clear_token; do
	recap "$h" | grep -q 'changed=0 .*failed=1' || fail "$h: $(recap "$h")"
done
grep -q 'fatal: \[bad_value\]: FAILED! => {.*"msg": "failed to validate"' "$S/bad.out" ||
	fail "the bad value did not fail at validation"
grep -q 'source:[0-9]*: max_parallel_jobs: ' "$S/bad.out" || fail "the validation failure does not name max_parallel_jobs"
cmp -s $conf "$S/conf.before" || fail "a refused configuration changed $conf"
sed -n '/TASK \[nodeagent : Copy the token file from the control node (0600)\]/,/^$/p' "$S/bad.out" |
	grep -q '^ok: \[bad_value\]' || fail "nodeagent_token_src: the token file was not checked against the source"
grep -q "nodeagent: bad_nodeid: nodeagent_node_id is not set: set it to this node's id" "$S/bad.out" ||
	fail "missing node id: no clear message"
grep -qF "nodeagent: bad_url: nodeagent_controller_url \\\"http://127.0.0.1:$PORT/agent/v1\\\" is not an https:// URL" \
	"$S/bad.out" || fail "http:// URL: no clear message"
grep -q "nodeagent: clear_token: nodeagent_token is given in clear in the inventory" "$S/bad.out" ||
	fail "clear token: no clear message"
[ "$failures" -eq 0 ] || show bad
snapshot >"$S/snap.after"
cmp -s "$S/snap.before" "$S/snap.after" ||
	fail "bad values or inputs changed the node: $(diff "$S/snap.before" "$S/snap.after" | head -n 20)"

# The token never reaches the output, whatever happened.
for f in "$S"/*.out; do
	grep -qF "$TOKEN" "$f" && fail "the token appears in $f"
done

[ "$failures" -eq 0 ] || exit 1
exit 0
