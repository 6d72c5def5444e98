#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-2.0-or-later
"""The transfer client (transfer/) against the test object store
(tests/harness/objstore.py) over real HTTPS with the test CA: GET resumed with Range
after a dropped connection, PUT retried after a 500 and a drop, multipart uploads with
ETags, sha256 checked, expired URLs, plain http, the wrong CA, a signature refused
(the message names the host, never the query), a cancelled transfer.

    python3 tests/transfer/test_transfer.py CASE    (CTest runs each case)
"""
import hashlib
import json
import os
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "harness"))
from nodeagent_harness import BUILD, certs_dir, check, run_cases  # noqa: E402
from objstore import ObjectStore  # noqa: E402

CLI = os.path.join(BUILD, "tests", "transfer", "transfer-cli")
MB = 1 << 20


def cli(op, transfer, path, *opts, ca=True):
    args = [CLI, op, json.dumps(transfer), path]
    if ca:
        args += ["--ca", os.path.join(certs_dir(), "ca.pem")]
    args += [str(o) for o in opts]
    p = subprocess.run(args, capture_output=True, text=True, timeout=60)
    out = json.loads(p.stdout.strip().splitlines()[-1])
    return p.returncode, out, p.stderr


def blob(n, seed=1):
    out = bytearray()
    h = hashlib.sha256(str(seed).encode()).digest()
    while len(out) < n:
        h = hashlib.sha256(h).digest()
        out += h * 64
    return bytes(out[:n])


class Env:
    def __init__(self, tls=True):
        self.tmp = tempfile.mkdtemp(prefix="transfer-test-")
        self.store = ObjectStore(certs_dir(), tls=tls)

    def path(self, name):
        return os.path.join(self.tmp, name)

    def write(self, name, data):
        with open(self.path(name), "wb") as f:
            f.write(data)
        return self.path(name)

    def read(self, name):
        with open(self.path(name), "rb") as f:
            return f.read()

    def close(self):
        self.store.stop()
        subprocess.run(["rm", "-rf", self.tmp])


def case(fn):
    def run():
        e = Env()
        try:
            fn(e)
        finally:
            e.close()
    run.__name__ = fn.__name__
    return run


def field_errors(out, dotted):
    node = out.get("details", {})
    for part in dotted.split("."):
        node = node.get(part, {})
    return node.get("_errors", [])


@case
def get_resumes_after_drop(e):
    data = blob(3 * MB)
    e.store.put_object("a.bin", data)
    e.store.inject("drop", method="GET", after=MB + 12345)
    t = {"url": e.store.url("GET", "a.bin"), "method": "GET", "sha256": hashlib.sha256(data).hexdigest().upper()}
    rc, out, err = cli("get", t, e.path("a.out"), "--backoff-ms", 50)
    check(rc == 0, (out, err))
    check(out["bytes"] == len(data) and out["sha256"] == hashlib.sha256(data).hexdigest(), out)
    check(e.read("a.out") == data, "the bytes differ")
    gets = [r for r in e.store.requests if r["method"] == "GET"]
    check(len(gets) == 2 and gets[0].get("dropped_after") == MB + 12345, gets)
    check(gets[1]["range"] == f"bytes={MB + 12345}-" and gets[1]["status"] == 206, gets)
    check("progress transferring 100 " in err, err)
    # A store that ignores Range on the retry: the file starts over and still checks out.
    e.store.inject("drop", method="GET", after=2 * MB + 1)
    e.store.inject("norange", method="GET")
    n = len(e.store.requests)
    rc, out, err = cli("get", t, e.path("c.out"), "--backoff-ms", 50)
    check(rc == 0 and e.read("c.out") == data, (out, err))
    gets = e.store.requests[n:]
    check([(r["range"], r["status"]) for r in gets] == [(None, 200), (f"bytes={2 * MB + 1}-", 200)], gets)
    # A GET into a file that held something: truncated first.
    e.write("b.out", b"x" * (5 * MB))
    rc, out, err = cli("get", t, e.path("b.out"))
    check(rc == 0 and e.read("b.out") == data, out)


