#!/usr/bin/env bash
# Runs the agent-loop benchmark (bench/rust/agent_loop.rs: a 200-turn tool loop against the scripted provider)
# and prints its tables: time per turn at turns 1-10, 90-100 and 190-200 (median of several runs), and how
# it grows with the conversation's length. A request shares the unchanged history instead of copying it, so
# turns 190-200 should cost within 1.5x of turns 1-10.
#   AGENT_BENCH_RUNS=7 AGENT_BENCH_TURNS=200 bash bench/agent_loop.sh
set -euo pipefail
cd "$(dirname "$0")/.."
log=$(mktemp)
trap 'rm -f "$log"' EXIT
if ! cargo bench -p tooloop --bench agent_loop >"$log" 2>&1; then
  cat "$log"
  echo "cargo bench --bench agent_loop failed" >&2
  exit 1
fi
# Keep the bench's own output (the tables), drop cargo's build lines.
sed -n '/^Running\|^ *Running/,$p' "$log" | grep -v '^ *Running'
