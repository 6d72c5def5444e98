#!/usr/bin/python3
# SPDX-License-Identifier: GPL-2.0-or-later
"""Servers end to end (issue 4): every vps.* kind through the controller link, on
libvirt's test driver, with real qcow2 template images and real backup files."""
import os
import subprocess
import sys
import threading
import time
import uuid

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "..", "harness"))
from nodeagent_harness import (Skip, check, check_stages, make_cgroup_fixture, make_vm_assets, needs, run_cases,  # noqa: E402
                               set_cgroup_counters, wait_for, with_setup)

VPS = str(uuid.uuid4())
PLAN = {"cpuCores": 2, "cpuThreads": 1, "ramMB": 1024, "storageMB": 2048, "networkSpeedLimitMbps": 0,
        "bandwidthLimitGb": 1000, "maxSnapshots": 2}
NET = {"ipv4": [{"address": "203.0.113.10", "prefix": 24}], "ipv6": [{"address": "2001:db8:1::10", "prefix": 64}],
       "dns": ["192.0.2.53"]}
KEY = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIOMqqnkVzrm0SdG6UOoqKLsabgH5C9okWi0dh2l9GKJl op@example"


def conf(s):
    assets = make_vm_assets(s.tmp)
    root, dirs = make_cgroup_fixture(s.tmp, [VPS])
    s.cgroup_dir = dirs[VPS]
    return {"vm": assets, "metrics": {"interval_sec": 1, "cgroup_root": root}}


class Run:
    def __init__(self, s, vps=VPS):
        self.s = s
        self.target = {"type": "vps", "id": vps}

    def job(self, kind, params=None, ok=True, timeout=60):
        jid = self.s.controller.enqueue(kind, params or {}, target=self.target)
        j = self.s.controller.wait_results([jid], timeout)[jid]
        r = j["results"][0]
        if ok is True:
            check(r["status"] == "succeeded", (kind, r))
        elif ok:
            check(r["status"] == "failed" and r["error"]["code"] == ok, (kind, r))
        return r, [p.get("stage") for p in j["progress"]]


