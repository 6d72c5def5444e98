#!/usr/bin/python3
# SPDX-License-Identifier: GPL-2.0-or-later
"""Apps end to end through the controller link (issue 10): a busybox image in an OCI
layout, deployed, started, read, talked to, stopped by its console line, restarted
with a new command, crashed into a crash loop, limited by the kernel, surviving a
kill -9 of the agent, and deleted leaving nothing behind."""
import json
import os
import subprocess
import sys
import time
import uuid

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "..", "harness"))
from nodeagent_harness import BUILD, SRC, Skip, certs_dir, check, check_stages, needs, run_cases, wait_for, with_setup  # noqa: E402

MKIMAGE = os.path.join(SRC, "tests", "harness", "mkimage.py")
ECHO = ["/bin/sh", "-c", 'echo ready; while read l; do echo "got $l"; [ "$l" = stop ] && exit 0; done']


def need_root():
    if os.geteuid() != 0:
        raise Skip("apps need root (mounts, loop devices, user namespaces)")
    for tool in ("/usr/bin/crun", "/bin/busybox"):
        if not os.path.exists(tool):
            raise AssertionError(f"{tool} is missing: scripts/deps.sh installs it")


def apps_conf(s):
    os.chmod(s.tmp, 0o711)  # containers traverse to their root from inside their user namespace
    images = os.path.join(s.tmp, "app-images")
    os.makedirs(images, exist_ok=True)
    subprocess.run([sys.executable, MKIMAGE, "--layout", os.path.join(images, "busybox"), "--tag", "1"],
                   check=True, capture_output=True)
    return {"apps": {"images_dir": images, "monitor": os.path.join(BUILD, "monitor", "nodeagent-monitor"),
                     "crash_backoff_ms": "300,300,300", "restart_stagger_sec": "0"}}


def deploy_params(**over):
    # A hostname and an sftpUsername are one app's on a node (issue 20): one given names both.
    if "hostname" in over and "sftpUsername" not in over:
        over["sftpUsername"] = over["hostname"]
    elif "sftpUsername" in over and "hostname" not in over:
        over["hostname"] = over["sftpUsername"]
    p = {"name": "demo", "hostname": "demo", "type": "app", "version": "1", "sftpUsername": "demo",
         "template": {"id": "echo", "image": "busybox:1", "command": ECHO, "customCommand": True,
                      "stop": {"line": "stop"}, "startedPattern": "^ready$"},
         "plan": {"cpuCores": 0.5, "memoryMB": 64, "volumeQuotaMB": 32}}
    for k, v in over.items():
        if isinstance(v, dict) and isinstance(p.get(k), dict):
            p[k] = {**p[k], **v}
        else:
            p[k] = v
    return p


def app_job(s, kind, app, params=None, timeout=60):
    jid = s.controller.enqueue(kind, params or {}, target={"type": "app", "id": app})
    return s.controller.wait_results([jid], timeout)[jid]["results"][0]


def ok(res):
    check(res["status"] == "succeeded", res)
    return res["data"]


def failed(res, code):
    check(res["status"] == "failed" and res["error"]["code"] == code, res)
    return res["error"]


def output(s, app, since=None):
    params = {"limit": 1000}
    if since is not None:
        params["sinceSeq"] = since
    return ok(app_job(s, "app.output", app, params))


def texts(out):
    return [line["text"] for line in out["lines"]]


def wait_output(s, app, text, timeout=15):
    try:
        wait_for(lambda: text in texts(output(s, app)), timeout, f"'{text}' in the app's output")
    except AssertionError as e:
        raise AssertionError(f"{e}; the output: {texts(output(s, app))}") from None


def events(s, kind, app):
    return [e for r in s.controller.state()["reports"] for e in r.get("events", [])
            if e["type"] == kind and e["targetId"] == app]


def wait_events(s, kind, app, pred=lambda e: True, timeout=15):
    """Events travel in reports, apart from the job's result: wait for them."""
    found = []

    def seen():
        found[:] = [e for e in events(s, kind, app) if pred(e)]
        return found
    wait_for(seen, timeout, f"a {kind} event of {app}")
    return found


