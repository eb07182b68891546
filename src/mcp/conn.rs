//! One connection to one MCP server: JSON-RPC 2.0 requests multiplexed by id over a transport (a child
//! process's stdin/stdout, or Streamable HTTP POSTs), a reader that routes responses to their waiting
//! callers, answers the server's own requests, and notes `tools/list_changed`.
//!
//! Must never: block a caller past its timeout or 200 ms after its cancel, leave a request of the server
//! unanswered, mix the server's stderr into results, or leave the server's process group running after
//! `close`.

use std::collections::{HashMap, VecDeque};
use std::io::{BufRead, BufReader, Write};
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::mpsc::{self, RecvTimeoutError, SyncSender};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use crate::cancel::CancelToken;
use crate::http::{HttpClient, HttpConfig, HttpRequest, HttpResponse};
use crate::sse::SseDecoder;

/// Longest message (a stdout line of a stdio server, an HTTP response body or SSE event) kept from a server;
/// longer ones are dropped without being held in memory.
pub const MAX_MESSAGE_BYTES: usize = 32 * 1024 * 1024;
/// Longest stderr line kept from a stdio server (the rest of a longer line is skipped, not stored).
pub const MAX_STDERR_LINE_BYTES: usize = 4096;

/// The revision we ask for: the newest one reached through the `initialize` handshake.
pub const PROTOCOL_VERSION: &str = "2025-11-25";
/// Revisions we accept when the server answers with an older one.
pub const SUPPORTED_VERSIONS: [&str; 4] = ["2025-11-25", "2025-06-18", "2025-03-26", "2024-11-05"];

/// How a request failed.
#[derive(Debug, Clone)]
pub(crate) enum CallError {
    /// The server answered with a JSON-RPC error.
    Rpc { code: i64, message: String },
    /// The connection is gone (process exited, stream closed, HTTP failure).
    Closed(String),
    /// No answer within the timeout.
    Timeout(Duration),
    /// Our run was cancelled.
    Cancelled,
    /// The HTTP server no longer knows our session (404): the request was not processed; a new session
    /// must be opened (and the request may be sent again).
    Expired(String),
}

impl std::fmt::Display for CallError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            CallError::Rpc { code, message } => write!(f, "error {code}: {message}"),
            CallError::Closed(why) => write!(f, "{why}"),
            CallError::Timeout(d) => write!(f, "no answer within {:.1} s", d.as_secs_f64()),
            CallError::Cancelled => write!(f, "cancelled"),
            CallError::Expired(why) => write!(f, "{why}"),
        }
    }
}

type Reply = Result<Value, CallError>;

/// The last lines of the server's stderr (and notes about ignored output): kept for status and errors,
/// never sent to the model as a result.
#[derive(Default)]
pub(crate) struct Log {
    lines: Mutex<VecDeque<String>>,
}

const LOG_LINES: usize = 200;

impl Log {
    pub(crate) fn push(&self, line: String) {
        let mut l = self.lines.lock().unwrap_or_else(|e| e.into_inner());
        if l.len() == LOG_LINES {
            l.pop_front();
        }
        let mut line = line;
        if line.len() > 2000 {
            line.truncate(crate::text::floor_boundary(&line, 2000));
            line.push('…');
        }
        l.push_back(line);
    }

    /// The last `n` lines joined.
    pub(crate) fn tail(&self, n: usize) -> String {
        let l = self.lines.lock().unwrap_or_else(|e| e.into_inner());
        let skip = l.len().saturating_sub(n);
        l.iter().skip(skip).cloned().collect::<Vec<_>>().join("\n")
    }
}

/// State shared between callers and the reader(s).
pub(crate) struct Shared {
    pending: Mutex<HashMap<u64, SyncSender<Reply>>>,
    dead: Mutex<Option<String>>,
    pub(crate) tools_changed: AtomicBool,
    pub(crate) log: Arc<Log>,
    /// Run (on the reader's thread: it must not block) when `tools/list_changed` arrives.
    on_tools_changed: Mutex<Option<Box<dyn Fn() + Send + Sync>>>,
}

impl Shared {
    fn new(log: Arc<Log>) -> Arc<Self> {
        Arc::new(Shared {
            pending: Mutex::new(HashMap::new()),
            dead: Mutex::new(None),
            tools_changed: AtomicBool::new(false),
            log,
            on_tools_changed: Mutex::new(None),
        })
    }

    /// Why the connection ended, if it did.
    pub(crate) fn dead(&self) -> Option<String> {
        self.dead.lock().unwrap_or_else(|e| e.into_inner()).clone()
    }

    /// The connection ended: every waiting caller gets `why` (set before draining so none is missed).
    fn fail_all(&self, why: String) {
        {
            let mut d = self.dead.lock().unwrap_or_else(|e| e.into_inner());
            if d.is_none() {
                *d = Some(why.clone());
            }
        }
        let drained: Vec<_> = self.pending.lock().unwrap_or_else(|e| e.into_inner()).drain().collect();
        for (_, tx) in drained {
            let _ = tx.try_send(Err(CallError::Closed(why.clone())));
        }
    }

    fn resolve(&self, id: u64, reply: Reply) -> bool {
        let tx = self.pending.lock().unwrap_or_else(|e| e.into_inner()).remove(&id);
        match tx {
            Some(tx) => {
                let _ = tx.try_send(reply);
                true
            }
            None => false,
        }
    }

