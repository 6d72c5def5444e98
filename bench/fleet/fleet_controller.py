#!/usr/bin/python3
# SPDX-License-Identifier: GPL-2.0-or-later
"""A central API for many nodes at once (bench/fleet, issue 23 item 2): the agent side
of docs/agent-api.md for any node id, with a queue, a long poll and reports per node,
and nothing else. Python's standard library only; one thread per connection. It runs in
the benchmark's process (bench_fleet.py), which reads its counters directly.

It answers hello with the contract's example settings (2.2), exchange included, and
counts every request by path kind with its time, so the benchmark can say what a
central API pays per node. go_down() closes the listening socket and every connection
(a central API that is gone: connections refused), come_back() opens it again.
"""
import json
import socket
import ssl
import threading
import time
import uuid
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import parse_qs, urlparse

SETTINGS = {"pollWaitSec": 30, "maxJobs": 8, "leaseSec": 60, "reportIntervalSec": 15, "metricsIntervalSec": 10,
            "exchange": True}


def now_iso(t=None):
    t = time.time() if t is None else t
    return time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(t)) + ".%03dZ" % int((t % 1) * 1000)


class Node:
    def __init__(self):
        self.cond = threading.Condition()
        self.queue = []        # job objects waiting
        self.jobs = {}         # id -> job object (offered or done)
        self.results = {}      # id -> (time, result)
        self.hellos = []       # times
        self.ack_seq = 0


class Fleet:
    def __init__(self, settings=None):
        self.settings = dict(SETTINGS, **(settings or {}))
        self.nodes = {}
        self.lock = threading.Lock()
        self.requests = []     # (time, kind, status)
        self.req_lock = threading.Lock()

    def node(self, nid):
        with self.lock:
            n = self.nodes.get(nid)
            if not n:
                n = self.nodes[nid] = Node()
            return n

    def enqueue(self, nid, kind, params=None, timeout=600):
        n = self.node(nid)
        jid = str(uuid.uuid4())
        job = {"id": jid, "kind": kind, "attempt": 1, "target": {"type": "node", "id": nid},
               "params": params or {}, "createdAt": now_iso(), "timeoutSec": timeout}
        with n.cond:
            n.jobs[jid] = job
            n.queue.append(jid)
            n.cond.notify_all()
        return jid

    def record(self, kind, status):
        with self.req_lock:
            self.requests.append((time.time(), kind, status))

    def take_results(self, n, items):
        taken = []
        with n.cond:
            for r in items:
                jid = r.get("jobId")
                if jid in n.jobs:
                    n.results[jid] = (time.time(), r)
                    taken.append(jid)
        return taken

    def wait_jobs(self, n, wait, mx, alive):
        deadline = time.time() + wait
        with n.cond:
            while True:
                if mx > 0 and n.queue:
                    out = []
                    while n.queue and len(out) < mx:
                        job = dict(n.jobs[n.queue.pop(0)], leaseExpiresAt=now_iso(time.time() + 60))
                        out.append(job)
                    return out
                left = deadline - time.time()
                if left <= 0 or not alive():
                    return []
                n.cond.wait(min(left, 5))


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, *a):
        pass

    def send_json(self, status, data):
        body = json.dumps({"success": status < 400, "message": "OK" if status < 400 else "error",
                           "data": data}).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def do_GET(self):
        self.handle_any()

    def do_POST(self):
        self.handle_any()

    def handle_any(self):
        fleet = self.server.fleet
        length = int(self.headers.get("Content-Length") or 0)
        body = self.rfile.read(length) if length else b""
        u = urlparse(self.path)
        seg = [s for s in u.path.split("/") if s]
        if seg[:2] == ["agent", "v1"]:
            seg = seg[2:]
        q = parse_qs(u.query)
        payload = json.loads(body) if body else None
        kind = seg[2] if len(seg) == 3 else "?"
        if len(seg) == 3 and seg[0] == "nodes":
            n = fleet.node(seg[1])
            if kind == "hello":
                with n.cond:
                    n.hellos.append(time.time())
                fleet.record("hello", 200)
                return self.send_json(200, fleet.settings)
            if kind == "reports":
                with n.cond:
                    n.ack_seq = max(n.ack_seq, int(payload.get("seq", 0)))
                fleet.record("reports", 200)
                return self.send_json(200, {"ackSeq": n.ack_seq})
            wait = int(q.get("wait", ["0"])[0])
            mx = int(q.get("max", ["1"])[0])
            alive = lambda: not self.server.down  # noqa: E731
            if kind == "jobs":
                fleet.record("jobs", 200)
                return self.send_json(200, fleet.wait_jobs(n, wait, mx, alive))
            if kind == "exchange":
                taken = fleet.take_results(n, (payload or {}).get("results", []))
                leases = [{"jobId": p["jobId"], "leaseExpiresAt": now_iso(time.time() + 60)}
                          for p in (payload or {}).get("progress", [])]
                fleet.record("exchange", 200)
                jobs = fleet.wait_jobs(n, wait, mx, alive)
                return self.send_json(200, {"taken": taken, "lost": [], "leases": leases, "jobs": jobs})
        if len(seg) == 3 and seg[0] == "jobs":
            nid = None
            with fleet.lock:
                for k, n in fleet.nodes.items():
                    if seg[1] in n.jobs:
                        nid = k
                        break
            if nid is None:
                fleet.record(kind, 404)
                return self.send_json(404, {"_errors": ["Job not found"]})
            n = fleet.node(nid)
            if kind == "result":
                fleet.take_results(n, [dict(payload, jobId=seg[1])])
                fleet.record("result", 200)
                return self.send_json(200, {})
            fleet.record("progress", 200)
            return self.send_json(200, {"leaseExpiresAt": now_iso(time.time() + 60)})
        fleet.record("other", 404)
        self.send_json(404, {})


