//! The tool results of a turn never take more than a quarter of the context window (src/agent/fit.rs), end
//! to end: an agent with a 4,096-token window (a local llama.cpp model's) reads a log many times that size,
//! once alone and once among the other commands of one turn. Without the cut, every following request would
//! be refused as too long, and compaction could not help, because the result is part of the turn it keeps.
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

/// The real model's draft that overflowed its window: `cat app.log`, the count, and more in one turn. Each
/// result used to get its own quarter, at the request's ratio of bytes to tokens (JSON's, three times a
/// log's), and the next request was refused as too long (4,625 tokens of 4,096).
#[test]
fn the_results_of_one_turn_share_a_quarter_of_the_window_and_a_small_one_is_never_cut() {
    let ws = TempDir::new("result-fit-turn");
    let dir = &ws.0;
    let log: String = (0..1500)
        .map(|i| {
            let level = if i % 40 == 7 { "ERROR" } else { "INFO" };
            format!("2026-01-01 12:{:02}:{:02} {level} worker-{} handled request {i}\n", i / 60 % 60, i % 60, i % 7)
        })
        .collect();
    std::fs::write(dir.join("app.log"), &log).unwrap();
    let calls = json!([
        {"type": "tool_use", "id": "toolu_a", "name": "bash", "input": {"command": "cat app.log"}},
        {"type": "tool_use", "id": "toolu_b", "name": "bash", "input": {"command": "grep -c ERROR app.log"}},
        {"type": "tool_use", "id": "toolu_c", "name": "bash", "input": {"command": "tail -n 300 app.log"}},
        {"type": "tool_use", "id": "toolu_d", "name": "bash", "input": {"command": "echo done"}},
    ]);
    let answer = |i: u32, content: serde_json::Value, stop: &str| {
        json!({"anthropic": {"id": format!("msg_{i}"), "type": "message", "role": "assistant",
            "model": "qwen2.5-coder", "content": content, "stop_reason": stop, "stop_sequence": null,
            "usage": {"input_tokens": 300, "output_tokens": 60}}})
    };
    let scenario = json!({"description": "a draft's commands in one turn", "responses": [
        answer(0, calls, "tool_use"), answer(1, json!([{"type": "text", "text": "38 errors."}]), "end_turn")]});
    let mock = MockServer::start(&scenario);
    let options = json!({"model": "qwen2.5-coder", "api_key": "sk-ant-mock", "base_url": mock.base_url(),
        "builtin_tools": true, "workspace": dir, "sandbox": "off", "stream": false, "context_window": 4096,
        "max_tokens": 512});
    let agent = AgentOptions::from_value(options).unwrap().build().unwrap();
    let result = agent.run("count the errors", &mut |_| {}).unwrap();
    assert_eq!(result.stop_reason, Some(StopReason::EndTurn));

    let requests = mock.requests();
    let results = requests[1]["body"]["messages"].as_array().unwrap().last().unwrap()["content"].clone();
    let text = |i: usize| results[i]["content"].as_str().unwrap().to_string();
    // Each of the log's characters costs about what Qwen2.5's tokenizer counts (1.8 characters a token): the
    // turn's results stay within a quarter of the window (1,024 tokens, and the two notes of what was left
    // out, about 80 each), not a quarter each.
    let tokens: f64 = (0..4).map(|i| tokens_of(&text(i))).sum();
    assert!(tokens <= 1200.0, "{tokens} tokens of results: {results}");
    assert!(text(0).contains("characters of this result are not shown"), "{}", text(0));
    assert!(text(0).starts_with("2026-01-01 12:00:00 INFO"), "the start is kept");
    assert!(text(1).starts_with("38"), "the count is whole: {}", text(1));
    assert!(text(2).contains("characters of this result are not shown"), "nothing was left for the tail");
    assert!(text(3).starts_with("done"), "{}", text(3));
}

/// src/agent/fit.rs's estimate, written out: a digit or a non-ASCII character a token, four ASCII letters one,
/// two other characters one.
fn tokens_of(text: &str) -> f64 {
    text.chars()
        .map(|c| match c {
            c if c.is_ascii_digit() || !c.is_ascii() => 1.0,
            c if c.is_ascii_alphabetic() => 0.25,
            _ => 0.5,
        })
        .sum()
}
