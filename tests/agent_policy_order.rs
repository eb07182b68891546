//! The policies' one order (src/agent/policy/mod.rs): where two policies both want to act at the same point
//! of the same turn, the one earlier in the order acts first — and, where it has the last word, the later one
//! is not asked. Against the mock server speaking the Messages API. Each test fails when the two policies it
//! names swap places in `Policies::for_run`.
#![allow(clippy::unwrap_used, clippy::expect_used)]

#[path = "common/mock.rs"]
mod mock;
#[path = "common/tempdir.rs"]
mod tempdir;

use std::sync::{Arc, Mutex};

use mock::{MockServer, scripted};
use serde_json::{Value, json};
use tooloop::Permission;
use tooloop::hooks::{Hooks, ToolResultView};
use tooloop::types::ToolUseBlock;
use tooloop::{Agent, AgentOptions, StopReason, Tool, ToolContext, ToolOutput};

fn agent(mock: &MockServer, extra: Value) -> Agent {
    let mut options = json!({"model": "claude-sonnet-4-6", "api_key": "sk-ant-mock", "base_url": mock.base_url(),
        "max_turns": 8, "stream": false});
    for (k, v) in extra.as_object().unwrap() {
        options[k] = v.clone();
    }
    AgentOptions::from_value(options).unwrap().build().unwrap()
}

fn look() -> Tool {
    Tool::new(
        "look",
        "",
        json!({"type": "object", "properties": {"n": {"type": "integer"}}}),
        |_: &Value, _: &ToolContext<'_>| Ok(ToolOutput::Text("nothing here".into())),
    )
    .unwrap()
}

/// The content of the tool result answering `id` in request `i`, as text.
fn result_text(mock: &MockServer, i: usize, id: &str) -> String {
    let reqs = mock.requests();
    let messages = reqs[i]["body"]["messages"].as_array().unwrap().clone();
    let result = messages
        .iter()
        .filter_map(|m| m["content"].as_array())
        .flatten()
        .find(|b| b["type"] == "tool_result" && b["tool_use_id"] == id)
        .unwrap_or_else(|| panic!("no result for {id} in request {i}"))
        .clone();
    match &result["content"] {
        Value::String(s) => s.clone(),
        Value::Array(blocks) => blocks.iter().filter_map(|b| b["text"].as_str()).collect::<Vec<_>>().join("\n\n"),
        other => other.to_string(),
    }
}

#[test]
fn after_a_call_the_after_tool_hook_replaces_the_result_before_the_todo_reminder_is_appended() {
    // Turn 1 leaves an unfinished list; turn 2 calls `look` without touching it: the reminder is due on its
    // result, which the host's after_tool hook replaces too.
    let list =
        json!({"todos": [{"content": "read", "status": "in_progress"}, {"content": "write", "status": "pending"}]});
    let steps =
        [json!({"name": "todo_write", "input": list}), json!({"name": "look", "input": {"n": 1}}), json!("done")];
    let mock = MockServer::start(&scripted("hook and reminder", &steps));
    let agent = agent(&mock, json!({"planning": {"remind_after": 1}}));
    agent.tools().register(look()).unwrap();
    agent.set_hooks(Hooks {
        after_tool: Some(Arc::new(|call: &ToolUseBlock, _: &ToolResultView| {
            Ok((call.name == "look").then(|| "replaced by the hook".to_string()))
        })),
        ..Hooks::default()
    });
    let result = agent.run("go", &mut |_| {}).unwrap();
    assert_eq!(result.text, "done");

    let seen = result_text(&mock, 2, "toolu_01");
    assert!(seen.starts_with("replaced by the hook"), "the hook acts first: {seen}");
    assert!(seen.contains("<reminder>"), "the reminder follows what the hook made of the result: {seen}");
}

#[test]
fn before_a_call_the_runaway_guard_refuses_a_repeat_and_the_permission_callable_is_not_asked() {
    // The same call three times in a row: the guard (warn_after 2) refuses the second and third; the
    // permission callable decides only what the guard let through.
    let call = json!({"name": "look", "input": {"n": 1}});
    let steps = [call.clone(), call.clone(), json!("done")];
    let mock = MockServer::start(&scripted("guard and permission", &steps));
    let agent = agent(&mock, json!({"repeat_guard": {"warn_after": 2, "stop_after": 5}}));
    agent.tools().register(look()).unwrap();
    let asked: Arc<Mutex<Vec<String>>> = Arc::default();
    let log = asked.clone();
    agent.set_permission(Some(Arc::new(move |c: &ToolUseBlock| {
        log.lock().unwrap().push(c.id.clone());
        Permission::Allow
    })));
    let result = agent.run("go", &mut |_| {}).unwrap();

    assert_eq!(*asked.lock().unwrap(), vec!["toolu_00"], "the callable is asked only about the first call");
    assert!(!result.tool_calls[0].is_error);
    let refused = &result.tool_calls[1];
    assert!(refused.is_error && !refused.denied, "{refused:?}");
    assert!(refused.output.as_str().unwrap().starts_with("not run: same call and same input"), "{refused:?}");
}

#[test]
fn at_the_stop_the_check_sends_the_model_back_before_the_on_stop_hook_is_asked() {
    // The model says it is done twice; the check fails the first time (no done.txt yet) and passes once the
    // model wrote it. The on_stop hook is asked only about the answer the check let end.
    let ws = tempdir::TempDir::new("policy-order-stop");
    let steps = [
        json!("Done."),
        json!({"name": "write_file", "input": {"path": "done.txt", "content": "yes\n"}}),
        json!("Done now."),
    ];
    let mock = MockServer::start(&scripted("check and on_stop", &steps));
    let agent =
        agent(&mock, json!({"builtin_tools": true, "workspace": ws.0, "sandbox": "off", "check": "test -f done.txt"}));
    // What on_stop saw: the answer, and whether the check had passed.
    type Seen = Vec<(String, Option<bool>)>;
    let stops: Arc<Mutex<Seen>> = Arc::default();
    let log = stops.clone();
    agent.set_hooks(Hooks {
        on_stop: Some(Arc::new(move |run: &tooloop::RunResult| {
            log.lock().unwrap().push((run.text.clone(), run.check.as_ref().map(|c| c.passed)));
            Ok(None)
        })),
        ..Hooks::default()
    });
    let result = agent.run("write done.txt", &mut |_| {}).unwrap();

    assert_eq!(result.stop_reason, Some(StopReason::EndTurn));
    assert_eq!(result.text, "Done now.");
    assert_eq!(*stops.lock().unwrap(), vec![("Done now.".to_string(), Some(true))]);
}
