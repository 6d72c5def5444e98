#!/bin/sh
# Build tests/app-proto/fuzz-app.c as a real libFuzzer target with clang (ASan + UBSan)
# and run it on a copy of the corpus; a crashing input is kept as /tmp/na-fuzz-app-crash-*.
# By hand, not in CTest (CI builds with gcc):
#   tests/app-proto/fuzz-libfuzzer.sh [RUNS]        (default 200000; -1 runs until stopped)
set -eu
src=$(cd "$(dirname "$0")/../.." && pwd)
runs=${1:-200000}
command -v clang >/dev/null || { echo "fuzz-libfuzzer: clang is not installed (apt-get install clang)"; exit 77; }
work=$(mktemp -d /tmp/na-fuzz-app-XXXXXX)
trap 'rm -rf "$work"' EXIT
trap 'exit 130' INT TERM   # so that the EXIT trap runs when stopped too
clang -g -O1 -fsanitize=fuzzer,address,undefined -fno-sanitize-recover=undefined -D_GNU_SOURCE \
  -DNA_VERSION='"fuzz"' -I"$src" $(pkg-config --cflags jansson) \
  "$src/tests/app-proto/fuzz-app.c" "$src"/proto/app-*.c "$src/proto/text.c" "$src/proto/decode.c" \
  "$src/common/error.c" "$src/common/timeutil.c" "$src/common/uuid.c" \
  $(pkg-config --libs jansson) -lpthread -o "$work/fuzz-app"
mkdir "$work/corpus"
cp "$src"/tests/app-proto/corpus/* "$work/corpus/"
"$work/fuzz-app" -seed=1 -runs="$runs" -max_len=65536 -timeout=5 -artifact_prefix=/tmp/na-fuzz-app- "$work/corpus"
