#!/usr/bin/python3
# SPDX-License-Identifier: GPL-2.0-or-later
"""Live file editing end to end (issue 25; AGENT-API 4.3 mode files): the real agent
dials the test controller's relay over wss:// and follows one file of a real app's
volume: an edit round trip; the app appending (each change seen); a rename over the
file, a delete and a re-creation; SFTP replacing it; two sessions writing from the same
version (one written, one conflict with the winner's content); a binary file; a write
over quota (the old file intact); refusals before anything is dialled (a hostile path,
a directory, a missing file, file access off, a URL on another host); the app deleted;
100 sessions at once; a re-offer of console.open after the agent died."""
import json
import os
import signal
import sys
import time
import uuid

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "harness"))
sys.path.insert(0, os.path.join(HERE, "..", "kinds", "apps"))
sys.path.insert(0, os.path.join(HERE, "..", "..", "sftp"))
from nodeagent_harness import check, needs, run_cases, wait_for, with_setup  # noqa: E402
from test_apps import app_job, deploy_params, failed, need_root, ok  # noqa: E402
from test_console import Console, app_or_vps_job, consoles_conf, wait_closed_event  # noqa: E402
import test_app_sftp as sftpt  # noqa: E402

# Each console line is appended to /home/container/app.log, then echoed.
APPENDER = ["/bin/sh", "-c", 'echo ready; while read l; do echo "$l" >> /home/container/app.log; echo "got $l"; done']


class Files(Console):
    """A files session as the panel sees it: JSON text frames."""

    def __init__(self, s, target, path, **kw):
        super().__init__(s, target, mode="files", **kw)
        self.params["path"] = path

    def frames(self):
        return [json.loads(m["text"]) for m in self.messages()["messages"] if m["op"] == "text"]

    def wait_frame(self, pred, timeout=20, what="a frame", after=0):
        def find():
            for f in self.frames()[after:]:
                if pred(f):
                    return f
            return None
        try:
            return wait_for(find, timeout, what, interval=0.05)
        except AssertionError:
            raise AssertionError(f"{what} not seen; frames: {[short(f) for f in self.frames()]}")

    def count(self):
        return len(self.frames())

    def write(self, base, content):
        """Send a write; the answer (written, conflict or error) after what was there."""
        n = self.count()
        self.send({"type": "write", "baseVersion": base, "content": content})
        return self.wait_frame(lambda f: f["type"] in ("written", "conflict", "error"), after=n,
                               what="the write's answer")


def short(f):
    g = dict(f)
    if isinstance(g.get("content"), str) and len(g["content"]) > 60:
        g["content"] = g["content"][:60] + "…"
    return g


def volume(s, app):
    return sftpt.volume(s, app)


def put(s, app, path, data):
    import base64
    ok(app_job(s, "app.files.write", app, {"path": path, "contentBase64": base64.b64encode(data).decode()}))


def files_app(s, **over):
    need_root()
    app = str(uuid.uuid4())
    ok(app_job(s, "app.deploy", app, deploy_params(template={"command": APPENDER}, **over), timeout=120))
    ok(app_job(s, "app.power", app, {"action": "start"}))
    wait_for(lambda: ok(app_job(s, "app.status", app))["state"] == "running", 15, "the app running")
    return app, {"type": "app", "id": app}


# -- cases -------------------------------------------------------------------

