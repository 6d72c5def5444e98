#!/usr/bin/python3
# SPDX-License-Identifier: GPL-2.0-or-later
"""The controller link end to end: real HTTPS on loopback with a real CA, the real
agent process, the test controller's fault injection (issue 3, item 8). Every case
runs in both forms of the contract (in_both_forms): results and progress posted, and
<case>_exchange, where they ride on the poll (AGENT-API 2.3, issue 23)."""
import json
import os
import random
import signal
import sys
import time
import uuid

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "harness"))
from nodeagent_harness import (BUILD, Setup, check, exchange_form, in_both_forms, run_cases, wait_for,  # noqa: E402
                               with_setup)


def now_iso():
    t = time.time()
    return time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(t)) + ".%03dZ" % (int(t * 1000) % 1000)


def agent_requests(s, since=0.0):
    return [r for r in s.controller.requests() if r[0] >= since]


@with_setup()
def happy(s):
    ids = s.controller.enqueue_many([{"kind": "node.status"}, {"kind": "test.append", "params": {"sleepMs": 50}},
                                     {"kind": "vps.teleport", "target": {"type": "vps", "id": str(uuid.uuid4())}}])
    jobs = s.controller.wait_results(ids, 15)
    ok = jobs[ids[0]]["results"][0]
    check(ok["status"] == "succeeded" and ok["attempt"] == 1, ok)
    check(ok["data"]["agentVersion"] and ok["data"]["host"]["cpus"] >= 1, ok)
    check(jobs[ids[1]]["results"][0]["data"] == {"applied": True})
    bad = jobs[ids[2]]["results"][0]
    check(bad["status"] == "failed" and bad["error"]["code"] == "UNSUPPORTED_JOB" and bad["error"]["httpStatus"] == 400, bad)
    for r in (ok, bad):
        check(r["finishedAt"].endswith("Z") and isinstance(r["durationMs"], int))
    hello = s.controller.hello()
    check(hello["protocol"] == 1 and hello["agentVersion"] and hello["bootId"], hello)
    check({"hostname", "kernel", "cpus", "memoryMB", "cgroup"} <= set(hello["host"]), hello)
    check("node.status" in hello["capabilities"]["jobKinds"] and hello["capabilities"]["firewall"] == "nftables")
    check(hello["unfinishedJobs"] == [] and "vps" in hello["inventory"])
    st = s.agent.status()
    check(st["link"]["state"] == "connected" and st["jobs"]["succeeded"] == 2 and st["jobs"]["failed"] == 1, st)
    # Each result was delivered once; nothing hammers the controller while idle.
    state = s.controller.state()
    counts = state["requestCounts"]
    for i in ids:
        check(len(state["jobs"][i]["results"]) == 1, state["jobs"][i])
        check(counts.get(f"/agent/v1/jobs/{i}/result", 0) == (0 if exchange_form() else 1), counts)
    check(st["link"]["exchange"] == exchange_form(), st)
    check(any(p.endswith("/exchange") for p in counts) == exchange_form(), counts)


@with_setup(controller_extra=["--poll-wait", "30"])
def result_at_once(s):
    """A result never waits for the long poll in flight (30 s here) to come back: it is
    posted at once, or, in the exchange form, goes out in a second exchange with wait=0;
    progress alike."""
    jid = s.controller.enqueue("test.sleep", {"sleepMs": 1500})
    wait_for(lambda: s.agent.status()["jobs"]["running"] == 1, 10, "start")
    res = s.controller.wait_results([jid], 20)[jid]
    took = res["resultAt"] - res["offeredAt"]
    check(took < 10, f"the result came {took:.1f}s after the offer")
    check(len(res["progress"]) >= 1 and res["progress"][0]["stage"] == "working", res)
    state = s.controller.state()
    paths = set(state["requestCounts"])
    if exchange_form():
        check(not any("/jobs/" in p for p in paths), paths)  # no result or progress post
        quick = [x for x in state["exchanges"] if x["wait"] == 0]
        check(any(x["results"] == 1 for x in quick) and any(x["progress"] == 1 for x in quick), state["exchanges"])
        check(all(x["results"] == 0 and x["progress"] == 0 for x in state["exchanges"] if x["wait"] > 0),
              state["exchanges"])
    else:
        check(f"/agent/v1/jobs/{jid}/result" in paths and not any(p.endswith("/exchange") for p in paths), paths)
    print(f"result_at_once: result {took:.2f}s after the offer, with a 30 s long poll in flight")