@case
def get_sha256_mismatch(e):
    e.store.put_object("a.bin", b"hello")
    t = {"url": e.store.url("GET", "a.bin"), "method": "GET", "sha256": "0" * 64}
    rc, out, _ = cli("get", t, e.path("a.out"))
    check(rc == 1 and out["code"] == "VALIDATION_ERROR" and field_errors(out, "transfer.sha256"), out)
    check("sig=" not in json.dumps(out), out)


@case
def put_retried(e):
    data = blob(2 * MB + 7, seed=2)
    src = e.write("src", data)
    e.store.inject("500", method="PUT")
    e.store.inject("drop", method="PUT", after=300000)
    t = {"url": e.store.url("PUT", "up.bin"), "method": "PUT", "headers": {"Content-Type": "application/octet-stream"}}
    rc, out, err = cli("put", t, src, "--backoff-ms", 50)
    check(rc == 0, (out, err))
    check(out["sha256"] == hashlib.sha256(data).hexdigest() and out["bytes"] == len(data), out)
    check(e.store.read_object("up.bin") == data, "the object differs")
    statuses = [r["status"] for r in e.store.requests if r["method"] == "PUT"]
    check(statuses == [500, None, 200], statuses)
    # sha256 given and wrong: refused after the upload.
    t["sha256"] = "1" * 64
    rc, out, _ = cli("put", t, src)
    check(rc == 1 and field_errors(out, "transfer.sha256"), out)


@case
def put_multipart(e):
    data = blob(int(2.5 * MB), seed=3)
    src = e.write("src", data)
    urls = e.store.part_urls("big.bin", 4)
    e.store.inject("drop", method="PUT", after=100000)
    t = {"url": e.store.url("PUT", "big.bin"), "method": "PUT", "parts": [{"url": u} for u in urls],
         "sha256": hashlib.sha256(data).hexdigest()}
    rc, out, err = cli("put", t, src, "--part-size", MB, "--backoff-ms", 50)
    check(rc == 0, (out, err))
    parts = out["parts"]
    check([p["partNumber"] for p in parts] == [1, 2, 3], parts)
    sent = [(r["part"], r["status"]) for r in e.store.requests if r["method"] == "PUT"]
    check(sent == [("1", None), ("1", 200), ("2", 200), ("3", 200)], sent)  # only the dropped part again
    e.store.complete("big.bin", [(p["partNumber"], p["etag"]) for p in parts])
    check(e.store.read_object("big.bin") == data, "the joined object differs")
    check(out["sha256"] == hashlib.sha256(data).hexdigest(), out)
    # Too few part URLs: refused before a byte is sent.
    n = len(e.store.requests)
    t["parts"] = t["parts"][:2]
    rc, out, _ = cli("put", t, src, "--part-size", MB)
    check(rc == 1 and field_errors(out, "transfer.parts"), out)
    check(len(e.store.requests) == n, "a request went out")
    # An empty file is one empty part.
    src0 = e.write("empty", b"")
    t["parts"] = [{"url": u} for u in e.store.part_urls("zero.bin", 1)]
    rc, out, _ = cli("put", t | {"sha256": hashlib.sha256(b"").hexdigest()}, src0, "--part-size", MB)
    check(rc == 0 and len(out["parts"]) == 1, out)


