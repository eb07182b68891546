//! The loop's side of its spans (see [`crate::trace`]): what a tool call's, a model answer's and a
//! compaction's outcome records on its span, and the opt-in content events.

use tracing::Span;

use crate::types::MessageResponse;

/// A tool call ended: `error.type` for an error result (`tool_error`), a call that ended the run
/// (`tool_aborted`) or one with no outcome (`_OTHER`); with content capture on, its arguments and result.
pub(crate) fn end_tool(
    span: &Span,
    call: &crate::types::ToolUseBlock,
    outcome: Option<&crate::tools::CallOutcome>,
    tools: &crate::tools::ToolRegistry,
) {
    if span.is_disabled() {
        return;
    }
    match outcome {
        Some(o) if o.fatal.is_some() => crate::trace::record_error(span, "tool_aborted"),
        Some(o) if o.is_error => crate::trace::record_error(span, "tool_error"),
        Some(_) => {}
        None => crate::trace::record_error(span, "_OTHER"),
    }
    // Under the span's own subscriber: this may run on a thread where another one is the default.
    crate::trace::in_span(span, || {
        tracing::event!(target: crate::trace::CONTENT_TARGET, parent: span, tracing::Level::TRACE, {
            "gen_ai.tool.call.arguments" = %tools.redact(call.input.to_string()),
            "gen_ai.tool.call.result" = %tools.redact(outcome.map(|o| text_of(&o.content)).unwrap_or_default()),
        })
    });
}

/// With content capture on, a model answer as the conventions' `gen_ai.output.messages` (one assistant
/// message: its text, its tool calls, why it stopped), redacted.
pub(crate) fn chat_content(span: &Span, message: &MessageResponse, tools: &crate::tools::ToolRegistry) {
    if span.is_disabled() {
        return;
    }
    crate::trace::in_span(span, || {
        tracing::event!(target: crate::trace::CONTENT_TARGET, parent: span, tracing::Level::TRACE, {
            "gen_ai.output.messages" = %tools.redact(output_messages(message)),
        })
    });
}

fn output_messages(message: &MessageResponse) -> String {
    use crate::types::ContentBlock;
    let parts: Vec<serde_json::Value> = message
        .content
        .iter()
        .filter_map(|b| match b {
            ContentBlock::Text(t) => Some(serde_json::json!({"type": "text", "content": t.text})),
            ContentBlock::ToolUse(t) => {
                Some(serde_json::json!({"type": "tool_call", "id": t.id, "name": t.name, "arguments": t.input}))
            }
            _ => None,
        })
        .collect();
    let finish = message.stop_reason.as_ref().map(|s| serde_json::json!(s));
    serde_json::json!([{"role": "assistant", "parts": parts, "finish_reason": finish}]).to_string()
}

/// A tool result's content as text: a string as it is, blocks as their text joined, else the JSON.
fn text_of(content: &serde_json::Value) -> String {
    match content {
        serde_json::Value::String(s) => s.clone(),
        serde_json::Value::Array(blocks) => blocks
            .iter()
            .filter_map(|b| b.get("text").and_then(serde_json::Value::as_str))
            .collect::<Vec<_>>()
            .join("\n"),
        other => other.to_string(),
    }
}

/// A compaction ended: how, and the estimated tokens before and after; or its error.
pub(crate) fn end_compaction(span: &Span, done: &crate::error::Result<Option<crate::compaction::Compaction>>) {
    if span.is_disabled() {
        return;
    }
    match done {
        Ok(Some(c)) => {
            if let Ok(serde_json::Value::String(m)) = serde_json::to_value(c.method) {
                span.record("tooloop.compaction.method", m.as_str());
            }
            span.record("tooloop.compaction.tokens_before", c.tokens_before);
            span.record("tooloop.compaction.tokens_after", c.tokens_after);
        }
        Ok(None) => {}
        Err(e) => crate::trace::record_error(span, &crate::trace::error_type(e)),
    }
}
