#!/usr/bin/python3
# SPDX-License-Identifier: GPL-2.0-or-later
"""app.update end to end through the controller link (issue 21 item 3): every bad-input
rule; a live plan change seen in the cgroup and in `df` inside the container with the
same process; a command update that succeeds and, run again, converges; a broken update
rolled back with its safety backup restored; kill -9 of the agent at several points of
an update; and with real images (tests/harness/realimages.py: redis and postgres "1",
"2" and "broken" of the same layers) an update that keeps the data (redis-cli SET/GET,
a psql table) and one that rolls back with the data there."""
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
from nodeagent_harness import SRC, check, check_stages, needs, run_cases, wait_for, with_setup  # noqa: E402
from test_apps import (app_job, apps_conf, deploy_params, events, failed, need_root, ok, output, texts,  # noqa: E402
                       wait_events, wait_output)

REALIMAGES = os.path.join(SRC, "tests", "harness", "realimages.py")
CG = "/sys/fs/cgroup"

# Answers console lines: "df" prints the volume's size in MB, "pid" its own pid; "v1"
# says its version at start.
def versioned(tag, extra=""):
    return ["/bin/sh", "-c", f"{extra}echo started {tag}; while read l; do case \"$l\" in "
            "df) df -m /home/container | tail -1 | awk '{print \"size=\" $2}';; "
            "pid) echo pid=$$;; stop) exit 0;; esac; done"]


def storage(s):
    return os.path.join(s.agent.state_dir, "apps")


def record(s, app):
    with open(os.path.join(storage(s), "apps", app, "app.json")) as f:
        return json.load(f)


def crun(s, *argv, timeout=30):
    return subprocess.run(["/usr/bin/crun", "--root", os.path.join(storage(s), "crun"), *argv],
                          capture_output=True, text=True, timeout=timeout)


def container_pid(s, app):
    r = crun(s, "state", f"na-{app}")
    return json.loads(r.stdout)["pid"] if r.returncode == 0 else None


def update(s, app, params, timeout=180):
    jid = s.controller.enqueue("app.update", params, target={"type": "app", "id": app})
    return s.controller.wait_results([jid], timeout)[jid]["results"][-1], jid


def cg_read(ctrl, app, name):
    """A limit of the app's cgroup: v2 (cgroup2 at /sys/fs/cgroup) or v1 (hybrid too)."""
    v2 = os.path.join(CG, "nodeagent", f"app-{app}", name[1])
    path = v2 if os.path.exists(os.path.join(CG, "cgroup.controllers")) else \
        os.path.join(CG, ctrl, "nodeagent", f"app-{app}", name[0])
    with open(path) as f:
        return f.read().split()


def limits(app):
    return {"cpu": cg_read("cpu", app, ("cpu.cfs_quota_us", "cpu.max"))[0],
            "memory": cg_read("memory", app, ("memory.limit_in_bytes", "memory.max"))[0],
            "pids": cg_read("pids", app, ("pids.max", "pids.max"))[0]}


def can_resize_online():
    """Growing a mounted ext4 needs CAP_SYS_RESOURCE (the development sandbox lacks it)."""
    with open("/proc/self/status") as f:
        eff = int(next(ln for ln in f if ln.startswith("CapEff:")).split()[1], 16)
    return bool(eff & (1 << 24))


def console_answer(s, app, line, prefix, timeout=15):
    """Send line, return the newest output line starting with prefix after it."""
    since = output(s, app)["nextSeq"]
    ok(app_job(s, "app.console.send", app, {"line": line}))
    found = []

    def seen():
        found[:] = [t for t in texts(output(s, app, since=since)) if t.startswith(prefix)]
        return found
    wait_for(seen, timeout, f"an answer to {line}")
    return found[-1][len(prefix):]


def deployed_running(s, app, p):
    ok(app_job(s, "app.deploy", app, p, timeout=120))
    ok(app_job(s, "app.power", app, {"action": "start"}))
    wait_for(lambda: ok(app_job(s, "app.status", app))["state"] == "running", 20, "running")


