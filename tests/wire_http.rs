//! HTTP behaviour of the providers against the shared mock server: API errors and their kinds, retries
//! (retry-after, x-should-retry, back-off, limits), broken and stalled connections, idle and total timeouts,
//! cancellation from another thread, malformed bodies, request ids, and secrets kept out of every output.
//!
//! Every test goes through a real provider and real HTTP to `mockserver.py` (or to a closed port).
#![allow(clippy::unwrap_used, clippy::expect_used)]

#[path = "common/mock.rs"]
mod mock;
#[path = "common/wire.rs"]
mod wire;

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use mock::{MockServer, scenario};
use serde_json::{Value, json};
use tooloop::http::{HttpClient, HttpConfig};
use tooloop::provider::{AnthropicProvider, Protocol, Provider, ProviderConfig, Response, Secret, StreamEvent};
use tooloop::{ApiErrorKind, CancelToken, Error, Message, Request};
use wire::{fast_http, provider_config, send};

fn config(mock: &MockServer, http: HttpConfig) -> ProviderConfig {
    provider_config(Protocol::Anthropic, mock.base_url(), http)
}

fn provider(mock: &MockServer) -> Arc<dyn Provider> {
    config(mock, fast_http()).build().unwrap()
}

fn provider_with(mock: &MockServer, http: HttpConfig) -> Arc<dyn Provider> {
    config(mock, http).build().unwrap()
}

fn request(stream: bool) -> Request {
    Request {
        model: "claude-sonnet-4-6".into(),
        max_tokens: 1024,
        messages: vec![Message::user("Hi")].into(),
        stream,
        ..Default::default()
    }
}

fn text_reply() -> Value {
    scenario("anthropic_text")["responses"][0].clone()
}

fn api_error(status: u16, error_type: &str, message: &str) -> Value {
    json!({"status": status, "json": {"type": "error", "error": {"type": error_type, "message": message}}})
}

fn texts(events: &[StreamEvent]) -> String {
    events
        .iter()
        .filter_map(|e| if let StreamEvent::TextDelta { text, .. } = e { Some(text.as_str()) } else { None })
        .collect()
}

/// Fails when `secret` shows in the Display or Debug of `err`.
fn assert_no_secret(err: &Error, secret: &str) {
    assert!(!err.to_string().contains(secret), "Display leaks the key: {err}");
    assert!(!format!("{err:?}").contains(secret), "Debug leaks the key: {err:?}");
}

// ------------------------------------------------------------------------------------------ API errors

#[test]
fn unauthorized_401_is_an_authentication_error_naming_the_env_var_and_never_the_key() {
    let mock = MockServer::start(&scenario("anthropic_errors_401"));
    let err = send(&*provider(&mock), &request(false)).0.unwrap_err();
    let Error::Api(api) = &err else { panic!("{err:?}") };
    assert_eq!(
        (api.kind, api.status, api.error_type.as_str()),
        (ApiErrorKind::Authentication, 401, "authentication_error")
    );
    assert_eq!(api.message, "invalid x-api-key");
    let shown = err.to_string();
    assert!(shown.contains("ANTHROPIC_API_KEY"), "{shown}");
    assert!(shown.contains("req_mock_0"), "the request id is shown: {shown}");
    assert_no_secret(&err, "sk-test");
    assert_eq!(err.kind_name(), "api");
    assert_eq!(mock.requests().len(), 1, "401 is not retried");
    assert_eq!(mock.requests()[0]["headers"]["x-api-key"], "sk-test", "the key did go out, in its header");
}

#[test]
fn provider_and_config_debug_output_never_shows_the_key() {
    let mock = MockServer::start(&json!({"responses": []}));
    let cfg = config(&mock, fast_http());
    let direct =
        AnthropicProvider::new(HttpClient::new(fast_http()), mock.base_url(), Some(Secret::new("sk-test")), Vec::new());
    for shown in [format!("{cfg:?}"), format!("{direct:?}"), format!("{:?}", Secret::new("sk-test"))] {
        assert!(!shown.contains("sk-test"), "{shown}");
        assert!(shown.contains("***"), "the key is visibly hidden, not silently missing: {shown}");
    }
}

