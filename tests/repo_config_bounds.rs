//! Configuration a cloned repository brings cannot redirect credentials: the
//! Bedrock region is validated before it becomes part of a host name, and secret headers never follow a
//! redirect to another origin (model providers and MCP over HTTP alike).
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::result_large_err)]

#[path = "common/recorder.rs"]
mod recorder;

use std::net::TcpListener;

use recorder::{Recorder, redirect};

use tooloop::Error;
use tooloop::provider::{AwsCredentials, Protocol, ProviderConfig};

fn bedrock(region: &str) -> ProviderConfig {
    ProviderConfig {
        region: Some(region.into()),
        aws_credentials: Some(AwsCredentials::new(
            "AKIDEXAMPLE000000001",
            "secretsecretsecret",
            Some("sessiontoken00".into()),
        )),
        ..ProviderConfig::new(Protocol::Bedrock)
    }
}

#[test]
fn a_bedrock_region_that_is_not_a_region_is_refused_before_any_request() {
    // Today `@127.0.0.1:PORT/x` makes the endpoint https://bedrock-runtime.@127.0.0.1:PORT/x.amazonaws.com.
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    for bad in [
        format!("@127.0.0.1:{port}/x"),
        "us-west-2.evil.example".into(),
        "us-west-2/".into(),
        "US-WEST-2".into(),
        "".into(),
        "us-west-2 ".into(),
        "-us-west-2".into(),
        "x".repeat(40),
    ] {
        match bedrock(&bad).build_bedrock() {
            Err(Error::Config(m)) => {
                assert!(m.contains("region") || m.contains("AWS_REGION"), "{bad:?}: {m}")
            }
            other => panic!("{bad:?} accepted: {:?}", other.map(|p| p.region().to_string())),
        }
    }
    for good in ["us-west-2", "eu-central-1", "us-gov-west-1", "ap-southeast-3", "cn-north-1", "il-central-1"] {
        assert_eq!(bedrock(good).build_bedrock().unwrap().region(), good);
    }
}

const KEY: &str = "sk-ant-redirect-secret-0001";
const CUSTOM: &str = "custom-header-secret-0002";

fn anthropic_at(base: String) -> std::sync::Arc<dyn tooloop::provider::Provider> {
    let mut config = ProviderConfig::new(Protocol::Anthropic);
    config.api_key = Some(tooloop::provider::Secret::new(KEY));
    config.base_url = Some(base);
    config.headers = vec![("X-Custom-Auth".into(), CUSTOM.into())];
    config.http.max_retries = 0;
    config.build().unwrap()
}

fn send(p: &dyn tooloop::provider::Provider) -> tooloop::Result<tooloop::provider::Response> {
    let req = tooloop::Request {
        model: "claude-x".into(),
        max_tokens: 16,
        messages: vec![tooloop::Message::user("hi")].into(),
        ..Default::default()
    };
    p.send(&req, &tooloop::CancelToken::new(), &mut |_| {})
}

#[test]
fn provider_secret_headers_do_not_follow_a_redirect_to_another_origin() {
    // 127.0.0.2 is loopback too, but another origin than 127.0.0.1.
    let other = Recorder::start("127.0.0.2", |_| "HTTP/1.1 500 No\r\nContent-Length: 0\r\n\r\n".into());
    for status in [302, 307, 308] {
        let target = format!("http://127.0.0.2:{}/v1/messages", other.port);
        let first = Recorder::start("127.0.0.1", move |_| redirect(status, &target));
        let err = send(&*anthropic_at(format!("http://127.0.0.1:{}", first.port))).unwrap_err();
        assert!(
            matches!(&err, Error::InvalidResponse { message, .. } if message.contains("another origin")),
            "{status}: {err:?}"
        );
        assert!(!err.to_string().contains(KEY), "{err}");
        assert_eq!(first.heads().len(), 1, "the first server got the request");
        assert!(first.heads()[0].to_ascii_lowercase().contains("x-api-key"), "with its key");
    }
    let leaked = other.heads();
    assert!(
        leaked.iter().all(|h| !h.contains(KEY) && !h.contains(CUSTOM)),
        "secrets followed the redirect: {leaked:?}"
    );
    assert!(leaked.is_empty(), "nothing is sent to the other origin: {leaked:?}");
}

#[test]
fn a_same_origin_307_is_followed_with_the_key() {
    let ok = r#"{"id":"msg_1","type":"message","role":"assistant","model":"claude-x","content":[{"type":"text","text":"moved"}],"stop_reason":"end_turn","stop_sequence":null,"usage":{"input_tokens":1,"output_tokens":1}}"#;
    let server = Recorder::start("127.0.0.1", move |path| {
        if path.starts_with("/old") {
            redirect(307, "/new/v1/messages")
        } else {
            format!("HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\r\n{ok}", ok.len())
        }
    });
    let response = send(&*anthropic_at(format!("http://127.0.0.1:{}/old", server.port))).unwrap();
    assert_eq!(response.message.content.len(), 1);
    let heads = server.heads();
    assert_eq!(heads.len(), 2, "{heads:?}");
    assert!(heads[1].starts_with("POST /new/v1/messages") && heads[1].contains(KEY), "{:?}", heads[1]);
}
