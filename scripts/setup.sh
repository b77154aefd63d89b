#!/usr/bin/env bash
# Installs everything bcc-pyperf needs to build, test and run, from Debian's
# archive. Idempotent and non-interactive: runs `apt-get update` once and only
# when a package is missing. Run as root.
set -euo pipefail

PACKAGES=(
  # build
  cmake g++ make pkg-config
  libbpfcc-dev libbpf-dev libelf-dev libunwind-dev libcli11-dev
  # tests and benchmarks
  libgtest-dev libgmock-dev libbenchmark-dev
  python3.11-dev   # Debian's CPython headers: the offsets test checks /usr/bin/python3.11
  binutils         # addr2line, readelf, objcopy: tests check native frame addresses
  xz-utils         # the .gnu_debugdata fixture
  git              # the package test copies the tracked tree
  util-linux       # setpriv (the unprivileged-run test), nsenter (the profiling.sampling oracle)
  procps
  strace           # the read-only test traces PyPerf's system calls
  python3          # /usr/bin/python3 runs the gProfiler protocol harness
  # the Debian package and its test
  debhelper dpkg-dev lintian
  # newer CPython in debootstrapped roots (scripts/python-roots.sh), uWSGI
  debootstrap
  uwsgi-core uwsgi-plugin-python3
  # output formats (--format) and the consumers their tests read them back with
  libprotobuf-dev protobuf-compiler zlib1g-dev  # pprof: profile.proto, gzip
  golang-github-google-pprof-dev  # the published profile.proto
  golang-go                       # go tool pprof reads the pprof output back
  chromium                        # the flame graph page, headless
)

missing=()
for p in "${PACKAGES[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
    missing+=("$p")
  fi
done

if ((${#missing[@]})); then
  if [[ $(id -u) -ne 0 ]]; then
    echo "setup: these packages are missing and installing them needs root: ${missing[*]}" >&2
    exit 1
  fi
  echo "setup: installing ${missing[*]}"
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq
  apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi
# Node.js and npm come with the machine (not from Debian's archive, whose npm
# conflicts with the installed nodejs): they drive chromium and validate
# speedscope files, with the packages tests/js/package-lock.json pins.
for tool in node npm; do
  if ! command -v "$tool" >/dev/null; then
    echo "setup: $tool is missing: install Node.js 20 with npm" >&2
    exit 1
  fi
done
# The npm packages the output-format tests use, pinned by the lock file,
# installed beside it (tests/js/node_modules, not tracked).
js_dir="$(cd "$(dirname "${BASH_SOURCE[0]}")/../tests/js" && pwd)"
if ! cmp -s "$js_dir/package-lock.json" "$js_dir/node_modules/.installed-lock.json" 2>/dev/null; then
  echo "setup: installing the npm packages of tests/js"
  npm ci --prefix "$js_dir" --no-audit --no-fund --loglevel=error >/dev/null
  cp "$js_dir/package-lock.json" "$js_dir/node_modules/.installed-lock.json"
fi
echo "setup: dependencies present"
