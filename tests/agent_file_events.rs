//! Approvals and file changes travel as events: a run with the built-in file tools, against the mock server
//! speaking the Messages API, reports each change a file tool made (`file_change`, with what the file was
//! before, between the call's `tool_use` and its `tool_result`), and announces each question to the
//! permission callable (`approval_request`) before the callable is asked.
#![allow(clippy::unwrap_used, clippy::expect_used)]

#[path = "common/mock.rs"]
mod mock;
#[path = "common/tempdir.rs"]
mod tempdir;

use std::sync::{Arc, Mutex};

use mock::{MockServer, scripted};
use serde_json::json;
use tempdir::TempDir as Ws;
use tooloop::types::ToolUseBlock;
use tooloop::{AgentOptions, Event, FileChangeKind, Permission};

fn agent(mock: &MockServer, ws: &Ws) -> tooloop::Agent {
    let options = json!({"model": "claude-sonnet-4-6", "api_key": "sk-ant-mock", "base_url": mock.base_url(),
        "builtin_tools": true, "workspace": ws.0, "sandbox": "off", "max_turns": 12, "stream": false});
    AgentOptions::from_value(options).unwrap().build().unwrap()
}

/// A short name for each event, in order: `tool_use:<id>`, `file_change:<id>`, `tool_result:<id>`, ...
fn names(events: &[Event]) -> Vec<String> {
    events
        .iter()
        .filter_map(|e| match e {
            Event::ToolUse { id, .. } => Some(format!("tool_use:{id}")),
            Event::ToolResult { id, .. } => Some(format!("tool_result:{id}")),
            Event::FileChange { id, .. } => Some(format!("file_change:{id}")),
            Event::ApprovalRequest { id, .. } => Some(format!("approval_request:{id}")),
            _ => None,
        })
        .collect()
}

#[test]
fn file_tools_report_each_change_with_the_content_before_between_tool_use_and_tool_result() {
    let ws = Ws::new("kinds");
    std::fs::create_dir_all(ws.0.join("bin")).unwrap();
    std::fs::write(ws.0.join("bin/blob"), [0xff, 0x00, 0x01]).unwrap();
    let steps = [
        json!({"name": "write_file", "input": {"path": "src/new.txt", "content": "one\n"}}),
        json!({"name": "edit_file", "input": {"path": "./src/new.txt", "old_text": "one", "new_text": "two"}}),
        json!({"name": "edit_file", "input": {"path": "src/new.txt", "old_text": "absent", "new_text": "x"}}),
        json!({"name": "write_file", "input": {"path": "bin/blob", "content": "text now"}}),
        json!({"name": "read_file", "input": {"path": "src/new.txt"}}),
        json!("done"),
    ];
    let mock = MockServer::start(&scripted("file change events", &steps));
    let mut events = Vec::new();
    agent(&mock, &ws).run("make files", &mut |e| events.push(e.clone())).unwrap();

    assert_eq!(
        names(&events),
        [
            "tool_use:toolu_00",
            "file_change:toolu_00",
            "tool_result:toolu_00",
            "tool_use:toolu_01",
            "file_change:toolu_01",
            "tool_result:toolu_01",
            // A failed edit changed nothing: no file_change. Reading changes nothing either.
            "tool_use:toolu_02",
            "tool_result:toolu_02",
            "tool_use:toolu_03",
            "file_change:toolu_03",
            "tool_result:toolu_03",
            "tool_use:toolu_04",
            "tool_result:toolu_04",
        ]
    );
    let changes: Vec<&Event> = events.iter().filter(|e| matches!(e, Event::FileChange { .. })).collect();
    match changes[0] {
        Event::FileChange { name, path, kind, before, before_base64, before_mode, before_too_large, .. } => {
            assert_eq!((name.as_str(), path.as_str(), *kind), ("write_file", "src/new.txt", FileChangeKind::Created));
            assert_eq!((before, before_base64, before_mode, before_too_large), (&None, &None, &None, &false));
        }
        other => panic!("{other:?}"),
    }
    match changes[1] {
        Event::FileChange { name, path, kind, before, before_base64, before_mode, .. } => {
            // The path is the workspace-relative one restore_file takes, whatever spelling the model used.
            assert_eq!((name.as_str(), path.as_str(), *kind), ("edit_file", "src/new.txt", FileChangeKind::Modified));
            assert_eq!(before.as_deref(), Some("one\n"));
            assert_eq!(before_base64, &None);
            assert!(before_mode.is_some_and(|m| m & 0o600 == 0o600), "{before_mode:?}");
        }
        other => panic!("{other:?}"),
    }
    match changes[2] {
        Event::FileChange { path, kind, before, before_base64, .. } => {
            assert_eq!((path.as_str(), *kind), ("bin/blob", FileChangeKind::Modified));
            assert_eq!(before, &None, "not UTF-8: carried as base64");
            assert_eq!(before_base64.as_deref(), Some("/wAB"));
        }
        other => panic!("{other:?}"),
    }
    let json = serde_json::to_value(changes[0]).unwrap();
    assert_eq!(json["type"], "file_change");
    assert_eq!(json["kind"], "created");
    assert_eq!(std::fs::read_to_string(ws.0.join("src/new.txt")).unwrap(), "two\n");
}