    /// Route one incoming message. `answer` sends our reply to a request of the server.
    fn dispatch(&self, msg: Value, answer: &dyn Fn(Value)) {
        if let Value::Array(batch) = msg {
            for m in batch {
                self.dispatch(m, answer);
            }
            return;
        }
        let method = msg.get("method").and_then(Value::as_str);
        let id = msg.get("id").filter(|v| !v.is_null());
        match (method, id) {
            (Some(method), Some(id)) => {
                // A request of the server. We declare no client capabilities (roots, sampling,
                // elicitation), so only ping is served; everything else gets "method not found" at once,
                // so the server never waits on us.
                let reply = if method == "ping" {
                    json!({"jsonrpc": "2.0", "id": id, "result": {}})
                } else {
                    json!({"jsonrpc": "2.0", "id": id, "error": {
                        "code": -32601, "message": format!("Method not found: tooloop does not support {method}")}})
                };
                answer(reply);
            }
            (Some(method), None) => match method {
                "notifications/tools/list_changed" => {
                    self.tools_changed.store(true, Ordering::SeqCst);
                    if let Some(hook) = self.on_tools_changed.lock().unwrap_or_else(|e| e.into_inner()).as_ref() {
                        hook();
                    }
                }
                "notifications/message" => {
                    let p = msg.get("params").cloned().unwrap_or(Value::Null);
                    let level = p.get("level").and_then(Value::as_str).unwrap_or("info");
                    self.log.push(format!("[log {level}] {}", p.get("data").unwrap_or(&Value::Null)));
                }
                _ => {}
            },
            (None, Some(id)) => {
                let Some(n) = id.as_u64() else {
                    self.log.push(format!("[ignored] a response with an id we never sent: {id}"));
                    return;
                };
                let reply = if let Some(err) = msg.get("error") {
                    Err(CallError::Rpc {
                        code: err.get("code").and_then(Value::as_i64).unwrap_or(0),
                        message: err.get("message").and_then(Value::as_str).unwrap_or("").to_string(),
                    })
                } else {
                    Ok(msg.get("result").cloned().unwrap_or(Value::Null))
                };
                if !self.resolve(n, reply) {
                    self.log.push(format!("[ignored] a response to request {n}, which nobody awaits"));
                }
            }
            (None, None) => self.log.push(format!("[ignored] not a JSON-RPC message: {msg}")),
        }
    }
}

/// Read `bytes` as a stdio server's stdout would be read (lines capped at `max_line`), parse and route each
/// message as the connection does, with requests 0–3 awaiting answers; returns how many messages were routed
/// and the replies we would have sent. For the fuzzer (fuzz/fuzz_targets/mcp_framing.rs); not a stable API.
#[doc(hidden)]
pub fn route_stdio_bytes(bytes: &[u8], max_line: usize) -> (usize, Vec<Value>) {
    let shared = Shared::new(Arc::new(Log::default()));
    let mut waiting = Vec::new();
    for id in 0..4u64 {
        let (tx, rx) = mpsc::sync_channel::<Reply>(1);
        shared.pending.lock().unwrap_or_else(|e| e.into_inner()).insert(id, tx);
        waiting.push(rx);
    }
    let replies = Mutex::new(Vec::new());
    let mut reader = BufReader::with_capacity(64, bytes);
    let (mut buf, mut routed) = (Vec::new(), 0usize);
    while let Ok(Some(total)) = read_line_capped(&mut reader, &mut buf, max_line) {
        if total > buf.len() {
            continue;
        }
        let line = String::from_utf8_lossy(&buf);
        if let Ok(msg) = serde_json::from_str::<Value>(line.trim()) {
            routed += 1;
            shared.dispatch(msg, &|reply| replies.lock().unwrap_or_else(|e| e.into_inner()).push(reply));
        }
    }
    for rx in waiting {
        if let Ok(Ok(result)) = rx.try_recv() {
            let _ = super::convert_result(&result);
        }
    }
    (routed, replies.into_inner().unwrap_or_else(|e| e.into_inner()))
}

/// The way messages leave us.
trait Wire: Send + Sync {
    /// Send one message; for HTTP a request's answer comes back through `Shared::dispatch`.
    fn send(&self, msg: &Value, request_id: Option<u64>) -> Result<(), String>;
    /// Send a notification that must reach the server before anything sent after it
    /// (`notifications/initialized`). HTTP posts it on the caller's thread; stdio lines are ordered anyway.
    fn send_ordered(&self, msg: &Value) -> Result<(), String> {
        self.send(msg, None)
    }
    /// Stop reading the answer to an abandoned request (HTTP closes its stream).
    fn abandon(&self, _id: u64) {}
    /// The handshake is done (HTTP opens its GET event stream).
    fn ready(&self) {}
    /// Why the server is gone, when its process has exited (stdio).
    fn exited(&self) -> Option<String> {
        None
    }
    /// Tell the server the protocol revision (HTTP sends it as a header).
    fn set_protocol(&self, _version: &str) {}
    /// Stop: end the process (group) or the HTTP session.
    fn close(&self);
    /// The child's pid (stdio only).
    fn pid(&self) -> Option<u32> {
        None
    }
}

/// One live connection.
pub(crate) struct Conn {
    pub(crate) shared: Arc<Shared>,
    wire: Box<dyn Wire>,
    next_id: AtomicU64,
    /// The revision agreed in `initialize`.
    pub(crate) protocol_version: String,
    /// `instructions` from `initialize`, if any.
    pub(crate) instructions: Option<String>,
}

