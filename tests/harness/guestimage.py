#!/usr/bin/python3
# SPDX-License-Identifier: GPL-2.0-or-later
"""A real Debian 12 server template from Debian's packages, for the tests and the demo
that boot a real guest (issue 22 item 2).

Usage:
  guestimage.py build [--cache DIR] [--mirror URL] [--json]
  guestimage.py key

`mmdebstrap --variant=minbase` of bookworm's main archive (and bookworm-updates; never
the security archive, which CI and the test machines cannot reach) with PACKAGES: a
kernel, systemd, cloud-init, the QEMU guest agent and OpenSSH. Its root is made into an
ext4 file system without a loop mount (`mkfs.ext4 -d`), converted to qcow2 and booted
with its own kernel and initrd (direct kernel boot: no boot loader, root=/dev/vda). The
result is a template directory the agent's VM driver takes as its images_dir:

  CACHE/debian12-<key>/disk.qcow2      the template disk
  CACHE/debian12-<key>/vmlinuz, initrd.img
  CACHE/debian12-<key>/templates.json  template TEMPLATE_ID (its sha256 and boot files)
  CACHE/debian12-<key>/build.json      what it was built from, how long it took, sizes

CACHE is $NODEAGENT_TEST_CACHE/guests or /var/cache/nodeagent-tests/guests; <key>
hashes everything the image is built from (this script's VERSION, the suite, the
mirror, the packages, the files). A finished build holds `done`; a half-made one is
removed and redone; two builders at once are serialized by a lock file beside it.
Downloads happen here, in the caller's network namespace: call it before any private
namespace is entered. Needs root, mmdebstrap, mke2fs and qemu-img (scripts/deps.sh).
"""

import argparse
import fcntl
import glob
import hashlib
import json
import os
import shutil
import subprocess
import sys
import time

VERSION = "1"
SUITE = "bookworm"
MIRROR = "http://deb.debian.org/debian"
TEMPLATE_ID = "debian-12-real"
CMDLINE = "console=ttyS0 root=/dev/vda rw net.ifnames=0"
DISK_MB = 2048
# What MACHINE-NOTES found a cloud-init guest needs here: dbus (the guest agent's
# shutdown), ifupdown/iproute2 for cloud-init's network rendering.
PACKAGES = ["linux-image-amd64", "systemd-sysv", "udev", "dbus", "cloud-init", "qemu-guest-agent",
            "openssh-server", "ifupdown", "iproute2", "netbase"]
FILES = {
    # Only the seed the agent attaches (no network metadata service probing), and no
    # locale module: minbase has no locales, and it would leave cloud-init in `error`.
    "etc/cloud/cloud.cfg.d/90-nodeagent.cfg": "datasource_list: [ NoCloud, None ]\nlocale: false\n",
    "etc/fstab": "/dev/vda / ext4 defaults,errors=remount-ro 0 1\n",
    "etc/hostname": "debian\n",
}


def die(msg):
    sys.stderr.write("guestimage: %s\n" % msg)
    sys.exit(2)


def cache_root(arg):
    if arg:
        return arg
    base = os.environ.get("NODEAGENT_TEST_CACHE")
    return os.path.join(base, "guests") if base else "/var/cache/nodeagent-tests/guests"


def key_of(mirror):
    h = hashlib.sha256(json.dumps({"version": VERSION, "suite": SUITE, "mirror": mirror, "packages": PACKAGES,
                                   "files": FILES, "cmdline": CMDLINE, "disk": DISK_MB}, sort_keys=True).encode())
    return h.hexdigest()[:16]


def run(argv, **kw):
    r = subprocess.run(argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, **kw)
    if r.returncode != 0:
        die("%s failed (%d):\n%s" % (" ".join(argv[:3]), r.returncode, r.stdout[-4000:]))
    return r.stdout


