#!/bin/sh
# SPDX-License-Identifier: GPL-2.0-or-later
# Build the nodeagent .deb and .rpm from a configured and built CMake tree.
#
#   packaging/build-packages.sh BUILD_DIR OUT_DIR [GENERATOR...]
#
# BUILD_DIR  a build tree of this repository configured for packages, i.e. with the
#            test hooks compiled out and without sanitizers:
#              cmake -S . -B BUILD_DIR -DNA_TEST_HOOKS=OFF -DNA_BUILD_TESTS=OFF -DNA_BUILD_BENCH=OFF
#              cmake --build BUILD_DIR
#            A tree with NA_TEST_HOOKS=ON (the default: fault injection and the test
#            job kinds compiled in) or NA_SANITIZE=ON is refused: no package may carry
#            them.  cpack builds what is out of date before it packs.
# OUT_DIR    where the packages go (created if missing); cpack's scratch tree is made
#            under it and removed afterwards.
# GENERATOR  DEB, RPM or both (the default).
#
# Prints the path of every package made, one per line.  Needs cpack, dpkg-deb and
# dpkg-shlibdeps for DEB, rpmbuild for RPM (scripts/deps.sh installs them).
set -eu

usage() {
	echo "usage: $0 BUILD_DIR OUT_DIR [DEB|RPM]..." >&2
	exit 2
}
[ $# -ge 2 ] || usage
build=$1
out=$2
shift 2
[ $# -gt 0 ] || set -- DEB RPM

config=$build/CPackConfig.cmake
if [ ! -f "$config" ]; then
	echo "$0: $config not found: configure the tree first (cmake -S . -B $build)" >&2
	exit 1
fi
# The packaged build never has the test hooks (agent/kinds/kind-test.c, common/fault.h).
cache=$build/CMakeCache.txt
cache_bool() { # VAR: its value in the tree's cache, upper-cased ("" when absent)
	sed -n "s/^$1:[A-Z]*=//p" "$cache" | tail -n 1 | tr 'a-z' 'A-Z'
}
[ -f "$cache" ] || { echo "$0: $cache not found: configure the tree first" >&2; exit 1; }
case $(cache_bool NA_TEST_HOOKS) in
OFF | FALSE | NO | N | 0) ;;
*)
	echo "$0: $build is configured with NA_TEST_HOOKS=$(cache_bool NA_TEST_HOOKS) (test job kinds and fault" >&2
	echo "injection compiled in): packages are built from a tree configured with" >&2
	echo "  cmake -S . -B BUILD_DIR -DNA_TEST_HOOKS=OFF -DNA_BUILD_TESTS=OFF -DNA_BUILD_BENCH=OFF" >&2
	exit 1
	;;
esac
case $(cache_bool NA_SANITIZE) in
ON | TRUE | YES | Y | 1)
	echo "$0: $build is a sanitizer build (NA_SANITIZE=ON): not for packages" >&2
	exit 1
	;;
esac
config=$(cd "$build" && pwd)/CPackConfig.cmake
mkdir -p "$out"
out=$(cd "$out" && pwd)

for gen in "$@"; do
	case $gen in
	DEB) need="dpkg-deb dpkg-shlibdeps" ;;
	RPM) need="rpmbuild" ;;
	*) usage ;;
	esac
	for tool in cpack $need; do
		if ! command -v "$tool" >/dev/null 2>&1; then
			echo "$0: $tool not found (scripts/deps.sh installs it)" >&2
			exit 1
		fi
	done
	work=$out/.cpack-$gen
	rm -rf "$work"
	mkdir -p "$work"
	log=$work.log
	if ! cpack --config "$config" -G "$gen" -B "$work" >"$log" 2>&1; then
		cat "$log" >&2
		echo "$0: cpack -G $gen failed" >&2
		exit 1
	fi
	found=0
	for pkg in "$work"/*.deb "$work"/*.rpm; do
		[ -f "$pkg" ] || continue
		mv -f "$pkg" "$out/"
		echo "$out/${pkg##*/}"
		found=1
	done
	if [ "$found" -eq 0 ]; then
		cat "$log" >&2
		echo "$0: cpack -G $gen made no package" >&2
		exit 1
	fi
	rm -rf "$work" "$log"
done
