//! MCP client against real servers: the official MCP Python SDK (MCPServer, formerly FastMCP, and its
//! low-level Server) over stdio and Streamable HTTP, plus a hand-written misbehaving server.
//!
//! The Python interpreter comes from TOOLOOP_TEST_PYTHON (default `python3`) and needs the `mcp` package
//! (`pip install 'mcp>=2.3,<3'`; scripts/test.sh prepares one). Without it the tests fail when CI=true and
//! are skipped with a printed reason otherwise. Every process a test starts is stopped, checked by pid.
#![allow(clippy::unwrap_used, clippy::expect_used)]

#[path = "common/procs.rs"]
mod procs;
#[path = "common/require.rs"]
mod require;

use std::collections::BTreeMap;
use std::net::TcpListener;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

use serde_json::{Value, json};
use tooloop::mcp::{McpServerConfig, McpServers, McpState};
use tooloop::provider::ScriptedProvider;
use tooloop::tools::check_name;
use tooloop::types::ToolUseBlock;
use tooloop::{Agent, AgentConfig, CancelToken, MessageResponse, ToolRegistry};

fn python() -> Option<String> {
    require::python_importing(
        "mcp.server.mcpserver, uvicorn",
        "a Python with the official MCP SDK: `python3 -m venv .venv-mcp && .venv-mcp/bin/pip install \
         'mcp>=2.3,<3'`, then TOOLOOP_TEST_PYTHON=.venv-mcp/bin/python (scripts/test.sh does this)",
    )
}

fn script(name: &str) -> String {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/mcp").join(name).display().to_string()
}

/// A unique word put on a server's command line, to find its processes in /proc.
fn marker(test: &str) -> String {
    format!("tooloop-mcp-test-{test}-{}", std::process::id())
}

/// Pids whose command line contains `marker`, leaving out the `unshare` that starts a server in a PID
/// namespace of its own (the server is its child).
fn procs_with(marker: &str) -> Vec<u32> {
    procs_with_all(marker)
        .into_iter()
        .filter(|pid| {
            let cmd = std::fs::read(format!("/proc/{pid}/cmdline")).unwrap_or_default();
            !cmd.starts_with(b"unshare\0")
        })
        .collect()
}

/// Pids whose command line contains `marker` (zombies excluded: a reaped child has no /proc entry).
fn procs_with_all(marker: &str) -> Vec<u32> {
    procs::with(marker)
}

fn assert_no_orphans(marker: &str) {
    let deadline = Instant::now() + Duration::from_secs(3);
    while !procs_with_all(marker).is_empty() && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(20));
    }
    assert_eq!(procs_with_all(marker), Vec::<u32>::new(), "server processes left running");
}

/// Waits (10 s at the most) until the first server's stderr log shows `line`.
fn wait_for_log(servers: &McpServers, line: &str) {
    let deadline = Instant::now() + Duration::from_secs(10);
    while !servers.status()[0].log_tail.contains(line) {
        assert!(Instant::now() < deadline, "{line:?} not in the server's log: {}", servers.status()[0].log_tail);
        std::thread::sleep(Duration::from_millis(10));
    }
}

fn stdio_config(py: &str, args: &[&str], extra: Value) -> McpServerConfig {
    let mut v = json!({"command": py, "args": args});
    if let (Some(o), Value::Object(e)) = (v.as_object_mut(), extra) {
        o.extend(e);
    }
    serde_json::from_value(v).unwrap()
}

fn start(name: &str, config: McpServerConfig) -> (McpServers, ToolRegistry) {
    let registry = ToolRegistry::new();
    let servers = McpServers::start(&BTreeMap::from([(name.to_string(), config)]), &registry).unwrap();
    (servers, registry)
}

/// Call a registered tool the way the agent does: `(content, is_error)`.
fn call(registry: &ToolRegistry, name: &str, input: Value) -> (Value, bool) {
    call_with(registry, name, input, &CancelToken::new())
}

fn call_with(registry: &ToolRegistry, name: &str, input: Value, cancel: &CancelToken) -> (Value, bool) {
    let block = ToolUseBlock { id: "toolu_1".into(), name: name.into(), input, extra: Default::default() };
    let out = registry.execute(&block, cancel);
    (out.content, out.is_error)
}

