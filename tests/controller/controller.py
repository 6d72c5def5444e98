#!/usr/bin/python3
# SPDX-License-Identifier: GPL-2.0-or-later
"""The central API's side of the agent contract (docs/agent-api.md), for
nodeagent's own tests, demo and benchmarks. Python 3 standard library only.

Agent side (HTTPS, --port):   POST /nodes/{id}/hello, GET /nodes/{id}/jobs,
                              POST /jobs/{id}/progress, POST /jobs/{id}/result,
                              POST /nodes/{id}/reports, POST /nodes/{id}/exchange (2.3;
                              offered in the settings with --exchange, or when the
                              environment says NA_TEST_EXCHANGE=1)
Admin side (plain HTTP on 127.0.0.1, --admin-port), JSON in and out:
  POST /admin/jobs            {kind, target:{type,id}, params?, timeoutSec?, id?} or a list -> {ids}
  POST /admin/raw-jobs        [anything]: offered verbatim in the next poll answer
  POST /admin/raw-answer      {body: "text", status?}: the next poll answers with this
  GET  /admin/jobs/{id}       one job with its progress and results (offeredAt: when it
                              was last offered, progressAt: when each progress came,
                              resultAt: when the result came; time.time())
  GET  /admin/state           jobs, results, reports, hellos, request counts
  GET  /admin/wait?ids=a,b&timeout=s   until every id has a result (or timeout)
  GET  /admin/requests        every agent request: [t, method, path, status]
  POST /admin/faults          {mode: 503|429|drop|slow|down|none, count?, seconds?, retryAfter?, delay?,
                              path?}: path (a substring) limits the fault to the agent requests
                              whose path holds it, e.g. "/result" (the others pass)
  POST /admin/tokens          {tokens:[...]}: the bearer tokens accepted
  POST /admin/settings        the Settings object hello answers with
  POST /admin/cancel/{id}     the next progress of that job answers 409 JOB_CANCELLED
  POST /admin/lose-lease/{id} the next progress answers 409 LEASE_LOST
  POST /admin/forget/{id}     the controller forgets the job: its result and progress answer
                              404 JOB_NOT_FOUND (lost in an exchange answer)
  POST /admin/reset           forget requests, results and reports; with {done: true}
                              also every report and every job that is done (soak runs)
  /admin/relay/...            the relay end of live consoles: see relay.py
Relay side (on the agent side's port): GET /relay/{sessionId}, a WebSocket upgrade.
"""
import argparse
import json
import os
import select
import socket
import ssl
import sys
import threading
import time
import uuid
from datetime import datetime, timezone
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import parse_qs, urlparse

from relay import RELAY  # the relay end of live consoles (tests/controller/relay.py)


def now_iso(t=None):
    t = time.time() if t is None else t
    return datetime.fromtimestamp(t, timezone.utc).strftime("%Y-%m-%dT%H:%M:%S.") + "%03dZ" % (int(t * 1000) % 1000)


class State:
    def __init__(self, args):
        self.lock = threading.Condition()
        self.node_id = args.node_id
        self.lease_sec = args.lease_sec
        self.tokens = set(args.token or [])
        self.settings = {"pollWaitSec": args.poll_wait, "leaseSec": args.lease_sec,
                         "reportIntervalSec": args.report_interval}
        if args.max_jobs:
            self.settings["maxJobs"] = args.max_jobs
        if args.exchange:
            self.settings["exchange"] = True
        self.refused = []     # [jobId, what, code]: results and progress answered 404/409
        self.jobs = {}        # id -> record
        self.queue = []       # ids waiting to be offered, oldest first
        self.raw_jobs = []    # offered verbatim
        self.raw_answer = None
        self.raw_texts = []   # job texts spliced verbatim into the next answer
        self.reports = []
        self.max_seq = 0
        self.hellos = []
        self.exchanges = []   # {at, wait, max, results, progress} per exchange request
        self.requests = []
        self.fault = {"mode": "none"}
        self.started = time.time()

    # faults -------------------------------------------------------------
    def take_fault(self, path=""):
        f = self.fault
        if f["mode"] == "none":
            return None
        if f.get("path") and f["path"] not in path:
            return None
        if "until" in f and time.time() > f["until"]:
            self.fault = {"mode": "none"}
            return None
        if "count" in f:
            if f["count"] <= 0:
                self.fault = {"mode": "none"}
                return None
            f["count"] -= 1
        return dict(f)

    # jobs ---------------------------------------------------------------
    def reap_leases(self):
        t = time.time()
        for j in self.jobs.values():
            if j["state"] == "leased" and j["leaseExpires"] < t:
                j["state"] = "queued"
                j["attempt"] += 1
                self.queue.append(j["id"])

    def offer(self, j):
        t = time.time()
        j["state"] = "leased"
        j["leaseExpires"] = t + self.lease_sec
        j["offers"] += 1
        j["offeredAt"] = t
        return {"id": j["id"], "kind": j["kind"], "attempt": j["attempt"], "target": j["target"],
                "params": j["params"], "createdAt": j["createdAt"], "leaseExpiresAt": now_iso(j["leaseExpires"]),
                "timeoutSec": j["timeoutSec"]}


