#!/bin/sh
# SPDX-License-Identifier: GPL-2.0-or-later
# Start or stop a system libvirtd (with its virtlogd) for the vm-real integration test,
# on a bare Debian 12 without systemd.
#
#   libvirtd.sh start DIR   prepare users, groups, qemu.conf and runtime directories,
#                           start virtlogd then libvirtd in the background and wait until
#                           qemu:///system answers; pids of what this script started go
#                           to DIR/virtlogd.pid and DIR/libvirtd.pid
#   libvirtd.sh stop DIR    stop, by those pids, only what "start" started, once no
#                           other user of DIR is left and no domain runs on it
#
# A daemon that was already running (a developer's) is reused and never stopped: its
# pid is not recorded. Several test runs (two build directories) may share one DIR:
# each start records its caller (NA_LIBVIRTD_USER, default the parent pid) in
# DIR/users, each stop removes it, and the daemons stop with the last user; users
# that died without "stop" are dropped. Exit codes: 0 ok, 77 libvirtd cannot run on
# this machine, 1 error.
set -eu
# The Debian binaries, not wrappers or shims an interactive PATH may put first.
PATH=/usr/sbin:/usr/bin:/sbin:/bin
export PATH

URI=qemu:///system
QEMU_CONF=/etc/libvirt/qemu.conf
# libvirtd answers once its drivers are up; the QEMU driver probes every qemu-system-*
# binary first when its capabilities cache is stale (about 8 s here, more under load).
READY_TIMEOUT=${NA_LIBVIRTD_READY_TIMEOUT:-120}  # seconds

say() { echo "libvirtd.sh: $*" >&2; }
die() { say "$*"; exit 1; }

usage() { die "usage: libvirtd.sh start|stop DIR"; }
[ $# -eq 2 ] || usage
action=$1
dir=$2

# pid_alive PID NAME: PID is a live process whose command name is NAME.
pid_alive() {
        [ -n "$1" ] && [ -r "/proc/$1/comm" ] || return 1
        [ "$(cat "/proc/$1/comm" 2>/dev/null)" = "$2" ] || return 1
        # a zombie is not alive
        ! grep -q '^State:[[:space:]]*Z' "/proc/$1/status" 2>/dev/null
}

# proc_running PID: PID exists and is not a zombie (a child just spawned may not have
# exec'd its program yet, so its name is not checked).
proc_running() {
        [ -n "$1" ] && [ -r "/proc/$1/status" ] || return 1
        ! grep -q '^State:[[:space:]]*Z' "/proc/$1/status" 2>/dev/null
}

# read_pid FILE: the first line of FILE, when it is a number.
read_pid() {
        [ -r "$1" ] || return 1
        p=$(head -n1 "$1" 2>/dev/null || true)
        case $p in ''|*[!0-9]*) return 1 ;; esac
        echo "$p"
}

# libvirt_answers [SECONDS]: qemu:///system answers a version query in time.
libvirt_answers() {
        timeout "${1:-10}" virsh -q -c "$URI" version >/dev/null 2>&1
}

# set_conf KEY VALUE: exactly one uncommented 'KEY = VALUE' line in qemu.conf.
set_conf() {
        key=$1 value=$2
        want="$key = $value"
        if [ -f "$QEMU_CONF" ] && grep -qx "$want" "$QEMU_CONF" &&
           [ "$(grep -cE "^[[:space:]]*$key[[:space:]]*=" "$QEMU_CONF")" -eq 1 ]; then
                return 0
        fi
        tmp="$QEMU_CONF.nodeagent.$$"
        if [ -f "$QEMU_CONF" ]; then
                grep -vE "^[[:space:]]*$key[[:space:]]*=" "$QEMU_CONF" >"$tmp" || true
        else
                echo "# Written by nodeagent tests/drivers/vm-real/libvirtd.sh" >"$tmp"
        fi
        echo "$want" >>"$tmp"
        chmod 0644 "$tmp"
        mv -f "$tmp" "$QEMU_CONF"
        say "set '$want' in $QEMU_CONF"
}

prepare() {
        [ "$(id -u)" -eq 0 ] || { say "needs root"; exit 77; }
        for b in libvirtd virtlogd virsh qemu-system-x86_64; do
                command -v "$b" >/dev/null 2>&1 || { say "$b is not installed"; exit 77; }
        done
        getent group kvm >/dev/null || groupadd -r kvm
        getent group libvirt-qemu >/dev/null || groupadd -r libvirt-qemu
        id -u libvirt-qemu >/dev/null 2>&1 ||
                useradd -r -g kvm -s /usr/sbin/nologin -d /var/lib/libvirt libvirt-qemu
        mkdir -p /etc/libvirt
        set_conf user '"root"'
        set_conf group '"root"'
        mkdir -p /var/run/libvirt /var/lib/libvirt /var/log/libvirt /var/cache/libvirt
}

