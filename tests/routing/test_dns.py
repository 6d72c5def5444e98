#!/usr/bin/python3
# SPDX-License-Identifier: GPL-2.0-or-later
"""Issue 12 item 4: the DNS verifier (routing/app-dns*.c) through dns-tool against a
real dnsmasq on a loopback port serving a good CNAME, a chain, a wrong CNAME, apex
A/AAAA equal and different, NXDOMAIN, a name without address, 40 addresses (TCP); a
tiny UDP server for what dnsmasq will not serve (loops, long and unfollowed chains,
SERVFAIL, a wrong answer ID); a resolver that does not answer (the bounded timeout);
the system's resolv.conf in a private network namespace. See routes_common.py for how
to run a case.
"""
import json
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import threading

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from routes_common import DNS_TOOL, DNSMASQ, Skip, need, needs, run_cases  # noqa: E402
from nodeagent_harness import check, free_port, wait_for  # noqa: E402


def dns_tool(*args):
    p = subprocess.run([DNS_TOOL, *args], capture_output=True, text=True, timeout=30)
    check(p.returncode == 0, f"dns-tool {args}: {p.returncode} {p.stderr}")
    return json.loads(p.stdout)


class Dnsmasq:
    """dnsmasq on 127.0.0.1:<high port>, local data only (NXDOMAIN for the rest)."""

    def __init__(self, records, port=None):
        need(DNSMASQ)
        self.port = port or free_port()
        args = [DNSMASQ, "--no-resolv", "--no-hosts", "--no-daemon", "--user=root", "--pid-file=",
                "--bind-interfaces", "--listen-address=127.0.0.1", f"--port={self.port}",
                "--local=/example.com/example.net/apps.example.com/", "--log-facility=-"] + records
        self.log = tempfile.TemporaryFile()
        self.proc = subprocess.Popen(args, stdout=subprocess.DEVNULL, stderr=self.log)
        wait_for(self._up, 5, "dnsmasq")

    def _up(self):
        if self.proc.poll() is not None:
            self.log.seek(0)
            raise AssertionError(f"dnsmasq exited: {self.log.read().decode()}")
        got = dns_tool("-r", f"127.0.0.1:{self.port}", "-t", "300", "probe.example.com", "x.example.com")
        return got["message"] == "NXDOMAIN"

    def close(self):
        self.proc.kill()
        self.proc.wait()
        self.log.close()


T1, T2 = "app1.apps.example.com", "app2.apps.example.com"
DNSMASQ_RECORDS = [
    f"--host-record={T1},203.0.113.5",
    f"--host-record={T2},203.0.113.6,2001:db8::6",
    f"--cname=good.example.com,{T1}",
    "--cname=chain.example.com,mid.example.net", f"--cname=mid.example.net,{T1}",
    "--host-record=x.example.net,192.0.2.9",
    "--cname=wrong.example.com,x.example.net",
    "--cname=wrong2.example.com,mid2.example.net", "--cname=mid2.example.net,x.example.net",
    "--host-record=apex-ok.example.com,203.0.113.5",
    "--host-record=apex-bad.example.com,192.0.2.1",
    "--host-record=apex6-ok.example.com,203.0.113.6,2001:db8::6",
    "--host-record=apex6-half.example.com,203.0.113.6",
    "--host-record=apex-pub.example.com,198.51.100.7",
    "--txt-record=txt.example.com,hello",
] + [f"--host-record={n},10.0.0.{i}" for i in range(1, 41) for n in ("many.example.com", "many.apps.example.com")] \
  + [f"--host-record=many39.apps.example.com,10.0.0.{i}" for i in range(1, 40)]

# (hostname, target, extra dns-tool args, verified, message)
DNSMASQ_CASES = [
    ("good.example.com", T1, [], True, f"CNAME points at {T1}"),
    ("GOOD.Example.COM.", T1.upper() + ".", [], True, f"CNAME points at {T1}"),
    ("chain.example.com", T1, [], True, f"CNAME chain chain.example.com -> mid.example.net -> {T1}"),
    ("wrong.example.com", T1, [], False, f"CNAME points at x.example.net, expected {T1}"),
    ("wrong2.example.com", T1, [], False,
     f"CNAME chain wrong2.example.com -> mid2.example.net -> x.example.net ends at x.example.net, expected {T1}"),
    ("good.example.com", T2, [], False, f"CNAME points at {T1}, expected {T2}"),
    ("apex-ok.example.com", T1, [], True, f"A records 203.0.113.5 equal {T1}'s"),
    ("apex-bad.example.com", T1, [], False, f"A records 192.0.2.1 differ from {T1}'s 203.0.113.5"),
    ("apex6-ok.example.com", T2, [], True, f"A/AAAA records 203.0.113.6, 2001:db8::6 equal {T2}'s"),
    ("apex6-half.example.com", T2, [], False, f"A records 203.0.113.6 differ from {T2}'s 203.0.113.6, 2001:db8::6"),
    ("apex-pub.example.com", T1, [], False, f"A records 198.51.100.7 differ from {T1}'s 203.0.113.5"),
    ("apex-pub.example.com", T1, ["-p", "198.51.100.7", "-p", "2001:db8::1"], True,
     "A records 198.51.100.7: this node's public address"),
    ("apex-bad.example.com", T1, ["-p", "198.51.100.7"], False, f"A records 192.0.2.1 differ from {T1}'s 203.0.113.5"),
    ("apex-ok.example.com", "app9.apps.example.com", [], False,
     "A records 203.0.113.5 found, but app9.apps.example.com has no A or AAAA record"),
    ("nothere.example.com", T1, [], False, "NXDOMAIN"),
    ("txt.example.com", T1, [], False, "no CNAME, A or AAAA record"),
    # 40 addresses: more than a 512-byte UDP answer holds, so the answers come over TCP
    ("many.example.com", "many.apps.example.com", [], True, None),
    ("many.example.com", "many39.apps.example.com", [], False, None),
]


