#!/usr/bin/python3
# SPDX-License-Identifier: GPL-2.0-or-later
"""Hostile paths (issue 11, item 7) against every app.files.* kind through the link, on
a real volume in which the app itself planted links out (to /, /etc, /proc/self/root,
a chain, '..', a loop, an absolute file): each refused with 422 VALIDATION_ERROR on
the field that named it (or, for a path that stays inside but does not exist there,
FILE_NOT_FOUND), and a canary outside the volume checked after every single job."""
import base64
import os
import sys
import uuid

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from test_apps import apps_conf, app_job, deploy_params, need_root, ok, wait_output  # noqa: E402
from nodeagent_harness import check, needs, run_cases, with_setup  # noqa: E402

LEAVE = "VALIDATION_ERROR"
INSIDE = {"FILE_NOT_FOUND", "INVALID_STATE", None}  # a place inside (mkdir makes parents: may succeed)


def table(canary):
    """(path, codes accepted): every path here would leave the volume or is malformed,
    except those marked INSIDE, which name a place inside the volume (there is no /proc
    in it: the text means nothing special), where a job may succeed or not find it."""
    return [
        ("../etc/passwd", {LEAVE}), ("/../etc/passwd", {LEAVE}), ("..", {LEAVE}), ("/..", {LEAVE}),
        ("a/../../etc/passwd", {LEAVE}), ("a/b/../../../x", {LEAVE}), ("/a/b/c/../../../../x", {LEAVE}),
        ("a/b/c/../../../../../../../../etc/passwd", {LEAVE}),
        ("//etc/passwd", {LEAVE}), ("/etc//passwd", {LEAVE}), ("a/", {LEAVE}),
        (".", {LEAVE}), ("./x", {LEAVE}), ("a/./x", {LEAVE}), ("", {LEAVE}),
        ("a\u0000b", {LEAVE}), ("a/\u0001", {LEAVE}), ("x" * 256, {LEAVE}), ("a/" * 2100 + "x", {LEAVE}),
        ("escape/etc/passwd", {LEAVE}), ("escape" + canary, {LEAVE}), ("etcl/passwd", {LEAVE}),
        ("etcl/../x", {LEAVE}), ("chain/x", {LEAVE}), ("procl/etc/passwd", {LEAVE}),
        ("dotdot/x", {LEAVE}), ("a/up/up/x", {LEAVE}), ("loop/x", {LEAVE}), ("abs/x", {LEAVE}),
        ("/proc/self/root/etc/passwd", INSIDE), ("/proc/1/root/etc/shadow", INSIDE),
    ]


def kinds(path):
    data = base64.b64encode(b"owned").decode()
    return [
        ("app.files.list", {"path": path}, "path"),
        ("app.files.read_text", {"path": path}, "path"),
        ("app.files.write", {"path": path, "contentBase64": data}, "path"),
        ("app.files.write", {"path": path, "contentBase64": data, "offset": 0, "truncate": True}, "path"),
        ("app.files.mkdir", {"path": path}, "path"),
        ("app.files.delete", {"path": path}, "path"),
        ("app.files.move", {"from": path, "to": "/moved"}, "from"),
        ("app.files.move", {"from": "/inside.txt", "to": path}, "to"),
    ]


def snapshot(paths):
    out = {}
    for p in paths:
        st = os.lstat(p)
        out[p] = (st.st_mtime_ns, st.st_size, st.st_mode, open(p, "rb").read() if os.path.isfile(p) else None)
    return out


@needs("root")
@with_setup(agent_conf=apps_conf)
def hostile_paths(s):
    need_root()
    canary_dir = os.path.join(s.tmp, "outside")
    os.makedirs(canary_dir)
    canary = os.path.join(canary_dir, "canary")
    with open(canary, "w") as f:
        f.write("untouched")
    os.chmod(canary_dir, 0o777)
    os.chmod(canary, 0o666)  # writable by anyone: only the path layer stands between a job and it
    plant = ("cd /home/container && mkdir -p a/b/c && ln -s / escape && ln -s /etc etcl && "
             "ln -s c2 chain && ln -s ../.. c2 && ln -s /proc/self/root procl && ln -s .. dotdot && "
             "ln -s ../.. a/up && ln -s loop loop && ln -s " + canary + " abs && echo planted; sleep 600")
    app = str(uuid.uuid4())
    ok(app_job(s, "app.deploy", app, deploy_params(template={"command": ["/bin/sh", "-c", plant]}),
               timeout=120))
    ok(app_job(s, "app.power", app, {"action": "start"}))
    wait_output(s, app, "planted")
    ok(app_job(s, "app.files.write", app, {"path": "/inside.txt",
                                           "contentBase64": base64.b64encode(b"mine").decode()}))
    watched = [canary, canary_dir, "/etc/passwd", "/etc"]
    before = snapshot(watched)
    rows = table(canary)
    check(len(rows) >= 25, len(rows))
    refused = 0
    for path, codes in rows:
        for kind, params, field in kinds(path):
            res = app_job(s, kind, app, params)
            err = res.get("error") or {}
            check((res["status"] == "failed" or None in codes) and err.get("code") in codes,
                  (kind, repr(path[:80]), res))
            if err.get("code") == LEAVE:
                check(err["httpStatus"] == 422 and field in (err.get("details") or {}),
                      (kind, repr(path[:80]), "the error must name the field", err))
            check(snapshot(watched) == before, (kind, repr(path[:80]), "something outside the volume changed"))
            check(not os.path.exists(os.path.join(canary_dir, "moved")), "a move reached outside")
            if res["status"] == "succeeded" and field == "to":  # moved inside: put it back
                ok(app_job(s, "app.files.move", app, {"from": path, "to": "/inside.txt"}))
            refused += res["status"] == "failed"
    # What is inside is still there and still the app's.
    r = ok(app_job(s, "app.files.read_text", app, {"path": "/inside.txt"}))
    check(r["content"] == "mine", r)
    inside = os.path.join(s.agent.state_dir, "apps", "apps", app, "disk", "volume", "proc", "self", "root", "etc")
    check(os.path.isdir(inside), "mkdir -p of /proc/self/root/etc/... made its directories inside the volume")
    print(f"{len(rows)} hostile paths x {len(kinds(''))} kinds: {refused} refused, nothing outside touched")
    ok(app_job(s, "app.delete", app))


if __name__ == "__main__":
    sys.exit(run_cases({f.__name__: f for f in [hostile_paths]}))
