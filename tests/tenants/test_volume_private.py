#!/usr/bin/python3
# SPDX-License-Identifier: GPL-2.0-or-later
"""Local users read volumes (issue 20, attack 10): any uid on the node (a compromised
service account such as libvirt-qemu or haproxy, another app's ids) could walk into an
app's volume (its directory and disk were 0711 and the volume 0755) and read its .env,
and into the image cache. Only the app's own ids and root reach a volume now, only root
the cache; the app itself still works."""
import base64
import os
import sys
import uuid

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "harness"))
sys.path.insert(0, os.path.join(HERE, "..", "agent", "kinds", "apps"))
from nodeagent_harness import check, needs, run_cases, with_setup  # noqa: E402
from test_apps import app_job, apps_conf, deploy_params, need_root, ok, wait_output  # noqa: E402

SECRET = b"DATABASE_PASSWORD=hunter2\n"


def try_as(uid, gid, path):
    """Read path as uid:gid in a child; returns what it read, or the errno's name."""
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:
        os.close(r)
        try:
            os.setgroups([])
            os.setgid(gid)
            os.setuid(uid)
            with open(path, "rb") as f:
                os.write(w, b"READ:" + f.read())
        except OSError as e:
            os.write(w, ("ERR:" + (os.strerror(e.errno) if e.errno else str(e))).encode())
        os._exit(0)
    os.close(w)
    out = b""
    while True:
        chunk = os.read(r, 4096)
        if not chunk:
            break
        out += chunk
    os.close(r)
    os.waitpid(pid, 0)
    return out.decode(errors="replace")


def app_ids(s, app):
    import json
    with open(os.path.join(s.agent.state_dir, "apps", "app-ids.json")) as f:
        doc = json.load(f)
    for k, v in (doc.items() if isinstance(doc, dict) else []):
        if app in json.dumps({k: v}):
            return v
    return None


@needs("root")
@with_setup(agent_conf=apps_conf)
def other_uids_kept_out(s):
    need_root()
    app, other = str(uuid.uuid4()), str(uuid.uuid4())
    cat = ["/bin/sh", "-c", "echo ready; while read l; do cat \"/home/container/$l\"; echo; done"]
    ok(app_job(s, "app.deploy", app, deploy_params(template={"command": cat}), timeout=120))
    ok(app_job(s, "app.deploy", other, deploy_params(name="other", hostname="other"), timeout=120))
    ok(app_job(s, "app.files.write", app, {"path": "/.env", "contentBase64": base64.b64encode(SECRET).decode()}))
    ok(app_job(s, "app.power", app, {"action": "start"}))
    wait_output(s, app, "ready")
    # The app itself reads it (its own ids, inside its user namespace).
    ok(app_job(s, "app.console.send", app, {"line": ".env"}))
    wait_output(s, app, SECRET.decode().strip())

    vol = os.path.join(s.agent.state_dir, "apps", "apps", app, "disk", "volume", ".env")
    check(try_as(0, 0, vol) == "READ:" + SECRET.decode(), "root reads it")
    # A service account of the node (nobody here), and the other app's container root.
    seen = try_as(65534, 65534, vol)
    check(seen.startswith("ERR:") and "Permission denied" in seen, f"nobody: {seen}")
    st = os.stat(os.path.join(s.agent.state_dir, "apps", "apps", other))
    other_gid = st.st_gid
    check(other_gid != 0, f"the other app's directory belongs to its group ({st})")
    seen = try_as(other_gid, other_gid, vol)
    check(seen.startswith("ERR:") and "Permission denied" in seen, f"the other app's root: {seen}")
    for d in (os.path.join(s.agent.state_dir, "apps", "apps", app),
              os.path.join(s.agent.state_dir, "apps", "apps", app, "disk")):
        mode = os.stat(d).st_mode & 0o7777
        check(mode & 0o007 == 0, f"{d} is mode {mode:o}: others may enter")
    # The image cache: the unpacked images are root's alone (their files carry the
    # images' own ids, their /tmp is 1777).
    cache = os.path.join(s.agent.state_dir, "apps", "images")
    check(os.stat(cache).st_mode & 0o077 == 0, f"{cache} is mode {os.stat(cache).st_mode & 0o7777:o}")
    seen = try_as(65534, 65534, os.path.join(cache, "x"))
    check(seen.startswith("ERR:") and "Permission denied" in seen, f"nobody in the image cache: {seen}")
    # Files kinds and restarts still work.
    ok(app_job(s, "app.power", app, {"action": "restart"}))
    wait_output(s, app, "ready")
    r = ok(app_job(s, "app.files.read_text", app, {"path": "/.env"}))
    check(r["content"] == SECRET.decode(), r)


if __name__ == "__main__":
    sys.exit(run_cases({f.__name__: f for f in [other_uids_kept_out]}))
