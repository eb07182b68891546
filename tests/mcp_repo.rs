//! What an MCP server from a repository can do to us, against a real server built with the official MCP
//! Python SDK (tests/mcp/hostile_server.py): secrets handed to it or shown by it
//! are redacted, its output is read with bounded memory, its images cannot poison the conversation, its
//! secret headers never follow a redirect to another origin, and its whole process tree ends on close.
//!
//! The Python interpreter comes from TOOLOOP_TEST_PYTHON (see tests/mcp.rs): without the `mcp` package the
//! tests fail when CI=true and are skipped with a printed reason otherwise.
#![allow(clippy::unwrap_used, clippy::expect_used)]

#[path = "common/procs.rs"]
mod procs;
#[path = "common/recorder.rs"]
mod recorder;
#[path = "common/require.rs"]
mod require;

use std::collections::BTreeMap;
use std::net::TcpListener;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::sync::Once;
use std::time::{Duration, Instant};

use recorder::{Recorder, redirect};
use serde_json::{Value, json};
use tooloop::mcp::{McpServerConfig, McpServers, McpState};
use tooloop::types::ToolUseBlock;
use tooloop::{CancelToken, ToolRegistry};

/// The user's own secret, referenced from the server's configuration as `${TOOLOOP_REPO_TEST_SECRET}`.
const USER_SECRET: &str = "user-secret-value-4242-abcdef";
/// What the hostile server puts in its instructions (hostile_server.py).
const LEAKED: &str = "sk-live-hostile-instructions-0123456789";

fn setup() {
    static ONCE: Once = Once::new();
    // SAFETY: set once, before any server of this binary starts; the name is read by no other code.
    ONCE.call_once(|| unsafe {
        std::env::set_var("TOOLOOP_REPO_TEST_SECRET", USER_SECRET);
        std::env::set_var("TOOLOOP_REPO_TEST_API_KEY", USER_SECRET);
    });
}

fn python() -> Option<String> {
    setup();
    require::python_importing(
        "mcp.server.mcpserver, uvicorn",
        "a Python with the official MCP SDK: `python3 -m venv .venv-mcp && .venv-mcp/bin/pip install \
         'mcp>=2.3,<3'`, then TOOLOOP_TEST_PYTHON=.venv-mcp/bin/python (scripts/test.sh does this)",
    )
}

fn script() -> String {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/mcp/hostile_server.py").display().to_string()
}

fn marker(test: &str) -> String {
    format!("tooloop-mcp-repo-{test}-{}", std::process::id())
}

fn hostile(py: &str, m: &str, extra: Value) -> (McpServers, ToolRegistry) {
    let mut v = json!({"command": py, "args": [script(), m]});
    if let (Some(o), Value::Object(e)) = (v.as_object_mut(), extra) {
        o.extend(e);
    }
    let config: McpServerConfig = serde_json::from_value(v).unwrap();
    let registry = ToolRegistry::new();
    let servers = McpServers::start(&BTreeMap::from([("hostile".to_string(), config)]), &registry).unwrap();
    assert!(servers.failures().is_empty(), "{:?}", servers.failures());
    (servers, registry)
}

fn call(registry: &ToolRegistry, name: &str, input: Value) -> (Value, bool) {
    let block = ToolUseBlock { id: "toolu_1".into(), name: name.into(), input, extra: Default::default() };
    let out = registry.execute(&block, &CancelToken::new());
    (out.content, out.is_error)
}

fn text(v: &Value) -> String {
    match v {
        Value::String(s) => s.clone(),
        other => other.to_string(),
    }
}

/// Resident memory of this process, in bytes.
fn rss() -> u64 {
    let status = std::fs::read_to_string("/proc/self/status").unwrap();
    let kb: u64 = status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .unwrap();
    kb * 1024
}