def sha256_file(path):
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def make_root(root, mirror):
    for t in ("mmdebstrap", "mke2fs", "qemu-img"):
        if not shutil.which(t):
            die("%s is missing: scripts/deps.sh installs it" % t)
    run(["mmdebstrap", "--quiet", "--variant=minbase", "--mode=root", "--format=directory",
         "--aptopt=Acquire::Retries \"3\";", "--include=" + ",".join(PACKAGES),
         "--dpkgopt=path-exclude=/usr/share/doc/*", "--dpkgopt=path-exclude=/usr/share/man/*",
         "--dpkgopt=path-exclude=/usr/share/locale/*", "--dpkgopt=path-exclude=/usr/share/info/*",
         SUITE, root, "deb %s %s main" % (mirror, SUITE), "deb %s %s-updates main" % (mirror, SUITE)])
    for rel, text in FILES.items():
        path = os.path.join(root, rel)
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with open(path, "w") as f:
            f.write(text)
    # A template is generic: no machine id, no host keys (cloud-init makes them at first boot).
    with open(os.path.join(root, "etc", "machine-id"), "w"):
        pass
    for k in glob.glob(os.path.join(root, "etc", "ssh", "ssh_host_*")):
        os.unlink(k)
    for d in ("var/lib/apt/lists", "var/cache/apt"):
        p = os.path.join(root, d)
        for e in os.listdir(p) if os.path.isdir(p) else []:
            q = os.path.join(p, e)
            if os.path.isfile(q) and not os.path.islink(q):
                os.unlink(q)


def build(cache, mirror):
    key = key_of(mirror)
    top = os.path.join(cache, "debian12-%s" % key)
    os.makedirs(cache, exist_ok=True)
    with open(os.path.join(cache, ".debian12-%s.lock" % key), "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if os.path.exists(os.path.join(top, "done")):
            return top, key
        shutil.rmtree(top, ignore_errors=True)
        os.makedirs(top)
        t0 = time.time()
        root = os.path.join(top, "root")
        make_root(root, mirror)
        t_root = time.time() - t0
        kernels = sorted(glob.glob(os.path.join(root, "boot", "vmlinuz-*")))
        initrds = sorted(glob.glob(os.path.join(root, "boot", "initrd.img-*")))
        if not kernels or not initrds:
            die("the root has no kernel or initrd in /boot")
        shutil.copy(kernels[-1], os.path.join(top, "vmlinuz"))
        shutil.copy(initrds[-1], os.path.join(top, "initrd.img"))
        raw = os.path.join(top, "disk.raw")
        run(["mke2fs", "-q", "-t", "ext4", "-L", "root", "-d", root, raw, "%dM" % DISK_MB])
        shutil.rmtree(root)
        run(["qemu-img", "convert", "-q", "-f", "raw", "-O", "qcow2", raw, os.path.join(top, "disk.qcow2")])
        os.unlink(raw)
        disk = os.path.join(top, "disk.qcow2")
        templates = [{"id": TEMPLATE_ID, "imageSlug": "bookworm-" + key[:8], "os": "linux", "format": "qcow2",
                      "path": "disk.qcow2", "sha256": sha256_file(disk), "kernel": "vmlinuz",
                      "initrd": "initrd.img", "cmdline": CMDLINE}]
        with open(os.path.join(top, "templates.json"), "w") as f:
            json.dump(templates, f, indent=1)
        info = {"key": key, "packages": PACKAGES, "kernel": os.path.basename(kernels[-1]),
                "rootSeconds": round(t_root, 1), "buildSeconds": round(time.time() - t0, 1),
                "diskBytes": os.path.getsize(disk), "virtualMB": DISK_MB}
        with open(os.path.join(top, "build.json"), "w") as f:
            json.dump(info, f, indent=1)
        with open(os.path.join(top, "done"), "w") as f:
            f.write(key + "\n")
        return top, key


def main():
    ap = argparse.ArgumentParser(description="A real Debian 12 server template (see the top of this file).")
    ap.add_argument("cmd", choices=["build", "key"])
    ap.add_argument("--cache")
    ap.add_argument("--mirror", default=os.environ.get("NODEAGENT_DEBIAN_MIRROR", MIRROR))
    ap.add_argument("--json", action="store_true")
    a = ap.parse_args()
    if a.cmd == "key":
        print(key_of(a.mirror))
        return 0
    if os.geteuid() != 0:
        die("needs root (mmdebstrap keeps ownership)")
    top, key = build(cache_root(a.cache), a.mirror)
    if a.json:
        with open(os.path.join(top, "build.json")) as f:
            print(json.dumps({"dir": top, "template": TEMPLATE_ID, **json.load(f)}))
    else:
        print(top)
    return 0


if __name__ == "__main__":
    sys.exit(main())