@with_setup(controller_extra=["--poll-wait", "30"])
def result_after_failure(s):
    """The request carrying a result fails (503: the result post, or in the exchange form
    the wait=0 exchange, while the long poll waits): the result is kept, sent again after
    the backoff and recorded once."""
    jid = s.controller.enqueue("test.append", {"sleepMs": 1500})
    wait_for(lambda: s.controller.admin("GET", f"/admin/jobs/{jid}")["progress"], 10, "the job's first progress")
    path = "/exchange" if exchange_form() else f"/jobs/{jid}/result"
    s.controller.fault(mode="503", count=1, path=path)
    res = s.controller.wait_results([jid], 30)[jid]
    check(len(res["results"]) == 1 and res["results"][0]["status"] == "succeeded", res)
    failed = [r for r in s.controller.requests() if r[3] == 503]
    check(len(failed) == 1 and failed[0][2].endswith(path), failed)
    check(s.agent.status()["resultsPending"] == 0)


@with_setup()
def refused_result(s):
    """A result the central API refuses with 404 JOB_NOT_FOUND (in an exchange: listed in
    "lost") is dropped: not sent again, not after a restart either."""
    jid = s.controller.enqueue("test.append", {"sleepMs": 1500})
    wait_for(lambda: s.controller.admin("GET", f"/admin/jobs/{jid}")["progress"], 10, "the job's first progress")
    s.controller.admin("POST", f"/admin/forget/{jid}")
    wait_for(lambda: [jid, "result", "JOB_NOT_FOUND"] in s.controller.state()["refused"], 15, "the refusal")
    wait_for(lambda: s.agent.status()["resultsPending"] == 0, 5, "the result dropped")
    check("refused its result" in s.agent.log_text())
    check(s.agent.stop() == 0)
    s.agent.start()
    other = s.controller.enqueue("node.status")
    s.controller.wait_results([other], 15)
    check(s.controller.state()["refused"].count([jid, "result", "JOB_NOT_FOUND"]) == 1, s.controller.state()["refused"])


@with_setup()
def down_and_back(s):
    """The controller goes away for a while; the agent backs off, says hello again, and
    every job enqueued meanwhile runs once."""
    # Connected first: a hello still on the wire when the controller goes down meets a
    # cause of its own ("Empty reply"), logged as a change of its own (seen under ASan).
    wait_for(lambda: s.agent.status()["link"]["state"] == "connected", 15, "the first hello")
    s.controller.fault(mode="down", seconds=6)
    time.sleep(0.5)
    ids = s.controller.enqueue_many([{"kind": "test.append", "params": {"sleepMs": 20}} for _ in range(5)])
    wait_for(lambda: s.agent.status()["link"]["state"] == "backing-off", 15, "the agent to notice")
    jobs = s.controller.wait_results(ids, 60)
    check(all(j["results"][0]["status"] == "succeeded" for j in jobs.values()))
    check(len(s.controller.state()["hellos"]) >= 2, "no hello after the reconnect")
    log = s.agent.log_text()
    check(log.count("backing off") == 1, log)  # once per change, not once per try
    check(s.agent.status()["link"]["state"] == "connected")


def storm(s, mode, seconds, retry_after=None):
    t0 = s.controller.requests()[-1][0] if s.controller.requests() else 0.0
    f = {"mode": mode, "seconds": seconds}
    if retry_after is not None:
        f["retryAfter"] = retry_after
    s.controller.fault(**f)
    time.sleep(seconds)
    during = [r for r in agent_requests(s, t0) if r[3] == int(mode)]
    jid = s.controller.enqueue("node.status")
    s.controller.wait_results([jid], 70)
    return during