#[test]
fn values_expanded_into_env_and_secrets_in_descriptions_and_instructions_are_redacted() {
    let Some(py) = python() else { return };
    let m = marker("redact");
    // Neither name looks secret: only the expansion from the user's variable makes the value one.
    let env = json!({"env": {"SERVER_TOKEN": "${TOOLOOP_REPO_TEST_SECRET}", "PLAIN": "x-${TOOLOOP_REPO_TEST_SECRET}"}});
    let (servers, registry) = hostile(&py, &m, env);
    for var in ["SERVER_TOKEN", "PLAIN"] {
        let (out, is_error) = call(&registry, "mcp__hostile__env_value", json!({"name": var}));
        assert!(!is_error, "{out}");
        assert!(!text(&out).contains(USER_SECRET), "{var} came back: {out}");
        assert!(text(&out).contains("[redacted]"), "{out}");
    }
    // The server put the token it was given into a tool description, and a key of its own into its
    // instructions: neither reaches the model, and the key is redacted from results too.
    let leaky = registry.get("mcp__hostile__leaky").unwrap();
    assert!(!leaky.spec.description.contains(USER_SECRET), "{}", leaky.spec.description);
    assert!(leaky.spec.description.contains("[redacted]"), "{}", leaky.spec.description);
    let instructions = servers.instructions();
    assert!(instructions.contains("DEPLOY_API_KEY=[redacted]") && !instructions.contains(LEAKED), "{instructions}");
    let (out, _) = call(&registry, "mcp__hostile__leaky", json!({}));
    assert_eq!(text(&out), "the key is [redacted]");
    drop(servers);
}

#[test]
fn a_server_does_not_inherit_the_hosts_secrets_unless_its_env_names_them() {
    let Some(py) = python() else { return };
    let m = marker("inherit");
    // Approved for `python3 server.py` with no env shown, a server silently got every key of the host.
    let (servers, registry) = hostile(&py, &m, json!({}));
    let (out, is_error) = call(&registry, "mcp__hostile__env_value", json!({"name": "TOOLOOP_REPO_TEST_API_KEY"}));
    assert!(!is_error, "{out}");
    assert_eq!(text(&out), "", "a secret-named variable of the host reached the server");
    let (out, _) = call(&registry, "mcp__hostile__env_value", json!({"name": "TOOLOOP_REPO_TEST_SECRET"}));
    assert_eq!(text(&out), "", "a secret-named variable of the host reached the server");
    let (out, _) = call(&registry, "mcp__hostile__env_value", json!({"name": "PATH"}));
    assert!(!text(&out).is_empty(), "ordinary variables are inherited");
    drop(servers);
    // Named in its env, the key is handed over (and redacted from what comes back).
    let env = json!({"env": {"TOOLOOP_REPO_TEST_API_KEY": "${TOOLOOP_REPO_TEST_API_KEY}"}});
    let (servers, registry) = hostile(&py, &m, env);
    let (out, _) = call(&registry, "mcp__hostile__env_value", json!({"name": "TOOLOOP_REPO_TEST_API_KEY"}));
    assert_eq!(text(&out), "[redacted]");
    drop(servers);
}

#[test]
fn a_stderr_flood_without_newline_is_read_with_bounded_memory() {
    let Some(py) = python() else { return };
    let m = marker("stderr");
    let (servers, registry) = hostile(&py, &m, json!({}));
    let before = rss();
    let (out, is_error) = call(&registry, "mcp__hostile__stderr_flood", json!({"mib": 200}));
    assert!(!is_error && text(&out) == "flooded", "{out}");
    // The server ends the flood with a line of its own: once the log shows it, the pipe is drained.
    let deadline = Instant::now() + Duration::from_secs(20);
    while !servers.status()[0].log_tail.contains("flood over") {
        assert!(Instant::now() < deadline, "the end of the flood never reached the log");
        std::thread::sleep(Duration::from_millis(10));
    }
    let grown = rss().saturating_sub(before);
    assert!(grown < 64 * 1024 * 1024, "200 MiB of stderr grew memory by {} MiB", grown / (1024 * 1024));
    let tail = &servers.status()[0].log_tail;
    assert!(tail.len() < 10_000, "the log keeps a bounded line: {} bytes", tail.len());
    drop(servers);
}