@needs("root")
@with_setup(agent_conf=consoles_conf())
def edit_round_trip(s):
    """Open, see the app change the file live, edit it, conflicts, binary, delete and re-create."""
    app, target = files_app(s)
    put(s, app, "/server.properties", b"motd=hello\n")
    con = Files(s, target, "/server.properties")
    data = ok(con.open())
    check(data["sessionId"] == con.sid, data)
    first = con.wait_frame(lambda f: f["type"] == "file", what="the file at open")
    check(first["content"] == "motd=hello\n" and first["bytes"] == 11 and first["path"] == "/server.properties"
          and first["version"] and "binary" not in first, first)
    # The edit: written, on disk, owned by the app's user.
    t0 = time.time()
    ans = con.write(first["version"], "motd=edited ✓\n")
    print(f"write answered in {(time.time() - t0) * 1000:.1f} ms (admin polling included)")
    check(ans["type"] == "written" and ans["version"] != first["version"], ans)
    path = os.path.join(volume(s, app), "server.properties")
    check(open(path, encoding="utf-8").read() == "motd=edited ✓\n")
    root = os.stat(volume(s, app))
    st = os.stat(path)
    check((st.st_uid, st.st_gid) == (root.st_uid, root.st_gid), (st, root))
    check(not [n for n in os.listdir(volume(s, app)) if n.startswith(".na-")], os.listdir(volume(s, app)))
    # Its own write is not echoed back as a file frame.
    time.sleep(0.5)
    check(not [f for f in con.frames() if f["type"] == "file" and f["version"] == ans["version"]], con.frames())
    # A write from the old version: conflict with what is there, nothing written.
    conflict = con.write(first["version"], "stale\n")
    check(conflict["type"] == "conflict" and conflict["version"] == ans["version"]
          and conflict["content"] == "motd=edited ✓\n", conflict)
    check(open(path, encoding="utf-8").read() == "motd=edited ✓\n")

    # The app appends to its log while a session follows it: each change is seen.
    put(s, app, "/app.log", b"")
    log = Files(s, target, "/app.log")
    ok(log.open())
    log.wait_frame(lambda f: f["type"] == "file" and f["content"] == "", what="the empty log")
    for i in range(3):
        ok(app_job(s, "app.console.send", app, {"line": f"line {i}"}))
        want = "".join(f"line {k}\n" for k in range(i + 1))
        log.wait_frame(lambda f: f["type"] == "file" and f.get("content") == want, what=f"the log with line {i}")
    # An editor's save: a new file renamed over it.
    tmp = os.path.join(volume(s, app), ".app.log.swp")
    with open(tmp, "w") as f:
        f.write("saved by an editor\n")
    os.rename(tmp, os.path.join(volume(s, app), "app.log"))
    log.wait_frame(lambda f: f["type"] == "file" and f.get("content") == "saved by an editor\n",
                   what="the file after a rename over it")
    # Deleted: gone; a write from the old version is a conflict (version null); created again: file.
    last = log.frames()[-1]
    ok(app_job(s, "app.files.delete", app, {"path": "/app.log"}))
    log.wait_frame(lambda f: f["type"] == "gone", what="gone")
    c = log.write(last["version"], "resurrect\n")
    check(c["type"] == "conflict" and c["version"] is None, c)
    ok(app_job(s, "app.console.send", app, {"line": "reborn"}))
    log.wait_frame(lambda f: f["type"] == "file" and f.get("content") == "reborn\n", what="the file back")
    # A write over a deleted file with baseVersion null creates it, only while it does not exist.
    ok(app_job(s, "app.files.delete", app, {"path": "/app.log"}))
    log.wait_frame(lambda f: f["type"] == "gone", after=len(log.frames()) - 1, what="gone again")
    w = log.write(None, "created by the panel\n")
    check(w["type"] == "written", w)
    check(open(os.path.join(volume(s, app), "app.log")).read() == "created by the panel\n")
    w = log.write(None, "again\n")
    check(w["type"] == "conflict" and w["content"] == "created by the panel\n", w)

    # A binary file: metadata only; a large text file too.
    put(s, app, "/blob.bin", bytes([0xff, 0xfe, 0x00, 0x01]))
    b = Files(s, target, "/blob.bin")
    ok(b.open())
    f = b.wait_frame(lambda f: f["type"] == "file", what="the binary file")
    check(f.get("binary") is True and "content" not in f and f["bytes"] == 4, f)
    put(s, app, "/big.txt", b"x" * (600 * 1024))
    big = Files(s, target, "/big.txt")
    ok(big.open())
    f = big.wait_frame(lambda f: f["type"] == "file", what="the large file")
    check(f.get("binary") is True and "content" not in f and f["bytes"] == 600 * 1024, f)

    # Frames the agent does not take: an error frame each, the session stays.
    for bad, field in (({"type": "write", "content": "x"}, "baseVersion"),
                       ({"type": "write", "baseVersion": 5, "content": "x"}, "baseVersion"),
                       ({"type": "write", "baseVersion": None}, "content"),
                       ({"type": "delete"}, "type")):
        n = con.count()
        con.send(bad)
        e = con.wait_frame(lambda f: f["type"] == "error", after=n, what=f"the refusal of {bad}")
        check(e["code"] == "VALIDATION_ERROR" and e.get("field") == field, (bad, e))
    n = con.count()
    con.send(text="not json")
    check(con.wait_frame(lambda f: f["type"] == "error", after=n)["code"] == "VALIDATION_ERROR")
    # A write above 4 MiB: refused, nothing written.
    n = con.count()
    con.send({"type": "write", "baseVersion": ans["version"], "content": "y" * ((4 << 20) + 1)})
    e = con.wait_frame(lambda f: f["type"] == "error", after=n, what="the refusal of a write above 4 MiB")
    check(e["code"] == "VALIDATION_ERROR" and e.get("field") == "content" and "4194304" in e["error"], e)
    check(open(path, encoding="utf-8").read() == "motd=edited ✓\n")
    check(not con.messages()["closed"], "a refused frame closed the session")
    # Listed by nodeagentctl status with its mode.
    rows = [c for c in s.agent.status()["consoles"] if c["sessionId"] == con.sid]
    check(rows and rows[0]["mode"] == "files", rows)
    ok(app_or_vps_job(s, "console.close", target, {"sessionId": con.sid}))
    check(con.wait_closed()["reason"] == "closed")

    # The app deleted: every files session ends with target-deleted, and the delete is not held up.
    ok(app_job(s, "app.delete", app))
    for x in (log, b, big):
        closed = x.wait_closed(15)
        check(closed["reason"] == "target-deleted", closed)
        check(wait_closed_event(s, x.sid)["data"]["reason"] == "target-deleted")


