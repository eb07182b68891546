#!/usr/bin/env bash
# Runs every test suite of tooloop: Rust (core + C ABI header check), the mock server's self-tests, Python
# (in a fresh virtual environment with the package installed by `pip install .`), and the C/C++ programs
# (under valgrind when it is installed). Exits non-zero if any suite fails.
set -uo pipefail
cd "$(dirname "$0")/.."
root=$(pwd)
venv="${TOOLOOP_TEST_VENV:-$root/.venv-test}"
mcp_venv="${TOOLOOP_MCP_VENV:-$root/.venv-mcp}"
failed=()

step() { printf '\n==== %s ====\n' "$*"; }

step "Rust: cargo fmt --check, cargo clippy -D warnings"
cargo fmt --all -- --check || failed+=("rustfmt (run: cargo fmt --all)")
cargo clippy --workspace --all-targets -- -D warnings || failed+=("clippy")

step "Layers: no import circle in src/ or python/tooloop/"
python3 scripts/module_graph.py >/dev/null || failed+=("import circles (run: python3 scripts/module_graph.py)")

step "Rust: a Python with the official MCP SDK for tests/mcp.rs (venv at $mcp_venv)"
# A small dedicated venv, kept between runs (reused when it already imports mcp), so the Rust suite can run
# real MCP servers without waiting for the package's own venv below. Without it tests/mcp.rs fails under CI.
if [ -z "${TOOLOOP_TEST_PYTHON:-}" ]; then
  if ! "$mcp_venv/bin/python" -c 'import mcp.server.mcpserver, uvicorn' 2>/dev/null; then
    rm -rf "$mcp_venv"
    python3 -m venv "$mcp_venv" && "$mcp_venv/bin/python" -m pip install -q 'mcp>=2.3,<3' \
      || echo "could not install the mcp package: tests/mcp.rs will say so"
  fi
  export TOOLOOP_TEST_PYTHON="$mcp_venv/bin/python"
fi

step "Rust: cargo test"
cargo test --workspace --exclude tooloop-python || failed+=("rust")

step "Python: fresh venv at $venv, pip install ."
rm -rf "$venv"
if python3 -m venv "$venv" \
  && "$venv/bin/python" -m pip install -q --upgrade pip \
  && "$venv/bin/python" -m pip install -q pytest pexpect mypy pydantic uvloop openai \
     opentelemetry-sdk opentelemetry-exporter-otlp-proto-http opentelemetry-proto \
  && "$venv/bin/python" -m pip install -q "$root[ray]"; then
  step "Python: pytest (mock server self-tests + tests/python)"
  # The [ray] extra is installed, so tests/python/test_batch_ray.py must run (not skip) on a real local Ray.
  TOOLOOP_TEST_RAY=1 "$venv/bin/python" -m pytest tests/mock tests/python -q
  rc=$?
  # pytest exits 5 when it collected no test: that is a failure here, not a pass.
  if [ $rc -ne 0 ]; then failed+=("python(pytest exit $rc)"); fi
else
  failed+=("python(install)")
fi

step "C and C++: make -C tests/c test"
make -C tests/c test || failed+=("c")

step "summary"
if [ ${#failed[@]} -eq 0 ]; then
  echo "all suites passed"
  exit 0
fi
echo "FAILED suites: ${failed[*]}"
exit 1
