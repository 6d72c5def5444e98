#!/usr/bin/python3
"""A package upgrade from version N to N+1 with dpkg, in a scratch root (dpkg --root,
maintainer scripts chrootless with DPKG_ROOT set; a fake systemctl first on PATH fails
the test if they touch the host's systemd), and the packaged daemon run from that root
against the local test controller (real HTTPS) and libvirt's test driver:

  N     the .deb of the packaging-build fixture (the packaged build, no test hooks);
  N+1   the same build tree packed again by cpack with the patch version raised
        (cpack -R): the binaries are the same, the package is a newer version;
  N+2   N+1 repacked with dpkg-deb with a changed default configuration (a conffile
        that changed upstream as well as on the node).

  1. install N; the operator fills in /etc/nodeagent/nodeagent.conf (a conffile);
  2. N's daemon creates a server (vps.create) and stops it (vps.power); the
     controller refuses the second result (503 on /result only), so the result waits
     in the journal; SIGTERM: the agent stops with the result undelivered;
  3. dpkg -i N+1, plain (no --force-conf*, stdin /dev/null): the state directory is
     byte for byte what it was, the operator's configuration untouched, no
     .dpkg-new/.dpkg-dist, no prompt;
  4. N+1's daemon delivers the waiting result without running the job again (its
     libvirt test driver starts empty: a second run would fail VPS_NOT_FOUND);
  5. N+2 with the conffile changed on both sides: a plain dpkg -i asks, and with
     stdin at its end stops (package unpacked, not configured, the operator's file
     kept); dpkg --force-confdef --force-confold then keeps the operator's file and
     leaves the new default beside it (.dpkg-dist);
  6. purge keeps the state directory (a hint says how to remove it); reinstalled,
     NODEAGENT_PURGE_STATE=1 dpkg -r keeps it, NODEAGENT_PURGE_STATE=1 dpkg -P removes it.
"""
import glob
import hashlib
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import uuid

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "harness"))
from nodeagent_harness import Controller, check, make_vm_assets, wait_for  # noqa: E402

PLAN = {"cpuCores": 1, "cpuThreads": 1, "ramMB": 512, "storageMB": 1024, "networkSpeedLimitMbps": 0,
        "bandwidthLimitGb": 100, "maxSnapshots": 1}


def log(msg):
    print(f"test_upgrade: {msg}", flush=True)


def sh(args, **kw):
    return subprocess.run(args, capture_output=True, text=True, timeout=120, **kw)


class Root:
    """A dpkg database in a scratch directory, and dpkg run against it."""

    def __init__(self, scratch):
        self.scratch = scratch
        self.path = os.path.join(scratch, "root")
        for d in ("var/lib/dpkg/info", "var/lib/dpkg/updates", "var/lib/dpkg/triggers"):
            os.makedirs(os.path.join(self.path, d))
        for f in ("var/lib/dpkg/status", "var/lib/dpkg/available"):
            open(os.path.join(self.path, f), "w").close()
        self.bin = os.path.join(scratch, "bin")
        self.host_systemctl = os.path.join(scratch, "host-systemctl")
        os.makedirs(self.bin)
        with open(os.path.join(self.bin, "systemctl"), "w") as f:
            f.write(f"#!/bin/sh\necho \"systemctl $*\" >>{self.host_systemctl}\n")
        os.chmod(os.path.join(self.bin, "systemctl"), 0o755)

    def dpkg(self, *args, env=None, ok=True):
        e = dict(os.environ, PATH=f"{self.bin}:{os.environ['PATH']}", **(env or {}))
        r = subprocess.run(["dpkg", f"--root={self.path}", f"--log={self.scratch}/dpkg.log",
                            "--force-script-chrootless", "--force-depends", *args],
                           stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=120, env=e)
        if ok:
            check(r.returncode == 0, f"dpkg {' '.join(args)}: exit {r.returncode}\n{r.stdout}{r.stderr}")
        return r

    def version(self):
        r = sh(["dpkg-query", f"--admindir={self.path}/var/lib/dpkg", "-W", "-f", "${Version} ${Status}",
                "nodeagent"])
        return r.stdout.strip() if r.returncode == 0 else None

    def p(self, rel):
        return os.path.join(self.path, rel.lstrip("/"))