@needs("root")
@with_setup(agent_conf=consoles_conf())
def two_writers(s):
    """Two sessions write from the same version: one written, the other a conflict with
    the winner's content; each sees the other's change; a files job in between is seen too."""
    app, target = files_app(s)
    put(s, app, "/shared.txt", b"v0\n")
    a, b = Files(s, target, "/shared.txt"), Files(s, target, "/shared.txt")
    ok(a.open())
    ok(b.open())
    va = a.wait_frame(lambda f: f["type"] == "file")["version"]
    vb = b.wait_frame(lambda f: f["type"] == "file")["version"]
    check(va == vb)
    na, nb = a.count(), b.count()
    a.send({"type": "write", "baseVersion": va, "content": "from A\n"})
    b.send({"type": "write", "baseVersion": vb, "content": "from B\n"})
    ra = a.wait_frame(lambda f: f["type"] in ("written", "conflict", "error"), after=na)
    rb = b.wait_frame(lambda f: f["type"] in ("written", "conflict", "error"), after=nb)
    check(sorted([ra["type"], rb["type"]]) == ["conflict", "written"], (ra, rb))
    win, lose, winner = (ra, rb, "from A\n") if ra["type"] == "written" else (rb, ra, "from B\n")
    check(lose["content"] == winner and lose["version"] == win["version"], (win, lose))
    check(open(os.path.join(volume(s, app), "shared.txt")).read() == winner)
    # The loser retries from the version it was given: written; the other session sees it.
    loser = b if winner == "from A\n" else a
    other = a if loser is b else b
    w = loser.write(lose["version"], "merged\n")
    check(w["type"] == "written", w)
    other.wait_frame(lambda f: f["type"] == "file" and f.get("content") == "merged\n", what="the other's write")
    # A files job replacing it: both sessions see it, and a write from before it conflicts.
    put(s, app, "/shared.txt", b"from a job\n")
    for x in (a, b):
        x.wait_frame(lambda f: f["type"] == "file" and f.get("content") == "from a job\n", what="the job's write")
    c = loser.write(w["version"], "late\n")
    check(c["type"] == "conflict" and c["content"] == "from a job\n", c)
    # The drain ends both with agent-draining; the agent exits cleanly (under ASan: nothing leaked).
    s.agent.signal(signal.SIGTERM)
    for x in (a, b):
        closed = x.wait_closed()
        check(closed["code"] == 1001 and closed["reason"] == "agent-draining", closed)
    check(s.agent.stop(30) == 0, s.agent.log_text()[-3000:])