STATE = None


class RawBody:
    """A poll answer sent verbatim (malformed-answer tests)."""
    def __init__(self, text):
        self.text = text


def envelope_ok(data, message="OK"):
    return {"success": True, "message": message, "data": data}


def envelope_err(code, message, details=None):
    return {"success": False, "type": "API", "code": code, "error": message, "details": details}


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server_version = "nodeagent-test-controller/1"

    def log_message(self, fmt, *args):
        pass

    def send_json(self, status, obj, headers=None):
        body = obj.text.encode() if isinstance(obj, RawBody) else json.dumps(obj).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        for k, v in (headers or {}).items():
            self.send_header(k, v)
        self.end_headers()
        self.wfile.write(body)

    def read_body(self):
        n = int(self.headers.get("Content-Length") or 0)
        return self.rfile.read(n) if n else b""

    def record(self, status):
        with STATE.lock:
            STATE.requests.append([round(time.time() - STATE.started, 3), self.command, urlparse(self.path).path, status])

    # -- agent side -------------------------------------------------------
    def agent(self):
        if self.command == "GET" and self.path.startswith("/relay/"):
            self.record(101)
            return RELAY.upgrade(self, self.path[len("/relay/"):].split("?")[0])
        body = self.read_body()
        with STATE.lock:
            fault = STATE.take_fault(urlparse(self.path).path)
        if fault:
            mode = fault["mode"]
            if mode == "drop":
                self.record(0)
                self.close_connection = True
                try:
                    self.connection.shutdown(socket.SHUT_RDWR)
                except OSError:
                    pass
                return
            if mode == "slow":
                time.sleep(float(fault.get("delay", 5)))
            elif mode in ("503", "429", "500", "502"):
                status = int(mode)
                headers = {}
                if "retryAfter" in fault:
                    headers["Retry-After"] = str(fault["retryAfter"])
                self.record(status)
                self.send_json(status, envelope_err("INTERNAL_ERROR", "Injected fault"), headers)
                return
        auth = self.headers.get("Authorization", "")
        if not auth.startswith("Bearer "):
            self.record(401)
            return self.send_json(401, envelope_err("AUTHENTICATION_ERROR", "Authentication required"))
        with STATE.lock:
            tokens = set(STATE.tokens)
        if tokens and auth[7:] not in tokens:
            self.record(401)
            return self.send_json(401, envelope_err("INVALID_API_KEY", "Invalid API key"))
        if self.headers.get("X-Node-Id") != STATE.node_id:
            self.record(403)
            return self.send_json(403, envelope_err("AUTHORIZATION_ERROR", "Insufficient permissions"))
        parts = urlparse(self.path)
        seg = [s for s in parts.path.split("/") if s]
        if seg[:2] == ["agent", "v1"]:
            seg = seg[2:]
        try:
            payload = json.loads(body) if body else None
        except ValueError:
            self.record(422)
            return self.send_json(422, envelope_err("VALIDATION_ERROR", "Validation error", {"_errors": ["body is not JSON"]}))
        answer = self.route(self.command, seg, parse_qs(parts.query), payload)
        if answer is None:  # the agent went away during a long poll
            self.close_connection = True
            return
        status, obj, headers = answer
        self.record(status)
        self.send_json(status, obj, headers)

    def client_gone(self):
        """A waiting client never sends anything: readable means closed (or garbage)."""
        try:
            r, _, _ = select.select([self.connection], [], [], 0)
            return bool(r)
        except (OSError, ValueError):
            return True

    def take_progress(self, jid, payload):
        """Under STATE.lock: a progress (POST .../progress or in an exchange)."""
        j = STATE.jobs.get(jid)
        if not j or j.get("forgotten"):
            STATE.refused.append([jid, "progress", "JOB_NOT_FOUND"])
            return 404, envelope_err("JOB_NOT_FOUND", "Job not found")
        j["progress"].append(payload)
        j.setdefault("progressAt", []).append(time.time())  # the pace test reads the times
        if j.get("cancel"):
            return 409, envelope_err("JOB_CANCELLED", "Job cancelled")
        if j.get("loseLease"):
            STATE.refused.append([jid, "progress", "LEASE_LOST"])
            return 409, envelope_err("LEASE_LOST", "Lease lost")
        j["leaseExpires"] = time.time() + STATE.lease_sec
        return 200, envelope_ok({"leaseExpiresAt": now_iso(j["leaseExpires"])})

    def take_result(self, jid, payload):
        """Under STATE.lock: a result (POST .../result or in an exchange)."""
        j = STATE.jobs.get(jid)
        if not j or j.get("forgotten"):
            STATE.refused.append([jid, "result", "JOB_NOT_FOUND"])
            return 404, envelope_err("JOB_NOT_FOUND", "Job not found")
        j["results"].append(payload)
        j["resultAt"] = time.time()
        j["state"] = "done"
        STATE.lock.notify_all()
        return 200, envelope_ok({})

    def wait_jobs(self, wait, mx, acks):
        """The long poll: jobs at once when some wait, else after wait seconds. acks None: the
        answer of GET .../jobs (data: the jobs); else an exchange answer (data: {jobs, taken,
        lost, leases})."""
        deadline = time.time() + wait

        def answer(items_text):
            if acks is None:
                return 200, RawBody('{"success": true, "message": "OK", "data": [' + items_text + ']}'), None
            # "jobs" last: an agent can then read a cut answer's last job from its tail.
            rest = ", ".join(f'"{k}": {json.dumps(v)}' for k, v in acks.items())
            return 200, RawBody('{"success": true, "message": "OK", "data": {' + rest + ', "jobs": [' + items_text + ']}}'), None

        with STATE.lock:
            while True:
                if self.client_gone():
                    return None
                if STATE.raw_answer is not None:
                    raw = STATE.raw_answer
                    STATE.raw_answer = None
                    return raw.get("status", 200), RawBody(raw["body"]), None
                STATE.reap_leases()
                # A raw text is offered again, like a lease that ran out, every 2 s
                # until its job has a result (an agent may ask again with max=1).
                now = time.time()
                STATE.raw_texts = [r for r in STATE.raw_texts
                                   if not (r["id"] in STATE.jobs and STATE.jobs[r["id"]]["results"])]
                due = [r for r in STATE.raw_texts if r["offeredAt"] is None or now - r["offeredAt"] > 2]
                if mx > 0 and (STATE.queue or STATE.raw_jobs or due):
                    texts = []
                    for r in due[:mx]:
                        r["offeredAt"] = now
                        texts.append(r["text"])
                    out = STATE.raw_jobs[:mx - len(texts)]
                    STATE.raw_jobs = STATE.raw_jobs[len(out):]
                    while STATE.queue and len(out) + len(texts) < mx:
                        out.append(STATE.offer(STATE.jobs[STATE.queue.pop(0)]))
                    return answer(", ".join(texts + [json.dumps(o) for o in out]))
                left = deadline - time.time()
                if left <= 0:
                    return answer("")
                STATE.lock.wait(min(left, 0.5))

    def route(self, method, seg, query, payload):
        if method == "POST" and len(seg) == 3 and seg[0] == "nodes" and seg[2] == "hello":
            with STATE.lock:
                STATE.hellos.append({"at": time.time(), "hello": payload})
                return 200, envelope_ok(STATE.settings), None
        if method == "GET" and len(seg) == 3 and seg[0] == "nodes" and seg[2] == "jobs":
            wait = min(60, max(1, int(query.get("wait", ["30"])[0])))
            mx = max(1, int(query.get("max", ["1"])[0]))
            return self.wait_jobs(wait, mx, None)
        if method == "POST" and len(seg) == 3 and seg[0] == "nodes" and seg[2] == "exchange":
            if not isinstance(payload, dict) or not isinstance(payload.get("results", []), list) \
                    or not isinstance(payload.get("progress", []), list):
                return 422, envelope_err("VALIDATION_ERROR", "Validation error", {"_errors": ["results and progress must be lists"]}), None
            wait = min(60, max(0, int(query.get("wait", ["30"])[0])))
            mx = max(0, int(query.get("max", ["1"])[0]))
            acks = {"taken": [], "lost": [], "leases": []}
            with STATE.lock:
                STATE.exchanges.append({"at": time.time(), "wait": wait, "max": mx,
                                        "results": len(payload.get("results", [])),
                                        "progress": len(payload.get("progress", []))})
                # Recorded when the request arrives, before any wait (2.3).
                for r in payload.get("results", []):
                    jid = r.pop("jobId", None)
                    status, _ = self.take_result(jid, r)
                    if status == 200:
                        acks["taken"].append(jid)
                    else:
                        acks["lost"].append({"jobId": jid, "code": "JOB_NOT_FOUND"})
                for p in payload.get("progress", []):
                    jid = p.pop("jobId", None)
                    status, ans = self.take_progress(jid, p)
                    if status == 200:
                        acks["leases"].append({"jobId": jid, "leaseExpiresAt": ans["data"]["leaseExpiresAt"]})
                    else:
                        acks["lost"].append({"jobId": jid, "code": ans["code"]})
            return self.wait_jobs(wait, mx, acks)
        if method == "POST" and len(seg) == 3 and seg[0] == "jobs" and seg[2] in ("progress", "result"):
            with STATE.lock:
                status, obj = (self.take_progress if seg[2] == "progress" else self.take_result)(seg[1], payload)
                return status, obj, None
        if method == "POST" and len(seg) == 3 and seg[0] == "nodes" and seg[2] == "reports":
            with STATE.lock:
                seq = payload.get("seq") if isinstance(payload, dict) else None
                if not isinstance(seq, int):
                    return 422, envelope_err("VALIDATION_ERROR", "Validation error", {"_errors": [], "seq": {"_errors": ["required"]}}), None
                if seq > STATE.max_seq or seq not in {r["seq"] for r in STATE.reports}:
                    STATE.reports.append(payload)
                STATE.max_seq = max(STATE.max_seq, seq)
                STATE.lock.notify_all()
                return 200, envelope_ok({"ackSeq": STATE.max_seq}), None
        return 404, envelope_err("NOT_FOUND", "No such endpoint"), None

    # -- admin side -------------------------------------------------------
    def admin(self):
        body = self.read_body()
        payload = json.loads(body) if body else None
        parts = urlparse(self.path)
        seg = [s for s in parts.path.split("/") if s][1:]
        q = parse_qs(parts.query)
        m = self.command
        if seg[:1] == ["relay"]:
            a = SERVERS.args
            base = f"{'ws' if a.plain else 'wss'}://{a.listen}:{a.port}"
            status, obj = RELAY.admin(m, seg[1:], q, payload, base)
            return self.send_json(status, obj)
        with STATE.lock:
            if m == "POST" and seg == ["jobs"]:
                items = payload if isinstance(payload, list) else [payload]
                ids = []
                for it in items:
                    jid = it.get("id") or str(uuid.uuid4())
                    STATE.jobs[jid] = {"id": jid, "kind": it["kind"], "target": it.get("target", {"type": "node", "id": STATE.node_id}),
                                       "params": it.get("params", {}), "timeoutSec": it.get("timeoutSec", 600),
                                       "createdAt": now_iso(), "attempt": 1, "state": "queued", "offers": 0,
                                       "progress": [], "results": [], "enqueuedAt": time.time()}
                    STATE.queue.append(jid)
                    ids.append(jid)
                STATE.lock.notify_all()
                return self.send_json(200, {"ids": ids})
            if m == "POST" and seg == ["raw-jobs"]:
                for it in payload:
                    # Results for injected jobs are recorded like any other.
                    if isinstance(it, dict) and isinstance(it.get("id"), str) and it["id"] not in STATE.jobs:
                        STATE.jobs[it["id"]] = {"id": it["id"], "kind": str(it.get("kind")), "target": it.get("target"),
                                                "params": None, "timeoutSec": 600, "createdAt": now_iso(),
                                                "attempt": 1, "state": "leased", "offers": 1, "progress": [],
                                                "results": [], "enqueuedAt": time.time(), "raw": True,
                                                "leaseExpires": time.time() + 3600}
                STATE.raw_jobs.extend(payload)
                STATE.lock.notify_all()
                return self.send_json(200, {})
            if m == "POST" and seg == ["raw-job-texts"]:
                # [{id, text}]: each text is spliced verbatim into the next poll answer's
                # array (jobs no JSON encoder would write: NUL, huge integers, keys twice).
                for it in payload:
                    jid = it.get("id")
                    if jid and jid not in STATE.jobs:
                        STATE.jobs[jid] = {"id": jid, "kind": "?", "target": None, "params": None,
                                           "timeoutSec": 600, "createdAt": now_iso(), "attempt": 1,
                                           "state": "leased", "offers": 1, "progress": [], "results": [],
                                           "enqueuedAt": time.time(), "raw": True,
                                           "leaseExpires": time.time() + 3600}
                    STATE.raw_texts.append({"id": jid, "text": it["text"], "offeredAt": None})
                STATE.lock.notify_all()
                return self.send_json(200, {})
            if m == "POST" and seg == ["raw-answer"]:
                STATE.raw_answer = payload
                STATE.lock.notify_all()
                return self.send_json(200, {})
            if m == "GET" and len(seg) == 2 and seg[0] == "jobs":
                j = STATE.jobs.get(seg[1])
                return self.send_json(200 if j else 404, j or {})
            if m == "GET" and seg == ["state"]:
                counts = {}
                for r in STATE.requests:
                    counts[r[2]] = counts.get(r[2], 0) + 1
                return self.send_json(200, {"jobs": STATE.jobs, "reports": STATE.reports, "hellos": STATE.hellos,
                                            "requestCounts": counts, "requests": len(STATE.requests),
                                            "queue": STATE.queue, "exchanges": STATE.exchanges,
                                            "refused": STATE.refused, "settings": STATE.settings})
            if m == "GET" and seg == ["requests"]:
                return self.send_json(200, STATE.requests)
            if m == "GET" and seg == ["wait"]:
                ids = [i for i in q.get("ids", [""])[0].split(",") if i]
                deadline = time.time() + float(q.get("timeout", ["30"])[0])
                while True:
                    missing = [i for i in ids if not STATE.jobs.get(i, {}).get("results")]
                    if not missing or time.time() >= deadline:
                        return self.send_json(200, {"missing": missing,
                                                    "jobs": {i: STATE.jobs.get(i) for i in ids}})
                    STATE.lock.wait(min(0.5, max(0.01, deadline - time.time())))
            if m == "POST" and seg == ["faults"]:
                f = dict(payload)
                if "seconds" in f:
                    f["until"] = time.time() + float(f["seconds"])
                STATE.fault = f
                if f.get("mode") == "down":
                    threading.Thread(target=SERVERS.go_down, args=(float(f.get("seconds", 5)),), daemon=True).start()
                    STATE.fault = {"mode": "none"}
                return self.send_json(200, {})
            if m == "POST" and seg == ["tokens"]:
                STATE.tokens = set(payload["tokens"])
                return self.send_json(200, {})
            if m == "POST" and seg == ["settings"]:
                STATE.settings = payload
                return self.send_json(200, {})
            if m == "POST" and len(seg) == 2 and seg[0] in ("cancel", "lose-lease", "forget"):
                j = STATE.jobs.get(seg[1])
                if j:
                    j[{"cancel": "cancel", "lose-lease": "loseLease", "forget": "forgotten"}[seg[0]]] = True
                return self.send_json(200 if j else 404, {})
            if m == "POST" and seg == ["reset"]:
                STATE.requests = []
                STATE.exchanges = []
                if isinstance(payload, dict) and payload.get("done"):  # long runs: bounded memory
                    STATE.reports = []
                    STATE.jobs = {k: j for k, j in STATE.jobs.items() if j.get("state") != "done"}
                return self.send_json(200, {})
        return self.send_json(404, {"error": "no such admin endpoint"})

    def do_GET(self):
        self.dispatch()

    def do_POST(self):
        self.dispatch()

    def dispatch(self):
        try:
            if self.server.admin:
                self.admin()
            else:
                self.agent()
        except (BrokenPipeError, ConnectionResetError, ssl.SSLError):
            self.close_connection = True


