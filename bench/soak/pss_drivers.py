#!/usr/bin/python3
# SPDX-License-Identifier: GPL-2.0-or-later
"""The agent's memory on start with each driver configured and not (issue 14, item 5).

Starts the real nodeagentd against the test controller once per configuration, waits
for its hello and --settle seconds, and prints RSS, PSS, USS (Private_Clean +
Private_Dirty) from /proc/PID/smaps_rollup and RssFile, and the RSS and PSS of its
exec helper (common/spawnd.h: a fork made at start, before the VM module is loaded,
that shares the agent's pages mapped by then; PSS splits those between the two, and
the agent's USS counts what was mapped after the fork); then, for 'all', 'no-vps' and
'minimal', where the resident pages come from (per mapped file, grouped by library
family), which files only the VPS driver maps, and, for an app-only node, what each
library that only one driver uses brings with it (from ldd). PSS shares each page
among every process that maps it, so it drops when other programs (another agent,
libvirtd) map the same libraries; USS does not. --before measures a second
nodeagentd (a build of an older commit) in the same run, each configuration just
before the current build. Configurations (each as the agent's config turns it off):
  all           libvirt (test driver), apps (root and crun), firewall, metrics
  no-vps        [vm] driver = none
  no-apps       [apps] enabled = false
  no-firewall   [firewall] enabled = false
  minimal       all three off (metrics cannot be turned off: always on)

  pss_drivers.py [--settle 3] [--before OLD_BUILD/agent/nodeagentd]
"""
import argparse
import os
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
SRC = os.path.dirname(os.path.dirname(HERE))
os.environ.setdefault("NA_SOURCE_DIR", SRC)
os.environ.setdefault("NA_BUILD_DIR", os.path.join(SRC, "build"))
sys.path.insert(0, os.path.join(SRC, "tests", "harness"))
sys.path.insert(0, HERE)
import nodeagent_harness as harness  # noqa: E402
from nodeagent_harness import Setup, private_netns  # noqa: E402
from bench_soak import apps_possible  # noqa: E402

FAMILIES = [("libvirt", ("libvirt",)), ("glib/gio/gobject", ("libglib", "libgio", "libgobject", "libgmodule", "libffi",
                                                           "libpcre2", "libmount", "libblkid", "libselinux")),
            ("libxml2", ("libxml2",)), ("ICU", ("libicu",)), ("libstdc++", ("libstdc++",)),
            ("gnutls/nettle/gmp/p11", ("libgnutls", "libnettle", "libhogweed", "libgmp", "libp11", "libtasn1",
                                      "libunistring", "libidn2")),
            ("OpenSSL", ("libssl", "libcrypto")), ("curl (both)", ("libcurl",)),
            ("krb5/ldap/sasl/ssh", ("libkrb5", "libk5crypto", "libgssapi", "libldap", "liblber", "libsasl2",
                                    "libssh", "libcom_err", "libkeyutils", "librtmp")),
            ("archive/compression", ("libarchive", "libzstd", "liblzma", "liblz4", "libbz2", "libz.", "libbrotli")),
            ("libc/ld.so/libm", ("libc.so", "ld-linux", "libm.so", "libresolv")),
            ("nodeagentd", ("nodeagentd",))]


def rollup(pid):
    out = {}
    with open(f"/proc/{pid}/smaps_rollup") as f:
        for line in f:
            k, _, rest = line.partition(":")
            if k in ("Rss", "Pss", "Private_Clean", "Private_Dirty"):
                out[k] = int(rest.split()[0]) / 1024
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("RssFile:"):
                out["RssFile"] = int(line.split()[1]) / 1024
    out["USS"] = out["Private_Clean"] + out["Private_Dirty"]
    return out


def exec_helper(pid):
    """The agent's exec helper (common/spawnd.h): its child running the same program, or None."""
    exe = os.readlink(f"/proc/{pid}/exe")
    for q in os.listdir("/proc"):
        try:
            with open(f"/proc/{q}/stat") as f:
                if int(f.read().rsplit(")", 1)[1].split()[1]) == pid and os.readlink(f"/proc/{q}/exe") == exe:
                    return int(q)
        except (OSError, ValueError):
            continue
    return None


