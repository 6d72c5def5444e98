#!/usr/bin/python3
# SPDX-License-Identifier: GPL-2.0-or-later
"""A real Debian 12 guest through the controller link on a real libvirtd (TCG), issue 22
item 3: the guest is built from Debian's packages by tests/harness/guestimage.py (cached
outside the tree), created from the agent's own NoCloud seed, and checked from inside
through its QEMU guest agent (vps.exec):

  - the hostname, root's password hash and SSH key are the job's;
  - vps.exec: stdout, stderr and the exit code of a real command, a command killed by a
    signal, output over 1 MiB cut with `truncated`, timeoutSec passed -> JOB_TIMEOUT,
    the agent killed during an exec -> JOB_INTERRUPTED when the job comes again, and the
    command ran once;
  - vps.backup.create of the running server (libvirt's live backup), a file changed
    after it, vps.backup.restore: the server boots with the file as it was;
    vps.backup.delete through the link;
  - vps.upgrade: a larger disk seen by the running guest; more memory and vCPUs
    answered with restartRequired, seen after the next boot;
  - vps.reinstall to a new hostname and key: the old disk's content is gone, the new
    settings are in the guest, its address and SSH on it are kept;
  - the server's network, routed mode (the default): the guest configures its addresses
    from the seed alone (no DHCP), and OpenSSH from a host on the node's uplink (a
    namespace outside the node's) logs in on its public IPv4 and IPv6 addresses with
    the job's key; an address the guest adds by hand cannot send (the guard);
    vps.network.set routes a new address at once and the guest has it after its next
    boot; vps.firewall.set dropping TCP 22 from one source drops that source's SSH and
    not another's.

Bridged mode with a real guest is not here (tests/agent/kinds/vps: vps-bridged, with a
veth for the tap). Figures (build, create to the guest agent answering, exec round
trip, live backup and restore) are printed."""
import json
import os
import subprocess
import sys
import time
import uuid

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "harness"))
sys.path.insert(0, os.path.join(HERE, "..", "..", "agent", "kinds", "vps"))
import vmreal  # noqa: E402
from test_vps import UDP_ASK, UDP_ECHO, ip  # noqa: E402
from nodeagent_harness import SRC, Setup, Skip, check, needs, run_cases, wait_for  # noqa: E402

GUESTIMAGE = os.path.join(SRC, "tests", "harness", "guestimage.py")
KEY = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIOMqqnkVzrm0SdG6UOoqKLsabgH5C9okWi0dh2l9GKJl op@example"
NET = {"ipv4": [{"address": "203.0.113.30", "prefix": 32}], "ipv6": [{"address": "2001:db8:1::30", "prefix": 64}],
       "dns": ["203.0.113.53"]}
PLAN = {"cpuCores": 1, "cpuThreads": 1, "ramMB": 768, "storageMB": 3072, "networkSpeedLimitMbps": 0,
        "bandwidthLimitGb": 0, "maxSnapshots": 2}


def guest_template():
    """The cached template directory (built here, before any job: it downloads)."""
    t0 = time.time()
    r = subprocess.run([sys.executable, GUESTIMAGE, "build", "--json"], capture_output=True, text=True)
    check(r.returncode == 0, f"guestimage.py failed: {r.stderr[-3000:]}")
    info = json.loads(r.stdout)
    print(f"guest template: {info['dir']} (built in {info['buildSeconds']} s when it was made, "
          f"{info['diskBytes'] >> 20} MiB qcow2; here {time.time() - t0:.1f} s)")
    return info


def conf_for(info):
    def conf(s):
        return {"vm": {"uri": vmreal.URI, "templates_file": os.path.join(info["dir"], "templates.json"),
                       "images_dir": info["dir"], "domain_type": "qemu",
                       "storage_dir": os.path.join(s.tmp, "disks"), "network_mode": "routed", "uplink": "upl0"}}
    return conf


class Server:
    def __init__(self, s, vps):
        self.s, self.vps = s, vps

    def job(self, kind, params=None, code=None, timeout=300):
        jid = self.s.controller.enqueue(kind, params or {}, target={"type": "vps", "id": self.vps})
        r = self.s.controller.wait_results([jid], timeout)[jid]["results"][-1]
        if code:
            check(r["status"] == "failed" and r["error"]["code"] == code, (kind, r))
            return r["error"]
        check(r["status"] == "succeeded", (kind, r))
        return r["data"]

    def exec(self, *argv, timeout_sec=60):
        return self.job("vps.exec", {"command": list(argv), "timeoutSec": timeout_sec})

    def sh(self, script):
        return self.exec("/bin/sh", "-c", script)

    def wait_agent(self, what, timeout=600):
        """Until the guest agent answers an exec; seconds taken."""
        t0 = time.time()
        while time.time() - t0 < timeout:
            jid = self.s.controller.enqueue("vps.exec", {"command": ["/bin/true"], "timeoutSec": 10},
                                            target={"type": "vps", "id": self.vps})
            r = self.s.controller.wait_results([jid], 60)[jid]["results"][-1]
            if r["status"] == "succeeded":
                return time.time() - t0
            check(r["error"]["code"] in ("GUEST_AGENT_UNAVAILABLE", "JOB_TIMEOUT", "INVALID_STATE"), r)
            time.sleep(2)
        raise AssertionError(f"the guest agent did not answer within {timeout} s ({what})")


