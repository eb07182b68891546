#!/usr/bin/env bash
# The built-in grep tool against rg and `grep -rn` on one large tree, one run each, as ratios
# (bench/rust/grep_tool.rs). The tree: GREP_BENCH_DIR, else ~/.cargo/registry/src (the sources of every
# crate cargo has fetched: real code, hundreds of MB), else a generated one. rg comes from apt (ripgrep)
# when it is missing and we are root; without it the rg line says "not installed".
#   GREP_BENCH_PATTERN='fn\s+new_\w+\(' bash bench/grep_bench.sh
set -euo pipefail
cd "$(dirname "$0")/.."
if ! command -v rg >/dev/null 2>&1 && [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
  (apt-get install -y ripgrep >/dev/null 2>&1 || { apt-get update >/dev/null 2>&1 && apt-get install -y ripgrep >/dev/null 2>&1; }) || true
fi
dir="${GREP_BENCH_DIR:-}"
generated=""
if [ -z "$dir" ]; then
  registry=$(ls -d "${CARGO_HOME:-$HOME/.cargo}"/registry/src/*/ 2>/dev/null | head -1 || true)
  if [ -n "$registry" ]; then
    dir="$registry"
  else
    generated=$(mktemp -d)
    dir="$generated"
    for d in $(seq 1 200); do
      mkdir -p "$dir/d$d"
      for f in $(seq 1 50); do
        printf 'fn helper_%s() {}\nfn new_thing(x: u32) -> u32 { x }\n%.0s' $(seq 1 200) > "$dir/d$d/f$f.rs"
      done
    done
  fi
fi
trap '[ -n "$generated" ] && rm -rf "$generated"' EXIT
log=$(mktemp)
if ! GREP_BENCH_DIR="$dir" cargo bench -p tooloop --bench grep_tool >"$log" 2>&1; then
  cat "$log"
  echo "cargo bench --bench grep_tool failed" >&2
  rm -f "$log"
  exit 1
fi
sed -n '/^tree:/,$p' "$log"
rm -f "$log"
