#!/usr/bin/python3
# SPDX-License-Identifier: GPL-2.0-or-later
"""Real OCI images from Debian packages for the app tests and the demo (issue 21).

Usage:
  realimages.py list
  realimages.py build NAME [NAME ...] [--cache DIR] [--mirror URL] [--json]
  realimages.py install NAME --images-dir DIR [--tag TAG] [--cache DIR]

Each image is `mmdebstrap --variant=minbase SUITE` of Debian's main archive (and
SUITE-updates; never the security archive, which CI and the test machines cannot
reach) with the image's packages, a few files of its own (an entrypoint script, a
user), packed by umoci as an OCI image layout tagged "1" with its config (User,
WorkingDir, Entrypoint, Cmd, Env, StopSignal).

A build is done once and kept outside the tree, in CACHE/<name>-<key>/layout (CACHE
is $NODEAGENT_TEST_CACHE or /var/cache/nodeagent-tests/realimages), where <key> hashes
everything the image is built from: this script's VERSION, the suite, the mirror, the
package list, the extra files and the config. A finished build holds CACHE/<...>/done;
a half-made one is removed and redone. Builds of the same image by two processes at
once are serialized by a lock file beside it.

`build` prints the layout's path (or, with --json, {name: {"layout", "key"}}).
`install` builds if needed and copies the layout to DIR/NAME (hard links where it can) (what the agent's
apps.images_dir holds: one OCI layout per image name, tags in its index.json), so a
template names it "NAME:1"; VARIANTS below adds more tags of the same layers ("2",
"broken") for the update tests. Downloads happen here, in the caller's network namespace:
call it before any private namespace is entered. Needs root (mmdebstrap keeps
ownership), mmdebstrap and umoci (scripts/deps.sh installs them).
"""

import argparse
import fcntl
import hashlib
import json
import os
import shutil
import subprocess
import sys

VERSION = "1"
SUITE = "bookworm"
MIRROR = "http://deb.debian.org/debian"
TAG = "1"

# The Postgres entrypoint: initdb on the first start into PGDATA (a directory below
# the volume: a volume's root may hold lost+found, which initdb refuses), then exec
# postgres listening on every address of the app (its group network).
PG_ENTRYPOINT = """#!/bin/sh
set -eu
PGDATA="${PGDATA:-/var/lib/postgresql/data/pgdata}"
export PGDATA
if [ ! -s "$PGDATA/PG_VERSION" ]; then
  mkdir -p "$PGDATA"
  echo "entrypoint: initdb as $(id -un) into $PGDATA"
  /usr/lib/postgresql/15/bin/initdb -D "$PGDATA" -U postgres --auth-local=trust --auth-host=trust >/dev/null
  echo "host all all 0.0.0.0/0 trust" >> "$PGDATA/pg_hba.conf"
  echo "host all all ::/0 trust" >> "$PGDATA/pg_hba.conf"
fi
exec /usr/lib/postgresql/15/bin/postgres -D "$PGDATA" -c listen_addresses='*' \\
  -c unix_socket_directories=/tmp -c dynamic_shared_memory_type=mmap "$@"
"""

# Each image: packages, files written into the root (path -> (mode, uid, gid, text);
# text None makes a directory), lines appended to files, and the config.
IMAGES = {
    "postgres": {
        "packages": ["postgresql-15"],
        "files": {"usr/local/bin/pg-entrypoint": (0o755, 0, 0, PG_ENTRYPOINT)},
        "config": {
            "user": "postgres", "workingdir": "/var/lib/postgresql",
            "entrypoint": ["/usr/local/bin/pg-entrypoint"], "cmd": [],
            "env": ["PATH=/usr/lib/postgresql/15/bin:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
                    "PGDATA=/var/lib/postgresql/data/pgdata", "LANG=C.UTF-8"],
            "stopsignal": "SIGINT",
        },
    },
    "redis": {
        "packages": ["redis-server"],
        "files": {"data": (0o755, "redis", "redis", None)},
        "config": {
            "user": "redis", "workingdir": "/data",
            "entrypoint": ["/usr/bin/redis-server"],
            "cmd": ["--bind", "0.0.0.0", "--protected-mode", "no", "--dir", "/data", "--save", "60", "1"],
            "env": ["PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"],
            "stopsignal": "SIGTERM",
        },
    },
    # A game-server-like image: numeric USER, the files in /home/container.
    "user1000": {
        "packages": [],
        "files": {"home/container": (0o755, 1000, 1000, None)},
        "append": {"etc/passwd": "container:x:1000:1000:container:/home/container:/bin/sh\n",
                   "etc/group": "container:x:1000:\n"},
        "config": {
            "user": "1000:1000", "workingdir": "/home/container",
            "entrypoint": [], "cmd": ["/bin/sh", "-c", "echo \"ready as $(id -u):$(id -g) in $(pwd)\"; exec sleep infinity"],
            "env": ["PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin", "HOME=/home/container"],
            "stopsignal": "SIGTERM",
        },
    },
}


