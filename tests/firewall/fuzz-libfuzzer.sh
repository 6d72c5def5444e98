#!/bin/sh
# Build tests/firewall/fuzz-firewall.c as a real libFuzzer target with clang (ASan +
# UBSan) and run it on a copy of the corpus. By hand, not in CTest (CI builds with gcc,
# where test-fw-fuzz runs the same entry over the corpus and seeded mutations):
#   tests/firewall/fuzz-libfuzzer.sh [RUNS]        (default 200000; -1 runs until stopped)
set -eu
src=$(cd "$(dirname "$0")/../.." && pwd)
runs=${1:-200000}
command -v clang >/dev/null || { echo "fuzz-libfuzzer: clang is not installed (apt-get install clang)"; exit 77; }
work=$(mktemp -d /tmp/na-fuzz-fw-XXXXXX)
trap 'rm -rf "$work"' EXIT
clang -g -O1 -fsanitize=fuzzer,address,undefined -fno-sanitize-recover=undefined -D_GNU_SOURCE \
  -DNA_VERSION='"fuzz"' -I"$src" $(pkg-config --cflags jansson libnftnl libmnl) \
  "$src/tests/firewall/fuzz-firewall.c" "$src/proto/firewall.c" "$src/proto/decode.c" \
  "$src"/firewall/fw-*.c "$src/common/error.c" "$src/common/timeutil.c" "$src/common/uuid.c" "$src/common/names.c" \
  $(pkg-config --libs jansson libnftnl libmnl) -lpthread -o "$work/fuzz-firewall"
mkdir "$work/corpus"
cp "$src"/tests/firewall/corpus/* "$work/corpus/"
"$work/fuzz-firewall" -seed=1 -runs="$runs" -max_len=65536 "$work/corpus"