def tree_digest(top):
    """{relative path: (mode, size, mtime_ns, sha256)} of every entry below top."""
    out = {}
    for d, dirs, files in os.walk(top):
        for name in dirs + files:
            full = os.path.join(d, name)
            st = os.lstat(full)
            digest = None
            if os.path.isfile(full) and not os.path.islink(full):
                with open(full, "rb") as f:
                    digest = hashlib.sha256(f.read()).hexdigest()
            out[os.path.relpath(full, top)] = (st.st_mode, st.st_size, st.st_mtime_ns, digest)
    return out


def set_keys(text, values):
    """The operator's edit: in each [section], 'key = value' replaces the key's line,
    commented out ('#key = default') or not; every key must be found."""
    lines = text.split("\n")
    section = None
    left = {(s, k) for s, keys in values.items() for k in keys}
    for i, line in enumerate(lines):
        if line.startswith("["):
            section = line.strip("[]")
            continue
        stripped = line.lstrip("#").strip()
        key = stripped.split("=", 1)[0].strip() if "=" in stripped else None
        if key and (section, key) in left and (line.startswith("#" + key) or line.startswith(key)):
            lines[i] = f"{key} = {values[section][key]}"
            left.discard((section, key))
    check(not left, f"keys not found in the shipped configuration: {sorted(left)}")
    return "\n".join(lines)


class Daemon:
    def __init__(self, root, conf, sock, logfile):
        self.root, self.conf, self.sock, self.logfile = root, conf, sock, logfile
        self.proc = None

    def start(self, tag):
        self.out = open(self.logfile, "a")
        self.out.write(f"---- {tag}\n")
        self.out.flush()
        env = {k: v for k, v in os.environ.items() if not k.startswith(("NODEAGENT_TEST", "NA_FAULTS"))}
        self.proc = subprocess.Popen([self.root.p("/usr/sbin/nodeagentd"), "-c", self.conf], stdout=self.out,
                                     stderr=subprocess.STDOUT, env=env)
        wait_for(lambda: self.ctl("status").returncode == 0 or self.proc.poll() is not None, 15,
                 "the packaged daemon's control socket")
        check(self.proc.poll() is None, f"the packaged daemon exited with {self.proc.returncode}:\n{self.text()}")

    def ctl(self, *args):
        return sh([self.root.p("/usr/bin/nodeagentctl"), "-s", self.sock, *args])

    def status(self):
        import json
        r = self.ctl("status", "--json")
        check(r.returncode == 0, r)
        return json.loads(r.stdout)

    def stop(self):
        self.proc.send_signal(signal.SIGTERM)
        rc = self.proc.wait(30)
        self.out.close()
        self.proc = None
        return rc

    def kill(self):
        if self.proc and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()

    def text(self):
        with open(self.logfile) as f:
            return f.read()


def build_next(deb_n, scratch):
    """N+1: the fixture's build tree packed again by cpack with the patch version raised."""
    tree = os.path.dirname(os.path.dirname(os.path.abspath(deb_n)))
    config = os.path.join(tree, "CPackConfig.cmake")
    check(os.path.exists(config), f"{config} missing: the packaging-build fixture's tree")
    upstream = sh(["dpkg-deb", "-f", deb_n, "Version"]).stdout.strip().rsplit("-", 1)[0]
    major, minor, patch = upstream.split(".")
    nxt = f"{major}.{minor}.{int(patch) + 1}"
    work = os.path.join(scratch, "cpack")
    t0 = time.time()
    r = sh(["cpack", "--config", config, "-G", "DEB", "-B", work, "-R", nxt])
    check(r.returncode == 0, f"cpack -R {nxt}: {r.stdout}{r.stderr}")
    debs = glob.glob(os.path.join(work, "*.deb"))
    check(len(debs) == 1, (debs, r.stdout))
    log(f"N+1 {os.path.basename(debs[0])} packed in {time.time() - t0:.1f} s")
    return debs[0]


