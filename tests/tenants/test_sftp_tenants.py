#!/usr/bin/python3
# SPDX-License-Identifier: GPL-2.0-or-later
"""Hostile SFTP tenants (issue 20, attacks 1, 2, 6 and 9) against the real agent and
nodeagent-sftpd, with OpenSSH's ssh and sftp as the clients:

- read_flood: a logged-in user pipelines tens of thousands of 256 KiB READs and never
  reads a reply; the session's memory stays small (and is capped).
- slots_and_idle: 256 idle TCP connections from one address leave the node's other
  users their logins (a real client from another address logs in and works), and an
  idle logged-in session is closed after [apps] sftp_idle_timeout_sec.
- revoked_sessions: app.sftp.set (read-only, new keys, disabled) and app.delete end the
  app's open sessions at once; app.delete no longer fails while one is open; another
  app's open session is untouched.
- user_delayed: 10 bad passwords for a user from one address block that address but
  only delay the user: the right key from another address still logs in.

A raw SFTP channel is `ssh -s ... sftp` with its stdin and stdout as pipes: this script
writes SFTP packets and reads (or does not read) the replies."""
import os
import socket
import struct
import subprocess
import sys
import threading
import time
import uuid

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "harness"))
sys.path.insert(0, os.path.join(HERE, "..", "agent", "kinds", "apps"))
from nodeagent_harness import BUILD, check, free_port, needs, run_cases, wait_for, with_setup  # noqa: E402
from test_apps import apps_conf, app_job, deploy_params, failed, need_root, ok  # noqa: E402

PORT = free_port()
IDLE_SEC = 4


def conf(s, idle=IDLE_SEC):
    c = apps_conf(s)
    c["apps"].update({"sftp_listen": f"0.0.0.0:{PORT}", "sftp_host": "sftp.test",
                      "sftpd": os.path.join(BUILD, "sftp", "nodeagent-sftpd"),
                      "sftp_idle_timeout_sec": str(idle)})
    return c


FLOOD_IDLE_SEC = 20


def flood_conf(s):
    return conf(s, FLOOD_IDLE_SEC)


def listening():
    try:
        socket.create_connection(("127.0.0.1", PORT), 0.5).close()
        return True
    except OSError:
        return False


def ppid_of(pid):
    try:
        with open(f"/proc/{pid}/stat") as f:
            return int(f.read().rsplit(")", 1)[1].split()[1])
    except (OSError, ValueError):
        return None


def cmd_of(pid):
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            return f.read().split(b"\0")[0]
    except OSError:
        return b""


def listener(s):
    """This agent's nodeagent-sftpd listener: its child, or under sandbox = strict its exec helper's
    (a listener of an earlier test may still be ending its sessions)."""
    agent = s.agent.proc.pid
    for pid in os.listdir("/proc"):
        if pid.isdigit() and cmd_of(pid).endswith(b"/nodeagent-sftpd"):
            parent = ppid_of(pid)
            if parent == agent or (parent and ppid_of(parent) == agent and
                                   not cmd_of(parent).endswith(b"/nodeagent-sftpd")):
                return int(pid)
    return None


def children(pid):
    return [int(p) for p in os.listdir("/proc") if p.isdigit() and ppid_of(p) == pid]


def sessions(s):
    """The listener's session processes (one a connection: its monitor)."""
    return children(listener(s))


def tree(pid):
    """pid and its descendants (a session's monitor and network half)."""
    out = [pid]
    for c in children(pid):
        out += tree(c)
    return out


def status_kb(pid, field):
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                if line.startswith(field + ":"):
                    return int(line.split()[1])
    except OSError:
        pass
    return 0


def sanitized():
    try:
        return "NA_SANITIZE:BOOL=ON" in open(os.path.join(BUILD, "CMakeCache.txt")).read()
    except OSError:
        return False


def clean_log(s):
    """No sanitizer report from the agent or nodeagent-sftpd (their stderr is the agent's log)."""
    log = s.agent.log_text()
    check("Sanitizer" not in log and "runtime error:" not in log, log[-4000:])


