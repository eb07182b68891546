//! The agent loop, driven end to end: through the scripted provider and through the real
//! `AnthropicProvider` against the mock server (`tests/mock`, streaming and JSON), with the same scenario
//! files (`tests/scenarios/*.json`). Tools, parallelism, stop reasons, max_turns, permission, events,
//! usage, cancellation. Sessions and failure/resume live in `tests/agent_session.rs`.
//!
//! Every scenario ends with `assert_valid_view` on the agent's view AND on every request that went out.
#![allow(clippy::unwrap_used, clippy::expect_used)]

#[path = "common/mock.rs"]
mod mock;

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, mpsc};
use std::time::{Duration, Instant};

use mock::{MockServer, scenario};
use serde_json::{Value, json};
use tooloop::provider::host::reply;
use tooloop::provider::{FnProvider, ScriptedProvider, Secret};
use tooloop::types::ToolUseBlock;
use tooloop::{
    Agent, AgentConfig, ContentBlock, EntryRole, EntryStatus, Error, Event, MaxTurnsPolicy, Message, Permission,
    Protocol, ProviderConfig, Role, StopReason, Tool, ToolContext, ToolError, ToolOutput, Usage,
};

#[path = "common/agent.rs"]
mod common;
use common::*;

// ---------------------------------------------------------------------------------------------------------
// Helpers of this file (the shared ones are in tests/common/agent.rs).
// ---------------------------------------------------------------------------------------------------------

/// get_time: counts its calls.
fn time_tool(calls: Arc<AtomicUsize>) -> Tool {
    Tool::new(
        "get_time",
        "The current time.",
        json!({"type": "object", "properties": {}}),
        move |_: &Value, _: &ToolContext<'_>| {
            calls.fetch_add(1, Ordering::SeqCst);
            Ok(ToolOutput::Text("14:05 UTC".into()))
        },
    )
    .unwrap()
}

type Spans = Arc<Mutex<Vec<(String, Instant, Instant)>>>;

/// A tool that sleeps `ms` and records when it ran, under the call's id.
fn timed_tool(name: &str, schema: Value, ms: u64, spans: Spans) -> Tool {
    Tool::new(name, "sleeps, then answers", schema, move |_: &Value, ctx: &ToolContext<'_>| {
        let start = Instant::now();
        std::thread::sleep(Duration::from_millis(ms));
        spans.lock().unwrap().push((ctx.tool_use_id.to_string(), start, Instant::now()));
        Ok(ToolOutput::Text(format!("done {}", ctx.tool_use_id)))
    })
    .unwrap()
}

/// Event kinds, consecutive repeats of streaming kinds folded into one.
fn kinds(events: &[Event]) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    for e in events {
        let k = serde_json::to_value(e).unwrap()["type"].as_str().unwrap().to_string();
        let foldable = matches!(k.as_str(), "text" | "thinking" | "tool_input_delta");
        if foldable && out.last() == Some(&k) {
            continue;
        }
        out.push(k);
    }
    out
}

const PARALLEL_IDS: [&str; 3] =
    ["toolu_01T1x1fJ34qAmk2tNTrN7Up6", "toolu_01HwT5wq2YcGZRr7sXk9LmPq", "toolu_01PqZ8sNd3kVbT6cYwR2hXjL"];

// ---------------------------------------------------------------------------------------------------------
// Item 3: several tool_use blocks in one turn, parallel-safe or not.
// ---------------------------------------------------------------------------------------------------------

fn run_three_tool_turn(rig: &Rig, parallel: bool) -> Vec<(String, Instant, Instant)> {
    let spans: Spans = Arc::default();
    rig.agent
        .tools()
        .register(timed_tool("get_weather", weather_schema(), 300, spans.clone()).parallel_safe(parallel))
        .unwrap();
    rig.agent
        .tools()
        .register(timed_tool("get_time", json!({"type": "object"}), 300, spans.clone()).parallel_safe(parallel))
        .unwrap();
    let result = rig.agent.run("Weather in Paris and Tokyo, and the time?", &mut |_| {}).unwrap();
    assert_eq!(result.text, "Paris: 18 °C, partly cloudy. Tokyo: 24 °C, clear. It is 14:05 UTC.");
    assert_eq!(result.turns, 2);
    // Results keep the order of the calls: in the run's record and in the next request.
    let recorded: Vec<&str> = result.tool_calls.iter().map(|c| c.id.as_str()).collect();
    assert_eq!(recorded, PARALLEL_IDS);
    let requests = rig.requests();
    assert_eq!(requests.len(), 2);
    let answered = results_of(&requests[1]["messages"][2]);
    let ids: Vec<&str> = answered.iter().map(|(id, _, _)| id.as_str()).collect();
    assert_eq!(ids, PARALLEL_IDS, "{:?}", rig.kind);
    for (id, text, is_error) in &answered {
        assert_eq!((text.as_str(), *is_error), (format!("done {id}").as_str(), false));
    }
    rig.check();
    let spans = spans.lock().unwrap().clone();
    assert_eq!(spans.len(), 3);
    spans
}

#[test]
fn parallel_safe_tools_of_one_turn_overlap_in_time_and_results_keep_call_order() {
    for rig in Rig::all(&scenario("anthropic_parallel_tools"), config()) {
        let spans = run_three_tool_turn(&rig, true);
        let latest_start = spans.iter().map(|s| s.1).max().unwrap();
        let earliest_end = spans.iter().map(|s| s.2).min().unwrap();
        let first = spans.iter().map(|s| s.1).min().unwrap();
        let wall = spans.iter().map(|s| s.2).max().unwrap() - first;
        println!("{:?}: 3 parallel-safe calls of 300 ms took {} ms together", rig.kind, wall.as_millis());
        assert!(latest_start < earliest_end, "{:?}: the three calls did not all overlap: {spans:?}", rig.kind);
    }
}

#[test]
fn tools_not_parallel_safe_run_one_at_a_time_in_call_order() {
    for rig in Rig::all(&scenario("anthropic_parallel_tools"), config()) {
        let spans = run_three_tool_turn(&rig, false);
        let order: Vec<&str> = spans.iter().map(|s| s.0.as_str()).collect();
        assert_eq!(order, PARALLEL_IDS, "{:?}: calls ran out of order", rig.kind);
        for w in spans.windows(2) {
            assert!(w[1].1 >= w[0].2, "{:?}: {} started before {} ended", rig.kind, w[1].0, w[0].0);
        }
        let wall = spans[2].2 - spans[0].1;
        println!("{:?}: 3 sequential calls of 300 ms took {} ms", rig.kind, wall.as_millis());
    }
}

