//! Planning: the `todo_write` tool through the loop — the one-in-progress rule, the `todo` event, the
//! reminder when the model leaves an unfinished list alone, and the list restored from a session file.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::sync::Arc;

use serde_json::{Map, Value, json};
use tooloop::provider::ScriptedProvider;
use tooloop::provider::host::reply;
use tooloop::todo::{TodoItem, TodoStatus};
use tooloop::types::ToolUseBlock;
use tooloop::{AgentOptions, ContentBlock, Event, StopReason, Tool, ToolContext, ToolOutput};

fn call(id: &str, name: &str, input: Value) -> ContentBlock {
    ContentBlock::ToolUse(ToolUseBlock { id: id.into(), name: name.into(), input, extra: Map::new() })
}

fn todos(items: &[(&str, &str)]) -> Value {
    json!({"todos": items.iter().map(|(c, s)| json!({"content": c, "status": s})).collect::<Vec<_>>()})
}

fn planning_agent(steps: Vec<tooloop::MessageResponse>, extra: Value) -> (tooloop::Agent, Arc<ScriptedProvider>) {
    let provider = Arc::new(ScriptedProvider::new(steps));
    let mut options = json!({"planning": true});
    if let (Some(o), Some(e)) = (options.as_object_mut(), extra.as_object()) {
        o.extend(e.clone());
    }
    let agent = AgentOptions::from_value(options).unwrap().build_with(provider.clone()).unwrap();
    let noop = Tool::new(
        "look",
        "",
        json!({"type": "object", "properties": {"n": {"type": "integer"}}}),
        |_: &Value, _: &ToolContext<'_>| Ok(ToolOutput::Text("nothing here".into())),
    )
    .unwrap();
    agent.tools().register(noop).unwrap();
    (agent, provider)
}

#[test]
fn a_list_with_two_items_in_progress_is_refused_and_the_list_stays_as_it_was() {
    let steps = vec![
        reply(
            vec![call("t1", "todo_write", todos(&[("plan", "in_progress"), ("build", "pending")]))],
            StopReason::ToolUse,
        ),
        reply(
            vec![call("t2", "todo_write", todos(&[("plan", "in_progress"), ("build", "in_progress")]))],
            StopReason::ToolUse,
        ),
        reply(vec![ContentBlock::text("ok")], StopReason::EndTurn),
    ];
    let (agent, _) = planning_agent(steps, json!({}));
    let mut events = Vec::new();
    let result = agent.run("go", &mut |e| events.push(e.clone())).unwrap();
    assert!(!result.tool_calls[0].is_error);
    assert!(result.tool_calls[1].is_error);
    assert!(result.tool_calls[1].output.as_str().unwrap().contains("at most one may be"));
    let list = agent.todos();
    assert_eq!(list.len(), 2);
    assert_eq!(list[1], TodoItem { content: "build".into(), status: TodoStatus::Pending, active_form: None });
    let todo_events: Vec<usize> =
        events.iter().filter_map(|e| if let Event::Todo { todos } = e { Some(todos.len()) } else { None }).collect();
    assert_eq!(todo_events, vec![2], "one event, for the call that changed the list");
}

#[test]
fn an_unfinished_list_left_alone_for_three_turns_gets_one_reminder_in_a_tool_result() {
    let mut steps = vec![reply(
        vec![call("t0", "todo_write", todos(&[("read", "in_progress"), ("write", "pending")]))],
        StopReason::ToolUse,
    )];
    for i in 1..=4 {
        steps.push(reply(vec![call(&format!("l{i}"), "look", json!({"n": i}))], StopReason::ToolUse));
    }
    steps.push(reply(vec![ContentBlock::text("done")], StopReason::EndTurn));
    let (agent, provider) = planning_agent(steps, json!({}));
    let result = agent.run("go", &mut |_| {}).unwrap();
    let outputs: Vec<String> = result.tool_calls.iter().map(|c| c.output.as_str().unwrap().to_string()).collect();
    let reminded: Vec<bool> = outputs.iter().map(|o| o.contains("<reminder>")).collect();
    assert_eq!(reminded, vec![false, false, false, true, false], "{outputs:#?}");
    assert!(outputs[3].starts_with("nothing here") && outputs[3].contains("▸ read"));
    // The reminder went to the model in the next request.
    let last = serde_json::to_string(&provider.requests()[4].messages).unwrap();
    assert!(last.contains("<reminder>"));

    // A finished list, or planning with the reminder off, never reminds.
    let mut steps = vec![reply(vec![call("t0", "todo_write", todos(&[("read", "completed")]))], StopReason::ToolUse)];
    for i in 1..=4 {
        steps.push(reply(vec![call(&format!("l{i}"), "look", json!({"n": i}))], StopReason::ToolUse));
    }
    steps.push(reply(vec![ContentBlock::text("done")], StopReason::EndTurn));
    let (agent, _) = planning_agent(steps.clone(), json!({}));
    let r = agent.run("go", &mut |_| {}).unwrap();
    assert!(r.tool_calls.iter().all(|c| !c.output.as_str().unwrap().contains("<reminder>")));
    steps[0] = reply(vec![call("t0", "todo_write", todos(&[("read", "pending")]))], StopReason::ToolUse);
    let (agent, _) = planning_agent(steps, json!({"planning": {"remind_after": null}}));
    let r = agent.run("go", &mut |_| {}).unwrap();
    assert!(r.tool_calls.iter().all(|c| !c.output.as_str().unwrap().contains("<reminder>")));
}

#[test]
fn the_list_is_restored_when_a_session_is_resumed() {
    let dir = std::env::temp_dir().join(format!("tooloop-todo-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let session = dir.join("s.jsonl");
    let _ = std::fs::remove_file(&session);
    let steps = vec![
        reply(
            vec![call("t1", "todo_write", todos(&[("one", "completed"), ("two", "in_progress")]))],
            StopReason::ToolUse,
        ),
        reply(vec![ContentBlock::text("paused")], StopReason::EndTurn),
    ];
    let (agent, _) = planning_agent(steps, json!({"session": session}));
    agent.run("go", &mut |_| {}).unwrap();
    let before = agent.todos();
    drop(agent);
    let (resumed, _) = planning_agent(vec![], json!({"session": session}));
    assert_eq!(resumed.todos(), before);
    assert_eq!(resumed.todos()[1].status, TodoStatus::InProgress);
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn without_planning_there_is_no_todo_tool() {
    let agent = AgentOptions::from_value(json!({})).unwrap().build_with(Arc::new(ScriptedProvider::new([]))).unwrap();
    assert!(agent.tools().get("todo_write").is_none());
    assert!(agent.todos().is_empty());
}
