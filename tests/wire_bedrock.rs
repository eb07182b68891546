//! Claude on Bedrock Runtime against the shared mock server, which checks the SigV4 signature with the test
//! secret (a wrong one is refused like AWS does), the Bedrock body, and answers with the AWS event-stream
//! framing whose chunk frames carry the same Anthropic events as the Anthropic scenarios.
//!
//! Every test goes through the real provider (`ProviderConfig::build_bedrock`) and real HTTP to
//! `mockserver.py`.
#![allow(clippy::unwrap_used, clippy::expect_used)]

#[path = "common/mock.rs"]
mod mock;
#[path = "common/require.rs"]
mod require;
#[path = "common/wire.rs"]
mod wire;

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use mock::{MockServer, scenario};
use serde_json::{Value, json};
use tooloop::provider::{AwsCredentials, BedrockProvider, Protocol, Provider, ProviderConfig, StreamEvent};
use tooloop::{
    Agent, AgentConfig, ApiErrorKind, ContentBlock, Error, Message, MessageResponse, Request, StopReason, Tool,
    ToolContext, ToolOutput,
};
use wire::{fast_http, response_of, send};

const KEY_ID: &str = "AKIDMOCKBEDROCK0001";
const SECRET: &str = "mockSecretKey/abcdefghijklmnopqrstuvwxyz01";
const TOKEN: &str = "mockSessionToken+abcdefghijklmnopqrstuvwxyz";
const MODEL: &str = "us.anthropic.claude-sonnet-4-6-v1:0";
/// 2025-11-30T12:30:00Z.
const FIXED: u64 = 1_764_505_800;

fn config(mock: &MockServer, secret: &str, token: Option<&str>) -> ProviderConfig {
    ProviderConfig {
        base_url: Some(mock.base_url()),
        region: Some("us-west-2".into()),
        aws_credentials: Some(AwsCredentials::new(KEY_ID, secret, token.map(str::to_string))),
        http: fast_http(),
        ..ProviderConfig::new(Protocol::Bedrock)
    }
}

fn provider(mock: &MockServer) -> BedrockProvider {
    config(mock, SECRET, Some(TOKEN)).build_bedrock().unwrap()
}

fn fixed_clock(p: BedrockProvider) -> BedrockProvider {
    p.with_clock(Arc::new(|| UNIX_EPOCH + Duration::from_secs(FIXED)))
}

fn request(stream: bool) -> Request {
    Request {
        model: MODEL.into(),
        max_tokens: 1024,
        messages: vec![Message::user("What's the weather in Paris?")].into(),
        stream,
        ..Default::default()
    }
}

/// A Bedrock response whose signature the mock verifies with the test secret.
fn bedrock(mut response: Value, opts: Value) -> Value {
    let mut o = json!({"secret_access_key": SECRET});
    o.as_object_mut().unwrap().extend(opts.as_object().unwrap().clone());
    response.as_object_mut().unwrap().remove("expect");
    response["bedrock"] = o;
    response
}

fn text_of(m: &MessageResponse) -> String {
    m.text()
}

#[test]
fn text_streamed_and_not_gives_the_scenario_message_through_a_signed_request() {
    let r = bedrock(response_of("anthropic_text", 0), json!({}));
    let mock = MockServer::start(&json!({"responses": [r, r]}));
    let p = provider(&mock);
    let json_resp = send(&p, &request(false)).0.unwrap();
    let (stream_resp, events) = send(&p, &request(true));
    let stream_resp = stream_resp.unwrap();

    let wire: MessageResponse = serde_json::from_value(response_of("anthropic_text", 0)["anthropic"].clone()).unwrap();
    assert_eq!(json_resp.message, wire);
    assert_eq!(stream_resp.message, wire, "the event stream must fold into the same message");
    assert_eq!(stream_resp.request_id.as_deref(), Some("req_mock_1"), "x-amzn-requestid is kept");

    let typed: String = events
        .iter()
        .filter_map(|e| if let StreamEvent::TextDelta { text, .. } = e { Some(text.as_str()) } else { None })
        .collect();
    assert_eq!(typed, wire.text());
    let raw: Vec<&str> = events
        .iter()
        .filter_map(|e| if let StreamEvent::Raw { event, .. } = e { Some(event.as_str()) } else { None })
        .collect();
    assert_eq!(raw.first(), Some(&"message_start"));
    assert_eq!(raw.last(), Some(&"message_stop"));

    let reqs = mock.requests();
    assert_eq!(reqs[0]["path"], "/model/us.anthropic.claude-sonnet-4-6-v1%3A0/invoke");
    assert_eq!(reqs[1]["path"], "/model/us.anthropic.claude-sonnet-4-6-v1%3A0/invoke-with-response-stream");
    for r in &reqs {
        let body = &r["body"];
        assert_eq!(body["anthropic_version"], "bedrock-2023-05-31");
        assert!(body.get("model").is_none() && body.get("stream").is_none(), "{body}");
        assert_eq!(body["max_tokens"], 1024);
    }
}

