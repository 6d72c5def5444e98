#!/usr/bin/python3
# SPDX-License-Identifier: GPL-2.0-or-later
"""The packages' changelogs from CHANGELOG.md (the one changelog of the project).

  changelog.py CHANGELOG.md VERSION RELEASE MAINTAINER --deb OUT --rpm OUT

CHANGELOG.md: entries `## VERSION (YYYY-MM-DD)`, newest first, each a list of `- `
items (continuation lines indented).  Its newest entry must be VERSION (the
project's, from CMakeLists.txt) and versions must fall strictly from top to bottom,
so a version raised without a changelog entry, or an entry without the version,
fails the build.  Writes the Debian changelog (debian/changelog format, uncompressed;
the build gzips it into changelog.Debian.gz) and the body of the RPM %changelog
(CPACK_RPM_CHANGELOG_FILE).  The newest entry gets VERSION-RELEASE, older ones
VERSION-1.  Dates are written at 12:00 UTC, so the output depends on the file only
(reproducible builds).  Backquotes of Markdown are dropped."""
import argparse
import datetime
import re
import sys
import textwrap

HEAD = re.compile(r"^## (\d+\.\d+\.\d+) \((\d{4}-\d{2}-\d{2})\)\s*$")


def fail(msg):
    print(f"changelog.py: {msg}", file=sys.stderr)
    sys.exit(1)


def parse(path):
    entries, cur, item = [], None, None
    with open(path, encoding="utf-8") as f:
        for n, line in enumerate(f, 1):
            line = line.rstrip("\n")
            m = HEAD.match(line)
            if m:
                cur = {"version": m.group(1), "date": datetime.date.fromisoformat(m.group(2)), "items": [],
                       "line": n}
                entries.append(cur)
                item = None
            elif line.startswith("## "):
                fail(f"{path}:{n}: a heading must be '## X.Y.Z (YYYY-MM-DD)': {line}")
            elif cur is None:
                continue
            elif line.startswith("- "):
                item = [line[2:].strip()]
                cur["items"].append(item)
            elif line.startswith("  ") and item is not None and line.strip():
                item.append(line.strip())
            elif line.strip():
                fail(f"{path}:{n}: not an item ('- ') nor its continuation: {line}")
    if not entries:
        fail(f"{path}: no entry")
    for e in entries:
        if not e["items"]:
            fail(f"{path}:{e['line']}: entry {e['version']} has no item")
    return entries


def key(v):
    return tuple(int(x) for x in v.split("."))


def items_text(e):
    return [" ".join(it).replace("`", "") for it in e["items"]]


def render(entries, release, head, item, trailer):
    """Entries newest first: head(entry, version-release), each item wrapped as item
    gives (first indent, next indent), trailer(entry) (or ""), a blank line between."""
    out = []
    for i, e in enumerate(entries):
        out.append(head(e, f"{e['version']}-{release if i == 0 else '1'}"))
        first, rest = item
        for t in items_text(e):
            out.append(textwrap.fill(t, width=78, initial_indent=first, subsequent_indent=rest,
                                     break_on_hyphens=False) + "\n")
        out.append(trailer(e))
        if i + 1 < len(entries):
            out.append("\n")
    return "".join(out)


def deb(entries, release, maintainer):
    def trailer(e):
        when = datetime.datetime.combine(e["date"], datetime.time(12, 0), datetime.timezone.utc)
        return f"\n -- {maintainer}  {when.strftime('%a, %d %b %Y %H:%M:%S +0000')}\n"
    return render(entries, release, lambda e, vr: f"nodeagent ({vr}) unstable; urgency=medium\n\n",
                  ("  * ", "    "), trailer)


def rpm(entries, release, maintainer):
    # % starts a macro in a spec file: doubled.
    text = render(entries, release, lambda e, vr: f"* {e['date'].strftime('%a %b %d %Y')} {maintainer} - {vr}\n",
                  ("- ", "  "), lambda e: "")
    return "\n".join(ln if ln.startswith("* ") else ln.replace("%", "%%") for ln in text.split("\n"))


def main():
    ap = argparse.ArgumentParser(description="the .deb and .rpm changelogs from CHANGELOG.md")
    ap.add_argument("changelog")
    ap.add_argument("version")
    ap.add_argument("release")
    ap.add_argument("maintainer")
    ap.add_argument("--deb")
    ap.add_argument("--rpm")
    a = ap.parse_args()
    entries = parse(a.changelog)
    if entries[0]["version"] != a.version:
        fail(f"{a.changelog}: the newest entry is {entries[0]['version']}, the project's version is {a.version} "
             "(CMakeLists.txt): add an entry for it")
    for newer, older in zip(entries, entries[1:]):
        if key(newer["version"]) <= key(older["version"]) or newer["date"] < older["date"]:
            fail(f"{a.changelog}:{older['line']}: {older['version']} ({older['date']}) is not older than "
                 f"{newer['version']} ({newer['date']}) above it")
    if a.deb:
        with open(a.deb, "w", encoding="utf-8") as f:
            f.write(deb(entries, a.release, a.maintainer))
    if a.rpm:
        with open(a.rpm, "w", encoding="utf-8") as f:
            f.write(rpm(entries, a.release, a.maintainer))
    return 0


if __name__ == "__main__":
    sys.exit(main())
