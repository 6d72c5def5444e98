#!/bin/sh
# SPDX-License-Identifier: GPL-2.0-or-later
# The anti-spoofing guard with real packets, between network namespaces (never the host's):
#
#   node (10.77.1.1, fd77:1::1) --veth "nav…" (the server's tap, guarded)-- guest (eth0, 52:54:00:aa:bb:cc)
#
# The guest holds its own addresses (10.77.1.2, fd77:1::2) and, by hand, others
# (10.77.1.99, fd77:1::99), as a customer could. With the guard set for its own: a
# datagram from its own address arrives at the node, one from another address does
# not, nor one with another MAC address; an ARP request with another sender address
# or MAC teaches the node nothing, one with its own does; a neighbour advertisement
# of another address is dropped, of its own passes. Without the guard the spoofed
# datagram arrives (the test can see a packet arrive).
#
#   traffic-guard.sh FW_TOOL
set -eu
tool=$1
probe="python3 $(dirname "$0")/guard-probe.py"
. "$(dirname "$0")/traffic-lib.sh"
needs traffic-guard

vps=6f1c2a3b-4c5d-4e6f-8a9b-0c1d2e3f4a5b
tap=nav6f1c2a3b4c5d
mac=52:54:00:aa:bb:cc
n=fwg-n-$$ g=fwg-g-$$
work=$(mktemp -d /tmp/fw-guard.XXXXXX)
cleanup() {
	for ns in $n $g; do ip netns del "$ns" 2>/dev/null || true; done
	rm -rf "$work"
}
trap cleanup EXIT INT TERM

ip netns add $n
ip netns add $g
ip -n $n link add $tap type veth peer name eth0 netns $g
for ns in $n $g; do ip -n $ns link set lo up; done
ip -n $g link set eth0 address $mac
ip -n $n addr add 10.77.1.1/24 dev $tap
ip -n $n addr add fd77:1::1/64 dev $tap nodad
for a in 10.77.1.2/24 10.77.1.99/24; do ip -n $g addr add $a dev eth0; done
for a in fd77:1::2/64 fd77:1::99/64; do ip -n $g addr add $a dev eth0 nodad; done
ip -n $n link set $tap up
ip -n $g link set eth0 up
# The guest knows the node's MAC: no neighbour discovery of its own decides what is sent.
node_mac=$(ip netns exec $n cat /sys/class/net/$tap/address)
ip -n $g neigh replace 10.77.1.1 lladdr "$node_mac" dev eth0 nud permanent
ip -n $g neigh replace fd77:1::1 lladdr "$node_mac" dev eth0 nud permanent

ip netns exec $n "$tool" guard $vps $mac 10.77.1.2 10.77.1.3 fd77:1::2 >/dev/null

# expect WANT SRC DST: one datagram from SRC (in the guest) to DST:9000 (on the node).
expect() {
	want=$1 src=$2 dst=$3
	rm -f "$work/ready" "$work/got"
	ip netns exec $n $probe recv "$dst" 9000 1500 "$work/ready" >"$work/got" &
	rpid=$!
	i=0
	until [ -e "$work/ready" ]; do
		i=$((i + 1))
		[ $i -lt 200 ] || { echo "FAIL the receiver did not start"; exit 1; }
		sleep 0.05
	done
	ip netns exec $g $probe send "$src" "$dst" 9000
	wait $rpid
	got=$(cat "$work/got")
	if [ "$got" = "$want" ]; then
		echo "ok   $src -> $dst: $got"
	else
		echo "FAIL $src -> $dst: $got (wanted $want)"
		failures=$((failures + 1))
	fi
}

expect 10.77.1.2 10.77.1.2 10.77.1.1
expect timeout 10.77.1.99 10.77.1.1
expect fd77:1::2 fd77:1::2 fd77:1::1
expect timeout fd77:1::99 fd77:1::1

# Its own address from another MAC address: dropped.
ip -n $g link set eth0 address 52:54:00:de:ad:01
expect timeout 10.77.1.2 10.77.1.1
ip -n $g link set eth0 address $mac

# ARP: the node learns a neighbour only from a request with its own sender address and MAC.
learned() {
	ip -n $n neigh show "$1" dev $tap | grep -q lladdr
}
ip -n $n neigh flush dev $tap
ip netns exec $g $probe arp eth0 $mac $mac 10.77.1.99 10.77.1.1
ip netns exec $g $probe arp eth0 $mac 52:54:00:de:ad:02 10.77.1.2 10.77.1.1
# A marker after them: its own second address, its own MAC. One link, in order: once the
# node learned the marker, it has seen the two before.
ip netns exec $g $probe arp eth0 $mac $mac 10.77.1.3 10.77.1.1
i=0
until learned 10.77.1.3; do
	i=$((i + 1))
	[ $i -lt 100 ] || { echo "FAIL the node never learned 10.77.1.3 from its own ARP request"; failures=$((failures + 1)); break; }
	sleep 0.05
done
for a in 10.77.1.99 10.77.1.2; do
	if learned $a; then
		echo "FAIL a spoofed ARP request taught the node $a: $(ip -n $n neigh show $a dev $tap)"
		failures=$((failures + 1))
	else
		echo "ok   spoofed ARP request for $a: dropped"
	fi
done

# Neighbour advertisements: counted by the guard's drop rule of its -na chain.
na_drops() {
	ip netns exec $n nft list chain netdev nodeagent-guard $tap-na | sed -n 's/.*counter packets \([0-9]*\).*/\1/p'
}
before=$(na_drops)
ip netns exec $g $probe na eth0 $mac fd77:1::2 ff02::1 fd77:1::2
[ "$(na_drops)" = "$before" ] && echo "ok   NA of its own address: passed" ||
	{ echo "FAIL NA of its own address was dropped"; failures=$((failures + 1)); }
ip netns exec $g $probe na eth0 $mac fd77:1::2 ff02::1 fd77:1::50
[ "$(na_drops)" = $((before + 1)) ] && echo "ok   NA of another address: dropped" ||
	{ echo "FAIL NA of another address: drops $before -> $(na_drops)"; failures=$((failures + 1)); }

# Without the guard the spoofed datagram arrives: the checks above can see a packet arrive.
ip netns exec $n "$tool" unguard $vps
expect 10.77.1.99 10.77.1.99 10.77.1.1

[ "$failures" -eq 0 ] || { echo "$failures failure(s)"; exit 1; }
echo "traffic-guard: all passed"