#[test]
fn an_error_body_that_echoes_the_key_is_redacted() {
    // Some proxies and compatible servers repeat the key they rejected.
    let mock = MockServer::start(
        &json!({"responses": [api_error(401, "authentication_error", "invalid x-api-key: sk-test")]}),
    );
    let err = send(&*provider(&mock), &request(false)).0.unwrap_err();
    assert_eq!(err.api().map(|a| a.kind), Some(ApiErrorKind::Authentication));
    assert_no_secret(&err, "sk-test");
    assert!(err.to_string().contains("invalid x-api-key"), "{err}");
}

#[test]
fn bad_request_400_is_not_retried_and_keeps_the_request_id() {
    let mut resp = api_error(400, "invalid_request_error", "messages.1.content.0.tool_use_id: unexpected id");
    resp["headers"] = json!({"request-id": "req_011CSHoEeqs5C35K2UUqR7Fy"});
    let mock = MockServer::start(&json!({"responses": [resp]}));
    let err = send(&*provider(&mock), &request(false)).0.unwrap_err();
    let api = err.api().unwrap();
    assert_eq!((api.kind, api.status), (ApiErrorKind::BadRequest, 400));
    assert_eq!(err.request_id(), Some("req_011CSHoEeqs5C35K2UUqR7Fy"));
    assert!(err.to_string().contains("unexpected id"), "{err}");
    assert_eq!(mock.requests().len(), 1);
}

#[test]
fn not_found_404_hints_at_the_model_name_and_base_url() {
    let mock = MockServer::start(&json!({"responses": [api_error(404, "not_found_error", "model: claude-nope")]}));
    let err = send(&*provider(&mock), &request(false)).0.unwrap_err();
    assert_eq!(err.api().map(|a| a.kind), Some(ApiErrorKind::NotFound));
    let shown = err.to_string();
    assert!(shown.contains("model: claude-nope") && shown.contains("base URL"), "{shown}");
    assert_eq!(mock.requests().len(), 1);
}

#[test]
fn request_too_large_413_is_not_retried() {
    let mock = MockServer::start(
        &json!({"responses": [api_error(413, "request_too_large", "Request exceeds the maximum allowed number of bytes.")]}),
    );
    let err = send(&*provider(&mock), &request(false)).0.unwrap_err();
    assert_eq!(err.api().map(|a| (a.kind, a.status)), Some((ApiErrorKind::RequestTooLarge, 413)));
    assert_eq!(mock.requests().len(), 1);
}

#[test]
fn each_status_maps_to_its_kind_and_only_transient_ones_are_retried() {
    // (status, error type, kind, requests the mock sees with max_retries 1)
    let cases = [
        (403, "permission_error", ApiErrorKind::PermissionDenied, 1),
        (422, "", ApiErrorKind::BadRequest, 1),
        (408, "", ApiErrorKind::Other, 2),
        (409, "", ApiErrorKind::Other, 2),
        (503, "", ApiErrorKind::InternalServer, 2),
        (529, "overloaded_error", ApiErrorKind::Overloaded, 2),
    ];
    for (status, error_type, kind, requests) in cases {
        let resp = json!({"status": status, "headers": {"retry-after": "0"},
                          "json": {"type": "error", "error": {"type": error_type, "message": "nope"}}});
        let mock = MockServer::start(&json!({"responses": [resp, resp]}));
        let http = HttpConfig { max_retries: 1, ..fast_http() };
        let err = send(&*provider_with(&mock, http), &request(false)).0.unwrap_err();
        assert_eq!(err.api().map(|a| (a.kind, a.status)), Some((kind, status)), "{err}");
        assert_eq!(mock.requests().len(), requests, "status {status}");
    }
}

// ------------------------------------------------------------------------------------------ retries

