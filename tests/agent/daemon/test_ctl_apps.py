#!/usr/bin/python3
# SPDX-License-Identifier: GPL-2.0-or-later
"""nodeagentctl apps and logs against the real daemon with real apps (crun and the busybox
OCI image of tests/harness/mkimage.py, set up as tests/agent/kinds/apps/test_apps.py does): the table and
--json while the app runs and after it stopped, logs -n, logs -f printing a line the app
wrote after it started and ending with 0 on SIGINT, APP_NOT_FOUND once it is deleted.
Root only, like every app test."""
import json
import os
import signal
import subprocess
import sys
import time
import uuid

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "harness"))
sys.path.insert(0, os.path.join(HERE, "..", "kinds", "apps"))
from nodeagent_harness import NODEAGENTCTL, check, needs, run_cases, wait_for, with_setup  # noqa: E402
from test_apps import app_job, apps_conf, deploy_params, need_root, ok, wait_output  # noqa: E402


def ctl(s, *args, code=0):
    r = s.agent.ctl(*args, check=False)
    check(r.returncode == code, f"nodeagentctl {' '.join(args)}: exit {r.returncode}, not {code}: {r.stderr}")
    return r


@needs("root")
@with_setup(agent_conf=apps_conf)
def apps_logs(s):
    need_root()
    r = ctl(s, "apps")
    check(r.stdout == "no apps on this node\n", r.stdout)
    app = str(uuid.uuid4())
    ok(app_job(s, "app.deploy", app, deploy_params(), timeout=120))
    ok(app_job(s, "app.power", app, {"action": "start"}))
    wait_output(s, app, "ready")

    r = ctl(s, "apps")
    rows = r.stdout.splitlines()
    check(rows[0].split() == ["ID", "STATE", "STARTED", "RESTARTS", "MEMORY", "VOLUME", "NAME"], rows)
    check(len(rows) == 2 and rows[1].split()[:2] == [app, "running"] and " ago " in rows[1], rows)
    doc = json.loads(ctl(s, "apps", "--json").stdout)
    row = doc["apps"][0]
    check(doc["ok"] is True and row["id"] == app and row["state"] == "running" and row["startedAt"], doc)
    for key in ("exitCode", "restarts", "memoryMB", "volumeUsedMB"):
        check(key in row, row)

    # Follow: the old line first, then one the app prints after we started.
    f = subprocess.Popen([NODEAGENTCTL, "-s", s.agent.socket, "logs", "-f", app], stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE, text=True)
    try:
        time.sleep(0.8)
        ok(app_job(s, "app.console.send", app, {"line": "hello-from-ctl"}))
        time.sleep(1.5)  # three polls
    finally:
        f.send_signal(signal.SIGINT)
        out, err = f.communicate(timeout=10)
    check(f.returncode == 0 and err == "", (f.returncode, err))
    lines = out.splitlines()
    check(len(lines) == 2 and lines[0].endswith(" out ready") and lines[1].endswith(" out got hello-from-ctl"),
          lines)

    r = ctl(s, "logs", app, "-n", "1")
    check(r.stdout.endswith(" out got hello-from-ctl\n") and r.stdout.count("\n") == 1, r.stdout)
    doc = json.loads(ctl(s, "logs", app, "--since", "0", "--json").stdout)
    check([line["text"] for line in doc["lines"]] == ["ready", "got hello-from-ctl"], doc)
    check(doc["nextSeq"] == doc["lines"][-1]["seq"] + 1, doc)

    ok(app_job(s, "app.power", app, {"action": "stop"}))
    wait_for(lambda: "stopped" in ctl(s, "apps").stdout, 15, "the app stopped in nodeagentctl apps")
    row = ctl(s, "apps").stdout.splitlines()[1].split()
    check(row[:3] == [app, "stopped", "-"] and row[-2:] == ["(exit", "0)"], row)

    ok(app_job(s, "app.delete", app))
    r = ctl(s, "logs", app, code=1)
    check("APP_NOT_FOUND" in r.stderr and app in r.stderr, r.stderr)
    check(ctl(s, "apps").stdout == "no apps on this node\n")


if __name__ == "__main__":
    sys.exit(run_cases({f.__name__: f for f in [apps_logs]}))
