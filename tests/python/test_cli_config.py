"""The `tooloop` command's arguments, settings (flags > environment > workspace .env > defaults),
session paths and system prompt."""

import datetime as dt
import os
import time
from pathlib import Path

import pytest

from tooloop.cli import paths
from tooloop.cli.args import parse_args
from tooloop.cli.config import (
    DEFAULT_ANTHROPIC_MODEL,
    ConfigProblem,
    merged_env,
    parse_dotenv,
    resolve,
)
from tooloop.cli.prompt import system_prompt


# -- arguments ------------------------------------------------------------------------------------

def test_task_words_are_joined_and_flags_may_come_after_them():
    a = parse_args(["fix", "the", "bug", "--yes", "--model", "m1"])
    assert a.task == "fix the bug" and a.yes and a.model == "m1"
    assert parse_args([]).task is None


def test_every_documented_flag_parses():
    a = parse_args(["-p", "--model", "m", "--provider", "OpenAI", "--base-url", "http://x/v1",
                    "--max-turns", "7", "--thinking", "2048", "--workspace", "/tmp", "--resume", "abc",
                    "--read-only", "--no-color", "task"])
    assert (a.print_mode, a.model, a.provider, a.base_url, a.max_turns, a.thinking, a.workspace,
            a.resume, a.read_only, a.no_color) == (True, "m", "openai", "http://x/v1", 7, 2048, "/tmp",
                                                    "abc", True, True)
    assert parse_args(["--continue"]).continue_ is True


@pytest.mark.parametrize("argv", [["--yes", "--read-only"], ["--continue", "--resume", "x"],
                                  ["--max-turns", "0"], ["--thinking", "100"], ["--provider", "gemini"],
                                  ["--sandbox", "loose"]])
def test_contradictory_or_invalid_flags_exit_2(argv, capsys):
    with pytest.raises(SystemExit) as e:
        parse_args(argv)
    assert e.value.code == 2
    assert "Traceback" not in capsys.readouterr().err


# -- settings -------------------------------------------------------------------------------------

def settings(tmp_path, argv, environ):
    return resolve(parse_args(argv + ["--workspace", str(tmp_path)]), environ)


def test_dotenv_parsing():
    text = """
# comment
export ANTHROPIC_API_KEY=sk-ant-1
TOOLOOP_MODEL = "claude-x" 
SINGLE='a # not a comment'
INLINE=value # a comment
ESC="line1\\nline2"
not a line
"""
    assert parse_dotenv(text) == {"ANTHROPIC_API_KEY": "sk-ant-1", "TOOLOOP_MODEL": "claude-x",
                                  "SINGLE": "a # not a comment", "INLINE": "value", "ESC": "line1\nline2"}


def test_environment_wins_over_dotenv(tmp_path):
    (tmp_path / ".env").write_text("ANTHROPIC_API_KEY=from-file\nTOOLOOP_MODEL=file-model\n")
    env = merged_env(tmp_path, {"TOOLOOP_MODEL": "env-model", "EMPTY": ""})
    assert env["ANTHROPIC_API_KEY"] == "from-file"
    assert env["TOOLOOP_MODEL"] == "env-model"


def test_key_and_defaults_come_from_the_workspace_dotenv(tmp_path):
    (tmp_path / ".env").write_text("ANTHROPIC_API_KEY=sk-file\nTOOLOOP_MAX_TURNS=9\nANTHROPIC_BASE_URL=http://h:1\n")
    s = settings(tmp_path, [], {})
    assert (s.api_key, s.max_turns, s.base_url, s.model, s.provider) == (
        "sk-file", 9, "http://h:1", DEFAULT_ANTHROPIC_MODEL, "anthropic")
    assert s.workspace == tmp_path.resolve()


