#!/usr/bin/python3
# SPDX-License-Identifier: GPL-2.0-or-later
"""The daemon as an operator meets it: configuration checks, start-up refusals,
SIGTERM drain, SIGHUP reload, the systemd notify protocol, the control socket."""
import json
import os
import signal
import socket
import stat
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "harness"))
from nodeagent_harness import (NODEAGENTCTL, NODEAGENTD, Agent, Setup, check, run_cases,  # noqa: E402
                               wait_for, with_setup)

NODE = "6f1c2a3b-4c5d-4e6f-8a9b-0c1d2e3f4a5b"


def run(args, **kw):
    return subprocess.run(args, capture_output=True, text=True, timeout=30, **kw)


def write(path, text, mode=0o600):
    with open(path, "w") as f:
        f.write(text)
    os.chmod(path, mode)


def check_config():
    tmp = tempfile.mkdtemp()
    token = os.path.join(tmp, "token")
    write(token, "t\n")
    good = os.path.join(tmp, "good.conf")
    write(good, f"[agent]\nnode_id = {NODE}\n[controller]\nurl = https://api.example.net/agent/v1\n"
                f"token_file = {token}\n")
    r = run([NODEAGENTD, "-c", good, "--check-config"])
    check(r.returncode == 0, r)
    check("ok" in r.stdout)

    bad = os.path.join(tmp, "bad.conf")
    write(bad, "\n".join([
        "[agent]",                         # 1
        "node_id = not-a-uuid",            # 2
        "max_parallel_jobs = 0",           # 3
        "colour = blue",                   # 4
        "[controller]",                    # 5
        "url = ftp://x",                   # 6
        f"token_file = {token}",           # 7
        "poll_wait_sec = 61",              # 8
        "[nonsense]",                      # 9
        "garbage line",                    # 10
        "[firewall]",                      # 11
        "enabled = maybe",                 # 12
        "",
    ]))
    r = run([NODEAGENTD, "-c", bad, "--check-config"])
    check(r.returncode == 2, r)
    lines = r.stderr.strip().splitlines()
    want = [f"{bad}:2: node_id: ", f"{bad}:3: max_parallel_jobs: ", f"{bad}:4: colour: unknown key",
            f"{bad}:6: url: ", f"{bad}:8: poll_wait_sec: ", f"{bad}:9: nonsense: unknown section",
            f"{bad}:10: garbage line: expected key = value", f"{bad}:12: enabled: must be true or false"]
    for w in want:
        check(any(line.startswith(w) for line in lines), f"missing {w!r} in:\n{r.stderr}")
    check(len(lines) == len(want), r.stderr)

    # The token file must not be readable by group or others; the daemon refuses to start.
    os.chmod(token, 0o644)
    r = run([NODEAGENTD, "-c", good, "--check-config"])
    check(r.returncode == 2 and f"{good}:5: token_file: " in r.stderr and "readable by group or others" in r.stderr, r)
    r = run([NODEAGENTD, "-c", good])
    check(r.returncode == 2, r)
    os.unlink(token)
    r = run([NODEAGENTD, "-c", good])
    check(r.returncode == 2 and "token_file" in r.stderr and "No such file" in r.stderr, r)
    r = run([NODEAGENTD, "-c", os.path.join(tmp, "missing.conf")])
    check(r.returncode == 2 and "missing.conf" in r.stderr, r)
    r = run([NODEAGENTD, "--version"])
    check(r.returncode == 0 and r.stdout.startswith("nodeagentd "), r)


@with_setup()
def sigterm_drain(s):
    """SIGTERM lets a running job finish, delivers its result, exits 0."""
    jid = s.controller.enqueue("test.sleep", {"sleepMs": 1500})
    wait_for(lambda: s.agent.status()["jobs"]["running"] == 1, 10, "the job to start")
    t0 = time.time()
    s.agent.signal(signal.SIGTERM)
    rc = s.agent.proc.wait(15)
    took = time.time() - t0
    check(rc == 0, s.agent.log_text())
    check(took < 5 + 5, took)  # drain_timeout_sec = 5, plus the grace
    job = s.controller.admin("GET", f"/admin/jobs/{jid}")
    check(job["results"] and job["results"][0]["status"] == "succeeded", job)
    log = s.agent.log_text()
    check("stopping: taking no new jobs" in log and "stopped: no job running" in log, log)


