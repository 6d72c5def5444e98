#!/usr/bin/python3
# SPDX-License-Identifier: GPL-2.0-or-later
"""Real images and the app's whole life, end to end through the controller link (issue
21): images built from Debian packages (tests/harness/realimages.py: Postgres, Redis,
a USER 1000:1000 one) run as their image's user inside the app's id range, their
volume's root and what the agent writes into it belong to that user, a psql and a
redis-cli of another app of the group reach them by hostname; busybox images show the
image's StopSignal used for a stop and a device node in a layer skipped with a system
line; app.delete takes the app's backups; a stopped app after a simulated node reboot
still serves app.files.list and SFTP logins.

The real images are built (downloads) before the harness moves the case into its
private network namespace, and cached outside the tree: the first run takes minutes,
the next ones seconds."""
import base64
import json
import os
import subprocess
import sys
import time
import uuid

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(HERE, "..", "..", "..", "harness"))
sys.path.insert(0, os.path.join(HERE, "..", "..", "..", "sftp"))
from nodeagent_harness import SRC, check, needs, run_cases, wait_for, with_setup  # noqa: E402
from test_apps import (MKIMAGE, app_job, apps_conf, deploy_params, failed, need_root, ok, output, texts,  # noqa: E402
                       wait_output)
import test_app_sftp as sftpt  # noqa: E402

REALIMAGES = os.path.join(SRC, "tests", "harness", "realimages.py")
REAL = {"postgres_user_and_client": ["postgres"], "redis_peer": ["redis"], "user_1000": ["user1000"]}


def real_conf(names):
    def conf(s):
        c = sftpt.sftp_conf(s)  # apps_conf and nodeagent-sftpd on a port of its own
        images = c["apps"]["images_dir"]
        for n in names:
            subprocess.run([sys.executable, REALIMAGES, "install", n, "--images-dir", images], check=True,
                           capture_output=True)
        return c
    return conf


def b64(text):
    return base64.b64encode(text.encode()).decode()


def storage(s):
    return os.path.join(s.agent.state_dir, "apps")


def record(s, app):
    with open(os.path.join(storage(s), "apps", app, "app.json")) as f:
        return json.load(f)


def image_ids(s, app, db, name):
    """(uid, gid) of name in the app's image's own /etc/passwd (db "passwd") or /etc/group."""
    with open(os.path.join(record(s, app)["lower"], "etc", db)) as f:
        for line in f:
            parts = line.split(":")
            if parts[0] == name:
                return int(parts[2]), int(parts[3]) if db == "passwd" else None
    raise AssertionError(f"no {name} in the image's /etc/{db}")


def crun(s, *argv, timeout=30):
    return subprocess.run(["/usr/bin/crun", "--root", os.path.join(storage(s), "crun"), *argv],
                          capture_output=True, text=True, timeout=timeout)


def proc_ids(s, app):
    """The host uid and gid lines of the container's first process (/proc/<pid>/status)."""
    st = json.loads(crun(s, "state", f"na-{app}").stdout)
    with open(f"/proc/{st['pid']}/status") as f:
        lines = {k: v.split() for k, v in (ln.split(":", 1) for ln in f if ":" in ln)}
    return [int(x) for x in lines["Uid"]], [int(x) for x in lines["Gid"]], [int(x) for x in lines["Groups"]]


def volume(s, app):
    return os.path.join(storage(s), "apps", app, "disk", "volume")


def running(s, app, timeout=60):
    wait_for(lambda: ok(app_job(s, "app.status", app))["state"] == "running", timeout, f"app {app} running")


def pg_params(name, group, **over):
    p = deploy_params(name=name, hostname=name, groupId=group, sftpUsername=name,
                      template={"id": "postgres", "image": "postgres:1", "command": None, "customCommand": False,
                                "volumePath": "/var/lib/postgresql/data", "stop": None,
                                "startedPattern": "database system is ready to accept connections"},
                      plan={"cpuCores": 1, "memoryMB": 256, "volumeQuotaMB": 128})
    del p["template"]["stop"]
    for k, v in over.items():
        p["template"][k] = v
    return p


