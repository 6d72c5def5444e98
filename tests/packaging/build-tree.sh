#!/bin/sh
# SPDX-License-Identifier: GPL-2.0-or-later
# The packaging tests' fixture (CTest FIXTURES_SETUP na-packages): the packaged build,
# made once per test run and shared by every packaging test.
#
#   build-tree.sh TREE [CMAKE_ARG...]
#
# Configures TREE (a build tree of its own, inside the test build tree) the way
# packages are built: -DNA_TEST_HOOKS=OFF (no fault injection, no test job kinds),
# no tests, no benchmarks, no sanitizer; the extra arguments (generator, compiler,
# -DNA_WERROR) come from tests/packaging/CMakeLists.txt.  Builds only what the
# packages hold (with tests and benchmarks off, `all` is the daemon, the CLI, their
# libraries and the man pages), incrementally: TREE is kept between runs, so a second
# run rebuilds only what changed.  Then packaging/build-packages.sh makes the .deb and
# the .rpm (each when its tools are installed) into TREE/packages, replaced as a whole.
. "$(dirname "$0")/lib.sh"

[ $# -ge 1 ] || die "usage: $0 TREE [CMAKE_ARG...]"
tree=$1
shift
command -v cmake >/dev/null 2>&1 || die "cmake not found"

# build-packages.sh refuses a test build (this suite's own tree has the test hooks).
if grep -q '^NA_TEST_HOOKS:BOOL=ON$' "$NA_BUILD_DIR/CMakeCache.txt" 2>/dev/null; then
	if "$PKG_SRC/build-packages.sh" "$NA_BUILD_DIR" "$tree/refused" DEB >"$tree.refused.log" 2>&1 ||
		! grep -q 'NA_TEST_HOOKS=ON' "$tree.refused.log"; then
		sed 's/^/    /' "$tree.refused.log" >&2
		die "build-packages.sh did not refuse $NA_BUILD_DIR, a tree with NA_TEST_HOOKS=ON"
	fi
	rm -rf "$tree/refused" "$tree.refused.log"
	info "build-packages.sh refuses the test build $NA_BUILD_DIR (NA_TEST_HOOKS=ON)"
fi

mkdir -p "$tree"
log=$tree/fixture.log
: >"$log"
# Configure every time (cheap when nothing changed): the arguments may have changed.
if ! cmake -S "$NA_SOURCE_DIR" -B "$tree" "$@" -DNA_TEST_HOOKS=OFF -DNA_BUILD_TESTS=OFF \
	-DNA_BUILD_BENCH=OFF -DNA_SANITIZE=OFF >>"$log" 2>&1; then
	sed 's/^/    /' "$log" >&2
	die "configuring the packaged build in $tree failed"
fi
t0=$(date +%s)
if ! cmake --build "$tree" -j"$(nproc)" >>"$log" 2>&1; then
	grep -E 'error|warning|Error' "$log" | head -n 40 | sed 's/^/    /' >&2
	die "building the packaged build in $tree failed (log: $log)"
fi
info "packaged build (NA_TEST_HOOKS=OFF) up to date in $(($(date +%s) - t0)) s: $tree"

gens=""
command -v dpkg-deb >/dev/null 2>&1 && command -v dpkg-shlibdeps >/dev/null 2>&1 && gens="$gens DEB"
command -v rpmbuild >/dev/null 2>&1 && gens="$gens RPM"
command -v cpack >/dev/null 2>&1 || gens=""
rm -rf "$tree/packages.new"
mkdir -p "$tree/packages.new"
for gen in $gens; do
	t0=$(date +%s)
	if ! "$PKG_SRC/build-packages.sh" "$tree" "$tree/packages.new" "$gen" >"$tree/packages.new/.$gen.log" 2>&1; then
		sed 's/^/    /' "$tree/packages.new/.$gen.log" >&2
		die "build-packages.sh $gen failed"
	fi
	info "$gen: $(tail -n 1 "$tree/packages.new/.$gen.log" | sed 's,.*/,,') in $(($(date +%s) - t0)) s"
	rm -f "$tree/packages.new/.$gen.log"
done
rm -rf "$tree/packages"
mv "$tree/packages.new" "$tree/packages"
[ -n "$gens" ] || info "no package tool (cpack, dpkg-deb, rpmbuild) installed: no package made"
exit 0
