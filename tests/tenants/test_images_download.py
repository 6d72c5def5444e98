#!/usr/bin/python3
# SPDX-License-Identifier: GPL-2.0-or-later
"""Issue 20, unbounded downloads: what an app's backup import or image pull can make
the node download.

  import_bounded_by_quota  app.backup.import of an object far larger than the app's
                           volume quota: refused as QUOTA_EXCEEDED, from its
                           Content-Length before the body is read, and while receiving
                           when the store sends no length (chunked); nothing is kept
  pull_bounded             an image whose manifest states a 300 MB layer, with [apps]
                           image_pull_max_mb = 64: refused before any blob is fetched

Both servers count the bytes they got out. Before the fix the import read all 300 MB
into the backups directory before adopt found no archive, and the pull downloaded the
whole 300 MB blob before its digest was checked.
"""
import hashlib
import http.server
import json
import os
import ssl
import sys
import threading
import time
import uuid

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "harness"))
sys.path.insert(0, os.path.join(HERE, "..", "agent", "kinds", "apps"))
from nodeagent_harness import certs_dir, check, needs, run_cases, with_setup  # noqa: E402
from test_apps import apps_conf, app_job, deploy_params, failed, need_root, ok  # noqa: E402

BIG = 300 << 20
CHUNK = 1 << 20


class Server:
    """HTTPS on loopback with the test CA's certificate; handler(req) answers, sent counts body bytes."""

    def __init__(self, handler):
        outer = self
        self.sent = 0
        self.paths = []

        class H(http.server.BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *a):
                pass

            def do_GET(self):
                outer.paths.append(self.path)
                try:
                    handler(outer, self)
                except (BrokenPipeError, ConnectionResetError, ssl.SSLError, OSError):
                    self.close_connection = True

        self.httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), H)
        ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        ctx.load_cert_chain(os.path.join(certs_dir(), "server.pem"), os.path.join(certs_dir(), "server.key"))
        self.httpd.socket = ctx.wrap_socket(self.httpd.socket, server_side=True)
        self.url = f"https://127.0.0.1:{self.httpd.server_address[1]}"
        threading.Thread(target=self.httpd.serve_forever, daemon=True).start()

    def zeros(self, req, n, chunked):
        req.send_response(200)
        req.send_header("Content-Type", "application/octet-stream")
        if chunked:
            req.send_header("Transfer-Encoding", "chunked")
        else:
            req.send_header("Content-Length", str(n))
        req.end_headers()
        block = b"\0" * CHUNK
        left = n
        while left:
            k = min(left, CHUNK)
            if chunked:
                req.wfile.write(b"%x\r\n" % k + block[:k] + b"\r\n")
            else:
                req.wfile.write(block[:k])
            self.sent += k
            left -= k
        if chunked:
            req.wfile.write(b"0\r\n\r\n")

    def stop(self):
        self.httpd.shutdown()
        self.httpd.server_close()


def conf(s):
    c = apps_conf(s)
    c["apps"]["transfer_ca_file"] = os.path.join(certs_dir(), "ca.pem")
    return c


@needs("root")
@with_setup(agent_conf=conf)
def import_bounded_by_quota(s):
    need_root()
    srv = Server(lambda o, req: o.zeros(req, BIG, chunked=req.path.startswith("/chunked")))
    try:
        app = str(uuid.uuid4())
        ok(app_job(s, "app.deploy", app, deploy_params(plan={"volumeQuotaMB": 32}), timeout=120))
        backups = os.path.join(s.agent.state_dir, "apps", "backups", app)
        limit = (32 << 20) + (32 << 20) // 64 + (1 << 20)
        for how in ("length", "chunked"):
            srv.sent = 0
            t0 = time.time()
            err = failed(app_job(s, "app.backup.import", app, {"backupId": f"big-{how}", "transfer": {
                "url": f"{srv.url}/{how}/big.tar.zst?sig=x", "method": "GET"}}, timeout=120), "QUOTA_EXCEEDED")
            took = time.time() - t0
            time.sleep(0.5)  # the server notices the closed connection
            print(f"{how}: refused after the server sent {srv.sent:,} of {BIG:,} bytes in {took:.2f}s: "
                  f"{err['error']}")
            check(err["httpStatus"] == 409 and err["details"].get("limitBytes") == limit, err)
            check("big-" + how in err["error"] and "quota" in err["error"], err)
            bound = 24 << 20 if how == "length" else limit + (24 << 20)  # what sockets hold beyond what was read
            check(srv.sent < bound, f"{how}: the server sent {srv.sent} bytes (bound {bound})")
            check(not os.path.isdir(backups) or os.listdir(backups) == [], os.listdir(backups))
            check(ok(app_job(s, "app.backup.list", app)) == [], "a refused import is listed")
        ok(app_job(s, "app.delete", app))
    finally:
        srv.stop()


