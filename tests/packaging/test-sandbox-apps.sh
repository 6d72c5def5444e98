#!/bin/sh
# SPDX-License-Identifier: GPL-2.0-or-later
# The packaged daemon runs apps under the packaged unit's restrictions, and its apps
# outlive it (issue 10 item 8, docs/apps-on-systemd.md). Without systemd as PID 1,
# unit-exec.py applies what the unit asks of the kernel: the capability bounding set,
# no_new_privs, the SystemCallFilter=/RestrictNamespaces=/RestrictAddressFamilies=/
# RestrictRealtime= seccomp filters (every ABI of the host), and DevicePolicy=/
# DeviceAllow= in a cgroup v1 devices group (this hybrid host; not emulated on pure
# v2). It refuses the unit when an option gives the service a mount namespace of its
# own: the agent runs in the namespace of this test, which stands in for the host's
# (the test makes one of its own, private, and a network namespace, so that nothing
# reaches the real host: mounts, loop devices and nftables stay here).
#
# With the .deb's nodeagentd, nodeagent-monitor and unit, the real crun and a busybox
# OCI layout (tests/harness/mkimage.py):
#   start (READY=1), run with exactly the unit's capabilities and the filters;
#   app.deploy (loop-mounted ext4 volume, idmapped image root, overlay) and start:
#     the app's first line is seen;
#   app.sftp.set and a key login with OpenSSH's sftp to the packaged nodeagent-sftpd:
#     the upload lands in the app's volume;
#   SIGTERM to the main process only (KillMode=process): the agent exits 0, and the
#     monitor, the container and every mount of the app are still there, seen from
#     the namespace the next agent starts in;
#   a second agent: app.status running, a console line answered by the app;
#   stop by the template's console line, app.delete: no mount, loop device, container
#     or cgroup of the app left; the second agent exits 0; no error logged.
. "$(dirname "$0")/lib.sh"

[ "$(id -u)" -eq 0 ] || skip "needs root (mounts, loop devices, user namespaces)"
for tool in unshare dpkg-deb systemd-analyze setpriv losetup ip ssh-keygen sftp; do
	command -v "$tool" >/dev/null 2>&1 || skip "$tool not installed"
done
PY=/usr/bin/python3
[ -x "$PY" ] || skip "/usr/bin/python3 not installed"
for f in /usr/bin/crun /bin/busybox; do
	[ -x "$f" ] || die "$f is missing: scripts/deps.sh installs it"
done
: "${NA_NODEAGENTCTL:?NA_NODEAGENTCTL not set}"
HERE=$(cd "$(dirname "$0")" && pwd)

# The stand-in for the host: a private mount namespace (made private, so nothing
# propagates back) and a network namespace, for the whole test.
if [ "${NA_SANDBOX_APPS_INNER:-}" != 1 ]; then
	unshare -m -n --propagation private true 2>/dev/null || skip "no private mount and network namespace here"
	NA_SANDBOX_APPS_INNER=1 exec unshare -m -n --propagation private sh "$0" "$@"
fi

make_scratch
S=$SCRATCH
ip link set lo up || die "cannot bring up the loopback of the test's network namespace"
chmod 0711 "$S" # the app's mapped root must reach its root and volume from its user namespace
deb=$(build_package DEB)
mkdir "$S/pkg"
dpkg-deb -x "$deb" "$S/pkg"
DAEMON=$S/pkg/usr/sbin/nodeagentd
MONITOR=$S/pkg/usr/libexec/nodeagent/nodeagent-monitor
UNIT=$S/pkg/lib/systemd/system/nodeagent.service
for f in "$DAEMON" "$MONITOR" "$UNIT"; do
	[ -e "$f" ] || die "the package has no ${f#"$S/pkg"}"
done

