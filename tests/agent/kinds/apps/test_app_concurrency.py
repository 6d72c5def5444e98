#!/usr/bin/python3
"""Many apps' jobs at once through the controller link (issue 21 item 8): the node's
normal parallel jobs (maxJobs 8) deploying and starting 20 apps together, every job
answered and every app running. Concurrent deploys and starts once deadlocked the
agent: a child forked without exec kept other threads' pipes open."""
import os
import sys
import uuid

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "..", "harness"))
from nodeagent_harness import needs, run_cases, wait_for, with_setup  # noqa: E402
from test_apps import apps_conf, deploy_params, need_root, nothing_left, ok, texts, output  # noqa: E402

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


CASES = {"deploy_start_together": deploy_start_together}

if __name__ == "__main__":
    sys.exit(run_cases(CASES))