class Server(ThreadingHTTPServer):
    daemon_threads = True
    allow_reuse_address = True
    request_queue_size = 1024

    def __init__(self, addr, ctx, fleet):
        self.ctx, self.fleet, self.down = ctx, fleet, False
        self.live = set()
        self.live_lock = threading.Lock()
        super().__init__(addr, Handler)

    def finish_request(self, request, client_address):
        request.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        try:
            request.settimeout(30)
            request = self.ctx.wrap_socket(request, server_side=True)
            request.settimeout(None)
        except (ssl.SSLError, OSError):
            return
        with self.live_lock:
            self.live.add(request)
        try:
            super().finish_request(request, client_address)
        except (OSError, ssl.SSLError, ValueError):
            pass
        finally:
            with self.live_lock:
                self.live.discard(request)


class Controller:
    """The fleet's central API on 127.0.0.1:port (TLS with certs/server.pem)."""

    def __init__(self, certs, port, settings=None):
        self.fleet = Fleet(settings)
        self.ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        self.ctx.load_cert_chain(f"{certs}/server.pem", f"{certs}/server.key")
        self.port = port
        self.url = f"https://127.0.0.1:{port}/agent/v1"
        self.srv = None
        self.come_back()

    def come_back(self):
        self.srv = Server(("127.0.0.1", self.port), self.ctx, self.fleet)
        threading.Thread(target=self.srv.serve_forever, kwargs={"poll_interval": 0.1}, daemon=True).start()

    def go_down(self):
        srv = self.srv
        srv.down = True
        srv.shutdown()
        srv.server_close()
        with srv.live_lock:
            for conn in list(srv.live):
                try:
                    conn.shutdown(socket.SHUT_RDWR)
                except OSError:
                    pass
        with self.fleet.lock:
            nodes = list(self.fleet.nodes.values())
        for n in nodes:  # the long polls waiting end now
            with n.cond:
                n.cond.notify_all()