#[test]
fn tool_concurrency_caps_how_many_parallel_safe_calls_run_at_once() {
    let scen = json!({"responses": [
        // Distinct inputs: five identical calls in one turn would be a runaway (the guard counts them).
        {"anthropic": reply((0..5).map(|i| tool_use(&format!("toolu_{i}"), "probe", json!({"n": i}))).collect(), StopReason::ToolUse)},
        {"anthropic": reply(vec![ContentBlock::text("done")], StopReason::EndTurn)},
    ]});
    let rig = Rig::new(Kind::Scripted, &scen, AgentConfig { tool_concurrency: 2, ..config() });
    let running = Arc::new(AtomicUsize::new(0));
    let peak = Arc::new(AtomicUsize::new(0));
    let (r, p) = (running.clone(), peak.clone());
    let probe = Tool::new("probe", "", json!({"type": "object"}), move |_: &Value, _: &ToolContext<'_>| {
        let now = r.fetch_add(1, Ordering::SeqCst) + 1;
        p.fetch_max(now, Ordering::SeqCst);
        std::thread::sleep(Duration::from_millis(100));
        r.fetch_sub(1, Ordering::SeqCst);
        Ok(ToolOutput::Text("ok".into()))
    })
    .unwrap()
    .parallel_safe(true);
    rig.agent.tools().register(probe).unwrap();
    let result = rig.agent.run("probe five times", &mut |_| {}).unwrap();
    assert_eq!(result.tool_calls.len(), 5);
    assert_eq!(peak.load(Ordering::SeqCst), 2, "tool_concurrency = 2 must cap the calls running at once");
    let ids: Vec<String> = results_of(&rig.requests()[1]["messages"][2]).into_iter().map(|r| r.0).collect();
    assert_eq!(ids, (0..5).map(|i| format!("toolu_{i}")).collect::<Vec<_>>());
    rig.check();
}

#[test]
fn tool_names_and_schemas_are_checked_when_registered_on_the_agent() {
    let agent = Agent::new(Arc::new(ScriptedProvider::new([])), config());
    let ok = |_: &Value, _: &ToolContext<'_>| Ok(ToolOutput::Text(String::new()));
    assert!(matches!(Tool::new("bad name", "", json!({"type": "object"}), ok), Err(Error::Config(_))));
    assert!(matches!(Tool::new("x".repeat(65), "", json!({"type": "object"}), ok), Err(Error::Config(_))));
    assert!(matches!(Tool::new("list", "", json!({"type": "array"}), ok), Err(Error::Config(_))));
    agent.tools().register(weather_tool(Arc::default())).unwrap();
    let again = agent.tools().register(weather_tool(Arc::default())).unwrap_err();
    assert!(matches!(&again, Error::DuplicateTool { name } if name == "get_weather"), "{again:?}");
    assert_eq!(agent.tools().names(), vec!["get_weather"]);
}

// ---------------------------------------------------------------------------------------------------------
// Item 2: tool failures become is_error results the model can act on; the run goes on.
// ---------------------------------------------------------------------------------------------------------

#[test]
fn unknown_tool_panicking_tool_and_invalid_input_become_error_results_and_the_run_goes_on() {
    for rig in Rig::all(&scenario("agent_tool_errors"), config()) {
        let weather_calls = Arc::new(AtomicUsize::new(0));
        rig.agent.tools().register(weather_tool(weather_calls.clone())).unwrap();
        let explode =
            Tool::new("explode", "always panics", json!({"type": "object"}), |_: &Value, _: &ToolContext<'_>| {
                if true {
                    panic!("kaboom: this test tool panics on purpose");
                }
                Ok(ToolOutput::Text(String::new()))
            })
            .unwrap();
        rig.agent.tools().register(explode).unwrap();

        let result = rig.agent.run("Try everything.", &mut |_| {}).unwrap();
        assert_eq!(result.stop_reason, Some(StopReason::EndTurn));
        assert_eq!(result.text, "teleport does not exist, explode crashed and get_weather needs a string city.");
        assert_eq!(weather_calls.load(Ordering::SeqCst), 0, "invalid input must be refused before the handler runs");

        let requests = rig.requests();
        assert_eq!(requests.len(), 2);
        let results = results_of(&requests[1]["messages"][2]);
        assert_eq!(results.len(), 3);
        let (id, text, err) = &results[0];
        assert_eq!(id, "toolu_01AgTeUnknown");
        assert!(*err && text.contains("Unknown tool 'teleport'") && text.contains("get_weather, explode"), "{text}");
        let (id, text, err) = &results[1];
        assert_eq!(id, "toolu_01AgTePanics");
        assert!(
            *err && text.contains("crashed") && text.contains("kaboom: this test tool panics on purpose"),
            "{text}"
        );
        let (id, text, err) = &results[2];
        assert_eq!(id, "toolu_01AgTeInvalid");
        assert!(*err && text.contains("input.city must be of type string"), "{text}");
        assert!(result.tool_calls.iter().all(|c| c.is_error));
        rig.check();
    }
}

#[test]
fn a_tool_result_over_the_limit_is_cut_with_a_note() {
    for rig in Rig::all(&scenario("anthropic_tool_then_text"), config()) {
        let big = Tool::new("get_weather", "", weather_schema(), |_: &Value, _: &ToolContext<'_>| {
            Ok(ToolOutput::Text("x".repeat(200 * 1024)))
        })
        .unwrap();
        rig.agent.tools().register(big).unwrap();
        rig.agent.run("weather?", &mut |_| {}).unwrap();
        let (_, text, is_error) = results_of(&rig.requests()[1]["messages"][2]).remove(0);
        assert!(!is_error);
        assert!(text.len() <= 50 * 1024 + 200, "{} bytes went to the model", text.len());
        assert!(text.contains("[output truncated: 153600 of 204800 bytes were cut"), "{}", &text[text.len() - 150..]);
        rig.check();
    }
}

#[test]
fn a_fatal_tool_error_ends_the_run_with_tool_aborted_and_a_valid_conversation() {
    for rig in Rig::all(&scenario("anthropic_parallel_tools"), config()) {
        let weather_calls = Arc::new(AtomicUsize::new(0));
        let time_calls = Arc::new(AtomicUsize::new(0));
        let c = weather_calls.clone();
        let fatal = Tool::new("get_weather", "", weather_schema(), move |_: &Value, _: &ToolContext<'_>| {
            c.fetch_add(1, Ordering::SeqCst);
            Err(ToolError::Fatal("the weather quota is exhausted".into()))
        })
        .unwrap();
        rig.agent.tools().register(fatal).unwrap();
        rig.agent.tools().register(time_tool(time_calls.clone())).unwrap();

        let err = rig.agent.run("Weather and time?", &mut |_| {}).unwrap_err();
        match &err {
            Error::ToolAborted { tool, message } => {
                assert_eq!((tool.as_str(), message.as_str()), ("get_weather", "the weather quota is exhausted"));
            }
            other => panic!("{:?}: expected ToolAborted, got {other:?}", rig.kind),
        }
        assert_eq!(rig.requests().len(), 1, "no request after a fatal tool error");
        assert_eq!((weather_calls.load(Ordering::SeqCst), time_calls.load(Ordering::SeqCst)), (1, 0));
        // Every call is answered: the fatal one says so, the others were not run.
        let tool_entries: Vec<_> =
            rig.agent.conversation().snapshot().into_iter().filter(|e| e.role == EntryRole::Tool).collect();
        assert_eq!(tool_entries.len(), 3);
        let view = rig.agent.messages();
        let results = results_of(&serde_json::to_value(&view[2]).unwrap());
        assert!(results[0].1.contains("aborted the run: the weather quota is exhausted"), "{results:?}");
        assert!(results[1..].iter().all(|r| r.2 && r.1.contains("not run")), "{results:?}");
        rig.check();
    }
}

