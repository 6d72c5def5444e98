#!/usr/bin/python3
# SPDX-License-Identifier: GPL-2.0-or-later
"""Live consoles benchmark (issue 13, item 6). Prints figures beside their targets;
asserts nothing about timing. Root only (exit 77 otherwise).

  latency    keystroke to echo through relay -> agent -> app -> agent -> relay on
             loopback: this script is the relay (an in-process wss:// server with the
             test CA's certificate, one connection); the app is busybox `cat`. N
             keystrokes, each a text frame {"type":"line","line":"k<i>"}, timed until
             the line "k<i>" comes back as an output frame: p50/p99. Peer (the direct
             local path, no agent, no WebSocket): the same line written to the app's
             monitor socket (L<line>, as the agent does) and timed until the echo is
             in the app's ring files (read on the monitor's O notification). Target:
             p99 added by the agent (agent p99 - peer p99) <= 2 ms.
  throughput one app prints M MB of 128-byte lines (`yes | head -c`) to one open
             console whose relay end is relay-sink (C, this folder: counts frames
             without parsing them); MB/s of line text delivered to the relay (from
             the first to the last frame), frames dropped, and the agent's CPU
             (utime+stime of nodeagentd over the interval / wall time). Target
             >= 50 MB/s. Peers in the same run: `yes` through a pipe to a counting
             reader (the bound without any agent), and the Python relay.

  bench_console.py [--keys N] [--mb M] [--quick]
"""
import argparse
import base64
import hashlib
import json
import os
import socket
import ssl
import struct
import subprocess
import sys
import time
import uuid

HERE = os.path.dirname(os.path.abspath(__file__))
SRC = os.path.dirname(os.path.dirname(HERE))
os.environ.setdefault("NA_SOURCE_DIR", SRC)
os.environ.setdefault("NA_BUILD_DIR", os.path.join(SRC, "build"))
sys.path.insert(0, os.path.join(SRC, "tests", "harness"))
sys.path.insert(0, os.path.join(SRC, "tests", "agent", "kinds", "apps"))
sys.path.insert(0, os.path.join(SRC, "bench", "app"))
from nodeagent_harness import Setup, private_netns, wait_for  # noqa: E402
from test_apps import app_job, apps_conf, deploy_params, ok  # noqa: E402
from bench_app import read_ring  # noqa: E402

GUID = "258EAFA5-E914-47DA-95CA-C5AB0DC85B11"


def pct(v, p):
    v = sorted(v)
    return v[min(len(v) - 1, int(round(p / 100 * (len(v) - 1))))]


