//! A run stepped by its caller (`Agent::start` → `RunDriver::step`): the same run as `Agent::run` (events,
//! requests, store, outcome) on every backend and through retries, overflow compaction and broken streams;
//! a streamed turn handed out a network read per step; cancel and drop part-way leave a valid conversation.
#![allow(clippy::unwrap_used, clippy::expect_used)]

#[path = "common/mock.rs"]
mod mock;

use std::sync::atomic::AtomicUsize;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use mock::scenario;
use serde_json::{Value, json};
use tooloop::{
    AgentConfig, CancelToken, ContentBlock, EntryRole, EntryStatus, Error, Event, Message, RunResult, Tool,
    ToolContext, ToolOutput,
};

#[path = "common/agent.rs"]
mod common;
use common::*;

/// get_time, recording the thread it ran on.
fn time_tool(threads: Arc<Mutex<Vec<std::thread::ThreadId>>>) -> Tool {
    Tool::new("get_time", "The current time.", json!({"type": "object"}), move |_: &Value, _: &ToolContext<'_>| {
        threads.lock().unwrap().push(std::thread::current().id());
        Ok(ToolOutput::Text("14:05 UTC".into()))
    })
    .unwrap()
}

fn rig(kind: Kind, name: &str, config: AgentConfig) -> (Rig, Arc<Mutex<Vec<std::thread::ThreadId>>>) {
    let rig = Rig::new(kind, &scenario(name), config);
    let threads: Arc<Mutex<Vec<std::thread::ThreadId>>> = Arc::default();
    rig.agent.tools().register(weather_tool(Arc::new(AtomicUsize::new(0)))).unwrap();
    rig.agent.tools().register(time_tool(threads.clone())).unwrap();
    (rig, threads)
}

/// A value with its timings (which differ from run to run) set to 0.
fn untimed(mut v: Value) -> Value {
    fn walk(v: &mut Value) {
        match v {
            Value::Object(m) => {
                for (k, x) in m.iter_mut() {
                    if k == "duration_ms" || k == "ts" || k == "time" {
                        *x = json!(0);
                    } else {
                        walk(x);
                    }
                }
            }
            Value::Array(a) => a.iter_mut().for_each(walk),
            _ => {}
        }
    }
    walk(&mut v);
    v
}

/// What a run left behind, for comparing two runs: its outcome, events, requests and store.
fn record(rig: &Rig, outcome: Result<RunResult, Error>, events: &[Event]) -> Value {
    let outcome = match outcome {
        Ok(r) => serde_json::to_value(r).unwrap(),
        Err(e) => json!({"error": e.to_string()}),
    };
    let store: Vec<Value> = rig
        .agent
        .conversation()
        .snapshot()
        .into_iter()
        .map(|e| json!([e.role, e.status, e.content, e.error, e.stop_reason]))
        .collect();
    untimed(json!({
        "outcome": outcome,
        "events": events.iter().map(|e| serde_json::to_value(e).unwrap()).collect::<Vec<_>>(),
        "requests": rig.requests(),
        "store": store,
    }))
}

/// Steps `driver` (stalled) to its end while another thread cancels `token` after 110 ms: the outcome, and the
/// milliseconds from the cancel to the step's return.
fn cancelled_in_a_step(driver: &mut tooloop::RunDriver, token: CancelToken) -> (tooloop::Result<RunResult>, u128) {
    let canceller = std::thread::spawn(move || {
        std::thread::sleep(Duration::from_millis(110));
        token.cancel();
        Instant::now()
    });
    let outcome = loop {
        if let Some(outcome) = driver.step(&mut |_| {}) {
            break outcome;
        }
    };
    let ended = Instant::now();
    (outcome, ended.saturating_duration_since(canceller.join().unwrap()).as_millis())
}