@needs("root")
@with_setup(agent_conf=consoles_conf())
def quota(s):
    """A write that does not fit: QUOTA_EXCEEDED in an error frame, the old file intact.
    Then file access turned off ends the app's files sessions."""
    app, target = files_app(s, plan={"volumeQuotaMB": 16})
    put(s, app, "/config.yml", b"keep: me\n")
    con = Files(s, target, "/config.yml")
    ok(con.open())
    v = con.wait_frame(lambda f: f["type"] == "file")["version"]
    # Fill the volume with the files kind until it refuses.
    import base64
    chunk = base64.b64encode(b"\0" * (2 << 20)).decode()
    for i in range(16):
        r = app_job(s, "app.files.write", app, {"path": f"/fill{i}", "contentBase64": chunk})
        if r["status"] == "failed":
            check(r["error"]["code"] == "QUOTA_EXCEEDED", r)
            break
    e = con.write(v, "z" * (3 << 20))
    check(e["type"] == "error" and e["code"] == "QUOTA_EXCEEDED", short(e))
    check(open(os.path.join(volume(s, app), "config.yml")).read() == "keep: me\n")
    check(not [n for n in os.listdir(volume(s, app)) if n.startswith(".na-")], os.listdir(volume(s, app)))
    # Room made: the same write goes through.
    for i in range(16):
        app_job(s, "app.files.delete", app, {"path": f"/fill{i}"})
    w = con.write(v, "z" * (3 << 20))
    check(w["type"] == "written", short(w))
    # An app.update whose template turns file access off: the app's files sessions end
    # with file-access-disabled.
    off = Files(s, target, "/config.yml")
    ok(off.open())
    off.wait_frame(lambda f: f["type"] == "file")
    tmpl = dict(deploy_params(template={"command": APPENDER})["template"], fileAccess=False)
    upd = app_job(s, "app.update", app, {"version": "2", "template": tmpl, "healthySec": 10}, timeout=120)
    check(upd["status"] == "succeeded", upd)
    check(con.wait_closed(15)["reason"] == "file-access-disabled")
    closed = off.wait_closed(15)
    check(closed["reason"] == "file-access-disabled", closed)
    check(wait_closed_event(s, off.sid)["data"]["reason"] == "file-access-disabled")
    check(not [c for c in s.agent.status()["consoles"] if c["sessionId"] == off.sid])


@needs("root")
@with_setup(agent_conf=consoles_conf())
def refusals(s):
    """Everything refused before a socket is dialled: the relay never sees the agent."""
    app, target = files_app(s)
    os.symlink("/", os.path.join(volume(s, app), "escape"))
    os.mkdir(os.path.join(volume(s, app), "dir"))
    canary = os.path.join(s.tmp, "canary")
    with open(canary, "w") as f:
        f.write("untouched")

    def refused(path, code, field=None, **over):
        con = Files(s, target, path)
        con.params.update(over)
        e = failed(con.open(), code)
        if field:
            check(field in e.get("details", {}), e)
        check(not con.messages()["connected"], f"{path}: the relay saw a connection")
        return e
    for path in ("../etc/passwd", "/../../etc/passwd", "a/../../x", "x" * 300, "", "a\u0000b"):
        refused(path, "VALIDATION_ERROR", "path")
    refused("/proc/self/root/etc/passwd", "FILE_NOT_FOUND")  # no /proc in the volume: never the host's
    for path in ("escape/etc/passwd", "escape" + canary):
        refused(path, "VALIDATION_ERROR", "path")
    refused("/nothing-here.txt", "FILE_NOT_FOUND")
    e = refused("/dir", "INVALID_STATE")
    check(e["details"]["state"] == "directory", e)
    e = refused("/escape", "INVALID_STATE")
    check(e["details"]["state"] == "symlink", e)
    # path belongs to mode files only; mode files needs it.
    e = failed(app_or_vps_job(s, "console.open", target, dict(Console(s, target).params, path="/x")),
               "VALIDATION_ERROR")
    check("path" in e["details"], e)
    e = failed(app_or_vps_job(s, "console.open", target, Console(s, target, mode="files").params), "VALIDATION_ERROR")
    check("path" in e["details"], e)
    # A URL that is neither the controller's host nor a configured relay: refused, nothing dialled.
    e = refused("/dir", "VALIDATION_ERROR", "url", url="wss://relay.example.net/relay/x")
    check("relay" in json.dumps(e), e)
    check(open(canary).read() == "untouched")
    # A template without file access.
    managed = str(uuid.uuid4())
    ok(app_job(s, "app.deploy", managed, deploy_params(hostname="managed", template={"fileAccess": False}),
               timeout=120))
    e = failed(Files(s, {"type": "app", "id": managed}, "/x").open(), "FILE_ACCESS_DISABLED")
    check(e["httpStatus"] == 403, e)
    check(not [c for c in s.agent.status()["consoles"]], s.agent.status()["consoles"])


