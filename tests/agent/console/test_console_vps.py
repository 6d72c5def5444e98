#!/usr/bin/python3
# SPDX-License-Identifier: GPL-2.0-or-later
"""Server consoles on a real guest (issue 13): a real libvirtd (tests/drivers/vm-real/libvirtd.sh)
boots the busybox TCG guest of tests/drivers/vm-real/guest.sh through vps.create; the agent
bridges its serial console (the serial port's pty, opened raw) and its
VNC display (virDomainOpenGraphicsFD) to the test controller's relay as binary
frames, and the bytes are checked both ways."""
import base64
import os
import sys
import time
import uuid

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "harness"))
sys.path.insert(0, HERE)
from nodeagent_harness import check, needs, run_cases, wait_for, with_setup  # noqa: E402
from test_console import Console, app_or_vps_job, failed, ok, wait_closed_event  # noqa: E402
import vmreal  # noqa: E402

VPS = str(uuid.uuid4())
PLAN = {"cpuCores": 1, "cpuThreads": 1, "ramMB": 256, "storageMB": 256, "networkSpeedLimitMbps": 0,
        "bandwidthLimitGb": 1000, "maxSnapshots": 1}


def binary(con):
    return b"".join(base64.b64decode(m["b64"]) for m in con.messages()["messages"] if m["op"] == "binary")


@needs("root", "libvirtd")
def serial_and_vnc():
    try:
        run()
    finally:
        vmreal.stop()


@with_setup(agent_conf=vmreal.agent_conf, before_start=vmreal.prepare)
def run(s):
    target = {"type": "vps", "id": VPS}
    try:
        # Not there yet: VPS_NOT_FOUND.
        failed(app_or_vps_job(s, "console.open", target, Console(s, target, mode="vps-serial").params),
               "VPS_NOT_FOUND")
        t0 = time.time()
        res = app_or_vps_job(s, "vps.create", target,
                             {"name": "console-1", "hostname": "console-1", "plan": PLAN,
                              "template": vmreal.TEMPLATE,
                              "network": {"ipv4": [{"address": "203.0.113.20", "prefix": 24}]},
                              "vmPassword": "Sup3r!secret"}, timeout=180)
        check(res["status"] == "succeeded", res)
        print(f"server created and started in {time.time() - t0:.1f}s")
        # A console on a booted guest: qemu's pty hangs up while the guest kernel brings
        # its serial port up (the agent opens it again then, for up to 15 s).
        wait_for(lambda: vmreal.booted(s, VPS), 120, "the guest's boot marker in its console log")
        print(f"guest booted in {time.time() - t0:.1f}s")
        # The serial console: the kernel's tty echoes what is typed (the guest's init
        # never reads it), so bytes go in and come back.
        ser = Console(s, target, mode="vps-serial")
        ok(ser.open())
        ser.send(b64=base64.b64encode(b"nodeagent-console-echo\r").decode())
        wait_for(lambda: b"nodeagent-console-echo" in binary(ser), 30, "the echo on the serial console")
        print(f"serial: {len(binary(ser))} bytes back, echo seen")
        # VNC: the RFB handshake, both ways.
        vnc = Console(s, target, mode="vps-vnc")
        ok(vnc.open())
        wait_for(lambda: binary(vnc).startswith(b"RFB 003.008\n"), 30, "RFB 003.008 from the display")
        vnc.send(b64=base64.b64encode(b"RFB 003.008\n").decode())
        wait_for(lambda: len(binary(vnc)) > 12, 30, "the security types after our version")
        types = binary(vnc)[12:]
        print(f"vnc: server version {binary(vnc)[:11].decode()}, security types {list(types[1:1 + types[0]])}")
        check(types[0] >= 1, types)

        # Listed, then closed from both sides.
        st = s.agent.status()
        modes = sorted(c["mode"] for c in st["consoles"])
        check("vps-vnc" in modes, st["consoles"])
        ok(app_or_vps_job(s, "console.close", target, {"sessionId": vnc.sid}))
        check(vnc.wait_closed()["reason"] == "closed")
        if not ser.messages()["closed"]:
            ser.close_from_relay(1000, "done")
            ser.wait_closed()
        # Deleting the server ends what is left and answers VPS_NOT_FOUND after.
        last = Console(s, target, mode="vps-serial")
        ok(last.open())
        ok(app_or_vps_job(s, "vps.delete", target, {}, timeout=120))
        closed = last.wait_closed(30)
        check(closed["reason"] in ("target-deleted", "target-stopped"), closed)
        check(wait_closed_event(s, last.sid)["data"]["reason"] in ("target-deleted", "target-stopped"))
    finally:
        print(f"domain state at the end: {vmreal.forget(VPS)}")


CASES = {"serial_and_vnc": serial_and_vnc}

if __name__ == "__main__":
    sys.exit(run_cases(CASES))
