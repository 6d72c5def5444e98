#!/usr/bin/python3
# SPDX-License-Identifier: GPL-2.0-or-later
"""Every source file of the tree names its licence in an SPDX-License-Identifier line.

  scripts/spdx.py [--root DIR]           check: list the files without it, exit 1 if any
  scripts/spdx.py --fix [--root DIR]     add the line where it is missing

Source files are C (.c, .h), Python (.py), shell (.sh, and any file starting with
#!/bin/sh or #!/bin/bash), CMake (CMakeLists.txt, .cmake, .cmake.in).  The line must be
among the first three lines of the file: first for C and CMake, after the #! line for
scripts.  The files are those git knows of (tracked, and untracked but not ignored, so
a file added on another branch is caught once merged); outside a git checkout, every
file under DIR but the build trees.  The licence is the project's (LICENSE): the agent
links libnftnl, which is GPL-2.0-or-later.  The test docs-spdx runs the check."""
import argparse
import os
import subprocess
import sys

LICENCE = "GPL-2.0-or-later"
TAG = "SPDX-License-Identifier:"
C_EXT = (".c", ".h")
HASH_EXT = (".py", ".sh", ".cmake", ".cmake.in")
SHELLS = ("#!/bin/sh", "#!/bin/bash", "#!/usr/bin/env sh", "#!/usr/bin/env bash")
SKIP_DIRS = (".git", ".cache", "__pycache__")


def files_of(root):
    try:
        out = subprocess.run(["git", "-C", root, "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
                             check=True, capture_output=True).stdout.decode()
        return sorted(f for f in set(out.split("\0")) if f and os.path.isfile(os.path.join(root, f)))
    except (OSError, subprocess.CalledProcessError):
        found = []
        for top, dirs, names in os.walk(root):
            dirs[:] = sorted(d for d in dirs if d not in SKIP_DIRS and not d.startswith("build"))
            found += [os.path.relpath(os.path.join(top, n), root) for n in names]
        return sorted(found)


def kind_of(path, head):
    """'c', 'hash' or None (not a source file) for a file whose first line is head."""
    name = os.path.basename(path)
    if name.endswith(C_EXT):
        return "c"
    if name == "CMakeLists.txt" or name.endswith(HASH_EXT):
        return "hash"
    if head.split(" ")[0].rstrip() in SHELLS or head.rstrip() in SHELLS:
        return "hash"
    return None


def line_for(kind):
    return f"/* {TAG} {LICENCE} */\n" if kind == "c" else f"# {TAG} {LICENCE}\n"


def check_or_fix(root, fix):
    missing, wrong, n = [], [], 0
    for rel in files_of(root):
        path = os.path.join(root, rel)
        try:
            with open(path, encoding="utf-8") as f:
                lines = f.readlines()
        except (UnicodeDecodeError, OSError):
            continue
        kind = kind_of(rel, lines[0] if lines else "")
        if kind is None:
            continue
        n += 1
        tagged = [ln for ln in lines[:3] if TAG in ln]
        if tagged:
            if f"{TAG} {LICENCE}" not in tagged[0]:
                wrong.append(f"{rel}: {tagged[0].strip()}")
            continue
        if not fix:
            missing.append(rel)
            continue
        at = 1 if lines and lines[0].startswith("#!") else 0
        lines.insert(at, line_for(kind))
        st = os.stat(path)
        with open(path, "w", encoding="utf-8") as f:
            f.writelines(lines)
        os.chmod(path, st.st_mode)
        missing.append(rel)
    return n, missing, wrong


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--root", default=os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
    ap.add_argument("--fix", action="store_true", help="add the line where it is missing")
    args = ap.parse_args()
    root = os.path.abspath(args.root)
    n, missing, wrong = check_or_fix(root, args.fix)
    for w in wrong:
        print(f"spdx: another licence than {LICENCE}: {w}", file=sys.stderr)
    if args.fix:
        for m in missing:
            print(f"spdx: added to {m}")
        print(f"spdx: {n} source files, {len(missing)} given the line")
        return 1 if wrong else 0
    for m in missing:
        print(f"spdx: no '{TAG} {LICENCE}' in the first 3 lines: {m}", file=sys.stderr)
    if missing or wrong:
        print(f"spdx: {len(missing) + len(wrong)} of {n} source files fail (scripts/spdx.py --fix adds the line)",
              file=sys.stderr)
        return 1
    print(f"spdx: {n} source files, each with {TAG} {LICENCE}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
