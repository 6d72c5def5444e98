# SPDX-License-Identifier: GPL-2.0-or-later
"""The real parts test_registry.py pulls from: Debian's docker-registry on loopback (TLS
from the test CA, optionally htpasswd or token auth), images pushed into it with skopeo,
a token service signing JWTs (python3-cryptography) and a TCP proxy that cuts a
connection. Everything started here is stopped by close()."""
from nodeagent_harness import check  # noqa: E402
import base64
import gzip
import hashlib
import io
import json
import os
import shutil
import socket
import ssl
import subprocess
import tarfile
import threading
import time
import urllib.request

OCI_MANIFEST = "application/vnd.oci.image.manifest.v1+json"
OCI_INDEX = "application/vnd.oci.image.index.v1+json"
DOCKER_MANIFEST = "application/vnd.docker.distribution.manifest.v2+json"
DOCKER_LIST = "application/vnd.docker.distribution.manifest.list.v2+json"
REF_NAME = "org.opencontainers.image.ref.name"
REGISTRY = "/usr/bin/docker-registry"
SKOPEO = "/usr/bin/skopeo"
HTPASSWD = "/usr/bin/htpasswd"
OPENSSL = "/usr/bin/openssl"


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def sha256(data):
    return hashlib.sha256(data).hexdigest()


def _layer(files):
    raw = io.BytesIO()
    with tarfile.open(fileobj=raw, mode="w") as t:
        for name, data in files.items():
            ti = tarfile.TarInfo(name)
            ti.size, ti.mode, ti.mtime = len(data), 0o644, 0
            t.addfile(ti, io.BytesIO(data))
    raw = raw.getvalue()
    return raw, gzip.compress(raw, mtime=0)


def make_layout(path, tag, arch="amd64", big=4 << 20, text=b"hello\n"):
    """A minimal OCI image layout with one image: a layer of `big` random bytes (does
    not compress, so it streams for a while) and a small one."""
    blobs = os.path.join(path, "blobs", "sha256")
    os.makedirs(blobs, exist_ok=True)

    def put(data, media_type):
        h = sha256(data)
        with open(os.path.join(blobs, h), "wb") as f:
            f.write(data)
        return {"mediaType": media_type, "digest": "sha256:" + h, "size": len(data)}

    layers, diff_ids = [], []
    for files in ({"big.bin": os.urandom(big)}, {"hello.txt": text}):
        raw, gz = _layer(files)
        diff_ids.append("sha256:" + sha256(raw))
        layers.append(put(gz, "application/vnd.oci.image.layer.v1.tar+gzip"))
    config = {"architecture": arch, "os": "linux", "config": {"Cmd": ["/bin/sh"]},
              "rootfs": {"type": "layers", "diff_ids": diff_ids}}
    cdesc = put(json.dumps(config).encode(), "application/vnd.oci.image.config.v1+json")
    manifest = {"schemaVersion": 2, "mediaType": OCI_MANIFEST, "config": cdesc, "layers": layers}
    mdesc = put(json.dumps(manifest).encode(), OCI_MANIFEST)
    mdesc["annotations"] = {REF_NAME: tag}
    with open(os.path.join(path, "index.json"), "w") as f:
        json.dump({"schemaVersion": 2, "manifests": [mdesc]}, f)
    with open(os.path.join(path, "oci-layout"), "w") as f:
        f.write('{"imageLayoutVersion":"1.0.0"}')
    return manifest


def mkimage_layout(src, path, tag):
    """tests/harness/mkimage.py's layout when it is there, else our own."""
    tool = os.path.join(src, "tests", "harness", "mkimage.py")
    if os.path.exists(tool):
        r = subprocess.run(["/usr/bin/python3", tool, "--layout", path, "--tag", tag], capture_output=True, text=True)
        if r.returncode == 0:
            return "mkimage.py"
    shutil.rmtree(path, ignore_errors=True)
    make_layout(path, tag, big=256 << 10)
    return "own"


