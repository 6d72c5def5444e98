#!/usr/bin/python3
# SPDX-License-Identifier: GPL-2.0-or-later
"""The app backup benchmark (issue 11, item 8): a tree of --size-mb MB (a volume's
kind of content: many small files, some large ones, half of it compressible) archived
by the backup writer (bench-app-backup-write: the code app.backup.create runs, the
walk beneath the root, pax + zstd level 3, sha256) and by `tar -C dir -cf - . | zstd -3`
in the same run, each the best of --runs on a warm page cache. Prints MB/s of both, the
ratio (target >= 0.9) and the writer's peak RSS (VmHWM; target <= 16 MB)."""
import argparse
import hashlib
import io
import json
import os
import shutil
import subprocess
import sys
import tarfile
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
BUILD = os.environ.get("NA_BUILD_DIR") or os.path.join(HERE, "..", "..", "build")


def make_tree(root, size_mb):
    """Small files (4-64 KiB) for a fifth, files of 1-32 MiB for the rest; every other file compressible."""
    total, target, i = 0, size_mb << 20, 0
    seed = os.urandom(1 << 20)
    text = (hashlib.sha256(seed).hexdigest() * 40000).encode()[: 1 << 20]  # compressible, not trivially
    while total < target:
        small = total < target // 5
        size = (4096 << (i % 5)) if small else (1 << 20) * (1 + (i * 7) % 32)
        size = min(size, target - total)
        d = os.path.join(root, f"dir{i % 37}", f"sub{i % 5}")
        os.makedirs(d, exist_ok=True)
        src = text if i % 2 else seed
        with open(os.path.join(d, f"f{i}.dat"), "wb") as f:
            left = size
            while left > 0:
                n = min(left, len(src))
                f.write(src[:n] if i % 2 else os.urandom(n))
                left -= n
        total += size
        i += 1
    return total, i


def warm(root):
    for d, _, files in os.walk(root):
        for name in files:
            with open(os.path.join(d, name), "rb") as f:
                while f.read(1 << 20):
                    pass


def run_writer(binary, root, out):
    t0 = time.monotonic()
    r = subprocess.run([binary, root, out], check=True, capture_output=True, text=True)
    secs = time.monotonic() - t0
    return secs, json.loads(r.stdout)


def run_pipe(root, out):
    t0 = time.monotonic()
    with open(out, "wb") as f:
        tar = subprocess.Popen(["/usr/bin/tar", "-C", root, "-cf", "-", "."], stdout=subprocess.PIPE)
        zstd = subprocess.Popen(["/usr/bin/zstd", "-q", "-3", "-c"], stdin=tar.stdout, stdout=f)
        tar.stdout.close()
        if zstd.wait() != 0 or tar.wait() != 0:
            raise SystemExit("tar | zstd failed")
        os.fsync(f.fileno())
    return time.monotonic() - t0


def main():
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--size-mb", type=int, default=1024)
    ap.add_argument("--runs", type=int, default=2)
    ap.add_argument("--bin", default=os.path.join(BUILD, "bench", "app-backup", "bench-app-backup-write"))
    ap.add_argument("--dir", default=None, help="where the tree and archives go (default: a temporary directory)")
    a = ap.parse_args()
    if not os.access(a.bin, os.X_OK):
        raise SystemExit(f"{a.bin}: not built")
    work = tempfile.mkdtemp(prefix="bench-app-backup-", dir=a.dir)
    try:
        root = os.path.join(work, "tree")
        os.makedirs(root)
        size, files = make_tree(root, a.size_mb)
        warm(root)
        mine, pipe, hwm, info = [], [], 0, None
        for _ in range(a.runs):
            secs, info = run_writer(a.bin, root, os.path.join(work, "backup.tar.zst"))
            mine.append(secs)
            hwm = max(hwm, info["vmHwmKB"])
            pipe.append(run_pipe(root, os.path.join(work, "pipe.tar.zst")))
        mb = size / (1 << 20)
        w_mbs, p_mbs = mb / min(mine), mb / min(pipe)
        # The archive is whole: its sha256 is the file's, every file is in it.
        with open(os.path.join(work, "backup.tar.zst"), "rb") as f:
            data = f.read()
        if hashlib.sha256(data).hexdigest() != info["sha256"] or len(data) != info["sizeBytes"]:
            raise SystemExit("the writer's sha256 or size does not match its file")
        raw = subprocess.run(["/usr/bin/zstd", "-dc"], input=data, check=True, capture_output=True).stdout
        with tarfile.open(fileobj=io.BytesIO(raw)) as t:
            n = sum(1 for m in t.getmembers() if m.isfile())
        if n != files:
            raise SystemExit(f"the archive holds {n} files of {files}")
        pipe_size = os.path.getsize(os.path.join(work, "pipe.tar.zst"))
        print(f"tree: {mb:.0f} MB in {files} files")
        print(f"backup writer:  {w_mbs:8.1f} MB/s  ({min(mine):.2f} s, archive {info['sizeBytes'] / (1 << 20):.1f} MB)")
        print(f"tar | zstd -3:  {p_mbs:8.1f} MB/s  ({min(pipe):.2f} s, archive {pipe_size / (1 << 20):.1f} MB)")
        print(f"ratio: {w_mbs / p_mbs:.2f}x (target >= 0.9)")
        print(f"writer peak RSS: {hwm / 1024:.1f} MB (target <= 16)")
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
