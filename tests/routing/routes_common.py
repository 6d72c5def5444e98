# SPDX-License-Identifier: GPL-2.0-or-later
"""What the app-routes test scripts share (test_haproxy.py, test_dns.py): the paths of
the two test fronts (haproxy-tool, dns-tool), skips, the needs-* labels, the runner.

python3 test_x.py CASE runs one case (exit 0, 1, or 77 when haproxy or dnsmasq is
missing, or root/namespaces for the cases that say so); --list prints each case and its
needs-* labels (tests/CMakeLists.txt na_python_cases registers them).
"""
import os
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "harness"))
from nodeagent_harness import BUILD  # noqa: E402

HAPROXY_TOOL = os.path.join(BUILD, "tests", "routing", "haproxy-tool")
DNS_TOOL = os.path.join(BUILD, "tests", "routing", "dns-tool")
HAPROXY = "/usr/sbin/haproxy"
DNSMASQ = "/usr/sbin/dnsmasq"


class Skip(Exception):
    pass


def need(path):
    """scripts/deps.sh installs haproxy and dnsmasq: a skip for lack of one fails CI
    (scripts/ctest-skips.py: these cases declare no needs-* label for them)."""
    if not os.path.exists(path):
        raise Skip(f"{path} is not installed")


def needs(*what):
    """The case may skip when one of these is missing (CTest labels needs-<what>)."""
    def deco(fn):
        fn.needs = what
        return fn
    return deco


def run_cases(cases, extra=None):
    """extra: {argv[1]: function} run as is (helpers a case starts in a namespace)."""
    if extra and len(sys.argv) == 2 and sys.argv[1] in extra:
        return extra[sys.argv[1]]()
    if sys.argv[1:] == ["--list"]:
        for name, fn in cases.items():
            print(" ".join([name] + [f"needs-{n}" for n in getattr(fn, "needs", ())]))
        return 0
    if len(sys.argv) != 2 or sys.argv[1] not in cases:
        sys.stderr.write("usage: %s {%s}\n" % (sys.argv[0], "|".join(cases)))
        return 2
    t0 = time.time()
    try:
        cases[sys.argv[1]]()
    except Skip as e:
        print(f"SKIP {sys.argv[1]}: {e}")
        return 77
    print(f"PASS {sys.argv[1]} in {time.time() - t0:.1f}s")
    return 0
