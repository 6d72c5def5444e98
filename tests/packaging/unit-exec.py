#!/usr/bin/python3
# SPDX-License-Identifier: GPL-2.0-or-later
"""Run a command under the process restrictions of a systemd unit, without systemd.

    unit-exec.py [--devices-cgroup NAME] UNIT -- COMMAND [ARG...]

For the packaging tests (test-sandbox-apps.sh), which have no systemd as PID 1. It
reads the [Service] section of UNIT and applies, in this process, then execs COMMAND:

  CapabilityBoundingSet=   every capability not listed is dropped from the bounding
                           set (root's execve then keeps exactly the listed ones)
  NoNewPrivileges=yes      prctl(PR_SET_NO_NEW_PRIVS)
  SystemCallFilter=~...    a seccomp filter: the listed calls (@groups expanded with
                           `systemd-analyze syscall-filter`) fail with
                           SystemCallErrorNumber= (default: the process is killed)
  RestrictNamespaces=      unshare/clone with a namespace flag not listed fail with
                           EPERM, so does setns into such a kind or with nstype 0;
                           clone3 fails with ENOSYS (libc falls back to clone), as
                           systemd does it
  RestrictAddressFamilies= socket() of a family not listed fails with EAFNOSUPPORT
  RestrictRealtime=yes     sched_setscheduler to SCHED_FIFO/RR fails with EPERM

With --devices-cgroup NAME, and a cgroup v1 devices controller at
/sys/fs/cgroup/devices (a hybrid host, where systemd enforces devices the same way),
it also applies DevicePolicy=closed and DeviceAllow= in the cgroup NAME there (made
if missing) and joins it; the children stay in it, as in the unit's cgroup. Without
that controller it says so and goes on (a cgroup v2 BPF program is not emulated).

Like systemd without SystemCallArchitectures=, each filter covers every ABI of the
host (x86-64, x86, x32 on x86-64), through libseccomp (ctypes, no Python module).

It does NOT emulate what needs the service manager: Delegate=, KillMode=, OOMPolicy=
and the directories. It REFUSES (exit 3) a unit
that has an option creating a private mount namespace (the design forbids them:
docs/apps-on-systemd.md) or a seccomp-based option it does not implement, so that a
later edit of the unit cannot pass unnoticed.
"""
import ctypes
import ctypes.util
import errno
import os
import re
import socket
import stat
import subprocess
import sys

# Options that make systemd set up a mount namespace for the service
# (exec_needs_mount_namespace() in src/core/execute.c), whatever their value but the
# default; MountFlags= and MountAPIVFS= only matter with one, and are refused too.
MOUNT_NS_OPTIONS = (
    "ProtectSystem", "ProtectHome", "PrivateTmp", "PrivateDevices", "PrivateMounts",
    "ProtectKernelTunables", "ProtectKernelModules", "ProtectKernelLogs", "ProtectControlGroups",
    "ProtectProc", "ProcSubset", "ReadWritePaths", "ReadOnlyPaths", "InaccessiblePaths",
    "ExecPaths", "NoExecPaths", "TemporaryFileSystem", "BindPaths", "BindReadOnlyPaths",
    "RootDirectory", "RootImage", "MountImages", "ExtensionImages", "ExtensionDirectories",
    "PrivateIPC", "IPCNamespacePath", "MountAPIVFS", "LogNamespace", "DynamicUser",
    "MountFlags",
)
# Seccomp-based options this emulator does not implement.
NOT_EMULATED = ("SystemCallArchitectures", "MemoryDenyWriteExecute", "LockPersonality",
                "ProtectHostname", "RestrictSUIDSGID", "SystemCallLog",
                "RestrictFileSystems", "PrivateUsers", "PrivateNetwork", "NetworkNamespacePath")

NS_FLAGS = {"cgroup": 0x02000000, "ipc": 0x08000000, "net": 0x40000000, "mnt": 0x00020000,
            "pid": 0x20000000, "user": 0x10000000, "uts": 0x04000000, "time": 0x00000080}
PR_CAPBSET_DROP = 24
PR_SET_NO_NEW_PRIVS = 38
SCMP_ACT_ALLOW = 0x7FFF0000
SCMP_CMP_EQ, SCMP_CMP_GT, SCMP_CMP_MASKED_EQ = 4, 6, 7
AF_MAX = 46  # families 0..45 exist in Linux 6.x


