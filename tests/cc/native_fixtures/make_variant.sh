#!/bin/sh
# make_variant.sh VARIANT IN_LIB OUT_DIR
# Derives one variant of a fixture library from its full (-g) build, the way
# distributions ship libraries:
#   stripped        strip --strip-all: .dynsym only
#   debuglink       stripped, plus OUT_DIR/<lib>.debug named by .gnu_debuglink
#   separate-debug  stripped; the debug file goes to OUT_DIR/debug/<lib>.debug
#                   and is found only by build-id (tests place it)
#   minidebug       stripped, plus .gnu_debugdata (xz-compressed symtab of the
#                   functions not in .dynsym, as Fedora's find-debuginfo does)
set -eu
variant=$1 in=$2 out=$3
name=$(basename "$in")
mkdir -p "$out"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
case "$variant" in
  stripped)
    strip --strip-all -o "$out/$name" "$in" ;;
  debuglink)
    objcopy --only-keep-debug "$in" "$out/$name.debug"
    strip --strip-all -o "$tmp/$name" "$in"
    (cd "$out" && objcopy --add-gnu-debuglink="$name.debug" "$tmp/$name" "$out/$name") ;;
  separate-debug)
    mkdir -p "$out/debug"
    objcopy --only-keep-debug "$in" "$out/debug/$name.debug"
    strip --strip-all -o "$out/$name" "$in" ;;
  minidebug)
    nm -D "$in" --format=posix --defined-only | awk '{ print $1 }' | sort > "$tmp/dynsyms"
    nm "$in" --format=posix --defined-only | awk '$2 == "T" || $2 == "t" { print $1 }' \
      | sort > "$tmp/funcsyms"
    comm -13 "$tmp/dynsyms" "$tmp/funcsyms" > "$tmp/keep"
    objcopy --only-keep-debug "$in" "$tmp/debug"
    objcopy -S --remove-section .gdb_index --remove-section .comment \
      --keep-symbols="$tmp/keep" "$tmp/debug" "$tmp/mini"
    xz -f "$tmp/mini"
    strip --strip-all -o "$tmp/$name" "$in"
    objcopy --add-section .gnu_debugdata="$tmp/mini.xz" "$tmp/$name" "$out/$name" ;;
  *)
    echo "unknown variant $variant" >&2; exit 2 ;;
esac