#[test]
fn rate_limit_429_waits_for_retry_after_ms_then_succeeds() {
    let mut limited = api_error(429, "rate_limit_error", "slow down");
    limited["headers"] = json!({"retry-after-ms": "300", "retry-after": "0"});
    let mock = MockServer::start(&json!({"responses": [limited, text_reply()]}));
    let start = Instant::now();
    let (result, events) = send(&*provider(&mock), &request(true));
    let elapsed = start.elapsed();
    println!("429 with retry-after-ms 300: success after {elapsed:?}");
    let message = result.unwrap().message;
    assert!(elapsed >= Duration::from_millis(250), "retry-after-ms was not honoured: {elapsed:?}");
    assert!(elapsed < Duration::from_secs(5), "{elapsed:?}");
    assert_eq!(texts(&events), message.text(), "the retried stream's deltas arrive once");
    assert_eq!(mock.requests().len(), 2);
}

#[test]
fn rate_limit_429_waits_for_retry_after_seconds() {
    let mut limited = api_error(429, "rate_limit_error", "slow down");
    limited["headers"] = json!({"retry-after": "1"});
    let mock = MockServer::start(&json!({"responses": [limited, text_reply()]}));
    let start = Instant::now();
    send(&*provider(&mock), &request(false)).0.unwrap();
    let elapsed = start.elapsed();
    println!("429 with retry-after 1: success after {elapsed:?}");
    assert!(elapsed >= Duration::from_millis(900), "{elapsed:?}");
}

#[test]
fn rate_limit_429_from_the_shared_scenario_is_retried_once() {
    let mock = MockServer::start(&scenario("anthropic_429_then_ok"));
    let message = send(&*provider(&mock), &request(false)).0.unwrap().message;
    assert_eq!(message.text(), "Sorry for the wait — here is your answer: 42.");
    assert_eq!(mock.requests().len(), 2);
}

#[test]
fn retry_after_longer_than_max_retry_after_returns_the_error_without_waiting() {
    let mut limited = api_error(429, "rate_limit_error", "come back in two minutes");
    limited["headers"] = json!({"retry-after": "120"});
    let mock = MockServer::start(&json!({"responses": [limited, text_reply()]}));
    let start = Instant::now();
    let err = send(&*provider(&mock), &request(false)).0.unwrap_err();
    let api = err.api().unwrap();
    assert_eq!((api.kind, api.retry_after), (ApiErrorKind::RateLimit, Some(Duration::from_secs(120))));
    assert!(start.elapsed() < Duration::from_secs(5), "{:?}", start.elapsed());
    assert_eq!(mock.requests().len(), 1);
}

#[test]
fn internal_500_then_200_is_retried_and_succeeds() {
    let mock =
        MockServer::start(&json!({"responses": [api_error(500, "api_error", "Internal server error"), text_reply()]}));
    let (result, events) = send(&*provider(&mock), &request(true));
    let message = result.unwrap().message;
    assert!(message.text().starts_with("Hello!"));
    assert_eq!(texts(&events), message.text());
    assert_eq!(mock.requests().len(), 2);
    assert_eq!(mock.requests()[1]["body"], mock.requests()[0]["body"], "the retry sends the same request");
}

#[test]
fn internal_500_until_the_retries_run_out_is_an_internal_server_error() {
    let e = api_error(500, "api_error", "Internal server error");
    let mock = MockServer::start(&json!({"responses": [e, e, e]}));
    let err = send(&*provider(&mock), &request(false)).0.unwrap_err();
    assert_eq!(err.api().map(|a| a.kind), Some(ApiErrorKind::InternalServer));
    assert_eq!(err.request_id(), Some("req_mock_2"), "the last attempt's request id");
    assert_eq!(mock.requests().len(), 3, "1 + the default 2 retries");
}

#[test]
fn overloaded_529_is_retried_max_retries_times_then_reported_as_overloaded() {
    for max_retries in [0u32, 2, 3] {
        let mut responses: Vec<Value> = scenario("anthropic_529_overloaded")["responses"].as_array().unwrap().clone();
        responses.push(responses[0].clone());
        let mock = MockServer::start(&json!({ "responses": responses }));
        let http = HttpConfig { max_retries, ..fast_http() };
        let err = send(&*provider_with(&mock, http), &request(false)).0.unwrap_err();
        let api = err.api().unwrap_or_else(|| panic!("{err:?}"));
        assert_eq!(
            (api.kind, api.status, api.error_type.as_str()),
            (ApiErrorKind::Overloaded, 529, "overloaded_error")
        );
        assert_eq!(mock.requests().len() as u32, max_retries + 1, "max_retries {max_retries}");
    }
}

