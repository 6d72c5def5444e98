#!/bin/sh
# SPDX-License-Identifier: GPL-2.0-or-later
# The man pages (docs/man): groff finds nothing to warn about, the built pages carry
# the version, nodeagent.conf(5) documents every key of agent/base/config.c, and the two
# command pages document every long option of agent/daemon/main.c and ctl/ctl.c.
. "$(dirname "$0")/lib.sh"

MAN_SRC=$NA_SOURCE_DIR/docs/man
MAN_BUILT=$NA_BUILD_DIR/packaging/man
make_scratch
command -v groff >/dev/null 2>&1 || skip "groff not installed"

version=$(sed -n 's/^project(nodeagent VERSION \([0-9.]*\).*/\1/p' "$NA_SOURCE_DIR/CMakeLists.txt")
[ -n "$version" ] || die "cannot read the project version"

for page in nodeagentd.8 nodeagentctl.8 nodeagent.conf.5; do
	src=$MAN_SRC/$page
	[ -f "$src" ] || {
		fail "$src missing"
		continue
	}
	if ! groff -man -ww -z "$src" >"$SCRATCH/groff" 2>&1 || [ -s "$SCRATCH/groff" ]; then
		fail "groff -man -ww on $page:"
		sed 's/^/    /' "$SCRATCH/groff" >&2
	fi
	built=$MAN_BUILT/$page.gz
	if [ ! -f "$built" ]; then
		fail "$built not built (target nodeagent-man)"
		continue
	fi
	gzip -dc "$built" >"$SCRATCH/$page"
	grep -q '@VERSION@' "$SCRATCH/$page" && fail "$page.gz: @VERSION@ not replaced"
	grep -q "^\.TH .*\"nodeagent $version\"" "$SCRATCH/$page" || fail "$page.gz: .TH does not carry \"nodeagent $version\""
	# man(1) renders it without complaint.
	if ! MANWIDTH=80 man --warnings -l "$built" >"$SCRATCH/render" 2>"$SCRATCH/render.err" || [ -s "$SCRATCH/render.err" ]; then
		fail "man -l $page.gz: $(cat "$SCRATCH/render.err")"
	fi
	info "$page: $(wc -l <"$SCRATCH/render") lines rendered"
done

# Every configuration key in nodeagent.conf(5), in the right section.
MANWIDTH=200 man -l "$MAN_BUILT/nodeagent.conf.5.gz" 2>/dev/null | col -b >"$SCRATCH/conf5.txt"
config_keys | while read -r section key required def; do
	awk -v s="[$section]" -v k="$key" '
		$1 ~ /^\[/ && $0 !~ /^[[:space:]]/ { in_s = ($1 == s) }
		in_s { for (i = 1; i <= NF; i++) { w = $i; gsub(/[,]$/, "", w); if (w == k) found = 1 } }
		END { exit !found }' "$SCRATCH/conf5.txt" ||
		echo "nodeagent.conf.5 does not document [$section] $key"
done >"$SCRATCH/undocumented"
while read -r l; do fail "$l"; done <"$SCRATCH/undocumented"

# Every long option in the command pages.
long_options() {
	sed -n 's/.*{ *"\([a-z-]*\)", *\(no\|required\|optional\)_argument.*/\1/p' "$1" | sort -u
}
for pair in nodeagentd.8:agent/daemon/main.c nodeagentctl.8:ctl/ctl.c; do
	page=${pair%%:*}
	src=$NA_SOURCE_DIR/${pair#*:}
	opts=$(long_options "$src")
	[ -n "$opts" ] || die "no long options found in $src"
	sed 's/\\-/-/g' "$MAN_SRC/$page" >"$SCRATCH/$page.plain"
	for opt in $opts; do
		grep -q -- "--$opt" "$SCRATCH/$page.plain" || fail "$page does not document --$opt (from ${pair#*:})"
	done
done

finish