def sftp_conf(s):
    c = consoles_conf()(s)
    c["apps"].update(sftpt.sftp_conf(s)["apps"])
    return c


@needs("root")
@with_setup(agent_conf=sftp_conf)
def sftp_upload(s):
    """An SFTP client replacing the file while a session follows it: the session sees it."""
    app, target = files_app(s, sftpUsername="filesftp")
    put(s, app, "/server.properties", b"from the panel\n")
    con = Files(s, target, "/server.properties")
    ok(con.open())
    con.wait_frame(lambda f: f["type"] == "file" and f.get("content") == "from the panel\n")
    s.local = os.path.join(s.tmp, "local")
    os.makedirs(s.local)
    key, pub = sftpt.keypair(s, "files_key")
    ok(app_job(s, "app.sftp.set", app, {"enabled": True, "publicKeys": [pub]}))
    wait_for(sftpt.listening, 10, "nodeagent-sftpd listening")
    with open(os.path.join(s.local, "server.properties"), "w") as f:
        f.write("uploaded over sftp\n")
    sftpt.sftp_ok(s, "filesftp", ["put server.properties server.properties"], key=key)
    f = con.wait_frame(lambda f: f["type"] == "file" and f.get("content") == "uploaded over sftp\n",
                       what="the upload")
    # The panel edits on top of what SFTP wrote.
    check(con.write(f["version"], "edited after the upload\n")["type"] == "written")
    sftpt.sftp_ok(s, "filesftp", ["get server.properties got.txt"], key=key)
    check(open(os.path.join(s.local, "got.txt")).read() == "edited after the upload\n")


@needs("root")
@with_setup(agent_conf=consoles_conf(max_sessions=120, max_per_target=110))
def hundred_sessions(s):
    """100 files sessions on one file at once: one change reaches all of them."""
    app, target = files_app(s)
    put(s, app, "/motd.txt", b"before\n")
    cons = [Files(s, target, "/motd.txt") for _ in range(100)]
    ids = [s.controller.enqueue("console.open", c.params, target=target) for c in cons]
    res = s.controller.wait_results(ids, 180)
    for i in ids:
        ok(res[i]["results"][0])
    check(len([c for c in s.agent.status()["consoles"] if c["mode"] == "files"]) == 100)
    for c in cons:
        c.wait_frame(lambda f: f["type"] == "file" and f.get("content") == "before\n", 30, f"the file on {c.sid}")
    t0 = time.time()
    put(s, app, "/motd.txt", b"to everyone\n")
    for c in cons:
        c.wait_frame(lambda f: f["type"] == "file" and f.get("content") == "to everyone\n", 30, f"the change on {c.sid}")
    print(f"one change seen by 100 sessions within {(time.time() - t0) * 1000:.0f} ms (admin polling included)")
    check(s.agent.proc.poll() is None)


@needs("root")
@with_setup(agent_conf=consoles_conf())
def reoffer_after_crash(s):
    """console.open is journaled: a re-offer of its job id after the agent died is
    answered with the recorded result and dials nothing."""
    app, target = files_app(s)
    put(s, app, "/a.txt", b"a\n")
    con = Files(s, target, "/a.txt")
    jid = s.controller.enqueue("console.open", con.params, target=target)
    first = ok(s.controller.wait_results([jid], 30)[jid]["results"][0])
    con.wait_frame(lambda f: f["type"] == "file")
    s.agent.kill9()
    con.wait_closed(15)  # the socket died with the agent
    s.agent.start()
    job = s.controller.admin("GET", f"/admin/jobs/{jid}")
    s.controller.admin("POST", "/admin/raw-jobs", [{"id": jid, "kind": "console.open", "target": target,
                                                    "params": con.params, "attempt": 2,
                                                    "createdAt": job["createdAt"], "timeoutSec": 600}])
    wait_for(lambda: len(s.controller.admin("GET", f"/admin/jobs/{jid}")["results"]) >= 2, 30, "the re-offer's answer")
    again = s.controller.admin("GET", f"/admin/jobs/{jid}")["results"][-1]
    check(again["status"] == "succeeded" and again["data"] == first, (again, first))
    check(con.messages()["rejected"] == [], con.messages()["rejected"])
    check("answered from the journal" in s.agent.log_text(), "no journal answer in the log")
    s.agent.signal(signal.SIGTERM)
    check(s.agent.stop(20) == 0)