fn text(v: &Value) -> String {
    match v {
        Value::String(s) => s.clone(),
        other => other.to_string(),
    }
}

fn fastmcp(test: &str) -> Option<(McpServers, ToolRegistry, String)> {
    let py = python()?;
    let m = marker(test);
    let (servers, registry) = start("test", stdio_config(&py, &[&script("fastmcp_server.py"), &m], json!({})));
    assert!(servers.failures().is_empty(), "{:?}", servers.failures());
    Some((servers, registry, m))
}

#[test]
fn stdio_server_tools_are_registered_with_prefixed_names_schemas_and_descriptions() {
    let Some((servers, registry, m)) = fastmcp("list") else { return };
    let names = registry.names();
    for t in ["echo", "add", "weather", "fail", "slow", "pid", "pixel", "grow"] {
        assert!(names.contains(&format!("mcp__test__{t}")), "{t} missing from {names:?}");
    }
    let echo = registry.get("mcp__test__echo").unwrap();
    assert_eq!(echo.spec.description, "Echo the text back.");
    assert_eq!(echo.spec.input_schema["required"], json!(["text"]));
    assert!(!echo.parallel_safe);
    assert!(registry.get("mcp__test__pid").unwrap().parallel_safe, "readOnlyHint tools are parallel-safe");
    // The hint gives the kind (what the tool does), not `read_only` (the server's word is no approval).
    let pid_tool = registry.get("mcp__test__pid").unwrap();
    assert_eq!((pid_tool.kind.name(), pid_tool.read_only), (Some("read"), false));
    assert_eq!(echo.kind.name(), None);
    let status = servers.status();
    assert_eq!(status[0].state, McpState::Connected);
    assert_eq!(status[0].protocol_version.as_deref(), Some("2025-11-25"));
    assert_eq!(status[0].tools.len(), names.len());
    assert!(servers.instructions().contains("## MCP server test\nUse echo to repeat text."));
    let pid = servers.server_pid("test").unwrap();
    assert_eq!(procs_with(&m), vec![pid]);
    assert!(servers.ping("test", Duration::from_secs(5)).is_ok());
    assert!(servers.ping("other", Duration::from_secs(5)).unwrap_err().contains("no MCP server named 'other'"));
    servers.close();
    assert!(registry.names().is_empty(), "close unregisters the tools");
    assert_no_orphans(&m);
}

#[test]
fn stdio_calls_give_text_structured_image_and_error_results() {
    let Some((servers, registry, m)) = fastmcp("calls") else { return };
    assert_eq!(call(&registry, "mcp__test__echo", json!({"text": "hi"})), (json!("echo: hi"), false));
    assert_eq!(call(&registry, "mcp__test__add", json!({"a": 2, "b": 40})), (json!("42"), false));
    let (w, err) = call(&registry, "mcp__test__weather", json!({"city": "Oslo"}));
    assert!(!err);
    let w: Value = serde_json::from_str(&text(&w)).unwrap();
    assert_eq!(w, json!({"city": "Oslo", "celsius": 21.5}));
    let (img, err) = call(&registry, "mcp__test__pixel", json!({}));
    assert!(!err);
    assert_eq!(img[0]["type"], "image");
    assert_eq!(img[0]["source"]["type"], "base64");
    assert_eq!(img[0]["source"]["media_type"], "image/png");
    assert!(img[0]["source"]["data"].as_str().unwrap().starts_with("iVBOR"));
    let (e, err) = call(&registry, "mcp__test__fail", json!({"message": "the disk is on fire"}));
    assert!(err);
    assert!(text(&e).contains("the disk is on fire"), "{e}");
    // Unknown tool on the server side: a JSON-RPC error or an isError result, either way an error result.
    let (e, err) = call(&registry, "mcp__test__echo", json!({"text": 5}));
    assert!(err, "invalid input is refused: {e}");
    // stderr goes to the log, never into results.
    assert!(servers.status()[0].log_tail.contains("echo called with 'hi'"));
    drop(servers);
    assert_no_orphans(&m);
}

