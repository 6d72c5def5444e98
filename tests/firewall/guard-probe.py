#!/usr/bin/python3
# SPDX-License-Identifier: GPL-2.0-or-later
"""Packets for traffic-guard.sh, run inside its namespaces (the guest's or the node's):

  guard-probe.py recv ADDR PORT TIMEOUT_MS READY_FILE   bind ADDR:PORT, touch READY_FILE, print the source
                                                        address of the first datagram, or "timeout"
  guard-probe.py send SRC DST PORT                      one UDP datagram from SRC (an address of this host)
  guard-probe.py arp IFACE SRC_MAC SHA SPA TPA          an ARP request (Ethernet source SRC_MAC, sender SHA/SPA)
  guard-probe.py na IFACE SRC_MAC SRC DST TARGET        an unsolicited neighbour advertisement of TARGET
"""
import ipaddress
import os
import socket
import struct
import sys


def mac_bytes(text):
    return bytes(int(x, 16) for x in text.split(":"))


def recv(addr, port, timeout_ms, ready):
    fam = socket.AF_INET6 if ":" in addr else socket.AF_INET
    s = socket.socket(fam, socket.SOCK_DGRAM)
    s.bind((addr, int(port)))
    s.settimeout(int(timeout_ms) / 1000)
    open(ready, "w").close()
    try:
        _, src = s.recvfrom(2048)
        print(src[0])
    except socket.timeout:
        print("timeout")


def send(src, dst, port):
    fam = socket.AF_INET6 if ":" in dst else socket.AF_INET
    s = socket.socket(fam, socket.SOCK_DGRAM)
    s.bind((src, 0))
    s.sendto(b"guard", (dst, int(port)))


def raw(iface, frame):
    s = socket.socket(socket.AF_PACKET, socket.SOCK_RAW)
    s.bind((iface, 0))
    s.send(frame)


def arp(iface, src_mac, sha, spa, tpa):
    eth = b"\xff" * 6 + mac_bytes(src_mac) + struct.pack("!H", 0x0806)
    body = struct.pack("!HHBBH", 1, 0x0800, 6, 4, 1) + mac_bytes(sha) + socket.inet_aton(spa) + b"\0" * 6 + \
        socket.inet_aton(tpa)
    raw(iface, eth + body)


def checksum(data):
    if len(data) % 2:
        data += b"\0"
    total = sum(struct.unpack("!%dH" % (len(data) // 2), data))
    while total >> 16:
        total = (total & 0xffff) + (total >> 16)
    return ~total & 0xffff


def na(iface, src_mac, src, dst, target):
    s6, d6, t6 = (ipaddress.IPv6Address(a).packed for a in (src, dst, target))
    # type 136, override flag, the target, its link-layer address option
    icmp = struct.pack("!BBHI", 136, 0, 0, 0x20000000) + t6 + struct.pack("!BB", 2, 1) + mac_bytes(src_mac)
    pseudo = s6 + d6 + struct.pack("!IxxxB", len(icmp), 58)
    icmp = icmp[:2] + struct.pack("!H", checksum(pseudo + icmp)) + icmp[4:]
    ip6 = struct.pack("!IHBB", 6 << 28, len(icmp), 58, 255) + s6 + d6
    dst_mac = b"\x33\x33\x00\x00\x00\x01"
    raw(iface, dst_mac + mac_bytes(src_mac) + struct.pack("!H", 0x86dd) + ip6 + icmp)


if __name__ == "__main__":
    cmds = {"recv": (recv, 4), "send": (send, 3), "arp": (arp, 5), "na": (na, 5)}
    if len(sys.argv) < 2 or sys.argv[1] not in cmds or len(sys.argv) - 2 != cmds[sys.argv[1]][1]:
        sys.stderr.write(__doc__)
        sys.exit(2)
    cmds[sys.argv[1]][0](*sys.argv[2:])
    sys.stdout.flush()
    os._exit(0)
