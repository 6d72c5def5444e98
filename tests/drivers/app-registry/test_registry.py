#!/usr/bin/python3
# SPDX-License-Identifier: GPL-2.0-or-later
"""app_registry_pull against a real registry on loopback (Debian's docker-registry over
TLS from a test CA, images pushed with skopeo), through tests/drivers/app-registry/registry-pull.

    test_registry.py REGISTRY_PULL CASE      exit 0 pass, 1 fail, 77 a needed binary is missing
"""
import hashlib
import json
import os
import shutil
import subprocess
import sys
import tempfile

sys.dont_write_bytecode = True
HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(HERE, "..", "..", "harness"))
import registry_fixture as fx  # noqa: E402
from nodeagent_harness import SRC, certs_dir, check  # noqa: E402

TOOL = None


class Skip(Exception):
    pass


def need(*paths):
    for p in paths:
        if not os.path.exists(p):
            raise Skip(f"{p} is not installed")


def pull(images, image, url, ca=None, user=None, password=None, insecure=False, stop_at=None, resolve=False):
    args = [TOOL, "--url", url] + (["--resolve"] if resolve else [])
    if ca:
        args += ["--ca", ca]
    if user is not None:
        args += ["--user", user, "--password", password]
    if insecure:
        args += ["--insecure"]
    if stop_at is not None:
        args += ["--stop-at", str(stop_at)]
    r = subprocess.run(args + [images, image], capture_output=True, text=True, timeout=120)
    out = json.loads(r.stdout)
    check((r.returncode == 0) == ("digest" in out), (r.returncode, r.stdout, r.stderr))
    return out, r.stderr


def fails(out, code, reason=None):
    check(out.get("code") == code, out)
    if reason:
        check(out.get("details", {}).get("reason") == reason, out)
    return out


def check_layout(layout, tag, digest):
    """Every blob matches its name, no temporary file is left, index.json names the
    manifest (by tag, or without annotation for a digest pull) and it is complete."""
    blobs = os.path.join(layout, "blobs", "sha256")
    names = os.listdir(blobs)
    for n in names:
        check(not n.startswith("."), f"temporary file left: {n}")
        with open(os.path.join(blobs, n), "rb") as f:
            check(hashlib.sha256(f.read()).hexdigest() == n, f"blob {n} does not match its digest")
    with open(os.path.join(layout, "oci-layout")) as f:
        check(json.load(f)["imageLayoutVersion"] == "1.0.0")
    with open(os.path.join(layout, "index.json")) as f:
        index = json.load(f)
    entries = [m for m in index["manifests"] if m["digest"] == digest]
    if tag:
        check([m for m in index["manifests"] if m.get("annotations", {}).get(fx.REF_NAME) == tag] == entries, index)
    check(len(entries) == 1, index)
    with open(os.path.join(blobs, digest.split(":")[1]), "rb") as f:
        raw = f.read()
    check(entries[0]["size"] == len(raw))
    manifest = json.loads(raw)
    check(entries[0]["mediaType"] == manifest["mediaType"])
    for d in [manifest["config"]] + manifest["layers"]:
        check(d["digest"].split(":")[1] in names, f"{d['digest']} missing")
    return manifest


def inodes(layout):
    blobs = os.path.join(layout, "blobs", "sha256")
    return {n: os.stat(os.path.join(blobs, n)).st_ino for n in os.listdir(blobs)}


class Env:
    """A temporary directory, the test CA, and what a case starts (stopped by close)."""

    def __init__(self):
        need(fx.REGISTRY, fx.SKOPEO, fx.OPENSSL)
        self.tmp = tempfile.mkdtemp(prefix="na-registry-")
        self.certs = certs_dir()
        self.ca = os.path.join(self.certs, "ca.pem")
        self.started = []

    def start(self, thing):
        self.started.append(thing)
        return thing

    def registry(self, name="registry", **kw):
        return self.start(fx.Registry(self.tmp, self.certs, name, **kw))

    def layout(self, name, tag, **kw):
        path = os.path.join(self.tmp, "src-" + name)
        fx.make_layout(path, tag, **kw)
        return path

    def images(self, name):
        return os.path.join(self.tmp, "images-" + name)

    def close(self, ok):
        for thing in reversed(self.started):
            thing.close()
        if ok:
            shutil.rmtree(self.tmp, ignore_errors=True)
        else:
            print(f"left {self.tmp} for a look")


