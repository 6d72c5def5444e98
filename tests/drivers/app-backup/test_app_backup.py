#!/usr/bin/python3
# SPDX-License-Identifier: GPL-2.0-or-later
"""App backups end to end through the controller link (issue 11 item 5): a running app
that keeps writing backed up, its files changed, restored byte for byte and running
again; ignore patterns; retention by maxBackups; list and delete; bad input; a table of
hostile archives placed as backups, each restore refused with the old volume and a
canary outside it untouched; a restore that does not fit the quota."""
import base64
import hashlib
import io
import json
import os
import subprocess
import sys
import tarfile
import time
import uuid

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "harness"))
sys.path.insert(0, os.path.join(HERE, "..", "..", "agent", "kinds", "apps"))
from nodeagent_harness import check, check_stages, needs, run_cases, wait_for, with_setup  # noqa: E402
from test_apps import apps_conf, app_job, deploy_params, events, failed, need_root, ok, wait_events, wait_output  # noqa: E402

ZSTD = "/usr/bin/zstd"
# Appends a counter to a file ten times a second: a backup of it must be consistent
# (whole lines, no gap) and restore must give back exactly what was archived.
WRITER = ["/bin/sh", "-c", "echo ready; (i=0; while true; do i=$((i+1)); echo \"line $i\" >> /home/container/counter.txt;"
          " sleep 0.1; done) & while read l; do [ \"$l\" = stop ] && kill $! && exit 0; done"]


def volume_dir(s, app):
    return os.path.join(s.agent.state_dir, "apps", "apps", app, "disk", "volume")


def backups_dir(s, app):
    return os.path.join(s.agent.state_dir, "apps", "backups", app)


def tree(root):
    """{relative path: (kind, sha256 or link target, mode, uid)} of everything under root, no link followed."""
    out = {}
    for d, dirs, files in os.walk(root):
        for name in dirs + files:
            p = os.path.join(d, name)
            rel = os.path.relpath(p, root)
            st = os.lstat(p)
            if os.path.islink(p):
                out[rel] = ("link", os.readlink(p), 0, st.st_uid)
            elif os.path.isdir(p):
                out[rel] = ("dir", "", st.st_mode & 0o7777, st.st_uid)
            else:
                with open(p, "rb") as f:
                    out[rel] = ("file", hashlib.sha256(f.read()).hexdigest(), st.st_mode & 0o7777, st.st_uid)
    return out


def archive_members(path):
    data = subprocess.run([ZSTD, "-dc", path], check=True, capture_output=True).stdout
    with tarfile.open(fileobj=io.BytesIO(data)) as t:
        return {m.name: (m, t.extractfile(m).read() if m.isfile() else None) for m in t.getmembers()}


def b64(data):
    return base64.b64encode(data).decode()


def put_files(s, app, files):
    for path, data in files.items():
        parent = os.path.dirname(path)
        if parent != "/":
            ok(app_job(s, "app.files.mkdir", app, {"path": parent}))
        ok(app_job(s, "app.files.write", app, {"path": path, "contentBase64": b64(data)}))