# More tags of an installed image, made from its tag "1" by `umoci config` at install
# time (a new config, the same layers: nothing to download, and the cache keys above do
# not change): the tests of app.update (issue 21) update from one version to another and
# to one whose entrypoint exits 1.
VARIANTS = {
    "redis": {
        "2": {"env": ["NODEAGENT_IMAGE_VERSION=2"]},
        "broken": {"entrypoint": ["/bin/sh"], "cmd": ["-c", "echo 'broken version: exiting 1'; exit 1"]},
    },
    "postgres": {
        "2": {"env": ["NODEAGENT_IMAGE_VERSION=2"]},
        "broken": {"entrypoint": ["/bin/sh"], "cmd": ["-c", "echo 'broken version: exiting 1'; exit 1"]},
    },
}


def add_variants(name, dest):
    """The VARIANTS of name as tags of the installed layout dest."""
    for tag, v in VARIANTS.get(name, {}).items():
        argv = ["umoci", "config", "--image", "%s:%s" % (dest, TAG), "--tag", tag]
        for e in v.get("env", []):
            argv += ["--config.env", e]
        if "entrypoint" in v:
            argv += ["--clear=config.entrypoint", "--clear=config.cmd"]
            argv += [x for e in v["entrypoint"] for x in ("--config.entrypoint", e)]
            argv += [x for c in v.get("cmd", []) for x in ("--config.cmd", c)]
        run(argv)


def die(msg):
    sys.stderr.write("realimages: %s\n" % msg)
    sys.exit(2)


def cache_root(arg):
    return arg or os.environ.get("NODEAGENT_TEST_CACHE") or "/var/cache/nodeagent-tests/realimages"


def key_of(name, mirror):
    spec = IMAGES[name]
    h = hashlib.sha256(json.dumps({"version": VERSION, "suite": SUITE, "mirror": mirror, "name": name,
                                   "spec": spec}, sort_keys=True, default=str).encode())
    return h.hexdigest()[:16]


def run(argv, **kw):
    r = subprocess.run(argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, **kw)
    if r.returncode != 0:
        die("%s failed (%d):\n%s" % (" ".join(argv[:3]), r.returncode, r.stdout[-4000:]))
    return r.stdout


def resolve_id(root, db, name):
    """A name from the root's own /etc/passwd or /etc/group (the built tree is ours)."""
    if isinstance(name, int):
        return name
    with open(os.path.join(root, "etc", db)) as f:
        for line in f:
            parts = line.rstrip("\n").split(":")
            if parts[0] == name:
                return int(parts[2])
    die("%s has no %s in %s" % (root, name, db))


def make_root(name, spec, rootfs, mirror):
    tools = ["mmdebstrap", "umoci"]
    for t in tools:
        if not shutil.which(t):
            die("%s is missing: scripts/deps.sh installs it" % t)
    argv = ["mmdebstrap", "--quiet", "--variant=minbase", "--mode=root", "--format=directory",
            "--aptopt=Acquire::Retries \"3\";",
            # What a container image does not need; keeps the layer small.
            "--dpkgopt=path-exclude=/usr/share/doc/*", "--dpkgopt=path-exclude=/usr/share/man/*",
            "--dpkgopt=path-exclude=/usr/share/locale/*", "--dpkgopt=path-exclude=/usr/share/info/*"]
    if spec["packages"]:
        argv.append("--include=" + ",".join(spec["packages"]))
    argv += [SUITE, rootfs, "deb %s %s main" % (mirror, SUITE), "deb %s %s-updates main" % (mirror, SUITE)]
    run(argv)
    for rel, text in spec.get("append", {}).items():
        with open(os.path.join(rootfs, rel), "a") as f:
            f.write(text)
    for rel, (mode, uid, gid, text) in spec.get("files", {}).items():
        path = os.path.join(rootfs, rel)
        os.makedirs(os.path.dirname(path), exist_ok=True)
        if text is None:
            os.makedirs(path, exist_ok=True)
        else:
            with open(path, "w") as f:
                f.write(text)
        os.chown(path, resolve_id(rootfs, "passwd", uid), resolve_id(rootfs, "group", gid))
        os.chmod(path, mode)
    # apt's lists and caches are not part of an image.
    for d in ("var/lib/apt/lists", "var/cache/apt"):
        p = os.path.join(rootfs, d)
        if os.path.isdir(p):
            for e in os.listdir(p):
                q = os.path.join(p, e)
                if os.path.isfile(q) and not os.path.islink(q):
                    os.unlink(q)