@with_setup(agent_conf=conf)
def lifecycle(s):
    run = Run(s)
    params = {"name": "web-1", "hostname": "web-1", "plan": PLAN,
              "template": {"id": "debian-12", "imageSlug": "2024.11", "os": "linux"}, "network": NET,
              "vmPassword": "Sup3r!secret", "sshPublicKeys": [KEY]}
    r, stages = run.job("vps.create", params)
    srv = r["data"]
    check(srv["id"] == VPS and srv["hostname"] == "web-1" and srv["state"] == "running", srv)
    check(srv["cpuCores"] == 2 and srv["ramMB"] == 1024 and srv["template"]["id"] == "debian-12", srv)
    check_stages(stages, ["preparing-disk", "writing-image", "configuring", "booting"])
    # Converging: asked twice, created once.
    r, _ = run.job("vps.create", params)
    check(r["data"]["id"] == VPS)

    r, _ = run.job("vps.status")
    check(r["data"]["state"] == "running" and "uptimeSec" in r["data"], r)
    r, _ = run.job("vps.power", {"action": "start"})
    check(r["data"]["state"] == "running")
    r, _ = run.job("vps.power", {"action": "stop", "graceSec": 5})
    check(r["data"]["state"] == "stopped")
    r, _ = run.job("vps.power", {"action": "start"})
    r, _ = run.job("vps.power", {"action": "reboot"})
    check(r["data"]["state"] == "running")
    run.job("vps.power", {"action": "explode"}, ok="VALIDATION_ERROR")

    # Snapshots, with the plan's limit.
    r, _ = run.job("vps.snapshot.create", {"snapshotId": "s1", "name": "before upgrade", "maxSnapshots": 2})
    check(r["data"]["snapshotId"] == "s1", r)
    r, _ = run.job("vps.snapshot.create", {"snapshotId": "s1", "name": "before upgrade", "maxSnapshots": 2})
    check(r["data"]["snapshotId"] == "s1")
    run.job("vps.snapshot.create", {"snapshotId": "s2", "name": "two", "maxSnapshots": 2})
    r, _ = run.job("vps.snapshot.create", {"snapshotId": "s3", "name": "three", "maxSnapshots": 2},
                   ok="SNAPSHOT_LIMIT_REACHED")
    check(r["error"]["httpStatus"] == 409)
    r, _ = run.job("vps.snapshot.list")
    check([x["snapshotId"] for x in r["data"]] == ["s1", "s2"], r)
    run.job("vps.snapshot.revert", {"snapshotId": "s1"})
    run.job("vps.snapshot.delete", {"snapshotId": "s2"})
    run.job("vps.snapshot.revert", {"snapshotId": "nope"}, ok="SNAPSHOT_NOT_FOUND")

    # Backups: real files, sha256, stages.
    r, stages = run.job("vps.backup.create", {"backupId": "b1", "limits": {"maxStorageGB": 10, "maxBackups": 3,
                                                                          "retentionDays": 7}})
    b = r["data"]
    check(b["backupId"] == "b1" and len(b["sha256"]) == 64 and b["sizeBytes"] > 0, b)
    check_stages(stages, ["exporting", "compressing"])
    r, _ = run.job("vps.backup.list")
    check([x["backupId"] for x in r["data"]] == ["b1"])
    run.job("vps.backup.restore", {"backupId": "b1"})
    run.job("vps.backup.restore", {"backupId": "nope"}, ok="BACKUP_NOT_FOUND")

    # Reinstall: the rules first, then the stages.
    r, _ = run.job("vps.reinstall", {"hostname": "-bad-", "vmPassword": "short"}, ok="VALIDATION_ERROR")
    check({"hostname", "vmPassword"} <= set(r["error"]["details"]), r)
    r, _ = run.job("vps.reinstall", {"templateId": "windows-2022", "templateImageSlug": "21H2"},
                   ok="VALIDATION_ERROR")  # Windows refuses the server's SSH key
    r, stages = run.job("vps.reinstall", {"templateId": "ubuntu-24.04", "templateImageSlug": "2024.10",
                                          "hostname": "web-2", "vmPassword": "N3w!passw0rd"})
    check_stages(stages, ["stopping", "preparing-disk", "writing-image", "configuring", "booting", "done"])
    r, _ = run.job("vps.upgrade", {"plan": dict(PLAN, cpuCores=4, ramMB=2048, storageMB=4096)})
    check(r["data"]["cpuCores"] == 4 and r["data"]["ramMB"] == 2048, r)
    r, _ = run.job("vps.upgrade", {"plan": dict(PLAN, storageMB=1024)}, ok="VALIDATION_ERROR")

    # Guest commands need the guest agent, which the test driver does not have.
    run.job("vps.exec", {"command": ["uptime"]}, ok="GUEST_AGENT_UNAVAILABLE")
    run.job("vps.exec", {"command": []}, ok="VALIDATION_ERROR")

    # Delete converges; afterwards the server is unknown.
    run.job("vps.delete")
    run.job("vps.delete")
    run.job("vps.status", ok="VPS_NOT_FOUND")
    hello_inv = s.controller.hello()["inventory"]
    check(hello_inv["vps"] == [], hello_inv)