class TokenService:
    """The realm of docker-registry's `auth.token`: checks basic credentials and signs
    an RS256 JWT (x5c header, the signing certificate in the registry's bundle)."""

    def __init__(self, tmp, certs, users, service, issuer):
        from cryptography import x509
        from cryptography.hazmat.primitives import hashes, serialization
        from cryptography.hazmat.primitives.asymmetric import padding
        self.dir = os.path.join(tmp, "token")
        os.makedirs(self.dir, exist_ok=True)
        key, cert = os.path.join(self.dir, "sign.key"), os.path.join(self.dir, "sign.pem")
        subprocess.run([OPENSSL, "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "30", "-subj",
                        "/CN=token signer", "-keyout", key, "-out", cert], check=True, capture_output=True)
        self.bundle = cert
        with open(key, "rb") as f:
            self._key = serialization.load_pem_private_key(f.read(), None)
        with open(cert, "rb") as f:
            der = x509.load_pem_x509_certificate(f.read()).public_bytes(serialization.Encoding.DER)
        self._x5c = base64.b64encode(der).decode()
        self._padding, self._hashes = padding, hashes
        self.users, self.service, self.issuer = users, service, issuer
        self.requests = []
        self.port = free_port()
        self.realm = f"https://127.0.0.1:{self.port}/token"
        import http.server
        svc = self

        class H(http.server.BaseHTTPRequestHandler):
            def log_message(self, *a):
                pass

            def do_GET(self):
                svc.requests.append((self.path, self.headers.get("Authorization")))
                code, body = svc.answer(self.path, self.headers.get("Authorization"))
                data = json.dumps(body).encode()
                self.send_response(code)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

        self.httpd = http.server.ThreadingHTTPServer(("127.0.0.1", self.port), H)
        ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        ctx.load_cert_chain(os.path.join(certs, "server.pem"), os.path.join(certs, "server.key"))
        self.httpd.socket = ctx.wrap_socket(self.httpd.socket, server_side=True)
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)
        self.thread.start()

    @staticmethod
    def _b64(data):
        return base64.urlsafe_b64encode(data).rstrip(b"=").decode()

    def answer(self, path, authorization):
        from urllib.parse import parse_qs, urlparse
        q = parse_qs(urlparse(path).query)
        user = None
        if authorization and authorization.startswith("Basic "):
            u, _, p = base64.b64decode(authorization[6:]).decode().partition(":")
            if self.users.get(u) != p:
                return 401, {"details": "bad credentials"}
            user = u
        access = []
        for scope in q.get("scope", []):
            kind, _, rest = scope.partition(":")
            name, _, actions = rest.rpartition(":")
            if kind == "repository" and user:
                access.append({"type": "repository", "name": name, "actions": actions.split(",")})
        now = int(time.time())
        claims = {"iss": self.issuer, "sub": user or "", "aud": self.service, "exp": now + 300, "nbf": now - 10,
                  "iat": now, "jti": os.urandom(8).hex(), "access": access}
        head = {"typ": "JWT", "alg": "RS256", "x5c": [self._x5c]}
        signing = self._b64(json.dumps(head).encode()) + "." + self._b64(json.dumps(claims).encode())
        sig = self._key.sign(signing.encode(), self._padding.PKCS1v15(), self._hashes.SHA256())
        token = signing + "." + self._b64(sig)
        return 200, {"token": token, "access_token": token, "expires_in": 300}

    def close(self):
        self.httpd.shutdown()
        self.httpd.server_close()


class Registry:
    """docker-registry serving on 127.0.0.1 (TLS unless tls=False)."""

    def __init__(self, tmp, certs, name, tls=True, htpasswd=None, token=None, redirect=None):
        self.port = free_port()
        self.certs, self.tls = certs, tls
        self.root = os.path.join(tmp, name + "-storage")
        os.makedirs(self.root, exist_ok=True)
        self.cert_dir = os.path.join(tmp, "skopeo-certs")
        os.makedirs(self.cert_dir, exist_ok=True)
        shutil.copy(os.path.join(certs, "ca.pem"), os.path.join(self.cert_dir, "ca.crt"))
        lines = ["version: 0.1", "log:", "  level: error", "  accesslog:", "    disabled: true", "storage:",
                 "  filesystem:", f"    rootdirectory: {self.root}", "  delete:", "    enabled: true", "http:",
                 f"  addr: 127.0.0.1:{self.port}", "  secret: not-a-secret"]
        if tls:
            lines += ["  tls:", f"    certificate: {certs}/server.pem", f"    key: {certs}/server.key"]
        if htpasswd:
            lines += ["auth:", "  htpasswd:", "    realm: test", f"    path: {htpasswd}"]
        if token:
            lines += ["auth:", "  token:", f"    realm: {token.realm}", f"    service: {token.service}",
                      f"    issuer: {token.issuer}", f"    rootcertbundle: {token.bundle}"]
        if redirect:
            lines += ["middleware:", "  storage:", "    - name: redirect", "      options:", f"        baseurl: {redirect}"]
        cfg = os.path.join(tmp, name + ".yml")
        with open(cfg, "w") as f:
            f.write("\n".join(lines) + "\n")
        self.log = open(os.path.join(tmp, name + ".log"), "w")
        self.proc = subprocess.Popen([REGISTRY, "serve", cfg], stdout=self.log, stderr=subprocess.STDOUT)
        self.host = f"127.0.0.1:{self.port}"
        self.url = ("https://" if tls else "http://") + self.host
        deadline = time.time() + 20
        while not self._up():
            if self.proc.poll() is not None or time.time() > deadline:
                raise AssertionError(f"docker-registry {name} did not start: see {self.log.name}")
            time.sleep(0.05)

    def _ctx(self):
        return ssl.create_default_context(cafile=os.path.join(self.certs, "ca.pem"))

    def _up(self):
        try:
            urllib.request.urlopen(self.url + "/v2/", timeout=2, context=self._ctx() if self.tls else None)
            return True
        except urllib.error.HTTPError as e:
            return e.code == 401
        except OSError:
            return False

    def push(self, layout, tag, dest, fmt=None, creds=None):
        args = [SKOPEO, "copy", "--quiet", "--insecure-policy"]
        args += ["--dest-cert-dir", self.cert_dir] if self.tls else ["--dest-tls-verify=false"]
        if creds:
            args += ["--dest-creds", creds]
        if fmt:
            args += ["--format", fmt]
        args += [f"oci:{layout}:{tag}", f"docker://{self.host}/{dest}"]
        r = subprocess.run(args, capture_output=True, text=True, timeout=120)
        check(r.returncode == 0, f"skopeo copy to {dest}: {r.stderr}")

    def request(self, method, path, body=None, headers=None):
        req = urllib.request.Request(self.url + path, data=body, method=method, headers=headers or {})
        with urllib.request.urlopen(req, timeout=30, context=self._ctx() if self.tls else None) as r:
            return r.status, dict(r.headers), r.read()

    def manifest(self, name, ref, accept):
        _, headers, body = self.request("GET", f"/v2/{name}/manifests/{ref}", headers={"Accept": accept})
        return body

    def put_manifest(self, name, ref, media_type, body):
        status, headers, _ = self.request("PUT", f"/v2/{name}/manifests/{ref}", body, {"Content-Type": media_type})
        check(status == 201, status)
        return headers.get("Docker-Content-Digest")

    def blob_path(self, digest):
        h = digest.split(":", 1)[1]
        return os.path.join(self.root, "docker", "registry", "v2", "blobs", "sha256", h[:2], h, "data")

    def close(self):
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(5)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self.log.close()


