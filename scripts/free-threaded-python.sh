#!/usr/bin/env bash
# Builds the free-threaded CPython 3.13 (3.13t, `--disable-gil`) the tests
# profile: Debian ships none, so it is compiled from Debian trixie's source
# package of python3.13 (its upstream tarball; Debian's own packaging builds
# far more than the tests need) with upstream's ./configure, and installed
# into its own prefix, never onto the host.
#
#   scripts/free-threaded-python.sh           build it (once; then only checks the stamp)
#   scripts/free-threaded-python.sh --print   print "VERSION PYTHON PREFIX", build nothing
#
# The interpreter lives in $PYPERF_FT_DIR (default
# /var/cache/bcc-pyperf/interpreters/3.13t); it is complete when its stamp file
# names the same source version and configure flags as this script, else it is
# deleted and built again (about 3 minutes on 2 cores). The source is fetched
# with `apt-get source` through an apt state of its own under
# $PYPERF_FT_WORK_DIR (default /var/cache/bcc-pyperf/ft-src): the host's apt
# sources and lists are neither read nor changed. Needs root (writes
# /var/cache), gcc, make and Debian's mirror ($PYPERF_DEBIAN_MIRROR).
# Concurrent callers are serialised by a lock.
set -euo pipefail

PREFIX="${PYPERF_FT_DIR:-/var/cache/bcc-pyperf/interpreters/3.13t}"
WORK_DIR="${PYPERF_FT_WORK_DIR:-/var/cache/bcc-pyperf/ft-src}"
MIRROR="${PYPERF_DEBIAN_MIRROR:-http://deb.debian.org/debian}"
SOURCE_PACKAGE=python3.13
SOURCE_VERSION=3.13.5-2+deb13u5  # the trixie root's python3.13 (scripts/python-roots.sh)
UPSTREAM_VERSION=${SOURCE_VERSION%%-*}
PYTHON=python3.13t
CONFIGURE_FLAGS=(--disable-gil --enable-shared --without-ensurepip --disable-test-modules)
STAMP_NAME=.pyperf-interpreter-complete

stamp_text() {
  printf 'source=%s=%s\nconfigure=%s\nformat=1\n' "$SOURCE_PACKAGE" "$SOURCE_VERSION" \
    "${CONFIGURE_FLAGS[*]}"
}

case "${1:-}" in
  --print)
    echo "$UPSTREAM_VERSION $PREFIX/bin/$PYTHON $PREFIX"
    exit 0
    ;;
  -h | --help)
    sed -n '2,19p' "${BASH_SOURCE[0]}" | sed 's/^# \{0,1\}//' >&2
    exit 0
    ;;
  "") ;;
  *)
    echo "free-threaded-python: unknown argument '$1'" >&2
    exit 2
    ;;
esac

complete() {
  [[ -f "$PREFIX/$STAMP_NAME" ]] && [[ "$(cat "$PREFIX/$STAMP_NAME")" == "$(stamp_text)" ]] &&
    [[ -x "$PREFIX/bin/$PYTHON" ]]
}

if complete; then
  echo "free-threaded-python: $PYTHON $UPSTREAM_VERSION ready in $PREFIX"
  exit 0
fi
if [[ $(id -u) -ne 0 ]]; then
  echo "free-threaded-python: building $PYTHON needs root (writes $PREFIX)" >&2
  exit 1
fi
for tool in gcc make apt-get tar; do
  command -v "$tool" >/dev/null || {
    echo "free-threaded-python: $tool is missing (scripts/setup.sh installs it)" >&2
    exit 1
  }
done

mkdir -p "$WORK_DIR" "$(dirname "$PREFIX")"
exec 9>"$WORK_DIR/.lock"
flock 9
if complete; then  # another caller built it while we waited
  echo "free-threaded-python: $PYTHON $UPSTREAM_VERSION ready in $PREFIX"
  exit 0
fi

start=$(date +%s)
echo "free-threaded-python: building $PYTHON $UPSTREAM_VERSION in $PREFIX (a few minutes)"

# apt with a state of its own: only these deb-src lines, lists in WORK_DIR, no
# package cache, the host's configuration and keyring otherwise.
apt_state="$WORK_DIR/apt"
mkdir -p "$apt_state/lists/partial"
printf 'deb-src %s trixie main\n' "$MIRROR" >"$apt_state/sources.list"
APT=(apt-get -q -o "Dir::Etc::SourceList=$apt_state/sources.list" -o Dir::Etc::SourceParts=/dev/null
  -o "Dir::State::Lists=$apt_state/lists" -o Dir::Cache::pkgcache= -o Dir::Cache::srcpkgcache=)

download="$WORK_DIR/download"
tarball="$download/${SOURCE_PACKAGE}_${UPSTREAM_VERSION}.orig.tar.xz"
if [[ ! -f "$tarball" ]]; then
  log="$WORK_DIR/apt.log"
  rm -rf "$download"
  mkdir -p "$download"
  # apt checks the files against the signed Sources index.
  if ! "${APT[@]}" update >"$log" 2>&1 ||
    ! (cd "$download" && "${APT[@]}" source --download-only \
      "$SOURCE_PACKAGE=$SOURCE_VERSION") >>"$log" 2>&1; then
    echo "free-threaded-python: downloading $SOURCE_PACKAGE=$SOURCE_VERSION failed;" \
      "last lines of $log:" >&2
    tail -n 15 "$log" >&2
    rm -rf "$download"
    exit 1
  fi
fi

build="$WORK_DIR/build"
rm -rf "$build" "$PREFIX"
mkdir -p "$build"
tar -xJf "$tarball" -C "$build" --strip-components=1
log="$WORK_DIR/build.log"
# No PGO/LTO: the tests need the layout, not the speed.
if ! (cd "$build" && ./configure "${CONFIGURE_FLAGS[@]}" --prefix="$PREFIX" \
  LDFLAGS="-Wl,-rpath,$PREFIX/lib" && make -j"$(nproc)" && make altinstall) >"$log" 2>&1; then
  echo "free-threaded-python: building $PYTHON failed; last lines of $log:" >&2
  tail -n 20 "$log" >&2
  exit 1
fi
if ! "$PREFIX/bin/$PYTHON" -c \
  'import sys, sysconfig, threading; assert sysconfig.get_config_var("Py_GIL_DISABLED")' \
  >/dev/null; then
  echo "free-threaded-python: $PREFIX/bin/$PYTHON does not run, or is not free-threaded" >&2
  exit 1
fi
rm -rf "$build"
stamp_text >"$PREFIX/$STAMP_NAME"
echo "free-threaded-python: $PYTHON built in $(($(date +%s) - start)) s," \
  "$(du -sh "$PREFIX" | cut -f1)"