impl Conn {
    /// Send a request and wait for its answer, giving up on timeout or cancel (the server is then told
    /// with `notifications/cancelled`).
    pub(crate) fn request(
        &self,
        method: &str,
        params: Value,
        timeout: Duration,
        cancel: Option<&CancelToken>,
    ) -> Result<Value, CallError> {
        let id = self.next_id.fetch_add(1, Ordering::SeqCst);
        let (tx, rx) = mpsc::sync_channel::<Reply>(1);
        self.shared.pending.lock().unwrap_or_else(|e| e.into_inner()).insert(id, tx);
        if let Some(why) = self.shared.dead() {
            self.shared.resolve(id, Err(CallError::Closed(why.clone())));
            return Err(CallError::Closed(why));
        }
        let msg = json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params});
        if let Err(e) = self.wire.send(&msg, Some(id)) {
            self.shared.resolve(id, Err(CallError::Closed(e.clone())));
            return Err(CallError::Closed(e));
        }
        let deadline = Instant::now() + timeout;
        loop {
            match cancel {
                Some(c) => c.poll(false),
                None => crate::cancel::poll(false),
            }
            if cancel.is_some_and(CancelToken::is_cancelled) {
                self.abandon(id, method, "the client's run was cancelled");
                return Err(CallError::Cancelled);
            }
            let now = Instant::now();
            if now >= deadline {
                self.abandon(id, method, "timeout");
                return Err(CallError::Timeout(timeout));
            }
            match rx.recv_timeout((deadline - now).min(Duration::from_millis(20))) {
                Ok(reply) => return reply,
                Err(RecvTimeoutError::Timeout) => {
                    // The process may be gone while a grandchild still holds its stdout open (no EOF).
                    if let Some(why) = self.wire.exited() {
                        self.shared.fail_all(why);
                    }
                    continue;
                }
                Err(RecvTimeoutError::Disconnected) => {
                    return Err(CallError::Closed(self.shared.dead().unwrap_or_else(|| "connection closed".into())));
                }
            }
        }
    }

    fn abandon(&self, id: u64, method: &str, reason: &str) {
        self.shared.pending.lock().unwrap_or_else(|e| e.into_inner()).remove(&id);
        self.wire.abandon(id);
        // The spec forbids cancelling initialize (the connection is closed instead).
        if self.shared.dead().is_none() && method != "initialize" {
            self.notify("notifications/cancelled", json!({"requestId": id, "reason": reason}));
        }
    }

    /// Send a notification (best effort: a dead connection shows on the next request).
    pub(crate) fn notify(&self, method: &str, params: Value) {
        let msg = json!({"jsonrpc": "2.0", "method": method, "params": params});
        if let Err(e) = self.wire.send(&msg, None) {
            self.shared.log.push(format!("[send failed] {method}: {e}"));
        }
    }

    /// Set what runs when the server says its tool list changed (must not block).
    pub(crate) fn on_tools_changed(&self, hook: Box<dyn Fn() + Send + Sync>) {
        *self.shared.on_tools_changed.lock().unwrap_or_else(|e| e.into_inner()) = Some(hook);
    }

    /// Whether the connection is gone.
    pub(crate) fn is_dead(&self) -> bool {
        self.shared.dead().is_some()
    }

    /// Stop the server (idempotent).
    pub(crate) fn close(&self) {
        self.shared.fail_all("the connection was closed".into());
        self.wire.close();
    }

    /// Open a connection and run the `initialize` handshake within `timeout` (or until `cancel`).
    pub(crate) fn open(
        transport: &super::config::Transport,
        timeout: Duration,
        call_timeout: Duration,
        log: Arc<Log>,
        cancel: Option<&CancelToken>,
    ) -> Result<Conn, String> {
        let shared = Shared::new(log);
        let wire: Box<dyn Wire> = match transport {
            super::config::Transport::Stdio { argv, env, cwd } => {
                Box::new(StdioWire::spawn(argv, env, cwd.as_deref(), shared.clone())?)
            }
            super::config::Transport::Http { url, headers } => {
                Box::new(HttpWire::new(url, headers, shared.clone(), call_timeout.max(timeout)))
            }
        };
        let mut conn =
            Conn { shared, wire, next_id: AtomicU64::new(0), protocol_version: String::new(), instructions: None };
        match conn.initialize(timeout, cancel) {
            Ok(()) => Ok(conn),
            Err(e) if cancel.is_some_and(CancelToken::is_cancelled) => {
                // Stopping the process may take a second (stdin, SIGTERM, SIGKILL): not on a cancelled caller.
                let _ = std::thread::Builder::new().name("tooloop-mcp-close".into()).spawn(move || conn.close());
                Err(e)
            }
            Err(e) => {
                conn.close();
                Err(e)
            }
        }
    }

    fn initialize(&mut self, timeout: Duration, cancel: Option<&CancelToken>) -> Result<(), String> {
        let params = json!({
            "protocolVersion": PROTOCOL_VERSION,
            "capabilities": {},
            "clientInfo": {"name": "tooloop", "version": env!("CARGO_PKG_VERSION")},
        });
        let result = self.request("initialize", params, timeout, cancel).map_err(|e| match e {
            CallError::Timeout(d) => format!("no answer to initialize within {:.1} s", d.as_secs_f64()),
            other => format!("initialize failed: {other}"),
        })?;
        let version = result.get("protocolVersion").and_then(Value::as_str).unwrap_or_default().to_string();
        if !SUPPORTED_VERSIONS.contains(&version.as_str()) {
            return Err(format!(
                "the server answered with protocol version {version:?}; tooloop speaks {}",
                SUPPORTED_VERSIONS.join(", ")
            ));
        }
        self.wire.set_protocol(&version);
        self.protocol_version = version;
        self.instructions =
            result.get("instructions").and_then(Value::as_str).filter(|s| !s.trim().is_empty()).map(str::to_string);
        let initialized = json!({"jsonrpc": "2.0", "method": "notifications/initialized"});
        self.wire.send_ordered(&initialized).map_err(|e| format!("sending notifications/initialized: {e}"))?;
        self.wire.ready();
        Ok(())
    }

    /// Every tool of the server, following `nextCursor` (at most 100 pages, against a looping server).
    pub(crate) fn list_tools(&self, timeout: Duration, cancel: Option<&CancelToken>) -> Result<Vec<Value>, CallError> {
        self.shared.tools_changed.store(false, Ordering::SeqCst);
        let mut tools = Vec::new();
        let mut cursor: Option<String> = None;
        for _ in 0..100 {
            let params = match &cursor {
                Some(c) => json!({"cursor": c}),
                None => json!({}),
            };
            let page = self.request("tools/list", params, timeout, cancel)?;
            if let Some(list) = page.get("tools").and_then(Value::as_array) {
                tools.extend(list.iter().cloned());
            }
            match page.get("nextCursor").and_then(Value::as_str) {
                Some(c) if !c.is_empty() => cursor = Some(c.to_string()),
                _ => return Ok(tools),
            }
        }
        Err(CallError::Rpc { code: 0, message: "tools/list returned more than 100 pages".into() })
    }
}

