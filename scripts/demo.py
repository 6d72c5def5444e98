#!/usr/bin/python3
# SPDX-License-Identifier: GPL-2.0-or-later
"""nodeagent's demo: the real agent, the local test controller over real HTTPS, and
a few jobs sent through the long poll, printed as they come back."""
import base64
import json
import os
import subprocess
import sys
import time
import uuid

HERE = os.path.dirname(os.path.abspath(__file__))
SRC = os.path.dirname(HERE)
os.environ.setdefault("NA_SOURCE_DIR", SRC)
os.environ.setdefault("NA_BUILD_DIR", os.path.join(SRC, "build"))
sys.path.insert(0, os.path.join(SRC, "tests", "harness"))
from nodeagent_harness import Setup, Skip, make_cgroup_fixture, make_vm_assets, set_cgroup_counters  # noqa: E402
import vmreal  # noqa: E402

BOLD, DIM, RED, GREEN, RESET = ("\033[1m", "\033[2m", "\033[31m", "\033[32m", "\033[0m") if sys.stdout.isatty() else ("",) * 5


def summarize(kind, data):
    if kind == "node.status":
        h = data["host"]
        return (f"agent {data['agentVersion']}, up {data['uptimeSec']} s, host {h['hostname']} "
                f"({h['cpus']} CPUs, {h['memoryMB']} MB, kernel {h['kernel']}, cgroup {h['cgroup']})")
    if kind in ("vps.create", "vps.upgrade"):
        return (f"server {data['hostname']} is {data['state']}: {data['cpuCores']} cores, {data['ramMB']} MB, "
                f"{data['storageMB']} MB disk, {data['template']['id']} {data['template']['imageSlug']}, "
                f"MAC {data['macAddress']}")
    if kind == "vps.metrics":
        now = data["now"]
        return (f"now: CPU {now.get('cpuPercent', 0):.1f} %, memory {now.get('memoryUsedMB', 0):.0f} MB; "
                f"history: {len(data['series']['points'])} point(s) every {data['series']['step']} s")
    if kind in ("vps.firewall.set", "vps.firewall.get"):
        rules = "; ".join(f"#{r['id']} {r['type']} {r['protocol']} {r.get('port') or '*'} from {r['source']} "
                          f"{r['action']}{'' if r['enabled'] else ' (off)'}" for r in data["rules"])
        return (f"{'on' if data['enabled'] else 'off'}, inbound {data['inboundPolicy']}, outbound "
                f"{data['outboundPolicy']}: {rules}")
    if kind in ("app.deploy", "app.command.set", "app.update"):
        cmd = " ".join(data["command"]) if data.get("command") else "the template's"
        return (f"app {data['name']} ({data['hostname']}) version {data.get('version')} is {data['state']} on "
                f"{data.get('template', {}).get('image', '?')}: {data['plan']['cpuCores']} cores, "
                f"{data['plan']['memoryMB']} MB, {data['volumeQuotaMB']} MB volume; command: {cmd}")
    if kind == "vps.exec":
        return "\n".join([f"exit code {data['exitCode']}"] + [f"      {l}" for l in data["stdout"].splitlines()])
    if kind == "app.output":
        return "\n".join([f"{len(data['lines'])} line(s), nextSeq {data['nextSeq']}"] +
                         [f"      #{l['seq']} {l['stream']:6} {l['text']}" for l in data["lines"]])
    if kind == "app.status":
        return (f"{data['state']}, started {data['startedAt']}, exit code {data['exitCode']}, "
                f"{data['restarts']} restart(s), {data['memoryMB']} MB memory, {data['volumeUsedMB']} MB of volume used")
    if kind == "vps.snapshot.list":
        return ", ".join(f"{x['snapshotId']} ({x['name']})" for x in data) or "none"
    text = json.dumps(data)
    return text if len(text) < 160 else text[:157] + "..."


