//! The loop's guards against a model or a tool that misbehaves: the runaway guard (the same call again and
//! again), tool inputs that are not objects (the stored view and the request must be the same bytes), and
//! secrets in tool results (redacted before they are stored, sent or written). Also the core options type
//! that every door builds agents from.
#![allow(clippy::unwrap_used, clippy::expect_used)]

#[path = "common/mock.rs"]
mod mock;

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use mock::MockServer;
use serde_json::{Map, Value, json};
use tooloop::provider::host::reply;
use tooloop::provider::{ScriptedProvider, Secret};
use tooloop::types::ToolUseBlock;
use tooloop::{
    Agent, AgentConfig, AgentOptions, ContentBlock, Error, Event, Protocol, ProviderConfig, RepeatGuard, StopReason,
    Tool, ToolContext, ToolOutput,
};

#[path = "common/agent.rs"]
mod common;
#[path = "common/require.rs"]
mod require;
use common::*;

fn run_collect(agent: &Agent, input: &str) -> (tooloop::Result<tooloop::RunResult>, Vec<Event>) {
    let mut events = Vec::new();
    let r = agent.run(input, &mut |e| events.push(e.clone()));
    (r, events)
}

// ---------------------------------------------------------------------------------------------------------
// The runaway guard
// ---------------------------------------------------------------------------------------------------------

#[test]
fn the_same_call_again_and_again_is_answered_by_the_guard_then_the_run_stops() {
    // Ten turns of the very same call: it runs twice, the 3rd and 4th are refused with a note, the 5th
    // (warn_after 3 + stop_after 2) ends the run.
    let replies =
        (0..10).map(|i| reply(vec![tool_use(&format!("c{i}"), "echo", json!({"text": "hi"}))], StopReason::ToolUse));
    let provider = Arc::new(ScriptedProvider::new(replies));
    let agent = Agent::new(provider.clone(), guarded());
    let calls = Arc::new(AtomicUsize::new(0));
    agent.tools().register(echo_tool(calls.clone())).unwrap();
    let (result, events) = run_collect(&agent, "go");
    let result = result.unwrap();
    assert_eq!(result.stop_reason, Some(StopReason::Repetition));
    assert_eq!(calls.load(Ordering::SeqCst), 2, "only the first two identical calls ran");
    // The stop at turn 5, then one request with tools off for the answer; its call is answered, not run.
    assert_eq!(result.turns, 6);
    assert_eq!(provider.remaining(), 4);
    assert_eq!(result.tool_calls.len(), 5, "the call sent with tools off is no tool call of the run");
    let guard: Vec<(u32, bool)> = events
        .iter()
        .filter_map(|e| if let Event::Repetition { count, stopped, .. } = e { Some((*count, *stopped)) } else { None })
        .collect();
    assert_eq!(guard, vec![(3, false), (4, false), (5, true)]);
    let third = &result.tool_calls[2];
    assert!(third.is_error);
    let text = third.output.as_str().unwrap();
    assert!(text.contains("same call and same input") && text.contains("answer without calling a tool"), "{text}");
    assert_valid_view(&agent.messages());
}

#[test]
fn repeated_calls_with_different_inputs_are_never_touched() {
    let mut replies: Vec<_> = (0..8)
        .map(|i| reply(vec![tool_use(&format!("c{i}"), "echo", json!({"text": format!("n{i}")}))], StopReason::ToolUse))
        .collect();
    replies.push(reply(vec![ContentBlock::text("done")], StopReason::EndTurn));
    let agent = Agent::new(Arc::new(ScriptedProvider::new(replies)), guarded());
    let calls = Arc::new(AtomicUsize::new(0));
    agent.tools().register(echo_tool(calls.clone())).unwrap();
    let (result, events) = run_collect(&agent, "go");
    let result = result.unwrap();
    assert_eq!(result.stop_reason, Some(StopReason::EndTurn));
    assert_eq!(calls.load(Ordering::SeqCst), 8);
    assert!(!events.iter().any(|e| matches!(e, Event::Repetition { .. })));
}

/// Six turns of `roll_dice({})`, then a seventh with three more in one turn, then an answer.
fn dice_replies() -> Vec<tooloop::types::MessageResponse> {
    let mut replies: Vec<_> =
        (0..6).map(|i| reply(vec![tool_use(&format!("c{i}"), "echo", json!({}))], StopReason::ToolUse)).collect();
    replies.push(reply((6..9).map(|i| tool_use(&format!("c{i}"), "echo", json!({}))).collect(), StopReason::ToolUse));
    replies.push(reply(vec![ContentBlock::text("done")], StopReason::EndTurn));
    replies
}

