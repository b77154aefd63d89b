#!/usr/bin/env bash
# Profiles the bundled demo workload for about 10 s: installs dependencies,
# builds PyPerf, starts examples/cpp/pyperf/demo/demo_workload.py, runs PyPerf
# on it, and prints where the output went, the hottest stacks, and the flame
# graph page of the same run. Run as root.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
BUILD_DIR="${PYPERF_BUILD_DIR:-$ROOT/build}"
SECONDS_TO_PROFILE="${1:-10}"
"$ROOT/scripts/setup.sh"
"$ROOT/scripts/build.sh"

PYTHON="${PYTHON:-$(ls /usr/bin/python3 2>/dev/null || command -v python3)}"
OUT_DIR="$(mktemp -d /tmp/pyperf-demo-XXXXXX)"
"$PYTHON" "$ROOT/examples/cpp/pyperf/demo/demo_workload.py" &
WORKLOAD=$!
trap 'kill $WORKLOAD 2>/dev/null || true; wait $WORKLOAD 2>/dev/null || true' EXIT
sleep 1
echo "demo: profiling $PYTHON (pid $WORKLOAD) for ${SECONDS_TO_PROFILE} s"
"$BUILD_DIR/examples/cpp/pyperf/PyPerf" -p "$WORKLOAD" -F 99 -d "$SECONDS_TO_PROFILE" \
  -o "$OUT_DIR/pyperf.col" --format collapsed,flamegraph \
  2> >(grep -v -e '^sha1 socket' -e 'cannot get prog tag' >&2)
# The collapsed dump is PATH.<stamp>; its flame graph is PATH.<stamp>.html.
FILE="$(ls "$OUT_DIR"/pyperf.col.* | grep -v '\.html$' | sort | tail -1)"
echo
echo "demo: collapsed stacks written to $FILE"
echo "demo: hottest stacks (count, then frames root -> leaf, middle frames elided):"
# `sed -n 1,8p` rather than `head -8`: head exits after 8 lines, and sort,
# still writing, would die of SIGPIPE, which pipefail turns into a failure of
# the script (exit 141). sed reads to the end, so only real errors fail.
awk '{c=$NF; $NF=""; sub(/ $/, ""); print c"\t"$0}' "$FILE" | sort -rn | sed -n 1,8p | \
  while IFS=$'\t' read -r count stack; do
    IFS=';' read -ra frames <<<"$stack"
    n=${#frames[@]}
    if ((n > 6)); then
      shown="${frames[0]};${frames[1]};...;${frames[n-3]};${frames[n-2]};${frames[n-1]}"
    else
      shown="$stack"
    fi
    printf '%6d  %s\n' "$count" "$shown"
  done
echo
echo "demo: flame graph (open it in a browser; it works offline): $FILE.html"