def ldd(path):
    """{soname: path} of what path loads, all the way down."""
    out = {}
    for line in subprocess.run(["/usr/bin/ldd", path], capture_output=True, text=True, check=True).stdout.splitlines():
        parts = line.split()
        if len(parts) >= 3 and parts[1] == "=>":
            out[parts[0]] = parts[2]
    return out


def only_through(binary, prefixes):
    """The libraries binary loads only because it links a library whose soname starts
    with one of prefixes (itself included): what loading that library only when it is
    used (a module, dlopen) would leave out of a process that does not use it."""
    every = ldd(binary)
    dyn = subprocess.run(["/usr/bin/readelf", "-d", binary], capture_output=True, text=True, check=True).stdout
    needed = [ln.split("[")[1].split("]")[0] for ln in dyn.splitlines() if "(NEEDED)" in ln]
    keep = set()
    for n in needed:
        if n.startswith(prefixes) or n not in every:
            continue
        keep.add(n)
        keep.update(ldd(every[n]))
    return {os.path.basename(os.path.realpath(every[n])) for n in every if n not in keep}


# Linked libraries of nodeagentd that only one driver or job family uses, and what they bring.
ONLY_FOR = [("libvirt (VPS)", ("libvirt",)), ("libarchive (app images, app backups)", ("libarchive",)),
            ("libssh (app.sftp key checks)", ("libssh.",)), ("libnftnl+libmnl (firewall, app networks)",
                                                               ("libnftnl", "libmnl")),
            ("libcrypt (app.sftp hash checks)", ("libcrypt.",)), ("libwslay (consoles)", ("libwslay",))]


def per_lib(pid):
    """{file name: [rss MB, pss MB]} over the process's file mappings."""
    out = {}
    name, rss, pss = None, 0, 0
    with open(f"/proc/{pid}/smaps") as f:
        for line in f:
            parts = line.split()
            if "-" in parts[0] and len(parts) >= 5 and ":" not in parts[0]:
                if name:
                    v = out.setdefault(os.path.basename(name), [0.0, 0.0])
                    v[0] += rss / 1024
                    v[1] += pss / 1024
                name, rss, pss = (parts[5] if len(parts) > 5 and parts[5].startswith("/") else None), 0, 0
            elif parts[0] == "Rss:":
                rss = int(parts[1])
            elif parts[0] == "Pss:":
                pss = int(parts[1])
    if name:
        v = out.setdefault(os.path.basename(name), [0.0, 0.0])
        v[0] += rss / 1024
        v[1] += pss / 1024
    return out


