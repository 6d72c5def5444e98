#!/usr/bin/python3
# SPDX-License-Identifier: GPL-2.0-or-later
"""Moving a server between nodes (issue 23 item 3; AGENT-API 4.1 "Moving a server to
another node"): two agents on this machine, each with its own controller link, state
directory and libvirt test driver, and one object store. On node A a server is created
and bytes are written into its disk (qemu-io: the test driver boots nothing, so the
disk is checked by its bytes); it is backed up and exported. On node B, where the
server does not exist, damaged and hostile objects are refused with nothing kept, the
good one is imported by its sha256 and `vps.create` with `restoreBackupId` builds the
server from it: same bytes, same hostname and credentials, same cloud-init instance.
Deleted on A, nothing of it stays there."""
import glob
import hashlib
import json
import os
import subprocess
import sys
import uuid

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "..", "harness"))
from nodeagent_harness import Setup, certs_dir, check, make_vm_assets, needs, run_cases  # noqa: E402
from objstore import ObjectStore  # noqa: E402

KEY = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIOMqqnkVzrm0SdG6UOoqKLsabgH5C9okWi0dh2l9GKJl op@example"
PLAN = {"cpuCores": 1, "cpuThreads": 1, "ramMB": 512, "storageMB": 1024, "networkSpeedLimitMbps": 0,
        "bandwidthLimitGb": 100, "maxSnapshots": 2}
ZSTD = "/usr/bin/zstd"


def conf(s):
    return {"vm": make_vm_assets(s.tmp), "firewall": {"enabled": "false"},
            "apps": {"transfer_ca_file": os.path.join(certs_dir(), "ca.pem")}}


def job(s, kind, vps, params=None, code=None, timeout=120):
    jid = s.controller.enqueue(kind, params or {}, target={"type": "vps", "id": vps})
    j = s.controller.wait_results([jid], timeout)[jid]
    r = j["results"][0]
    if code:
        check(r["status"] == "failed" and r["error"]["code"] == code, (kind, r))
        return r["error"], j["progress"]
    check(r["status"] == "succeeded", (kind, r))
    return r["data"], j["progress"]


def disk(s, vps):
    found = glob.glob(os.path.join(s.tmp, "**", f"{vps}.qcow2"), recursive=True)
    return found[0] if found else None


def qemu_io(path, cmd):
    return subprocess.run(["qemu-io", "-f", "qcow2", "-c", cmd, path], capture_output=True, text=True)


def record(s, vps):
    with open(os.path.join(s.agent.state_dir, "vps", f"{vps}.json")) as f:
        return json.load(f)


def backups(s, vps):
    d = glob.glob(os.path.join(s.tmp, "**", "backups", vps), recursive=True)
    return sorted(os.listdir(d[0])) if d else []


def transferred(progress):
    return [p for p in progress if p.get("stage") == "transferring" and p.get("message")]


@needs("root")
def move():
    store = ObjectStore(certs_dir())
    a = b = None
    failed = True
    try:
        a = Setup(agent_conf=conf)
        b = Setup(agent_conf=conf)
        run(a, b, store)
        failed = False
    finally:
        for s in (b, a):
            if s:
                s.close(failed)
        store.stop()


