#!/usr/bin/python3
# SPDX-License-Identifier: GPL-2.0-or-later
"""The VM driver as a module (drivers/vm-module.h) with the real nodeagentd.

  not_linked               nodeagentd and nodeagentctl link neither libvirt nor libarchive
                           (nor what they bring: glib, libxml2, ICU); the module links libvirt
  loaded_when_configured   [vm] driver = libvirt maps the module and libvirt, none maps neither;
                           libarchive is not mapped before an image is unpacked
  refusals                 a copy of nodeagentd beside a lib/nodeagent/ of our own: a missing
                           module, one of another build (its ABI string, or a call the daemon
                           does not export), a file that is not a module, one writable by its
                           group and one in a directory writable by all each stop the agent
                           (exit 1) with one line naming the file and the reason; the copied
                           real module works
"""
import os
import re
import shutil
import subprocess
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "harness"))
import nodeagent_harness as harness  # noqa: E402
from nodeagent_harness import BUILD, NODEAGENTCTL, NODEAGENTD, check, run_cases, with_setup  # noqa: E402

MODULE_NAME = "nodeagent-vm-libvirt.so"
HEAVY = ("libvirt", "libglib", "libgio", "libxml2", "libicu", "libarchive")


def reldir():
    """VM_MODULE_RELDIR of this build: where the module lives relative to nodeagentd's directory."""
    with open(os.path.join(BUILD, "generated", "vm-module-abi.h")) as f:
        return re.search(r'#define VM_MODULE_RELDIR "([^"]*)"', f.read()).group(1)


def module_path():
    return os.path.normpath(os.path.join(os.path.dirname(NODEAGENTD), reldir(), MODULE_NAME))


def needed(path):
    out = subprocess.run(["/usr/bin/readelf", "-d", path], capture_output=True, text=True, check=True).stdout
    return [ln.split("[")[1].split("]")[0] for ln in out.splitlines() if "(NEEDED)" in ln]


def ldd(path):
    out = subprocess.run(["/usr/bin/ldd", path], capture_output=True, text=True, check=True).stdout
    return [ln.split()[0] for ln in out.splitlines() if ln.strip()]


def mapped(pid):
    with open(f"/proc/{pid}/maps") as f:
        return {ln.split()[5] for ln in f if len(ln.split()) > 5}


def not_linked():
    for binary in (NODEAGENTD, NODEAGENTCTL):
        bad = [lib for lib in ldd(binary) if lib.startswith(HEAVY)]
        check(not bad, f"{binary} loads {bad}")
    check(os.path.exists(module_path()), f"no module at {module_path()}")
    check("libvirt.so.0" in needed(module_path()), needed(module_path()))


@with_setup()
def loaded_when_configured(s):
    files = mapped(s.agent.proc.pid)
    check(module_path() in files, f"{module_path()} not mapped with [vm] driver = libvirt")
    check(any(os.path.basename(f).startswith("libvirt.so") for f in files), files)
    check(not any(os.path.basename(f).startswith("libarchive") for f in files), "libarchive mapped at start")
    check(s.agent.stop() == 0)
    with open(s.agent.conf) as f:
        text = f.read()
    with open(s.agent.conf, "w") as f:
        f.write(text.replace("[vm]\n", "[vm]\ndriver = none\n"))
    s.agent.start()
    files = mapped(s.agent.proc.pid)
    check(not any(MODULE_NAME in f or os.path.basename(f).startswith("libvirt") for f in files),
          f"VPS off, yet mapped: {[f for f in files if 'virt' in f]}")


@with_setup(start_agent=False)
def refusals(s):
    # A tree of our own: bin/nodeagentd (a copy) and its module directory beside it.
    tree = os.path.join(s.tmp, "tree")
    daemon = os.path.join(tree, "sbin", "nodeagentd")
    mod_dir = os.path.normpath(os.path.join(tree, "sbin", reldir()))
    mod = os.path.join(mod_dir, MODULE_NAME)
    os.makedirs(os.path.dirname(daemon))
    os.makedirs(mod_dir)
    os.chmod(mod_dir, 0o755)
    shutil.copy2(NODEAGENTD, daemon)

    def refused(why):
        r = subprocess.run([daemon, "-c", s.agent.conf], capture_output=True, text=True, env=s.agent.env, timeout=30)
        lines = [ln for ln in r.stderr.splitlines() if ln.startswith("<3>")]  # errors (debug lines besides)
        check(r.returncode == 1, f"exit {r.returncode}: {r.stderr}")
        check(len(lines) == 1 and mod in lines[0] and why in lines[0], f"wanted one line naming {mod}: {why}: "
              f"{r.stderr}")
        print("refused:", lines[0])

    refused("no such file")
    shutil.copy(os.path.join(BUILD, "tests", "drivers", "vm-module", "other-build.so"), mod)
    refused("built for another nodeagent (module ABI 0.0.1/release/0123456789abcdef, nodeagentd ABI ")
    shutil.copy(os.path.join(BUILD, "tests", "drivers", "vm-module", "missing-symbol.so"), mod)
    refused("undefined symbol: na_function_of_another_build (a module of another build? this nodeagentd is ABI ")
    with open(mod, "wb") as f:
        f.write(b"not an ELF object\n" * 64)
    refused("cannot load")
    os.unlink(mod)
    shutil.copy2(module_path(), mod)
    os.chmod(mod, 0o775)
    refused("writable by no one else")
    os.chmod(mod, 0o755)
    os.chmod(mod_dir, 0o777)
    refused("writable by no one else")
    os.chmod(mod_dir, 0o755)
    # The copied module of this build: the copied daemon runs with it.
    harness.NODEAGENTD = daemon
    s.agent.start()
    check(mod in mapped(s.agent.proc.pid), f"{mod} not mapped")
    check(s.agent.stop() == 0)


CASES = {"not_linked": not_linked, "loaded_when_configured": loaded_when_configured, "refusals": refusals}

if __name__ == "__main__":
    sys.exit(run_cases(CASES))