@with_setup(agent_conf=conf)
def events_and_metrics(s):
    """vps.state events and metrics samples reach the central API in reports;
    vps.metrics answers now and a series from the history on the node."""
    run = Run(s)
    s.controller.admin("POST", "/admin/settings", {"pollWaitSec": 5, "reportIntervalSec": 1, "metricsIntervalSec": 1})
    s.agent.stop()
    s.agent.start()
    stop = threading.Event()

    def busy_guest():  # half a CPU of the 2 vCPUs' worth, as the cgroup would show it
        usec = 0
        while not stop.is_set():
            usec += 250000
            set_cgroup_counters(s.cgroup_dir, usec, usec * 4)
            time.sleep(0.25)
    t = threading.Thread(target=busy_guest, daemon=True)
    t.start()
    try:
        run.job("vps.create", {"name": "db-1", "hostname": "db-1", "plan": PLAN,
                               "template": {"id": "debian-12", "imageSlug": "2024.11", "os": "linux"}, "network": NET,
                               "vmPassword": "Sup3r!secret"})
        run.job("vps.power", {"action": "stop", "graceSec": 2})
        time.sleep(4)
        r, _ = run.job("vps.metrics")
        m = r["data"]
        check(m["now"]["cpuPercent"] > 0 and m["now"]["memoryUsedMB"] > 0, m)
        check(m["series"]["step"] >= 10 and m["series"]["points"], m)
        run.job("vps.metrics", {"step": 5}, ok="VALIDATION_ERROR")
        run.job("vps.metrics", {"from": "2026-11-21T10:00:00Z", "to": "2026-11-20T10:00:00Z"}, ok="VALIDATION_ERROR")
    finally:
        stop.set()

    def seen():
        reps = s.controller.state()["reports"]
        events = [e for r in reps for e in r["events"] if e["targetId"] == VPS and e["type"] == "vps.state"]
        samples = [m for r in reps for m in r["metrics"] if m["targetId"] == VPS]
        nodes = [m for r in reps for m in r["metrics"] if m["targetId"] == "node"]
        return (events, samples, nodes, reps) if events and samples and nodes else None
    events, samples, nodes, reps = wait_for(seen, 15, "events and samples in reports")
    states = [e["data"]["state"] for e in events]
    check("running" in states and "stopped" in states, states)
    seqs = [r["seq"] for r in reps]
    check(seqs == sorted(seqs) and len(set(seqs)) == len(seqs), seqs)
    check(any(x.get("cpuPercent", 0) > 0 for x in samples), samples)
    # History survives a restart of the agent. The test driver forgets its domains at
    # every open, so the server is created again (same id); its history is on disk.
    restart = time.time()
    s.agent.stop()
    s.agent.start()
    run.job("vps.create", {"name": "db-1", "hostname": "db-1", "plan": PLAN,
                           "template": {"id": "debian-12", "imageSlug": "2024.11", "os": "linux"}, "network": NET,
                           "vmPassword": "Sup3r!secret"})
    r, _ = run.job("vps.metrics")
    before = [p for p in r["data"]["series"]["points"] if p["at"] < time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(restart))]
    check(before and any(p.get("cpuPercent", 0) > 0 for p in before), r)


def nft_list():
    """The whole ruleset: the firewall's tables are the shards nodeagent-00 ... -15 (docs/firewall.md)."""
    import subprocess
    r = subprocess.run(["nft", "list", "ruleset"], capture_output=True, text=True)
    return r.stdout if r.returncode == 0 else ""


def nft_chain_in(text):
    """(table, chain) of the first server inbound chain in a listing."""
    table = None
    for line in text.splitlines():
        if line.startswith("table inet "):
            table = line.split()[2]
        elif line.strip().startswith("chain nav") and "-in" in line:
            return table, line.split()[1]
    return None, None