def die(msg, code=3):
    print(f"unit-exec: {msg}", file=sys.stderr)
    sys.exit(code)


def service_settings(path):
    """[(key, value)] of the [Service] section, in order."""
    out, section = [], None
    with open(path, encoding="utf-8") as f:
        for line in f:
            line = line.strip()
            if not line or line[0] in "#;":
                continue
            if line.startswith("["):
                section = line
                continue
            if section == "[Service]" and "=" in line:
                k, v = line.split("=", 1)
                out.append((k.strip(), v.strip()))
    return out


def expand_groups(names):
    """Expand @groups through systemd-analyze; plain names are kept."""
    result = set()
    for n in names:
        if not n.startswith("@"):
            result.add(n)
            continue
        text = subprocess.run(["systemd-analyze", "syscall-filter", n], check=True,
                              capture_output=True, text=True).stdout
        for line in text.splitlines():
            m = re.match(r"^ {4}([a-z_0-9@-]+)$", line)
            if m:
                result |= expand_groups([m.group(1)]) if m.group(1).startswith("@") else {m.group(1)}
    return result


class ArgCmp(ctypes.Structure):
    _fields_ = [("arg", ctypes.c_uint), ("op", ctypes.c_int),
                ("datum_a", ctypes.c_uint64), ("datum_b", ctypes.c_uint64)]


class Seccomp:
    def __init__(self):
        name = ctypes.util.find_library("seccomp") or "libseccomp.so.2"
        self.lib = ctypes.CDLL(name, use_errno=True)
        self.lib.seccomp_init.restype = ctypes.c_void_p
        self.lib.seccomp_init.argtypes = [ctypes.c_uint32]
        self.lib.seccomp_arch_resolve_name.restype = ctypes.c_uint32
        self.lib.seccomp_arch_resolve_name.argtypes = [ctypes.c_char_p]
        self.lib.seccomp_arch_native.restype = ctypes.c_uint32
        self.lib.seccomp_arch_add.argtypes = [ctypes.c_void_p, ctypes.c_uint32]
        self.lib.seccomp_syscall_resolve_name.argtypes = [ctypes.c_char_p]
        self.lib.seccomp_rule_add_array.argtypes = [ctypes.c_void_p, ctypes.c_uint32, ctypes.c_int,
                                                   ctypes.c_uint, ctypes.POINTER(ArgCmp)]
        self.lib.seccomp_load.argtypes = [ctypes.c_void_p]
        self.lib.seccomp_release.argtypes = [ctypes.c_void_p]
        native = self.lib.seccomp_arch_native()
        self.extra_archs = []
        if native == self.lib.seccomp_arch_resolve_name(b"x86_64"):
            self.extra_archs = [self.lib.seccomp_arch_resolve_name(b"x86"),
                                self.lib.seccomp_arch_resolve_name(b"x32")]
        self.filters = []

    def new(self):
        ctx = self.lib.seccomp_init(SCMP_ACT_ALLOW)
        if not ctx:
            die("seccomp_init failed")
        for a in self.extra_archs:
            r = self.lib.seccomp_arch_add(ctx, a)
            if r < 0 and r != -errno.EEXIST:
                die(f"seccomp_arch_add: {os.strerror(-r)}")
        self.filters.append(ctx)
        return ctx

    def rule(self, ctx, action, name, *cmps):
        nr = self.lib.seccomp_syscall_resolve_name(name.encode())
        if nr == -1:  # __NR_SCMP_ERROR: unknown to libseccomp
            return False
        arr = (ArgCmp * max(1, len(cmps)))(*[ArgCmp(*c) for c in cmps])
        r = self.lib.seccomp_rule_add_array(ctx, action, nr, len(cmps), arr)
        if r < 0 and r != -errno.EEXIST:
            die(f"seccomp rule for {name}: {os.strerror(-r)}")
        return True

    def load(self):
        for ctx in self.filters:
            r = self.lib.seccomp_load(ctx)
            if r < 0:
                die(f"seccomp_load: {os.strerror(-r)}")


# DevicePolicy=closed: what systemd always allows (src/core/cgroup.c, auto_devices).
CLOSED_DEFAULTS = [("/dev/null", "rwm"), ("/dev/zero", "rwm"), ("/dev/full", "rwm"),
                   ("/dev/random", "rwm"), ("/dev/urandom", "rwm"), ("/dev/tty", "rwm"),
                   ("/dev/ptmx", "rwm"), ("char-pts", "rw")]