// ---------------------------------------------------------------------------------------------------------
// Item 3: stop reasons and max_turns.
// ---------------------------------------------------------------------------------------------------------

#[test]
fn max_turns_with_the_error_policy_stops_with_a_valid_conversation_and_resume_continues() {
    for rig in Rig::all(&scenario("agent_max_turns"), AgentConfig { max_turns: Some(2), ..config() }) {
        let calls = Arc::new(AtomicUsize::new(0));
        rig.agent.tools().register(weather_tool(calls.clone())).unwrap();
        let err = rig.agent.run("Paris, then Tokyo.", &mut |_| {}).unwrap_err();
        assert!(matches!(err, Error::MaxTurns { turns: 2 }), "{:?}: {err:?}", rig.kind);
        assert_eq!(rig.requests().len(), 2);
        assert_eq!(calls.load(Ordering::SeqCst), 2);
        let view = rig.agent.messages();
        assert_eq!(view.len(), 5);
        assert_eq!(view[4].role, Role::User, "the view ends with the last turn's results");
        assert!(
            rig.agent
                .conversation()
                .snapshot()
                .iter()
                .any(|e| e.role == EntryRole::System
                    && serde_json::to_string(&e.content).unwrap().contains("max_turns=2")),
            "a system note records why the run stopped"
        );
        rig.check();

        let done = rig.agent.resume(&mut |_| {}).unwrap();
        assert_eq!(done.text, "Paris and Tokyo are both fine.");
        assert_eq!(calls.load(Ordering::SeqCst), 2, "resume must not re-run tools");
        let requests = rig.requests();
        assert_eq!(requests.len(), 3);
        assert_eq!(checked_messages(&requests[2]).len(), 5);
        rig.check();
    }
}

#[test]
fn max_turns_with_the_return_policy_returns_what_there_is() {
    let cfg = AgentConfig { max_turns: Some(2), max_turns_policy: MaxTurnsPolicy::Return, ..config() };
    for rig in Rig::all(&scenario("agent_max_turns"), cfg) {
        let calls = Arc::new(AtomicUsize::new(0));
        rig.agent.tools().register(weather_tool(calls.clone())).unwrap();
        let result = rig.agent.run("Paris, then Tokyo.", &mut |_| {}).unwrap();
        assert!(result.max_turns_reached);
        assert_eq!((result.turns, result.stop_reason.clone(), result.tool_calls.len()), (2, None, 2));
        assert_eq!(rig.requests().len(), 2);
        rig.check();
        let done = rig.agent.resume(&mut |_| {}).unwrap();
        assert!(!done.max_turns_reached);
        assert_eq!(done.stop_reason, Some(StopReason::EndTurn));
        assert_eq!(calls.load(Ordering::SeqCst), 2);
        rig.check();
    }
}

#[test]
fn max_tokens_inside_a_tool_use_never_runs_the_tool_and_the_conversation_stays_valid() {
    let scen = scenario("agent_max_tokens_mid_tool_use");
    let scripted = json!({"responses": [
        {"anthropic": reply(vec![ContentBlock::text("Let me check."),
            tool_use("toolu_01AgMxCut", "get_weather", Value::String("{\"city\": \"Par".into()))], StopReason::MaxTokens)},
        scen["responses"][1].clone(),
    ]});
    for rig in [Rig::new(Kind::Scripted, &scripted, config()), Rig::new(Kind::MockSse, &scen, config())] {
        let calls = Arc::new(AtomicUsize::new(0));
        rig.agent.tools().register(weather_tool(calls.clone())).unwrap();
        let result = rig.agent.run("Weather in Paris?", &mut |_| {}).unwrap();
        assert_eq!(result.stop_reason, Some(StopReason::MaxTokens), "{:?}", rig.kind);
        assert_eq!(result.turns, 1);
        assert_eq!(calls.load(Ordering::SeqCst), 0, "a tool_use cut off by max_tokens must never run");
        assert!(result.tool_calls.is_empty());
        rig.check();

        // The host goes on: the next request answers the cut call and is a valid Messages API request.
        let next = rig.agent.run("Go on, shorter please.", &mut |_| {}).unwrap();
        assert_eq!(next.text, "Sorry, I ran out of room. Paris is sunny.");
        let requests = rig.requests();
        let messages = checked_messages(&requests[1]);
        assert_eq!(messages.len(), 3);
        let body = &requests[1]["messages"];
        let cut = &body[1]["content"][1];
        assert_eq!(cut["id"], "toolu_01AgMxCut");
        if rig.kind != Kind::Scripted {
            // The Anthropic wire requires an object (a string is a 400); the neutral form may keep the raw
            // partial JSON (the OpenAI provider sends it back as `arguments`).
            assert!(
                cut["input"].is_object(),
                "{:?}: the Messages API requires tool_use.input to be an object (a string is a 400, so every later \
                 request of this conversation would fail); the Anthropic provider sent {}",
                rig.kind,
                cut["input"]
            );
        }
        let results = results_of(&body[2]);
        assert_eq!(results.len(), 1);
        assert!(results[0].2 && results[0].1.contains("max_tokens"), "{results:?}");
        assert_eq!(body[2]["content"][1]["text"], "Go on, shorter please.");
        assert_eq!(calls.load(Ordering::SeqCst), 0);
        rig.check();
    }
}

#[test]
fn refusal_and_stop_sequence_end_the_run_after_one_request() {
    for rig in Rig::all(&scenario("agent_stop_reasons"), config()) {
        rig.agent.tools().register(weather_tool(Arc::default())).unwrap();
        let refused = rig.agent.run("Something not allowed.", &mut |_| {}).unwrap();
        assert_eq!((refused.stop_reason.clone(), refused.turns), (Some(StopReason::Refusal), 1));
        assert_eq!(refused.text, "I can't help with that.");
        let stopped = rig.agent.run("Count to ten, end with ###.", &mut |_| {}).unwrap();
        assert_eq!((stopped.stop_reason.clone(), stopped.turns), (Some(StopReason::StopSequence), 1));
        assert_eq!(stopped.message.as_ref().unwrap().stop_sequence.as_deref(), Some("###"));
        assert_eq!(rig.requests().len(), 2);
        rig.check();
    }
}

#[test]
fn pause_turn_sends_the_paused_turn_back_and_continues() {
    let scen = scenario("agent_pause_turn");
    let paused = scen["responses"][0]["anthropic"]["content"].clone();
    for rig in Rig::all(&scen, config()) {
        let result = rig.agent.run("What is tooloop?", &mut |_| {}).unwrap();
        assert_eq!((result.turns, result.stop_reason.clone()), (2, Some(StopReason::EndTurn)));
        assert_eq!(result.text, "tooloop is an agent loop library.");
        let requests = rig.requests();
        assert_eq!(requests.len(), 2);
        let second = &requests[1]["messages"];
        assert_eq!(second.as_array().unwrap().len(), 2, "{:?}: {second}", rig.kind);
        assert_eq!(second[1]["role"], "assistant");
        assert_eq!(second[1]["content"], paused, "{:?}: the paused turn must go back verbatim", rig.kind);
        rig.check();
    }
}

