//! How a run ends, held to something outside the model's word (issue 41 items 1–3), against the mock server
//! speaking the Messages API with the built-in tools in a scratch workspace: the `check` command (its
//! failure reaches the model, the run ends only when it passes, `check_failed` when turns run out, its files
//! cannot be changed), the record on every result (`files_changed`, `commands_run`), claims held to it, and
//! a run a guard stops still answering.
#![allow(clippy::unwrap_used, clippy::expect_used)]

#[path = "common/mock.rs"]
mod mock;
#[path = "common/tempdir.rs"]
mod tempdir;

use mock::{MockServer, scripted};
use serde_json::{Value, json};
use std::sync::{Arc, Mutex};
use tempdir::TempDir as Ws;

use tooloop::{AgentOptions, CheckResult, Error, Hooks, RunResult, StopReason};

const TEST: &str = "import x\nassert x.add(2, 3) == 5, 'add(2, 3) is wrong: ' + repr(x.add(2, 3))\nprint('ok')\n";
const WRONG: &str = "def add(a, b):\n    return a - b\n";
const RIGHT: &str = "def add(a, b):\n    return a + b\n";

fn workspace(name: &str) -> Ws {
    let ws = Ws::new(name);
    std::fs::write(ws.file("test_x.py"), TEST).unwrap();
    std::fs::write(ws.file("x.py"), WRONG).unwrap();
    ws
}

fn run(mock: &MockServer, ws: &Ws, extra: Value) -> tooloop::Result<RunResult> {
    run_with(mock, ws, extra, Hooks::default())
}

fn run_with(mock: &MockServer, ws: &Ws, extra: Value, hooks: Hooks) -> tooloop::Result<RunResult> {
    let mut options = json!({"model": "claude-sonnet-4-6", "api_key": "sk-ant-mock", "base_url": mock.base_url(),
        "builtin_tools": true, "workspace": ws.0, "sandbox": "off", "max_turns": 8, "stream": false});
    for (k, v) in extra.as_object().unwrap() {
        options[k] = v.clone();
    }
    let agent = AgentOptions::from_value(options).unwrap().build().unwrap();
    agent.set_hooks(hooks);
    let result = agent.run("make the test pass", &mut |_| {});
    assert!(agent.tools().run_protected().get().is_empty(), "the check's files are writable again after the run");
    result
}

/// The text of the last message of request `i`'s body (its last text block).
fn last_text(mock: &MockServer, i: usize) -> String {
    let reqs = mock.requests();
    let last = reqs[i]["body"]["messages"].as_array().unwrap().last().unwrap().clone();
    match &last["content"] {
        Value::String(s) => s.clone(),
        Value::Array(blocks) => blocks.iter().filter_map(|b| b["text"].as_str()).collect::<Vec<_>>().join("\n"),
        _ => String::new(),
    }
}

fn write(path: &str, content: &str) -> Value {
    json!({"name": "write_file", "input": {"path": path, "content": content}})
}

fn bash(command: &str) -> Value {
    json!({"name": "bash", "input": {"command": command}})
}

#[test]
fn a_failing_check_reaches_the_model_with_its_failing_lines_and_the_run_ends_only_when_it_passes() {
    let ws = workspace("check-pass");
    let steps = [json!("Done."), write("x.py", RIGHT), json!("Fixed.")];
    let mock = MockServer::start(&scripted("check", &steps));
    let result = run(&mock, &ws, json!({"check": "python3 test_x.py"})).unwrap();

    let told = last_text(&mock, 1);
    assert!(told.contains("The check `python3 test_x.py` failed (exit 1)"), "{told}");
    assert!(told.contains("add(2, 3) is wrong: -1"), "the failing lines reach the model: {told}");
    let check = result.check.unwrap();
    assert!(check.passed && check.exit_code == Some(0) && check.runs == 2, "{check:?}");
    assert_eq!(check.line(), "check passed");
    assert_eq!(result.stop_reason, Some(StopReason::EndTurn));
    assert_eq!(result.text, "Fixed.");
    assert_eq!(result.turns, 3);
}

