#!/usr/bin/python3
# SPDX-License-Identifier: GPL-2.0-or-later
"""SFTP for apps end to end (issue 11 item 4): the real agent and nodeagent-sftpd,
app.sftp.set through the controller link, and OpenSSH's sftp client in batch mode
logging in with a password (sshpass) and with a key: core operations, the volume's
walls (another app's files, '..', absolute paths, a link to /etc), read-only,
disabled, file access refused, the quota through an upload, and the failed-login
limit."""
import os
import socket
import subprocess
import sys
import uuid

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "harness"))
sys.path.insert(0, os.path.join(HERE, "..", "agent", "kinds", "apps"))
from nodeagent_harness import BUILD, check, free_port, needs, run_cases, wait_for, with_setup  # noqa: E402
from test_apps import apps_conf, app_job, deploy_params, failed, need_root, ok  # noqa: E402

PORT = free_port()


def sftp_conf(s):
    conf = apps_conf(s)
    conf["apps"].update({"sftp_listen": f"127.0.0.1:{PORT}", "sftp_host": "sftp.test",
                         "sftpd": os.path.join(BUILD, "sftp", "nodeagent-sftpd")})
    return conf


def listening():
    try:
        socket.create_connection(("127.0.0.1", PORT), 0.5).close()
        return True
    except OSError:
        return False


def sftpd_pid(s):
    """The agent's nodeagent-sftpd listener (a child of the agent, or under sandbox = strict of
    its exec helper, the agent's child), or None."""
    parents = {s.agent.proc.pid}
    for pid in os.listdir("/proc"):
        try:
            with open(f"/proc/{pid}/stat") as f:
                if int(f.read().rsplit(")", 1)[1].split()[1]) == s.agent.proc.pid:
                    parents.add(int(pid))
        except (OSError, ValueError):
            continue
    for pid in os.listdir("/proc"):
        try:
            with open(f"/proc/{pid}/stat") as f:
                stat = f.read()
            with open(f"/proc/{pid}/cmdline", "rb") as f:
                cmd = f.read().split(b"\0")
        except OSError:
            continue
        ppid = int(stat.rsplit(")", 1)[1].split()[1])
        if ppid in parents and cmd[0].endswith(b"/nodeagent-sftpd") and stat.split()[2] != "Z":
            return int(pid)
    return None


def sftp(s, user, cmds, password=None, key=None):
    """Run `sftp -b` with cmds as user; (exit code, output)."""
    batch = os.path.join(s.tmp, "batch")
    with open(batch, "w") as f:
        f.write("\n".join(cmds) + "\n")
    opts = ["-b", batch, "-P", str(PORT), "-o", "StrictHostKeyChecking=no", "-o", "UserKnownHostsFile=/dev/null",
            "-o", "LogLevel=ERROR", "-o", "ConnectTimeout=10"]
    env = dict(os.environ)
    if password is not None:
        # BatchMode=no before -b: sftp's -b adds BatchMode=yes, and ssh keeps the first value given.
        cmd = ["/usr/bin/sshpass", "-e", "/usr/bin/sftp", "-o", "BatchMode=no", *opts, "-o",
               "PubkeyAuthentication=no", "-o", "NumberOfPasswordPrompts=1"]
        env["SSHPASS"] = password
    else:
        cmd = ["/usr/bin/sftp", *opts, "-i", key, "-o", "IdentitiesOnly=yes", "-o", "PasswordAuthentication=no",
               "-o", "KbdInteractiveAuthentication=no"]
    r = subprocess.run(cmd + [f"{user}@127.0.0.1"], capture_output=True, text=True, env=env, timeout=60,
                       cwd=s.local)
    return r.returncode, r.stdout + r.stderr


def sftp_ok(s, user, cmds, **kw):
    rc, out = sftp(s, user, cmds, **kw)
    check(rc == 0, (cmds, out))
    return out


def sftp_fails(s, user, cmds, **kw):
    rc, out = sftp(s, user, cmds, **kw)
    check(rc != 0, (cmds, out))
    if os.environ.get("SFTP_TEST_VERBOSE"):
        print("refused as expected:", cmds, out.strip().replace("\n", " | ")[-300:])
    return out


def keypair(s, name, kind="ed25519", bits=None):
    path = os.path.join(s.tmp, name)
    args = ["/usr/bin/ssh-keygen", "-q", "-t", kind, "-N", "", "-f", path, "-C", name]
    if bits:
        args += ["-b", str(bits)]
    subprocess.run(args, check=True)
    return path, open(path + ".pub").read().strip()


