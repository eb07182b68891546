//! The spend ledger against the mock server: every request is priced at the higher of the requested and the
//! answering model's price, an answer without usage counts by its estimate, and the cap holds for a child
//! agent's requests and for compaction summaries as for the agent's own.
#![allow(clippy::unwrap_used, clippy::expect_used)]

#[path = "common/mock.rs"]
mod mock;

#[path = "common/agent.rs"]
mod common;

use common::*;
use mock::{MockServer, scenario};
use serde_json::{Value, json};
use tooloop::{Agent, AgentConfig, AgentOptions, StopReason, Tool, ToolContext, ToolOutput};

/// Claude Sonnet 4.6: $3 in, $15 out per million tokens.
const MODEL: &str = "claude-sonnet-4-6";

fn look() -> Tool {
    Tool::new("look", "Look.", json!({"type": "object"}), |_: &Value, _: &ToolContext<'_>| {
        Ok(ToolOutput::Text("seen".into()))
    })
    .unwrap()
}

/// A turn that calls `look`, answered as `model`, with `usage` (`Value::Null`: none reported).
fn look_turn(i: usize, model: &str, usage: Value) -> Value {
    let mut msg = json!({"id": format!("msg_{i}"), "type": "message", "role": "assistant", "model": model,
        "content": [{"type": "tool_use", "id": format!("toolu_{i:02}"), "name": "look", "input": {"i": i}}],
        "stop_reason": "tool_use", "stop_sequence": null});
    if !usage.is_null() {
        msg["usage"] = usage;
    }
    json!({"anthropic": msg})
}

/// 100k tokens in ($0.30) and 1k out ($0.015) on Sonnet: $0.315 a request.
fn big() -> Value {
    json!({"input_tokens": 100_000, "output_tokens": 1000})
}

fn capped(mock: &MockServer, cap: f64, max_tokens: u32) -> Agent {
    let agent =
        Agent::new(anthropic(mock), AgentConfig { max_cost_usd: Some(cap), max_tokens, max_turns: None, ..config() });
    agent.tools().register(look()).unwrap();
    agent
}

fn messages_requests(mock: &MockServer) -> usize {
    mock.requests().iter().filter(|r| r["path"] == "/v1/messages").count()
}

#[test]
fn a_server_answering_as_an_unpriced_model_is_charged_the_requested_models_price() {
    // The server says every answer came from `claude-mock-1`, a name without a price: before, each request
    // cost $0 and a $1 cap let all ten through ($3.15 at the price asked for).
    let responses: Vec<Value> = (0..10).map(|i| look_turn(i, "claude-mock-1", big())).collect();
    let mock = MockServer::start(&json!({"responses": responses}));
    let agent = capped(&mock, 1.0, 1024);
    let r = agent.run("go", &mut |_| {}).unwrap();
    assert_eq!(r.stop_reason, Some(StopReason::Budget));
    assert_eq!(messages_requests(&mock), 3, "three requests of $0.315 fit under $1, a fourth does not");
    let spent = agent.spent_usd();
    assert!((spent - 0.945).abs() < 1e-9, "{spent}");
    assert!((r.cost_usd.unwrap() - 0.945).abs() < 1e-9, "{:?}", r.cost_usd);
    assert!((agent.cost_usd().unwrap() - 0.945).abs() < 1e-9, "the conversation's cost is what was charged");
    assert_valid_view(&agent.messages());
}

#[test]
fn an_answer_without_usage_counts_its_measured_input_and_max_tokens() {
    // No usage in any answer: before, each request counted as free and the cap never triggered. Now each
    // counts as its measured input plus max_tokens (20k out at $15/M: $0.30), so three fit under $1.
    let responses: Vec<Value> = (0..10).map(|i| look_turn(i, MODEL, Value::Null)).collect();
    let mock = MockServer::start(&json!({"responses": responses}));
    let agent = capped(&mock, 1.0, 20_000);
    let r = agent.run("go", &mut |_| {}).unwrap();
    assert_eq!(r.stop_reason, Some(StopReason::Budget));
    assert_eq!(messages_requests(&mock), 3);
    let spent = agent.spent_usd();
    assert!(spent > 0.9 && spent <= 1.0, "{spent}");
    assert_valid_view(&agent.messages());
}

