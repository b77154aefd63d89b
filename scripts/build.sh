#!/usr/bin/env bash
# Configures and builds bcc-pyperf in build/ (out of source). Extra arguments
# go to cmake's configure step, e.g. -DPYPERF_SANITIZE=ON.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
BUILD_DIR="${PYPERF_BUILD_DIR:-$ROOT/build}"
cmake -S "$ROOT" -B "$BUILD_DIR" -DCMAKE_BUILD_TYPE="${CMAKE_BUILD_TYPE:-RelWithDebInfo}" "$@" >/dev/null
cmake --build "$BUILD_DIR" -j"$(nproc)"
echo "build: $BUILD_DIR/examples/cpp/pyperf/PyPerf"
