#!/usr/bin/env bash
# Run every fuzz target (or those named) for SECS seconds each, one after another, on the seed corpus built
# from tests/scenarios (fuzz/seed.py). Works on a stable toolchain: `-s none` (no sanitizer) needs no
# nightly flag. Findings land in fuzz/artifacts/<target>/; the last lines of each log give the stats.
#   fuzz/run.sh [SECS] [TARGET...]        e.g.  nice -n 15 fuzz/run.sh 600
set -euo pipefail
cd "$(dirname "$0")"
secs="${1:-60}"
shift || true
targets=("$@")
if [ ${#targets[@]} -eq 0 ]; then
    targets=(sse_decoder anthropic_response openai_response responses_response session_load c_config skill_front_matter mcp_framing shell_rules)
fi
command -v cargo-fuzz >/dev/null || cargo install cargo-fuzz --locked
python3 seed.py
mkdir -p logs
# The session target writes a file per input: keep that in memory when possible.
if [ -d /dev/shm ]; then export TMPDIR=/dev/shm; fi
# Build once, then run the binaries: the runs all test the same code even if the tree changes meanwhile.
cargo fuzz build -s none -O
bin="target/$(rustc -vV | sed -n 's/^host: //p')/release"
status=0
for t in "${targets[@]}"; do
    echo "== $t: ${secs}s"
    mkdir -p "artifacts/$t"
    if "$bin/$t" "corpus/$t" -max_total_time="$secs" -rss_limit_mb=2048 -print_final_stats=1 \
        -artifact_prefix="artifacts/$t/" >"logs/$t.log" 2>&1; then
        echo "   ok: $(awk '/^stat::number_of_executed_units/ {print $2}' "logs/$t.log") executions," \
            "corpus $(ls "corpus/$t" | wc -l) inputs"
    else
        status=1
        echo "   FAILED after $(awk '/^stat::number_of_executed_units/ {print $2}' "logs/$t.log") executions:"
        grep -E -A2 'panicked|ERROR: libFuzzer|Test unit written' "logs/$t.log" | head -n 12
    fi
done
exit $status