def test_a_dotenv_base_url_is_honoured_only_with_a_key_from_the_same_file(tmp_path):
    (tmp_path / ".env").write_text("ANTHROPIC_BASE_URL=http://evil.example\nOPENAI_BASE_URL=http://evil.example/v1\n")
    for argv, environ, var in (([], {"ANTHROPIC_API_KEY": "sk-user"}, "ANTHROPIC_BASE_URL"),
                               (["--provider", "openai", "--model", "m"], {"OPENAI_API_KEY": "sk-u"},
                                "OPENAI_BASE_URL")):
        with pytest.raises(ConfigProblem) as e:
            settings(tmp_path, argv, environ)
        msg = str(e.value)
        assert str(tmp_path / ".env") in msg and var in msg and "\n" not in msg and "sk-u" not in msg
    # Trusted: a flag, the user's environment, or a key from the same file.
    assert settings(tmp_path, ["--base-url", "http://mine"], {"ANTHROPIC_API_KEY": "k"}).base_url == "http://mine"
    s = settings(tmp_path, [], {"ANTHROPIC_API_KEY": "k", "ANTHROPIC_BASE_URL": "http://env"})
    assert s.base_url == "http://env"
    (tmp_path / ".env").write_text("ANTHROPIC_BASE_URL=http://proxy\nANTHROPIC_API_KEY=sk-file\n")
    s = settings(tmp_path, [], {})
    assert (s.base_url, s.api_key) == ("http://proxy", "sk-file")
    # The environment's key wins over the file's, so the file's URL would get the user's key: refused.
    with pytest.raises(ConfigProblem):
        settings(tmp_path, [], {"ANTHROPIC_API_KEY": "sk-user"})
    # No key anywhere: still refused (a key exported later would go to the file's URL without a word).
    (tmp_path / ".env").write_text("OPENAI_BASE_URL=http://localhost:11434/v1\n")
    with pytest.raises(ConfigProblem) as e:
        settings(tmp_path, ["--provider", "openai", "--model", "m"], {})
    assert "OPENAI_BASE_URL" in str(e.value) and "OPENAI_API_KEY" in str(e.value)


def test_flags_win_over_environment(tmp_path):
    env = {"ANTHROPIC_API_KEY": "k", "TOOLOOP_MODEL": "env-model", "TOOLOOP_MAX_TURNS": "3"}
    s = settings(tmp_path, ["--model", "flag-model", "--max-turns", "4"], env)
    assert (s.model, s.max_turns) == ("flag-model", 4)
    assert settings(tmp_path, [], env).model == "env-model"


def test_no_key_is_a_config_problem_that_says_how_to_fix_it(tmp_path):
    with pytest.raises(ConfigProblem) as e:
        settings(tmp_path, [], {})
    msg = str(e.value)
    assert "ANTHROPIC_API_KEY" in msg and "--base-url" in msg and "\n" not in msg
    with pytest.raises(ConfigProblem) as e:
        settings(tmp_path, ["--provider", "openai", "--model", "gpt-4.1"], {"ANTHROPIC_API_KEY": "k"})
    assert "OPENAI_API_KEY" in str(e.value)


def test_a_local_base_url_needs_no_key(tmp_path):
    s = settings(tmp_path, ["--provider", "openai", "--base-url", "http://localhost:11434/v1",
                            "--model", "qwen"], {})
    assert (s.api_key, s.base_url) == (None, "http://localhost:11434/v1")


def test_openai_requires_a_model(tmp_path):
    with pytest.raises(ConfigProblem) as e:
        settings(tmp_path, ["--provider", "openai"], {"OPENAI_API_KEY": "k"})
    assert "--model" in str(e.value)
    s = settings(tmp_path, ["--provider", "openai"], {"OPENAI_API_KEY": "k", "TOOLOOP_MODEL": "gpt-4.1"})
    assert s.model == "gpt-4.1" and s.api_key == "k"


def test_thinking_budget_raises_max_tokens_above_it(tmp_path):
    s = settings(tmp_path, ["--thinking", "16000"], {"ANTHROPIC_API_KEY": "k"})
    assert s.thinking == 16000 and s.max_tokens > 16000
    assert settings(tmp_path, ["--thinking", "0"], {"ANTHROPIC_API_KEY": "k"}).thinking is None


def test_missing_workspace_is_a_config_problem(tmp_path):
    with pytest.raises(ConfigProblem):
        resolve(parse_args(["--workspace", str(tmp_path / "nope")]), {"ANTHROPIC_API_KEY": "k"})


# -- session paths --------------------------------------------------------------------------------

def test_data_dir_honours_tooloop_home_then_xdg_then_home():
    assert paths.data_dir({"TOOLOOP_HOME": "/t/h", "XDG_DATA_HOME": "/x"}) == Path("/t/h")
    assert paths.data_dir({"XDG_DATA_HOME": "/x"}) == Path("/x/tooloop")
    assert paths.data_dir({}) == Path.home() / ".local/share/tooloop"