/// A server tool's input arrives as `input_json_delta` pieces like a client tool's; the block must go back
/// exactly as the API sent it (this exercises the Anthropic stream accumulator through the loop).
#[test]
fn a_paused_server_tool_use_with_streamed_input_is_sent_back_verbatim() {
    let scen = scenario("agent_server_tool_input");
    let paused = scen["responses"][0]["anthropic"]["content"].clone();
    for rig in [Rig::new(Kind::MockSse, &scen, config()), Rig::new(Kind::MockJson, &scen, config())] {
        rig.agent.run("Search for tooloop.", &mut |_| {}).unwrap();
        let requests = rig.requests();
        assert_eq!(requests[1]["messages"][1]["content"], paused, "{:?}", rig.kind);
        rig.check();
    }
}

// ---------------------------------------------------------------------------------------------------------
// Thinking blocks go back byte for byte.
// ---------------------------------------------------------------------------------------------------------

#[test]
fn thinking_and_redacted_thinking_blocks_are_sent_back_byte_for_byte() {
    let cfg =
        AgentConfig { thinking: Some(json!({"type": "enabled", "budget_tokens": 2048})), max_tokens: 4096, ..config() };
    for name in ["anthropic_thinking_tool", "anthropic_redacted_thinking"] {
        let scen = scenario(name);
        let first = scen["responses"][0]["anthropic"]["content"].clone();
        for rig in Rig::all(&scen, cfg.clone()) {
            rig.agent.tools().register(weather_tool(Arc::default())).unwrap();
            let mut thinking_deltas = String::new();
            rig.agent
                .run("Weather in Paris?", &mut |e| {
                    if let Event::Thinking { thinking } = e {
                        thinking_deltas.push_str(thinking);
                    }
                })
                .unwrap();
            let requests = rig.requests();
            assert_eq!(requests.len(), 2);
            assert_eq!(requests[0]["thinking"], json!({"type": "enabled", "budget_tokens": 2048}));
            let sent = &requests[1]["messages"][1]["content"];
            assert_eq!(sent, &first, "{name} {:?}: the assistant turn must go back exactly as received", rig.kind);
            let thinking = first[0]["thinking"].as_str().unwrap();
            let signature = first[0]["signature"].as_str().unwrap();
            assert_eq!(sent[0]["thinking"].as_str(), Some(thinking));
            assert_eq!(sent[0]["signature"].as_str(), Some(signature));
            if let Some(mock) = &rig.mock {
                // The raw bytes on the wire, too (not only the parsed JSON).
                let raw = mock.requests()[1]["raw_body"].as_str().unwrap().to_string();
                assert!(
                    raw.contains(&serde_json::to_string(thinking).unwrap()),
                    "{name}: thinking text not byte-identical"
                );
                assert!(raw.contains(signature), "{name}: signature not byte-identical");
                if let Some(data) = first[1]["data"].as_str() {
                    assert!(raw.contains(data), "{name}: redacted_thinking data not byte-identical");
                }
            }
            if rig.kind != Kind::MockJson {
                assert!(
                    thinking_deltas.starts_with(thinking),
                    "{name} {:?}: thinking events: {thinking_deltas:?}",
                    rig.kind
                );
            }
            rig.check();
        }
    }
}

// ---------------------------------------------------------------------------------------------------------
// Item 3: the permission hook.
// ---------------------------------------------------------------------------------------------------------

#[test]
fn permission_deny_reason_reaches_the_model_in_the_next_request_and_allowed_tools_run() {
    for rig in Rig::all(&scenario("anthropic_parallel_tools"), config()) {
        let weather_calls = Arc::new(AtomicUsize::new(0));
        let time_calls = Arc::new(AtomicUsize::new(0));
        rig.agent.tools().register(weather_tool(weather_calls.clone())).unwrap();
        rig.agent.tools().register(time_tool(time_calls.clone())).unwrap();
        let asked: Arc<Mutex<Vec<(String, Value)>>> = Arc::default();
        let seen = asked.clone();
        rig.agent.set_permission(Some(Arc::new(move |call: &ToolUseBlock| {
            seen.lock().unwrap().push((call.name.clone(), call.input.clone()));
            if call.name == "get_weather" {
                Permission::Deny("weather lookups are disabled for this user".into())
            } else {
                Permission::Allow
            }
        })));
        let mut events = Vec::new();
        rig.agent.run("Weather and time?", &mut |e| events.push(e.clone())).unwrap();
        assert_eq!((weather_calls.load(Ordering::SeqCst), time_calls.load(Ordering::SeqCst)), (0, 1));
        let asked = asked.lock().unwrap().clone();
        assert_eq!(asked.len(), 3, "the hook runs before each call");
        assert_eq!(asked[0], ("get_weather".to_string(), json!({"city": "Paris"})));
        let results = results_of(&rig.requests()[1]["messages"][2]);
        for denied in &results[..2] {
            assert!(denied.2 && denied.1.contains("weather lookups are disabled for this user"), "{denied:?}");
        }
        assert_eq!(results[2], (PARALLEL_IDS[2].to_string(), "14:05 UTC".to_string(), false));
        // The denial is a structured outcome, not a text prefix to match.
        let denied: Vec<bool> = events
            .iter()
            .filter_map(|e| if let Event::ToolResult { denied, .. } = e { Some(*denied) } else { None })
            .collect();
        assert_eq!(denied, vec![true, true, false]);
        // Every call is announced and answered, denied ones too: a UI sees each tool_use, then its result.
        let ids = |want_use: bool| -> Vec<String> {
            events
                .iter()
                .filter_map(|e| match e {
                    Event::ToolUse { id, .. } if want_use => Some(id.clone()),
                    Event::ToolResult { id, .. } if !want_use => Some(id.clone()),
                    _ => None,
                })
                .collect()
        };
        assert_eq!(ids(true), PARALLEL_IDS.to_vec());
        assert_eq!(ids(false), PARALLEL_IDS.to_vec());
        for id in PARALLEL_IDS {
            let at = |want_use: bool| {
                events.iter().position(|e| match e {
                    Event::ToolUse { id: i, .. } if want_use => i == id,
                    Event::ToolResult { id: i, .. } if !want_use => i == id,
                    _ => false,
                })
            };
            assert!(at(true) < at(false), "{id}: its tool_use comes before its tool_result");
        }
        rig.check();
    }
}

// ---------------------------------------------------------------------------------------------------------
// Item 3: events and usage.
// ---------------------------------------------------------------------------------------------------------