@needs("root", "netns")
@with_setup(agent_conf=conf)
def firewall(s):
    """vps.firewall.set then .get round-trips every field through the controller link;
    the kernel holds what get answers; hand edits are reported as drift; delete cleans up."""
    if os.environ.get("NA_TEST_NO_FIREWALL"):
        raise Skip("needs root for a private network namespace")
    run = Run(s)
    run.job("vps.firewall.get", ok="VPS_NOT_FOUND")
    run.job("vps.create", {"name": "fw-1", "hostname": "fw-1", "plan": PLAN,
                           "template": {"id": "debian-12", "imageSlug": "2024.11", "os": "linux"}, "network": NET,
                           "vmPassword": "Sup3r!secret"})
    cfg = {"enabled": True, "inboundPolicy": "deny", "outboundPolicy": "allow", "rules": [
        {"type": "inbound", "protocol": "tcp", "port": "22", "source": "203.0.113.0/24", "destination": "any",
         "action": "allow", "enabled": True, "comment": "ssh from the office"},
        {"type": "inbound", "protocol": "tcp", "port": "80,443", "source": "any", "destination": "any",
         "action": "allow", "enabled": True, "comment": "web"},
        {"type": "inbound", "protocol": "udp", "port": "27015-27030", "source": "2001:db8::/32",
         "destination": "any", "action": "reject", "enabled": True, "comment": "game ports, v6 only"},
        {"type": "inbound", "protocol": "icmp", "port": "", "source": "any", "destination": "any",
         "action": "allow", "enabled": False, "comment": "ping (off for now)"},
        {"type": "outbound", "protocol": "all", "port": "", "source": "any", "destination": "198.51.100.7",
         "action": "deny", "enabled": True, "comment": "no mail relay"},
    ]}
    r, _ = run.job("vps.firewall.set", cfg)
    live = r["data"]
    check(live["enabled"] is True and live["inboundPolicy"] == "deny" and live["outboundPolicy"] == "allow", live)
    check(len(live["rules"]) == 5 and all(isinstance(x["id"], int) for x in live["rules"]), live)
    strip = [{k: v for k, v in x.items() if k != "id"} for x in live["rules"]]
    for want, got in zip(cfg["rules"], strip):
        for k, v in want.items():
            if k == "port" and not v:
                continue
            check(got.get(k) == v, (k, want, got))
    r, _ = run.job("vps.firewall.get")
    check(r["data"] == live, (r["data"], live))
    text = nft_list()
    check("ssh from the office" in text and "nav" in text, text)

    # Bad input: every problem on its path, nothing changes.
    bad = {"enabled": True, "inboundPolicy": "deny", "outboundPolicy": "allow", "rules": [
        {"type": "inbound", "protocol": "icmp", "port": "22", "source": "10.0.0.300", "destination": "any",
         "action": "allow", "enabled": True, "comment": "x"},
        {"type": "sideways", "protocol": "tcp", "port": "2000-1000", "source": "any", "destination": "any",
         "action": "maybe", "enabled": True, "comment": "y" * 300}]}
    r, _ = run.job("vps.firewall.set", bad, ok="VALIDATION_ERROR")
    d = r["error"]["details"]["rules"]
    check({"port", "source"} <= set(d["0"]) and {"type", "port", "action", "comment"} <= set(d["1"]), d)
    r, _ = run.job("vps.firewall.get")
    check(r["data"] == live)

    # A rule added by hand is drift: reported as an event, shown by get.
    import subprocess
    table, chain = nft_chain_in(text)
    check(table and table.startswith("nodeagent-"), text)
    subprocess.run(["nft", "add", "rule", "inet", table, chain, "tcp", "dport", "3306", "accept"], check=True)
    r, _ = run.job("vps.firewall.get")
    check(len(r["data"]["rules"]) == 6, r)
    wait_for(lambda: any(e["type"] == "firewall.drift" and e["targetId"] == VPS
                         for rep in s.controller.state()["reports"] for e in rep["events"]), 15, "the drift event")

    # Off keeps the rules; set again replaces the hand-made one; delete removes the chains.
    r, _ = run.job("vps.firewall.set", dict(cfg, enabled=False))
    check(r["data"]["enabled"] is False and len(r["data"]["rules"]) == 5, r)
    run.job("vps.delete")
    check("nav" not in nft_list().replace("navigation", ""), nft_list())
    run.job("vps.firewall.set", cfg, ok="VPS_NOT_FOUND")


