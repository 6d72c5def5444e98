# SPDX-License-Identifier: GPL-2.0-or-later
# Shared by traffic.sh and traffic-shards.sh (sourced; $tool is fw-tool):
#   needs NAME                                               exit 77 (skipped) without root, ip or nft
#   check WANT NETNS probe-tcp|probe-udp|probe-ping ARGS...   one probe, counted in $failures
#   wait_ok NETNS WHAT PROBE ARGS...                          repeat a probe until ok (a bounded wait on
#                                                             readiness, not a timed assertion), else fail
needs() {
	[ "$(id -u)" -eq 0 ] || { echo "$1: needs root"; exit 77; }
	command -v ip >/dev/null || { echo "$1: needs iproute2"; exit 77; }
	command -v nft >/dev/null || { echo "$1: needs nft"; exit 77; }
}

failures=0
check() {
	want=$1 ns=$2
	shift 2
	got=$(ip netns exec "$ns" "$tool" "$@")
	if [ "$got" = "$want" ]; then
		echo "ok   $ns $* -> $got"
	else
		echo "FAIL $ns $* -> $got (wanted $want)"
		failures=$((failures + 1))
	fi
}

wait_ok() {
	ns=$1 what=$2
	shift 2
	i=0
	until [ "$(ip netns exec "$ns" "$tool" "$@")" = ok ]; do
		i=$((i + 1))
		[ $i -lt 100 ] || { echo "FAIL $what"; exit 1; }
		sleep 0.05
	done
}