class StorageServer:
    """What a registry redirects blob GETs to (its `redirect` storage middleware): the
    registry's storage directory over HTTPS (or plain http). It records every request;
    with flaky=True it ignores Range and cuts its first answer halfway."""

    def __init__(self, root, certs, tls=True, flaky=False):
        import http.server
        self.root, self.flaky = root, flaky
        self.requests = []
        self.port = free_port()
        self.url = ("https" if tls else "http") + f"://127.0.0.1:{self.port}"
        srv = self

        class H(http.server.BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *a):
                pass

            def do_GET(self):
                path = os.path.normpath(os.path.join(srv.root, self.path.split("?")[0].lstrip("/")))
                srv.requests.append((self.path, self.headers.get("Authorization"), self.headers.get("Range")))
                if not path.startswith(srv.root + os.sep) or not os.path.isfile(path):
                    self.send_error(404)
                    return
                with open(path, "rb") as f:
                    data = f.read()
                self.send_response(200)
                self.send_header("Content-Type", "application/octet-stream")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                if srv.flaky and len(data) > 100000:
                    srv.flaky = False
                    self.wfile.write(data[:len(data) // 2])
                    self.wfile.flush()
                    self.close_connection = True
                    self.connection.shutdown(socket.SHUT_RDWR)
                    return
                self.wfile.write(data)

        self.httpd = http.server.ThreadingHTTPServer(("127.0.0.1", self.port), H)
        if tls:
            ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
            ctx.load_cert_chain(os.path.join(certs, "server.pem"), os.path.join(certs, "server.key"))
            self.httpd.socket = ctx.wrap_socket(self.httpd.socket, server_side=True)
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)
        self.thread.start()

    def close(self):
        self.httpd.shutdown()
        self.httpd.server_close()


class CuttingProxy:
    """Forwards 127.0.0.1:port to target; the first connection is closed after `cut`
    bytes came back from the target (TLS passes through untouched)."""

    def __init__(self, target_port, cut):
        self.target, self.cut = target_port, cut
        self.cuts, self.connections = 0, 0
        self.sock = socket.socket()
        self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(16)
        self.port = self.sock.getsockname()[1]
        self.stopping = False
        self.thread = threading.Thread(target=self._accept, daemon=True)
        self.thread.start()

    def _accept(self):
        while not self.stopping:
            try:
                c, _ = self.sock.accept()
            except OSError:
                return
            self.connections += 1
            first = self.connections == 1
            up = socket.create_connection(("127.0.0.1", self.target))
            threading.Thread(target=self._pipe, args=(c, up, None), daemon=True).start()
            threading.Thread(target=self._pipe, args=(up, c, self.cut if first else None), daemon=True).start()

    def _pipe(self, src, dst, limit):
        sent = 0
        try:
            while True:
                data = src.recv(65536)
                if not data:
                    break
                if limit is not None and sent + len(data) >= limit:
                    dst.sendall(data[:limit - sent])
                    self.cuts += 1
                    break
                dst.sendall(data)
                sent += len(data)
        except OSError:
            pass
        for s in (src, dst):
            try:
                s.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
            s.close()

    def close(self):
        self.stopping = True
        self.sock.close()