def dns_dnsmasq_answers():
    d = Dnsmasq(DNSMASQ_RECORDS)
    try:
        for host, target, extra, verified, message in DNSMASQ_CASES:
            got = dns_tool("-r", f"127.0.0.1:{d.port}", "-t", "3000", *extra, host, target)
            check(got["verified"] is verified and not got["transient"], f"{host} -> {target}: {got}")
            if message:
                check(got["message"] == message, f"{host} -> {target}: {got['message']!r} != {message!r}")
        got = dns_tool("-r", f"127.0.0.1:{d.port}", "many.example.com", "many.apps.example.com")
        check(got["message"].startswith("A records 10.0.0.1, 10.0.0.2, 10.0.0.3,"), got["message"])
    finally:
        d.close()


def dns_timeout():
    """A resolver that does not answer (a closed port): the bounded timeout, said so."""
    port = free_port()  # nothing listens there: ICMP refusals, which count as no answer
    got = dns_tool("-r", f"127.0.0.1:{port}", "-t", "1000", "good.example.com", T1)
    check(got == {"verified": False, "transient": True, "message": "no answer from resolver (timeout after 1 s)",
                  "ms": got["ms"]}, got)
    check(900 <= got["ms"] <= 2000, f"bounded by the timeout: {got['ms']} ms")
    # A silent one (a UDP socket that never answers): the same.
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        s.bind(("127.0.0.1", 0))
        got = dns_tool("-r", f"127.0.0.1:{s.getsockname()[1]}", "-t", "1500", "good.example.com", T1)
    check(got["message"] == "no answer from resolver (timeout after 1.5 s)" and got["transient"], got)
    check(1400 <= got["ms"] <= 2500, f"bounded by the timeout: {got['ms']} ms")


def dns_bad_input():
    for args, field in [(["bad..example.com", T1], "hostname"), (["a b.example.com", T1], "hostname"),
                        (["ok.example.com", "*.apps.example.com"], "target"), (["x" * 64 + ".com", T1], "hostname")]:
        p = subprocess.run([DNS_TOOL, "-r", "127.0.0.1:9", *args], capture_output=True, text=True)
        check(p.returncode == 1 and "VALIDATION_ERROR" in p.stderr and f'"{field}"' in p.stderr, f"{args}: {p.stderr}")
    p = subprocess.run([DNS_TOOL, "-r", "127.0.0.1:99999", "a.example.com", T1], capture_output=True, text=True)
    check(p.returncode == 1 and "resolver" in p.stderr, p.stderr)


@needs("root", "netns")
def dns_system_resolver():
    """No resolver configured: the nameservers of resolv.conf, in turn. Run in a private
    network namespace, where dnsmasq can take 127.0.0.1:53 (resolv.conf has no port)."""
    need(DNSMASQ)
    if os.geteuid() != 0:
        raise Skip("needs root")
    p = subprocess.run(["/usr/bin/unshare", "-n", "/usr/bin/python3", "-B", os.path.abspath(__file__),
                        "--inner-system-resolver"], capture_output=True, text=True, timeout=60)
    if p.returncode == 77:
        raise Skip(p.stdout.strip())
    check(p.returncode == 0, f"inside the namespace: {p.returncode} {p.stdout} {p.stderr}")