def nothing_left(s, app):
    storage = os.path.join(s.agent.state_dir, "apps")
    check(not os.path.exists(os.path.join(storage, "apps", app)), "the app's directory is left")
    with open("/proc/self/mountinfo") as f:
        check(app not in f.read(), "a mount of the app is left")
    r = subprocess.run(["/usr/bin/crun", "--root", os.path.join(storage, "crun"), "list", "-q"],
                       capture_output=True, text=True)
    check(f"na-{app}" not in r.stdout, r.stdout)
    ids = os.path.join(storage, "app-ids.json")
    if os.path.exists(ids):
        check(app not in open(ids).read(), "its id range is still allocated")


@needs("root")
@with_setup(agent_conf=apps_conf)
def lifecycle(s):
    need_root()
    app = str(uuid.uuid4())
    hello = s.controller.hello()
    check(hello["capabilities"]["appDriver"] == "crun", hello["capabilities"])
    check("app.deploy" in hello["capabilities"]["jobKinds"], hello["capabilities"])
    # Power before deploy: APP_NOT_FOUND.
    failed(app_job(s, "app.power", app, {"action": "start"}), "APP_NOT_FOUND")

    jid = s.controller.enqueue("app.deploy", deploy_params(), target={"type": "app", "id": app})
    res = s.controller.wait_results([jid], 120)[jid]["results"][0]
    rec = ok(res)
    check(rec["id"] == app and rec["state"] == "stopped" and rec["volumeQuotaMB"] == 32, rec)
    stages = [p["stage"] for p in s.controller.admin("GET", f"/admin/jobs/{jid}")["progress"]]
    check_stages(stages, ["pulling-image", "unpacking", "creating-volume", "configuring"])
    # The same params again: the same app; other params: INVALID_STATE.
    check(ok(app_job(s, "app.deploy", app, deploy_params()))["id"] == app)
    failed(app_job(s, "app.deploy", app, deploy_params(name="other")), "INVALID_STATE")

    t0 = time.time()
    st = ok(app_job(s, "app.power", app, {"action": "start"}))["state"]
    check(st in ("starting", "running"), st)
    wait_output(s, app, "ready")
    wait_for(lambda: ok(app_job(s, "app.status", app))["state"] == "running", 10, "running after the pattern")
    print(f"started and printed in {time.time() - t0:.2f}s")
    ok(app_job(s, "app.power", app, {"action": "start"}))  # converging
    ok(app_job(s, "app.console.send", app, {"line": "hello there"}))
    wait_output(s, app, "got hello there")
    status = ok(app_job(s, "app.status", app))
    check(status["state"] == "running" and status["startedAt"] and status["memoryMB"] >= 0, status)
    check(status["volumeUsedMB"] >= 0, status)
    m = ok(app_job(s, "app.metrics", app))
    check("now" in m and "series" in m, m)

    # Stop by the console line: the app exits 0 by itself, not by a signal.
    t0 = time.time()
    check(ok(app_job(s, "app.power", app, {"action": "stop", "graceSec": 20}))["state"] == "stopped")
    check(time.time() - t0 < 10, "the stop line was not heard: it waited for the grace period")
    out = output(s, app)
    check("got stop" in texts(out), texts(out))
    exited = events(s, "app.exited", app)
    wait_for(lambda: events(s, "app.exited", app), 15, "app.exited")
    exited = events(s, "app.exited", app)
    check(exited[-1]["data"]["exitCode"] == 0 and not exited[-1]["data"]["crashLoop"], exited)
    status = ok(app_job(s, "app.status", app))
    check(status["state"] == "stopped" and status["exitCode"] == 0, status)
    failed(app_job(s, "app.console.send", app, {"line": "anyone"}), "INVALID_STATE")

    # A new command takes effect at the next start; seq keeps growing across runs.
    last = out["nextSeq"]
    rec = ok(app_job(s, "app.command.set", app, {"command": ["/bin/sh", "-c", "echo second command; sleep 30"]}))
    check(rec["command"][0] == "/bin/sh", rec)
    ok(app_job(s, "app.power", app, {"action": "start"}))
    wait_output(s, app, "second command")
    new = output(s, app, since=last)
    check(all(line["seq"] >= last for line in new["lines"]) and new["lines"], new)
    # null restores the template's command.
    rec = ok(app_job(s, "app.command.set", app, {"command": None}))
    check(rec["command"] is None, rec)
    ok(app_job(s, "app.power", app, {"action": "kill"}))
    check(ok(app_job(s, "app.status", app))["state"] == "stopped")
    # Each run's end is said once: the stop path and the watcher never both say it.
    wait_for(lambda: len(events(s, "app.exited", app)) >= 2, 10, "the second run's app.exited")
    time.sleep(0.5)
    check(len(events(s, "app.exited", app)) == 2, events(s, "app.exited", app))
    states = [e["data"]["state"] for e in events(s, "app.state", app)]
    for st in ("starting", "running", "stopping", "stopped"):
        check(st in states, states)

    ok(app_job(s, "app.delete", app))
    nothing_left(s, app)
    failed(app_job(s, "app.status", app), "APP_NOT_FOUND")
    ok(app_job(s, "app.delete", app))  # converging


