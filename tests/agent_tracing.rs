//! The spans of a run (src/trace.rs) as a `tracing` subscriber sees them: names (`otel.name`), parents
//! (also for tool calls that run in parallel on other threads), the GenAI attributes, retries as events,
//! a failed call's `error.type`, and content only for a subscriber that enables its target. A run against
//! the mock server with the real Anthropic provider.
#![allow(clippy::unwrap_used, clippy::expect_used)]

#[path = "common/mock.rs"]
mod mock;

use std::collections::BTreeMap;
use std::sync::atomic::AtomicUsize;
use std::sync::{Arc, Mutex};

use mock::{MockServer, scenario};
use serde_json::{Value, json};
use tooloop::{Agent, Tool, ToolContext, ToolError, ToolOutput};
use tracing::field::{Field, Visit};
use tracing::span::{Attributes, Id, Record};
use tracing::{Event, Subscriber};
use tracing_subscriber::Layer;
use tracing_subscriber::layer::{Context, SubscriberExt};
use tracing_subscriber::registry::LookupSpan;

#[path = "common/agent.rs"]
mod common;
use common::*;

#[derive(Clone, Debug, Default)]
struct SpanRec {
    name: String,
    parent: Option<usize>,
    fields: BTreeMap<String, String>,
    events: Vec<(String, BTreeMap<String, String>)>,
    closed: bool,
}

#[derive(Default)]
struct Fields(BTreeMap<String, String>);

impl Visit for Fields {
    fn record_debug(&mut self, field: &Field, value: &dyn std::fmt::Debug) {
        self.0.insert(field.name().to_string(), format!("{value:?}"));
    }
    fn record_str(&mut self, field: &Field, value: &str) {
        self.0.insert(field.name().to_string(), value.to_string());
    }
}

/// Each span as a record (its index in the list kept in the span's extensions: the registry reuses ids).
#[derive(Clone, Default)]
struct Collect {
    spans: Arc<Mutex<Vec<SpanRec>>>,
    content: bool,
}

struct Index(usize);

impl<S: Subscriber + for<'a> LookupSpan<'a>> Layer<S> for Collect {
    fn enabled(&self, meta: &tracing::Metadata<'_>, _: Context<'_, S>) -> bool {
        meta.target() != tooloop::trace::CONTENT_TARGET || self.content
    }
    fn on_new_span(&self, attrs: &Attributes<'_>, id: &Id, ctx: Context<'_, S>) {
        let span = ctx.span(id).unwrap();
        let parent = span.parent().map(|p| p.extensions().get::<Index>().unwrap().0);
        let mut fields = Fields::default();
        attrs.record(&mut fields);
        let mut spans = self.spans.lock().unwrap();
        spans.push(SpanRec {
            name: attrs.metadata().name().to_string(),
            parent,
            fields: fields.0,
            ..Default::default()
        });
        span.extensions_mut().insert(Index(spans.len() - 1));
    }
    fn on_record(&self, id: &Id, values: &Record<'_>, ctx: Context<'_, S>) {
        let at = ctx.span(id).unwrap().extensions().get::<Index>().unwrap().0;
        let mut fields = Fields::default();
        values.record(&mut fields);
        self.spans.lock().unwrap()[at].fields.extend(fields.0);
    }
    fn on_event(&self, event: &Event<'_>, ctx: Context<'_, S>) {
        let Some(span) = ctx.event_span(event) else { return };
        let at = span.extensions().get::<Index>().unwrap().0;
        let mut fields = Fields::default();
        event.record(&mut fields);
        self.spans.lock().unwrap()[at].events.push((event.metadata().name().to_string(), fields.0));
    }
    fn on_close(&self, id: Id, ctx: Context<'_, S>) {
        let at = ctx.span(&id).unwrap().extensions().get::<Index>().unwrap().0;
        self.spans.lock().unwrap()[at].closed = true;
    }
}

/// Run `f` with a collecting subscriber as this thread's default; the spans it saw.
/// One test of this file at a time (each test takes this first). In parallel, the child-agent test lost every
/// `chat` span in 5 of 6 runs, when the compaction test ran beside it: that test's first run has no
/// subscriber, and a callsite first reached while no `tracing` dispatcher has ever existed in the process is
/// registered with the thread's no-op default; a dispatcher created on another thread at that moment rebuilds
/// the interest of the callsites registered so far, not of that one, which stays "never" until the next
/// dispatcher is created. A race of `tracing-core` at a process's first dispatcher, not of tooloop's spans.
fn serial() -> std::sync::MutexGuard<'static, ()> {
    static SERIAL: std::sync::Mutex<()> = std::sync::Mutex::new(());
    SERIAL.lock().unwrap_or_else(|e| e.into_inner())
}

