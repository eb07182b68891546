//! Helpers shared by the wire-layer tests (tests/wire_*.rs): a provider config pointed at the mock server,
//! and a send that collects the stream events. Included with `#[path]`.
#![allow(dead_code)]

use std::time::Duration;

use serde_json::Value;
use tooloop::http::HttpConfig;
use tooloop::provider::{Protocol, Provider, ProviderConfig, Response, Secret, StreamEvent};
use tooloop::{CancelToken, Request};

/// Default timeouts with a fast back-off, so retry paths cost milliseconds.
pub fn fast_http() -> HttpConfig {
    HttpConfig {
        initial_backoff: Duration::from_millis(10),
        max_backoff: Duration::from_millis(50),
        ..HttpConfig::default()
    }
}

/// A config for `protocol` at `base_url` with the test key `sk-test`.
pub fn provider_config(protocol: Protocol, base_url: String, http: HttpConfig) -> ProviderConfig {
    ProviderConfig {
        protocol,
        api_key: Some(Secret::new("sk-test")),
        base_url: Some(base_url),
        headers: Vec::new(),
        http,
        ..ProviderConfig::new(protocol)
    }
}

/// Send `req`, collecting every event.
pub fn send(p: &dyn Provider, req: &Request) -> (tooloop::Result<Response>, Vec<StreamEvent>) {
    let mut events = Vec::new();
    let result = p.send(req, &CancelToken::new(), &mut |e| events.push(e));
    (result, events)
}

/// `responses[index]` of a shared scenario file.
pub fn response_of(name: &str, index: usize) -> Value {
    crate::mock::scenario(name)["responses"][index].clone()
}