@with_setup()
def storm_503(s):
    during = storm(s, "503", 12)
    # Full jitter from 1 s doubling to 60 s: about 5 tries in 12 s; never a tight loop.
    check(1 <= len(during) <= 14, during)
    gaps = [b[0] - a[0] for a, b in zip(during, during[1:])]
    check(all(g >= 0.2 for g in gaps), gaps)
    check(s.agent.status()["link"]["state"] == "connected")


@with_setup()
def storm_429(s):
    during = storm(s, "429", 12, retry_after=4)
    # Retry-After: 4 is honoured: at most one try per 4 s (plus the first).
    check(1 <= len(during) <= 4, during)
    gaps = [b[0] - a[0] for a, b in zip(during, during[1:])]
    check(all(g >= 3.9 for g in gaps), gaps)


@with_setup(start_agent=False, controller_extra=["--lease-sec", "2"])
def crash(s):
    """kill -9 at random moments while 50 changing jobs run: after a restart every
    job has exactly one effect and a result."""
    rnd = random.Random(int(os.environ.get("NA_TEST_SEED", "4242")))
    ids = s.controller.enqueue_many([{"kind": "test.append", "params": {"sleepMs": rnd.randint(20, 400)}}
                                     for _ in range(50)])
    for _ in range(6):
        s.agent.start()
        time.sleep(rnd.uniform(0.2, 1.2))
        s.agent.kill9()
    s.agent.start()
    jobs = s.controller.wait_results(ids, 120)
    for jid, j in jobs.items():
        check(all(r["status"] == "succeeded" for r in j["results"]), j)
    with open(os.path.join(s.agent.state_dir, "test-effects.log")) as f:
        effects = f.read().split()
    for jid in ids:
        check(effects.count(jid) == 1, (jid, effects.count(jid)))
    check(len(effects) == 50)
    with open(os.path.join(s.agent.state_dir, "test-runs.log")) as f:
        runs = [line.split()[0] for line in f]
    reruns = len(runs) - 50
    answered = s.agent.log_text().count("answered from the journal without running")
    print(f"crash: 50 jobs, {reruns} re-run(s) after kill -9, {answered} answered from the journal")
    st = s.agent.status()
    check(st["journal"]["interrupted"] == 0 and st["resultsPending"] == 0, st)


@with_setup(start_agent=False)
def tls_refusals(s):
    """A wrong CA and a wrong pin are refused; the right pin and mutual TLS work."""
    certs = s.controller.certs

    with open(s.agent.conf) as f:
        original = f.read().split("\n[vm]")[0]

    def attempt(extra_conf, ca="ca.pem", expect_connected=True):
        base = original.replace(f"ca_file = {certs}/ca.pem", f"ca_file = {certs}/{ca}")
        with open(s.agent.conf, "w") as f:
            f.write(base + "\n" + extra_conf + "\n[vm]\nuri = test:///default\n")
        s.agent.start()
        try:
            if expect_connected:
                wait_for(lambda: s.agent.status()["link"]["state"] == "connected", 10, "connected")
            else:
                st = wait_for(lambda: (lambda x: x if x["link"]["state"] == "backing-off" else None)(s.agent.status()),
                              10, "refusal")
                return st["link"]["reason"]
        finally:
            check(s.agent.stop() == 0)

    before = len(s.controller.requests())
    reason = attempt("", ca="other-ca.pem", expect_connected=False)
    check("certificate" in reason.lower() or "ssl" in reason.lower(), reason)
    with open(f"{certs}/wrong.pin") as f:
        wrong = f.read().strip()
    with open(f"{certs}/server.pin") as f:
        right = f.read().strip()
    reason = attempt(f"pinned_pubkey = {wrong}\n", expect_connected=False)
    check("pin" in reason.lower() or "public key" in reason.lower(), reason)
    check(len(s.controller.requests()) == before, "a refused server must not have seen a request")
    attempt(f"pinned_pubkey = {right}\n")


