#!/bin/sh
# SPDX-License-Identifier: GPL-2.0-or-later
# Traffic between servers whose chains live in different shard tables, through
# network namespaces (never the host's):
#
#   a (10.78.1.2) --veth "nav6f1c2a3b4c5d" (shard 06)--\
#   b (10.78.2.2) --veth "nav111111112222" (shard 02)--- router (forwards, holds the agent's tables)
#   c (10.78.3.2) --veth "nav0a1b2c3d0000" (shard 06)--/
#
# Every shard table hooks the forward path itself, so a packet from a to b passes
# a's outbound chain in one table and b's inbound chain in another. What must hold:
# an accept in one shard ends only that table's chain (a's outbound allow does not
# let a packet past b's inbound drop, nor the other way round), a drop is final
# whatever the other shard says, and answers of established connections and related
# ICMP errors pass both shards whatever their policies. a and c share a shard: the
# same holds there.
#
#   traffic-shards.sh FW_TOOL
set -eu
tool=$1
. "$(dirname "$0")/traffic-lib.sh"
needs traffic-shards

A=6f1c2a3b-4c5d-4e6f-8a9b-0c1d2e3f4a5b
B=11111111-2222-4333-8444-555555555555
C=0a1b2c3d-0000-4000-8000-00000000beef
# the layout this test is about: a and c in one shard table, b in another
ta=$("$tool" table $A) tb=$("$tool" table $B) tc=$("$tool" table $C)
[ "$ta" != "$tb" ] && [ "$ta" = "$tc" ] || { echo "traffic-shards: shards moved ($ta $tb $tc): pick other ids"; exit 1; }

r=fws-r-$$ na=fws-a-$$ nb=fws-b-$$ nc=fws-c-$$
work=$(mktemp -d /tmp/fw-shards.XXXXXX)
pids=""
cleanup() {
	for p in $pids; do kill "$p" 2>/dev/null || true; done
	for n in $r $na $nb $nc; do ip netns del "$n" 2>/dev/null || true; done
	rm -rf "$work"
}
trap cleanup EXIT INT TERM

ip netns add $r
ip -n $r link set lo up
ip netns exec $r sh -c 'echo 1 > /proc/sys/net/ipv4/ip_forward'
i=1
for pair in "$na:nav6f1c2a3b4c5d" "$nb:nav111111112222" "$nc:nav0a1b2c3d0000"; do
	n=${pair%%:*} tap=${pair#*:}
	ip netns add $n
	ip -n $r link add $tap type veth peer name eth0 netns $n
	ip -n $n link set lo up
	ip -n $r addr add 10.78.$i.1/24 dev $tap
	ip -n $r link set $tap up
	ip -n $n addr add 10.78.$i.2/24 dev eth0
	ip -n $n link set eth0 up
	ip -n $n route add default via 10.78.$i.1
	ip netns exec $n "$tool" serve 22 80 8080 >/dev/null &
	pids="$pids $!"
	i=$((i + 1))
done
a=10.78.1.2 b=10.78.2.2 c=10.78.3.2

# listening and routed yet?
for pair in "$na:$b" "$nb:$c" "$nc:$a"; do
	n=${pair%%:*} dst=${pair#*:}
	wait_ok $n "$dst unreachable from $n without a firewall" probe-tcp $dst 22 300
done

apply() { # apply VPS JSON: the library inside the router's namespace
	printf '%s\n' "$2" >"$work/cfg.json"
	ip netns exec $r "$tool" -s "$work/state" set "$1" "$work/cfg.json" >/dev/null || { echo "traffic-shards: set $1 failed"; exit 1; }
}
T=1000 # ms a dropped connect is given before it counts as dropped (an allowed one takes well under 1 ms)

echo "--- no firewall"
check ok $na probe-tcp $b 80 $T
check ok $nb probe-tcp $a 80 $T
check ok $na probe-tcp $c 80 $T

echo "--- an allow in one shard does not pass the other shard's drop"
# a allows its own outbound (a rule for b's port 80, policy allow) and inbound ssh only; b and c the same inbound
apply $A '{ "enabled": true, "inboundPolicy": "deny", "outboundPolicy": "allow", "rules": [
  { "type": "outbound", "protocol": "tcp", "port": "80", "destination": "10.78.2.2", "action": "allow" },
  { "type": "inbound", "protocol": "tcp", "port": "22", "action": "allow" } ] }'
