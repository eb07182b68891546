"""The `tooloop` command on OpenAI's Responses API: `--provider openai-responses` against the mock, and the
Responses wire picked by itself for OpenAI's reasoning models on OpenAI's own endpoint (said in one line)."""

from pathlib import Path
from typing import Any

from tooloop.cli.args import parse_args
from tooloop.cli.config import resolve

from _support import MockServer, clean_env, run_cli, scenario


def test_provider_openai_responses_runs_a_task_on_the_responses_wire(tooloop_exe: str, tmp_path: Path) -> None:
    ws = tmp_path / "ws"
    ws.mkdir()
    with MockServer(scenario("responses_text")) as mock:
        proc = run_cli(tooloop_exe, ws, clean_env(tmp_path, mock), "-p", "--provider", "openai-responses",
                       "--model", "gpt-5", "say hello")
        reqs = mock.requests()
    assert proc.returncode == 0, proc.stderr
    assert "Bonjour — ça va? 👋 The answer is 42." in proc.stdout
    assert reqs[0]["path"] == "/v1/responses"
    body = reqs[0]["body"]
    assert body["model"] == "gpt-5" and body["store"] is False and body["instructions"]
    assert reqs[0]["headers"]["authorization"] == "Bearer sk-mock"
    assert "Responses API" not in proc.stderr, "asked for by name: nothing to say"


def settings(tmp_path: Path, *argv: str, **environ: Any) -> Any:
    return resolve(parse_args([*argv, "--workspace", str(tmp_path)]), environ)


def test_openai_reasoning_models_on_openais_endpoint_take_the_responses_wire(tmp_path: Path) -> None:
    s = settings(tmp_path, "--provider", "openai", "--model", "o3", OPENAI_API_KEY="k")
    assert s.provider == "openai-responses"
    assert "Responses API" in s.wire_note and "o3" in s.wire_note
    s = settings(tmp_path, "--provider", "openai", "--model", "gpt-5-mini", OPENAI_API_KEY="k")
    assert s.provider == "openai-responses"
    # Other models, and any custom endpoint (a local server, a proxy), keep Chat Completions.
    s = settings(tmp_path, "--provider", "openai", "--model", "gpt-4.1", OPENAI_API_KEY="k")
    assert (s.provider, s.wire_note) == ("openai", "")
    s = settings(tmp_path, "--provider", "openai", "--model", "o3", OPENAI_API_KEY="k",
                 OPENAI_BASE_URL="http://127.0.0.1:9/v1")
    assert (s.provider, s.wire_note) == ("openai", "")
    s = settings(tmp_path, "--provider", "openai", "--model", "o3", "--base-url", "http://127.0.0.1:9/v1",
                 OPENAI_API_KEY="k")
    assert s.provider == "openai"


def test_the_provider_choices_come_from_the_library_table() -> None:
    import tooloop

    names = [p["name"] for p in tooloop.PROVIDERS]
    assert names == ["anthropic", "openai", "openai-responses", "bedrock"]
    for name in names:
        assert parse_args(["--provider", name]).provider == name
    row = next(p for p in tooloop.PROVIDERS if p["name"] == "openai-responses")
    assert (row["key_var"], row["base_url_var"]) == ("OPENAI_API_KEY", "OPENAI_BASE_URL")
