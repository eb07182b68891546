//! OpenAI's Responses API provider against the shared mock server: JSON and streamed responses fold into the
//! same neutral message, parallel `function_call` items, reasoning summaries as thinking with the reasoning
//! item (and its `encrypted_content`) kept and sent back, `text.format` for structured output, usage with
//! cached and reasoning tokens, `incomplete` as the max_tokens stop, and the error paths (429 retried, a
//! context overflow, `error` and `response.failed` events, a stream cut before its terminal event, cancel).
//!
//! Every test goes through the real provider (`ProviderConfig::build`) and real HTTP to `mockserver.py`.
#![allow(clippy::unwrap_used, clippy::expect_used)]

#[path = "common/mock.rs"]
mod mock;
#[path = "common/wire.rs"]
mod wire;

use std::sync::Arc;

use mock::MockServer;
use serde_json::{Map, Value, json};
use tooloop::provider::responses::REASONING_KEY;
use tooloop::provider::{Protocol, Provider, ProviderConfig, StreamEvent};
use tooloop::types::ToolResultBlock;
use tooloop::{ApiErrorKind, CancelToken, ContentBlock, Error, Message, Request, Role, StopReason, ToolSpec};
use wire::{fast_http, provider_config, response_of, send};

fn config(mock: &MockServer) -> ProviderConfig {
    provider_config(Protocol::OpenAiResponses, format!("{}/v1", mock.base_url()), fast_http())
}

fn provider(mock: &MockServer) -> Arc<dyn Provider> {
    config(mock).build().unwrap()
}

fn request(stream: bool) -> Request {
    Request {
        model: "gpt-5".into(),
        max_tokens: 512,
        system: Some(json!("You are terse.")),
        messages: vec![Message::user("Weather in Paris?")].into(),
        tools: vec![ToolSpec {
            name: "get_weather".into(),
            description: "Weather for a city".into(),
            input_schema: json!({"type": "object", "properties": {"city": {"type": "string"}}}),
            extra: Map::new(),
        }],
        stream,
        ..Default::default()
    }
}

fn texts(events: &[StreamEvent]) -> String {
    events
        .iter()
        .filter_map(|e| if let StreamEvent::TextDelta { text, .. } = e { Some(text.as_str()) } else { None })
        .collect()
}

#[test]
fn json_and_stream_agree_on_text_calls_and_reasoning() {
    for name in ["responses_text", "responses_tool_calls", "responses_reasoning_tool"] {
        let response = response_of(name, 0);
        let mock = MockServer::start(&json!({"responses": [response, response]}));
        let p = provider(&mock);
        let json_resp = send(&*p, &request(false)).0.unwrap();
        let (stream_resp, events) = send(&*p, &request(true));
        let stream_resp = stream_resp.unwrap();
        let reqs = mock.requests();
        assert_eq!(reqs[0]["path"], "/v1/responses");
        assert_eq!((reqs[0]["body"].get("stream"), &reqs[1]["body"]["stream"]), (None, &json!(true)));
        assert_eq!(json_resp.raw, response["responses"], "{name}: the JSON call's raw is the body as sent");
        assert_eq!(stream_resp.message, json_resp.message, "{name}: stream and JSON disagree");
        assert_eq!(stream_resp.raw["output"], json_resp.raw["output"], "{name}: the terminal event's response");
        let text: String = json_resp.message.text();
        assert_eq!(texts(&events), text, "{name}: text deltas rebuild the text");
        let raw_names: Vec<&str> = events
            .iter()
            .filter_map(|e| if let StreamEvent::Raw { event, .. } = e { Some(event.as_str()) } else { None })
            .collect();
        assert_eq!((raw_names.first(), raw_names.last()), (Some(&"response.created"), Some(&"response.completed")));
    }
}

#[test]
fn parallel_function_calls_become_tool_uses_with_their_call_ids() {
    let mock = MockServer::start(&json!({"responses": [response_of("responses_tool_calls", 0)]}));
    let (result, events) = send(&*provider(&mock), &request(true));
    let message = result.unwrap().message;
    assert_eq!(message.stop_reason, Some(StopReason::ToolUse));
    let calls: Vec<(&str, &Value)> = message.tool_uses().iter().map(|t| (t.id.as_str(), &t.input)).collect();
    assert_eq!(
        calls,
        vec![("call_paris", &json!({"city": "Paris"})), ("call_tokyo", &json!({"city": "Tokyo", "units": "celsius"}))]
    );
    let starts: Vec<&str> = events
        .iter()
        .filter_map(|e| if let StreamEvent::ToolUseStart { id, .. } = e { Some(id.as_str()) } else { None })
        .collect();
    assert_eq!(starts, ["call_paris", "call_tokyo"]);
    let body = &mock.requests()[0]["body"];
    assert_eq!(body["instructions"], "You are terse.");
    assert_eq!(
        body["tools"],
        json!([{"type": "function", "name": "get_weather", "description": "Weather for a city",
            "parameters": {"type": "object", "properties": {"city": {"type": "string"}}}, "strict": false}]),
        "flat function tools"
    );
    assert_eq!(
        body["input"],
        json!([{"role": "user", "content": [{"type": "input_text", "text": "Weather in Paris?"}]}])
    );
    assert_eq!((&body["store"], &body["max_output_tokens"]), (&json!(false), &json!(512)));
}

