//! The Anthropic Messages provider against the shared mock server: JSON and streamed responses fold into the
//! same message, stream events reach the caller as they are decoded, stream quirks (ping, unknown events,
//! fragmented tool input, cumulative usage, error events) are handled, and requests carry what the API needs.
//!
//! Every test goes through the real provider (`ProviderConfig::build`) and real HTTP to `mockserver.py`.
#![allow(clippy::unwrap_used, clippy::expect_used)]

#[path = "common/mock.rs"]
mod mock;
#[path = "common/wire.rs"]
mod wire;

use std::sync::Arc;
use std::time::{Duration, Instant};

use mock::{MockServer, scenario};
use serde_json::{Value, json};
use tooloop::provider::{Protocol, Provider, ProviderConfig, StreamEvent};
use tooloop::{ApiErrorKind, CancelToken, ContentBlock, Error, Message, MessageResponse, Request, StopReason};
use wire::{fast_http, provider_config, response_of, send};

fn config(mock: &MockServer) -> ProviderConfig {
    provider_config(Protocol::Anthropic, mock.base_url(), fast_http())
}

fn provider(mock: &MockServer) -> Arc<dyn Provider> {
    config(mock).build().unwrap()
}

fn request(stream: bool) -> Request {
    Request {
        model: "claude-sonnet-4-6".into(),
        max_tokens: 1024,
        messages: vec![Message::user("What's the weather in Paris?")].into(),
        stream,
        ..Default::default()
    }
}

/// Serves `response` to a JSON request and then to a streaming one, checks both agree (message and raw),
/// that nothing was lost against the scenario, and that the stream events rebuild the message.
fn assert_json_and_stream_agree(response: &Value) -> (MessageResponse, Vec<StreamEvent>) {
    let mock = MockServer::start(&json!({"responses": [response, response]}));
    let p = provider(&mock);
    let json_resp = send(&*p, &request(false)).0.unwrap();
    let (stream_resp, events) = send(&*p, &request(true));
    let stream_resp = stream_resp.unwrap();

    let requests = mock.requests();
    assert_eq!(requests.len(), 2);
    assert_eq!(requests[0]["body"].get("stream"), None, "a JSON request must not ask for a stream");
    assert_eq!(requests[1]["body"]["stream"], true);

    let wire = &response["anthropic"];
    assert_eq!(json_resp.raw, *wire, "the JSON call's raw is the body as sent");
    assert_eq!(serde_json::to_value(&json_resp.message).unwrap(), *wire, "parsing the body lost something");
    assert_eq!(stream_resp.message, json_resp.message, "stream and JSON disagree on the message");
    assert_eq!(stream_resp.raw, json_resp.raw, "the reassembled stream is not the JSON body");
    assert_eq!(json_resp.request_id.as_deref(), Some("req_mock_0"));
    assert_eq!(stream_resp.request_id.as_deref(), Some("req_mock_1"));
    assert_events_rebuild(&stream_resp.message, &events);
    (stream_resp.message, events)
}