#[test]
fn x_should_retry_false_stops_retries_even_for_a_529() {
    let mut e = api_error(529, "overloaded_error", "Overloaded");
    e["headers"] = json!({"x-should-retry": "false"});
    let mock = MockServer::start(&json!({"responses": [e, text_reply()]}));
    let err = send(&*provider(&mock), &request(false)).0.unwrap_err();
    assert_eq!(err.api().map(|a| a.kind), Some(ApiErrorKind::Overloaded));
    assert_eq!(mock.requests().len(), 1);
}

#[test]
fn x_should_retry_true_retries_even_a_400() {
    let mut e = api_error(400, "invalid_request_error", "try again");
    e["headers"] = json!({"x-should-retry": "true"});
    let mock = MockServer::start(&json!({"responses": [e, text_reply()]}));
    send(&*provider(&mock), &request(false)).0.unwrap();
    assert_eq!(mock.requests().len(), 2);
}

#[test]
fn back_off_between_retries_grows_without_retry_after() {
    let e = api_error(500, "api_error", "Internal server error");
    let mock = MockServer::start(&json!({"responses": [e, e, text_reply()]}));
    let http = HttpConfig {
        initial_backoff: Duration::from_millis(200),
        max_backoff: Duration::from_secs(2),
        ..HttpConfig::default()
    };
    let start = Instant::now();
    send(&*provider_with(&mock, http), &request(false)).0.unwrap();
    let elapsed = start.elapsed();
    println!("two back-offs from 200 ms took {elapsed:?}");
    // 200 ms then 400 ms, each minus up to 25 % jitter: at least 450 ms.
    assert!(elapsed >= Duration::from_millis(440), "{elapsed:?}");
}

// ------------------------------------------------------------------------------------------ connections

#[test]
fn connection_refused_is_a_connection_error_after_the_retries() {
    let port = {
        // Bind then drop: nothing listens on this port any more.
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        listener.local_addr().unwrap().port()
    };
    let cfg = ProviderConfig {
        protocol: Protocol::Anthropic,
        api_key: Some(Secret::new("sk-test")),
        base_url: Some(format!("http://127.0.0.1:{port}")),
        headers: Vec::new(),
        http: HttpConfig {
            initial_backoff: Duration::from_millis(100),
            max_backoff: Duration::from_secs(1),
            ..HttpConfig::default()
        },
        ..ProviderConfig::new(Protocol::Anthropic)
    };
    let start = Instant::now();
    let err = send(&*cfg.build().unwrap(), &request(true)).0.unwrap_err();
    let elapsed = start.elapsed();
    println!("connection refused reported after {elapsed:?}: {err}");
    let Error::Connection { .. } = &err else { panic!("{err:?}") };
    // Two back-offs (100 ms, 200 ms, minus jitter) prove the retries happened.
    assert!(elapsed >= Duration::from_millis(220), "{elapsed:?}");
    assert_no_secret(&err, "sk-test");
}

#[test]
fn server_closing_without_any_response_is_retried_then_succeeds() {
    let mock = MockServer::start(&json!({"responses": [{"fault": {"type": "close"}}, text_reply()]}));
    let message = send(&*provider(&mock), &request(true)).0.unwrap().message;
    assert!(message.text().starts_with("Hello!"));
    assert_eq!(mock.requests().len(), 2);
}

#[test]
fn server_closing_every_time_is_a_connection_error_after_max_retries_plus_one_attempts() {
    let close = json!({"fault": {"type": "close"}});
    let mock = MockServer::start(&json!({"responses": [close, close, close, close]}));
    let err = send(&*provider(&mock), &request(false)).0.unwrap_err();
    let Error::Connection { .. } = &err else { panic!("{err:?}") };
    assert_eq!(mock.requests().len(), 3);
}