def case_tag_and_digest(env):
    reg = env.registry()
    src = os.path.join(env.tmp, "src-mkimage")
    how = fx.mkimage_layout(SRC, src, "1.0")
    print(f"source layout by {how}")
    reg.push(src, "1.0", "test/app:1.0")
    reg.push(src, "1.0", "test/app:docker", fmt="v2s2")

    images = env.images("a")
    out, progress = pull(images, "test/app:1.0", reg.url, ca=env.ca, resolve=True)
    # The store's reader (app_image_resolve, every layer hashed) finds the same image.
    check(out.pop("resolved") == out["digest"] and out.pop("resolvedBytes") == out["bytes"], out)
    layout = os.path.join(images, "test", "app")
    m = check_layout(layout, "1.0", out["digest"])
    check(m["mediaType"] == fx.OCI_MANIFEST)
    check(out["bytes"] == sum(d["size"] for d in [m["config"]] + m["layers"]) + \
        os.path.getsize(os.path.join(layout, "blobs", "sha256", out["digest"][7:])))
    check("pulling-image 100 " in progress and " of " in progress, progress)
    # skopeo reads what we wrote.
    r = subprocess.run([fx.SKOPEO, "inspect", "--raw", f"oci:{layout}:1.0"], capture_output=True, timeout=60)
    check(r.returncode == 0 and hashlib.sha256(r.stdout).hexdigest() == out["digest"][7:], r.stderr)

    # Again: nothing is downloaded again (same files), the entry stays single.
    before = inodes(layout)
    again, _ = pull(images, "test/app:1.0", reg.url, ca=env.ca)
    check(again == out and inodes(layout) == before)
    check_layout(layout, "1.0", out["digest"])

    # A blob damaged in the store is fetched again.
    victim = m["layers"][-1]["digest"][7:]
    with open(os.path.join(layout, "blobs", "sha256", victim), "r+b") as f:
        f.write(b"X")
    pull(images, "test/app:1.0", reg.url, ca=env.ca)
    check_layout(layout, "1.0", out["digest"])

    # The Docker schema 2 form of the same image, as a second tag of the layout.
    docker, _ = pull(images, "test/app:docker", reg.url, ca=env.ca, resolve=True)
    check(docker["resolved"] == docker["digest"], docker)
    dm = check_layout(layout, "docker", docker["digest"])
    check(dm["mediaType"] == fx.DOCKER_MANIFEST)
    check_layout(layout, "1.0", out["digest"])

    # By digest into a fresh store: the entry has no tag.
    images2 = env.images("b")
    by_digest, _ = pull(images2, "test/app@" + out["digest"], reg.url, ca=env.ca, resolve=True)
    check(by_digest.pop("resolved") == out["digest"] and by_digest.pop("resolvedBytes") == out["bytes"])
    check(by_digest == out)
    check_layout(os.path.join(images2, "test", "app"), None, out["digest"])
    with open(os.path.join(images2, "test", "app", "index.json")) as f:
        check("annotations" not in json.load(f)["manifests"][0])

    # A digest the registry does not have, and a path prefix in the URL that is not a registry.
    fails(pull(images2, "test/app@sha256:" + "0" * 64, reg.url, ca=env.ca)[0], "IMAGE_NOT_FOUND")
    fails(pull(images2, "test/app:1.0", reg.url + "/prefix/", ca=env.ca)[0], "IMAGE_NOT_FOUND")


def _push_index(reg, name, tag, media_type, children):
    """An index / manifest list over pushed single-platform manifests."""
    entries = []
    for ref, arch, accept in children:
        raw = reg.manifest(name, ref, accept)
        entries.append({"mediaType": accept, "digest": "sha256:" + hashlib.sha256(raw).hexdigest(), "size": len(raw),
                        "platform": {"architecture": arch, "os": "linux"}})
    body = json.dumps({"schemaVersion": 2, "mediaType": media_type, "manifests": entries}).encode()
    digest = reg.put_manifest(name, tag, media_type, body)
    check(digest == "sha256:" + hashlib.sha256(body).hexdigest())
    return digest, {e["platform"]["architecture"]: e["digest"] for e in entries}