APP=6f1c2a3b-4c5d-4e6f-8a9b-0c1d2e3f4a5b
DEVCG=na-sandbox-apps-$$
CTL="$NA_NODEAGENTCTL -s $S/run/control.sock"
mkdir -p "$S/state" "$S/run" "$S/etc" "$S/images"
printf 'sandbox-token\n' >"$S/etc/token"
chmod 600 "$S/etc/token"
printf '{"templates": []}\n' >"$S/etc/templates.json"
"$PY" "$NA_SOURCE_DIR/tests/harness/mkimage.py" --layout "$S/images/busybox" --tag 1 >/dev/null ||
	die "mkimage.py could not build the busybox layout"
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
runtime = /usr/bin/crun
monitor = $MONITOR
images_dir = $S/images
sftpd = $S/pkg/usr/libexec/nodeagent/nodeagent-sftpd
sftp_listen = 127.0.0.1:2022
EOC
"$DAEMON" -c "$S/etc/nodeagent.conf" --check-config >/dev/null || die "the configuration does not pass --check-config"

# The stand-in for systemd's notification socket.
"$PY" "$HERE/notify-listen.py" "$S/notify.sock" "$S/notify.log" &
listener=$!
daemon=""
cleanup() {
	[ -n "$daemon" ] && kill -KILL "$daemon" 2>/dev/null
	kill "$listener" 2>/dev/null
	wait 2>/dev/null
	# Whatever an early failure left: the container (its monitor then ends), the
	# mounts (in this namespace only), the devices cgroup.
	if [ -d "$S/state/apps/crun" ]; then
		for id in $(crun --root "$S/state/apps/crun" list -q 2>/dev/null); do
			crun --root "$S/state/apps/crun" delete --force "$id" >/dev/null 2>&1
		done
	fi
	for mp in $(awk -v s="$S/" 'index($5, s) == 1 { print $5 }' /proc/self/mountinfo | sort -r); do
		umount -l "$mp" 2>/dev/null
	done
	i=0
	while [ -d "/sys/fs/cgroup/devices/$DEVCG" ] && ! rmdir "/sys/fs/cgroup/devices/$DEVCG" 2>/dev/null; do
		i=$((i + 1))
		[ $i -lt 50 ] || break
		sleep 0.1
	done
	rm -rf "$SCRATCH"
}
trap cleanup EXIT
i=0
until grep -q LISTENING "$S/notify.log" 2>/dev/null; do
	i=$((i + 1))
	[ $i -lt 200 ] || die "the notification listener did not start"
	sleep 0.05
done

wait_for() { # DESCRIPTION COMMAND...
	_what=$1
	shift
	_i=0
	until "$@" >/dev/null 2>&1; do
		if [ -n "$daemon" ] && ! kill -0 "$daemon" 2>/dev/null; then
			sed 's/^/    /' "$S/agent.log" >&2
			die "the daemon exited while waiting for $_what"
		fi
		_i=$((_i + 1))
		[ $_i -lt 400 ] || die "timed out waiting for $_what"
		sleep 0.05
	done
}

ready_count_is() { [ "$(grep -cx 'READY=1' "$S/notify.log")" -ge "$1" ]; }
# A process that runs (a zombie whose parent has not reaped it yet does not).
alive() { [ -r "/proc/$1/stat" ] && [ "$(cut -d' ' -f3 "/proc/$1/stat")" != Z ]; }
gone() { ! alive "$1"; }

# One agent instance under the unit's restrictions; unit-exec.py execs, so $daemon
# is the daemon.  A sanitizer build's LeakSanitizer would ptrace at exit, which the
# filter refuses: leaks are the daemon tests' business.
start_agent() {
	ASAN_OPTIONS=${ASAN_OPTIONS:+$ASAN_OPTIONS:}detect_leaks=0 NOTIFY_SOCKET=$S/notify.sock WATCHDOG_USEC=2000000 \
		"$PY" "$HERE/unit-exec.py" --devices-cgroup "$DEVCG" "$UNIT" -- \
		"$DAEMON" -c "$S/etc/nodeagent.conf" >>"$S/agent.log" 2>&1 &
	daemon=$!
	wait_for "READY=1 (instance $1)" ready_count_is "$1"
	wait_for "the control socket" $CTL status
}

