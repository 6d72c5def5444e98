#!/bin/sh
# The second README command (and all that .ci/run does): install what is needed,
# build with warnings as errors, run every test; then the same under ASan + UBSan.
set -eu
cd "$(dirname "$0")/.."
./scripts/deps.sh
export CTEST_OUTPUT_ON_FAILURE=1
echo "== build (warnings are errors) and test"
BUILD_DIR=build ./scripts/build.sh
ctest --test-dir build -j2 --timeout 900
echo "== build with AddressSanitizer + UndefinedBehaviorSanitizer and test"
BUILD_DIR=build-asan ./scripts/build.sh -DNA_SANITIZE=ON -DCMAKE_BUILD_TYPE=Debug
ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 \
  ctest --test-dir build-asan -j2 --timeout 900 -LE 'packaging'