#[test]
fn reasoning_summary_is_thinking_and_the_encrypted_item_goes_back_next_request() {
    let mock = MockServer::start(&json!({"responses": [
        response_of("responses_reasoning_tool", 0), response_of("responses_reasoning_tool", 1)]}));
    let p = provider(&mock);
    let mut req = request(true);
    req.thinking = Some(json!({"type": "enabled", "budget_tokens": 2048}));
    let (first, events) = send(&*p, &req);
    let first = first.unwrap().message;
    let ContentBlock::Thinking(t) = &first.content[0] else { panic!("{first:?}") };
    assert_eq!(t.thinking, "Checking the weather first.\n\nParis is the city asked about.");
    assert_eq!(t.signature, "", "no signature: nothing another provider could take for its own");
    assert_eq!(t.extra[REASONING_KEY]["encrypted_content"], "gAAAAB-enc-one==");
    let thinking: String = events
        .iter()
        .filter_map(
            |e| if let StreamEvent::ThinkingDelta { thinking, .. } = e { Some(thinking.as_str()) } else { None },
        )
        .collect();
    assert_eq!(thinking, t.thinking);
    assert_eq!(first.usage.extra["reasoning_tokens"], 96);

    let mut next = req.clone();
    next.messages.push(Message { role: Role::Assistant, content: first.content.clone() });
    next.messages.push(Message {
        role: Role::User,
        content: vec![ContentBlock::ToolResult(ToolResultBlock {
            tool_use_id: "call_1".into(),
            content: json!("18 °C"),
            ..Default::default()
        })],
    });
    let second = send(&*p, &next).0.unwrap().message;
    assert_eq!(second.text(), "It is 18 °C in Paris.");
    assert_eq!(second.usage.cache_read_input_tokens, Some(128));
    assert_eq!(second.usage.input_tokens, 260 - 128, "input_tokens counts the cached ones too");
    let body = &mock.requests()[1]["body"];
    assert_eq!(body["reasoning"], json!({"effort": "low", "summary": "auto"}));
    assert_eq!(body["include"], json!(["reasoning.encrypted_content"]));
    assert_eq!(
        body["input"],
        json!([
            {"role": "user", "content": [{"type": "input_text", "text": "Weather in Paris?"}]},
            {"type": "reasoning", "id": "rs_1", "summary": [
                {"type": "summary_text", "text": "Checking the weather first."},
                {"type": "summary_text", "text": "Paris is the city asked about."}],
             "encrypted_content": "gAAAAB-enc-one=="},
            {"type": "function_call", "call_id": "call_1", "name": "get_weather", "arguments": "{\"city\":\"Paris\"}"},
            {"type": "function_call_output", "call_id": "call_1", "output": "18 °C"}
        ])
    );
}

#[test]
fn output_schema_goes_out_as_text_format() {
    let mock = MockServer::start(&json!({"responses": [response_of("responses_text", 0)]}));
    let mut req = request(false);
    let schema = json!({"type": "object", "properties": {"n": {"type": "integer"}}});
    req.extra.insert("output_config".into(), json!({"format": {"type": "json_schema", "schema": schema}}));
    send(&*provider(&mock), &req).0.unwrap();
    let body = &mock.requests()[0]["body"];
    assert_eq!(
        body["text"],
        json!({"format": {"type": "json_schema", "name": "output", "schema": schema, "strict": false}})
    );
    assert_eq!(body.get("output_config"), None);
}

