#!/usr/bin/python3
# SPDX-License-Identifier: GPL-2.0-or-later
"""The "may use" check of docs/architecture.md, from the code itself.

Reads the rooms table of docs/architecture.md (between <!-- rooms:begin --> and
<!-- rooms:end -->) and checks the tree against it:
  1. every #include "x/y.h" of a room's file names its own room or a room it may use;
  2. no file includes another room's private header (*-internal.h);
  3. every target_link_libraries() of a room's CMakeLists.txt names libraries of rooms
     it may use (or may also link);
  4. the table has no circle (no room uses a room above it), and every source folder
     of the tree is a room of the table;
  5. no two source files (.c, .h, .py, .sh) of the tree, tests included, share a
     basename.
tests/, bench/ and fuzz/ are not rooms: they may reach any room's headers.

  scripts/check-rooms.py [--root DIR] [--plant FILE:LINE ...]

--plant adds LINE to FILE's text as read (nothing is written), to show that a
violation is caught. Exit 0 when the tree holds, 1 with one line per violation.
"""
import argparse
import os
import re
import sys

NOT_ROOMS = ("tests", "bench", "fuzz", "packaging", "docs", "scripts", "cmake", "build")


def parse_table(root):
    text = open(os.path.join(root, "docs", "architecture.md"), encoding="utf-8").read()
    m = re.search(r"<!-- rooms:begin -->(.*?)<!-- rooms:end -->", text, re.S)
    if not m:
        sys.exit("docs/architecture.md: no rooms table (<!-- rooms:begin --> ... <!-- rooms:end -->)")
    rooms = {}
    for line in m.group(1).splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) < 5 or not cells[0].startswith("`"):
            continue
        name = cells[0].strip("`").rstrip("/")
        def names(cell):
            return [n.strip("`").rstrip("/") for n in re.findall(r"`[^`]+`", cell)]
        rooms[name] = {"libs": names(cells[2]), "uses": set(names(cells[3])), "links": set(names(cells[4]))}
    return rooms


def room_of(path, rooms):
    """The longest room that is a prefix folder of path."""
    best = None
    for r in rooms:
        if r == "drivers":
            # the faces: files directly in drivers/
            if os.path.dirname(path) == "drivers":
                best = r
            continue
        if path.startswith(r + "/") and (best is None or len(r) > len(best)):
            best = r
    return best


def tracked(root):
    """The files of the checkout (git ls-files), or None outside a git checkout."""
    import subprocess
    try:
        r = subprocess.run(["git", "-C", root, "ls-files", "-z"], capture_output=True, timeout=60)
    except (OSError, subprocess.TimeoutExpired):
        return None
    if r.returncode != 0:
        return None
    return sorted(f for f in r.stdout.decode().split("\0") if f)


def all_files(root):
    """The files of the project: tracked ones in a git checkout (build trees and stray
    files are not the project's), else every file below root but build trees."""
    files = tracked(root)
    if files is None:
        files = []
        for d, dirs, names in os.walk(root):
            dirs[:] = sorted(x for x in dirs if not x.startswith((".", "build")))
            files += [os.path.relpath(os.path.join(d, n), root) for n in sorted(names)]
    return [p for p in files if not p.startswith((".", "build"))]


def source_files(root):
    """The files of the rooms: all_files() below a top folder that is not NOT_ROOMS."""
    for p in all_files(root):
        if "/" in p and p.split("/", 1)[0] not in NOT_ROOMS:
            yield p


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--root", default=os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
    ap.add_argument("--plant", action="append", default=[], metavar="FILE:LINE")
    a = ap.parse_args()
    root = os.path.abspath(a.root)
    rooms = parse_table(root)
    planted = {}
    for p in a.plant:
        f, _, line = p.partition(":")
        planted.setdefault(f, []).append(line)
    bad = []

    # 4. the table: known rooms only, no circle
    for r, v in rooms.items():
        for u in v["uses"] | v["links"]:
            if u not in rooms:
                bad.append(f"docs/architecture.md: room {r} uses {u}, which is not a room of the table")
    state = {}
    def visit(r, stack):
        if state.get(r) == 1:
            bad.append("docs/architecture.md: a circle: " + " -> ".join(stack + [r]))
            return
        if state.get(r) == 2:
            return
        state[r] = 1
        for u in sorted(rooms[r]["uses"] | rooms[r]["links"]):
            if u in rooms:
                visit(u, stack + [r])
        state[r] = 2
    for r in sorted(rooms):
        visit(r, [])
    lib_room = {}
    for r, v in rooms.items():
        for lib in v["libs"]:
            lib_room.setdefault(lib, set()).add(r)

    for p in source_files(root):
        r = room_of(p, rooms)
        if p.endswith((".c", ".h")) and r is None:
            bad.append(f"{p}: in no room of docs/architecture.md")
            continue
        if p.endswith((".c", ".h")):
            text = open(os.path.join(root, p), encoding="utf-8", errors="replace").read()
            text += "\n" + "\n".join(planted.get(p, []))
            for n, line in enumerate(text.splitlines(), 1):
                m = re.match(r'\s*#\s*include\s+"([^"]+)"', line)
                if not m:
                    continue
                inc = m.group(1)
                if not os.path.exists(os.path.join(root, inc)) and "/" not in inc:
                    continue  # a header beside the file, or generated
                ri = room_of(inc, rooms)
                if ri is None:
                    if not inc.startswith(NOT_ROOMS):
                        bad.append(f"{p}:{n}: includes {inc}, which is in no room")
                    continue
                if ri != r and ri not in rooms[r]["uses"]:
                    bad.append(f"{p}:{n}: room {r} includes {inc} of room {ri}, which it may not use")
                if inc.endswith("-internal.h") and os.path.dirname(inc) != os.path.dirname(p):
                    bad.append(f"{p}:{n}: includes {inc}, a private header of {os.path.dirname(inc)}/")
        elif os.path.basename(p) == "CMakeLists.txt":
            text = open(os.path.join(root, p), encoding="utf-8").read()
            text += "\n" + "\n".join(planted.get(p, []))
            text = re.sub(r"#[^\n]*", "", text)
            for m in re.finditer(r"target_link_libraries\(\s*([\w-]+)([^)]*)\)", text):
                target, libs = m.group(1), m.group(2).split()
                # a target of no room's library: the folder's room, or every room below the folder
                owners = lib_room.get(target) or ({r} if r else
                                                  {x for x in rooms if x.startswith(os.path.dirname(p) + "/")})
                allowed = set(owners)
                for o in owners:
                    allowed |= rooms[o]["uses"] | rooms[o]["links"]
                for lib in libs:
                    if lib in lib_room and not (lib_room[lib] & allowed):
                        bad.append(f"{p}: {target} ({', '.join(sorted(owners))}) links {lib} of room "
                                   f"{', '.join(sorted(lib_room[lib]))}, which it may not use")
    # 5. one basename, one file
    seen = {}
    for p in all_files(root):
        f = os.path.basename(p)
        if f.endswith((".c", ".h", ".py", ".sh")):
            if f in seen:
                bad.append(f"{p}: shares its name with {seen[f]}")
            else:
                seen[f] = p
    for b in bad:
        print(b)
    if bad:
        print(f"check-rooms: {len(bad)} violation(s) of docs/architecture.md")
        return 1
    print(f"check-rooms: {len(rooms)} rooms hold (docs/architecture.md)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