#[test]
fn events_arrive_in_order_turn_start_deltas_usage_turn_end_tool_use_tool_result() {
    for rig in Rig::all(&scenario("anthropic_tool_then_text"), config()) {
        let slow_weather = Tool::new("get_weather", "", weather_schema(), |_: &Value, _: &ToolContext<'_>| {
            std::thread::sleep(Duration::from_millis(60));
            Ok(ToolOutput::Text("18 °C".into()))
        })
        .unwrap();
        rig.agent.tools().register(slow_weather).unwrap();
        let mut events = Vec::new();
        let result = rig.agent.run("Weather in Paris?", &mut |e| events.push(e.clone())).unwrap();
        let got = kinds(&events);
        let expected: Vec<&str> = match rig.kind {
            // message_start carries usage before any delta; message_delta carries the final usage.
            Kind::MockSse => vec![
                "turn_start",
                "usage",
                "text",
                "tool_input_delta",
                "usage",
                "turn_end",
                "tool_use",
                "tool_result",
                "turn_start",
                "usage",
                "text",
                "usage",
                "turn_end",
            ],
            // One delta per block, then the usage (host providers and JSON responses alike).
            Kind::Scripted | Kind::MockJson => vec![
                "turn_start",
                "text",
                "tool_input_delta",
                "usage",
                "turn_end",
                "tool_use",
                "tool_result",
                "turn_start",
                "text",
                "usage",
                "turn_end",
            ],
        };
        assert_eq!(got, expected, "{:?}: {events:#?}", rig.kind);

        // Text deltas add up to each turn's text.
        let text: String = events
            .iter()
            .filter_map(|e| if let Event::Text { text } = e { Some(text.as_str()) } else { None })
            .collect();
        assert_eq!(text, format!("I'll look up the current weather in Paris for you.{}", result.text));
        let starts: Vec<u32> =
            events.iter().filter_map(|e| if let Event::TurnStart { turn } = e { Some(*turn) } else { None }).collect();
        assert_eq!(starts, vec![1, 2]);
        let Some(Event::ToolUse { id, name, input }) = events.iter().find(|e| matches!(e, Event::ToolUse { .. }))
        else {
            unreachable!()
        };
        assert_eq!(
            (id.as_str(), name.as_str(), input),
            ("toolu_01A09q90qw90lq917835lq9a", "get_weather", &json!({"city": "Paris"}))
        );
        let Some(Event::ToolResult { content, is_error, duration_ms, .. }) =
            events.iter().find(|e| matches!(e, Event::ToolResult { .. }))
        else {
            unreachable!()
        };
        assert_eq!((content, *is_error), (&json!("18 °C"), false));
        assert!(*duration_ms >= 50, "tool_result carries the tool's duration: {duration_ms} ms");
        let ends: Vec<(u32, Option<StopReason>, u64)> = events
            .iter()
            .filter_map(|e| match e {
                Event::TurnEnd { turn, stop_reason, usage, .. } => {
                    Some((*turn, stop_reason.clone(), usage.output_tokens))
                }
                _ => None,
            })
            .collect();
        assert_eq!(ends, vec![(1, Some(StopReason::ToolUse), 71), (2, Some(StopReason::EndTurn), 24)]);
        let Some(Event::Usage { run, .. }) = events.iter().rev().find(|e| matches!(e, Event::Usage { .. })) else {
            unreachable!()
        };
        assert_eq!(run, &result.usage, "the last usage event's run total is the run's usage");
        rig.check();
    }
}

#[test]
fn events_serialize_as_tagged_snake_case_objects() {
    let e = Event::ToolResult {
        id: "t1".into(),
        name: "f".into(),
        content: json!("ok"),
        is_error: false,
        denied: false,
        duration_ms: 7,
    };
    assert_eq!(
        serde_json::to_value(&e).unwrap(),
        json!({"type": "tool_result", "id": "t1", "name": "f", "content": "ok", "is_error": false, "denied": false,
               "duration_ms": 7})
    );
    let e = Event::TurnEnd {
        turn: 2,
        stop_reason: Some(StopReason::EndTurn),
        usage: Usage::default(),
        model: "claude-sonnet-4-6".into(),
        id: "msg_1".into(),
    };
    assert_eq!(serde_json::to_value(&e).unwrap()["stop_reason"], "end_turn");
    assert_eq!(serde_json::to_value(Event::TurnStart { turn: 1 }).unwrap(), json!({"type": "turn_start", "turn": 1}));
}

#[test]
fn usage_is_summed_per_run_and_per_conversation_including_cache_tokens() {
    let usage = |i, o, cw, cr| Usage {
        input_tokens: i,
        output_tokens: o,
        cache_creation_input_tokens: Some(cw),
        cache_read_input_tokens: Some(cr),
        ..Default::default()
    };
    for rig in Rig::all(&scenario("agent_usage_cache"), config()) {
        rig.agent.tools().register(weather_tool(Arc::default())).unwrap();
        let mut turn_ends = Vec::new();
        let first = rig
            .agent
            .run("Weather in Paris?", &mut |e| {
                if let Event::TurnEnd { usage, .. } = e {
                    turn_ends.push(usage.clone());
                }
            })
            .unwrap();
        assert_eq!(turn_ends, vec![usage(100, 20, 40, 0), usage(10, 7, 0, 140)], "{:?}", rig.kind);
        assert_eq!(first.usage, usage(110, 27, 40, 140), "{:?}: run usage", rig.kind);
        assert_eq!(rig.agent.usage(), usage(110, 27, 40, 140), "{:?}: conversation usage", rig.kind);
        let second = rig.agent.run("And now?", &mut |_| {}).unwrap();
        assert_eq!(second.usage, usage(12, 3, 5, 150), "{:?}: the second run counts only itself", rig.kind);
        assert_eq!(rig.agent.usage(), usage(122, 30, 45, 290), "{:?}: the conversation counts both runs", rig.kind);
        assert_eq!(rig.agent.usage().total_input_tokens(), 122 + 45 + 290);
        rig.check();
    }
}

// ---------------------------------------------------------------------------------------------------------
// Item 6: a model supplied by the host.
// ---------------------------------------------------------------------------------------------------------

#[test]
fn a_host_model_function_drives_the_loop_and_sees_tools_system_and_results() {
    let seen: Arc<Mutex<Vec<tooloop::Request>>> = Arc::default();
    let log = seen.clone();
    let provider = FnProvider::new(move |req: &tooloop::Request, _cancel: &tooloop::CancelToken| {
        log.lock().unwrap().push(req.clone());
        let last = req.messages.last().unwrap();
        let result =
            last.content.iter().find_map(|b| if let ContentBlock::ToolResult(r) = b { Some(r.text()) } else { None });
        Ok(match result {
            None => reply(vec![tool_use("toolu_host_1", "get_weather", json!({"city": "Oslo"}))], StopReason::ToolUse),
            Some(text) => reply(vec![ContentBlock::text(format!("The tool said: {text}"))], StopReason::EndTurn),
        })
    });
    let agent = Agent::new(Arc::new(provider), AgentConfig { system: Some(json!("Be brief.")), ..config() });
    let calls = Arc::new(AtomicUsize::new(0));
    agent.tools().register(weather_tool(calls.clone())).unwrap();
    let result = agent.run("Weather in Oslo?", &mut |_| {}).unwrap();
    assert_eq!(result.text, "The tool said: 18 °C, partly cloudy in Oslo");
    assert_eq!(calls.load(Ordering::SeqCst), 1);
    let seen = seen.lock().unwrap();
    assert_eq!(seen.len(), 2);
    assert_eq!(seen[0].model, "claude-sonnet-4-6");
    assert_eq!(seen[0].system, Some(json!("Be brief.")));
    assert_eq!(seen[0].tools.len(), 1);
    assert_eq!(seen[0].tools[0].name, "get_weather");
    assert_eq!(seen[0].tools[0].input_schema, weather_schema());
    assert_valid_view(&seen[1].messages.to_vec());
    assert_valid_view(&agent.messages());
}

