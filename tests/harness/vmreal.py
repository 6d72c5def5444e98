# SPDX-License-Identifier: GPL-2.0-or-later
"""A real libvirtd and the busybox TCG guest of tests/drivers/vm-real (guest.sh), for the
tests and the demo that need a real server: its serial console and VNC display.

    prepare(s)      (a Setup's before_start) start libvirtd (libvirtd.sh) and build the
                    guest once into GUEST (cached); raises Skip where libvirtd cannot run
    agent_conf(s)   the [vm] and [firewall] keys that point the agent at them
    stop()          stop the libvirtd this process started (by its pid files)
    forget(vps_id)  destroy and undefine a server's domain whatever state it is in
"""
import os
import subprocess

from nodeagent_harness import BUILD, SRC, Skip, check

VMREAL = os.path.join(SRC, "tests", "drivers", "vm-real")
# One cached guest per build tree, shared with test-vm-real (guest.sh locks its
# directory: one build, one download).
GUEST = os.environ.get("NA_VMREAL_GUEST_DIR") or os.path.join(BUILD, "tests", "drivers", "vm-real", "guest")
LIBVIRTD_DIR = os.environ.get("NA_VMREAL_LIBVIRTD_DIR") or "/run/nodeagent-vmreal"
URI = "qemu:///system"
TEMPLATE = {"id": "nodeagent-test-tiny", "imageSlug": "busybox-1", "os": "linux"}


def _libvirtd(action):
    env = dict(os.environ, NA_LIBVIRTD_USER=str(os.getpid()))
    return subprocess.run(["/bin/sh", os.path.join(VMREAL, "libvirtd.sh"), action, LIBVIRTD_DIR], env=env).returncode


def prepare(s=None):
    if os.geteuid() != 0:
        raise Skip("a real libvirtd needs root")
    r = _libvirtd("start")
    if r == 77:
        raise Skip("libvirtd cannot run on this machine")
    check(r == 0, f"libvirtd.sh start exited {r}")
    if subprocess.run(["/bin/sh", os.path.join(VMREAL, "guest.sh"), GUEST]).returncode != 0:
        stop()
        check(False, "guest.sh failed: the guest could not be built (see above)")


def stop():
    if os.geteuid() == 0:
        _libvirtd("stop")


def agent_conf(s):
    return {"vm": {"uri": URI, "templates_file": os.path.join(GUEST, "templates.json"), "images_dir": GUEST,
                   "domain_type": "qemu", "storage_dir": os.path.join(s.tmp, "disks")},
            "firewall": {"enabled": "false"}}


def booted(s, vps_id):
    """The guest's boot marker is in its serial console log."""
    try:
        with open(os.path.join(s.tmp, "disks", f"{vps_id}-console.log"), "rb") as f:
            return b"NODEAGENT-GUEST-UP" in f.read()
    except OSError:
        return False


def forget(vps_id):
    st = subprocess.run(["virsh", "-c", URI, "domstate", "--reason", f"vps-{vps_id}"], capture_output=True, text=True)
    subprocess.run(["virsh", "-c", URI, "destroy", f"vps-{vps_id}"], capture_output=True)
    subprocess.run(["virsh", "-c", URI, "undefine", "--nvram", f"vps-{vps_id}"], capture_output=True)
    return f"{st.stdout.strip()} {st.stderr.strip()}".strip()
