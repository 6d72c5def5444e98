#!/usr/bin/python3
# SPDX-License-Identifier: GPL-2.0-or-later
"""A small live file editing client (docs/consoles.md, "Live file editing"), Python
standard library only.

It plays the panel's end of a `console.open` session in mode `files`: it listens where
the agent dials (the central API's relay, in production), takes the agent's WebSocket,
keeps the file's latest version and content as the agent pushes them, and writes with
the version it last saw, so that it never overwrites a change it did not see: on a
conflict it takes the file as it is now and tells its user.

  files_client.py --listen 127.0.0.1:9443 --cert server.pem --key server.key --token T

prints the url to give console.open ({"mode":"files","path":…,"url":…,"token":T}),
then reads commands on stdin, one a line:

  show                 print the file as last seen
  write <text>         replace the file with <text> ("\\n" for a newline)
  append <text>        add <text> and a newline at the end
  wait <text>          wait (up to 30 s) until the file holds <text>
  quit                 close the session

and prints what happens: `file <version> <bytes>`, `gone`, `written <version>`,
`conflict <version>`, `error <code> <message>`.
"""
import argparse
import base64
import hashlib
import json
import os
import socket
import ssl
import struct
import sys
import threading

GUID = "258EAFA5-E914-47DA-95CA-C5AB0DC85B11"


class Session:
    """The relay's end of one WebSocket (RFC 6455, server side: frames unmasked)."""

    def __init__(self, sock):
        self.sock = sock
        self.f = sock.makefile("rb")
        self.lock = threading.Lock()

    def upgrade(self, token):
        head = b""
        while not head.endswith(b"\r\n\r\n"):
            line = self.f.readline()
            if not line:
                raise EOFError("the agent went away during the upgrade")
            head += line
        fields = {}
        for ln in head.decode("latin-1").split("\r\n")[1:]:
            if ":" in ln:
                k, v = ln.split(":", 1)
                fields[k.strip().lower()] = v.strip()
        if fields.get("authorization") != f"Bearer {token}":
            self.sock.sendall(b"HTTP/1.1 401 Unauthorized\r\nContent-Length: 0\r\n\r\n")
            raise PermissionError("wrong token")
        accept = base64.b64encode(hashlib.sha1((fields["sec-websocket-key"] + GUID).encode()).digest())
        self.sock.sendall(b"HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
                          b"Sec-WebSocket-Accept: " + accept + b"\r\n\r\n")

    def send(self, op, payload):
        n = len(payload)
        if n < 126:
            head = struct.pack("!BB", 0x80 | op, n)
        elif n < 65536:
            head = struct.pack("!BBH", 0x80 | op, 126, n)
        else:
            head = struct.pack("!BBQ", 0x80 | op, 127, n)
        with self.lock:
            self.sock.sendall(head + payload)

    def send_json(self, obj):
        self.send(1, json.dumps(obj).encode())

    def _read(self, n):
        b = self.f.read(n)
        if len(b) < n:
            raise EOFError
        return b

    def receive(self):
        """The next whole message: (op, bytes); pings answered; (8, code+reason) at the end."""
        op0, data = None, b""
        while True:
            b0, b1 = self._read(2)
            op, n = b0 & 15, b1 & 127
            if n == 126:
                n = struct.unpack("!H", self._read(2))[0]
            elif n == 127:
                n = struct.unpack("!Q", self._read(8))[0]
            mask = self._read(4) if b1 & 0x80 else b"\0\0\0\0"
            payload = bytes(c ^ mask[i % 4] for i, c in enumerate(self._read(n)))
            if op == 9:
                self.send(10, payload)
                continue
            if op == 10:
                continue
            if op == 8:
                return 8, payload
            op0 = op if op else op0
            data += payload
            if b0 & 0x80:
                return op0, data


