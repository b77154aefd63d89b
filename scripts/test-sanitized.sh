#!/usr/bin/env bash
# The sanitized part of the test suite (scripts/test.sh runs it after the
# normal one): builds PyPerf and the tests labelled "unit" or "e2e_sanitized"
# (every unit test and an end-to-end subset, see tests/cc/CMakeLists.txt) with
# -DPYPERF_SANITIZE=ON (AddressSanitizer + UndefinedBehaviorSanitizer) in
# build-asan/, runs them, and fails on any sanitizer report, whichever process
# wrote it: the test programs themselves or the PyPerf processes they start.
#
#   scripts/test-sanitized.sh [build|test] [ctest arguments...]
#
# "build" only builds, "test" only runs what an earlier "build" built (so
# scripts/test.sh builds in the background while the other tests run); with
# neither, both. Extra arguments go to ctest. Run as root, after
# scripts/setup.sh and scripts/python-roots.sh.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
BUILD_DIR="${PYPERF_ASAN_BUILD_DIR:-$ROOT/build-asan}"
step=all
if [[ "${1:-}" == build || "${1:-}" == test ]]; then
  step=$1
  shift
fi
start=$(date +%s)

# Debug (asserts on) at -O1 -g1: reports need only line tables, and this
# compiles faster than -O2 -g while keeping PyPerf fast enough for the
# end-to-end tests' sampling (the test programs' own code is built at -O0).
if [[ $step != test ]]; then
  cmake -S "$ROOT" -B "$BUILD_DIR" -DPYPERF_SANITIZE=ON -DPYPERF_BUILD_BENCH=OFF \
    -DCMAKE_BUILD_TYPE=Debug -DCMAKE_C_FLAGS_DEBUG="-O1 -g1" -DCMAKE_CXX_FLAGS_DEBUG="-O1 -g1" \
    >/dev/null
  cmake --build "$BUILD_DIR" -j"$(nproc)" --target pyperf_sanitized_tests
fi
t_build=$(date +%s)
if [[ $step == build ]]; then
  echo "sanitized build: $((t_build - start)) s"
  exit 0
fi

# ASan and LeakSanitizer write every report to a file of their own in
# $REPORTS (log_path, the PID appended), so a report from a PyPerf a test
# started is seen even where the test expects a non-zero exit or kills it.
# The directory is world-writable: some tests run PyPerf as another user.
# GCC's UBSan runtime ignores log_path: it halts the process at its first
# report with exit status 86, which every test that starts PyPerf checks,
# and its reports that reach a test's output are found in LastTest.log.
REPORTS="$BUILD_DIR/sanitizer-reports"
rm -rf "$REPORTS"
mkdir -p "$REPORTS"
chmod 1777 "$REPORTS"
export ASAN_OPTIONS="halt_on_error=1:detect_leaks=1:check_initialization_order=1:strict_init_order=1:log_path=$REPORTS/asan"
export LSAN_OPTIONS="suppressions=$ROOT/tests/sanitizers/lsan.supp:print_suppressions=0"
export UBSAN_OPTIONS="halt_on_error=1:print_stacktrace=1:exitcode=86"

cd "$BUILD_DIR"
status=0
# Unit tests two at a time, the end-to-end subset one at a time (as scripts/test.sh).
ctest --output-on-failure --timeout 900 -j"${PYPERF_UNIT_JOBS:-2}" -L '^unit$' "$@" || status=$?
# Each ctest run rewrites LastTest.log: the unit tests' output is kept aside.
rm -f Testing/Temporary/LastTest-unit.log
if [[ -f Testing/Temporary/LastTest.log ]]; then
  mv Testing/Temporary/LastTest.log Testing/Temporary/LastTest-unit.log
fi
ctest --output-on-failure --timeout 900 -j"${PYPERF_TEST_JOBS:-1}" -L 'sanitized' "$@" || status=$?
t_test=$(date +%s)

shopt -s nullglob
reports=("$REPORTS"/*)
if ((${#reports[@]})); then
  for report in "${reports[@]}"; do
    echo "=== sanitizer report $report"
    cat "$report"
  done
  echo "test-sanitized: ${#reports[@]} sanitizer report file(s), above" >&2
  status=1
fi
for log in Testing/Temporary/LastTest-unit.log Testing/Temporary/LastTest.log; do
  if [[ -f $log ]] &&
    grep -E -n "runtime error: |ERROR: (Address|Leak)Sanitizer|SUMMARY: (Address|Leak|UndefinedBehavior)Sanitizer" \
      "$log"; then
    echo "test-sanitized: sanitizer reports in the tests' output ($log)" >&2
    status=1
  fi
done
if [[ $step == all ]]; then
  echo "sanitized times: build $((t_build - start)) s, tests $((t_test - t_build)) s"
else
  echo "sanitized tests: $((t_test - t_build)) s"
fi
exit "$status"
