#!/bin/sh
# SPDX-License-Identifier: GPL-2.0-or-later
# What the firewall's tables cost a forwarded packet (run by hand; prints figures,
# asserts nothing):
#
#   bench-fw-path.sh FW_TOOL [PACKETS] [ROUNDS]       (defaults 200000 and 3)
#
# client --veth-- router (forwards, holds the tables) --veth "nav6f1c2a3b4c5d"-- server,
# all in namespaces of its own. The client sends small UDP datagrams to the server
# (nobody listens: the server drops them); with veth the whole path, the router's
# forward hook included, runs in the sender's context, so the time per datagram sent
# is the path's cost. Three layouts in turn, ROUNDS times, the median of each:
#  - no firewall table: the limit;
#  - the server's firewall in one table (2 base chains on the hook: the layout before shards);
#  - the same in 16 shard tables (32 base chains: 30 of them only miss their map).
# The server's configuration lets the datagrams through after one rule, so each
# layout walks the server's chains as well.
set -eu
tool=$1 count=${2:-200000} rounds=${3:-3}
. "$(dirname "$0")/../../tests/firewall/traffic-lib.sh"
needs bench-fw-path

vps=6f1c2a3b-4c5d-4e6f-8a9b-0c1d2e3f4a5b
tap=nav6f1c2a3b4c5d
r=fwp-r-$$ s=fwp-s-$$ c=fwp-c-$$
work=$(mktemp -d /tmp/fw-path.XXXXXX)
cleanup() {
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
ip -n $r addr add 10.79.1.1/24 dev $tap
ip -n $r addr add 10.79.2.1/24 dev uplink
ip -n $r link set $tap up
ip -n $r link set uplink up
ip netns exec $r sh -c 'echo 1 > /proc/sys/net/ipv4/ip_forward'
ip -n $s addr add 10.79.1.2/24 dev eth0
ip -n $s link set eth0 up
ip -n $s route add default via 10.79.1.1
ip -n $c addr add 10.79.2.2/24 dev eth0
ip -n $c link set eth0 up
ip -n $c route add default via 10.79.2.1
ip netns exec $s "$tool" serve 22 >/dev/null &
server=$!
trap 'kill $server 2>/dev/null || true; cleanup' EXIT INT TERM
wait_ok $c "the server is not reachable without a firewall" probe-tcp 10.79.1.2 22 300

cat >"$work/cfg.json" <<'EOF'
{ "enabled": true, "inboundPolicy": "allow", "outboundPolicy": "allow", "rules": [
  { "type": "inbound", "protocol": "tcp", "port": "22", "action": "allow" } ] }
EOF
layout() { # layout none|1|16
	ip netns exec $r nft flush ruleset
	[ "$1" = none ] && return 0
	rm -rf "$work/state"
	ip netns exec $r "$tool" -s "$work/state" -n "$1" set $vps "$work/cfg.json" >/dev/null
}
median() { sort -n | awk '{ v[NR] = $1 } END { print v[int((NR + 1) / 2)] }'; }

: >"$work/none"
: >"$work/1"
: >"$work/16"
i=0
while [ $i -lt "$rounds" ]; do
	for l in none 1 16; do
		layout $l
		ip netns exec $c "$tool" blast 10.79.1.2 9 "$count" >>"$work/$l"
	done
	i=$((i + 1))
done
none=$(median <"$work/none") one=$(median <"$work/1") sixteen=$(median <"$work/16")
echo "forwarded UDP datagram, client -> router -> server, $count a round, median of $rounds rounds (load: $(cut -d' ' -f1-3 /proc/loadavg)):"
echo "  no firewall table (the limit):           $none ns"
echo "  one table, 2 base chains (before shards): $one ns (+$((one - none)) ns)"
echo "  16 shard tables, 32 base chains:          $sixteen ns (+$((sixteen - none)) ns; the 15 extra tables +$((sixteen - one)) ns)"
