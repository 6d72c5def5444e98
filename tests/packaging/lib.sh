# SPDX-License-Identifier: GPL-2.0-or-later
# Shared helpers of the packaging tests (sourced, POSIX sh).
#   NA_SOURCE_DIR, NA_BUILD_DIR   set by CTest (tests/CMakeLists.txt)
#   NA_NODEAGENTD                 the built daemon (passed by tests/packaging/CMakeLists.txt)
#   NA_PACKAGES_DIR               the packages of the packaged build (build-tree.sh)

set -eu

: "${NA_SOURCE_DIR:?NA_SOURCE_DIR not set (run through ctest)}"
: "${NA_BUILD_DIR:?NA_BUILD_DIR not set (run through ctest)}"

PKG_SRC=$NA_SOURCE_DIR/packaging
CONFIG_C=$NA_SOURCE_DIR/agent/base/config.c
TEST_NAME=${0##*/}
failures=0

fail() {
	echo "FAIL: $*" >&2
	failures=$((failures + 1))
}

die() {
	echo "FAIL: $*" >&2
	exit 1
}

skip() {
	echo "SKIP: $*" >&2
	exit 77
}

info() {
	echo "$TEST_NAME: $*"
}

# End of a test: exit 1 if any fail was recorded.
finish() {
	if [ "$failures" -gt 0 ]; then
		echo "$TEST_NAME: $failures failure(s)" >&2
		exit 1
	fi
	info "all checks passed"
	exit 0
}

# A scratch directory removed at exit.
make_scratch() {
	SCRATCH=$(mktemp -d "${TMPDIR:-/tmp}/na-pkgtest.XXXXXX")
	trap 'rm -rf "$SCRATCH"' EXIT
}

# The keys table of agent/base/config.c, one "section key required default" line per key
# (default is the C literal: "text" or NULL).  Dies if the table cannot be read, so
# that a reformatted table is noticed rather than silently checking nothing.
config_keys() {
	_table=$(sed -n '/^static const struct key_def keys\[\] = {/,/^};/p' "$CONFIG_C")
	_expected=$(printf '%s\n' "$_table" | grep -c 'OFF(' || true)
	_keys=$(printf '%s\n' "$_table" | sed -n \
		's/^[[:space:]]*{ *"\([a-z_]*\)", *"\([a-z0-9_]*\)", *K_[A-Z0-9_]*, *OFF([a-z0-9_]*), *\(true\|false\), *\(NULL\|"[^"]*"\),.*/\1 \2 \3 \4/p')
	_got=$(printf '%s\n' "$_keys" | grep -c . || true)
	if [ "$_expected" -lt 10 ] || [ "$_got" -ne "$_expected" ]; then
		die "cannot read the keys table of $CONFIG_C ($_got of $_expected entries understood)"
	fi
	printf '%s\n' "$_keys"
}

# The package of one generator (DEB or RPM) that the packaging-build fixture made
# (build-tree.sh: the packaged build, -DNA_TEST_HOOKS=OFF) into $NA_PACKAGES_DIR.
# Prints its path; skips when the generator's tools are not installed (the fixture
# then made none), dies when the fixture's directory is missing.
build_package() {
	_gen=$1
	: "${NA_PACKAGES_DIR:?NA_PACKAGES_DIR not set (run through ctest: the packaging-build fixture makes the packages)}"
	[ -d "$NA_PACKAGES_DIR" ] || die "$NA_PACKAGES_DIR missing: the packaging-build fixture did not run"
	case $_gen in
	DEB) _pkg=$(ls "$NA_PACKAGES_DIR"/*.deb 2>/dev/null | head -n 1) ;;
	RPM) _pkg=$(ls "$NA_PACKAGES_DIR"/*.rpm 2>/dev/null | head -n 1) ;;
	*) die "build_package: unknown generator $_gen" ;;
	esac
	if [ -z "$_pkg" ]; then
		case $_gen in
		DEB) command -v dpkg-deb >/dev/null 2>&1 && command -v dpkg-shlibdeps >/dev/null 2>&1 ;;
		RPM) command -v rpmbuild >/dev/null 2>&1 ;;
		esac && die "no $_gen package in $NA_PACKAGES_DIR although its tools are installed"
		skip "no $_gen package: its tools are not installed"
	fi
	printf '%s\n' "$_pkg"
}

# Maintainer scripts are run in a private mount namespace with a tmpfs on /run that
# has (running=yes) or lacks (running=no) /run/systemd/system, the test that the
# scripts use for "systemd is the running init", and with a fake systemctl first on
# PATH that only logs its arguments.  Nothing on the host is touched.
can_fake_systemd() {
	command -v unshare >/dev/null 2>&1 &&
		unshare -m --propagation private sh -c 'mount -t tmpfs na-test /run' >/dev/null 2>&1
}

setup_fake_systemctl() {
	mkdir -p "$SCRATCH/fakebin"
	cat >"$SCRATCH/fakebin/systemctl" <<EOS
#!/bin/sh
echo "\$*" >>"$SCRATCH/systemctl.log"
EOS
	chmod 755 "$SCRATCH/fakebin/systemctl"
}

# run_maint SCRIPT running|not-running [VAR=value ...] -- ARG...
# Leaves the systemctl calls in $SCRATCH/systemctl.log and the script's output in
# $SCRATCH/maint.out; returns the script's exit status.
run_maint() {
	_script=$1
	_running=$2
	shift 2
	_env=""
	while [ $# -gt 0 ] && [ "$1" != -- ]; do
		_env="$_env $1"
		shift
	done
	[ $# -gt 0 ] && shift
	: >"$SCRATCH/systemctl.log"
	# shellcheck disable=SC2086
	unshare -m --propagation private sh -c '
		mount -t tmpfs na-test /run || exit 99
		[ "$1" = running ] && mkdir -p /run/systemd/system
		shift
		exec "$@"' run_maint "$_running" env PATH="$SCRATCH/fakebin:$PATH" $_env sh "$_script" "$@" \
		>"$SCRATCH/maint.out" 2>&1
}

# expect_calls WHAT EXPECTED: the systemctl calls of the last run_maint, joined by "; ".
expect_calls() {
	_got=$(paste -sd ';' "$SCRATCH/systemctl.log" | sed 's/;/; /g')
	[ "$_got" = "$2" ] || fail "$1: systemctl calls '$_got', want '$2'"
}