@with_setup(agent_conf=conf)
def server_rules(s):
    """Issue 22 item 5: the plan's maxSnapshots bounds a job asking for more; a create
    of an existing id converges only with the same params."""
    run = Run(s)
    params = {"name": "rules-1", "hostname": "rules-1", "plan": dict(PLAN, maxSnapshots=1),
              "template": {"id": "debian-12", "imageSlug": "2024.11", "os": "linux"}, "network": NET,
              "vmPassword": "Sup3r!secret", "sshPublicKeys": [KEY]}
    run.job("vps.create", params)
    run.job("vps.snapshot.create", {"snapshotId": "s1", "name": "one", "maxSnapshots": 5})
    r, _ = run.job("vps.snapshot.create", {"snapshotId": "s2", "name": "two", "maxSnapshots": 5},
                   ok="SNAPSHOT_LIMIT_REACHED")
    check(r["error"]["details"].get("maxSnapshots") == 1, r)
    # The same snapshot again answers it, even at the limit.
    r, _ = run.job("vps.snapshot.create", {"snapshotId": "s1", "name": "one", "maxSnapshots": 5})
    check(r["data"]["snapshotId"] == "s1", r)
    # An upgrade raises the plan's limit: the job's own number counts again.
    run.job("vps.upgrade", {"plan": dict(PLAN, maxSnapshots=3)})
    run.job("vps.snapshot.create", {"snapshotId": "s2", "name": "two", "maxSnapshots": 2})
    run.job("vps.snapshot.create", {"snapshotId": "s3", "name": "three", "maxSnapshots": 5})
    run.job("vps.snapshot.create", {"snapshotId": "s4", "name": "four", "maxSnapshots": 5},
            ok="SNAPSHOT_LIMIT_REACHED")  # the plan's 3

    # A create of this id with other params: refused, nothing changed.
    upgraded = dict(params, plan=dict(PLAN, maxSnapshots=3))
    for other in (dict(upgraded, hostname="other-1"), dict(upgraded, vmPassword="An0ther!secret"),
                  dict(upgraded, sshPublicKeys=[]), dict(upgraded, template={"id": "ubuntu-24.04",
                                                                           "imageSlug": "2024.10", "os": "linux"}),
                  dict(upgraded, network={"ipv4": [{"address": "203.0.113.99", "prefix": 24}]})):
        r, _ = run.job("vps.create", other, ok="INVALID_STATE")
        check(r["error"]["details"].get("state") == "created", r)
    r, _ = run.job("vps.status")
    check(r["data"]["state"] == "running", r)
    # The same params as the server now is: the server.
    r, _ = run.job("vps.create", upgraded)
    check(r["data"]["hostname"] == "rules-1" and r["data"]["id"] == VPS, r)
    run.job("vps.delete")


def ip(*args):
    """ip(8) in the test's own network namespace (the agent itself never runs it)."""
    return subprocess.run(["ip"] + list(args), check=True, capture_output=True, text=True).stdout


def nft(*args):
    return subprocess.run(["nft"] + list(args), check=True, capture_output=True, text=True).stdout


def tap_of(vps):
    return "nav" + vps.replace("-", "")[:12]


def net_conf(s):
    c = conf(s)
    c["vm"]["uplink"] = "upl0"
    return c