@needs("root")
@with_setup(agent_conf=apps_conf)
def managed_command(s):
    need_root()
    app = str(uuid.uuid4())
    p = deploy_params()
    p["template"]["customCommand"] = False
    ok(app_job(s, "app.deploy", app, p, timeout=120))
    err = failed(app_job(s, "app.command.set", app, {"command": ["/bin/true"]}), "COMMAND_MANAGED")
    check(err["httpStatus"] == 409, err)
    # Bad input: nothing created.
    bad = str(uuid.uuid4())
    err = failed(app_job(s, "app.deploy", bad, deploy_params(plan={"memoryMB": 0})), "VALIDATION_ERROR")
    check("memoryMB" in err["details"]["plan"], err)
    failed(app_job(s, "app.deploy", bad, deploy_params(template={"image": "nosuch:1"})), "IMAGE_NOT_FOUND")
    err = failed(app_job(s, "app.deploy", bad, deploy_params(template={"volumePath": "/home/../etc"})),
                 "VALIDATION_ERROR")
    check("volumePath" in err["details"]["template"], err)
    check(not os.path.exists(os.path.join(s.agent.state_dir, "apps", "apps", bad)), "a refused deploy left files")
    ok(app_job(s, "app.delete", app))
    nothing_left(s, app)


@needs("root")
@with_setup(agent_conf=apps_conf)
def crash_loop(s):
    need_root()
    app = str(uuid.uuid4())
    ok(app_job(s, "app.deploy", app, deploy_params(template={"command": ["/bin/sh", "-c", "echo boom; exit 3"],
                                                              "startedPattern": None}), timeout=120))
    ok(app_job(s, "app.power", app, {"action": "start"}))
    wait_for(lambda: any(e["data"]["crashLoop"] for e in events(s, "app.exited", app)), 30, "the crash loop")
    exits = events(s, "app.exited", app)
    check(len(exits) == 4 and all(e["data"]["exitCode"] == 3 for e in exits), exits)
    check([e["data"]["crashLoop"] for e in exits] == [False, False, False, True], exits)
    status = ok(app_job(s, "app.status", app))
    check(status["state"] == "crashed" and status["restarts"] == 3 and status["exitCode"] == 3, status)
    time.sleep(1)
    check(len(events(s, "app.exited", app)) == 4, "restarted after the crash loop")
    check(sum(1 for t in texts(output(s, app)) if t == "boom") == 4, texts(output(s, app)))
    ok(app_job(s, "app.delete", app))
    nothing_left(s, app)


@needs("root")
@with_setup(agent_conf=apps_conf)
def limits(s):
    """Memory, pids and the volume quota are enforced by the kernel."""
    need_root()
    cases = {
        "memory": ["/bin/sh", "-c", "x=$(head -c 100000000 /dev/zero | tr '\\0' a); echo survived ${#x}"],
        "pids": ["/bin/sh", "-c", "for i in $(seq 1 40); do sleep 30 & done 2>&1; echo forked; wait"],
        "quota": ["/bin/sh", "-c", "echo keep > /home/container/first; "
                  "dd if=/dev/zero of=/home/container/big bs=1M count=64 2>&1; "
                  "echo first=$(cat /home/container/first); sleep 30"],
    }
    for name, cmd in cases.items():
        app = str(uuid.uuid4())
        ok(app_job(s, "app.deploy", app, deploy_params(template={"command": cmd, "startedPattern": None},
                                                        plan={"memoryMB": 32, "pids": 16, "volumeQuotaMB": 32}),
                   timeout=120))
        ok(app_job(s, "app.power", app, {"action": "start"}))
        if name == "memory":
            wait_for(lambda: events(s, "app.exited", app), 30, "the OOM kill")
            check(events(s, "app.exited", app)[0]["data"]["exitCode"] == 137, events(s, "app.exited", app))
            check(not any("survived" in t for t in texts(output(s, app))), texts(output(s, app)))
        elif name == "pids":
            wait_for(lambda: any("can't fork" in t for t in texts(output(s, app))), 15, "a fork refused")
        else:
            wait_output(s, app, "first=keep")
            check(any("No space left on device" in t for t in texts(output(s, app))), texts(output(s, app)))
            used = ok(app_job(s, "app.status", app))["volumeUsedMB"]
            check(20 <= used <= 40, used)
        ok(app_job(s, "app.delete", app))
        nothing_left(s, app)


