#!/usr/bin/python3
# SPDX-License-Identifier: GPL-2.0-or-later
"""Issue 20, the image bomb: what one app's image or deploy can do to the node's disk.

The apps' storage (image cache and every app's disk.img) is a small loop-mounted
ext4, as on a node whose data file system is shared. A neighbour app runs and writes
to its volume the whole time. Then:

  bomb_leaves_neighbour   a 33 KB zstd layer of 1 GiB of zeros: the deploy fails
                          cleanly (DRIVER_ERROR naming the image and the limit,
                          nothing half-unpacked left), the neighbour keeps writing,
                          its volume never goes read-only, and its disk.img is
                          fully allocated (st_blocks)
  configured_limits       [apps] image_unpack_max_mb and image_unpack_max_files
                          refuse the zero bomb and an inode bomb at their bound
  inode_bomb              80,000 empty files against a file system of 65,536 inodes:
                          refused at the inode reserve
  volume_needs_space      a deploy whose volume does not fit the free space is
                          refused (node-storage-full) and leaves nothing; a sparse
                          image from before is allocated when it is mounted again

Before the fix the bomb filled the file system (the unpack wrote until ENOSPC), the
neighbour's volume (a sparse image) got I/O errors and went read-only, and disk.img
was sparse.
"""
import os
import re
import subprocess
import sys
import time
import uuid

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "harness"))
sys.path.insert(0, os.path.join(HERE, "..", "agent", "kinds", "apps"))
from nodeagent_harness import check, needs, run_cases, wait_for, with_setup  # noqa: E402
from test_apps import apps_conf, app_job, deploy_params, failed, need_root, ok, wait_output  # noqa: E402
import images_bomb_layer as bomb  # noqa: E402

FS_MB = 256
# Appends 32 KiB a step (new blocks of its disk.img each time) and says when a write fails.
WRITER = ["/bin/sh", "-c",
          "echo ready; i=0; while true; do i=$((i+1)); "
          "head -c 32768 /dev/zero >> /home/container/data.bin || echo \"write failed $i\"; "
          "echo \"line $i\" >> /home/container/counter.txt || echo \"write failed $i\"; "
          "sync; sleep 0.05; done"]


def storage(s):
    return os.path.join(s.agent.state_dir, "apps")


def small_fs_conf(s, **apps):
    """apps_conf, with <state>/apps (the apps' storage) on a FS_MB ext4 of its own."""
    conf = apps_conf(s)
    img, mnt = os.path.join(s.tmp, "apps-fs.img"), os.path.join(s.tmp, "state", "apps")
    with open(img, "wb") as f:
        f.truncate(FS_MB << 20)
    subprocess.run(["/usr/sbin/mkfs.ext4", "-q", "-F", "-m", "0", img], check=True)
    os.makedirs(mnt)
    subprocess.run(["/usr/bin/mount", "-o", "loop", img, mnt], check=True)
    os.chmod(mnt, 0o711)
    os.chmod(os.path.join(s.tmp, "state"), 0o711)
    conf["apps"].update({k: str(v) for k, v in apps.items()})
    return conf


def add_bomb(s, tag, kind, n):
    layout = os.path.join(s.tmp, "app-images", "busybox")
    layer = os.path.join(s.tmp, f"{tag}.tar.zst")
    diff = bomb.zero_bomb(layer, n) if kind == "zeros" else bomb.files_bomb(layer, n)
    bomb.add_layer(layout, "1", tag, layer, diff)
    return os.path.getsize(layer)


def fs_free(path):
    st = os.statvfs(path)
    return st.f_bavail * st.f_frsize, st.f_favail


def mount_options(point):
    with open("/proc/self/mountinfo") as f:
        for line in f:
            p = line.split()
            if p[4] == point:
                return p[5].split(",") + p[p.index("-") + 3].split(",")
    return None


def disk_of(s, app):
    return os.path.join(storage(s), "apps", app, "disk")


