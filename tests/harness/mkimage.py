#!/usr/bin/python3
# SPDX-License-Identifier: GPL-2.0-or-later
"""Build small OCI image layouts for the app tests (Python 3 standard library only).

Usage:
  mkimage.py --layout DIR --tag TAG [--cmd JSON-ARRAY] [--entrypoint JSON-ARRAY]
             [--env K=V [K=V ...]] [--workdir PATH] [--compress gzip|none|zstd]
             [--no-base] [--extra-layer SPEC ...] [--docker] [--index] [--json]
             [--busybox PATH] [--mtime EPOCH] [--user USER] [--stop-signal SIG]
  mkimage.py --layer-only OUT.tar --extra-layer SPEC [--compress ...]

What it writes: an OCI image layout at DIR (DIR/oci-layout, DIR/index.json,
DIR/blobs/sha256/<hex>), creating it or adding to it. The new manifest is annotated
org.opencontainers.image.ref.name=TAG; an entry of index.json with the same tag is
replaced. index.json is replaced atomically (temporary file and rename).

The base layer (left out with --no-base) is a busybox root: /bin/busybox (from
/bin/busybox of busybox-static, or --busybox PATH) with a symlink /bin/<applet> ->
busybox for every applet of `busybox --list`, /etc/passwd (root, nobody),
/etc/group (root, nogroup), /tmp (1777), /root (0700), /home/container, and empty
/proc, /sys and /dev. The config has Env PATH=/bin (plus --env), Cmd and Entrypoint
when given (JSON arrays, e.g. --cmd '["sh","-c","echo hi"]'), WorkingDir
/home/container (or --workdir), User and StopSignal when given, os linux,
architecture amd64.

Everything is deterministic (fixed mtimes, sorted base entries, uid/gid 0, gzip
without name or time), so the same inputs give the same digests.

--extra-layer SPEC adds one layer on top (repeatable, in order). SPEC is a JSON array
inline (starting with '[') or @FILE holding one. Each element is an object:
  {"path": "a/b", "type": "file", "data": "text", "mode": "0644", "uid": 0, "gid": 0}
  type: file (default), dir, symlink (needs "target"), hardlink (needs "target": the
  path of an earlier entry), fifo, chardev, blockdev ("major", "minor"),
  whiteout (writes <dir>/.wh.<name> for "path"), opaque (writes <path>/.wh..wh..opq).
  Paths are written exactly as given (no cleaning), in the order given, so hostile
  layers ("../x", "/etc/x", a symlink followed by an entry under it) can be written
  on purpose.

--docker writes Docker schema2 media types (needs gzip). --index puts the manifest in
an image index with a second, linux/arm64 manifest listed first (the tag then names
the index). --compress zstd runs /usr/bin/zstd. --layer-only writes the first
--extra-layer as a (compressed) tar to OUT.tar and nothing else.

Output: the digest of what the tag names (the manifest, or the index with --index)
on stdout; with --json one object {"digest", "manifest", "config", "layers":
[digests], "sizeBytes" (manifest + config + layers)}.
"""

import argparse
import gzip
import hashlib
import io
import json
import os
import subprocess
import sys
import tarfile
import tempfile

MT_OCI_MANIFEST = "application/vnd.oci.image.manifest.v1+json"
MT_OCI_INDEX = "application/vnd.oci.image.index.v1+json"
MT_OCI_CONFIG = "application/vnd.oci.image.config.v1+json"
MT_OCI_LAYER = "application/vnd.oci.image.layer.v1.tar"
MT_DOCKER_MANIFEST = "application/vnd.docker.distribution.manifest.v2+json"
MT_DOCKER_CONFIG = "application/vnd.docker.container.image.v1+json"
MT_DOCKER_LAYER = "application/vnd.docker.image.rootfs.diff.tar.gzip"
REF_NAME = "org.opencontainers.image.ref.name"


def die(msg):
    sys.stderr.write("mkimage: %s\n" % msg)
    sys.exit(2)


def canonical(obj):
    return json.dumps(obj, sort_keys=True, separators=(",", ":")).encode()


class Layout:
    def __init__(self, path):
        self.path = path
        self.blobs = os.path.join(path, "blobs", "sha256")
        os.makedirs(self.blobs, exist_ok=True)
        oci_layout = os.path.join(path, "oci-layout")
        if not os.path.exists(oci_layout):
            atomic_write(oci_layout, canonical({"imageLayoutVersion": "1.0.0"}))

    def put(self, data):
        """Store a blob; returns its digest."""
        hexd = hashlib.sha256(data).hexdigest()
        dest = os.path.join(self.blobs, hexd)
        if not os.path.exists(dest):
            atomic_write(dest, data)
        return "sha256:" + hexd

    def descriptor(self, media_type, data, **extra):
        d = {"mediaType": media_type, "digest": self.put(data), "size": len(data)}
        d.update(extra)
        return d

    def tag(self, desc, tag):
        index_path = os.path.join(self.path, "index.json")
        if os.path.exists(index_path):
            with open(index_path, "rb") as f:
                index = json.load(f)
        else:
            index = {"schemaVersion": 2, "mediaType": MT_OCI_INDEX, "manifests": []}
        index["manifests"] = [m for m in index.get("manifests", [])
                              if m.get("annotations", {}).get(REF_NAME) != tag]
        entry = dict(desc)
        entry["annotations"] = {REF_NAME: tag}
        index["manifests"].append(entry)
        atomic_write(index_path, canonical(index))