@needs("root")
@with_setup(agent_conf=apps_conf)
def backup_restore(s):
    need_root()
    app = str(uuid.uuid4())
    ok(app_job(s, "app.deploy", app, deploy_params(template={"command": WRITER}, plan={"volumeQuotaMB": 64}),
               timeout=120))
    ok(app_job(s, "app.power", app, {"action": "start"}))
    wait_output(s, app, "ready")
    files = {"/world/level.dat": os.urandom(3 << 20), "/world/region/r.0.0.mca": os.urandom(300000),
             "/config/server.properties": b"motd=hello\n", "/empty.txt": b"", "/logs/latest.log": b"x" * 1000}
    put_files(s, app, files)
    vol = volume_dir(s, app)
    os.symlink("/etc/passwd", os.path.join(vol, "abs-link"))  # archived as a link, never followed
    os.symlink("world/level.dat", os.path.join(vol, "rel-link"))
    os.mkfifo(os.path.join(vol, "a-fifo"))  # skipped
    os.chmod(os.path.join(vol, "config", "server.properties"), 0o640)
    time.sleep(0.5)

    jid = s.controller.enqueue("app.backup.create", {"backupId": "b1", "limits": {"maxBackups": 5}},
                               target={"type": "app", "id": app})
    res = s.controller.wait_results([jid], 120)[jid]["results"][0]
    b1 = ok(res)
    check(b1["backupId"] == "b1" and len(b1["sha256"]) == 64 and b1["sizeBytes"] > 3 << 20, b1)
    stages = [p["stage"] for p in s.controller.admin("GET", f"/admin/jobs/{jid}")["progress"]]
    check_stages(stages, ["archiving", "compressing"])
    fin = wait_events(s, "backup.finished", app, lambda e: e["data"].get("backupId") == "b1")
    check(fin and fin[0]["data"]["status"] == "succeeded" and fin[0]["data"]["sha256"] == b1["sha256"], fin)
    check(ok(app_job(s, "app.status", app))["state"] == "running", "the app runs on after its backup")
    # The same backupId again: the same backup.
    check(ok(app_job(s, "app.backup.create", app, {"backupId": "b1"}))["sha256"] == b1["sha256"])

    path = os.path.join(backups_dir(s, app), "b1.tar.zst")
    with open(path, "rb") as f:
        check(hashlib.sha256(f.read()).hexdigest() == b1["sha256"], "sha256 of the file")
    members = archive_members(path)
    check("a-fifo" not in members and "." not in members and "./" not in members, sorted(members))
    check(members["abs-link"][0].issym() and members["abs-link"][0].linkname == "/etc/passwd", "abs-link")
    for p, data in files.items():
        check(members[p[1:]][1] == data, p)
    check(members["world"][0].uid == 0 and members["config/server.properties"][0].mode & 0o777 == 0o640, "owners")
    counter = members["counter.txt"][1].decode()
    lines = counter.splitlines()
    check(counter.endswith("\n") and lines == [f"line {i}" for i in range(1, len(lines) + 1)],
          f"the counter is consistent: {counter[-80:]!r}")

    # Change everything, then restore.
    ok(app_job(s, "app.files.delete", app, {"path": "/world"}))
    put_files(s, app, {"/config/server.properties": b"motd=changed\n", "/new.txt": b"new"})
    jid = s.controller.enqueue("app.backup.restore", {"backupId": "b1"}, target={"type": "app", "id": app})
    ok(s.controller.wait_results([jid], 120)[jid]["results"][0])
    stages = [p["stage"] for p in s.controller.admin("GET", f"/admin/jobs/{jid}")["progress"]]
    check_stages(stages, ["stopping", "restoring", "starting"])
    wait_for(lambda: ok(app_job(s, "app.status", app))["state"] == "running", 15, "running after the restore")
    ok(app_job(s, "app.power", app, {"action": "stop"}))
    got = tree(vol)
    for name, (m, data) in members.items():
        check(name in got, f"{name} restored")
        kind, digest, mode, uid = got[name]
        if m.isfile() and name != "counter.txt":
            check(kind == "file" and digest == hashlib.sha256(data).hexdigest(), name)
        if m.issym():
            check(kind == "link" and digest == m.linkname, name)
        if not m.issym():
            check(mode == m.mode & 0o7777, (name, oct(mode), oct(m.mode)))
        check(uid >= 1000000000, (name, uid))  # mapped back into the app's range
    with open(os.path.join(vol, "counter.txt")) as f:
        check(f.read().startswith(counter), "counter.txt: the archived lines, then the app's new ones")
    check("new.txt" not in got and "a-fifo" not in got, sorted(got))
    disk = os.path.dirname(vol)
    check(sorted(os.listdir(disk)) in (["layer", "lost+found", "volume"], ["layer", "volume"]), os.listdir(disk))

    # A damaged backup (one byte changed, same size): refused before anything changes.
    before = tree(vol)
    with open(path, "r+b") as f:
        f.seek(100)
        c = f.read(1)
        f.seek(100)
        f.write(bytes([c[0] ^ 0xff]))
    err = failed(app_job(s, "app.backup.restore", app, {"backupId": "b1"}), "VALIDATION_ERROR")
    check("backupId" in err["details"], err)
    check(tree(vol) == before, "a damaged backup changed the volume")
    ok(app_job(s, "app.delete", app))


