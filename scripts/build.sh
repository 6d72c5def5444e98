#!/bin/sh
# SPDX-License-Identifier: GPL-2.0-or-later
# Configure and build into BUILD_DIR (default: build) with warnings as errors.
# Extra arguments go to cmake's configure step (e.g. -DNA_SANITIZE=ON).
set -eu
cd "$(dirname "$0")/.."
BUILD_DIR=${BUILD_DIR:-build}
cmake -S . -B "$BUILD_DIR" -DNA_WERROR=ON "$@" >/dev/null
cmake --build "$BUILD_DIR" -j"$(nproc)" 2>&1 | grep -Ev '^\[ *[0-9]+%\] (Building|Linking|Built)' || true
cmake --build "$BUILD_DIR" -j"$(nproc)" >/dev/null   # fails loudly if the first pass did
