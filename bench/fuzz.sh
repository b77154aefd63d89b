#!/usr/bin/env bash
# Builds the libFuzzer targets of tests/fuzz with Debian's clang
# (-fsanitize=fuzzer,address,undefined; the whole library instrumented for
# coverage) into their own build directory, runs each for SECONDS seconds
# from its seed corpus (tests/fuzz/corpus/<target>/), and prints per target:
# executions per second, coverage (libFuzzer's final cov/ft), runs, and
# whether there was a finding. Every input that made a target fail is copied
# into tests/fuzz/corpus/<target>/ (where the CTest regression test
# fuzz_regression.<target> runs it from then on) and the script exits 1.
#
#   bench/fuzz.sh [SECONDS]        default 600, or $PYPERF_FUZZ_SECONDS
#
# Environment: PYPERF_FUZZ_TARGETS (names, space separated; default all
# three), PYPERF_FUZZ_BUILD_DIR (default build-fuzz), PYPERF_FUZZ_JOBS (build
# jobs, default 2), PYPERF_FUZZ_ARGS (extra libFuzzer flags), PYPERF_FUZZ_PARALLEL=1
# (run the targets side by side rather than one after another).
# Needs clang (Debian's clang-14 with libclang_rt.fuzzer); run as root or as
# a user who can read its own /proc files (it always can).
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
SECONDS_PER_TARGET="${1:-${PYPERF_FUZZ_SECONDS:-600}}"
BUILD_DIR="${PYPERF_FUZZ_BUILD_DIR:-$ROOT/build-fuzz}"
TARGETS=(${PYPERF_FUZZ_TARGETS:-fuzz_native_unwind fuzz_event_to_output fuzz_elf_and_python_detection})
JOBS="${PYPERF_FUZZ_JOBS:-2}"

if ! command -v clang++ >/dev/null; then
  echo "fuzz: clang++ not found (apt-get install clang)" >&2
  exit 1
fi

SAN="-fsanitize=fuzzer-no-link,address,undefined -fno-sanitize-recover=undefined -fno-omit-frame-pointer"
cmake -S "$ROOT" -B "$BUILD_DIR" -DCMAKE_BUILD_TYPE=RelWithDebInfo \
  -DCMAKE_C_COMPILER=clang -DCMAKE_CXX_COMPILER=clang++ \
  -DCMAKE_C_FLAGS="$SAN" -DCMAKE_CXX_FLAGS="$SAN" \
  -DCMAKE_EXE_LINKER_FLAGS="-fsanitize=address,undefined" \
  -DPYPERF_LIBFUZZER=ON -DPYPERF_WERROR=OFF -DPYPERF_BUILD_BENCH=OFF >/dev/null
cmake --build "$BUILD_DIR" -j"$JOBS" --target "${TARGETS[@]}"