#[test]
fn stdio_slow_tool_is_cancelled_within_200ms_and_the_server_keeps_serving() {
    let Some((servers, registry, m)) = fastmcp("cancel") else { return };
    let cancel = CancelToken::new();
    let (r, c) = (registry.clone(), cancel.clone());
    let worker = std::thread::spawn(move || {
        let out = call_with(&r, "mcp__test__slow", json!({"seconds": 30}), &c);
        (out, Instant::now())
    });
    wait_for_log(&servers, "slow started");
    let cancelled_at = Instant::now();
    cancel.cancel();
    let ((content, is_error), returned_at) = worker.join().unwrap();
    let latency = returned_at - cancelled_at;
    eprintln!("MCP cancel latency: {:?}", latency);
    assert!(latency < Duration::from_millis(200), "cancel took {latency:?}");
    assert!(is_error && text(&content).contains("cancelled"), "{content}");
    // The server got notifications/cancelled (its handler was cancelled) and goes on serving.
    wait_for_log(&servers, "slow was cancelled");
    assert_eq!(call(&registry, "mcp__test__echo", json!({"text": "after"})), (json!("echo: after"), false));
    assert_eq!(servers.status()[0].restarts, 0);
    drop(servers);
    assert_no_orphans(&m);
}

#[test]
fn a_call_past_its_timeout_is_an_error_result() {
    let Some(py) = python() else { return };
    let m = marker("timeout");
    let (servers, registry) =
        start("test", stdio_config(&py, &[&script("fastmcp_server.py"), &m], json!({"timeout": 0.5})));
    let started = Instant::now();
    let (content, is_error) = call(&registry, "mcp__test__slow", json!({"seconds": 30}));
    assert!(is_error && text(&content).contains("did not answer within"), "{content}");
    assert!(started.elapsed() < Duration::from_secs(3));
    drop(servers);
    assert_no_orphans(&m);
}

#[test]
fn a_server_killed_mid_call_gives_an_error_result_and_is_restarted_before_its_next_use() {
    let Some((servers, registry, m)) = fastmcp("restart") else { return };
    let first = servers.server_pid("test").unwrap();
    assert_eq!(call(&registry, "mcp__test__pid", json!({})), (json!(first.to_string()), false));
    let r = registry.clone();
    let worker = std::thread::spawn(move || call(&r, "mcp__test__slow", json!({"seconds": 30})));
    wait_for_log(&servers, "slow started");
    nix::sys::signal::kill(nix::unistd::Pid::from_raw(first as i32), nix::sys::signal::Signal::SIGKILL).unwrap();
    let (content, is_error) = worker.join().unwrap();
    assert!(is_error, "{content}");
    assert!(text(&content).contains("failed during the call") && text(&content).contains("restarted"), "{content}");
    assert_eq!(servers.status()[0].state, McpState::Disconnected);
    // A run cancelled while the server is being restarted returns at once and does not use up a restart.
    let cancelled = CancelToken::new();
    cancelled.cancel();
    let started = Instant::now();
    let (content, is_error) = call_with(&registry, "mcp__test__pid", json!({}), &cancelled);
    assert!(is_error && text(&content).contains("cancelled while restarting"), "{content}");
    assert!(started.elapsed() < Duration::from_millis(200), "took {:?}", started.elapsed());
    assert_eq!(servers.status()[0].restarts, 0);
    // status() does not wait for a restart under way.
    let r = registry.clone();
    let restarting = std::thread::spawn(move || call(&r, "mcp__test__pid", json!({})));
    let deadline = Instant::now() + Duration::from_secs(10);
    let mut seen_starting = false;
    while !restarting.is_finished() && Instant::now() < deadline {
        let t = Instant::now();
        seen_starting |= servers.status()[0].state == McpState::Starting;
        assert!(t.elapsed() < Duration::from_millis(100), "status() blocked for {:?}", t.elapsed());
        std::thread::sleep(Duration::from_millis(5));
    }
    assert!(seen_starting, "the restart (a Python start, seconds) was seen as Starting");
    let (again, is_error) = restarting.join().unwrap();
    assert!(!is_error, "{again}");
    let second: u32 = text(&again).parse().unwrap();
    assert_ne!(first, second);
    let status = &servers.status()[0];
    assert_eq!((status.state.clone(), status.restarts), (McpState::Connected, 1));
    servers.close();
    assert_no_orphans(&m);
}