#[test]
fn signature_headers_are_present_and_stable_for_a_fixed_clock() {
    let r = bedrock(response_of("anthropic_text", 0), json!({}));
    let mock = MockServer::start(&json!({"responses": [r, r]}));
    let p = fixed_clock(provider(&mock));
    send(&p, &request(true)).0.unwrap();
    send(&p, &request(true)).0.unwrap();
    let reqs = mock.requests();
    let h0 = &reqs[0]["headers"];
    let auth = h0["authorization"].as_str().unwrap();
    assert!(
        auth.starts_with(&format!("AWS4-HMAC-SHA256 Credential={KEY_ID}/20251130/us-west-2/bedrock/aws4_request, ")),
        "{auth}"
    );
    assert!(
        auth.contains("SignedHeaders=accept;content-type;host;x-amz-date;x-amz-security-token, Signature="),
        "{auth}"
    );
    assert_eq!(h0["x-amz-date"], "20251130T123000Z");
    assert_eq!(h0["x-amz-security-token"], TOKEN);
    assert_eq!(h0["authorization"], reqs[1]["headers"]["authorization"], "same request, same clock, same signature");
    assert!(h0.get("x-api-key").is_none());
}

#[test]
fn a_wrong_secret_is_refused_and_no_secret_reaches_the_error() {
    let r = bedrock(response_of("anthropic_text", 0), json!({}));
    let mock = MockServer::start(&json!({"responses": [r]}));
    let wrong = "wrongSecretKey/0123456789abcdefghijklmnop";
    let p = config(&mock, wrong, None).build_bedrock().unwrap();
    let err = send(&p, &request(true)).0.unwrap_err();
    let api = err.api().expect("an API error");
    assert_eq!(
        (api.kind, api.status, api.error_type.as_str()),
        (ApiErrorKind::Authentication, 403, "InvalidSignatureException")
    );
    assert_eq!(api.request_id.as_deref(), Some("req_mock_0"));
    let shown = format!("{err} {err:?} {p:?}");
    for s in [wrong, KEY_ID] {
        assert!(!shown.contains(s), "a credential leaked: {shown}");
    }
    // Without a session token, none is sent (nor signed).
    assert!(mock.requests()[0]["headers"].get("x-amz-security-token").is_none());
}

#[test]
fn secrets_lists_every_credential_value_for_redaction() {
    let mock = MockServer::start(&json!({"responses": []}));
    let p: Arc<dyn Provider> = config(&mock, SECRET, Some(TOKEN)).build().unwrap();
    let values: Vec<String> = p.secrets().iter().map(|s| s.expose().to_string()).collect();
    assert_eq!(values, vec![SECRET, TOKEN, KEY_ID]);
    assert_eq!(p.name(), "bedrock");
}