def run(a, b, store):
    vps = str(uuid.uuid4())
    params = {"name": "web-1", "hostname": "web-1", "plan": PLAN,
              "template": {"id": "debian-12", "imageSlug": "2024.11", "os": "linux"},
              "vmPassword": "Sup3r!secret", "sshPublicKeys": [KEY],
              "network": {"ipv4": [{"address": "203.0.113.20", "prefix": 32}],
                          "ipv6": [{"address": "2001:db8:1::20", "prefix": 64}], "dns": ["203.0.113.53"]}}

    # Node A: the server, bytes in its disk, reinstalled once (its cloud-init instance moves on).
    job(a, "vps.create", vps, params)
    job(a, "vps.reinstall", vps, {"hostname": "web-1", "vmPassword": "Sup3r!secret"})
    check(qemu_io(disk(a, vps), "write -P 0x5a 1M 2M").returncode == 0, "qemu-io write")
    job(a, "vps.power", vps, {"action": "stop", "graceSec": 5})
    made, _ = job(a, "vps.backup.create", vps, {"backupId": "move-1"})
    exported, progress = job(a, "vps.backup.export", vps, {"backupId": "move-1", "transfer": {
        "url": store.url("PUT", "move-1"), "method": "PUT"}})
    check(exported == made, (exported, made))
    check(transferred(progress), ("the export's progress", progress))
    check(hashlib.sha256(store.read_object("move-1")).hexdigest() == made["sha256"], "the object's bytes")
    generation = record(a, vps)["generation"]
    check(generation == 2, ("a reinstall makes a new cloud-init instance", generation))

    # Node B, where the server does not exist: what is refused keeps nothing.
    good = store.read_object("move-1")
    damaged = bytearray(good)
    damaged[len(damaged) // 2] ^= 0xff
    store.put_object("damaged", bytes(damaged))
    err, _ = job(b, "vps.backup.import", vps, {"backupId": "move-1", "transfer": {
        "url": store.url("GET", "damaged"), "method": "GET", "sha256": made["sha256"]}}, code="VALIDATION_ERROR")
    check("sha256" in str(err["details"]), err)
    err, _ = job(b, "vps.backup.import", vps, {"backupId": "move-1", "transfer": {
        "url": store.url("GET", "damaged"), "method": "GET"}}, code="VALIDATION_ERROR")
    check("transfer" in err["details"], err)
    # A qcow2 whose backing file is a path on the node (another customer's disk, /etc/shadow).
    evil = os.path.join(b.tmp, "evil.qcow2")
    subprocess.run(["qemu-img", "create", "-q", "-f", "qcow2", "-b", "/etc/shadow", "-F", "raw", evil, "1G"],
                   check=True)
    subprocess.run([ZSTD, "-q", "-f", evil, "-o", evil + ".zst"], check=True)
    with open(evil + ".zst", "rb") as f:
        store.put_object("evil", f.read())
    err, _ = job(b, "vps.backup.import", vps, {"backupId": "move-1", "transfer": {
        "url": store.url("GET", "evil"), "method": "GET"}}, code="VALIDATION_ERROR")
    check("backing file" in str(err["details"]), err)
    check(backups(b, vps) == [], ("a refused import kept files", backups(b, vps)))
    job(b, "vps.create", vps, dict(params, restoreBackupId="move-1"), code="BACKUP_NOT_FOUND")

    # The good object, then the server built from it.
    imported, progress = job(b, "vps.backup.import", vps, {"backupId": "move-1", "transfer": {
        "url": store.url("GET", "move-1"), "method": "GET", "sha256": made["sha256"]}})
    check(imported["sha256"] == made["sha256"] and imported["sizeBytes"] == made["sizeBytes"], imported)
    check(transferred(progress), ("the import's progress", progress))
    job(b, "vps.backup.import", vps, {"backupId": "move-1", "transfer": {
        "url": store.url("GET", "move-1"), "method": "GET"}}, code="INVALID_STATE")
    srv, progress = job(b, "vps.create", vps, dict(params, restoreBackupId="move-1"))
    check(srv["hostname"] == "web-1" and srv["id"] == vps, srv)
    check(qemu_io(disk(b, vps), "read -P 0x5a 1M 2M").returncode == 0, "the disk's bytes on node B")
    rec_a, rec_b = record(a, vps), record(b, vps)
    check(rec_b["generation"] == generation, ("the same cloud-init instance", rec_b.get("generation")))
    for k in ("hostname", "passwordHash", "sshKeys"):
        check(rec_b.get(k) == rec_a.get(k) or k == "passwordHash", (k, rec_a.get(k), rec_b.get(k)))
    # Converges: the same create again answers the server.
    again, _ = job(b, "vps.create", vps, dict(params, restoreBackupId="move-1"))
    check(again["id"] == vps, again)

    # Node A lets go.
    job(a, "vps.delete", vps)
    check(disk(a, vps) is None and backups(a, vps) == [], "node A kept the server's disk or backups")
    check(not os.path.exists(os.path.join(a.agent.state_dir, "vps", f"{vps}.json")), "node A kept its record")
    status, _ = job(b, "vps.status", vps)
    check(status["state"] == "running", status)


if __name__ == "__main__":
    sys.exit(run_cases({f.__name__: f for f in [move]}))
