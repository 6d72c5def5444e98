#!/usr/bin/python3
# SPDX-License-Identifier: GPL-2.0-or-later
"""A full state directory (issue 20): the agent stays up, every job it cannot record
fails with a code and a message that name the node's full disk (INVALID_STATE,
details.state "state-directory-full"), the journal keeps every result recorded before,
nothing is half-written, and as soon as space returns jobs are recorded and run again,
without a restart (the journal writer's error used to stick until the agent restarted:
every journaled job then failed with "append: No space left on device")."""
import os
import subprocess
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "harness"))
from nodeagent_harness import Skip, check, needs, run_cases, wait_for, with_setup  # noqa: E402

SIZE_MB = 4


def mount_small_state(s):
    if os.geteuid() != 0:
        raise Skip("needs root to mount a small file system")
    os.makedirs(s.agent.state_dir, exist_ok=True)
    subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={SIZE_MB}m,mode=0700", "tmpfs", s.agent.state_dir],
                   check=True)


def fill(path):
    """Fill the file system of path; returns the filler's name."""
    filler = os.path.join(path, "filler")
    with open(filler, "wb") as f:
        try:
            while True:
                f.write(b"\0" * 65536)
                f.flush()
        except OSError:
            pass
    # What a one-byte file can still take (a block here and there): fill that too.
    n = 0
    try:
        while True:
            with open(os.path.join(path, f"filler-{n}"), "wb") as f:
                f.write(b"\0" * 4096)
            n += 1
    except OSError:
        pass
    return [filler] + [os.path.join(path, f"filler-{i}") for i in range(n + 1)]


def results(s, ids, timeout=60):
    return {i: j["results"][-1] for i, j in s.controller.wait_results(ids, timeout).items()}


@needs("root")
@with_setup(before_start=mount_small_state)
def full_then_room_again(s):
    try:
        before = [s.controller.enqueue("test.append") for _ in range(20)]
        res = results(s, before)
        check(all(r["status"] == "succeeded" for r in res.values()), res)

        fillers = fill(s.agent.state_dir)
        # Hundreds of jobs while it is full: each answered, none with an internal error.
        during = s.controller.enqueue_many([{"kind": "test.append", "params": {}} for _ in range(300)])
        res = results(s, during, 120)
        failed = [r for r in res.values() if r["status"] == "failed"]
        check(len(failed) >= 290, f"only {len(failed)} of 300 failed on a full disk")
        for r in failed:
            e = r["error"]
            check(e["code"] == "INVALID_STATE" and e["httpStatus"] == 409, e)
            check(e["details"].get("state") == "state-directory-full", e)
            check("state directory is full" in e["error"] or "full" in e["error"], e)
        check(s.agent.proc.poll() is None, "the agent is still up")
        check(s.agent.ctl("status", check=False).returncode == 0, "it answers its control socket")

        for f in fillers:
            try:
                os.unlink(f)
            except FileNotFoundError:
                pass
        after = [s.controller.enqueue("test.append") for _ in range(30)]
        res = results(s, after)
        check(all(r["status"] == "succeeded" for r in res.values()),
              [r for r in res.values() if r["status"] != "succeeded"][:3])

        # The journal kept what was recorded before the disk filled: offered again after a
        # restart, those jobs are answered from it without running.
        check(s.agent.stop() == 0)
        s.agent.start()
        again = before[:5]
        for jid in again:
            s.controller.enqueue("test.append", job_id=jid)
        res = results(s, again)
        check(all(r["status"] == "succeeded" for r in res.values()), res)
        with open(os.path.join(s.agent.state_dir, "test-runs.log")) as f:
            runs = [line.split()[0] for line in f]
        for jid in again:
            check(runs.count(jid) == 1, f"{jid} ran {runs.count(jid)} times")
        wait_for(lambda: "answered from the journal without running" in s.agent.log_text(), 10, "journal answers")
    finally:
        if s.agent.proc and s.agent.proc.poll() is None:
            s.agent.proc.kill()
            s.agent.proc.wait()
        subprocess.run(["umount", "-l", s.agent.state_dir])


if __name__ == "__main__":
    sys.exit(run_cases({f.__name__: f for f in [full_then_room_again]}))