#[test]
fn incomplete_for_max_output_tokens_is_the_max_tokens_stop() {
    let mut response = response_of("responses_text", 0);
    response["responses"]["status"] = json!("incomplete");
    response["responses"]["incomplete_details"] = json!({"reason": "max_output_tokens"});
    let mock = MockServer::start(&json!({"responses": [response, response]}));
    let p = provider(&mock);
    for stream in [false, true] {
        let message = send(&*p, &request(stream)).0.unwrap().message;
        assert_eq!(message.stop_reason, Some(StopReason::MaxTokens), "stream={stream}");
    }
    let raw = send_raw_events(&mock);
    assert!(raw.contains(&"response.incomplete".to_string()), "{raw:?}");
}

/// The event names of a streamed raw request answered by an incomplete `responses_text`.
fn send_raw_events(mock: &MockServer) -> Vec<String> {
    let mut response = response_of("responses_text", 0);
    response["responses"]["status"] = json!("incomplete");
    response["responses"]["incomplete_details"] = json!({"reason": "max_output_tokens"});
    mock.load(&json!({"responses": [response]}));
    let mut names = Vec::new();
    let body = json!({"model": "gpt-5", "input": "hi"});
    let out = provider(mock)
        .send_raw(&body, true, &CancelToken::new(), &mut |e| {
            if let StreamEvent::Raw { event, .. } = e {
                names.push(event)
            }
        })
        .unwrap();
    assert_eq!(out["status"], "incomplete", "the raw answer is the terminal event's response");
    names
}

#[test]
fn rate_limit_429_is_retried_then_succeeds() {
    let mock = MockServer::start(&json!({"responses": [
        {"status": 429, "headers": {"retry-after-ms": "20", "x-request-id": "req_r429"}, "json": {"error": {
            "message": "Rate limit reached for gpt-5", "type": "requests", "param": null, "code": "rate_limit_exceeded"}}},
        response_of("responses_text", 0)
    ]}));
    let (result, events) = send(&*provider(&mock), &request(true));
    assert_eq!(result.unwrap().message.text(), "Bonjour — ça va? 👋 The answer is 42.");
    assert_eq!(texts(&events), "Bonjour — ça va? 👋 The answer is 42.", "no delta duplicated by the retry");
    assert_eq!(mock.requests().len(), 2);
}

#[test]
fn a_prompt_over_the_context_window_is_an_overflow_compaction_recognises() {
    let mock = MockServer::start(&json!({"context": {"limit": 5}, "responses": [response_of("responses_text", 0)]}));
    let err = send(&*provider(&mock), &request(false)).0.unwrap_err();
    let api = err.api().unwrap_or_else(|| panic!("{err:?}"));
    assert_eq!((api.kind, api.status), (ApiErrorKind::BadRequest, 400));
    assert!(tooloop::compaction::is_overflow(&err), "{err:?}");
    // The same refusal as a `response.failed` event mid-stream (before any content) is one too.
    mock.load(&json!({"responses": [{"sse": [
        {"event": "response.created", "data": {"type": "response.created", "response": {"id": "r", "status": "in_progress", "output": []}}},
        {"event": "response.failed", "data": {"type": "response.failed", "response": {"id": "r", "status": "failed",
            "error": {"code": "context_length_exceeded", "message": "Your input exceeds the context window of this model."}}}}
    ]}]}));
    let err = send(&*provider(&mock), &request(true)).0.unwrap_err();
    assert!(tooloop::compaction::is_overflow(&err), "{err:?}");
}

#[test]
fn error_event_mid_stream_is_interrupted_keeping_the_text() {
    let mock = MockServer::start(&json!({"responses": [{"headers": {"x-request-id": "req_mid"}, "sse": [
        {"event": "response.created", "data": {"type": "response.created", "response": {"id": "r", "status": "in_progress", "output": []}}},
        {"event": "response.output_item.added", "data": {"type": "response.output_item.added", "output_index": 0,
            "item": {"type": "message", "id": "m", "role": "assistant", "content": []}}},
        {"event": "response.output_text.delta", "data": {"type": "response.output_text.delta", "output_index": 0,
            "content_index": 0, "delta": "Partial "}},
        {"event": "error", "data": {"type": "error", "code": "server_error", "message": "The server had an error."}}
    ]}]}));
    let err = send(&*provider(&mock), &request(true)).0.unwrap_err();
    let Error::StreamInterrupted { partial, api: Some(api), .. } = &err else { panic!("{err:?}") };
    assert_eq!(partial.text(), "Partial ");
    assert_eq!((api.kind, api.error_type.as_str()), (ApiErrorKind::InternalServer, "server_error"));
    assert_eq!(err.request_id(), Some("req_mid"));
}

