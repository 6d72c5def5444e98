#!/usr/bin/python3
# SPDX-License-Identifier: GPL-2.0-or-later
"""Soak benchmark (issue 14, item 5): the agent's memory over a long steady run.
Prints figures beside their targets; asserts nothing about them.

The real nodeagentd against the test controller (tests/controller) over HTTPS, with:
  servers   --servers domains on libvirt's test driver (a node file of its own), each
            tracked by metrics through a cgroup v2 fixture, every history file full
            (all three rings written, 30 days deep: soak-fill-history) before start;
  jobs      every second --rate jobs: vps.status, vps.metrics (23 hours of minutes by 2 min
            or 29 days of quarter hours by the hour, of one server's history, read from its file) and test.sleep (journaled, result reported),
            each batch waited for, so the rate is steady and nothing piles up;
  reports   the agent's own: metrics every [metrics] interval_sec, job results;
  consoles  as root with crun: one busybox app (`cat`), and every --console-sec a
            console session opened to it through a wss:// relay (this script, as in
            bench/console), one line typed and its echo read, then console.close.
Every --sample-sec (60) it prints the agent's RSS and PSS (/proc/PID/smaps_rollup)
and RssFile, RssAnon (/proc/PID/status), descriptors and jobs done; at the end the
growth of each from the first sample after --warmup-minutes to the last.
Targets (issue 14): RSS <= 16 MB with libvirt and 1,000 servers + 1,000 apps with full
history; no growth after warm-up.

  bench_soak.py [--minutes 60] [--servers 1000] [--rate 5] [--sample-sec 60]
                [--console-sec 10] [--warmup-minutes 5] [--interval-sec 10] [--smoke]
"""
import argparse
import json
import os
import random
import shutil
import subprocess
import sys
import time
import uuid

HERE = os.path.dirname(os.path.abspath(__file__))
SRC = os.path.dirname(os.path.dirname(HERE))
os.environ.setdefault("NA_SOURCE_DIR", SRC)
os.environ.setdefault("NA_BUILD_DIR", os.path.join(SRC, "build"))
sys.path.insert(0, os.path.join(SRC, "tests", "harness"))
from nodeagent_harness import BUILD, Setup, check, make_cgroup_fixture, make_vm_assets, private_netns  # noqa: E402

FILL = os.path.join(BUILD, "bench", "soak", "soak-fill-history")


def server_ids(n):
    return [f"50a50000-0000-4000-8000-{i:012d}" for i in range(n)]


def node_xml(path, ids):
    with open(path, "w") as f:
        f.write("<node><cpu><nodes>1</nodes><sockets>2</sockets><cores>32</cores><threads>2</threads>"
                "<active>128</active><mhz>2400</mhz><model>x86_64</model></cpu><memory>536870912</memory>\n")
        for vid in ids:
            f.write("<domain type='test' xmlns:test='http://libvirt.org/schemas/domain/test/1.0'>"
                    f"<name>vps-{vid}</name><uuid>{vid}</uuid><memory>524288</memory><vcpu>1</vcpu>"
                    "<os><type>hvm</type></os><test:runstate>1</test:runstate></domain>\n")
        f.write("</node>\n")


def fill_histories(state_dir, ids):
    """Every server's history file full (a copy of one made by soak-fill-history)."""
    hdir = os.path.join(state_dir, "metrics")
    os.makedirs(hdir, exist_ok=True)
    master = os.path.join(hdir, "full.hist.tmp")
    subprocess.run([FILL, master, str(int(time.time()))], check=True)
    for vid in ids:
        shutil.copyfile(master, os.path.join(hdir, f"vps-{vid}.hist"))
    os.unlink(master)


def memory(pid):
    """{rss, pss, file, anon} in MB, fds, threads."""
    out = {}
    with open(f"/proc/{pid}/smaps_rollup") as f:
        for line in f:
            k, _, rest = line.partition(":")
            if k in ("Rss", "Pss"):
                out[k.lower()] = int(rest.split()[0]) / 1024
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            k, _, rest = line.partition(":")
            if k in ("RssFile", "RssAnon"):
                out[k[3:].lower()] = int(rest.split()[0]) / 1024
            elif k == "Threads":
                out["threads"] = int(rest)
    out["fds"] = len(os.listdir(f"/proc/{pid}/fd"))
    return out


def apps_possible():
    return os.geteuid() == 0 and os.path.exists("/usr/bin/crun") and os.path.exists("/bin/busybox")


