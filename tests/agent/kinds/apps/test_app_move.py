#!/usr/bin/python3
# SPDX-License-Identifier: GPL-2.0-or-later
"""Moving an app between two nodes (issue 23 item 4; AGENT-API 4.2 and 4.4), through
two agents on this machine, each with its own controller link and state directory,
and one object store: the central API's recipe of docs/operations.md, job by job.

On node A the app runs with files, an SFTP login and a group; it is stopped, backed up
and exported. On node B it is deployed with the same params, a damaged copy of the
object is refused (nothing kept), the good one imported with its sha256 and restored;
SFTP, a port exposure and the group are set again by their jobs; it starts there with
every byte, and the customer logs in by SFTP on B. Deleted on A, nothing of it stays.

Both agents share this case's network namespace, so only node B runs app networks (two
agents would both own the same nftables table and bridge names); node A's group is its
record only."""
import hashlib
import os
import socket
import subprocess
import sys
import uuid

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(HERE, "..", "..", "..", "harness"))
sys.path.insert(0, os.path.join(HERE, "..", "..", "..", "drivers", "app-backup"))
from nodeagent_harness import BUILD, Setup, certs_dir, check, free_port, needs, run_cases, wait_for  # noqa: E402
from objstore import ObjectStore  # noqa: E402
from test_apps import apps_conf, app_job, deploy_params, failed, need_root, ok, wait_output  # noqa: E402
from test_app_backup import WRITER, backups_dir, put_files, tree, volume_dir  # noqa: E402

PUBLIC = "192.0.2.1"


def node_conf(sftp_port, networks):
    def conf(s):
        c = apps_conf(s)
        c["apps"].update({"transfer_ca_file": os.path.join(certs_dir(), "ca.pem"), "transfer_part_size_mb": "5",
                          "sftp_listen": f"127.0.0.1:{sftp_port}", "sftp_host": "sftp.test",
                          "sftpd": os.path.join(BUILD, "sftp", "nodeagent-sftpd")})
        if networks:
            c["apps"].update({"public_address": PUBLIC, "ports": "20000-20100",
                              "apps_domain": "apps.example.test", "haproxy": ""})
        c["firewall"] = {"enabled": "false"}  # two agents, one namespace: no server firewall to share
        return c
    return conf


def sftp_get(s, port, user, key, remote):
    """Fetch one file by OpenSSH's sftp with key; its bytes, or None."""
    local = os.path.join(s.tmp, "fetched")
    batch = os.path.join(s.tmp, "batch")
    with open(batch, "w") as f:
        f.write(f"get {remote} {local}\n")
    r = subprocess.run(["/usr/bin/sftp", "-b", batch, "-P", str(port), "-o", "StrictHostKeyChecking=no",
                        "-o", "UserKnownHostsFile=/dev/null", "-o", "LogLevel=ERROR", "-o", "ConnectTimeout=10",
                        "-i", key, "-o", "IdentitiesOnly=yes", "-o", "PasswordAuthentication=no",
                        f"{user}@127.0.0.1"], capture_output=True, text=True, timeout=60)
    if r.returncode != 0:
        return None
    with open(local, "rb") as f:
        return f.read()


def keypair(s, name):
    path = os.path.join(s.tmp, name)
    subprocess.run(["/usr/bin/ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", path, "-C", name], check=True)
    return path, open(path + ".pub").read().strip()


def listening(port):
    try:
        socket.create_connection(("127.0.0.1", port), 0.5).close()
        return True
    except OSError:
        return False


def left_on(s, app):
    """Nothing of app under node s's state directory (node B, on this same machine, has it too)."""
    storage = os.path.join(s.agent.state_dir, "apps")
    check(not os.path.exists(os.path.join(storage, "apps", app)), "the app's directory is left")
    with open("/proc/self/mountinfo") as f:
        check(not [m for m in f if storage in m and app in m], "a mount of the app is left")
    r = subprocess.run(["/usr/bin/crun", "--root", os.path.join(storage, "crun"), "list", "-q"],
                       capture_output=True, text=True)
    check(f"na-{app}" not in r.stdout, r.stdout)


def stages(s, jid):
    return [p for p in s.controller.admin("GET", f"/admin/jobs/{jid}")["progress"] if p.get("stage")]


@needs("root", "netns")
def move():
    need_root()
    port_a, port_b = free_port(), free_port()
    store = ObjectStore(certs_dir())
    a = b = None
    failed_ = True
    try:
        a = Setup(agent_conf=node_conf(port_a, False))
        b = Setup(agent_conf=node_conf(port_b, True))
        run(a, b, store, port_a, port_b)
        failed_ = False
    finally:
        for s in (b, a):
            if s:
                s.close(failed_)
        store.stop()


