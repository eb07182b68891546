//! The OpenAI-compatible Chat Completions provider against the shared mock server: JSON and streamed
//! completions fold into the same neutral message, parallel tool calls interleaved by index, `[DONE]`, the
//! usage chunk, reasoning fields, finish_reason mapping, invalid arguments, the rendering of a neutral
//! request, and the error paths (401, 429, a dropped stream, an error chunk).
//!
//! Every test goes through the real provider (`ProviderConfig::build`) and real HTTP to `mockserver.py`.
#![allow(clippy::unwrap_used, clippy::expect_used)]

#[path = "common/mock.rs"]
mod mock;
#[path = "common/wire.rs"]
mod wire;

use std::sync::Arc;

use mock::{MockServer, scenario};
use serde_json::{Map, Value, json};
use tooloop::provider::{Protocol, Provider, ProviderConfig, Response, StreamEvent};
use tooloop::types::{TextBlock, ToolResultBlock, ToolUseBlock};
use tooloop::{ApiErrorKind, ContentBlock, Error, Message, MessageResponse, Request, Role, StopReason, ToolSpec};
use wire::{fast_http, provider_config, response_of, send};

fn config(mock: &MockServer) -> ProviderConfig {
    provider_config(Protocol::OpenAi, format!("{}/v1", mock.base_url()), fast_http())
}

fn provider(mock: &MockServer) -> Arc<dyn Provider> {
    config(mock).build().unwrap()
}