@needs("root", "netns")
@with_setup(agent_conf=net_conf)
def network(s):
    """Issue 22 item 1: the assignment is the server's (ipAddresses), an address another
    server holds is refused (also between two creates at once), and in routed mode the
    node's side follows it through netlink: the tap's next hop, a host route per
    address, a proxy ARP/NDP entry per address on the uplink; vps.network.set changes
    them at once and asks for a restart; vps.delete takes the proxy entries away."""
    if os.geteuid() != 0 or os.environ.get("NA_TEST_NO_FIREWALL"):
        raise Skip("needs root and a private network namespace (a tap and a dummy uplink)")
    tap = tap_of(VPS)
    # libvirt's test driver makes no tap: the test makes the one the server would have.
    ip("tuntap", "add", "dev", tap, "mode", "tap")
    ip("link", "set", tap, "up")
    ip("link", "add", "upl0", "type", "veth", "peer", "name", "upl0p")  # no dummy module here
    ip("link", "set", "upl0", "up")
    ip("link", "set", "upl0p", "up")
    run = Run(s)
    params = {"name": "net-1", "hostname": "net-1", "plan": PLAN,
              "template": {"id": "debian-12", "imageSlug": "2024.11", "os": "linux"}, "network": NET,
              "vmPassword": "Sup3r!secret"}
    r, _ = run.job("vps.create", params)
    check(r["data"]["ipAddresses"] == ["203.0.113.10", "2001:db8:1::10"], r)
    check("169.254.0.1/32" in ip("-4", "addr", "show", "dev", tap), ip("addr", "show", "dev", tap))
    check("fe80::1/64" in ip("-6", "addr", "show", "dev", tap), ip("addr", "show", "dev", tap))
    check("203.0.113.10 proto static scope link" in ip("-4", "route", "show", "dev", tap), ip("route"))
    check("2001:db8:1::10 proto static" in ip("-6", "route", "show", "dev", tap), ip("-6", "route"))
    proxies = ip("neigh", "show", "proxy", "dev", "upl0")
    check("203.0.113.10" in proxies and "2001:db8:1::10" in proxies, proxies)
    # Its anti-spoofing guard (tests/firewall/traffic-guard.sh sends the packets): its addresses, its MAC.
    guard = nft("list", "table", "netdev", "nodeagent-guard")
    check(f'device "{tap}"' in guard and "0xcb00710a accept" in guard  # 203.0.113.10
          and "0x20010db8000100000000000000000010 accept" in guard and "0x" + r["data"]["macAddress"].replace(":", "")
          in guard, guard)

    # Another server may not take an address this one holds: INVALID_STATE naming field and owner.
    other = str(uuid.uuid4())
    run2 = Run(s, other)
    taken = dict(params, name="net-2", hostname="net-2",
                 network={"ipv4": [{"address": "198.51.100.20", "prefix": 24}],
                          "ipv6": [{"address": "2001:db8:1::10", "prefix": 64}]})
    r, _ = run2.job("vps.create", taken, ok="INVALID_STATE")
    d = r["error"]["details"]
    check(d.get("field") == "network.ipv6.0.address" and d.get("owner") == VPS, r)
    run2.job("vps.status", ok="VPS_NOT_FOUND")  # nothing was made

    # vps.network.set: the node's side at once, the guest at its next boot.
    new = {"ipv4": [{"address": "198.51.100.7", "prefix": 32}], "dns": ["192.0.2.53"]}
    r, _ = run.job("vps.network.set", {"network": new})
    check(r["data"]["ipAddresses"] == ["198.51.100.7"] and r["data"]["restartRequired"] is True, r)
    routes = ip("-4", "route", "show", "dev", tap) + ip("-6", "route", "show", "dev", tap)
    check("198.51.100.7" in routes and "203.0.113.10" not in routes and "2001:db8:1::10" not in routes, routes)
    proxies = ip("neigh", "show", "proxy", "dev", "upl0")
    check("198.51.100.7" in proxies and "203.0.113.10" not in proxies and "2001:db8:1::10" not in proxies, proxies)
    guard = nft("list", "table", "netdev", "nodeagent-guard")
    check("0xc6336407 accept" in guard and "0xcb00710a" not in guard, guard)  # 198.51.100.7 only
    r, _ = run.job("vps.network.set", {"network": {"ipv4": [{"address": "203.0.113.010", "prefix": 24}]}},
                   ok="VALIDATION_ERROR")
    check("network" in r["error"]["details"], r)
    # The address it gave up is free again: two creates at once, one of them gets it.
    third = str(uuid.uuid4())
    free = dict(params, name="net-2", hostname="net-2")
    j2 = s.controller.enqueue("vps.create", free, target={"type": "vps", "id": other})
    j3 = s.controller.enqueue("vps.create", dict(free, name="net-3", hostname="net-3"),
                              target={"type": "vps", "id": third})
    res = s.controller.wait_results([j2, j3], 60)
    outcomes = sorted(res[j]["results"][0]["status"] for j in (j2, j3))
    check(outcomes == ["failed", "succeeded"], res)
    loser = [res[j]["results"][0] for j in (j2, j3) if res[j]["results"][0]["status"] == "failed"][0]
    check(loser["error"]["code"] == "INVALID_STATE" and loser["error"]["details"]["owner"] in (other, third), loser)

    # vps.delete: the uplink forgets the server's addresses.
    run.job("vps.delete")
    proxies = ip("neigh", "show", "proxy", "dev", "upl0")
    check("198.51.100.7" not in proxies, proxies)
    guard = nft("list", "table", "netdev", "nodeagent-guard")
    check(tap not in guard, guard)