def per_file(pid):
    """{family: [rss MB, pss MB]} over the process's mappings."""
    fam = {}
    name, rss, pss = None, 0, 0

    def add(name, rss, pss):
        key = "anonymous (heap, stacks)"
        if name and name.startswith("/"):
            base = os.path.basename(name)
            key = next((f for f, pre in FAMILIES if any(base.startswith(p) for p in pre)), "other libraries")
        elif name:
            key = "anonymous (heap, stacks)" if name in ("[heap]", "[stack]") else name
        v = fam.setdefault(key, [0.0, 0.0])
        v[0] += rss / 1024
        v[1] += pss / 1024

    with open(f"/proc/{pid}/smaps") as f:
        for line in f:
            parts = line.split()
            if "-" in parts[0] and len(parts) >= 5 and ":" not in parts[0]:
                if name is not None or rss:
                    add(name, rss, pss)
                name, rss, pss = (parts[5] if len(parts) > 5 else ""), 0, 0
            elif parts[0] == "Rss:":
                rss = int(parts[1])
            elif parts[0] == "Pss:":
                pss = int(parts[1])
    add(name, rss, pss)
    return fam


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--settle", type=float, default=3)
    ap.add_argument("--before", metavar="NODEAGENTD",
                    help="also measure this nodeagentd (a build of an older commit), before the current one in "
                         "each configuration, so both are measured under the same load")
    a = ap.parse_args()
    netns = private_netns()
    apps = apps_possible()

    def conf(vps=True, apps_on=True, fw=True):
        def make(s):
            c = {"agent": {"log_level": "info"}}
            if apps_on and apps:
                sys.path.insert(0, os.path.join(SRC, "tests", "agent", "kinds", "apps"))
                from test_apps import apps_conf
                c.update(apps_conf(s))
                c["apps"]["sftp_listen"] = ""
            else:
                c["apps"] = {"enabled": "false"}
            if not vps:
                c["vm"] = {"driver": "none", "uri": None}
            if not fw or not netns:
                c["firewall"] = {"enabled": "false"}
            return c
        return make

    runs = [("all", conf()), ("no-vps", conf(vps=False)), ("no-apps", conf(apps_on=False)),
            ("no-firewall", conf(fw=False)), ("minimal", conf(vps=False, apps_on=False, fw=False))]
    builds = [("before", a.before)] if a.before else []
    builds.append(("current", harness.NODEAGENTD))
    print(f"agent memory on start (after hello + {a.settle:g} s); apps {'on' if apps else 'off: needs root and crun'}, "
          f"firewall {'in a private netns' if netns else 'off: needs root'}; load {os.getloadavg()[0]:.1f}")
    for label, path in builds:
        print(f"  {label}: {path}")
    print(f"{'configuration':<14} {'build':<8} {'RSS MB':>7} {'PSS MB':>7} {'USS MB':>7} {'RssFile':>8} "
          f"{'helper RSS':>10} {'PSS':>6}")
    fams, libs = {}, {}
    for name, make in runs:
        for label, path in builds:
            harness.NODEAGENTD = path
            s = Setup(agent_conf=make)
            failed = True
            try:
                s.controller.hello()
                time.sleep(a.settle)
                m = rollup(s.agent.proc.pid)
                helper = exec_helper(s.agent.proc.pid)
                h = rollup(helper) if helper else {"Rss": 0.0, "Pss": 0.0}
                print(f"{name:<14} {label:<8} {m['Rss']:7.2f} {m['Pss']:7.2f} {m['USS']:7.2f} {m['RssFile']:8.2f} "
                      f"{h['Rss']:10.2f} {h['Pss']:6.2f}", flush=True)
                if label == "current":
                    fams[name] = per_file(s.agent.proc.pid)
                    libs[name] = per_lib(s.agent.proc.pid)
                failed = False
            finally:
                s.close(failed)
    print("where the resident pages come from (current build), MB (a library linked but unused still costs its "
          "relocated pages):")
    print(f"  {'':<26} {'all: RSS':>9} {'PSS':>6} {'no-vps: RSS':>12} {'PSS':>6} {'minimal: RSS':>13} {'PSS':>6}")
    for key, (rss, pss) in sorted(fams["all"].items(), key=lambda kv: -kv[1][0]):
        vr, vp = fams["no-vps"].get(key, [0.0, 0.0])
        mr, mp = fams["minimal"].get(key, [0.0, 0.0])
        if rss >= 0.05 or vr >= 0.05 or mr >= 0.05:
            print(f"  {key:<26} {rss:9.2f} {pss:6.2f} {vr:12.2f} {vp:6.2f} {mr:13.2f} {mp:6.2f}")
    gone = sorted(set(libs["all"]) - set(libs["no-vps"]))
    print(f"mapped with [vm] driver = libvirt, not with none: {len(gone)} files, "
          f"{sum(libs['all'][k][0] for k in gone):.2f} MB RSS in 'all': {' '.join(gone)}")
    app = libs["no-vps"]
    print("an app-only node (no-vps), on start: what each library only one driver uses brings with it "
          "(loading it only when used would leave this out):")
    for what, prefixes in ONLY_FOR:
        only = only_through(harness.NODEAGENTD, prefixes)
        mapped = [k for k in app if k in only]
        if not only:
            print(f"  {what:<44} not linked")
            continue
        print(f"  {what:<44} {len(mapped):2d} libraries, {sum(app[k][0] for k in mapped):5.2f} MB RSS "
              f"{sum(app[k][1] for k in mapped):5.2f} MB PSS: {' '.join(sorted(mapped))}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
