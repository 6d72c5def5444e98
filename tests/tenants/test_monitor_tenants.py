#!/usr/bin/python3
# SPDX-License-Identifier: GPL-2.0-or-later
"""Issue 20, what an app's output costs and who dies first, against the real agent, crun
and nodeagent-monitor with a busybox image.

monitor_flood: an app capped at 0.05 CPU prints short lines as fast as it can. Its
monitor's CPU (from /proc/PID/stat over a few seconds) stays within the app's own CPU
limit, the lines kept per second are bounded, one `system` line says how many were
dropped, and a neighbour app still answers its console at once.

oom_order: a container's processes have a high oom_score_adj, the agent, the app's
monitor and nodeagent-sftpd a negative one, so a node short of memory kills a
customer's container first."""
import json
import os
import re
import sys
import time
import uuid

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "harness"))
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "agent", "kinds", "apps"))
from nodeagent_harness import check, free_port, needs, run_cases, wait_for, with_setup  # noqa: E402
from test_apps import apps_conf as shared_apps_conf, need_root  # noqa: E402

ECHO = ["/bin/sh", "-c", 'echo ready; while read l; do echo "got $l"; done']
FLOOD = ["/bin/sh", "-c", "exec yes 'short line'"]
CPU_CAP = 0.05          # the flooding app's plan
MONITOR_CPU_MAX = 0.10  # of one core, measured over WINDOW: the app's cap plus measurement slack
LINES_PER_SEC = 1000    # the default of [apps] output_lines_per_sec
LINES_BURST = 10000     # and its burst
WINDOW = 5.0
CLK_TCK = os.sysconf("SC_CLK_TCK")


def apps_conf(s):
    """The apps' test configuration (tests/agent/kinds/apps), with SFTP on: its
    nodeagent-sftpd is among the processes whose OOM score is checked."""
    conf = shared_apps_conf(s)
    conf["apps"]["sftp_listen"] = f"127.0.0.1:{free_port()}"
    return conf


def deploy_params(name, command, cpu):
    return {"name": name, "hostname": name, "type": "app", "version": "1", "sftpUsername": name,
            "template": {"id": "t", "image": "busybox:1", "command": command, "customCommand": True},
            "plan": {"cpuCores": cpu, "memoryMB": 64, "volumeQuotaMB": 32}}


def app_job(s, kind, app, params=None, timeout=60):
    jid = s.controller.enqueue(kind, params or {}, target={"type": "app", "id": app})
    res = s.controller.wait_results([jid], timeout)[jid]["results"][0]
    check(res["status"] == "succeeded", res)
    return res["data"]


def app_dir(s, app):
    return os.path.join(s.agent.state_dir, "apps", "apps", app)


def read_int(path):
    with open(path) as f:
        return int(f.read().split()[0])


def cpu_seconds(pid):
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / CLK_TCK  # utime, stime (fields 14 and 15)


def start_app(s, name, command, cpu):
    app = str(uuid.uuid4())
    app_job(s, "app.deploy", app, deploy_params(name, command, cpu), timeout=120)
    app_job(s, "app.power", app, {"action": "start"})
    return app


def next_seq(s, app):
    return app_job(s, "app.output", app, {"limit": 1})["nextSeq"]