def build_conf_changed(deb, scratch):
    """N+2: deb repacked with a changed default configuration and a higher version."""
    d = os.path.join(scratch, "repack")
    check(sh(["dpkg-deb", "-R", deb, d]).returncode == 0)
    with open(os.path.join(d, "etc/nodeagent/nodeagent.conf"), "a") as f:
        f.write("\n# A default added upstream in N+2.\n")
    control = os.path.join(d, "DEBIAN/control")
    with open(control) as f:
        text = f.read()
    version = [line.split(": ", 1)[1] for line in text.splitlines() if line.startswith("Version: ")][0]
    with open(control, "w") as f:
        f.write(text.replace(f"Version: {version}", f"Version: {version}+conf1"))
    # DEBIAN/md5sums (if any) would name the old checksum of the conffile: make it again.
    md5 = os.path.join(d, "DEBIAN/md5sums")
    if os.path.exists(md5):
        lines = []
        for line in open(md5).read().splitlines():
            _, rel = line.split("  ", 1)
            with open(os.path.join(d, rel), "rb") as f:
                lines.append(f"{hashlib.md5(f.read()).hexdigest()}  {rel}")
        with open(md5, "w") as f:
            f.write("\n".join(lines) + "\n")
    out = os.path.join(scratch, "nodeagent-conf-changed.deb")
    r = sh(["dpkg-deb", "--root-owner-group", "-b", d, out])
    check(r.returncode == 0, r)
    return out