def bridged_conf(s):
    c = conf(s)
    c["vm"].update({"network_mode": "bridged", "bridge": "br-test", "gateway4": "203.0.113.1"})
    return c


@needs("root", "netns")
@with_setup(agent_conf=bridged_conf)
def bridged(s):
    """[vm] network_mode = bridged through the agent: the server is made with its
    addresses (ipAddresses, the claim, the guard on its tap), and the agent changes
    nothing on the host's routes or addresses (libvirt puts the tap in the bridge)."""
    if os.geteuid() != 0 or os.environ.get("NA_TEST_NO_FIREWALL"):
        raise Skip("needs root and a private network namespace")
    tap = tap_of(VPS)
    ip("tuntap", "add", "dev", tap, "mode", "tap")
    ip("link", "set", tap, "up")
    run = Run(s)
    r, _ = run.job("vps.create", {"name": "br-1", "hostname": "br-1", "plan": PLAN,
                                  "template": {"id": "debian-12", "imageSlug": "2024.11", "os": "linux"},
                                  "network": NET, "vmPassword": "Sup3r!secret"})
    check(r["data"]["ipAddresses"] == ["203.0.113.10", "2001:db8:1::10"], r)
    check("169.254.0.1" not in ip("addr", "show", "dev", tap), ip("addr", "show", "dev", tap))
    check("203.0.113.10" not in ip("-4", "route") and "2001:db8:1::10" not in ip("-6", "route"), ip("route"))
    guard = nft("list", "table", "netdev", "nodeagent-guard")
    check(f'device "{tap}"' in guard and "0xcb00710a accept" in guard, guard)
    r, _ = run.job("vps.network.set", {"network": {"ipv4": [{"address": "203.0.113.11", "prefix": 24}]}})
    check(r["data"]["ipAddresses"] == ["203.0.113.11"], r)
    run.job("vps.delete")


UDP_ECHO = """
import socket, sys
s = socket.socket(socket.AF_INET6 if ':' in sys.argv[1] else socket.AF_INET, socket.SOCK_DGRAM)
s.bind((sys.argv[1], 9000))
open(sys.argv[2], 'w').close()
while True:
    data, src = s.recvfrom(2048)
    s.sendto(data, src)
"""

UDP_ASK = """
import socket, sys
s = socket.socket(socket.AF_INET6 if ':' in sys.argv[1] else socket.AF_INET, socket.SOCK_DGRAM)
if len(sys.argv) > 2:
    s.bind((sys.argv[2], 0))
s.settimeout(1)
try:
    s.sendto(b'hello', (sys.argv[1], 9000))
    print(s.recvfrom(2048)[0].decode())
except OSError:
    print('timeout')
"""