@needs("root")
@with_setup(agent_conf=real_conf(["postgres"]))
def postgres_user_and_client(s):
    need_root()
    db, client, g = str(uuid.uuid4()), str(uuid.uuid4()), str(uuid.uuid4())
    # Bad input: a template.user the image does not have; nothing made (the image is
    # unpacked by then: the user is looked up in its files).
    t0 = time.time()
    err = failed(app_job(s, "app.deploy", db, pg_params("db", g, user="nosuchuser"), timeout=300), "VALIDATION_ERROR")
    check("template" in err["details"] and "user" in err["details"]["template"], err)
    check(not os.path.exists(os.path.join(storage(s), "apps", db)), "a refused deploy left files")
    print(f"postgres image unpacked and the deploy refused in {time.time() - t0:.1f}s")

    t0 = time.time()
    ok(app_job(s, "app.deploy", db, pg_params("db", g), timeout=300))
    print(f"postgres deployed in {time.time() - t0:.1f}s")
    base = record(s, db)["uidBase"]
    pg_uid, pg_gid = image_ids(s, db, "passwd", "postgres")
    check(pg_uid != 0, pg_uid)
    st = os.stat(volume(s, db))
    check((st.st_uid, st.st_gid) == (base + pg_uid, base + pg_gid),
          ("the volume's root belongs to postgres mapped", st.st_uid, st.st_gid, base, pg_uid))
    t0 = time.time()
    ok(app_job(s, "app.power", db, {"action": "start"}))
    try:
        running(s, db, 90)
    except AssertionError:
        raise AssertionError(texts(output(s, db))) from None
    print(f"postgres ready in {time.time() - t0:.1f}s")
    out = texts(output(s, db))
    check(any("initdb as postgres" in t for t in out), out)
    uids, gids, _ = proc_ids(s, db)
    check(uids == [base + pg_uid] * 4, ("postgres's process runs as postgres mapped", uids, base, pg_uid))
    check(gids[0] == base + pg_gid, gids)
    check(not any("cannot be run as root" in t for t in out), out)

    # A psql of another app of the group, by hostname.
    cp = pg_params("pgclient", g)
    cp["template"].update({"id": "pgclient", "customCommand": True, "startedPattern": "^ready$",
                           "command": ["/bin/sh", "-c", "echo ready; exec sleep infinity"]})
    cp["template"].pop("volumePath")
    ok(app_job(s, "app.deploy", client, cp, timeout=120))
    ok(app_job(s, "app.power", client, {"action": "start"}))
    running(s, client)
    r = crun(s, "exec", f"na-{client}", "psql", "-h", "db", "-U", "postgres", "-tAc",
             "create table t(x int); insert into t values (42); select x from t")
    check(r.returncode == 0 and r.stdout.split()[-1:] == ["42"], ("psql from the group", r.stdout, r.stderr))

    # A file written by app.files.write belongs to postgres; its data directory too.
    ok(app_job(s, "app.files.write", db, {"path": "/note.txt", "contentBase64": b64("from the panel\n")}))
    st = os.stat(os.path.join(volume(s, db), "note.txt"))
    check((st.st_uid, st.st_gid) == (base + pg_uid, base + pg_gid), ("app.files.write's owner", st.st_uid, st.st_gid))
    st = os.stat(os.path.join(volume(s, db), "pgdata", "PG_VERSION"))
    check(st.st_uid == base + pg_uid, st.st_uid)

    # The stop uses the image's StopSignal (SIGINT: Postgres's fast shutdown).
    ok(app_job(s, "app.power", db, {"action": "stop", "graceSec": 30}))
    out = texts(output(s, db))
    check("stopping: sending SIGINT" in out, out)
    check(any("fast shutdown request" in t for t in out), out)
    for app in (db, client):
        ok(app_job(s, "app.delete", app))


