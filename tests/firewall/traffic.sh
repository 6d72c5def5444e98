#!/bin/sh
# SPDX-License-Identifier: GPL-2.0-or-later
# Traffic through the firewall, between network namespaces (never the host's):
#
#   client (10.77.2.2) --veth-- router (forwards, holds the agent's table) --veth "nav…"-- server (10.77.1.2)
#
# The router's end towards the server is named like a server's tap device, so the
# library dispatches on it exactly as on a node. Allowed TCP connects and pings pass,
# denied ones are dropped (the connect times out) or rejected (refused), answers of
# established connections pass whatever the other direction's policy, and turning
# the firewall off or removing it lets everything through again.
#
#   traffic.sh FW_TOOL
set -eu
tool=$1
. "$(dirname "$0")/traffic-lib.sh"
needs traffic

vps=6f1c2a3b-4c5d-4e6f-8a9b-0c1d2e3f4a5b
tap=nav6f1c2a3b4c5d
r=fwt-r-$$ s=fwt-s-$$ c=fwt-c-$$
work=$(mktemp -d /tmp/fw-traffic.XXXXXX)
pids=""
cleanup() {
	for p in $pids; do kill "$p" 2>/dev/null || true; done
	for n in $r $s $c; do ip netns del "$n" 2>/dev/null || true; done
	rm -rf "$work"
}
trap cleanup EXIT INT TERM

ip netns add $r
ip netns add $s
ip netns add $c
ip -n $r link add $tap type veth peer name eth0 netns $s
ip -n $r link add uplink type veth peer name eth0 netns $c
for n in $r $s $c; do ip -n $n link set lo up; done
ip -n $r addr add 10.77.1.1/24 dev $tap
ip -n $r addr add fd77:1::1/64 dev $tap nodad
ip -n $r addr add 10.77.2.1/24 dev uplink
ip -n $r addr add fd77:2::1/64 dev uplink nodad
ip -n $r link set $tap up
ip -n $r link set uplink up
ip netns exec $r sh -c 'echo 1 > /proc/sys/net/ipv4/ip_forward; echo 1 > /proc/sys/net/ipv6/conf/all/forwarding'
ip -n $s addr add 10.77.1.2/24 dev eth0
ip -n $s addr add fd77:1::2/64 dev eth0 nodad
ip -n $s link set eth0 up
ip -n $s route add default via 10.77.1.1
ip -n $s -6 route add default via fd77:1::1
ip -n $c addr add 10.77.2.2/24 dev eth0
ip -n $c addr add fd77:2::2/64 dev eth0 nodad
ip -n $c link set eth0 up
ip -n $c route add default via 10.77.2.1
ip -n $c -6 route add default via fd77:2::1

ip netns exec $s "$tool" serve 22 25 8080 8081 >/dev/null &
pids="$pids $!"
ip netns exec $c "$tool" serve 9000 >/dev/null &
pids="$pids $!"
# listening yet?
wait_ok $s "the server in $s did not start" probe-tcp 127.0.0.1 22 500
wait_ok $c "the server in $c did not start" probe-tcp 127.0.0.1 9000 500

# both address families routed end to end yet? (neighbour discovery; bounded wait, not an assertion)
for dst in 10.77.1.2 fd77:1::2; do
	i=0
	until [ "$(ip netns exec $c "$tool" probe-ping $dst 300)" = ok ]; do
		i=$((i + 1))
		[ $i -lt 100 ] || { echo "traffic: $dst unreachable without a firewall"; exit 1; }
	done
done

apply() { # apply FILE: the library inside the router's namespace
	ip netns exec $r "$tool" -s "$work/state" set $vps "$1" >"$work/live.json" || { echo "traffic: set $1 failed"; exit 1; }
}
T=2000 # ms a dropped connect is given before it counts as dropped (an allowed one takes well under 1 ms)

