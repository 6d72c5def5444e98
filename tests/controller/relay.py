# SPDX-License-Identifier: GPL-2.0-or-later
"""The relay end of live consoles (AGENT-API 4.3) for the test controller: the agent
dials wss://<controller>/relay/<sessionId> with `Authorization: Bearer <token>`; the
tests, the demo and the benchmark drive each session through the admin side.
Python 3 standard library only (RFC 6455 server side written out here).

Admin (JSON), under /admin/relay:
  POST /admin/relay/sessions        {sessionId, token, rcvbuf?}: expect this session -> {url}
                                    (rcvbuf: SO_RCVBUF of its socket, for slow-reader tests)
  GET  /admin/relay/{sid}?since=N&timeout=S&count=K
                                    messages from the N-th on, waiting up to S seconds
                                    until K of them (default 1) or the end
                                    -> {connected, messages:[{n, op, text|b64, masked}], closed}
  POST /admin/relay/{sid}/send      {text} | {b64} | {raw_b64} (bytes as they are, no framing)
                                    | {text, fragments: k} (one message in k frames)
  POST /admin/relay/{sid}/close     {code, reason}
  POST /admin/relay/{sid}/pause     {paused: true|false}: stop (or resume) reading the socket
  GET  /admin/relay/{sid}/wait-closed?timeout=S -> {closed}
"""
import base64
import hashlib
import json
import os
import socket
import struct
import threading
import time

GUID = "258EAFA5-E914-47DA-95CA-C5AB0DC85B11"


