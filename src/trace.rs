//! The spans a run reports through [`tracing`]: what their names and fields are, and the helpers the loop
//! makes them with. Names and fields follow the OpenTelemetry GenAI semantic conventions (semantic-conventions
//! 1.37, the first with `gen_ai.provider.name`; checked against the 1.41 pages: `gen-ai-agent-spans.md`,
//! `gen-ai-spans.md`), so a host that bridges `tracing` to OpenTelemetry (`tracing-opentelemetry`) gets the
//! spans GenAI backends know.
//!
//! | span (`tracing` name) | `otel.name` | when | parent |
//! |---|---|---|---|
//! | `invoke_agent` | `invoke_agent` / `invoke_agent {agent type}` | a run (a child agent's too) | the caller's current span; a child's: the `task` call's `execute_tool` |
//! | `chat` | `chat {model}` | one model request (its retries are `retry` events in it) | the run; a compaction's summary request: the compaction |
//! | `execute_tool` | `execute_tool {tool name}` | one tool call that runs | the run (also when it runs on another thread) |
//! | `compaction` | `compaction {reason}` | one compaction of the conversation | the run, or the caller's span for [`crate::Agent::compact`] |
//!
//! Fields: `gen_ai.operation.name`, `gen_ai.provider.name`, `gen_ai.request.model`, `gen_ai.response.model`,
//! `gen_ai.response.id`, `gen_ai.response.finish_reasons` (a JSON array as text), `gen_ai.usage.input_tokens`
//! (every input token: uncached, cache writes and cache reads), `gen_ai.usage.output_tokens`,
//! `gen_ai.agent.name`, `gen_ai.conversation.id` (the session's id, when the agent has a session),
//! `gen_ai.tool.name`, `gen_ai.tool.call.id`, `gen_ai.tool.type` (`function`: every tooloop tool runs in the
//! host's process), `error.type` (an API error's HTTP status, else the error's kind: `timeout`,
//! `connection`, `cancelled`, … ; `tool_error` for a tool's error result). The `tracing-opentelemetry`
//! special fields give the span its OpenTelemetry name, kind and status: `otel.name`, `otel.kind` (`client`
//! for `chat`, `internal` otherwise), `otel.status_code` (`error` when `error.type` is set).
//!
//! Content (message text, tool arguments and results) is never a span field: it goes in events of target
//! [`CONTENT_TARGET`] at `TRACE` level, which a subscriber enables only when its user opted in to content
//! capture; then each event's fields (`gen_ai.input.messages`, `gen_ai.output.messages`,
//! `gen_ai.tool.call.arguments`, `gen_ai.tool.call.result`) belong on its span. They are redacted like tool
//! output (the registry's secrets). Disabled, they cost nothing: the values are never built.
//!
//! With no subscriber, a span costs one relaxed atomic load and its fields are not evaluated.
//!
//! The helpers that read tools' and compaction's types live with the loop (`agent/spans.rs`): this module
//! sits below `http` and `tools`, which report through it.
//!
//! Must never: put content in a span field, or do work for a span that is disabled.

use tracing::Span;
use tracing::field::Empty;

use crate::error::Error;
use crate::types::{MessageResponse, StopReason, Usage};

/// The target of the events that carry content (opt-in): see the module docs.
pub const CONTENT_TARGET: &str = "tooloop::content";

/// The conventions' `gen_ai.provider.name` for a provider's [`name`](crate::provider::Provider::name).
pub fn provider_name(provider: &str) -> &str {
    match provider {
        "bedrock" => "aws.bedrock",
        p if p.starts_with("openai") => "openai",
        p => p,
    }
}

/// Whether a subscriber may want the run's spans: checked before gathering what a span's fields need, so
/// that without a subscriber nothing is gathered (one relaxed atomic load).
pub(crate) fn enabled() -> bool {
    tracing::enabled!(target: "tooloop::trace", tracing::Level::INFO)
}

/// The span of one run (`invoke_agent`), a child of the current span.
pub(crate) fn run_span(agent_name: Option<&str>, provider: &str, model: &str, conversation: Option<&str>) -> Span {
    let span = tracing::info_span!(
        "invoke_agent",
        "otel.name" = Empty,
        "otel.kind" = "internal",
        "otel.status_code" = Empty,
        "gen_ai.operation.name" = "invoke_agent",
        "gen_ai.provider.name" = provider_name(provider),
        "gen_ai.agent.name" = agent_name,
        "gen_ai.request.model" = model,
        "gen_ai.conversation.id" = conversation,
        "gen_ai.usage.input_tokens" = Empty,
        "gen_ai.usage.output_tokens" = Empty,
        "gen_ai.response.finish_reasons" = Empty,
        "error.type" = Empty,
        "tooloop.turns" = Empty,
        "tooloop.cost_usd" = Empty,
    );
    if !span.is_disabled() {
        match agent_name {
            Some(n) => span.record("otel.name", format!("invoke_agent {n}")),
            None => span.record("otel.name", "invoke_agent"),
        };
    }
    span
}