@needs("root")
@with_setup(agent_conf=real_conf(["redis"]))
def redis_peer(s):
    need_root()
    cache, peer, g = str(uuid.uuid4()), str(uuid.uuid4()), str(uuid.uuid4())
    p = deploy_params(name="cache", hostname="cache", groupId=g, sftpUsername="cache",
                      template={"id": "redis", "image": "redis:1", "command": None, "customCommand": False,
                                "volumePath": "/data", "startedPattern": "Ready to accept connections"},
                      plan={"cpuCores": 1, "memoryMB": 128, "volumeQuotaMB": 32})
    del p["template"]["stop"]
    ok(app_job(s, "app.deploy", cache, p, timeout=300))
    ok(app_job(s, "app.power", cache, {"action": "start"}))
    try:
        running(s, cache, 60)
    except AssertionError:
        raise AssertionError(texts(output(s, cache))) from None
    base = record(s, cache)["uidBase"]
    r_uid, _ = image_ids(s, cache, "passwd", "redis")
    check(proc_ids(s, cache)[0][0] == base + r_uid, "redis runs as redis")
    q = dict(p, name="peer", hostname="peer", sftpUsername="peer")
    q["template"] = dict(p["template"], id="peer", customCommand=True, startedPattern="^ready$",
                         command=["/bin/sh", "-c", "echo ready; exec sleep infinity"])
    ok(app_job(s, "app.deploy", peer, q, timeout=120))
    ok(app_job(s, "app.power", peer, {"action": "start"}))
    running(s, peer)
    r = crun(s, "exec", f"na-{peer}", "redis-cli", "-h", "cache", "SET", "greeting", "hello")
    check(r.stdout.strip() == "OK", (r.stdout, r.stderr))
    r = crun(s, "exec", f"na-{peer}", "redis-cli", "-h", "cache", "GET", "greeting")
    check(r.stdout.strip() == "hello", (r.stdout, r.stderr))
    for app in (cache, peer):
        ok(app_job(s, "app.delete", app))


@needs("root")
@with_setup(agent_conf=real_conf(["user1000"]))
def user_1000(s):
    need_root()
    app = str(uuid.uuid4())
    p = deploy_params(name="game", hostname="game", sftpUsername="game",
                      template={"id": "game", "image": "user1000:1", "command": None, "customCommand": False,
                                "startedPattern": "^ready as"},
                      plan={"cpuCores": 0.5, "memoryMB": 64, "volumeQuotaMB": 32})
    del p["template"]["stop"]
    ok(app_job(s, "app.deploy", app, p, timeout=300))
    base = record(s, app)["uidBase"]
    st = os.stat(volume(s, app))
    check((st.st_uid, st.st_gid) == (base + 1000, base + 1000), ("volume root", st.st_uid, st.st_gid, base))
    ok(app_job(s, "app.power", app, {"action": "start"}))
    running(s, app)
    check("ready as 1000:1000 in /home/container" in texts(output(s, app)), texts(output(s, app)))
    uids, gids, _ = proc_ids(s, app)
    check(uids == [base + 1000] * 4 and gids[0] == base + 1000, (uids, gids))
    ok(app_job(s, "app.files.mkdir", app, {"path": "/world"}))
    ok(app_job(s, "app.files.write", app, {"path": "/world/level.dat", "contentBase64": b64("x")}))
    for rel in ("world", "world/level.dat"):
        st = os.stat(os.path.join(volume(s, app), rel))
        check((st.st_uid, st.st_gid) == (base + 1000, base + 1000), (rel, st.st_uid, st.st_gid))
    # A file uploaded by SFTP is the app's user's too.
    s.local = os.path.join(s.tmp, "local")
    os.makedirs(s.local)
    with open(os.path.join(s.local, "server.properties"), "w") as f:
        f.write("motd=hello\n")
    key, pub = sftpt.keypair(s, "game_key")
    ok(app_job(s, "app.sftp.set", app, {"enabled": True, "publicKeys": [pub]}))
    wait_for(sftpt.listening, 10, "nodeagent-sftpd listening")
    sftpt.sftp_ok(s, "game", ["put server.properties world/server.properties"], key=key)
    st = os.stat(os.path.join(volume(s, app), "world", "server.properties"))
    check((st.st_uid, st.st_gid) == (base + 1000, base + 1000), ("SFTP upload's owner", st.st_uid, st.st_gid))
    # The process can change what the agent wrote.
    r = crun(s, "exec", f"na-{app}", "/bin/sh", "-c",
             "echo y >> /home/container/world/level.dat && echo z >> /home/container/world/server.properties "
             "&& echo done")
    check(r.stdout.strip() == "done", (r.stdout, r.stderr))
    ok(app_job(s, "app.delete", app))
    # template.user overrides the image's: a name the image has, and one it lacks.
    other = str(uuid.uuid4())
    q = json.loads(json.dumps(p))
    q["template"]["user"] = "nobody"
    ok(app_job(s, "app.deploy", other, q, timeout=120))
    nob, nog = image_ids(s, other, "passwd", "nobody")
    st = os.stat(volume(s, other))
    check(st.st_uid == record(s, other)["uidBase"] + nob, ("template.user's volume root", st.st_uid))
    ok(app_job(s, "app.delete", other))
    q["template"]["user"] = "steam"
    err = failed(app_job(s, "app.deploy", other, q), "VALIDATION_ERROR")
    check("no user 'steam'" in json.dumps(err["details"]), err)