DEVICES_V1 = "/sys/fs/cgroup/devices"


def device_rule(spec, perms):
    """'c 10:237 rw' for a node path, 'b 7:* rw' for block-NAME/char-NAME."""
    if spec.startswith(("block-", "char-")):
        kind, name = spec.split("-", 1)
        section = "Block devices:" if kind == "block" else "Character devices:"
        cur = None
        with open("/proc/devices", encoding="ascii") as f:
            for line in f:
                line = line.strip()
                if line.endswith(":"):
                    cur = line
                elif cur == section and line.split()[1:] == [name]:
                    return f"{kind[0]} {line.split()[0]}:* {perms}"
        die(f"DeviceAllow={spec}: no such driver in /proc/devices (not loaded?)")
    st = os.stat(spec)
    kind = "c" if stat.S_ISCHR(st.st_mode) else "b" if stat.S_ISBLK(st.st_mode) else None
    if kind is None:
        die(f"DeviceAllow={spec}: not a device node")
    return f"{kind} {os.major(st.st_rdev)}:{os.minor(st.st_rdev)} {perms}"


def apply_devices(settings, name):
    policy = [v for k, v in settings if k == "DevicePolicy"]
    allow = [v.split() for k, v in settings if k == "DeviceAllow"]
    if not policy and not allow:
        return
    if not os.path.exists(os.path.join(DEVICES_V1, "devices.allow")):
        print("unit-exec: no cgroup v1 devices controller: DevicePolicy=/DeviceAllow= not emulated",
              file=sys.stderr)
        return
    if policy and policy[-1] not in ("closed", "strict"):
        die(f"DevicePolicy={policy[-1]} is not emulated")
    rules = [] if policy and policy[-1] == "strict" else [device_rule(p, m) for p, m in CLOSED_DEFAULTS]
    for a in allow:
        rules.append(device_rule(a[0], a[1] if len(a) > 1 else "rwm"))
    d = os.path.join(DEVICES_V1, name)
    os.makedirs(d, exist_ok=True)
    with open(os.path.join(d, "devices.deny"), "w") as f:
        f.write("a")
    for r in rules:
        with open(os.path.join(d, "devices.allow"), "w") as f:
            f.write(r)
    with open(os.path.join(d, "cgroup.procs"), "w") as f:
        f.write(str(os.getpid()))


def act_errno(e):
    return 0x00050000 | (e & 0xFFFF)


