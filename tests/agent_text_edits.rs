//! Whole files a model gives as named fenced blocks in its text (the `text_edits` option, issue 41 items 5–6),
//! against the mock server on both wires with the built-in tools in a scratch workspace: such a turn becomes
//! `write_file` calls that take the normal path (the next request carries the pair, the check's files stay
//! read-only, the permission hook decides, the evidence lists the files), and nothing else does.
#![allow(clippy::unwrap_used, clippy::expect_used)]

#[path = "common/mock.rs"]
mod mock;
#[path = "common/tempdir.rs"]
mod tempdir;

use std::sync::Arc;

use mock::MockServer;
use serde_json::{Value, json};
use tempdir::TempDir as Ws;
use tooloop::{AgentOptions, Event, Permission, RunResult, StopReason};

const WRONG: &str = "def add(a, b):\n    return a - b\n";
const RIGHT: &str = "def add(a, b):\n    return a + b\n";
const FIXED: &str = "Here's the fixed `calc.py`:\n\n```python\ndef add(a, b):\n    return a + b\n```\n\nThat fixes it.";

/// An Anthropic turn of text.
fn anthropic(i: usize, text: &str, stop: &str) -> Value {
    json!({"anthropic": {"id": format!("msg_{i:02}"), "type": "message", "role": "assistant",
        "model": "claude-sonnet-4-6", "content": [{"type": "text", "text": text}], "stop_reason": stop,
        "stop_sequence": null, "usage": {"input_tokens": 100, "output_tokens": 10}}})
}

/// A scenario of text turns, each ending on its own.
fn turns(texts: &[&str]) -> Value {
    let responses: Vec<Value> = texts.iter().enumerate().map(|(i, t)| anthropic(i, t, "end_turn")).collect();
    json!({"description": "text edits", "responses": responses})
}

fn workspace(name: &str) -> Ws {
    let ws = Ws::new(name);
    std::fs::write(ws.file("calc.py"), WRONG).unwrap();
    ws
}

fn options(mock: &MockServer, ws: &Ws, extra: Value) -> AgentOptions {
    let mut options = json!({"model": "claude-sonnet-4-6", "api_key": "sk-ant-mock", "base_url": mock.base_url(),
        "builtin_tools": true, "workspace": ws.0, "sandbox": "off", "max_turns": 5, "text_edits": true});
    for (k, v) in extra.as_object().unwrap() {
        match v {
            Value::Null => drop(options.as_object_mut().unwrap().remove(k)),
            v => options[k] = v.clone(),
        }
    }
    AgentOptions::from_value(options).unwrap()
}

fn run(mock: &MockServer, ws: &Ws, extra: Value) -> RunResult {
    options(mock, ws, extra).build().unwrap().run("fix calc.py", &mut |_| {}).unwrap()
}

fn read(ws: &Ws, name: &str) -> String {
    std::fs::read_to_string(ws.file(name)).unwrap()
}

