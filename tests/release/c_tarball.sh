#!/usr/bin/env bash
# The C library tarball (dist/libtooloop-VERSION-TARGET.tar.gz, scripts/build_wheels.sh) is usable alone:
# unpacked into an empty temporary folder, a C program is built against it through pkg-config, whose search
# path is the tarball's lib/pkgconfig only (no -I or -L into the source tree, no system tooloop.pc), shared
# and static, and run: tarball_check.c (version, a config parsed, bad JSON refused) and examples/c/agent.c
# against the mock server (a tool call and the answer). The shared build must load the tarball's
# libtooloop.so. Prints PASS/FAIL per check and "N passed, N failed"; exits non-zero on any failure.
# Usage: tests/release/c_tarball.sh dist/libtooloop-VERSION-TARGET.tar.gz
set -uo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
root="$(cd "$here/../.." && pwd)"
tarball="$(cd "$(dirname "$1")" && pwd)/$(basename "$1")"
name=$(basename "$tarball" .tar.gz)                                 # libtooloop-0.1.0-x86_64-unknown-linux-gnu
version=$(sed -E 's/^libtooloop-([^-]+)-.*/\1/' <<<"$name")

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
tar -C "$tmp" -xzf "$tarball"
prefix="$tmp/$name"
# The programs' sources are copied next to nothing else: "tooloop.h" can only come from the tarball.
mkdir "$tmp/src"
cp "$here/tarball_check.c" "$root/examples/c/agent.c" "$tmp/src/"
export PKG_CONFIG_LIBDIR="$prefix/lib/pkgconfig" PKG_CONFIG_PATH=""

passed=0
failed=0
check() {   # check NAME CMD...: runs CMD, PASS when it exits 0
  local what=$1; shift
  if out=$("$@" 2>&1); then
    passed=$((passed + 1)); echo "PASS $what"
  else
    failed=$((failed + 1)); echo "FAIL $what"; sed 's/^/    | /' <<<"$out" | tail -30
  fi
}

check "pkg-config finds tooloop $version in the tarball" \
  bash -c "[ \"\$(pkg-config --modversion tooloop)\" = '$version' ] && pkg-config --cflags tooloop | grep -q -- '-I$prefix/'"
warn=(-std=c99 -Wall -Wextra -Werror -pedantic)
# shellcheck disable=SC2046
check "build tarball_check (shared)" \
  cc "${warn[@]}" "$tmp/src/tarball_check.c" $(pkg-config --cflags --libs tooloop) -o "$tmp/check_shared"
# shellcheck disable=SC2046
check "build agent.c (shared)" \
  cc "${warn[@]}" "$tmp/src/agent.c" $(pkg-config --cflags --libs tooloop) -o "$tmp/agent_shared"
# shellcheck disable=SC2046
check "build tarball_check (static)" \
  cc "${warn[@]}" "$tmp/src/tarball_check.c" $(pkg-config --static --cflags --libs tooloop-static) -o "$tmp/check_static"
# shellcheck disable=SC2046
check "build agent.c (static)" \
  cc "${warn[@]}" "$tmp/src/agent.c" $(pkg-config --static --cflags --libs tooloop-static) -o "$tmp/agent_static"

export LD_LIBRARY_PATH="$prefix/lib"
check "the shared build loads the tarball's libtooloop.so" \
  bash -c "ldd '$tmp/check_shared' | grep -F 'libtooloop.so => $prefix/lib/libtooloop.so'"
check "the static build needs no libtooloop.so" bash -c "! ldd '$tmp/check_static' | grep -q libtooloop"
for kind in shared static; do
  check "tarball_check ($kind): version, config parse" "$tmp/check_$kind" "$version"
  check "agent.c ($kind) against the mock server" bash -c \
    "cd '$tmp' && python3 '$root/tests/mock/mockctl.py' run '$root/tests/scenarios/c_example_time.json' \
       -- '$tmp/agent_$kind' | tee /dev/stderr | grep -q 'It is the time the tool returned.'"
done
echo "$passed passed, $failed failed"
[ "$failed" = 0 ]