@needs("root")
@with_setup(agent_conf=apps_conf)
def ignore_retention_list(s):
    need_root()
    app = str(uuid.uuid4())
    ok(app_job(s, "app.deploy", app, deploy_params(), timeout=120))
    put_files(s, app, {"/a.log": b"1", "/keep.log": b"2", "/cache/x": b"3", "/sub/cache": b"4",
                       "/deep/a/b/x.tmp": b"5", "/deep/y.tmp": b"6", "/main.txt": b"7"})
    ign = ["# logs", "*.log", "!keep.log", "/cache/", "deep/**/x.tmp"]
    ok(app_job(s, "app.backup.create", app, {"backupId": "i1", "ignore": ign}))
    names = set(archive_members(os.path.join(backups_dir(s, app), "i1.tar.zst")))
    for n in ("keep.log", "sub/cache", "deep/y.tmp", "main.txt", "deep/a/b"):
        check(n in names, (n, sorted(names)))
    for n in ("a.log", "cache", "cache/x", "deep/a/b/x.tmp"):
        check(n not in names, (n, sorted(names)))

    for bid in ("r1", "r2", "r3"):
        ok(app_job(s, "app.backup.create", app, {"backupId": bid, "limits": {"maxBackups": 2}}))
        time.sleep(0.01)
    ids = [b["backupId"] for b in ok(app_job(s, "app.backup.list", app))]
    check(ids == ["r2", "r3"], ids)
    ok(app_job(s, "app.backup.delete", app, {"backupId": "r2"}))
    check([b["backupId"] for b in ok(app_job(s, "app.backup.list", app))] == ["r3"])
    check(sorted(os.listdir(backups_dir(s, app))) == ["r3.json", "r3.tar.zst"], os.listdir(backups_dir(s, app)))
    failed(app_job(s, "app.backup.delete", app, {"backupId": "r2"}), "BACKUP_NOT_FOUND")
    failed(app_job(s, "app.backup.restore", app, {"backupId": "nope"}), "BACKUP_NOT_FOUND")

    # Bad input: nothing happens.
    for params, field in (({"backupId": "../x"}, "backupId"), ({"backupId": ""}, "backupId"),
                          ({"backupId": "x" * 65}, "backupId"), ({}, "backupId"),
                          ({"backupId": "ok", "limits": {"maxBackups": 0}}, "limits"),
                          ({"backupId": "ok", "ignore": ["x"] * 1001}, "ignore"),
                          ({"backupId": "ok", "ignore": ["a", "b\u0000"]}, "ignore"),
                          ({"backupId": "ok", "ignore": ["y" * 4097]}, "ignore"),
                          ({"backupId": "ok", "ignore": "*.log"}, "ignore")):
        err = failed(app_job(s, "app.backup.create", app, params), "VALIDATION_ERROR")
        # A NUL is refused by the link's own JSON check already, under "params".
        check(field in err["details"] or field in err["details"].get("params", {}), (params, err))
    failed(app_job(s, "app.backup.restore", app, {"backupId": "/etc"}), "VALIDATION_ERROR")
    check(not os.path.exists(os.path.join(backups_dir(s, app), "ok.json")), "a refused create made a backup")
    failed(app_job(s, "app.backup.list", str(uuid.uuid4())), "APP_NOT_FOUND")
    ok(app_job(s, "app.delete", app))