/// The typed events alone rebuild every text/thinking/tool_use block, each typed event is followed by
/// the Raw event it was decoded from, and the last Usage event is the final usage.
fn assert_events_rebuild(message: &MessageResponse, events: &[StreamEvent]) {
    for (i, block) in message.content.iter().enumerate() {
        let text: String = events
            .iter()
            .filter_map(|e| match e {
                StreamEvent::TextDelta { index, text } if *index == i => Some(text.as_str()),
                _ => None,
            })
            .collect();
        let thinking: String = events
            .iter()
            .filter_map(|e| match e {
                StreamEvent::ThinkingDelta { index, thinking } if *index == i => Some(thinking.as_str()),
                _ => None,
            })
            .collect();
        let input_json: String = events
            .iter()
            .filter_map(|e| match e {
                StreamEvent::ToolInputDelta { index, partial_json } if *index == i => Some(partial_json.as_str()),
                _ => None,
            })
            .collect();
        let starts: Vec<(&str, &str)> = events
            .iter()
            .filter_map(|e| match e {
                StreamEvent::ToolUseStart { index, id, name } if *index == i => Some((id.as_str(), name.as_str())),
                _ => None,
            })
            .collect();
        match block {
            ContentBlock::Text(t) => assert_eq!(text, t.text, "text deltas of block {i}"),
            ContentBlock::Thinking(t) => assert_eq!(thinking, t.thinking, "thinking deltas of block {i}"),
            ContentBlock::ToolUse(t) => {
                assert_eq!(starts, [(t.id.as_str(), t.name.as_str())], "one ToolUseStart for block {i}");
                let input: Value =
                    if input_json.is_empty() { json!({}) } else { serde_json::from_str(&input_json).unwrap() };
                assert_eq!(input, t.input, "tool input fragments of block {i}");
            }
            _ => assert!(text.is_empty() && thinking.is_empty() && starts.is_empty(), "no typed events for block {i}"),
        }
    }
    for (i, e) in events.iter().enumerate() {
        let wanted: &[&str] = match e {
            StreamEvent::TextDelta { .. } | StreamEvent::ThinkingDelta { .. } | StreamEvent::ToolInputDelta { .. } => {
                &["content_block_delta"]
            }
            StreamEvent::ToolUseStart { .. } => &["content_block_start"],
            StreamEvent::Usage(_) => &["message_start", "message_delta"],
            StreamEvent::Raw { .. } | StreamEvent::RawJson { .. } => continue,
        };
        match events.get(i + 1) {
            Some(StreamEvent::Raw { event, data }) => {
                assert!(wanted.contains(&event.as_str()), "{e:?} followed by Raw {event}");
                assert_eq!(data["type"], json!(event), "Raw data is the event's JSON");
            }
            other => panic!("{e:?} must be followed by its Raw event, got {other:?}"),
        }
    }
    let last_usage = events.iter().rev().find_map(|e| if let StreamEvent::Usage(u) = e { Some(u) } else { None });
    assert_eq!(last_usage, Some(&message.usage), "the last Usage event is the final usage");
}

fn raw_names(events: &[StreamEvent]) -> Vec<&str> {
    events
        .iter()
        .filter_map(|e| if let StreamEvent::Raw { event, .. } = e { Some(event.as_str()) } else { None })
        .collect()
}

#[test]
fn json_and_stream_agree_on_a_text_reply() {
    let (message, events) = assert_json_and_stream_agree(&response_of("anthropic_text", 0));
    assert_eq!(message.text(), "Hello! I'm Claude — happy to help. Qu'aimeriez-vous faire aujourd'hui ? 🙂");
    assert_eq!(message.stop_reason, Some(StopReason::EndTurn));
    assert_eq!((message.usage.input_tokens, message.usage.output_tokens), (14, 27));
    let names = raw_names(&events);
    assert_eq!(names.first(), Some(&"message_start"));
    assert_eq!(names.get(1), Some(&"ping"), "ping events reach the caller as Raw");
    assert_eq!(names.last(), Some(&"message_stop"));
}

#[test]
fn json_and_stream_agree_on_text_and_tool_use() {
    let (message, _) = assert_json_and_stream_agree(&response_of("anthropic_tool_then_text", 0));
    assert_eq!(message.stop_reason, Some(StopReason::ToolUse));
    let uses = message.tool_uses();
    assert_eq!(uses.len(), 1);
    assert_eq!((uses[0].name.as_str(), &uses[0].input), ("get_weather", &json!({"city": "Paris"})));
}

#[test]
fn json_and_stream_agree_on_several_tool_uses_and_an_empty_input_is_an_empty_object() {
    let (message, events) = assert_json_and_stream_agree(&response_of("anthropic_parallel_tools", 0));
    let inputs: Vec<&Value> = message.tool_uses().iter().map(|t| &t.input).collect();
    assert_eq!(inputs, [&json!({"city": "Paris"}), &json!({"city": "Tokyo", "units": "celsius"}), &json!({})]);
    // The third tool's input streamed no fragment at all, as the real API does for `{}`.
    assert!(!events.iter().any(|e| matches!(e, StreamEvent::ToolInputDelta { index: 3, .. })));
}