/// A run ended: its usage, why it stopped, or its error.
pub(crate) fn end_run(span: &Span, outcome: Result<&crate::run::RunResult, &Error>) {
    if span.is_disabled() {
        return;
    }
    match outcome {
        Ok(run) => {
            record_usage(span, &run.usage);
            if let Some(s) = &run.stop_reason {
                span.record("gen_ai.response.finish_reasons", finish_reasons(s));
            }
            span.record("tooloop.turns", run.turns);
            if let Some(c) = run.cost_usd {
                span.record("tooloop.cost_usd", c);
            }
        }
        Err(e) => record_error(span, &error_type(e)),
    }
}

/// The span of one model request (`chat {model}`), a child of `run`.
pub(crate) fn chat_span(run: &Span, provider: &str, model: &str) -> Span {
    let span = tracing::info_span!(
        parent: run,
        "chat",
        "otel.name" = Empty,
        "otel.kind" = "client",
        "otel.status_code" = Empty,
        "gen_ai.operation.name" = "chat",
        "gen_ai.provider.name" = provider_name(provider),
        "gen_ai.request.model" = model,
        "gen_ai.response.model" = Empty,
        "gen_ai.response.id" = Empty,
        "gen_ai.response.finish_reasons" = Empty,
        "gen_ai.usage.input_tokens" = Empty,
        "gen_ai.usage.output_tokens" = Empty,
        "error.type" = Empty,
    );
    if !span.is_disabled() {
        span.record("otel.name", format!("chat {model}"));
    }
    span
}

/// A model request answered: the response's model, id, stop reason and usage.
pub(crate) fn end_chat(span: &Span, message: &MessageResponse) {
    if span.is_disabled() {
        return;
    }
    if !message.model.is_empty() {
        span.record("gen_ai.response.model", message.model.as_str());
    }
    if !message.id.is_empty() {
        span.record("gen_ai.response.id", message.id.as_str());
    }
    if let Some(s) = &message.stop_reason {
        span.record("gen_ai.response.finish_reasons", finish_reasons(s));
    }
    record_usage(span, &message.usage);
}

/// The span of one tool call that runs (`execute_tool {name}`), a child of the current span.
pub(crate) fn tool_span(name: &str, call_id: &str) -> Span {
    let span = tracing::info_span!(
        "execute_tool",
        "otel.name" = Empty,
        "otel.kind" = "internal",
        "otel.status_code" = Empty,
        "gen_ai.operation.name" = "execute_tool",
        "gen_ai.tool.name" = name,
        "gen_ai.tool.call.id" = call_id,
        "gen_ai.tool.type" = "function",
        "error.type" = Empty,
    );
    if !span.is_disabled() {
        span.record("otel.name", format!("execute_tool {name}"));
    }
    span
}

/// The span of one compaction (`compaction {reason}`), a child of the current span.
pub(crate) fn compaction_span(reason: &str) -> Span {
    let span = tracing::info_span!(
        "compaction",
        "otel.name" = Empty,
        "otel.kind" = "internal",
        "otel.status_code" = Empty,
        "tooloop.compaction.reason" = reason,
        "tooloop.compaction.method" = Empty,
        "tooloop.compaction.tokens_before" = Empty,
        "tooloop.compaction.tokens_after" = Empty,
        "error.type" = Empty,
    );
    if !span.is_disabled() {
        span.record("otel.name", format!("compaction {reason}"));
    }
    span
}

/// Mark a span failed with `kind` (its `error.type`).
pub(crate) fn record_error(span: &Span, kind: &str) {
    span.record("error.type", kind);
    span.record("otel.status_code", "error");
}

/// The conventions' `error.type` of an error (see [`Error::error_type`]).
pub(crate) fn error_type(e: &Error) -> String {
    e.error_type()
}

pub(crate) fn record_usage(span: &Span, usage: &Usage) {
    let input = usage.input_tokens
        + usage.cache_creation_input_tokens.unwrap_or(0)
        + usage.cache_read_input_tokens.unwrap_or(0);
    span.record("gen_ai.usage.input_tokens", input);
    span.record("gen_ai.usage.output_tokens", usage.output_tokens);
}

pub(crate) fn finish_reasons(stop: &StopReason) -> String {
    serde_json::json!([stop]).to_string()
}

/// Run `f` inside `span` with the span's own subscriber as this thread's default, so spans `f` starts here
/// (a tool's, a child agent's) reach the same subscriber and parent: what a run's work on another thread
/// (parallel tool calls, a tool under a timeout) needs. A disabled span: just `f()`.
pub fn in_span<T>(span: &Span, f: impl FnOnce() -> T) -> T {
    match span.with_subscriber(|(_, dispatch)| dispatch.clone()) {
        Some(dispatch) => tracing::dispatcher::with_default(&dispatch, || span.in_scope(f)),
        None => f(),
    }
}

/// The current span and subscriber, to carry to another thread (see [`Carried::run`]).
pub struct Carried {
    span: Span,
    dispatch: Option<tracing::Dispatch>,
}

impl Carried {
    /// Take this thread's current span and its default subscriber (when one is set).
    pub fn here() -> Carried {
        let span = Span::current();
        let dispatch = if span.is_disabled() { None } else { Some(tracing::dispatcher::get_default(|d| d.clone())) };
        Carried { span, dispatch }
    }

    /// Run `f` under the carried subscriber, inside the carried span.
    pub fn run<T>(&self, f: impl FnOnce() -> T) -> T {
        match &self.dispatch {
            Some(d) => tracing::dispatcher::with_default(d, || self.span.in_scope(f)),
            None => f(),
        }
    }
}