class Relay:
    """One wss:// connection, server side, written out (RFC 6455)."""

    def __init__(self, certs):
        self.ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        self.ctx.load_cert_chain(f"{certs}/server.pem", f"{certs}/server.key")
        self.lsock = socket.socket()
        self.lsock.bind(("127.0.0.1", 0))
        self.lsock.listen(4)
        self.url = f"wss://127.0.0.1:{self.lsock.getsockname()[1]}/relay/bench"

    def accept(self, timeout=30):
        self.lsock.settimeout(timeout)
        raw, _ = self.lsock.accept()
        raw.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.c = self.ctx.wrap_socket(raw, server_side=True)
        self.c.settimeout(60)
        self.f = self.c.makefile("rb", buffering=1 << 20)
        head = b""
        while not head.endswith(b"\r\n\r\n"):
            head += self.f.readline()
        key = [ln.split(b":", 1)[1].strip() for ln in head.split(b"\r\n") if ln.lower().startswith(b"sec-websocket-key")][0]
        acc = base64.b64encode(hashlib.sha1(key + GUID.encode()).digest())
        self.c.sendall(b"HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
                       b"Sec-WebSocket-Accept: " + acc + b"\r\n\r\n")

    def send_text(self, text):
        p = text.encode()
        head = struct.pack("!BB", 0x81, len(p)) if len(p) < 126 else struct.pack("!BBH", 0x81, 126, len(p))
        self.c.sendall(head + p)

    def frame(self):
        b0, b1 = self.f.read(2)
        n = b1 & 127
        if n == 126:
            n = struct.unpack("!H", self.f.read(2))[0]
        elif n == 127:
            n = struct.unpack("!Q", self.f.read(8))[0]
        mask = self.f.read(4) if b1 & 0x80 else None
        data = self.f.read(n)
        if mask and data:
            m = (mask * (n // 4 + 1))[:n]
            data = (int.from_bytes(data, "big") ^ int.from_bytes(m, "big")).to_bytes(n, "big")
        if b0 & 15 == 9:
            self.c.sendall(struct.pack("!BB", 0x8a, len(data)) + data)
        return b0 & 15, data


def cpu_sec(pid):
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def open_console(s, relay, app):
    sid = str(uuid.uuid4())
    jid = s.controller.enqueue("console.open", {"sessionId": sid, "url": relay.url, "token": "bench", "mode": "app"},
                               target={"type": "app", "id": app})
    relay.accept()
    ok(s.controller.wait_results([jid], 30)[jid]["results"][0])
    return sid


def deploy(s, command, name):
    app = str(uuid.uuid4())
    ok(app_job(s, "app.deploy", app, deploy_params(name=name, hostname=name,
                                                    template={"command": command, "startedPattern": None}), 120))
    ok(app_job(s, "app.power", app, {"action": "start"}))
    wait_for(lambda: ok(app_job(s, "app.status", app))["state"] == "running", 15, "running")
    return app


def bench_latency(s, n):
    app = deploy(s, ["/bin/cat"], "latency")
    relay = Relay(s.controller.certs)
    open_console(s, relay, app)
    times = []
    for i in range(n + 20):
        want = f"k{i}"
        t0 = time.perf_counter()
        relay.send_text(json.dumps({"type": "line", "line": want}))
        while True:
            op, data = relay.frame()
            if op == 1 and json.loads(data).get("text") == want:
                break
        if i >= 20:  # warm-up
            times.append((time.perf_counter() - t0) * 1000)
    # Peer: the monitor's socket directly, the echo read from the ring on its O notification.
    appdir = os.path.join(s.agent.state_dir, "apps", "apps", app)
    m = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    m.connect(os.path.join(appdir, "monitor.sock"))
    peer = []
    for i in range(n + 20):
        want = f"p{i}".encode()
        t0 = time.perf_counter()
        m.send(b"L" + want)
        found = False
        while not found:
            msg = m.recv(512)
            if msg[:1] == b"O":
                found = any(r[3] == want for r in read_ring(appdir)[-8:])
        if i >= 20:
            peer.append((time.perf_counter() - t0) * 1000)
    m.close()
    ok(app_job(s, "app.delete", app))
    return times, peer


def bench_throughput(s, mb, python_relay=False):
    """One app prints mb MiB of 128-byte lines to one open console. The relay end is
    relay-sink (C) unless python_relay: (bytes of line text, frames, first-to-last s,
    agent CPU s, wall s, the session's status row)."""
    line = "x" * 127  # 128-byte lines: a MiB is a whole number of them, so "done" stays a line of its own
    cmd = ["/bin/sh", "-c", f'echo ready; while read l; do [ "$l" = go ] && yes {line} | head -c {mb * 1048576}; '
           'echo done; done']
    app = deploy(s, cmd, "throughput")
    pid = s.agent.proc.pid
    tail_x = line + '"}'
    go = json.dumps({"type": "line", "line": "go"})
    if not python_relay:
        sink = subprocess.Popen([os.path.join(os.environ["NA_BUILD_DIR"], "bench", "console", "relay-sink"),
                                 s.controller.certs, go, tail_x, '"text":"done"}'], stdout=subprocess.PIPE, text=True)
        port = int(sink.stdout.readline().split()[1])
        sid = str(uuid.uuid4())
        c0, t0 = cpu_sec(pid), time.perf_counter()
        jid = s.controller.enqueue("console.open", {"sessionId": sid, "url": f"wss://127.0.0.1:{port}/relay/bench",
                                                    "token": "bench", "mode": "app"}, target={"type": "app", "id": app})
        res = json.loads(sink.stdout.readline())
        if os.environ.get("NA_BENCH_DEBUG"):
            print(res)
        t1, c1 = time.perf_counter(), cpu_sec(pid)
        sink.wait(10)
        ok(s.controller.wait_results([jid], 30)[jid]["results"][0])
        st = ([c for c in s.agent.status()["consoles"] if c["sessionId"] == sid] or [{"dropped": 0}])[0]
        got, frames, dt = res["frames"] * (len(line) + 1), res["frames"], res["firstToLastSec"]
    else:
        relay = Relay(s.controller.certs)
        sid = open_console(s, relay, app)
        relay.send_text(go)
        c0, t0 = cpu_sec(pid), time.perf_counter()
        got = frames = 0
        t_first = None
        tail_b = tail_x.encode()
        while True:  # lean: no JSON parsing per frame
            op, data = relay.frame()
            if op != 1:
                continue
            if data.endswith(tail_b):
                if t_first is None:
                    t_first = time.perf_counter()
                got += len(line) + 1
                frames += 1
            elif data.endswith(b'"text":"done"}'):
                break
        t1, c1 = time.perf_counter(), cpu_sec(pid)
        st = [c for c in s.agent.status()["consoles"] if c["sessionId"] == sid][0]
        dt = t1 - (t_first or t0)
    ok(app_job(s, "app.delete", app))
    return got, frames, dt, c1 - c0, t1 - t0, st


def peer_yes(mb):
    """The peer for throughput: the same lines through a pipe into a reader that only
    counts bytes (what the kernel and `yes` alone manage here): MB/s."""
    t0 = time.perf_counter()
    yes = subprocess.Popen(["/usr/bin/yes", "x" * 127], stdout=subprocess.PIPE)
    left = mb * 1048576
    while left > 0:
        b = yes.stdout.read(min(left, 1 << 20))
        left -= len(b)
    yes.kill()
    yes.wait()
    return mb / (time.perf_counter() - t0)


def bench_conf(s):
    """The apps' configuration, with an app's output allowed at the highest rate
    ([apps] output_lines_per_sec; the default 1000 lines a second would make this
    measure the limit, not the console path)."""
    conf = apps_conf(s)
    conf["apps"]["output_lines_per_sec"] = "1000000"
    return conf


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--keys", type=int, default=1000)
    ap.add_argument("--mb", type=int, default=200)
    ap.add_argument("--quick", action="store_true")
    a = ap.parse_args()
    if a.quick:
        a.keys, a.mb = 50, 5
    if os.geteuid() != 0:
        print("bench-console: needs root (apps)")
        return 77
    private_netns()
    s = Setup(agent_conf=bench_conf)
    try:
        times, peer = bench_latency(s, a.keys)
        p50, p99, q50, q99 = pct(times, 50), pct(times, 99), pct(peer, 50), pct(peer, 99)
        print(f"latency over {a.keys} keystrokes (relay -> agent -> app -> agent -> relay, wss:// on loopback):")
        print(f"  through the agent   p50 {p50:.3f} ms   p99 {p99:.3f} ms")
        print(f"  peer: monitor direct p50 {q50:.3f} ms   p99 {q99:.3f} ms")
        print(f"  added by the agent  p50 {p50 - q50:.3f} ms   p99 {p99 - q99:.3f} ms   "
              f"(target p99 <= 2 ms: {'met' if p99 - q99 <= 2 else 'NOT met'})")
        got, frames, dt, cpu, wall, st = bench_throughput(s, a.mb)
        mbps = got / 1048576 / dt if dt > 0 else 0
        print(f"throughput: {a.mb} MB of 128-byte lines from one app to one console, relay end in C (relay-sink)")
        print(f"  delivered {got / 1048576:.1f} MB in {frames} frames over {dt:.2f} s: {mbps:.1f} MB/s "
              f"(target >= 50 MB/s: {'met' if mbps >= 50 else 'NOT met'}); dropped {st['dropped']} frame(s)")
        print(f"  agent CPU {cpu:.2f} s over {wall:.2f} s: {100 * cpu / wall:.0f} % of one core")
        print(f"  peer: the same lines from yes through a pipe to a counting reader: {peer_yes(a.mb):.0f} MB/s")
        small = max(1, a.mb // 20)
        got, frames, dt, cpu, wall, st = bench_throughput(s, small, python_relay=True)
        print(f"  peer: {small} MB to the Python relay (one frame read per line): "
              f"{got / 1048576 / dt if dt > 0 else 0:.1f} MB/s delivered, {st['dropped']} dropped")
    finally:
        s.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