#[test]
fn a_child_agents_requests_are_held_against_the_parents_cap() {
    // The parent hands a task to a child; every answer comes as `claude-mock-1`. The child's own requests
    // must stop at the parent's cap, not after its max_turns.
    let mut responses = vec![json!({"anthropic": {"id": "msg_p", "type": "message", "role": "assistant",
        "model": "claude-mock-1", "stop_reason": "tool_use", "stop_sequence": null, "usage": big(),
        "content": [{"type": "tool_use", "id": "toolu_task", "name": "task",
                     "input": {"description": "d", "prompt": "look around", "agent_type": "explore"}}]}})];
    responses.extend((0..12).map(|i| look_turn(i, "claude-mock-1", big())));
    let mock = MockServer::start(&json!({"responses": responses}));
    let agent = AgentOptions::from_value(json!({
        "model": MODEL, "base_url": mock.base_url(), "api_key": KEY, "max_retries": 0, "max_tokens": 1024,
        "max_cost_usd": 1.0, "subagents": {"explore": {"description": "looks"}}
    }))
    .unwrap()
    .build()
    .unwrap();
    agent.tools().register(look()).unwrap();
    let r = agent.run("go", &mut |_| {}).unwrap();
    assert_eq!(messages_requests(&mock), 3, "the parent's request and two of the child's");
    assert!(r.tool_calls[0].is_error && r.tool_calls[0].output.as_str().unwrap().contains("max_cost_usd"));
    assert_eq!(r.stop_reason, Some(StopReason::Budget));
    let spent = agent.spent_usd();
    assert!((spent - 0.945).abs() < 1e-9, "the child's requests are in the parent's spend: {spent}");
    assert!((r.cost_usd.unwrap() - 0.945).abs() < 1e-9, "{:?}", r.cost_usd);
}

#[test]
fn a_compaction_summary_is_charged_even_answered_as_an_unpriced_model_without_usage() {
    let mut sc = scenario("agent_compaction");
    // The mock would report usage from its own estimate: this server reports none.
    sc["context"]["usage"] = json!(false);
    let summary = &mut sc["routes"][0]["response"]["anthropic"];
    summary["model"] = json!("claude-mock-1");
    summary.as_object_mut().unwrap().remove("usage");
    sc["responses"] = Value::Array(
        (0..6)
            .map(|i| look_turn(i, MODEL, json!({"input_tokens": 10, "output_tokens": 10})))
            .chain([json!({"anthropic": {"id": "msg_f", "type": "message", "role": "assistant", "model": MODEL,
                "content": [{"type": "text", "text": "done"}], "stop_reason": "end_turn", "stop_sequence": null,
                "usage": {"input_tokens": 10, "output_tokens": 10}}})])
            .collect(),
    );
    let mock = MockServer::start(&sc);
    let agent = capped(&mock, 100.0, 1024);
    agent.run("Look six times.", &mut |_| {}).unwrap();
    let before = agent.spent_usd();
    let record = agent.compact(None, &mut |_| {}).unwrap().expect("compacted");
    assert_eq!(record.method, tooloop::compaction::Method::Summary);
    // Charged as its measured input plus the summary's max_tokens (at least 1024) at the asked model's price.
    let charged = agent.spent_usd() - before;
    assert!(charged >= 1024.0 * 15.0 / 1e6, "the summary was charged ${charged}");
}

#[test]
fn agents_counted_in_one_batch_ledger_stop_at_its_cap_child_requests_included() {
    // Two agents of a batch, neither with a cap of its own: one hands its work to a child agent. Every request
    // ($0.315) is held in the batch's ledger, so together they send three and stop at its $1.
    let mut responses = vec![json!({"anthropic": {"id": "msg_p", "type": "message", "role": "assistant",
        "model": MODEL, "stop_reason": "tool_use", "stop_sequence": null, "usage": big(),
        "content": [{"type": "tool_use", "id": "toolu_task", "name": "task",
                     "input": {"description": "d", "prompt": "look around", "agent_type": "explore"}}]}})];
    responses.extend((0..12).map(|i| look_turn(i, MODEL, big())));
    let mock = MockServer::start(&json!({"responses": responses}));
    let batch = tooloop::ledger::Ledger::new(Some(1.0));
    let agent = AgentOptions::from_value(json!({
        "model": MODEL, "base_url": mock.base_url(), "api_key": KEY, "max_retries": 0, "max_tokens": 1024,
        "subagents": {"explore": {"description": "looks"}}
    }))
    .unwrap()
    .build()
    .unwrap();
    agent.tools().register(look()).unwrap();
    agent.join_ledger(Some(batch.clone()));
    let r = agent.run("go", &mut |_| {}).unwrap();
    assert_eq!(messages_requests(&mock), 3, "the parent's request and two of the child's");
    assert_eq!(r.stop_reason, Some(StopReason::Budget));
    assert!(batch.exhausted());
    assert!((batch.spent() - 0.945).abs() < 1e-9, "{}", batch.spent());
    // A second agent of the batch sends nothing: the batch's budget is spent.
    let other = capped(&mock, 100.0, 1024);
    other.join_ledger(Some(batch.clone()));
    let r = other.run("go", &mut |_| {}).unwrap();
    assert_eq!((r.stop_reason, r.turns), (Some(StopReason::Budget), 0));
    assert_eq!(messages_requests(&mock), 3);
    assert_eq!(batch.reserved(), 0.0, "nothing is left held");
}