def base(tag="v1", **over):
    return deploy_params(version="1", template={"command": versioned(tag), "startedPattern": f"^started {tag}$"},
                         **over)


@needs("root")
@with_setup(agent_conf=apps_conf)
def bad_input(s):
    """Every refusal of app.update, each with nothing changed."""
    need_root()
    app = str(uuid.uuid4())
    failed(update(s, app, {"version": "2"})[0], "APP_NOT_FOUND")
    deployed_running(s, app, base())
    pid, rec = container_pid(s, app), record(s, app)
    for params, field in (({}, None), ({"version": "2", "healthySec": 9}, "healthySec"),
                          ({"version": "2", "healthySec": 3601}, "healthySec"),
                          ({"version": "2", "safetyBackupId": "no spaces"}, "safetyBackupId"),
                          ({"version": ""}, "version"),
                          ({"plan": {"cpuCores": 1, "memoryMB": 8, "volumeQuotaMB": 32}}, "plan")):
        err = failed(update(s, app, params)[0], "VALIDATION_ERROR")
        if field:
            check(field in err["details"], err)
    # A user the image lacks: VALIDATION_ERROR on template.user.
    t = dict(base()["template"], user="nosuchuser")
    err = failed(update(s, app, {"version": "2", "template": t})[0], "VALIDATION_ERROR")
    check("user" in err["details"].get("template", {}), err)
    # A quota below the data in use: QUOTA_EXCEEDED.
    fs_write(s, app, "big", b"x" * (20 << 20))
    err = failed(update(s, app, {"plan": {"cpuCores": 0.5, "memoryMB": 64, "volumeQuotaMB": 16}})[0],
                 "QUOTA_EXCEEDED")
    check(err["httpStatus"] == 409 and err["details"]["usedMB"] >= 20, err)
    # Nothing changed, and it never stopped.
    now = record(s, app)
    check(now["deploy"] == rec["deploy"] and "update" not in now, now)
    check(container_pid(s, app) == pid, "the app was restarted")
    check(not events(s, "app.updated", app), events(s, "app.updated", app))
    ok(app_job(s, "app.delete", app))


def fs_write(s, app, path, data):
    """app.files.write in pieces of 3 MiB (one write takes at most 4 MiB)."""
    step = 3 << 20
    for off in range(0, max(len(data), 1), step):
        ok(app_job(s, "app.files.write", app, {"path": path, "offset": off,
                                               "contentBase64": base64.b64encode(data[off:off + step]).decode()}))


def fs_exists(s, app, path):
    names = [e["name"] for e in ok(app_job(s, "app.files.list", app, {"path": "/"}))]
    return path in names


