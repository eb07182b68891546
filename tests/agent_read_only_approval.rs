//! A call approved only as read-only (`Permission::AllowReadOnly`: "I let this run because it looks like it
//! only reads") cannot write, whatever the command really does: bash runs under the kernel's read-only
//! sandbox with the network off, a read-only tool runs as it is, and any other tool is refused. The
//! commands are the ones a hostile review slipped past the read-only guess of round three.
#![allow(clippy::unwrap_used, clippy::expect_used)]

#[path = "common/mock.rs"]
mod mock;
#[path = "common/require.rs"]
mod require;
#[path = "common/tempdir.rs"]
mod tempdir;

use std::sync::Arc;

use mock::{MockServer, scripted};
use serde_json::{Value, json};
use tempdir::TempDir as Ws;
use tooloop::types::ToolUseBlock;
use tooloop::{AgentOptions, Event, Permission};

/// Commands that passed round three's read-only guess and still wrote (each tries to create `pwned*`).
const BYPASSES: &[&str] = &[
    "awk 'BEGIN{print \"touch pwned1\" | \"sh\"}'",
    "sed -n '1e touch pwned2' notes.txt",
    "sort -o pwned3 notes.txt",
    "echo X > pwned4 2>&1",
    "ls #'\ntouch pwned5",
    "./tools/cat notes.txt",
    "GIT_EXTERNAL_DIFF=./tools/cat git diff --no-index notes.txt notes.txt; touch pwned7",
    "cat notes.txt; python3 -c 'open(\"pwned8\", \"w\").write(\"x\")'",
];

fn agent(mock: &MockServer, ws: &Ws, sandbox: &str) -> tooloop::Agent {
    let options = json!({"model": "claude-sonnet-4-6", "api_key": "sk-ant-mock", "base_url": mock.base_url(),
        "builtin_tools": true, "workspace": ws.0, "sandbox": sandbox, "max_turns": 20, "stream": false});
    AgentOptions::from_value(options).unwrap().build().unwrap()
}

fn results(events: &[Event]) -> Vec<(String, String, bool)> {
    events
        .iter()
        .filter_map(|e| match e {
            Event::ToolResult { name, content, is_error, .. } => {
                let text = match content {
                    Value::String(s) => s.clone(),
                    other => other.to_string(),
                };
                Some((name.clone(), text, *is_error))
            }
            _ => None,
        })
        .collect()
}

fn workspace(name: &str) -> Ws {
    let ws = Ws::new(name);
    std::fs::write(ws.0.join("notes.txt"), "alpha\n").unwrap();
    std::fs::create_dir_all(ws.0.join("tools")).unwrap();
    // A repository script named like a harmless command.
    std::fs::write(ws.0.join("tools/cat"), "#!/bin/sh\ntouch pwned6\ncat \"$@\"\n").unwrap();
    let mut perms = std::fs::metadata(ws.0.join("tools/cat")).unwrap().permissions();
    std::os::unix::fs::PermissionsExt::set_mode(&mut perms, 0o755);
    std::fs::set_permissions(ws.0.join("tools/cat"), perms).unwrap();
    ws
}

fn created(ws: &Ws) -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(&ws.0)
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .filter(|n| n.starts_with("pwned") || n == "written.txt")
        .collect();
    names.sort();
    names
}

#[test]
fn bash_approved_as_read_only_cannot_write_whatever_the_command_does() {
    for sandbox in ["workspace-write", "off"] {
        if !require::landlock() {
            return;
        }
        let ws = workspace(&format!("ro-approval-{sandbox}"));
        let mut steps: Vec<Value> = BYPASSES.iter().map(|c| json!({"name": "bash", "input": {"command": c}})).collect();
        steps.push(json!({"name": "bash", "input": {"command": "cat notes.txt", "run_in_background": false}}));
        steps.push(json!({"name": "write_file", "input": {"path": "written.txt", "content": "x"}}));
        steps.push(json!({"name": "read_file", "input": {"path": "notes.txt"}}));
        steps.push(json!("done"));
        let mock = MockServer::start(&scripted("read-only approvals", &steps));
        let agent = agent(&mock, &ws, sandbox);
        agent.set_permission(Some(Arc::new(|_: &ToolUseBlock| Permission::AllowReadOnly)));
        let mut events = Vec::new();
        agent.run("look around", &mut |e| events.push(e.clone())).unwrap();

        assert_eq!(created(&ws), Vec::<String>::new(), "sandbox {sandbox}: a read-only approval wrote");
        let results = results(&events);
        assert_eq!(results.len(), BYPASSES.len() + 3, "{results:?}");
        // Reading still works, through bash and through the read-only tool.
        let (_, cat, _) = &results[BYPASSES.len()];
        assert!(cat.contains("alpha"), "sandbox {sandbox}: {cat}");
        let (name, read, is_error) = &results[BYPASSES.len() + 2];
        assert_eq!(name, "read_file");
        assert!(read.contains("alpha") && !is_error, "{read}");
        // A tool that can neither confine itself nor claims to only read is refused, with a reason.
        let (name, refused, is_error) = &results[BYPASSES.len() + 1];
        assert_eq!(name, "write_file");
        assert!(*is_error && refused.contains("allowed only if it changes nothing"), "{refused}");
    }
}

#[test]
fn a_plain_allow_keeps_its_power_so_the_read_only_answer_is_what_confines() {
    if !require::landlock() {
        return;
    }
    let ws = workspace("plain-allow");
    let steps = [json!({"name": "bash", "input": {"command": "echo X > pwned4"}}), json!("done")];
    let mock = MockServer::start(&scripted("plain allow", &steps));
    let agent = agent(&mock, &ws, "workspace-write");
    agent.set_permission(Some(Arc::new(|_: &ToolUseBlock| Permission::Allow)));
    agent.run("write", &mut |_| {}).unwrap();
    assert_eq!(created(&ws), ["pwned4"]);
}

#[test]
fn a_host_tool_of_kind_read_runs_under_a_read_only_approval_and_one_of_no_kind_is_refused() {
    let steps = [
        json!({"name": "look", "input": {"path": "notes.txt"}}),
        json!({"name": "look_unmarked", "input": {"path": "notes.txt"}}),
        json!("done"),
    ];
    let mock = MockServer::start(&scripted("host read tool, read-only approval", &steps));
    let ws = Ws::new("kind-read-approval");
    let options = json!({"model": "claude-sonnet-4-6", "api_key": "sk-ant-mock", "base_url": mock.base_url(),
        "workspace": ws.0, "max_turns": 5, "stream": false});
    let agent = AgentOptions::from_value(options).unwrap().build().unwrap();
    let schema = json!({"type": "object", "properties": {"path": {"type": "string"}}});
    let handler = |_: &Value, _: &tooloop::ToolContext<'_>| Ok(tooloop::ToolOutput::Text("alpha".into()));
    let look = tooloop::Tool::new("look", "Look.", schema.clone(), handler).unwrap();
    agent.tools().register(look.kind(tooloop::tools::ToolKind::Read).unwrap()).unwrap();
    agent.tools().register(tooloop::Tool::new("look_unmarked", "Look.", schema, handler).unwrap()).unwrap();
    agent.set_permission(Some(Arc::new(|_: &ToolUseBlock| Permission::AllowReadOnly)));
    let mut events = Vec::new();
    agent.run("look", &mut |e| events.push(e.clone())).unwrap();
    let got = results(&events);
    assert_eq!(got[0], ("look".to_string(), "alpha".to_string(), false));
    assert!(got[1].2 && got[1].1.contains("not a read-only tool"), "{:?}", got[1]);
}