#[test]
fn frames_split_at_random_byte_boundaries_give_the_same_message() {
    let base = response_of("anthropic_thinking_tool", 0);
    let wire: MessageResponse = serde_json::from_value(base["anthropic"].clone()).unwrap();
    // A fixed pseudo-random sequence of chunk sizes (LCG), so a failure is reproducible.
    let mut x: u64 = 0x2545_f491;
    let sizes: Vec<u64> = (0..6)
        .map(|_| {
            x = x.wrapping_mul(6_364_136_223_846_793_005).wrapping_add(1_442_695_040_888_963_407);
            1 + (x >> 33) % 23
        })
        .chain([1])
        .collect();
    let responses: Vec<Value> = sizes.iter().map(|_| bedrock(base.clone(), json!({}))).collect();
    let mut responses = responses;
    for (r, n) in responses.iter_mut().zip(&sizes) {
        r["chunk_size"] = json!(n);
    }
    let mock = MockServer::start(&json!({"responses": responses}));
    let p = provider(&mock);
    for n in &sizes {
        let (resp, events) = send(&p, &request(true));
        assert_eq!(resp.unwrap().message, wire, "chunk_size {n}");
        let thinking: String = events
            .iter()
            .filter_map(|e| {
                if let StreamEvent::ThinkingDelta { thinking, .. } = e { Some(thinking.as_str()) } else { None }
            })
            .collect();
        let want = match &wire.content[0] {
            ContentBlock::Thinking(t) => t.thinking.clone(),
            other => panic!("{other:?}"),
        };
        assert_eq!(thinking, want, "chunk_size {n}");
    }
}

#[test]
fn a_crc_error_after_content_is_an_interrupted_stream_with_the_partial() {
    // Frames: message_start, ping, block start, text deltas…; the 5th frame (index 4) is corrupt.
    let r = bedrock(response_of("anthropic_text", 0), json!({"corrupt_crc_after_events": 4}));
    let mock = MockServer::start(&json!({"responses": [r.clone(), r]}));
    let p = provider(&mock);
    let err = send(&p, &request(true)).0.unwrap_err();
    match &err {
        Error::StreamInterrupted { message, partial, api } => {
            assert!(message.contains("corrupt event-stream frame"), "{message}");
            assert!(api.is_none());
            let full =
                response_of("anthropic_text", 0)["anthropic"]["content"][0]["text"].as_str().unwrap().to_string();
            let got = text_of(partial);
            assert!(!got.is_empty() && full.starts_with(&got) && got != full, "partial {got:?} of {full:?}");
        }
        other => panic!("expected StreamInterrupted, got {other:?}"),
    }
    assert_eq!(mock.requests().len(), 1, "never retried after content reached the caller");
}

#[test]
fn a_corrupt_first_frame_is_an_invalid_response_not_retried() {
    let r = bedrock(response_of("anthropic_text", 0), json!({"corrupt_crc_after_events": 0}));
    let mock = MockServer::start(&json!({"responses": [r.clone(), r]}));
    let err = send(&provider(&mock), &request(true)).0.unwrap_err();
    assert!(matches!(err, Error::InvalidResponse { .. }), "{err:?}");
    assert_eq!(mock.requests().len(), 1);
}

#[test]
fn a_throttling_exception_before_content_is_retried_as_a_rate_limit() {
    let ok = bedrock(response_of("anthropic_text", 0), json!({}));
    let throttled_frame = bedrock(
        response_of("anthropic_text", 0),
        json!({"exception": {"type": "throttlingException", "message": "Too many requests", "after_events": 0}}),
    );
    let throttled_http = json!({
        "status": 429, "bedrock": {"secret_access_key": SECRET},
        "headers": {"x-amzn-ErrorType": "ThrottlingException:http://internal.amazon.com/coral/com.amazon.bedrock/"},
        "json": {"message": "Too many requests, please wait before trying again."}
    });
    let mock = MockServer::start(&json!({"responses": [throttled_frame, throttled_http, ok]}));
    let resp = send(&provider(&mock), &request(true)).0.unwrap();
    assert_eq!(resp.message.stop_reason, Some(StopReason::EndTurn));
    assert_eq!(mock.requests().len(), 3, "two throttles, both retried");

    // With no retries left, the throttle surfaces as a rate-limit error naming the AWS type.
    let mock = MockServer::start(&json!({"responses": [throttled_http]}));
    let mut cfg = config(&mock, SECRET, Some(TOKEN));
    cfg.http.max_retries = 0;
    let err = send(&cfg.build_bedrock().unwrap(), &request(true)).0.unwrap_err();
    let api = err.api().unwrap();
    assert_eq!((api.kind, api.status, api.error_type.as_str()), (ApiErrorKind::RateLimit, 429, "ThrottlingException"));
    assert!(api.message.contains("Too many requests"));
}