@needs("root", "libvirtd")
def guest():
    if os.geteuid() != 0:
        raise Skip("a real libvirtd needs root")
    if os.environ.get("NA_TEST_NO_FIREWALL"):
        raise Skip("needs a private network namespace")
    info = guest_template()
    up = uplink()
    vmreal.prepare()  # libvirtd in this namespace: the server's tap is made here
    s = None
    failed = True
    try:
        s = Setup(agent_conf=conf_for(info), controller_extra=["--lease-sec", "15"])
        run(s, info, up)
        failed = False
    finally:
        if s:
            vps = getattr(s, "vps_id", None)
            s.close(failed)
            if vps:
                vmreal.forget(vps)
        vmreal.stop()
        subprocess.run(["ip", "netns", "del", up], capture_output=True)


def uplink():
    """The node's uplink (upl0, in this case's namespace) and a host on it, in a namespace
    of its own: 203.0.113.50 and .51, 2001:db8:1::50, on the servers' subnets."""
    up = f"nag-up-{os.getpid()}"
    ip("netns", "add", up)
    ip("-n", up, "link", "set", "lo", "up")
    for k in ("net/ipv4/ip_forward", "net/ipv6/conf/all/forwarding", "net/ipv6/conf/all/proxy_ndp"):
        with open(f"/proc/sys/{k}", "w") as f:
            f.write("1")
    ip("link", "add", "upl0", "type", "veth", "peer", "name", "eth0", "netns", up)
    ip("addr", "add", "203.0.113.1/24", "dev", "upl0")
    ip("addr", "add", "2001:db8:1::1/64", "dev", "upl0", "nodad")
    ip("link", "set", "upl0", "up")
    for a in ("203.0.113.50/24", "203.0.113.51/24"):
        ip("-n", up, "addr", "add", a, "dev", "eth0")
    ip("-n", up, "addr", "add", "2001:db8:1::50/64", "dev", "eth0", "nodad")
    ip("-n", up, "link", "set", "eth0", "up")
    return up


def diagnose(srv, up):
    """What the node, the uplink's host and the guest see, for a network check that failed."""
    for argv in (["ip", "addr"], ["ip", "route"], ["ip", "-6", "route"], ["ip", "neigh", "show", "proxy"],
                 ["ip", "neigh"], ["nft", "list", "ruleset"], ["ip", "netns", "exec", up, "ip", "neigh"],
                 ["ip", "netns", "exec", up, "ping", "-c", "1", "-W", "2", "203.0.113.30"],
                 ["sysctl", "net.ipv4.ip_forward", "net.ipv4.conf.all.proxy_arp"]):
        r = subprocess.run(argv, capture_output=True, text=True)
        sys.stderr.write(f"---- {' '.join(argv)}\n{r.stdout}{r.stderr}")
    for cmd in ("ip addr; ip route; ip -6 route; ip neigh; ss -ltn", "cloud-init status --long"):
        try:
            r = srv.sh(cmd)
            sys.stderr.write(f"---- guest: {cmd}\n{r['stdout']}{r['stderr']}")
        except AssertionError as e:
            sys.stderr.write(f"---- guest: {cmd}: {e}\n")


def ssh(s, up, addr, src=None, timeout=10):
    """OpenSSH from the uplink's host to root@addr with the job's key: (exit code, output)."""
    argv = ["ip", "netns", "exec", up, "ssh", "-i", s.key, "-o", "IdentitiesOnly=yes", "-o", "BatchMode=yes",
            "-o", "StrictHostKeyChecking=no", "-o", "UserKnownHostsFile=/dev/null", "-o", "LogLevel=ERROR",
            "-o", f"ConnectTimeout={timeout}"]
    if src:
        argv += ["-b", src]
    r = subprocess.run(argv + [f"root@{addr}", "hostname"], capture_output=True, text=True, timeout=timeout + 20)
    return r.returncode, (r.stdout + r.stderr).strip()