#[test]
fn restarts_are_bounded() {
    let Some((servers, registry, m)) = fastmcp("bounded") else { return };
    for round in 0..=tooloop::mcp::MAX_RESTARTS {
        let pid = servers.server_pid("test").unwrap();
        nix::sys::signal::kill(nix::unistd::Pid::from_raw(pid as i32), nix::sys::signal::Signal::SIGKILL).unwrap();
        let deadline = Instant::now() + Duration::from_secs(3);
        while servers.status()[0].state == McpState::Connected && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(10));
        }
        let (content, is_error) = call(&registry, "mcp__test__echo", json!({"text": "x"}));
        if round < tooloop::mcp::MAX_RESTARTS {
            assert!(!is_error, "round {round}: {content}");
        } else {
            assert!(is_error && text(&content).contains("restarted 3 times"), "{content}");
            assert_eq!(servers.status()[0].state, McpState::Failed);
        }
    }
    drop(servers);
    assert_no_orphans(&m);
}

#[test]
fn tools_list_changed_relists_before_the_next_request() {
    let Some((servers, registry, m)) = fastmcp("listchanged") else { return };
    assert!(registry.get("mcp__test__late").is_none());
    assert_eq!(call(&registry, "mcp__test__grow", json!({})), (json!("grown"), false));
    assert!(registry.get("mcp__test__late").is_some(), "re-listed after the notification: {:?}", registry.names());
    assert_eq!(call(&registry, "mcp__test__late", json!({})), (json!("late tool here"), false));
    drop(servers);
    assert_no_orphans(&m);
}

#[test]
fn tools_list_pagination_follows_next_cursor() {
    let Some(py) = python() else { return };
    let m = marker("paged");
    let (servers, registry) = start("paged", stdio_config(&py, &[&script("paged_server.py"), &m], json!({})));
    assert!(servers.failures().is_empty(), "{:?}", servers.failures());
    let names: Vec<String> = (0..5).map(|i| format!("mcp__paged__tool{i}")).collect();
    assert_eq!(registry.names(), names);
    assert_eq!(call(&registry, "mcp__paged__tool4", json!({})), (json!("called tool4"), false));
    drop(servers);
    assert_no_orphans(&m);
}

#[test]
fn garbage_output_is_ignored_and_unsupported_server_requests_get_an_error() {
    let Some(py) = python() else { return };
    let m = marker("garbage");
    let (servers, registry) = start("bad", stdio_config(&py, &[&script("bad_server.py"), "garbage", &m], json!({})));
    assert!(servers.failures().is_empty(), "{:?}", servers.failures());
    let status = &servers.status()[0];
    assert_eq!(status.protocol_version.as_deref(), Some("2025-06-18"), "negotiated down to the server's answer");
    // "hello.world" is not a valid tool name: sanitised, with a hash.
    assert_eq!(status.tools.len(), 1);
    let name = status.tools[0].clone();
    assert!(name.starts_with("mcp__bad__hello_world_") && check_name(&name).is_ok(), "{name}");
    assert_eq!(call(&registry, &name, json!({})), (json!("hi"), false));
    let deadline = Instant::now() + Duration::from_secs(3);
    let mut log = String::new();
    while !log.contains("client replied") && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(20));
        log = servers.status()[0].log_tail.clone();
    }
    assert!(log.contains("not JSON"), "{log}");
    assert!(log.contains("-32601") && log.contains("sampling/createMessage"), "{log}");
    drop(servers);
    assert_no_orphans(&m);
}

