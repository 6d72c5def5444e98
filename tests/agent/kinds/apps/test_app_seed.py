#!/usr/bin/python3
# SPDX-License-Identifier: GPL-2.0-or-later
"""Volume seeding (AGENT-API 4.2, issue 21 item 2): a new app's empty volume gets what
its image holds at the volume's path, once, owned by the app's user, before the first
start; volumeSeededAt says when and never changes again; an image with nothing there
leaves it null. Links in the image are copied as links (never followed), device
nodes and fifos skipped, set-id bits dropped; a volume holding data is never seeded
over."""
import json
import os
import subprocess
import sys
import uuid

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "..", "harness"))
sys.path.insert(0, HERE)
from nodeagent_harness import check, needs, run_cases, with_setup  # noqa: E402
from test_apps import MKIMAGE, app_job, apps_conf, deploy_params, need_root, ok, wait_output  # noqa: E402

SEED = [
    {"path": "home/container", "type": "dir", "mode": "0755"},
    {"path": "home/container/config", "type": "dir", "mode": "0750"},
    {"path": "home/container/config/server.properties", "data": "motd=seeded\n", "mode": "0640"},
    {"path": "home/container/world", "type": "dir"},
    {"path": "home/container/world/level.dat", "data": "level\n"},
    {"path": "home/container/latest", "type": "symlink", "target": "world"},
    {"path": "home/container/escape", "type": "symlink", "target": "/etc"},
    {"path": "home/container/tool", "data": "#!/bin/sh\n", "mode": "4755"},
    {"path": "home/container/pipe", "type": "fifo"},
]


def seed_conf(s):
    conf = apps_conf(s)
    layout = os.path.join(conf["apps"]["images_dir"], "busybox")
    subprocess.run([sys.executable, MKIMAGE, "--layout", layout, "--tag", "seeded", "--extra-layer",
                    json.dumps(SEED)], check=True, capture_output=True)
    return conf


CAT = ["/bin/sh", "-c", "echo ready; while read l; do cat \"/home/container/$l\"; done"]


@needs("root")
@with_setup(agent_conf=seed_conf)
def seeded_once(s):
    need_root()
    app = str(uuid.uuid4())
    p = deploy_params(template={"image": "busybox:seeded", "command": CAT})
    rec = ok(app_job(s, "app.deploy", app, p, timeout=120))
    check(rec.get("volumeSeededAt"), f"a seeded volume has volumeSeededAt: {rec}")
    seeded_at = rec["volumeSeededAt"]
    vol = os.path.join(s.agent.state_dir, "apps", "apps", app, "disk", "volume")
    names = sorted(os.listdir(vol))
    check(names == ["config", "escape", "latest", "tool", "world"], f"seeded: {names}")
    root_uid = os.stat(vol).st_uid
    for rel in ("config", "config/server.properties", "world/level.dat", "tool"):
        st = os.lstat(os.path.join(vol, rel))
        check(st.st_uid == root_uid, f"{rel} belongs to {st.st_uid}, not the app's user {root_uid}")
    check(os.readlink(os.path.join(vol, "escape")) == "/etc", "a link is copied as a link")
    check(os.lstat(os.path.join(vol, "escape")).st_uid == root_uid, "the link is the app's user's too")
    check(os.stat(os.path.join(vol, "tool")).st_mode & 0o7777 == 0o755, "set-id bits dropped")
    check(os.stat(os.path.join(vol, "config", "server.properties")).st_mode & 0o777 == 0o640, "modes kept")
    ok(app_job(s, "app.power", app, {"action": "start"}))
    wait_output(s, app, "ready")
    ok(app_job(s, "app.console.send", app, {"line": "config/server.properties"}))
    wait_output(s, app, "motd=seeded")

    # Never again: a file the customer deletes stays deleted through a deploy run again.
    ok(app_job(s, "app.files.delete", app, {"path": "/world/level.dat"}))
    again = ok(app_job(s, "app.deploy", app, p, timeout=120))
    check(again["volumeSeededAt"] == seeded_at, f"volumeSeededAt changed: {seeded_at} -> {again}")
    check(not os.path.exists(os.path.join(vol, "world", "level.dat")), "a deploy run again seeded over the data")
    status = ok(app_job(s, "app.status", app))
    check(status["state"] == "running", status)


@needs("root")
@with_setup(agent_conf=seed_conf)
def nothing_to_seed(s):
    need_root()
    app = str(uuid.uuid4())
    rec = ok(app_job(s, "app.deploy", app, deploy_params(), timeout=120))
    check(rec.get("volumeSeededAt", "missing") is None, f"an image with nothing there: null, not {rec}")
    vol = os.path.join(s.agent.state_dir, "apps", "apps", app, "disk", "volume")
    check(os.listdir(vol) == [], os.listdir(vol))


if __name__ == "__main__":
    sys.exit(run_cases({f.__name__: f for f in [seeded_once, nothing_to_seed]}))
