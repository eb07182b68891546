#!/usr/bin/env bash
# Builds tooloop's release artifacts into dist/ from a clean clone:
#   tooloop-VERSION.tar.gz                                the sdist (`pip install` builds it with cargo)
#   tooloop-VERSION-cp39-abi3-manylinux_2_17_ARCH.whl     one wheel per architecture for every CPython >= 3.9
#   libtooloop-VERSION-ARCH-unknown-linux-gnu.tar.gz      the C library: lib/libtooloop.{so,a},
#                                                         include/tooloop.{h,hpp}, lib/pkgconfig/*.pc
# for ARCH in x86_64 and aarch64 (glibc >= 2.17, manylinux2014). Zig is the C compiler and the linker
# (`maturin zig cc`, what `maturin build --zig` runs), so the Rust toolchain of this machine builds for both
# architectures and an old glibc without a cross gcc or a manylinux container. The wheel and the C library
# of one architecture are built with the same compiler settings, so the second build reuses the first's
# compiled crates.
#
# Checks, and a non-zero exit when one fails: each wheel with `auditwheel show` (manylinux_2_17 and no
# shared library outside the policy's system set: rustls, ring, SQLite and the tree-sitter grammar are
# linked in) and `abi3audit --strict`; each tarball by tests/release/c_tarball.sh where it can run.
#
# aarch64 needs the Rust standard library for that target (`rustup target add aarch64-unknown-linux-gnu`,
# tried here). When it cannot be had, aarch64 is skipped with a line saying so, and the exit status stays 0
# unless --require-all-arches is given.
#
# Usage: scripts/build_wheels.sh [--out DIR] [--arch "x86_64 aarch64"] [--wheels-only] [--no-sdist]
#                                [--require-all-arches]
# The tools (maturin, ziglang, auditwheel, abi3audit, pinned below) go into a venv at $TOOLOOP_BUILD_VENV
# (default .venv-build), reused while it has them.
set -euo pipefail
cd "$(dirname "$0")/.."
root=$(pwd)

out="$root/dist"
arches="x86_64 aarch64"
wheels_only=0
sdist=1
require_all=0
while [ $# -gt 0 ]; do
  case "$1" in
    --out) out="$2"; shift 2 ;;
    --arch) arches="$2"; shift 2 ;;
    --wheels-only) wheels_only=1; shift ;;
    --no-sdist) sdist=0; shift ;;
    --require-all-arches) require_all=1; shift ;;
    -h|--help) sed -n '2,26p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) echo "build_wheels.sh: unknown argument $1 (see --help)" >&2; exit 2 ;;
  esac
done
mkdir -p "$out"
out=$(cd "$out" && pwd)

say() { printf '\n==== %s ====\n' "$*"; }

# The tools, pinned: another zig or maturin may link differently, and a release must be reproducible.
TOOLS=("maturin==1.16.0" "ziglang==0.17.1" "auditwheel==6.8.2" "abi3audit==0.0.26")
venv="${TOOLOOP_BUILD_VENV:-$root/.venv-build}"
have_tools() {
  "$venv/bin/python" - "${TOOLS[@]}" <<'EOF' 2>/dev/null
import sys
from importlib.metadata import version
for spec in sys.argv[1:]:
    name, want = spec.split("==")
    if version(name) != want:
        sys.exit(1)
EOF
}
if ! have_tools; then
  say "build tools into $venv: ${TOOLS[*]}"
  rm -rf "$venv"
  python3 -m venv "$venv"
  "$venv/bin/python" -m pip install -q "${TOOLS[@]}"
fi
# The venv's python3 first on PATH: `maturin zig` finds zig as `python3 -m ziglang`.
export PATH="$venv/bin:$PATH"

version=$(sed -n 's/^version = "\(.*\)"/\1/p' Cargo.toml | head -1)
failed=()