@needs("root")
@with_setup(agent_conf=consoles_conf())
def example_client(s):
    """docs/files_client.py, the example of docs/consoles.md, against the real agent:
    it sees the file, a change made by a files job, and its own edit lands on top."""
    import subprocess
    app, target = files_app(s)
    put(s, app, "/cfg.txt", b"motd=1\n")
    certs = s.controller.certs
    p = subprocess.Popen([sys.executable, "-B", os.path.join(HERE, "..", "..", "..", "docs", "files_client.py"),
                          "--listen", "127.0.0.1:0", "--cert", f"{certs}/server.pem", "--key", f"{certs}/server.key",
                          "--token", "example-token"], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    try:
        url = p.stdout.readline().split()[1]
        sid = str(uuid.uuid4())
        ok(app_or_vps_job(s, "console.open", target, {"sessionId": sid, "url": url, "token": "example-token",
                                                      "mode": "files", "path": "/cfg.txt"}))
        out = []

        def until(prefix):
            while True:
                line = p.stdout.readline()
                check(line, f"the client ended before {prefix!r}: {out}")
                out.append(line.strip())
                if line.startswith(prefix):
                    return line.strip()
        p.stdin.write("wait motd=1\n")
        p.stdin.flush()
        until("seen")
        put(s, app, "/cfg.txt", b"motd=2\n")
        p.stdin.write("wait motd=2\nappend edited=yes\n")
        p.stdin.flush()
        until("seen")
        until("written")
        check(open(os.path.join(volume(s, app), "cfg.txt")).read() == "motd=2\nedited=yes\n", out)
        p.stdin.write("quit\n")
        p.stdin.flush()
        check(wait_closed_event(s, sid)["data"]["reason"] == "relay-closed")
        check(p.wait(15) == 0, out)
        print("\n".join(out))
    finally:
        p.kill()
        p.wait()


@needs("root")
@with_setup(agent_conf=consoles_conf())
def slow_reader(s):
    """A panel that stops reading while a 400 KiB file changes over and over: the agent
    holds back file frames (they supersede each other) instead of dropping, so nothing
    is dropped, a write's answer still arrives, and the newest content comes once it
    reads again."""
    app, target = files_app(s)
    put(s, app, "/big.txt", b"0" * (400 * 1024))
    con = Files(s, target, "/big.txt", rcvbuf=32768)
    ok(con.open())
    v = con.wait_frame(lambda f: f["type"] == "file")["version"]
    s.controller.admin("POST", f"/admin/relay/{con.sid}/pause", {"paused": True})
    for i in range(1, 25):
        put(s, app, "/big.txt", str(i % 10).encode() * (400 * 1024))
        time.sleep(0.05)
    st = [c for c in s.agent.status()["consoles"] if c["sessionId"] == con.sid][0]
    check(st["queuedBytes"] <= 1024 * 1024 and st["dropped"] == 0, st)
    con.send({"type": "write", "baseVersion": v, "content": "stale"})
    s.controller.admin("POST", f"/admin/relay/{con.sid}/pause", {"paused": False})
    con.wait_frame(lambda f: f["type"] == "conflict", what="the write's answer")
    # The newest content, in a file frame or in the conflict itself (then no file frame repeats it).
    con.wait_frame(lambda f: f["type"] in ("file", "conflict") and f.get("content", "")[:1] == str(24 % 10), 30,
                   "the newest content")
    st = [c for c in s.agent.status()["consoles"] if c["sessionId"] == con.sid][0]
    check(st["dropped"] == 0, st)
    print(f"slow reader: {len(con.frames())} frames delivered for 25 versions, none dropped")


CASES = {f.__name__: f for f in (edit_round_trip, two_writers, quota, refusals, sftp_upload, hundred_sessions,
                                  reoffer_after_crash, example_client, slow_reader)}

if __name__ == "__main__":
    sys.exit(run_cases(CASES))