def case_index(env):
    reg = env.registry()
    arm = env.layout("arm", "1", arch="arm64", big=64 << 10, text=b"arm\n")
    amd = env.layout("amd", "1", arch="amd64", big=64 << 10, text=b"amd\n")
    for fmt, suffix in ((None, "oci"), ("v2s2", "docker")):
        reg.push(arm, "1", f"test/multi:arm64-{suffix}", fmt=fmt)
        reg.push(amd, "1", f"test/multi:amd64-{suffix}", fmt=fmt)
    for tag, media, child in (("oci", fx.OCI_INDEX, fx.OCI_MANIFEST), ("list", fx.DOCKER_LIST, fx.DOCKER_MANIFEST)):
        suffix = "oci" if tag == "oci" else "docker"
        idx, by_arch = _push_index(reg, "test/multi", tag, media,
                                   [(f"arm64-{suffix}", "arm64", child), (f"amd64-{suffix}", "amd64", child)])
        images = env.images(tag)
        layout = os.path.join(images, "test", "multi")
        out, _ = pull(images, f"test/multi:{tag}", reg.url, ca=env.ca, resolve=True)
        check(out["digest"] == by_arch["amd64"] and out.pop("resolved") == out["digest"], (out, by_arch))
        out.pop("resolvedBytes")
        m = check_layout(layout, tag, out["digest"])
        with open(os.path.join(layout, "blobs", "sha256", m["config"]["digest"][7:])) as f:
            check(json.load(f)["architecture"] == "amd64")
        blobs = os.listdir(os.path.join(layout, "blobs", "sha256"))
        check(by_arch["arm64"][7:] not in blobs)
        check(idx[7:] in blobs)  # the index itself is kept
        # By the index's digest: the same image; the entry (without a tag) names the index,
        # so "test/multi@<index digest>" resolves in the layout.
        images2 = env.images(tag + "-digest")
        layout2 = os.path.join(images2, "test", "multi")
        out2, _ = pull(images2, f"test/multi@{idx}", reg.url, ca=env.ca, resolve=True)
        check(out2.pop("resolved") == out["digest"], out2)  # the reader picks the same platform manifest
        out2.pop("resolvedBytes")
        check(out2 == out)
        with open(os.path.join(layout2, "index.json")) as f:
            entries = json.load(f)["manifests"]
        check([(e["digest"], e["mediaType"], "annotations" in e) for e in entries] == [(idx, media, False)], entries)
        blobs = os.listdir(os.path.join(layout2, "blobs", "sha256"))
        check(idx[7:] in blobs and out["digest"][7:] in blobs and by_arch["arm64"][7:] not in blobs)
        for name in blobs:
            with open(os.path.join(layout2, "blobs", "sha256", name), "rb") as f:
                check(hashlib.sha256(f.read()).hexdigest() == name)


def case_not_found(env):
    reg = env.registry()
    reg.push(env.layout("a", "1.0", big=1024), "1.0", "test/app:1.0")
    images = env.images("a")
    for image in ("test/app:nope", "nosuch/repo:1.0"):
        out = fails(pull(images, image, reg.url, ca=env.ca)[0], "IMAGE_NOT_FOUND")
        check(image in out["error"] and reg.url in out["error"], out)
        check(out["details"]["image"] == image and out["details"]["registry"] == reg.url)
        check(out["httpStatus"] == 404)
    check(not os.path.exists(os.path.join(images, "test")), "a refused pull left the layout")
    check(not os.path.exists(os.path.join(images, "nosuch")))