echo "--- no firewall"
check ok $c probe-tcp 10.77.1.2 22 $T
check ok $c probe-tcp 10.77.1.2 8080 $T
check ok $c probe-ping 10.77.1.2 $T
check ok $c probe-tcp fd77:1::2 8080 $T

echo "--- inbound deny by default: ssh from the client's network, icmp, a rejected port"
cat >"$work/one.json" <<'EOF'
{ "enabled": true, "inboundPolicy": "deny", "outboundPolicy": "allow", "rules": [
  { "type": "inbound", "protocol": "tcp", "port": "22", "source": "10.77.2.0/24", "action": "allow", "comment": "ssh" },
  { "type": "inbound", "protocol": "tcp", "port": "22,25", "source": "fd77:2::/64", "action": "allow", "comment": "v6" },
  { "type": "inbound", "protocol": "tcp", "port": "8081", "action": "reject" },
  { "type": "inbound", "protocol": "icmp", "action": "allow" },
  { "type": "inbound", "protocol": "icmpv6", "action": "allow", "comment": "neighbour discovery and ping" }
] }
EOF
apply "$work/one.json"
check ok $c probe-tcp 10.77.1.2 22 $T
check timeout $c probe-tcp 10.77.1.2 8080 $T
check timeout $c probe-tcp 10.77.1.2 25 $T
check refused $c probe-tcp 10.77.1.2 8081 $T
check ok $c probe-ping 10.77.1.2 $T
check ok $c probe-tcp fd77:1::2 22 $T
check ok $c probe-tcp fd77:1::2 25 $T
check timeout $c probe-tcp fd77:1::2 8080 $T
check ok $c probe-ping fd77:1::2 $T
check ok $s probe-tcp 10.77.2.2 9000 $T
# the rule counted what it let through
if ip netns exec $r nft list chain inet "$("$tool" table $vps)" $tap-in | grep -q 'tcp dport 22 counter packets [1-9]'; then
	echo "ok   the ssh rule's counter moved"
else
	echo "FAIL the ssh rule's counter did not move"
	failures=$((failures + 1))
fi

echo "--- outbound deny too: answers of inbound connections still pass; a disabled rule does nothing"
cat >"$work/two.json" <<'EOF'
{ "enabled": true, "inboundPolicy": "deny", "outboundPolicy": "deny", "rules": [
  { "id": 1, "type": "inbound", "protocol": "tcp", "port": "22", "source": "10.77.2.0/24", "action": "allow", "comment": "ssh" },
  { "type": "inbound", "protocol": "icmp", "action": "allow", "enabled": false },
  { "type": "outbound", "protocol": "tcp", "port": "9000", "destination": "10.77.2.2", "action": "allow" }
] }
EOF
apply "$work/two.json"
check ok $c probe-tcp 10.77.1.2 22 $T
check timeout $c probe-ping 10.77.1.2 $T
check ok $s probe-tcp 10.77.2.2 9000 $T
check timeout $s probe-tcp 10.77.2.2 9001 $T
check timeout $s probe-ping 10.77.2.2 $T

echo "--- turned off: nothing is filtered, the rules are kept"
sed 's/"enabled": true, "inboundPolicy"/"enabled": false, "inboundPolicy"/' "$work/two.json" >"$work/off.json"
apply "$work/off.json"
check ok $c probe-tcp 10.77.1.2 8080 $T
check ok $c probe-ping 10.77.1.2 $T
check refused $s probe-tcp 10.77.2.2 9001 $T
grep -q '"port": "9000"' "$work/live.json" || { echo "FAIL the rules are gone"; failures=$((failures + 1)); }

echo "--- on again, then removed"
apply "$work/two.json"
check timeout $c probe-tcp 10.77.1.2 8080 $T
ip netns exec $r "$tool" -s "$work/state" remove $vps
check ok $c probe-tcp 10.77.1.2 8080 $T
check ok $s probe-ping 10.77.2.2 $T

[ $failures -eq 0 ] || { echo "traffic: $failures failures"; exit 1; }
echo "traffic: all passed"