impl Conn {
    /// The server's process id (stdio).
    pub(crate) fn pid(&self) -> Option<u32> {
        self.wire.pid()
    }
}

impl Drop for Conn {
    fn drop(&mut self) {
        self.close();
    }
}

// ---------------------------------------------------------------------------------------------------------
// stdio

struct StdioWire {
    /// Lines for the writer thread; `None` once closed (dropping the sender closes the server's stdin).
    stdin: Arc<Mutex<Option<mpsc::Sender<Vec<u8>>>>>,
    child: Arc<Mutex<Option<Child>>>,
    pgid: i32,
    /// Started through `unshare` (the server is its child, process 1 of its own PID namespace).
    contained: bool,
}

/// Queue one line for the server. Never blocks: a server that stops reading its stdin fills the pipe and
/// stalls only the writer thread, while callers still time out or cancel.
fn write_line(stdin: &Mutex<Option<mpsc::Sender<Vec<u8>>>>, msg: &Value) -> Result<(), String> {
    let mut line = serde_json::to_vec(msg).map_err(|e| e.to_string())?;
    line.push(b'\n');
    let guard = stdin.lock().unwrap_or_else(|e| e.into_inner());
    let Some(tx) = guard.as_ref() else { return Err("the server's stdin is closed".into()) };
    tx.send(line).map_err(|_| "the server's stdin is closed".to_string())
}

/// Read one line (up to and including `\n`, or to EOF) into `buf`, keeping at most `max` bytes of it and
/// reading past the rest. Returns the line's full length, or `None` at EOF.
pub(crate) fn read_line_capped(r: &mut impl BufRead, buf: &mut Vec<u8>, max: usize) -> std::io::Result<Option<usize>> {
    buf.clear();
    let mut total = 0usize;
    loop {
        let (done, used) = {
            let chunk = match r.fill_buf() {
                Ok(c) => c,
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
                Err(e) => return Err(e),
            };
            if chunk.is_empty() {
                return Ok((total > 0).then_some(total));
            }
            let (line, done) = match memchr::memchr(b'\n', chunk) {
                Some(i) => (&chunk[..=i], true),
                None => (chunk, false),
            };
            let room = max.saturating_sub(buf.len());
            buf.extend_from_slice(&line[..line.len().min(room)]);
            (done, line.len())
        };
        r.consume(used);
        total = total.saturating_add(used);
        if done {
            return Ok(Some(total));
        }
    }
}

fn spawn_writer(mut pipe: ChildStdin, log: Arc<Log>) -> Result<mpsc::Sender<Vec<u8>>, String> {
    let (tx, rx) = mpsc::channel::<Vec<u8>>();
    std::thread::Builder::new()
        .name("tooloop-mcp-stdin".into())
        .spawn(move || {
            // A host that is not a Rust program (a C app) keeps SIGPIPE's default action, which ends the
            // whole process when a server that died is written to. Blocked on this thread (ours alone), the
            // write fails with EPIPE instead; the pending signal goes away with the thread.
            let mut pipe_signal = nix::sys::signal::SigSet::empty();
            pipe_signal.add(nix::sys::signal::Signal::SIGPIPE);
            let _ =
                nix::sys::signal::pthread_sigmask(nix::sys::signal::SigmaskHow::SIG_BLOCK, Some(&pipe_signal), None);
            // Ends when every sender is gone (close) or the pipe breaks; dropping `pipe` closes stdin.
            for line in rx {
                if let Err(e) = pipe.write_all(&line).and_then(|_| pipe.flush()) {
                    log.push(format!("[stdin] writing to the server failed: {e}"));
                    return;
                }
            }
        })
        .map_err(|e| format!("could not start the writer thread: {e}"))?;
    Ok(tx)
}