def main():
    for tool in ("cpack", "dpkg", "dpkg-deb", "dpkg-query", "dpkg-shlibdeps", "qemu-img", "xorriso"):
        if not shutil.which(tool):
            print(f"SKIP: {tool} not installed")
            return 77
    if os.geteuid() != 0:
        print("SKIP: dpkg --root needs root")
        return 77
    pkgs = os.environ.get("NA_PACKAGES_DIR")
    check(pkgs and os.path.isdir(pkgs), "NA_PACKAGES_DIR: the packaging-build fixture did not run")
    debs = glob.glob(os.path.join(pkgs, "*.deb"))
    check(len(debs) == 1, f"want one .deb in {pkgs}: {debs}")
    deb_n = debs[0]
    t_start = time.time()
    scratch = tempfile.mkdtemp(prefix="na-upgrade-")
    controller = None
    daemon = None
    failed = True
    try:
        deb_next = build_next(deb_n, scratch)
        ver_n = sh(["dpkg-deb", "-f", deb_n, "Version"]).stdout.strip()
        ver_next = sh(["dpkg-deb", "-f", deb_next, "Version"]).stdout.strip()
        check(sh(["dpkg", "--compare-versions", ver_next, "gt", ver_n]).returncode == 0, (ver_n, ver_next))
        root = Root(scratch)

        # 1. Install N; the operator fills in the configuration.
        root.dpkg("-i", deb_n)
        check(root.version() == f"{ver_n} install ok installed", root.version())
        state = root.p("/var/lib/nodeagent")
        conf = root.p("/etc/nodeagent/nodeagent.conf")
        node_id = str(uuid.uuid4())
        controller = Controller(scratch, node_id, token="upgrade-token")
        token = root.p("/etc/nodeagent/token")
        fd = os.open(token, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        os.write(fd, b"upgrade-token\n")
        os.close(fd)
        vm = make_vm_assets(scratch)
        sock = os.path.join(scratch, "control.sock")
        with open(conf) as f:
            shipped = f.read()
        edited = set_keys(shipped, {
            "agent": {"node_id": node_id, "state_dir": state, "control_socket": sock, "drain_timeout_sec": 5,
                      "log_level": "debug"},
            "controller": {"url": controller.url, "token_file": token,
                           "ca_file": os.path.join(controller.certs, "ca.pem"), "poll_wait_sec": 5},
            "vm": {"uri": vm["uri"], "templates_file": vm["templates_file"], "images_dir": vm["images_dir"],
                   "domain_type": "qemu", "storage_dir": os.path.join(state, "vps/disks"),
                   "backups_dir": os.path.join(state, "vps/backups")},
            # The host's nftables ruleset is not this test's; apps are not run here.
            "apps": {"enabled": "false", "images_dir": os.path.join(state, "app-images"),
                     "storage_dir": os.path.join(state, "apps"), "backups_dir": os.path.join(state, "apps/backups"),
                     "sftp_listen": ""},
            "firewall": {"enabled": "false"},
        }) + "\n# local change: the operator's own note\n"
        with open(conf, "w") as f:
            f.write(edited)
        r = sh([root.p("/usr/sbin/nodeagentd"), "-c", conf, "--check-config"])
        check(r.returncode == 0, f"the operator's configuration: {r.stdout}{r.stderr}")

        # 2. N's daemon: a server, then a result that waits in the journal.
        daemon = Daemon(root, conf, sock, os.path.join(scratch, "agent.log"))
        daemon.start(f"N = {ver_n}")
        vps = str(uuid.uuid4())
        target = {"type": "vps", "id": vps}
        jid = controller.enqueue("vps.create", {"name": "up-1", "hostname": "up-1", "plan": PLAN,
                                                "template": {"id": "debian-12", "imageSlug": "2024.11", "os": "linux"},
                                                "vmPassword": "Sup3r!secret"}, target=target)
        res = controller.wait_results([jid], 60)[jid]["results"][0]
        check(res["status"] == "succeeded" and res["data"]["state"] == "running", res)
        controller.fault(mode="503", path="/result")
        pending = controller.enqueue("vps.power", {"action": "force-stop"}, target=target)
        wait_for(lambda: any(q[1] == "POST" and q[2].endswith(f"/jobs/{pending}/result") and q[3] == 503
                             for q in controller.requests()), 30, "the refused result")
        st = daemon.status()
        check(st["resultsPending"] == 1 and st["journal"]["pendingResults"] == 1, st)
        check(daemon.stop() == 0, daemon.text()[-3000:])
        check(not controller.admin("GET", f"/admin/jobs/{pending}")["results"], "the result was delivered by N")
        with open(os.path.join(state, "format")) as f:
            check(f.read() == "nodeagent-state 1\n")
        disks = [p for p in glob.glob(os.path.join(state, "**"), recursive=True) if vps in p]
        check(disks, f"no file of server {vps} in the state directory: {os.listdir(state)}")
        before = tree_digest(state)
        conf_before = edited
        log(f"N={ver_n}: server {vps} created ({len(disks)} paths in the state directory), "
            f"result of {pending} waiting in the journal")

        # 3. Upgrade to N+1: plain dpkg -i, no prompt (stdin is /dev/null), nothing touched.
        r = root.dpkg("-i", deb_next)
        check(root.version() == f"{ver_next} install ok installed", root.version())
        check(tree_digest(state) == before, "the upgrade changed the state directory")
        check(oct(os.stat(state).st_mode & 0o7777) == "0o711", oct(os.stat(state).st_mode))
        with open(conf) as f:
            check(f.read() == conf_before, "the upgrade changed the operator's configuration")
        for suffix in (".dpkg-new", ".dpkg-dist", ".dpkg-old"):
            check(not os.path.exists(conf + suffix), f"the upgrade left nodeagent.conf{suffix}")
        log(f"upgraded to N+1={ver_next}: state directory and configuration untouched")

        # 4. N+1 delivers the waiting result, from the journal.
        controller.fault(mode="none")
        daemon.start(f"N+1 = {ver_next}")
        res = controller.wait_results([pending], 30)[pending]
        check(len(res["results"]) == 1, res)
        check(res["results"][0]["status"] == "succeeded", res["results"][0])
        check(res["results"][0]["data"]["state"] == "stopped", res["results"][0])
        hello = controller.hello(2)
        check({"id": pending, "attempt": 1, "state": "result-pending"} in hello["unfinishedJobs"], hello)
        n1_log = daemon.text().split(f"---- N+1 = {ver_next}\n", 1)[1]
        check("1 result(s) recorded by an earlier run will be sent first" in n1_log, n1_log)
        check(" received (attempt" not in n1_log, f"N+1 ran a job again:\n{n1_log}")
        wait_for(lambda: daemon.status()["resultsPending"] == 0, 10, "no result waiting any more")
        check(daemon.stop() == 0, daemon.text()[-3000:])
        log(f"N+1 delivered the result of {pending} (succeeded, stopped) from the journal")

        # 5. The default configuration changed upstream too: keep the operator's, unattended.
        deb_conf = build_conf_changed(deb_next, scratch)
        # Plain, dpkg asks; with nobody to answer it stops, the package unpacked, not set up.
        r = root.dpkg("-i", deb_conf, ok=False)
        check(r.returncode != 0 and "end of file on stdin at conffile prompt" in r.stdout + r.stderr, r)
        check(root.version().endswith(" install ok unpacked"), root.version())
        with open(conf) as f:
            check(f.read() == conf_before, "the interrupted upgrade replaced the operator's configuration")
        root.dpkg("--force-confdef", "--force-confold", "-i", deb_conf)
        check(root.version().endswith("+conf1 install ok installed"), root.version())
        with open(conf) as f:
            check(f.read() == conf_before, "--force-confold replaced the operator's configuration")
        check(os.path.exists(conf + ".dpkg-dist"), "no nodeagent.conf.dpkg-dist beside the kept configuration")
        with open(conf + ".dpkg-dist") as f:
            check(f.read().endswith("# A default added upstream in N+2.\n"))
        log("conffile changed on both sides: --force-confdef --force-confold kept the operator's, new one .dpkg-dist")

        # 6. Purge: state kept unless asked.
        r = root.dpkg("-P", "nodeagent")
        check(root.version() is None, root.version())
        check(not os.path.exists(conf), "purge left the configuration")
        check(os.path.exists(os.path.join(state, "format")) and all(os.path.exists(p) for p in disks),
              "a plain purge removed state")
        check("NODEAGENT_PURGE_STATE=1" in r.stdout, f"purge gave no hint: {r.stdout}")
        root.dpkg("-i", deb_next)
        root.dpkg("-r", "nodeagent", env={"NODEAGENT_PURGE_STATE": "1"})
        check(os.path.exists(os.path.join(state, "format")), "NODEAGENT_PURGE_STATE=1 dpkg -r removed state")
        r = root.dpkg("-P", "nodeagent", env={"NODEAGENT_PURGE_STATE": "1"})
        check(not os.path.exists(state), f"NODEAGENT_PURGE_STATE=1 dpkg -P left {state}: {r.stdout}")
        log("purge kept the state directory; NODEAGENT_PURGE_STATE=1: remove kept it, purge removed it")

        if os.path.exists(root.host_systemctl):
            with open(root.host_systemctl) as f:
                check(False, f"a maintainer script ran systemctl with DPKG_ROOT set: {f.read()}")
        failed = False
    finally:
        if daemon:
            daemon.kill()
        if controller:
            controller.stop()
        if failed:
            agent_log = os.path.join(scratch, "agent.log")
            if os.path.exists(agent_log):
                with open(agent_log) as f:
                    sys.stderr.write(f"---- agent log:\n{f.read()[-6000:]}\n")
        elif os.environ.get("NA_TEST_KEEP"):
            log(f"kept {scratch} (NA_TEST_KEEP)")
        else:
            shutil.rmtree(scratch, ignore_errors=True)
    log(f"all checks passed in {time.time() - t_start:.1f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