#[test]
fn json_and_stream_agree_on_thinking_with_its_signature() {
    let (message, events) = assert_json_and_stream_agree(&response_of("anthropic_thinking_tool", 0));
    let ContentBlock::Thinking(t) = &message.content[0] else { panic!("{:?}", message.content[0]) };
    assert!(t.signature.starts_with("EqQBCkYIBxgCKkBhbkU3"), "signature_delta must be kept: {t:?}");
    assert!(events.iter().any(|e| matches!(e, StreamEvent::ThinkingDelta { index: 0, .. })));
}

#[test]
fn json_and_stream_agree_on_redacted_thinking() {
    let (message, _) = assert_json_and_stream_agree(&response_of("anthropic_redacted_thinking", 0));
    let kinds: Vec<&str> = message.content.iter().map(ContentBlock::kind).collect();
    assert_eq!(kinds, ["thinking", "redacted_thinking", "tool_use"]);
    let ContentBlock::RedactedThinking(r) = &message.content[1] else { unreachable!() };
    assert!(r.data.starts_with("EmwKAhgBEgy3va3pzix"));
}

#[test]
fn json_and_stream_agree_on_citations() {
    let (message, _) = assert_json_and_stream_agree(&response_of("wire_anthropic_citations", 0));
    let ContentBlock::Text(t) = &message.content[0] else { panic!() };
    let citations = t.citations.as_ref().expect("citations kept");
    assert_eq!(citations.len(), 2);
    assert_eq!(citations[1]["type"], "web_search_result_location");
    let ContentBlock::Text(plain) = &message.content[1] else { panic!() };
    assert_eq!(plain.citations, None, "a block without citations gets none");
    assert_eq!(message.usage.cache_read_input_tokens, Some(1024));
}

#[test]
fn json_and_stream_agree_on_server_side_and_unknown_block_kinds() {
    let response = response_of("wire_anthropic_unknown_blocks", 0);
    let (message, _) = assert_json_and_stream_agree(&response);
    let kinds: Vec<&str> = message.content.iter().map(ContentBlock::kind).collect();
    assert_eq!(kinds, ["text", "server_tool_use", "web_search_tool_result", "hologram", "text"]);
    for i in 1..4 {
        assert!(matches!(message.content[i], ContentBlock::Unknown(_)));
        // Sent back unchanged: the exact JSON the API produced, whatever path it came through.
        assert_eq!(message.content[i].to_value(), response["anthropic"]["content"][i]);
    }
}

#[test]
fn stream_cut_into_three_byte_chunks_with_crlf_still_equals_the_json_reply() {
    // Chunk boundaries land inside lines, inside CRLF pairs and inside multi-byte characters.
    for (chunk, eol) in [(3, "\r\n"), (5, "\r"), (1, "\n")] {
        let mut response = response_of("wire_anthropic_unknown_blocks", 0);
        response["chunk_size"] = json!(chunk);
        response["line_ending"] = json!(eol);
        let (message, _) = assert_json_and_stream_agree(&response);
        assert_eq!(message.text(), "I'll search for that.Paris is at 18 °C.", "chunk_size {chunk}, eol {eol:?}");
    }
}

#[test]
fn stream_events_come_in_wire_order_with_raw_events_for_every_sse_event() {
    let (_, events) = assert_json_and_stream_agree(&response_of("anthropic_thinking_tool", 0));
    let names = raw_names(&events);
    // message_start, ping, 2 blocks (start, deltas, stop), message_delta, message_stop.
    let deltas = names.iter().filter(|n| **n == "content_block_delta").count();
    assert!(deltas > 4, "thinking, signature and input fragments all stream: {names:?}");
    assert_eq!(names.len(), 2 + 2 * 2 + deltas + 2);
    assert_eq!(names[names.len() - 2..], ["message_delta", "message_stop"]);
    let first_tool_event = events.iter().position(|e| matches!(e, StreamEvent::ToolUseStart { .. })).unwrap();
    let last_thinking = events.iter().rposition(|e| matches!(e, StreamEvent::ThinkingDelta { .. })).unwrap();
    assert!(last_thinking < first_tool_event, "events keep the order of the wire");
}