def run_job(s, title, kind, params=None, target=None, timeout=60):
    jid = s.controller.enqueue(kind, params or {}, target=target)
    t0 = time.time()
    print(f"{BOLD}→ {title}{RESET} {DIM}({kind}, job {jid[:8]}){RESET}", flush=True)
    seen = 0
    while time.time() - t0 < timeout:
        j = s.controller.admin("GET", f"/admin/jobs/{jid}")
        for p in j["progress"][seen:]:
            stage = p.get("stage", "")
            pct = f" {p['percent']}%" if "percent" in p else ""
            msg = f": {p['message']}" if p.get("message") else ""
            print(f"    {DIM}progress{RESET} {stage}{pct}{msg}", flush=True)
        seen = len(j["progress"])
        if j["results"]:
            r = j["results"][0]
            if r["status"] == "succeeded":
                print(f"    {GREEN}succeeded{RESET} in {r['durationMs']} ms: {summarize(kind, r.get('data', {}))}")
            else:
                e = r["error"]
                details = json.dumps(e.get("details")) if e.get("details") else ""
                print(f"    {RED}failed{RESET} {e['code']} (HTTP {e['httpStatus']}): {e['error']} {DIM}{details}{RESET}")
            return r
        time.sleep(0.05)
    print(f"    {RED}no result after {timeout} s{RESET}")
    return None


VPS = str(uuid.uuid4())
# Documentation addresses (RFC 5737, RFC 3849): the central API assigns the real ones.
NET = {"ipv4": [{"address": "203.0.113.10", "prefix": 24}], "ipv6": [{"address": "2001:db8:1::10", "prefix": 64}],
       "dns": ["192.0.2.53"]}
NET_CONSOLE = {"ipv4": [{"address": "203.0.113.11", "prefix": 24}]}


APP = str(uuid.uuid4())
APPS = os.geteuid() == 0  # containers need root: mounts, loop devices, user namespaces


def conf(s):
    root, dirs = make_cgroup_fixture(s.tmp, [VPS])
    s.cgroup_dir = dirs[VPS]
    c = {"vm": make_vm_assets(s.tmp), "metrics": {"interval_sec": 1, "cgroup_root": root}}
    if APPS:
        # A busybox image in an OCI layout (what skopeo or umoci would write), built here.
        os.chmod(s.tmp, 0o711)
        images = os.path.join(s.tmp, "app-images")
        subprocess.run([sys.executable, os.path.join(SRC, "tests", "harness", "mkimage.py"), "--layout",
                        os.path.join(images, "busybox"), "--tag", "1.36"], check=True, capture_output=True)
        c["apps"] = {"images_dir": images, "monitor": os.path.join(os.environ["NA_BUILD_DIR"], "monitor",
                                                                     "nodeagent-monitor")}
    return c


def console_part(s, app):
    """A live console: the agent dials the local relay (wss://, the test CA) and what
    flows both ways is printed as the relay sees it."""
    sid, token = str(uuid.uuid4()), uuid.uuid4().hex
    relay = s.controller.admin("POST", "/admin/relay/sessions", {"sessionId": sid, "token": token})
    seen = [0]

    def show(wait=1.0, until=None):
        t_end = time.time() + wait
        while time.time() < t_end:
            ans = s.controller.admin("GET", f"/admin/relay/{sid}?since={seen[0]}&timeout=0.3")
            for m in ans["messages"]:
                if m["op"] == "text":
                    ln = json.loads(m["text"])
                    print(f"    {DIM}relay ←{RESET} #{ln['seq']} {ln['stream']:6} {ln['text']}")
                    if until and until in ln["text"]:
                        t_end = 0
            seen[0] += len(ans["messages"])
            if ans["closed"]:
                c = ans["closed"]
                print(f"    {DIM}relay:{RESET} closed by the {c['by']}, code {c['code']} ({c['reason']})")
                return

    def type_in(frame):
        print(f"    {DIM}relay →{RESET} {json.dumps(frame)}")
        s.controller.admin("POST", f"/admin/relay/{sid}/send", {"text": json.dumps(frame)})

    run_job(s, "Open its live console (the agent dials the relay over wss://)", "console.open",
            {"sessionId": sid, "url": relay["url"], "token": token, "mode": "app", "idleSec": 60}, target=app)
    show(0.6)
    type_in({"type": "line", "line": "typed in the browser"})
    show(3, until="got: typed in the browser")
    type_in({"type": "power", "action": "restart"})
    show(8, until="power restart done")
    show(3, until="ready on")
    row = [c for c in json.loads(s.agent.ctl("status", "--json").stdout)["consoles"] if c["sessionId"] == sid]
    if row:
        r = row[0]
        print(f"    {DIM}nodeagentctl status:{RESET} {r['mode']} console to {r['peer']}, {r['framesOut']} frame(s) out, "
              f"{r['framesIn']} in, {r['dropped']} dropped")
    run_job(s, "Close the console", "console.close", {"sessionId": sid}, target=app)
    show(3)