#[test]
fn an_approval_request_is_announced_before_the_permission_callable_is_asked() {
    let ws = Ws::new("approval");
    let steps = [
        json!({"name": "write_file", "input": {"path": "a.txt", "content": "a"}}),
        json!({"name": "write_file", "input": {"path": "b.txt", "content": "b"}}),
        json!("done"),
    ];
    let mock = MockServer::start(&scripted("file change events", &steps));
    let agent = agent(&mock, &ws);
    let log: Arc<Mutex<Vec<String>>> = Arc::default();
    let asked = log.clone();
    agent.set_permission(Some(Arc::new(move |call: &ToolUseBlock| {
        asked.lock().unwrap().push(format!("asked:{}", call.id));
        if call.input["path"] == "b.txt" { Permission::Deny("not b".into()) } else { Permission::Allow }
    })));
    let mut approvals = Vec::new();
    agent
        .run("write", &mut |e| {
            if let Event::ApprovalRequest { name, input, .. } = e {
                approvals.push((name.clone(), input["path"].clone()));
            }
            if let Some(n) = names(std::slice::from_ref(e)).pop() {
                log.lock().unwrap().push(n);
            }
        })
        .unwrap();
    assert_eq!(
        *log.lock().unwrap(),
        [
            "tool_use:toolu_00",
            "approval_request:toolu_00",
            "asked:toolu_00",
            "file_change:toolu_00",
            "tool_result:toolu_00",
            "tool_use:toolu_01",
            "approval_request:toolu_01",
            "asked:toolu_01",
            // Denied: it did not run, so nothing changed.
            "tool_result:toolu_01",
        ]
    );
    assert_eq!(approvals, [("write_file".to_string(), json!("a.txt")), ("write_file".to_string(), json!("b.txt"))]);
    assert!(!ws.0.join("b.txt").exists());
}

#[test]
fn no_permission_callable_means_no_approval_request() {
    let ws = Ws::new("noask");
    let steps = [json!({"name": "write_file", "input": {"path": "a.txt", "content": "a"}}), json!("done")];
    let mock = MockServer::start(&scripted("file change events", &steps));
    let mut events = Vec::new();
    agent(&mock, &ws).run("write", &mut |e| events.push(e.clone())).unwrap();
    assert_eq!(names(&events), ["tool_use:toolu_00", "file_change:toolu_00", "tool_result:toolu_00"]);
}

/// A host's own tool that writes the file named by its `file` field, told to the core as kind "write".
fn host_writer(ws: &std::path::Path, name: &str, kind: Option<&str>) -> tooloop::Tool {
    let schema = json!({"type": "object", "properties": {"file": {"type": "string"}, "text": {"type": "string"}},
        "required": ["file", "text"]});
    let root = ws.to_path_buf();
    let tool = tooloop::Tool::new(
        name,
        "Save text to a file.",
        schema.clone(),
        move |input: &serde_json::Value, _: &tooloop::ToolContext<'_>| {
            let file = input["file"].as_str().unwrap_or_default();
            std::fs::write(root.join(file), input["text"].as_str().unwrap_or_default())
                .map(|()| tooloop::ToolOutput::Text(format!("saved {file}")))
                .map_err(|e| tooloop::ToolError::Respond(e.to_string()))
        },
    )
    .unwrap();
    match kind {
        Some(k) => tool.kind(tooloop::tools::ToolKind::parse(Some(k), Some("file"), &schema).unwrap()).unwrap(),
        None => tool,
    }
}