def crypt_hash(password):
    return subprocess.run(["/usr/bin/openssl", "passwd", "-6", "-stdin"], input=password, capture_output=True,
                          text=True, check=True).stdout.strip()


def volume(s, app):
    return os.path.join(s.agent.state_dir, "apps", "apps", app, "disk", "volume")


def users_file(s, user):
    return os.path.join(s.agent.state_dir, "apps", "sftp", "users", user + ".json")


@needs("root")
@with_setup(agent_conf=sftp_conf)
def sftp_end_to_end(s):
    need_root()
    s.local = os.path.join(s.tmp, "local")
    os.makedirs(s.local)
    check("app.sftp.set" in s.controller.hello()["capabilities"]["jobKinds"])
    wait_for(listening, 10, "nodeagent-sftpd listening")
    # The agent starts it again when it exits.
    first = sftpd_pid(s)
    os.kill(first, 9)
    wait_for(lambda: sftpd_pid(s) not in (None, first) and listening(), 15, "nodeagent-sftpd started again")
    check("nodeagent-sftpd was killed by signal 9; starting it again" in s.agent.log_text())
    a, b = str(uuid.uuid4()), str(uuid.uuid4())
    ok(app_job(s, "app.deploy", a, deploy_params(sftpUsername="alpha", plan={"volumeQuotaMB": 32}), timeout=120))
    check(ok(app_job(s, "app.deploy", b, deploy_params(sftpUsername="beta"), timeout=120))["sftpEnabled"] is False)
    key, pub = keypair(s, "alpha_key")
    bkey, bpub = keypair(s, "beta_key")
    _, weak = keypair(s, "weak", "rsa", 1024)

    # Bad input: VALIDATION_ERROR on the field, nothing written.
    e = failed(app_job(s, "app.sftp.set", a, {"enabled": True, "passwordHash": "secret"}), "VALIDATION_ERROR")
    check("passwordHash" in e["details"], e)
    e = failed(app_job(s, "app.sftp.set", a, {"enabled": True, "publicKeys": [pub, "ssh-ed25519 AAAAnot-a-key"]}),
               "VALIDATION_ERROR")
    check("1" in e["details"].get("publicKeys", {}), e)
    e = failed(app_job(s, "app.sftp.set", a, {"enabled": True, "publicKeys": [weak]}), "VALIDATION_ERROR")
    check("2048" in str(e["details"]), e)
    failed(app_job(s, "app.sftp.set", a, {"passwordHash": crypt_hash("pw")}), "VALIDATION_ERROR")  # no enabled
    check(not os.path.exists(users_file(s, "alpha")), "a refused app.sftp.set wrote credentials")

    res = ok(app_job(s, "app.sftp.set", a, {"enabled": True, "passwordHash": crypt_hash("correct horse"),
                                            "publicKeys": [pub]}))
    check(res == {"sftpUsername": "alpha", "host": "sftp.test", "port": PORT, "enabled": True}, res)
    check(os.stat(users_file(s, "alpha")).st_mode & 0o777 == 0o600)
    ok(app_job(s, "app.sftp.set", b, {"enabled": True, "publicKeys": [bpub]}))
    deploy_a = deploy_params(sftpUsername="alpha", plan={"volumeQuotaMB": 32})
    check(ok(app_job(s, "app.deploy", a, deploy_a))["sftpEnabled"] is True, "App.sftpEnabled after app.sftp.set")

    # Password login: the core operations; what was put the panel reads.
    with open(os.path.join(s.local, "hello.txt"), "w") as f:
        f.write("hello from sftp\n")
    out = sftp_ok(s, "alpha", ["put hello.txt", "mkdir conf", "put hello.txt conf/x.txt", "rename conf/x.txt conf/y.txt",
                               "ls -l conf", "get conf/y.txt back.txt", "rm conf/y.txt", "rmdir conf", "ls -l"],
                  password="correct horse")
    check("y.txt" in out and "hello.txt" in out, out)
    check(open(os.path.join(s.local, "back.txt")).read() == "hello from sftp\n")
    r = ok(app_job(s, "app.files.read_text", a, {"path": "/hello.txt"}))
    check(r["content"] == "hello from sftp\n", r)
    st = os.stat(os.path.join(volume(s, a), "hello.txt"))
    base = os.stat(volume(s, a)).st_uid
    check(st.st_uid == base and st.st_uid >= 100000, ("owned by the app's mapped root", st.st_uid, base))
    # Key login.
    out = sftp_ok(s, "alpha", ["ls"], key=key)
    check("hello.txt" in out, out)
    # Wrong password, wrong key, unknown user.
    sftp_fails(s, "alpha", ["ls"], password="wrong")
    sftp_fails(s, "alpha", ["ls"], key=bkey)
    sftp_fails(s, "nobody", ["ls"], key=key)

    # The walls: another app's user sees only its own volume; nothing outside is reachable.
    canary = os.path.join(s.tmp, "canary")
    with open(canary, "w") as f:
        f.write("untouched")
    os.symlink("/etc", os.path.join(volume(s, a), "etclink"))
    os.symlink("../../../../../../../../" + canary.lstrip("/"), os.path.join(volume(s, a), "canarylink"))
    out = sftp_ok(s, "beta", ["ls -la", "-get /hello.txt", "-get ../" + a + "/disk/volume/hello.txt"], key=bkey)
    check("hello.txt" not in out.split("ls -la")[1].split("sftp>")[0], out)
    check(not os.path.exists(os.path.join(s.local, "hello.txt.1")))
    os.unlink(os.path.join(s.local, "hello.txt"))
    for cmd in ["get /etc/passwd", "get ../../../etc/passwd", "get etclink/passwd", "get canarylink",
                "put back.txt canarylink", "put back.txt etclink/owned", "symlink /etc abs", "symlink ../.. up",
                "chmod 644 etclink", "rm canarylink/x", "get /proc/self/root/etc/passwd"]:
        sftp_fails(s, "alpha", [cmd], key=key)
    out = sftp_ok(s, "alpha", ["cd ..", "cd ../..", "pwd", "ls"], key=key)
    check("Remote working directory: /\n" in out and "hello.txt" in out, out)
    check(not os.path.exists(os.path.join(s.local, "passwd")), "a file outside the volume was read")
    check(open(canary).read() == "untouched", "the canary outside the volume changed")
    check(not os.path.exists("/etc/owned"))

    # Quota: a 40 MB upload into a 32 MB volume fails, and the volume still works.
    with open(os.path.join(s.local, "big.bin"), "wb") as f:
        f.write(os.urandom(1 << 20) * 40)
    out = sftp_fails(s, "alpha", ["put big.bin"], key=key)
    check("quota" in out or "Failure" in out, out)
    sftp_ok(s, "alpha", ["rm big.bin", "put back.txt after-quota.txt"], key=key)
    check(ok(app_job(s, "app.files.read_text", a, {"path": "/after-quota.txt"}))["content"] == "hello from sftp\n")

    # Read-only: reads work, writes are refused; disabled: no login at all.
    ok(app_job(s, "app.sftp.set", a, {"enabled": True, "readOnly": True}))
    sftp_ok(s, "alpha", ["get after-quota.txt ro.txt"], password="correct horse")  # the hash was kept
    for cmd in ["put back.txt ro-put.txt", "mkdir d", "rm after-quota.txt", "rename after-quota.txt z"]:
        sftp_fails(s, "alpha", [cmd], key=key)
    check(not os.path.exists(os.path.join(volume(s, a), "ro-put.txt")))
    ok(app_job(s, "app.sftp.set", a, {"enabled": False}))
    sftp_fails(s, "alpha", ["ls"], key=key)
    check(ok(app_job(s, "app.deploy", a, deploy_a))["sftpEnabled"] is False, "App.sftpEnabled after disabling")

    # A template without file access: 403 FILE_ACCESS_DISABLED.
    c = str(uuid.uuid4())
    ok(app_job(s, "app.deploy", c, deploy_params(sftpUsername="gamma", template={"fileAccess": False}), timeout=120))
    e = failed(app_job(s, "app.sftp.set", c, {"enabled": True, "publicKeys": [pub]}), "FILE_ACCESS_DISABLED")
    check(e["httpStatus"] == 403, e)

    # app.delete removes the credentials: no login after.
    ok(app_job(s, "app.delete", b))
    check(not os.path.exists(users_file(s, "beta")), "app.delete left the credentials")
    sftp_fails(s, "beta", ["ls"], key=bkey)

    # Too many failures from one address: that address is refused, even with the right key.
    ok(app_job(s, "app.sftp.set", a, {"enabled": True, "readOnly": False}))
    sftp_ok(s, "alpha", ["ls"], key=key)
    for _ in range(10):
        sftp_fails(s, "alpha", ["ls"], password="wrong")
    sftp_fails(s, "alpha", ["ls"], key=key)
    log = s.agent.log_text()
    check("too many failed logins" in log and f"login app={a} user=alpha from=127.0.0.1" in log, log[-3000:])
    for x in (a, c):
        ok(app_job(s, "app.delete", x))
    # The agent's shutdown stops it.
    s.agent.stop()
    check(not listening() and sftpd_pid(s) is None, "nodeagent-sftpd outlived the agent")


