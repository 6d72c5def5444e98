#!/usr/bin/python3
# SPDX-License-Identifier: GPL-2.0-or-later
"""Servers end to end (issue 4): every vps.* kind through the controller link, on
libvirt's test driver, with real qcow2 template images and real backup files."""
import os
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
KEY = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIOMqqnkVzrm0SdG6UOoqKLsabgH5C9okWi0dh2l9GKJl op@example"


def conf(s):
    assets = make_vm_assets(s.tmp)
    root, dirs = make_cgroup_fixture(s.tmp, [VPS])
    s.cgroup_dir = dirs[VPS]
    return {"vm": assets, "metrics": {"interval_sec": 1, "cgroup_root": root}}


class Run:
    def __init__(self, s):
        self.s = s
        self.target = {"type": "vps", "id": VPS}

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
              "template": {"id": "debian-12", "imageSlug": "2024.11", "os": "linux"},
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
                               "template": {"id": "debian-12", "imageSlug": "2024.11", "os": "linux"},
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
                           "template": {"id": "debian-12", "imageSlug": "2024.11", "os": "linux"},
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
                           "template": {"id": "debian-12", "imageSlug": "2024.11", "os": "linux"},
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


if __name__ == "__main__":
    sys.exit(run_cases({f.__name__: f for f in [lifecycle, events_and_metrics, firewall]}))
