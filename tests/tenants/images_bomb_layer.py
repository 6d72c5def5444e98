# SPDX-License-Identifier: GPL-2.0-or-later
"""Hostile image layers for tests/tenants (issue 20, the image bomb), streamed so that
no test holds them in memory:

  zero_bomb(path, size)        a zstd tar holding one file of `size` zeros (1 GiB
                               becomes about 32 KB)
  files_bomb(path, n)          a zstd tar holding n empty files (an inode bomb)
  add_layer(layout, base_tag, tag, layer_path)
                               the image base_tag of an OCI layout (tests/harness/mkimage.py
                               writes it) with one more layer on top, tagged tag

Each layer function returns the sha256 of the uncompressed tar (the config's diff_id).
"""
import hashlib
import json
import os
import shutil
import subprocess
import tarfile

MT_LAYER_ZSTD = "application/vnd.oci.image.layer.v1.tar+zstd"
MT_CONFIG = "application/vnd.oci.image.config.v1+json"
MT_MANIFEST = "application/vnd.oci.image.manifest.v1+json"
REF_NAME = "org.opencontainers.image.ref.name"
MTIME = 1700000000


class _Zstd:
    """A tar stream into `zstd -c`, hashed on the way."""

    def __init__(self, path):
        self.out = open(path, "wb")
        self.proc = subprocess.Popen(["/usr/bin/zstd", "-q", "-c", "-3"], stdin=subprocess.PIPE, stdout=self.out)
        self.sha = hashlib.sha256()
        self.n = 0

    def write(self, b):
        self.sha.update(b)
        self.proc.stdin.write(b)
        self.n += len(b)

    def close(self):
        self.write(b"\0" * 1024)  # the end of the archive
        self.proc.stdin.close()
        if self.proc.wait() != 0:
            raise AssertionError("zstd failed")
        self.out.close()
        return "sha256:" + self.sha.hexdigest()


def _header(name, size=0, kind=tarfile.REGTYPE):
    ti = tarfile.TarInfo(name)
    ti.size, ti.mtime, ti.mode, ti.type = size, MTIME, 0o644 if kind == tarfile.REGTYPE else 0o755, kind
    return ti.tobuf(tarfile.PAX_FORMAT)


def zero_bomb(path, size):
    z = _Zstd(path)
    z.write(_header("bomb", size))
    chunk = b"\0" * (1 << 20)
    left = size
    while left:
        n = min(left, len(chunk))
        z.write(chunk[:n])
        left -= n
    if size % 512:
        z.write(b"\0" * (512 - size % 512))
    return z.close()


def files_bomb(path, n, per_dir=1000):
    z = _Zstd(path)
    for d in range((n + per_dir - 1) // per_dir):
        z.write(_header(f"d{d}", kind=tarfile.DIRTYPE))
        for i in range(min(per_dir, n - d * per_dir)):
            z.write(_header(f"d{d}/f{i}"))
    return z.close()


def _blob(layout, path_or_bytes):
    blobs = os.path.join(layout, "blobs", "sha256")
    if isinstance(path_or_bytes, bytes):
        data = path_or_bytes
        hexd = hashlib.sha256(data).hexdigest()
        with open(os.path.join(blobs, hexd), "wb") as f:
            f.write(data)
        return {"digest": "sha256:" + hexd, "size": len(data)}
    h = hashlib.sha256()
    with open(path_or_bytes, "rb") as f:
        for b in iter(lambda: f.read(1 << 20), b""):
            h.update(b)
    shutil.copyfile(path_or_bytes, os.path.join(blobs, h.hexdigest()))
    return {"digest": "sha256:" + h.hexdigest(), "size": os.path.getsize(path_or_bytes)}


def _canonical(obj):
    return json.dumps(obj, sort_keys=True, separators=(",", ":")).encode()


def add_layer(layout, base_tag, tag, layer_path, diff_id):
    index_path = os.path.join(layout, "index.json")
    with open(index_path) as f:
        index = json.load(f)
    base = next(m for m in index["manifests"] if m.get("annotations", {}).get(REF_NAME) == base_tag)
    blobs = os.path.join(layout, "blobs", "sha256")
    with open(os.path.join(blobs, base["digest"][7:])) as f:
        manifest = json.load(f)
    with open(os.path.join(blobs, manifest["config"]["digest"][7:])) as f:
        config = json.load(f)
    config["rootfs"]["diff_ids"].append(diff_id)
    manifest["config"] = dict(mediaType=MT_CONFIG, **_blob(layout, _canonical(config)))
    manifest["layers"].append(dict(mediaType=MT_LAYER_ZSTD, **_blob(layout, layer_path)))
    mdesc = dict(mediaType=MT_MANIFEST, **_blob(layout, _canonical(manifest)))
    mdesc["annotations"] = {REF_NAME: tag}
    index["manifests"] = [m for m in index["manifests"] if m.get("annotations", {}).get(REF_NAME) != tag]
    index["manifests"].append(mdesc)
    with open(index_path + ".new", "wb") as f:
        f.write(_canonical(index))
    os.rename(index_path + ".new", index_path)
    return mdesc["digest"]
