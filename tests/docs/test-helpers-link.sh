#!/bin/sh
# SPDX-License-Identifier: GPL-2.0-or-later
# The helpers link no driver (docs/architecture.md): nodeagent-sftpd and
# nodeagent-monitor hold no symbol defined by the app or VM driver's library (nm), and
# load none of the libraries only the drivers need (ldd); nodeagentctl neither.
#   test-helpers-link.sh NAAPP_LIB NAVM_LIB BINARY...
set -eu
naapp=$1
navm=$2
shift 2
fail=0
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
nm --defined-only "$naapp" "$navm" 2>/dev/null | awk 'NF == 3 && $2 ~ /^[TDBR]$/ { print $3 }' | sort -u >"$tmp/driver-syms"
[ -s "$tmp/driver-syms" ] || { echo "FAIL: no symbols read from $naapp and $navm"; exit 1; }
for bin in "$@"; do
	name=$(basename "$bin")
	nm "$bin" 2>/dev/null | awk 'NF == 3 { print $3 }' | sort -u >"$tmp/$name.syms"
	[ -s "$tmp/$name.syms" ] || { echo "FAIL: $name: no symbols (stripped?)"; fail=1; continue; }
	common=$(comm -12 "$tmp/driver-syms" "$tmp/$name.syms" | head -n 5)
	if [ -n "$common" ]; then
		echo "FAIL: $name holds driver symbols: $(echo $common)"
		fail=1
	fi
	libs=$(ldd "$bin" 2>/dev/null | awk '{ print $1 }' || true)
	for lib in libvirt libcurl libmnl libnftnl libarchive libwslay libssl libzstd; do
		if echo "$libs" | grep -q "^$lib[.-]"; then
			echo "FAIL: $name loads $lib"
			fail=1
		fi
	done
	[ $fail -ne 0 ] || echo "ok: $name links no driver ($(echo $libs | wc -w) shared objects)"
done
exit $fail