#[test]
fn a_stepped_run_is_the_blocking_run_on_every_backend_and_through_retries_compaction_and_broken_streams() {
    let scenarios = [
        "anthropic_tool_then_text",
        "anthropic_parallel_tools",
        "anthropic_429_then_ok",
        "agent_529_after_tool",
        "anthropic_context_window",
        "anthropic_stream_error_midstream",
        "anthropic_stream_drop",
        "agent_max_tokens_mid_tool_use",
        "agent_pause_turn",
    ];
    let mut compared = 0;
    for name in scenarios {
        for kind in [Kind::Scripted, Kind::MockSse, Kind::MockJson] {
            let (blocking, _) = rig(kind, name, config());
            let mut events = Vec::new();
            let outcome = blocking.agent.run("Weather in Paris, and the time?", &mut |e| events.push(e.clone()));
            let want = record(&blocking, outcome, &events);

            let (stepped, _) = rig(kind, name, config());
            let mut events = Vec::new();
            let mut driver = stepped
                .agent
                .start(Some(vec![ContentBlock::text("Weather in Paris, and the time?")]), CancelToken::new())
                .unwrap();
            let mut steps = 0;
            let outcome = loop {
                steps += 1;
                if let Some(outcome) = driver.step(&mut |e| events.push(e.clone())) {
                    break outcome;
                }
            };
            assert!(driver.ended());
            drop(driver);
            let got = record(&stepped, outcome, &events);
            assert_eq!(got, want, "{name} on {kind:?} ({steps} steps)");
            stepped.check();
            compared += 1;
        }
    }
    assert_eq!(compared, scenarios.len() * 3);
}

#[test]
fn a_streamed_turn_is_handed_out_a_read_per_step_and_tools_run_on_the_stepping_thread() {
    // The stall scenario sends its first delta, then nothing for 30 s: a step that returned the text has
    // not waited for the turn's end.
    let (rig, _) = rig(Kind::MockSse, "anthropic_stream_stall", config());
    let token = CancelToken::new();
    let mut driver = rig.agent.start(Some(vec![ContentBlock::text("Tell me something.")]), token.clone()).unwrap();
    let began = Instant::now();
    let mut events = Vec::new();
    while !events.iter().any(|e| matches!(e, Event::Text { .. })) {
        assert!(driver.step(&mut |e| events.push(e.clone())).is_none(), "the run ended early: {events:?}");
        assert!(began.elapsed() < Duration::from_secs(5), "no text within 5 s");
    }
    assert!(!events.iter().any(|e| matches!(e, Event::TurnEnd { .. })), "{events:?}");
    assert!(matches!(rig.agent.run("again", &mut |_| {}), Err(Error::Busy)), "the driver holds the agent");

    // cancel() from another thread ends the stalled read within 200 ms.
    let (outcome, ms) = cancelled_in_a_step(&mut driver, token);
    println!("the stalled step ended {ms} ms after cancel()");
    assert!(matches!(outcome, Err(Error::Cancelled { .. })), "{outcome:?}");
    assert!(ms < 200, "cancel took {ms} ms");
    let last = rig.agent.conversation().snapshot().pop().unwrap();
    assert_eq!((last.role, last.status), (EntryRole::Assistant, EntryStatus::Error));
    assert_eq!(rig.agent.messages(), vec![Message::user("Tell me something.")]);
    rig.check();
    drop(driver);

    // The agent is free again; a tool of a stepped run runs on the thread that steps.
    let (rig, threads) = rig_with("anthropic_parallel_tools");
    let mut driver = rig.agent.start(Some(vec![ContentBlock::text("Weather and time?")]), CancelToken::new()).unwrap();
    let result = driver.finish(&mut |_| {}).unwrap();
    assert_eq!(result.turns, 2);
    assert_eq!(*threads.lock().unwrap(), vec![std::thread::current().id()]);
    assert!(matches!(driver.step(&mut |_| {}), Some(Err(Error::Config(_)))), "a step after the end");
}

fn rig_with(name: &str) -> (Rig, Arc<Mutex<Vec<std::thread::ThreadId>>>) {
    rig(Kind::MockSse, name, config())
}

