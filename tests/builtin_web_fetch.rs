//! The `web_fetch` tool against local HTTP servers on 127.0.0.1: HTML turned into text (scripts and
//! styles dropped), redirects to another origin followed without credentials, huge pages capped, and
//! the refusals (network off, link-local and metadata addresses, credentials in URLs).
#![allow(clippy::unwrap_used, clippy::expect_used)]

use serde_json::{Value, json};
use std::io::{BufRead, BufReader, Write};
use std::net::TcpListener;
use std::sync::{Arc, Mutex};
use std::thread;
use tooloop::builtin::{self, BuiltinOptions, SandboxMode};
use tooloop::cancel::CancelToken;
use tooloop::tools::{ToolContext, ToolError, ToolOutput, ToolRegistry};
use tooloop::types::ToolUseBlock;

fn registry(network: bool) -> ToolRegistry {
    let registry = ToolRegistry::new();
    let opts = BuiltinOptions {
        workspace: std::env::temp_dir(),
        sandbox: SandboxMode::Off,
        network,
        names: vec!["web_fetch".into()],
        ..BuiltinOptions::default()
    };
    builtin::register(&registry, &opts).unwrap();
    registry
}

fn fetch(registry: &ToolRegistry, url: &str) -> Result<String, String> {
    let tool = registry.get("web_fetch").unwrap();
    let cancel = CancelToken::new();
    let ctx = ToolContext { tool_use_id: "t1", tool_name: "web_fetch", cancel: &cancel, read_only: false };
    match tool.handler.call(&json!({"url": url}), &ctx) {
        Ok(ToolOutput::Text(text)) => Ok(text),
        Ok(other) => panic!("unexpected output {other:?}"),
        Err(ToolError::Respond(text)) | Err(ToolError::Fatal(text)) => Err(text),
    }
}

/// A server answering `count` requests with `respond(request head)`, recording each request head.
struct Server {
    port: u16,
    seen: Arc<Mutex<Vec<String>>>,
    thread: Option<thread::JoinHandle<()>>,
}

impl Server {
    fn start(count: usize, respond: impl Fn(&str) -> Vec<u8> + Send + 'static) -> Server {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let port = listener.local_addr().unwrap().port();
        let seen = Arc::new(Mutex::new(Vec::new()));
        let log = Arc::clone(&seen);
        let thread = thread::spawn(move || {
            for _ in 0..count {
                let Ok((stream, _)) = listener.accept() else { return };
                let mut reader = BufReader::new(stream.try_clone().unwrap());
                let mut head = String::new();
                loop {
                    let mut line = String::new();
                    if reader.read_line(&mut line).unwrap_or(0) == 0 || line == "\r\n" {
                        break;
                    }
                    head.push_str(&line);
                }
                log.lock().unwrap().push(head.clone());
                let mut stream = stream;
                let _ = stream.write_all(&respond(&head));
                let _ = stream.flush();
            }
        });
        Server { port, seen, thread: Some(thread) }
    }

    fn url(&self, path: &str) -> String {
        format!("http://127.0.0.1:{}{path}", self.port)
    }

    /// The recorded request heads, once the server has answered all its requests.
    fn finish(mut self) -> Vec<String> {
        self.thread.take().unwrap().join().unwrap();
        self.seen.lock().unwrap().clone()
    }
}

fn response(status: &str, headers: &[(&str, &str)], body: &[u8]) -> Vec<u8> {
    let mut out = format!("HTTP/1.1 {status}\r\nContent-Length: {}\r\nConnection: close\r\n", body.len());
    for (k, v) in headers {
        out.push_str(&format!("{k}: {v}\r\n"));
    }
    out.push_str("\r\n");
    let mut bytes = out.into_bytes();
    bytes.extend_from_slice(body);
    bytes
}

const PAGE: &str = r#"<!doctype html><html><head><title>T</title>
<style>.secret-style { color: red }</script></style>
<script>var secretScript = "do not show";</script></head>
<body><h1>Main Title</h1><p>Hello <b>world</b>, see <a href="/docs">the docs</a>.</p>
<ul><li>first item</li><li>second item</li></ul></body></html>"#;

#[test]
fn html_becomes_readable_text_without_scripts_or_styles() {
    let server =
        Server::start(1, |_| response("200 OK", &[("Content-Type", "text/html; charset=utf-8")], PAGE.as_bytes()));
    let out = fetch(&registry(true), &server.url("/page")).unwrap();
    for want in ["Main Title", "Hello", "world", "the docs", "first item", "second item"] {
        assert!(out.contains(want), "{want} missing in {out}");
    }
    for unwanted in ["secretScript", "do not show", "secret-style", "<p>", "<h1>"] {
        assert!(!out.contains(unwanted), "{unwanted} in {out}");
    }
    let heads = server.finish();
    assert!(heads[0].starts_with("GET /page HTTP/1.1"), "{}", heads[0]);
}

