#!/bin/sh
# SPDX-License-Identifier: GPL-2.0-or-later
# The second README command (and all that .ci/run does): install what is needed,
# build with warnings as errors, run every test; build the daemon and its helpers
# under gcc -fanalyzer; then run the tests again under ASan + UBSan.
# A skipped test (exit 77) is not a pass that hides: after each pass the skipped
# tests are listed (scripts/ctest-skips.py), again all together at the end whatever
# happened, and as root with namespaces (CI) a skip whose needs-* labels are all met
# here fails the run (tests/CMakeLists.txt says how a test declares what it needs).
set -eu
cd "$(dirname "$0")/.."
./scripts/deps.sh
export CTEST_OUTPUT_ON_FAILURE=1
PY=/usr/bin/python3
[ -x "$PY" ] || PY=python3

reports=""
summary() {
	[ -n "$reports" ] || return 0
	echo "== skipped tests, every pass"
	for r in $reports; do
		cat "$r"
	done
}
trap summary EXIT

# run_pass NAME BUILD_DIR [CTEST_ARG...]: ctest, then the skips; exits on a failure of either.
run_pass() {
	_name=$1
	_dir=$2
	shift 2
	_junit=$(pwd)/$_dir/ctest-junit.xml
	_report=$(pwd)/$_dir/ctest-skips.txt
	rm -f "$_junit" "$_report"
	_rc=0
	ctest --test-dir "$_dir" -j2 --timeout 900 --output-junit "$_junit" "$@" || _rc=$?
	_skips=0
	"$PY" scripts/ctest-skips.py "$_name" "$_dir" "$_junit" >"$_report" 2>&1 || _skips=$?
	reports="$reports $_report"
	cat "$_report"
	if [ "$_rc" -ne 0 ]; then
		echo "== $_name: ctest failed (exit $_rc)" >&2
		exit 1
	fi
	if [ "$_skips" -ne 0 ]; then
		echo "== $_name: tests were skipped on a machine that has what they need (see above)" >&2
		exit 1
	fi
}

echo "== build (warnings are errors) and test"
BUILD_DIR=build ./scripts/build.sh
run_pass build build
echo "== build with gcc -fanalyzer (its findings are errors; tests and benchmarks are not analysed)"
BUILD_DIR=build-analyzer ./scripts/build.sh -DNA_ANALYZER=ON -DNA_BUILD_TESTS=OFF -DNA_BUILD_BENCH=OFF
# The real Debian guest (label vm-guest: minutes of TCG) runs in the first pass only;
# the driver code it drives runs under the sanitizers in test-vm-real and the vm tests.
echo "== build with AddressSanitizer + UndefinedBehaviorSanitizer and test"
BUILD_DIR=build-asan ./scripts/build.sh -DNA_SANITIZE=ON -DCMAKE_BUILD_TYPE=Debug
export ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1
run_pass build-asan build-asan -LE 'packaging|vm-guest'