fn collect(content: bool, f: impl FnOnce()) -> Vec<SpanRec> {
    let layer = Collect { content, ..Default::default() };
    let spans = layer.spans.clone();
    let subscriber = tracing_subscriber::registry().with(layer);
    tracing::subscriber::with_default(subscriber, f);
    spans.lock().unwrap().clone()
}

fn named<'a>(spans: &'a [SpanRec], prefix: &str) -> Vec<(usize, &'a SpanRec)> {
    spans.iter().enumerate().filter(|(_, s)| s.fields.get("otel.name").is_some_and(|n| n.starts_with(prefix))).collect()
}

fn time_tool(fail: bool) -> Tool {
    Tool::new(
        "get_time",
        "The current time.",
        json!({"type": "object", "properties": {}}),
        move |_: &Value, _: &ToolContext<'_>| {
            if fail {
                Err(ToolError::Respond("the clock is broken".into()))
            } else {
                Ok(ToolOutput::Text("14:05 UTC".into()))
            }
        },
    )
    .unwrap()
}

fn parallel_agent(mock: &MockServer, fail_time: bool) -> Arc<Agent> {
    let agent = Agent::new(anthropic(mock), config());
    agent.tools().register(weather_tool(Arc::new(AtomicUsize::new(0))).parallel_safe(true)).unwrap();
    agent.tools().register(time_tool(fail_time).parallel_safe(true)).unwrap();
    Arc::new(agent)
}