impl StdioWire {
    fn spawn(
        argv: &[String],
        env: &[(String, String)],
        cwd: Option<&str>,
        shared: Arc<Shared>,
    ) -> Result<Self, String> {
        use std::os::unix::process::CommandExt;
        let (program, args) = argv.split_first().ok_or("empty command")?;
        // The same process-tree guarantee as bash: where the kernel allows it, the server is process 1 of
        // a PID namespace of its own (util-linux `unshare --pid --fork --kill-child`), so when it ends — or
        // `unshare` is killed by close() — every process it started ends too, `setsid` ones included.
        // Elsewhere only its process group is killed.
        let contained = crate::builtin::process_containment();
        if contained && !program_exists(program, env, cwd) {
            // Said here, as a direct spawn would, rather than as `unshare`'s exit status 127.
            return Err(format!("could not start {program:?}: no such program"));
        }
        let mut cmd = if contained {
            // From PATH's absolute folders only: the server's folder may be the workspace.
            let unshare = crate::builtin::system_program("unshare").unwrap_or_else(|| "unshare".into());
            let mut c = Command::new(unshare);
            c.arg0("unshare"); // as listed before: the bare name
            c.args(crate::builtin::unshare_args()).arg(program);
            c
        } else {
            Command::new(program)
        };
        cmd.args(args).stdin(Stdio::piped()).stdout(Stdio::piped()).stderr(Stdio::piped());
        // The host's secrets (API keys, AWS credentials: the names bash never inherits either) are not
        // handed to a server silently: one that needs a key names it in its `env` ("${GITHUB_TOKEN}"),
        // where the approval question shows it. The official MCP SDKs pass a small safe set the same way.
        for (name, _) in std::env::vars_os() {
            let name = name.to_string_lossy().into_owned();
            if crate::builtin::is_secret_name(&name) && !env.iter().any(|(k, _)| *k == name) {
                cmd.env_remove(&name);
            }
        }
        cmd.envs(env.iter().map(|(k, v)| (k, v)));
        if let Some(dir) = cwd {
            cmd.current_dir(dir);
        }
        // Its own process group, so close() can stop the server and everything it started.
        cmd.process_group(0);
        let mut child = cmd.spawn().map_err(|e| format!("could not start {program:?}: {e}"))?;
        let pgid = i32::try_from(child.id()).map_err(|_| "process id out of range".to_string())?;
        let writer = match child.stdin.take().map(|p| spawn_writer(p, shared.log.clone())) {
            Some(Ok(tx)) => Some(tx),
            Some(Err(e)) => {
                let _ = child.kill();
                let _ = child.wait();
                return Err(e);
            }
            None => None,
        };
        let stdin = Arc::new(Mutex::new(writer));
        let stdout = child.stdout.take();
        let stderr = child.stderr.take();
        let child = Arc::new(Mutex::new(Some(child)));

        if let Some(err) = stderr {
            let log = shared.log.clone();
            let _ = std::thread::Builder::new().name("tooloop-mcp-stderr".into()).spawn(move || {
                let mut r = BufReader::new(err);
                let mut buf = Vec::new();
                // A line is kept up to MAX_STDERR_LINE_BYTES; the rest of it is read and thrown away, so a
                // server writing gigabytes without a newline costs no memory.
                while let Ok(Some(total)) = read_line_capped(&mut r, &mut buf, MAX_STDERR_LINE_BYTES) {
                    let mut line = String::from_utf8_lossy(&buf).trim_end().to_string();
                    if total > buf.len() {
                        line.push_str(&format!(" […] ({total} bytes in all)"));
                    }
                    log.push(line);
                }
            });
        }
        let Some(out) = stdout else { return Err("no stdout pipe".into()) };
        let (reader_stdin, reader_child) = (stdin.clone(), child.clone());
        let spawned = std::thread::Builder::new().name("tooloop-mcp-stdout".into()).spawn(move || {
            let mut r = BufReader::new(out);
            let mut buf = Vec::new();
            while let Ok(Some(total)) = read_line_capped(&mut r, &mut buf, MAX_MESSAGE_BYTES) {
                if total > buf.len() {
                    // A line past the cap: its head is dropped too (it cannot be parsed), nothing kept.
                    shared.log.push(format!("[stdout] a line of {total} bytes (over the cap) was dropped"));
                    continue;
                }
                let line = String::from_utf8_lossy(&buf);
                let line = line.trim();
                if line.is_empty() {
                    continue;
                }
                match serde_json::from_str::<Value>(line) {
                    Ok(msg) => shared.dispatch(msg, &|reply| {
                        if let Err(e) = write_line(&reader_stdin, &reply) {
                            shared.log.push(format!("[send failed] reply to the server: {e}"));
                        }
                    }),
                    Err(_) => shared.log.push(format!("[stdout, not JSON, ignored] {line}")),
                }
            }
            // stdout closed: the server exited (or closed it). Give the exit status a moment to appear.
            let mut status = None;
            for _ in 0..10 {
                let mut c = reader_child.lock().unwrap_or_else(|e| e.into_inner());
                match c.as_mut().map(Child::try_wait) {
                    Some(Ok(Some(s))) => {
                        status = Some(s.to_string());
                        break;
                    }
                    Some(Ok(None)) => {}
                    _ => break,
                }
                drop(c);
                std::thread::sleep(Duration::from_millis(10));
            }
            let mut why = format!("the server process ended ({})", status.as_deref().unwrap_or("stdout closed"));
            // Let the stderr reader catch up, so the tail says why.
            std::thread::sleep(Duration::from_millis(20));
            let tail = shared.log.tail(5);
            if !tail.is_empty() {
                why.push_str(&format!("; last stderr lines:\n{tail}"));
            }
            shared.fail_all(why);
        });
        if let Err(e) = spawned {
            let w = StdioWire { stdin, child, pgid, contained };
            w.close();
            return Err(format!("could not start the reader thread: {e}"));
        }
        Ok(StdioWire { stdin, child, pgid, contained })
    }
}