/// Runs an agent over [`dice_replies`] with `tool` registered: the calls that ran, and the run's result and
/// events.
fn roll(config: AgentConfig, tool: impl FnOnce(Arc<AtomicUsize>) -> Tool) -> (usize, tooloop::RunResult, Vec<Event>) {
    let agent = Agent::new(Arc::new(ScriptedProvider::new(dice_replies())), config);
    let calls = Arc::new(AtomicUsize::new(0));
    agent.tools().register(tool(calls.clone())).unwrap();
    let (result, events) = run_collect(&agent, "go");
    let result = result.unwrap();
    assert_valid_view(&agent.messages());
    (calls.load(Ordering::SeqCst), result, events)
}

#[test]
fn by_default_a_host_tool_called_again_with_the_same_input_runs_every_time() {
    // Issue 38: roll_dice({}) three times in a turn had its third call refused. The guards are the coding
    // agent's policy, off in the library unless asked for.
    let (calls, result, events) = roll(config(), echo_tool);
    assert_eq!((calls, result.stop_reason), (9, Some(StopReason::EndTurn)));
    assert!(!events.iter().any(|e| matches!(e, Event::Repetition { .. })));
    assert!(result.tool_calls.iter().all(|c| !c.is_error && !c.output.to_string().contains("tooloop")));
}

#[test]
fn a_tool_marked_not_idempotent_is_never_refused_or_judged_with_the_guards_on() {
    let (calls, result, events) = roll(guarded(), |calls| echo_tool(calls).idempotent(false));
    assert_eq!((calls, result.stop_reason), (9, Some(StopReason::EndTurn)));
    assert!(!events.iter().any(|e| matches!(e, Event::Repetition { .. })));
    assert!(result.tool_calls.iter().all(|c| !c.is_error && !c.output.to_string().contains("tooloop")));
    // The same tool, idempotent, with the guards on: refused from the third call, the run stopped.
    let (calls, result, _) = roll(guarded(), echo_tool);
    assert_eq!((calls, result.stop_reason), (2, Some(StopReason::Repetition)));
}

#[test]
fn an_other_call_in_between_starts_the_count_again_and_the_guard_can_be_turned_off() {
    // a a b a a b …: never three identical in a row.
    let mut replies: Vec<_> = (0..9)
        .map(|i| {
            let text = if i % 3 == 2 { "b" } else { "a" };
            reply(vec![tool_use(&format!("c{i}"), "echo", json!({"text": text}))], StopReason::ToolUse)
        })
        .collect();
    replies.push(reply(vec![ContentBlock::text("done")], StopReason::EndTurn));
    // The runaway guard alone (progress detection off: to it, a a b a a b with the same results is a cycle).
    let agent =
        Agent::new(Arc::new(ScriptedProvider::new(replies.clone())), AgentConfig { progress_guard: None, ..guarded() });
    let calls = Arc::new(AtomicUsize::new(0));
    agent.tools().register(echo_tool(calls.clone())).unwrap();
    assert_eq!(run_collect(&agent, "go").0.unwrap().stop_reason, Some(StopReason::EndTurn));
    assert_eq!(calls.load(Ordering::SeqCst), 9);
    // With both guards on, progress detection stops the cycle of identical results (tests/agent_progress.rs).
    let agent = Agent::new(Arc::new(ScriptedProvider::new(replies.clone())), guarded());
    agent.tools().register(echo_tool(Arc::new(AtomicUsize::new(0)))).unwrap();
    assert_eq!(run_collect(&agent, "go").0.unwrap().stop_reason, Some(StopReason::Repetition));

    // Off: ten identical calls all run.
    let same =
        (0..6).map(|i| reply(vec![tool_use(&format!("c{i}"), "echo", json!({"text": "x"}))], StopReason::ToolUse));
    let mut steps: Vec<_> = same.collect();
    steps.push(reply(vec![ContentBlock::text("done")], StopReason::EndTurn));
    // (Progress detection off too: without the runaway guard it takes over identical calls with the same result.)
    let off = AgentConfig { repeat_guard: None, progress_guard: None, ..guarded() };
    let agent = Agent::new(Arc::new(ScriptedProvider::new(steps)), off);
    let calls = Arc::new(AtomicUsize::new(0));
    agent.tools().register(echo_tool(calls.clone())).unwrap();
    assert_eq!(run_collect(&agent, "go").0.unwrap().stop_reason, Some(StopReason::EndTurn));
    assert_eq!(calls.load(Ordering::SeqCst), 6);

    // Tighter settings apply.
    let tight = AgentConfig { repeat_guard: Some(RepeatGuard { warn_after: 2, stop_after: 1 }), ..guarded() };
    let same =
        (0..6).map(|i| reply(vec![tool_use(&format!("c{i}"), "echo", json!({"text": "x"}))], StopReason::ToolUse));
    let agent = Agent::new(Arc::new(ScriptedProvider::new(same)), tight);
    let calls = Arc::new(AtomicUsize::new(0));
    agent.tools().register(echo_tool(calls.clone())).unwrap();
    let r = run_collect(&agent, "go").0.unwrap();
    // Stopped at turn 3; turn 4 is the answer with tools off.
    assert_eq!((r.stop_reason, r.turns, calls.load(Ordering::SeqCst)), (Some(StopReason::Repetition), 4, 1));
}

