#!/usr/bin/python3
# SPDX-License-Identifier: GPL-2.0-or-later
"""Progress through the real link and the test controller, which records when each
progress post and each result arrived: percentages that move for long work, at most
one post a second per job (the first at once, then the latest, coalesced), and a
result that never waits for progress (issue 15, item 5)."""
import json
import os
import sys
import uuid

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "harness"))
from nodeagent_harness import check, in_both_forms, make_vm_assets, run_cases, with_setup  # noqa: E402

# Posts are paced by the time the agent sends them; the controller sees them arrive
# with the jitter of a loaded machine: one late arrival brings the next closer to it,
# but cannot bring many posts closer. So any k posts in a row span at least k - 1
# seconds less this jitter (seen up to 0.26 s at a load average of 11 on 2 cores).
JITTER = 0.4
# From the job's end (its durationMs after it was offered) to its result's arrival.
RESULT_DELAY_MAX = 0.5
# sha256 of 2 GiB of zero bytes (python3 -c 'import hashlib; h = hashlib.sha256();
# [h.update(bytes(1 << 20)) for _ in range(2048)]; print(h.hexdigest())').
ZEROS_2G_SHA256 = "a7c744c13cc101ed66c29f672f92455547889cc586ce6d44fe76ae824958ea51"


def job_record(s, jid):
    return s.controller.admin("GET", f"/admin/jobs/{jid}")


def check_paced(j):
    """At most one post a second, and the result not held back by unposted progress."""
    at = j["progressAt"]
    gaps = [b - a for a, b in zip(at, at[1:])]
    for i in range(len(at)):
        for k in range(i + 1, len(at)):
            check(at[k] - at[i] >= (k - i) - JITTER, ("more than one post a second", i, k, gaps))
    res = j["results"][0]
    ended = j["offeredAt"] + res["durationMs"] / 1000.0
    delay = j["resultAt"] - ended
    check(delay < RESULT_DELAY_MAX, ("the result waited", delay, res["durationMs"]))
    # No progress arrives long after the result: what was not posted is dropped.
    check(all(t <= j["resultAt"] + RESULT_DELAY_MAX for t in at), (at, j["resultAt"]))
    return gaps, delay


@with_setup()
def long_job_percentages(s):
    """A 4 s job reporting 40 steps: the controller sees the first at once, then about one
    a second, each the latest percent, increasing."""
    jid = s.controller.enqueue("test.sleep", {"sleepMs": 4000, "steps": 40})
    s.controller.wait_results([jid], 30)
    j = job_record(s, jid)
    check(j["results"][0]["status"] == "succeeded", j["results"])
    prog = j["progress"]
    pcts = [p["percent"] for p in prog]
    check(all(p["stage"] == "working" for p in prog), prog)
    check(pcts == sorted(pcts) and len(set(pcts)) >= 3, pcts)
    check(pcts[0] == 0, pcts)  # the first progress goes at once
    # 4 s of work: the first post, then one a second: 1 + 4 at most (+1 for timing); at
    # least 3 even when an answer is slow to come (the next post waits for it).
    check(3 <= len(prog) <= 6, (len(prog), pcts))
    gaps, delay = check_paced(j)
    print(f"test.sleep 4 s, 40 steps: {len(prog)} posts, percents {pcts}, gaps "
          f"{[round(g, 2) for g in gaps]} s, result {delay * 1000:.0f} ms after the job ended")


@with_setup()
def quick_result_not_held(s):
    """Jobs shorter than the gap: one post (the first), and each result right away,
    though the job reported 30 percents after it."""
    for _ in range(3):
        jid = s.controller.enqueue("test.sleep", {"sleepMs": 300, "steps": 30})
        s.controller.wait_results([jid], 15)
        j = job_record(s, jid)
        check(j["results"][0]["status"] == "succeeded", j["results"])
        pcts = [p.get("percent") for p in j["progress"]]
        check(pcts == [0], pcts)
        _, delay = check_paced(j)
        print(f"test.sleep 0.3 s, 30 steps: posts {pcts}, result {delay * 1000:.0f} ms after the job ended")


VPS = str(uuid.uuid4())


def big_template_conf(s):
    """The usual templates plus one whose image is 2 GiB (sparse, raw): its sha256
    takes seconds, during which preparing-disk's percent follows the bytes hashed."""
    assets = make_vm_assets(s.tmp)
    path = os.path.join(assets["images_dir"], "big.raw")
    with open(path, "wb") as f:
        f.truncate(2 << 30)
    with open(assets["templates_file"]) as f:
        templates = json.load(f)
    templates.append({"id": "big-1", "imageSlug": "1", "os": "linux", "format": "raw", "path": "big.raw",
                      "sha256": ZEROS_2G_SHA256})
    with open(assets["templates_file"], "w") as f:
        json.dump(templates, f)
    return {"vm": assets}


@with_setup(agent_conf=big_template_conf)
def vps_create_verifies_with_percent(s):
    """vps.create on libvirt's test driver with a 2 GiB template: the template's
    verification reports its percent as it hashes; stages arrive in the kind's order."""
    params = {"name": "big", "hostname": "big", "vmPassword": "Sup3r!secret",
              "plan": {"cpuCores": 1, "cpuThreads": 1, "ramMB": 512, "storageMB": 3072,
                       "networkSpeedLimitMbps": 0, "bandwidthLimitGb": 100, "maxSnapshots": 1},
              "template": {"id": "big-1", "imageSlug": "1", "os": "linux"},
              "network": {"ipv4": [{"address": "192.0.2.10", "prefix": 24}]}}
    jid = s.controller.enqueue("vps.create", params, target={"type": "vps", "id": VPS})
    s.controller.wait_results([jid], 120)
    j = job_record(s, jid)
    res = j["results"][0]
    check(res["status"] == "succeeded", res)
    prog = j["progress"]
    order = ["preparing-disk", "writing-image", "configuring", "booting"]
    stages = [p["stage"] for p in prog]
    check(stages[0] == "preparing-disk" and stages == sorted(stages, key=order.index), stages)
    verify = [p["percent"] for p in prog if p["stage"] == "preparing-disk"]
    check(verify == sorted(verify), verify)
    check(all(p.get("message") == "verifying the template image" for p in prog if p["stage"] == "preparing-disk"),
          prog)
    # Hashing 2 GiB takes seconds; a post a second shows it moving. The number of
    # percents follows the time it took: at least one per whole second beyond the first.
    secs = res["durationMs"] / 1000.0
    check(len(set(verify)) >= min(3, int(secs)), (secs, verify))
    check(len(prog) <= 2 + int(secs), (secs, len(prog)))
    gaps, delay = check_paced(j)
    print(f"vps.create, 2 GiB template: {secs:.1f} s, {len(prog)} posts, preparing-disk percents {verify}, "
          f"gaps {[round(g, 2) for g in gaps]} s, result {delay * 1000:.0f} ms after the job ended")


if __name__ == "__main__":
    sys.exit(run_cases(in_both_forms({f.__name__: f for f in [long_job_percentages, quick_result_not_held,
                                                 vps_create_verifies_with_percent]})))