@needs("root")
@with_setup(agent_conf=apps_conf)
def agent_killed(s):
    """kill -9 of the agent while an app prints: no line lost, and the exit that
    happened while it was away is seen after it comes back."""
    need_root()
    app = str(uuid.uuid4())
    cmd = ["/bin/sh", "-c", "i=0; while [ $i -lt 300 ]; do i=$((i+1)); echo line $i; sleep 0.01; done; exit 5"]
    ok(app_job(s, "app.deploy", app, deploy_params(template={"command": cmd, "startedPattern": None}), timeout=120))
    ok(app_job(s, "app.power", app, {"action": "start"}))
    wait_output(s, app, "line 20")
    s.agent.kill9()
    time.sleep(4)  # the app ends while the agent is away
    s.agent.start()
    wait_for(lambda: events(s, "app.exited", app), 20, "the exit seen after the restart")
    check(events(s, "app.exited", app)[0]["data"]["exitCode"] == 5, events(s, "app.exited", app))
    lines = [t for t in texts(output(s, app)) if t.startswith("line ")]
    check(lines == [f"line {i}" for i in range(1, 301)], f"{len(lines)} lines, first missing: "
          f"{next((i for i in range(1, 301) if f'line {i}' not in lines), None)}")
    ok(app_job(s, "app.delete", app))
    nothing_left(s, app)


@needs("root")
@with_setup(agent_conf=apps_conf)
def node_reboot(s):
    """What a node's reboot leaves: the agent stopped, the monitor and the container
    gone without an exit record. The agent starts the apps that ran again, and leaves
    the stopped ones stopped."""
    need_root()
    running, stopped = str(uuid.uuid4()), str(uuid.uuid4())
    for app, name in ((running, "running"), (stopped, "stopped")):
        ok(app_job(s, "app.deploy", app, deploy_params(hostname=name), timeout=120))
    ok(app_job(s, "app.power", running, {"action": "start"}))
    wait_output(s, running, "ready")
    check(s.agent.stop() == 0)
    storage = os.path.join(s.agent.state_dir, "apps")
    pid = int(open(os.path.join(storage, "apps", running, "monitor.pid")).read().split()[0])
    os.kill(pid, 9)
    subprocess.run(["/usr/bin/crun", "--root", os.path.join(storage, "crun"), "delete", "--force", f"na-{running}"],
                   check=True)
    wait_for(lambda: not os.path.exists(f"/proc/{pid}"), 5, "the monitor to die")
    s.agent.start()
    wait_for(lambda: texts(output(s, running)).count("ready") == 2, 20, "the app started again")
    wait_for(lambda: ok(app_job(s, "app.status", running))["state"] == "running", 10, "running after the reboot")
    check(ok(app_job(s, "app.status", stopped))["state"] == "stopped", "a stopped app was started")
    inv = s.controller.hello(2)["inventory"]["apps"]
    check({a["id"] for a in inv} == {running, stopped}, inv)
    for app in (running, stopped):
        ok(app_job(s, "app.delete", app))
        nothing_left(s, app)