#[test]
fn a_host_model_error_or_malformed_reply_fails_the_run_and_keeps_the_conversation_valid() {
    let n = Arc::new(AtomicUsize::new(0));
    let k = n.clone();
    let provider =
        FnProvider::new(move |_: &tooloop::Request, _: &tooloop::CancelToken| match k.fetch_add(1, Ordering::SeqCst) {
            0 => Err(Error::InvalidResponse { message: "the host backend sent garbage".into(), request_id: None }),
            1 => Err(Error::Connection { message: "the host backend is down".into() }),
            _ => Ok(reply(vec![ContentBlock::text("back")], StopReason::EndTurn)),
        });
    let agent = Agent::new(Arc::new(provider), config());
    let err = agent.run("hello", &mut |_| {}).unwrap_err();
    assert!(matches!(err, Error::InvalidResponse { .. }), "{err:?}");
    let err = agent.resume(&mut |_| {}).unwrap_err();
    assert!(matches!(err, Error::Connection { .. }), "{err:?}");
    let errors: Vec<_> =
        agent.conversation().snapshot().into_iter().filter(|e| e.status == EntryStatus::Error).collect();
    assert_eq!(errors.len(), 2, "each failure is visible as an error entry");
    assert!(errors[1].error.as_deref().unwrap().contains("the host backend is down"));
    assert_valid_view(&agent.messages());
    assert_eq!(agent.resume(&mut |_| {}).unwrap().text, "back");
    assert_valid_view(&agent.messages());
}

// ---------------------------------------------------------------------------------------------------------
// One run at a time.
// ---------------------------------------------------------------------------------------------------------

#[test]
fn a_host_model_failure_reaches_the_caller_with_its_source() {
    #[derive(Debug)]
    struct HostTrouble(i32);
    impl std::fmt::Display for HostTrouble {
        fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
            write!(f, "host trouble {}", self.0)
        }
    }
    impl std::error::Error for HostTrouble {}
    let provider = FnProvider::new(|_: &tooloop::Request, _: &tooloop::CancelToken| {
        Err(Error::Host {
            message: "the host model callback returned 7".into(),
            source: Some(Box::new(HostTrouble(7))),
        })
    });
    let agent = Agent::new(Arc::new(provider), config());
    let e = agent.run("hi", &mut |_| {}).unwrap_err();
    assert!(matches!(&e, Error::Host { .. }), "{e:?}");
    assert_eq!(e.kind_name(), "host");
    assert_eq!(e.to_string(), "the host model callback returned 7");
    let source = std::error::Error::source(&e).and_then(|s| s.downcast_ref::<HostTrouble>());
    assert_eq!(source.map(|t| t.0), Some(7));
    // The input is kept and the conversation stays valid: an idle agent lets a host change it.
    assert_eq!(agent.messages().len(), 1);
    assert_eq!(agent.when_idle(|| Ok(5)).unwrap(), 5);
}

#[test]
fn a_second_concurrent_run_is_refused_as_busy() {
    let (entered_tx, entered_rx) = mpsc::channel::<()>();
    let entered_tx = Mutex::new(entered_tx);
    let n = Arc::new(AtomicUsize::new(0));
    let k = n.clone();
    let provider = FnProvider::new(move |_: &tooloop::Request, cancel: &tooloop::CancelToken| {
        if k.fetch_add(1, Ordering::SeqCst) == 0 {
            entered_tx.lock().unwrap().send(()).unwrap();
            // Blocks like a slow model until the run is cancelled.
            cancel.sleep(Duration::from_secs(20));
            return Err(Error::Cancelled { partial: None });
        }
        Ok(reply(vec![ContentBlock::text("second run")], StopReason::EndTurn))
    });
    let agent = Arc::new(Agent::new(Arc::new(provider), config()));
    let a = agent.clone();
    let first = std::thread::spawn(move || a.run("slow", &mut |_| {}));
    entered_rx.recv_timeout(Duration::from_secs(10)).unwrap();

    let busy = agent.run("meanwhile", &mut |_| {}).unwrap_err();
    assert!(matches!(&busy, Error::Busy), "{busy:?}");
    assert!(busy.to_string().contains("busy"), "{busy}");
    let busy = agent.resume(&mut |_| {}).unwrap_err();
    assert!(matches!(&busy, Error::Busy), "{busy:?}");
    let busy = agent.compact(None, &mut |_| {}).unwrap_err();
    assert!(matches!(&busy, Error::Busy), "{busy:?}");
    let mut called = false;
    let busy = agent
        .when_idle(|| {
            called = true;
            Ok(())
        })
        .unwrap_err();
    assert!(matches!(&busy, Error::Busy) && !called, "{busy:?}");
    // The refused run left nothing behind: only the first run's input is in the store.
    let users = agent.conversation().snapshot().into_iter().filter(|e| e.role == EntryRole::User).count();
    assert_eq!(users, 1);

    agent.cancel();
    assert!(matches!(first.join().unwrap(), Err(Error::Cancelled { .. })));
    assert_eq!(agent.run("now", &mut |_| {}).unwrap().text, "second run", "the agent is free again after the run ends");
    assert_valid_view(&agent.messages());
}

#[test]
fn a_token_cancelled_before_the_run_begins_ends_it_at_once_with_the_input_kept() {
    let provider = Arc::new(ScriptedProvider::new(vec![reply(vec![ContentBlock::text("never")], StopReason::EndTurn)]));
    let agent = Agent::new(provider.clone(), config());
    let token = tooloop::CancelToken::new();
    token.cancel();
    let err = agent.run_cancellable(vec![ContentBlock::text("hi")], token, &mut |_| {}).unwrap_err();
    assert!(matches!(err, Error::Cancelled { .. }), "{err:?}");
    assert!(provider.requests().is_empty(), "no request may go out after the cancel");
    assert_eq!(agent.messages(), vec![Message::user("hi")]);
    // A fresh token runs normally and the kept input is part of the conversation.
    assert_eq!(agent.resume(&mut |_| {}).unwrap().text, "never");
    assert_valid_view(&agent.messages());
}

// ---------------------------------------------------------------------------------------------------------
// Item 7: cancel from another thread — mid-stream, while waiting to retry, between tools, inside a tool.
// ---------------------------------------------------------------------------------------------------------

