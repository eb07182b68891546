//! No file tool blocks on a FIFO: `read_file`, `write_file` and `edit_file` on a named pipe in the workspace
//! answer at once with an `is_error` result (through the whole agent, whose `file_change` bookkeeping reads
//! the file before a write), and `grep`/`glob` neither read a pipe nor an ignore file that is one.
//!
//! Each run goes on a thread the test waits for with a timeout, so a regression fails instead of hanging.
#![allow(clippy::unwrap_used, clippy::expect_used)]

#[path = "common/mock.rs"]
mod mock;
#[path = "common/tempdir.rs"]
mod tempdir;

use std::time::Duration;

use mock::{MockServer, scripted};
use serde_json::{Value, json};
use tempdir::TempDir as Ws;
use tooloop::{AgentOptions, Event};

fn mkfifo(path: &std::path::Path) {
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    rustix::fs::mknodat(rustix::fs::CWD, path, rustix::fs::FileType::Fifo, rustix::fs::Mode::from_raw_mode(0o644), 0)
        .unwrap();
}

/// Run the scripted calls in an agent over `ws`; the `(content, is_error)` of each tool result, in order,
/// or a failure when the run has not ended within 20 s.
fn results_within_time(ws: &Ws, steps: &[Value]) -> Vec<(String, bool)> {
    let mock = MockServer::start(&scripted("fifo", steps));
    let options = json!({"model": "claude-sonnet-4-6", "api_key": "sk-ant-mock", "base_url": mock.base_url(),
        "builtin_tools": true, "workspace": ws.0, "sandbox": "off", "max_turns": 12, "stream": false,
        "repeat_guard": false});
    let agent = AgentOptions::from_value(options).unwrap().build().unwrap();
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let mut results = Vec::new();
        let run = agent.run("touch the pipe", &mut |e| {
            if let Event::ToolResult { content, is_error, .. } = e {
                results.push((content.as_str().unwrap_or_default().to_string(), *is_error));
            }
        });
        let _ = tx.send(run.map(|_| results));
    });
    rx.recv_timeout(Duration::from_secs(20)).expect("a file tool blocked on a FIFO").unwrap()
}

#[test]
fn read_write_and_edit_refuse_a_fifo_at_once() {
    let ws = Ws::new("fifo-files");
    mkfifo(&ws.0.join("pipe"));
    let steps = [
        json!({"name": "read_file", "input": {"path": "pipe"}}),
        json!({"name": "write_file", "input": {"path": "pipe", "content": "x"}}),
        json!({"name": "edit_file", "input": {"path": "pipe", "old_text": "a", "new_text": "b"}}),
        json!("done"),
    ];
    let results = results_within_time(&ws, &steps);
    assert_eq!(results.len(), 3, "{results:?}");
    for (content, is_error) in &results {
        assert!(is_error, "{content}");
        assert!(content.contains("not a regular file"), "{content}");
    }
    let kind = std::fs::symlink_metadata(ws.0.join("pipe")).unwrap().file_type();
    assert!(std::os::unix::fs::FileTypeExt::is_fifo(&kind), "the pipe is left as it was");
}

#[test]
fn grep_and_glob_read_neither_a_fifo_nor_an_ignore_file_that_is_one() {
    let ws = Ws::new("fifo-search");
    std::fs::write(ws.0.join("a.txt"), "needle\n").unwrap();
    mkfifo(&ws.0.join("pipe"));
    mkfifo(&ws.0.join("sub/.gitignore"));
    std::fs::write(ws.0.join("sub/b.txt"), "needle\n").unwrap();
    let steps = [
        json!({"name": "grep", "input": {"pattern": "needle", "path": "."}}),
        json!({"name": "glob", "input": {"pattern": "**/*.txt"}}),
        json!({"name": "grep", "input": {"pattern": "needle", "path": "sub"}}),
        json!({"name": "glob", "input": {"pattern": "*.txt", "path": "sub"}}),
        json!("done"),
    ];
    let results = results_within_time(&ws, &steps);
    assert_eq!(results.len(), 4, "{results:?}");
    assert!(!results[0].1 && results[0].0.contains("a.txt"), "{results:?}");
    assert!(!results[1].1 && results[1].0.contains("a.txt"), "{results:?}");
    for (content, is_error) in &results[2..] {
        assert!(is_error, "{content}");
        assert!(content.contains("not a regular file"), "{content}");
    }
}
