#!/usr/bin/env bash
# Run the built C/C++ test programs of tests/c, each against the shared mock server with its scenario and,
# when valgrind is available, under valgrind (definitely and indirectly lost must be 0, no memory errors).
# Usage: tests/c/run.sh BUILD_DIR    (normally through `make -C tests/c test`)
# VALGRIND=0 skips valgrind. Prints PASS/FAIL per program and a final "N passed, N failed".
set -u
here="$(cd "$(dirname "$0")" && pwd)"
root="$(cd "$here/../.." && pwd)"
build="$(cd "${1:-$here/build}" && pwd)"
mockctl="$root/tests/mock/mockctl.py"
scenarios="$root/tests/scenarios"

# program            scenario (or - for none: the program needs no server)   [requests]
# "requests": the server's recorded requests are written to BUILD/PROG.requests.json (mockctl
# --requests-out), then `PROG --requests FILE` checks them (also under valgrind).
tests=(
  "header_c99         -"
  "header_cpp         -"
  "hpp_alone          -"
  "tools_loop         c_two_tools.json"
  "tools_loop_static  c_two_tools.json"
  "cancel_thread      c_slow_stream.json"
  "fake_model         -"
  "session_resume     c_tool_fail_resume.json"
  "session_files      -"
  "session_sqlite     -"
  "restore_file       -"
  "bad_input          c_bad_input.json"
  "openai_provider    openai_text.json"
  "wrapper            c_two_tools.json"
  "permission         c_permission.json"
  "permission_hpp     c_permission.json"
  "example_c          c_example_time.json"
  "example_cpp        c_example_time.json"
  "mcp_server         -"
  "compaction         c_compaction.json   requests"
  "hooks              -"
  "output_schema      c_output_schema.json"
  "content_blocks     c_content_blocks.json   requests"
  "tool_timeout       -"
  "read_only_approval c_read_only_approval.json"
  "repeat_calls       c_roll_dice.json"
  "untrusted_text     c_untrusted_text.json   requests"
  "tool_kind          c_tool_kind.json"
  "model_switch       c_model_switch.json   requests"
  "run_steps          c_run_steps.json"
  "run_steps_hpp      c_run_steps.json"
  "responses_provider responses_reasoning_tool.json   requests"
  "check_evidence     c_check_evidence.json"
)
# mcp_server starts tests/mcp/fastmcp_server.py with $TOOLOOP_TEST_PYTHON.
export TOOLOOP_REPO_ROOT="$root"

use_valgrind=0
if [ "${VALGRIND:-1}" != "0" ]; then
  if ! command -v valgrind >/dev/null 2>&1 && [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
    echo "valgrind is missing: installing it with apt-get"
    (apt-get install -y valgrind >/dev/null 2>&1 || { apt-get update >/dev/null 2>&1 && apt-get install -y valgrind >/dev/null 2>&1; }) || true
  fi
  if command -v valgrind >/dev/null 2>&1; then
    use_valgrind=1
  else
    echo "WARNING: valgrind not available: running without it (leaks unchecked)"
  fi
fi

passed=0
failed=0
for line in "${tests[@]}"; do
  read -r prog scenario extra <<<"$line"
  log="$build/$prog.log"
  vg=()
  if [ "$use_valgrind" = 1 ]; then
    vg=(valgrind --leak-check=full --errors-for-leak-kinds=definite,indirect
        --show-leak-kinds=definite,indirect --error-exitcode=97)
  fi
  cmd=("$build/$prog")
  [ "$use_valgrind" = 1 ] && cmd=("${vg[@]}" --log-file="$build/$prog.valgrind" "${cmd[@]}")
  requests=""
  if [ "$scenario" != "-" ]; then
    mock=(python3 "$mockctl" run)
    if [ "${extra:-}" = requests ]; then
      requests="$build/$prog.requests.json"
      rm -f "$requests"
      mock+=(--requests-out "$requests")
    fi
    cmd=("${mock[@]}" "$scenarios/$scenario" -- "${cmd[@]}")
  fi
  start=$(date +%s%N)
  (cd "$build" && timeout 300 "${cmd[@]}") >"$log" 2>&1
  rc=$?
  if [ "$rc" = 0 ] && [ -n "$requests" ]; then
    check=("$build/$prog" --requests "$requests")
    [ "$use_valgrind" = 1 ] && check=("${vg[@]}" --log-file="$build/$prog.requests.valgrind" "${check[@]}")
    (cd "$build" && timeout 300 "${check[@]}") >>"$log" 2>&1
    rc=$?
  fi
  ms=$(( ($(date +%s%N) - start) / 1000000 ))
  secs="$((ms / 1000)).$((ms % 1000 / 100))"
  summary=""
  if [ "$use_valgrind" = 1 ] && [ -f "$build/$prog.valgrind" ]; then
    def=$(grep -o 'definitely lost: [0-9,]* bytes' "$build/$prog.valgrind" | head -1)
    ind=$(grep -o 'indirectly lost: [0-9,]* bytes' "$build/$prog.valgrind" | head -1)
    pos=$(grep -o 'possibly lost: [0-9,]* bytes' "$build/$prog.valgrind" | head -1)
    errs=$(grep -o 'ERROR SUMMARY: [0-9,]* errors' "$build/$prog.valgrind" | tail -1)
    [ -z "$def" ] && grep -q 'All heap blocks were freed' "$build/$prog.valgrind" && def="all heap blocks freed"
    summary=" [valgrind: ${def:-?}; ${ind:-indirectly lost: 0 bytes}; ${pos:-possibly lost: 0 bytes}; ${errs:-?}]"
  fi
  if [ "$rc" = 0 ]; then
    passed=$((passed + 1))
    echo "PASS $prog (${secs} s)$summary"
  else
    failed=$((failed + 1))
    why="exit code $rc"
    [ "$rc" = 97 ] && why="valgrind found errors or leaks"
    [ "$rc" = 124 ] && why="timed out after 300 s"
    echo "FAIL $prog ($why, ${secs} s)$summary"
    sed 's/^/    | /' "$log" | tail -40
    if [ "$use_valgrind" = 1 ] && [ -f "$build/$prog.valgrind" ] && [ "$rc" = 97 ]; then
      sed 's/^/    valgrind| /' "$build/$prog.valgrind" | tail -60
    fi
  fi
done
echo "$passed passed, $failed failed"
[ "$failed" = 0 ]