#[test]
fn results_are_capped_and_an_image_over_the_api_limit_is_an_error_result() {
    let Some(py) = python() else { return };
    let m = marker("caps");
    let (servers, registry) = hostile(&py, &m, json!({}));
    let (out, is_error) = call(&registry, "mcp__hostile__big_text", json!({"size": 3_000_000}));
    assert!(!is_error);
    assert!(text(&out).len() < 200_000 && text(&out).contains("truncated"), "{} bytes", text(&out).len());
    // 6 MB of PNG is 8 MB of base64: over the API's 5 MB; a small one still passes as an image.
    let (out, is_error) = call(&registry, "mcp__hostile__big_image", json!({"size": 6_000_000}));
    assert!(is_error, "an oversized image is an error result");
    assert!(text(&out).contains("over the") && text(&out).len() < 2000, "{}", &text(&out)[..text(&out).len().min(300)]);
    let (out, is_error) = call(&registry, "mcp__hostile__big_image", json!({"size": 1000}));
    assert!(!is_error && out[0]["type"] == "image", "{}", &out.to_string()[..100.min(out.to_string().len())]);
    drop(servers);
}

#[test]
fn a_setsid_child_of_the_server_ends_on_close() {
    let Some(py) = python() else { return };
    let m = marker("setsid");
    let detached = format!("{m}-detached");
    let (servers, registry) = hostile(&py, &m, json!({}));
    let (out, is_error) = call(&registry, "mcp__hostile__spawn_detached", json!({"marker": detached}));
    assert!(!is_error, "{out}");
    let deadline = Instant::now() + Duration::from_secs(5);
    while procs::with(&detached).is_empty() && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(20));
    }
    let escaped = procs::with(&detached);
    assert_eq!(escaped.len(), 1, "the detached process runs");
    servers.close();
    let deadline = Instant::now() + Duration::from_secs(3);
    while !procs::with(&detached).is_empty() && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(20));
    }
    let left = procs::with(&detached);
    for pid in &left {
        // Clean up after a failure (our own process, by pid).
        let _ = nix::sys::signal::kill(nix::unistd::Pid::from_raw(*pid as i32), nix::sys::signal::Signal::SIGKILL);
    }
    if tooloop::builtin::process_containment() {
        assert!(left.is_empty(), "the setsid child survived close()");
    } else {
        eprintln!("no PID namespace here: only the process group is ended (the README says so)");
    }
    assert!(procs::with(&m).is_empty(), "the server ended");
}

/// The SDK server over Streamable HTTP on `host`, stopped by pid on drop.
struct HttpServer {
    child: Child,
    port: u16,
}

impl HttpServer {
    fn start(py: &str, host: &str, m: &str) -> HttpServer {
        let port = TcpListener::bind((host, 0)).unwrap().local_addr().unwrap().port();
        let child = Command::new(py)
            .args([&script(), "http", host, &port.to_string(), m])
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        let deadline = Instant::now() + Duration::from_secs(20);
        while std::net::TcpStream::connect((host, port)).is_err() {
            assert!(Instant::now() < deadline, "the HTTP MCP server did not start");
            std::thread::sleep(Duration::from_millis(50));
        }
        HttpServer { child, port }
    }
}

impl Drop for HttpServer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

#[test]
fn http_secret_headers_do_not_follow_a_redirect_to_another_origin() {
    let Some(py) = python() else { return };
    let m = marker("redirect");
    // The real server listens on 127.0.0.2: loopback, but another origin than the redirecting 127.0.0.1.
    let server = HttpServer::start(&py, "127.0.0.2", &m);
    let target = format!("http://127.0.0.2:{}/mcp", server.port);
    let redirector = Recorder::start("127.0.0.1", move |_| redirect(307, &target));
    let port = redirector.port;
    let config: McpServerConfig = serde_json::from_value(json!({
        "type": "http", "url": format!("http://127.0.0.1:{port}/mcp"),
        "headers": {"Authorization": "Bearer ${TOOLOOP_REPO_TEST_SECRET}", "X-Custom": "custom-secret-value-1"}
    }))
    .unwrap();
    let registry = ToolRegistry::new();
    let servers = McpServers::start(&BTreeMap::from([("web".to_string(), config)]), &registry).unwrap();
    let failures = servers.failures();
    assert_eq!(failures.len(), 1, "the server behind the redirect is not reached");
    assert!(failures[0].reason.contains("another origin"), "{}", failures[0].reason);
    assert!(!failures[0].reason.contains(USER_SECRET), "{}", failures[0].reason);
    assert!(registry.names().is_empty());
    assert!(redirector.heads()[0].contains(USER_SECRET), "the first server did get the header it was configured for");
    // The same server reached directly works: the refusal is the redirect's doing.
    let direct: McpServerConfig =
        serde_json::from_value(json!({"type": "http", "url": format!("http://127.0.0.2:{}/mcp", server.port)}))
            .unwrap();
    let servers = McpServers::start(&BTreeMap::from([("web".to_string(), direct)]), &registry).unwrap();
    assert!(servers.failures().is_empty(), "{:?}", servers.failures());
    drop(servers);
    drop(server);
}

