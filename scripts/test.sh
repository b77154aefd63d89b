#!/usr/bin/env bash
# The whole test suite from a fresh machine: installs dependencies, builds,
# and runs every test through CTest, then the sanitized subset
# (scripts/test-sanitized.sh). Run as root (BPF tests need it).
# PYPERF_TEST_STRICT=1 (set by CI) turns every skip into a failure.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
BUILD_DIR="${PYPERF_BUILD_DIR:-$ROOT/build}"
start=$(date +%s)
"$ROOT/scripts/setup.sh"
# Debian trixie/sid roots with CPython 3.13.x and 3.14 for the version tests
# (debootstrap, built once and cached in /var/cache/bcc-pyperf/roots).
"$ROOT/scripts/python-roots.sh"
# Free-threaded CPython 3.13t (compiled once from Debian's source package,
# cached in /var/cache/bcc-pyperf/interpreters/3.13t) for the free-threaded test.
"$ROOT/scripts/free-threaded-python.sh"
t_setup=$(date +%s)
"$ROOT/scripts/build.sh"
t_build=$(date +%s)
cd "$BUILD_DIR"
# The unit tests two at a time (each is self-contained and quick), then the
# others (end-to-end: whole-host sampling, timing of their own) one at a time.
status=0
ctest --output-on-failure --timeout 900 -j"${PYPERF_UNIT_JOBS:-2}" -L '^unit$' "$@" || status=$?
ctest --output-on-failure --timeout 900 -j"${PYPERF_TEST_JOBS:-1}" -LE '^unit$' "$@" || status=$?
if [[ $status != 0 ]]; then exit "$status"; fi
t_test=$(date +%s)
echo "times: setup $((t_setup - start)) s, build $((t_build - t_setup)) s, tests $((t_test - t_build)) s"
# Then the unit tests and an end-to-end subset (every CPython layout, native
# frames on) built with ASan + UBSan in build-asan/, failing on any report.
# PYPERF_TEST_SANITIZED=0 leaves them out.
if [[ "${PYPERF_TEST_SANITIZED:-1}" != 0 ]]; then
  "$ROOT/scripts/test-sanitized.sh"
fi
echo "total: $(($(date +%s) - start)) s"