def registry(o, req):
    """/v2/big/manifests/1: an OCI manifest whose one layer states BIG bytes; blobs are zeros."""
    cfg = json.dumps({"architecture": "amd64", "os": "linux", "config": {},
                      "rootfs": {"type": "layers", "diff_ids": ["sha256:" + "0" * 64]}}).encode()
    cdig = "sha256:" + hashlib.sha256(cfg).hexdigest()
    if req.path in ("/v2/", "/v2"):
        body = b"{}"
    elif req.path == "/v2/big/manifests/1":
        body = json.dumps({"schemaVersion": 2, "mediaType": "application/vnd.oci.image.manifest.v1+json",
                           "config": {"mediaType": "application/vnd.oci.image.config.v1+json", "digest": cdig,
                                      "size": len(cfg)},
                           "layers": [{"mediaType": "application/vnd.oci.image.layer.v1.tar+gzip",
                                       "digest": "sha256:" + "1" * 64, "size": BIG}]}).encode()
        req.send_response(200)
        req.send_header("Content-Type", "application/vnd.oci.image.manifest.v1+json")
        req.send_header("Docker-Content-Digest", "sha256:" + hashlib.sha256(body).hexdigest())
        req.send_header("Content-Length", str(len(body)))
        req.end_headers()
        req.wfile.write(body)
        return
    elif req.path == f"/v2/big/blobs/{cdig}":
        body = cfg
    elif req.path.startswith("/v2/big/blobs/"):
        return o.zeros(req, BIG, chunked=False)
    else:
        req.send_response(404)
        req.send_header("Content-Length", "0")
        req.end_headers()
        return
    req.send_response(200)
    req.send_header("Content-Length", str(len(body)))
    req.end_headers()
    req.wfile.write(body)


def registry_conf(s):
    c = apps_conf(s)
    s.fake_registry = Server(registry)
    c["apps"].update({"registry": s.fake_registry.url, "registry_ca_file": os.path.join(certs_dir(), "ca.pem"),
                      "image_pull_max_mb": "64"})
    return c


@needs("root")
@with_setup(agent_conf=registry_conf)
def pull_bounded(s):
    need_root()
    srv = s.fake_registry
    try:
        app = str(uuid.uuid4())
        t0 = time.time()
        err = failed(app_job(s, "app.deploy", app, deploy_params(template={"image": "big:1"}), timeout=120),
                     "DRIVER_ERROR")
        print(f"pull refused in {time.time() - t0:.2f}s after {srv.sent:,} blob bytes: {err['error']}")
        check("image_pull_max_mb" in err["error"] and err["details"].get("reason") == "image-too-large", err)
        check(err["details"].get("limitBytes") == 64 << 20, err)
        check(not [p for p in srv.paths if "/blobs/" in p], f"blobs fetched: {srv.paths}")
        check(srv.sent == 0, srv.sent)
        images = os.path.join(s.tmp, "app-images", "big", "blobs", "sha256")
        check(not os.path.isdir(images) or not [f for f in os.listdir(images) if os.path.getsize(
            os.path.join(images, f)) > 1 << 20], "a blob was kept")
        check(not os.path.exists(os.path.join(s.agent.state_dir, "apps", "apps", app)), "the deploy left files")
    finally:
        srv.stop()


if __name__ == "__main__":
    sys.exit(run_cases({"import_bounded_by_quota": import_bounded_by_quota, "pull_bounded": pull_bounded}))
