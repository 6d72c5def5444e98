#!/usr/bin/python3
# SPDX-License-Identifier: GPL-2.0-or-later
"""app.files.export and app.files.import end to end (AGENT-API 4.2 and 4.4): the real
agent through the controller link, a real app volume, and the test object store
(tests/harness/objstore.py) over real HTTPS with the test CA. A file written is
exported and its bytes checked in the store, imported back elsewhere and read; a
sha256 mismatch, an expired URL, a plain http:// URL and hostile paths are refused
with nothing kept and nothing outside the volume touched; a connection dropped in the
middle of a GET is resumed."""
import base64
import hashlib
import os
import sys
import time
import uuid

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "..", "harness"))
sys.path.insert(0, os.path.join(HERE, "..", "apps"))
from nodeagent_harness import certs_dir, check, needs, run_cases, wait_for, with_setup  # noqa: E402
from objstore import ObjectStore  # noqa: E402
import test_apps as A  # noqa: E402

MB = 1 << 20


def conf(s):
    c = A.apps_conf(s)
    c["apps"]["transfer_ca_file"] = os.path.join(certs_dir(), "ca.pem")
    c["apps"]["transfer_part_size_mb"] = "5"
    return c


def blob(n, seed):
    out = bytearray()
    h = hashlib.sha256(seed.encode()).digest()
    while len(out) < n:
        h = hashlib.sha256(h).digest()
        out += h * 128
    return bytes(out[:n])


def field_errors(err, dotted):
    node = err.get("details", {})
    for part in dotted.split("."):
        node = node.get(part, {})
    return node.get("_errors", [])


def refused_on(res, field):
    err = A.failed(res, "VALIDATION_ERROR")
    # A NUL anywhere in params is refused by the Job decoder itself, under the same field.
    check(err["httpStatus"] == 422 and field_errors(err, field), (field, err))
    check("sig=" not in str(err), err)
    return err


def b64(data):
    return base64.b64encode(data).decode()


@needs("root")
@with_setup(agent_conf=conf)
def export_import(s):
    A.need_root()
    store = ObjectStore(certs_dir())
    try:
        run(s, store)
    finally:
        store.stop()