// ---------------------------------------------------------------------------------------------------------
// Tool inputs that are not objects: the view is exactly what is sent
// ---------------------------------------------------------------------------------------------------------

#[test]
fn a_tool_input_that_is_not_an_object_is_stored_as_sent_and_answered_with_an_error() {
    let replies = vec![
        reply(vec![tool_use("c1", "echo", json!([1, 2]))], StopReason::ToolUse),
        reply(vec![ContentBlock::text("ok")], StopReason::EndTurn),
    ];
    let provider = Arc::new(ScriptedProvider::new(replies));
    let agent = Agent::new(provider.clone(), config());
    let calls = Arc::new(AtomicUsize::new(0));
    agent.tools().register(echo_tool(calls.clone())).unwrap();
    let result = agent.run("go", &mut |_| {}).unwrap();
    assert_eq!(calls.load(Ordering::SeqCst), 0, "a call with a non-object input never runs");
    let out = result.tool_calls[0].output.as_str().unwrap();
    assert!(result.tool_calls[0].is_error && out.contains("[1,2]") && out.contains("JSON object"), "{out}");
    // The stored view, the history and the second request all hold {} — the same bytes.
    let view = serde_json::to_value(&agent.messages()[..3]).unwrap();
    assert_eq!(view[1]["content"][0]["input"], json!({}));
    let sent = serde_json::to_value(&provider.requests()[1].messages).unwrap();
    assert_eq!(sent, view);
}

fn non_object_scenario(protocol: Protocol) -> Value {
    let first = match protocol {
        Protocol::Anthropic => json!({"anthropic": {
            "id": "msg_1", "type": "message", "role": "assistant", "model": "m",
            "content": [{"type": "tool_use", "id": "toolu_1", "name": "echo", "input": [1, 2]}],
            "stop_reason": "tool_use", "usage": {"input_tokens": 5, "output_tokens": 3}}}),
        _ => json!({"openai": {
            "id": "c1", "object": "chat.completion", "created": 1, "model": "m",
            "choices": [{"index": 0, "finish_reason": "tool_calls", "message": {"role": "assistant", "content": null,
                "tool_calls": [{"id": "call_1", "type": "function", "function": {"name": "echo", "arguments": "[1, 2]"}}]}}],
            "usage": {"prompt_tokens": 5, "completion_tokens": 3}}}),
    };
    let second = match protocol {
        Protocol::Anthropic => json!({"anthropic": {
            "id": "msg_2", "type": "message", "role": "assistant", "model": "m",
            "content": [{"type": "text", "text": "done"}], "stop_reason": "end_turn",
            "usage": {"input_tokens": 9, "output_tokens": 1}}}),
        _ => json!({"openai": {
            "id": "c2", "object": "chat.completion", "created": 1, "model": "m",
            "choices": [{"index": 0, "finish_reason": "stop", "message": {"role": "assistant", "content": "done"}}],
            "usage": {"prompt_tokens": 9, "completion_tokens": 1}}}),
    };
    json!({"responses": [first, second]})
}