def main():
    argv = sys.argv[1:]
    devices_cgroup = None
    if argv[:1] == ["--devices-cgroup"] and len(argv) > 1:
        devices_cgroup, argv = argv[1], argv[2:]
    if len(argv) < 3 or argv[1] != "--":
        die("usage: unit-exec.py [--devices-cgroup NAME] UNIT -- COMMAND [ARG...]", 2)
    unit, cmd = argv[0], argv[2:]
    settings = service_settings(unit)
    keys = {k for k, _ in settings}
    bad = sorted(keys & set(MOUNT_NS_OPTIONS))
    if bad:
        die("the unit sets " + ", ".join(k + "=" for k in bad) +
            ": each makes systemd give the service a mount namespace of its own, and the"
            " agent's mounts must be the host's (docs/apps-on-systemd.md)")
    bad = sorted(keys & set(NOT_EMULATED))
    if bad:
        die("the unit sets " + ", ".join(k + "=" for k in bad) + ", which this emulator does not implement")

    caps, deny, err_no, nns, families, realtime, nnp = None, set(), None, None, None, False, False
    clock = False
    for k, v in settings:
        if k == "CapabilityBoundingSet":
            caps = (caps or set()) | set(v.split())
        elif k == "NoNewPrivileges":
            nnp = v == "yes"
        elif k == "SystemCallFilter":
            if not v.startswith("~"):
                die("SystemCallFilter= allow-lists are not emulated")
            deny |= set(v[1:].split())
        elif k == "SystemCallErrorNumber":
            err_no = getattr(errno, v, None)
            if err_no is None:
                die(f"unknown SystemCallErrorNumber={v}")
        elif k == "RestrictNamespaces":
            nns = set() if v == "yes" else set(NS_FLAGS) if v == "no" else set(v.split())
            if not nns <= set(NS_FLAGS):
                die(f"RestrictNamespaces={v}: unknown kind")
        elif k == "RestrictAddressFamilies":
            families = v.split()
        elif k == "RestrictRealtime":
            realtime = v == "yes"
        elif k == "ProtectClock" and v == "yes":
            # What systemd does for it: @clock refused with EPERM, CAP_SYS_TIME and
            # CAP_WAKE_ALARM dropped, DeviceAllow=char-rtc r (see apply_devices).
            clock = True

    if devices_cgroup:
        # ProtectClock='s char-rtc is skipped where no rtc driver is loaded, as systemd does.
        rtc = clock and any(ln.split()[1:] == ["rtc"] for ln in open("/proc/devices", encoding="ascii"))
        apply_devices(settings + ([("DeviceAllow", "char-rtc r")] if rtc else []), devices_cgroup)
    if clock:
        if caps is None:
            die("ProtectClock=yes is emulated only with a CapabilityBoundingSet=")
        caps -= {"CAP_SYS_TIME", "CAP_WAKE_ALARM"}
    # Capabilities: drop every one that is not listed.
    if caps is not None:
        libc = ctypes.CDLL(None, use_errno=True)
        last = int(open("/proc/sys/kernel/cap_last_cap").read())
        names = subprocess.run(["setpriv", "--list-caps"], check=True, capture_output=True,
                               text=True).stdout.split()
        keep = set()
        for c in caps:
            n = c.lower().removeprefix("cap_")
            if n not in names:
                die(f"unknown capability {c}")
            keep.add(names.index(n))
        for bit in range(last + 1):
            if bit not in keep and libc.prctl(PR_CAPBSET_DROP, bit, 0, 0, 0) != 0:
                die(f"PR_CAPBSET_DROP {bit}: {os.strerror(ctypes.get_errno())}")
    if nnp:
        libc = ctypes.CDLL(None, use_errno=True)
        if libc.prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0:
            die("PR_SET_NO_NEW_PRIVS failed")

    sc = Seccomp()
    if deny:
        ctx = sc.new()
        action = act_errno(err_no) if err_no is not None else 0x80000000  # KILL_PROCESS
        for name in sorted(expand_groups(deny)):
            sc.rule(ctx, action, name)
    if clock:
        ctx = sc.new()
        for name in sorted(expand_groups(["@clock"])):
            sc.rule(ctx, act_errno(errno.EPERM), name)
    if nns is not None:
        ctx = sc.new()
        eperm = act_errno(errno.EPERM)
        for kind, flag in sorted(NS_FLAGS.items()):
            if kind in nns:
                continue
            sc.rule(ctx, eperm, "unshare", (0, SCMP_CMP_MASKED_EQ, flag, flag))
            sc.rule(ctx, eperm, "setns", (1, SCMP_CMP_MASKED_EQ, flag, flag))
            if kind != "time":  # for clone() 0x80 is part of the exit signal
                sc.rule(ctx, eperm, "clone", (0, SCMP_CMP_MASKED_EQ, flag, flag))
        if nns != set(NS_FLAGS):
            sc.rule(ctx, eperm, "setns", (1, SCMP_CMP_EQ, 0, 0))
            sc.rule(ctx, act_errno(errno.ENOSYS), "clone3")
    if families is not None:
        ctx = sc.new()
        allowed = set()
        for f in families:
            v = getattr(socket, f, None)
            if v is None:
                die(f"unknown address family {f}")
            allowed.add(int(v))
        for fam in range(AF_MAX):
            if fam not in allowed:
                sc.rule(ctx, act_errno(errno.EAFNOSUPPORT), "socket", (0, SCMP_CMP_EQ, fam, 0))
        sc.rule(ctx, act_errno(errno.EAFNOSUPPORT), "socket", (0, SCMP_CMP_GT, AF_MAX - 1, 0))
    if realtime:
        ctx = sc.new()
        for policy in (1, 2):  # SCHED_FIFO, SCHED_RR, with or without SCHED_RESET_ON_FORK
            sc.rule(ctx, act_errno(errno.EPERM), "sched_setscheduler",
                    (1, SCMP_CMP_MASKED_EQ, 0xbfffffff, policy))
    sys.stdout.flush()
    sc.load()
    os.execvp(cmd[0], cmd)


if __name__ == "__main__":
    main()
