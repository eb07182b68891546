"""Long sessions in the `tooloop` CLI, against the mock server's context simulation (token estimates, usage
rewritten with them) and its routes (the compaction summary request is answered by a route, not the queue):
/compact in a real pty REPL, the one dim line when a run compacts by itself, `-p` staying silent about it,
and the context share in the status lines.
The small windows here run with --no-draft: these scripts answer every request in words, and a draft (the
first request without tools) that gives no file is asked once more (tests/python/test_text_edits.py).
"""

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

from _support import cli_env
from _terminal import PROMPT, SGR, Term, expect_answering_cpr, term_env

ROOT = Path(__file__).resolve().parents[2]
SCENARIOS = ROOT / "tests" / "scenarios"
sys.path.insert(0, str(ROOT / "tests" / "mock"))
from mockctl import MockServer  # noqa: E402

SUMMARY_MARK = "SUMMARY-MARK"


def is_summary_request(req):
    return "You write the working memory" in (req.get("raw_body") or "")


def model_requests(reqs):
    """The conversation's own requests (not the summary ones)."""
    return [r for r in reqs if r["path"] == "/v1/messages" and not is_summary_request(r)]


def test_compact_command_in_the_repl_shrinks_the_next_request(tooloop_exe, ws, tmp_path):
    with MockServer(SCENARIOS / "cli_compact_manual.json") as mock:
        # --no-compaction: only /compact may compact (the small window would cross the threshold otherwise).
        with Term(tooloop_exe, ["--context-window", "4500", "--no-compaction", "--no-draft"], ws,
                    term_env(tmp_path, mock, NO_COLOR="1")) as term:
            term.expect(PROMPT)
            term.type("/compact")
            term.expect("nothing to compact")
            term.expect(PROMPT)
            for i in range(3):
                term.type(f"explain part {i}")
                term.expect(f"Point {i}.29")
                term.expect("cache read")    # the task's status line
                term.expect(PROMPT)
            term.type("/compact keep the part numbers")
            term.expect(r"compacted: ~[\d.]+k? → ~[\d.]+k? tokens \(summary\)")
            term.expect(PROMPT)
            term.type("/usage")
            term.expect(r"compactions\s+1")
            term.expect(PROMPT)
            term.type("and now?")
            term.expect("SHORT-ANSWER-AFTER")
            term.quit()
        reqs = mock.requests()
    out = term.text
    print("\n".join(f"{r.get('index')} route={r.get('route')} tokens={r.get('tokens')} "
                    f"messages={len(r['body']['messages'])}" for r in reqs))
    m = re.search(r"compacted: ~([\d.]+k?) → ~([\d.]+k?) tokens", out)
    assert m is not None

    def tokens(s):
        return float(s[:-1]) * 1000 if s.endswith("k") else float(s)

    assert tokens(m.group(2)) < tokens(m.group(1)), m.group(0)
    summaries = [r for r in reqs if is_summary_request(r)]
    assert len(summaries) == 1, "exactly one summary request: the one /compact made"
    assert "keep the part numbers" in summaries[0]["raw_body"], "the instructions reach the summary request"
    convo = model_requests(reqs)
    assert len(convo) == 4
    before, after = convo[2], convo[3]
    # Without compaction the 4th request would carry 7 messages; the summary stands in for older turns.
    assert len(after["body"]["messages"]) < len(before["body"]["messages"]) + 2
    assert len(after["body"]["messages"]) < 7
    sent_before, sent_after = json.dumps(before["body"]["messages"]), json.dumps(after["body"]["messages"])
    assert SUMMARY_MARK in sent_after and SUMMARY_MARK not in sent_before
    assert "Point 0.29" in sent_before and "Point 0.29" not in sent_after, "the oldest answer was summarized"
    assert "explain part 0" in sent_after, "the first user message stays"
    assert "context compacted" not in out, "--no-compaction: no compaction during the runs"


