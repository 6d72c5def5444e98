#!/usr/bin/python3
# SPDX-License-Identifier: GPL-2.0-or-later
"""The Grafana dashboard packaging/monitoring/grafana-dashboard.json against the real
thing (issue 24): every query names only metrics a running agent exports and that
docs/operations.md lists, and every query, evaluated by Debian's Prometheus scraping
that agent (one server on libvirt's test driver, one app in real crun), returns
something: no panel of the dashboard is empty on a node with servers and apps. And
the series the crash-loop alerts read, on a real crash loop."""
import json
import os
import re
import shutil
import socket
import subprocess
import sys
import time
import urllib.parse
import urllib.request
import uuid

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "harness"))
sys.path.insert(0, os.path.join(HERE, "..", "agent", "kinds", "apps"))
from nodeagent_harness import SRC, check, free_port, make_vm_assets, needs, run_cases, wait_for, with_setup  # noqa: E402
from test_apps import app_job, apps_conf, deploy_params, events, need_root, ok  # noqa: E402

DASHBOARD = os.path.join(SRC, "packaging", "monitoring", "grafana-dashboard.json")
OPERATIONS = os.path.join(SRC, "docs", "operations.md")
PROMETHEUS = "/usr/bin/prometheus"
VPS = str(uuid.uuid4())
PLAN = {"cpuCores": 1, "cpuThreads": 1, "ramMB": 512, "storageMB": 1024, "networkSpeedLimitMbps": 0,
        "bandwidthLimitGb": 100, "maxSnapshots": 1}
# Reads and writes its disk and sends on its network, so that the app's disk and
# network counters move.
BUSY = ["/bin/sh", "-c", "echo ready; while true; do head -c 262144 /dev/urandom > /tmp/blob; sync; "
        "cat /tmp/blob > /dev/null; ping -c 1 -W 1 10.255.255.1 > /dev/null 2>&1; sleep 1; done"]


def queries(dash):
    """Every expression of every panel, rows' nested panels too, with its panel's title."""
    out = []

    def walk(panels):
        for p in panels:
            for t in p.get("targets", []):
                if t.get("expr"):
                    out.append((p.get("title", "?"), t["expr"]))
            walk(p.get("panels", []))
    walk(dash["panels"])
    return out


def concrete(expr):
    """What Grafana sends, with the dashboard's variables at 'All'."""
    return (expr.replace("$__rate_interval", "30s").replace("$instance", ".*").replace("$app", ".*"))


def metric_names(expr):
    return set(re.findall(r"\bnodeagent_[a-z0-9_]+", expr))


def prom_query(port, expr):
    url = f"http://127.0.0.1:{port}/api/v1/query?" + urllib.parse.urlencode({"query": expr})
    with urllib.request.urlopen(url, timeout=10) as r:
        doc = json.load(r)
    check(doc["status"] == "success", (expr, doc))
    return doc["data"]["result"]


def conf(s):
    s.prom_port = free_port()
    c = apps_conf(s)
    c["vm"] = make_vm_assets(s.tmp)
    c["metrics"] = {"interval_sec": 1, "prometheus_listen": f"127.0.0.1:{s.prom_port}"}
    return c


def start_prometheus(s):
    port = free_port()
    d = os.path.join(s.tmp, "prometheus")
    os.makedirs(d)
    with open(os.path.join(d, "prometheus.yml"), "w") as f:
        f.write("global:\n  scrape_interval: 1s\n  evaluation_interval: 1s\n"
                "scrape_configs:\n  - job_name: nodeagent\n    static_configs:\n"
                f"      - targets: ['127.0.0.1:{s.prom_port}']\n")
    log = open(os.path.join(d, "log"), "w")
    proc = subprocess.Popen([PROMETHEUS, f"--config.file={d}/prometheus.yml", f"--storage.tsdb.path={d}/data",
                             f"--web.listen-address=127.0.0.1:{port}", "--storage.tsdb.retention.time=1h"],
                            stdout=log, stderr=subprocess.STDOUT)

    def ready():
        check(proc.poll() is None, f"prometheus exited: {open(log.name).read()[-2000:]}")
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=1):
                pass
            with urllib.request.urlopen(f"http://127.0.0.1:{port}/-/ready", timeout=2) as r:
                return r.status == 200
        except OSError:
            return False
    wait_for(ready, 60, "prometheus ready", interval=0.2)
    return proc, port