#[test]
fn a_redirect_to_another_origin_is_followed_without_credentials() {
    let target = Server::start(1, |_| response("200 OK", &[("Content-Type", "text/plain")], b"arrived"));
    // Another origin: a different port (and host name) than the first server.
    let location = format!("http://localhost:{}/final", target.port);
    let first = Server::start(1, move |_| {
        response("302 Found", &[("Location", &location), ("Set-Cookie", "session=abc123secret")], b"")
    });
    let out = fetch(&registry(true), &first.url("/start")).unwrap();
    assert!(out.contains("arrived"), "{out}");
    assert!(out.contains("another origin"), "{out}");
    let heads: Vec<String> = first.finish().into_iter().chain(target.finish()).collect();
    assert_eq!(heads.len(), 2);
    for head in &heads {
        let lower = head.to_ascii_lowercase();
        assert!(!lower.contains("authorization:") && !lower.contains("cookie:"), "{head}");
        assert!(!lower.contains("abc123secret"), "{head}");
    }
}

#[test]
fn urls_with_credentials_are_refused_first_or_after_a_redirect() {
    let err = fetch(&registry(true), "http://user:hunter2@127.0.0.1:9/").unwrap_err();
    assert!(err.contains("user name or password"), "{err}");
    let first = Server::start(1, |_| response("301 Moved", &[("Location", "http://me:pw@127.0.0.1:9/x")], b""));
    let err = fetch(&registry(true), &first.url("/")).unwrap_err();
    assert!(err.contains("user name or password"), "{err}");
    first.finish();
}

#[test]
fn redirects_are_limited() {
    // Every request is sent back to the same server: the sixth redirect is refused.
    let server = Server::start(6, move |head| {
        let n: u32 = head.split_whitespace().nth(1).and_then(|p| p.trim_start_matches("/r").parse().ok()).unwrap_or(0);
        response("302 Found", &[("Location", &format!("/r{}", n + 1))], b"")
    });
    let err = fetch(&registry(true), &server.url("/r0")).unwrap_err();
    assert!(err.contains("stopped after 5 redirects"), "{err}");
    assert_eq!(server.finish().len(), 6);
}

#[test]
fn a_huge_page_is_capped() {
    let body = format!("<html><body><p>{}</p></body></html>", "word ".repeat(2_000_000)); // 10 MB
    let server = Server::start(1, move |_| response("200 OK", &[("Content-Type", "text/html")], body.as_bytes()));
    let out = fetch(&registry(true), &server.url("/huge")).unwrap();
    assert!(out.contains("download stopped at 5 MB"), "{}", &out[out.len() - 300..]);
    assert!(out.contains("more characters not shown"), "{}", &out[out.len() - 300..]);
    assert!(out.chars().count() < builtin::FETCH_OUTPUT_CAP_CHARS + 500);
    drop(server); // it may still be writing the rest: not joined
}

#[test]
fn network_off_refuses_even_loopback() {
    let err = fetch(&registry(false), "http://127.0.0.1:9/").unwrap_err();
    assert!(err.contains("network access is off"), "{err}");
}

#[test]
fn link_local_and_metadata_addresses_are_never_fetched() {
    let r = registry(true);
    for url in [
        "http://169.254.169.254/latest/meta-data/",
        "http://[fd00:ec2::254]/latest/meta-data/",
        "http://[fe80::1]/",
        "http://[::ffff:169.254.169.254]/",
        "http://metadata.google.internal/computeMetadata/v1/",
    ] {
        let err = fetch(&r, url).unwrap_err();
        assert!(err.contains("metadata"), "{url}: {err}");
    }
    let first = Server::start(1, |_| response("302 Found", &[("Location", "http://169.254.169.254/")], b""));
    let err = fetch(&r, &first.url("/")).unwrap_err();
    assert!(err.contains("169.254.169.254") && err.contains("never fetched"), "{err}");
    first.finish();
    let err = fetch(&r, "file:///etc/passwd").unwrap_err();
    assert!(err.contains("only fetches http and https"), "{err}");
}

#[test]
fn an_error_status_is_an_error_result_with_the_text() {
    let server = Server::start(1, |_| response("404 Not Found", &[("Content-Type", "text/plain")], b"no such page"));
    let err = fetch(&registry(true), &server.url("/missing")).unwrap_err();
    assert!(err.contains("HTTP status 404") && err.contains("no such page"), "{err}");
    server.finish();
}

#[test]
fn the_result_is_redacted_like_every_result() {
    let server =
        Server::start(1, |_| response("200 OK", &[("Content-Type", "text/plain")], b"key=sk-test-0123456789abcdef"));
    let r = registry(true);
    r.add_secrets(["sk-test-0123456789abcdef".to_string()]);
    let call: ToolUseBlock =
        serde_json::from_value(json!({"id": "t1", "name": "web_fetch", "input": {"url": server.url("/")}})).unwrap();
    let outcome = r.execute(&call, &CancelToken::new());
    let text = match &outcome.content {
        Value::String(s) => s.clone(),
        other => other.to_string(),
    };
    assert!(text.contains("key=[redacted]") && !text.contains("0123456789abcdef"), "{text}");
    server.finish();
}
