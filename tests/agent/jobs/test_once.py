#!/usr/bin/python3
# SPDX-License-Identifier: GPL-2.0-or-later
"""A kind that is never run twice (AGENT-API 3.2: vps.exec), through the real link and
journal: killed with kill -9 while it runs, the job fails 409 JOB_INTERRUPTED when the
central API offers it again, and ran exactly once (a kind that may run again runs again
from the start after the same kill: test_link.py's crash case). test.once is test.append with the kind's
`once` flag (agent/kinds/kind-test.c)."""
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "harness"))
from nodeagent_harness import check, run_cases, wait_for, with_setup  # noqa: E402


def runs(s):
    try:
        with open(os.path.join(s.agent.state_dir, "test-runs.log")) as f:
            return [line.split()[0] for line in f]
    except FileNotFoundError:
        return []


@with_setup(controller_extra=["--lease-sec", "2"])
def interrupted(s):
    once = s.controller.enqueue("test.once", {"sleepMs": 60000})
    wait_for(lambda: once in runs(s), 20, "test.once running")
    s.agent.kill9()
    s.agent.start()
    res = s.controller.wait_results([once], 60)[once]["results"]
    last = res[-1]
    check(last["status"] == "failed" and last["error"]["code"] == "JOB_INTERRUPTED" and
          last["error"]["httpStatus"] == 409, res)
    check(runs(s).count(once) == 1, ("test.once ran again", runs(s)))
    # Offered again after its answer: answered from the journal, still not run.
    s.controller.enqueue("test.once", {"sleepMs": 10}, job_id=once)
    res = s.controller.wait_results([once], 15)[once]["results"]
    check(res[-1]["error"]["code"] == "JOB_INTERRUPTED", res)
    check(runs(s).count(once) == 1, runs(s))


if __name__ == "__main__":
    sys.exit(run_cases({f.__name__: f for f in [interrupted]}))