@case
def refusals(e):
    e.store.put_object("a.bin", b"data")
    good = e.store.url("GET", "a.bin")
    # Signed for PUT, used for GET: 403, the host named, never the query.
    rc, out, _ = cli("get", {"url": e.store.url("PUT", "a.bin"), "method": "GET"}, e.path("o"))
    text = json.dumps(out)
    check(rc == 1 and out["code"] == "DRIVER_ERROR" and out["httpStatus"] == 502, out)
    check(f"127.0.0.1:{e.store.port}" in out["error"] or f"127.0.0.1:{e.store.port}" in text, out)
    check("sig=" not in text and "exp=" not in text and "HTTP 403" in text, out)
    # The wrong CA: TLS is verified.
    rc, out, _ = cli("get", {"url": good, "method": "GET"}, e.path("o"), "--ca",
                     os.path.join(certs_dir(), "other-ca.pem"), ca=False)
    check(rc == 1 and out["code"] == "DRIVER_ERROR" and "sig=" not in json.dumps(out), out)
    # Expired before the start.
    t = {"url": good, "method": "GET", "expiresAt": "2001-01-01T00:00:00Z"}
    rc, out, _ = cli("get", t, e.path("o"))
    check(rc == 1 and field_errors(out, "transfer.expiresAt"), out)
    # Not yet expired at decode, expired when used (the driver checks again).
    t = {"url": good, "method": "GET", "expiresAt": "2001-01-01T00:00:00Z"}
    rc, out, _ = cli("get", t, e.path("o"), "--decode-now-ms", 978307200000 - 1000)
    check(rc == 1 and field_errors(out, "transfer.expiresAt"), out)
    # Plain http to a non-loopback host: refused by the decoder.
    t = {"url": "http://192.0.2.1/o/a.bin?sig=x", "method": "GET"}
    rc, out, _ = cli("get", t, e.path("o"), "--insecure")
    check(rc == 1 and field_errors(out, "transfer.url"), out)


@case
def expires_while_retrying(e):
    e.store.put_object("a.bin", b"data")
    e.store.inject("500", method="GET", count=100)
    exp = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(time.time() + 2))
    t = {"url": e.store.url("GET", "a.bin"), "method": "GET", "expiresAt": exp}
    t0 = time.time()
    rc, out, _ = cli("get", t, e.path("o"), "--backoff-ms", 400, "--retries", 10)
    check(rc == 1 and field_errors(out, "transfer.expiresAt"), out)
    check("retried" in json.dumps(out), out)
    check(time.time() - t0 < 10, "took too long")


@case
def plain_http_loopback(e):
    e.store.stop()
    e.store = ObjectStore(certs_dir(), tls=False)
    e.store.put_object("a.bin", b"plain")
    t = {"url": e.store.url("GET", "a.bin"), "method": "GET"}
    rc, out, _ = cli("get", t, e.path("o"))
    check(rc == 1 and field_errors(out, "transfer.url"), out)
    rc, out, _ = cli("get", t, e.path("o"), "--insecure")
    check(rc == 0 and e.read("o") == b"plain", out)


@case
def cancelled(e):
    e.store.put_object("a.bin", blob(2 * MB))
    e.store.inject("slow", delay=0.05)
    t = {"url": e.store.url("GET", "a.bin"), "method": "GET"}
    t0 = time.time()
    rc, out, _ = cli("get", t, e.path("o"), "--cancel-after-ms", 300)
    check(rc == 1 and out["code"] == "JOB_CANCELLED", out)
    check(time.time() - t0 < 3, "the cancel took too long")
    # An upload too.
    src = e.write("src", blob(2 * MB))
    t0 = time.time()
    rc, out, _ = cli("put", {"url": e.store.url("PUT", "b.bin"), "method": "PUT"}, src, "--cancel-after-ms", 300)
    check(rc == 1 and out["code"] == "JOB_CANCELLED", out)
    check(time.time() - t0 < 3, "the cancel took too long")
    check(not os.path.exists(e.store.object_path("b.bin")), "a cancelled upload was stored")


@case
def retries_give_up(e):
    e.store.put_object("a.bin", b"data")
    e.store.inject("500", method="GET", count=100)
    rc, out, _ = cli("get", {"url": e.store.url("GET", "a.bin"), "method": "GET"}, e.path("o"),
                     "--backoff-ms", 10, "--retries", 2)
    check(rc == 1 and out["code"] == "DRIVER_ERROR" and "after 3 tries" in out["error"], out)
    check(out["details"]["reason"] == "HTTP 500", out)
    check(len([r for r in e.store.requests if r["method"] == "GET"]) == 3, e.store.requests)


CASES = {f.__name__: f for f in [get_resumes_after_drop, get_sha256_mismatch, put_retried, put_multipart, refusals,
                                 expires_while_retrying, plain_http_loopback, cancelled, retries_give_up]}

if __name__ == "__main__":
    sys.exit(run_cases(CASES))