#[test]
fn text_deltas_reach_the_caller_while_the_stream_is_still_arriving() {
    let mut response = response_of("anthropic_text", 0);
    // 16 writes, 150 ms apart: the whole stream takes about 2.2 s.
    response["delay_ms_between"] = json!(150);
    let mock = MockServer::start(&json!({"responses": [response]}));
    let p = provider(&mock);
    let start = Instant::now();
    let mut delta_times = Vec::new();
    let result = p.send(&request(true), &CancelToken::new(), &mut |e| {
        if let StreamEvent::TextDelta { .. } = e {
            delta_times.push(start.elapsed());
        }
    });
    let end = start.elapsed();
    result.unwrap();
    let first = delta_times[0];
    let last = *delta_times.last().unwrap();
    println!("first delta at {first:?}, last at {last:?}, stream ended at {end:?} ({} deltas)", delta_times.len());
    assert!(delta_times.len() >= 9);
    // Buffered delivery would put every delta at the end; these margins are several write intervals wide.
    assert!(first + Duration::from_millis(1000) < end, "first delta {first:?} vs end {end:?}");
    assert!(last - first >= Duration::from_millis(600), "deltas spread over the stream: {delta_times:?}");
}

#[test]
fn pings_comments_and_unknown_events_anywhere_are_ignored_but_reported_raw() {
    let mock = MockServer::start(&scenario("wire_anthropic_stream_quirks"));
    let (result, events) = send(&*provider(&mock), &request(true));
    let message = result.unwrap().message;
    assert_eq!(message.text(), "Checking the weather.");
    assert_eq!(message.stop_reason, Some(StopReason::ToolUse));
    let names = raw_names(&events);
    assert_eq!(names[..3], ["ping", "message_start", "future_event"]);
    assert_eq!(names.iter().filter(|n| **n == "ping").count(), 4);
    assert_eq!(names.iter().filter(|n| **n == "future_event").count(), 2);
    assert_eq!(names.last(), Some(&"message_stop"));
}

#[test]
fn tool_input_fragments_split_inside_strings_are_joined_and_parsed_at_block_stop() {
    let mock = MockServer::start(&scenario("wire_anthropic_stream_quirks"));
    let (result, events) = send(&*provider(&mock), &request(true));
    let message = result.unwrap().message;
    let uses = message.tool_uses();
    assert_eq!(uses.len(), 3);
    assert_eq!(uses[0].input, json!({"city": "Paris", "days": [1, 2], "note": "été 🌞"}));
    assert_eq!(uses[1].input, json!({}), "no fragment at all means {{}}");
    assert_eq!(uses[2].input, json!({}), "only an empty fragment means {{}}");
    let fragments: Vec<&str> = events
        .iter()
        .filter_map(|e| match e {
            StreamEvent::ToolInputDelta { index: 1, partial_json } => Some(partial_json.as_str()),
            _ => None,
        })
        .collect();
    assert_eq!(fragments.len(), 5, "every fragment reaches the caller as it arrives: {fragments:?}");
    assert_eq!(fragments[1], "{\"ci");
}

#[test]
fn message_delta_usage_is_cumulative_so_the_final_usage_is_the_last_one_not_a_sum() {
    let mock = MockServer::start(&scenario("wire_anthropic_stream_quirks"));
    let (result, events) = send(&*provider(&mock), &request(true));
    let usage = result.unwrap().message.usage;
    assert_eq!((usage.input_tokens, usage.output_tokens), (25, 42));
    assert_eq!(usage.cache_read_input_tokens, Some(0));
    // Fields only the last message_delta carries are kept too (server tool use is billed).
    assert_eq!(usage.extra.get("server_tool_use"), Some(&json!({"web_search_requests": 2})));
    let outputs: Vec<u64> = events
        .iter()
        .filter_map(|e| if let StreamEvent::Usage(u) = e { Some(u.output_tokens) } else { None })
        .collect();
    assert_eq!(outputs, [1, 10, 42], "each Usage event is the running total");
}