#[test]
fn on_both_wires_the_messages_view_equals_what_the_next_request_sent() {
    for protocol in [Protocol::Anthropic, Protocol::OpenAi] {
        for stream in [false, true] {
            let mock = MockServer::start(&non_object_scenario(protocol));
            let mut c = ProviderConfig::new(protocol);
            c.api_key = Some(Secret::new(KEY));
            c.base_url = Some(match protocol {
                Protocol::Anthropic => mock.base_url(),
                _ => format!("{}/v1", mock.base_url()),
            });
            let agent = Agent::new(c.build().unwrap(), AgentConfig { stream, ..config() });
            agent.tools().register(echo_tool(Arc::new(AtomicUsize::new(0)))).unwrap();
            let result = agent.run("go", &mut |_| {}).unwrap();
            assert_eq!(result.text, "done");
            let view = agent.messages();
            assert_valid_view(&view);
            let ContentBlock::ToolUse(t) = &view[1].content[0] else { panic!("{view:?}") };
            assert_eq!(t.input, json!({}), "{protocol:?} stream={stream}");
            if protocol == Protocol::Anthropic {
                // The request carries the neutral view itself: byte for byte the same messages, once the
                // prompt-caching markers (wire-only, see tooloop::cache) are taken off.
                let sent = without_cache_markers(mock.requests()[1]["body"]["messages"].clone());
                assert_eq!(sent, serde_json::to_value(&view[..3]).unwrap(), "stream={stream}");
            } else {
                let sent = &mock.requests()[1]["body"]["messages"];
                assert_eq!(sent[1]["tool_calls"][0]["function"]["arguments"], "{}", "stream={stream}");
            }
        }
    }
}

// ---------------------------------------------------------------------------------------------------------
// Secrets never come back through a tool result
// ---------------------------------------------------------------------------------------------------------