#[test]
fn a_mid_stream_exception_keeps_the_partial_message() {
    let r = bedrock(
        response_of("anthropic_text", 0),
        json!({"exception": {"type": "modelStreamErrorException", "message": "Model stream failed", "after_events": 5}}),
    );
    let mock = MockServer::start(&json!({"responses": [r.clone(), r]}));
    let (result, events) = send(&provider(&mock), &request(true));
    let err = result.unwrap_err();
    match &err {
        Error::StreamInterrupted { partial, api: Some(api), .. } => {
            assert_eq!(
                (api.kind, api.error_type.as_str()),
                (ApiErrorKind::InternalServer, "modelStreamErrorException")
            );
            assert_eq!(api.message, "Model stream failed");
            assert_eq!(api.request_id.as_deref(), Some("req_mock_0"));
            let streamed: String = events
                .iter()
                .filter_map(|e| if let StreamEvent::TextDelta { text, .. } = e { Some(text.as_str()) } else { None })
                .collect();
            assert!(!streamed.is_empty());
            assert_eq!(text_of(partial), streamed, "the partial holds exactly what was streamed");
        }
        other => panic!("expected StreamInterrupted with the API error, got {other:?}"),
    }
    assert_eq!(mock.requests().len(), 1, "not retried after content");
}

#[test]
fn a_validation_exception_is_a_bad_request_not_retried() {
    let bad = json!({
        "status": 400, "bedrock": {"secret_access_key": SECRET},
        "headers": {"x-amzn-ErrorType": "ValidationException:http://internal.amazon.com/coral/com.amazon.bedrock/"},
        "json": {"message": "messages: roles must alternate"}
    });
    let mock = MockServer::start(&json!({"responses": [bad, bad]}));
    let err = send(&provider(&mock), &request(false)).0.unwrap_err();
    assert_eq!(err.api().map(|a| a.kind), Some(ApiErrorKind::BadRequest), "{err:?}");
    assert_eq!(mock.requests().len(), 1);
}

#[test]
fn the_tool_loop_runs_through_the_agent() {
    let scen = scenario("anthropic_tool_then_text");
    let responses: Vec<Value> =
        scen["responses"].as_array().unwrap().iter().map(|r| bedrock(r.clone(), json!({}))).collect();
    let mock = MockServer::start(&json!({"responses": responses}));
    let calls = Arc::new(AtomicUsize::new(0));
    let agent = Agent::new(
        Arc::new(provider(&mock)),
        AgentConfig { model: MODEL.into(), max_tokens: 1024, ..Default::default() },
    );
    let counter = calls.clone();
    let tool = Tool::new(
        "get_weather",
        "Current weather in a city.",
        json!({"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}),
        move |input: &Value, _: &ToolContext<'_>| {
            counter.fetch_add(1, Ordering::SeqCst);
            Ok(ToolOutput::Text(format!("18 °C in {}", input["city"].as_str().unwrap_or("?"))))
        },
    )
    .unwrap();
    agent.tools().register(tool).unwrap();
    let result = agent.run("Weather in Paris?", &mut |_| {}).unwrap();
    assert_eq!(result.stop_reason, Some(StopReason::EndTurn));
    assert_eq!(result.turns, 2);
    assert_eq!(calls.load(Ordering::SeqCst), 1);
    let reqs = mock.requests();
    assert_eq!(reqs.len(), 2);
    assert!(reqs.iter().all(|r| r["path"].as_str().unwrap().ends_with("/invoke-with-response-stream")));
    let second = &reqs[1]["body"]["messages"];
    assert_eq!(second[2]["content"][0]["type"], "tool_result");
    assert_eq!(second[2]["content"][0]["content"], "18 °C in Paris");
    assert_eq!(reqs[1]["body"]["tools"][0]["name"], "get_weather");
}

#[test]
fn thinking_blocks_go_back_byte_for_byte_through_the_agent() {
    let scen = scenario("anthropic_thinking_tool");
    let responses: Vec<Value> =
        scen["responses"].as_array().unwrap().iter().map(|r| bedrock(r.clone(), json!({}))).collect();
    let first = scen["responses"][0]["anthropic"]["content"].clone();
    let tool_name = first
        .as_array()
        .unwrap()
        .iter()
        .find(|b| b["type"] == "tool_use")
        .map(|b| b["name"].as_str().unwrap().to_string())
        .unwrap();
    let mock = MockServer::start(&json!({"responses": responses}));
    let cfg = AgentConfig {
        model: MODEL.into(),
        max_tokens: 4096,
        thinking: Some(json!({"type": "enabled", "budget_tokens": 2048})),
        ..Default::default()
    };
    let agent = Agent::new(Arc::new(provider(&mock)), cfg);
    let tool = Tool::new(&tool_name, "A tool.", json!({"type": "object"}), |_: &Value, _: &ToolContext<'_>| {
        Ok(ToolOutput::Text("ok".into()))
    })
    .unwrap();
    agent.tools().register(tool).unwrap();
    let result = agent.run("Think, then use the tool.", &mut |_| {}).unwrap();
    assert_eq!(result.stop_reason, Some(StopReason::EndTurn));
    let reqs = mock.requests();
    assert_eq!(reqs[0]["body"]["thinking"], json!({"type": "enabled", "budget_tokens": 2048}));
    assert_eq!(reqs[1]["body"]["messages"][1]["content"], first, "thinking and its signature go back unchanged");
}

