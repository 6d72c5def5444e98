#!/usr/bin/python3
# SPDX-License-Identifier: GPL-2.0-or-later
"""Issue 20, hostname takeover: what one app's deploy can do to other apps' routes.

The real agent with its own HAProxy routing <hostname>.apps.example.com to each app's
first port (tests/agent/kinds/apps/test_app_domains.py's set-up). App A ("web") owns its
hostname, its sftpUsername and a verified custom domain. Another app B then tries to
take each of them: a deploy with A's hostname, a deploy with A's sftpUsername, a
domain exposure of A's domain. Each is refused with INVALID_STATE naming A, and
nothing of A changes: B deployed with names of its own runs beside A, and deleting B
leaves A routed.

Before the fix B's deploy with A's hostname succeeded, B's start replaced A's route
(the managed hostname answered B's page) and deleting B left the hostname unrouted
(HTTP 404 for A's domain).
"""
import os
import sys
import uuid

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "harness"))
sys.path.insert(0, os.path.join(HERE, "..", "agent", "kinds", "apps"))
sys.path.insert(0, os.path.join(HERE, "..", "routing"))
from nodeagent_harness import check, needs, run_cases, wait_for, with_setup  # noqa: E402
from test_apps import app_job, deploy_params, failed, need_root, ok  # noqa: E402
from test_app_domains import DNS, TARGET, Dnsmasq, conf, page, records, stop_haproxy  # noqa: E402


def web_params(name, hostname, sftp, body):
    """busybox httpd answering body on 8080 (the port the managed hostname goes to)."""
    cmd = ["/bin/sh", "-c",
           f"mkdir -p /tmp/www && echo {body} > /tmp/www/index.html && httpd -p 8080 -h /tmp/www && "
           "echo ready && exec sleep 3600"]
    return deploy_params(name=name, hostname=hostname, sftpUsername=sftp,
                         template={"command": cmd, "startedPattern": "^ready$", "ports": [8080]})


def start(s, app, params):
    ok(app_job(s, "app.deploy", app, params, timeout=120))
    ok(app_job(s, "app.power", app, {"action": "start"}))
    wait_for(lambda: ok(app_job(s, "app.status", app))["state"] == "running", 15, f"{app} running")


def refused(res, owner, field):
    err = failed(res, "INVALID_STATE")
    check(owner in err["error"] and err["details"].get("owner") == owner, err)
    check(err["details"].get("field", field) == field, err)
    print(f"refused: {err['error']}")
    return err


def a_untouched(s, a):
    check(page(TARGET) == (200, "web-a"), f"{TARGET}: {page(TARGET)}")
    check(page("shop.example.com") == (200, "web-a"), f"shop.example.com: {page('shop.example.com')}")
    check(ok(app_job(s, "app.status", a))["state"] == "running", "A stopped")


@needs("root", "netns")
@with_setup(agent_conf=conf)
def hostname_takeover(s):
    need_root()
    dns = Dnsmasq(records(TARGET), port=DNS)
    try:
        run(s)
    finally:
        dns.close()
        stop_haproxy(s)


def run(s):
    a, b = str(uuid.uuid4()), str(uuid.uuid4())
    start(s, a, web_params("web", "web", "websftp", "web-a"))
    wait_for(lambda: page(TARGET) == (200, "web-a"), 5, f"{TARGET} routed to A")
    shop = str(uuid.uuid4())
    ok(app_job(s, "app.exposure.add", a, {"exposureId": shop, "type": "domain", "hostname": "shop.example.com",
                                          "containerPort": 8080, "protocol": "http"}))
    check(ok(app_job(s, "app.exposure.verify", a, {"exposureId": shop}, timeout=30))["isDomainVerified"], "shop")
    wait_for(lambda: page("shop.example.com") == (200, "web-a"), 5, "shop.example.com routed to A")

    # B with A's hostname: refused before anything is made, whatever else differs.
    refused(app_job(s, "app.deploy", b, web_params("bee", "web", "beesftp", "web-b"), timeout=60), a, "hostname")
    # B with A's sftpUsername.
    refused(app_job(s, "app.deploy", b, web_params("bee", "bee", "websftp", "web-b"), timeout=60), a,
            "sftpUsername")
    failed(app_job(s, "app.status", b), "APP_NOT_FOUND")
    check(not os.path.exists(os.path.join(s.agent.state_dir, "apps", "apps", b)), "a refused deploy left files")
    a_untouched(s, a)

    # B with names of its own runs beside A; A's custom domain stays A's.
    start(s, b, web_params("bee", "bee", "beesftp", "web-b"))
    wait_for(lambda: page("bee.apps.example.com") == (200, "web-b"), 5, "B routed")
    refused(app_job(s, "app.exposure.add", b, {"exposureId": str(uuid.uuid4()), "type": "domain",
                                                "hostname": "shop.example.com", "containerPort": 8080,
                                                "protocol": "http"}), a, "hostname")
    a_untouched(s, a)

    # Deleting B leaves A routed.
    ok(app_job(s, "app.delete", b))
    check(page("bee.apps.example.com")[0] == 404, "B's hostname is still routed")
    a_untouched(s, a)
    # And once A is gone its hostname is free for another app.
    ok(app_job(s, "app.delete", a))
    check(page(TARGET)[0] == 404, "A's hostname is still routed")
    start(s, b, web_params("bee", "web", "websftp", "web-b"))
    wait_for(lambda: page(TARGET) == (200, "web-b"), 5, f"{TARGET} routed to the new owner")
    ok(app_job(s, "app.delete", b))


if __name__ == "__main__":
    sys.exit(run_cases({"hostname_takeover": hostname_takeover}))
