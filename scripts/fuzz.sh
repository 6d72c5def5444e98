#!/bin/sh
# SPDX-License-Identifier: GPL-2.0-or-later
# Builds every libFuzzer target (fuzz/CMakeLists.txt lists them: one per decoder that
# reads bytes from outside) with clang -fsanitize=fuzzer,address,undefined in a tree
# of its own, runs each on a copy of its seed corpus, and prints per target the
# executions, exec/s, coverage (libFuzzer's cov: edges and ft: features) and crashes.
# Exits 1 when any target crashed (its input is kept, the path is printed), 77 when
# clang cannot build a libFuzzer target here (apt-get install clang: scripts/deps.sh).
#
#   scripts/fuzz.sh [-n EXECUTIONS] [-t SECONDS] [-B BUILD_DIR] [-O LEVEL] [-l] [TARGET...]
#     -n  executions per target (libFuzzer -runs; default 100000; -1: no bound)
#     -t  at most this many seconds per target (libFuzzer -max_total_time; default none)
#     -B  the build tree (default build-fuzz in the source tree)
#     -O  clang's optimization level when the tree is configured (default 1; CI's short
#         pass uses 0, which builds in about half the time and runs slower)
#     -l  list the targets and exit
# docs/fuzzing.md says what each target covers and the figures measured by hand.
set -eu
src=$(cd "$(dirname "$0")/.." && pwd)
runs=100000
secs=0
build="$src/build-fuzz"
opt_level=1
list_only=""
while getopts n:t:B:O:l opt; do
	case $opt in
	n) runs=$OPTARG ;;
	t) secs=$OPTARG ;;
	B) build=$OPTARG ;;
	O) opt_level=$OPTARG ;;
	l) list_only=1 ;;
	*) sed -n '9,15p' "$0" >&2; exit 2 ;;
	esac
done
shift $((OPTIND - 1))
case $runs in -1|[0-9]*) ;; *) echo "fuzz: -n $runs: not a number" >&2; exit 2 ;; esac
case $secs in [0-9]*) ;; *) echo "fuzz: -t $secs: not a number" >&2; exit 2 ;; esac
case $opt_level in [0-3]) ;; *) echo "fuzz: -O $opt_level: 0, 1, 2 or 3" >&2; exit 2 ;; esac

CC=${CC:-clang}
command -v "$CC" >/dev/null 2>&1 || { echo "fuzz: $CC is not installed (apt-get install clang)"; exit 77; }
probe=$(mktemp -d /tmp/na-fuzz-probe-XXXXXX)
printf '#include <stddef.h>\n#include <stdint.h>\nint LLVMFuzzerTestOneInput(const uint8_t *d, size_t n) { (void)d; (void)n; return 0; }\n' \
	>"$probe/p.c"
if ! "$CC" -fsanitize=fuzzer,address,undefined "$probe/p.c" -o "$probe/p" >"$probe/log" 2>&1; then
	echo "fuzz: $CC cannot link a libFuzzer target (on Debian 12: apt-get install clang libclang-rt-14-dev):"
	cat "$probe/log"
	rm -rf "$probe"
	exit 77
fi
rm -rf "$probe"

flags="-O$opt_level -gline-tables-only -fno-omit-frame-pointer -fsanitize=fuzzer-no-link,address,undefined -fno-sanitize-recover=undefined"
if [ ! -f "$build/CMakeCache.txt" ]; then
	CC=$CC cmake -S "$src" -B "$build" -DNA_FUZZ=ON -DNA_BUILD_TESTS=OFF -DNA_BUILD_BENCH=OFF \
		-DCMAKE_BUILD_TYPE=Debug -DCMAKE_C_FLAGS="$flags" >"$build.configure.log" 2>&1 ||
		{ cat "$build.configure.log"; exit 1; }
fi
cmake "$build" >/dev/null # the list of targets is written at configure time
targets_file="$build/fuzz-targets.list"
if [ -n "$list_only" ]; then
	cut -f1 "$targets_file"
	exit 0