#[test]
fn connection_dropped_mid_stream_is_interrupted_keeping_the_text_received() {
    let mock = MockServer::start(&scenario("anthropic_stream_drop"));
    let (result, events) = send(&*provider(&mock), &request(true));
    let err = result.unwrap_err();
    let Error::StreamInterrupted { partial, api: None, .. } = &err else { panic!("{err:?}") };
    // message_start, ping, block start and two 8-character deltas arrived before the drop.
    assert_eq!(partial.text(), "This answer will");
    assert_eq!(partial.id, "msg_01Dp5rT8kWzN3qLc7xVbM2sJ");
    assert_eq!(texts(&events), partial.text());
    assert_eq!(err.partial().map(|p| p.text()), Some("This answer will".into()));
    assert_eq!(mock.requests().len(), 1, "never retried once content reached the caller");
}

#[test]
fn json_body_cut_short_is_a_connection_error_not_a_parse_error() {
    let mut resp = text_reply();
    resp["fault"] = json!({"type": "drop", "after_bytes": 40});
    let mock = MockServer::start(&json!({"responses": [resp]}));
    let http = HttpConfig { max_retries: 0, ..fast_http() };
    let err = send(&*provider_with(&mock, http), &request(false)).0.unwrap_err();
    let Error::Connection { .. } = &err else { panic!("{err:?}") };
}

// ------------------------------------------------------------------------------------------ timeouts

#[test]
fn stalled_stream_fires_the_idle_timeout_keeping_the_partial() {
    let mock = MockServer::start(&scenario("anthropic_stream_stall"));
    let http = HttpConfig { idle_timeout: Duration::from_millis(400), ..fast_http() };
    let start = Instant::now();
    let (result, events) = send(&*provider_with(&mock, http), &request(true));
    let elapsed = start.elapsed();
    println!("idle timeout of 400 ms fired after {elapsed:?} (the server stalls for 30 s)");
    let err = result.unwrap_err();
    let Error::Timeout { phase, after, partial } = &err else { panic!("{err:?}") };
    assert_eq!((*phase, *after), ("idle", Duration::from_millis(400)));
    assert_eq!(partial.as_ref().map(|p| p.text()), Some("This tex".into()), "message_start, ping, start, one delta");
    assert_eq!(texts(&events), "This tex");
    assert!(elapsed >= Duration::from_millis(380) && elapsed < Duration::from_secs(10), "{elapsed:?}");
    assert_eq!(mock.requests().len(), 1, "a stream that delivered content is not retried");
}

#[test]
fn a_response_head_that_never_comes_times_out_and_is_retried() {
    let stalled = json!({"fault": {"type": "stall_headers", "ms": 5000}, "anthropic": text_reply()["anthropic"]});
    let mock = MockServer::start(&json!({"responses": [stalled, text_reply()]}));
    let http = HttpConfig { idle_timeout: Duration::from_millis(500), ..fast_http() };
    let start = Instant::now();
    let message = send(&*provider_with(&mock, http), &request(false)).0.unwrap().message;
    println!("head timeout then retry succeeded after {:?}", start.elapsed());
    assert!(message.text().starts_with("Hello!"));
    assert_eq!(mock.requests().len(), 2);
    assert!(start.elapsed() < Duration::from_secs(4), "did not wait for the stalled server: {:?}", start.elapsed());
}

#[test]
fn total_timeout_bounds_a_stream_that_keeps_dripping() {
    let mut resp = text_reply();
    // 16 writes 150 ms apart: never idle for long, but 2+ s in total.
    resp["delay_ms_between"] = json!(150);
    let mock = MockServer::start(&json!({"responses": [resp]}));
    let http =
        HttpConfig { total_timeout: Duration::from_millis(800), idle_timeout: Duration::from_secs(5), ..fast_http() };
    let start = Instant::now();
    let err = send(&*provider_with(&mock, http), &request(true)).0.unwrap_err();
    let elapsed = start.elapsed();
    println!("total timeout of 800 ms fired after {elapsed:?}");
    let Error::Timeout { phase, partial, .. } = &err else { panic!("{err:?}") };
    assert_eq!(*phase, "total");
    assert!(partial.as_ref().is_some_and(|p| !p.text().is_empty()), "{partial:?}");
    assert!(elapsed < Duration::from_secs(2), "{elapsed:?}");
}