#[test]
fn an_http_event_over_the_limit_is_an_error_not_a_memory_hog() {
    let Some(py) = python() else { return };
    let m = marker("sse");
    let server = HttpServer::start(&py, "127.0.0.1", &m);
    let config: McpServerConfig =
        serde_json::from_value(json!({"type": "http", "url": format!("http://127.0.0.1:{}/mcp", server.port)}))
            .unwrap();
    let registry = ToolRegistry::new();
    let servers = McpServers::start(&BTreeMap::from([("web".to_string(), config)]), &registry).unwrap();
    assert!(servers.failures().is_empty(), "{:?}", servers.failures());
    let size = 33 * 1024 * 1024; // over tooloop::mcp::conn::MAX_MESSAGE_BYTES (32 MiB)
    let (out, is_error) = call(&registry, "mcp__web__big_text", json!({"size": size}));
    assert!(is_error, "an answer over the limit is an error");
    assert!(text(&out).contains("more than"), "{}", &text(&out)[..text(&out).len().min(300)]);
    drop(servers);
    drop(server);
}

fn sha256_hex(bytes: &[u8]) -> String {
    ring::digest::digest(&ring::digest::SHA256, bytes).as_ref().iter().map(|b| format!("{b:02x}")).collect()
}

#[test]
fn a_pinned_server_whose_code_changed_is_not_restarted() {
    let Some(py) = python() else { return };
    let m = marker("pinned");
    let dir = std::env::temp_dir().join(format!("tooloop-mcp-pin-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let server = dir.join("server.py");
    let code =
        format!("import runpy, sys\nsys.argv[1:] = [{m:?}]\nrunpy.run_path({:?}, run_name='__main__')\n", script());
    std::fs::write(&server, &code).unwrap();
    let path = server.display().to_string();
    let config: McpServerConfig = serde_json::from_value(json!({
        "command": py, "args": [path, m], "pinned_files": {path.clone(): sha256_hex(code.as_bytes())}
    }))
    .unwrap();
    let registry = ToolRegistry::new();
    let servers = McpServers::start(&BTreeMap::from([("pinned".to_string(), config.clone())]), &registry).unwrap();
    assert!(servers.failures().is_empty(), "{:?}", servers.failures());
    let (out, is_error) = call(&registry, "mcp__pinned__env_value", json!({"name": "NOPE"}));
    assert!(!is_error, "{out}");
    // The code is rewritten (as bash could), then the server dies: the restart must not run the new code.
    std::fs::write(&server, format!("{code}# rewritten\n")).unwrap();
    let pid = servers.server_pid("pinned").unwrap();
    nix::sys::signal::kill(nix::unistd::Pid::from_raw(pid as i32), nix::sys::signal::Signal::SIGKILL).unwrap();
    let deadline = Instant::now() + Duration::from_secs(10);
    while servers.status()[0].state == McpState::Connected {
        assert!(Instant::now() < deadline, "the server's death was never noticed");
        std::thread::sleep(Duration::from_millis(10));
    }
    let (out, is_error) = call(&registry, "mcp__pinned__env_value", json!({"name": "NOPE"}));
    assert!(is_error && text(&out).contains("changed since the server was approved"), "{out}");
    drop(servers);
    // A fresh start with the stale pin is refused too, by name.
    let servers = McpServers::start(&BTreeMap::from([("pinned".to_string(), config)]), &registry).unwrap();
    assert!(servers.failures()[0].reason.contains("changed since"), "{:?}", servers.failures());
    drop(servers);
    let _ = std::fs::remove_dir_all(&dir);
}
