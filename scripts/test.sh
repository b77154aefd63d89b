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
# The unit tests and an end-to-end subset (every CPython layout, native frames
# on) are also built with ASan + UBSan, in build-asan/ (scripts/test-sanitized.sh),
# and run after the others, failing on any report; PYPERF_TEST_SANITIZED=0
# leaves them out. Their build runs meanwhile, in the background at nice 10:
# it takes the CPU the tests leave idle (most end-to-end tests keep one core
# busy) and little of what they use.
sanitized=0
if [[ "${PYPERF_TEST_SANITIZED:-1}" != 0 ]]; then
  sanitized_log="$BUILD_DIR/sanitized-build.log"
  # A session of its own, so that an early exit stops the whole build.
  setsid nice -n 10 "$ROOT/scripts/test-sanitized.sh" build >"$sanitized_log" 2>&1 &
  sanitized=$!
  trap 'kill -- "-$sanitized" 2>/dev/null || true' EXIT
fi
cd "$BUILD_DIR"
# The unit tests two at a time (each is self-contained and quick), then the
# others (end-to-end: whole-host sampling, timing of their own) one at a time.
status=0
ctest --output-on-failure --timeout 900 -j"${PYPERF_UNIT_JOBS:-2}" -L '^unit$' "$@" || status=$?
ctest --output-on-failure --timeout 900 -j"${PYPERF_TEST_JOBS:-1}" -LE '^unit$' "$@" || status=$?
if [[ $status != 0 ]]; then exit "$status"; fi
t_test=$(date +%s)
echo "times: setup $((t_setup - start)) s, build $((t_build - t_setup)) s, tests $((t_test - t_build)) s"
if [[ $sanitized != 0 ]]; then
  build_status=0
  wait "$sanitized" || build_status=$?
  trap - EXIT
  if [[ $build_status != 0 ]]; then
    cat "$sanitized_log"
    echo "test.sh: the sanitized build failed (exit $build_status)" >&2
    exit "$build_status"
  fi
  echo "$(tail -n 1 "$sanitized_log"), done $(($(date +%s) - t_test)) s after the tests"
  "$ROOT/scripts/test-sanitized.sh" test
fi
echo "total: $(($(date +%s) - start)) s"