#[test]
fn shared_credentials_file_profile_is_read() {
    let dir = std::env::temp_dir().join(format!("tooloop-bedrock-creds-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("credentials");
    std::fs::write(&path, "[default]\naws_access_key_id = A1\naws_secret_access_key = S1\n[work]\naws_access_key_id=A2\naws_secret_access_key=S2\naws_session_token=T2\n").unwrap();
    let work = AwsCredentials::from_shared_file(&path, "work").unwrap().unwrap();
    assert_eq!(work, AwsCredentials::new("A2", "S2", Some("T2".into())));
    assert_eq!(AwsCredentials::from_shared_file(&path, "absent").unwrap(), None);
    assert_eq!(AwsCredentials::from_shared_file(&dir.join("missing"), "default").unwrap(), None);
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn no_region_is_a_config_error_naming_the_variable() {
    if std::env::var("AWS_REGION").is_ok() || std::env::var("AWS_DEFAULT_REGION").is_ok() {
        require::skip("AWS_REGION or AWS_DEFAULT_REGION is set: the environment supplies a region");
        return;
    }
    let cfg = ProviderConfig {
        aws_credentials: Some(AwsCredentials::new(KEY_ID, SECRET, None)),
        ..ProviderConfig::new(Protocol::Bedrock)
    };
    let err = cfg.build().map(|_| ()).unwrap_err();
    assert!(err.to_string().contains("AWS_REGION"), "{err}");
    let _ = SystemTime::now();
}

#[test]
fn the_shared_bedrock_scenarios_work_with_any_credentials() {
    for name in ["bedrock_text", "bedrock_tool_then_text"] {
        let mock = MockServer::start(&scenario(name));
        let p = config(&mock, "anyOtherSecretKey/0000000000000000000000", None).build_bedrock().unwrap();
        let resp = send(&p, &request(true)).0.unwrap();
        let want: MessageResponse =
            serde_json::from_value(scenario(name)["responses"][0]["anthropic"].clone()).unwrap();
        assert_eq!(resp.message, want, "{name}");
    }
}

#[test]
fn cancel_mid_stream_returns_within_200ms_with_the_partial() {
    let mut r = bedrock(response_of("anthropic_text", 0), json!({}));
    r["fault"] = json!({"type": "stall", "after_events": 5, "ms": 30000});
    let mock = MockServer::start(&json!({"responses": [r]}));
    let p = provider(&mock);
    let cancel = tooloop::CancelToken::new();
    let canceller = cancel.clone();
    let mut cancelled_at = None;
    let result = p.send(&request(true), &cancel, &mut |e| {
        if matches!(e, StreamEvent::TextDelta { .. }) && cancelled_at.is_none() {
            let c = canceller.clone();
            cancelled_at = Some(std::time::Instant::now());
            std::thread::spawn(move || {
                std::thread::sleep(Duration::from_millis(100));
                c.cancel();
            });
        }
    });
    let elapsed = cancelled_at.unwrap().elapsed();
    match result {
        Err(Error::Cancelled { partial: Some(partial) }) => assert!(!partial.text().is_empty()),
        other => panic!("expected Cancelled with a partial, got {other:?}"),
    }
    assert!(elapsed < Duration::from_millis(100 + 200), "took {elapsed:?}");
}