#[test]
fn a_stream_cut_before_its_terminal_event_is_interrupted_not_complete() {
    let mut response = response_of("responses_text", 0);
    // created, in_progress, item added, part added, 2 deltas: then the connection closes.
    response["fault"] = json!({"type": "drop", "after_events": 6});
    let mock = MockServer::start(&json!({"responses": [response]}));
    let (result, events) = send(&*provider(&mock), &request(true));
    let err = result.unwrap_err();
    let Error::StreamInterrupted { partial, .. } = &err else { panic!("{err:?}") };
    assert_eq!(partial.text(), "Bonjour — ça va?");
    assert_eq!(texts(&events), partial.text());
    assert_eq!(mock.requests().len(), 1, "never retried after content reached the caller");
}

#[test]
fn cancel_mid_stream_ends_the_read_with_the_partial() {
    let mut response = response_of("responses_text", 0);
    response["fault"] = json!({"type": "stall", "after_events": 5, "ms": 30000});
    let mock = MockServer::start(&json!({"responses": [response]}));
    let p = provider(&mock);
    let cancel = CancelToken::new();
    let canceller = cancel.clone();
    let started = std::time::Instant::now();
    let mut fired = false;
    let result = p.send(&request(true), &cancel, &mut |e| {
        if matches!(e, StreamEvent::TextDelta { .. }) && !fired {
            fired = true;
            let c = canceller.clone();
            std::thread::spawn(move || {
                std::thread::sleep(std::time::Duration::from_millis(100));
                c.cancel();
            });
        }
    });
    let err = result.unwrap_err();
    let Error::Cancelled { partial: Some(partial) } = &err else { panic!("{err:?}") };
    assert_eq!(partial.text(), "Bonjour ");
    assert!(started.elapsed() < std::time::Duration::from_secs(5), "{:?}", started.elapsed());
}

#[test]
fn images_in_input_and_in_tool_results_go_as_input_image() {
    let mock = MockServer::start(&json!({"responses": [response_of("responses_text", 0)]}));
    let image =
        json!({"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": "iVBORw0KGgo="}});
    let mut req = request(false);
    req.messages = vec![
        Message { role: Role::User, content: vec![ContentBlock::text("look"), ContentBlock::Unknown(image.clone())] },
        Message {
            role: Role::Assistant,
            content: vec![ContentBlock::ToolUse(tooloop::types::ToolUseBlock {
                id: "call_s".into(),
                name: "shot".into(),
                input: json!({}),
                extra: Map::new(),
            })],
        },
        Message {
            role: Role::User,
            content: vec![ContentBlock::ToolResult(ToolResultBlock {
                tool_use_id: "call_s".into(),
                content: json!([{"type": "text", "text": "a screenshot"}, image]),
                ..Default::default()
            })],
        },
    ]
    .into();
    send(&*provider(&mock), &req).0.unwrap();
    let input = &mock.requests()[0]["body"]["input"];
    let url = "data:image/png;base64,iVBORw0KGgo=";
    assert_eq!(input[0]["content"][1], json!({"type": "input_image", "image_url": url, "detail": "auto"}));
    assert_eq!(
        input[2],
        json!({"type": "function_call_output", "call_id": "call_s", "output": [
            {"type": "input_text", "text": "a screenshot"},
            {"type": "input_image", "image_url": url, "detail": "auto"}]})
    );
}

#[test]
fn a_pulled_stream_gives_the_same_turn_and_raw_response_as_send() {
    use tooloop::provider::{RawOpen, TurnOpen};
    let response = response_of("responses_reasoning_tool", 0);
    let mock = MockServer::start(&json!({"responses": [response, response, response]}));
    let p = provider(&mock);
    assert!(p.pulls_streams() && p.pulls_raw_streams());
    let sent = send(&*p, &request(true)).0.unwrap();
    let mut events = Vec::new();
    let pulled = match p.open_stream(&request(true), &CancelToken::new(), &mut |e| events.push(e)).unwrap() {
        TurnOpen::Done(r) => *r,
        TurnOpen::Open(mut s) => loop {
            if let Some(r) = s.step(&mut |e| events.push(e)).unwrap() {
                break r;
            }
        },
    };
    assert_eq!(pulled.message, sent.message);
    assert_eq!(pulled.raw, sent.raw);
    let body = json!({"model": "gpt-5", "input": "hi"});
    let mut text = String::new();
    let raw = match p.open_raw_stream(&body, &CancelToken::new(), &mut |_| {}).unwrap() {
        RawOpen::Done(v) => v,
        RawOpen::Open(mut s) => loop {
            if let Some(v) = s.step_text(&mut text).unwrap() {
                break v;
            }
        },
    };
    assert_eq!(raw["output"], response["responses"]["output"]);
}