/// Whether `program` names an executable file: a path (relative to `cwd`), or a name found on the `PATH`
/// the server gets.
fn program_exists(program: &str, env: &[(String, String)], cwd: Option<&str>) -> bool {
    use std::os::unix::fs::PermissionsExt;
    let runnable =
        |p: &std::path::Path| std::fs::metadata(p).is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0);
    if program.contains('/') {
        let path = std::path::Path::new(program);
        return match cwd {
            Some(dir) if path.is_relative() => runnable(&std::path::Path::new(dir).join(path)),
            _ => runnable(path),
        };
    }
    let path =
        env.iter().rev().find(|(k, _)| k == "PATH").map(|(_, v)| v.clone()).or_else(|| std::env::var("PATH").ok());
    path.unwrap_or_default()
        .split(':')
        .filter(|d| !d.is_empty())
        .any(|d| runnable(&std::path::Path::new(d).join(program)))
}

/// Wait up to `limit` for the child to exit; true when it did (it is then reaped).
fn wait_exit(child: &mut Child, limit: Duration) -> bool {
    let deadline = Instant::now() + limit;
    loop {
        match child.try_wait() {
            Ok(Some(_)) | Err(_) => return true,
            Ok(None) if Instant::now() >= deadline => return false,
            Ok(None) => std::thread::sleep(Duration::from_millis(10)),
        }
    }
}

impl Wire for StdioWire {
    fn send(&self, msg: &Value, _request_id: Option<u64>) -> Result<(), String> {
        write_line(&self.stdin, msg)
    }

    fn pid(&self) -> Option<u32> {
        if self.contained {
            // The server is unshare's only child (it sees itself as pid 1; this is its pid out here).
            let children = std::fs::read_to_string(format!("/proc/{0}/task/{0}/children", self.pgid)).ok()?;
            return children.split_whitespace().next().and_then(|p| p.parse().ok());
        }
        u32::try_from(self.pgid).ok()
    }

    fn exited(&self) -> Option<String> {
        let mut guard = self.child.lock().unwrap_or_else(|e| e.into_inner());
        match guard.as_mut().map(Child::try_wait) {
            Some(Ok(Some(status))) => Some(format!("the server process ended ({status})")),
            _ => None,
        }
    }

    fn close(&self) {
        use nix::sys::signal::{Signal, killpg};
        use nix::unistd::Pid;
        // The spec's order: close stdin, then SIGTERM, then SIGKILL.
        self.stdin.lock().unwrap_or_else(|e| e.into_inner()).take();
        let mut guard = self.child.lock().unwrap_or_else(|e| e.into_inner());
        let Some(mut child) = guard.take() else { return };
        let group = Pid::from_raw(self.pgid);
        if !wait_exit(&mut child, Duration::from_millis(500)) {
            let _ = killpg(group, Signal::SIGTERM);
            if !wait_exit(&mut child, Duration::from_millis(1000)) {
                let _ = killpg(group, Signal::SIGKILL);
                let _ = child.wait();
            }
        }
        // Whatever the server left behind in its group goes too. The group id is the pid we have just
        // reaped; it cannot have been reused by a new group in these few microseconds.
        let _ = killpg(group, Signal::SIGKILL);
    }
}

impl Drop for StdioWire {
    fn drop(&mut self) {
        self.close();
    }
}

// ---------------------------------------------------------------------------------------------------------
// Streamable HTTP

struct HttpInner {
    client: HttpClient,
    url: String,
    headers: Vec<(String, String)>,
    session: Mutex<Option<String>>,
    protocol: Mutex<Option<String>>,
    shared: Arc<Shared>,
    closing: CancelToken,
    /// The cancel token of each request's POST, so an abandoned request's stream is dropped at once.
    inflight: Mutex<HashMap<u64, CancelToken>>,
}

struct HttpWire {
    inner: Arc<HttpInner>,
}

impl HttpWire {
    fn new(url: &str, headers: &[(String, String)], shared: Arc<Shared>, longest: Duration) -> Self {
        // No retries: a tools/call must not run twice. Our own wait enforces the per-call timeout; the
        // client's limits are backstops.
        let config = HttpConfig {
            max_retries: 0,
            idle_timeout: longest + Duration::from_secs(5),
            total_timeout: longest + Duration::from_secs(10),
            ..HttpConfig::default()
        };
        HttpWire {
            inner: Arc::new(HttpInner {
                client: HttpClient::new(config),
                url: url.to_string(),
                headers: headers.to_vec(),
                session: Mutex::new(None),
                protocol: Mutex::new(None),
                shared,
                closing: CancelToken::new(),
                inflight: Mutex::new(HashMap::new()),
            }),
        }
    }
}