class Session:
    def __init__(self, sid, token):
        self.sid = sid
        self.token = token
        self.cond = threading.Condition()
        self.messages = []
        self.closed = None       # {code, reason, by, at}
        self.connected = False
        self.sock = None
        self.wlock = threading.Lock()
        self.paused = False
        self.rejected = []       # why an upgrade was refused
        self.relay_closing = None  # (code, reason) once the relay sent its close
        self.rcvbuf = None

    # -- frames ---------------------------------------------------------
    def write(self, data):
        with self.wlock:
            self.sock.sendall(data)

    def send_frame(self, op, payload, fin=True):
        b0 = (0x80 if fin else 0) | op
        n = len(payload)
        if n < 126:
            head = struct.pack("!BB", b0, n)
        elif n < 65536:
            head = struct.pack("!BBH", b0, 126, n)
        else:
            head = struct.pack("!BBQ", b0, 127, n)
        self.write(head + payload)

    def send_message(self, op, payload, fragments=1):
        if fragments <= 1:
            self.send_frame(op, payload)
            return
        step = max(1, (len(payload) + fragments - 1) // fragments)
        parts = [payload[i:i + step] for i in range(0, len(payload), step)] or [b""]
        for i, p in enumerate(parts):
            self.send_frame(op if i == 0 else 0, p, fin=i == len(parts) - 1)

    def _read_exact(self, f, n):
        buf = b""
        while len(buf) < n:
            while self.paused and not self.closed:
                time.sleep(0.05)
            chunk = f.read(n - len(buf))
            if not chunk:
                raise EOFError
            buf += chunk
        return buf

    def _read_frame(self, f):
        b0, b1 = self._read_exact(f, 2)
        fin, op, masked, n = b0 >> 7, b0 & 15, b1 >> 7, b1 & 127
        if n == 126:
            n = struct.unpack("!H", self._read_exact(f, 2))[0]
        elif n == 127:
            n = struct.unpack("!Q", self._read_exact(f, 8))[0]
        mask = self._read_exact(f, 4) if masked else None
        data = self._read_exact(f, n) if n else b""
        if mask and data:
            n = len(data)
            m = (mask * (n // 4 + 1))[:n]
            data = (int.from_bytes(data, "big") ^ int.from_bytes(m, "big")).to_bytes(n, "big")
        return fin, op, bool(masked), data

    def _end(self, code, reason, by):
        with self.cond:
            if not self.closed:
                self.closed = {"code": code, "reason": reason, "by": by, "at": time.time()}
            self.cond.notify_all()

    def run(self, f):
        frag_op, frag = None, b""
        try:
            while True:
                fin, op, masked, data = self._read_frame(f)
                if op == 9:
                    self.send_frame(10, data)
                    self._add({"op": "ping", "masked": masked})
                    continue
                if op == 10:
                    continue
                if op == 8:
                    code = struct.unpack("!H", data[:2])[0] if len(data) >= 2 else 1005
                    reason = data[2:].decode("utf-8", "replace")
                    we_started = self.relay_closing is not None
                    if not we_started:
                        try:
                            self.send_frame(8, data[:2])
                        except OSError:
                            pass
                    self._end(code, reason, "relay" if we_started else "agent")
                    return
                if op in (1, 2):
                    frag_op, frag = op, data
                elif op == 0 and frag_op is not None:
                    frag += data
                else:
                    continue
                if fin:
                    m = {"op": "text" if frag_op == 1 else "binary", "masked": masked}
                    if frag_op == 1:
                        m["text"] = frag.decode("utf-8", "replace")
                    else:
                        m["b64"] = base64.b64encode(frag).decode()
                    self._add(m)
                    frag_op, frag = None, b""
        except (EOFError, OSError, ValueError):
            self._end(1006, "connection lost", "network")

    def _add(self, m):
        with self.cond:
            m["n"] = len(self.messages)
            m["t"] = time.time()
            self.messages.append(m)
            self.cond.notify_all()


class Relay:
    def __init__(self):
        self.lock = threading.Lock()
        self.sessions = {}

    def get(self, sid):
        with self.lock:
            return self.sessions.get(sid)

    # -- agent side: the upgrade ------------------------------------------
    def upgrade(self, handler, sid):
        """Called by the controller's Handler for GET /relay/<sid>; keeps the thread
        until the WebSocket ends."""
        s = self.get(sid)
        auth = handler.headers.get("Authorization", "")
        key = handler.headers.get("Sec-WebSocket-Key")
        if s is None or auth != f"Bearer {s.token}" or s.connected:
            if s is not None:
                s.rejected.append("token" if auth != f"Bearer {s.token}" else "again")
            body = b'{"error":"unknown session or bad token"}'
            handler.send_response(401 if s is not None else 404)
            handler.send_header("Content-Length", str(len(body)))
            handler.end_headers()
            handler.wfile.write(body)
            return
        if (handler.headers.get("Upgrade", "").lower() != "websocket" or not key
                or handler.headers.get("Sec-WebSocket-Version") != "13"):
            handler.send_response(400)
            handler.send_header("Content-Length", "0")
            handler.end_headers()
            return
        accept = base64.b64encode(hashlib.sha1((key + GUID).encode()).digest()).decode()
        handler.close_connection = True
        if s.rcvbuf:
            handler.connection.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, int(s.rcvbuf))
        # The session is the relay's from the moment its 101 can reach the agent: the
        # agent posts console.open's result as soon as it has read the 101 (AGENT-API
        # 4.3, "once the WebSocket is up"), and a frame sent after that result must be
        # taken, not answered 409.  So the session is marked connected before the 101
        # is written, and under its write lock, so that a frame sent meanwhile waits
        # for the 101 to be on the wire first.
        with s.wlock:
            with s.cond:
                s.sock = handler.connection
                s.connected = True
                s.cond.notify_all()
            handler.send_response(101)
            handler.send_header("Upgrade", "websocket")
            handler.send_header("Connection", "Upgrade")
            handler.send_header("Sec-WebSocket-Accept", accept)
            handler.end_headers()
            handler.wfile.flush()
        s.run(handler.rfile)

    # -- admin side --------------------------------------------------------
    def admin(self, method, seg, q, payload, base_url):
        """(status, obj) for /admin/relay/..."""
        if method == "POST" and seg == ["sessions"]:
            sid = payload["sessionId"]
            with self.lock:
                self.sessions[sid] = Session(sid, payload.get("token", ""))
                self.sessions[sid].rcvbuf = payload.get("rcvbuf")
            return 200, {"url": f"{base_url}/relay/{sid}"}
        if not seg:
            with self.lock:
                return 200, {"sessions": sorted(self.sessions)}
        s = self.get(seg[0])
        if s is None:
            return 404, {"error": "no such relay session"}
        rest = seg[1:]
        if method == "GET" and not rest:
            since = int(q.get("since", ["0"])[0])
            count = int(q.get("count", ["1"])[0])
            deadline = time.time() + float(q.get("timeout", ["0"])[0])
            with s.cond:
                while len(s.messages) < since + count and not s.closed and time.time() < deadline:
                    s.cond.wait(min(0.2, max(0.001, deadline - time.time())))
                return 200, {"connected": s.connected, "messages": s.messages[since:], "closed": s.closed,
                             "rejected": s.rejected}
        if method == "GET" and rest == ["wait-closed"]:
            deadline = time.time() + float(q.get("timeout", ["10"])[0])
            with s.cond:
                while not s.closed and time.time() < deadline:
                    s.cond.wait(min(0.2, max(0.001, deadline - time.time())))
                return 200, {"closed": s.closed, "connected": s.connected}
        if not s.connected:
            return 409, {"error": "the agent has not connected"}
        try:
            if method == "POST" and rest == ["send"]:
                if "raw_b64" in payload:
                    s.write(base64.b64decode(payload["raw_b64"]))
                elif "b64" in payload:
                    s.send_message(2, base64.b64decode(payload["b64"]), payload.get("fragments", 1))
                else:
                    s.send_message(1, payload["text"].encode(), payload.get("fragments", 1))
                return 200, {}
            if method == "POST" and rest == ["close"]:
                code = int(payload.get("code", 1000))
                s.relay_closing = (code, payload.get("reason", ""))
                s.send_frame(8, struct.pack("!H", code) + payload.get("reason", "").encode())
                return 200, {}
            if method == "POST" and rest == ["pause"]:
                s.paused = bool(payload.get("paused", True))
                return 200, {}
        except OSError as e:
            return 409, {"error": str(e)}
        return 404, {"error": "no such relay endpoint"}


RELAY = Relay()