LIVE = set()             # connections of the agent side, closed when it "goes down"
LIVE_LOCK = threading.Lock()


class TLSServer(ThreadingHTTPServer):
    daemon_threads = True
    allow_reuse_address = True
    request_queue_size = 128

    def __init__(self, addr, ctx, admin):
        self.ctx = ctx
        self.admin = admin
        super().__init__(addr, Handler)

    def finish_request(self, request, client_address):
        # The TLS handshake runs in the connection's own thread, not the accept loop.
        # Headers and body go out as two writes: without TCP_NODELAY, Nagle and the
        # peer's delayed ACK add 40 ms to every answer.
        request.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        if self.ctx:
            try:
                request.settimeout(30)
                request = self.ctx.wrap_socket(request, server_side=True)  # detaches the raw socket
                request.settimeout(None)
            except (ssl.SSLError, OSError):
                return
        if not self.admin:
            with LIVE_LOCK:
                LIVE.add(request)
        try:
            super().finish_request(request, client_address)
        finally:
            with LIVE_LOCK:
                LIVE.discard(request)


class Servers:
    def __init__(self, args):
        self.args = args
        self.ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        self.ctx.load_cert_chain(f"{args.certs}/server.pem", f"{args.certs}/server.key")
        if args.client_ca:
            self.ctx.verify_mode = ssl.CERT_REQUIRED
            self.ctx.load_verify_locations(args.client_ca)
        self.agent = None
        self.admin = TLSServer(("127.0.0.1", args.admin_port), None, True)
        self.lock = threading.Lock()

    def start_agent_side(self):
        srv = TLSServer((self.args.listen, self.args.port), None if self.args.plain else self.ctx, False)
        self.agent = srv
        threading.Thread(target=srv.serve_forever, kwargs={"poll_interval": 0.1}, daemon=True).start()
        return srv

    def go_down(self, seconds):
        with self.lock:
            self.agent.shutdown()
            self.agent.server_close()
            with LIVE_LOCK:
                for conn in list(LIVE):
                    try:
                        conn.shutdown(socket.SHUT_RDWR)
                    except OSError:
                        pass
            time.sleep(seconds)
            self.start_agent_side()