def outside_snapshot(paths):
    out = {}
    for p in paths:
        st = os.lstat(p)
        content = open(p, "rb").read() if os.path.isfile(p) else sorted(os.listdir(p))
        out[p] = (st.st_mtime_ns, st.st_mode, st.st_uid, content)
    return out


@needs("root")
@with_setup(agent_conf=sftp_conf)
def hostile_paths(s):
    """The hostile path table of the files kinds (tests/agent/kinds/apps/test_app_paths.py), through
    SFTP: every path tried with get, put, ls, mkdir, rm, rmdir, rename (both ways),
    chmod, symlink and readlink in one session, against the same links planted by
    the app. SFTP's paths are the client's: '..' stops at the volume's root as in a
    chroot, so a path may land on a name inside; nothing outside is read or changed."""
    from test_app_paths import table
    need_root()
    s.local = os.path.join(s.tmp, "local")
    os.makedirs(s.local)
    wait_for(listening, 10, "nodeagent-sftpd listening")
    outside = os.path.join(s.tmp, "outside")
    os.makedirs(outside)
    canary = os.path.join(outside, "canary")
    with open(canary, "w") as f:
        f.write("untouched")
    os.chmod(outside, 0o777)
    os.chmod(canary, 0o666)  # writable by anyone: only the path layer stands between SFTP and it
    a = str(uuid.uuid4())
    ok(app_job(s, "app.deploy", a, deploy_params(sftpUsername="gamma"), timeout=120))
    key, pub = keypair(s, "gamma_key")
    ok(app_job(s, "app.sftp.set", a, {"enabled": True, "publicKeys": [pub]}))
    vol = volume(s, a)
    os.makedirs(os.path.join(vol, "a", "b", "c"))
    for name, target in (("escape", "/"), ("etcl", "/etc"), ("chain", "c2"), ("c2", "../.."),
                         ("procl", "/proc/self/root"), ("dotdot", ".."), ("a/up", "../.."), ("loop", "loop"),
                         ("abs", canary)):
        os.symlink(target, os.path.join(vol, name))
    with open(os.path.join(s.local, "up.txt"), "w") as f:
        f.write("owned")
    watched = [canary, outside, "/etc/passwd", "/etc", "/"]
    before = outside_snapshot(watched)
    # What a batch line can carry (no NUL, no control characters, not empty, short).
    rows = [p for p, _ in table(canary) if p and "\0" not in p and "\x01" not in p and len(p) < 1000]
    check(len(rows) >= 25, len(rows))
    cmds = []
    for i, p in enumerate(rows):
        q = '"' + p + '"'
        cmds += [f"-get {q} got{i}", f"-put up.txt {q}", f"-ls {q}", f"-mkdir {q}/n", f"-rm {q}", f"-rmdir {q}",
                 f"-rename {q} moved{i}", f"-rename /a/b {q}/stolen", f"-chmod 777 {q}", f"-symlink {q} s{i}",
                 f"-get {q}/passwd pw{i}"]
    out = sftp_ok(s, "gamma", cmds, key=key)
    check(outside_snapshot(watched) == before, "something outside the volume changed")
    for name in os.listdir(s.local):
        if name.startswith(("got", "pw")):
            data = open(os.path.join(s.local, name), "rb").read()
            check(data not in (b"untouched", open("/etc/passwd", "rb").read()), (name, "read from outside"))
    check(not os.path.exists("/etc/n") and not os.path.exists(os.path.join(outside, "n")), "mkdir reached out")
    # Links made through SFTP can only point inside: a link's target stays text, never followed out.
    for name in os.listdir(vol):
        p = os.path.join(vol, name)
        if name.startswith("s") and os.path.islink(p):
            check(not os.readlink(p).startswith("/") and "../.." not in os.readlink(p), (name, os.readlink(p)))
    print(f"{len(rows)} hostile paths x {len(cmds) // len(rows)} SFTP operations: nothing outside read or changed")
    ok(app_job(s, "app.delete", a))


if __name__ == "__main__":
    sys.exit(run_cases({f.__name__: f for f in [sftp_end_to_end, hostile_paths]}))
