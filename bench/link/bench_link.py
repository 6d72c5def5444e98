#!/usr/bin/python3
# SPDX-License-Identifier: GPL-2.0-or-later
"""Controller-link benchmark (issue 3). Prints figures; asserts nothing.

  round trip   a job made available -> its result received by the controller, for
               1,000 node.status jobs one after another over loopback HTTPS: p50, p99;
               beside two plain `curl` requests to the same controller, same run
  throughput   10,000 node.status jobs with maxJobs=64, first offer to last result
  in flight    20,000 node.status jobs kept 8 in flight (maxJobs=8: the controller offers
               the next as soon as a result is back): jobs/s, each job's offer-to-result
               p50/p99 and the requests per job, in the exchange form (AGENT-API 2.3:
               results ride on the poll; target <= 1.05 requests per job) and in the
               two-request form (poll + result post); beside them the limit,
               bench/link/curlpairs (C, libcurl alone, 8 lanes of keep-alive GET jobs +
               POST result pairs, no JSON, no journal, no worker) against the same
               controller in the same run, timed and counted by the controller alike
  memory       the agent's RSS, PSS and anonymous RSS after those 11,000 jobs

The controller is bench/link/fastctl (C, one thread, OpenSSL): a controller that
keeps up, so the figures are the agent's. Run: build/bench/link/... or
  python3 bench/link/bench_link.py [--smoke]
"""
import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
import uuid

SRC = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
os.environ.setdefault("NA_SOURCE_DIR", SRC)
os.environ.setdefault("NA_BUILD_DIR", os.path.join(SRC, "build"))
sys.path.insert(0, os.path.join(SRC, "tests", "harness"))
from nodeagent_harness import BUILD, Agent, certs_dir, check, free_port  # noqa: E402

FASTCTL = os.path.join(BUILD, "bench", "link", "fastctl")
CURLPAIRS = os.path.join(BUILD, "bench", "link", "curlpairs")


def mem_kb(pid):
    out = {}
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            k, _, v = line.partition(":")
            if k in ("VmRSS", "RssAnon"):
                out[k] = int(v.split()[0])
    with open(f"/proc/{pid}/smaps_rollup") as f:
        for line in f:
            if line.startswith("Pss:"):
                out["Pss"] = int(line.split()[1])
    return out


def point_at(agent, url):
    """Give the (stopped) agent another controller URL."""
    with open(agent.conf) as f:
        conf = f.read()
    with open(agent.conf, "w") as f:
        f.write(conf.replace(conf.split("url = ")[1].split("\n")[0], url))


