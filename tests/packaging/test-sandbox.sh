#!/bin/sh
# SPDX-License-Identifier: GPL-2.0-or-later
# The packaged daemon under the restrictions the unit puts on it, emulated without a
# running systemd: a private mount namespace where every file system tree is
# read-only except the state directory and the runtime directory (stricter than the
# unit, whose /tmp is private and writable), a private network namespace (the host's
# nftables ruleset is never touched), the capability bounding set read from the
# unit's CapabilityBoundingSet=, and no_new_privs.  A stand-in notification
# socket (sd_notify) with WATCHDOG_USEC set plays systemd's part.  The daemon must:
#   start and send READY=1 and STATUS=, feed the watchdog, answer nodeagentctl
#   (a node.status job through its job layer), run with exactly the unit's
#   capabilities and its own seccomp filter, write its state, and on SIGTERM send
#   STOPPING=1 and exit 0.
# The packaged build has no test hooks (it is configured with -DNA_TEST_HOOKS=OFF): the
# binary holds neither the test job kinds nor fault injection, and the daemon, run with
# NODEAGENT_TEST_KINDS=1 and NA_FAULTS set, answers UNSUPPORTED_JOB for every test kind.
# (SystemCallFilter=, RestrictAddressFamilies= and the Protect* mounts are not
# emulated here; `systemd-analyze verify` checks them in packaging-unit.)
. "$(dirname "$0")/lib.sh"

for tool in unshare setpriv dpkg-deb cpack; do
	command -v "$tool" >/dev/null 2>&1 || skip "$tool not installed"
done
PY=/usr/bin/python3
[ -x "$PY" ] || PY=$(command -v python3) || skip "python3 not installed"
: "${NA_NODEAGENTCTL:?NA_NODEAGENTCTL not set}"
make_scratch
unshare -m -n --propagation private true 2>/dev/null || skip "no private mount and network namespace here"

deb=$(build_package DEB)
mkdir "$SCRATCH/pkg"
dpkg-deb -x "$deb" "$SCRATCH/pkg"
DAEMON=$SCRATCH/pkg/usr/sbin/nodeagentd
UNIT=$SCRATCH/pkg/lib/systemd/system/nodeagent.service

# No test hook in the packaged binary: the names the hooks are reached by are absent
# (the test build's binary has them all, which shows the probe finds them when there).
hook_names="NODEAGENT_TEST_KINDS test.sleep test.append test.once test.hang NA_FAULTS"
for name in $hook_names; do
	grep -qaF "$name" "$DAEMON" && fail "the packaged nodeagentd holds '$name': test hooks compiled in"
done
if grep -q '^NA_TEST_HOOKS:BOOL=ON$' "$NA_BUILD_DIR/CMakeCache.txt" 2>/dev/null; then
	for name in $hook_names; do
		grep -qaF "$name" "$NA_NODEAGENTD" || die "probe broken: the test build's nodeagentd lacks '$name'"
	done
fi
[ "$failures" -eq 0 ] && info "the packaged nodeagentd holds none of: $hook_names"

# The unit's capability set, for setpriv: "-all,+net_admin,+dac_override".
caps=$(sed -n 's/^CapabilityBoundingSet=//p' "$UNIT")
[ -n "$caps" ] || die "the unit has no CapabilityBoundingSet="
bounding=-all
mask=0
for c in $caps; do
	name=$(printf '%s' "${c#CAP_}" | tr 'A-Z' 'a-z')
	bounding="$bounding,+$name"
	bit=$(setpriv --list-caps | grep -nx "$name" | cut -d: -f1)
	[ -n "$bit" ] || die "setpriv does not know $c"
	mask=$((mask | (1 << (bit - 1))))
done
grep -qx 'NoNewPrivileges=yes' "$UNIT" || die "the unit does not set NoNewPrivileges=yes"

S=$SCRATCH
mkdir -p "$S/state" "$S/run" "$S/etc"
printf 'sandbox-token\n' >"$S/etc/token"
chmod 600 "$S/etc/token"
cat >"$S/etc/nodeagent.conf" <<EOC
[agent]
node_id = 0b7e6a52-3f1d-4c2a-9e8b-5d4c3b2a1f00
state_dir = $S/state
control_socket = $S/run/control.sock
drain_timeout_sec = 5

