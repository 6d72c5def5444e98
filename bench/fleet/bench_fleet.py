#!/usr/bin/python3
# SPDX-License-Identifier: GPL-2.0-or-later
"""The fleet benchmark (issue 23 item 2): N agents on this machine, each with its own
state directory, node id and token, libvirt's test driver for servers and no firewall,
against one central API (fleet_controller.py, in this process) at the settings the
contract's example gives (pollWaitSec 30, reportIntervalSec 15, exchange on). Prints
figures; asserts nothing about timing.

  idle     requests per idle node per minute, by kind, over IDLE seconds, and the
           central API's CPU per idle node (this process's utime+stime, its only work
           being the fleet's requests), beside the contract's arithmetic for the same
           settings (one long poll per pollWaitSec, one report per reportIntervalSec);
  outage   each node gets a job of 20 s (test.sleep) that ends while the central API
           is down (60 s: the listening socket closed, every connection cut); when it
           comes back: the peak request rate (per second), how long until every node has
           said hello again and until every result is delivered, and their
           distribution (full jitter should spread them over the backoff's last step);
  memory   each agent's VmRSS and RssAnon after it all.

Run: sudo python3 bench/fleet/bench_fleet.py [--agents N] [--idle S] [--down S]
(default 200 agents, 120 s idle, 60 s down; --quick: 5 agents, 31 s idle (one long poll
each), 5 s down: what CTest runs so that it cannot rot).
NA_BUILD_DIR picks the build (default <source>/build).
"""
import argparse
import os
import resource
import shutil
import statistics
import sys
import tempfile
import time
import uuid

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(HERE, "..", "..", "tests", "harness"))
from fleet_controller import SETTINGS, Controller  # noqa: E402
from nodeagent_harness import Agent, certs_dir, free_port, make_vm_assets  # noqa: E402


def cpu_self():
    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime + r.ru_stime


def proc_kb(pid, key):
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                if line.startswith(key + ":"):
                    return int(line.split()[1])
    except OSError:
        pass
    return 0


def pct(values, p):
    if not values:
        return float("nan")
    v = sorted(values)
    return v[min(len(v) - 1, int(round(p / 100 * (len(v) - 1))))]


