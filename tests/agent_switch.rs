//! Switching models and providers mid-conversation (`Agent::set_model`) and falling back to other models
//! within a run (`fallback_models`), through the real providers against two mock servers: what each server
//! received is checked (no foreign signature, tool ids valid for its wire, every call answered), and the
//! event, the session record and the spend.
#![allow(clippy::unwrap_used, clippy::expect_used)]

#[path = "common/mock.rs"]
mod mock;

use mock::MockServer;
use serde_json::{Value, json};
use tooloop::options::AgentOptions;
use tooloop::provider::Secret;
use tooloop::{Agent, EntryRole, Event, ModelSpec, Protocol, Tool, ToolContext, ToolOutput};

fn anthropic_turn(model: &str, content: Value, stop: &str) -> Value {
    json!({"anthropic": {"id": "msg", "type": "message", "role": "assistant", "model": model, "content": content,
        "stop_reason": stop, "stop_sequence": null, "usage": {"input_tokens": 1000, "output_tokens": 100}}})
}

fn openai_turn(model: &str, message: Value, finish: &str) -> Value {
    json!({"openai": {"id": "c", "object": "chat.completion", "created": 1, "model": model,
        "choices": [{"index": 0, "message": message, "finish_reason": finish}],
        "usage": {"prompt_tokens": 1000, "completion_tokens": 100, "total_tokens": 1100}}})
}

fn error(status: u16, kind: &str, message: &str) -> Value {
    json!({"status": status, "headers": {"retry-after-ms": "1"},
        "json": {"type": "error", "error": {"type": kind, "message": message}}})
}

fn agent(options: Value) -> Agent {
    let agent = AgentOptions::from_value(options).unwrap().build().unwrap();
    agent
        .tools()
        .register(
            Tool::new("f", "a tool", json!({"type": "object"}), |_: &Value, _: &ToolContext<'_>| {
                Ok(ToolOutput::Text("f ran".into()))
            })
            .unwrap(),
        )
        .unwrap();
    agent
}

fn bodies(mock: &MockServer) -> Vec<Value> {
    mock.requests().into_iter().map(|r| r["body"].clone()).collect()
}

/// Every tool call id in an Anthropic body, with the ids its results answer.
fn anthropic_ids(body: &Value) -> Vec<String> {
    let mut ids = Vec::new();
    for m in body["messages"].as_array().unwrap() {
        for b in m["content"].as_array().unwrap() {
            for k in ["id", "tool_use_id"] {
                if let (Some(id), true) = (b[k].as_str(), b["type"] == "tool_use" || b["type"] == "tool_result") {
                    ids.push(id.to_string());
                }
            }
        }
    }
    ids
}

