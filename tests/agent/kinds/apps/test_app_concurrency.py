#!/usr/bin/python3
# SPDX-License-Identifier: GPL-2.0-or-later
"""Many apps' jobs at once through the controller link (issue 21 item 8): the node's
normal parallel jobs (maxJobs 8) deploying and starting 20 apps together, every job
answered and every app running. Concurrent deploys and starts once deadlocked the
agent: a child forked without exec kept other threads' pipes open. And a node reboot
with many apps running: with restart_stagger_sec 0 they are all started again together,
node_parallel_jobs at a time, each exactly once."""
import os
import subprocess
import sys
import uuid

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "..", "harness"))
from nodeagent_harness import check, needs, run_cases, wait_for, with_setup  # noqa: E402
from test_apps import app_job, apps_conf, deploy_params, need_root, nothing_left, ok, output, texts  # noqa: E402

N = int(os.environ.get("NA_TEST_APPS", "20"))


@needs("root")
@with_setup(agent_conf=apps_conf, controller_extra=["--max-jobs", "8"])
def deploy_start_together(s):
    """20 deploys and 20 starts enqueued in one go (each app's start queued behind its
    deploy), eight jobs at a time: all succeed, all print, all are deleted again."""
    need_root()
    apps = [str(uuid.uuid4()) for _ in range(N)]
    jobs = []
    for i, a in enumerate(apps):
        jobs.append({"kind": "app.deploy", "params": deploy_params(hostname=f"c{i}"), "target": {"type": "app", "id": a}})
        jobs.append({"kind": "app.power", "params": {"action": "start"}, "target": {"type": "app", "id": a}})
    ids = s.controller.enqueue_many(jobs)
    got = s.controller.wait_results(ids, 240)
    for jid in ids:
        ok(got[jid]["results"][0])
    for a in apps:
        wait_for(lambda a=a: "ready" in texts(output(s, a)), 30, f"app {a} printing ready")
    ids = s.controller.enqueue_many([{"kind": "app.delete", "target": {"type": "app", "id": a}} for a in apps])
    got = s.controller.wait_results(ids, 240)
    for jid in ids:
        ok(got[jid]["results"][0])
    for a in apps:
        nothing_left(s, a)


def monitor_pid(s, app):
    with open(os.path.join(s.agent.state_dir, "apps", "apps", app, "monitor.pid")) as f:
        return int(f.read().split()[0])


@needs("root")
@with_setup(agent_conf=apps_conf)
def reboot_together(s):
    """12 apps running, then what a node's reboot leaves (agent stopped, monitors and
    containers gone without an exit record): after the agent's start every one prints
    ready a second time, and only a second time (none started twice by two helpers)."""
    need_root()
    apps = [str(uuid.uuid4()) for _ in range(12)]
    ids = s.controller.enqueue_many([{"kind": "app.deploy", "params": deploy_params(hostname=f"r{i}"),
                                      "target": {"type": "app", "id": a}} for i, a in enumerate(apps)])
    for job in s.controller.wait_results(ids, 240).values():
        ok(job["results"][0])
    ids = s.controller.enqueue_many([{"kind": "app.power", "params": {"action": "start"},
                                      "target": {"type": "app", "id": a}} for a in apps])
    for job in s.controller.wait_results(ids, 240).values():
        ok(job["results"][0])
    for a in apps:
        wait_for(lambda a=a: "ready" in texts(output(s, a)), 30, f"app {a} printing ready")
    check(s.agent.stop() == 0)
    storage = os.path.join(s.agent.state_dir, "apps")
    pids = [monitor_pid(s, a) for a in apps]
    for pid in pids:
        os.kill(pid, 9)
    for a in apps:
        subprocess.run(["/usr/bin/crun", "--root", os.path.join(storage, "crun"), "delete", "--force", f"na-{a}"],
                       check=True)
    wait_for(lambda: not any(os.path.exists(f"/proc/{p}") for p in pids), 10, "the monitors to die")
    s.agent.start()
    for a in apps:
        wait_for(lambda a=a: texts(output(s, a)).count("ready") == 2, 60, f"app {a} started again")
    for a in apps:
        wait_for(lambda a=a: ok(app_job(s, "app.status", a))["state"] == "running", 20, f"app {a} running")
    check(all(texts(output(s, a)).count("ready") == 2 for a in apps), "an app was started twice")
    ids = s.controller.enqueue_many([{"kind": "app.delete", "target": {"type": "app", "id": a}} for a in apps])
    for job in s.controller.wait_results(ids, 240).values():
        ok(job["results"][0])
    for a in apps:
        nothing_left(s, a)


CASES = {"deploy_start_together": deploy_start_together, "reboot_together": reboot_together}

if __name__ == "__main__":
    sys.exit(run_cases(CASES))