DB = str(uuid.uuid4())
REALIMAGES = os.path.join(SRC, "tests", "harness", "realimages.py")


def database_part(s):
    """A real database image built from Debian's packages (redis-server, USER redis),
    prepared by demo.sh before the private namespace: deployed, given data, upgraded to
    its version 2 with a safety backup, then to a broken version that rolls back."""
    app = {"type": "app", "id": DB}
    print(f"\n{BOLD}A real database: Redis from Debian's packages, upgraded{RESET} {DIM}(app {DB}){RESET}")
    if not APPS:
        print(f"    {DIM}skipped: apps need root{RESET}")
        return
    images = os.path.join(s.tmp, "app-images")
    r = subprocess.run([sys.executable, REALIMAGES, "install", "redis", "--images-dir", images],
                       capture_output=True, text=True)
    if r.returncode != 0:
        print(f"    {DIM}skipped: the redis image is not built here ({r.stderr.strip()[-200:]}){RESET}")
        return
    tmpl = {"id": "redis", "image": "redis:1", "command": None, "customCommand": False, "volumePath": "/data",
            "startedPattern": "Ready to accept connections"}
    run_job(s, "Deploy redis:1 (the image's USER redis, its entrypoint, its stop signal)", "app.deploy",
            {"name": "cache", "hostname": "cache", "type": "database", "version": "1", "sftpUsername": "cache",
             "template": tmpl, "plan": {"cpuCores": 1, "memoryMB": 128, "volumeQuotaMB": 64}},
            target=app, timeout=300)
    run_job(s, "Start it", "app.power", {"action": "start"}, target=app, timeout=60)

    def cli(*args):
        crun_root = os.path.join(s.agent.state_dir, "apps", "crun")
        out = subprocess.run(["/usr/bin/crun", "--root", crun_root, "exec", f"na-{DB}", "redis-cli", *args],
                             capture_output=True, text=True).stdout.strip()
        print(f"    {DIM}redis-cli {' '.join(args)} (inside the app){RESET} → {out}")
        return out
    t_end = time.time() + 30
    while time.time() < t_end and cli("PING") != "PONG":
        time.sleep(1)
    cli("SET", "greeting", "hello from version 1")
    run_job(s, "Upgrade to redis:2 with a safety backup, watched for 10 s", "app.update",
            {"version": "2", "safetyBackupId": "before-2", "healthySec": 10, "template": dict(tmpl, image="redis:2")},
            target=app, timeout=300)
    cli("GET", "greeting")
    run_job(s, "Upgrade to a version that crashes at start: rolled back", "app.update",
            {"version": "3", "safetyBackupId": "before-3", "healthySec": 10,
             "template": dict(tmpl, image="redis:broken")}, target=app, timeout=300)
    t_end = time.time() + 30
    while time.time() < t_end and cli("PING") != "PONG":
        time.sleep(1)
    cli("GET", "greeting")
    run_job(s, "Its status", "app.status", target=app)
    run_job(s, "Delete it (its backups too)", "app.delete", target=app)