#[test]
fn a_driver_dropped_mid_stream_cancels_its_run_and_leaves_a_valid_conversation_to_resume() {
    let (rig, _) = rig_with("anthropic_stream_stall");
    let mut driver = rig.agent.start(Some(vec![ContentBlock::text("Tell me something.")]), CancelToken::new()).unwrap();
    let mut text = false;
    while !text {
        assert!(driver.step(&mut |e| text |= matches!(e, Event::Text { .. })).is_none());
    }
    let began = Instant::now();
    drop(driver);
    assert!(began.elapsed() < Duration::from_millis(200), "the drop took {:?}", began.elapsed());
    let last = rig.agent.conversation().snapshot().pop().unwrap();
    assert_eq!(
        (last.role, last.status, last.error.as_deref()),
        (EntryRole::Assistant, EntryStatus::Error, Some("cancelled"))
    );
    rig.check();

    // Resumed through a driver: the same view goes out again.
    rig.mock.as_ref().unwrap().load(&scenario("anthropic_text"));
    let mut driver = rig.agent.start(None, CancelToken::new()).unwrap();
    let result = driver.finish(&mut |_| {}).unwrap();
    assert_eq!(result.turns, 1);
    let again = rig.requests();
    assert_eq!(checked_messages(&again[0]), vec![Message::user("Tell me something.")]);
    rig.check();
}

/// The OpenAI provider against the mock (Chat Completions, `{base}/v1`).
fn openai(mock: &mock::MockServer) -> Arc<dyn tooloop::Provider> {
    let mut c = tooloop::ProviderConfig::new(tooloop::Protocol::OpenAi);
    c.api_key = Some(tooloop::provider::Secret::new(KEY));
    c.base_url = Some(format!("{}/v1", mock.base_url()));
    c.http.initial_backoff = Duration::from_millis(10);
    c.http.max_backoff = Duration::from_millis(50);
    c.build().unwrap()
}

/// An OpenAI agent (streamed or not) on `scenario`, with the tools of [`rig`].
fn openai_rig(scenario: &Value, stream: bool) -> (Rig, Arc<Mutex<Vec<std::thread::ThreadId>>>) {
    let mut config = config();
    config.stream = stream;
    let mock = mock::MockServer::start(scenario);
    let agent = Arc::new(tooloop::Agent::new(openai(&mock), config));
    let kind = if stream { Kind::MockSse } else { Kind::MockJson };
    let rig = Rig { kind, agent, mock: Some(mock), scripted: None };
    let threads: Arc<Mutex<Vec<std::thread::ThreadId>>> = Arc::default();
    rig.agent.tools().register(weather_tool(Arc::new(AtomicUsize::new(0)))).unwrap();
    rig.agent.tools().register(time_tool(threads.clone())).unwrap();
    (rig, threads)
}

fn openai_text(text: &str) -> Value {
    json!({"id": "chatcmpl-t", "object": "chat.completion", "created": 1, "model": "gpt-4o-mini",
           "choices": [{"index": 0, "message": {"role": "assistant", "content": text}, "finish_reason": "stop"}],
           "usage": {"prompt_tokens": 9, "completion_tokens": 4, "total_tokens": 13}})
}