def test_auto_compaction_shows_one_dim_line_in_the_repl(tooloop_exe, ws, tmp_path):
    with MockServer(SCENARIOS / "cli_compact_auto.json") as mock:
        with Term(tooloop_exe, ["--context-window", "1700", "--no-draft"], ws, term_env(tmp_path, mock)) as term:
            term.expect(PROMPT)
            for i in range(2):
                term.type(f"explain part {i}")
                term.expect(f"Point {i}.29")
                term.expect("cache read")
                term.expect(PROMPT)
            term.type("explain part 2")
            term.expect(r"· context compacted \(summary\): ~[\d.]+k? → ~[\d.]+k? tokens")
            term.expect("AUTO-DONE")
            term.expect(r"cache read[^\r\n]*ctx \d+%")    # the task's status line, with the context share
            term.expect(PROMPT)
            term.type("/usage")
            term.expect(r"compactions\s+1")
            term.quit()
        reqs = mock.requests()
    raw, out = term.log.getvalue(), term.text
    assert out.count("context compacted") == 1, out
    # Dim (SGR 2), as the other quiet lines.
    line_at = raw.index("context compacted")
    assert "\x1b[2m" in raw[max(0, line_at - 40):line_at], repr(raw[max(0, line_at - 40):line_at + 10])
    assert [r["route"] for r in reqs if is_summary_request(r)] == [0]
    last = model_requests(reqs)[-1]
    assert SUMMARY_MARK in json.dumps(last["body"]["messages"])
    assert "Point 0.29" not in json.dumps(last["body"]["messages"])
    # The compaction line comes before the answer of that run, not after it.
    assert out.index("context compacted") < out.index("AUTO-DONE")


def test_print_mode_prints_only_the_answer_while_compaction_happens(tooloop_exe, ws, tmp_path):
    with MockServer(SCENARIOS / "cli_compact_auto.json") as mock:
        env = cli_env(tmp_path, mock, NO_COLOR="1")
        runs = []
        for i, extra in enumerate([[], ["--continue"], ["--continue", "--compaction-model", "claude-haiku-4-5"]]):
            runs.append(subprocess.run([tooloop_exe, "-p", "--context-window", "1700", "--no-draft", *extra, f"explain part {i}"],
                                       cwd=ws, env=env, stdin=subprocess.DEVNULL, capture_output=True,
                                       text=True, timeout=60))
        reqs = mock.requests()
    for p in runs:
        print("exit", p.returncode, "\n--- stdout\n" + p.stdout + "--- stderr\n" + p.stderr)
        assert p.returncode == 0
    summaries = [r for r in reqs if is_summary_request(r)]
    assert [r["route"] for r in summaries] == [0], "the third run compacted"
    assert summaries[0]["body"]["model"] == "claude-haiku-4-5", "--compaction-model writes the summary"
    assert all(r["body"]["model"] == "claude-sonnet-4-6" for r in model_requests(reqs))
    # The older turns left the view (summarized, or dropped when the summary did not bring the request
    # under the threshold: the core's choice, not the CLI's).
    last = json.dumps(model_requests(reqs)[-1]["body"]["messages"])
    assert "Point 0.29" not in last and "explain part 2" in last
    assert runs[2].stdout == "Answer after the compaction: AUTO-DONE.\n", "only the answer on stdout"
    assert "compact" not in runs[2].stderr.lower()
    assert runs[0].stdout.startswith("Answer 0: ") and "Point 0.29" in runs[0].stdout


