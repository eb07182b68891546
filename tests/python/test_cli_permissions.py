"""Permission policies of the `tooloop` command: what runs, what is refused and what the model reads.

Unit tests of the policy objects (the same callables the CLI hands to ``tooloop.Agent(permission=)``);
the end-to-end tests in test_cli_e2e.py and test_cli_repl.py check them through the real program.
"""

import os
import threading
import time
from types import SimpleNamespace

import pytest

import tooloop
from tooloop.cli.permissions import (
    AskPolicy,
    AutoPolicy,
    Interrupted,
    Observed,
    ReadOnlyPolicy,
    TerminalReader,
    call_parts,
    choose,
    parse_answer,
)


MUTATING_TOOLS = ("bash", "write_file", "edit_file")


def call(name, **inp):
    return SimpleNamespace(name=name, input=inp, id=f"toolu_{name}")


def bound(policy, **tools):
    """`policy` bound to a real agent with the built-in tools (plus `tools`: name -> read_only), as
    app.build_agent binds the CLI's: which tools are read-only is the agent's answer."""
    agent = tooloop.Agent(provider=lambda r: {"content": "x"}, builtin_tools=True)
    for name, read_only in tools.items():
        agent.add_tool(tooloop.tool(lambda: "", name=name, read_only=read_only))
    policy.bind(agent)
    return policy


class ScriptedAsk:
    """Stands in for the terminal: records what was shown, answers from a list."""

    def __init__(self, *answers):
        self.answers = list(answers)
        self.shown = []

    def show(self, name, inp, ident=""):
        self.shown.append((name, inp))

    def read(self):
        answer = self.answers.pop(0)
        if isinstance(answer, BaseException):
            raise answer
        return answer


def test_auto_policy_allows_every_tool():
    policy = AutoPolicy()
    for name in MUTATING_TOOLS + ("read_file", "some_host_tool"):
        assert policy(call(name)) is True


@pytest.mark.parametrize("name", MUTATING_TOOLS + ("unknown_tool",))
def test_read_only_denies_mutating_tools_with_a_reason_the_model_can_act_on(name):
    decision = bound(ReadOnlyPolicy())(call(name, path="x"))
    assert isinstance(decision, str)
    assert name in decision and "read-only" in decision
    assert "read_file" in decision  # says what still works
    assert "--yes" in decision      # and how the user can lift it


def test_read_only_allows_read_file():
    assert bound(ReadOnlyPolicy())(call("read_file", path="notes.txt")) is True


def test_read_only_asks_the_agent_which_tools_only_read():
    policy = bound(ReadOnlyPolicy(), lookup=True, store=False)
    assert policy(call("lookup", key="a")) is True
    decision = policy(call("store", key="a"))
    assert isinstance(decision, str) and "lookup" in decision and "read_file" in decision


def test_an_unbound_policy_counts_nothing_as_read_only():
    """Before it knows the agent, a policy must not guess: read_file too is refused or asked about."""
    assert isinstance(ReadOnlyPolicy()(call("read_file", path="a")), str)
    ask = ScriptedAsk("n")
    assert isinstance(AskPolicy(ask.show, ask.read)(call("read_file", path="a")), str)
    assert [n for n, _ in ask.shown] == ["read_file"]


def test_ask_never_asks_for_read_file():
    ask = ScriptedAsk()
    assert bound(AskPolicy(ask.show, ask.read))(call("read_file", path="a")) is True
    assert ask.shown == []


@pytest.mark.parametrize("answer", ["y", "Y", "yes", " yes "])
def test_ask_yes_allows_once_and_asks_again_next_time(answer):
    ask = ScriptedAsk(answer, "n")
    policy = AskPolicy(ask.show, ask.read)
    assert policy(call("bash", command="ls")) is True
    assert isinstance(policy(call("bash", command="ls")), str)
    assert [n for n, _ in ask.shown] == ["bash", "bash"]
    assert ask.shown[0][1] == {"command": "ls"}


@pytest.mark.parametrize("answer", ["n", "no", "", "N"])
def test_ask_no_denies_and_tells_the_model_not_to_retry(answer):
    ask = ScriptedAsk(answer)
    decision = AskPolicy(ask.show, ask.read)(call("write_file", path="a", content="x"))
    assert isinstance(decision, str)
    assert "declined" in decision and "write_file" in decision and "retry" in decision