#[test]
fn error_event_mid_stream_is_stream_interrupted_overloaded_keeping_the_partial_text() {
    let mock = MockServer::start(&scenario("anthropic_stream_error_midstream"));
    let (result, events) = send(&*provider(&mock), &request(true));
    let err = result.unwrap_err();
    let Error::StreamInterrupted { partial, api: Some(api), .. } = &err else { panic!("{err:?}") };
    assert_eq!(api.kind, ApiErrorKind::Overloaded);
    assert_eq!(api.error_type, "overloaded_error");
    assert_eq!(api.message, "Overloaded");
    assert_eq!(partial.text(), "The answer is being");
    assert_eq!(partial.id, "msg_01Ee8sT3kWmP6zQc2nLbV9xR");
    assert_eq!(err.request_id(), Some("req_mock_0"), "the stream's request id is kept in the error");
    assert_eq!(err.api().map(|a| a.kind), Some(ApiErrorKind::Overloaded));
    let streamed: String = events
        .iter()
        .filter_map(|e| if let StreamEvent::TextDelta { text, .. } = e { Some(text.as_str()) } else { None })
        .collect();
    assert_eq!(streamed, partial.text(), "the partial message is what the caller saw");
    assert_eq!(mock.requests().len(), 1, "a stream that delivered content is never retried");
}

