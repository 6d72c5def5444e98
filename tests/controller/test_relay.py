#!/usr/bin/python3
# SPDX-License-Identifier: GPL-2.0-or-later
"""The test controller's relay end of live consoles (relay.py), without an agent.

The relay must hold a session from the moment its 101 can reach the agent: the agent
posts console.open's result once it has read the 101 (AGENT-API 4.3), and a test that
sends a frame right after that result must not get 409 ("the agent has not
connected"; issue 24: console-power_through_console failed so under load).  Here the
101 is intercepted as it is written: at that moment the admin side must already see
the session connected, and a frame sent from another thread then must be taken and
reach the socket after the 101, never before it or inside it."""
import base64
import io
import os
import sys
import threading

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(HERE, "..", "harness"))
import relay  # noqa: E402
from nodeagent_harness import check  # noqa: E402


class FakeSocket:
    def __init__(self):
        self.out = bytearray()
        self.lock = threading.Lock()

    def sendall(self, data):
        with self.lock:
            self.out += data

    def setsockopt(self, *a):
        pass


class FakeHandler:
    """What Relay.upgrade uses of http.server's BaseHTTPRequestHandler; on_101 runs
    when the status line of the 101 is written, i.e. when the agent could read it."""

    def __init__(self, sid, token, on_101):
        self.headers = {"Authorization": f"Bearer {token}", "Upgrade": "websocket",
                        "Sec-WebSocket-Key": base64.b64encode(os.urandom(16)).decode(),
                        "Sec-WebSocket-Version": "13"}
        self.connection = FakeSocket()
        self.rfile = io.BytesIO(b"")          # the agent sends nothing: the session ends at once
        self.on_101 = on_101
        self.head = []
        self.close_connection = False
        handler = self

        class W:
            def write(self, data):
                handler.connection.sendall(data)

            def flush(self):
                pass
        self.wfile = W()

    def send_response(self, code):
        self.head.append(f"HTTP/1.1 {code}\r\n")

    def send_header(self, k, v):
        self.head.append(f"{k}: {v}\r\n")

    def end_headers(self):
        data = ("".join(self.head) + "\r\n").encode()
        self.head = []
        self.wfile.write(data)
        if data.startswith(b"HTTP/1.1 101"):
            self.on_101()


def main():
    r = relay.Relay()
    sid, token = "5f0c7c2e-4a7e-4a36-9d61-1c1b6a3b2f10", "t0ken"
    status, ans = r.admin("POST", ["sessions"], {}, {"sessionId": sid, "token": token}, "wss://127.0.0.1:1")
    check(status == 200 and ans["url"].endswith(sid), (status, ans))
    seen = {}
    sender = {}

    def on_101():
        # What the test sees right after console.open's result.
        seen["at_101"] = r.admin("GET", [sid], {}, {}, "")[1]["connected"]

        def send():
            sender["answer"] = r.admin("POST", [sid, "send"], {}, {"text": "{\"type\":\"line\",\"line\":\"x\"}"}, "")
        t = threading.Thread(target=send)
        t.start()
        sender["thread"] = t

    h = FakeHandler(sid, token, on_101)
    r.upgrade(h, sid)
    sender["thread"].join(10)
    check(not sender["thread"].is_alive(), "the send did not finish")
    check(seen["at_101"] is True, "the relay did not hold the session when its 101 went out")
    status, _ = sender["answer"]
    check(status == 200, f"a frame sent right after the 101 was answered {sender['answer']}")
    out = bytes(h.connection.out)
    end = out.find(b"\r\n\r\n")
    check(out.startswith(b"HTTP/1.1 101") and end > 0, out[:80])
    frame = out[end + 4:]
    check(frame[:1] == b"\x81" and b'"line":"x"' in frame, f"the frame is not after the 101: {out!r}")
    print("relay: session held before its 101; a frame sent at once is taken, after the 101")
    return 0


if __name__ == "__main__":
    sys.exit(main())