def app_part(s):
    app = {"type": "app", "id": APP}
    print(f"\n{BOLD}An app in a container on crun{RESET} {DIM}(app {APP}){RESET}")
    if not APPS:
        print(f"    {DIM}skipped: apps need root (mounts, loop devices, user namespaces){RESET}")
        return
    echo = ["/bin/sh", "-c", 'echo "ready on $(hostname), as uid $(id -u)"; '
            'while read l; do echo "got: $l"; [ "$l" = stop ] && echo bye && exit 0; done']
    run_job(s, "Deploy a console app from busybox:1.36", "app.deploy",
            {"name": "echo-bot", "hostname": "echo-bot", "type": "bot", "version": "1", "sftpUsername": "echo-bot",
             "template": {"id": "echo", "image": "busybox:1.36", "command": echo, "customCommand": True,
                          "stop": {"line": "stop"}, "startedPattern": "^ready"},
             "plan": {"cpuCores": 0.5, "memoryMB": 64, "volumeQuotaMB": 64}}, target=app, timeout=120)
    run_job(s, "Start it", "app.power", {"action": "start"}, target=app)
    time.sleep(0.5)
    run_job(s, "Send it a console line", "app.console.send", {"line": "hello from the panel"}, target=app)
    time.sleep(0.3)
    run_job(s, "Read its output", "app.output", target=app)
    run_job(s, "Its status", "app.status", target=app)
    console_part(s, app)
    run_job(s, "Stop it gracefully (its console line 'stop')", "app.power", {"action": "stop", "graceSec": 10},
            target=app)
    run_job(s, "Change its start command (takes effect at the next start)", "app.command.set",
            {"command": ["/bin/sh", "-c", "echo 'a new command, pid '$$; exec sleep 3600"]}, target=app)
    run_job(s, "Start it again", "app.power", {"action": "start"}, target=app)
    time.sleep(0.5)
    run_job(s, "Read its output (sequence numbers go on across runs)", "app.output", target=app)
    run_job(s, "A console line too long for the contract", "app.console.send", {"line": "x" * 5000}, target=app)
    run_job(s, "Delete it (container, root layer, volume, output, ids)", "app.delete", target=app)


GUESTIMAGE = os.path.join(SRC, "tests", "harness", "guestimage.py")