def case_tls(env):
    reg = env.registry()
    reg.push(env.layout("a", "1.0", big=1024), "1.0", "test/app:1.0")
    images = env.images("a")
    # An unrelated CA, and the system's bundle: both refuse the test CA's certificate.
    out = fails(pull(images, "test/app:1.0", reg.url, ca=os.path.join(env.certs, "other-ca.pem"))[0], "DRIVER_ERROR", "tls")
    check(reg.url in out["error"] and "test/app:1.0" in out["error"], out)
    fails(pull(images, "test/app:1.0", reg.url)[0], "DRIVER_ERROR", "tls")
    check(not os.path.exists(os.path.join(images, "test")))
    # Plain http: refused without the option, and refused to a host that is not loopback.
    plain = env.registry("plain", tls=False)
    plain.push(env.layout("b", "1.0", big=1024), "1.0", "test/app:1.0")
    fails(pull(images, "test/app:1.0", plain.url)[0], "VALIDATION_ERROR")
    fails(pull(images, "test/app:1.0", "http://registry.example.net", insecure=True)[0], "VALIDATION_ERROR")
    fails(pull(images, "test/app:1.0", "ftp://127.0.0.1/")[0], "VALIDATION_ERROR")
    out, _ = pull(images, "test/app:1.0", plain.url, insecure=True)
    check_layout(os.path.join(images, "test", "app"), "1.0", out["digest"])


def case_basic_auth(env):
    need(fx.HTPASSWD)
    htpasswd = os.path.join(env.tmp, "htpasswd")
    subprocess.run([fx.HTPASSWD, "-B", "-b", "-c", htpasswd, "puller", "s3cret:with colon"], check=True,
                   capture_output=True)
    reg = env.registry(htpasswd=htpasswd)
    reg.push(env.layout("a", "1.0", big=1024), "1.0", "test/app:1.0", creds="puller:s3cret:with colon")
    images = env.images("a")
    out = fails(pull(images, "test/app:1.0", reg.url, ca=env.ca)[0], "DRIVER_ERROR", "unauthorized")
    check("none are configured" in out["error"], out)
    out = fails(pull(images, "test/app:1.0", reg.url, ca=env.ca, user="puller", password="wrong")[0],
                "DRIVER_ERROR", "unauthorized")
    check("test/app:1.0" in out["error"] and reg.url in out["error"])
    check(not os.path.exists(os.path.join(images, "test")))
    fails(pull(images, "test/app:1.0", reg.url, ca=env.ca, user="pul:ler", password="x")[0], "VALIDATION_ERROR")
    out, _ = pull(images, "test/app:1.0", reg.url, ca=env.ca, user="puller", password="s3cret:with colon")
    check_layout(os.path.join(images, "test", "app"), "1.0", out["digest"])


def case_token_auth(env):
    try:
        import cryptography  # noqa: F401
    except ImportError:
        raise Skip("python3-cryptography is not installed")
    token = env.start(fx.TokenService(env.tmp, env.certs, {"puller": "pw"}, "test-registry", "test-issuer"))
    reg = env.registry(token=token)
    reg.push(env.layout("a", "1.0", big=256 << 10), "1.0", "test/app:1.0", creds="puller:pw")
    images = env.images("a")
    token.requests.clear()
    out, _ = pull(images, "test/app:1.0", reg.url, ca=env.ca, user="puller", password="pw")
    check_layout(os.path.join(images, "test", "app"), "1.0", out["digest"])
    check(token.requests and all(a and a.startswith("Basic ") for _, a in token.requests), token.requests)
    check("scope=repository%3Atest%2Fapp%3Apull" in token.requests[0][0], token.requests)
    images2 = env.images("b")
    fails(pull(images2, "test/app:1.0", reg.url, ca=env.ca, user="puller", password="nope")[0],
          "DRIVER_ERROR", "unauthorized")
    fails(pull(images2, "test/app:1.0", reg.url, ca=env.ca)[0], "DRIVER_ERROR", "unauthorized")
    check(not os.path.exists(os.path.join(images2, "test")))