def keypair(s, name):
    path = os.path.join(s.tmp, name)
    subprocess.run(["/usr/bin/ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", path, "-C", name], check=True)
    return path, open(path + ".pub").read().strip()


def volume(s, app):
    return os.path.join(s.agent.state_dir, "apps", "apps", app, "disk", "volume")


def ssh_opts(key, source="127.0.0.1", password=False):
    common = ["-o", f"Port={PORT}", "-o", "StrictHostKeyChecking=no", "-o", "UserKnownHostsFile=/dev/null",
              "-o", "LogLevel=ERROR", "-o", "ConnectTimeout=10", "-o", f"BindAddress={source}"]
    if password:
        return common + ["-o", "PubkeyAuthentication=no", "-o", "NumberOfPasswordPrompts=1"]
    return common + ["-i", key, "-o", "IdentitiesOnly=yes", "-o", "BatchMode=yes", "-o", "PasswordAuthentication=no"]


def sftp(s, user, key, cmds, source="127.0.0.1", password=None):
    batch = os.path.join(s.tmp, "batch")
    with open(batch, "w") as f:
        f.write("\n".join(cmds) + "\n")
    env = dict(os.environ)
    cmd = ["/usr/bin/sftp", "-b", batch] + ssh_opts(key, source)
    if password is not None:
        # BatchMode=no before -b: sftp's -b adds BatchMode=yes, and ssh keeps the first value given.
        cmd = ["/usr/bin/sshpass", "-e", "/usr/bin/sftp", "-o", "BatchMode=no", "-b", batch] + \
              ssh_opts(key, source, password=True)
        env["SSHPASS"] = password
    r = subprocess.run(cmd + [f"{user}@127.0.0.1"], capture_output=True, text=True, timeout=90, cwd=s.tmp, env=env)
    return r.returncode, r.stdout + r.stderr


def sftp_ok(s, user, key, cmds, **kw):
    rc, out = sftp(s, user, key, cmds, **kw)
    check(rc == 0, (cmds, out))
    return out