def real_server_part():
    """A whole Debian 12 server from Debian's packages (tests/harness/guestimage.py),
    when this machine has built it: created from the agent's NoCloud seed on a real
    libvirtd (TCG), its hostname and network read back through its guest agent."""
    print(f"\n{BOLD}A real Debian 12 server{RESET} {DIM}(a third agent, on qemu:///system){RESET}")
    key = subprocess.run([sys.executable, GUESTIMAGE, "key"], capture_output=True, text=True).stdout.strip()
    cache = os.path.join(os.environ.get("NODEAGENT_TEST_CACHE", "/var/cache/nodeagent-tests"), "guests")
    gdir = os.path.join(cache, f"debian12-{key}")
    if not os.path.exists(os.path.join(gdir, "done")):
        print(f"    {DIM}skipped: the Debian 12 guest is not built on this machine; "
              f"`sudo python3 tests/harness/guestimage.py build` makes it once from Debian's packages "
              f"(about 5 minutes; the tests do it too){RESET}")
        return True
    try:
        vmreal.prepare()
    except (Skip, AssertionError) as e:
        print(f"    {DIM}skipped: {e}{RESET}")
        return True
    vps_id = str(uuid.uuid4())
    vps = {"type": "vps", "id": vps_id}
    s = Setup(agent_conf=lambda s: {"vm": {"uri": vmreal.URI, "templates_file": os.path.join(gdir, "templates.json"),
                                           "images_dir": gdir, "domain_type": "qemu",
                                           "storage_dir": os.path.join(s.tmp, "disks")}})
    ok = False
    try:
        with open(os.path.join(gdir, "templates.json")) as f:
            t = json.load(f)[0]
        t0 = time.time()
        r = run_job(s, "Create web-real from the Debian 12 template (cloud-init, guest agent, OpenSSH)", "vps.create",
                    {"name": "web-real", "hostname": "web-real", "vmPassword": "Demo!passw0rd",
                     "plan": {"cpuCores": 1, "cpuThreads": 1, "ramMB": 768, "storageMB": 3072,
                              "networkSpeedLimitMbps": 0, "bandwidthLimitGb": 0, "maxSnapshots": 1},
                     "template": {"id": t["id"], "imageSlug": t["imageSlug"], "os": "linux"},
                     "network": {"ipv4": [{"address": "203.0.113.40", "prefix": 32}],
                                 "ipv6": [{"address": "2001:db8:1::40", "prefix": 64}], "dns": ["203.0.113.53"]}},
                    target=vps, timeout=300)
        answered = False
        while r and r["status"] == "succeeded" and time.time() - t0 < 300 and not answered:
            jid = s.controller.enqueue("vps.exec", {"command": ["/bin/true"], "timeoutSec": 10}, target=vps)
            answered = s.controller.wait_results([jid], 60)[jid]["results"][0]["status"] == "succeeded"
            if not answered:
                time.sleep(2)
        print(f"    {DIM}the guest agent answered {time.time() - t0:.1f} s after the create{RESET}")
        run_job(s, "Ask the guest its hostname and addresses (vps.exec through its guest agent)", "vps.exec",
                {"command": ["/bin/sh", "-c", "hostname; ip -br addr show eth0; cloud-init status"]}, target=vps)
        run_job(s, "Delete it", "vps.delete", target=vps, timeout=120)
        ok = True
    finally:
        s.agent.stop()
        vmreal.forget(vps_id)
        s.close(failed=not ok)
        vmreal.stop()
    return ok