#[test]
fn a_fenced_file_after_its_name_is_written_and_the_next_request_carries_the_call_and_its_result() {
    for stream in [true, false] {
        let ws = workspace("text-edit-one");
        let mock = MockServer::start(&turns(&[FIXED, "Done."]));
        let agent = options(&mock, &ws, json!({"stream": stream})).build().unwrap();
        let mut seen = Vec::new();
        let result = agent
            .run("fix calc.py", &mut |ev| match ev {
                Event::ToolUse { name, .. } => seen.push(format!("tool_use {name}")),
                Event::FileChange { path, before, .. } => {
                    seen.push(format!("file_change {path} {}", before.as_deref() == Some(WRONG)))
                }
                _ => {}
            })
            .unwrap();

        assert_eq!(read(&ws, "calc.py"), RIGHT, "stream {stream}");
        assert_eq!(seen, vec!["tool_use write_file", "file_change calc.py true"], "what a UI and undo see");
        assert_eq!(result.files_changed, vec!["calc.py"]);
        assert_eq!((result.turns, result.text.as_str()), (2, "Done."));
        let reqs = mock.requests();
        let messages = reqs[1]["body"]["messages"].as_array().unwrap();
        let said = &messages[messages.len() - 2];
        assert_eq!(said["role"], "assistant");
        assert_eq!(said["content"][0]["text"], FIXED, "the model's text goes back as it was written");
        let call = &said["content"][1];
        assert_eq!((call["type"].as_str(), call["name"].as_str()), (Some("tool_use"), Some("write_file")));
        assert_eq!(call["input"], json!({"path": "calc.py", "content": RIGHT}));
        let id = call["id"].as_str().unwrap();
        // Unique in the conversation (the turn's entry id) and of the characters every API takes.
        assert!(id.starts_with("text_edit_") && id.chars().all(|c| c.is_ascii_alphanumeric() || c == '_'), "{id}");
        let answer = &messages[messages.len() - 1]["content"][0];
        assert_eq!(answer["type"], "tool_result");
        assert_eq!(answer["tool_use_id"], call["id"]);
        assert_ne!(answer["is_error"], json!(true), "{answer}");
    }
}

#[test]
fn a_shell_block_naming_a_file_writes_nothing_and_the_run_ends_on_that_answer() {
    let ws = workspace("text-edit-bash");
    std::fs::write(ws.file("test_x.py"), "print('ok')\n").unwrap();
    let mock = MockServer::start(&turns(&["Run test_x.py:\n```bash\npython3 test_x.py\n```", "unused"]));
    let result = run(&mock, &ws, json!({}));
    assert_eq!(read(&ws, "test_x.py"), "print('ok')\n");
    assert!(result.files_changed.is_empty() && result.tool_calls.is_empty());
    assert_eq!((result.turns, result.stop_reason), (1, Some(StopReason::EndTurn)));
}

#[test]
fn off_by_default_a_fenced_file_is_only_text() {
    let ws = workspace("text-edit-off");
    let mock = MockServer::start(&turns(&[FIXED, "unused"]));
    // The option left out: the library is neutral.
    let result = run(&mock, &ws, json!({"text_edits": null}));
    assert_eq!(read(&ws, "calc.py"), WRONG);
    assert!(result.tool_calls.is_empty());
    assert_eq!((result.turns, result.text.as_str()), (1, FIXED));
}

#[test]
fn a_turn_asked_for_with_tools_off_stays_an_answer() {
    // The wrap-up request (and a host's tool_choice none) offers no tool: its answer is never a call.
    let ws = workspace("text-edit-tools-off");
    let mock = MockServer::start(&turns(&[FIXED, "unused"]));
    let result = run(&mock, &ws, json!({"tool_choice": {"type": "none"}}));
    assert_eq!(read(&ws, "calc.py"), WRONG);
    assert!(result.tool_calls.is_empty());
    assert_eq!(result.turns, 1);
}

#[test]
fn a_turn_cut_off_at_max_tokens_is_never_an_edit() {
    let ws = workspace("text-edit-cut");
    let mock = MockServer::start(&json!({"responses": [anthropic(0, FIXED, "max_tokens")]}));
    let result = run(&mock, &ws, json!({}));
    assert_eq!(read(&ws, "calc.py"), WRONG);
    assert!(result.tool_calls.is_empty());
}

#[test]
fn two_files_in_one_answer_are_both_written() {
    let ws = workspace("text-edit-two");
    let text = "**calc.py**\n```python\ndef add(a, b):\n    return a + b\n```\n\n**test_calc.py**\n```python\n\
                from calc import add\nassert add(2, 3) == 5\n```";
    let mock = MockServer::start(&turns(&[text, "Done."]));
    let result = run(&mock, &ws, json!({}));
    assert_eq!(read(&ws, "calc.py"), RIGHT);
    assert_eq!(read(&ws, "test_calc.py"), "from calc import add\nassert add(2, 3) == 5\n");
    let mut changed = result.files_changed.clone();
    changed.sort();
    assert_eq!(changed, vec!["calc.py", "test_calc.py"]);
    let reqs = mock.requests();
    let messages = reqs[1]["body"]["messages"].as_array().unwrap();
    assert_eq!(messages.last().unwrap()["content"].as_array().unwrap().len(), 2, "one result per file");
}