# Compiler wrappers for one target: zig for glibc 2.17 (manylinux2014), through maturin's own `zig cc`
# front end (it rewrites the flags zig does not take). Sanitizers off, as maturin's --zig does.
wrappers() {
  local arch=$1 dir=$2 zt="$1-linux-gnu.2.17"
  mkdir -p "$dir"
  printf '#!/bin/sh\nexec maturin zig cc -- -fno-sanitize=all -target %s "$@"\n' "$zt" >"$dir/cc"
  printf '#!/bin/sh\nexec maturin zig c++ -- -fno-sanitize=all -target %s "$@"\n' "$zt" >"$dir/c++"
  printf '#!/bin/sh\nexec maturin zig ar -- "$@"\n' >"$dir/ar"
  printf '#!/bin/sh\nexec maturin zig ranlib -- "$@"\n' >"$dir/ranlib"
  chmod +x "$dir/cc" "$dir/c++" "$dir/ar" "$dir/ranlib"
}

# Runs "$@" with the target's C compiler, C++ compiler, archiver and linker set to the wrappers. The
# wrappers sit in a fixed folder of target/ so that every build sees the same values (cc-rs reruns a build
# script, and cargo rebuilds everything above it, when one of these variables changes). No debug info in
# release artifacts (the profile keeps line tables for profiling at home): the wheel strips it anyway, and
# libtooloop.a would carry 150 MB of it.
with_zig() {
  local arch=$1; shift
  local triple="$arch-unknown-linux-gnu" dir="$root/target/zig-wrappers/$arch"
  local t=${triple//-/_} T
  T=$(echo "$t" | tr '[:lower:]' '[:upper:]')
  wrappers "$arch" "$dir"
  env "CC_$t=$dir/cc" "CXX_$t=$dir/c++" "AR_$t=$dir/ar" "RANLIB_$t=$dir/ranlib" \
      "CARGO_TARGET_${T}_LINKER=$dir/cc" CARGO_PROFILE_RELEASE_DEBUG=0 "$@"
}

# The Rust standard library for a target: rustup when it lacks it. Never pretends: no target, no build.
have_target() {
  local triple=$1
  rustc --print sysroot >/dev/null
  if [ -d "$(rustc --print sysroot)/lib/rustlib/$triple/lib" ]; then return 0; fi
  if command -v rustup >/dev/null && rustup target add "$triple" >/dev/null 2>&1 \
     && [ -d "$(rustc --print sysroot)/lib/rustlib/$triple/lib" ]; then
    return 0
  fi
  return 1
}

# The shared libraries a manylinux2014 wheel may need from the system (PEP 599); anything else would have to
# be installed by the user, so it must be linked in instead.
ALLOWED_LIBS="libc.so.6 libm.so.6 libpthread.so.0 libdl.so.2 librt.so.1 libgcc_s.so.1 ld-linux-x86-64.so.2
ld-linux-aarch64.so.1"
check_wheel() {
  local whl=$1 arch=$2 report tmp lib
  say "check $(basename "$whl") ($(du -k "$whl" | cut -f1) KiB)"
  if ! report=$(auditwheel show "$whl" 2>&1); then
    echo "$report"; failed+=("auditwheel show $(basename "$whl")"); return
  fi
  echo "$report"
  # manylinux_2_17 is manylinux2014; auditwheel names the most compatible tag the wheel meets, and lists
  # under "external shared libraries" what it would have to vendor.
  grep -q "\"manylinux_2_17_$arch\"" <<<"$report" || failed+=("$(basename "$whl") is not manylinux_2_17_$arch")
  if grep -qi 'external shared libraries are required' <<<"$report"; then
    failed+=("$(basename "$whl") needs shared libraries auditwheel would vendor")
  fi
  tmp=$(mktemp -d)
  python3 -m zipfile -e "$whl" "$tmp"
  for lib in $(readelf -d "$tmp"/tooloop/_tooloop*.so | sed -n 's/.*(NEEDED).*\[\(.*\)\]/\1/p'); do
    if grep -qw -- "$lib" <<<"$ALLOWED_LIBS"; then
      echo "needs $lib (system)"
    else
      failed+=("$(basename "$whl") links $lib dynamically (outside manylinux2014's set)")
    fi
  done
  rm -rf "$tmp"
  abi3audit --strict --report "$whl" || failed+=("abi3audit $(basename "$whl")")
}

c_tarball() {
  local arch=$1 triple="$1-unknown-linux-gnu"
  local build="$root/target/$triple/release" name="libtooloop-$version-$triple"
  say "C library $name.tar.gz"
  # The shared library stripped of its local symbols (what it exports stays): the flags after -- reach
  # this crate only, so its dependencies stay the wheel's build.
  with_zig "$arch" cargo rustc -p tooloop-capi --lib --release --target "$triple" -- -C strip=symbols
  local stage
  stage=$(mktemp -d)
  local d="$stage/$name"
  mkdir -p "$d/lib/pkgconfig" "$d/include"
  cp "$build/libtooloop.so" "$build/libtooloop.a" "$d/lib/"
  cp include/tooloop.h include/tooloop.hpp "$d/include/"
  cp bindings/c/README.md "$d/README.md"
  # Relocatable: the prefix is where the .pc file lies (pkg-config's ${pcfiledir}), so the tarball works
  # wherever it is unpacked; to install under /usr/local, copy lib/ and include/ there as they are.
  local pc_prefix='${pcfiledir}/../..'
  sed -e "s|@PREFIX@|$pc_prefix|" -e 's|@LIBDIR@|${prefix}/lib|' -e 's|@INCLUDEDIR@|${prefix}/include|' \
      -e "s|@VERSION@|$version|" -e 's|@RPATH@||' bindings/c/tooloop.pc.in >"$d/lib/pkgconfig/tooloop.pc"
  local native
  native=$(sed -n 's/^NATIVE_LIBS := //p' bindings/c/Makefile)
  sed -e "s|@PREFIX@|$pc_prefix|" -e 's|@LIBDIR@|${prefix}/lib|' -e 's|@INCLUDEDIR@|${prefix}/include|' \
      -e "s|@VERSION@|$version|" -e "s|@NATIVE_LIBS@|$native|" bindings/c/tooloop-static.pc.in \
      >"$d/lib/pkgconfig/tooloop-static.pc"
  tar -C "$stage" --owner=0 --group=0 --numeric-owner -czf "$out/$name.tar.gz" "$name"
  rm -rf "$stage"
  ls -l "$out/$name.tar.gz"
  if [ "$arch" = "$(uname -m)" ]; then
    bash tests/release/c_tarball.sh "$out/$name.tar.gz" || failed+=("tests/release/c_tarball.sh $name")
  else
    echo "($name is for $arch: not run on this $(uname -m) machine)"
  fi
}

if [ "$sdist" = 1 ]; then
  say "sdist"
  maturin sdist --out "$out"
fi

skipped=()
for arch in $arches; do
  triple="$arch-unknown-linux-gnu"
  if ! have_target "$triple"; then
    echo "SKIPPED $arch: the Rust target $triple is not installed and rustup could not add it" \
         "(rustup target add $triple needs the Rust distribution server)"
    skipped+=("$arch")
    continue
  fi
  say "wheel $arch (release, manylinux2014 via zig)"
  rm -f "$out"/tooloop-"$version"-*"$arch".whl
  with_zig "$arch" maturin build --release --compatibility manylinux2014 --target "$triple" --out "$out"
  for whl in "$out"/tooloop-"$version"-*"$arch".whl; do check_wheel "$whl" "$arch"; done
  [ "$wheels_only" = 1 ] || c_tarball "$arch"
done

say "dist/"
ls -l "$out"
if [ ${#skipped[@]} -gt 0 ]; then
  echo "not built (no Rust target): ${skipped[*]}"
  [ "$require_all" = 1 ] && failed+=("architectures not built: ${skipped[*]}")
fi
if [ ${#failed[@]} -gt 0 ]; then
  echo "FAILED: ${failed[*]}"
  exit 1
fi