def run_controller(tmp, node_id, n, mode, certs, curl_first=False, maxjobs=64, form="exchange"):
    port = free_port()
    ctl = subprocess.Popen([FASTCTL, str(port), f"{certs}/server.pem", f"{certs}/server.key", node_id, str(n), mode,
                            str(maxjobs), form], stdout=subprocess.PIPE, text=True)
    check(json.loads(ctl.stdout.readline())["listening"] == port)
    curls = []
    if curl_first:
        for _ in range(2):
            t0 = time.perf_counter()
            subprocess.run(["curl", "-s", "-o", "/dev/null", "--cacert", f"{certs}/ca.pem", "-H",
                            "Authorization: Bearer x", "-d", "{}",
                            f"https://127.0.0.1:{port}/agent/v1/nodes/{node_id}/hello"], check=True)
            curls.append((time.perf_counter() - t0) * 1000)
    return ctl, f"https://127.0.0.1:{port}/agent/v1", curls


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--jobs", type=int, default=1000)
    ap.add_argument("--throughput-jobs", type=int, default=10000)
    ap.add_argument("--window-jobs", type=int, default=20000)
    ap.add_argument("--smoke", action="store_true", help="tiny sizes, for the CTest that keeps this from rotting")
    args = ap.parse_args()
    if args.smoke:
        args.jobs, args.throughput_jobs, args.window_jobs = 20, 200, 200
    certs = certs_dir()
    tmp = tempfile.mkdtemp(prefix="nodeagent-bench-")
    node_id = str(uuid.uuid4())
    print(f"nodeagent controller-link benchmark ({os.cpu_count()} CPUs, loopback HTTPS, controller bench/link/fastctl)")

    agent = None
    try:
        # Round trip, one job at a time.
        ctl, url, curls = run_controller(tmp, node_id, args.jobs, "seq", certs, curl_first=True)
        agent = Agent(tmp, url, node_id, f"{certs}/ca.pem", token="bench", extra_conf="")
        agent.env.pop("NODEAGENT_TEST_KINDS", None)
        with open(agent.conf) as f:
            conf = f.read().replace("log_level = debug", "log_level = warn")
        with open(agent.conf, "w") as f:
            f.write(conf)
        agent.start()
        seq = json.loads(ctl.stdout.readline())
        ctl.wait()
        agent.stop()
        print(f"round trip   {seq['jobs']} node.status jobs, one at a time: p50 {seq['p50Ms']:.3f} ms, "
              f"p99 {seq['p99Ms']:.3f} ms  (targets: p50 <= 2 ms, p99 <= 10 ms)")
        print(f"  peer       two plain curl requests to the same controller: {curls[0]:.1f} ms and {curls[1]:.1f} ms; "
              f"ratio p50 / curl = {seq['p50Ms'] / (sum(curls) / 2):.3f}")

        # Throughput, then memory.
        ctl, url, _ = run_controller(tmp, node_id, args.throughput_jobs, "par", certs)
        point_at(agent, url)
        agent.start()
        par = json.loads(ctl.stdout.readline())
        ctl.wait()
        time.sleep(0.2)
        mem = mem_kb(agent.proc.pid)
        agent.stop()
        print(f"throughput   {par['jobs']} node.status jobs, maxJobs=64: {par['jobsPerSec']:.0f} jobs/s "
              f"({par['seconds']:.2f} s)  (target >= 5000 jobs/s)")
        print(f"memory       after {args.jobs + args.throughput_jobs} jobs: RSS {mem['VmRSS'] / 1024:.1f} MB "
              f"(of which shared library text is most), PSS {mem['Pss'] / 1024:.1f} MB, "
              f"anonymous {mem['RssAnon'] / 1024:.1f} MB  (target RSS <= 8 MB)")

        # Eight in flight in both forms, then the peer on the same kind of controller.
        forms = {}
        for form in ("exchange", "posts"):
            ctl, url, _ = run_controller(tmp, node_id, args.window_jobs, "win", certs, maxjobs=8, form=form)
            point_at(agent, url)
            agent.start()
            forms[form] = json.loads(ctl.stdout.readline())
            ctl.wait()
            agent.stop()
        win = forms["exchange"]
        ctl, url, _ = run_controller(tmp, node_id, args.window_jobs, "win", certs, maxjobs=8, form="posts")
        peer = subprocess.Popen([CURLPAIRS, url, node_id, f"{certs}/ca.pem", str(args.window_jobs), "8"])
        pw = json.loads(ctl.stdout.readline())
        ctl.wait()
        check(peer.wait() == 0)
        print(f"in flight    {win['jobs']} node.status jobs, 8 in flight, exchange form: {win['jobsPerSec']:.0f} jobs/s, "
              f"p50 {win['p50Ms']:.3f} ms, p99 {win['p99Ms']:.3f} ms, {win['requestsPerJob']:.3f} requests per job "
              f"({win['requests']} requests)  (targets: >= 15000 jobs/s, p99 <= 1 ms, <= 1.05 requests per job)")
        two = forms["posts"]
        print(f"  two-request form (poll + result post), same run: {two['jobsPerSec']:.0f} jobs/s, p50 {two['p50Ms']:.3f} ms, "
              f"p99 {two['p99Ms']:.3f} ms, {two['requestsPerJob']:.3f} requests per job ({two['requests']} requests)")
        print(f"  limit      curlpairs, the same {pw['jobs']} jobs as keep-alive GET+POST pairs, 8 lanes: "
              f"{pw['jobsPerSec']:.0f} pairs/s, p50 {pw['p50Ms']:.3f} ms, p99 {pw['p99Ms']:.3f} ms, "
              f"{pw['requestsPerJob']:.3f} requests per job; ratio agent / limit = exchange "
              f"{win['jobsPerSec'] / pw['jobsPerSec']:.2f}, two-request {two['jobsPerSec'] / pw['jobsPerSec']:.2f}")
    finally:
        if agent and agent.proc and agent.proc.poll() is None:
            agent.proc.kill()
    return 0


if __name__ == "__main__":
    sys.exit(main())
