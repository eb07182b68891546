//! A tool result never takes more than a quarter of the context window (src/agent/fit.rs), end to end: an
//! agent with a 4,096-token window (a local llama.cpp model's) reads a log many times that size. Without the
//! cut, every following request would be refused as too long, and compaction could not help, because the
//! result is part of the turn it keeps.
#![allow(clippy::unwrap_used, clippy::expect_used)]

#[path = "common/mock.rs"]
mod mock;
#[path = "common/tempdir.rs"]
mod tempdir;

use mock::{MockServer, scripted};
use serde_json::json;
use tempdir::TempDir;
use tooloop::{AgentOptions, StopReason};

#[test]
fn a_log_many_windows_long_reaches_the_model_cut_to_a_quarter_of_the_window_with_its_start_and_end() {
    let ws = TempDir::new("result-fit");
    let dir = &ws.0;
    let log: String = (0..1500).map(|i| format!("request {i}\n")).collect();
    std::fs::write(dir.join("app.log"), &log).unwrap();
    let steps = [json!({"name": "read_file", "input": {"path": "app.log"}}), json!("The last request was 1499.")];
    let mock = MockServer::start(&scripted("a long read", &steps));
    let options = json!({"model": "qwen2.5-coder", "api_key": "sk-ant-mock", "base_url": mock.base_url(),
        "builtin_tools": true, "workspace": dir, "sandbox": "off", "stream": false, "context_window": 4096});
    let agent = AgentOptions::from_value(options).unwrap().build().unwrap();
    let result = agent.run("what was the last request?", &mut |_| {}).unwrap();
    assert_eq!(result.stop_reason, Some(StopReason::EndTurn));

    let requests = mock.requests();
    assert_eq!(requests.len(), 2);
    let messages = requests[1]["body"]["messages"].as_array().unwrap();
    let sent = messages.last().unwrap()["content"][0]["content"].as_str().unwrap().to_string();
    assert!(sent.len() < log.len() / 3, "{} of {} bytes sent", sent.len(), log.len());
    assert!(sent.contains("characters of this result are not shown"), "{sent}");
    assert!(sent.contains("(4096 tokens)"), "{sent}");
    assert!(sent.contains("\trequest 0\n"), "the start is kept");
    assert!(sent.contains("\trequest 1499"), "the end is kept: {}", &sent[sent.len() - 300..]);
    // What the model saw is what the conversation keeps.
    let stored = serde_json::to_value(agent.messages()).unwrap();
    assert_eq!(stored[2]["content"][0]["content"], sent.as_str());

    // A large window leaves the same result whole (read_file's own 2,000-line cap is above 1,500 lines).
    let mock = MockServer::start(&scripted("a long read", &steps));
    let options = json!({"model": "claude-sonnet-4-6", "api_key": "sk-ant-mock", "base_url": mock.base_url(),
        "builtin_tools": true, "workspace": dir, "sandbox": "off", "stream": false});
    let agent = AgentOptions::from_value(options).unwrap().build().unwrap();
    agent.run("what was the last request?", &mut |_| {}).unwrap();
    let requests = mock.requests();
    let sent = requests[1]["body"]["messages"].as_array().unwrap().last().unwrap()["content"][0]["content"].to_string();
    assert!(!sent.contains("not shown"));
    assert!(sent.contains("request 750"));
}