# Runs one target; its summary line goes to $BUILD_DIR/fuzz-logs/<t>.summary
# and it returns 1 on a finding.
run_target() {
  local t=$1
  local bin="$BUILD_DIR/tests/fuzz/$t"
  local seeds="$ROOT/tests/fuzz/corpus/$t"
  local work="$BUILD_DIR/fuzz-work/$t"          # the corpus libFuzzer grows
  local artifacts="$BUILD_DIR/fuzz-artifacts/$t"
  local log="$BUILD_DIR/fuzz-logs/$t.log"
  mkdir -p "$work" "$artifacts" "$(dirname "$log")"
  rm -f "$artifacts"/*
  echo "fuzz: $t for ${SECONDS_PER_TARGET} s (log: $log)"
  # -timeout: an input that takes 60 s is a finding (a hang; wall time, so
  # generous for a busy machine); -rss_limit_mb: one that needs 2 GiB is one
  # too. Slow units (over 30 s, libFuzzer's slow-unit-*) are reported, not
  # failures: on a loaded machine they are mostly time spent waiting for CPU. The CPU time the fuzzer got (on a busy
  # machine much less than the wall time) comes from the subshell's `times`.
  local out rc cpu
  # shellcheck disable=SC2086
  out=$(
    rc=0
    "$bin" -max_total_time="$SECONDS_PER_TARGET" -print_final_stats=1 -timeout=60 \
      -report_slow_units=30 -rss_limit_mb=2048 -artifact_prefix="$artifacts/" ${PYPERF_FUZZ_ARGS:-} \
      "$work" "$seeds" >"$log" 2>&1 || rc=$?
    echo "$rc"
    times
  )
  rc=$(sed -n 1p <<<"$out")
  cpu=$(sed -n 3p <<<"$out" | awk '{
    n = split($1 " " $2, t, " "); s = 0
    for (i = 1; i <= n; i++) { split(t[i], ms, "m"); s += ms[1] * 60 + ms[2] }
    printf "%.1f", s }')
  local runs eps rss last cov ft corp finding="none"
  runs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log" | tail -1)
  eps=$(sed -n 's/^stat::average_exec_per_sec: *//p' "$log" | tail -1)
  rss=$(sed -n 's/^stat::peak_rss_mb: *//p' "$log" | tail -1)
  last=$(grep -E '^#[0-9]+.*cov: [0-9]+ ft: [0-9]+' "$log" | tail -1 || true)
  cov=$(sed -n 's/.*cov: \([0-9]*\).*/\1/p' <<<"$last")
  ft=$(sed -n 's/.* ft: \([0-9]*\).*/\1/p' <<<"$last")
  corp=$(sed -n 's/.* corp: \([0-9]*\/[0-9a-zA-Z]*\).*/\1/p' <<<"$last")
  local slow=("$artifacts"/slow-unit-*)
  [[ -e ${slow[0]} ]] && finding="none (${#slow[@]} slow units in $artifacts)"
  local crashers=("$artifacts"/crash-* "$artifacts"/leak-* "$artifacts"/timeout-* "$artifacts"/oom-*)
  if [[ $rc -ne 0 || -n $(ls "${crashers[@]}" 2>/dev/null) ]]; then
    finding="YES (exit $rc)"
    for c in "${crashers[@]}"; do
      [[ -e $c ]] || continue
      cp "$c" "$seeds/$(basename "$c")"
      finding+=" $(basename "$c") -> tests/fuzz/corpus/$t/"
    done
    grep -m3 -E 'ERROR: (AddressSanitizer|libFuzzer|LeakSanitizer)|runtime error|FUZZ CHECK FAILED' \
      "$log" | sed "s/^/    $t: /" || true
  fi
  printf '%-30s %7s %7s %6s %6s %10s %10s %6s  %s\n' "$t" "${eps:-?}" "${cpu:-?}" \
    "${cov:-?}" "${ft:-?}" "${runs:-?}" "${corp:-?}" "${rss:-?}" "$finding" \
    >"$BUILD_DIR/fuzz-logs/$t.summary"
  [[ $finding == none* ]]
}

# PYPERF_FUZZ_PARALLEL=1 runs the targets side by side (one core each).
load_before=$(cut -d' ' -f1 /proc/loadavg)
found=0
if [[ ${PYPERF_FUZZ_PARALLEL:-0} == 1 ]]; then
  pids=()
  for t in "${TARGETS[@]}"; do
    run_target "$t" &
    pids+=($!)
  done
  for p in "${pids[@]}"; do wait "$p" || found=1; done
else
  for t in "${TARGETS[@]}"; do run_target "$t" || found=1; done
fi

echo
echo "libFuzzer, ${SECONDS_PER_TARGET} s per target, $(nproc) CPUs, load $load_before at the start," \
  "$(cut -d' ' -f1 /proc/loadavg) at the end"
printf '%-30s %7s %7s %6s %6s %10s %10s %6s  %s\n' target exec/s "CPU s" cov ft runs corpus "rss MB" \
  finding
for t in "${TARGETS[@]}"; do cat "$BUILD_DIR/fuzz-logs/$t.summary"; done
exit "$found"
