#!/usr/bin/env bash
# Overhead of the bash sandbox (bench/rust/bash_sandbox.rs): median and p90 wall time of `true` through
# builtin::run_bash with the sandbox off, workspace-write, read-only and without network, next to a bare
# `bash -c true`. The difference between "sandbox off" and the others is the Landlock cost; between the
# bare spawn and "sandbox off", the wrapper, the PID namespace and the process accounting.
#   BASH_BENCH_CALLS=100 bash bench/bash_sandbox.sh
set -euo pipefail
cd "$(dirname "$0")/.."
log=$(mktemp)
trap 'rm -f "$log"' EXIT
if ! cargo bench -p tooloop --bench bash_sandbox >"$log" 2>&1; then
  cat "$log"
  echo "cargo bench --bench bash_sandbox failed" >&2
  exit 1
fi
sed -n '/^landlock ABI/,$p' "$log"