#[test]
fn turns_running_out_with_the_check_still_failing_end_with_check_failed() {
    let ws = workspace("check-cap");
    let steps = [write("x.py", "def add(a, b):\n    return a * b\n"), write("x.py", WRONG), json!("unused")];
    let mock = MockServer::start(&scripted("check at the cap", &steps));
    let result = run(&mock, &ws, json!({"check": "python3 test_x.py", "max_turns": 2})).unwrap();

    assert_eq!(result.stop_reason, Some(StopReason::CheckFailed));
    assert!(result.max_turns_reached);
    let check = result.check.unwrap();
    assert!(!check.passed && check.exit_code == Some(1) && check.runs == 1, "{check:?}");
    assert!(check.output_tail.contains("add(2, 3) is wrong"), "{}", check.output_tail);
    assert_eq!(check.line(), "check failed: `python3 test_x.py` exited 1");
}

#[test]
fn answering_again_with_nothing_changed_since_the_check_failed_ends_with_check_failed() {
    let ws = workspace("check-giveup");
    let mock = MockServer::start(&scripted("give up", &[json!("Done."), json!("Still done.")]));
    let result = run(&mock, &ws, json!({"check": "python3 test_x.py"})).unwrap();
    assert_eq!(result.stop_reason, Some(StopReason::CheckFailed));
    assert_eq!((result.turns, result.check.unwrap().runs), (2, 1));
}

#[test]
fn the_checks_file_is_refused_to_write_file_and_read_only_to_bash() {
    let ws = workspace("check-guarded");
    let steps = [
        write("test_x.py", "print('ok')\n"),
        write("./sub/../test_x.py", "print('ok')\n"),
        bash("echo \"print('ok')\" > test_x.py; echo status=$?"),
        write("x.py", RIGHT),
        json!("Fixed."),
    ];
    let mock = MockServer::start(&scripted("game the check", &steps));
    let result =
        run(&mock, &ws, json!({"check": "python3 test_x.py", "sandbox": "workspace-write", "network": false})).unwrap();

    for call in &result.tool_calls[..2] {
        let out = call.output.as_str().unwrap();
        assert!(call.is_error && out.contains("test_x.py is read-only in this run"), "{out}");
    }
    let out = result.tool_calls[2].output.as_str().unwrap();
    assert!(out.contains("Read-only file system") && out.contains("status=1"), "bash sees it read-only: {out}");
    assert_eq!(std::fs::read_to_string(ws.file("test_x.py")).unwrap(), TEST, "the check's file is unchanged");
    assert!(result.check.unwrap().passed);
    assert_eq!(result.files_changed, vec!["x.py"]);
}

#[test]
fn every_result_carries_the_files_changed_and_the_commands_run() {
    let ws = workspace("evidence");
    std::fs::write(ws.file("check.sh"), "date > check.log; mkdir -p __pycache__; echo > __pycache__/c.pyc\n").unwrap();
    let steps = [write("a.txt", "a\n"), bash("echo b > b.txt"), bash("exit 3"), json!("Done.")];
    let mock = MockServer::start(&scripted("evidence", &steps));
    let result = run(&mock, &ws, json!({"check": "sh check.sh"})).unwrap();
    assert!(result.check.as_ref().unwrap().passed);
    // What the check writes, and caches, are not the run's changes.

    assert_eq!(result.files_changed, vec!["a.txt", "b.txt"]);
    let commands: Vec<(&str, Option<i32>)> =
        result.commands_run.iter().map(|c| (c.command.as_str(), c.exit_code)).collect();
    assert_eq!(commands, vec![("echo b > b.txt", Some(0)), ("exit 3", Some(3))]);
    assert_eq!(result.unverified, None);
    let json = serde_json::to_value(&result).unwrap();
    assert_eq!(json["commands_run"][1], json!({"command": "exit 3", "exit_code": 3}));
}