#[test]
fn a_host_tool_of_kind_write_reports_its_change_like_write_file_and_can_be_undone() {
    let ws = Ws::new("hostwrite");
    std::fs::write(ws.0.join("notes.txt"), "old notes\n").unwrap();
    let steps = [
        json!({"name": "save", "input": {"file": "notes.txt", "text": "new notes\n"}}),
        json!({"name": "save", "input": {"file": "fresh.txt", "text": "x"}}),
        json!({"name": "plain_save", "input": {"file": "other.txt", "text": "y"}}),
        json!("done"),
    ];
    let mock = MockServer::start(&scripted("host write tool", &steps));
    let options = json!({"model": "claude-sonnet-4-6", "api_key": "sk-ant-mock", "base_url": mock.base_url(),
        "workspace": ws.0, "max_turns": 12, "stream": false});
    let agent = AgentOptions::from_value(options).unwrap().build().unwrap();
    agent.tools().register(host_writer(&ws.0, "save", Some("write"))).unwrap();
    // The same tool without a kind: the core cannot know it writes.
    agent.tools().register(host_writer(&ws.0, "plain_save", None)).unwrap();
    let mut events = Vec::new();
    agent.run("save", &mut |e| events.push(e.clone())).unwrap();
    assert_eq!(
        names(&events),
        [
            "tool_use:toolu_00",
            "file_change:toolu_00",
            "tool_result:toolu_00",
            "tool_use:toolu_01",
            "file_change:toolu_01",
            "tool_result:toolu_01",
            "tool_use:toolu_02",
            "tool_result:toolu_02",
        ]
    );
    let changes: Vec<&Event> = events.iter().filter(|e| matches!(e, Event::FileChange { .. })).collect();
    let Event::FileChange { name, path, kind, before, before_mode, .. } = changes[0] else { unreachable!() };
    assert_eq!((name.as_str(), path.as_str(), *kind), ("save", "notes.txt", FileChangeKind::Modified));
    assert_eq!(before.as_deref(), Some("old notes\n"));
    let Event::FileChange { path: created, kind: created_kind, .. } = changes[1] else { unreachable!() };
    assert_eq!((created.as_str(), *created_kind), ("fresh.txt", FileChangeKind::Created));
    // Undo from the events alone, as the CLI's /undo does.
    let root = tooloop::builtin::Workspace::new(&ws.0).unwrap();
    tooloop::builtin::restore_file(&root, path, before.as_deref().map(str::as_bytes), before_mode.unwrap()).unwrap();
    tooloop::builtin::restore_file(&root, created, None, 0).unwrap();
    assert_eq!(std::fs::read_to_string(ws.0.join("notes.txt")).unwrap(), "old notes\n");
    assert!(!ws.0.join("fresh.txt").exists());
}

#[test]
fn an_edit_rule_covers_a_host_tool_of_kind_write_by_its_path_field() {
    let ws = Ws::new("hostrule");
    std::fs::create_dir_all(ws.0.join("private")).unwrap();
    let steps = [
        json!({"name": "save", "input": {"file": "private/key.txt", "text": "x"}}),
        json!({"name": "save", "input": {"file": "open.txt", "text": "y"}}),
        json!("done"),
    ];
    let mock = MockServer::start(&scripted("host write tool rules", &steps));
    let options = json!({"model": "claude-sonnet-4-6", "api_key": "sk-ant-mock", "base_url": mock.base_url(),
        "workspace": ws.0, "max_turns": 12, "stream": false, "permission_rules": {"deny": ["Edit(private/**)"]}});
    let agent = AgentOptions::from_value(options).unwrap().build().unwrap();
    agent.tools().register(host_writer(&ws.0, "save", Some("write"))).unwrap();
    let result = agent.run("save", &mut |_| {}).unwrap();
    assert!(result.tool_calls[0].denied, "{:?}", result.tool_calls[0]);
    assert!(result.tool_calls[0].output.as_str().unwrap().contains("Edit(private/**)"));
    assert!(!ws.0.join("private/key.txt").exists());
    assert!(!result.tool_calls[1].denied);
    assert!(ws.0.join("open.txt").exists());
}