def server_console_part():
    """A server's live consoles need a real hypervisor (libvirt's test driver has none):
    a real libvirtd boots the busybox TCG guest of tests/drivers/vm-real (built once from
    Debian's kernel and busybox, then cached), a second agent on qemu:///system
    creates it, and the relay sees its serial console and its VNC display."""
    print(f"\n{BOLD}A server's live consoles on a real TCG guest{RESET} {DIM}(a second agent, on qemu:///system){RESET}")
    try:
        vmreal.prepare()
    except Skip as e:
        print(f"    {DIM}skipped: {e}{RESET}")
        return True
    except AssertionError as e:
        print(f"    {RED}skipped: {e}{RESET}")
        return True
    vps_id = str(uuid.uuid4())
    vps = {"type": "vps", "id": vps_id}
    s = Setup(agent_conf=vmreal.agent_conf)
    ok = False
    try:
        r = run_job(s, "Create console-1 from the busybox guest", "vps.create",
                    {"name": "console-1", "hostname": "console-1", "template": vmreal.TEMPLATE, "network": NET_CONSOLE,
                     "plan": {"cpuCores": 1, "cpuThreads": 1, "ramMB": 256, "storageMB": 256,
                              "networkSpeedLimitMbps": 0, "bandwidthLimitGb": 1000, "maxSnapshots": 1},
                     "vmPassword": "Sup3r!secret"}, target=vps, timeout=180)
        t0 = time.time()
        while r and r["status"] == "succeeded" and not vmreal.booted(s, vps_id) and time.time() - t0 < 120:
            time.sleep(0.2)
        print(f"    {DIM}the guest printed its boot marker after {time.time() - t0:.1f} s{RESET}")

        def relay_session(mode):
            sid, token = str(uuid.uuid4()), uuid.uuid4().hex
            relay = s.controller.admin("POST", "/admin/relay/sessions", {"sessionId": sid, "token": token})
            run_job(s, f"Open its {mode} console", "console.open",
                    {"sessionId": sid, "url": relay["url"], "token": token, "mode": mode, "idleSec": 60}, target=vps)
            return sid

        def received(sid, until, wait=20.0):
            """The bytes the relay got so far, once until(bytes) holds (or after wait)."""
            data, t_end = b"", time.time() + wait
            while time.time() < t_end and not until(data):
                ans = s.controller.admin("GET", f"/admin/relay/{sid}?since=0&timeout=0.3")
                data = b"".join(base64.b64decode(m["b64"]) for m in ans["messages"] if m["op"] == "binary")
            return data

        def send(sid, raw):
            print(f"    {DIM}relay →{RESET} {raw!r}")
            s.controller.admin("POST", f"/admin/relay/{sid}/send", {"b64": base64.b64encode(raw).decode()})

        ser = relay_session("vps-serial")
        send(ser, b"typed on the serial console\r")
        got = received(ser, lambda d: b"typed on the serial console" in d)
        print(f"    {DIM}relay ←{RESET} {len(got)} byte(s) of the guest's tty, echo "
              f"{'seen' if b'typed on the serial console' in got else 'NOT seen'}: "
              f"{got[-60:].decode(errors='replace')!r}")
        vnc = relay_session("vps-vnc")
        got = received(vnc, lambda d: b"\n" in d, 10)
        print(f"    {DIM}relay ←{RESET} {got[:12]!r} (the display's RFB greeting)")
        if got.startswith(b"RFB 003.008"):
            send(vnc, b"RFB 003.008\n")
            more = received(vnc, lambda d: len(d) > 13, 10)
            print(f"    {DIM}relay ←{RESET} security types {list(more[13:13 + more[12]]) if len(more) > 12 else []} "
                  f"(1 = none: the display listens on the node only)")
        print(f"    {DIM}nodeagentctl status:{RESET} " + ", ".join(
            f"{c['mode']} {c['framesOut']} out/{c['framesIn']} in" for c in s.agent.status()["consoles"]))
        run_job(s, "Close the VNC console", "console.close", {"sessionId": vnc}, target=vps)
        run_job(s, "Delete the server (its serial console ends with it)", "vps.delete", target=vps, timeout=120)
        ans = s.controller.admin("GET", f"/admin/relay/{ser}?since=0&timeout=5")
        if ans["closed"]:
            print(f"    {DIM}relay:{RESET} serial console closed, code {ans['closed']['code']} "
                  f"({ans['closed']['reason']})")
        rc = s.agent.stop()
        print(f"second agent stopped on SIGTERM with exit status {rc}")
        ok = True
    finally:
        vmreal.forget(vps_id)
        s.close(failed=not ok)
        vmreal.stop()
    return ok


