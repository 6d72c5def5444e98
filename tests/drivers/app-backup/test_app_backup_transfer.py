#!/usr/bin/python3
# SPDX-License-Identifier: GPL-2.0-or-later
"""app.backup.export and app.backup.import end to end (AGENT-API 4.2 and 4.4): a running
app backed up, its backup exported to the test object store over real HTTPS (whole and
in parts), deleted on the node, imported back under a new id and restored byte for
byte; an import whose sha256 differs, that is not a zstd archive or that names an
existing backup keeps nothing."""
import hashlib
import os
import sys
import uuid

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "harness"))
sys.path.insert(0, os.path.join(HERE, "..", "..", "agent", "kinds", "apps"))
sys.path.insert(0, HERE)
from nodeagent_harness import certs_dir, check, needs, run_cases, wait_for, with_setup  # noqa: E402
from objstore import ObjectStore  # noqa: E402
from test_apps import apps_conf, app_job, deploy_params, failed, need_root, ok, wait_output  # noqa: E402
from test_app_backup import WRITER, backups_dir, put_files, tree, volume_dir  # noqa: E402


def conf(s):
    c = apps_conf(s)
    c["apps"]["transfer_ca_file"] = os.path.join(certs_dir(), "ca.pem")
    c["apps"]["transfer_part_size_mb"] = "5"
    return c


@needs("root")
@with_setup(agent_conf=conf)
def export_import_restore(s):
    need_root()
    store = ObjectStore(certs_dir())
    try:
        run(s, store)
    finally:
        store.stop()


def run(s, store):
    app = str(uuid.uuid4())
    ok(app_job(s, "app.deploy", app, deploy_params(template={"command": WRITER}, plan={"volumeQuotaMB": 64}),
               timeout=120))
    ok(app_job(s, "app.power", app, {"action": "start"}))
    wait_output(s, app, "ready")
    files = {"/world/level.dat": os.urandom(3 << 20), "/world/r.0.0.mca": os.urandom(3 << 20),
             "/config/server.properties": b"motd=hello\n"}
    put_files(s, app, files)
    b1 = ok(app_job(s, "app.backup.create", app, {"backupId": "b1"}, timeout=120))
    check(b1["sizeBytes"] > 5 << 20, b1)  # more than one part of 5 MiB
    ok(app_job(s, "app.power", app, {"action": "stop"}))
    vol = volume_dir(s, app)
    original = tree(vol)

    # Exported whole: the store holds the file's bytes; the answer is the Backup.
    jid = s.controller.enqueue("app.backup.export", {"backupId": "b1", "transfer": {
        "url": store.url("PUT", "b1.tar.zst"), "method": "PUT"}}, target={"type": "app", "id": app})
    done = s.controller.wait_results([jid], 120)[jid]
    r = ok(done["results"][0])
    check(r == b1, (r, b1))
    check(any(p.get("stage") == "transferring" for p in done["progress"]), done["progress"])
    check(hashlib.sha256(store.read_object("b1.tar.zst")).hexdigest() == b1["sha256"], "the exported object")
    # In parts: the ETags answered let the store join them into the same bytes.
    n = (b1["sizeBytes"] + (5 << 20) - 1) // (5 << 20)
    r = ok(app_job(s, "app.backup.export", app, {"backupId": "b1", "transfer": {
        "url": store.url("PUT", "multi"), "method": "PUT", "parts": [{"url": u} for u in store.part_urls("multi", n)]}},
        timeout=120))
    check(len(r["parts"]) == n and r["sha256"] == b1["sha256"], r)
    store.complete("multi", [(p["partNumber"], p["etag"]) for p in r["parts"]])
    check(hashlib.sha256(store.read_object("multi")).hexdigest() == b1["sha256"], "the joined parts")
    failed(app_job(s, "app.backup.export", app, {"backupId": "nope", "transfer": {
        "url": store.url("PUT", "x"), "method": "PUT"}}), "BACKUP_NOT_FOUND")

    # Deleted on the node; brought back by import under a new id, checked by its sha256.
    ok(app_job(s, "app.backup.delete", app, {"backupId": "b1"}))
    check(ok(app_job(s, "app.backup.list", app)) == [], "b1 is gone")
    good = {"url": store.url("GET", "b1.tar.zst"), "method": "GET", "sha256": b1["sha256"]}
    b2 = ok(app_job(s, "app.backup.import", app, {"backupId": "b2", "transfer": good}, timeout=120))
    check(b2["backupId"] == "b2" and b2["sha256"] == b1["sha256"] and b2["sizeBytes"] == b1["sizeBytes"], b2)
    check([b["backupId"] for b in ok(app_job(s, "app.backup.list", app))] == ["b2"], "b2 listed")

    # Refused imports keep nothing: a sha256 that differs, an existing id, bytes that are no archive.
    before = sorted(os.listdir(backups_dir(s, app)))
    err = failed(app_job(s, "app.backup.import", app, {"backupId": "b3", "transfer": {**good, "sha256": "0" * 64}}),
                 "VALIDATION_ERROR")
    check("sha256" in err["details"].get("transfer", {}), err)
    failed(app_job(s, "app.backup.import", app, {"backupId": "b2", "transfer": good}), "INVALID_STATE")
    store.put_object("junk", b"not a zstd archive" * 100)
    failed(app_job(s, "app.backup.import", app, {"backupId": "b4", "transfer": {
        "url": store.url("GET", "junk"), "method": "GET"}}), "VALIDATION_ERROR")
    check(sorted(os.listdir(backups_dir(s, app))) == before, (before, os.listdir(backups_dir(s, app))))
    check([b["backupId"] for b in ok(app_job(s, "app.backup.list", app))] == ["b2"], "nothing else listed")

    # The volume changed, then restored from the imported backup: byte for byte.
    ok(app_job(s, "app.files.delete", app, {"path": "/world"}))
    put_files(s, app, {"/config/server.properties": b"motd=changed\n"})
    ok(app_job(s, "app.backup.restore", app, {"backupId": "b2"}, timeout=120))
    got = tree(vol)
    for name, entry in original.items():
        if name != "counter.txt":
            check(got.get(name) == entry, (name, got.get(name), entry))
    check(got.keys() == original.keys(), sorted(set(got) ^ set(original)))
    ok(app_job(s, "app.delete", app))


if __name__ == "__main__":
    sys.exit(run_cases({f.__name__: f for f in [export_import_restore]}))
