//! Configuration a cloned repository brings cannot redirect credentials (issue 20, items 11 and 14): the
//! Bedrock region is validated before it becomes part of a host name, and secret headers never follow a
//! redirect to another origin (model providers and MCP over HTTP alike).
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::result_large_err)]

use std::io::{Read, Write};
use std::net::TcpListener;
use std::sync::{Arc, Mutex};
use std::time::Duration;

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