@needs("root")
@with_setup(agent_conf=apps_conf)
def files(s):
    """app.files.* through the link on the app's real volume: what is written the app
    can use; text and binary reads; list, mkdir, move, delete; paths that would leave
    the volume (including a link the app itself plants) refused with nothing touched
    outside; the quota; templates that refuse file access."""
    import base64
    need_root()
    app = str(uuid.uuid4())
    cat = ["/bin/sh", "-c", "ln -s / /home/container/escape; echo ready; "
           "while read l; do cat \"/home/container/$l\"; echo; done"]
    ok(app_job(s, "app.deploy", app, deploy_params(template={"command": cat}, plan={"volumeQuotaMB": 32}),
               timeout=120))
    ok(app_job(s, "app.power", app, {"action": "start"}))
    wait_output(s, app, "ready")

    def b64(data):
        return base64.b64encode(data).decode()
    failed(app_job(s, "app.files.write", app, {"path": "/nodir/a.txt", "contentBase64": b64(b"x")}),
           "FILE_NOT_FOUND")
    ok(app_job(s, "app.files.mkdir", app, {"path": "/config"}))
    text = "motd=héllo ✓\n".encode()
    check(ok(app_job(s, "app.files.write", app, {"path": "/config/server.properties",
                                                 "contentBase64": b64(text)}))["bytes"] == len(text))
    r = ok(app_job(s, "app.files.read_text", app, {"path": "/config/server.properties"}))
    check(r["content"] == text.decode() and not r["binary"] and not r["truncated"], r)
    ok(app_job(s, "app.console.send", app, {"line": "config/server.properties"}))
    wait_output(s, app, "motd=héllo ✓")  # the app reads what the panel wrote
    ok(app_job(s, "app.files.write", app, {"path": "/blob.bin", "contentBase64": b64(bytes([0xff, 0xfe, 0]))}))
    r = ok(app_job(s, "app.files.read_text", app, {"path": "/blob.bin"}))
    check(r["binary"] and "content" not in r, r)
    names = {e["name"]: e for e in ok(app_job(s, "app.files.list", app, {"path": "/"}))}
    check(names["config"]["type"] == "directory" and names["escape"]["type"] == "symlink", names)
    ok(app_job(s, "app.files.move", app, {"from": "/blob.bin", "to": "/config/blob.bin"}))
    ok(app_job(s, "app.files.delete", app, {"path": "/config"}))
    failed(app_job(s, "app.files.read_text", app, {"path": "/config/server.properties"}), "FILE_NOT_FOUND")

    canary = os.path.join(s.tmp, "canary")
    with open(canary, "w") as f:
        f.write("untouched")
    hostile = ["../etc/passwd", "/../../etc/passwd", "a/../../x", "escape/etc/passwd", "escape" + canary,
               "/proc/self/root/etc/passwd", "a\u0000b", "", "x" * 300]
    for path in hostile:
        for kind, params in (("app.files.read_text", {"path": path}),
                             ("app.files.write", {"path": path, "contentBase64": b64(b"owned")}),
                             ("app.files.delete", {"path": path})):
            res = app_job(s, kind, app, params)
            check(res["status"] == "failed" and res["error"]["code"] in ("VALIDATION_ERROR", "FILE_NOT_FOUND"),
                  (kind, path, res))
    check(open(canary).read() == "untouched", "the canary outside the volume changed")
    check(os.path.exists("/etc/passwd") and b"owned" not in open("/etc/passwd", "rb").read(), "/etc/passwd")

    chunk = b64(b"\0" * (4 << 20))
    codes = [app_job(s, "app.files.write", app, {"path": f"/fill{i}", "contentBase64": chunk}, timeout=60)
             for i in range(10)]
    check(any(r["status"] == "failed" and r["error"]["code"] == "QUOTA_EXCEEDED" for r in codes),
          [r["status"] for r in codes])

    managed = str(uuid.uuid4())
    ok(app_job(s, "app.deploy", managed, deploy_params(hostname="managed", template={"fileAccess": False}),
               timeout=120))
    err = failed(app_job(s, "app.files.list", managed, {"path": "/"}), "FILE_ACCESS_DISABLED")
    check(err["httpStatus"] == 403, err)
    for a in (app, managed):
        ok(app_job(s, "app.delete", a))
        nothing_left(s, a)


@needs("root")
@with_setup(agent_conf=apps_conf)
def parallel(s):
    """Jobs of different apps run at once (max_parallel_jobs): four deploys, then four
    starts, all enqueued together, all answered (they once hung each other)."""
    need_root()
    apps = [str(uuid.uuid4()) for _ in range(4)]
    ids = s.controller.enqueue_many([{"kind": "app.deploy", "params": deploy_params(hostname=f"p{i}"),
                                      "target": {"type": "app", "id": a}} for i, a in enumerate(apps)])
    for jid, job in s.controller.wait_results(ids, 120).items():
        ok(job["results"][0])
    ids = s.controller.enqueue_many([{"kind": "app.power", "params": {"action": "start"},
                                      "target": {"type": "app", "id": a}} for a in apps])
    for jid, job in s.controller.wait_results(ids, 120).items():
        ok(job["results"][0])
    for a in apps:
        wait_output(s, a, "ready")
    ids = s.controller.enqueue_many([{"kind": "app.delete", "target": {"type": "app", "id": a}} for a in apps])
    for jid, job in s.controller.wait_results(ids, 120).items():
        ok(job["results"][0])
    for a in apps:
        nothing_left(s, a)