#[test]
fn a_server_that_never_answers_initialize_is_reported_by_name_and_skipped() {
    let Some(py) = python() else { return };
    let m = marker("silent");
    let grandchild_started = {
        let m = m.clone();
        move || procs_with(&m).len() >= 2
    };
    let good = marker("silent-good");
    let registry = ToolRegistry::new();
    let configs = BTreeMap::from([
        (
            "mute".to_string(),
            stdio_config(&py, &[&script("bad_server.py"), "silent", &m], json!({"init_timeout": 0.5})),
        ),
        ("test".to_string(), stdio_config(&py, &[&script("fastmcp_server.py"), &good], json!({}))),
        ("nope".to_string(), stdio_config("/nonexistent/mcp-server", &[], json!({}))),
        ("unset".to_string(), stdio_config(&py, &[], json!({"env": {"X": "${TOOLOOP_SURELY_UNSET_VAR}"}}))),
    ]);
    let started = Instant::now();
    let watcher = std::thread::spawn(move || {
        let deadline = Instant::now() + Duration::from_secs(20);
        while Instant::now() < deadline {
            if grandchild_started() {
                return true;
            }
            std::thread::sleep(Duration::from_millis(10));
        }
        false
    });
    let servers = McpServers::start(&configs, &registry).unwrap();
    assert!(started.elapsed() < Duration::from_secs(20));
    assert!(watcher.join().unwrap(), "the silent server started its grandchild");
    let failures = servers.failures();
    let reason = |n: &str| failures.iter().find(|f| f.server == n).map(|f| f.reason.clone()).unwrap_or_default();
    assert!(reason("mute").contains("'mute'") && reason("mute").contains("initialize"), "{failures:?}");
    assert!(reason("nope").contains("'nope'") && reason("nope").contains("/nonexistent/mcp-server"), "{failures:?}");
    assert!(reason("unset").contains("TOOLOOP_SURELY_UNSET_VAR"), "{failures:?}");
    assert_eq!(failures.len(), 3, "{failures:?}");
    assert_no_orphans(&m);
    let status = servers.status();
    assert_eq!(status.iter().find(|s| s.name == "mute").unwrap().state, McpState::Failed);
    assert!(registry.get("mcp__test__echo").is_some(), "the good server still starts");
    drop(servers);
    assert_no_orphans(&good);
}

/// The SDK server over Streamable HTTP on a free port, its stderr in a file, stopped by pid on drop.
struct HttpServer {
    child: Child,
    url: String,
    log: PathBuf,
}

impl HttpServer {
    fn start(py: &str, m: &str) -> HttpServer {
        let port = TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
        Self::start_on(py, m, port)
    }

    fn start_on(py: &str, m: &str, port: u16) -> HttpServer {
        static N: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
        let n = N.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        let log = std::env::temp_dir().join(format!("{m}-{n}.stderr"));
        let child = Command::new(py)
            .args([&script("fastmcp_server.py"), "http", &port.to_string(), m])
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(std::fs::File::create(&log).unwrap())
            .spawn()
            .unwrap();
        let server = HttpServer { child, url: format!("http://127.0.0.1:{port}/mcp"), log };
        let deadline = Instant::now() + Duration::from_secs(20);
        while std::net::TcpStream::connect(("127.0.0.1", port)).is_err() {
            assert!(Instant::now() < deadline, "the HTTP MCP server did not start");
            std::thread::sleep(Duration::from_millis(50));
        }
        server
    }
}

impl HttpServer {
    /// Waits (10 s at the most) until the server's stderr shows `line`.
    fn wait_for_log(&self, line: &str) {
        let deadline = Instant::now() + Duration::from_secs(10);
        while !std::fs::read_to_string(&self.log).unwrap_or_default().contains(line) {
            assert!(Instant::now() < deadline, "{line:?} not in {}", self.log.display());
            std::thread::sleep(Duration::from_millis(10));
        }
    }
}

impl Drop for HttpServer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        let _ = std::fs::remove_file(&self.log);
    }
}