#[test]
fn an_openai_stepped_run_is_the_blocking_run_through_tools_retries_and_broken_streams() {
    let tools = scenario("openai_tool_calls");
    let answer = |r: Value| json!({"openai": r, "delta_chars": 3});
    let mut retried = tools.clone();
    retried["responses"].as_array_mut().unwrap().insert(
        0,
        json!({"status": 429, "headers": {"retry-after": "0"},
               "json": {"error": {"message": "slow down", "type": "rate_limit_error"}}}),
    );
    let dropped = json!({"responses": [{"openai": openai_text("cut off before the end"), "delta_chars": 3,
                                        "fault": {"type": "drop", "after_events": 4}}]});
    let error_chunk = json!({"responses": [{"sse": [
        {"data": {"id": "c", "object": "chat.completion.chunk", "created": 1, "model": "m",
                  "choices": [{"index": 0, "delta": {"role": "assistant", "content": "Half"}, "finish_reason": null}]}},
        {"data": {"error": {"message": "the server broke", "type": "server_error"}}}]}]});
    let text = json!({"responses": [answer(openai_text("A plain answer in several pieces."))]});
    let mut compared = 0;
    for (name, sc) in
        [("tools", &tools), ("429 then tools", &retried), ("drop", &dropped), ("error", &error_chunk), ("text", &text)]
    {
        for stream in [true, false] {
            let (blocking, _) = openai_rig(sc, stream);
            let mut events = Vec::new();
            let outcome = blocking.agent.run("Weather in Paris, and the time?", &mut |e| events.push(e.clone()));
            let want = record(&blocking, outcome, &events);

            let (stepped, _) = openai_rig(sc, stream);
            let mut events = Vec::new();
            let mut driver = stepped
                .agent
                .start(Some(vec![ContentBlock::text("Weather in Paris, and the time?")]), CancelToken::new())
                .unwrap();
            let mut steps = 0;
            let outcome = loop {
                steps += 1;
                if let Some(outcome) = driver.step(&mut |e| events.push(e.clone())) {
                    break outcome;
                }
            };
            drop(driver);
            let got = record(&stepped, outcome, &events);
            assert_eq!(got, want, "{name}, stream {stream} ({steps} steps)");
            assert_valid_view(&stepped.agent.messages());
            compared += 1;
        }
    }
    assert_eq!(compared, 10);
}

#[test]
fn an_openai_streamed_turn_is_handed_out_a_read_per_step_and_cancel_ends_a_stalled_one() {
    // The answer stalls 30 s after its first pieces: a step that returned the text has not waited for the end.
    let stall = json!({"responses": [{"openai": openai_text("This text stalls half way."), "delta_chars": 4,
                                      "fault": {"type": "stall", "after_events": 3, "ms": 30000}}]});
    let (rig, _) = openai_rig(&stall, true);
    let token = CancelToken::new();
    let mut driver = rig.agent.start(Some(vec![ContentBlock::text("Tell me something.")]), token.clone()).unwrap();
    let began = Instant::now();
    let mut events = Vec::new();
    while !events.iter().any(|e| matches!(e, Event::Text { .. })) {
        assert!(driver.step(&mut |e| events.push(e.clone())).is_none(), "the run ended early: {events:?}");
        assert!(began.elapsed() < Duration::from_secs(5), "no text within 5 s");
    }
    assert!(!events.iter().any(|e| matches!(e, Event::TurnEnd { .. })), "{events:?}");
    let (outcome, ms) = cancelled_in_a_step(&mut driver, token);
    println!("the stalled OpenAI step ended {ms} ms after cancel()");
    assert!(matches!(outcome, Err(Error::Cancelled { .. })), "{outcome:?}");
    assert!(ms < 200, "cancel took {ms} ms");
    assert_eq!(rig.agent.messages(), vec![Message::user("Tell me something.")]);
    drop(driver);

    // A tool of a stepped OpenAI run runs on the thread that steps.
    let call = json!({"id": "chatcmpl-c", "object": "chat.completion", "created": 1, "model": "gpt-4o-mini",
                      "choices": [{"index": 0, "finish_reason": "tool_calls", "message": {"role": "assistant",
                          "content": null, "tool_calls": [{"id": "call_1", "type": "function",
                              "function": {"name": "get_time", "arguments": "{}"}}]}}]});
    let sc = json!({"responses": [{"openai": call}, {"openai": openai_text("It is 14:05.")}]});
    let (rig, threads) = openai_rig(&sc, true);
    let mut driver = rig.agent.start(Some(vec![ContentBlock::text("The time?")]), CancelToken::new()).unwrap();
    let result = driver.finish(&mut |_| {}).unwrap();
    assert_eq!((result.turns, result.text.as_str()), (2, "It is 14:05."));
    assert_eq!(*threads.lock().unwrap(), vec![std::thread::current().id()]);
}