@with_setup()
def drain_timeout(s):
    """A job longer than drain_timeout_sec is asked to stop; the agent exits 0 in time
    and the job is recorded as interrupted, to run again when offered again."""
    jid = s.controller.enqueue("test.append", {"sleepMs": 60000})
    wait_for(lambda: s.agent.status()["jobs"]["running"] == 1, 10, "the job to start")
    t0 = time.time()
    s.agent.signal(signal.SIGTERM)
    rc = s.agent.proc.wait(20)
    took = time.time() - t0
    check(rc == 0, s.agent.log_text())
    check(4.5 < took < 5 + 5 + 1, took)
    check("drain timeout" in s.agent.log_text())
    check(not s.controller.admin("GET", f"/admin/jobs/{jid}")["results"])
    s.agent.start()
    st = s.agent.status()
    check(st["journal"]["interrupted"] == 1, st)
    hello = s.controller.hello(s.agent.starts)
    check({"id": jid, "attempt": 1, "state": "interrupted"} in hello["unfinishedJobs"], hello)


@with_setup(start_agent=False)
def refusals(s):
    """Second instance, unwritable state directory: one clear line, non-zero exit."""
    s.agent.start()
    r = run([NODEAGENTD, "-c", s.agent.conf], env=s.agent.env)
    check(r.returncode != 0, r)
    check(f"in use by another nodeagentd (pid {s.agent.proc.pid})" in r.stderr, r.stderr)
    check(len(r.stderr.strip().splitlines()) == 1, r.stderr)
    check(s.agent.stop() == 0)

    with open(s.agent.conf) as f:
        text = f.read()
    write(s.agent.conf, text.replace(f"state_dir = {s.agent.state_dir}", "state_dir = /proc/nodeagent-state"))
    r = run([NODEAGENTD, "-c", s.agent.conf], env=s.agent.env)
    check(r.returncode == 1 and "state directory /proc/nodeagent-state" in r.stderr, r)
    check(len(r.stderr.strip().splitlines()) == 1, r.stderr)


@with_setup()
def control_socket(s):
    """Garbage gets an error answer and the daemon stays up; the CLI works after."""
    mode = stat.S_IMODE(os.stat(s.agent.socket).st_mode)
    check(mode == 0o660, oct(mode))
    c = socket.socket(socket.AF_UNIX)
    c.connect(s.agent.socket)
    f = c.makefile("rwb")
    for garbage in [b"not json\n", b"[1,2]\n", b'{"cmd":"explode"}\n', b'{"nocmd":1}\n',
                    b'{"cmd":"run","kind":5}\n']:
        f.write(garbage)
        f.flush()
        ans = json.loads(f.readline())
        check(ans["ok"] is False and ans["error"], ans)
    f.write(b'{"cmd":"status"}\n')
    f.flush()
    check(json.loads(f.readline())["ok"] is True)
    c.close()
    # An over-long line closes that connection only.
    c = socket.socket(socket.AF_UNIX)
    c.connect(s.agent.socket)
    try:
        c.sendall(b"x" * (2 << 20))
    except OSError:
        pass
    c.close()
    st = s.agent.status()
    check(st["version"] and st["pid"] == s.agent.proc.pid)

    r = s.agent.ctl("run", "node.status", "--json")
    out = json.loads(r.stdout)
    data = out["result"]["data"]
    check(data["agentVersion"] and data["host"]["cpus"] >= 1 and data["host"]["kernel"], out)
    r = s.agent.ctl("run", "nope.kind", check=False)
    check(r.returncode == 1 and "UNSUPPORTED_JOB" in r.stdout, r)
    r = s.agent.ctl("run", "test.sleep", "--params", '{"sleepMs":"x"}', check=False)
    check(r.returncode == 1 and "VALIDATION_ERROR" in r.stdout and "sleepMs" in r.stdout, r)
    r = s.agent.ctl("jobs")
    check("node.status" in r.stdout and "UNSUPPORTED_JOB" in r.stdout, r.stdout)
    r = s.agent.ctl("status")
    check("controller" in r.stdout and "connected" in r.stdout, r.stdout)
    r = run([NODEAGENTCTL, "-s", "/nonexistent.sock", "status"])
    check(r.returncode == 3 and "cannot reach the agent" in r.stderr, r)


@with_setup(agent_conf={"apps": {"enabled": "false"}})
def ctl_apps_off(s):
    """nodeagentctl apps and logs with [apps] enabled = false: a clear message, exit 1
    (logs -f too, at once); an app id that is not a UUID is refused before asking."""
    for args in (["apps"], ["apps", "--json"], ["logs", NODE], ["logs", "-f", NODE]):
        r = s.agent.ctl(*args, check=False)
        check(r.returncode == 1 and "apps are not enabled on this node: [apps] enabled = false" in r.stderr
              and r.stdout == "", r)
    r = s.agent.ctl("logs", "../etc/passwd", check=False)
    check(r.returncode == 2 and "is not an app id" in r.stderr, r)
    check(s.agent.status()["pid"] == s.agent.proc.pid)