#[test]
fn a_run_is_an_invoke_agent_span_with_chat_and_parallel_execute_tool_children() {
    let _serial = serial();
    let mock = MockServer::start(&scenario("anthropic_parallel_tools"));
    let agent = parallel_agent(&mock, true);
    let spans = collect(false, || {
        agent.run("Weather in Paris and Tokyo, and the time?", &mut |_| {}).unwrap();
    });
    let runs = named(&spans, "invoke_agent");
    assert_eq!(runs.len(), 1, "{spans:#?}");
    let (run_at, run) = runs[0];
    assert_eq!(run.name, "invoke_agent");
    assert_eq!(run.parent, None);
    assert_eq!(run.fields["otel.name"], "invoke_agent");
    assert_eq!(run.fields["gen_ai.operation.name"], "invoke_agent");
    assert_eq!(run.fields["gen_ai.provider.name"], "anthropic");
    assert_eq!(run.fields["gen_ai.request.model"], "claude-sonnet-4-6");
    assert_eq!(run.fields["gen_ai.usage.input_tokens"], "1200");
    assert_eq!(run.fields["gen_ai.usage.output_tokens"], "187");
    assert_eq!(run.fields["gen_ai.response.finish_reasons"], r#"["end_turn"]"#);
    assert!(!run.fields.contains_key("error.type"));

    let chats = named(&spans, "chat ");
    assert_eq!(chats.len(), 2, "{spans:#?}");
    for (_, chat) in &chats {
        assert_eq!(chat.parent, Some(run_at));
        assert_eq!(chat.fields["otel.name"], "chat claude-sonnet-4-6");
        assert_eq!(chat.fields["otel.kind"], "client");
        assert_eq!(chat.fields["gen_ai.operation.name"], "chat");
        assert_eq!(chat.fields["gen_ai.provider.name"], "anthropic");
        assert_eq!(chat.fields["gen_ai.response.model"], "claude-sonnet-4-6");
    }
    assert_eq!(chats[0].1.fields["gen_ai.response.id"], "msg_01Gx4aK2zWnq8YbR5tLdJ3pV");
    assert_eq!(chats[0].1.fields["gen_ai.response.finish_reasons"], r#"["tool_use"]"#);
    assert_eq!(chats[0].1.fields["gen_ai.usage.input_tokens"], "498");
    assert_eq!(chats[0].1.fields["gen_ai.usage.output_tokens"], "156");

    // The three calls ran in parallel, on other threads: still children of the run.
    let tools = named(&spans, "execute_tool ");
    assert_eq!(tools.len(), 3, "{spans:#?}");
    let by_id: BTreeMap<&str, &SpanRec> =
        tools.iter().map(|(_, t)| (t.fields["gen_ai.tool.call.id"].as_str(), *t)).collect();
    for (_, t) in &tools {
        assert_eq!(t.parent, Some(run_at), "{t:#?}");
        assert_eq!(t.fields["gen_ai.operation.name"], "execute_tool");
        assert_eq!(t.fields["gen_ai.tool.type"], "function");
        assert_eq!(t.fields["otel.name"], format!("execute_tool {}", t.fields["gen_ai.tool.name"]));
        assert!(t.closed);
        assert!(t.events.is_empty(), "content without opt-in: {t:#?}");
    }
    let weather = by_id["toolu_01T1x1fJ34qAmk2tNTrN7Up6"];
    assert_eq!(weather.fields["gen_ai.tool.name"], "get_weather");
    assert!(!weather.fields.contains_key("error.type"));
    let time = by_id["toolu_01PqZ8sNd3kVbT6cYwR2hXjL"];
    assert_eq!(time.fields["gen_ai.tool.name"], "get_time");
    assert_eq!(time.fields["error.type"], "tool_error");
    assert_eq!(time.fields["otel.status_code"], "error");
    assert!(spans.iter().all(|s| s.closed), "a span was left open: {spans:#?}");
}

#[test]
fn a_retried_request_is_one_chat_span_with_a_retry_event() {
    let _serial = serial();
    let mock = MockServer::start(&scenario("anthropic_429_then_ok"));
    let agent = Arc::new(Agent::new(anthropic(&mock), config()));
    let spans = collect(false, || {
        agent.run("What is the answer?", &mut |_| {}).unwrap();
    });
    let chats = named(&spans, "chat ");
    assert_eq!(chats.len(), 1, "{spans:#?}");
    let retries: Vec<_> = chats[0].1.events.iter().filter(|(n, _)| n == "retry").collect();
    assert_eq!(retries.len(), 1, "{:#?}", chats[0].1);
    assert_eq!(retries[0].1["error.type"], "429");
    assert_eq!(retries[0].1["tooloop.retry.attempt"], "1");
}

#[test]
fn a_failed_run_marks_its_span_with_the_error_type() {
    let _serial = serial();
    let mock = MockServer::start(&scenario("anthropic_errors_401"));
    let agent = Arc::new(Agent::new(anthropic(&mock), config()));
    let spans = collect(false, || {
        agent.run("hello", &mut |_| {}).unwrap_err();
    });
    let (_, run) = named(&spans, "invoke_agent")[0];
    assert_eq!(run.fields["error.type"], "401");
    assert_eq!(run.fields["otel.status_code"], "error");
    let (_, chat) = named(&spans, "chat ")[0];
    assert_eq!(chat.fields["error.type"], "401");
}

#[test]
fn content_events_reach_only_a_subscriber_that_enables_their_target() {
    let _serial = serial();
    let mock = MockServer::start(&scenario("anthropic_parallel_tools"));
    let agent = parallel_agent(&mock, false);
    let spans = collect(true, || {
        agent.run("Weather in Paris and Tokyo, and the time?", &mut |_| {}).unwrap();
    });
    let tools = named(&spans, "execute_tool get_weather");
    let (_, paris) =
        tools.iter().find(|(_, t)| t.fields["gen_ai.tool.call.id"] == "toolu_01T1x1fJ34qAmk2tNTrN7Up6").unwrap();
    let (_, content) = &paris.events[0];
    assert_eq!(content["gen_ai.tool.call.arguments"], r#"{"city":"Paris"}"#);
    assert_eq!(content["gen_ai.tool.call.result"], "18 °C, partly cloudy in Paris");
    let (_, chat) = named(&spans, "chat ")[1];
    let out: Value = serde_json::from_str(&chat.events[0].1["gen_ai.output.messages"]).unwrap();
    assert_eq!(out[0]["role"], "assistant");
    assert_eq!(out[0]["finish_reason"], "end_turn");
    assert_eq!(out[0]["parts"][0]["content"], "Paris: 18 °C, partly cloudy. Tokyo: 24 °C, clear. It is 14:05 UTC.");
}

/// What a host without `tracing` (the C API's event callback) builds its spans from: `turn_start`/`turn_end`
/// bracket a model request and `turn_end` names the answering model and the answer's id; `tool_use`/
/// `tool_result` bracket a call with its id, name, error flag and duration.
#[test]
fn turn_end_events_name_the_answering_model_and_the_answers_id() {
    let _serial = serial();
    let mock = MockServer::start(&scenario("anthropic_parallel_tools"));
    let agent = parallel_agent(&mock, false);
    let mut ends = Vec::new();
    agent
        .run("Weather in Paris and Tokyo, and the time?", &mut |e| {
            if let tooloop::Event::TurnEnd { model, id, .. } = e {
                ends.push((model.clone(), id.clone()));
            }
        })
        .unwrap();
    assert_eq!(
        ends,
        [
            ("claude-sonnet-4-6".to_string(), "msg_01Gx4aK2zWnq8YbR5tLdJ3pV".to_string()),
            ("claude-sonnet-4-6".to_string(), "msg_01Lk9pR3vXzQ7mN2bT5wYcHd".to_string())
        ]
    );
}

fn scripted_call(id: &str, name: &str, input: Value) -> tooloop::ContentBlock {
    tooloop::ContentBlock::ToolUse(tooloop::types::ToolUseBlock {
        id: id.into(),
        name: name.into(),
        input,
        extra: Default::default(),
    })
}

#[test]
fn a_child_agents_run_nests_under_the_task_calls_execute_tool_span() {
    let _serial = serial();
    use tooloop::provider::ScriptedProvider;
    use tooloop::provider::host::reply;
    use tooloop::{AgentOptions, ContentBlock, StopReason};
    let task = json!({"description": "look", "prompt": "find main", "agent_type": "explore"});
    let steps = vec![
        reply(vec![scripted_call("p1", "task", task)], StopReason::ToolUse),
        reply(vec![ContentBlock::text("main is in src/main.rs")], StopReason::EndTurn),
        reply(vec![ContentBlock::text("done")], StopReason::EndTurn),
    ];
    let types = json!({"explore": {"description": "Explores.", "max_turns": 2}});
    let agent = AgentOptions::from_value(json!({"subagents": types}))
        .unwrap()
        .build_with(Arc::new(ScriptedProvider::new(steps)))
        .unwrap();
    let spans = collect(false, || {
        agent.run("where is main?", &mut |_| {}).unwrap();
    });
    let (parent_at, _) = named(&spans, "invoke_agent").into_iter().find(|(_, s)| s.parent.is_none()).unwrap();
    let (task_at, task) = named(&spans, "execute_tool task")[0];
    assert_eq!(task.parent, Some(parent_at));
    let (child_at, child) = named(&spans, "invoke_agent explore")[0];
    assert_eq!(child.parent, Some(task_at));
    assert_eq!(child.fields["gen_ai.agent.name"], "explore");
    let child_chats: Vec<_> = named(&spans, "chat ").into_iter().filter(|(_, c)| c.parent == Some(child_at)).collect();
    assert_eq!(child_chats.len(), 1, "{spans:#?}");
}

#[test]
fn a_compaction_is_a_span_with_its_reason_method_and_sizes() {
    let _serial = serial();
    use tooloop::provider::ScriptedProvider;
    use tooloop::provider::host::reply;
    use tooloop::{ContentBlock, StopReason};
    let mut steps: Vec<_> = (1..=4)
        .map(|i| reply(vec![scripted_call(&format!("t{i}"), "get_time", json!({}))], StopReason::ToolUse))
        .collect();
    steps.push(reply(vec![ContentBlock::text("done")], StopReason::EndTurn));
    steps.push(reply(vec![ContentBlock::text("SUMMARY: the time was asked four times")], StopReason::EndTurn));
    let agent = Agent::new(Arc::new(ScriptedProvider::new(steps)), config());
    agent.tools().register(time_tool(false)).unwrap();
    agent.run("What time is it? Ask four times.", &mut |_| {}).unwrap();
    let spans = collect(false, || {
        agent.compact(None, &mut |_| {}).unwrap().expect("compacted");
    });
    let (_, c) = named(&spans, "compaction ")[0];
    assert_eq!(c.name, "compaction");
    assert_eq!(c.fields["otel.name"], "compaction manual");
    assert_eq!(c.fields["tooloop.compaction.method"], "summary");
    assert!(c.fields.contains_key("tooloop.compaction.tokens_before"), "{c:#?}");
    assert!(c.closed);
    // The summary request is a model request of its own, inside the compaction.
    let (_, summary) = named(&spans, "chat ")[0];
    assert_eq!(summary.parent, Some(named(&spans, "compaction ")[0].0));
    assert_eq!(summary.fields["gen_ai.operation.name"], "chat");
}