def busybox_signal_conf(s):
    c = apps_conf(s)
    images = c["apps"]["images_dir"]
    dev = json.dumps([{"path": "dev/null", "type": "chardev", "major": 1, "minor": 3},
                      {"path": "dev/zero", "type": "chardev", "major": 1, "minor": 5}])
    subprocess.run([sys.executable, MKIMAGE, "--layout", os.path.join(images, "sigint"), "--tag", "1",
                    "--stop-signal", "SIGINT", "--extra-layer", dev], check=True, capture_output=True)
    subprocess.run([sys.executable, MKIMAGE, "--layout", os.path.join(images, "ghost"), "--tag", "1",
                    "--user", "ghost"], check=True, capture_output=True)
    return c


SIGNAL_CMD = ["/bin/sh", "-c", "trap 'echo got INT; exit 0' INT; trap 'echo got TERM; exit 0' TERM; "
              "echo ready; while :; do sleep 0.2; done"]


@needs("root")
@with_setup(agent_conf=busybox_signal_conf)
def stop_signal_and_devices(s):
    need_root()
    app = str(uuid.uuid4())
    p = deploy_params(template={"image": "sigint:1", "command": SIGNAL_CMD})
    del p["template"]["stop"]
    ok(app_job(s, "app.deploy", app, p, timeout=120))
    out = texts(output(s, app))
    check(any("skipped 2 device nodes" in t and "dev/null" in t for t in out), ("the system line", out))
    lines = output(s, app)["lines"]
    check(any(ln["stream"] == "system" and "device node" in ln["text"] for ln in lines), lines)
    ok(app_job(s, "app.power", app, {"action": "start"}))
    wait_output(s, app, "ready")
    ok(app_job(s, "app.power", app, {"action": "stop", "graceSec": 20}))
    out = texts(output(s, app))
    check("stopping: sending SIGINT" in out and "got INT" in out and "got TERM" not in out, out)
    ok(app_job(s, "app.delete", app))
    # An image whose own User is not in its /etc/passwd is a broken image: DRIVER_ERROR, nothing made.
    ghost = str(uuid.uuid4())
    err = failed(app_job(s, "app.deploy", ghost, deploy_params(template={"image": "ghost:1"}), timeout=120),
                 "DRIVER_ERROR")
    check(err["httpStatus"] != 422 and "no user 'ghost'" in err["error"] + json.dumps(err.get("details")), err)
    check(not os.path.exists(os.path.join(storage(s), "apps", ghost)), "a refused deploy left files")
    # template.stop, when given, wins over the image's.
    p["template"]["stop"] = {"signal": "SIGTERM"}
    ok(app_job(s, "app.deploy", app, p, timeout=120))
    ok(app_job(s, "app.power", app, {"action": "start"}))
    wait_output(s, app, "ready")
    ok(app_job(s, "app.power", app, {"action": "stop", "graceSec": 20}))
    out = texts(output(s, app))
    check("got TERM" in out and "got INT" not in out, out)
    ok(app_job(s, "app.delete", app))


