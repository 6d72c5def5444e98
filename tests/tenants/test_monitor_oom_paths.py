#!/usr/bin/python3
# SPDX-License-Identifier: GPL-2.0-or-later
"""Issue 20, the out-of-memory paths gcc -fanalyzer found, against the real agent with
fault injection (common/fault.h, NA_FAULTS in the agent's environment).

console_subs_grow_fails: the app console's subscriber list cannot grow (a failed
reallocarray). The session that needed it ends ("internal-error"); the four open before it keep
receiving the app's output and the agent lives on (it used to keep a NULL list with
four subscribers and crash at the next line)."""
import os
import sys
import uuid

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "harness"))
sys.path.insert(0, os.path.join(HERE, "..", "agent", "console"))
from nodeagent_harness import check, needs, run_cases, wait_for, with_setup  # noqa: E402
from test_console import Console, app_job, consoles_conf, ok, running_app, wait_closed_event  # noqa: E402


@needs("root")
@with_setup(agent_conf=consoles_conf(max_per_target=8), agent_env={"NA_FAULTS": "console.subs-grow%2"})
def console_subs_grow_fails(s):
    app, target = running_app(s)
    # The first session grows the list to 4 (hit 1); the fifth needs 8 (hit 2: refused).
    cons = [Console(s, target) for _ in range(5)]
    for con in cons[:4]:
        ok(con.open())
        con.wait_text(lambda ln: ln["text"] == "ready", what="the backlog")  # subscribed
    ok(cons[4].open())
    ev = wait_closed_event(s, cons[4].sid)
    check(ev["data"]["reason"] == "internal-error", ev)
    print(f"the fifth session ended: {ev['data']}")
    ok(app_job(s, "app.console.send", app, {"line": "after"}))
    for con in cons[:4]:
        con.wait_text(lambda ln: ln["text"] == "got after", what="the line after the refusal")
    check(s.agent.proc.poll() is None, "the agent died")
    ok(app_job(s, "app.status", app))
    ok(app_job(s, "app.delete", app))


if __name__ == "__main__":
    sys.exit(run_cases({f.__name__: f for f in [console_subs_grow_fails]}))