def test_status_bar_shows_the_context_share_of_the_window(tooloop_exe, ws, tmp_path):
    with MockServer(SCENARIOS / "cli_compact_manual.json") as mock:
        env = term_env(tmp_path, mock)
        del env["PROMPT_TOOLKIT_NO_CPR"]   # the bar is drawn only once prompt_toolkit knows the cursor
        with Term(tooloop_exe, ["--context-window", "1800", "--no-compaction", "--no-draft"], ws, env) as term:
            expect_answering_cpr(term, r"ctx 0% of 1\.8k")     # nothing sent yet
            term.type("explain part 0")
            term.expect("Point 0.29")
            # A window this small gets the compact prompt and the small tool set: the mock counted the request
            # at ~0.4k tokens, about 20% of 1.8k (input and cache reads together).
            expect_answering_cpr(term, r"ctx [12]\d% of 1\.8k")
            term.type("explain part 1")
            term.expect("Point 1.29")
            expect_answering_cpr(term, r"ctx 5\d% of 1\.8k")
            term.type("explain part 2")
            term.expect("Point 2.29")
            expect_answering_cpr(term, r"ctx 8\d% of 1\.8k")
            term.type("/compact")
            term.expect("compacted: ")
            # After /compact no model turn has said the size yet: the core's estimate, smaller than before.
            expect_answering_cpr(term, r"ctx [1-7]\d% of 1\.8k")
            term.type("/q")
            assert term.finish() == 0
    text = SGR.sub("", term.log.getvalue())
    assert re.search(r"claude-sonnet-4-6 · anthropic · ctx 8\d% of 1\.8k · ", text), text[-2000:]


def test_settings_from_the_environment_turn_compaction_off(tooloop_exe, ws, tmp_path):
    """TOOLOOP_CONTEXT_WINDOW and TOOLOOP_COMPACTION=off (here from the workspace's .env) reach the agent:
    the same three runs as above cross no threshold and send no summary request."""
    (ws / ".env").write_text("TOOLOOP_CONTEXT_WINDOW=3200\nTOOLOOP_COMPACTION=off\n")
    with MockServer(SCENARIOS / "cli_compact_auto.json") as mock:
        env = cli_env(tmp_path, mock, NO_COLOR="1")
        for i, extra in enumerate([[], ["--continue"], ["--continue"]]):
            p = subprocess.run([tooloop_exe, "-p", "--no-draft", *extra, f"explain part {i}"], cwd=ws, env=env,
                               stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=60)
            assert p.returncode == 0, p.stderr
        reqs = mock.requests()
    assert not [r for r in reqs if is_summary_request(r)]
    assert "Point 0.29" in json.dumps(model_requests(reqs)[-1]["body"]["messages"])
    # The window did reach the CLI: under 16k tokens it picks the compact system prompt and fits max_tokens.
    assert reqs[0]["body"]["max_tokens"] < 3200


def test_bad_compaction_setting_is_a_usage_error(tooloop_exe, ws, tmp_path):
    with MockServer({"responses": []}) as mock:
        env = {**cli_env(tmp_path, mock, NO_COLOR="1"), "TOOLOOP_COMPACTION": "sometimes"}
        p = subprocess.run([tooloop_exe, "-p", "hi"], cwd=ws, env=env, stdin=subprocess.DEVNULL,
                           capture_output=True, text=True, timeout=60)
        assert mock.requests() == []
    assert p.returncode == 2 and "TOOLOOP_COMPACTION must be auto or off" in p.stderr


def test_context_labels():
    from tooloop.cli.context import auto_line, compacted_line, ctx_label

    assert ctx_label(68_000, 200_000) == "ctx 34%"
    assert ctx_label(68_000, 200_000, with_window=True) == "ctx 34% of 200k"
    assert ctx_label(12_345, None) == "ctx ~12.3k"     # a local model whose window nobody knows
    assert ctx_label(None, None) == "ctx ?"
    rec = {"method": "summary", "tokens_before": 48_200, "tokens_after": 9_100}
    assert compacted_line(rec) == "compacted: ~48.2k → ~9.1k tokens (summary)"
    assert auto_line({**rec, "tokens_before": 160_000, "tokens_after": 41_000}) == \
        "context compacted (summary): ~160k → ~41k tokens"
