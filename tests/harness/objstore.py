# SPDX-License-Identifier: GPL-2.0-or-later
"""A small HTTPS object store for the transfer tests (AGENT-API 4.4): pre-signed-looking
URLs, GET with Range, PUT, S3-style multipart part PUTs answering an ETag, and failure
injection. Standard library only; objects live on disk under a temporary directory, so
big ones never sit in memory.

    from objstore import ObjectStore
    store = ObjectStore(certs_dir())            # serves https://127.0.0.1:<port> with the test CA's server.pem
    url = store.url("GET", "world.tar")         # https://127.0.0.1:<port>/o/world.tar?exp=...&sig=...
    urls = store.part_urls("big.bin", 3)        # one PUT URL per part (uploadId in the query)
    store.complete("big.bin", [(1, etag1), ...])
    store.inject("drop", method="GET", after=100000)   # once: close the connection after that many body bytes
    store.inject("500", method="PUT")                  # once: answer 500
    store.inject("norange", method="GET")              # once: ignore the Range header, answer 200 whole
    store.inject("slow", delay=0.05)                   # every chunk of 64 KiB waits that long, until cleared
    store.requests                              # [{method, key, range, status, part}], in order
    store.stop()

A URL's `sig` is an HMAC of method, key, part and `exp` under a per-store secret: a
wrong or missing signature, a method other than the signed one, or an `exp` in the past
is answered 403 (as S3 does). Run as a script to serve by hand:
`objstore.py --certs DIR [--port N] [--dir D]`, printing one URL pair per line on stdin's
`GET key` / `PUT key`.
"""
import hashlib
import hmac
import http.server
import os
import re
import secrets
import shutil
import ssl
import sys
import tempfile
import threading
import time
import urllib.parse

CHUNK = 64 * 1024