def inner_system_resolver():
    if subprocess.run(["/sbin/ip", "link", "set", "lo", "up"]).returncode != 0:
        print("no private network namespace")
        return 77
    d = Dnsmasq(DNSMASQ_RECORDS, port=53)
    tmp = tempfile.mkdtemp(prefix="na-resolv-")
    try:
        conf = os.path.join(tmp, "resolv.conf")
        with open(conf, "w") as f:
            f.write("# test\nsearch example.com\nnameserver 127.0.0.1\noptions ndots:1\n")
        got = dns_tool("-c", conf, "good.example.com", T1)
        check(got["verified"] and got["message"] == f"CNAME points at {T1}", got)
        # The first nameserver does not answer (nothing on 127.0.0.9:53): the next one
        # is asked after that try's second.
        with open(conf, "w") as f:
            f.write("nameserver 127.0.0.9\nnameserver 127.0.0.1\n")
        got = dns_tool("-c", conf, "-t", "3000", "wrong.example.com", T1)
        check(got["message"] == f"CNAME points at x.example.net, expected {T1}", got)
        check(900 <= got["ms"] <= 2500, f"one try of the first server, then the second: {got['ms']} ms")
        # None answers: the timeout.
        with open(conf, "w") as f:
            f.write("nameserver 127.0.0.9\n")
        got = dns_tool("-c", conf, "-t", "1000", "good.example.com", T1)
        check(got["transient"] and got["message"] == "no answer from resolver (timeout after 1 s)", got)
    finally:
        d.close()
        shutil.rmtree(tmp, ignore_errors=True)
    return 0


class TinyDns:
    """A small UDP DNS server for what dnsmasq will not serve: CNAME loops, a chain
    longer than 8 links, a resolver that answers one record per query (no chain
    following), SERVFAIL, and an answer with a wrong ID before the right one."""

    TABLE = {
        "loop1.example.org": [("CNAME", "loop2.example.org")],
        "loop2.example.org": [("CNAME", "loop1.example.org")],
        "step1.example.org": [("CNAME", "step2.example.org")],
        "step2.example.org": [("CNAME", "app.apps.example.org")],
        "app.apps.example.org": [("A", "203.0.113.9")],
        "badid.example.org": [("A", "203.0.113.9")],
        **{f"long{i}.example.org": [("CNAME", f"long{i + 1}.example.org")] for i in range(10)},
    }

    def __init__(self):
        import struct
        self.struct = struct
        self.sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        self.sock.bind(("127.0.0.1", 0))
        self.port = self.sock.getsockname()[1]
        threading.Thread(target=self._serve, daemon=True).start()

    @staticmethod
    def _name(n):
        return b"".join(bytes([len(label)]) + label.encode() for label in n.split(".")) + b"\0"

    def _serve(self):
        st = self.struct
        while True:
            try:
                q, peer = self.sock.recvfrom(512)
            except OSError:
                return
            qid = st.unpack(">H", q[:2])[0]
            off, labels = 12, []
            while q[off]:
                labels.append(q[off + 1:off + 1 + q[off]].decode())
                off += 1 + q[off]
            qname, qtype = ".".join(labels).lower(), st.unpack(">H", q[off + 1:off + 3])[0]
            question = q[12:off + 5]
            rcode, answers = 0, []
            if qname == "servfail.example.org":
                rcode = 2
            elif qname not in self.TABLE:
                rcode = 3
            else:
                for kind, value in self.TABLE[qname]:
                    if kind == "CNAME":
                        answers.append(self._name(qname) + st.pack(">HHIH", 5, 1, 60, len(self._name(value)))
                                       + self._name(value))
                    elif kind == "A" and qtype == 1:
                        answers.append(self._name(qname) + st.pack(">HHIH", 1, 1, 60, 4)
                                       + socket.inet_aton(value))
            head = st.pack(">HHHHHH", qid, 0x8180 | rcode, 1, len(answers), 0, 0)
            if qname == "badid.example.org":
                self.sock.sendto(st.pack(">HHHHHH", qid ^ 1, 0x8180, 1, 0, 0, 0) + question, peer)
            self.sock.sendto(head + question + b"".join(answers), peer)

    def close(self):
        self.sock.close()


def dns_odd_resolvers():
    t = TinyDns()
    r = ["-r", f"127.0.0.1:{t.port}", "-t", "2000"]
    try:
        cases = [
            ("loop1.example.org", "app.apps.example.org", False,
             "CNAME loop: loop1.example.org -> loop2.example.org -> loop1.example.org"),
            ("long0.example.org", "app.apps.example.org", False, "CNAME chain longer than 8 links from long0.example.org"),
            ("long0.example.org", "long8.example.org", True, None),
            ("step1.example.org", "app.apps.example.org", True,
             "CNAME chain step1.example.org -> step2.example.org -> app.apps.example.org"),
            ("badid.example.org", "app.apps.example.org", True, "A records 203.0.113.9 equal app.apps.example.org's"),
        ]
        for host, target, verified, message in cases:
            got = dns_tool(*r, host, target)
            check(got["verified"] is verified and not got["transient"], f"{host}: {got}")
            if message:
                check(got["message"] == message, f"{host}: {got['message']!r}")
        got = dns_tool(*r, "servfail.example.org", "app.apps.example.org")
        check(got["transient"] and got["message"] == "resolver answered SERVFAIL for servfail.example.org", got)
    finally:
        t.close()


CASES = {f.__name__: f for f in [
    dns_dnsmasq_answers, dns_timeout, dns_bad_input, dns_odd_resolvers, dns_system_resolver,
]}

if __name__ == "__main__":
    sys.exit(run_cases(CASES, {"--inner-system-resolver": inner_system_resolver}))