#[test]
fn a_conversation_goes_anthropic_to_openai_and_back_with_every_request_valid() {
    let a = MockServer::start(&json!({"responses": [
        anthropic_turn("claude-sonnet-4-6", json!([
            {"type": "thinking", "thinking": "use f", "signature": "SIG-ANTHROPIC-1"},
            {"type": "tool_use", "id": "toolu_a1", "name": "f", "input": {}}]), "tool_use"),
        anthropic_turn("claude-sonnet-4-6", json!([
            {"type": "thinking", "thinking": "done", "signature": "SIG-ANTHROPIC-2"},
            {"type": "text", "text": "first answer"}]), "end_turn"),
        anthropic_turn("claude-sonnet-4-6", json!([{"type": "text", "text": "third answer"}]), "end_turn"),
    ]}));
    let b = MockServer::start(&json!({"responses": [
        openai_turn("gpt-4o", json!({"role": "assistant", "content": null, "reasoning_content": "call f twice",
            "tool_calls": [
                {"id": "call:0", "type": "function", "function": {"name": "f", "arguments": "{}"}},
                {"id": "functions.f:1", "type": "function", "function": {"name": "f", "arguments": "{}"}}]}),
            "tool_calls"),
        openai_turn("gpt-4o", json!({"role": "assistant", "content": "second answer"}), "stop"),
    ]}));
    let agent = agent(json!({"provider": "anthropic", "model": "claude-sonnet-4-6", "api_key": "sk-a",
        "base_url": a.base_url(), "max_retries": 0, "cache": false,
        "thinking": {"type": "enabled", "budget_tokens": 2048}}));
    assert_eq!(agent.run("one", &mut |_| {}).unwrap().text, "first answer");
    agent
        .set_model(ModelSpec {
            model: "gpt-4o".into(),
            provider: Some(Protocol::OpenAi),
            base_url: Some(format!("{}/v1", b.base_url())),
            api_key: Some(Secret::new("sk-b")),
            ..Default::default()
        })
        .unwrap();
    assert_eq!(agent.run("two", &mut |_| {}).unwrap().text, "second answer");
    // Back to Anthropic: its key and URL are the agent's own options again.
    agent.set_model(ModelSpec { provider: Some(Protocol::Anthropic), ..ModelSpec::new("claude-sonnet-4-6") }).unwrap();
    assert_eq!(agent.run("three", &mut |_| {}).unwrap().text, "third answer");

    // OpenAI never saw a signature, and got every Anthropic call with its result.
    for body in bodies(&b) {
        let raw = body.to_string();
        assert!(!raw.contains("SIG-ANTHROPIC"), "a signature went to OpenAI: {raw}");
        assert!(!raw.contains("\"thinking\""), "{raw}");
        let msgs = body["messages"].as_array().unwrap();
        let call = msgs.iter().position(|m| m["tool_calls"][0]["id"] == "toolu_a1").unwrap();
        assert_eq!(msgs[call + 1]["role"], "tool");
        assert_eq!(msgs[call + 1]["tool_call_id"], "toolu_a1");
    }
    // Back on Anthropic: its own signatures come back as made, OpenAI's ids are mapped to its pattern, in the
    // calls and their results alike, and the reasoning without a signature is not sent as thinking.
    let third = bodies(&a).pop().unwrap();
    let raw = third.to_string();
    assert!(raw.contains("SIG-ANTHROPIC-1") && raw.contains("SIG-ANTHROPIC-2"), "{raw}");
    assert!(!raw.contains("call f twice"), "another provider's reasoning from a closed turn: {raw}");
    let ids = anthropic_ids(&third);
    assert_eq!(ids.len(), 6, "{ids:?}");
    for id in &ids {
        assert!(id.chars().all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-'), "{id}");
    }
    let thinking_blocks = third["messages"]
        .as_array()
        .unwrap()
        .iter()
        .flat_map(|m| m["content"].as_array().unwrap().iter())
        .filter(|b| b["type"] == "thinking")
        .all(|b| b["signature"].as_str().is_some_and(|s| s.starts_with("SIG-ANTHROPIC")));
    assert!(thinking_blocks);
    // The store says who made each turn, and notes each switch.
    let history = agent.conversation().snapshot();
    let makers: Vec<(Option<String>, Option<String>)> = history
        .iter()
        .filter(|e| e.role == EntryRole::Assistant)
        .map(|e| (e.provider.clone(), e.model.clone()))
        .collect();
    assert_eq!(makers[0].0.as_deref(), Some("anthropic"));
    assert_eq!(makers[2], (Some("openai".into()), Some("gpt-4o".into())));
    assert_eq!(makers[4].0.as_deref(), Some("anthropic"));
    let switches = history.iter().filter(|e| e.meta.contains_key("model_switch")).count();
    assert_eq!(switches, 2);
}

fn fallback_events(events: &[Event]) -> Vec<Value> {
    events
        .iter()
        .filter(|e| matches!(e, Event::ModelFallback { .. }))
        .map(|e| serde_json::to_value(e).unwrap())
        .collect()
}

/// One fallback case: the primary on `a` fails its second turn with `failure` (repeated for each try), the
/// fallback on `b` answers it.
fn falls_back(failure: Value, tries: usize, reason: &str, other_provider: bool) {
    let mut primary = vec![anthropic_turn(
        "claude-sonnet-4-6",
        json!([{"type": "thinking", "thinking": "call f", "signature": "SIG-PRIMARY"},
               {"type": "tool_use", "id": "toolu_p1", "name": "f", "input": {}}]),
        "tool_use",
    )];
    primary.extend(std::iter::repeat_n(failure, tries));
    let (a, b);
    let fallback = if other_provider {
        a = MockServer::start(&json!({"responses": primary}));
        b = MockServer::start(&json!({"responses": [
            openai_turn("gpt-4o", json!({"role": "assistant", "content": "answered by the fallback"}), "stop")]}));
        json!({"provider": "openai", "model": "gpt-4o", "base_url": format!("{}/v1", b.base_url()), "api_key": "sk-b"})
    } else {
        primary.push(anthropic_turn(
            "claude-haiku-4-5",
            json!([{"type": "text", "text": "answered by the fallback"}]),
            "end_turn",
        ));
        a = MockServer::start(&json!({"responses": primary}));
        b = MockServer::start(&json!({"responses": []}));
        json!("claude-haiku-4-5")
    };
    let dir = tempfile_dir();
    let session = dir.join("s.jsonl");
    let agent = agent(json!({"provider": "anthropic", "model": "claude-sonnet-4-6", "api_key": "sk-a",
        "base_url": a.base_url(), "max_retries": tries - 1, "cache": false, "session": session,
        "thinking": {"type": "enabled", "budget_tokens": 2048}, "max_cost_usd": 5.0,
        "fallback_models": [fallback]}));
    let mut events = Vec::new();
    let result = agent.run("go", &mut |e| events.push(e.clone())).unwrap();
    assert_eq!(result.text, "answered by the fallback");
    let fell = fallback_events(&events);
    assert_eq!(fell.len(), 1, "{events:?}");
    let to_model = if other_provider { "gpt-4o" } else { "claude-haiku-4-5" };
    assert_eq!(fell[0]["from_model"], "claude-sonnet-4-6");
    assert_eq!(fell[0]["to_model"], to_model);
    assert_eq!(fell[0]["to_provider"], if other_provider { "openai" } else { "anthropic" });
    assert_eq!(fell[0]["reason"], reason);
    // Spend and usage count both models' turns, each at its own price.
    assert_eq!(result.usage.input_tokens, 2000);
    let primary_cost = (1000.0 * 3.0 + 100.0 * 15.0) / 1e6;
    let fallback_cost = if other_provider { (1000.0 * 2.5 + 100.0 * 10.0) / 1e6 } else { (1000.0 + 500.0) / 1e6 };
    assert!((result.cost_usd.unwrap() - (primary_cost + fallback_cost)).abs() < 1e-9, "{:?}", result.cost_usd);
    assert!((agent.spent_usd() - (primary_cost + fallback_cost)).abs() < 1e-9);
    // The session says which model answered, and records the fallback.
    let text = std::fs::read_to_string(&session).unwrap();
    let lines: Vec<Value> = text.lines().map(|l| serde_json::from_str::<Value>(l).unwrap()["entry"].clone()).collect();
    assert!(lines.iter().any(|l| l["meta"]["model_fallback"]["to_model"] == to_model), "{text}");
    let answered = lines.iter().rev().find(|l| l["role"] == "assistant" && l["status"] == "complete").unwrap();
    assert_eq!(answered["model"], to_model);
    // The fallback's request: valid for its wire, no foreign signature, the call answered.
    let last = if other_provider { bodies(&b).pop().unwrap() } else { bodies(&a).pop().unwrap() };
    let raw = last.to_string();
    assert!(!raw.contains("SIG-PRIMARY"), "the primary's signature went to {to_model}: {raw}");
    assert!(raw.contains("toolu_p1"), "{raw}");
    if !other_provider {
        // The open turn was made by another model: its reasoning as text, and no thinking config this once.
        assert!(last.get("thinking").is_none(), "{raw}");
        assert!(raw.contains("my reasoning before these tool calls"), "{raw}");
    }
    // The run is over: the primary answers the next one.
    assert_eq!(agent.model(), "claude-sonnet-4-6");
    assert_eq!(agent.provider().name(), "anthropic");
}

fn tempfile_dir() -> std::path::PathBuf {
    let dir =
        std::env::temp_dir().join(format!("tooloop-switch-{}-{}", std::process::id(), tooloop::conversation::new_id()));
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

#[test]
fn an_overloaded_model_falls_back_to_a_second_model_on_the_same_provider() {
    falls_back(error(529, "overloaded_error", "Overloaded"), 1, "overloaded", false);
}

#[test]
fn a_model_down_after_its_retries_falls_back_to_another_provider() {
    falls_back(error(500, "api_error", "Internal server error"), 2, "server_error", true);
}

#[test]
fn a_model_rate_limited_past_its_retries_falls_back_to_another_provider() {
    falls_back(error(429, "rate_limit_error", "Number of requests exceeded"), 2, "rate_limit", true);
}

#[test]
fn a_model_that_refuses_the_context_size_falls_back() {
    let overflow = json!({"status": 400, "json": {"type": "error", "error": {"type": "invalid_request_error",
        "message": "prompt is too long: 210000 tokens > 200000 maximum"}}});
    falls_back(overflow.clone(), 1, "context_overflow", false);
    falls_back(overflow, 1, "context_overflow", true);
}

#[test]
fn without_fallback_models_an_overloaded_model_fails_the_run_as_before() {
    let a = MockServer::start(&json!({"responses": [error(529, "overloaded_error", "Overloaded")]}));
    let agent = agent(json!({"provider": "anthropic", "model": "claude-sonnet-4-6", "api_key": "sk-a",
        "base_url": a.base_url(), "max_retries": 0}));
    let e = agent.run("go", &mut |_| {}).unwrap_err();
    assert!(e.to_string().contains("Overloaded"), "{e}");
}

#[test]
fn set_model_during_a_run_is_busy_and_a_provider_without_a_key_is_refused() {
    let agent = agent(json!({"provider": "anthropic", "model": "claude-sonnet-4-6", "api_key": "sk-a",
        "base_url": "http://127.0.0.1:9"}));
    let e = agent.when_idle(|| Ok(agent.set_model(ModelSpec::new("claude-haiku-4-5")))).unwrap().unwrap_err();
    assert!(matches!(e, tooloop::Error::Busy), "{e:?}");
    agent.set_model(ModelSpec::new("claude-haiku-4-5")).unwrap();
    assert_eq!(agent.model(), "claude-haiku-4-5");
    // No OpenAI key anywhere at construction (the mock's env is not set here) and none given: refused.
    if std::env::var("OPENAI_API_KEY").is_err() {
        let e = agent.set_model(ModelSpec { provider: Some(Protocol::OpenAi), ..ModelSpec::new("gpt-4o") });
        assert!(e.unwrap_err().to_string().contains("OPENAI_API_KEY"));
        assert_eq!(agent.model(), "claude-haiku-4-5", "a refused switch changes nothing");
    }
}

#[test]
fn an_overloaded_error_event_before_any_content_falls_back_and_one_after_text_does_not() {
    let start = json!({"event": "message_start", "data": {"type": "message_start", "message": {"id": "m",
        "type": "message", "role": "assistant", "model": "claude-sonnet-4-6", "content": [], "stop_reason": null,
        "stop_sequence": null, "usage": {"input_tokens": 10, "output_tokens": 1}}}});
    let overloaded = json!({"event": "error", "data": {"type": "error",
        "error": {"type": "overloaded_error", "message": "Overloaded"}}});
    let text = json!([{"event": "content_block_start", "data": {"type": "content_block_start", "index": 0,
            "content_block": {"type": "text", "text": ""}}},
        {"event": "content_block_delta", "data": {"type": "content_block_delta", "index": 0,
            "delta": {"type": "text_delta", "text": "half an"}}}]);
    for (shown, events) in [(false, json!([start, overloaded])), (true, json!([start, text[0], text[1], overloaded]))] {
        let a = MockServer::start(&json!({"responses": [{"sse": events},
            anthropic_turn("claude-haiku-4-5", json!([{"type": "text", "text": "fallback"}]), "end_turn")]}));
        let agent = agent(json!({"provider": "anthropic", "model": "claude-sonnet-4-6", "api_key": "sk-a",
            "base_url": a.base_url(), "max_retries": 0, "fallback_models": ["claude-haiku-4-5"]}));
        let mut events = Vec::new();
        let outcome = agent.run("go", &mut |e| events.push(e.clone()));
        if shown {
            assert!(outcome.is_err(), "text was shown: no second answer after it");
            assert!(fallback_events(&events).is_empty());
        } else {
            assert_eq!(outcome.unwrap().text, "fallback");
            assert_eq!(fallback_events(&events)[0]["reason"], "overloaded");
        }
    }
}