@needs("root")
@with_setup(agent_conf=apps_conf)
def live_plan(s):
    """CPU, memory and pids changed in the running container's cgroup, the same process;
    the volume grown (online where the kernel lets the agent, else offline while stopped)."""
    need_root()
    app = str(uuid.uuid4())
    deployed_running(s, app, base(plan={"cpuCores": 0.5, "memoryMB": 64, "volumeQuotaMB": 32}))
    pid = container_pid(s, app)
    check(limits(app) == {"cpu": "50000", "memory": str(64 << 20), "pids": "512"}, limits(app))
    size0 = int(console_answer(s, app, "df", "size="))
    t0 = time.time()
    rec = ok(update(s, app, {"plan": {"cpuCores": 1.5, "memoryMB": 128, "volumeQuotaMB": 32, "pids": 100}})[0])
    print(f"live plan change: {time.time() - t0:.2f}s")
    check(rec["rolledBack"] is False and rec["plan"]["memoryMB"] == 128 and rec["state"] == "running", rec)
    check(limits(app) == {"cpu": "150000", "memory": str(128 << 20), "pids": "100"}, limits(app))
    check(container_pid(s, app) == pid, "restarted for a plan change")
    check(console_answer(s, app, "pid", "pid=") == "1", "the shell is no longer the container's first process")
    # Lower again: still in place.
    ok(update(s, app, {"plan": {"cpuCores": 0.25, "memoryMB": 48, "volumeQuotaMB": 32, "pids": 64}})[0])
    check(limits(app) == {"cpu": "25000", "memory": str(48 << 20), "pids": "64"}, limits(app))
    wait_events(s, "app.updated", app, lambda e: e["data"] == {"version": "1", "rolledBack": False})
    # A smaller quota above the data in use: refused, nothing changed (proto/README.md).
    err = failed(update(s, app, {"plan": {"cpuCores": 0.25, "memoryMB": 48, "volumeQuotaMB": 24, "pids": 64}})[0],
                 "INVALID_STATE")
    check(err["details"]["state"] == "volume-shrink", err)
    grow = {"plan": {"cpuCores": 0.25, "memoryMB": 48, "volumeQuotaMB": 64, "pids": 64}}
    if can_resize_online():
        ok(update(s, app, grow)[0])
        size1 = int(console_answer(s, app, "df", "size="))
        check(size1 >= size0 + 28, (size0, size1))
        check(container_pid(s, app) == pid, "restarted for a larger volume")
    else:
        # Here the kernel refuses the online resize: DRIVER_ERROR, nothing changed; the
        # same update on the stopped app grows it offline.
        err = failed(update(s, app, grow)[0], "DRIVER_ERROR")
        check(record(s, app)["deploy"]["plan"]["volumeQuotaMB"] == 32, err)
        check(container_pid(s, app) == pid and limits(app)["memory"] == str(48 << 20), "changed after all")
        print("online resize not permitted here (no CAP_SYS_RESOURCE): grown offline instead")
        ok(app_job(s, "app.power", app, {"action": "stop", "graceSec": 10}))
        ok(update(s, app, grow)[0])
        ok(app_job(s, "app.power", app, {"action": "start"}))
        wait_output(s, app, "started v1")
        size1 = int(console_answer(s, app, "df", "size="))
        check(size1 >= size0 + 28, (size0, size1))
    ok(app_job(s, "app.delete", app))


@needs("root")
@with_setup(agent_conf=apps_conf)
def command_update(s):
    """A new command and version: restarted on it, watched, kept; the same params again converge."""
    need_root()
    app = str(uuid.uuid4())
    deployed_running(s, app, base())
    fs_write(s, app, "data.txt", b"kept")
    params = {"version": "2", "healthySec": 10,
              "template": dict(base()["template"], command=versioned("v2"), startedPattern="^started v2$")}
    t0 = time.time()
    res, jid = update(s, app, params)
    rec = ok(res)
    print(f"busybox update with a 10 s watch: {time.time() - t0:.2f}s")
    check(rec["version"] == "2" and rec["rolledBack"] is False and rec["state"] == "running", rec)
    stages = [p["stage"] for p in s.controller.admin("GET", f"/admin/jobs/{jid}")["progress"]]
    check_stages(stages, ["pulling-image", "unpacking", "backing-up", "restarting", "verifying"])
    check("verifying" in stages, stages)
    wait_output(s, app, "started v2")
    check(fs_exists(s, app, "data.txt"), "the volume lost its data")
    wait_events(s, "app.updated", app, lambda e: e["data"] == {"version": "2", "rolledBack": False})
    pid = container_pid(s, app)
    t0 = time.time()
    again = ok(update(s, app, params)[0])
    check(time.time() - t0 < 8, "converging took a watch")
    check(again["version"] == "2" and container_pid(s, app) == pid, "the same params restarted it")
    check("update" not in record(s, app), record(s, app))
    # A stopped app is updated without a start.
    ok(app_job(s, "app.power", app, {"action": "stop", "graceSec": 10}))
    # ... and a new user re-owns the volume's root (issue 21 item 1).
    p3 = dict(params, version="3", template=dict(params["template"], command=versioned("v3"),
                                                  startedPattern="^started v3$", user="1000:1000"))
    rec = ok(update(s, app, p3)[0])
    check(rec["version"] == "3" and rec["state"] == "stopped", rec)
    check(ok(app_job(s, "app.status", app))["state"] == "stopped", "started by the update")
    vol = os.stat(os.path.join(storage(s), "apps", app, "disk", "volume"))
    base_id = record(s, app)["uidBase"]
    check((vol.st_uid, vol.st_gid) == (base_id + 1000, base_id + 1000), (vol.st_uid, vol.st_gid, base_id))
    ok(app_job(s, "app.power", app, {"action": "start"}))
    wait_output(s, app, "started v3")
    ok(app_job(s, "app.delete", app))