[controller]
# Nobody listens there: the link backs off, the agent runs all the same.
url = http://127.0.0.1:9/agent/v1
allow_insecure_http = true
token_file = $S/etc/token

[vm]
uri = test:///default
templates_file = $S/etc/templates.json

[apps]
# The daemon alone here; apps run under the unit in test-sandbox-apps.sh.
enabled = false
EOC
printf '{"templates": []}\n' >"$S/etc/templates.json"
"$DAEMON" -c "$S/etc/nodeagent.conf" --check-config >/dev/null || die "the sandbox configuration does not pass --check-config"

# The stand-in for systemd's notification socket.
"$PY" "$(dirname "$0")/notify-listen.py" "$S/notify.sock" "$S/notify.log" &
listener=$!
daemon=""
cleanup() {
	if [ -n "$daemon" ]; then
		kill -KILL "$daemon" 2>/dev/null || true
		wait "$daemon" 2>/dev/null || true
	fi
	kill -KILL "$listener" 2>/dev/null || true
	wait "$listener" 2>/dev/null || true
	rm -rf "$SCRATCH"
}
trap cleanup EXIT
i=0
until grep -q LISTENING "$S/notify.log" 2>/dev/null; do
	i=$((i + 1))
	[ $i -lt 200 ] || die "the notification listener did not start"
	sleep 0.05
done