#[test]
fn streamable_http_lists_calls_errors_and_cancels() {
    let Some(py) = python() else { return };
    let m = marker("http");
    let server = HttpServer::start(&py, &m);
    let config: McpServerConfig =
        serde_json::from_value(json!({"type": "http", "url": server.url, "headers": {"X-Test": "1"}})).unwrap();
    let (servers, registry) = start("web", config);
    assert!(servers.failures().is_empty(), "{:?}", servers.failures());
    assert_eq!(servers.status()[0].protocol_version.as_deref(), Some("2025-11-25"));
    assert!(registry.get("mcp__web__weather").is_some(), "{:?}", registry.names());
    assert_eq!(call(&registry, "mcp__web__echo", json!({"text": "over http"})), (json!("echo: over http"), false));
    let (w, err) = call(&registry, "mcp__web__weather", json!({"city": "Lima"}));
    assert!(!err && text(&w).contains("Lima"), "{w}");
    let (e, err) = call(&registry, "mcp__web__fail", json!({"message": "http trouble"}));
    assert!(err && text(&e).contains("http trouble"), "{e}");

    let cancel = CancelToken::new();
    let (r, c) = (registry.clone(), cancel.clone());
    let worker =
        std::thread::spawn(move || (call_with(&r, "mcp__web__slow", json!({"seconds": 30}), &c), Instant::now()));
    server.wait_for_log("slow started");
    let cancelled_at = Instant::now();
    cancel.cancel();
    let ((content, is_error), returned_at) = worker.join().unwrap();
    eprintln!("MCP HTTP cancel latency: {:?}", returned_at - cancelled_at);
    assert!(returned_at - cancelled_at < Duration::from_millis(200));
    assert!(is_error && text(&content).contains("cancelled"), "{content}");
    assert_eq!(call(&registry, "mcp__web__echo", json!({"text": "again"})), (json!("echo: again"), false));
    // The SDK sends list_changed on the GET event stream, apart from the call: the tool appears shortly after.
    assert_eq!(call(&registry, "mcp__web__grow", json!({})), (json!("grown"), false));
    let deadline = Instant::now() + Duration::from_secs(5);
    while registry.get("mcp__web__late").is_none() && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(10));
    }
    assert_eq!(call(&registry, "mcp__web__late", json!({})), (json!("late tool here"), false));
    servers.close();
    drop(server);
    assert_no_orphans(&m);
}

#[test]
fn an_http_server_that_is_down_is_reported_and_skipped() {
    let port = TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
    let config: McpServerConfig =
        serde_json::from_value(json!({"url": format!("http://127.0.0.1:{port}/mcp"), "init_timeout": 2})).unwrap();
    let (servers, registry) = start("down", config);
    assert_eq!(servers.failures().len(), 1);
    assert!(servers.failures()[0].reason.contains("'down'"), "{:?}", servers.failures());
    assert!(registry.names().is_empty());
}

#[test]
fn an_agent_run_calls_an_mcp_tool_end_to_end() {
    let Some(py) = python() else { return };
    let m = marker("agent");
    let reply = |content: Value, stop: &str| -> MessageResponse {
        serde_json::from_value(json!({"id": "msg_1", "type": "message", "role": "assistant", "model": "m",
            "content": content, "stop_reason": stop, "stop_sequence": null,
            "usage": {"input_tokens": 1, "output_tokens": 1}}))
        .unwrap()
    };
    let provider = Arc::new(ScriptedProvider::new([
        reply(
            json!([{"type": "tool_use", "id": "toolu_m1", "name": "mcp__test__echo", "input": {"text": "agent"}}]),
            "tool_use",
        ),
        reply(json!([{"type": "text", "text": "The server said it."}]), "end_turn"),
    ]));
    let agent = Agent::new(provider.clone(), AgentConfig { model: "m".into(), max_tokens: 100, ..Default::default() });
    let servers = McpServers::start(
        &BTreeMap::from([("test".to_string(), stdio_config(&py, &[&script("fastmcp_server.py"), &m], json!({})))]),
        agent.tools(),
    )
    .unwrap();
    let result = agent.run("echo something", &mut |_| {}).unwrap();
    assert_eq!(result.text, "The server said it.");
    assert_eq!(result.tool_calls.len(), 1);
    assert_eq!((result.tool_calls[0].output.clone(), result.tool_calls[0].is_error), (json!("echo: agent"), false));
    let requests = provider.requests();
    assert!(requests[0].tools.iter().any(|t| t.name == "mcp__test__echo"), "the model was offered the MCP tool");
    drop(servers);
    assert_no_orphans(&m);
}

#[test]
fn an_http_server_that_went_away_is_an_error_result_then_a_new_session_is_opened() {
    let Some(py) = python() else { return };
    let m = marker("http-restart");
    let server = HttpServer::start(&py, &m);
    let port: u16 = server.url.rsplit(':').next().unwrap().trim_end_matches("/mcp").parse().unwrap();
    let config: McpServerConfig = serde_json::from_value(json!({"url": server.url})).unwrap();
    let (servers, registry) = start("web", config);
    assert_eq!(call(&registry, "mcp__web__echo", json!({"text": "one"})), (json!("echo: one"), false));
    drop(server);
    let (content, is_error) = call(&registry, "mcp__web__echo", json!({"text": "two"}));
    assert!(is_error && text(&content).contains("restarted"), "{content}");
    let server = HttpServer::start_on(&py, &m, port);
    assert_eq!(call(&registry, "mcp__web__echo", json!({"text": "three"})), (json!("echo: three"), false));
    assert_eq!(servers.status()[0].restarts, 1);
    // A server restarted between two calls answers 404 for the old session: the call was not processed, so
    // a new session is opened and the call sent again, without an error.
    drop(server);
    let server = HttpServer::start_on(&py, &m, port);
    assert_eq!(call(&registry, "mcp__web__echo", json!({"text": "four"})), (json!("echo: four"), false));
    assert_eq!(servers.status()[0].restarts, 2);
    servers.close();
    drop(server);
    assert_no_orphans(&m);
}