def run(a, b, store, port_a, port_b):
    app, group = str(uuid.uuid4()), str(uuid.uuid4())
    key, pub = keypair(a, "customer")
    params = deploy_params(name="mover", hostname="mover", groupId=group, template={"command": WRITER},
                           plan={"volumeQuotaMB": 64})

    # Node A: the app runs, with files, an SFTP login and a group.
    ok(app_job(a, "app.deploy", app, params, timeout=120))
    ok(app_job(a, "app.power", app, {"action": "start"}))
    wait_output(a, app, "ready")
    files = {"/world/level.dat": os.urandom(3 << 20), "/world/r.0.0.mca": os.urandom(3 << 20),
             "/config/server.properties": b"motd=moved\n"}
    put_files(a, app, files)
    sftp = {"enabled": True, "publicKeys": [pub]}
    ok(app_job(a, "app.sftp.set", app, sftp))
    wait_for(lambda: listening(port_a), 10, "node A's SFTP")
    check(sftp_get(a, port_a, "mover", key, "/config/server.properties") == b"motd=moved\n", "SFTP on node A")

    # Stop (what the customer sees: the app stopped), back up, export: one object.
    ok(app_job(a, "app.power", app, {"action": "stop", "graceSec": 10}))
    original = tree(volume_dir(a, app))
    backup = ok(app_job(a, "app.backup.create", app, {"backupId": "move-1"}, timeout=120))
    jid = a.controller.enqueue("app.backup.export", {"backupId": "move-1", "transfer": {
        "url": store.url("PUT", "move-1.tar.zst"), "method": "PUT"}}, target={"type": "app", "id": app})
    check(ok(a.controller.wait_results([jid], 120)[jid]["results"][0]) == backup, "the export answers the Backup")
    moved = [p for p in stages(a, jid) if p["stage"] == "transferring"]
    check(moved and moved[-1].get("message"), ("the export's progress", moved[-3:]))
    check(hashlib.sha256(store.read_object("move-1.tar.zst")).hexdigest() == backup["sha256"], "the object")

    # Node B: the same app, its data from the object; a damaged copy keeps nothing.
    check(ok(app_job(b, "app.deploy", app, params, timeout=120))["state"] == "stopped", "deployed on B")
    data = bytearray(store.read_object("move-1.tar.zst"))
    data[len(data) // 2] ^= 0xff
    store.put_object("damaged", bytes(data))
    err = failed(app_job(b, "app.backup.import", app, {"backupId": "move-1", "transfer": {
        "url": store.url("GET", "damaged"), "method": "GET", "sha256": backup["sha256"]}}, timeout=120),
        "VALIDATION_ERROR")
    check("sha256" in str(err["details"]), err)
    check(ok(app_job(b, "app.backup.list", app)) == [], "a damaged import kept a backup")
    check(not os.path.isdir(backups_dir(b, app)) or os.listdir(backups_dir(b, app)) == [],
          "a damaged import left files")
    jid = b.controller.enqueue("app.backup.import", {"backupId": "move-1", "transfer": {
        "url": store.url("GET", "move-1.tar.zst"), "method": "GET", "sha256": backup["sha256"]}},
        target={"type": "app", "id": app})
    imported = ok(b.controller.wait_results([jid], 120)[jid]["results"][0])
    check(imported["sha256"] == backup["sha256"] and imported["sizeBytes"] == backup["sizeBytes"], imported)
    check(any(p["stage"] == "transferring" and p.get("message") for p in stages(b, jid)), "the import's progress")
    ok(app_job(b, "app.backup.restore", app, {"backupId": "move-1"}, timeout=120))
    check(tree(volume_dir(b, app)) == original, "every byte, mode and owner as on node A")

    # What the central API sets again on B: SFTP, the port exposure, the group.
    ok(app_job(b, "app.sftp.set", app, sftp))
    exp = ok(app_job(b, "app.exposure.add", app, {"exposureId": str(uuid.uuid4()), "type": "port",
                                                  "containerPort": 25565, "protocol": "tcp"}))
    check(exp.get("externalPort") and 20000 <= exp["externalPort"] <= 20100, exp)
    check(ok(app_job(b, "app.group.join", app, {"groupId": group})).get("groupId") == group, "the group on B")
    ok(app_job(b, "app.power", app, {"action": "start"}))
    wait_output(b, app, "ready")
    wait_for(lambda: listening(port_b), 10, "node B's SFTP")
    check(sftp_get(b, port_b, "mover", key, "/world/level.dat") == files["/world/level.dat"], "SFTP on node B")

    # Node A lets go: nothing of the app stays there; B runs on.
    ok(app_job(a, "app.delete", app))
    left_on(a, app)
    check(not os.path.exists(backups_dir(a, app)), "node A kept the app's backups")
    check(ok(app_job(b, "app.status", app))["state"] == "running", "the app runs on node B")


if __name__ == "__main__":
    sys.exit(run_cases({f.__name__: f for f in [move]}))
