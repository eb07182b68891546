"""The `tooloop` command switching models: `/model [PROVIDER:]NAME` in the REPL (a real pty), and
`--fallback-model` taking over a task when the model is overloaded; both against the mock server (one server
answers both wires from one queue)."""

import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "tests" / "mock"))
from mockctl import MockServer  # noqa: E402
from _support import clean_env, text_reply  # noqa: E402
from _terminal import PROMPT, Term, term_env  # noqa: E402


def openai_text(text: str) -> dict:
    return {"openai": {"id": "c", "object": "chat.completion", "created": 1, "model": "gpt-4o",
                       "choices": [{"index": 0, "message": {"role": "assistant", "content": text},
                                    "finish_reason": "stop"}],
                       "usage": {"prompt_tokens": 10, "completion_tokens": 5, "total_tokens": 15}}}


def test_slash_model_switches_provider_mid_conversation_with_one_dim_line(tooloop_exe, ws, tmp_path):
    with MockServer([text_reply("Answer from Claude."), openai_text("Answer from GPT.")]) as mock:
        with Term(tooloop_exe, [], ws, term_env(tmp_path, mock, NO_COLOR="1")) as term:
            term.expect(PROMPT)
            term.type("first question")
            term.expect("Answer from Claude.")
            term.expect(PROMPT)
            term.type("/model")
            term.expect(r"model claude-sonnet-4-6 \(anthropic\)")
            term.expect(PROMPT)
            term.type("/model nope:gpt")          # not a provider: a model name with a colon, same provider
            term.expect(r"model: nope:gpt \(anthropic\)")
            term.expect(PROMPT)
            term.type("/model openai:gpt-4o")
            term.expect(r"model: gpt-4o \(openai\) from the next message on")
            term.expect(PROMPT)
            term.type("second question")
            term.expect("Answer from GPT.")
            term.expect(PROMPT)
            term.type("/help")
            term.expect("/model")
            term.quit()
        reqs = mock.requests()
    assert [r["path"] for r in reqs] == ["/v1/messages", "/v1/chat/completions"]
    second = reqs[1]["body"]
    assert second["model"] == "gpt-4o"
    dump = json.dumps(second["messages"])
    assert "first question" in dump and "Answer from Claude." in dump and "second question" in dump


def test_fallback_model_answers_an_overloaded_task_and_says_so(tooloop_exe, ws, tmp_path):
    overloaded = {"status": 529, "headers": {"retry-after-ms": "1"},
                  "json": {"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}}}
    with MockServer([overloaded, overloaded, overloaded, openai_text("The fallback answered.")]) as mock:
        # A task given on the command line without -p: the run is shown, the fallback as one dim line.
        p = subprocess.run([tooloop_exe, "--fallback-model", "openai:gpt-4o", "hello"], cwd=ws,
                           env=clean_env(tmp_path, mock), stdin=subprocess.DEVNULL, capture_output=True,
                           text=True, timeout=60)
        print(p.stdout, p.stderr)
        reqs = mock.requests()
    assert p.returncode == 0
    assert "The fallback answered." in p.stdout
    assert "claude-sonnet-4-6 overloaded: gpt-4o (openai) answers for the rest of this task" in p.stdout + p.stderr
    assert reqs[-1]["path"] == "/v1/chat/completions" and reqs[-1]["body"]["model"] == "gpt-4o"


def test_fallback_model_on_a_provider_without_a_key_is_refused_at_the_start(tooloop_exe, ws, tmp_path):
    env = clean_env(tmp_path, None, ANTHROPIC_API_KEY="sk-ant")
    p = subprocess.run([tooloop_exe, "-p", "--fallback-model", "openai:gpt-4o", "hello"], cwd=ws, env=env,
                       stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=60)
    assert p.returncode != 0
    assert "OPENAI_API_KEY" in p.stdout + p.stderr