def hostile_archives():
    """(name, tar bytes) of archives a restore must refuse."""
    def build(entries):
        buf = io.BytesIO()
        with tarfile.open(fileobj=buf, mode="w", format=tarfile.PAX_FORMAT) as t:
            for kind, name, extra in entries:
                ti = tarfile.TarInfo(name)
                data = None
                if kind == "file":
                    data = extra or b"owned"
                    ti.size = len(data)
                elif kind == "dir":
                    ti.type = tarfile.DIRTYPE
                elif kind == "sym":
                    ti.type, ti.linkname = tarfile.SYMTYPE, extra
                elif kind == "hard":
                    ti.type, ti.linkname = tarfile.LNKTYPE, extra
                elif kind == "chr":
                    ti.type, ti.devmajor, ti.devminor = tarfile.CHRTYPE, 1, 3
                elif kind == "blk":
                    ti.type, ti.devmajor, ti.devminor = tarfile.BLKTYPE, 8, 0
                elif kind == "fifo":
                    ti.type = tarfile.FIFOTYPE
                t.addfile(ti, io.BytesIO(data) if data is not None else None)
        return buf.getvalue()
    ok_file = ("file", "fine.txt", b"fine")
    return [
        ("dotdot", build([ok_file, ("file", "../x", None)])),
        ("absolute", build([ok_file, ("file", "/etc/x", None)])),
        ("dotdot-deep", build([("dir", "a", None), ("file", "a/../../x", None)])),
        ("link-etc", build([("sym", "l", "/etc"), ("file", "l/passwd", None)])),
        ("link-up", build([("sym", "l", ".."), ("file", "l/x", None)])),
        ("link-canary", build([("sym", "l", "../../canary"), ("file", "l", None)])),
        ("hardlink-etc", build([("hard", "h", "/etc/passwd")])),
        ("hardlink-up", build([("hard", "h", "../canary")])),
        ("chardev", build([("chr", "null", None)])),
        ("fifo", build([("fifo", "f", None)])),
        ("long-name", build([("file", "n" * 5000, None)])),
        ("long-component", build([("file", "d/" + "c" * 300, None)])),
        ("dot", build([("dir", ".", None), ok_file])),
        ("no-parent", build([("file", "missing/x", None)])),
        ("twice", build([ok_file, ok_file])),
        ("not-tar", b"this is not a tar archive at all" * 100),
        ("dot-dotdot", build([ok_file, ("file", "./../x", None)])),
        ("dotdot-after-dot", build([("dir", "a", None), ("file", "a/./../../x", None)])),
        ("double-slash-abs", build([("file", "//etc/x", None)])),
        ("trailing-dotdot", build([("dir", "a", None), ("dir", "a/..", None)])),
        ("dotdot-only", build([("dir", "..", None)])),
        ("link-proc", build([("sym", "p", "/proc/self/root"), ("file", "p/etc/x", None)])),
        ("link-chain", build([("sym", "c1", "c2"), ("sym", "c2", "../.."), ("file", "c1/x", None)])),
        ("link-then-dir", build([("sym", "d", "/tmp"), ("dir", "d/sub", None)])),
        ("link-then-link", build([("sym", "l", "/etc"), ("sym", "l/evil", "/")])),
        ("link-then-hard", build([("sym", "l", "/etc"), ("hard", "l/h", "fine.txt"), ok_file])),
        ("hardlink-abs-dir", build([("hard", "h", "/etc")])),
        ("hardlink-chain-out", build([("dir", "a", None), ("hard", "a/h", "a/../../canary")])),
        ("blockdev", build([("blk", "sda", None)])),
    ]


def place_backup(s, app, bid, tar_bytes):
    """Write a backup as create would: <bid>.tar.zst and its record."""
    d = backups_dir(s, app)
    os.makedirs(d, mode=0o700, exist_ok=True)
    data = subprocess.run([ZSTD, "-q", "-c"], input=tar_bytes, check=True, capture_output=True).stdout
    with open(os.path.join(d, bid + ".tar.zst"), "wb") as f:
        f.write(data)
    with open(os.path.join(d, bid + ".json"), "w") as f:
        json.dump({"backupId": bid, "appId": app, "createdAt": int(time.time() * 1000), "sizeBytes": len(data),
                   "sha256": hashlib.sha256(data).hexdigest(), "format": "tar+zstd"}, f)