@with_setup(start_agent=False, controller_extra=["--client-ca", os.path.join(BUILD, "test-certs", "ca.pem")])
def mtls(s):
    """A controller that wants a client certificate refuses an agent without one."""
    s.agent.start()
    st = wait_for(lambda: (lambda x: x if x["link"]["state"] == "backing-off" else None)(s.agent.status()), 10, "refusal")
    check(s.agent.stop() == 0)
    certs = s.controller.certs
    with open(s.agent.conf) as f:
        text = f.read()
    with open(s.agent.conf, "w") as f:
        f.write(text.replace("poll_wait_sec = 5", f"poll_wait_sec = 5\nclient_cert = {certs}/client.pem\n"
                                                   f"client_key = {certs}/client.key"))
    s.agent.start()
    jid = s.controller.enqueue("node.status")
    s.controller.wait_results([jid], 10)
    print(f"mtls: without a client certificate: {st['link']['reason']}")


@with_setup()
def token_rotation(s):
    """The controller stops taking token A; the agent says so once, and recovers as soon
    as token B lands in its token file."""
    s.controller.admin("POST", "/admin/tokens", {"tokens": ["token-B"]})
    wait_for(lambda: s.agent.status()["link"]["state"] == "auth-refused", 15, "the 401")
    st = s.agent.status()["link"]
    check(st["authCode"] == "INVALID_API_KEY", st)
    time.sleep(2)
    t0 = time.time()
    s.agent.write_token("token-B")
    wait_for(lambda: s.agent.status()["link"]["state"] == "connected", 5, "recovery after rotation")
    took = time.time() - t0
    jid = s.controller.enqueue("node.status")
    s.controller.wait_results([jid], 10)
    log = s.agent.log_text()
    check(log.count("authentication refused") == 1, log)
    check("token file" in log and "changed" in log, log)
    print(f"token rotation: reconnected {took:.2f}s after the token file changed")
    # A token file opened to others is refused; the working token stays.
    os.chmod(s.agent.token_file, 0o644)
    s.agent.signal(signal.SIGHUP)
    wait_for(lambda: "readable by group or others" in s.agent.log_text(), 5, "the refusal")
    os.chmod(s.agent.token_file, 0o600)
    jid = s.controller.enqueue("node.status")
    s.controller.wait_results([jid], 10)


@with_setup()
def malformed(s):
    """Malformed jobs each get a failed result; the agent stays up."""
    node = {"type": "node", "id": s.node_id}
    ids = [str(uuid.uuid4()) for _ in range(6)]
    raw = [
        "not an object",
        {"kind": "node.status"},                                                   # no id: cannot be answered
        {"id": ids[0], "kind": "node.status", "attempt": "one", "target": node, "createdAt": now_iso()},
        {"id": ids[1], "kind": "vps.teleport", "attempt": 1, "target": node, "createdAt": now_iso()},
        {"id": ids[2], "kind": "test.sleep", "attempt": 1, "target": node, "createdAt": now_iso(),
         "params": {"blob": "x" * (7 << 20)}},
        {"id": ids[3], "kind": "node.status", "attempt": 1, "target": node},
        {"id": ids[4], "kind": "node.status", "attempt": 1, "target": {"type": "vps", "id": str(uuid.uuid4())},
         "createdAt": now_iso()},
        {"id": ids[5], "kind": "test.sleep", "attempt": 1, "target": node, "createdAt": now_iso(),
         "params": {"sleepMs": -5}},
    ]
    s.controller.admin("POST", "/admin/raw-jobs", raw)
    jobs = s.controller.wait_results(ids, 20)
    expect = {ids[0]: ("VALIDATION_ERROR", "attempt"), ids[1]: ("UNSUPPORTED_JOB", None),
              ids[2]: ("VALIDATION_ERROR", "params"), ids[3]: ("VALIDATION_ERROR", "createdAt"),
              ids[4]: ("VALIDATION_ERROR", "target"), ids[5]: ("VALIDATION_ERROR", "sleepMs")}
    for jid, (code, field) in expect.items():
        err = jobs[jid]["results"][0]["error"]
        check(err["code"] == code, (jid, err))
        if code == "VALIDATION_ERROR":
            check(err["httpStatus"] == 422 and err["error"] == "Validation error", err)
            node = err["details"]
            check("_errors" in node and field in node, err)
            node = node[field]
            while not node["_errors"]:  # nested fields: target.type, params.sleepMs
                node = next(v for k, v in node.items() if k != "_errors")
            check(node["_errors"], err)
    # A poll answer that is not JSON: the agent backs off and comes back.
    s.controller.admin("POST", "/admin/raw-answer", {"body": "<html>oops</html>"})
    time.sleep(0.5)
    jid = s.controller.enqueue("node.status")
    s.controller.wait_results([jid], 30)
    check(s.agent.proc.poll() is None)
    check("without a usable id" in s.agent.log_text())


