//! Long sessions: compaction against a mock server that enforces a context limit the way the API
//! does (400 "prompt is too long"), reports usage from its own token estimate, and answers summary requests
//! through a route. Every request that went out is checked: under the limit, and a valid API view.
#![allow(clippy::unwrap_used, clippy::expect_used)]

#[path = "common/mock.rs"]
mod mock;

#[path = "common/agent.rs"]
mod common;
#[path = "common/tempdir.rs"]
mod tempdir;

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use common::*;
use mock::{MockServer, scenario};
use serde_json::{Value, json};
use tempdir::TempDir;
use tooloop::compaction::{Method, Reason};
use tooloop::{Agent, AgentConfig, EntryRole, Event, Tool, ToolContext, ToolOutput};

const SUMMARY_MARK: &str = "You write the working memory";

/// `dump {part, bytes}`: returns `bytes` bytes of text naming the part; counts its calls.
fn dump_tool(calls: Arc<AtomicUsize>) -> Tool {
    Tool::new(
        "dump",
        "Dump one part of the data.",
        json!({"type": "object", "properties": {"part": {"type": "integer"}, "bytes": {"type": "integer"}},
               "required": ["part"]}),
        move |input: &Value, _: &ToolContext<'_>| {
            calls.fetch_add(1, Ordering::SeqCst);
            let part = input["part"].as_u64().unwrap_or(0);
            let bytes = input["bytes"].as_u64().unwrap_or(1000) as usize;
            let head = format!("part {part}: ");
            Ok(ToolOutput::Text(format!("{head}{}", "x".repeat(bytes.saturating_sub(head.len())))))
        },
    )
    .unwrap()
}

fn agent_on(mock: &MockServer, config: AgentConfig) -> (Agent, Arc<AtomicUsize>) {
    let agent = Agent::new(anthropic(mock), config);
    let calls = Arc::new(AtomicUsize::new(0));
    agent.tools().register(dump_tool(calls.clone())).unwrap();
    (agent, calls)
}

fn is_summary(r: &Value) -> bool {
    r["raw_body"].as_str().is_some_and(|b| b.contains(SUMMARY_MARK))
}

/// Every agent request (summary requests aside) is a valid view; returns (rejected, accepted) counts and the
/// largest accepted estimate.
fn check_requests(reqs: &[Value], limit: u64) -> (usize, usize, u64) {
    let (mut rejected, mut accepted, mut largest) = (0, 0, 0);
    for r in reqs.iter().filter(|r| r["path"] == "/v1/messages") {
        let tokens = r["tokens"].as_u64().expect("the mock records its estimate");
        if r["rejected"] == "context_limit" {
            rejected += 1;
            continue;
        }
        assert!(tokens <= limit, "an accepted request is over the limit: {tokens}");
        largest = largest.max(tokens);
        if !is_summary(r) {
            checked_messages(&r["body"]);
            accepted += 1;
        }
    }
    (rejected, accepted, largest)
}

fn compaction_config(window: Option<u64>) -> AgentConfig {
    AgentConfig { max_turns: None, context_window: window, ..config() }
}

fn tool_turn(i: usize, bytes: usize) -> Value {
    json!({"anthropic": {"id": format!("msg_{i}"), "type": "message", "role": "assistant", "model": "claude-sonnet-4-6",
        "content": [{"type": "text", "text": format!("Part {i}.")},
                    {"type": "tool_use", "id": format!("toolu_{i:04}"), "name": "dump", "input": {"part": i, "bytes": bytes}}],
        "stop_reason": "tool_use", "stop_sequence": null, "usage": {"input_tokens": 1, "output_tokens": 20}}})
}

fn final_turn(text: &str) -> Value {
    json!({"anthropic": {"id": "msg_final", "type": "message", "role": "assistant", "model": "claude-sonnet-4-6",
        "content": [{"type": "text", "text": text}], "stop_reason": "end_turn", "stop_sequence": null,
        "usage": {"input_tokens": 1, "output_tokens": 5}}})
}