@needs("root")
@with_setup(agent_conf=conf)
def dashboard(s):
    need_root()
    if not os.path.exists(PROMETHEUS):
        raise AssertionError(f"{PROMETHEUS} is missing: scripts/deps.sh installs Debian's prometheus")
    with open(DASHBOARD) as f:
        dash = json.load(f)
    qs = queries(dash)
    check(len(qs) >= 20, qs)

    # A server on the test driver and a running app that reads, writes and sends.
    jid = s.controller.enqueue("vps.create", {"name": "web-1", "hostname": "web-1", "plan": PLAN,
                                              "template": {"id": "debian-12", "imageSlug": "2024.11", "os": "linux"},
                                              "vmPassword": "Sup3r!secret",
                                              "network": {"ipv4": [{"address": "203.0.113.10", "prefix": 32}]}},
                                       target={"type": "vps", "id": VPS})
    res = s.controller.wait_results([jid], 120)[jid]["results"][0]
    check(res["status"] == "succeeded", res)
    app = str(uuid.uuid4())
    ok(app_job(s, "app.deploy", app, deploy_params(template={"command": BUSY}), timeout=120))
    ok(app_job(s, "app.power", app, {"action": "start"}))
    wait_for(lambda: ok(app_job(s, "app.status", app))["state"] == "running", 30, "the app running")

    # Every name a query uses is on the agent's page and in docs/operations.md.
    with urllib.request.urlopen(f"http://127.0.0.1:{s.prom_port}/metrics", timeout=10) as r:
        page = r.read().decode()
    exported = set(re.findall(r"^# TYPE (\S+) ", page, re.M))
    with open(OPERATIONS) as f:
        documented = set(re.findall(r"`(nodeagent_[a-z0-9_]+)", f.read()))
    for title, expr in qs:
        for name in metric_names(expr):
            check(name in exported, f"panel {title!r}: {name} is not exported by the agent")
            check(name in documented, f"panel {title!r}: {name} is not listed in docs/operations.md")
    for name in exported:
        check(name in documented, f"{name} is exported but not listed in docs/operations.md")

    proc, port = start_prometheus(s)
    try:
        # Every query returns something once a few scrapes are in (rates need two).
        t0 = time.time()
        for title, expr in qs:
            q = concrete(expr)
            try:
                wait_for(lambda: prom_query(port, q), 90, f"panel {title!r}: {q}", interval=0.5)
            except AssertionError:
                raise AssertionError(f"panel {title!r}: {q} returns nothing; the agent's page:\n{page}") from None
        print(f"{len(qs)} queries of {len(dash['panels'])} panels answered, {time.time() - t0:.1f}s after the "
              f"server started")
        # The app's own figures are there, by its id.
        check(prom_query(port, f'nodeagent_app_state{{id="{app}",state="running"}} == 1'))
        check(prom_query(port, f'nodeagent_server_state{{id="{VPS}",state="running"}} == 1'))
    finally:
        proc.terminate()
        try:
            proc.wait(30)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
    ok(app_job(s, "app.power", app, {"action": "kill"}))
    shutil.rmtree(os.path.join(s.tmp, "prometheus"), ignore_errors=True)


def scrape(s):
    with urllib.request.urlopen(f"http://127.0.0.1:{s.prom_port}/metrics", timeout=10) as r:
        return r.read().decode()


def value(page, series):
    """The value of one series of the page (name{labels} exactly as the agent writes it), or None."""
    for line in page.splitlines():
        if line.startswith(series + " "):
            return float(line.split()[-1])
    return None


@needs("root")
@with_setup(agent_conf=conf)
def app_crash_loop(s):
    """What the crash-loop alerts read: an app that exits at once is restarted 3 times
    by the crash rule and left crashed; the page then says so in nodeagent_app_state,
    nodeagent_app_restarts_total, nodeagent_app_crash_loops_total and the app.exited
    count of nodeagent_events_total, and promtool still finds nothing on it."""
    need_root()
    app = str(uuid.uuid4())
    before = scrape(s)
    check(value(before, "nodeagent_app_crash_loops_total") == 0, before)
    exited0 = value(before, 'nodeagent_events_total{type="app.exited"}')
    ok(app_job(s, "app.deploy", app, deploy_params(template={"command": ["/bin/sh", "-c", "echo boom; exit 3"],
                                                              "startedPattern": None}), timeout=120))
    ok(app_job(s, "app.power", app, {"action": "start"}))
    wait_for(lambda: any(e["data"]["crashLoop"] for e in events(s, "app.exited", app)), 30, "the crash loop")
    # Events are counted when emitted, before they travel in a report: the page has them.
    page = scrape(s)
    check(value(page, f'nodeagent_app_state{{id="{app}",state="crashed"}}') == 1, page)
    check(value(page, f'nodeagent_app_state{{id="{app}",state="running"}}') == 0, page)
    check(value(page, f'nodeagent_app_restarts_total{{id="{app}"}}') == 3, page)
    check(value(page, "nodeagent_app_crash_loops_total") == 1, page)
    check(value(page, 'nodeagent_events_total{type="app.exited"}') - exited0 == 4, page)
    r = subprocess.run(["promtool", "check", "metrics"], input=page, capture_output=True, text=True, timeout=30)
    check(r.returncode == 0 and not r.stdout.strip() and not r.stderr.strip(), ("promtool", r))
    ok(app_job(s, "app.delete", app))
    wait_for(lambda: f'id="{app}"' not in scrape(s), 15, "the deleted app gone from the page")


if __name__ == "__main__":
    sys.exit(run_cases({f.__name__: f for f in [dashboard, app_crash_loop]}))
