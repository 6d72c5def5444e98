#!/usr/bin/python3
# SPDX-License-Identifier: GPL-2.0-or-later
"""Transfer client benchmark (issue 11, AGENT-API 4.4). Prints figures; asserts nothing.

  GET, PUT     one object of --mb MiB through the transfer client (tests/transfer/
               transfer-cli over transfer/) beside the `curl` command line
               tool against the same store in the same run: MB/s and peak RSS
  multipart    the same object PUT in parts of 8 MiB

The store is tests/harness/objstore.py (Python, TLS with the test CA), the same for
both clients, so the ratio is the figure that matters; the absolute MB/s is bounded by
that store. Run: python3 bench/transfer/bench_transfer.py [--mb N] [--smoke]
"""
import argparse
import hashlib
import json
import os
import resource
import subprocess
import sys
import tempfile
import time

SRC = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
os.environ.setdefault("NA_SOURCE_DIR", SRC)
os.environ.setdefault("NA_BUILD_DIR", os.path.join(SRC, "build"))
sys.path.insert(0, os.path.join(SRC, "tests", "harness"))
from nodeagent_harness import BUILD, certs_dir, check  # noqa: E402
from objstore import ObjectStore  # noqa: E402

CLI = os.path.join(BUILD, "tests", "transfer", "transfer-cli")
CURL = "/usr/bin/curl"


def timed(args):
    """Wall time and peak RSS (KiB) of one child."""
    t0 = time.time()
    p = subprocess.Popen(args, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
    out = p.stdout.read()
    _, status, ru = os.wait4(p.pid, 0)
    p.returncode = os.waitstatus_to_exitcode(status)
    check(p.returncode == 0, (args[:2], out[-400:]))
    return time.time() - t0, ru.ru_maxrss


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--mb", type=int, default=512)
    ap.add_argument("--smoke", action="store_true", help="4 MiB, to keep the script from rotting")
    args = ap.parse_args()
    mb = 4 if args.smoke else args.mb
    certs = certs_dir()
    ca = os.path.join(certs, "ca.pem")
    tmp = tempfile.mkdtemp(prefix="bench-transfer-")
    store = ObjectStore(certs)
    try:
        src = os.path.join(tmp, "src")
        with open(src, "wb") as f:
            block = os.urandom(1 << 20)
            for _ in range(mb):
                f.write(block)
        size = mb << 20
        with open(src, "rb") as f:
            digest = hashlib.file_digest(f, "sha256").hexdigest() if hasattr(hashlib, "file_digest") else None
        rows = []

        def row(name, secs, rss):
            rows.append((name, size / secs / 1e6, rss / 1024))

        t = {"url": store.url("PUT", "a"), "method": "PUT"}
        secs, rss = timed([CLI, "put", json.dumps(t), src, "--ca", ca])
        row("PUT  transfer client", secs, rss)
        secs, rss = timed([CURL, "-sS", "-f", "--cacert", ca, "-T", src, "-o", "/dev/null", store.url("PUT", "b")])
        row("PUT  curl", secs, rss)
        t = {"url": store.url("GET", "a"), "method": "GET"}
        if digest:
            t["sha256"] = digest
        secs, rss = timed([CLI, "get", json.dumps(t), os.path.join(tmp, "got1"), "--ca", ca])
        row("GET  transfer client (sha256 checked)", secs, rss)
        secs, rss = timed([CURL, "-sS", "-f", "--cacert", ca, "-o", os.path.join(tmp, "got2"), store.url("GET", "a")])
        row("GET  curl", secs, rss)
        parts = store.part_urls("c", (mb + 7) // 8)
        t = {"url": store.url("PUT", "c"), "method": "PUT", "parts": [{"url": u} for u in parts]}
        secs, rss = timed([CLI, "put", json.dumps(t), src, "--ca", ca, "--part-size", str(8 << 20)])
        row("PUT  transfer client, 8 MiB parts", secs, rss)
        print(f"transfer of {mb} MiB over loopback HTTPS (store: tests/harness/objstore.py)")
        for name, mbs, rss in rows:
            print(f"  {name:40s} {mbs:8.1f} MB/s   peak RSS {rss:6.1f} MiB")
        print(f"  ratio GET client/curl {rows[2][1] / rows[3][1]:.2f}, PUT client/curl {rows[0][1] / rows[1][1]:.2f}")
    finally:
        store.stop()
        subprocess.run(["rm", "-rf", tmp])


if __name__ == "__main__":
    main()