#[test]
fn a_300_turn_tool_session_finishes_with_every_request_under_the_limit() {
    let mut sc = scenario("agent_compaction");
    let limit = 20_000;
    sc["context"]["limit"] = json!(limit);
    let mut responses: Vec<Value> = (1..=300).map(|i| tool_turn(i, 3000)).collect();
    responses.push(final_turn("done with 300 parts"));
    sc["responses"] = Value::Array(responses);
    let mock = MockServer::start(&sc);
    let (agent, calls) = agent_on(&mock, AgentConfig { cache: true, ..compaction_config(Some(limit)) });
    let mut compactions = Vec::new();
    let result = agent
        .run("Dump all 300 parts.", &mut |e| {
            if let Event::Compaction { method, reason, tokens_before, tokens_after, .. } = e {
                compactions.push((*method, *reason, *tokens_before, *tokens_after));
            }
        })
        .unwrap();
    assert_eq!(result.text, "done with 300 parts");
    assert_eq!(result.turns, 301);
    assert_eq!(calls.load(Ordering::SeqCst), 300, "every tool ran exactly once");
    let reqs = mock.requests();
    let (rejected, accepted, largest) = check_requests(&reqs, limit);
    assert_eq!(rejected, 0, "the threshold kept every request under the limit");
    assert_eq!(accepted, 301);
    assert!(largest > limit / 2, "the window was used, not wasted: largest request {largest}");
    assert!(compactions.len() >= 5, "{compactions:?}");
    for (method, reason, before, after) in &compactions {
        assert_eq!(*reason, Reason::Threshold);
        assert!(after < before, "{method:?}: {before} -> {after}");
    }
    assert!(compactions.iter().any(|c| c.0 == Method::Summary), "{compactions:?}");
    // The summary reached the model, and the first user message stayed verbatim.
    let last = reqs.iter().rev().find(|r| r["path"] == "/v1/messages" && !is_summary(r)).unwrap();
    let first = &last["body"]["messages"][0]["content"];
    assert_eq!(first[0]["text"], "Dump all 300 parts.");
    assert!(first.to_string().contains("SUMMARY: the user asked"), "{first}");
    // History keeps everything: 300 results, each compaction as a system entry.
    let history = agent.conversation().snapshot();
    assert_eq!(history.iter().filter(|e| e.role == EntryRole::Tool).count(), 300);
    let records = history.iter().filter(|e| tooloop::compaction::Compaction::of(e).is_some()).count();
    assert_eq!(records, compactions.len());
    // Summaries cost tokens: their usage is in the conversation's.
    assert!(agent.usage().output_tokens >= 301 * 5 + 30);
}

#[test]
fn the_reactive_path_compacts_once_when_the_api_says_the_prompt_is_too_long_and_retries() {
    let mock = MockServer::start(&scenario("agent_compaction"));
    // An unknown model and no configured window: nothing to compact against until the API refuses.
    let (agent, calls) = agent_on(&mock, AgentConfig { model: "mock-model".into(), ..compaction_config(None) });
    assert_eq!(agent.context_window(), None);
    let mut events = Vec::new();
    let result = agent
        .run("Dump all 30 parts.", &mut |e| {
            if let Event::Compaction { reason, method, .. } = e {
                events.push((*reason, *method));
            }
        })
        .unwrap();
    assert_eq!(result.text, "All 30 parts dumped.");
    assert_eq!(calls.load(Ordering::SeqCst), 30);
    let reqs = mock.requests();
    let (rejected, accepted, _) = check_requests(&reqs, 8000);
    assert!(rejected >= 1, "the limit was hit");
    assert_eq!(accepted, 31);
    assert!(!events.is_empty() && events.iter().all(|(r, _)| *r == Reason::Overflow), "{events:?}");
    // Each refusal is followed by a compaction and the same turn again: never two refusals in a row.
    let agent_reqs: Vec<&Value> = reqs.iter().filter(|r| r["path"] == "/v1/messages" && !is_summary(r)).collect();
    for pair in agent_reqs.windows(2) {
        assert!(!(pair[0]["rejected"] == "context_limit" && pair[1]["rejected"] == "context_limit"));
    }
}