impl HttpInner {
    fn request_headers(&self) -> Vec<(String, String)> {
        let mut h = vec![
            ("Content-Type".to_string(), "application/json".to_string()),
            ("Accept".to_string(), "application/json, text/event-stream".to_string()),
        ];
        if let Some(s) = self.session.lock().unwrap_or_else(|e| e.into_inner()).clone() {
            h.push(("Mcp-Session-Id".into(), s));
        }
        if let Some(v) = self.protocol.lock().unwrap_or_else(|e| e.into_inner()).clone() {
            h.push(("MCP-Protocol-Version".into(), v));
        }
        h.extend(self.headers.iter().cloned());
        h
    }

    /// POST one message and feed whatever comes back (JSON or an SSE stream) to the dispatcher.
    fn post(self: &Arc<Self>, body: Vec<u8>, request_id: Option<u64>) -> Result<(), String> {
        let req = HttpRequest { url: self.url.clone(), headers: self.request_headers(), body };
        let token = CancelToken::new();
        if let Some(id) = request_id {
            self.inflight.lock().unwrap_or_else(|e| e.into_inner()).insert(id, token.clone());
        }
        if self.closing.is_cancelled() {
            token.cancel();
        }
        let result = self.post_with(&req, request_id, &token);
        if let Some(id) = request_id {
            self.inflight.lock().unwrap_or_else(|e| e.into_inner()).remove(&id);
        }
        result
    }

    fn post_with(
        self: &Arc<Self>,
        req: &HttpRequest,
        request_id: Option<u64>,
        token: &CancelToken,
    ) -> Result<(), String> {
        let mut resp = match self.client.send_once(req, token) {
            Ok(r) => r,
            Err(e) => {
                // The server is unreachable: this connection is over (the next use opens a new one).
                let why = format!("the HTTP server is unreachable: {e}");
                if !token.is_cancelled() {
                    self.shared.fail_all(why.clone());
                }
                if let Some(id) = request_id {
                    self.shared.resolve(id, Err(CallError::Closed(why.clone())));
                }
                return Err(why);
            }
        };
        if let Some(s) = resp.header("mcp-session-id") {
            let mut slot = self.session.lock().unwrap_or_else(|e| e.into_inner());
            if slot.is_none() {
                *slot = Some(s.to_string());
            }
        }
        let status = resp.status;
        if !(200..300).contains(&status) {
            let body = read_capped(&mut resp, 64 * 1024).unwrap_or_default();
            let text = String::from_utf8_lossy(&body);
            let mut why = format!("HTTP {status}: {}", text.chars().take(500).collect::<String>());
            if status == 404 && self.session.lock().unwrap_or_else(|e| e.into_inner()).is_some() {
                why = format!("the server ended the session (HTTP 404); {why}");
                // Mark the connection dead before our caller wakes, so its retry opens a new session.
                let ours =
                    request_id.and_then(|id| self.shared.pending.lock().unwrap_or_else(|e| e.into_inner()).remove(&id));
                self.shared.fail_all(why.clone());
                if let Some(tx) = ours {
                    let _ = tx.try_send(Err(CallError::Expired(why.clone())));
                }
            } else if let Some(id) = request_id {
                // The server refused this request; the connection itself is fine.
                self.shared.resolve(id, Err(CallError::Rpc { code: i64::from(status), message: why.clone() }));
            }
            return Err(why);
        }
        let Some(id) = request_id else { return Ok(()) };
        let ctype = resp.header("content-type").unwrap_or("").to_ascii_lowercase();
        let answer = |reply: Value| self.answer(reply);
        let answered = |msg: &Value| msg.get("id").and_then(Value::as_u64) == Some(id) && msg.get("method").is_none();
        if ctype.starts_with("text/event-stream") {
            let mut decoder = SseDecoder::new();
            let mut events = Vec::new();
            loop {
                let chunk = match resp.next_chunk() {
                    Ok(Some(c)) => c,
                    Ok(None) => break,
                    Err(e) => return Err(format!("the event stream broke: {e:?}")),
                };
                decoder.feed(&chunk, &mut events);
                if decoder.pending_bytes() > MAX_MESSAGE_BYTES {
                    return Err(format!("the server sent an event of more than {MAX_MESSAGE_BYTES} bytes"));
                }
                for ev in events.drain(..) {
                    if ev.data.trim().is_empty() {
                        continue;
                    }
                    match serde_json::from_str::<Value>(&ev.data) {
                        Ok(msg) => {
                            let done = answered(&msg);
                            self.shared.dispatch(msg, &answer);
                            if done {
                                return Ok(());
                            }
                        }
                        Err(_) => self.shared.log.push(format!("[event, not JSON, ignored] {}", ev.data)),
                    }
                }
            }
            Err("the event stream ended without an answer".into())
        } else {
            let body = read_capped(&mut resp, MAX_MESSAGE_BYTES)?;
            let msg: Value = serde_json::from_slice(&body).map_err(|e| {
                format!(
                    "the response is not JSON ({e}): {}",
                    String::from_utf8_lossy(&body).chars().take(200).collect::<String>()
                )
            })?;
            self.shared.dispatch(msg, &answer);
            Ok(())
        }
    }
}

/// The whole body, refused past `max` bytes (never held beyond that).
fn read_capped(resp: &mut HttpResponse, max: usize) -> Result<Vec<u8>, String> {
    let mut body = Vec::new();
    loop {
        match resp.next_chunk() {
            Ok(Some(chunk)) => {
                if body.len() + chunk.len() > max {
                    return Err(format!("the response is larger than {max} bytes"));
                }
                body.extend_from_slice(&chunk);
            }
            Ok(None) => return Ok(body),
            Err(e) => return Err(format!("reading the response: {e:?}")),
        }
    }
}

