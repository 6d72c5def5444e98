# SPDX-License-Identifier: GPL-2.0-or-later
"""Starts the real parts for end-to-end tests: the test controller over real HTTPS
with its own CA, and the real nodeagentd with a config in a temporary directory.
Everything it starts, it stops (also when a test fails)."""
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
import uuid

SRC = os.environ.get("NA_SOURCE_DIR") or os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
BUILD = os.environ.get("NA_BUILD_DIR") or os.path.join(SRC, "build")
NODEAGENTD = os.path.join(BUILD, "agent", "nodeagentd")
NODEAGENTCTL = os.path.join(BUILD, "ctl", "nodeagentctl")
CONTROLLER = os.path.join(SRC, "tests", "controller", "controller.py")
MKCERTS = os.path.join(SRC, "tests", "controller", "mkcerts.sh")
PYTHON = "/usr/bin/python3" if os.path.exists("/usr/bin/python3") else sys.executable


def free_port():
    """A TCP port free on 127.0.0.1 for a server a test starts later. Drawn below the
    kernel's ephemeral range (ip_local_port_range, 32768-60999 here): a port the kernel
    hands out as the source of an outgoing connection (the suite makes thousands) could
    be taken again before the server binds it ("Address already in use", seen once
    with nodeagent-sftpd)."""
    import random
    try:
        with open("/proc/sys/net/ipv4/ip_local_port_range") as f:
            low = int(f.read().split()[0])
    except (OSError, ValueError, IndexError):
        low = 32768
    top = max(low - 1, 10001)
    for _ in range(200):
        port = random.randint(10000, top)
        with socket.socket() as s:
            try:
                s.bind(("127.0.0.1", port))
            except OSError:
                continue
            return port
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def certs_dir():
    """The test CA and certificates, made once per build directory. Tests run in
    parallel: the lock keeps a key of one run from meeting a certificate of another."""
    import fcntl
    d = os.path.join(BUILD, "test-certs")
    os.makedirs(BUILD, exist_ok=True)
    with open(os.path.join(BUILD, "test-certs.lock"), "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not os.path.exists(os.path.join(d, "wrong.pin")):
            tmp = d + ".new"
            shutil.rmtree(tmp, ignore_errors=True)
            subprocess.run([MKCERTS, tmp], check=True)
            shutil.rmtree(d, ignore_errors=True)
            os.rename(tmp, d)
    return d


def check(cond, msg=None):
    """What `assert cond, msg` says, but never stripped (python3 -O drops assert
    statements, and with them every check of a test): raises AssertionError(msg)
    when cond is false. Tests and benchmarks use this, never a bare assert
    (tests/harness/test_checks.py fails on one). msg is evaluated before the call:
    keep it free of side effects."""
    if not cond:
        raise AssertionError(msg) if msg is not None else AssertionError("check failed")


def check_stages(posted, order):
    """The stages a job's progress posts carried, against the kind's stages in order.
    The link posts at most one progress a second per job, the latest it has when it
    posts, and drops what was not posted when the job ends (proto/README.md,
    Progress): a quick job shows one stage (its first, or a later one when the job got
    there before the loop posted), a longer one more; whatever arrives comes in the
    kind's order. Which stages a kind goes through is checked where every call is
    seen (the cmocka tests with tests/drivers/vm/job-double.c and the drivers' own tests)."""
    check(posted, ("no progress posted", order))
    check(all(p in order for p in posted) and posted == sorted(posted, key=order.index), (posted, order))


def wait_for(pred, timeout, what, interval=0.05):
    deadline = time.time() + timeout
    while time.time() < deadline:
        v = pred()
        if v:
            return v
        time.sleep(interval)
    raise AssertionError(f"timed out after {timeout}s waiting for {what}")


class Controller:
    def __init__(self, tmp, node_id, token="token-A", extra=None, certs=None):
        self.port = free_port()
        self.admin_port = free_port()
        self.certs = certs or certs_dir()
        self.url = f"https://127.0.0.1:{self.port}/agent/v1"
        args = [PYTHON, CONTROLLER, "--certs", self.certs, "--port", str(self.port), "--admin-port",
                str(self.admin_port), "--node-id", node_id, "--poll-wait", "5"]
        if token:
            args += ["--token", token]
        args += extra or []
        self.log = open(os.path.join(tmp, "controller.log"), "w")
        self.proc = subprocess.Popen(args, stdout=self.log, stderr=subprocess.STDOUT)
        wait_for(self._up, 10, "the test controller")

    def _up(self):
        try:
            self.admin("GET", "/admin/state")
            return True
        except OSError:
            return False

    def admin(self, method, path, body=None, timeout=60):
        data = json.dumps(body).encode() if body is not None else None
        req = urllib.request.Request(f"http://127.0.0.1:{self.admin_port}{path}", data=data, method=method)
        with urllib.request.urlopen(req, timeout=timeout) as r:
            return json.loads(r.read() or b"null")

    def enqueue(self, kind, params=None, target=None, timeout_sec=None, job_id=None):
        job = {"kind": kind, "params": params or {}}
        if target:
            job["target"] = target
        if timeout_sec:
            job["timeoutSec"] = timeout_sec
        if job_id:
            job["id"] = job_id
        return self.admin("POST", "/admin/jobs", job)["ids"][0]

    def enqueue_many(self, jobs):
        return self.admin("POST", "/admin/jobs", jobs)["ids"]

    def wait_results(self, ids, timeout=30):
        ans = self.admin("GET", f"/admin/wait?ids={','.join(ids)}&timeout={timeout}", timeout=timeout + 10)
        if ans["missing"]:
            raise AssertionError(f"no result after {timeout}s for {ans['missing']}")
        return {i: j for i, j in ans["jobs"].items()}

    def state(self):
        return self.admin("GET", "/admin/state")

    def hello(self, count=1, timeout=15):
        """The count-th hello (1: the first) once it arrived: the agent says hello from a
        thread of its own (the inventory is gathered off the loop), so an agent that
        answers on its control socket may not have said it yet."""
        wait_for(lambda: len(self.state()["hellos"]) >= count, timeout, f"hello #{count}")
        return self.state()["hellos"][count - 1]["hello"]

    def requests(self):
        return self.admin("GET", "/admin/requests")

    def fault(self, **f):
        self.admin("POST", "/admin/faults", f)

    def stop(self):
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(5)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self.log.close()


class Agent:
    def __init__(self, tmp, controller_url, node_id, ca_file, token="token-A", extra_conf="", env=None,
                 conf=None):
        """conf: {section: {key: value}} merged over the defaults below (None removes a key)."""
        self.tmp = tmp
        self.node_id = node_id
        self.state_dir = os.path.join(tmp, "state")
        self.socket = os.path.join(tmp, "control.sock")
        self.token_file = os.path.join(tmp, "token")
        self.conf = os.path.join(tmp, "agent.conf")
        if token is not None:
            self.write_token(token)
        sections = {
            "agent": {"node_id": node_id, "state_dir": self.state_dir, "control_socket": self.socket,
                      "log_level": "debug", "drain_timeout_sec": "5",
                      # The suite proves the strict seccomp allow-list (and the exec helper
                      # behind every spawn); NA_TEST_SANDBOX=denylist|off runs it without.
                      "sandbox": os.environ.get("NA_TEST_SANDBOX", "strict")},
            "controller": {"url": controller_url, "token_file": self.token_file, "ca_file": ca_file,
                           "poll_wait_sec": "5"},
            "vm": {"uri": "test:///default"},
            # nodeagent-sftpd stays off unless a test turns it on (tests/sftp): parallel
            # agents would all try the default 0.0.0.0:2022.
            "apps": {"sftp_listen": ""},
        }
        if os.environ.get("NA_TEST_NO_FIREWALL"):
            sections["firewall"] = {"enabled": "false"}
        for sec, keys in (conf or {}).items():
            for k, v in keys.items():
                if v is None:
                    sections.setdefault(sec, {}).pop(k, None)
                else:
                    sections.setdefault(sec, {})[k] = str(v)
        text = "".join(f"[{sec}]\n" + "".join(f"{k} = {v}\n" for k, v in keys.items()) + "\n"
                       for sec, keys in sections.items())
        with open(self.conf, "w") as f:
            f.write(text + extra_conf)
        self.env = dict(os.environ, NODEAGENT_TEST_KINDS="1", **(env or {}))
        self.proc = None
        self.log_path = os.path.join(tmp, "agent.log")
        self.starts = 0

    def write_token(self, token):
        tmp = self.token_file + ".new"
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        os.write(fd, (token + "\n").encode())
        os.close(fd)
        os.rename(tmp, self.token_file)

    def start(self, wait_ready=True):
        self.starts += 1
        self.log = open(self.log_path, "a")
        self.log.write(f"---- start {self.starts}\n")
        self.log.flush()
        self.proc = subprocess.Popen([NODEAGENTD, "-c", self.conf], stdout=self.log, stderr=subprocess.STDOUT,
                                     env=self.env)
        if wait_ready:
            wait_for(lambda: self.ctl("status", check=False).returncode == 0 or self.proc.poll() is not None, 10,
                     "the agent's control socket")
            if self.proc.poll() is not None:
                raise AssertionError(f"agent exited with {self.proc.returncode}:\n{self.log_text()}")
        return self

    def ctl(self, *args, check=True):
        r = subprocess.run([NODEAGENTCTL, "-s", self.socket, *args], capture_output=True, text=True, timeout=60)
        if check and r.returncode != 0:
            raise AssertionError(f"nodeagentctl {' '.join(args)} exited {r.returncode}: {r.stderr}")
        return r

    def status(self):
        return json.loads(self.ctl("status", "--json").stdout)

    def signal(self, sig):
        self.proc.send_signal(sig)

    def kill9(self):
        self.proc.send_signal(signal.SIGKILL)
        self.proc.wait()
        self.log.close()

    def stop(self, timeout=20):
        if self.proc and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
                raise AssertionError("agent did not stop within %ss of SIGTERM" % timeout)
        if self.proc:
            self.log.close()
        return self.proc.returncode if self.proc else None

    def log_text(self):
        try:
            with open(self.log_path) as f:
                return f.read()
        except OSError:
            return ""


class Setup:
    """A controller and an agent in a fresh temporary directory."""

    def __init__(self, token="token-A", controller_extra=None, agent_extra_conf="", start_agent=True,
                 ca_file=None, agent_env=None, agent_conf=None, before_start=None):
        self.tmp = tempfile.mkdtemp(prefix="nodeagent-test-")
        self.node_id = str(uuid.uuid4())
        self.controller = Controller(self.tmp, self.node_id, token=token, extra=controller_extra)
        self.agent = Agent(self.tmp, self.controller.url, self.node_id,
                           ca_file or os.path.join(self.controller.certs, "ca.pem"), token=token,
                           extra_conf=agent_extra_conf, env=agent_env,
                           conf=agent_conf(self) if callable(agent_conf) else agent_conf)
        if before_start:
            before_start(self)
        if start_agent:
            self.agent.start()

    def close(self, failed=False):
        try:
            if self.agent.proc and self.agent.proc.poll() is None:
                self.agent.proc.kill()
                self.agent.proc.wait()
        finally:
            self.controller.stop()
        if failed:
            sys.stderr.write(f"---- agent log ({self.agent.log_path}):\n{self.agent.log_text()[-6000:]}\n")
        else:
            reap_leftovers(self.tmp)
            shutil.rmtree(self.tmp, ignore_errors=True)


def reap_leftovers(tmp):
    """What a test's agent leaves running on purpose (apps outlive their agent, HAProxy
    too): containers, monitors, HAProxy, found by the test's own directory in their
    command line or crun's state; then the mounts under it, lazily. Nothing else is
    touched."""
    crun_root = os.path.join(tmp, "state", "apps", "crun")
    if os.geteuid() == 0 and os.path.isdir(crun_root):
        ids = subprocess.run(["/usr/bin/crun", "--root", crun_root, "list", "-q"], capture_output=True,
                             text=True).stdout.split()
        for cid in ids:
            subprocess.run(["/usr/bin/crun", "--root", crun_root, "kill", "--all", cid, "KILL"], capture_output=True)
            subprocess.run(["/usr/bin/crun", "--root", crun_root, "delete", "-f", cid], capture_output=True)
    for pid in os.listdir("/proc"):
        if not pid.isdigit() or int(pid) == os.getpid():
            continue
        try:
            with open(f"/proc/{pid}/cmdline", "rb") as f:
                cmd = f.read()
        except OSError:
            continue
        if tmp.encode() + b"/" in cmd:
            try:
                os.kill(int(pid), 9)
            except OSError:
                pass
    if os.geteuid() == 0:
        try:
            with open("/proc/self/mountinfo") as f:
                points = [line.split()[4] for line in f]
        except OSError:
            points = []
        for mp in reversed(points):
            if mp.startswith(tmp + "/"):
                subprocess.run(["/usr/bin/umount", "-l", mp], capture_output=True)


def private_netns():
    """Move this process (and so every controller and agent it starts) into a network
    namespace of its own with loopback up: the agent's firewall never touches the
    host's ruleset. Returns False where that is not possible (not root)."""
    import ctypes
    CLONE_NEWNET = 0x40000000
    libc = ctypes.CDLL(None, use_errno=True)
    if os.geteuid() != 0 or libc.unshare(CLONE_NEWNET) != 0:
        return False
    subprocess.run(["ip", "link", "set", "lo", "up"], check=True)
    return True


def needs(*what):
    """Decorator (outermost): the case may raise Skip when one of these is missing here;
    each becomes a CTest label needs-<what> (tests/CMakeLists.txt lists them), so CI
    fails a skip whose needs were met."""
    def deco(fn):
        fn.needs = tuple(what)
        return fn
    return deco


def run_cases(cases):
    """python3 test_x.py CASE: run one case (CTest registers each), exit 0/1/77.
    python3 test_x.py --list: one line per case, its name then its needs-* labels; the
    script's dict is the only list of its cases (na_python_cases in
    tests/CMakeLists.txt registers what this prints)."""
    if sys.argv[1:] == ["--list"]:
        for name, fn in cases.items():
            print(" ".join([name] + [f"needs-{n}" for n in getattr(fn, "needs", ())]))
        return 0
    if len(sys.argv) != 2 or sys.argv[1] not in cases:
        sys.stderr.write("usage: %s {%s}\n" % (sys.argv[0], "|".join(cases)))
        return 2
    if not os.path.exists(NODEAGENTD):
        sys.stderr.write(f"{NODEAGENTD} is not built\n")
        return 1
    if not private_netns():
        # Not root: the agents run without a firewall rather than near the host's rules.
        os.environ["NA_TEST_NO_FIREWALL"] = "1"
    t0 = time.time()
    try:
        cases[sys.argv[1]]()
    except Skip as e:
        print(f"SKIP {sys.argv[1]}: {e}")
        return 77
    print(f"PASS {sys.argv[1]} in {time.time() - t0:.1f}s")
    return 0


class Skip(Exception):
    pass


def exchange_form():
    """True when this case runs against a controller offering the exchange endpoint."""
    return os.environ.get("NA_TEST_EXCHANGE") == "1"


def in_both_forms(cases):
    """Every case twice: as it is (the test controller offers no exchange: results and
    progress are posted, AGENT-API 2) and as <case>_exchange (the controller offers the
    exchange endpoint of 2.3 in its settings: it reads NA_TEST_EXCHANGE=1 from the
    environment this sets, so every controller the case starts offers it)."""
    out = {}
    for name, fn in cases.items():
        out[name] = fn

        def exchange(fn=fn):
            os.environ["NA_TEST_EXCHANGE"] = "1"
            return fn()
        exchange.__name__ = name + "_exchange"
        exchange.needs = getattr(fn, "needs", ())
        out[name + "_exchange"] = exchange
    return out


def with_setup(**setup_args):
    """Decorator: give the test a fresh Setup, close it after, print logs on failure."""
    def deco(fn):
        def run():
            s = Setup(**setup_args)
            failed = True
            try:
                fn(s)
                failed = False
            finally:
                s.close(failed)
        run.__name__ = fn.__name__
        return run
    return deco


def sha256_file(path):
    import hashlib
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def make_vm_assets(tmp):
    """Template images (real qcow2 files), a templates file, and the config keys that
    point the agent at them and at libvirt's test driver with a fresh node file."""
    images = os.path.join(tmp, "images")
    os.makedirs(images, exist_ok=True)
    templates = []
    for tid, slug, os_name, path in [("debian-12", "2024.11", "linux", "debian-12.qcow2"),
                                     ("ubuntu-24.04", "2024.10", "linux", "ubuntu-24.04.qcow2"),
                                     ("windows-2022", "21H2", "windows", "windows-2022.qcow2")]:
        full = os.path.join(images, path)
        if not os.path.exists(full):
            subprocess.run(["qemu-img", "create", "-q", "-f", "qcow2", full, "256M"], check=True)
        templates.append({"id": tid, "imageSlug": slug, "os": os_name, "format": "qcow2", "path": path,
                          "sha256": sha256_file(full)})
    tfile = os.path.join(tmp, "templates.json")
    with open(tfile, "w") as f:
        json.dump(templates, f, indent=1)
    node = os.path.join(tmp, "node.xml")
    shutil.copy(os.path.join(SRC, "tests", "drivers", "vm", "node.xml"), node)
    return {"uri": f"test://{node}", "templates_file": tfile, "images_dir": images, "domain_type": "qemu"}


def make_cgroup_fixture(tmp, vps_ids):
    """A cgroup v2 tree where libvirt would put the test driver's domains, whose CPU
    counter the caller advances (the test driver runs no QEMU process)."""
    root = os.path.join(tmp, "cgroup")
    os.makedirs(root, exist_ok=True)
    with open(os.path.join(root, "cgroup.controllers"), "w") as f:
        f.write("cpuset cpu io memory pids\n")
    with open(os.path.join(root, "cpu.stat"), "w") as f:  # a v2 root has one, as cgroupfs does
        f.write("usage_usec 0\n")
    dirs = {}
    for vid in vps_ids:
        scope = "machine-" + f"qemu-vps-{vid}".replace("-", "\\x2d") + ".scope"
        d = os.path.join(root, "machine.slice", scope)
        os.makedirs(d, exist_ok=True)
        dirs[vid] = d
        set_cgroup_counters(d, 0, 0)
    return root, dirs


def set_cgroup_counters(d, usage_usec, io_bytes):
    files = {"cpu.stat": f"usage_usec {usage_usec}\nuser_usec 1\nsystem_usec 1\n",
             "memory.current": f"{512 << 20}\n", "memory.max": f"{1 << 30}\n",
             "memory.stat": "anon 100\nfile 200\ninactive_file 0\n",
             "io.stat": f"8:0 rbytes={io_bytes} wbytes={io_bytes * 2} rios=1 wios=1 dbytes=0 dios=0\n"}
    for name, text in files.items():
        # In place: the agent keeps these files open between ticks, as it does in cgroupfs.
        with open(os.path.join(d, name), "w") as f:
            f.write(text)