def run(s, info, up):
    s.vps_id = vps = str(uuid.uuid4())
    srv = Server(s, vps)
    s.key = os.path.join(s.tmp, "id_ed25519")
    subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", s.key, "-C", "customer"], check=True)
    with open(s.key + ".pub") as f:
        key = f.read().strip()
    t0 = time.time()
    created = srv.job("vps.create", {"name": "guest-1", "hostname": "guest-1", "plan": PLAN, "vmPassword": "Sup3r!secret",
                                     "sshPublicKeys": [KEY, key], "network": NET,
                                     "template": {"id": info["template"], "imageSlug": "bookworm-" + info["key"][:8],
                                                  "os": "linux"}})
    check(created["state"] == "running", created)
    boot = srv.wait_agent("first boot")
    print(f"create: {time.time() - t0 - boot:.1f} s, then the guest agent answered after {boot:.1f} s")

    # The job's settings, seen from inside.
    t1 = time.time()
    r = srv.exec("/bin/hostname")
    print(f"exec round trip: {(time.time() - t1) * 1000:.0f} ms")
    check(r["exitCode"] == 0 and r["stdout"].strip() == "guest-1", r)
    with open(os.path.join(s.agent.state_dir, "vps", f"{vps}.json")) as f:
        want_hash = json.load(f)["passwordHash"]
    wait_for(lambda: srv.sh("getent shadow root | cut -d: -f2")["stdout"].strip() == want_hash, 120,
             "root's password hash from the seed (cloud-init may still run)")
    wait_for(lambda: KEY in srv.sh("cat /root/.ssh/authorized_keys 2>/dev/null")["stdout"], 60, "root's SSH key")

    # Its network, from the seed alone: SSH from outside the node on both addresses.
    addrs = srv.exec("/sbin/ip", "-o", "addr", "show", "dev", "eth0")["stdout"]
    check("203.0.113.30/32" in addrs and "2001:db8:1::30/128" in addrs, addrs)
    t1 = time.time()
    try:
        wait_for(lambda: ssh(s, up, "203.0.113.30") == (0, "guest-1"), 120, "SSH to the server's IPv4 address")
    except AssertionError:
        diagnose(srv, up)
        raise
    print(f"SSH login from the uplink's host {time.time() - t1:.1f} s after the guest agent answered")
    wait_for(lambda: ssh(s, up, "2001:db8:1::30") == (0, "guest-1"), 60, "SSH to the server's IPv6 address")
    # An address the guest gives itself cannot send (the guard at its tap).
    mark = os.path.join(s.tmp, "echo-up")
    echo = subprocess.Popen(["ip", "netns", "exec", up, sys.executable, "-c", UDP_ECHO, "203.0.113.50", mark])
    try:
        wait_for(lambda: os.path.exists(mark), 10, "the uplink host's echo server")
        srv.exec("/sbin/ip", "addr", "add", "203.0.113.66/32", "dev", "eth0")
        check(srv.exec("/usr/bin/python3", "-c", UDP_ASK, "203.0.113.50", "203.0.113.30")["stdout"].strip() == "hello",
              "the server from its own address")
        check(srv.exec("/usr/bin/python3", "-c", UDP_ASK, "203.0.113.50", "203.0.113.66")["stdout"].strip() ==
              "timeout", "the server from an address it gave itself")
        srv.exec("/sbin/ip", "addr", "del", "203.0.113.66/32", "dev", "eth0")
    finally:
        echo.kill()
        echo.wait()
    # The firewall on real traffic: TCP 22 dropped from .51, not from .50.
    srv.job("vps.firewall.set", {"enabled": True, "inboundPolicy": "allow", "outboundPolicy": "allow", "rules": [
        {"type": "inbound", "protocol": "tcp", "port": "22", "source": "203.0.113.51/32", "destination": "any",
         "action": "deny", "enabled": True, "comment": "no ssh from .51"}]})
    check(ssh(s, up, "203.0.113.30", src="203.0.113.50") == (0, "guest-1"), "SSH from .50")
    rc, out = ssh(s, up, "203.0.113.30", src="203.0.113.51", timeout=5)
    check(rc != 0, ("SSH from .51 got through the firewall", out))
    srv.job("vps.firewall.set", {"enabled": False, "inboundPolicy": "allow", "outboundPolicy": "allow", "rules": []})
    # A new address: routed at once; in the guest after its next boot (the restore below).
    more = dict(NET, ipv4=NET["ipv4"] + [{"address": "203.0.113.32", "prefix": 32}])
    check(srv.job("vps.network.set", {"network": more}).get("restartRequired") is True, "restartRequired")
    check("203.0.113.32" in ip("route", "show", "203.0.113.32"), "the new address is routed at once")

    # exec: outputs, exit codes, signals, truncation, timeouts.
    r = srv.sh("echo out; echo err >&2; exit 3")
    check(r["exitCode"] == 3 and r["stdout"] == "out\n" and r["stderr"] == "err\n" and not r["truncated"], r)
    r = srv.sh("kill -KILL $$")
    check(r["exitCode"] != 0, ("killed by a signal", r))
    r = srv.sh("yes | head -c 3000000")
    check(r["truncated"] and 0 < len(r["stdout"]) <= 1 << 20, (r["truncated"], len(r["stdout"])))
    t1 = time.time()
    srv.job("vps.exec", {"command": ["/bin/sleep", "120"], "timeoutSec": 3}, code="JOB_TIMEOUT")
    check(time.time() - t1 < 60, "the timeout waited too long")

    # The agent killed while an exec runs: the job fails JOB_INTERRUPTED, the command ran once.
    jid = s.controller.enqueue("vps.exec", {"command": ["/bin/sh", "-c", "echo run >> /root/runs; sleep 15"],
                                            "timeoutSec": 60}, target={"type": "vps", "id": vps})
    wait_for(lambda: s.agent.status()["jobs"]["running"] >= 1, 30, "the exec running")
    time.sleep(2)
    s.agent.kill9()
    s.agent.start()
    r = s.controller.wait_results([jid], 120)[jid]["results"][-1]
    check(r["status"] == "failed" and r["error"]["code"] == "JOB_INTERRUPTED", r)
    check(srv.sh("wc -l < /root/runs")["stdout"].strip() == "1", "the interrupted command ran again")

    # A live backup, a change after it, the restore.
    srv.sh("echo before > /root/data.txt; sync")
    t1 = time.time()
    b = srv.job("vps.backup.create", {"backupId": "live-1", "limits": {"maxBackups": 2}}, timeout=900)
    t_backup = time.time() - t1
    check(srv.job("vps.status")["state"] == "running", "the server ran on during its backup")
    srv.sh("echo after > /root/data.txt; sync")
    t1 = time.time()
    srv.job("vps.backup.restore", {"backupId": "live-1"}, timeout=900)
    t_restore = time.time() - t1
    srv.wait_agent("after the restore")
    check(srv.exec("/bin/cat", "/root/data.txt")["stdout"] == "before\n", "the file as it was at the backup")
    wait_for(lambda: "203.0.113.32/32" in srv.exec("/sbin/ip", "-o", "addr", "show", "dev", "eth0")["stdout"], 60,
             "the new address inside the guest after its boot")
    wait_for(lambda: ssh(s, up, "203.0.113.32") == (0, "guest-1"), 60, "SSH to the new address")
    print(f"live backup of the {PLAN['storageMB']} MB disk: {t_backup:.1f} s ({b['sizeBytes'] >> 20} MiB), "
          f"restore {t_restore:.1f} s + boot")
    srv.job("vps.backup.delete", {"backupId": "live-1"})
    check(srv.job("vps.backup.list") == [], "the backup is gone")

    # Upgrade: the disk grows under the running guest; memory and vCPUs need a restart.
    upg = srv.job("vps.upgrade", {"plan": dict(PLAN, storageMB=4096, ramMB=1024, cpuCores=2)})
    check(upg.get("restartRequired") is True, upg)
    wait_for(lambda: srv.exec("/bin/cat", "/sys/block/vda/size")["stdout"].strip() == str(4096 * 2048), 60,
             "the guest sees its larger disk")

    # Reinstall to a new hostname and key: the old disk's content is gone, the new
    # settings are in the guest (its new plan too: the reinstall boots it again), the
    # network is kept.
    key2 = os.path.join(s.tmp, "id_second")
    subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", key2, "-C", "second"], check=True)
    with open(key2 + ".pub") as f:
        pub2 = f.read().strip()
    srv.job("vps.reinstall", {"hostname": "guest-2", "sshKeyId": str(uuid.uuid4()), "sshPublicKey": pub2,
                              "vmPassword": "N3w!passw0rd"}, timeout=900)
    srv.wait_agent("after the reinstall")
    check(srv.exec("/bin/hostname")["stdout"].strip() == "guest-2", "the new hostname")
    check(srv.sh("test -e /root/data.txt; echo $?")["stdout"].strip() == "1", "the old disk's file survived")
    check(srv.sh("nproc")["stdout"].strip() == "2", "the upgrade's vCPUs after the reboot")
    s.key = key2
    wait_for(lambda: ssh(s, up, "203.0.113.30") == (0, "guest-2"), 120, "SSH with the new key, same address")
    srv.job("vps.delete")
    srv.job("vps.status", code="VPS_NOT_FOUND")


if __name__ == "__main__":
    sys.exit(run_cases({f.__name__: f for f in [guest]}))