@needs("root")
@with_setup(agent_conf=apps_conf)
def broken_rollback(s):
    """A version that exits 1: ROLLED_BACK with the reason and its last lines; the old
    command runs again, the safety backup took back what the broken one wrote."""
    need_root()
    app = str(uuid.uuid4())
    deployed_running(s, app, base())
    fs_write(s, app, "data.txt", b"precious")
    broken = ["/bin/sh", "-c", "echo broken writes; echo junk > /home/container/broken-was-here; "
              "rm /home/container/data.txt; exit 1"]
    params = {"version": "2", "safetyBackupId": "before-v2", "healthySec": 10,
              "template": dict(base()["template"], command=broken, startedPattern=None)}
    t0 = time.time()
    err = failed(update(s, app, params)[0], "ROLLED_BACK")
    print(f"broken update rolled back in {time.time() - t0:.2f}s")
    check(err["httpStatus"] == 409 and "exit code 1" in err["details"]["reason"], err)
    check(err["details"]["exitCode"] == 1 and "broken writes" in err["details"]["lastLines"], err)
    wait_for(lambda: ok(app_job(s, "app.status", app))["state"] == "running", 20, "running again")
    check(record(s, app)["deploy"]["version"] == "1" and "update" not in record(s, app), record(s, app))
    check(texts(output(s, app)).count("started v1") == 2, texts(output(s, app)))
    check(fs_exists(s, app, "data.txt") and not fs_exists(s, app, "broken-was-here"), "the backup was not restored")
    read = ok(app_job(s, "app.files.read_text", app, {"path": "data.txt"}))
    check(read["content"] == "precious", read)
    wait_events(s, "app.updated", app, lambda e: e["data"]["rolledBack"] and "exit code 1" in e["data"]["reason"]
                and e["data"]["version"] == "1")
    check(any(b["backupId"] == "before-v2" for b in ok(app_job(s, "app.backup.list", app))), "no safety backup")
    # A version that never matches its pattern: "not running after 10 s".
    params = {"version": "2", "healthySec": 10,
              "template": dict(base()["template"], command=versioned("v2"), startedPattern="^never$")}
    err = failed(update(s, app, params)[0], "ROLLED_BACK")
    check(err["details"]["reason"].startswith("not running after 10 s"), err)
    wait_for(lambda: ok(app_job(s, "app.status", app))["state"] == "running", 20, "running again")
    ok(app_job(s, "app.delete", app))


def kill_when(s, app, pred, what, timeout=60):
    """kill -9 the agent as soon as pred() holds (polled fast)."""
    wait_for(pred, timeout, what, interval=0.01)
    s.agent.kill9()


def phase(s, app):
    try:
        return record(s, app).get("update", {}).get("phase")
    except (OSError, ValueError):
        return None