SERVERS = None


def main():
    global STATE, SERVERS
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--listen", default="127.0.0.1")
    ap.add_argument("--port", type=int, default=8443)
    ap.add_argument("--admin-port", type=int, default=8444)
    ap.add_argument("--certs", required=True, help="directory made by mkcerts.sh")
    ap.add_argument("--client-ca", help="require client certificates signed by this CA (mutual TLS)")
    ap.add_argument("--plain", action="store_true", help="plain HTTP on the agent side")
    ap.add_argument("--node-id", required=True)
    ap.add_argument("--token", action="append", help="accepted bearer token (repeatable); none = any")
    ap.add_argument("--lease-sec", type=int, default=60)
    ap.add_argument("--poll-wait", type=int, default=30)
    ap.add_argument("--report-interval", type=int, default=15)
    ap.add_argument("--max-jobs", type=int, default=0)
    ap.add_argument("--exchange", action="store_true", default=os.environ.get("NA_TEST_EXCHANGE") == "1",
                    help="offer the exchange endpoint (2.3) in the settings")
    args = ap.parse_args()
    STATE = State(args)
    SERVERS = Servers(args)
    SERVERS.start_agent_side()
    print(f"controller: agent side {'http' if args.plain else 'https'}://{args.listen}:{args.port}/agent/v1, "
          f"admin http://127.0.0.1:{args.admin_port}/admin", flush=True)
    try:
        SERVERS.admin.serve_forever(poll_interval=0.2)
    except KeyboardInterrupt:
        pass
    return 0


if __name__ == "__main__":
    sys.exit(main())