fi

# The targets asked for (all when none), checked against the list.
selected=""
if [ $# -eq 0 ]; then
	selected=$(cut -f1 "$targets_file")
else
	for t in "$@"; do
		cut -f1 "$targets_file" | grep -qx -- "$t" ||
			{ echo "fuzz: no target $t (scripts/fuzz.sh -l lists them)" >&2; exit 2; }
		selected="$selected $t"
	done
fi
build_targets=""
for t in $selected; do
	build_targets="$build_targets fuzz-$t"
done
echo "== fuzz: building$build_targets in $build"
# shellcheck disable=SC2086
cmake --build "$build" -j"${FUZZ_BUILD_JOBS:-2}" --target $build_targets >"$build/build.log" 2>&1 ||
	{ tail -50 "$build/build.log"; echo "fuzz: the build failed ($build/build.log)"; exit 1; }

work=$(mktemp -d /tmp/na-fuzz-XXXXXX)
trap 'rm -rf "$work"' EXIT
trap 'exit 130' INT TERM
artifacts="$build/artifacts"
mkdir -p "$artifacts"
export ASAN_OPTIONS="${ASAN_OPTIONS:-detect_leaks=1}"
export UBSAN_OPTIONS="${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}"

crashed=0
printf '%-12s %12s %9s %7s %8s %7s  %s\n' target executions exec/s cov ft crashes result
for t in $selected; do
	line=$(awk -F'\t' -v t="$t" '$1 == t' "$targets_file")
	bin=$(printf '%s' "$line" | cut -f2)
	corpus=$(printf '%s' "$line" | cut -f3)
	extra=$(printf '%s' "$line" | cut -f4)
	mkdir -p "$work/$t"
	cp "$corpus"/* "$work/$t/"
	set -- -runs="$runs" -seed=1 -print_final_stats=1 -max_len=65536 -timeout=10 -rss_limit_mb=2048 \
		-artifact_prefix="$artifacts/$t-"
	[ "$secs" -eq 0 ] || set -- "$@" -max_total_time="$secs"
	rc=0
	start=$(date +%s.%N)
	# shellcheck disable=SC2086
	(cd "$work" && exec "$bin" "$@" $extra "$work/$t") >"$work/$t.log" 2>&1 || rc=$?
	end=$(date +%s.%N)
	cp "$work/$t.log" "$build/$t.log"
	execs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$work/$t.log" | tail -1)
	speed=$(sed -n 's/^stat::average_exec_per_sec: *//p' "$work/$t.log" | tail -1)
	# libFuzzer divides by whole seconds (0 under one): then the wall clock's figure, start-up included.
	if [ "${speed:-0}" = 0 ] && [ -n "$execs" ]; then
		speed=$(awk -v n="$execs" -v a="$start" -v b="$end" 'BEGIN { printf "%d", (b > a) ? n / (b - a) : 0 }')
	fi
	cov=$(grep -ao 'cov: [0-9]*' "$work/$t.log" | tail -1 | cut -d' ' -f2)
	ft=$(grep -ao 'ft: [0-9]*' "$work/$t.log" | tail -1 | cut -d' ' -f2)
	crashes=0
	result=ok
	if [ "$rc" -ne 0 ]; then
		crashes=1
		crashed=1
		kept=$(sed -n 's/.*Test unit written to \(.*\)$/\1/p' "$work/$t.log" | tail -1)
		result="CRASH (exit $rc; input ${kept:-not written}; log $build/$t.log)"
	fi
	printf '%-12s %12s %9s %7s %8s %7s  %s\n' "$t" "${execs:-?}" "${speed:-?}" "${cov:-?}" "${ft:-?}" "$crashes" "$result"
	if [ "$rc" -ne 0 ]; then
		grep -a -m1 -A12 -E '^==[0-9]+==ERROR|runtime error|contract broken|deadly signal' "$work/$t.log" | sed 's/^/    /' || true
	fi
done
exit "$crashed"