#[test]
fn a_false_claim_is_challenged_once_then_the_result_says_unverified() {
    let ws = workspace("claims");
    let steps = [
        json!("I ran `python3 test_x.py` and the test passed."),
        bash("python3 test_x.py"),
        json!("All tests pass now."),
    ];
    let mock = MockServer::start(&scripted("false claims", &steps));
    let result = run(&mock, &ws, json!({"verify_claims": true})).unwrap();

    let told = last_text(&mock, 1);
    assert!(told.contains("`python3 test_x.py` ran, and it never ran"), "{told}");
    assert!(told.contains("files changed: none; commands run: none"), "{told}");
    assert_eq!(mock.requests().len(), 3, "told once; the second false claim ends the run");
    let unverified = result.unverified.unwrap();
    assert!(unverified.contains("the last run of `python3 test_x.py` failed (exit 1)"), "{unverified}");
    assert_eq!(result.text, "All tests pass now.");
}

#[test]
fn a_change_request_answered_with_no_change_is_challenged_and_a_real_change_ends_it_clean() {
    let ws = workspace("expect-changes");
    let steps = [json!("Renamed it everywhere."), write("x.py", RIGHT), json!("Renamed.")];
    let mock = MockServer::start(&scripted("no change", &steps));
    let result = run(&mock, &ws, json!({"expect_changes": true})).unwrap();

    assert!(last_text(&mock, 1).contains("the task asks for changes, and no file was changed"));
    assert_eq!(result.unverified, None);
    assert_eq!(result.files_changed, vec!["x.py"]);
}

#[test]
fn a_run_the_runaway_guard_stops_still_answers_with_tools_off() {
    let ws = workspace("guard");
    let mut steps: Vec<Value> = (0..5).map(|_| bash("echo 42")).collect();
    steps.push(json!("The answer is 42."));
    let mock = MockServer::start(&scripted("guard", &steps));
    let result = run(&mock, &ws, json!({"repeat_guard": true})).unwrap();

    assert_eq!(result.stop_reason, Some(StopReason::Repetition), "the guard fired");
    assert_eq!(result.text, "The answer is 42.", "and the run carries the model's answer");
    let reqs = mock.requests();
    assert_eq!(reqs.len(), 6);
    assert_eq!(reqs[5]["body"]["tool_choice"], json!({"type": "none"}), "the last request has tools off");
    let last = reqs[5]["body"]["messages"].as_array().unwrap().last().unwrap().to_string();
    assert!(last.contains("tools are off for this answer"), "{last}");
}

#[test]
fn a_guard_stop_after_the_work_runs_the_check_once_more_and_the_result_says_it_passed() {
    // The model fixes the code, then loops on a command: the guard ends the run, and the check, run once more
    // because something changed since it last ran (never, here), vouches for the work done before the loop.
    let ws = workspace("guard-check");
    let mut steps = vec![write("x.py", RIGHT)];
    steps.extend((0..5).map(|_| bash("echo 42")));
    steps.push(json!("Fixed; the answer is 42."));
    let mock = MockServer::start(&scripted("guard-check", &steps));
    let result = run(&mock, &ws, json!({"repeat_guard": true, "check": "python3 test_x.py"})).unwrap();

    assert_eq!(result.stop_reason, Some(StopReason::Repetition), "the guard did fire");
    let check = result.check.expect("a check result");
    assert!(check.passed && check.runs == 1, "{check:?}");
}

#[test]
fn a_guard_stop_before_any_work_leaves_the_check_failing() {
    let ws = workspace("guard-nocheck");
    let mut steps: Vec<Value> = (0..5).map(|_| bash("echo 42")).collect();
    steps.push(json!("The answer is 42."));
    let mock = MockServer::start(&scripted("guard-nowork", &steps));
    let result = run(&mock, &ws, json!({"repeat_guard": true, "check": "python3 test_x.py"})).unwrap();

    assert_eq!(result.stop_reason, Some(StopReason::Repetition));
    let check = result.check.expect("a check result");
    assert!(!check.passed && check.runs == 1, "the check ran once at the stop and failed: {check:?}");
}