def refused_bomb(s, app, tag, limit_key, timeout=300):
    t0 = time.time()
    name = f"bomb{uuid.uuid4().hex[:8]}"  # a hostname and SFTP user of its own: nobody else's
    err = failed(app_job(s, "app.deploy", app, deploy_params(hostname=name, sftpUsername=name,
                                                             template={"image": f"busybox:{tag}"}), timeout),
                 "DRIVER_ERROR")
    took = time.time() - t0
    msg = err["error"]
    check(f"busybox:{tag}" in msg and limit_key in msg, msg)
    check(err["details"].get("limit") == limit_key, err)
    m = re.search(r"stopped after (\d+) (bytes|entries)", msg)
    check(m, msg)
    print(f"busybox:{tag}: refused by {limit_key} after {int(m.group(1)):,} {m.group(2)} in {took:.2f}s: {msg}")
    # Nothing half-unpacked stays, and a refused deploy leaves no app behind.
    cache = os.path.join(storage(s), "images")
    left = [d for h in os.listdir(cache) if os.path.isdir(os.path.join(cache, h))
            for d in os.listdir(os.path.join(cache, h)) if d.startswith("rootfs.tmp")]
    check(not left, f"half-unpacked roots left: {left}")
    check(not os.path.exists(os.path.join(storage(s), "apps", app)), "a refused deploy left its directory")
    return int(m.group(1)), took


def start_neighbour(s):
    app = str(uuid.uuid4())
    ok(app_job(s, "app.deploy", app, deploy_params(template={"command": WRITER}, plan={"volumeQuotaMB": 64}),
               timeout=120))
    ok(app_job(s, "app.power", app, {"action": "start"}))
    wait_output(s, app, "ready")
    return app


def lines_written(s, app):
    try:
        with open(os.path.join(disk_of(s, app), "volume", "counter.txt")) as f:
            return len(f.read().splitlines())
    except FileNotFoundError:
        return 0


def neighbour_untouched(s, app):
    """It writes on for longer than ext4's journal commit interval (5 s): before the fix
    its journal aborted at the first commit after the host file system filled
    ("critical space allocation error", "Remounting filesystem read-only")."""
    n = lines_written(s, app)
    time.sleep(6)
    wait_for(lambda: lines_written(s, app) >= n + 20, 20, "the neighbour writes on")
    opts = mount_options(disk_of(s, app))
    check(opts and "ro" not in opts and "emergency_ro" not in opts, f"the neighbour's volume: {opts}")
    out = ok(app_job(s, "app.output", app, {"limit": 1000}))
    bad = [line["text"] for line in out["lines"] if "failed" in line["text"] or "error" in line["text"].lower()]
    check(not bad, f"the neighbour's writes failed: {bad[:5]}")
    # And a write of its own from the host side, synced.
    path = os.path.join(disk_of(s, app), "volume", "after.bin")
    with open(path, "wb") as f:
        f.write(os.urandom(4 << 20))
        f.flush()
        os.fsync(f.fileno())


def fully_allocated(s, app):
    st = os.stat(os.path.join(storage(s), "apps", app, "disk.img"))
    print(f"disk.img: size {st.st_size:,}, allocated {st.st_blocks * 512:,}")
    check(st.st_blocks * 512 >= st.st_size, f"disk.img is sparse: {st.st_blocks * 512} of {st.st_size} bytes")


@needs("root", "cgroupfs")
@with_setup(agent_conf=small_fs_conf)
def bomb_leaves_neighbour(s):
    need_root()
    size = add_bomb(s, "bomb", "zeros", 1 << 30)
    print(f"bomb layer: {size:,} bytes of zstd for 1 GiB of zeros")
    neighbour = start_neighbour(s)
    fully_allocated(s, neighbour)
    before = fs_free(storage(s))
    refused, _ = refused_bomb(s, str(uuid.uuid4()), "bomb", "image_unpack_reserve_percent")
    total = os.statvfs(storage(s)).f_blocks * os.statvfs(storage(s)).f_frsize
    check(refused < total, f"stopped after {refused} bytes, past the whole file system ({total})")
    # ext4 gives freed blocks back at its next commit.
    wait_for(lambda: fs_free(storage(s))[0] >= before[0] - (16 << 20), 15,
             f"the free space back (before {before}, now {fs_free(storage(s))})")
    neighbour_untouched(s, neighbour)
    # A second try is refused the same way (nothing was cached).
    refused_bomb(s, str(uuid.uuid4()), "bomb", "image_unpack_reserve_percent")
    neighbour_untouched(s, neighbour)
    ok(app_job(s, "app.delete", neighbour))