def case_corrupt(env):
    reg = env.registry()
    reg.push(env.layout("good", "good", big=64 << 10, text=b"good\n"), "good", "test/c:good")
    bad_src = env.layout("bad", "bad", big=1 << 20, text=b"bad\n")
    reg.push(bad_src, "bad", "test/c:bad")
    with open(os.path.join(bad_src, "index.json")) as f:
        mdigest = json.load(f)["manifests"][0]["digest"]
    with open(os.path.join(bad_src, "blobs", "sha256", mdigest[7:])) as f:
        big = json.load(f)["layers"][0]["digest"]
    with open(reg.blob_path(big), "r+b") as f:  # same size, other content
        f.seek(1000)
        f.write(b"corrupted")

    # Into a fresh store: refused, and nothing of the layout is left.
    images = env.images("fresh")
    out = fails(pull(images, "test/c:bad", reg.url, ca=env.ca)[0], "DRIVER_ERROR", "digest-mismatch")
    check(big in out["error"], out)
    check(not os.path.exists(os.path.join(images, "test")), "a refused pull left the layout")

    # Into a layout that holds another tag: its blobs and index.json are as before.
    images = env.images("existing")
    good, _ = pull(images, "test/c:good", reg.url, ca=env.ca)
    layout = os.path.join(images, "test", "c")
    before = inodes(layout)
    with open(os.path.join(layout, "index.json")) as f:
        index_before = f.read()
    fails(pull(images, "test/c:bad", reg.url, ca=env.ca)[0], "DRIVER_ERROR", "digest-mismatch")
    check(inodes(layout) == before, (sorted(before), sorted(inodes(layout))))
    with open(os.path.join(layout, "index.json")) as f:
        check(f.read() == index_before)
    check_layout(layout, "good", good["digest"])

    # A blob the manifest names and the registry lost: a broken image, nothing kept.
    lost_src = env.layout("lost", "1", big=64 << 10, text=b"lost\n")
    reg.push(lost_src, "1", "test/lost:1")
    with open(os.path.join(lost_src, "index.json")) as f:
        ldigest = json.load(f)["manifests"][0]["digest"]
    with open(os.path.join(lost_src, "blobs", "sha256", ldigest[7:])) as f:
        lost = json.load(f)["layers"][1]["digest"]
    os.unlink(reg.blob_path(lost))
    images = env.images("lost")
    out = fails(pull(images, "test/lost:1", reg.url, ca=env.ca)[0], "DRIVER_ERROR", "blob-unknown")
    check(lost in out["error"], out)
    check(not os.path.exists(os.path.join(images, "test")))

    # A manifest changed in the registry's storage (still JSON, same size): its digest
    # no longer matches Docker-Content-Digest (by tag) or the reference (by digest).
    man_src = env.layout("man", "1", big=1024, text=b"manifest\n")
    reg.push(man_src, "1", "test/m:1")
    with open(os.path.join(man_src, "index.json")) as f:
        mdigest = json.load(f)["manifests"][0]["digest"]
    with open(reg.blob_path(mdigest), "rb") as f:
        raw = f.read()
    with open(os.path.join(man_src, "blobs", "sha256", mdigest[7:])) as f:
        cdigest = json.load(f)["config"]["digest"]
    other = cdigest[:-1] + ("0" if cdigest[-1] != "0" else "1")
    with open(reg.blob_path(mdigest), "wb") as f:
        f.write(raw.replace(cdigest.encode(), other.encode()))
    images = env.images("manifest")
    for image in ("test/m:1", "test/m@" + mdigest):
        fails(pull(images, image, reg.url, ca=env.ca)[0], "DRIVER_ERROR", "digest-mismatch")
    check(not os.path.exists(os.path.join(images, "test")))


def case_dropped(env):
    reg = env.registry()
    src = env.layout("a", "1.0", big=6 << 20)
    reg.push(src, "1.0", "test/app:1.0")
    proxy = env.start(fx.CuttingProxy(reg.port, 2 << 20))
    images = env.images("a")
    out, progress = pull(images, "test/app:1.0", f"https://127.0.0.1:{proxy.port}", ca=env.ca)
    check(proxy.cuts == 1 and proxy.connections >= 2, (proxy.cuts, proxy.connections))
    check_layout(os.path.join(images, "test", "app"), "1.0", out["digest"])
    # Resumed, not restarted: the byte count never went back.
    done = [float(line.split()[2]) for line in progress.splitlines() if line.count(" of ") == 1]
    check(done == sorted(done), progress)