def atomic_write(path, data):
    fd, tmp = tempfile.mkstemp(dir=os.path.dirname(path) or ".", prefix=".mkimage-")
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        os.chmod(tmp, 0o644)
        os.rename(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise


def parse_mode(v, default):
    if v is None:
        return default
    if isinstance(v, str):
        return int(v, 8)
    return int(v)


def tar_bytes(entries, mtime):
    """entries: list of dicts as in the usage text, written in order."""
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w", format=tarfile.PAX_FORMAT) as tar:
        for e in entries:
            kind = e.get("type", "file")
            path = e["path"]
            if kind == "whiteout":
                head, _, tail = path.rstrip("/").rpartition("/")
                path = (head + "/" if head else "") + ".wh." + tail
                kind = "file"
            elif kind == "opaque":
                path = path.rstrip("/") + "/.wh..wh..opq" if path.strip("/") else ".wh..wh..opq"
                kind = "file"
            ti = tarfile.TarInfo(path)
            ti.mtime = int(e.get("mtime", mtime))
            ti.uid = int(e.get("uid", 0))
            ti.gid = int(e.get("gid", 0))
            ti.uname = ti.gname = ""
            data = None
            if kind == "file":
                ti.type = tarfile.REGTYPE
                data = e.get("data", "")
                data = data.encode() if isinstance(data, str) else bytes(data)
                if "data_file" in e:
                    with open(e["data_file"], "rb") as f:
                        data = f.read()
                ti.size = len(data)
                ti.mode = parse_mode(e.get("mode"), 0o644)
            elif kind == "dir":
                ti.type = tarfile.DIRTYPE
                ti.mode = parse_mode(e.get("mode"), 0o755)
            elif kind == "symlink":
                ti.type = tarfile.SYMTYPE
                ti.linkname = e["target"]
                ti.mode = 0o777
            elif kind == "hardlink":
                ti.type = tarfile.LNKTYPE
                ti.linkname = e["target"]
                ti.mode = parse_mode(e.get("mode"), 0o644)
            elif kind == "fifo":
                ti.type = tarfile.FIFOTYPE
                ti.mode = parse_mode(e.get("mode"), 0o644)
            elif kind in ("chardev", "blockdev"):
                ti.type = tarfile.CHRTYPE if kind == "chardev" else tarfile.BLKTYPE
                ti.devmajor = int(e.get("major", 1))
                ti.devminor = int(e.get("minor", 3))
                ti.mode = parse_mode(e.get("mode"), 0o666)
            else:
                die("unknown entry type %r" % kind)
            tar.addfile(ti, io.BytesIO(data) if data is not None else None)
    return buf.getvalue()


def compress(data, how):
    if how == "none":
        return data
    if how == "gzip":
        return gzip.compress(data, compresslevel=6, mtime=0)
    if how == "zstd":
        zstd = "/usr/bin/zstd"
        if not os.access(zstd, os.X_OK):
            die("--compress zstd needs /usr/bin/zstd")
        return subprocess.run([zstd, "-q", "-c", "-19", "--no-check"], input=data, stdout=subprocess.PIPE,
                              check=True).stdout
    die("unknown compression %r" % how)


def base_entries(busybox):
    with open(busybox, "rb") as f:
        bb = f.read()
    applets = subprocess.run([busybox, "--list"], stdout=subprocess.PIPE, check=True).stdout.decode().split()
    entries = [
        {"path": "bin", "type": "dir"},
        {"path": "bin/busybox", "data": bb, "mode": 0o755},
        {"path": "dev", "type": "dir"},
        {"path": "etc", "type": "dir"},
        {"path": "etc/group", "data": "root:x:0:\nnogroup:x:65534:\n"},
        {"path": "etc/passwd",
         "data": "root:x:0:0:root:/root:/bin/sh\nnobody:x:65534:65534:nobody:/nonexistent:/bin/false\n"},
        {"path": "home", "type": "dir"},
        {"path": "home/container", "type": "dir"},
        {"path": "proc", "type": "dir"},
        {"path": "root", "type": "dir", "mode": 0o700},
        {"path": "sys", "type": "dir"},
        {"path": "tmp", "type": "dir", "mode": 0o1777},
    ]
    for a in sorted(set(applets)):
        if a != "busybox" and "/" not in a:
            entries.append({"path": "bin/" + a, "type": "symlink", "target": "busybox"})
    return sorted(entries, key=lambda e: e["path"])


def load_spec(spec):
    if spec.startswith("@"):
        with open(spec[1:], "rb") as f:
            spec = f.read().decode()
    v = json.loads(spec)
    if not isinstance(v, list):
        die("a layer spec is a JSON array")
    return v


def main():
    ap = argparse.ArgumentParser(description="Build an OCI image layout (see the top of this file).")
    ap.add_argument("--layout")
    ap.add_argument("--tag")
    ap.add_argument("--cmd")
    ap.add_argument("--entrypoint")
    ap.add_argument("--env", action="extend", nargs="+", default=[])
    ap.add_argument("--workdir", default="/home/container")
    ap.add_argument("--compress", default="gzip", choices=["gzip", "none", "zstd"])
    ap.add_argument("--no-base", action="store_true")
    ap.add_argument("--extra-layer", action="append", default=[])
    ap.add_argument("--docker", action="store_true")
    ap.add_argument("--index", action="store_true")
    ap.add_argument("--json", action="store_true")
    ap.add_argument("--busybox", default="/bin/busybox")
    ap.add_argument("--mtime", type=int, default=1700000000)
    ap.add_argument("--layer-only")
    ap.add_argument("--user")
    ap.add_argument("--stop-signal")
    args = ap.parse_args()

    if args.layer_only:
        if len(args.extra_layer) != 1:
            die("--layer-only needs exactly one --extra-layer")
        data = compress(tar_bytes(load_spec(args.extra_layer[0]), args.mtime), args.compress)
        atomic_write(args.layer_only, data)
        return 0
    if not args.layout or not args.tag:
        die("--layout and --tag are required")
    if args.docker and args.compress != "gzip":
        die("--docker layers are gzip")

    layers_plain = []
    if not args.no_base:
        layers_plain.append(tar_bytes(base_entries(args.busybox), args.mtime))
    for spec in args.extra_layer:
        layers_plain.append(tar_bytes(load_spec(spec), args.mtime))
    if not layers_plain:
        die("an image needs a layer: drop --no-base or add --extra-layer")

    layout = Layout(args.layout)
    layer_mt = MT_DOCKER_LAYER if args.docker else MT_OCI_LAYER + {"gzip": "+gzip", "zstd": "+zstd", "none": ""}[
        args.compress]
    layer_descs = [layout.descriptor(layer_mt, compress(p, args.compress)) for p in layers_plain]
    diff_ids = ["sha256:" + hashlib.sha256(p).hexdigest() for p in layers_plain]

    env = ["PATH=/bin"] + args.env
    for kv in env:
        if "=" not in kv:
            die("--env wants K=V, not %r" % kv)
    cfg = {"Env": env, "WorkingDir": args.workdir}
    if args.user:
        cfg["User"] = args.user
    if args.stop_signal:
        cfg["StopSignal"] = args.stop_signal
    for key, val in (("Cmd", args.cmd), ("Entrypoint", args.entrypoint)):
        if val is not None:
            v = json.loads(val)
            if not (isinstance(v, list) and all(isinstance(s, str) for s in v)):
                die("--%s wants a JSON array of strings" % key.lower())
            cfg[key] = v

    def manifest_for(arch):
        config = {
            "architecture": arch, "os": "linux", "config": cfg,
            "created": "2023-11-14T22:13:20Z",
            "rootfs": {"type": "layers", "diff_ids": diff_ids},
        }
        config_desc = layout.descriptor(MT_DOCKER_CONFIG if args.docker else MT_OCI_CONFIG, canonical(config))
        mt = MT_DOCKER_MANIFEST if args.docker else MT_OCI_MANIFEST
        manifest = {"schemaVersion": 2, "mediaType": mt, "config": config_desc, "layers": layer_descs}
        data = canonical(manifest)
        return layout.descriptor(mt, data), config_desc, len(data)

    mdesc, config_desc, msize = manifest_for("amd64")
    top = mdesc
    if args.index:
        other, _, _ = manifest_for("arm64")
        other["platform"] = {"architecture": "arm64", "os": "linux"}
        amd = dict(mdesc)
        amd["platform"] = {"architecture": "amd64", "os": "linux"}
        index = {"schemaVersion": 2, "mediaType": MT_OCI_INDEX, "manifests": [other, amd]}
        top = layout.descriptor(MT_OCI_INDEX, canonical(index))
    layout.tag(top, args.tag)

    if args.json:
        print(json.dumps({
            "digest": top["digest"], "manifest": mdesc["digest"], "config": config_desc["digest"],
            "layers": [d["digest"] for d in layer_descs],
            "sizeBytes": msize + config_desc["size"] + sum(d["size"] for d in layer_descs),
        }, sort_keys=True))
    else:
        print(top["digest"])
    return 0


if __name__ == "__main__":
    sys.exit(main())
