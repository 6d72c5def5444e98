#!/usr/bin/python3
# SPDX-License-Identifier: GPL-2.0-or-later
"""The tests a ctest run skipped (exit 77), and whether they had the right to.

    scripts/ctest-skips.py PASS BUILD_DIR JUNIT_FILE

JUNIT_FILE is what `ctest --output-junit` wrote for the run; the tests' labels come
from `ctest --show-only=json-v1`. A test says what it needs with needs-* labels (the
list is in tests/CMakeLists.txt). On a machine like CI's (root, with private mount
and network namespaces), a skipped test fails the run unless one of its needs is
really missing here; a needs-* label this script does not know fails it too. On any
other machine the skips are only listed. Prints a report for scripts/test.sh to
show at the end; exit 0 (fine), 1 (a skip that should not have happened).
"""
import json
import os
import shutil
import subprocess
import sys
import xml.etree.ElementTree as ET


def runs(*cmd):
    try:
        return subprocess.run(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, timeout=30).returncode == 0
    except (OSError, subprocess.TimeoutExpired):
        return False


def cgroupfs_mounted():
    try:
        with open("/proc/self/mounts") as f:
            return any(len(w) > 2 and w[2] in ("cgroup", "cgroup2") for w in (line.split() for line in f))
    except OSError:
        return False


def which(*names):
    return all(shutil.which(n) or os.path.exists(f"/usr/sbin/{n}") for n in names)


# What each needs-* label asks for, as found on this machine (tests/CMakeLists.txt).
NEEDS = {
    "root": lambda: os.geteuid() == 0,
    "netns": lambda: runs("unshare", "-n", "true"),
    "mountns": lambda: runs("unshare", "-m", "--propagation", "private", "true"),
    "cgroupfs": cgroupfs_mounted,
    "libvirtd": lambda: os.geteuid() == 0 and which("libvirtd", "qemu-system-x86_64"),
    "registry": lambda: which("docker-registry"),
    "kvm": lambda: False,  # never required: CI machines have no working nested KVM
}


def test_labels(build):
    out = subprocess.run(["ctest", "--test-dir", build, "--show-only=json-v1"], capture_output=True, text=True,
                         check=True).stdout
    labels = {}
    for t in json.loads(out).get("tests", []):
        props = {p["name"]: p["value"] for p in t.get("properties", [])}
        labels[t["name"]] = list(props.get("LABELS", []))
    return labels


def reason_of(case):
    out = (case.findtext("system-out") or "").strip().splitlines()
    for line in reversed(out):
        if "skip" in line.lower() or "needs" in line.lower():
            return line.strip()[:160]
    return out[-1].strip()[:160] if out else "(no output)"


def main():
    if len(sys.argv) != 4:
        sys.stderr.write(__doc__)
        return 2
    name, build, junit = sys.argv[1:]
    if not os.path.exists(junit):
        print(f"== {name}: no JUnit report at {junit}: skipped tests unknown")
        return 1
    cases = ET.parse(junit).getroot().iter("testcase")
    skipped, not_run = [], []
    for c in cases:
        if c.get("status") != "notrun":
            continue
        sk = c.find("skipped")
        msg = sk.get("message", "") if sk is not None else ""
        (skipped if "SKIP_RETURN_CODE" in msg else not_run).append((c.get("name"), c, msg))
    labels = test_labels(build)
    have = {k: bool(f()) for k, f in NEEDS.items()}
    enforce = have["root"] and have["netns"] and have["mountns"]

    bad = []
    lines = []
    for test, case, _ in skipped:
        needs = [lb[len("needs-"):] for lb in labels.get(test, []) if lb.startswith("needs-")]
        unknown = [n for n in needs if n not in NEEDS]
        missing = [n for n in needs if n in NEEDS and not have[n]]
        why = reason_of(case)
        if unknown:
            verdict = f"unknown label(s) {', '.join('needs-' + n for n in unknown)} (tests/CMakeLists.txt lists them)"
            bad.append(test)
        elif missing:
            verdict = f"allowed: missing here: {', '.join(missing)}"
        else:
            verdict = ("NOT ALLOWED: " + (f"needs {', '.join(needs)}, all here" if needs else "declares no needs-*"))
            bad.append(test)
        lines.append(f"  {test}: {verdict}\n      its reason: {why}")
    for test, case, msg in not_run:
        lines.append(f"  {test}: not run ({msg or case.findtext('system-out', '').strip()[:120]})")

    print(f"== {name}: {len(skipped)} skipped, {len(not_run)} not run otherwise"
          + (":" if lines else ""))
    for line in lines:
        print(line)
    here = ", ".join(k for k, v in have.items() if v) or "nothing"
    if enforce:
        print(f"   (root with namespaces: a skip must name a need missing here; here: {here})")
        if bad:
            print(f"   FAILED: {len(bad)} test(s) skipped without a need missing here: {' '.join(bad)}")
            return 1
    else:
        print(f"   (not enforced: not root with private mount and network namespaces; here: {here})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