#[test]
fn a_task_child_cannot_write_the_parents_check_file_either() {
    let ws = workspace("check-child");
    let steps = [
        json!({"name": "task", "input": {"description": "edit the test", "prompt": "make the test pass",
                                          "agent_type": "general"}}),
        write("test_x.py", "print('ok')\n"),
        json!("I could not."),
        write("x.py", RIGHT),
        json!("Fixed."),
    ];
    let mock = MockServer::start(&scripted("child", &steps));
    let subagents = json!({"general": {"description": "Does things.", "tools": ["write_file"]}});
    let result = run(&mock, &ws, json!({"check": "python3 test_x.py", "subagents": subagents})).unwrap();

    let child_result = mock.requests()[2]["body"]["messages"].as_array().unwrap().last().unwrap().to_string();
    assert!(child_result.contains("test_x.py is read-only in this run"), "{child_result}");
    assert_eq!(std::fs::read_to_string(ws.file("test_x.py")).unwrap(), TEST);
    assert!(result.check.unwrap().passed);
}

#[test]
fn the_after_check_hook_sees_the_failed_check_and_what_it_returns_is_what_the_model_reads() {
    let ws = workspace("check-hook");
    let steps = [json!("Done."), write("x.py", RIGHT), json!("Fixed.")];
    let mock = MockServer::start(&scripted("after_check", &steps));
    let seen: Arc<Mutex<Vec<(CheckResult, String)>>> = Arc::default();
    let log = seen.clone();
    let hooks = Hooks {
        after_check: Some(Arc::new(move |check: &CheckResult, message: &str| {
            log.lock().unwrap().push((check.clone(), message.to_string()));
            Ok(Some(format!("{message}\n\nhint: add, not subtract")))
        })),
        ..Hooks::default()
    };
    let result = run_with(&mock, &ws, json!({"check": "python3 test_x.py"}), hooks).unwrap();

    let seen = seen.lock().unwrap();
    assert_eq!(seen.len(), 1, "called once: the check failed once, and a passing check is not the hook's");
    let (check, message) = &seen[0];
    assert!(!check.passed && check.exit_code == Some(1) && check.runs == 1, "{check:?}");
    assert!(check.output_tail.contains("add(2, 3) is wrong: -1"), "{}", check.output_tail);
    assert!(message.starts_with("The check `python3 test_x.py` failed (exit 1)"), "{message}");
    let told = last_text(&mock, 1);
    assert!(told.starts_with(message.as_str()) && told.ends_with("hint: add, not subtract"), "{told}");
    assert!(result.check.unwrap().passed);
    assert_eq!(result.text, "Fixed.");
}

#[test]
fn an_after_check_hook_that_answers_none_leaves_the_message_and_one_that_fails_ends_the_run() {
    let ws = workspace("check-hook-none");
    let mock = MockServer::start(&scripted("after_check none", &[json!("Done."), write("x.py", RIGHT), json!("Ok.")]));
    let hooks = Hooks { after_check: Some(Arc::new(|_: &CheckResult, _: &str| Ok(None))), ..Hooks::default() };
    run_with(&mock, &ws, json!({"check": "python3 test_x.py"}), hooks).unwrap();
    let told = last_text(&mock, 1);
    assert!(
        told.starts_with("The check `python3 test_x.py` failed (exit 1)") && told.ends_with("then answer."),
        "{told}"
    );

    let ws = workspace("check-hook-fails");
    let mock = MockServer::start(&scripted("after_check fails", &[json!("Done."), json!("unused")]));
    let hooks = Hooks {
        after_check: Some(Arc::new(|_: &CheckResult, _: &str| Err("the hint broke".to_string()))),
        ..Hooks::default()
    };
    let e = run_with(&mock, &ws, json!({"check": "python3 test_x.py"}), hooks).unwrap_err();
    assert!(matches!(&e, Error::Hook { hook, message } if hook == "after_check" && message == "the hint broke"), "{e}");
    assert_eq!(mock.requests().len(), 1, "no request after the hook failed");
}