def main():
    netns = "--no-netns" not in sys.argv
    s = Setup(agent_conf=conf)
    ok = False
    try:
        print(f"{BOLD}nodeagent demo{RESET}")
        print(f"  controller  {s.controller.url} (the project's test controller, its own CA, mutual token)")
        print(f"  agent       node {s.node_id}, state in {s.agent.state_dir}")
        print(f"  network     {'a private network namespace' if netns else 'the host network (no firewall part)'}")
        print()
        run_job(s, "Ask the node how it is", "node.status")
        run_job(s, "A kind this agent does not know", "vps.teleport", target={"type": "vps", "id": str(uuid.uuid4())})
        vps = {"type": "vps", "id": VPS}
        plan = {"cpuCores": 2, "cpuThreads": 1, "ramMB": 2048, "storageMB": 20480, "networkSpeedLimitMbps": 1000,
                "bandwidthLimitGb": 2000, "maxSnapshots": 3}
        print(f"\n{BOLD}A server on libvirt's test hypervisor{RESET} {DIM}(vps {VPS}){RESET}")
        run_job(s, "Create web-1 from Debian 12", "vps.create",
                {"name": "web-1", "hostname": "web-1", "plan": plan,
                 "template": {"id": "debian-12", "imageSlug": "2024.11", "os": "linux"}, "network": NET,
                 "vmPassword": "Demo!passw0rd"}, target=vps)
        run_job(s, "Stop it (ACPI, then forced after graceSec)", "vps.power", {"action": "stop", "graceSec": 5},
                target=vps)
        run_job(s, "Start it", "vps.power", {"action": "start"}, target=vps)
        run_job(s, "Start it again (converges)", "vps.power", {"action": "start"}, target=vps)
        run_job(s, "Snapshot it", "vps.snapshot.create", {"snapshotId": "before-upgrade", "name": "before upgrade",
                                                          "maxSnapshots": 3}, target=vps)
        run_job(s, "List its snapshots", "vps.snapshot.list", target=vps)
        run_job(s, "Reinstall with a bad hostname and a weak password", "vps.reinstall",
                {"hostname": "-web-", "vmPassword": "weak"}, target=vps)
        run_job(s, "Reinstall with Ubuntu 24.04", "vps.reinstall",
                {"templateId": "ubuntu-24.04", "templateImageSlug": "2024.10", "hostname": "web-2",
                 "vmPassword": "N3w!passw0rd"}, target=vps)
        if netns:
            fw = {"enabled": True, "inboundPolicy": "deny", "outboundPolicy": "allow", "rules": [
                {"type": "inbound", "protocol": "tcp", "port": "22", "source": "203.0.113.0/24", "destination": "any",
                 "action": "allow", "enabled": True, "comment": "ssh from the office"},
                {"type": "inbound", "protocol": "tcp", "port": "80,443", "source": "any", "destination": "any",
                 "action": "allow", "enabled": True, "comment": "web"},
                {"type": "inbound", "protocol": "icmp", "port": "", "source": "any", "destination": "any",
                 "action": "allow", "enabled": True, "comment": "ping"}]}
            run_job(s, "Set its firewall (one netlink batch)", "vps.firewall.set", fw, target=vps)
            run_job(s, "Read it back from the kernel", "vps.firewall.get", target=vps)
            listing = subprocess.run(["nft", "list", "ruleset"], capture_output=True, text=True).stdout
            chain = [l for l in listing.splitlines() if l.strip().startswith("chain nav") and "-in {" in l]
            print(f"    {DIM}nft list ruleset (shard tables nodeagent-00..15): {len(listing.splitlines())} lines, "
                  f"{chain[0].strip() if chain else ''} ...{RESET}")
        run_job(s, "Back it up", "vps.backup.create", {"backupId": "nightly-1", "limits": {
                "maxStorageGB": 10, "maxBackups": 3, "retentionDays": 7}}, target=vps)
        for i in range(1, 5):  # the test hypervisor runs no QEMU: its cgroup is a fixture we advance
            set_cgroup_counters(s.cgroup_dir, i * 300000, i * 65536)
            time.sleep(0.6)
        run_job(s, "Its metrics", "vps.metrics", target=vps)
        run_job(s, "A job with bad parameters", "vps.power", {"action": "explode"}, target=vps)
        app_part(s)
        database_part(s)
        print()
        st = s.agent.status()
        print(f"{BOLD}nodeagentctl status{RESET}")
        print(s.agent.ctl("status").stdout)
        print(f"{BOLD}nodeagentctl jobs{RESET}")
        print(s.agent.ctl("jobs").stdout)
        rc = s.agent.stop()
        print(f"agent stopped on SIGTERM with exit status {rc}; "
              f"{st['jobs']['succeeded']} job(s) succeeded, {st['jobs']['failed']} failed as expected")
        ok = True
    finally:
        s.close(failed=not ok)
    ok = ok and server_console_part()
    ok = ok and real_server_part()
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