@needs("root")
@with_setup(agent_conf=apps_conf)
def hostile_restore(s):
    need_root()
    app = str(uuid.uuid4())
    ok(app_job(s, "app.deploy", app, deploy_params(), timeout=120))
    put_files(s, app, {"/data/keep.bin": os.urandom(100000), "/top.txt": b"top"})
    ok(app_job(s, "app.power", app, {"action": "start"}))
    wait_output(s, app, "ready")
    ok(app_job(s, "app.power", app, {"action": "stop"}))
    vol = volume_dir(s, app)
    disk = os.path.dirname(vol)
    canaries = [os.path.join(disk, "canary"), os.path.join(os.path.dirname(disk), "canary"),
                os.path.join(s.tmp, "canary")]
    for c in canaries:
        with open(c, "w") as f:
            f.write("untouched")
    passwd = open("/etc/passwd", "rb").read()
    before = tree(vol)
    archives = hostile_archives()
    check(len(archives) >= 25, len(archives))
    for i, (name, tar_bytes) in enumerate(archives):
        bid = f"h{i}"
        place_backup(s, app, bid, tar_bytes)
        err = failed(app_job(s, "app.backup.restore", app, {"backupId": bid}), "VALIDATION_ERROR")
        check(err["details"].get("backupId", {}).get("_errors"), (name, err))
        check(tree(vol) == before, f"{name}: the volume changed")
        check(sorted(os.listdir(disk)) == sorted(["canary", "layer", "lost+found", "volume"]) or
              "volume.restore" not in os.listdir(disk), (name, os.listdir(disk)))
        for c in canaries:
            check(open(c).read() == "untouched", f"{name}: {c}")
        check(not os.path.exists("/etc/x") and open("/etc/passwd", "rb").read() == passwd, name)
        check(not os.path.exists(os.path.join(disk, "x")) and not os.path.exists(os.path.join(disk, "h")), name)
        print(f"{name}: refused: {err['details']['backupId']['_errors']}")
    check(ok(app_job(s, "app.status", app))["state"] == "stopped", "a refused restore started the app")
    # Not everything foreign is refused: a hard link to a file restored before it, a link
    # pointing anywhere (stored, never followed), a directory given after its files.
    benign = io.BytesIO()
    with tarfile.open(fileobj=benign, mode="w", format=tarfile.PAX_FORMAT) as t:
        for name, kind, extra in (("d", tarfile.DIRTYPE, None), ("d/a", tarfile.REGTYPE, b"shared"),
                                  ("d/h", tarfile.LNKTYPE, "d/a"), ("up", tarfile.SYMTYPE, "../../../etc/passwd")):
            ti = tarfile.TarInfo(name)
            ti.type = kind
            if kind == tarfile.REGTYPE:
                ti.size = len(extra)
            elif extra:
                ti.linkname = extra
            t.addfile(ti, io.BytesIO(extra) if kind == tarfile.REGTYPE else None)
    place_backup(s, app, "benign", benign.getvalue())
    ok(app_job(s, "app.backup.restore", app, {"backupId": "benign"}))
    got = tree(vol)
    check(sorted(got) == ["d", "d/a", "d/h", "up"], sorted(got))
    check(os.stat(os.path.join(vol, "d/a")).st_ino == os.stat(os.path.join(vol, "d/h")).st_ino, "a hard link")
    check(os.readlink(os.path.join(vol, "up")) == "../../../etc/passwd", "the link as it was")
    for c in canaries:
        os.unlink(c)
    ok(app_job(s, "app.delete", app))