# Start: read-only trees, writable state and runtime directories, the unit's
# capabilities, no_new_privs, and a private network namespace so that whatever the
# agent does with nftables (CAP_NET_ADMIN) never reaches the host's ruleset.
# unshare and setpriv exec, so $daemon is the daemon.
# In a sanitizer build LeakSanitizer would stop the world with ptrace at exit, which
# the agent's seccomp filter refuses (a fatal LSan error, exit 1): leaks are the
# daemon tests' business, not this test's.  Ignored by normal builds.
# NODEAGENT_TEST_KINDS and NA_FAULTS ask for the test hooks, which the packaged build
# must not have.
ASAN_OPTIONS=${ASAN_OPTIONS:+$ASAN_OPTIONS:}detect_leaks=0 NODEAGENT_TEST_KINDS=1 NA_FAULTS=http.request%1 \
	BOUNDING=$bounding NOTIFY_SOCKET=$S/notify.sock WATCHDOG_USEC=2000000 unshare -m -n --propagation private sh -c '
	set -e
	S=$1
	shift
	mount --bind "$S/state" "$S/state"
	mount --bind "$S/run" "$S/run"
	for mp in $(awk "{ print \$5 }" /proc/self/mountinfo | sort -u); do
		case $mp in
		"$S/state" | "$S/run") ;;
		/ | /etc | /etc/* | /usr | /usr/* | /var | /var/* | /tmp | /tmp/* | /run | /run/* | /home | /home/* | /root | /root/* | /opt | /opt/* | /srv | /srv/*)
			# Other tests running meanwhile make and remove mounts under /tmp: one
			# removed since the list was read is gone here too (an rmdir in another
			# namespace detaches it), and is no reason to fail.
			mount -o remount,bind,ro "$mp" 2>/dev/null || ! grep -qF " $mp " /proc/self/mountinfo ||
				mount -o remount,bind,ro "$mp" ;;
		esac
	done
	if touch "$S/not-writable" 2>/dev/null || touch /etc/nodeagent-sandbox-test 2>/dev/null; then
		echo "sandbox: the file system is still writable" >&2
		exit 90
	fi
	touch "$S/state/.writable" "$S/run/.writable"
	exec setpriv --no-new-privs --bounding-set="$BOUNDING" --inh-caps=-all -- "$@"
	' sandbox "$S" "$DAEMON" -c "$S/etc/nodeagent.conf" >"$S/agent.log" 2>&1 &
daemon=$!

wait_for() { # DESCRIPTION COMMAND...
	_what=$1
	shift
	_i=0
	until "$@" >/dev/null 2>&1; do
		if ! kill -0 "$daemon" 2>/dev/null; then
			sed 's/^/    /' "$S/agent.log" >&2
			die "the daemon exited while waiting for $_what"
		fi
		_i=$((_i + 1))
		[ $_i -lt 600 ] || die "timed out waiting for $_what"
		sleep 0.05
	done
}
wait_for "READY=1" grep -qx 'READY=1' "$S/notify.log"
wait_for "the control socket" "$NA_NODEAGENTCTL" -s "$S/run/control.sock" status
info "started under the sandbox: READY=1 received, control socket answers"

status=/proc/$daemon/status
capeff=$(awk '/^CapEff:/ { print $2 }' "$status")
capbnd=$(awk '/^CapBnd:/ { print $2 }' "$status")
want=$(printf '%016x' "$mask")
[ "$capeff" = "$want" ] || fail "daemon's effective capabilities $capeff, want $want ($caps)"
[ "$capbnd" = "$want" ] || fail "daemon's bounding set $capbnd, want $want"
[ "$(awk '/^NoNewPrivs:/ { print $2 }' "$status")" = 1 ] || fail "daemon runs without no_new_privs"
[ "$(awk '/^Seccomp:/ { print $2 }' "$status")" = 2 ] || fail "daemon's seccomp filter is not loaded"
info "running with CapEff=$capeff (${caps}), no_new_privs, seccomp filter"

"$NA_NODEAGENTCTL" -s "$S/run/control.sock" run node.status --json >"$S/run.json" 2>"$S/run.err" ||
	fail "nodeagentctl run node.status failed under the sandbox: $(cat "$S/run.err")"
grep -q '"status": "succeeded"' "$S/run.json" || fail "node.status did not succeed: $(cat "$S/run.json")"
# A test kind, asked for with NODEAGENT_TEST_KINDS=1 in the daemon's environment, is
# unknown to the packaged daemon.
before=$failures
for kind in test.sleep test.append test.hang; do
	if "$NA_NODEAGENTCTL" -s "$S/run/control.sock" run "$kind" --params '{"sleepMs":1}' --json \
		>"$S/test-kind.json" 2>"$S/test-kind.err"; then
		fail "the packaged daemon ran $kind with NODEAGENT_TEST_KINDS=1: $(cat "$S/test-kind.json")"
	elif ! grep -q '"code": "UNSUPPORTED_JOB"' "$S/test-kind.json"; then
		fail "$kind: want UNSUPPORTED_JOB, got: $(cat "$S/test-kind.json" "$S/test-kind.err")"
	fi
done
[ "$failures" -eq "$before" ] && info "test.sleep, test.append, test.hang: UNSUPPORTED_JOB although NODEAGENT_TEST_KINDS=1"
grep -q '^STATUS=' "$S/notify.log" || fail "no STATUS= notification"
wait_for "WATCHDOG=1" grep -qx 'WATCHDOG=1' "$S/notify.log"
[ -n "$(ls "$S/state")" ] || fail "the daemon wrote nothing to its state directory"

kill -TERM "$daemon"
# A daemon that never ends after SIGTERM is a failure, not a hung test.
_i=0
while [ -d "/proc/$daemon" ] && ! grep -q '^State:.*Z' "/proc/$daemon/status" 2>/dev/null; do
	_i=$((_i + 1))
	if [ $_i -ge 1200 ]; then
		sed 's/^/    /' "$S/agent.log" | tail -20 >&2
		die "the daemon did not stop within 60 s of SIGTERM"
	fi
	sleep 0.05
done
set +e
wait "$daemon"
rc=$?
set -e
daemon=""
[ "$rc" -eq 0 ] || fail "exit status $rc after SIGTERM, want 0"
grep -qx 'STOPPING=1' "$S/notify.log" || fail "no STOPPING=1 notification"
if grep -q '^<[0-3]>' "$S/agent.log"; then
	fail "the daemon logged errors under the sandbox:"
	grep '^<[0-3]>' "$S/agent.log" | sed 's/^/    /' >&2
fi
info "notifications: $(sort -u "$S/notify.log" | sed 's/=.*//' | grep -v LISTENING | tr '\n' ' ')"
info "state directory after stop: $(ls "$S/state" | tr '\n' ' ')"
finish