@needs("root")
@with_setup(agent_conf=apps_conf)
def monitor_flood(s):
    need_root()
    neighbour = start_app(s, "quiet", ECHO, 0.5)
    app = start_app(s, "flood", FLOOD, CPU_CAP)
    mon = read_int(os.path.join(app_dir(s, app), "monitor.pid"))
    with open(f"/proc/{mon}/cgroup") as f:
        groups = f.read()
    print(f"monitor cgroups: {' '.join(line.split(':', 1)[1] for line in groups.split() if 'monitor-' in line)}")
    check(f"nodeagent/monitor-{app}" in groups, f"the monitor is not in its own cgroup: {groups}")
    time.sleep(2.0)  # past the start and the burst
    seq0, cpu0, t0 = next_seq(s, app), cpu_seconds(mon), time.monotonic()
    time.sleep(WINDOW)
    seq1, cpu1, t1 = next_seq(s, app), cpu_seconds(mon), time.monotonic()
    cores = (cpu1 - cpu0) / (t1 - t0)
    rate = (seq1 - seq0) / (t1 - t0)
    print(f"monitor CPU {cores:.3f} of a core over {t1 - t0:.1f} s; {rate:.0f} lines kept per second")

    # The neighbour is answered at once while the flood runs.
    t = time.monotonic()
    app_job(s, "app.console.send", neighbour, {"line": "ping"})
    wait_for(lambda: "got ping" in [x["text"] for x in app_job(s, "app.output", neighbour, {"limit": 100})["lines"]],
             10, "the neighbour's answer")
    print(f"neighbour answered in {time.monotonic() - t:.2f}s")

    # One system line per dropping second, naming how many lines went.
    lines = app_job(s, "app.output", app, {"limit": 1000})["lines"]
    drops = [x for x in lines if x["stream"] == "system" and "output dropped" in x["text"]]
    check(drops, f"no 'output dropped' system line in the last {len(lines)} lines: {lines[-3:]}")
    print(f"system line: {drops[-1]['text']}")
    check(re.search(r"output dropped: [0-9]+ lines", drops[-1]["text"]), drops[-1])
    check(cores <= MONITOR_CPU_MAX, f"the monitor used {cores:.3f} of a core (at most {MONITOR_CPU_MAX})")
    # The lines kept: the rate, one drop line per second, and slack for the window's edges.
    check(rate <= LINES_PER_SEC * 1.2 + 5, f"{rate:.0f} lines per second kept")
    app_job(s, "app.power", app, {"action": "kill"})
    app_job(s, "app.delete", app)
    app_job(s, "app.delete", neighbour)
    left = [d for d in (f"/sys/fs/cgroup/{c}/nodeagent/monitor-{app}" for c in ("cpu", "memory", "pids", ""))
            if os.path.exists(d)]
    check(not left, f"the monitor's cgroup is left: {left}")


def children_named(root, prefix):
    """Pids of processes named prefix* below root (or started by its descendants and reparented
    to a subreaper: the test's directory in the command line is enough)."""
    out = []
    for pid in os.listdir("/proc"):
        if not pid.isdigit():
            continue
        try:
            exe = os.path.basename(os.readlink(f"/proc/{pid}/exe"))
            with open(f"/proc/{pid}/cmdline", "rb") as f:
                cmd = f.read()
        except OSError:
            continue
        if exe.startswith(prefix) and root.encode() in cmd:
            out.append(int(pid))
    return out


def has_cap_sys_resource():
    with open("/proc/self/status") as f:
        eff = int(next(line for line in f if line.startswith("CapEff:")).split()[1], 16)
    return bool(eff & (1 << 24))


@needs("root")
@with_setup(agent_conf=apps_conf)
def oom_order(s):
    need_root()
    app = start_app(s, "sleeper", ["/bin/sh", "-c", "echo up; exec sleep 600"], 0.5)
    d = app_dir(s, app)
    mon = read_int(os.path.join(d, "monitor.pid"))
    ctr = read_int(os.path.join(d, "container.pid"))
    agent = s.agent.proc.pid
    scores = {"container": read_int(f"/proc/{ctr}/oom_score_adj"), "monitor": read_int(f"/proc/{mon}/oom_score_adj"),
              "agent": read_int(f"/proc/{agent}/oom_score_adj")}
    for pid in children_named(s.tmp, "nodeagent-sftpd"):
        scores[f"sftpd {pid}"] = read_int(f"/proc/{pid}/oom_score_adj")
    print(json.dumps(scores))
    check(any(k.startswith("sftpd") for k in scores), f"no nodeagent-sftpd runs: {scores}")
    check(scores["container"] == 1000, scores)
    # The agent lowers itself when it may (root with CAP_SYS_RESOURCE, or systemd's
    # OOMScoreAdjust=-900 before it); where it may not, it says so and keeps its value.
    # Either way everything it starts shares its value, below every container's.
    if has_cap_sys_resource():
        check(scores["agent"] == -900, scores)
    else:
        check("oom_score_adj stays" in s.agent.log_text(), "no warning that the agent could not lower itself")
        print("no CAP_SYS_RESOURCE here: the agent keeps its inherited value and says so")
    for k, v in scores.items():
        if k != "container":
            check(v == scores["agent"] and v < scores["container"], scores)
    app_job(s, "app.power", app, {"action": "kill"})
    app_job(s, "app.delete", app)


if __name__ == "__main__":
    sys.exit(run_cases({f.__name__: f for f in [monitor_flood, oom_order]}))