def case_redirect(env):
    """Blob GETs redirected to storage: credentials stay with the registry, a drop
    where the storage ignores Range restarts the blob, a redirect to http is refused."""
    need(fx.HTPASSWD)
    htpasswd = os.path.join(env.tmp, "htpasswd")
    subprocess.run([fx.HTPASSWD, "-B", "-b", "-c", htpasswd, "puller", "pw"], check=True, capture_output=True)
    root = os.path.join(env.tmp, "registry-storage")
    os.makedirs(root)
    storage = env.start(fx.StorageServer(root, env.certs, flaky=True))
    reg = env.registry(htpasswd=htpasswd, redirect=storage.url)
    reg.push(env.layout("a", "1.0", big=1 << 20), "1.0", "test/app:1.0", creds="puller:pw")
    storage.requests.clear()
    images = env.images("a")
    out, progress = pull(images, "test/app:1.0", reg.url, ca=env.ca, user="puller", password="pw")
    check_layout(os.path.join(images, "test", "app"), "1.0", out["digest"])
    check(len(storage.requests) >= 4, storage.requests)  # config, 2 layers, the big one again
    check(all(auth is None for _, auth, _ in storage.requests), storage.requests)
    check(not storage.flaky, "the storage never cut a transfer")
    check(any(rng for _, _, rng in storage.requests), storage.requests)  # it asked to resume

    # An https registry that redirects to plain http: refused, even with insecure http allowed.
    plain_root = os.path.join(env.tmp, "registry2-storage")
    os.makedirs(plain_root)
    plain = env.start(fx.StorageServer(plain_root, env.certs, tls=False))
    reg2 = env.registry("registry2", redirect=plain.url)
    reg2.push(env.layout("b", "1.0", big=1024), "1.0", "test/app:1.0")
    images = env.images("b")
    out = fails(pull(images, "test/app:1.0", reg2.url, ca=env.ca, insecure=True)[0], "DRIVER_ERROR", "network")
    check("redirect" in out["error"] and plain.url in out["error"], out)
    check(not plain.requests, plain.requests)
    check(not os.path.exists(os.path.join(images, "test")))


def case_concurrent(env):
    """Pulls of one layout at the same time serialize on its lock: all succeed and
    index.json keeps every tag."""
    reg = env.registry()
    reg.push(env.layout("a", "1", big=2 << 20, text=b"one\n"), "1", "test/app:1")
    reg.push(env.layout("b", "2", big=2 << 20, text=b"two\n"), "2", "test/app:2")
    images = env.images("a")
    procs = [subprocess.Popen([TOOL, "--url", reg.url, "--ca", env.ca, images, image], stdout=subprocess.PIPE,
                              stderr=subprocess.DEVNULL, text=True)
             for image in ("test/app:1", "test/app:2", "test/app:1", "test/app:2")]
    outs = []
    for p in procs:
        stdout, _ = p.communicate(timeout=120)
        check(p.returncode == 0, stdout)
        outs.append(json.loads(stdout))
    check(outs[0] == outs[2] and outs[1] == outs[3] and outs[0] != outs[1])
    layout = os.path.join(images, "test", "app")
    check_layout(layout, "1", outs[0]["digest"])
    check_layout(layout, "2", outs[1]["digest"])


def case_stop(env):
    reg = env.registry()
    reg.push(env.layout("a", "1.0", big=4 << 20), "1.0", "test/app:1.0")
    images = env.images("a")
    out = fails(pull(images, "test/app:1.0", reg.url, ca=env.ca, stop_at=40)[0], "JOB_CANCELLED")
    check("stopped at" in out["error"])
    check(not os.path.exists(os.path.join(images, "test")))
    out, _ = pull(images, "test/app:1.0", reg.url, ca=env.ca)
    check_layout(os.path.join(images, "test", "app"), "1.0", out["digest"])


CASES = {name[5:]: fn for name, fn in globals().items() if name.startswith("case_")}


def main():
    global TOOL
    if len(sys.argv) != 3 or sys.argv[2] not in CASES:
        sys.stderr.write("usage: %s REGISTRY_PULL {%s}\n" % (sys.argv[0], "|".join(CASES)))
        return 2
    TOOL = sys.argv[1]
    for k in [k for k in os.environ if k.lower().endswith("_proxy")]:
        del os.environ[k]
    try:
        env = Env()
    except Skip as e:
        print(f"SKIP {sys.argv[2]}: {e}")
        return 77
    ok = False
    try:
        CASES[sys.argv[2]](env)
        ok = True
    except Skip as e:
        print(f"SKIP {sys.argv[2]}: {e}")
        return 77
    finally:
        env.close(ok)
    print(f"PASS {sys.argv[2]}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