class Consoles:
    """One app and console sessions to it through an in-process relay (bench/console)."""

    def __init__(self, s):
        sys.path.insert(0, os.path.join(SRC, "tests", "agent", "kinds", "apps"))
        sys.path.insert(0, os.path.join(SRC, "bench", "console"))
        sys.path.insert(0, os.path.join(SRC, "bench", "app"))
        import bench_console
        from test_apps import app_job, ok
        self.bc, self.app_job, self.ok, self.s = bench_console, app_job, ok, s
        self.app = bench_console.deploy(s, ["/bin/cat"], "soak")
        self.sessions = 0

    def session(self):
        relay = self.bc.Relay(self.s.controller.certs)
        try:
            sid = self.bc.open_console(self.s, relay, self.app)
            want = f"soak{self.sessions}"
            relay.send_text(json.dumps({"type": "line", "line": want}))
            deadline = time.time() + 10
            while time.time() < deadline:
                op, data = relay.frame()
                if op == 1 and json.loads(data).get("text") == want:
                    break
            else:
                raise AssertionError("console: no echo")
            self.ok(self.app_job(self.s, "console.close", self.app, {"sessionId": sid}))
            self.sessions += 1
        finally:
            for sock in (getattr(relay, "c", None), relay.lsock):
                if sock:
                    sock.close()


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--minutes", type=float, default=60)
    ap.add_argument("--servers", type=int, default=1000)
    ap.add_argument("--rate", type=int, default=5, help="jobs per second")
    ap.add_argument("--sample-sec", type=float, default=60)
    ap.add_argument("--console-sec", type=float, default=10)
    ap.add_argument("--warmup-minutes", type=float, default=None, help="default: 5, or a third of a shorter run")
    ap.add_argument("--interval-sec", type=int, default=10, help="the agent's metrics interval")
    ap.add_argument("--smoke", action="store_true", help="a few seconds at a tiny size")
    a = ap.parse_args()
    if a.smoke:
        a.minutes, a.servers, a.sample_sec, a.console_sec, a.interval_sec = 0.2, 20, 3, 4, 2
    if a.warmup_minutes is None:
        a.warmup_minutes = min(5.0, a.minutes / 3)
    if not os.path.exists(FILL):
        print(f"bench-soak: {FILL} is not built")
        return 1
    netns = private_netns()
    ids = server_ids(a.servers)
    with_apps = apps_possible()

    def conf(s):
        vm = make_vm_assets(s.tmp)
        node = os.path.join(s.tmp, "soak-node.xml")
        node_xml(node, ids)
        vm["uri"] = f"test://{node}"
        cg, _ = make_cgroup_fixture(s.tmp, ids)
        c = {"vm": vm, "metrics": {"cgroup_root": cg, "interval_sec": a.interval_sec},
             "agent": {"log_level": "info"}}
        if with_apps:
            sys.path.insert(0, os.path.join(SRC, "tests", "agent", "kinds", "apps"))
            from test_apps import apps_conf
            c.update(apps_conf(s))
            c["apps"]["sftp_listen"] = ""
        else:
            c["apps"] = {"enabled": "false"}
        if not netns:
            c["firewall"] = {"enabled": "false"}
        return c

    t0 = time.time()
    s = Setup(agent_conf=conf, before_start=lambda s: fill_histories(s.agent.state_dir, ids))
    failed = True
    try:
        s.controller.hello()
        pid = s.agent.proc.pid
        print(f"soak: {a.servers} servers on libvirt's test driver with full history rings "
              f"({a.servers} x 256 KiB), {a.rate} jobs/s, metrics every {a.interval_sec} s, consoles "
              f"{'every %g s to one app' % a.console_sec if with_apps else 'off (needs root and crun)'}, "
              f"firewall {'on (private netns)' if netns else 'off'}; {a.minutes:g} min, warm-up "
              f"{a.warmup_minutes:g} min (set up in {time.time() - t0:.1f} s)")
        consoles = Consoles(s) if with_apps else None
        print(f"{'min':>6} {'RSS MB':>8} {'PSS MB':>8} {'RssFile':>8} {'RssAnon':>8} {'fds':>5} {'thr':>4} "
              f"{'jobs':>7} {'consoles':>8}", flush=True)
        start = time.time()
        end = start + a.minutes * 60
        next_sample, next_console = start, start
        samples = []
        jobs_done = 0
        while True:
            now = time.time()
            if now >= next_sample:
                m = memory(pid)
                m["t"] = (now - start) / 60
                samples.append(m)
                print(f"{m['t']:6.1f} {m['rss']:8.2f} {m['pss']:8.2f} {m['file']:8.2f} {m['anon']:8.2f} "
                      f"{m['fds']:5d} {m['threads']:4d} {jobs_done:7d} "
                      f"{consoles.sessions if consoles else 0:8d}", flush=True)
                next_sample += a.sample_sec
                s.controller.admin("POST", "/admin/reset", {"done": True})  # the test controller's memory bounded
                if now >= end:
                    break
            if consoles and now >= next_console:
                consoles.session()
                next_console += a.console_sec
            batch = []
            for i in range(a.rate):
                vid = random.choice(ids)
                kind = ("vps.status", "vps.metrics", "test.sleep")[i % 3]
                params = {"sleepMs": 0} if kind == "test.sleep" else {}
                if kind == "vps.metrics":
                    back, step = random.choice(((23 * 3600, 120), (29 * 86400, 3600)))
                    params = {"from": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(time.time() - back)),
                              "step": step}
                job = {"kind": kind, "params": params}
                if kind != "test.sleep":
                    job["target"] = {"type": "vps", "id": vid}
                batch.append(job)
            jids = s.controller.enqueue_many(batch)
            res = s.controller.wait_results(jids, 60)
            for r in res.values():
                check(r["results"][0]["status"] == "succeeded", r)
            jobs_done += len(jids)
            time.sleep(max(0.0, min(next_sample, start + (jobs_done / a.rate)) - time.time()))
        warm = [m for m in samples if m["t"] >= a.warmup_minutes] or samples[-1:]
        first, last = warm[0], samples[-1]
        print(f"growth after warm-up ({first['t']:.1f} to {last['t']:.1f} min): RSS {last['rss'] - first['rss']:+.2f} MB, "
              f"PSS {last['pss'] - first['pss']:+.2f} MB, RssFile {last['file'] - first['file']:+.2f} MB, "
              f"RssAnon {last['anon'] - first['anon']:+.2f} MB, fds {last['fds'] - first['fds']:+d} "
              f"(target: none)")
        print(f"RSS at the end {last['rss']:.2f} MB with libvirt and {a.servers} servers with full history "
              f"(target <= 16 MB with 1,000 servers + 1,000 apps): "
              f"{'met' if last['rss'] <= 16 else 'NOT met'}; {jobs_done} jobs, "
              f"{consoles.sessions if consoles else 0} console sessions")
        failed = False
    finally:
        s.close(failed)
    return 0


if __name__ == "__main__":
    sys.exit(main())
