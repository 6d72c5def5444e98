#!/usr/bin/python3
# SPDX-License-Identifier: GPL-2.0-or-later
"""Domain exposures routed only after DNS verification (issue 12 items 4 and 5), end to
end: the real agent and controller link, a busybox httpd app on its own network, real
dnsmasq answering CNAMEs, and the agent's own HAProxy. A domain is not routed while
pending; app.exposure.verify routes it when its CNAME points at the app's managed
hostname and says exactly what was found otherwise; when the record later points
elsewhere the next check un-routes it (exposure.unverified); the periodic re-check
routes a pending domain on its own and reports exposure.verified; delete un-routes."""
import http.client
import os
import signal
import sys
import uuid

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(HERE, "..", "..", "..", "harness"))
sys.path.insert(0, os.path.join(HERE, "..", "..", "..", "routing"))
from nodeagent_harness import check, free_port, needs, run_cases, wait_for, with_setup  # noqa: E402
from test_apps import apps_conf, app_job, events, need_root, ok  # noqa: E402
from test_app_net import PUBLIC, server_params  # noqa: E402
from test_dns import Dnsmasq  # noqa: E402

HTTP = free_port()
DNS = free_port()
TARGET = "web.apps.example.com"


def records(shop_to):
    return [f"--host-record={TARGET},{PUBLIC}", f"--cname=shop.example.com,{shop_to}",
            "--host-record=x.example.net,192.0.2.9", "--cname=wrong.example.com,x.example.net"]


def conf(s):
    c = apps_conf(s)
    c["apps"].update({"public_address": PUBLIC, "ports": "20000-20100", "apps_domain": "apps.example.com",
                      "resolver": f"127.0.0.1:{DNS}", "http_listen": f"127.0.0.1:{HTTP}", "tls_listen": "",
                      "verify_pending_sec": "10"})
    return c


def page(host):
    """(status, body) of GET / through HAProxy with Host: host."""
    c = http.client.HTTPConnection("127.0.0.1", HTTP, timeout=5)
    try:
        c.request("GET", "/", headers={"Host": host})
        r = c.getresponse()
        return r.status, r.read().decode(errors="replace").strip()
    finally:
        c.close()


def routed(host):
    return page(host) == (200, "web")


@needs("root", "netns")
@with_setup(agent_conf=conf)
def domains(s):
    need_root()
    dns = Dnsmasq(records(TARGET), port=DNS)
    try:
        run(s, dns)
    finally:
        dns.close()
        stop_haproxy(s)


def stop_haproxy(s):
    """HAProxy outlives the agent on purpose (routes survive its restarts): the test ends it."""
    try:
        with open(os.path.join(s.agent.state_dir, "haproxy", "haproxy.pid")) as f:
            pid = int(f.read().split()[0])
        os.kill(pid, signal.SIGTERM)
        wait_for(lambda: not alive(pid), 10, "haproxy stopped")
    except (OSError, ValueError):
        pass


def run(s, dns):
    app = str(uuid.uuid4())
    params = server_params("web")
    params["template"]["ports"] = [8080]  # the managed hostname goes to the first port
    ok(app_job(s, "app.deploy", app, params, timeout=120))
    ok(app_job(s, "app.power", app, {"action": "start"}))
    wait_for(lambda: ok(app_job(s, "app.status", app))["state"] == "running", 15, "web running")
    # The managed hostname is routed from the start, no DNS involved.
    wait_for(lambda: routed(TARGET), 5, f"{TARGET} routed")

    ids = {}

    def add(name):
        ids[name.split(".")[0]] = str(uuid.uuid4())
        return ok(app_job(s, "app.exposure.add", app, {"exposureId": ids[name.split(".")[0]], "type": "domain",
                                                          "hostname": name, "containerPort": 8080,
                                                          "protocol": "http"}))

    def verify(eid):
        return ok(app_job(s, "app.exposure.verify", app, {"exposureId": ids[eid]}, timeout=30))

    e = add("shop.example.com")
    check(not e["isDomainVerified"] and e["verificationTarget"] == TARGET, e)
    check(page("shop.example.com")[0] == 404, "a pending domain is routed")
    v = verify("shop")
    check(v["isDomainVerified"] and not v["verificationError"], v)
    wait_for(lambda: routed("shop.example.com"), 5, "shop.example.com routed to the app")
    check(routed("SHOP.example.com:80"), "Host is matched without case and port")

    # Wrong records: not routed, and the reason says what was found.
    add("wrong.example.com")
    v = verify("wrong")
    check(not v["isDomainVerified"] and "CNAME points at x.example.net" in v["verificationError"] and
          TARGET in v["verificationError"], v)
    add("nx.example.com")
    v = verify("nx")
    check(not v["isDomainVerified"] and "NXDOMAIN" in v["verificationError"], v)
    check(page("wrong.example.com")[0] == 404 and page("nx.example.com")[0] == 404, "unverified routed")

    # The record now points elsewhere: the next check un-routes it and says so.
    dns.close()
    dns.__init__(records("x.example.net"), port=DNS)
    v = verify("shop")
    check(not v["isDomainVerified"] and "x.example.net" in v["verificationError"], v)
    wait_for(lambda: page("shop.example.com")[0] == 404, 5, "shop.example.com un-routed")

    # Pointed back: the periodic re-check (every 10 s here) routes it on its own.
    dns.close()
    dns.__init__(records(TARGET), port=DNS)
    wait_for(lambda: routed("shop.example.com"), 30, "the re-check routed shop.example.com again")
    wait_for(lambda: any(e["data"].get("hostname") == "shop.example.com" and e["data"]["isDomainVerified"]
                         for e in events(s, "exposure.verified", app)), 10, "exposure.verified reported")

    # HAProxy dies: the agent starts it again (within 10 s) with every route.
    pid = haproxy_pid(s)
    os.kill(pid, signal.SIGKILL)
    wait_for(lambda: haproxy_pid(s) not in (None, pid) and routed("shop.example.com") and routed(TARGET), 30,
             "HAProxy started again with its routes")
    # The agent restarts: HAProxy and its routes carry on untouched (same master).
    pid = haproxy_pid(s)
    s.agent.stop()
    check(routed("shop.example.com"), "routes survive the agent's stop")
    s.agent.start()
    check(haproxy_pid(s) == pid and routed("shop.example.com"), "the agent adopted the running HAProxy")

    # Deleting the app un-routes its domains and its managed hostname.
    ok(app_job(s, "app.delete", app))
    check(page("shop.example.com")[0] == 404, "a deleted app's domain is still routed")
    check(page(TARGET)[0] == 404, "a deleted app's managed hostname is still routed")

    # The operator turns domain routing off: the next agent start stops HAProxy.
    pid = haproxy_pid(s)
    s.agent.stop()
    with open(s.agent.conf) as f:
        text = f.read().replace("apps_domain = apps.example.com\n", "")
    with open(s.agent.conf, "w") as f:
        f.write(text)
    s.agent.start()
    wait_for(lambda: not alive(pid), 10, "HAProxy stopped once domain routing is off")


def haproxy_pid(s):
    try:
        with open(os.path.join(s.agent.state_dir, "haproxy", "haproxy.pid")) as f:
            pid = int(f.read().split()[0])
        return pid if alive(pid) else None
    except (OSError, ValueError, IndexError):
        return None


def alive(pid):
    try:
        with open(f"/proc/{pid}/status") as f:
            return "\nState:\tZ" not in f.read()
    except OSError:
        return False


if __name__ == "__main__":
    sys.exit(run_cases({f.__name__: f for f in [domains]}))