#[test]
fn the_checks_file_written_as_a_block_is_refused_like_any_write_file() {
    let ws = workspace("text-edit-check");
    let test = "from calc import add\nassert add(2, 3) == 5\n";
    std::fs::write(ws.file("test_calc.py"), test).unwrap();
    let text = "calc.py\n```python\ndef add(a, b):\n    return a + b\n```\ntest_calc.py\n```python\nprint('ok')\n```";
    let mock = MockServer::start(&turns(&[text, "Done."]));
    let result = run(&mock, &ws, json!({"check": "python3 test_calc.py"}));

    assert_eq!(read(&ws, "test_calc.py"), test, "the check's file is unchanged");
    assert_eq!(read(&ws, "calc.py"), RIGHT);
    let refused = result.tool_calls.iter().find(|c| c.input["path"] == "test_calc.py").unwrap();
    assert!(refused.is_error && refused.output.as_str().unwrap().contains("read-only in this run"), "{refused:?}");
    assert!(result.check.unwrap().passed);
    assert_eq!(result.files_changed, vec!["calc.py"]);
}

#[test]
fn the_permission_hook_decides_a_text_edit_like_any_call() {
    let ws = workspace("text-edit-ask");
    let mock = MockServer::start(&turns(&[FIXED, "Done."]));
    let agent = options(&mock, &ws, json!({})).build().unwrap();
    let asked = Arc::new(std::sync::Mutex::new(Vec::new()));
    let seen = asked.clone();
    agent.set_permission(Some(Arc::new(move |call: &tooloop::types::ToolUseBlock| {
        seen.lock().unwrap().push(call.name.clone());
        Permission::Deny("not now".into())
    })));
    let result = agent.run("fix calc.py", &mut |_| {}).unwrap();
    assert_eq!(*asked.lock().unwrap(), vec!["write_file"]);
    assert_eq!(read(&ws, "calc.py"), WRONG);
    assert!(result.tool_calls[0].is_error);
}

#[test]
fn on_the_openai_wire_a_fenced_file_is_written_and_answered_as_a_tool_call() {
    for stream in [true, false] {
        let ws = workspace("text-edit-openai");
        let completion = |text: &str| {
            json!({"openai": {"id": "c", "object": "chat.completion", "created": 1, "model": "m", "choices": [{
                "index": 0, "finish_reason": "stop", "message": {"role": "assistant", "content": text}}],
                "usage": {"prompt_tokens": 3, "completion_tokens": 2, "total_tokens": 5}}})
        };
        let mock = MockServer::start(&json!({"responses": [completion(FIXED), completion("Done.")]}));
        let result = run(
            &mock,
            &ws,
            json!({"provider": "openai", "model": "m", "api_key": "sk-mock",
                "base_url": format!("{}/v1", mock.base_url()), "stream": stream}),
        );
        assert_eq!(read(&ws, "calc.py"), RIGHT, "stream {stream}");
        assert_eq!(result.text, "Done.");
        let reqs = mock.requests();
        let messages = reqs[1]["body"]["messages"].as_array().unwrap();
        let said = &messages[messages.len() - 2];
        assert_eq!(said["tool_calls"][0]["function"]["name"], "write_file");
        let tool = &messages[messages.len() - 1];
        assert_eq!((tool["role"].as_str(), &tool["tool_call_id"]), (Some("tool"), &said["tool_calls"][0]["id"]));
    }
}
