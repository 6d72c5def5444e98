#!/usr/bin/python3
# SPDX-License-Identifier: GPL-2.0-or-later
"""Issue 20, "deeply nested params stall the node", through the link: a job whose params
nest 900 arrays deep made the whole poll answer unreadable ("the answer is not an
envelope holding an array of jobs"), and the jobs that shared its answer waited with it
while the link backed off. Each such job is now refused by its id with VALIDATION_ERROR
within one poll, the job beside it runs, and the link stays connected."""
import json
import os
import sys
import time
import uuid

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "harness"))
from nodeagent_harness import check, run_cases, with_setup  # noqa: E402


def now_iso():
    t = time.time()
    return time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(t)) + ".%03dZ" % (int(t * 1000) % 1000)


def job_text(s, jid, params, id_last=False):
    head = '"kind": "test.sleep", "attempt": 1, "target": %s, "createdAt": "%s"' % (
        json.dumps({"type": "node", "id": s.node_id}), now_iso())
    if id_last:
        return '{%s, "params": %s, "id": "%s"}' % (head, params, jid)
    return '{"id": "%s", %s, "params": %s}' % (jid, head, params)


def nested(depth, inner='"x"', opener="[", closer="]"):
    return opener * depth + inner + closer * depth


@with_setup()
def nested_params(s):
    cases = {
        "arrays_900": '{"sleepMs": 1, "deep": %s}' % nested(900),
        "objects_900": '{"sleepMs": 1, "deep": %s}' % nested(900, '1', '{"a": ', '}'),
        "arrays_100000": '{"sleepMs": 1, "deep": %s}' % nested(100000),  # beyond jansson's own 2048
        "arrays_40": '{"sleepMs": 1, "deep": %s}' % nested(40),  # deeper than any kind's params
    }
    for name, params in cases.items():
        for id_last in (False, True):
            bad, good = str(uuid.uuid4()), str(uuid.uuid4())
            texts = [{"id": bad, "text": job_text(s, bad, params, id_last)},
                     {"id": good, "text": job_text(s, good, '{"sleepMs": 1}')}]
            t0 = time.time()
            s.controller.admin("POST", "/admin/raw-job-texts", texts)
            jobs = s.controller.wait_results([bad, good], 10)
            took = time.time() - t0
            check(took < 5, f"{name}: answered after {took:.1f}s")
            res = jobs[bad]["results"]
            check(len(res) == 1 and res[0]["status"] == "failed", (name, res))
            err = res[0]["error"]
            check(err["code"] == "VALIDATION_ERROR" and err["httpStatus"] == 422, (name, err))
            print(f"{name} (id {'last' if id_last else 'first'}): refused in {took:.2f}s: {json.dumps(err['details'])[:160]}")
            check(jobs[good]["results"][0]["status"] == "succeeded", (name, jobs[good]))
    # Params nested as deep as the contract's own still run.
    jid = str(uuid.uuid4())
    s.controller.admin("POST", "/admin/raw-job-texts",
                       [{"id": jid, "text": job_text(s, jid, '{"sleepMs": 1, "deep": %s}' % nested(30))}])
    check(s.controller.wait_results([jid], 10)[jid]["results"][0]["status"] == "succeeded", "30 levels refused")
    check(s.agent.status()["link"]["state"] == "connected", s.agent.status()["link"])
    check("not an envelope" not in s.agent.log_text(), "the link met an unreadable answer")


if __name__ == "__main__":
    sys.exit(run_cases({"nested_params": nested_params}))