def histogram(values, width=5.0):
    if not values:
        return "(none)"
    top = max(values)
    bins = [0] * (int(top // width) + 1)
    for v in values:
        bins[int(v // width)] += 1
    return "  ".join(f"{i * width:.0f}-{(i + 1) * width:.0f}s:{n}" for i, n in enumerate(bins) if n)


def start_agents(n, url, ca, root):
    agents = []
    for i in range(n):
        tmp = os.path.join(root, f"node-{i:04d}")
        os.makedirs(tmp)
        vm = make_vm_assets(tmp) if i == 0 else None
        if vm is None:  # one set of template images serves every node (read-only)
            vm = dict(agents[0].vm_assets)
            node = os.path.join(tmp, "node.xml")
            shutil.copy(os.path.join(agents[0].tmp, "node.xml"), node)
            vm["uri"] = f"test://{node}"
        nid = str(uuid.uuid4())
        a = Agent(tmp, url, nid, ca, token=f"token-{i}", conf={
            "agent": {"log_level": "info", "sandbox": "strict"},
            "controller": {"poll_wait_sec": None},
            "vm": vm, "firewall": {"enabled": "false"}})
        a.vm_assets = vm
        a.start(wait_ready=False)
        agents.append(a)
    return agents


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--agents", type=int, default=200)
    ap.add_argument("--idle", type=float, default=120)
    ap.add_argument("--down", type=float, default=60)
    ap.add_argument("--quick", action="store_true")
    a = ap.parse_args()
    if a.quick:
        a.agents, a.idle, a.down = 5, 31, 5
    if os.geteuid() != 0:
        print("bench_fleet: needs root (the agents' state and the test driver's files)")
        return 77
    root = tempfile.mkdtemp(prefix="nodeagent-fleet-")
    ctl = Controller(certs_dir(), free_port())
    fleet = ctl.fleet
    agents = []
    try:
        t0 = time.time()
        agents = start_agents(a.agents, ctl.url, os.path.join(certs_dir(), "ca.pem"), root)
        while len([n for n in fleet.nodes.values() if n.hellos]) < a.agents and time.time() - t0 < 300:
            time.sleep(0.2)
        print(f"fleet: {a.agents} agents connected in {time.time() - t0:.1f} s "
              f"(settings: {', '.join(f'{k} {v}' for k, v in SETTINGS.items())})")
        time.sleep(5)  # past the first report and hello

        # idle
        c0, r0, t_idle = cpu_self(), len(fleet.requests), time.time()
        time.sleep(a.idle)
        c1, r1, t_end = cpu_self(), len(fleet.requests), time.time()
        window = [r for r in fleet.requests[r0:r1]]
        minutes = (t_end - t_idle) / 60
        per_node = (r1 - r0) / a.agents / minutes
        kinds = {}
        for _, k, _ in window:
            kinds[k] = kinds.get(k, 0) + 1
        by_kind = ", ".join(f"{k} {v / a.agents / minutes:.2f}" for k, v in sorted(kinds.items()))
        expect = 60 / SETTINGS["pollWaitSec"] + 60 / SETTINGS["reportIntervalSec"]
        print(f"idle: {per_node:.2f} requests per node per minute ({by_kind}); the contract's arithmetic "
              f"at these settings: {expect:.2f} (a long poll each {SETTINGS['pollWaitSec']} s, a report each "
              f"{SETTINGS['reportIntervalSec']} s)")
        cpu_ms = (c1 - c0) * 1000 / a.agents / minutes
        print(f"idle: the central API's CPU {cpu_ms:.1f} ms per node per minute "
              f"({(c1 - c0) / (t_end - t_idle) * 100:.1f} % of a core for {a.agents} nodes; Python, one thread "
              f"per connection)")
        print(f"idle: for 10,000 nodes at these settings: {per_node * 10000 / 60:.0f} requests/s and "
              f"10,000 long polls held open at any time")

        # outage
        jobs = {}
        for ag in agents:
            jobs[ag.node_id] = fleet.enqueue(ag.node_id, "test.sleep", {"sleepMs": int(min(20, a.down / 2) * 1000)})
        time.sleep(3)  # taken
        nodes = {ag.node_id: fleet.node(ag.node_id) for ag in agents}
        hellos_before = {nid: len(n.hellos) for nid, n in nodes.items()}
        ctl.go_down()
        t_down = time.time()
        time.sleep(a.down)
        r_back = len(fleet.requests)
        ctl.come_back()
        t_back = time.time()
        deadline = t_back + 300
        while time.time() < deadline:
            if all(jid in nodes[nid].results for nid, jid in jobs.items()) and \
                    all(len(nodes[nid].hellos) > hellos_before[nid] for nid in nodes):
                break
            time.sleep(0.2)
        reconnect = [nodes[nid].hellos[hellos_before[nid]] - t_back for nid in nodes
                     if len(nodes[nid].hellos) > hellos_before[nid]]
        delivered = [nodes[nid].results[jid][0] - t_back for nid, jid in jobs.items() if jid in nodes[nid].results]
        after = [t for t, _, _ in fleet.requests[r_back:]]
        per_sec = {}
        for t in after:
            per_sec[int(t - t_back)] = per_sec.get(int(t - t_back), 0) + 1
        peak_s, peak = max(per_sec.items(), key=lambda kv: kv[1]) if per_sec else (0, 0)
        print(f"outage: down {a.down:.0f} s ({t_back - t_down:.1f}), each node's {min(20, a.down / 2):.0f} s job "
              f"ended meanwhile")
        print(f"outage: back: {len(reconnect)}/{a.agents} nodes said hello again, last after {max(reconnect or [0]):.1f} s "
              f"(p50 {pct(reconnect, 50):.1f} s, p90 {pct(reconnect, 90):.1f} s)")
        print(f"outage: {len(delivered)}/{a.agents} results delivered, last after {max(delivered or [0]):.1f} s "
              f"(p50 {pct(delivered, 50):.1f} s, p90 {pct(delivered, 90):.1f} s)")
        print(f"outage: hellos over time after the return: {histogram(reconnect)}")
        print(f"outage: peak {peak} requests/s (second {peak_s} after the return); "
              f"{a.agents / max(peak, 1):.1f} nodes per request/s of peak; for 10,000 nodes about "
              f"{peak * 10000 / a.agents:.0f} requests/s at the peak")

        # memory
        rss = [proc_kb(ag.proc.pid, "VmRSS") for ag in agents if ag.proc.poll() is None]
        anon = [proc_kb(ag.proc.pid, "RssAnon") for ag in agents if ag.proc.poll() is None]
        print(f"memory: each agent VmRSS p50 {statistics.median(rss) / 1024:.1f} MB (max {max(rss) / 1024:.1f}), "
              f"RssAnon p50 {statistics.median(anon) / 1024:.1f} MB (max {max(anon) / 1024:.1f})")
        return 0
    finally:
        for ag in agents:
            try:
                ag.stop(timeout=10)
            except Exception:  # noqa: BLE001 - best effort at the end of a benchmark
                pass
        shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