// ------------------------------------------------------------------------------------------ cancel

/// Sends on this thread while another thread calls cancel() `delay` after the start, or after the first
/// event `trigger` accepts. Returns the result, the instant cancel() was called and the instant send returned.
fn send_and_cancel(
    p: &dyn Provider,
    req: &Request,
    trigger: Option<fn(&StreamEvent) -> bool>,
    delay: Duration,
) -> (tooloop::Result<Response>, Instant, Instant) {
    let cancel = CancelToken::new();
    let cancelled_at: Arc<Mutex<Option<Instant>>> = Arc::new(Mutex::new(None));
    let spawn_canceller = || {
        let cancel = cancel.clone();
        let cancelled_at = Arc::clone(&cancelled_at);
        std::thread::spawn(move || {
            std::thread::sleep(delay);
            *cancelled_at.lock().unwrap() = Some(Instant::now());
            cancel.cancel();
        });
    };
    let mut spawned = false;
    if trigger.is_none() {
        spawn_canceller();
        spawned = true;
    }
    let result = p.send(req, &cancel, &mut |e| {
        if !spawned && trigger.is_some_and(|t| t(&e)) {
            spawned = true;
            spawn_canceller();
        }
    });
    let returned = Instant::now();
    // If the call ended on its own the canceller may still be asleep: the assertions below then report it.
    let deadline = Instant::now() + Duration::from_secs(10);
    let at = loop {
        if let Some(at) = *cancelled_at.lock().unwrap() {
            break at;
        }
        assert!(spawned && Instant::now() < deadline, "cancel never fired; the call returned {result:?}");
        std::thread::sleep(Duration::from_millis(5));
    };
    assert!(at <= returned, "the call returned before cancel(): {result:?}");
    (result, at, returned)
}

#[test]
fn cancel_during_a_stalled_stream_returns_cancelled_promptly_with_the_partial() {
    let mock = MockServer::start(&scenario("anthropic_stream_stall"));
    let p = provider(&mock);
    let (result, at, returned) = send_and_cancel(
        &*p,
        &request(true),
        Some(|e| matches!(e, StreamEvent::TextDelta { .. })),
        Duration::from_millis(200),
    );
    let took = returned.saturating_duration_since(at);
    println!("cancel during a stall: returned {took:?} after cancel()");
    let err = result.unwrap_err();
    let Error::Cancelled { partial } = &err else { panic!("{err:?}") };
    assert_eq!(partial.as_ref().map(|p| p.text()), Some("This tex".into()));
    assert!(took < Duration::from_secs(1), "cancel took {took:?}");
}

#[test]
fn cancel_while_waiting_for_the_response_head_returns_cancelled_promptly() {
    let stalled = json!({"fault": {"type": "stall_headers", "ms": 30000}, "anthropic": text_reply()["anthropic"]});
    let mock = MockServer::start(&json!({"responses": [stalled]}));
    let p = provider(&mock);
    let (result, at, returned) = send_and_cancel(&*p, &request(true), None, Duration::from_millis(300));
    let took = returned.saturating_duration_since(at);
    println!("cancel before the head: returned {took:?} after cancel()");
    let err = result.unwrap_err();
    assert!(matches!(err, Error::Cancelled { partial: None }), "{err:?}");
    assert!(took < Duration::from_secs(1), "cancel took {took:?}");
}

#[test]
fn cancel_during_a_retry_back_off_returns_cancelled_promptly() {
    let mut limited = api_error(429, "rate_limit_error", "slow down");
    limited["headers"] = json!({"retry-after": "20"});
    let mock = MockServer::start(&json!({"responses": [limited, text_reply()]}));
    let p = provider(&mock);
    let (result, at, returned) = send_and_cancel(&*p, &request(false), None, Duration::from_millis(400));
    let took = returned.saturating_duration_since(at);
    println!("cancel during a 20 s retry-after: returned {took:?} after cancel()");
    let err = result.unwrap_err();
    assert!(matches!(err, Error::Cancelled { .. }), "{err:?}");
    assert!(took < Duration::from_secs(1), "cancel took {took:?}");
    assert_eq!(mock.requests().len(), 1, "the retry never went out");
}