@needs("root")
@with_setup(agent_conf=apps_conf, controller_extra=["--lease-sec", "3"])
def killed(s):
    """kill -9 of the agent during backing-up, right after the switch and during the
    watch: after the restart the app is on exactly one version and running, and the
    job, offered again, ends the update."""
    need_root()
    app = str(uuid.uuid4())
    deployed_running(s, app, base(plan={"cpuCores": 0.5, "memoryMB": 64, "volumeQuotaMB": 128}))
    fs_write(s, app, "data.txt", b"precious")
    fs_write(s, app, "noise", os.urandom(24 << 20))  # a backup that takes a moment
    for n, name in enumerate(("backing-up", "switched", "verifying"), start=2):
        tag = f"v{n}"
        if name == "verifying":
            def pred(tag=tag):
                return phase(s, app) == "switched" and tag_seen(s, app, tag)
        else:
            def pred(name=name):
                return phase(s, app) == name
        params = {"version": str(n), "safetyBackupId": f"before-{tag}", "healthySec": 10,
                  "template": dict(base()["template"], command=versioned(tag), startedPattern=f"^started {tag}$")}
        jid = s.controller.enqueue("app.update", params, target={"type": "app", "id": app})
        kill_when(s, app, pred, f"the update at {name}")
        print(f"killed at {name} (phase in the record: {phase(s, app)})")
        one_container(s, app)
        s.agent.start()
        # The agent puts the previous version back by itself, then the job comes again.
        wait_events(s, "app.updated", app, lambda e, n=n: e["data"]["rolledBack"] and
                    e["data"].get("reason") == "the agent restarted during the update" and
                    e["data"]["version"] == str(n - 1), timeout=60)
        res = s.controller.wait_results([jid], 180)[jid]["results"][-1]
        rec = ok(res)
        check(rec["version"] == str(n) and rec["state"] == "running", rec)
        wait_for(lambda: ok(app_job(s, "app.status", app))["state"] == "running", 20, "running")
        check("update" not in record(s, app), record(s, app))
        check(record(s, app)["deploy"]["version"] == str(n), record(s, app)["deploy"])
        read = ok(app_job(s, "app.files.read_text", app, {"path": "data.txt"}))
        check(read["content"] == "precious", read)
        one_container(s, app)
    ok(app_job(s, "app.delete", app))


def tag_seen(s, app, tag):
    """The new version printed its first line (read from the ring's file, without the agent)."""
    try:
        data = b""
        for seg in ("output.0", "output.1"):
            p = os.path.join(storage(s), "apps", app, seg)
            if os.path.exists(p):
                with open(p, "rb") as f:
                    data += f.read()
        return f"started {tag}".encode() in data
    except OSError:
        return False


def one_container(s, app):
    r = crun(s, "list", "-q")
    check(r.stdout.split().count(f"na-{app}") <= 1, r.stdout)


def real_conf(*names):
    def conf(s):
        c = apps_conf(s)
        for n in names:
            subprocess.run([sys.executable, REALIMAGES, "install", n, "--images-dir", c["apps"]["images_dir"]],
                           check=True, capture_output=True)
        return c
    return conf


@needs("root")
@with_setup(agent_conf=real_conf("redis"))
def real_redis(s):
    """redis:1 to redis:2 keeps what was SET; redis:broken rolls back with the data there."""
    need_root()
    app = str(uuid.uuid4())
    tmpl = {"id": "redis", "image": "redis:1", "command": None, "customCommand": False, "volumePath": "/data",
            "startedPattern": "Ready to accept connections"}
    p = deploy_params(name="cache", hostname="cache", sftpUsername="cache", template=tmpl,
                      plan={"cpuCores": 1, "memoryMB": 128, "volumeQuotaMB": 64})
    del p["template"]["stop"]
    deployed_running(s, app, p)

    def cli(*args):
        r = crun(s, "exec", f"na-{app}", "redis-cli", *args)
        return r.stdout.strip()
    check(cli("SET", "greeting", "hello") == "OK", "SET")
    digest1 = record(s, app)["imageDigest"]
    t0 = time.time()
    rec = ok(update(s, app, {"version": "2", "safetyBackupId": "redis-before-2", "healthySec": 10,
                             "template": dict(tmpl, image="redis:2")}, timeout=300)[0])
    took = time.time() - t0
    print(f"real image update redis:1 -> redis:2 (safety backup, 10 s watch): {took:.2f}s "
          f"({took - 10:.2f}s without the watch)")
    check(rec["version"] == "2" and record(s, app)["imageDigest"] != digest1, rec)
    wait_for(lambda: cli("GET", "greeting") == "hello", 20, "the data after the update")
    check("NODEAGENT_IMAGE_VERSION=2" in cli_env(s, app), "not running on redis:2")
    digest2 = record(s, app)["imageDigest"]
    t0 = time.time()
    err = failed(update(s, app, {"version": "3", "safetyBackupId": "redis-before-3", "healthySec": 10,
                                 "template": dict(tmpl, image="redis:broken")}, timeout=300)[0], "ROLLED_BACK")
    print(f"real image update to redis:broken rolled back in {time.time() - t0:.2f}s")
    check("exit code 1" in err["details"]["reason"], err)
    check(any("broken version" in ln for ln in err["details"]["lastLines"]), err)
    wait_for(lambda: ok(app_job(s, "app.status", app))["state"] == "running", 30, "running again")
    wait_for(lambda: cli("GET", "greeting") == "hello", 20, "the data after the rollback")
    check(record(s, app)["deploy"]["version"] == "2", record(s, app)["deploy"])
    check("NODEAGENT_IMAGE_VERSION=2" in cli_env(s, app) and record(s, app)["imageDigest"] == digest2,
          "not back on redis:2")
    ok(app_job(s, "app.delete", app))


