#!/usr/bin/python3
# SPDX-License-Identifier: GPL-2.0-or-later
"""The Python tests' checks cannot be stripped: python3 -O drops every `assert`
statement, so a test written with them passes whatever happens when run that way.
  1. No bare assert in any Python file of tests/ or bench/ (use harness check()).
  2. check() raises under -O, where an assert would not.
  3. Every harness script lists its cases (--list), the list CMake registers."""
import ast
import os
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
SRC = os.environ.get("NA_SOURCE_DIR") or os.path.abspath(os.path.join(HERE, "..", ".."))
PYTHON = "/usr/bin/python3" if os.path.exists("/usr/bin/python3") else sys.executable
sys.path.insert(0, HERE)
from nodeagent_harness import check  # noqa: E402


def python_files():
    for top in ("tests", "bench"):
        for root, dirs, files in os.walk(os.path.join(SRC, top)):
            dirs[:] = sorted(d for d in dirs if not d.startswith(".") and d != "__pycache__")
            for f in sorted(files):
                if f.endswith(".py"):
                    yield os.path.join(root, f)


def bare_asserts():
    found, n_files = [], 0
    for path in python_files():
        n_files += 1
        with open(path, encoding="utf-8") as f:
            tree = ast.parse(f.read(), path)
        lines = sorted(n.lineno for n in ast.walk(tree) if isinstance(n, ast.Assert))
        found += [f"{os.path.relpath(path, SRC)}:{line}" for line in lines]
    check(n_files >= 5, f"only {n_files} Python files found under {SRC}/tests and bench")
    return found, n_files


def under_O(code):
    return subprocess.run([PYTHON, "-B", "-O", "-c", code], cwd=HERE, capture_output=True, text=True, timeout=60)


def main():
    failures = []
    found, n_files = bare_asserts()
    if found:
        failures.append("bare assert statements (stripped by python3 -O; use check(cond, msg) from "
                        "tests/harness/nodeagent_harness.py):\n  " + "\n  ".join(found))
    print(f"{n_files} Python files under tests/ and bench/: {len(found)} bare asserts")

    # Why: under -O an assert is gone, check() is not.
    r = under_O("assert False, 'stripped'")
    check(r.returncode == 0, f"python3 -O kept an assert statement?! {r}")
    r = under_O("from nodeagent_harness import check; check(1 + 1 == 3, 'arithmetic')")
    if r.returncode == 0 or "AssertionError: arithmetic" not in r.stderr:
        failures.append(f"check() did not raise under python3 -O: exit {r.returncode}, {r.stderr!r}")
    r = under_O("from nodeagent_harness import check; check(True, 'fine'); check([1])")
    if r.returncode != 0:
        failures.append(f"check() raised on a true condition: {r.stderr}")
    print("python3 -O: assert stripped, check() raises")

    # Every script that runs cases through the harness says which (CMake registers them).
    for path in python_files():
        with open(path, encoding="utf-8") as f:
            tree = ast.parse(f.read(), path)
        if not any(isinstance(n, ast.Call) and getattr(n.func, "id", None) == "run_cases" for n in ast.walk(tree)):
            continue
        r = subprocess.run([PYTHON, "-B", path, "--list"], capture_output=True, text=True, timeout=60)
        names = [line.split()[0] for line in r.stdout.splitlines() if line.strip()]
        if r.returncode != 0 or not names or len(set(names)) != len(names):
            failures.append(f"{path} --list: exit {r.returncode}, cases {names}: {r.stderr}")
        else:
            print(f"{os.path.relpath(path, SRC)}: {len(names)} cases")

    if failures:
        sys.stderr.write("\n".join(failures) + "\n")
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
