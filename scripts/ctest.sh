#!/usr/bin/env bash
# Builds the native sources with CMake and runs the native unit tests under
# ctest. Extra arguments go to cmake's configure step (e.g. -DPODWIRE_ASAN=ON).
set -euo pipefail
cd "$(dirname "$0")/.."
dir=${PODWIRE_CTEST_DIR:-build-native}
cmake -S . -B "$dir" -DCMAKE_BUILD_TYPE=RelWithDebInfo "$@" >/dev/null
cmake --build "$dir" -j"$(nproc)" >/dev/null
ctest --test-dir "$dir" -V --output-on-failure