class Editor:
    """What a panel keeps: the version and content it last saw."""

    def __init__(self, session, out):
        self.s = session
        self.out = out
        self.cond = threading.Condition()
        self.version = None    # None: the file does not exist (or not seen yet)
        self.content = None
        self.writing = False
        self.pending = None
        self.closed = None

    def say(self, text):
        self.out.write(text + "\n")
        self.out.flush()

    def run(self):
        """The agent's frames (a thread of its own)."""
        try:
            while True:
                op, data = self.s.receive()
                if op == 8:
                    code = struct.unpack("!H", data[:2])[0] if len(data) >= 2 else 1005
                    self.s.send(8, data[:2])
                    self.finish(f"closed {code} {data[2:].decode('utf-8', 'replace')}")
                    return
                if op != 1:
                    continue
                self.frame(json.loads(data))
        except (EOFError, OSError) as e:
            self.finish(f"closed 1006 {e}")

    def finish(self, why):
        with self.cond:
            self.closed = why
            self.cond.notify_all()
        self.say(why)

    def frame(self, f):
        with self.cond:
            t = f.get("type")
            if t == "file":
                self.version, self.content = f["version"], f.get("content")
                self.say(f"file {f['version']} {f['bytes']}" + (" binary" if f.get("binary") else ""))
            elif t == "gone":
                self.version, self.content = None, None
                self.say("gone")
            elif t == "written":
                self.version, self.content = f["version"], self.pending
                self.writing = False
                self.say(f"written {f['version']}")
            elif t == "conflict":
                # Someone else changed it first: take theirs, never overwrite it blindly.
                self.version, self.content = f["version"], f.get("content")
                self.writing = False
                self.say(f"conflict {f['version']}")
            elif t == "error":
                self.writing = False
                self.say(f"error {f['code']} {f['error']}")
            self.cond.notify_all()

    def write(self, content):
        with self.cond:
            if self.writing:
                self.say("error BUSY wait for the last write's answer")
                return
            self.writing = True
            self.pending = content
            base = self.version
        self.s.send_json({"type": "write", "baseVersion": base, "content": content})
        with self.cond:
            self.cond.wait_for(lambda: not self.writing or self.closed, 60)

    def wait(self, text, timeout=30):
        with self.cond:
            ok = self.cond.wait_for(lambda: (self.content or "").find(text) >= 0 or self.closed, timeout)
        self.say(f"seen {text!r}" if ok and not self.closed else f"not seen {text!r}")


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--listen", default="127.0.0.1:9443")
    ap.add_argument("--cert", help="TLS certificate (PEM); without it the socket is plain ws:// (loopback tests)")
    ap.add_argument("--key")
    ap.add_argument("--token", required=True)
    a = ap.parse_args()
    host, port = a.listen.rsplit(":", 1)
    lsock = socket.create_server((host, int(port)))
    scheme = "wss" if a.cert else "ws"
    print(f"url {scheme}://{host}:{lsock.getsockname()[1]}/files", flush=True)
    raw, _ = lsock.accept()
    if a.cert:
        ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        ctx.load_cert_chain(a.cert, a.key)
        raw = ctx.wrap_socket(raw, server_side=True)
    s = Session(raw)
    s.upgrade(a.token)
    ed = Editor(s, sys.stdout)
    threading.Thread(target=ed.run, daemon=True).start()
    for line in sys.stdin:
        cmd, _, arg = line.rstrip("\n").partition(" ")
        arg = arg.replace("\\n", "\n")
        if cmd == "show":
            print(ed.content if ed.content is not None else "(no content)", flush=True)
        elif cmd == "write":
            ed.write(arg)
        elif cmd == "append":
            ed.write((ed.content or "") + arg + "\n")
        elif cmd == "wait":
            ed.wait(arg)
        elif cmd == "quit":
            break
        if ed.closed:
            break
    if not ed.closed:
        s.send(8, struct.pack("!H", 1000) + b"bye")
        with ed.cond:
            ed.cond.wait_for(lambda: ed.closed, 5)
    return 0


if __name__ == "__main__":
    sys.exit(main())