class Raw:
    """One SFTP v3 channel over OpenSSH's ssh: packets written and read by hand."""

    def __init__(self, user, key, source="127.0.0.1"):
        self.p = subprocess.Popen(["/usr/bin/ssh"] + ssh_opts(key, source) + ["-s", f"{user}@127.0.0.1", "sftp"],
                                  stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        self.id = 0
        self.send(1, struct.pack(">I", 3))  # INIT, version 3
        t, _ = self.recv()
        check(t == 2, ("no VERSION", t))

    def send(self, ptype, body):
        self.p.stdin.write(struct.pack(">IB", len(body) + 1, ptype) + body)
        self.p.stdin.flush()

    def recv(self):
        head = self.p.stdout.read(4)
        if len(head) < 4:
            return None, b""
        data = self.p.stdout.read(struct.unpack(">I", head)[0])
        return data[0], data[1:]

    def request(self, ptype, body):
        self.id += 1
        self.send(ptype, struct.pack(">I", self.id) + body)
        return self.recv()

    @staticmethod
    def s(b):
        return struct.pack(">I", len(b)) + b

    def open(self, path, flags):
        t, body = self.request(3, self.s(path.encode()) + struct.pack(">II", flags, 0))
        check(t == 102, ("OPEN", path, t, body))
        return body[8:8 + struct.unpack(">I", body[4:8])[0]]

    def write(self, handle, off, data):
        """The SFTP status code, or None when the connection is gone."""
        try:
            t, body = self.request(6, self.s(handle) + struct.pack(">Q", off) + self.s(data))
        except (BrokenPipeError, OSError):
            return None
        return struct.unpack(">I", body[4:8])[0] if t == 101 else None

    def alive(self):
        return self.p.poll() is None

    def close(self):
        for f in (self.p.stdin, self.p.stdout, self.p.stderr):
            try:
                f.close()
            except OSError:
                pass
        if self.p.poll() is None:
            self.p.kill()
        self.p.wait()


def deploy_with_key(s, app, user):
    ok(app_job(s, "app.deploy", app, deploy_params(sftpUsername=user, plan={"volumeQuotaMB": 64}), timeout=120))
    key, pub = keypair(s, user + "_key")
    ok(app_job(s, "app.sftp.set", app, {"enabled": True, "publicKeys": [pub]}))
    return key, pub


@needs("root")
@with_setup(agent_conf=flood_conf)
def read_flood(s):
    """Attack 1: pipelined READs of a 256 KiB file, replies never read."""
    need_root()
    wait_for(listening, 10, "nodeagent-sftpd listening")
    a = str(uuid.uuid4())
    key, _ = deploy_with_key(s, a, "flood")
    with open(os.path.join(volume(s, a), "big.bin"), "wb") as f:
        f.write(os.urandom(256 * 1024))
    os.chown(os.path.join(volume(s, a), "big.bin"), os.stat(volume(s, a)).st_uid, os.stat(volume(s, a)).st_gid)
    before = set(sessions(s))
    raw = Raw("flood", key)
    mine = [p for p in sessions(s) if p not in before and children(p)]
    check(len(mine) == 1, ("one session", mine))
    pid = mine[0]
    idle_rss = sum(status_kb(p, "VmRSS") for p in tree(pid))
    idle_data = sum(status_kb(p, "VmData") for p in tree(pid))
    h = raw.open("big.bin", 1)
    n = int(os.environ.get("SFTP_TENANT_READS", "45000"))
    reqs = b"".join(struct.pack(">IBI", 21 + len(h), 5, 1000 + i) + Raw.s(h) + struct.pack(">QI", 0, 256 * 1024)
                    for i in range(n))

    def pump():
        try:
            raw.p.stdin.write(reqs)
            raw.p.stdin.flush()
        except OSError:
            pass
    t = threading.Thread(target=pump, daemon=True)
    t.start()
    peak = 0
    end = time.monotonic() + 8
    while time.monotonic() < end and os.path.exists(f"/proc/{pid}"):
        procs = tree(pid)
        peak = max(peak, sum(status_kb(p, "VmRSS") for p in procs), *(status_kb(p, "VmHWM") for p in procs))
        time.sleep(0.1)
    print(f"session {pid} ({len(tree(pid))} processes): VmRSS {idle_rss} kB (VmData {idle_data} kB) after login; "
          f"peak {peak} kB over 8 s "
          f"under {n} pipelined 256 KiB READs ({len(reqs)} bytes of requests, replies unread)")
    check(os.path.exists(f"/proc/{pid}"), "the session ended before its idle timeout")
    check(peak < 64 * 1024, f"the session grew to {peak} kB")
    # Each session's data is capped ([apps] sftp_session_memory_mb, 128 MiB; not under ASan).
    for p in tree(pid):
        limits = [line.split() for line in open(f"/proc/{p}/limits") if line.startswith("Max data size")][0]
        check(sanitized() or limits[3:5] == [str(128 << 20)] * 2, limits)
    # The neighbour's session works meanwhile, and the flooding one ends with its idle timeout.
    b = str(uuid.uuid4())
    bkey, _ = deploy_with_key(s, b, "calm")
    out = sftp_ok(s, "calm", bkey, ["put " + os.path.join(s.tmp, "flood_key.pub") + " k.pub", "ls"])
    check("k.pub" in out, out)
    wait_for(lambda: not os.path.exists(f"/proc/{pid}") or status_kb(pid, "VmRSS") == 0, FLOOD_IDLE_SEC + 15,
             "the flooding session closed as idle")
    raw.close()
    check("idle" in s.agent.log_text(), s.agent.log_text()[-2000:])
    clean_log(s)


@needs("root")
@with_setup(agent_conf=conf)
def slots_and_idle(s):
    """Attack 2: 256 idle TCP connections from one address; an idle session after login."""
    need_root()
    wait_for(listening, 10, "nodeagent-sftpd listening")
    a = str(uuid.uuid4())
    key, _ = deploy_with_key(s, a, "victim")
    held = []
    for _ in range(256):
        c = socket.socket()
        c.bind(("127.0.0.1", 0))
        try:
            c.connect(("127.0.0.1", PORT))
        except OSError:
            c.close()
            continue
        held.append(c)
    time.sleep(1)
    print(f"{len(held)} idle TCP connections made from 127.0.0.1; "
          f"{len(sessions(s))} session processes hold them")
    t0 = time.monotonic()
    with open(os.path.join(s.tmp, "up.txt"), "w") as f:
        f.write("from another address\n")
    out = sftp_ok(s, "victim", key, ["put up.txt", "ls -l"], source="127.0.0.2")
    check("up.txt" in out, out)
    print(f"a client from 127.0.0.2 logged in and worked in {time.monotonic() - t0:.2f} s")
    check(open(os.path.join(volume(s, a), "up.txt")).read() == "from another address\n")
    check(len(sessions(s)) <= 16, ("session processes held by one address", len(sessions(s))))
    for c in held:
        c.close()
    lines = s.agent.log_text().count("sftpd: refused from=127.0.0.1")
    print(f"{lines} log lines for the refused connections (at most one a second)")
    check(lines < 20, s.agent.log_text()[-3000:])
    wait_for(lambda: "more connections refused (not logged one by one)" in s.agent.log_text(), 5,
             "the count of refused connections not logged")
    # An idle logged-in session is closed after sftp_idle_timeout_sec.
    raw = Raw("victim", key, source="127.0.0.2")
    t0 = time.monotonic()
    wait_for(lambda: not raw.alive(), IDLE_SEC + 10, "the idle session closed")
    print(f"the idle session was closed after {time.monotonic() - t0:.1f} s (sftp_idle_timeout_sec = {IDLE_SEC})")
    raw.close()
    # A session that keeps working is not idle.
    raw = Raw("victim", key, source="127.0.0.2")
    h = raw.open("busy.txt", 2 | 8)
    for i in range(IDLE_SEC * 3):
        check(raw.write(h, i, b"x") == 0, "a busy session was closed")
        time.sleep(0.5)
    raw.close()
    clean_log(s)


@needs("root")
@with_setup(agent_conf=conf)
def revoked_sessions(s):
    """Attack 6: open sessions outlive app.sftp.set and block app.delete."""
    need_root()
    wait_for(listening, 10, "nodeagent-sftpd listening")
    a, b = str(uuid.uuid4()), str(uuid.uuid4())
    key, pub = deploy_with_key(s, a, "alpha")
    bkey, _ = deploy_with_key(s, b, "beta")
    neighbour = Raw("beta", bkey)
    nh = neighbour.open("n.txt", 2 | 8)
    check(neighbour.write(nh, 0, b"n") == 0)

    def revoked(params, what):
        raw = Raw("alpha", key)
        h = raw.open("w.txt", 2 | 8)
        check(raw.write(h, 0, b"before") == 0)
        ok(app_job(s, "app.sftp.set", a, params))
        code = raw.write(h, 0, b"after!")
        check(code is None, f"{what}: the open session still wrote (status {code})")
        wait_for(lambda: not raw.alive(), 5, f"{what}: the session ended")
        raw.close()
        print(f"{what}: the open session was ended by the job")

    revoked({"enabled": True, "readOnly": True}, "read-only")
    check(open(os.path.join(volume(s, a), "w.txt")).read() == "before")
    ok(app_job(s, "app.sftp.set", a, {"enabled": True, "readOnly": False}))
    _, pub2 = keypair(s, "alpha_key2")
    revoked({"enabled": True, "publicKeys": [pub2, pub]}, "keys replaced")
    revoked({"enabled": False}, "disabled")
    ok(app_job(s, "app.sftp.set", a, {"enabled": True}))
    raw = Raw("alpha", key)
    h = raw.open("w2.txt", 2 | 8)
    check(raw.write(h, 0, b"open") == 0)
    t0 = time.monotonic()
    ok(app_job(s, "app.delete", a, timeout=120))
    print(f"app.delete with a session open succeeded in {time.monotonic() - t0:.2f} s")
    check(raw.write(h, 0, b"after delete") is None, "the session outlived app.delete")
    raw.close()
    # The neighbour's session was never touched.
    check(neighbour.alive() and neighbour.write(nh, 1, b"m") == 0, "the neighbour's session was ended")
    neighbour.close()
    check(open(os.path.join(volume(s, b), "n.txt")).read() == "nm")
    ok(app_job(s, "app.delete", b, timeout=120))
    clean_log(s)


@needs("root")
@with_setup(agent_conf=conf)
def user_delayed(s):
    """Attack 9 (real client part): failures block an address, only delay a user."""
    need_root()
    wait_for(listening, 10, "nodeagent-sftpd listening")
    a = str(uuid.uuid4())
    key, _ = deploy_with_key(s, a, "target")
    for _ in range(10):
        rc, _ = sftp(s, "target", key, ["ls"], source="127.0.0.3", password="wrong")
        check(rc != 0)
    rc, _ = sftp(s, "target", key, ["ls"], source="127.0.0.3")
    check(rc != 0, "the attacking address was not refused")
    t0 = time.monotonic()
    sftp_ok(s, "target", key, ["ls"], source="127.0.0.4")
    print(f"the user logged in from another address after {time.monotonic() - t0:.2f} s (delayed, not locked out)")
    log = s.agent.log_text()
    check("delay" in log, log[-2000:])
    ok(app_job(s, "app.delete", a, timeout=120))
    clean_log(s)


def status_field(pid, field):
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith(field + ":"):
                return line.split()[1:]
    return []


@needs("root")
@with_setup(agent_conf=conf)
def privsep(s):
    """Before login the network-facing process is not root: nobody in its own user namespace, an
    empty root, an allow-list; only its monitor (no network) is root. After login it runs as the
    app's uid with no capability."""
    need_root()
    wait_for(listening, 10, "nodeagent-sftpd listening")
    a = str(uuid.uuid4())
    key, _ = deploy_with_key(s, a, "sep")
    before = set(sessions(s))
    c = socket.create_connection(("127.0.0.1", PORT))
    check(c.recv(4).startswith(b"SSH-"), "no banner")
    # The connection's monitor: a new session process with a child (a probe's may still be ending).
    def split():
        return [p for p in sessions(s) if p not in before and children(p)]
    wait_for(split, 5, "the connection's monitor and network half")
    mon = split()[0]
    net = children(mon)[0]
    print(f"before login: monitor {mon} uid {status_field(mon, 'Uid')}, network half {net} uid "
          f"{status_field(net, 'Uid')} seccomp {status_field(net, 'Seccomp')} root {os.listdir(f'/proc/{net}/root')}")
    check(status_field(mon, "Uid") == ["0"] * 4)
    check(status_field(net, "Uid") == ["65534"] * 4 and status_field(net, "Gid") == ["65534"] * 4,
          ("the network half is not nobody", status_field(net, "Uid")))
    check(os.readlink(f"/proc/{net}/ns/user") != os.readlink("/proc/self/ns/user"), "no user namespace of its own")
    check(os.listdir(f"/proc/{net}/root") == [], "the network half's root is not empty")
    check(status_field(net, "Seccomp") == ["2"] and status_field(net, "NoNewPrivs") == ["1"])
    c.close()
    # Logged in: the app's uid, no capability, two filters.
    uid = os.stat(volume(s, a)).st_uid
    before = set(sessions(s))
    raw = Raw("sep", key)
    mon = split()[0]
    net = children(mon)[0]
    print(f"after login: network half {net} uid {status_field(net, 'Uid')} CapEff {status_field(net, 'CapEff')} "
          f"filters {status_field(net, 'Seccomp_filters')}")
    check(status_field(net, "Uid") == [str(uid)] * 4, (status_field(net, "Uid"), uid))
    check(status_field(net, "CapEff") == ["0000000000000000"] and status_field(net, "CapPrm") == ["0000000000000000"])
    check(status_field(net, "Seccomp_filters") == ["2"])
    h = raw.open("sep.txt", 2 | 8)
    check(raw.write(h, 0, b"separated") == 0)
    raw.close()
    check(open(os.path.join(volume(s, a), "sep.txt")).read() == "separated")
    check(os.stat(os.path.join(volume(s, a), "sep.txt")).st_uid == uid)
    clean_log(s)


if __name__ == "__main__":
    sys.exit(run_cases({f.__name__: f for f in [read_flood, slots_and_idle, revoked_sessions, user_delayed,
                                                 privsep]}))