@needs("root")
@with_setup(agent_conf=apps_conf)
def restore_quota(s):
    """A restore that does not fit next to the old contents: QUOTA_EXCEEDED, old contents kept."""
    need_root()
    app = str(uuid.uuid4())
    ok(app_job(s, "app.deploy", app, deploy_params(plan={"volumeQuotaMB": 32}), timeout=120))
    put_files(s, app, {"/small.txt": b"small"})
    vol = volume_dir(s, app)
    before = tree(vol)
    big = io.BytesIO()
    with tarfile.open(fileobj=big, mode="w") as t:
        data = os.urandom(40 << 20)
        ti = tarfile.TarInfo("big.bin")
        ti.size = len(data)
        t.addfile(ti, io.BytesIO(data))
    place_backup(s, app, "big", big.getvalue())
    err = failed(app_job(s, "app.backup.restore", app, {"backupId": "big"}, timeout=120), "QUOTA_EXCEEDED")
    check(err["httpStatus"] == 409 and "big" in err["error"], err)
    check(tree(vol) == before, "the old contents changed")
    check("volume.restore" not in os.listdir(os.path.dirname(vol)), os.listdir(os.path.dirname(vol)))
    ok(app_job(s, "app.delete", app))


@needs("root", "cgroupfs")
@with_setup(agent_conf=apps_conf, agent_env={"NA_FAULTS": "app-backup.slow%1"})
def cancel_thaws(s):
    """A backup cancelled while the app is frozen: JOB_CANCELLED, nothing kept, the app thawed and writing."""
    need_root()
    app = str(uuid.uuid4())
    ok(app_job(s, "app.deploy", app, deploy_params(template={"command": WRITER}), timeout=120))
    vol = volume_dir(s, app)
    for i in range(300):
        with open(os.path.join(vol, f"f{i}"), "wb") as f:
            f.write(b"x" * 100)
    ok(app_job(s, "app.power", app, {"action": "start"}))
    wait_output(s, app, "ready")
    jid = s.controller.enqueue("app.backup.create", {"backupId": "c1"}, target={"type": "app", "id": app})
    wait_for(lambda: any(p["stage"] == "archiving"
                         for p in s.controller.admin("GET", f"/admin/jobs/{jid}")["progress"]), 20, "archiving")
    freezer = [p for p in (f"/sys/fs/cgroup/freezer/nodeagent/app-{app}/freezer.state",
                           f"/sys/fs/cgroup/nodeagent/app-{app}/cgroup.freeze") if os.path.exists(p)]
    check(freezer, "the app's cgroup has a freezer")
    state = open(freezer[0]).read().strip()
    check(state in ("FROZEN", "1"), f"the app is not frozen while it is archived: {state}")
    time.sleep(0.3)
    t0 = time.time()
    s.controller.admin("POST", f"/admin/cancel/{jid}")
    res = s.controller.wait_results([jid], 60)[jid]["results"][0]
    failed(res, "JOB_CANCELLED")
    print(f"cancelled after {time.time() - t0:.2f}s")
    check(time.time() - t0 < 4, "the cancel waited for the end of the backup (300 files x 20 ms)")
    check(os.listdir(backups_dir(s, app)) == [], os.listdir(backups_dir(s, app)))
    check(ok(app_job(s, "app.backup.list", app)) == [], "a cancelled backup is listed")
    check(not [e for e in events(s, "backup.finished", app)], "backup.finished for a cancel")
    counter = os.path.join(vol, "counter.txt")
    n = os.path.getsize(counter)
    wait_for(lambda: os.path.getsize(counter) > n, 5, "the app writes again (thawed)")
    check(open(freezer[0]).read().strip() in ("THAWED", "0"), open(freezer[0]).read())
    ok(app_job(s, "app.delete", app))