stop_agent() {
	kill -TERM "$daemon"
	set +e
	wait "$daemon"
	rc=$?
	set -e
	daemon=""
	[ "$rc" -eq 0 ] || fail "agent exit status $rc after SIGTERM, want 0"
}

# job KIND PARAMS: run one job on the app; its JSON in $S/job.json; fails the test
# unless it succeeded.
job() {
	if [ $# -gt 1 ]; then
		$CTL run "$1" --target "$APP" --params "$2" --json >"$S/job.json" 2>"$S/job.err" || true
	else
		$CTL run "$1" --target "$APP" --json >"$S/job.json" 2>"$S/job.err" || true
	fi
	grep -q '"status": "succeeded"' "$S/job.json" ||
		fail "$1 did not succeed: $(cat "$S/job.json" "$S/job.err" | tr -s ' \n' ' ' | cut -c1-600)"
}

app_mounts() { # the mount points of the app's volume and roots, as this namespace sees them
	awk -v a="/$APP/" 'index($5, a) { print $5 " " $9 }' /proc/self/mountinfo | sort
}

logs_have() { $CTL logs "$APP" 2>/dev/null | grep -q "$1"; }

start_agent 1
status=/proc/$daemon/status
caps=$(sed -n 's/^CapabilityBoundingSet=//p' "$UNIT")
mask=0
for c in $caps; do
	bit=$(setpriv --list-caps | grep -nx "$(printf '%s' "${c#CAP_}" | tr 'A-Z' 'a-z')" | cut -d: -f1)
	[ -n "$bit" ] || die "setpriv does not know $c"
	mask=$((mask | (1 << (bit - 1))))
done
want=$(printf '%016x' "$mask")
[ "$(awk '/^CapBnd:/ { print $2 }' "$status")" = "$want" ] || fail "bounding set $(awk '/^CapBnd:/ { print $2 }' "$status"), want $want"
[ "$(awk '/^CapEff:/ { print $2 }' "$status")" = "$want" ] || fail "effective set $(awk '/^CapEff:/ { print $2 }' "$status"), want $want"
[ "$(awk '/^NoNewPrivs:/ { print $2 }' "$status")" = 1 ] || fail "the daemon runs without no_new_privs"
[ "$(awk '/^Seccomp_filters:/ { print $2 }' "$status")" -ge 4 ] || fail "fewer seccomp filters than the unit asks for"
[ "$(readlink /proc/$daemon/ns/mnt)" = "$(readlink /proc/self/ns/mnt)" ] || fail "the daemon is not in the test's mount namespace"
if grep -q ":devices:/$DEVCG\$" "/proc/$daemon/cgroup"; then
	devices="the unit's device policy (cgroup v1 devices)"
else
	devices="no device policy (no cgroup v1 devices controller here)"
fi
info "agent 1 up: capabilities $want ($(echo $caps)), no_new_privs, the unit's seccomp filters, $devices"

deploy='{"name":"demo","hostname":"demo","type":"app","version":"1","sftpUsername":"demo",
 "template":{"id":"echo","image":"busybox:1","customCommand":true,"stop":{"line":"stop"},"startedPattern":"^ready$",
  "command":["/bin/sh","-c","echo ready; while read l; do echo \"got $l\"; [ \"$l\" = stop ] && exit 0; done"]},
 "plan":{"cpuCores":0.5,"memoryMB":64,"volumeQuotaMB":32}}'
job app.deploy "$deploy"
job app.power '{"action":"start"}'
wait_for "the app's first line" logs_have ready
mounts1=$(app_mounts)
printf '%s\n' "$mounts1" | grep -q ' overlay$' || fail "no overlay root mounted for the app: $mounts1"
printf '%s\n' "$mounts1" | grep -q ' /dev/loop[0-9]*$' || fail "no loop-mounted volume for the app: $mounts1"
[ "$failures" -eq 0 ] && info "app deployed and started under the unit: $(printf '%s\n' "$mounts1" | awk '{ print $2 }' | tr '\n' ' ')"

# SFTP under the unit: the packaged nodeagent-sftpd runs, and a key login as the app's
# user uploads into its volume (the session's drop to the app's ids and its own seccomp
# filter, within the unit's capabilities and filters).
ssh-keygen -q -t ed25519 -N "" -f "$S/sftp_key"
job app.sftp.set "{\"enabled\":true,\"publicKeys\":[\"$(cat "$S/sftp_key.pub")\"]}"
wait_for "nodeagent-sftpd listening" grep -q "sftpd: listening on 127.0.0.1:2022" "$S/agent.log"
printf 'put %s uploaded\nls -l\n' "$S/etc/templates.json" >"$S/sftp.batch"
sftp -b "$S/sftp.batch" -P 2022 -i "$S/sftp_key" -o IdentitiesOnly=yes -o StrictHostKeyChecking=no \
	-o UserKnownHostsFile=/dev/null -o LogLevel=ERROR demo@127.0.0.1 >"$S/sftp.out" 2>&1 ||
	fail "sftp under the unit: $(tr -s ' \n' ' ' <"$S/sftp.out" | cut -c1-600)"
cmp -s "$S/etc/templates.json" "$S/state/apps/apps/$APP/disk/volume/uploaded" || fail "the SFTP upload is not in the volume"
[ "$failures" -eq 0 ] && info "SFTP under the unit: key login, upload into the app's volume"

# A stop of the unit: SIGTERM to the main process only.
monitor=$(cat "$S/state/apps/apps/$APP/monitor.pid" 2>/dev/null || true)
stop_agent
[ -n "$monitor" ] && alive "$monitor" || fail "the app's monitor did not outlive the agent"
crun --root "$S/state/apps/crun" state "na-$APP" 2>/dev/null | grep -q '"status": "running"' ||
	fail "the container did not outlive the agent: $(crun --root "$S/state/apps/crun" list 2>&1)"
[ "$(app_mounts)" = "$mounts1" ] || fail "the app's mounts changed when the agent stopped: $(app_mounts)"
[ "$failures" -eq 0 ] && info "agent 1 stopped (exit 0): monitor $monitor, container and mounts still there"

start_agent 2
job app.status
grep -q '"state": "running"' "$S/job.json" || fail "after the restart the app is not running: $(tr -s ' \n' ' ' <"$S/job.json")"
job app.console.send '{"line":"hello"}'
wait_for "the app's answer to a console line" logs_have "got hello"
[ "$(app_mounts)" = "$mounts1" ] || fail "the second agent mounted the app again: $(app_mounts)"
[ "$failures" -eq 0 ] && info "agent 2 re-attached: app running, console line answered, same mounts"

job app.power '{"action":"stop","graceSec":10}'
wait_for "the app's answer to its stop line" logs_have "got stop"
job app.delete
[ -z "$(app_mounts)" ] || fail "mounts left after app.delete: $(app_mounts)"
losetup -a | grep -q "$S/" && fail "loop devices left after app.delete: $(losetup -a | grep "$S/")"
[ -z "$(crun --root "$S/state/apps/crun" list -q 2>/dev/null)" ] || fail "containers left after app.delete"
wait_for "the monitor to exit after app.delete" gone "$monitor"
stop_agent
if grep -q '^<[0-3]>' "$S/agent.log"; then
	fail "the daemon logged errors under the unit's restrictions:"
	grep '^<[0-3]>' "$S/agent.log" | sed 's/^/    /' >&2
fi
[ "$(grep -cx 'STOPPING=1' "$S/notify.log")" -eq 2 ] || fail "want STOPPING=1 from each agent"
[ "$failures" -eq 0 ] && info "stopped by its console line, deleted: nothing left; agent 2 exited 0"
finish
