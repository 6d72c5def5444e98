#!/bin/sh
# Build tests/proto/fuzz-job.c as a real libFuzzer target with clang (ASan + UBSan) and
# run it on a copy of the corpus. By hand, not in CTest (CI builds with gcc):
#   tests/proto/fuzz-libfuzzer.sh [RUNS]        (default 200000; -1 runs until stopped)
set -eu
src=$(cd "$(dirname "$0")/../.." && pwd)
runs=${1:-200000}
command -v clang >/dev/null || { echo "fuzz-libfuzzer: clang is not installed (apt-get install clang)"; exit 77; }
work=$(mktemp -d /tmp/na-fuzz-job-XXXXXX)
trap 'rm -rf "$work"' EXIT
trap 'exit 130' INT TERM   # so that the EXIT trap runs when stopped too
clang -g -O1 -fsanitize=fuzzer,address,undefined -fno-sanitize-recover=undefined -D_GNU_SOURCE \
  -DNA_VERSION='"fuzz"' -I"$src" $(pkg-config --cflags jansson) \
  "$src/tests/proto/fuzz-job.c" "$src/proto/decode.c" "$src/proto/job.c" "$src/proto/wire.c" \
  "$src/common/error.c" "$src/common/timeutil.c" "$src/common/uuid.c" \
  $(pkg-config --libs jansson) -lpthread -o "$work/fuzz-job"
mkdir "$work/corpus"
cp "$src"/tests/proto/corpus/* "$work/corpus/"
"$work/fuzz-job" -seed=1 -runs="$runs" -max_len=65536 "$work/corpus"
