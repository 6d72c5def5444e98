#!/usr/bin/python3
# SPDX-License-Identifier: GPL-2.0-or-later
"""Disk I/O between apps (issue 20): one app could saturate the disk behind every
volume. With [apps] io_write_mbps and io_read_mbps set, an app writing and reading
its volume as fast as it can (direct I/O, which cgroup v1 charges to it) gets no more
than that, and the limit is on the device behind its own volume only."""
import os
import subprocess
import sys
import uuid

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "harness"))
sys.path.insert(0, os.path.join(HERE, "..", "agent", "kinds", "apps"))
from nodeagent_harness import SRC, check, needs, run_cases, with_setup  # noqa: E402
from test_apps import app_job, apps_conf, deploy_params, need_root, ok, output, texts, wait_output  # noqa: E402

MB = 12
# Write MB MiB with O_DIRECT, then read it back with O_DIRECT (no page cache), each timed
# in milliseconds by the app itself.
DD = ["/bin/sh", "-c",
      "cs() { read up rest </proc/uptime; echo \"${up%.*}${up#*.}\"; }; echo ready; t0=$(cs); "
      f"dd if=/dev/zero of=/home/container/big bs=1M count={MB} oflag=direct 2>/dev/null; t1=$(cs); "
      f"dd if=/home/container/big of=/dev/null bs=1M count={MB} iflag=direct 2>/dev/null; t2=$(cs); "
      "echo \"write_ms=$(( (t1 - t0) * 10 )) read_ms=$(( (t2 - t1) * 10 ))\"; "
      "while read l; do :; done"]


REALIMAGES = os.path.join(SRC, "tests", "harness", "realimages.py")


def limited_conf(s):
    conf = apps_conf(s)
    conf["apps"].update({"io_write_mbps": "4", "io_read_mbps": "4"})
    return conf


def limited_debian_conf(s):
    """The same limits, and the Debian image of tests/harness/realimages.py (USER 1000,
    coreutils' dd), installed beside busybox."""
    conf = limited_conf(s)
    subprocess.run([sys.executable, REALIMAGES, "install", "user1000", "--images-dir",
                    conf["apps"]["images_dir"]], check=True, capture_output=True)
    return conf


def timings(s, app):
    wait_output(s, app, "ready", 30)
    for _ in range(120):
        lines = [t for t in texts(output(s, app)) if t.startswith("write_ms=")]
        if lines:
            parts = dict(kv.split("=") for kv in lines[0].split())
            return int(parts["write_ms"]), int(parts["read_ms"])
        import time
        time.sleep(0.25)
    raise AssertionError(f"no timing line: {texts(output(s, app))}")


@needs("root", "cgroupfs")
@with_setup(agent_conf=limited_conf)
def throttled(s):
    need_root()
    app = str(uuid.uuid4())
    ok(app_job(s, "app.deploy", app, deploy_params(template={"command": DD}, plan={"volumeQuotaMB": 64}),
               timeout=120))
    ok(app_job(s, "app.power", app, {"action": "start"}))
    w, r = timings(s, app)
    # 12 MiB at 4 MiB/s: about 3 s each way (the first second's burst allowance aside).
    check(w >= 2000, f"writing {MB} MiB took {w} ms: not throttled to 4 MB/s")
    check(r >= 2000, f"reading {MB} MiB took {r} ms: not throttled to 4 MB/s")
    print(f"throttled: write {MB} MiB in {w} ms, read in {r} ms")


@needs("root", "cgroupfs")
@with_setup(agent_conf=limited_debian_conf)
def throttled_debian(s):
    """The same attack from a real image: Debian's coreutils dd, run by the image's own
    user (1000), not root."""
    need_root()
    app = str(uuid.uuid4())
    dd = ["/bin/sh", "-c", DD[2].replace(" 2>/dev/null", " status=none 2>/dev/null")]
    ok(app_job(s, "app.deploy", app, deploy_params(template={"image": "user1000:1", "command": dd},
                                                   plan={"volumeQuotaMB": 64}), timeout=300))
    ok(app_job(s, "app.power", app, {"action": "start"}))
    w, r = timings(s, app)
    check(w >= 2000, f"writing {MB} MiB took {w} ms: not throttled to 4 MB/s")
    check(r >= 2000, f"reading {MB} MiB took {r} ms: not throttled to 4 MB/s")
    print(f"throttled (Debian image, uid 1000): write {MB} MiB in {w} ms, read in {r} ms")


@needs("root", "cgroupfs")
@with_setup(agent_conf=apps_conf)
def unlimited_by_default(s):
    need_root()
    app = str(uuid.uuid4())
    ok(app_job(s, "app.deploy", app, deploy_params(template={"command": DD}, plan={"volumeQuotaMB": 64}),
               timeout=120))
    ok(app_job(s, "app.power", app, {"action": "start"}))
    w, r = timings(s, app)
    check(w < 2000 and r < 2000, f"without limits {MB} MiB took {w} ms / {r} ms")
    print(f"unlimited: write {MB} MiB in {w} ms, read in {r} ms")


if __name__ == "__main__":
    # The Debian image is built here, in the host's network namespace, before the case
    # enters its private one (nothing resolves there); cached, so a second run is quick.
    if sys.argv[1:2] == ["throttled_debian"] and os.geteuid() == 0:
        if subprocess.run([sys.executable, REALIMAGES, "build", "user1000"]).returncode != 0:
            sys.exit(1)
    sys.exit(run_cases({f.__name__: f for f in [throttled, throttled_debian, unlimited_by_default]}))