def test_workspace_key_is_readable_and_unique(tmp_path):
    a, b = tmp_path / "one" / "app", tmp_path / "two" / "app"
    a.mkdir(parents=True), b.mkdir(parents=True)
    ka, kb = paths.workspace_key(a), paths.workspace_key(b)
    assert ka != kb and "app" in ka and "/" not in ka
    assert paths.workspace_key(a) == ka  # stable


def test_session_ids_sort_by_time():
    early = paths.new_session_id(dt.datetime(2024, 1, 2, 3, 4, 5))
    late = paths.new_session_id(dt.datetime(2024, 1, 2, 3, 4, 6))
    assert early.startswith("20240102-030405-") and early < late


def _session(folder: Path, name: str, entries: int) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    p = folder / f"{name}.jsonl"
    lines = ['{"type":"session","version":1,"created_at":1}']
    lines += ['{"type":"entry","entry":{"id":"e%d"}}' % i for i in range(entries)]
    p.write_text("\n".join(lines) + "\n")
    return p


def test_latest_session_is_the_most_recently_used_one_with_entries(tmp_path):
    env = {"TOOLOOP_HOME": str(tmp_path / "home")}
    ws = tmp_path
    folder = paths.sessions_dir(ws, env)
    old = _session(folder, "20240101-000000-aaaa", 2)
    new = _session(folder, "20240102-000000-bbbb", 1)
    _session(folder, "20240103-000000-cccc", 0)  # opened and closed without a message: not a candidate
    os.utime(old, (time.time() - 100, time.time() - 100))
    assert paths.latest_session(ws, env) == new
    os.utime(old, None)  # resumed and written to: now the latest
    os.utime(new, (time.time() - 50, time.time() - 50))
    assert paths.latest_session(ws, env) == old
    assert paths.latest_session(tmp_path / "elsewhere", env) is None


def test_find_session_by_id_prefix_path_and_other_workspace(tmp_path):
    env = {"TOOLOOP_HOME": str(tmp_path / "home")}
    mine = _session(paths.sessions_dir(tmp_path / "ws", env), "20240101-000000-aaaa", 1)
    other = _session(paths.sessions_dir(tmp_path / "other", env), "20240105-000000-dddd", 1)
    assert paths.find_session("20240101-000000-aaaa", tmp_path / "ws", env) == mine
    assert paths.find_session("20240101", tmp_path / "ws", env) == mine
    assert paths.find_session(str(mine), tmp_path / "zzz", env) == mine
    assert paths.find_session("20240105-000000-dddd", tmp_path / "ws", env) == other
    with pytest.raises(paths.SessionNotFound):
        paths.find_session("nope", tmp_path / "ws", env)
    _session(paths.sessions_dir(tmp_path / "ws", env), "20240101-000000-abcd", 1)
    with pytest.raises(paths.SessionNotFound, match="ambiguous"):
        paths.find_session("20240101", tmp_path / "ws", env)


def test_remove_if_empty_keeps_sessions_with_entries(tmp_path):
    empty = _session(tmp_path, "e", 0)
    full = _session(tmp_path, "f", 1)
    assert paths.remove_if_empty(empty) and not empty.exists()
    assert not paths.remove_if_empty(full) and full.exists()


# -- system prompt --------------------------------------------------------------------------------

def test_system_prompt_has_workspace_os_date_and_rules(tmp_path):
    p = system_prompt(tmp_path, "ask", today=dt.date(2025, 3, 4), os_name="Linux 6.1, x86_64")
    assert str(tmp_path) in p and "2025-03-04" in p and "Linux 6.1" in p
    for rule in ("Act through your tools", "Never invent paths", "small, focused changes",
                 "what you changed"):
        assert rule in p, rule
    assert "read-only" not in p


def test_system_prompt_tells_a_read_only_agent_what_it_cannot_do(tmp_path):
    p = system_prompt(tmp_path, "read-only")
    assert "read-only" in p and "bash, write_file and edit_file will be refused" in p


# mypy --strict over the CLI runs with the whole package: test_typing_and_examples.py.