def build(name, cache, mirror):
    if name not in IMAGES:
        die("no image %r (have: %s)" % (name, ", ".join(sorted(IMAGES))))
    spec = IMAGES[name]
    key = key_of(name, mirror)
    top = os.path.join(cache, "%s-%s" % (name, key))
    layout = os.path.join(top, "layout")
    os.makedirs(cache, exist_ok=True)
    with open(os.path.join(cache, ".%s-%s.lock" % (name, key)), "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if os.path.exists(os.path.join(top, "done")):
            return layout, key
        shutil.rmtree(top, ignore_errors=True)
        os.makedirs(top)
        bundle = os.path.join(top, "bundle")
        img = "%s:%s" % (layout, TAG)
        run(["umoci", "init", "--layout", layout])
        run(["umoci", "new", "--image", img])
        run(["umoci", "unpack", "--image", img, bundle])
        rootfs = os.path.join(bundle, "rootfs")
        shutil.rmtree(rootfs)
        make_root(name, spec, rootfs, mirror)
        run(["umoci", "repack", "--image", img, bundle])
        cfg = spec["config"]
        argv = ["umoci", "config", "--image", img, "--config.user", cfg["user"],
                "--config.workingdir", cfg["workingdir"], "--config.stopsignal", cfg["stopsignal"],
                "--clear=config.env", "--clear=config.entrypoint", "--clear=config.cmd"]
        for e in cfg["env"]:
            argv += ["--config.env", e]
        for e in cfg["entrypoint"]:
            argv += ["--config.entrypoint", e]
        for c in cfg["cmd"]:
            argv += ["--config.cmd", c]
        run(argv)
        run(["umoci", "gc", "--layout", layout])
        shutil.rmtree(bundle)
        with open(os.path.join(top, "done"), "w") as f:
            f.write(key + "\n")
        return layout, key


def install(name, images_dir, tag, cache, mirror):
    layout, _ = build(name, cache, mirror)
    dest = os.path.join(images_dir, name)
    if os.path.exists(dest):
        shutil.rmtree(dest)

    def link_or_copy(src, dst):
        if os.path.basename(src) == "index.json":  # rewritten below and by the agent: a copy of its own
            return shutil.copy2(src, dst)
        try:
            os.link(src, dst)  # blobs are immutable: the cache's own files, in no time
        except OSError:
            shutil.copy2(src, dst)
    shutil.copytree(layout, dest, copy_function=link_or_copy)
    add_variants(name, dest)
    if tag != TAG:
        with open(os.path.join(dest, "index.json")) as f:
            index = json.load(f)
        for m in index["manifests"]:
            ann = m.setdefault("annotations", {})
            if ann.get("org.opencontainers.image.ref.name") == TAG:
                ann["org.opencontainers.image.ref.name"] = tag
        with open(os.path.join(dest, "index.json"), "w") as f:
            json.dump(index, f)
    return dest


def main():
    ap = argparse.ArgumentParser(description="Real OCI images from Debian packages (see the top of this file).")
    ap.add_argument("cmd", choices=["list", "build", "install"])
    ap.add_argument("names", nargs="*")
    ap.add_argument("--cache")
    ap.add_argument("--mirror", default=os.environ.get("NODEAGENT_DEBIAN_MIRROR", MIRROR))
    ap.add_argument("--images-dir")
    ap.add_argument("--tag", default=TAG)
    ap.add_argument("--json", action="store_true")
    a = ap.parse_args()
    cache = cache_root(a.cache)
    if a.cmd == "list":
        for n in sorted(IMAGES):
            print(n, key_of(n, a.mirror), " ".join(IMAGES[n]["packages"]) or "-")
        return 0
    if not a.names:
        die("name an image")
    if os.geteuid() != 0:
        die("building an image needs root (mmdebstrap keeps the files' owners)")
    out = {}
    for n in a.names:
        if a.cmd == "build":
            layout, key = build(n, cache, a.mirror)
            out[n] = {"layout": layout, "key": key}
            if not a.json:
                print(layout)
        else:
            if not a.images_dir:
                die("install needs --images-dir")
            dest = install(n, a.images_dir, a.tag, cache, a.mirror)
            out[n] = {"layout": dest, "key": key_of(n, a.mirror)}
            if not a.json:
                print(dest)
    if a.json:
        print(json.dumps(out, sort_keys=True))
    return 0


if __name__ == "__main__":
    sys.exit(main())