/// Run `rig.agent.run(input)` on a thread; `trigger` is called on the test thread (with the event receiver)
/// and returns when the test should cancel. Returns the run's result and the ms from cancel() to its end.
fn cancel_during(
    rig: &Rig,
    input: &str,
    trigger: impl FnOnce(&mpsc::Receiver<Event>),
) -> (tooloop::Result<tooloop::RunResult>, u128) {
    let (tx, rx) = mpsc::channel::<Event>();
    let agent = rig.agent.clone();
    let input = input.to_string();
    let started = Instant::now();
    let handle = std::thread::spawn(move || {
        let r = agent.run(&input, &mut |e| {
            let _ = tx.send(e.clone());
        });
        (r, Instant::now())
    });
    trigger(&rx);
    let cancelled_at = Instant::now();
    rig.agent.cancel();
    let (result, ended) = handle.join().unwrap();
    let ms = ended.saturating_duration_since(cancelled_at).as_millis();
    println!(
        "{:?}: the run ended {ms} ms after cancel() ({} ms after it started)",
        rig.kind,
        started.elapsed().as_millis()
    );
    (result, ms)
}

#[test]
fn cancel_mid_stream_ends_quickly_with_an_error_entry_and_a_valid_view() {
    let rig = Rig::new(Kind::MockSse, &scenario("anthropic_stream_stall"), config());
    let (result, ms) = cancel_during(&rig, "Tell me something.", |rx| {
        // Wait for the first text delta: the stream is open and then stalls for 30 s.
        loop {
            match rx.recv_timeout(Duration::from_secs(10)).expect("a text delta arrives") {
                Event::Text { .. } => break,
                _ => continue,
            }
        }
        // Not a multiple of the HTTP layer's 20 ms wait slice, so the measured time is not flattered by alignment.
        std::thread::sleep(Duration::from_millis(110));
    });
    assert!(matches!(result, Err(Error::Cancelled { .. })), "{result:?}");
    assert!(ms < 1000, "cancel took {ms} ms");
    let entries = rig.agent.conversation().snapshot();
    let last = entries.last().unwrap();
    assert_eq!((last.role, last.status), (EntryRole::Assistant, EntryStatus::Error));
    assert_eq!(last.error.as_deref(), Some("cancelled"));
    assert_eq!(last.content, vec![ContentBlock::text("This tex")], "the partial text is kept for the record");
    assert_eq!(rig.agent.messages(), vec![Message::user("Tell me something.")], "the partial turn is not in the view");
    rig.check();

    // The host resumes: the same view goes out again.
    rig.mock.as_ref().unwrap().load(&scenario("anthropic_text"));
    rig.agent.resume(&mut |_| {}).unwrap();
    let again = rig.requests();
    assert_eq!(checked_messages(&again[0]), vec![Message::user("Tell me something.")]);
    rig.check();
}

#[test]
fn cancel_while_waiting_to_retry_ends_quickly() {
    let rig = Rig::new(Kind::MockSse, &scenario("agent_429_retry_after_10s"), config());
    let mock_port = rig.mock.as_ref().unwrap().port();
    let (result, ms) = cancel_during(&rig, "Hello?", |_| {
        // The 429 asks for a 10 s wait: cancel once the first attempt is recorded and the wait has begun.
        let deadline = Instant::now() + Duration::from_secs(10);
        while rig.mock.as_ref().unwrap().requests().is_empty() {
            assert!(Instant::now() < deadline, "no request reached mock :{mock_port}");
            std::thread::sleep(Duration::from_millis(20));
        }
        std::thread::sleep(Duration::from_millis(200));
    });
    assert!(matches!(result, Err(Error::Cancelled { .. })), "{result:?}");
    assert!(ms < 1000, "cancel during the retry wait took {ms} ms");
    assert_eq!(rig.requests().len(), 1, "no retry after the cancel");
    let last = rig.agent.conversation().snapshot().pop().unwrap();
    assert_eq!((last.role, last.status), (EntryRole::Assistant, EntryStatus::Error));
    rig.check();
}

#[test]
fn cancel_between_tools_answers_the_remaining_calls_as_interrupted_and_resume_does_not_rerun() {
    for kind in [Kind::Scripted, Kind::MockSse, Kind::MockJson] {
        let rig = Rig::new(kind, &scenario("anthropic_parallel_tools"), config());
        let (entered_tx, entered_rx) = mpsc::channel::<()>();
        let (proceed_tx, proceed_rx) = mpsc::channel::<()>();
        let (entered_tx, proceed_rx) = (Mutex::new(entered_tx), Mutex::new(proceed_rx));
        let weather_calls = Arc::new(AtomicUsize::new(0));
        let time_calls = Arc::new(AtomicUsize::new(0));
        let c = weather_calls.clone();
        let gated = Tool::new("get_weather", "", weather_schema(), move |_: &Value, _: &ToolContext<'_>| {
            if c.fetch_add(1, Ordering::SeqCst) == 0 {
                entered_tx.lock().unwrap().send(()).unwrap();
                proceed_rx.lock().unwrap().recv_timeout(Duration::from_secs(10)).unwrap();
            }
            Ok(ToolOutput::Text("18 °C".into()))
        })
        .unwrap();
        rig.agent.tools().register(gated).unwrap();
        rig.agent.tools().register(time_tool(time_calls.clone())).unwrap();

        let agent = rig.agent.clone();
        let handle = std::thread::spawn(move || {
            let r = agent.run("Weather and time?", &mut |_| {});
            (r, Instant::now())
        });
        entered_rx.recv_timeout(Duration::from_secs(10)).unwrap();
        let cancelled_at = Instant::now();
        rig.agent.cancel();
        proceed_tx.send(()).unwrap();
        let (result, ended) = handle.join().unwrap();
        let ms = ended.saturating_duration_since(cancelled_at).as_millis();
        println!("{kind:?}: cancel between tools: the run ended {ms} ms after cancel()");
        assert!(matches!(result, Err(Error::Cancelled { .. })), "{result:?}");
        assert!(ms < 1000);
        assert_eq!((weather_calls.load(Ordering::SeqCst), time_calls.load(Ordering::SeqCst)), (1, 0));
        let view = rig.agent.messages();
        let results = results_of(&serde_json::to_value(&view[2]).unwrap());
        assert_eq!(
            results[0],
            (PARALLEL_IDS[0].to_string(), "18 °C".to_string(), false),
            "the call in progress completes"
        );
        for r in &results[1..] {
            assert!(r.2 && r.1.contains("interrupted"), "{r:?}");
            assert!(!r.1.to_lowercase().contains("denied"), "an interrupted call is not a denied one: {r:?}");
        }
        assert_eq!(rig.requests().len(), 1);
        rig.check();

        let done = rig.agent.resume(&mut |_| {}).unwrap();
        assert_eq!(done.turns, 1);
        assert_eq!(
            (weather_calls.load(Ordering::SeqCst), time_calls.load(Ordering::SeqCst)),
            (1, 0),
            "resume re-ran a tool"
        );
        let requests = rig.requests();
        assert_eq!(requests.len(), 2);
        assert_eq!(results_of(&requests[1]["messages"][2]), results);
        rig.check();
    }
}