@needs("root")
@with_setup(agent_conf=lambda s: small_fs_conf(s, image_unpack_max_mb=64, image_unpack_max_files=1000))
def configured_limits(s):
    need_root()
    add_bomb(s, "zeros", "zeros", 1 << 30)
    add_bomb(s, "files", "files", 5000)
    at, _ = refused_bomb(s, str(uuid.uuid4()), "zeros", "image_unpack_max_mb")
    check(at <= 64 << 20, at)
    refused_bomb(s, str(uuid.uuid4()), "files", "image_unpack_max_files")
    # The base image alone (about 400 entries, 2 MB) still deploys within those bounds.
    app = str(uuid.uuid4())
    ok(app_job(s, "app.deploy", app, deploy_params(), timeout=120))
    ok(app_job(s, "app.delete", app))


@needs("root")
@with_setup(agent_conf=small_fs_conf)
def inode_bomb(s):
    need_root()
    add_bomb(s, "inodes", "files", 80000)
    before = fs_free(storage(s))
    refused_bomb(s, str(uuid.uuid4()), "inodes", "image_unpack_reserve_percent")
    wait_for(lambda: fs_free(storage(s))[1] >= before[1] - 64, 15,
             f"the inodes back (before {before[1]}, now {fs_free(storage(s))[1]})")


def punch_unwritten(path):
    fd = os.open(path, os.O_RDONLY)
    try:
        size, off = os.fstat(fd).st_size, 0
        while off < size:
            hole = os.lseek(fd, off, os.SEEK_HOLE)
            if hole >= size:
                break
            try:
                data = os.lseek(fd, hole, os.SEEK_DATA)
            except OSError:  # ENXIO: a hole to the end
                data = size
            subprocess.run(["/usr/bin/fallocate", "--punch-hole", "-o", str(hole), "-l", str(data - hole), path],
                           check=True)
            off = data
    finally:
        os.close(fd)


@needs("root")
@with_setup(agent_conf=small_fs_conf)
def volume_needs_space(s):
    need_root()
    app = str(uuid.uuid4())
    free_mb = fs_free(storage(s))[0] >> 20
    err = failed(app_job(s, "app.deploy", app, deploy_params(plan={"volumeQuotaMB": free_mb + 64}), 120),
                 "DRIVER_ERROR")
    print(f"a {free_mb + 64} MB volume with {free_mb} MB free: {err['error']}")
    check("storage" in err["error"] and err["details"].get("reason") == "node-storage-full", err)
    check(not os.path.exists(os.path.join(storage(s), "apps", app)), "a refused deploy left its directory")
    wait_for(lambda: fs_free(storage(s))[0] >> 20 >= free_mb - 8, 15, "the refused volume's blocks back")
    # One that fits is made whole.
    ok(app_job(s, "app.deploy", app, deploy_params(plan={"volumeQuotaMB": 32}), timeout=120))
    fully_allocated(s, app)
    # An image from before is sparse: its unwritten ranges (SEEK_HOLE finds them; they read
    # as zeros, as holes do) punched out, its data kept. It is allocated when mounted again.
    img = os.path.join(storage(s), "apps", app, "disk.img")
    subprocess.run(["/usr/bin/umount", disk_of(s, app)], check=True)
    punch_unwritten(img)
    st = os.stat(img)
    check(st.st_blocks * 512 < st.st_size // 2, f"not sparse after --dig-holes: {st.st_blocks * 512}")
    ok(app_job(s, "app.power", app, {"action": "start"}))
    fully_allocated(s, app)
    ok(app_job(s, "app.delete", app))


if __name__ == "__main__":
    sys.exit(run_cases({"bomb_leaves_neighbour": bomb_leaves_neighbour, "configured_limits": configured_limits,
                        "inode_bomb": inode_bomb, "volume_needs_space": volume_needs_space}))
