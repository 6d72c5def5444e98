#!/usr/bin/python3
# SPDX-License-Identifier: GPL-2.0-or-later
"""Draining a node (issue 23 item 5) through the real nodeagentctl and the link: creation
jobs refused with INVALID_STATE/draining while every other kind runs, hello's
capabilities saying so, kept across a restart, ended by drain --off. Both forms of the
link (in_both_forms)."""
import json
import os
import sys
import uuid

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "harness"))
from nodeagent_harness import check, in_both_forms, run_cases, wait_for, with_setup  # noqa: E402


def hellos(s):
    return s.controller.state()["hellos"]


def creation_jobs(s):
    return s.controller.enqueue_many([
        {"kind": "vps.create", "target": {"type": "vps", "id": str(uuid.uuid4())}, "params": {}},
        {"kind": "app.deploy", "target": {"type": "app", "id": str(uuid.uuid4())}, "params": {}},
    ])


def refused_draining(result):
    err = result.get("error") or {}
    return (result["status"] == "failed" and err.get("code") == "INVALID_STATE" and err.get("httpStatus") == 409
            and (err.get("details") or {}).get("state") == "draining")


@with_setup()
def drain_on_off(s):
    wait_for(lambda: hellos(s), 10, "the first hello")
    check(hellos(s)[-1]["hello"]["capabilities"]["draining"] is False, hellos(s)[-1])
    drain_file = os.path.join(s.agent.state_dir, "node-drain.json")

    n = len(hellos(s))
    out = s.agent.ctl("drain").stdout
    check("drains since" in out and "vps.create" in out, out)
    check(os.path.exists(drain_file))
    # The central API learns it at once: a hello again, saying so.
    wait_for(lambda: len(hellos(s)) > n, 10, "the hello after drain")
    check(hellos(s)[-1]["hello"]["capabilities"]["draining"] is True, hellos(s)[-1])
    ans = json.loads(s.agent.ctl("drain", "--json").stdout)  # again: nothing changes, same answer
    check(ans["on"] is True and ans["since"].endswith("Z"), ans)
    st = s.agent.status()
    check(st["nodeDrain"]["on"] is True, st)
    check("drain" in s.agent.ctl("status").stdout)

    refused = creation_jobs(s)
    others = s.controller.enqueue_many([{"kind": "node.status"}, {"kind": "test.append", "params": {"sleepMs": 10}}])
    jobs = s.controller.wait_results(refused + others, 20)
    for jid in refused:
        check(refused_draining(jobs[jid]["results"][0]), jobs[jid])
    for jid in others:
        check(jobs[jid]["results"][0]["status"] == "succeeded", jobs[jid])

    # Kept across a restart: the first hello already says so, and creation stays refused.
    check(s.agent.stop() == 0)
    n = len(hellos(s))
    s.agent.start()
    wait_for(lambda: len(hellos(s)) > n, 10, "the hello after the restart")
    check(hellos(s)[-1]["hello"]["capabilities"]["draining"] is True, hellos(s)[-1])
    check("the node drains (since" in s.agent.log_text())
    jid = creation_jobs(s)[0]
    check(refused_draining(s.controller.wait_results([jid], 20)[jid]["results"][0]))

    # --off ends it: hello again, creation jobs are taken again (they fail here only on their params).
    n = len(hellos(s))
    out = s.agent.ctl("drain", "--off").stdout
    check("does not drain" in out, out)
    check(not os.path.exists(drain_file))
    wait_for(lambda: len(hellos(s)) > n, 10, "the hello after drain --off")
    check(hellos(s)[-1]["hello"]["capabilities"]["draining"] is False, hellos(s)[-1])
    ids = creation_jobs(s)
    jobs = s.controller.wait_results(ids, 20)
    for jid in ids:
        res = jobs[jid]["results"][0]
        check(not refused_draining(res) and res["error"]["code"] == "VALIDATION_ERROR", res)
    check(s.agent.status()["nodeDrain"] == {"on": False}, s.agent.status()["nodeDrain"])

    # Usage errors: --off belongs to drain, drain takes no argument.
    check(s.agent.ctl("status", "--off", check=False).returncode == 2)
    check(s.agent.ctl("drain", "now", check=False).returncode == 2)
    check("drain [--off]" in s.agent.ctl("--help").stdout)


if __name__ == "__main__":
    sys.exit(run_cases(in_both_forms({f.__name__: f for f in [drain_on_off]})))
