//! The shared mock server (`tests/mock/mockserver.py`) driven from Rust integration tests.
//!
//! Include it with `#[path = "common/mock.rs"] mod mock;` (or from `tests/common/mod.rs`). It needs only
//! std and `serde_json`, and talks to the control endpoints with a hand-written HTTP/1.0 request, so a bug
//! in the client under test cannot hide itself from the assertions that use it. The scenario format is
//! documented in `tests/mock/README.md`.
//!
//! ```ignore
//! let mock = MockServer::start(&scenario("anthropic_text"));
//! let client = Client::new(&mock.base_url());
//! ...
//! assert_eq!(mock.requests()[0]["body"]["stream"], true);
//! ```
//!
//! The interpreter is `python3`, or `$TOOLOOP_MOCK_PYTHON`; `TOOLOOP_MOCK_VERBOSE=1` makes the server log
//! each request to stderr. Panics with a message on any failure: this is test-only code.
#![allow(dead_code)]

use serde_json::{Value, json};
use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

/// One `mockserver.py` child process, killed (by its pid) and reaped on drop.
pub struct MockServer {
    child: Child,
    port: u16,
}

impl MockServer {
    /// Starts a server with `scenario` (`{"responses": [...]}`), passed on its stdin.
    pub fn start(scenario: &Value) -> MockServer {
        let mut child = spawn(&["-".as_ref()], Stdio::piped());
        if let Some(mut stdin) = child.stdin.take() {
            // Dropping stdin closes it: the server reads the scenario up to EOF.
            if let Err(e) = stdin.write_all(scenario.to_string().as_bytes()) {
                reap(&mut child);
                panic!("mock: cannot send the scenario to mockserver.py: {e}");
            }
        }
        MockServer::wait_ready(child)
    }

    /// Starts a server with the scenario file at `path`.
    pub fn start_file(path: impl AsRef<Path>) -> MockServer {
        MockServer::wait_ready(spawn(&[path.as_ref().as_os_str()], Stdio::null()))
    }

    fn wait_ready(mut child: Child) -> MockServer {
        let mut line = String::new();
        if let Some(stdout) = child.stdout.take() {
            // The server prints nothing after this line, so the pipe can be dropped with the reader.
            let _ = BufReader::new(stdout).read_line(&mut line);
        }
        match line.strip_prefix("PORT ").and_then(|p| p.trim().parse::<u16>().ok()) {
            Some(port) => MockServer { child, port },
            None => {
                reap(&mut child);
                panic!("mock: mockserver.py did not start (said {line:?}; its stderr says why)");
            }
        }
    }

    /// `http://127.0.0.1:PORT`, without a trailing slash (OpenAI-style clients append `/v1`).
    pub fn base_url(&self) -> String {
        format!("http://127.0.0.1:{}", self.port)
    }

    pub fn port(&self) -> u16 {
        self.port
    }

    /// Every non-control request so far, in arrival order: `{"index", "method", "path", "query",
    /// "headers" (lower-case names), "body" (parsed JSON or null), "raw_body"}`.
    pub fn requests(&self) -> Vec<Value> {
        match self.control("GET", "requests", None) {
            Value::Array(requests) => requests,
            other => panic!("mock: /_mock/requests returned {other}"),
        }
    }

    /// Replaces the response queue and clears the recorded requests.
    pub fn load(&self, scenario: &Value) {
        self.control("POST", "scenario", Some(scenario));
    }

    fn control(&self, method: &str, name: &str, body: Option<&Value>) -> Value {
        let what = format!("{method} /_mock/{name}");
        let fail = |e: &dyn std::fmt::Display| -> ! { panic!("mock: {what}: {e}") };
        let payload = body.map(Value::to_string).unwrap_or_default();
        let request = format!(
            "{method} /_mock/{name} HTTP/1.0\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n\
             Content-Length: {}\r\n\r\n{payload}",
            payload.len()
        );
        let mut stream = TcpStream::connect(("127.0.0.1", self.port)).unwrap_or_else(|e| fail(&e));
        let _ = stream.set_read_timeout(Some(Duration::from_secs(10)));
        stream.write_all(request.as_bytes()).unwrap_or_else(|e| fail(&e));
        // HTTP/1.0 without keep-alive: the server closes after the response, so read to EOF.
        let mut response = Vec::new();
        stream.read_to_end(&mut response).unwrap_or_else(|e| fail(&e));
        let text = String::from_utf8_lossy(&response);
        let (head, body) = text.split_once("\r\n\r\n").unwrap_or_else(|| fail(&"no end of headers"));
        if head.split(' ').nth(1) != Some("200") {
            fail(&format!("{head} {body}"));
        }
        serde_json::from_str(body).unwrap_or_else(|e| fail(&e))
    }
}

impl Drop for MockServer {
    fn drop(&mut self) {
        reap(&mut self.child);
    }
}

/// The scenario `tests/scenarios/<name>.json`.
pub fn scenario(name: &str) -> Value {
    let path = repo_file(&format!("tests/scenarios/{name}.json"));
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("mock: {}: {e}", path.display()));
    serde_json::from_str(&text).unwrap_or_else(|e| panic!("mock: {}: {e}", path.display()))
}

/// `rel` under CARGO_MANIFEST_DIR or the nearest ancestor holding it, so crates under `bindings/` can use
/// this module too.
fn repo_file(rel: &str) -> PathBuf {
    let manifest = Path::new(env!("CARGO_MANIFEST_DIR"));
    manifest
        .ancestors()
        .map(|dir| dir.join(rel))
        .find(|path| path.exists())
        .unwrap_or_else(|| panic!("mock: no {rel} in {} or above", manifest.display()))
}

fn spawn(args: &[&std::ffi::OsStr], stdin: Stdio) -> Child {
    let python = std::env::var("TOOLOOP_MOCK_PYTHON").unwrap_or_else(|_| "python3".to_owned());
    Command::new(&python)
        .arg(repo_file("tests/mock/mockserver.py"))
        .args(args)
        .stdin(stdin)
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .unwrap_or_else(|e| panic!("mock: cannot run {python}: {e}"))
}

fn reap(child: &mut Child) {
    // Child::kill signals exactly this pid; wait() reaps it so no zombie outlives the test.
    let _ = child.kill();
    let _ = child.wait();
}

/// A scripted Messages-API model: each step is one turn, either a tool call `{"name", "input"}` or the final
/// text (a string); the call ids are `toolu_00`, `toolu_01`, ... by step.
pub fn scripted(description: &str, steps: &[Value]) -> Value {
    let responses: Vec<Value> = steps
        .iter()
        .enumerate()
        .map(|(i, step)| {
            let (content, stop) = match step {
                Value::String(text) => (json!([{"type": "text", "text": text}]), "end_turn"),
                call => (
                    json!([{"type": "tool_use", "id": format!("toolu_{i:02}"), "name": call["name"],
                            "input": call["input"]}]),
                    "tool_use",
                ),
            };
            json!({"anthropic": {"id": format!("msg_{i:02}"), "type": "message", "role": "assistant",
                "model": "claude-sonnet-4-6", "content": content, "stop_reason": stop, "stop_sequence": null,
                "usage": {"input_tokens": 100, "output_tokens": 10}}})
        })
        .collect();
    json!({"description": description, "responses": responses})
}