@needs("root")
@with_setup(agent_conf=apps_conf)
def delete_takes_backups(s):
    need_root()
    app = str(uuid.uuid4())
    ok(app_job(s, "app.deploy", app, deploy_params(), timeout=120))
    ok(app_job(s, "app.files.write", app, {"path": "/data.txt", "contentBase64": b64("keep me\n")}))
    ok(app_job(s, "app.backup.create", app, {"backupId": "b1"}, timeout=120))
    d = os.path.join(storage(s), "backups", app)
    check(os.path.exists(os.path.join(d, "b1.tar.zst")), os.listdir(d) if os.path.isdir(d) else d)
    ok(app_job(s, "app.delete", app))
    check(not os.path.exists(d), "the app's backups are left")


def reboot_conf(s):
    return sftpt.sftp_conf(s)


def umount_when_free(path, timeout=10):
    """umount path once the processes of the agent that stopped (an SFTP session
    ending on its parent's death) have let go of it."""
    wait_for(lambda: subprocess.run(["umount", path], capture_output=True).returncode == 0, timeout,
             f"{path} unmounted")


@needs("root")
@with_setup(agent_conf=reboot_conf)
def stopped_after_reboot(s):
    """A stopped app's volume after a node reboot (unmounted, the agent started again):
    the files kinds and an SFTP login work without a start."""
    need_root()
    s.local = os.path.join(s.tmp, "local")
    os.makedirs(s.local)
    app = str(uuid.uuid4())
    ok(app_job(s, "app.deploy", app, deploy_params(sftpUsername="gamma"), timeout=120))
    ok(app_job(s, "app.files.write", app, {"path": "/saved.txt", "contentBase64": b64("before the reboot\n")}))
    key, pub = sftpt.keypair(s, "gamma_key")
    ok(app_job(s, "app.sftp.set", app, {"enabled": True, "publicKeys": [pub]}))
    wait_for(sftpt.listening, 10, "nodeagent-sftpd listening")
    check("saved.txt" in sftpt.sftp_ok(s, "gamma", ["ls"], key=key))

    # The node reboots: the agent goes, the volume is unmounted, the agent comes back.
    check(s.agent.stop() == 0)
    disk = os.path.join(storage(s), "apps", app, "disk")
    umount_when_free(disk)
    check(not os.path.ismount(disk), "the volume is still mounted")
    s.agent.start()
    wait_for(sftpt.listening, 15, "nodeagent-sftpd listening again")
    check(ok(app_job(s, "app.status", app))["state"] == "stopped")
    # SFTP first (the agent never sees the login: the volume must be there already).
    wait_for(lambda: os.path.ismount(disk), 10, "the stopped app's volume mounted after the agent's start")
    out = sftpt.sftp_ok(s, "gamma", ["ls"], key=key)
    check("saved.txt" in out, out)
    # And the files kinds, after the volume is unmounted again (mounted on demand).
    umount_when_free(disk)
    names = [e["name"] for e in ok(app_job(s, "app.files.list", app, {"path": "/"}))]
    check("saved.txt" in names, names)
    check(ok(app_job(s, "app.status", app))["state"] == "stopped", "a files kind started the app")
    ok(app_job(s, "app.delete", app))


CASES = {"postgres_user_and_client": postgres_user_and_client, "redis_peer": redis_peer, "user_1000": user_1000,
         "stop_signal_and_devices": stop_signal_and_devices, "delete_takes_backups": delete_takes_backups,
         "stopped_after_reboot": stopped_after_reboot}

if __name__ == "__main__":
    # The real images are built here, in the host's network namespace, before the case
    # enters its private one (nothing resolves there); cached, so a second run is quick.
    if sys.argv[1:2] and sys.argv[1] in REAL and os.geteuid() == 0:
        r = subprocess.run([sys.executable, REALIMAGES, "build", *REAL[sys.argv[1]]])
        if r.returncode != 0:
            sys.exit(1)
    sys.exit(run_cases(CASES))