#[test]
fn a_failed_summary_falls_back_to_dropping_old_turns_and_the_run_finishes() {
    let mut sc = scenario("agent_compaction");
    sc["routes"][0]["response"] = json!({"status": 500, "headers": {"x-should-retry": "false"},
        "json": {"type": "error", "error": {"type": "api_error", "message": "summarizer down"}}});
    // Results too small to be worth clearing: only a summary (or the fallback) can make room.
    for r in sc["responses"].as_array_mut().unwrap() {
        if let Some(input) = r.pointer_mut("/anthropic/content/1/input").and_then(Value::as_object_mut) {
            input.insert("bytes".into(), json!(1800));
        }
    }
    // The model plans first: its todo list must survive the dropped turns.
    let todo = json!({"anthropic": {"id": "msg_plan", "type": "message", "role": "assistant", "model": "m",
        "content": [{"type": "tool_use", "id": "toolu_plan", "name": "todo_write", "input": {"todos": [
            {"content": "dump every part", "status": "in_progress"}, {"content": "report back", "status": "pending"}]}}],
        "stop_reason": "tool_use", "stop_sequence": null, "usage": {"input_tokens": 1, "output_tokens": 9}}});
    sc["responses"].as_array_mut().unwrap().insert(0, todo);
    let mock = MockServer::start(&sc);
    let (agent, calls) = agent_on(&mock, compaction_config(Some(8000)));
    agent.tools().register(tooloop::todo::tool()).unwrap();
    let mut fallbacks = Vec::new();
    let result = agent
        .run("Dump all 30 parts.", &mut |e| {
            if let Event::Compaction { method, fallback_reason, .. } = e {
                if *method == Method::Drop {
                    fallbacks.push(fallback_reason.clone().unwrap_or_default());
                }
            }
        })
        .unwrap();
    assert_eq!(result.text, "All 30 parts dumped.");
    assert_eq!(calls.load(Ordering::SeqCst), 30);
    let (rejected, _, _) = check_requests(&mock.requests(), 8000);
    assert_eq!(rejected, 0);
    assert!(!fallbacks.is_empty(), "the summary failed, so turns were dropped");
    assert!(fallbacks[0].contains("summarizer down"), "{fallbacks:?}");
    let view = agent.messages();
    let first = serde_json::to_string(&view[0]).unwrap();
    assert!(first.contains("earlier messages were removed"), "{first}");
    assert!(first.contains("dump every part"), "the todo list is kept: {first}");
}

#[test]
fn clearing_old_large_tool_results_comes_first_when_it_is_enough() {
    // Three huge results then small ones: clearing the huge ones frees enough, no summary is needed.
    let mut sc = scenario("agent_compaction");
    let mut responses: Vec<Value> = (1..=3).map(|i| tool_turn(i, 9000)).collect();
    responses.extend((4..=12).map(|i| tool_turn(i, 100)));
    responses.push(final_turn("ok"));
    sc["responses"] = Value::Array(responses);
    sc["context"]["limit"] = json!(12_000);
    let mock = MockServer::start(&sc);
    let (agent, _) = agent_on(&mock, compaction_config(Some(12_000)));
    agent.update_config(|c| c.compact_threshold = 0.6);
    let mut methods = Vec::new();
    agent
        .run("go", &mut |e| {
            if let Event::Compaction { method, cleared, .. } = e {
                methods.push((*method, *cleared));
            }
        })
        .unwrap();
    assert_eq!(methods.first().map(|m| m.0), Some(Method::ClearToolResults), "{methods:?}");
    assert!(methods[0].1 >= 1);
    assert!(mock.requests().iter().all(|r| !is_summary(r)), "no summary request was needed");
    let text = serde_json::to_string(&agent.messages()).unwrap();
    assert!(text.contains("cleared to save context: 9"), "the note gives the size");
}