@with_setup()
def sighup_reload(s):
    """SIGHUP re-reads the log level and the token; running jobs are untouched."""
    jid = s.controller.enqueue("test.sleep", {"sleepMs": 2000})
    wait_for(lambda: s.agent.status()["jobs"]["running"] == 1, 10, "the job to start")
    with open(s.agent.conf) as f:
        text = f.read()
    write(s.agent.conf, text.replace("log_level = debug", "log_level = warn"))
    s.agent.signal(signal.SIGHUP)
    wait_for(lambda: "reloaded: log_level=warn" in s.agent.log_text(), 5, "the reload")
    write(s.agent.conf, text.replace("log_level = debug", "log_level = loud"))
    s.agent.signal(signal.SIGHUP)
    wait_for(lambda: "log_level: must be one of" in s.agent.log_text(), 5, "the refused reload")
    res = s.controller.wait_results([jid], 10)[jid]["results"][0]
    check(res["status"] == "succeeded", res)
    check(s.agent.proc.poll() is None)


def notify():
    """READY=1, STATUS=, WATCHDOG=1 and STOPPING=1 reach $NOTIFY_SOCKET."""
    tmp = tempfile.mkdtemp()
    path = os.path.join(tmp, "notify.sock")
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
    sock.bind(path)
    sock.settimeout(10)
    s = Setup(start_agent=False, agent_env={"NOTIFY_SOCKET": path, "WATCHDOG_USEC": "400000"})
    failed = True
    try:
        s.agent.start(wait_ready=False)
        seen = []
        deadline = time.time() + 10
        while time.time() < deadline and not ({"READY=1", "WATCHDOG=1"} <= set(seen) and any(m.startswith("STATUS=") for m in seen)):
            seen.append(sock.recv(4096).decode())
        check("READY=1" in seen and "WATCHDOG=1" in seen, seen)
        check(any(m.startswith("STATUS=controller") for m in seen), seen)
        s.agent.signal(signal.SIGTERM)
        while "STOPPING=1" not in seen:
            seen.append(sock.recv(4096).decode())
        check(s.agent.proc.wait(15) == 0)
        failed = False
    finally:
        s.close(failed)


def prometheus():
    """[metrics] prometheus_listen serves the node's metrics and the agent's health on
    loopback; anything but GET /metrics is refused; a second scrape works. The page
    passes `promtool check metrics` (issue 24: base units, counters named _total,
    current values apart from totals, the link's state as a state set)."""
    import urllib.error
    import urllib.request
    from nodeagent_harness import free_port
    port = free_port()
    s = Setup(start_agent=False, agent_conf={"metrics": {"interval_sec": 1, "prometheus_listen": f"127.0.0.1:{port}"}})
    failed = True
    try:
        s.agent.start()
        jid = s.controller.enqueue("node.status")
        s.controller.wait_results([jid], 10)

        def scrape(path="/metrics"):
            with urllib.request.urlopen(f"http://127.0.0.1:{port}{path}", timeout=5) as r:
                check(r.headers["Content-Type"].startswith("text/plain"), r.headers)
                return r.read().decode()
        # Two ticks: the node's CPU ratio needs two readings.
        wait_for(lambda: "nodeagent_cpu_usage_ratio{" in scrape(), 15, "the node's CPU ratio on the page")
        text = scrape()
        for want in ('nodeagent_jobs_finished_total{result="succeeded"} 1', "nodeagent_jobs_running 0",
                     "nodeagent_jobs_queued 0", "nodeagent_link_up 1", 'nodeagent_link_state{state="connected"} 1',
                     'nodeagent_link_state{state="backing-off"} 0', "nodeagent_results_pending 0",
                     "nodeagent_journal_bytes", "# TYPE nodeagent_jobs_finished_total counter",
                     "# TYPE nodeagent_start_time_seconds gauge", 'nodeagent_build_info{version="'):
            check(want in text, (want, text[-2000:]))
        states = [line for line in text.splitlines() if line.startswith("nodeagent_link_state{")]
        check(len(states) == 4 and sum(line.endswith(" 1") for line in states) == 1, states)
        check(any(line.startswith("nodeagent_node_") for line in text.splitlines()), text[:2000])
        for old in ("nodeagent_uptime_seconds", "nodeagent_jobs{", "percent", "per_second"):
            check(old not in text, (old, text))
        r = subprocess.run(["promtool", "check", "metrics"], input=text, capture_output=True, text=True, timeout=30)
        check(r.returncode == 0 and not r.stdout.strip() and not r.stderr.strip(), ("promtool", r, text))
        try:
            scrape("/secrets")
            raise AssertionError("a path other than /metrics was served")
        except urllib.error.HTTPError as e:
            check(e.code == 404)
        check("nodeagent_jobs_running" in scrape())
        # Loopback only: the configuration refuses any other address.
        with open(s.agent.conf) as f:
            text = f.read()
        with open(s.agent.conf, "w") as f:
            f.write(text.replace(f"127.0.0.1:{port}", "0.0.0.0:9464"))
        r = run([NODEAGENTD, "-c", s.agent.conf, "--check-config"])
        check(r.returncode == 2 and "prometheus_listen" in r.stderr and "loopback" in r.stderr, r)
        check(s.agent.stop() == 0)
        failed = False
    finally:
        s.close(failed)