@with_setup(controller_extra=["--lease-sec", "3"])
def lease(s):
    """Progress keeps the lease every leaseSec/3; a cancel stops the job with
    JOB_CANCELLED; a lost lease stops it and posts nothing."""
    jid = s.controller.enqueue("test.sleep", {"sleepMs": 4500})
    s.controller.wait_results([jid], 15)
    prog = s.controller.admin("GET", f"/admin/jobs/{jid}")["progress"]
    check(len(prog) >= 4, prog)  # the start, then one per second
    check(prog[0]["stage"] == "working" and prog[0]["attempt"] == 1, prog)

    jid = s.controller.enqueue("test.sleep", {"sleepMs": 20000})
    wait_for(lambda: s.agent.status()["jobs"]["running"] == 1, 10, "start")
    s.controller.admin("POST", f"/admin/cancel/{jid}")
    res = s.controller.wait_results([jid], 10)[jid]["results"][0]
    check(res["status"] == "failed" and res["error"]["code"] == "JOB_CANCELLED" and res["error"]["httpStatus"] == 409, res)

    jid = s.controller.enqueue("test.sleep", {"sleepMs": 20000})
    wait_for(lambda: s.agent.status()["jobs"]["running"] == 1, 10, "start")
    s.controller.admin("POST", f"/admin/lose-lease/{jid}")
    wait_for(lambda: s.agent.status()["jobs"]["running"] == 0, 10, "the job to stop")
    time.sleep(1)
    check(s.controller.admin("GET", f"/admin/jobs/{jid}")["results"] == [])
    check("no longer holds this job" in s.agent.log_text())


@with_setup()
def timeout(s):
    jid = s.controller.enqueue("test.sleep", {"sleepMs": 10000}, timeout_sec=1)
    t0 = time.time()
    res = s.controller.wait_results([jid], 10)[jid]["results"][0]
    check(time.time() - t0 < 5)
    check(res["error"]["code"] == "JOB_TIMEOUT" and res["error"]["httpStatus"] == 504, res)


@with_setup()
def resend_from_journal(s):
    """A result that could not be delivered survives a restart and is sent first; a job
    offered again after its result was recorded is answered without running."""
    jid = s.controller.enqueue("test.append", {"sleepMs": 1500})
    wait_for(lambda: s.agent.status()["jobs"]["running"] == 1, 10, "start")
    s.controller.fault(mode="503", seconds=600)
    wait_for(lambda: s.agent.status()["resultsPending"] == 1, 15, "the undeliverable result")
    check(s.agent.stop() == 0)
    s.controller.fault(mode="none")
    s.agent.start()
    res = s.controller.wait_results([jid], 15)[jid]["results"]
    check(res[0]["status"] == "succeeded", res)
    check("recorded by an earlier run will be sent first" in s.agent.log_text())
    # Offered again (the same id): answered from the journal, the effect stays single.
    s.controller.enqueue("test.append", {"sleepMs": 10}, job_id=jid)
    res = s.controller.wait_results([jid], 15)[jid]["results"]
    with open(os.path.join(s.agent.state_dir, "test-runs.log")) as f:
        check([line.split()[0] for line in f].count(jid) == 1)
    check("answered from the journal without running" in s.agent.log_text())


if __name__ == "__main__":
    sys.exit(run_cases(in_both_forms({f.__name__: f for f in [
        happy, result_at_once, result_after_failure, refused_result, down_and_back, storm_503, storm_429, crash, tls_refusals, mtls,
        token_rotation, malformed, lease, timeout, resend_from_journal]})))