fn request(stream: bool) -> Request {
    Request {
        model: "gpt-4o-mini".into(),
        max_tokens: 512,
        messages: vec![Message::user("Hello there")].into(),
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

/// Serves `response` to a JSON request and then to a streaming one; both must give the same neutral message
/// and the reassembled stream must carry the JSON body's content.
fn assert_json_and_stream_agree(response: &Value) -> (MessageResponse, Response, Vec<StreamEvent>) {
    let mock = MockServer::start(&json!({"responses": [response, response]}));
    let p = provider(&mock);
    let json_resp = send(&*p, &request(false)).0.unwrap();
    let (stream_resp, events) = send(&*p, &request(true));
    let stream_resp = stream_resp.unwrap();

    let requests = mock.requests();
    assert_eq!(requests[0]["path"], "/v1/chat/completions");
    assert_eq!(requests[0]["body"].get("stream"), None);
    assert_eq!(requests[1]["body"]["stream"], true);
    assert_eq!(requests[1]["body"]["stream_options"], json!({"include_usage": true}), "ask for the usage chunk");

    assert_eq!(json_resp.raw, response["openai"], "the JSON call's raw is the body as sent");
    assert_eq!(stream_resp.message, json_resp.message, "stream and JSON disagree on the message");
    let neutral = serde_json::to_value(&json_resp.message).unwrap();
    assert_eq!((&neutral["type"], &neutral["role"]), (&json!("message"), &json!("assistant")), "a neutral message");
    let (j, s) = (&json_resp.raw, &stream_resp.raw);
    for key in ["id", "object", "created", "model", "system_fingerprint", "usage"] {
        assert_eq!(s[key], j[key], "reassembled stream differs on {key}");
    }
    for key in ["content", "tool_calls", "reasoning_content"] {
        assert_eq!(s["choices"][0]["message"][key], j["choices"][0]["message"][key], "message.{key}");
    }
    assert_eq!(s["choices"][0]["finish_reason"], j["choices"][0]["finish_reason"]);
    assert_eq!(texts(&events), json_resp.message.text(), "text deltas rebuild the text");
    (json_resp.message, stream_resp, events)
}

#[test]
fn json_and_stream_agree_on_a_text_completion() {
    let (message, _, events) = assert_json_and_stream_agree(&response_of("openai_text", 0));
    assert_eq!(message.text(), "Hello! How can I help you today? — Bonjour ! 🙂");
    assert_eq!(message.stop_reason, Some(StopReason::EndTurn));
    assert_eq!(
        (message.id.as_str(), message.model.as_str()),
        ("chatcmpl-B9MBs8CjcvOU2jLn4n570S5qMJKcT", "gpt-4o-mini")
    );
    assert_eq!((message.usage.input_tokens, message.usage.output_tokens), (19, 14));
    let raw_count = events.iter().filter(|e| matches!(e, StreamEvent::Raw { .. })).count();
    // role chunk, 6 text pieces, finish chunk, usage chunk ([DONE] is not JSON and is not reported).
    assert_eq!(raw_count, 1 + 6 + 1 + 1);
}

#[test]
fn parallel_tool_calls_interleaved_by_index_are_reassembled() {
    let mut response = response_of("openai_tool_calls", 0);
    response["interleave_tool_calls"] = json!(true);
    let (message, stream_resp, events) = assert_json_and_stream_agree(&response);
    assert_eq!(message.stop_reason, Some(StopReason::ToolUse));
    let uses = message.tool_uses();
    assert_eq!(uses.len(), 2);
    assert_eq!((uses[0].id.as_str(), &uses[0].input), ("call_Dc3HnSqpXkyqZ8Jc1nKAbD4n", &json!({"city": "Paris"})));
    assert_eq!(
        (uses[1].id.as_str(), &uses[1].input),
        ("call_rfGbHxr0qTzGLSmZ9W8PwGi2", &json!({"city": "Tokyo", "units": "celsius"}))
    );
    // The fragments really were interleaved on the wire, and each reached the caller under its own index.
    let order: Vec<usize> = events
        .iter()
        .filter_map(|e| if let StreamEvent::ToolInputDelta { index, .. } = e { Some(*index) } else { None })
        .collect();
    assert_eq!(&order[..4], [0, 1, 0, 1], "{order:?}");
    for (i, t) in uses.iter().enumerate() {
        let joined: String = events
            .iter()
            .filter_map(|e| match e {
                StreamEvent::ToolInputDelta { index, partial_json } if *index == i => Some(partial_json.as_str()),
                _ => None,
            })
            .collect();
        assert_eq!(serde_json::from_str::<Value>(&joined).unwrap(), t.input);
    }
    let starts: Vec<(usize, &str)> = events
        .iter()
        .filter_map(|e| {
            if let StreamEvent::ToolUseStart { index, name, .. } = e { Some((*index, name.as_str())) } else { None }
        })
        .collect();
    assert_eq!(starts, [(0, "get_weather"), (1, "get_weather")]);
    // The reassembled completion carries the arguments as STRINGS, exactly as the JSON call does.
    assert!(stream_resp.raw["choices"][0]["message"]["tool_calls"][1]["function"]["arguments"].is_string());
}

#[test]
fn stream_ends_at_done_and_ignores_anything_after_it() {
    let chunk = |delta: Value, finish: Value| {
        json!({"data": {"id": "c1", "object": "chat.completion.chunk", "created": 1, "model": "m",
            "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]}})
    };
    let sse = json!([
        chunk(json!({"role": "assistant", "content": ""}), Value::Null),
        chunk(json!({"content": "All done."}), Value::Null),
        chunk(json!({}), json!("stop")),
        {"data": "[DONE]"},
        // Whatever a sloppy proxy appends after the sentinel must not matter.
        {"data": "{not json at all"},
        {"data": {"choices": [{"index": 0, "delta": {"content": " EXTRA"}}]}}
    ]);
    // One write for the whole body, so [DONE] and the junk arrive in the same read.
    let mock = MockServer::start(&json!({"responses": [{"sse": sse, "chunk_size": 100000}]}));
    let message = send(&*provider(&mock), &request(true)).0.unwrap().message;
    assert_eq!(message.text(), "All done.");
    assert_eq!(message.stop_reason, Some(StopReason::EndTurn));
}

#[test]
fn usage_chunk_maps_cached_prompt_tokens_onto_cache_reads() {
    let (message, _, events) = assert_json_and_stream_agree(&response_of("openai_tool_calls", 1));
    // prompt_tokens 171 includes 64 cached: 107 uncached + 64 read from the cache.
    assert_eq!(message.usage.input_tokens, 107);
    assert_eq!(message.usage.cache_read_input_tokens, Some(64));
    assert_eq!(message.usage.output_tokens, 19);
    assert_eq!(message.usage.total_input_tokens(), 171);
    let usage_events: Vec<_> = events.iter().filter(|e| matches!(e, StreamEvent::Usage(_))).collect();
    assert_eq!(usage_events, [&StreamEvent::Usage(message.usage.clone())], "one Usage event, from the usage chunk");
}

#[test]
fn reasoning_content_becomes_a_thinking_block_before_the_text() {
    let (message, stream_resp, events) = assert_json_and_stream_agree(&response_of("wire_openai_reasoning", 0));
    let kinds: Vec<&str> = message.content.iter().map(ContentBlock::kind).collect();
    assert_eq!(kinds, ["thinking", "text"]);
    let ContentBlock::Thinking(t) = &message.content[0] else { unreachable!() };
    assert_eq!(t.thinking, "The user asks for the answer. Six times seven is 42; I'll say so.");
    let thinking: String = events
        .iter()
        .filter_map(
            |e| if let StreamEvent::ThinkingDelta { thinking, .. } = e { Some(thinking.as_str()) } else { None },
        )
        .collect();
    assert_eq!(thinking, t.thinking);
    assert!(events.iter().all(|e| !matches!(e, StreamEvent::TextDelta { index: 0, .. })), "text is block 1");
    assert_eq!(stream_resp.raw["choices"][0]["message"]["reasoning_content"], json!(t.thinking));
    assert_eq!(message.usage.cache_read_input_tokens, Some(32));
}

#[test]
fn reasoning_field_of_ollama_style_servers_becomes_thinking_too() {
    // Servers name it `reasoning`; some also send `reasoning_content: null` next to it.
    let plain = response_of("wire_openai_reasoning", 1);
    let mut with_null = plain.clone();
    with_null["openai"]["choices"][0]["message"]["reasoning_content"] = Value::Null;
    for response in [plain, with_null] {
        let mock = MockServer::start(&json!({"responses": [response, response]}));
        let p = provider(&mock);
        let json_message = send(&*p, &request(false)).0.unwrap().message;
        let (result, events) = send(&*p, &request(true));
        let message = result.unwrap().message;
        assert_eq!(message, json_message);
        let kinds: Vec<&str> = message.content.iter().map(ContentBlock::kind).collect();
        assert_eq!(kinds, ["thinking", "tool_use"], "{response}");
        let ContentBlock::Thinking(t) = &message.content[0] else { unreachable!() };
        assert_eq!(t.thinking, "I need the weather tool.");
        assert_eq!(message.tool_uses()[0].input, json!({"city": "Paris"}));
        assert!(events.iter().any(|e| matches!(e, StreamEvent::ThinkingDelta { index: 0, .. })));
    }
}

#[test]
fn finish_reasons_map_onto_neutral_stop_reasons_in_json_and_stream() {
    let want = [
        (StopReason::EndTurn, "Done."),
        (StopReason::MaxTokens, "This answer was cut off in the mid"),
        (StopReason::ToolUse, ""),
        (StopReason::Refusal, ""),
    ];
    let scen = scenario("wire_openai_finish_reasons");
    let responses = scen["responses"].as_array().unwrap();
    for stream in [false, true] {
        let mock = MockServer::start(&scen);
        let p = provider(&mock);
        for (i, (reason, text)) in want.iter().enumerate() {
            let message = send(&*p, &request(stream)).0.unwrap().message;
            assert_eq!(
                message.stop_reason.as_ref(),
                Some(reason),
                "{} (stream {stream})",
                responses[i]["openai"]["id"]
            );
            assert_eq!(message.text(), *text);
        }
    }
    // A call with empty arguments is an empty object, not an error.
    let mock = MockServer::start(&json!({"responses": [responses[2]]}));
    let message = send(&*provider(&mock), &request(true)).0.unwrap().message;
    assert_eq!(message.tool_uses()[0].input, json!({}));
}

#[test]
fn invalid_arguments_json_arrives_as_a_tool_use_holding_the_raw_string() {
    for stream in [false, true] {
        let mock = MockServer::start(&scenario("openai_bad_arguments"));
        let message = send(&*provider(&mock), &request(stream)).0.unwrap().message;
        let uses = message.tool_uses();
        assert_eq!(uses.len(), 1, "stream {stream}");
        assert_eq!(uses[0].name, "get_weather");
        assert_eq!(
            uses[0].input,
            json!("{\"city\": \"Par"),
            "the raw string, for the registry to report (stream {stream})"
        );
        assert_eq!(message.stop_reason, Some(StopReason::ToolUse));
    }
}

#[test]
fn neutral_request_renders_as_chat_completions_with_string_arguments_and_one_tool_message_per_result() {
    let mock = MockServer::start(&json!({"responses": [response_of("openai_text", 0)]}));
    let schema = json!({"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]});
    let tool_use = |id: &str, input: Value| {
        ContentBlock::ToolUse(ToolUseBlock { id: id.into(), name: "get_weather".into(), input, extra: Map::new() })
    };
    let req = Request {
        model: "gpt-4o-mini".into(),
        max_tokens: 256,
        system: Some(json!("You are terse.")),
        messages: vec![
            Message::user("Weather in Paris and Tokyo?"),
            Message {
                role: Role::Assistant,
                content: vec![
                    ContentBlock::text("Checking both."),
                    tool_use("call_1", json!({"city": "Paris"})),
                    tool_use("call_2", json!({"city": "Tokyo", "units": "celsius"})),
                ],
            },
            Message {
                role: Role::User,
                content: vec![
                    ContentBlock::ToolResult(ToolResultBlock {
                        tool_use_id: "call_1".into(),
                        content: json!("18 °C"),
                        ..Default::default()
                    }),
                    ContentBlock::ToolResult(ToolResultBlock {
                        tool_use_id: "call_2".into(),
                        content: json!([{"type": "text", "text": "sensor offline"}]),
                        is_error: Some(true),
                        ..Default::default()
                    }),
                    ContentBlock::Text(TextBlock { text: "And tomorrow?".into(), ..Default::default() }),
                ],
            },
            Message {
                role: Role::Assistant,
                content: vec![tool_use("call_3", json!({"city": "Paris", "day": "tomorrow"}))],
            },
            Message {
                role: Role::User,
                content: vec![ContentBlock::ToolResult(ToolResultBlock {
                    tool_use_id: "call_3".into(),
                    content: json!("20 °C"),
                    ..Default::default()
                })],
            },
        ]
        .into(),
        tools: vec![ToolSpec {
            name: "get_weather".into(),
            description: "Current weather for a city.".into(),
            input_schema: schema.clone(),
            ..Default::default()
        }],
        tool_choice: Some(json!({"type": "any"})),
        temperature: Some(0.25),
        stop_sequences: vec!["END".into()],
        ..Default::default()
    };
    send(&*provider(&mock), &req).0.unwrap();
    let recorded = &mock.requests()[0];
    assert_eq!(recorded["headers"]["authorization"], "Bearer sk-test");
    assert_eq!(recorded["headers"]["content-type"], "application/json");
    assert_eq!(recorded["headers"].get("x-api-key"), None);
    let call = |id: &str, args: &str| json!({"id": id, "type": "function", "function": {"name": "get_weather", "arguments": args}});
    let expected = json!({
        "model": "gpt-4o-mini",
        "messages": [
            {"role": "system", "content": "You are terse."},
            {"role": "user", "content": "Weather in Paris and Tokyo?"},
            {"role": "assistant", "content": "Checking both.", "tool_calls": [
                call("call_1", r#"{"city":"Paris"}"#),
                call("call_2", r#"{"city":"Tokyo","units":"celsius"}"#),
            ]},
            {"role": "tool", "tool_call_id": "call_1", "content": "18 °C"},
            {"role": "tool", "tool_call_id": "call_2", "content": "Error: sensor offline"},
            {"role": "user", "content": "And tomorrow?"},
            {"role": "assistant", "content": null, "tool_calls": [call("call_3", r#"{"city":"Paris","day":"tomorrow"}"#)]},
            {"role": "tool", "tool_call_id": "call_3", "content": "20 °C"},
        ],
        "max_tokens": 256,
        "tools": [{"type": "function", "function": {
            "name": "get_weather", "description": "Current weather for a city.", "parameters": schema}}],
        "tool_choice": "required",
        "stop": ["END"],
        "temperature": 0.25,
    });
    assert_eq!(recorded["body"], expected);
}

#[test]
fn extra_body_fields_and_headers_pass_through() {
    let mock = MockServer::start(&json!({"responses": [response_of("openai_text", 0)]}));
    let mut cfg = config(&mock);
    cfg.headers = vec![
        ("OpenAI-Organization".into(), "org-123".into()),
        ("Content-Type".into(), "application/json; charset=utf-8".into()),
    ];
    let mut req = request(false);
    req.extra.insert("reasoning_effort".into(), json!("low"));
    req.extra.insert("seed".into(), json!(7));
    req.extra.insert("max_tokens".into(), json!(99));
    send(&*cfg.build().unwrap(), &req).0.unwrap();
    let recorded = &mock.requests()[0];
    assert_eq!(recorded["headers"]["openai-organization"], "org-123");
    assert_eq!(recorded["headers"]["content-type"], "application/json; charset=utf-8", "replaced, not doubled");
    assert_eq!(recorded["body"]["reasoning_effort"], "low");
    assert_eq!(recorded["body"]["seed"], 7);
    assert_eq!(recorded["body"]["max_tokens"], 99, "an extra field wins over the rendered one");
}

#[test]
fn unauthorized_401_is_an_authentication_error_naming_openai_api_key() {
    // The body OpenAI really sends: its `type` is the generic invalid_request_error; the status says 401.
    let mock = MockServer::start(&json!({"responses": [{"status": 401, "json": {"error": {
        "message": "Incorrect API key provided: sk-te**st. You can find your API key at https://platform.openai.com/account/api-keys.",
        "type": "invalid_request_error", "param": null, "code": "invalid_api_key"}}}]}));
    let p = provider(&mock);
    let err = send(&*p, &request(false)).0.unwrap_err();
    let api = err.api().unwrap_or_else(|| panic!("{err:?}"));
    assert_eq!(api.kind, ApiErrorKind::Authentication, "{api:?}");
    assert_eq!(api.status, 401);
    let shown = err.to_string();
    assert!(shown.contains("OPENAI_API_KEY"), "{shown}");
    assert!(!shown.contains("sk-test") && !format!("{err:?}").contains("sk-test"));
    assert_eq!(mock.requests().len(), 1, "401 is not retried");
}

#[test]
fn rate_limit_429_is_retried_then_succeeds() {
    let mock = MockServer::start(&json!({"responses": [
        {"status": 429, "headers": {"retry-after-ms": "50", "x-request-id": "req_oai_1"}, "json": {"error": {
            "message": "Rate limit reached for gpt-4o-mini", "type": "requests", "param": null, "code": "rate_limit_exceeded"}}},
        response_of("openai_text", 0)
    ]}));
    let (result, events) = send(&*provider(&mock), &request(true));
    let message = result.unwrap().message;
    assert_eq!(message.text(), "Hello! How can I help you today? — Bonjour ! 🙂");
    assert_eq!(texts(&events), message.text(), "no delta duplicated by the retry");
    assert_eq!(mock.requests().len(), 2);
}

#[test]
fn rate_limit_429_that_persists_is_a_rate_limit_error_with_the_request_id() {
    let r429 = json!({"status": 429, "headers": {"retry-after": "0", "x-request-id": "req_oai_429"}, "json": {"error": {
        "message": "Rate limit reached", "type": "requests", "param": null, "code": "rate_limit_exceeded"}}});
    let mock = MockServer::start(&json!({"responses": [r429, r429, r429]}));
    let err = send(&*provider(&mock), &request(false)).0.unwrap_err();
    let api = err.api().unwrap_or_else(|| panic!("{err:?}"));
    assert_eq!((api.kind, api.status), (ApiErrorKind::RateLimit, 429));
    assert_eq!(err.request_id(), Some("req_oai_429"), "x-request-id is OpenAI's request id header");
    assert_eq!(mock.requests().len(), 3, "the default 2 retries");
}

#[test]
fn dropped_stream_is_interrupted_keeping_the_text_received_so_far() {
    let mut response = response_of("openai_text", 0);
    // Role chunk + 3 text pieces of 8 characters, then the connection closes.
    response["fault"] = json!({"type": "drop", "after_events": 4});
    let mock = MockServer::start(&json!({"responses": [response]}));
    let (result, events) = send(&*provider(&mock), &request(true));
    let err = result.unwrap_err();
    let Error::StreamInterrupted { partial, api: None, .. } = &err else { panic!("{err:?}") };
    assert_eq!(partial.text(), "Hello! How can I help yo");
    assert_eq!(texts(&events), partial.text());
    assert_eq!(mock.requests().len(), 1, "never retried after content reached the caller");
}

#[test]
fn error_chunk_mid_stream_is_interrupted_with_its_api_error() {
    let mock = MockServer::start(&json!({"responses": [{"sse": [
        {"data": {"id": "c1", "object": "chat.completion.chunk", "created": 1, "model": "m",
                  "choices": [{"index": 0, "delta": {"role": "assistant", "content": "Partial "}, "finish_reason": null}]}},
        {"data": {"id": "c1", "object": "chat.completion.chunk", "created": 1, "model": "m",
                  "choices": [{"index": 0, "delta": {"content": "answer"}, "finish_reason": null}]}},
        {"data": {"error": {"message": "The server had an error while processing your request.", "type": "server_error",
                            "param": null, "code": null}}}
    ], "headers": {"x-request-id": "req_oai_mid"}}]}));
    let err = send(&*provider(&mock), &request(true)).0.unwrap_err();
    let Error::StreamInterrupted { partial, api: Some(api), .. } = &err else { panic!("{err:?}") };
    assert_eq!(partial.text(), "Partial answer");
    assert_eq!(api.error_type, "server_error");
    assert_eq!(err.request_id(), Some("req_oai_mid"));
}

#[test]
fn stream_without_done_still_completes_once_finish_reason_arrived() {
    // Some compatible servers end the body (cleanly) without the [DONE] sentinel.
    let chunk = |delta: Value, finish: Value| {
        json!({"data": {"id": "c9", "object": "chat.completion.chunk", "created": 1, "model": "llama",
            "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]}})
    };
    let sse = json!([
        chunk(json!({"role": "assistant", "content": "Short"}), Value::Null),
        chunk(json!({"content": " answer."}), json!("length"))
    ]);
    let mock = MockServer::start(&json!({"responses": [{"sse": sse}]}));
    let message = send(&*provider(&mock), &request(true)).0.unwrap().message;
    assert_eq!(message.text(), "Short answer.");
    assert_eq!(message.stop_reason, Some(StopReason::MaxTokens));
}

#[test]
fn stream_cut_after_finish_reason_but_before_done_is_still_interrupted() {
    let mut response = response_of("openai_text", 0);
    // The finish chunk went out, then the connection broke: the usage chunk may be lost, so report it.
    response["fault"] = json!({"type": "drop", "after_events": 8});
    let mock = MockServer::start(&json!({"responses": [response]}));
    let err = send(&*provider(&mock), &request(true)).0.unwrap_err();
    let Error::StreamInterrupted { partial, .. } = &err else { panic!("{err:?}") };
    assert_eq!(partial.text(), "Hello! How can I help you today? — Bonjour ! 🙂");
}

#[test]
fn a_200_body_that_is_not_a_completion_is_an_invalid_response_with_the_request_id() {
    let mock = MockServer::start(&json!({"responses": [
        {"json": {"object": "list", "data": []}, "headers": {"x-request-id": "req_oai_bad"}}
    ]}));
    let err = send(&*provider(&mock), &request(false)).0.unwrap_err();
    let Error::InvalidResponse { message, request_id } = &err else { panic!("{err:?}") };
    assert!(message.contains("choices"), "{message}");
    assert_eq!(request_id.as_deref(), Some("req_oai_bad"));
}