def xfs_conf(s):
    """Apps stored on a loop-mounted XFS with reflinks: backups take a copy-on-write snapshot."""
    conf = apps_conf(s)
    if not os.path.exists("/usr/sbin/mkfs.xfs"):
        raise AssertionError("/usr/sbin/mkfs.xfs is missing: scripts/deps.sh installs xfsprogs")
    img, mnt = os.path.join(s.tmp, "xfs.img"), os.path.join(s.tmp, "xfs")
    with open(img, "wb") as f:
        f.truncate(400 << 20)
    subprocess.run(["/usr/sbin/mkfs.xfs", "-q", "-m", "reflink=1", img], check=True)
    os.makedirs(mnt)
    subprocess.run(["/usr/bin/mount", "-o", "loop", img, mnt], check=True)
    os.chmod(mnt, 0o711)
    conf["apps"]["storage_dir"] = os.path.join(mnt, "apps")
    return conf


@needs("root", "cgroupfs")
@with_setup(agent_conf=xfs_conf, agent_env={"NA_FAULTS": "app-backup.slow%1"})
def snapshot_on_reflinks(s):
    """On storage with reflinks the app is frozen only for the snapshot: it runs on (thawed,
    writing) while its volume is archived, and the backup restores byte for byte."""
    need_root()
    mnt = os.path.join(s.tmp, "xfs")
    app = str(uuid.uuid4())
    try:
        ok(app_job(s, "app.deploy", app, deploy_params(template={"command": WRITER}), timeout=120))
        vol = os.path.join(mnt, "apps", "apps", app, "disk", "volume")
        for i in range(60):
            with open(os.path.join(vol, f"f{i}"), "wb") as f:
                f.write(os.urandom(1000))
        ok(app_job(s, "app.power", app, {"action": "start"}))
        wait_output(s, app, "ready")
        time.sleep(0.3)
        jid = s.controller.enqueue("app.backup.create", {"backupId": "s1"}, target={"type": "app", "id": app})
        wait_for(lambda: any(p["stage"] == "archiving"
                             for p in s.controller.admin("GET", f"/admin/jobs/{jid}")["progress"]), 20, "archiving")
        freezer = [p for p in (f"/sys/fs/cgroup/freezer/nodeagent/app-{app}/freezer.state",
                               f"/sys/fs/cgroup/nodeagent/app-{app}/cgroup.freeze") if os.path.exists(p)]
        check(freezer and open(freezer[0]).read().strip() in ("THAWED", "0"), "frozen during a snapshot backup")
        snap = os.path.join(mnt, "apps", "apps", app, "backup-snapshot")
        check(os.path.ismount(snap), "the snapshot is not mounted while it is archived")
        counter = os.path.join(vol, "counter.txt")
        n = os.path.getsize(counter)
        wait_for(lambda: os.path.getsize(counter) > n, 5, "the app writes while it is backed up")
        b = ok(s.controller.wait_results([jid], 60)[jid]["results"][0])
        check(not os.path.exists(snap) and not os.path.exists(snap + ".img"), "the snapshot is left")
        members = archive_members(os.path.join(mnt, "apps", "backups", app, "s1.tar.zst"))
        counter_then = members["counter.txt"][1].decode()
        lines = counter_then.splitlines()
        check(lines == [f"line {i}" for i in range(1, len(lines) + 1)], "the snapshot's counter is consistent")
        check(len(members) >= 61, len(members))
        ok(app_job(s, "app.backup.restore", app, {"backupId": "s1"}))
        wait_for(lambda: ok(app_job(s, "app.status", app))["state"] == "running", 15, "running after the restore")
        with open(counter) as f:
            check(f.read().startswith(counter_then), "restored: the snapshot's counter, then new lines")
        for i in range(60):
            with open(os.path.join(vol, f"f{i}"), "rb") as f:
                check(f.read() == members[f"f{i}"][1], f"f{i}")
        check(b["sha256"], b)
        ok(app_job(s, "app.delete", app))
    finally:
        subprocess.run(["/usr/bin/umount", "-l", mnt], check=False)


if __name__ == "__main__":
    sys.exit(run_cases({f.__name__: f for f in [backup_restore, ignore_retention_list, hostile_restore,
                                                 restore_quota, cancel_thaws, snapshot_on_reflinks]}))