@with_setup(start_agent=False)
def state_format(s):
    """The state directory's format file (common/statedir-format.h): written by the first
    start, never by --check-config; a format this version does not know, or a garbled
    file, refuses the start with one line that names the file, exit status 2, and
    leaves the directory as it was."""
    fmt = os.path.join(s.agent.state_dir, "format")
    r = run([NODEAGENTD, "-c", s.agent.conf, "--check-config"])
    check(r.returncode == 0 and not os.path.exists(s.agent.state_dir), r)
    s.agent.start()
    with open(fmt) as f:
        check(f.read() == "nodeagent-state 1\n")
    check(stat.S_IMODE(os.stat(fmt).st_mode) == 0o640, oct(os.stat(fmt).st_mode))
    check(s.agent.stop() == 0)

    def snapshot():
        return {n: os.stat(os.path.join(s.agent.state_dir, n)).st_mtime_ns for n in os.listdir(s.agent.state_dir)
                if n != "lock"}

    cases = [("nodeagent-state 2\n", f"cannot start: state directory {s.agent.state_dir} was written by a newer "
                                      f"nodeagent (format 2, in {fmt}); this one knows format 1: upgrade the package"),
             ("garbage\n", f"cannot start: state directory {s.agent.state_dir}: {fmt} is garbled (does not start "
                           f"with 'nodeagent-state '), not one line 'nodeagent-state N'; this nodeagent knows format 1"),
             ("", f"{fmt} is garbled (empty)")]
    for text, want in cases:
        write(fmt, text, 0o640)
        before = snapshot()
        r = run([NODEAGENTD, "-c", s.agent.conf], env=s.agent.env)
        check(r.returncode == 2, r)
        check(want in r.stderr, r.stderr)
        check(len(r.stderr.strip().splitlines()) == 1, r.stderr)
        check(snapshot() == before, (before, snapshot()))
        with open(fmt) as f:
            check(f.read() == text)
        r = run([NODEAGENTD, "-c", s.agent.conf, "--check-config"])
        check(r.returncode == 0, r)
    os.unlink(fmt)  # a directory made before the file existed: format 1, written at the start
    s.agent.start()
    with open(fmt) as f:
        check(f.read() == "nodeagent-state 1\n")
    check(s.agent.stop() == 0)


@with_setup(agent_conf={"agent": {"sandbox": "strict"}})
def strict_sandbox(s):
    """sandbox = strict: the agent runs under the allow-list (Seccomp: 2) while its exec
    helper, its only child, has one filter fewer (not the agent's); the helper's death stops
    the agent with a clear line. (A refused call: tests/agent/daemon/test-sandbox-strict.c.)"""
    pid = s.agent.proc.pid

    def status_of(p):
        with open(f"/proc/{p}/status") as f:
            return dict(line.rstrip("\n").split(":\t", 1) for line in f if ":\t" in line)

    def children(p):
        out = []
        for q in os.listdir("/proc"):
            try:
                with open(f"/proc/{q}/stat") as f:
                    if int(f.read().rsplit(")", 1)[1].split()[1]) == p:
                        out.append(int(q))
            except (OSError, ValueError):
                continue
        return out

    agent_filters = int(status_of(pid)["Seccomp_filters"])
    check(status_of(pid)["Seccomp"] == "2", status_of(pid))
    helpers = children(pid)
    check(len(helpers) == 1, helpers)
    check(int(status_of(helpers[0])["Seccomp_filters"]) == agent_filters - 1, status_of(helpers[0]))
    # The helper dies: the agent can start nothing any more and stops, exit 1.
    os.kill(helpers[0], signal.SIGKILL)
    rc = s.agent.proc.wait(10)
    check(rc == 1, rc)
    check("exec helper (pid %d) died" % helpers[0] in s.agent.log_text(), s.agent.log_text())


if __name__ == "__main__":
    sys.exit(run_cases({f.__name__: f for f in [check_config, sigterm_drain, drain_timeout, refusals, control_socket,
                                                 ctl_apps_off, sighup_reload, notify, prometheus,
                                                 state_format, strict_sandbox]}))