#[test]
fn calls_to_one_server_run_concurrently() {
    let Some((servers, registry, m)) = fastmcp("concurrent") else { return };
    let started = Instant::now();
    let workers: Vec<_> = (0..3)
        .map(|_| {
            let r = registry.clone();
            std::thread::spawn(move || call(&r, "mcp__test__slow", json!({"seconds": 1.0})))
        })
        .collect();
    for w in workers {
        assert_eq!(w.join().unwrap(), (json!("done sleeping"), false));
    }
    let took = started.elapsed();
    assert!(took < Duration::from_millis(2500), "three 1 s calls took {took:?}: not multiplexed");
    drop(servers);
    assert_no_orphans(&m);
}

#[test]
fn a_server_that_exits_while_a_grandchild_holds_its_stdout_is_noticed() {
    let Some(py) = python() else { return };
    let m = marker("orphan");
    let (servers, registry) = start("bad", stdio_config(&py, &[&script("bad_server.py"), "orphan", &m], json!({})));
    let name = servers.status()[0].tools[0].clone();
    let started = Instant::now();
    let (content, is_error) = call(&registry, &name, json!({}));
    assert!(is_error && text(&content).contains("exit status: 3"), "{content}");
    assert!(started.elapsed() < Duration::from_secs(5), "took {:?}", started.elapsed());
    if tooloop::builtin::process_containment() {
        // The server was process 1 of its own PID namespace: the kernel ended the grandchild with it.
        assert!(procs_with(&m).is_empty(), "the grandchild ended with the server");
    } else {
        assert!(!procs_with(&m).is_empty(), "the grandchild still runs until close");
    }
    drop(servers);
    assert_no_orphans(&m);
}

#[test]
fn mcp_servers_from_the_agent_options_start_with_the_agent_and_stop_on_close_or_drop() {
    let Some(py) = python() else { return };
    let m = marker("options");
    let options = tooloop::AgentOptions::from_value(json!({
        "system": "Be brief.",
        "mcp_servers": {
            "test": {"command": py, "args": [script("fastmcp_server.py"), m], "env": {"SERVICE_TOKEN": "tok-1234567890"}},
            "broken": {"command": "/nonexistent/tooloop-mcp-server"}
        }
    }))
    .unwrap();
    let provider = Arc::new(ScriptedProvider::new([]));
    let agent = options.build_with(provider.clone()).unwrap();
    assert!(agent.tools().get("mcp__test__echo").is_some());
    let failures = agent.mcp_failures();
    assert_eq!(failures.len(), 1, "{failures:?}");
    assert_eq!(failures[0].server, "broken");
    assert_eq!(agent.mcp_status().len(), 2);
    assert_eq!(agent.tools().redact("tok-1234567890".into()), "[redacted]", "a secret in a server's env is redacted");
    assert!(!procs_with(&m).is_empty());
    agent.close();
    assert!(agent.tools().get("mcp__test__echo").is_none(), "close removes the server's tools");
    assert_no_orphans(&m);
    agent.close(); // idempotent

    // Dropping the agent stops them too (what the C API's tooloop_agent_free and Python's GC rely on).
    let m2 = marker("options-drop");
    let options = tooloop::AgentOptions::from_value(json!({
        "mcp_servers": {"test": {"command": py, "args": [script("fastmcp_server.py"), m2]}}
    }))
    .unwrap();
    let agent = options.build_with(provider).unwrap();
    assert!(!procs_with(&m2).is_empty());
    drop(agent);
    assert_no_orphans(&m2);
}