#[test]
fn an_already_cancelled_token_sends_nothing() {
    let mock = MockServer::start(&json!({"responses": [text_reply()]}));
    let cancel = CancelToken::new();
    cancel.cancel();
    let err = provider(&mock).send(&request(true), &cancel, &mut |_| {}).unwrap_err();
    assert!(matches!(err, Error::Cancelled { .. }), "{err:?}");
    // A request sent by a background worker would reach the mock a little later: give it the time to.
    std::thread::sleep(Duration::from_millis(300));
    assert_eq!(mock.requests().len(), 0, "a cancelled run must not spend a request");
}

// ------------------------------------------------------------------------------------------ bodies

#[test]
fn malformed_json_body_is_an_invalid_response_carrying_the_request_id() {
    let mock = MockServer::start(&json!({"responses": [
        {"raw": "{\"id\": \"msg_1\", \"type\": \"message\", \"content\": [", "headers": {"request-id": "req_bad_json"}}
    ]}));
    let err = send(&*provider(&mock), &request(false)).0.unwrap_err();
    let Error::InvalidResponse { message, request_id } = &err else { panic!("{err:?}") };
    assert!(message.contains("not JSON"), "{message}");
    assert_eq!(request_id.as_deref(), Some("req_bad_json"));
    assert_eq!(err.request_id(), Some("req_bad_json"));
    assert!(err.to_string().contains("req_bad_json"), "{err}");
    assert_eq!(mock.requests().len(), 1, "a body that arrived whole is not retried");
}

#[test]
fn json_that_is_not_a_message_is_an_invalid_response() {
    let mock = MockServer::start(&json!({"responses": [
        {"json": {"id": "msg_1", "type": "message", "role": "assistant", "content": [{"type": "text", "text": 5}]}}
    ]}));
    let err = send(&*provider(&mock), &request(false)).0.unwrap_err();
    let Error::InvalidResponse { message, request_id } = &err else { panic!("{err:?}") };
    assert!(message.contains("invalid text block"), "{message}");
    assert_eq!(request_id.as_deref(), Some("req_mock_0"));
}

#[test]
fn an_html_error_page_from_a_proxy_becomes_an_api_error_with_its_text() {
    let page = json!({"status": 502, "raw": "<html><body><h1>502 Bad Gateway</h1></body></html>", "content_type": "text/html",
                      "headers": {"x-should-retry": "false"}});
    let mock = MockServer::start(&json!({"responses": [page]}));
    let err = send(&*provider(&mock), &request(false)).0.unwrap_err();
    let api = err.api().unwrap_or_else(|| panic!("{err:?}"));
    assert_eq!((api.kind, api.status, api.error_type.as_str()), (ApiErrorKind::InternalServer, 502, ""));
    assert!(api.message.contains("502 Bad Gateway"), "{api:?}");
}

#[test]
fn openai_errors_go_through_the_same_http_layer() {
    // The same retry policy and error mapping behind the other protocol: 529 → retried → Overloaded.
    let e = json!({"status": 529, "headers": {"retry-after": "0"}, "json": {"error": {"message": "overloaded", "type": "server_error"}}});
    let mock = MockServer::start(&json!({"responses": [e, e, e]}));
    let cfg = ProviderConfig {
        protocol: Protocol::OpenAi,
        api_key: Some(Secret::new("sk-test")),
        base_url: Some(format!("{}/v1", mock.base_url())),
        headers: Vec::new(),
        http: fast_http(),
        ..ProviderConfig::new(Protocol::OpenAi)
    };
    let err = send(&*cfg.build().unwrap(), &request(false)).0.unwrap_err();
    assert_eq!(err.api().map(|a| a.kind), Some(ApiErrorKind::Overloaded), "{err:?}");
    assert_eq!(mock.requests().len(), 3);
    assert_eq!(mock.requests()[0]["path"], "/v1/chat/completions");
    assert_no_secret(&err, "sk-test");
}