apply $B '{ "enabled": true, "inboundPolicy": "deny", "outboundPolicy": "allow", "rules": [
  { "type": "outbound", "protocol": "tcp", "port": "80", "action": "allow" },
  { "type": "inbound", "protocol": "tcp", "port": "22", "action": "allow" } ] }'
apply $C '{ "enabled": true, "inboundPolicy": "deny", "outboundPolicy": "allow", "rules": [
  { "type": "inbound", "protocol": "tcp", "port": "22", "action": "allow" } ] }'
check timeout $na probe-tcp $b 80 $T   # a (06) accepts outbound, b (02) drops inbound
check ok $na probe-tcp $b 22 $T
check timeout $nb probe-tcp $a 80 $T   # b (02) accepts outbound, a (06) drops inbound
check ok $nb probe-tcp $a 22 $T
check timeout $na probe-tcp $c 80 $T   # same shard
check ok $na probe-tcp $c 22 $T

echo "--- a drop is final whatever the other shard accepts"
apply $A '{ "enabled": true, "inboundPolicy": "allow", "outboundPolicy": "deny", "rules": [
  { "type": "outbound", "protocol": "tcp", "port": "80", "action": "allow" } ] }'
apply $B '{ "enabled": true, "inboundPolicy": "allow", "outboundPolicy": "deny", "rules": [
  { "type": "outbound", "protocol": "tcp", "port": "22", "action": "deny" },
  { "type": "outbound", "protocol": "tcp", "port": "80", "action": "allow" } ] }'
check timeout $na probe-tcp $b 22 $T   # a (06) drops outbound, b (02) accepts everything inbound
check ok $na probe-tcp $b 80 $T
check timeout $nb probe-tcp $a 22 $T   # b (02) drops by rule, a (06) accepts everything inbound
check timeout $nb probe-tcp $a 8080 $T # b (02) drops by policy
check ok $nb probe-tcp $a 80 $T

echo "--- answers and related ICMP errors pass both shards whatever their policies"
# a takes 8080 and udp 5353 from b only and sends nothing of its own; b takes nothing and sends anything
apply $A '{ "enabled": true, "inboundPolicy": "deny", "outboundPolicy": "deny", "rules": [
  { "type": "inbound", "protocol": "tcp", "port": "8080", "source": "10.78.2.2", "action": "allow" },
  { "type": "inbound", "protocol": "udp", "port": "5353", "source": "10.78.2.2", "action": "allow" } ] }'
apply $B '{ "enabled": true, "inboundPolicy": "deny", "outboundPolicy": "allow", "rules": [] }'
check ok $nb probe-tcp $a 8080 $T      # the SYN-ACK leaves a (06 outbound: deny) and enters b (02 inbound: deny)
check refused $nb probe-udp $a 5353 $T # a's port unreachable is related: through both denies
check timeout $nc probe-tcp $a 8080 $T # c is not b
check timeout $na probe-tcp $b 22 $T   # a sends nothing new

echo "--- a server turned off is unfiltered, the other shard still filters"
apply $A '{ "enabled": false, "inboundPolicy": "deny", "outboundPolicy": "deny", "rules": [] }'
check ok $nc probe-tcp $a 80 $T
check timeout $na probe-tcp $b 22 $T   # b (02) still drops inbound

[ $failures -eq 0 ] || { echo "traffic-shards: $failures failures"; exit 1; }
echo "traffic-shards: all passed"