impl HttpInner {
    /// Send our reply to a request of the server (on its own thread: we may be inside a read loop).
    fn answer(self: &Arc<Self>, reply: Value) {
        let me = self.clone();
        let _ = std::thread::Builder::new().name("tooloop-mcp-http".into()).spawn(move || {
            if let Ok(b) = serde_json::to_vec(&reply) {
                if let Err(e) = me.post(b, None) {
                    me.shared.log.push(format!("[send failed] reply to the server: {e}"));
                }
            }
        });
    }

    /// Open the GET event stream on which the server sends what is not tied to a request
    /// (`tools/list_changed` among others). A server without one answers 405: nothing is lost but those.
    /// The thread ends when the stream does: `close` ends the session (DELETE), which ends the stream.
    fn listen(self: &Arc<Self>) {
        let me = self.clone();
        let _ = std::thread::Builder::new().name("tooloop-mcp-http-get".into()).spawn(move || {
            let agent: ureq::Agent = ureq::Agent::config_builder()
                .http_status_as_error(false)
                // Our headers (tokens) never follow a redirect: a redirected stream is "not offered".
                .max_redirects(0)
                .timeout_connect(Some(me.client.config().connect_timeout))
                .build()
                .into();
            let mut req = agent.get(&me.url);
            for (k, v) in me.request_headers() {
                if !k.eq_ignore_ascii_case("content-type") && !k.eq_ignore_ascii_case("accept") {
                    req = req.header(k.as_str(), v.as_str());
                }
            }
            let resp = match req.header("Accept", "text/event-stream").call() {
                Ok(r) => r,
                Err(e) => {
                    me.shared.log.push(format!("[GET stream] not opened: {e}"));
                    return;
                }
            };
            if resp.status().as_u16() != 200 {
                me.shared.log.push(format!("[GET stream] not offered (HTTP {})", resp.status().as_u16()));
                return;
            }
            let mut reader = resp.into_body().into_with_config().limit(u64::MAX).reader();
            let (mut decoder, mut events, mut buf) = (SseDecoder::new(), Vec::new(), vec![0u8; 8192]);
            loop {
                let n = match std::io::Read::read(&mut reader, &mut buf) {
                    Ok(0) | Err(_) => return,
                    Ok(n) => n,
                };
                if me.closing.is_cancelled() {
                    return;
                }
                decoder.feed(&buf[..n], &mut events);
                if decoder.pending_bytes() > MAX_MESSAGE_BYTES {
                    me.shared.log.push(format!(
                        "[GET stream] an event of more than {MAX_MESSAGE_BYTES} bytes: the stream was closed"
                    ));
                    return;
                }
                for ev in events.drain(..) {
                    match serde_json::from_str::<Value>(&ev.data) {
                        Ok(msg) => me.shared.dispatch(msg, &|reply| me.answer(reply)),
                        Err(_) if ev.data.trim().is_empty() => {}
                        Err(_) => me.shared.log.push(format!("[event, not JSON, ignored] {}", ev.data)),
                    }
                }
            }
        });
    }
}

impl Wire for HttpWire {
    fn send(&self, msg: &Value, request_id: Option<u64>) -> Result<(), String> {
        let body = serde_json::to_vec(msg).map_err(|e| e.to_string())?;
        let inner = self.inner.clone();
        // Each POST on its own thread: the caller waits (with cancel and timeout) on its reply channel.
        std::thread::Builder::new()
            .name("tooloop-mcp-http".into())
            .spawn(move || {
                if let Err(e) = inner.post(body, request_id) {
                    match request_id {
                        Some(id) => {
                            inner.shared.resolve(id, Err(CallError::Closed(e)));
                        }
                        None => inner.shared.log.push(format!("[send failed] {e}")),
                    }
                }
            })
            .map(|_| ())
            .map_err(|e| format!("could not start an HTTP thread: {e}"))
    }

    fn send_ordered(&self, msg: &Value) -> Result<(), String> {
        let body = serde_json::to_vec(msg).map_err(|e| e.to_string())?;
        self.inner.post(body, None)
    }

    fn ready(&self) {
        self.inner.listen();
    }

    fn abandon(&self, id: u64) {
        if let Some(t) = self.inner.inflight.lock().unwrap_or_else(|e| e.into_inner()).remove(&id) {
            t.cancel();
        }
    }

    fn set_protocol(&self, version: &str) {
        *self.inner.protocol.lock().unwrap_or_else(|e| e.into_inner()) = Some(version.to_string());
    }

    fn close(&self) {
        if self.inner.closing.is_cancelled() {
            return;
        }
        self.inner.closing.cancel();
        for (_, t) in self.inner.inflight.lock().unwrap_or_else(|e| e.into_inner()).drain() {
            t.cancel();
        }
        // End the session on the server (best effort, short timeout).
        let session = self.inner.session.lock().unwrap_or_else(|e| e.into_inner()).take();
        if let Some(s) = session {
            let agent: ureq::Agent = ureq::Agent::config_builder()
                .http_status_as_error(false)
                .max_redirects(0)
                .timeout_global(Some(Duration::from_secs(2)))
                .build()
                .into();
            let mut req = agent.delete(&self.inner.url).header("Mcp-Session-Id", &s);
            for (k, v) in &self.inner.headers {
                req = req.header(k.as_str(), v.as_str());
            }
            let _ = req.call();
        }
    }
}
