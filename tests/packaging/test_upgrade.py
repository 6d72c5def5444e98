#!/usr/bin/python3
# SPDX-License-Identifier: GPL-2.0-or-later
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
  2. N's daemon creates a server (vps.create), deploys and starts an app (crun, a
     busybox image: loop-mounted volume, overlay root, its nodeagent-monitor), then
     stops the server (vps.power) while the controller refuses results (503 on
     /result only), so that result waits in the journal; SIGTERM: the agent stops with
     the result undelivered, and the app keeps running (its monitor outlives agents);
  3. dpkg -i N+1, plain (no --force-conf*, stdin /dev/null): the state directory is
     byte for byte what it was, the operator's configuration untouched, no
     .dpkg-new/.dpkg-dist, no prompt;
     dpkg replaces the packaged nodeagent-monitor under the running app's monitor;
  4. N+1's daemon delivers the waiting result without running the job again (its
     libvirt test driver starts empty: a second run would fail VPS_NOT_FOUND), and
     re-attaches to the app: running, a console line answered; then the app is
     stopped and deleted (nothing of it left mounted);
  5. N+2 with the conffile changed on both sides: a plain dpkg -i asks, and with
     stdin at its end stops (package unpacked, not configured, the operator's file
     kept); dpkg --force-confdef --force-confold then keeps the operator's file and
     leaves the new default beside it (.dpkg-dist);
  the .rpm (N from the fixture, N+1 by cpack -R -G RPM), without the daemon: rpm -U
     keeps the state files and the operator's %config(noreplace) file (no .rpmnew),
     rpm -e keeps the state (scriptlets not run: --noscripts, as in test-rpm.sh);
  6. purge keeps the state directory (a hint says how to remove it); reinstalled,
     NODEAGENT_PURGE_STATE=1 dpkg -r keeps it, NODEAGENT_PURGE_STATE=1 dpkg -P removes it.