#[test]
fn cancel_while_a_tool_runs_reaches_the_tool_through_its_context() {
    let scen = json!({"responses": [
        {"anthropic": reply(vec![tool_use("toolu_wait", "wait", json!({})), tool_use("toolu_after", "wait", json!({}))], StopReason::ToolUse)},
    ]});
    let rig = Rig::new(Kind::Scripted, &scen, config());
    let wait =
        Tool::new("wait", "waits for a cancel", json!({"type": "object"}), |_: &Value, ctx: &ToolContext<'_>| {
            if ctx.cancel.sleep(Duration::from_secs(20)) {
                return Err(ToolError::Respond("cancelled while waiting".into()));
            }
            Ok(ToolOutput::Text("waited 20 s".into()))
        })
        .unwrap();
    rig.agent.tools().register(wait).unwrap();
    let (result, ms) = cancel_during(&rig, "wait", |rx| {
        loop {
            if let Event::ToolUse { .. } = rx.recv_timeout(Duration::from_secs(10)).unwrap() {
                break;
            }
        }
        std::thread::sleep(Duration::from_millis(50));
    });
    assert!(matches!(result, Err(Error::Cancelled { .. })), "{result:?}");
    assert!(ms < 1000, "{ms} ms");
    let results = results_of(&serde_json::to_value(&rig.agent.messages()[2]).unwrap());
    assert_eq!(results[0].1, "cancelled while waiting");
    assert!(results[1].2 && results[1].1.contains("interrupted"));
    rig.check();
}

#[test]
fn a_refused_or_context_full_turn_never_runs_its_tool_calls_and_stops() {
    for (stop, words) in [(StopReason::Refusal, "refused"), (StopReason::ModelContextWindowExceeded, "context window")]
    {
        let scen = json!({"responses": [
            {"anthropic": reply(vec![ContentBlock::text("Let me"), tool_use("toolu_r1", "get_weather", json!({"city": "Paris"}))], stop.clone())},
        ]});
        let rig = Rig::new(Kind::Scripted, &scen, config());
        let calls = Arc::new(AtomicUsize::new(0));
        rig.agent.tools().register(weather_tool(calls.clone())).unwrap();
        let result = rig.agent.run("Weather?", &mut |_| {}).unwrap();
        assert_eq!((result.stop_reason.clone(), result.turns), (Some(stop.clone()), 1));
        assert_eq!(calls.load(Ordering::SeqCst), 0, "{stop}: the call must not run");
        let results = results_of(&serde_json::to_value(&rig.agent.messages()[2]).unwrap());
        assert!(results[0].2 && results[0].1.contains("not run") && results[0].1.contains(words), "{results:?}");
        rig.check();
    }
}

// ---------------------------------------------------------------------------------------------------------
// The same loop over the OpenAI-compatible protocol (the store renders one `tool` message per result).
// ---------------------------------------------------------------------------------------------------------

fn openai(mock: &MockServer, stream: bool) -> Agent {
    let mut c = ProviderConfig::new(Protocol::OpenAi);
    c.api_key = Some(Secret::new(KEY));
    c.base_url = Some(format!("{}/v1", mock.base_url()));
    Agent::new(c.build().unwrap(), AgentConfig { model: "gpt-4o-mini".into(), stream, ..config() })
}

#[test]
fn the_loop_runs_over_the_openai_protocol_with_one_tool_message_per_result_in_call_order() {
    for stream in [true, false] {
        let mock = MockServer::start(&scenario("openai_tool_calls"));
        let agent = openai(&mock, stream);
        let calls = Arc::new(AtomicUsize::new(0));
        agent.tools().register(weather_tool(calls.clone())).unwrap();
        let result = agent.run("Paris and Tokyo?", &mut |_| {}).unwrap();
        assert_eq!(result.text, "Paris: 18 °C, partly cloudy. Tokyo: 24 °C, clear.");
        assert_eq!(calls.load(Ordering::SeqCst), 2);
        let body = mock.requests()[1]["body"].clone();
        let msgs = body["messages"].as_array().unwrap();
        let roles: Vec<&str> = msgs.iter().map(|m| m["role"].as_str().unwrap()).collect();
        assert_eq!(roles, ["user", "assistant", "tool", "tool"], "stream={stream}: {body}");
        assert_eq!(msgs[2]["tool_call_id"], "call_Dc3HnSqpXkyqZ8Jc1nKAbD4n");
        assert_eq!(msgs[3]["tool_call_id"], "call_rfGbHxr0qTzGLSmZ9W8PwGi2");
        assert_eq!(msgs[3]["content"], "18 °C, partly cloudy in Tokyo");
        assert_valid_view(&agent.messages());
    }
}

#[test]
fn invalid_openai_arguments_become_an_error_result_and_go_back_as_stored() {
    let mock = MockServer::start(&scenario("openai_bad_arguments"));
    let agent = openai(&mock, true);
    let calls = Arc::new(AtomicUsize::new(0));
    agent.tools().register(weather_tool(calls.clone())).unwrap();
    let result = agent.run("Weather in Paris?", &mut |_| {}).unwrap();
    assert_eq!(result.text, "Sorry, my tool call was malformed. Paris is currently 18 °C.");
    assert_eq!(calls.load(Ordering::SeqCst), 0);
    let msgs = mock.requests()[1]["body"]["messages"].clone();
    // What was stored is what goes back: `{}` in place of the arguments that never parsed (the error result
    // quotes them for the model).
    assert_eq!(msgs[1]["tool_calls"][0]["function"]["arguments"], "{}");
    let result = msgs[2]["content"].as_str().unwrap();
    assert!(result.contains("must be a JSON object") && result.contains("{\"city\": \"Par"), "{}", msgs[2]);
    assert_valid_view(&agent.messages());
}

#[test]
fn the_run_and_the_conversation_report_their_cost_from_the_core_price_table() {
    let turn = |i: u64, o: u64| {
        let mut m = reply(vec![ContentBlock::text("hi")], StopReason::EndTurn);
        m.usage = Usage { input_tokens: i, output_tokens: o, ..Default::default() };
        m.model = String::new(); // priced by the model asked for
        m
    };
    let agent = Agent::new(Arc::new(ScriptedProvider::new([turn(1_000_000, 0), turn(0, 1_000_000)])), config());
    let first = agent.run("a", &mut |_| {}).unwrap();
    assert!((first.cost_usd.unwrap() - 3.0).abs() < 1e-9, "{:?}", first.cost_usd);
    let second = agent.run("b", &mut |_| {}).unwrap();
    assert!((second.cost_usd.unwrap() - 15.0).abs() < 1e-9);
    assert!((agent.cost_usd().unwrap() - 18.0).abs() < 1e-9);
    let unknown = Agent::new(
        Arc::new(ScriptedProvider::new([turn(5, 5)])),
        AgentConfig { model: "my-local-model".into(), ..config() },
    );
    assert_eq!(unknown.run("a", &mut |_| {}).unwrap().cost_usd, None);
}