@needs("root", "netns")
@with_setup(agent_conf=net_conf)
def routed_traffic(s):
    """Issue 22 item 1 with real packets, routed mode: a host on the uplink's subnet
    reaches the server's IPv4 and IPv6 addresses (the node answers ARP and NDP for them
    and routes them to the tap), the server answers through its link-local next hop as
    its seed configures it, and a packet it sends from an address not its own does not
    get through (the guard). The tap is a veth named as the server's, its other end in
    a namespace standing for the guest."""
    if os.geteuid() != 0 or os.environ.get("NA_TEST_NO_FIREWALL"):
        raise Skip("needs root and a private network namespace")
    tap, guest, up = tap_of(VPS), f"nag-g-{os.getpid()}", f"nag-u-{os.getpid()}"
    procs = []
    try:
        for ns in (guest, up):
            ip("netns", "add", ns)
            ip("-n", ns, "link", "set", "lo", "up")
        for k in ("net/ipv4/ip_forward", "net/ipv6/conf/all/forwarding", "net/ipv6/conf/all/proxy_ndp"):
            with open(f"/proc/sys/{k}", "w") as f:
                f.write("1")
        ip("link", "add", tap, "type", "veth", "peer", "name", "eth0", "netns", guest)
        ip("link", "add", "upl0", "type", "veth", "peer", "name", "eth0", "netns", up)
        ip("addr", "add", "203.0.113.1/24", "dev", "upl0")
        ip("addr", "add", "2001:db8:1::1/64", "dev", "upl0", "nodad")
        for dev in (tap, "upl0"):
            ip("link", "set", dev, "up")
        # The upstream host: on the servers' subnet, on link (it asks ARP/NDP for them).
        ip("-n", up, "addr", "add", "203.0.113.50/24", "dev", "eth0")
        ip("-n", up, "addr", "add", "2001:db8:1::50/64", "dev", "eth0", "nodad")
        ip("-n", up, "link", "set", "eth0", "up")

        run = Run(s)
        r, _ = run.job("vps.create", {"name": "rt-1", "hostname": "rt-1", "plan": PLAN,
                                      "template": {"id": "debian-12", "imageSlug": "2024.11", "os": "linux"},
                                      "network": NET, "vmPassword": "Sup3r!secret"})
        # The guest as its seed says (tests/drivers/vm test-vm-util checks the seed's text):
        # its MAC, each address alone, default routes via 169.254.0.1 and fe80::1 on link.
        ip("-n", guest, "link", "set", "eth0", "address", r["data"]["macAddress"])
        ip("-n", guest, "addr", "add", "203.0.113.10/32", "dev", "eth0")
        ip("-n", guest, "addr", "add", "2001:db8:1::10/128", "dev", "eth0", "nodad")
        ip("-n", guest, "addr", "add", "203.0.113.66/32", "dev", "eth0")  # not its own
        ip("-n", guest, "link", "set", "eth0", "up")
        ip("-n", guest, "route", "add", "default", "via", "169.254.0.1", "dev", "eth0", "onlink")
        ip("-n", guest, "-6", "route", "add", "default", "via", "fe80::1", "dev", "eth0")
        ready = os.path.join(s.tmp, "echo-ready")
        for addr in ("203.0.113.10", "2001:db8:1::10"):
            mark = f"{ready}-{addr}"
            procs.append(subprocess.Popen(["ip", "netns", "exec", guest, sys.executable, "-c", UDP_ECHO, addr, mark]))
            wait_for(lambda: os.path.exists(mark), 10, "the guest's echo server")

        def ask(ns, dst, src=None):
            args = ["ip", "netns", "exec", ns, sys.executable, "-c", UDP_ASK, dst] + ([src] if src else [])
            return subprocess.run(args, capture_output=True, text=True, check=True).stdout.strip()
        # IPv6 neighbour discovery may need a moment (DAD of the link-local addresses): a bounded wait.
        wait_for(lambda: ask(up, "203.0.113.10") == "hello", 20, "the server's IPv4 address from the uplink")
        wait_for(lambda: ask(up, "2001:db8:1::10") == "hello", 20, "the server's IPv6 address from the uplink")
        # The server sending from an address it was not given: the guard drops it at the tap.
        procs.append(subprocess.Popen(["ip", "netns", "exec", up, sys.executable, "-c", UDP_ECHO, "203.0.113.50",
                                       f"{ready}-up"]))
        wait_for(lambda: os.path.exists(f"{ready}-up"), 10, "the upstream echo server")
        check(ask(guest, "203.0.113.50", "203.0.113.10") == "hello", "the server from its own address")
        check(ask(guest, "203.0.113.50", "203.0.113.66") == "timeout", "the server from another address")
    finally:
        for p in procs:
            p.kill()
            p.wait()
        for ns in (guest, up):
            subprocess.run(["ip", "netns", "del", ns], capture_output=True)


if __name__ == "__main__":
    sys.exit(run_cases({f.__name__: f for f in [lifecycle, events_and_metrics, firewall, server_rules, network,
                                                        routed_traffic, bridged]}))