# wait_ready PID: until qemu:///system answers, or PID dies, or the timeout.
wait_ready() {
        deadline=$(($(date +%s) + READY_TIMEOUT))
        while [ "$(date +%s)" -lt "$deadline" ]; do
                # A connection made while libvirtd initialises waits for it to finish.
                libvirt_answers "$READY_TIMEOUT" && return 0
                proc_running "$1" || { libvirt_answers && return 0; return 1; }
                sleep 0.1
        done
        return 1
}

caller=${NA_LIBVIRTD_USER:-$PPID}

# users_prune: keep in DIR/users the callers that are still alive.
users_prune() {
        : >"$dir/users.new"
        if [ -f "$dir/users" ]; then
                while read -r u; do
                        case $u in ''|*[!0-9]*) continue ;; esac
                        [ -d "/proc/$u" ] && echo "$u" >>"$dir/users.new"
                done <"$dir/users"
        fi
        mv -f "$dir/users.new" "$dir/users"
}

start() {
        users_prune
        grep -qx "$caller" "$dir/users" || echo "$caller" >>"$dir/users"
        # Started by this script for another user of DIR, or by a run killed before "stop".
        if p=$(read_pid "$dir/libvirtd.pid") && pid_alive "$p" libvirtd && libvirt_answers; then
                say "reusing libvirtd $p (started by this script, recorded in $dir)"
                return 0
        fi
        rm -f "$dir/libvirtd.pid"
        if libvirt_answers; then
                say "reusing the running libvirtd (not ours: it will not be stopped)"
                return 0
        fi
        prepare

        # virtlogd: a domain does not start without it.
        if p=$(read_pid "$dir/virtlogd.pid") && pid_alive "$p" virtlogd; then
                :
        elif p=$(read_pid /run/virtlogd.pid) && pid_alive "$p" virtlogd; then
                rm -f "$dir/virtlogd.pid"
                say "reusing the running virtlogd $p"
        else
                rm -f "$dir/virtlogd.pid"
                setsid virtlogd </dev/null >>"$dir/virtlogd.log" 2>&1 9>&- &
                echo $! >"$dir/virtlogd.pid"
                i=0
                until [ -S /run/libvirt/virtlogd-sock ]; do
                        proc_running "$(cat "$dir/virtlogd.pid")" ||
                                die "virtlogd exited: $(tail -n 5 "$dir/virtlogd.log")"
                        [ "$i" -lt 100 ] || die "virtlogd did not open its socket in 10 s"
                        sleep 0.1
                        i=$((i + 1))
                done
        fi

        setsid libvirtd </dev/null >>"$dir/libvirtd.log" 2>&1 9>&- &
        p=$!
        echo "$p" >"$dir/libvirtd.pid"
        if ! wait_ready "$p"; then
                if ! proc_running "$p"; then
                        rm -f "$dir/libvirtd.pid"
                        say "libvirtd exited: $(tail -n 5 "$dir/libvirtd.log")"
                        exit 77
                fi
                die "libvirtd $p did not answer on $URI within ${READY_TIMEOUT}s"
        fi
        if ! pid_alive "$p" libvirtd; then
                # Lost a race with another libvirtd starting at the same moment: reuse it.
                rm -f "$dir/libvirtd.pid"
                say "reusing a libvirtd that started at the same time (not ours)"
        fi
        return 0
}

# stop_pid FILE NAME: TERM the recorded process, wait, KILL if it lingers.
stop_pid() {
        p=$(read_pid "$1") || { rm -f "$1"; return 0; }
        if pid_alive "$p" "$2"; then
                kill -TERM "$p" 2>/dev/null || true
                i=0
                while pid_alive "$p" "$2" && [ "$i" -lt 150 ]; do
                        sleep 0.1
                        i=$((i + 1))
                done
                if pid_alive "$p" "$2"; then
                        say "$2 $p ignored SIGTERM for 15 s: SIGKILL"
                        kill -KILL "$p" 2>/dev/null || true
                fi
        fi
        rm -f "$1"
}

stop() {
        [ -d "$dir" ] || return 0
        users_prune
        grep -vx "$caller" "$dir/users" >"$dir/users.new" || true
        mv -f "$dir/users.new" "$dir/users"
        if [ -s "$dir/users" ]; then
                say "still used by pid $(tr '\n' ' ' <"$dir/users"): left running"
                return 0
        fi
        # Guests someone else runs on it (another DIR, a developer): keep the daemon for them.
        if read_pid "$dir/libvirtd.pid" >/dev/null; then
                active=$(timeout 10 virsh -q -c "$URI" list --name 2>/dev/null | grep -v '^$' | tr '\n' ' ' || true)
                if [ -n "$active" ]; then
                        say "domains still running ($active): libvirtd left running"
                        return 0
                fi
        fi
        stop_pid "$dir/libvirtd.pid" libvirtd
        stop_pid "$dir/virtlogd.pid" virtlogd
}

case $action in start|stop) ;; *) usage ;; esac
mkdir -p "$dir"
# One start or stop at a time per DIR.
exec 9>"$dir/.lock"
flock 9

case $action in
start) start ;;
stop) stop ;;
*) usage ;;
esac