class _Handler(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server_version = "objstore-test"

    def log_message(self, fmt, *args):  # quiet; the store keeps its own log
        pass

    # ---- helpers ----
    def _parse(self):
        u = urllib.parse.urlsplit(self.path)
        q = dict(urllib.parse.parse_qsl(u.query, keep_blank_values=True))
        m = re.fullmatch(r"/o/([A-Za-z0-9._-]{1,200})", u.path)
        return (m.group(1) if m else None), q

    def _answer(self, status, body=b"", headers=None, record=None):
        if record is not None:  # before the answer: a client done with it may look at the log at once
            record["status"] = status
        self.send_response(status)
        for k, v in (headers or {}).items():
            self.send_header(k, v)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        if body and self.command != "HEAD":
            self.wfile.write(body)

    def _drop(self):
        self.close_connection = True
        try:
            self.wfile.flush()
            self.connection.shutdown(2)
        except OSError:
            pass

    def _authorized(self, method, key, q):
        store = self.server.store
        exp = q.get("exp", "")
        want = store.sign(method, key, q.get("part", ""), exp)
        if not hmac.compare_digest(q.get("sig", ""), want):
            return "bad signature"
        if not exp.isdigit() or int(exp) < time.time():
            return "expired"
        return None

    # ---- methods ----
    def do_GET(self):
        store = self.server.store
        key, q = self._parse()
        rec = {"method": "GET", "key": key, "range": self.headers.get("Range"), "part": None, "status": None}
        store._record(rec)
        if key is None:
            return self._answer(404, b"no such path\n", record=rec)
        why = self._authorized("GET", key, q)
        if why:
            return self._answer(403, why.encode() + b"\n", record=rec)
        path = store.object_path(key)
        if not os.path.exists(path):
            return self._answer(404, b"no such object\n", record=rec)
        inj = store._take("GET")
        if inj and inj["kind"] == "500":
            return self._answer(500, b"injected failure\n", record=rec)
        size = os.path.getsize(path)
        start, end, status = 0, size - 1, 200
        rng = self.headers.get("Range")
        if inj and inj["kind"] == "norange":
            rng = None  # a store that ignores Range: the whole object again, 200
        if rng:
            m = re.fullmatch(r"bytes=(\d+)-(\d*)", rng.strip())
            if not m or int(m.group(1)) >= size:
                return self._answer(416, b"", {"Content-Range": f"bytes */{size}"}, record=rec)
            start = int(m.group(1))
            if m.group(2):
                end = min(int(m.group(2)), size - 1)
            status = 206
        length = end - start + 1 if size else 0
        rec["status"] = status
        self.send_response(status)
        self.send_header("Content-Length", str(length))
        self.send_header("ETag", '"' + store.etag_of(path) + '"')
        if status == 206:
            self.send_header("Content-Range", f"bytes {start}-{end}/{size}")
        self.end_headers()
        sent = 0
        with open(path, "rb") as f:
            f.seek(start)
            while sent < length:
                want = min(CHUNK, length - sent)
                if inj and inj["kind"] == "drop" and sent + want > inj["after"]:
                    want = inj["after"] - sent
                    if want > 0:
                        self.wfile.write(f.read(want))
                    rec["dropped_after"] = sent + max(want, 0)
                    return self._drop()
                buf = f.read(want)
                if not buf:
                    break
                self.wfile.write(buf)
                sent += len(buf)
                store._maybe_slow()

    def do_PUT(self):
        store = self.server.store
        key, q = self._parse()
        part = q.get("part")
        rec = {"method": "PUT", "key": key, "range": None, "part": part, "status": None}
        store._record(rec)
        if key is None:
            return self._answer(404, b"no such path\n", record=rec)
        why = self._authorized("PUT", key, q)
        length = self.headers.get("Content-Length")
        if why:
            self.close_connection = True
            return self._answer(403, why.encode() + b"\n", record=rec)
        if length is None or not length.isdigit():
            self.close_connection = True
            return self._answer(411, b"Content-Length required\n", record=rec)
        length = int(length)
        inj = store._take("PUT")
        fd, tmp = tempfile.mkstemp(dir=store.dir, prefix=".upload-")
        got = 0
        try:
            with os.fdopen(fd, "wb") as f:
                while got < length:
                    want = min(CHUNK, length - got)
                    if inj and inj["kind"] == "drop" and got + want > inj["after"]:
                        f.write(self.rfile.read(max(inj["after"] - got, 0)))
                        rec["dropped_after"] = inj["after"]
                        self._drop()
                        return
                    buf = self.rfile.read(want)
                    if not buf:
                        return  # the client went away
                    f.write(buf)
                    got += len(buf)
                    store._maybe_slow()
            if inj and inj["kind"] == "500":
                return self._answer(500, b"injected failure\n", record=rec)
            dest = store.part_path(key, part) if part else store.object_path(key)
            os.replace(tmp, dest)
            tmp = None
            self._answer(200, b"", {"ETag": '"' + store.etag_of(dest) + '"'}, record=rec)
        finally:
            if tmp and os.path.exists(tmp):
                os.unlink(tmp)


class _Server(http.server.ThreadingHTTPServer):
    daemon_threads = True
    allow_reuse_address = True


class ObjectStore:
    def __init__(self, certs, directory=None, port=0, host="127.0.0.1", tls=True):
        self.dir = directory or tempfile.mkdtemp(prefix="objstore-")
        self._own_dir = directory is None
        self.secret = secrets.token_bytes(16)
        self.requests = []
        self._lock = threading.Lock()
        self._injections = []
        self._slow = 0.0
        self.httpd = _Server((host, port), _Handler)
        self.httpd.store = self
        if tls:
            ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
            ctx.load_cert_chain(os.path.join(certs, "server.pem"), os.path.join(certs, "server.key"))
            self.httpd.socket = ctx.wrap_socket(self.httpd.socket, server_side=True)
        self.scheme = "https" if tls else "http"
        self.host = host
        self.port = self.httpd.server_address[1]
        self._thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)
        self._thread.start()

    # ---- URLs ----
    def sign(self, method, key, part, exp):
        msg = f"{method}\n{key}\n{part}\n{exp}".encode()
        return hmac.new(self.secret, msg, hashlib.sha256).hexdigest()[:32]

    def url(self, method, key, expires_in=600, part="", host=None):
        exp = str(int(time.time()) + expires_in)
        q = {"exp": exp}
        if part:
            q["part"] = part
            q["uploadId"] = "u-" + key
        q["sig"] = self.sign(method, key, part, exp)
        return f"{self.scheme}://{host or self.host}:{self.port}/o/{key}?{urllib.parse.urlencode(q)}"

    def part_urls(self, key, n, expires_in=600):
        return [self.url("PUT", key, expires_in, part=str(i + 1)) for i in range(n)]

    # ---- objects ----
    def object_path(self, key):
        return os.path.join(self.dir, key)

    def part_path(self, key, part):
        return os.path.join(self.dir, f".part-{key}-{int(part):05d}")

    @staticmethod
    def etag_of(path):
        h = hashlib.md5()
        with open(path, "rb") as f:
            for buf in iter(lambda: f.read(1 << 20), b""):
                h.update(buf)
        return h.hexdigest()

    def put_object(self, key, data):
        with open(self.object_path(key), "wb") as f:
            f.write(data)

    def read_object(self, key):
        with open(self.object_path(key), "rb") as f:
            return f.read()

    def complete(self, key, parts):
        """What the central API does with the agent's parts: [(partNumber, etag)] in
        order, each ETag checked against the part stored; the parts joined into the object."""
        tmp = self.object_path(key) + ".complete"
        with open(tmp, "wb") as out:
            for i, (n, etag) in enumerate(parts):
                if n != i + 1:
                    raise ValueError(f"part numbers out of order: {parts}")
                p = self.part_path(key, n)
                if etag != '"' + self.etag_of(p) + '"':
                    raise ValueError(f"part {n}: etag {etag} does not match")
                with open(p, "rb") as f:
                    shutil.copyfileobj(f, out)
        os.replace(tmp, self.object_path(key))

    # ---- failure injection ----
    def inject(self, kind, method=None, after=0, count=1, delay=0.05):
        """kind "drop" (close the connection after `after` body bytes), "500",
        "norange" (a GET answered whole, 200, whatever its Range), or "slow" (every
        64 KiB chunk waits `delay` seconds until clear())."""
        if kind == "slow":
            self._slow = delay
            return
        with self._lock:
            self._injections.append({"kind": kind, "method": method, "after": after, "count": count})

    def clear(self):
        with self._lock:
            self._injections = []
        self._slow = 0.0

    def _take(self, method):
        with self._lock:
            for inj in self._injections:
                if inj["method"] in (None, method) and inj["count"] > 0:
                    inj["count"] -= 1
                    return dict(inj)
        return None

    def _maybe_slow(self):
        if self._slow:
            time.sleep(self._slow)

    def _record(self, rec):
        with self._lock:
            self.requests.append(rec)

    def stop(self):
        self.httpd.shutdown()
        self.httpd.server_close()
        if self._own_dir:
            shutil.rmtree(self.dir, ignore_errors=True)


def main():
    import argparse
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--certs", required=True)
    ap.add_argument("--port", type=int, default=0)
    ap.add_argument("--dir")
    args = ap.parse_args()
    store = ObjectStore(args.certs, args.dir, args.port)
    print(f"serving {store.scheme}://{store.host}:{store.port}/ from {store.dir}", flush=True)
    for line in sys.stdin:
        words = line.split()
        if len(words) == 2 and words[0] in ("GET", "PUT"):
            print(store.url(words[0], words[1]), flush=True)
    store.stop()


if __name__ == "__main__":
    main()