The whole test runs in a private mount and network namespace of its own (it re-executes
itself under unshare), which stands in for the host: the app's mounts, the agent's
nftables tables and the controller's port stay there.
"""
import glob
import hashlib
import json
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

APP = str(uuid.uuid4())
APP_DEPLOY = {"name": "up", "hostname": "up", "type": "app", "version": "1", "sftpUsername": "up",
              "template": {"id": "echo", "image": "busybox:1", "customCommand": True, "stop": {"line": "stop"},
                           "startedPattern": "^ready$",
                           "command": ["/bin/sh", "-c", 'echo ready; while read l; do echo "got $l"; '
                                       '[ "$l" = stop ] && exit 0; done']},
              "plan": {"cpuCores": 0.5, "memoryMB": 64, "volumeQuotaMB": 32}}
NET = {"ipv4": [{"address": "203.0.113.10", "prefix": 24}]}  # TEST-NET-3 (RFC 5737)
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


def loop_backing_files():
    """The files attached to loop devices now."""
    out = set()
    for f in glob.glob("/sys/block/loop*/loop/backing_file"):
        try:
            with open(f) as fh:
                out.add(fh.read().strip())
        except OSError:
            pass
    return out


def tree_digest(top):
    """{relative path: (mode, size, mtime_ns, sha256)} of every entry below top. A file
    attached to a loop device (a running app's mounted volume image) counts by mode and
    size only: the kernel writes to it while it is mounted (ext4's lazy init), whatever
    the package does."""
    out = {}
    in_use = loop_backing_files()
    for d, dirs, files in os.walk(top):
        for name in dirs + files:
            full = os.path.join(d, name)
            st = os.lstat(full)
            digest = None
            if os.path.isfile(full) and not os.path.islink(full):
                try:
                    with open(full, "rb") as f:
                        digest = hashlib.sha256(f.read()).hexdigest()
                except OSError as e:  # the app's network namespace, bound onto a file (nsfs)
                    digest = f"unreadable: {e.strerror}"
            if full in in_use:
                out[os.path.relpath(full, top)] = (st.st_mode, st.st_size, "loop device", None)
            else:
                out[os.path.relpath(full, top)] = (st.st_mode, st.st_size, st.st_mtime_ns, digest)
    return out


def app_mounts():
    """The mount points of the app's volume and roots, with their file system types."""
    with open("/proc/self/mountinfo") as f:
        return sorted(f"{line.split()[4]} {line.split(' - ')[1].split()[0]}" for line in f if f"/{APP}/" in line)


def alive(pid):
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


def crun_state(state):
    r = sh(["crun", "--root", os.path.join(state, "apps/crun"), "state", f"na-{APP}"])
    return json.loads(r.stdout).get("status") if r.returncode == 0 else None


def app_cleanup(state, scratch):
    """After a failure: the app's container (its monitor then ends) and every mount below scratch."""
    crun_root = os.path.join(state, "apps/crun")
    if os.path.isdir(crun_root):
        for cid in sh(["crun", "--root", crun_root, "list", "-q"]).stdout.split():
            sh(["crun", "--root", crun_root, "delete", "--force", cid])
    with open("/proc/self/mountinfo") as f:
        points = [line.split()[4] for line in f]
    for mp in sorted((m for m in points if m.startswith(scratch + "/")), reverse=True):
        sh(["umount", "-l", mp])


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

    def job(self, kind, params=None):
        """A local job on the app through nodeagentctl run; its result, which must be a success."""
        args = ["run", kind, "--target", APP, "--json"]
        if params is not None:
            args += ["--params", json.dumps(params)]
        r = self.ctl(*args)
        check(r.returncode == 0, f"{kind}: {r.stdout}{r.stderr}")
        return json.loads(r.stdout)["result"]

    def app_log_has(self, text):
        r = self.ctl("logs", APP)
        return r.returncode == 0 and text in r.stdout

    def status(self):
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


def rpm_upgrade(scratch, state_src):
    """The .rpm the same way, without the daemon (its binaries are the .deb's): N from
    the fixture, N+1 by cpack -R; rpm --root with --noscripts (the scriptlets would run
    chrooted, in a root without /bin/sh); the state files of the .deb half copied in."""
    pkgs = os.environ["NA_PACKAGES_DIR"]
    rpms = glob.glob(os.path.join(pkgs, "*.rpm"))
    if not rpms or not shutil.which("rpm"):
        check(not shutil.which("rpmbuild"), f"no .rpm in {pkgs} although rpmbuild is installed")
        log("rpm: not installed here, the .rpm half left out")
        return
    rpm_n = rpms[0]
    tree = os.path.dirname(os.path.abspath(pkgs))
    upstream = sh(["rpm", "-qp", "--qf", "%{VERSION}", rpm_n]).stdout.strip()
    major, minor, patch = upstream.split(".")
    nxt = f"{major}.{minor}.{int(patch) + 1}"
    work = os.path.join(scratch, "cpack-rpm")
    r = sh(["cpack", "--config", os.path.join(tree, "CPackConfig.cmake"), "-G", "RPM", "-B", work, "-R", nxt])
    check(r.returncode == 0, f"cpack -G RPM -R {nxt}: {r.stdout}{r.stderr}")
    rpm_next = glob.glob(os.path.join(work, "*.rpm"))[0]
    R = os.path.join(scratch, "rpm-root")
    os.makedirs(R)

    def rpm(*args):
        r = sh(["rpm", "--root", R, *args])
        check(r.returncode == 0, f"rpm {' '.join(args)}: {r.stdout}{r.stderr}")
        return r

    rpm("--initdb")
    rpm("-i", "--nodeps", "--noscripts", rpm_n)
    conf = os.path.join(R, "etc/nodeagent/nodeagent.conf")
    with open(conf, "a") as f:
        f.write("# local change: the operator's own note\n")
    with open(conf) as f:
        conf_before = f.read()
    state = os.path.join(R, "var/lib/nodeagent")
    for name in ("format", "jobs.journal", "reports.journal"):
        shutil.copy2(os.path.join(state_src, name), os.path.join(state, name))
    before = tree_digest(state)
    rpm("-U", "--nodeps", "--noscripts", rpm_next)
    check(rpm("-q", "--qf", "%{VERSION}", "nodeagent").stdout == nxt, "rpm -U did not install N+1")
    check(tree_digest(state) == before, "rpm -U changed the state directory")
    with open(conf) as f:
        check(f.read() == conf_before, "rpm -U changed the operator's configuration")
    check(not os.path.exists(conf + ".rpmnew") and not os.path.exists(conf + ".rpmsave"),
          "rpm -U left .rpmnew/.rpmsave although the packaged configuration did not change")
    rpm("-e", "--nodeps", "--noscripts", "nodeagent")
    check(tree_digest(state) == before, "rpm -e changed the state directory")
    check(os.path.exists(conf + ".rpmsave"), "rpm -e did not keep the modified configuration as .rpmsave")
    log(f"rpm {upstream} -> {nxt} (rpm -U, --noscripts): state directory and configuration untouched; "
        "rpm -e kept the state")


def main():
    for tool in ("cpack", "dpkg", "dpkg-deb", "dpkg-query", "dpkg-shlibdeps", "qemu-img"):
        if not shutil.which(tool):
            print(f"SKIP: {tool} not installed")
            return 77
    if os.geteuid() != 0:
        print("SKIP: dpkg --root, mounts and loop devices need root")
        return 77
    for f in ("/usr/bin/crun", "/bin/busybox"):
        check(os.access(f, os.X_OK), f"{f} is missing: scripts/deps.sh installs it")
    if os.environ.get("NA_UPGRADE_INNER") != "1":
        # The stand-in for the host: private mount and network namespaces for the whole test.
        if subprocess.run(["unshare", "-m", "-n", "--propagation", "private", "true"]).returncode != 0:
            print("SKIP: no private mount and network namespace here")
            return 77
        os.environ["NA_UPGRADE_INNER"] = "1"
        os.execvp("unshare", ["unshare", "-m", "-n", "--propagation", "private", sys.executable, "-B",
                              os.path.abspath(__file__)])
    subprocess.run(["ip", "link", "set", "lo", "up"], check=True)
    pkgs = os.environ.get("NA_PACKAGES_DIR")
    check(pkgs and os.path.isdir(pkgs), "NA_PACKAGES_DIR: the packaging-build fixture did not run")
    debs = glob.glob(os.path.join(pkgs, "*.deb"))
    check(len(debs) == 1, f"want one .deb in {pkgs}: {debs}")
    deb_n = debs[0]
    t_start = time.time()
    scratch = tempfile.mkdtemp(prefix="na-upgrade-")
    os.chmod(scratch, 0o711)  # the app's mapped root reaches its root and volume from its user namespace
    controller = None
    daemon = None
    root = None
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
        app_images = os.path.join(scratch, "app-images")
        r = sh([sys.executable, os.path.join(os.environ["NA_SOURCE_DIR"], "tests/harness/mkimage.py"), "--layout",
                os.path.join(app_images, "busybox"), "--tag", "1"])
        check(r.returncode == 0, f"mkimage.py: {r.stdout}{r.stderr}")
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
            "apps": {"runtime": "/usr/bin/crun", "monitor": root.p("/usr/libexec/nodeagent/nodeagent-monitor"),
                     "sftpd": root.p("/usr/libexec/nodeagent/nodeagent-sftpd"), "images_dir": app_images,
                     "storage_dir": os.path.join(state, "apps"), "backups_dir": os.path.join(state, "apps/backups"),
                     "sftp_listen": ""},
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
                                                "template": {"id": "debian-12", "imageSlug": "2024.11", "os": "linux"}, "network": NET,
                                                "vmPassword": "Sup3r!secret"}, target=target)
        res = controller.wait_results([jid], 60)[jid]["results"][0]
        check(res["status"] == "succeeded" and res["data"]["state"] == "running", res)
        daemon.job("app.deploy", APP_DEPLOY)
        daemon.job("app.power", {"action": "start"})
        wait_for(lambda: daemon.app_log_has("ready"), 30, "the app's first line")
        mounts = app_mounts()
        check(any(m.endswith(" overlay") for m in mounts) and any(m.endswith(" ext4") for m in mounts), mounts)
        with open(os.path.join(state, "apps/apps", APP, "monitor.pid")) as f:
            monitor = int(f.read())
        controller.fault(mode="503", path="/result")
        pending = controller.enqueue("vps.power", {"action": "force-stop"}, target=target)
        wait_for(lambda: any(q[1] == "POST" and q[2].endswith(f"/jobs/{pending}/result") and q[3] == 503
                             for q in controller.requests()), 30, "the refused result")
        st = daemon.status()
        check(st["resultsPending"] == 1 and st["journal"]["pendingResults"] == 1, st)
        check(daemon.stop() == 0, daemon.text()[-3000:])
        check(not controller.admin("GET", f"/admin/jobs/{pending}")["results"], "the result was delivered by N")
        check(alive(monitor) and crun_state(state) == "running", "the app did not outlive the agent")
        check(app_mounts() == mounts, (mounts, app_mounts()))
        with open(os.path.join(state, "format")) as f:
            check(f.read() == "nodeagent-state 1\n")
        disks = [p for p in glob.glob(os.path.join(state, "**"), recursive=True) if vps in p]
        check(disks, f"no file of server {vps} in the state directory: {os.listdir(state)}")
        before = tree_digest(state)
        check(any(v[2] == "loop device" for v in before.values()), "the app's volume image is not on a loop device")
        conf_before = edited
        log(f"N={ver_n}: server {vps} created ({len(disks)} paths in the state directory), app {APP} running "
            f"(monitor {monitor}), result of {pending} waiting in the journal")

        # 3. Upgrade to N+1: plain dpkg -i, no prompt (stdin is /dev/null), nothing touched.
        r = root.dpkg("-i", deb_next)
        check(root.version() == f"{ver_next} install ok installed", root.version())
        after = tree_digest(state)
        changed = sorted(k for k in set(before) | set(after) if before.get(k) != after.get(k))
        check(not changed, "the upgrade changed the state directory: " +
              "; ".join(f"{k}: {before.get(k)} -> {after.get(k)}" for k in changed))
        check(oct(os.stat(state).st_mode & 0o7777) == "0o711", oct(os.stat(state).st_mode))
        with open(conf) as f:
            check(f.read() == conf_before, "the upgrade changed the operator's configuration")
        for suffix in (".dpkg-new", ".dpkg-dist", ".dpkg-old"):
            check(not os.path.exists(conf + suffix), f"the upgrade left nodeagent.conf{suffix}")
        # The app ran on across it; dpkg replaced the monitor's binary under it.
        check(alive(monitor) and crun_state(state) == "running", "the app did not outlive the upgrade")
        check(os.readlink(f"/proc/{monitor}/exe").endswith(" (deleted)"), os.readlink(f"/proc/{monitor}/exe"))
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
        log(f"N+1 delivered the result of {pending} (succeeded, stopped) from the journal")
        check(daemon.job("app.status")["data"]["state"] == "running", "N+1: the app is not running")
        daemon.job("app.console.send", {"line": "hello"})
        wait_for(lambda: daemon.app_log_has("got hello"), 15, "the app's answer to a console line")
        check(app_mounts() == mounts, f"N+1 mounted the app again: {app_mounts()}")
        log(f"N+1 re-attached to app {APP}: running, console line answered, same mounts")
        daemon.job("app.power", {"action": "stop", "graceSec": 10})
        wait_for(lambda: daemon.app_log_has("got stop"), 15, "the app's answer to its stop line")
        daemon.job("app.delete")
        check(not app_mounts(), f"mounts left after app.delete: {app_mounts()}")
        wait_for(lambda: not alive(monitor), 15, "the monitor to exit after app.delete")
        check(daemon.stop() == 0, daemon.text()[-3000:])
        errors = [line for line in daemon.text().splitlines() if line[:3] in ("<0>", "<1>", "<2>", "<3>")]
        check(not errors, "the packaged daemons logged errors:\n" + "\n".join(errors))

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

        rpm_upgrade(scratch, state)

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
        if failed:
            app_cleanup(root.p("/var/lib/nodeagent") if root else "", scratch)
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