#[test]
fn error_event_before_any_content_is_retried_then_reported_as_an_api_error() {
    let overloaded = json!({"sse": [
        {"event": "error", "data": {"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}}}
    ]});
    let mock = MockServer::start(&json!({"responses": [overloaded, overloaded, overloaded]}));
    let (result, events) = send(&*provider(&mock), &request(true));
    let err = result.unwrap_err();
    let Error::Api(api) = &err else { panic!("{err:?}") };
    // Nothing reached the caller, so each error event was retried like a 529 (max_retries = 2).
    assert_eq!((api.kind, api.request_id.as_deref()), (ApiErrorKind::Overloaded, Some("req_mock_2")));
    assert_eq!(mock.requests().len(), 3);
    assert!(events.is_empty(), "{events:?}");
}

#[test]
fn a_stream_that_fails_before_its_first_event_is_retried_and_the_caller_sees_one_clean_stream() {
    let overloaded = json!({"sse": [
        {"event": "error", "data": {"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}}}
    ]});
    let mut dropped = response_of("anthropic_text", 0);
    dropped["fault"] = json!({"type": "drop", "after_events": 0});
    let mock = MockServer::start(&json!({"responses": [overloaded, dropped, response_of("anthropic_text", 0)]}));
    let (result, events) = send(&*provider(&mock), &request(true));
    let message = result.unwrap().message;
    assert_eq!(mock.requests().len(), 3, "an error event, then a drop before any event, then the answer");
    let starts =
        events.iter().filter(|e| matches!(e, StreamEvent::Raw { event, .. } if event == "message_start")).count();
    assert_eq!(starts, 1, "the caller saw exactly one stream");
    let streamed: String = events
        .iter()
        .filter_map(|e| if let StreamEvent::TextDelta { text, .. } = e { Some(text.as_str()) } else { None })
        .collect();
    assert_eq!(streamed, message.text());
}

#[test]
fn stream_that_ends_before_message_stop_is_interrupted() {
    let mut response = response_of("anthropic_text", 0);
    // A clean end of body (terminating chunk sent) right after message_delta: message_stop never came.
    let full: Vec<Value> = {
        let mock = MockServer::start(&json!({"responses": [response.clone()]}));
        let (_, events) = send(&*provider(&mock), &request(true));
        events
            .into_iter()
            .filter_map(|e| {
                if let StreamEvent::Raw { event, data } = e {
                    Some(json!({"event": event, "data": data}))
                } else {
                    None
                }
            })
            .collect()
    };
    response = json!({"sse": full[..full.len() - 1]});
    let mock = MockServer::start(&json!({"responses": [response]}));
    let err = send(&*provider(&mock), &request(true)).0.unwrap_err();
    let Error::StreamInterrupted { partial, api: None, message } = &err else { panic!("{err:?}") };
    assert!(message.contains("message_stop"), "{message}");
    assert_eq!(partial.text(), "Hello! I'm Claude — happy to help. Qu'aimeriez-vous faire aujourd'hui ? 🙂");
}

#[test]
fn malformed_event_json_mid_stream_is_interrupted_with_the_partial() {
    let mock = MockServer::start(&json!({"responses": [{"sse": [
        {"event": "message_start", "data": {"type": "message_start", "message": {"id": "msg_1", "type": "message",
            "role": "assistant", "model": "m", "content": [], "stop_reason": null, "stop_sequence": null,
            "usage": {"input_tokens": 3, "output_tokens": 1}}}},
        {"event": "content_block_start", "data": {"type": "content_block_start", "index": 0, "content_block": {"type": "text", "text": ""}}},
        {"event": "content_block_delta", "data": {"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": "Half"}}},
        {"event": "content_block_delta", "data": "{\"type\": \"content_block_delta\", \"index\": 0, \"delta\": {\"ty"}
    ]}]}));
    let err = send(&*provider(&mock), &request(true)).0.unwrap_err();
    let Error::StreamInterrupted { partial, message, .. } = &err else { panic!("{err:?}") };
    assert!(message.contains("invalid JSON"), "{message}");
    assert_eq!(partial.text(), "Half");
}

#[test]
fn unknown_stop_reason_is_kept_verbatim_in_json_and_stream() {
    let mut response = response_of("anthropic_text", 0);
    response["anthropic"]["stop_reason"] = json!("brand_new_reason");
    let (message, _) = assert_json_and_stream_agree(&response);
    assert_eq!(message.stop_reason, Some(StopReason::Other("brand_new_reason".into())));
}

#[test]
fn request_carries_auth_version_content_type_extra_fields_and_extra_headers() {
    let mock = MockServer::start(&json!({"responses": [response_of("anthropic_text", 0)]}));
    let mut cfg = config(&mock);
    cfg.headers = vec![
        ("anthropic-beta".into(), "interleaved-thinking-2025-05-14,context-1m-2025-08-07".into()),
        ("X-Custom-Trace".into(), "trace-123".into()),
    ];
    let p = cfg.build().unwrap();
    let mut req = request(true);
    req.system = Some(json!([{"type": "text", "text": "Be brief.", "cache_control": {"type": "ephemeral"}}]));
    req.thinking = Some(json!({"type": "adaptive"}));
    req.metadata = Some(json!({"user_id": "u-42"}));
    req.tool_choice = Some(json!({"type": "auto", "disable_parallel_tool_use": true}));
    req.extra.insert("context_management".into(), json!({"edits": [{"type": "clear_tool_uses_20250919"}]}));
    req.extra.insert("service_tier".into(), json!("auto"));
    send(&*p, &req).0.unwrap();

    let recorded = &mock.requests()[0];
    assert_eq!(recorded["method"], "POST");
    assert_eq!(recorded["path"], "/v1/messages");
    let headers = &recorded["headers"];
    assert_eq!(headers["x-api-key"], "sk-test");
    assert_eq!(headers["anthropic-version"], "2023-06-01");
    assert_eq!(headers["content-type"], "application/json");
    assert_eq!(headers["accept"], "text/event-stream");
    assert_eq!(headers["anthropic-beta"], "interleaved-thinking-2025-05-14,context-1m-2025-08-07");
    assert_eq!(headers["x-custom-trace"], "trace-123");
    assert_eq!(headers.get("authorization"), None, "Anthropic auth is x-api-key only");
    let body = &recorded["body"];
    assert_eq!(*body, serde_json::to_value(&req).unwrap(), "the body is the request, unchanged");
    assert_eq!(body["context_management"], json!({"edits": [{"type": "clear_tool_uses_20250919"}]}));
    assert_eq!(body["service_tier"], "auto");
    assert_eq!(body["thinking"], json!({"type": "adaptive"}));
    assert_eq!(body["stream"], true);
}

#[test]
fn an_extra_header_replaces_the_default_of_the_same_name() {
    let mock = MockServer::start(&json!({"responses": [response_of("anthropic_text", 0)]}));
    let mut cfg = config(&mock);
    cfg.headers = vec![("Anthropic-Version".into(), "2099-01-01".into())];
    send(&*cfg.build().unwrap(), &request(false)).0.unwrap();
    assert_eq!(mock.requests()[0]["headers"]["anthropic-version"], "2099-01-01", "one value, not two joined");
}

#[test]
fn base_url_with_a_trailing_slash_and_a_path_prefix_is_joined_correctly() {
    let mut response = response_of("anthropic_text", 0);
    response["expect"] = json!({"method": "POST", "path": "/proxy/anthropic/v1/messages"});
    let mock = MockServer::start(&json!({"responses": [response]}));
    let mut cfg = config(&mock);
    cfg.base_url = Some(format!("{}/proxy/anthropic/", mock.base_url()));
    let message = send(&*cfg.build().unwrap(), &request(false)).0.unwrap().message;
    assert!(message.text().starts_with("Hello!"));
}

#[test]
fn concurrent_sends_on_one_provider_each_get_their_own_reply() {
    let texts = ["first reply", "second reply", "third reply", "fourth reply"];
    let responses: Vec<Value> = texts
        .iter()
        .map(|t| {
            let mut r = response_of("anthropic_text", 0);
            r["anthropic"]["content"][0]["text"] = json!(t);
            r["delay_ms_between"] = json!(20);
            r
        })
        .collect();
    let mock = MockServer::start(&json!({ "responses": responses }));
    let p = provider(&mock);
    let handles: Vec<_> = (0..4)
        .map(|_| {
            let p = Arc::clone(&p);
            std::thread::spawn(move || send(&*p, &request(true)).0.unwrap().message.text())
        })
        .collect();
    let mut got: Vec<String> = handles.into_iter().map(|h| h.join().unwrap()).collect();
    got.sort();
    let mut want: Vec<String> = texts.iter().map(|t| t.to_string()).collect();
    want.sort();
    assert_eq!(got, want);
}

#[test]
fn send_raw_reports_text_deltas_unparsed_and_the_same_events_and_message_as_send() {
    let response = &scenario("anthropic_text")["responses"][0];
    let mock = MockServer::start(&json!({"responses": [response, response]}));
    let p = provider(&mock);
    let (typed, typed_events) = send(&*p, &request(true));
    let body = serde_json::to_value(request(true)).unwrap();
    let mut raw_events = Vec::new();
    let raw = p.send_raw(&body, true, &tooloop::CancelToken::new(), &mut |e| raw_events.push(e)).unwrap();
    assert_eq!(raw, typed.unwrap().raw, "the same final message");
    let mut lazy = 0;
    // Event for event the same, the Raw values carried as their JSON text instead.
    assert_eq!(raw_events.len(), typed_events.len());
    let mut deltas = 0;
    for (got, want) in raw_events.iter().zip(&typed_events) {
        match (got, want) {
            (StreamEvent::RawJson { event, json }, StreamEvent::Raw { event: e2, data }) => {
                lazy += 1;
                assert_eq!((event, &serde_json::from_str::<Value>(json).unwrap()), (e2, data));
                if event == "content_block_delta" {
                    deltas += 1;
                    let text = tooloop::provider::anthropic::text_delta_of(json).expect("a text delta");
                    assert_eq!(text, data["delta"]["text"].as_str().unwrap());
                } else {
                    assert_eq!(tooloop::provider::anthropic::text_delta_of(json), None, "{json}");
                }
            }
            _ => assert_eq!(got, want),
        }
    }
    assert!(deltas >= 2, "the text deltas came unparsed: {deltas}");
    let raws = typed_events.iter().filter(|e| matches!(e, StreamEvent::Raw { .. })).count();
    assert_eq!(lazy, raws, "every event came unparsed (message_start, block start and stop, message_delta too)");
    assert_eq!(tooloop::provider::anthropic::text_delta_of(r#"{"type":"ping"}"#), None);
    assert_eq!(
        tooloop::provider::anthropic::text_delta_of(
            r#"{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"a\"b\u00e9"}}"#
        )
        .as_deref(),
        Some("a\"bé")
    );
}