#[test]
fn the_api_key_is_redacted_from_tool_results_before_they_are_stored_sent_or_written() {
    let dir = std::env::temp_dir().join(format!("tooloop-redact-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let session = dir.join("s.jsonl");
    let _ = std::fs::remove_file(&session);
    let mock = MockServer::start(&json!({"responses": [
        {"anthropic": {"id": "m1", "type": "message", "role": "assistant", "model": "m",
            "content": [{"type": "tool_use", "id": "toolu_1", "name": "leak", "input": {}}],
            "stop_reason": "tool_use", "usage": {"input_tokens": 5, "output_tokens": 3}}},
        {"anthropic": {"id": "m2", "type": "message", "role": "assistant", "model": "m",
            "content": [{"type": "text", "text": "done"}], "stop_reason": "end_turn",
            "usage": {"input_tokens": 9, "output_tokens": 1}}}
    ]}));
    let options = AgentOptions {
        model: Some("claude-sonnet-4-6".into()),
        api_key: Some(Secret::new(KEY)),
        base_url: Some(mock.base_url()),
        session: Some(session.clone()),
        ..Default::default()
    };
    let agent = options.build().unwrap();
    let leak = Tool::new("leak", "", json!({"type": "object"}), |_: &Value, _: &ToolContext<'_>| {
        Ok(ToolOutput::Blocks(vec![
            json!({"type": "text", "text": format!("ANTHROPIC_API_KEY={KEY}\nother=1")}),
            json!({"type": "text", "text": format!("{KEY}{KEY}")}),
        ]))
    })
    .unwrap();
    agent.tools().register(leak).unwrap();
    let mut events = Vec::new();
    agent.run("show env", &mut |e| events.push(e.clone())).unwrap();
    let everywhere = [
        serde_json::to_string(&agent.messages()).unwrap(),
        serde_json::to_string(&agent.conversation().snapshot()).unwrap(),
        serde_json::to_string(&events).unwrap(),
        mock.requests()[1]["body"].to_string(),
        std::fs::read_to_string(&session).unwrap(),
    ];
    for (i, text) in everywhere.iter().enumerate() {
        assert!(!text.contains(KEY), "place {i} holds the key: {text}");
    }
    assert!(everywhere[3].contains("ANTHROPIC_API_KEY=[redacted]\\nother=1"), "{}", everywhere[3]);
    assert!(everywhere[3].contains("[redacted][redacted]"), "{}", everywhere[3]);
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn short_values_are_not_redacted_and_errors_are_redacted_too() {
    let registry = tooloop::ToolRegistry::new();
    registry.add_secrets(["1".to_string(), "true".to_string(), "hunter2-long-secret".to_string()]);
    assert_eq!(registry.redact("1 true hunter2-long-secret".into()), "1 true [redacted]");
    registry
        .register(
            Tool::new("fail", "", json!({"type": "object"}), |_: &Value, _: &ToolContext<'_>| {
                Err(tooloop::ToolError::Respond("bad password hunter2-long-secret".into()))
            })
            .unwrap(),
        )
        .unwrap();
    let out = registry.execute(
        &ToolUseBlock { id: "c".into(), name: "fail".into(), input: json!({}), extra: Map::new() },
        &tooloop::CancelToken::new(),
    );
    assert_eq!(out.content, json!("bad password [redacted]"));
}

// ---------------------------------------------------------------------------------------------------------
// Options: refused at creation, before any request
// ---------------------------------------------------------------------------------------------------------

#[test]
fn unusable_options_are_refused_at_creation_naming_the_key() {
    for (json, key) in [
        (r#"{"model": "m", "base_url": "http//nohost"}"#, "base_url"),
        (r#"{"model": "m", "headers": {"x-a": "b\nc"}}"#, "headers"),
        (r#"{"model": "m", "max_tokens": -1}"#, "max_tokens"),
        (r#"{"model": "m", "timeout": 0}"#, "timeout"),
    ] {
        match AgentOptions::from_json(json) {
            Err(Error::InvalidOption { key: k, .. }) => assert_eq!(k, key, "{json}"),
            other => panic!("{json}: {other:?}"),
        }
    }
    // A bad base URL from the environment is refused when the provider is built, not after retries.
    let mut c = ProviderConfig::new(Protocol::Anthropic);
    c.base_url = Some("localhost:8080".into());
    c.api_key = Some(Secret::new(KEY));
    assert!(matches!(c.build(), Err(Error::Config(m)) if m.contains("http://")));
}

#[test]
fn options_build_an_agent_with_builtins_and_a_session() {
    let dir = std::env::temp_dir().join(format!("tooloop-options-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let session = dir.join("s.jsonl");
    let o = AgentOptions::from_value(json!({
        "builtin_tools": ["read_file"], "workspace": dir, "session": session, "max_turns": 3
    }))
    .unwrap();
    let agent = o.build_with(Arc::new(ScriptedProvider::new([]))).unwrap();
    assert_eq!(agent.tools().names(), vec!["read_file".to_string()]);
    let info = agent.session_info().unwrap();
    assert!(info.created && info.entries == 0);
    assert_eq!(agent.config().max_turns, Some(3));
    assert_eq!(agent.config().model, "host");
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn builtin_tools_from_options_are_sandboxed_by_default_and_the_model_is_told() {
    if !require::landlock() {
        return;
    }
    let ws = std::env::temp_dir().join(format!("tooloop-opts-sandbox-{}", std::process::id()));
    let outside = std::env::temp_dir().join(format!("tooloop-opts-outside-{}", std::process::id()));
    std::fs::create_dir_all(&ws).unwrap();
    let _ = std::fs::remove_file(&outside);
    let cmd = format!("touch {} ; touch inside.txt", outside.display());
    let provider = Arc::new(ScriptedProvider::new([
        reply(vec![tool_use("b1", "bash", json!({"command": cmd}))], StopReason::ToolUse),
        reply(vec![ContentBlock::text("done")], StopReason::EndTurn),
    ]));
    let agent = AgentOptions::from_value(json!({"builtin_tools": ["bash"], "workspace": ws}))
        .unwrap()
        .build_with(provider.clone())
        .unwrap();
    let result = agent.run("go", &mut |_| {}).unwrap();
    assert!(!outside.exists(), "the sandbox let bash write outside the workspace");
    assert!(ws.join("inside.txt").exists());
    let output = result.tool_calls[0].output.as_str().unwrap();
    // Landlock's "Permission denied", or the read-only mount view's answer where it applies (root).
    assert!(output.contains("Permission denied") || output.contains("Read-only file system"), "{output}");
    let system = provider.requests()[0].system.clone().unwrap().to_string();
    assert!(system.contains("workspace"), "{system}");
    for bad in [r#"{"sandbox": "strict"}"#, r#"{"network": "no"}"#, r#"{"env_passthrough": "X"}"#] {
        assert!(matches!(AgentOptions::from_json(bad), Err(Error::InvalidOption { .. })), "{bad}");
    }
    let _ = std::fs::remove_dir_all(&ws);
}

/// `v` without any `cache_control` key.
fn without_cache_markers(mut v: Value) -> Value {
    fn strip(v: &mut Value) {
        match v {
            Value::Object(o) => {
                o.remove("cache_control");
                o.values_mut().for_each(strip);
            }
            Value::Array(a) => a.iter_mut().for_each(strip),
            _ => {}
        }
    }
    strip(&mut v);
    v
}

#[test]
fn caching_breakpoints_sit_on_the_last_tool_the_system_and_the_newest_turn_and_the_prefix_is_byte_stable() {
    let scen = json!({"responses": [
        {"anthropic": {"id": "m1", "type": "message", "role": "assistant", "model": "claude-sonnet-4-6",
            "content": [{"type": "text", "text": "Let me check."},
                        {"type": "tool_use", "id": "toolu_1", "name": "echo", "input": {"text": "one"}}],
            "stop_reason": "tool_use", "usage": {"input_tokens": 50, "output_tokens": 3, "cache_creation_input_tokens": 900}}},
        {"anthropic": {"id": "m2", "type": "message", "role": "assistant", "model": "claude-sonnet-4-6",
            "content": [{"type": "tool_use", "id": "toolu_2", "name": "echo", "input": {"text": "two"}}],
            "stop_reason": "tool_use", "usage": {"input_tokens": 20, "output_tokens": 3, "cache_read_input_tokens": 900}}},
        {"anthropic": {"id": "m3", "type": "message", "role": "assistant", "model": "claude-sonnet-4-6",
            "content": [{"type": "text", "text": "done"}], "stop_reason": "end_turn",
            "usage": {"input_tokens": 10, "output_tokens": 1, "cache_read_input_tokens": 950}}}
    ]});
    for (cache, stream) in [(true, true), (true, false), (false, true)] {
        let mock = MockServer::start(&scen);
        let options = AgentOptions::from_value(json!({
            "model": "claude-sonnet-4-6", "api_key": KEY, "base_url": mock.base_url(), "system": "Be brief.",
            "cache": cache, "stream": stream
        }))
        .unwrap();
        let agent = options.build().unwrap();
        agent.tools().register(echo_tool(Arc::new(AtomicUsize::new(0)))).unwrap();
        agent.tools().register(echo_tool_named("echo2")).unwrap();
        let result = agent.run("go", &mut |_| {}).unwrap();
        let bodies: Vec<Value> = mock.requests().into_iter().map(|r| r["body"].clone()).collect();
        assert_eq!(bodies.len(), 3);
        let marked = |v: &Value| v.get("cache_control") == Some(&json!({"type": "ephemeral"}));
        for (i, b) in bodies.iter().enumerate() {
            let tools = b["tools"].as_array().unwrap();
            let messages = b["messages"].as_array().unwrap();
            let last_block = messages.last().unwrap()["content"].as_array().unwrap().last().unwrap();
            if cache {
                assert!(marked(&tools[1]) && !marked(&tools[0]), "request {i}: the last tool");
                assert!(marked(&b["system"][0]), "request {i}: the system prompt");
                assert!(marked(last_block), "request {i}: the newest turn");
                let count = b.to_string().matches("cache_control").count();
                assert!(count <= 4, "request {i}: {count} breakpoints");
            } else {
                assert!(!b.to_string().contains("cache_control"), "caching off: no marker");
            }
        }
        // Nothing in the prefix changes between turns: request N+1 starts with request N's bytes.
        for n in 0..2 {
            let before = without_cache_markers(bodies[n].clone());
            let after = without_cache_markers(bodies[n + 1].clone());
            for key in ["system", "tools", "model", "max_tokens"] {
                assert_eq!(before[key].to_string(), after[key].to_string(), "{key} changed between turns");
            }
            let prev = before["messages"].as_array().unwrap();
            let next = after["messages"].as_array().unwrap();
            for (i, m) in prev.iter().enumerate() {
                assert_eq!(m.to_string(), next[i].to_string(), "message {i} changed between turn {n} and {}", n + 1);
            }
        }
        // Usage: the cache tokens per turn and in total, priced at the cache rates.
        assert_eq!(result.usage.cache_read_input_tokens, Some(1850));
        assert_eq!(result.usage.cache_creation_input_tokens, Some(900));
        let expected = (80.0 * 3.0 + 900.0 * 3.0 * 1.25 + 1850.0 * 3.0 * 0.1 + 7.0 * 15.0) / 1e6;
        assert!((result.cost_usd.unwrap() - expected).abs() < 1e-12, "{:?} vs {expected}", result.cost_usd);
        // The stored view never holds a marker.
        assert!(!serde_json::to_string(&agent.messages()).unwrap().contains("cache_control"));
    }
}

fn echo_tool_named(name: &str) -> Tool {
    Tool::new(name, "Echo.", json!({"type": "object"}), |_: &Value, _: &ToolContext<'_>| {
        Ok(ToolOutput::Text("ok".into()))
    })
    .unwrap()
}