@needs("root")
@with_setup(agent_conf=real_conf("postgres"))
def real_postgres(s):
    """postgres:1 to postgres:2 keeps a table; postgres:broken rolls back with it there."""
    need_root()
    app = str(uuid.uuid4())
    tmpl = {"id": "postgres", "image": "postgres:1", "command": None, "customCommand": False,
            "volumePath": "/var/lib/postgresql/data", "startedPattern": "database system is ready to accept connections"}
    p = deploy_params(name="db", hostname="db", sftpUsername="db", template=tmpl,
                      plan={"cpuCores": 1, "memoryMB": 256, "volumeQuotaMB": 128})
    del p["template"]["stop"]
    ok(app_job(s, "app.deploy", app, p, timeout=300))
    ok(app_job(s, "app.power", app, {"action": "start"}))
    wait_for(lambda: ok(app_job(s, "app.status", app))["state"] == "running", 120, "postgres running")

    def psql(sql):
        r = crun(s, "exec", f"na-{app}", "psql", "-h", "/tmp", "-U", "postgres", "-tAc", sql)
        return r.stdout.strip()
    check(psql("create table t(x int); insert into t values (42); select x from t").split()[-1:] == ["42"], "psql")
    t0 = time.time()
    rec = ok(update(s, app, {"version": "2", "safetyBackupId": "pg-before-2", "healthySec": 10,
                             "template": dict(tmpl, image="postgres:2")}, timeout=300)[0])
    print(f"real image update postgres:1 -> postgres:2 (safety backup, 10 s watch): {time.time() - t0:.2f}s")
    check(rec["version"] == "2" and "NODEAGENT_IMAGE_VERSION=2" in cli_env(s, app), rec)
    wait_for(lambda: psql("select x from t") == "42", 30, "the table after the update")
    t0 = time.time()
    err = failed(update(s, app, {"version": "3", "safetyBackupId": "pg-before-3", "healthySec": 10,
                                 "template": dict(tmpl, image="postgres:broken")}, timeout=300)[0], "ROLLED_BACK")
    print(f"real image update to postgres:broken rolled back in {time.time() - t0:.2f}s")
    check("exit code 1" in err["details"]["reason"], err)
    wait_for(lambda: ok(app_job(s, "app.status", app))["state"] == "running", 120, "postgres running again")
    wait_for(lambda: psql("select x from t") == "42", 30, "the table after the rollback")
    check(record(s, app)["deploy"]["version"] == "2", record(s, app)["deploy"])
    ok(app_job(s, "app.delete", app))


def cli_env(s, app):
    """The environment the running container was started with (its bundle's config.json:
    redis-server writes over its own /proc/<pid>/environ)."""
    with open(os.path.join(storage(s), "apps", app, "bundle", "config.json")) as f:
        return json.load(f)["process"]["env"]


if __name__ == "__main__":
    sys.exit(run_cases({f.__name__: f for f in [bad_input, live_plan, command_update, broken_rollback, killed,
                                                real_redis, real_postgres]}))