#[test]
fn a_session_resumes_after_a_compaction_with_the_compacted_view_and_the_full_history() {
    // On both session stores: the JSONL file and a SQLite database session.
    for name in ["s.jsonl", "s.db#s"] {
        resumes_after_a_compaction(name);
    }
}

fn resumes_after_a_compaction(name: &str) {
    let dir = TempDir::new("compaction-session");
    let path = dir.file(name);
    let mut sc = scenario("agent_compaction");
    // Results under the clearing size: making room takes a summary.
    sc["responses"] =
        Value::Array((1..=20).map(|i| tool_turn(i, 1800)).chain([final_turn("first run done")]).collect());
    let mock = MockServer::start(&sc);
    let (agent, _) = agent_on(&mock, compaction_config(Some(8000)));
    agent.attach_store(tooloop::store::open(&path, None).unwrap()).unwrap();
    let mut methods = Vec::new();
    agent
        .run("Dump twenty parts.", &mut |e| {
            if let Event::Compaction { method, .. } = e {
                methods.push(*method);
            }
        })
        .unwrap();
    assert!(methods.contains(&Method::Summary), "{methods:?}");
    let view_before = agent.messages();
    let history_len = agent.conversation().len();
    drop(agent);
    if name.ends_with(".jsonl") {
        let text = std::fs::read_to_string(&path).unwrap();
        assert!(text.lines().any(|l| l.starts_with(r#"{"type":"compaction""#)), "the session records the compaction");
    } else {
        let records = tooloop::session_sqlite::SqliteSession::records(&dir.file("s.db"), "s").unwrap().records;
        let compactions = records
            .iter()
            .filter(|r| matches!(r, tooloop::session_sqlite::Record::Entry(e) if tooloop::compaction::Compaction::of(e).is_some()))
            .count();
        assert!(compactions >= 1, "the database records the compaction");
    }

    let mut sc2 = scenario("agent_compaction");
    sc2["responses"] = json!([tool_turn(21, 1800), final_turn("second run done")]);
    let mock2 = MockServer::start(&sc2);
    let (resumed, calls) = agent_on(&mock2, compaction_config(Some(8000)));
    let report = resumed.attach_store(tooloop::store::open(&path, None).unwrap()).unwrap();
    assert!(report.skipped.is_empty(), "{:?}", report.skipped);
    assert_eq!(resumed.conversation().len(), history_len, "the full history is loaded");
    assert_eq!(resumed.messages(), view_before, "the compacted view is what a resumed session sends");
    let result = resumed.run("One more part.", &mut |_| {}).unwrap();
    assert_eq!(result.text, "second run done");
    assert_eq!(calls.load(Ordering::SeqCst), 1);
    let reqs = mock2.requests();
    check_requests(&reqs, 8000);
    let first = &reqs.iter().find(|r| !is_summary(r)).unwrap()["body"]["messages"];
    assert!(first.to_string().contains("SUMMARY: the user asked"), "the resumed request carries the summary");
}

#[test]
fn compact_on_demand_takes_instructions_and_returns_the_summary() {
    let mut sc = scenario("agent_compaction");
    sc["responses"] = Value::Array((1..=6).map(|i| tool_turn(i, 500)).chain([final_turn("six done")]).collect());
    let mock = MockServer::start(&sc);
    let (agent, _) = agent_on(&mock, compaction_config(None));
    agent.run("Dump six parts.", &mut |_| {}).unwrap();
    let before = agent.messages().len();
    let mut seen = 0;
    let record = agent.compact(Some("keep the part numbers"), &mut |_| seen += 1).unwrap().expect("compacted");
    assert_eq!(record.method, Method::Summary);
    assert_eq!(record.reason, Reason::Manual);
    assert!(record.summary.as_deref().unwrap().starts_with("SUMMARY:"));
    assert_eq!(seen, 1, "one compaction event");
    assert!(agent.messages().len() < before);
    assert_valid_view(&agent.messages());
    let summary_req = mock.requests().into_iter().find(is_summary).unwrap();
    let asked = summary_req["raw_body"].as_str().unwrap();
    assert!(asked.contains("keep the part numbers"));
    assert!(asked.contains("part 2: xxx"), "the transcript holds the tool results");
    assert!(!asked.contains("\"tools\""), "the summary request offers no tools");
}

#[test]
fn count_tokens_asks_the_api_and_the_estimate_tracks_it() {
    let mut sc = scenario("agent_compaction");
    sc["responses"] = json!([tool_turn(1, 4000), final_turn("ok")]);
    let mock = MockServer::start(&sc);
    let (agent, _) = agent_on(&mock, compaction_config(None));
    agent.run("Dump one part.", &mut |_| {}).unwrap();
    let counted = agent.count_tokens(None).unwrap();
    let reqs = mock.requests();
    let ct = reqs.iter().find(|r| r["path"] == "/v1/messages/count_tokens").expect("the endpoint was asked");
    assert_eq!(ct["tokens"].as_u64(), Some(counted));
    assert!(ct["body"].get("max_tokens").is_none() && ct["body"].get("stream").is_none());
    let estimate = agent.estimate_tokens(None);
    let diff = (estimate as f64 - counted as f64).abs() / counted as f64;
    assert!(diff < 0.1, "calibrated estimate {estimate} vs counted {counted}");
    let with_input = agent.count_tokens(Some(vec![tooloop::ContentBlock::text("y".repeat(4000))])).unwrap();
    assert!(with_input >= counted + 900, "{with_input} vs {counted}");
}

#[test]
fn a_prompt_too_long_with_nothing_to_compact_surfaces_the_api_error_after_one_request() {
    let mock = MockServer::start(&json!({"responses": [{"status": 400, "headers": {"x-should-retry": "false"},
        "json": {"type": "error", "error": {"type": "invalid_request_error",
                 "message": "prompt is too long: 250000 tokens > 200000 maximum"}}}]}));
    let (agent, _) = agent_on(&mock, compaction_config(None));
    let err = agent.run(&"z".repeat(1000), &mut |_| {}).unwrap_err();
    assert!(err.to_string().contains("prompt is too long"), "{err}");
    assert_eq!(mock.requests().len(), 1, "no summary request for a lone message (nor for the failed turn)");
    assert_valid_view(&agent.messages());
}

#[test]
fn a_local_server_refusing_the_context_size_makes_the_agent_compact_and_finish() {
    // llama.cpp's llama-server answers a request over its context with its own 400 (copied from the real
    // server, both wires): the agent must read it as an overflow, compact, and send the turn again.
    let mut sc = scenario("agent_compaction");
    let mut responses: Vec<Value> = (1..=6).map(|i| tool_turn(i, 3000)).collect();
    responses.extend([
        json!({"status": 400, "headers": {"x-should-retry": "false"}, "json": {"error": {"code": 400,
            "message": "request (7494 tokens) exceeds the available context size (4096 tokens), try increasing it",
            "type": "exceed_context_size_error", "n_prompt_tokens": 7494, "n_ctx": 4096}}}),
        final_turn("done"),
    ]);
    sc["responses"] = Value::Array(responses);
    let mock = MockServer::start(&sc);
    // A window the session stays under (no threshold compaction), so only the refusal can start one.
    let (agent, _) = agent_on(&mock, compaction_config(Some(8000)));
    let mut overflow = false;
    let result = agent
        .run("Dump six parts.", &mut |e| {
            if let Event::Compaction { reason, .. } = e {
                overflow |= *reason == Reason::Overflow;
            }
        })
        .unwrap();
    assert_eq!(result.text, "done");
    assert!(overflow, "the refusal was read as an overflow and compacted");
    assert_valid_view(&agent.messages());
}

#[test]
fn a_summary_request_counts_toward_max_cost_usd_and_is_not_sent_past_it() {
    let mut sc = scenario("agent_compaction");
    sc["responses"] = Value::Array((1..=6).map(|i| tool_turn(i, 500)).chain([final_turn("six done")]).collect());
    let mock = MockServer::start(&sc);
    let (agent, _) = agent_on(&mock, AgentConfig { max_cost_usd: Some(1.0), ..compaction_config(None) });
    agent.run("Dump six parts.", &mut |_| {}).unwrap();
    // Under the cap: the summary is asked for, and what it cost is part of the agent's spend.
    let before = agent.spent_usd();
    let record = agent.compact(None, &mut |_| {}).unwrap().expect("compacted");
    assert_eq!(record.method, Method::Summary);
    let summary = mock.requests().into_iter().find(is_summary).expect("the summary request went out");
    assert!(summary["tokens"].as_u64().unwrap() > 0);
    assert!(agent.spent_usd() > before, "the summary's cost counts: {} -> {}", before, agent.spent_usd());
    // A cap the summary would pass: it is never sent; the compaction falls back to dropping old turns.
    sc["responses"] = Value::Array((1..=6).map(|i| tool_turn(i, 500)).chain([final_turn("six done")]).collect());
    mock.load(&sc);
    let (agent, _) = agent_on(&mock, AgentConfig { max_cost_usd: Some(1.0), ..compaction_config(None) });
    agent.run("Dump six parts.", &mut |_| {}).unwrap();
    let spent = agent.spent_usd();
    agent.update_config(|c| c.max_cost_usd = Some(spent + 0.001));
    let record = agent.compact(None, &mut |_| {}).unwrap().expect("compacted");
    assert_eq!(record.method, Method::Drop);
    assert!(record.fallback_reason.as_deref().unwrap_or("").contains("max_cost_usd"), "{record:?}");
    assert!(!mock.requests().iter().any(is_summary), "no summary request past the cap");
    assert_eq!(agent.spent_usd(), spent);
    assert_valid_view(&agent.messages());
}

#[test]
fn a_request_sent_again_after_an_overflow_compaction_must_still_fit_under_max_cost_usd() {
    let mut sc = scenario("agent_compaction");
    // The summary is expensive (two million output tokens): after it, nothing more fits under the cap.
    sc["routes"][0]["response"]["anthropic"]["usage"]["output_tokens"] = json!(2_000_000);
    sc["responses"] = Value::Array((1..=60).map(|i| tool_turn(i, 1500)).chain([final_turn("never")]).collect());
    let mock = MockServer::start(&sc);
    // A window larger than the server's real limit: the threshold is never reached, the server refuses.
    let (agent, calls) = agent_on(&mock, AgentConfig { max_cost_usd: Some(5.0), ..compaction_config(Some(20_000)) });
    let result = agent.run("Dump 60 parts.", &mut |_| {}).unwrap();
    assert_eq!(result.stop_reason, Some(tooloop::StopReason::Budget));
    let ran = calls.load(Ordering::SeqCst);
    assert!((2..60).contains(&ran), "{ran}");
    let reqs = mock.requests();
    let refused = reqs.iter().filter(|r| r["rejected"] == "context_limit").count();
    assert_eq!(refused, 1, "one request was too long for the server");
    assert_eq!(reqs.iter().filter(|r| is_summary(r)).count(), 1, "the overflow was compacted");
    let after_summary = reqs.iter().skip_while(|r| !is_summary(r)).skip(1).count();
    assert_eq!(after_summary, 0, "the turn was not sent again past the cap");
    assert!(agent.spent_usd() > 5.0, "the summary itself was allowed by its estimate: {}", agent.spent_usd());
    assert_eq!(result.turns as usize, ran, "the turn that was not sent again is not counted");
    assert_valid_view(&agent.messages());
}