def run(s, store):
    app = str(uuid.uuid4())
    cmd = ["/bin/sh", "-c", "ln -s /etc /home/container/etc; echo ready; while read l; do echo \"got $l\"; done"]
    A.ok(A.app_job(s, "app.deploy", app, A.deploy_params(template={"command": cmd}), timeout=120))
    A.ok(A.app_job(s, "app.power", app, {"action": "start"}))
    A.wait_output(s, app, "ready")
    volume = os.path.join(s.agent.state_dir, "apps", "apps", app, "disk", "volume")
    check(os.path.isdir(volume), volume)

    def job(kind, params, timeout=60):
        return A.app_job(s, kind, app, params, timeout)

    # Written through the files kinds, exported: the store holds the same bytes.
    data = blob(3 * MB + 17, "data")
    A.ok(job("app.files.write", {"path": "/data.bin", "contentBase64": b64(data)}))
    t0 = time.time()
    jid = s.controller.enqueue("app.files.export", {"path": "/data.bin", "transfer": {
        "url": store.url("PUT", "data.bin"), "method": "PUT", "headers": {"Content-Type": "application/octet-stream"}}},
        target={"type": "app", "id": app})
    done = s.controller.wait_results([jid], 60)[jid]
    r = A.ok(done["results"][0])
    check(any(p.get("stage") == "transferring" for p in done["progress"]), done["progress"])
    check(r == {"path": "/data.bin", "bytes": len(data), "sha256": hashlib.sha256(data).hexdigest()}, r)
    check(store.read_object("data.bin") == data, "the exported object differs")
    export_s = time.time() - t0

    # Imported back elsewhere, sha256 checked, owned like what the files kinds write.
    A.ok(job("app.files.mkdir", {"path": "/copy"}))
    t0 = time.time()
    r = A.ok(job("app.files.import", {"path": "/copy/data2.bin",
                                      "transfer": {"url": store.url("GET", "data.bin"), "method": "GET",
                                                   "sha256": hashlib.sha256(data).hexdigest()}}))
    import_s = time.time() - t0
    check(r == {"path": "/copy/data2.bin", "bytes": len(data), "sha256": hashlib.sha256(data).hexdigest()}, r)
    copy = os.path.join(volume, "copy", "data2.bin")
    with open(copy, "rb") as f:
        check(f.read() == data, "the imported file differs")
    st, ref = os.stat(copy), os.stat(os.path.join(volume, "data.bin"))
    check((st.st_uid, st.st_gid) == (ref.st_uid, ref.st_gid) and st.st_mode & 0o777 == 0o644, (st, ref))
    # A text object read back with read_text, and seen by the app itself.
    store.put_object("motd.txt", "motd=héllo ✓\n".encode())
    A.ok(job("app.files.import", {"path": "motd.txt", "transfer": {"url": store.url("GET", "motd.txt"),
                                                                     "method": "GET"}}))
    check(A.ok(job("app.files.read_text", {"path": "/motd.txt"}))["content"] == "motd=héllo ✓\n")

    # A sha256 mismatch keeps nothing: a new path stays absent, an existing file untouched.
    bad = {"url": store.url("GET", "data.bin"), "method": "GET", "sha256": "0" * 64}
    refused_on(job("app.files.import", {"path": "/new.bin", "transfer": bad}), "transfer.sha256")
    check(not os.path.exists(os.path.join(volume, "new.bin")), "a mismatched import left a file")
    A.ok(job("app.files.write", {"path": "/copy/keep.txt", "contentBase64": b64(b"keep me")}))
    refused_on(job("app.files.import", {"path": "/copy/keep.txt", "transfer": bad}), "transfer.sha256")
    with open(os.path.join(volume, "copy", "keep.txt"), "rb") as f:
        check(f.read() == b"keep me", "the existing file changed")
    check(sorted(os.listdir(os.path.join(volume, "copy"))) == ["data2.bin", "keep.txt"],
          os.listdir(os.path.join(volume, "copy")))
    check(not [n for n in os.listdir(volume) if n.startswith(".na-")], os.listdir(volume))

    # An expired URL; plain http to a host that is not loopback.
    expired = {"url": store.url("GET", "data.bin"), "method": "GET", "expiresAt": "2020-01-01T00:00:00Z"}
    refused_on(job("app.files.import", {"path": "/late.bin", "transfer": expired}), "transfer.expiresAt")
    plain = {"url": "http://192.0.2.10/o/data.bin?sig=x", "method": "PUT"}
    refused_on(job("app.files.export", {"path": "/data.bin", "transfer": plain}), "transfer.url")
    # Plain http to loopback: only with allow_insecure_http, which this agent does not have.
    loop = {"url": f"http://127.0.0.1:{store.port}/o/data.bin?sig=x", "method": "GET"}
    refused_on(job("app.files.import", {"path": "/late.bin", "transfer": loop}), "transfer.url")
    check(not os.path.exists(os.path.join(volume, "late.bin")))

    # A connection dropped in the middle of the GET: resumed with Range, and it still checks out.
    store.inject("drop", method="GET", after=MB + 4321)
    n = len(store.requests)
    r = A.ok(job("app.files.import", {"path": "/copy/resumed.bin",
                                      "transfer": {"url": store.url("GET", "data.bin"), "method": "GET",
                                                   "sha256": hashlib.sha256(data).hexdigest()}}))
    check(r["bytes"] == len(data), r)
    gets = store.requests[n:]
    check(len(gets) == 2 and gets[1]["range"] == f"bytes={MB + 4321}-" and gets[1]["status"] == 206, gets)
    with open(os.path.join(volume, "copy", "resumed.bin"), "rb") as f:
        check(f.read() == data, "the resumed file differs")

    # Multipart: 11 MiB in parts of transfer_part_size_mb (5): three parts, their ETags in the result.
    big = blob(11 * MB + 3, "big")
    store.put_object("big-src.bin", big)
    A.ok(job("app.files.import", {"path": "/big.bin", "transfer": {"url": store.url("GET", "big-src.bin"),
                                                                   "method": "GET"}}))
    parts = store.part_urls("big.bin", 4)
    r = A.ok(job("app.files.export", {"path": "/big.bin", "transfer": {
        "url": store.url("PUT", "big.bin"), "method": "PUT", "parts": [{"url": u} for u in parts],
        "sha256": hashlib.sha256(big).hexdigest()}}))
    check([p["partNumber"] for p in r["parts"]] == [1, 2, 3] and r["bytes"] == len(big), r)
    store.complete("big.bin", [(p["partNumber"], p["etag"]) for p in r["parts"]])
    check(store.read_object("big.bin") == big, "the multipart object differs")
    refused_on(job("app.files.export", {"path": "/big.bin", "transfer": {
        "url": store.url("PUT", "big.bin"), "method": "PUT", "parts": [{"url": u} for u in parts[:2]]}}),
        "transfer.parts")
    A.ok(job("app.files.delete", {"path": "/big.bin"}))

    # A full volume (the plan's 32 MB quota) keeps nothing, and an existing file stays as it was.
    with open(store.object_path("huge.bin"), "wb") as f:
        f.truncate(40 * MB)
    huge = {"url": store.url("GET", "huge.bin"), "method": "GET"}
    err = A.failed(job("app.files.import", {"path": "/copy/keep.txt", "transfer": huge}), "QUOTA_EXCEEDED")
    check(err["httpStatus"] == 409 and "/copy/keep.txt" in err["error"], err)
    with open(os.path.join(volume, "copy", "keep.txt"), "rb") as f:
        check(f.read() == b"keep me", "the existing file changed")
    A.failed(job("app.files.import", {"path": "/huge.bin", "transfer": huge}), "QUOTA_EXCEEDED")
    check(not os.path.exists(os.path.join(volume, "huge.bin")), "a failed import left a file")
    A.ok(job("app.files.write", {"path": "/after-full.txt", "contentBase64": b64(b"room again")}))

    # A cancelled download keeps nothing.
    store.inject("slow", delay=0.05)
    jid = s.controller.enqueue("app.files.import", {"path": "/copy/cancelled.bin", "transfer": {
        "url": store.url("GET", "data.bin"), "method": "GET"}}, target={"type": "app", "id": app})
    wait_for(lambda: s.controller.admin("GET", f"/admin/jobs/{jid}").get("progress"), 20, "the import's progress")
    s.controller.admin("POST", f"/admin/cancel/{jid}")
    A.failed(s.controller.wait_results([jid], 60)[jid]["results"][0], "JOB_CANCELLED")
    store.clear()
    check(not os.path.exists(os.path.join(volume, "copy", "cancelled.bin")), "a cancelled import left a file")
    check(not [n for n in os.listdir(os.path.join(volume, "copy")) if n.startswith(".na-")], "a temporary is left")

    # Hostile paths: refused on `path`, nothing outside touched.
    canary = os.path.join(s.tmp, "canary")
    with open(canary, "w") as f:
        f.write("untouched")
    get = {"url": store.url("GET", "motd.txt"), "method": "GET"}
    put = {"url": store.url("PUT", "stolen"), "method": "PUT"}
    for path in ["../x", "/../x", "a/../../x", "etc/x", "etc/passwd", "etc" + canary, "", "a\u0000b", "x" * 300]:
        refused_on(job("app.files.import", {"path": path, "transfer": get}), "path")
    for path in ["../etc/passwd", "/../etc/passwd", "etc/passwd", "etc/hostname", "etc" + canary, "."]:
        refused_on(job("app.files.export", {"path": path, "transfer": put}), "path")
    # No /proc in the volume: not found there, never the host's.
    for kind, t in (("app.files.import", get), ("app.files.export", put)):
        A.failed(job(kind, {"path": "/proc/self/root/etc/passwd", "transfer": t}), "FILE_NOT_FOUND")
    check(not os.path.exists("/etc/x") and not os.path.exists(os.path.join(s.tmp, "x")), "written outside")
    check(open(canary).read() == "untouched", "the canary changed")
    check(not os.path.exists(store.object_path("stolen")), "a file outside the volume was exported")
    # A directory is not exported; the root is not a file to import into.
    A.failed(job("app.files.export", {"path": "/copy", "transfer": put}), "INVALID_STATE")
    A.failed(job("app.files.import", {"path": "/copy", "transfer": get}), "INVALID_STATE")
    A.failed(job("app.files.export", {"path": "/missing", "transfer": put}), "FILE_NOT_FOUND")

    # Templates that refuse file access refuse transfers too.
    managed = str(uuid.uuid4())
    A.ok(A.app_job(s, "app.deploy", managed, A.deploy_params(hostname="managed", template={"fileAccess": False}),
                   timeout=120))
    err = A.failed(A.app_job(s, "app.files.export", managed, {"path": "/a", "transfer": put}), "FILE_ACCESS_DISABLED")
    check(err["httpStatus"] == 403, err)
    print(f"export of {len(data)} bytes: {export_s:.2f}s; import: {import_s:.2f}s (through the link, job included)")
    for a in (app, managed):
        A.ok(A.app_job(s, "app.delete", a))
        A.nothing_left(s, a)
    # A clean stop (in a sanitizer build, LeakSanitizer checks the handlers' paths above at exit).
    rc = s.agent.stop()
    check(rc == 0, f"the agent exited with {rc}: {s.agent.log_text()[-3000:]}")


if __name__ == "__main__":
    sys.exit(run_cases({f.__name__: f for f in [export_import]}))