def registry_conf(s):
    """[apps] registry: a real docker-registry on loopback with the test CA, holding
    busybox pushed by skopeo; the local store starts empty."""
    sys.path.insert(0, os.path.join(SRC, "tests", "drivers", "app-registry"))
    import registry_fixture as fx
    for tool in ("/usr/bin/docker-registry", "/usr/bin/skopeo"):
        if not os.path.exists(tool):
            raise AssertionError(f"{tool} is missing: scripts/deps.sh installs it")
    conf = apps_conf(s)
    src = os.path.join(s.tmp, "src-layout")
    subprocess.run([sys.executable, MKIMAGE, "--layout", src, "--tag", "1"], check=True, capture_output=True)
    s.registry = fx.Registry(s.tmp, certs_dir(), "registry")
    s.registry.push(src, "1", "tools/busybox:1")
    conf["apps"]["images_dir"] = os.path.join(s.tmp, "empty-store")
    conf["apps"]["registry"] = s.registry.url
    conf["apps"]["registry_ca_file"] = os.path.join(certs_dir(), "ca.pem")
    return conf


@needs("root")
@with_setup(agent_conf=registry_conf)
def from_registry(s):
    """An image not in the store is pulled during deploy, with progress; one in neither
    is IMAGE_NOT_FOUND; image.list says who uses what; image.delete refuses while used."""
    need_root()
    try:
        app = str(uuid.uuid4())
        jid = s.controller.enqueue("app.deploy", deploy_params(template={"image": "tools/busybox:1"}),
                                   target={"type": "app", "id": app})
        ok(s.controller.wait_results([jid], 120)[jid]["results"][0])
        prog = s.controller.admin("GET", f"/admin/jobs/{jid}")["progress"]
        # The first post at once; later ones (a pull longer than a second) carry the bytes.
        check_stages([p["stage"] for p in prog], ["pulling-image", "unpacking", "creating-volume", "configuring"])
        check(all("MB" in p["message"] for p in prog[1:] if p["stage"] == "pulling-image" and p.get("percent")), prog)
        failed(app_job(s, "app.deploy", str(uuid.uuid4()), deploy_params(template={"image": "tools/nosuch:1"})),
               "IMAGE_NOT_FOUND")
        node = {"type": "node", "id": s.node_id}
        jid = s.controller.enqueue("image.list", {}, target=node)
        images = ok(s.controller.wait_results([jid], 30)[jid]["results"][0])
        check([i["usedBy"] for i in images if i["image"] == "tools/busybox:1"] == [[app]], images)
        jid = s.controller.enqueue("image.delete", {"image": "tools/busybox:1"}, target=node)
        failed(s.controller.wait_results([jid], 30)[jid]["results"][0], "INVALID_STATE")
        ok(app_job(s, "app.power", app, {"action": "start"}))
        wait_output(s, app, "ready")
        ok(app_job(s, "app.delete", app))
        nothing_left(s, app)
        jid = s.controller.enqueue("image.delete", {"image": "tools/busybox:1"}, target=node)
        ok(s.controller.wait_results([jid], 30)[jid]["results"][0])
    finally:
        s.registry.close()


@needs("root")
@with_setup(agent_conf=apps_conf)
def hostile_image(s):
    """An image whose layer would write outside its root is refused, naming the entry."""
    need_root()
    images = os.path.join(s.tmp, "app-images")
    layer = json.dumps([{"path": "evil", "type": "symlink", "target": "/"},
                        {"path": "evil/tmp/owned", "data": "x"}])
    subprocess.run([sys.executable, MKIMAGE, "--layout", os.path.join(images, "evil"), "--tag", "1",
                    "--extra-layer", layer], check=True, capture_output=True)
    app = str(uuid.uuid4())
    err = failed(app_job(s, "app.deploy", app, deploy_params(template={"image": "evil:1"}), timeout=120),
                 "DRIVER_ERROR")
    check("evil" in err["error"], err)
    check(not os.path.exists("/tmp/owned"), "the layer wrote outside its root")
    check(not os.path.exists(os.path.join(s.agent.state_dir, "apps", "apps", app)), "a refused deploy left files")


if __name__ == "__main__":
    sys.exit(run_cases({f.__name__: f for f in [lifecycle, managed_command, crash_loop, limits, agent_killed,
                                                node_reboot, from_registry, files, parallel,
                                                hostile_image]}))
