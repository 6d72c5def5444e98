#!/bin/sh
# SPDX-License-Identifier: GPL-2.0-or-later
# scripts/spdx.py catches what it must: in a scratch tree (no git), a C file, a
# shell script without extension and a CMakeLists.txt without the line, and a Python
# file naming another licence, fail the check; --fix adds the line after a #! line and
# first elsewhere, and the tree then passes.
set -eu
spdx=$1
t=$(mktemp -d)
trap 'rm -rf "$t"' EXIT
fail() { echo "FAIL: $*" >&2; exit 1; }
mkdir -p "$t/src" "$t/build/x"
printf '/* a */\nint x;\n' >"$t/src/a.c"
printf '#!/bin/sh\necho hi\n' >"$t/src/run"
printf 'project(x C)\n' >"$t/src/CMakeLists.txt"
printf '#!/usr/bin/python3\n# SPDX-License-Identifier: MIT\n' >"$t/src/b.py"
printf '/* SPDX-License-Identifier: GPL-2.0-or-later */\n' >"$t/src/ok.h"
printf 'int y;\n' >"$t/build/x/ignored.c"      # build trees are not the source
printf 'plain text\n' >"$t/src/notes.txt"
if /usr/bin/python3 -B "$spdx" --root "$t" >"$t/out" 2>&1; then
	cat "$t/out" >&2; fail "the check passed a tree with three files without the line"
fi
for f in src/a.c src/run src/CMakeLists.txt src/b.py; do
	grep -q "$f" "$t/out" || { cat "$t/out" >&2; fail "$f not reported"; }
done
! grep -q 'ignored.c\|notes.txt\|ok.h' "$t/out" || { cat "$t/out" >&2; fail "a file reported that is fine"; }
printf '#!/usr/bin/python3\n' >"$t/src/b.py"
/usr/bin/python3 -B "$spdx" --root "$t" --fix >/dev/null
[ "$(sed -n 1p "$t/src/a.c")" = "/* SPDX-License-Identifier: GPL-2.0-or-later */" ] || fail "a.c: $(head -2 "$t/src/a.c")"
[ "$(sed -n 2p "$t/src/run")" = "# SPDX-License-Identifier: GPL-2.0-or-later" ] || fail "run: $(head -2 "$t/src/run")"
/usr/bin/python3 -B "$spdx" --root "$t" >/dev/null || fail "the fixed tree does not pass"
echo "spdx: planted files caught, --fix makes the tree pass"