def test_ask_other_text_denies_with_the_users_reason():
    ask = ScriptedAsk("use a temp folder instead")
    decision = AskPolicy(ask.show, ask.read)(call("bash", command="rm -rf build"))
    assert decision == "The user declined this bash call: use a temp folder instead"


def test_ask_always_allows_that_tool_from_then_on_but_not_others():
    ask = ScriptedAsk("a", "n")
    policy = AskPolicy(ask.show, ask.read)
    assert policy(call("edit_file", path="a")) is True
    assert policy(call("edit_file", path="b")) is True  # no question this time
    assert policy(call("edit_file", path="c")) is True
    assert isinstance(policy(call("bash", command="ls")), str)  # "always" was for edit_file only
    assert [n for n, _ in ask.shown] == ["edit_file", "bash"]


def test_ask_closed_input_denies():
    ask = ScriptedAsk(None)
    decision = AskPolicy(ask.show, ask.read)(call("bash", command="ls"))
    assert isinstance(decision, str) and "input closed" in decision


def test_ask_interrupted_question_denies_without_raising():
    ask = ScriptedAsk(Interrupted())
    decision = AskPolicy(ask.show, ask.read)(call("bash", command="ls"))
    assert isinstance(decision, str) and "interrupted" in decision


def test_ask_shows_one_question_at_a_time_for_parallel_calls():
    """Parallel tool calls may consult the policy from several threads: questions must not interleave."""
    active = []
    overlaps = []

    def show(name, inp, ident):
        active.append(name)
        if len(active) > 1:
            overlaps.append(list(active))

    def read():
        time.sleep(0.05)
        active.pop()
        return "y"

    policy = AskPolicy(show, read)
    threads = [threading.Thread(target=policy, args=(call("bash", command=str(i)),)) for i in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(5)
    assert overlaps == []


def test_observed_policy_reports_every_call_and_keeps_the_decision():
    seen = []
    denials = []
    policy = Observed(ReadOnlyPolicy(), lambda *a: seen.append(a), denied=lambda *a: denials.append(a))
    bound(policy)  # passed on to the wrapped policy
    assert policy.mode == "read-only"
    assert policy(call("read_file", path="a")) is True
    assert isinstance(policy(call("bash", command="ls")), str)
    assert seen == [("toolu_read_file", "read_file", {"path": "a"}), ("toolu_bash", "bash", {"command": "ls"})]
    assert [ident for ident, _ in denials] == ["toolu_bash"] and "read-only" in denials[0][1]


def test_call_parts_accepts_objects_dicts_and_json_input():
    assert call_parts(call("bash", command="ls")) == ("bash", {"command": "ls"}, "toolu_bash")
    assert call_parts({"name": "x", "input": '{"a": 1}', "id": "t1"}) == ("x", {"a": 1}, "t1")


def test_parse_answer():
    assert parse_answer("y") == ("allow", "")
    assert parse_answer("always") == ("always", "")
    assert parse_answer("no") == ("deny", "")
    assert parse_answer(None) == ("deny", "")
    assert parse_answer("not in prod") == ("deny", "not in prod")


def test_default_policy_is_ask_on_a_tty_and_read_only_otherwise():
    assert choose(None, stdin_is_tty=True) == "ask"
    assert choose(None, stdin_is_tty=False) == "read-only"
    assert choose("auto", stdin_is_tty=False) == "auto"
    assert choose("read-only", stdin_is_tty=True) == "read-only"


def test_terminal_reader_returns_the_typed_line():
    r, w = os.pipe()
    try:
        os.write(w, "yes please\nleftover".encode())
        assert TerminalReader(r)() == "yes please"
    finally:
        os.close(r)
        os.close(w)


def test_terminal_reader_gives_none_at_end_of_input():
    r, w = os.pipe()
    os.close(w)
    try:
        assert TerminalReader(r)() is None
    finally:
        os.close(r)


def test_terminal_reader_gives_up_when_the_run_is_cancelled():
    """A question waiting for Enter must not hold the agent's worker thread after Ctrl+C."""
    r, w = os.pipe()
    abort = threading.Event()
    try:
        threading.Timer(0.1, abort.set).start()
        start = time.monotonic()
        with pytest.raises(Interrupted):
            TerminalReader(r, abort)()
        elapsed = time.monotonic() - start
        print(f"reader gave up {elapsed * 1000:.0f} ms after start (abort at 100 ms)")
        assert elapsed < 2.0
    finally:
        os.close(r)
        os.close(w)
