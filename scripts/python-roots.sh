#!/usr/bin/env bash
# Builds the Debian roots the version tests run newer CPythons in, never on
# the host: a `debootstrap --variant=minbase` root of trixie with python3.13
# and one of sid with python3.14, each with the interpreter's headers
# (libpython3.X-dev: the offsets tests compile against them).
#
#   scripts/python-roots.sh [trixie|sid ...]   build the named roots (default: all)
#   scripts/python-roots.sh --print            print "SUITE PYTHON ROOT" per interpreter
#                                              (a root's default first), build nothing
#
# Roots live in $PYPERF_ROOTS_DIR (default /var/cache/bcc-pyperf/roots), outside
# the repository, and are built once: a root is complete when its stamp file
# names the same suite and packages as this script; an incomplete or outdated
# root is deleted and built again. Non-interactive; needs root, debootstrap
# and Debian's mirror ($PYPERF_DEBIAN_MIRROR, default deb.debian.org).
# Concurrent callers (CTest running test binaries in parallel) are serialised
# by a lock on the roots directory.
set -euo pipefail

ROOTS_DIR="${PYPERF_ROOTS_DIR:-/var/cache/bcc-pyperf/roots}"
MIRROR="${PYPERF_DEBIAN_MIRROR:-http://deb.debian.org/debian}"
STAMP_NAME=.pyperf-root-complete

# suite -> the interpreters it provides, its default first, each installed
# with its headers; other packages installed into it (trixie also holds Austin,
# the profiler bench/overhead.py compares PyPerf with). sid's 3.15 ships
# CPython's own sampler (`-m profiling.sampling`): a test oracle and a peer in
# the bench.
declare -A PYTHON=([trixie]=python3.13 [sid]="python3.14 python3.15")
declare -A EXTRA=([trixie]=austin [sid]=)
packages_for() {
  local python packages=()
  for python in ${PYTHON[$1]}; do packages+=("$python" "lib$python-dev"); done
  [[ -z "${EXTRA[$1]}" ]] || packages+=("${EXTRA[$1]}")
  (IFS=,; echo "${packages[*]}")
}

stamp_text() { printf 'suite=%s\npackages=%s\nformat=1\n' "$1" "$(packages_for "$1")"; }

usage() {
  sed -n '2,16p' "${BASH_SOURCE[0]}" | sed 's/^# \{0,1\}//' >&2
  exit "${1:-2}"
}

suites=()
print_only=0
for arg in "$@"; do
  case "$arg" in
    --print) print_only=1 ;;
    -h | --help) usage 0 ;;
    *)
      [[ -n "${PYTHON[$arg]:-}" ]] || { echo "python-roots: unknown suite '$arg'" >&2; usage; }
      suites+=("$arg")
      ;;
  esac
done
((${#suites[@]})) || suites=(trixie sid)

if ((print_only)); then
  for suite in "${suites[@]}"; do
    for python in ${PYTHON[$suite]}; do echo "$suite $python $ROOTS_DIR/$suite"; done
  done
  exit 0
fi

if [[ $(id -u) -ne 0 ]]; then
  echo "python-roots: building roots needs root (debootstrap, chroot)" >&2
  exit 1
fi
if ! command -v debootstrap >/dev/null; then
  echo "python-roots: debootstrap is missing: apt-get install debootstrap (scripts/setup.sh)" >&2
  exit 1
fi

mkdir -p "$ROOTS_DIR"
exec 9>"$ROOTS_DIR/.lock"
flock 9

complete() {
  local root="$ROOTS_DIR/$1" python
  [[ -f "$root/$STAMP_NAME" ]] && [[ "$(cat "$root/$STAMP_NAME")" == "$(stamp_text "$1")" ]] ||
    return 1
  for python in ${PYTHON[$1]}; do [[ -x "$root/usr/bin/$python" ]] || return 1; done
}

# Nothing may still be mounted below a root we delete (a crashed run's
# private mounts die with their namespace, but be sure).
remove_root() {
  local root="$1"
  [[ -e "$root" ]] || return 0
  if grep -q " $root/" /proc/self/mounts; then
    echo "python-roots: $root has mounts below it; unmount them first" >&2
    exit 1
  fi
  rm -rf --one-file-system "$root"
}

for suite in "${suites[@]}"; do
  root="$ROOTS_DIR/$suite"
  if complete "$suite"; then
    echo "python-roots: $suite root ready in $root (${PYTHON[$suite]})"
    continue
  fi
  echo "python-roots: building $suite root in $root (${PYTHON[$suite]}; a few minutes)"
  start=$(date +%s)
  remove_root "$root"
  remove_root "$root.partial"
  log="$ROOTS_DIR/$suite.debootstrap.log"
  if ! debootstrap --variant=minbase --components=main --include="$(packages_for "$suite")" \
    "$suite" "$root.partial" "$MIRROR" >"$log" 2>&1; then
    echo "python-roots: debootstrap of $suite failed; last lines of $log:" >&2
    tail -n 15 "$log" >&2
    exit 1
  fi
  # Keep the root small: downloaded packages are not needed any more.
  rm -rf "$root.partial/var/cache/apt/archives/"*.deb "$root.partial/var/lib/apt/lists/"*_Packages
  for python in ${PYTHON[$suite]}; do
    if ! chroot "$root.partial" "$python" -c 'import sys, threading; print(sys.version)' \
      >/dev/null; then
      echo "python-roots: $python does not run in the new $suite root" >&2
      exit 1
    fi
  done
  stamp_text "$suite" >"$root.partial/$STAMP_NAME"
  mv "$root.partial" "$root"
  echo "python-roots: $suite root built in $(($(date +%s) - start)) s," \
    "$(du -sh --one-file-system "$root" | cut -f1)"
done
