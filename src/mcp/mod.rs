//! MCP (Model Context Protocol) client: start the configured servers, register each server tool as a tooloop
//! tool named `mcp__<server>__<tool>`, and run calls on them.
//!
//! - Protocol: the `initialize` handshake era, asking for revision **2025-11-25** and accepting what the
//!   server answers down to 2024-11-05 ([`conn::SUPPORTED_VERSIONS`]). The stateless 2026-07-28 revision is
//!   not spoken; servers of that revision still answer the handshake.
//! - Transports: stdio (a child process in its own process group, newline-delimited JSON-RPC, stderr kept
//!   in a ring buffer shown by [`McpServers::status`] and in errors, never in results) and Streamable HTTP
//!   (POSTs answered with JSON or an SSE stream, `Mcp-Session-Id`, `MCP-Protocol-Version`).
//! - Blocking and small on purpose, on the crate's own HTTP and SSE layers rather than the async `rmcp` SDK:
//!   no async runtime enters the core, and requests are multiplexed by id, so calls may run concurrently
//!   (tools the server marks `readOnlyHint` are parallel-safe). Cost: no new crate (the core's normal
//!   dependency tree stays at 39 distinct crates), where `rmcp` 3.11 with its child-process and
//!   Streamable-HTTP client transports plus tokio resolves to 109 (tokio, reqwest, hyper, futures, …).
//!
//! Must never: let a misbehaving server hang a run (every wait has a timeout and honours cancel), turn a
//! server failure into anything but an `is_error` result, or leave a server process running after
//! [`McpServers::close`] or drop.

mod config;
pub mod conn;
mod names;
mod secrets;

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, Weak};
use std::time::Duration;

use serde_json::{Value, json};

pub use config::{DEFAULT_CALL_TIMEOUT, DEFAULT_INIT_TIMEOUT, McpCommand, McpServerConfig};
use conn::{CallError, Conn, Log};

use crate::cancel::CancelToken;
use crate::error::Result;
use crate::tools::{Tool, ToolContext, ToolError, ToolHandler, ToolOutput, ToolRegistry};

/// How many times a server that died is started again before it is given up.
pub const MAX_RESTARTS: u32 = 3;
/// Longest instructions kept per server in [`McpServers::instructions`] (bytes).
pub const MAX_INSTRUCTIONS_BYTES: usize = 2048;
/// Largest image (its base64 data, in bytes) a tool result may carry: the Messages API refuses a request
/// with an image over 5 MB, and the conversation would keep failing with it.
pub const MAX_IMAGE_BASE64_BYTES: usize = 5 * 1024 * 1024;
/// Most images kept from one tool result.
pub const MAX_IMAGES_PER_RESULT: usize = 20;
/// Image types the model APIs accept.
pub const IMAGE_TYPES: [&str; 4] = ["image/png", "image/jpeg", "image/gif", "image/webp"];

/// Where a server stands.
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "snake_case")]
#[non_exhaustive]
pub enum McpState {
    /// Started and answering.
    Connected,
    /// It died; it is started again on its next use (up to [`MAX_RESTARTS`] times).
    Disconnected,
    /// It could not be started (or restarted): its tools answer with an error.
    Failed,
    /// Being restarted right now (other fields of its status are left empty meanwhile).
    Starting,
    /// Closed by [`McpServers::close`].
    Closed,
}

/// A server's state, for a `/mcp` command. Reading it never waits for a restart in progress.
#[derive(Clone, Debug, serde::Serialize)]
pub struct McpServerStatus {
    /// The configured name.
    pub name: String,
    /// Where it stands.
    pub state: McpState,
    /// The registered (public) tool names.
    pub tools: Vec<String>,
    /// The protocol revision agreed in `initialize`, when connected once.
    pub protocol_version: Option<String>,
    /// Restarts so far.
    pub restarts: u32,
    /// Why it failed or disconnected, if it did.
    pub error: Option<String>,
    /// The last lines of its stderr (stdio servers) and notes about output we ignored.
    pub log_tail: String,
}

/// A server that could not be started: reported and skipped.
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize)]
pub struct McpStartError {
    /// The configured name.
    pub server: String,
    /// Why (the message names the server too).
    pub reason: String,
}

struct Registered {
    public: String,
}

struct Inner {
    conn: Option<Arc<Conn>>,
    tools: Vec<Registered>,
    restarts: u32,
    error: Option<String>,
    failed: bool,
    protocol_version: Option<String>,
    instructions: Option<String>,
}

struct Server {
    name: String,
    config: McpServerConfig,
    registry: ToolRegistry,
    call_timeout: Duration,
    init_timeout: Duration,
    log: Arc<Log>,
    closed: AtomicBool,
    /// A restart is under way (it holds `inner`): status reports it without waiting.
    starting: AtomicBool,
    inner: Mutex<Inner>,
    me: Weak<Server>,
}

/// The running MCP servers of one agent, and their tools in its registry.
///
/// ```no_run
/// use std::collections::BTreeMap;
/// use tooloop::mcp::{McpServerConfig, McpServers};
/// use tooloop::ToolRegistry;
///
/// let configs: BTreeMap<String, McpServerConfig> =
///     serde_json::from_str(r#"{"files": {"command": "mcp-files", "args": ["--root", "."]}}"#).unwrap();
/// let registry = ToolRegistry::new();
/// let servers = McpServers::start(&configs, &registry).unwrap();
/// for f in servers.failures() {
///     eprintln!("{}", f.reason); // e.g. "MCP server 'files' did not start: could not start \"mcp-files\": …"
/// }
/// let extra_system_prompt = servers.instructions();
/// // … run the agent with `registry`; tools are named mcp__files__<tool> …
/// servers.close(); // also on drop
/// ```
///
/// # Threads and cloning
/// `Send + Sync`; not `Clone` (it owns the server processes): share it in an `Arc`. Tool calls may run on
/// any thread, concurrently. [`McpServers::close`] (also run on drop) unregisters the tools and stops every
/// server; calls in flight then end with an error result.
pub struct McpServers {
    servers: Vec<Arc<Server>>,
    failures: Vec<McpStartError>,
}

impl std::fmt::Debug for McpServers {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("McpServers")
            .field("servers", &self.servers.iter().map(|s| &s.name).collect::<Vec<_>>())
            .field("failures", &self.failures)
            .finish()
    }
}

impl McpServers {
    /// Start every server of `configs` (in name order), register its tools into `registry`. A server that
    /// fails to start is skipped and reported in [`McpServers::failures`] (name and reason); it is kept in
    /// [`McpServers::status`] as `Failed`. Servers start in parallel, each within its `init_timeout`; their
    /// tools are registered in name order.
    pub fn start(configs: &BTreeMap<String, McpServerConfig>, registry: &ToolRegistry) -> Result<McpServers> {
        let mut servers = Vec::new();
        let mut failures = Vec::new();
        let lookup = |var: &str| std::env::var(var).ok();
        for (name, config) in configs {
            // What the server is handed from the user's environment never comes back through a result.
            registry.add_secrets(secrets::config_secrets(config, &lookup));
            let (call_timeout, init_timeout) = match (config.call_timeout(), config.start_timeout()) {
                (Ok(c), Ok(i)) => (c, i),
                (Err(e), _) | (_, Err(e)) => {
                    failures.push(McpStartError { server: name.clone(), reason: format!("MCP server '{name}': {e}") });
                    continue;
                }
            };
            let server = Arc::new_cyclic(|me| Server {
                name: name.clone(),
                config: config.clone(),
                registry: registry.clone(),
                call_timeout,
                init_timeout,
                log: Arc::new(Log::default()),
                closed: AtomicBool::new(false),
                starting: AtomicBool::new(false),
                inner: Mutex::new(Inner {
                    conn: None,
                    tools: Vec::new(),
                    restarts: 0,
                    error: None,
                    failed: false,
                    protocol_version: None,
                    instructions: None,
                }),
                me: me.clone(),
            });
            servers.push(server);
        }
        // Start them all at once (each within its own init_timeout), then register in name order, so tool
        // names never depend on which server answered first.
        let opened: Vec<_> = std::thread::scope(|scope| {
            let handles: Vec<_> = servers.iter().map(|s| scope.spawn(move || s.open(None))).collect();
            handles
                .into_iter()
                .map(|h| h.join().unwrap_or_else(|_| Err("the start thread panicked".to_string())))
                .collect()
        });
        for (server, result) in servers.iter().zip(opened) {
            let mut inner = server.lock();
            match result {
                Ok((conn, tools)) => server.install(&mut inner, conn, &tools),
                Err(reason) => {
                    inner.failed = true;
                    inner.error = Some(reason.clone());
                    failures.push(McpStartError { server: server.name.clone(), reason });
                }
            }
        }
        Ok(McpServers { servers, failures })
    }

    /// The servers that could not be started, with the reason.
    pub fn failures(&self) -> &[McpStartError] {
        &self.failures
    }

    /// The servers' `instructions` (from `initialize`), each under a `## MCP server <name>` heading and cut
    /// to [`MAX_INSTRUCTIONS_BYTES`], for the system prompt. Empty when no server gave any.
    pub fn instructions(&self) -> String {
        let mut out = Vec::new();
        for s in &self.servers {
            let inner = s.lock();
            if let Some(text) = &inner.instructions {
                let mut text = text.trim().to_string();
                if text.len() > MAX_INSTRUCTIONS_BYTES {
                    text.truncate(crate::text::floor_boundary(&text, MAX_INSTRUCTIONS_BYTES));
                    text.push_str(" […]");
                }
                out.push(format!("## MCP server {}\n{text}", s.name));
            }
        }
        out.join("\n\n")
    }

    /// Every configured server's state, in name order.
    pub fn status(&self) -> Vec<McpServerStatus> {
        self.servers
            .iter()
            .map(|s| {
                if s.starting.load(Ordering::SeqCst) {
                    return McpServerStatus {
                        name: s.name.clone(),
                        state: McpState::Starting,
                        tools: Vec::new(),
                        protocol_version: None,
                        restarts: 0,
                        error: None,
                        log_tail: s.log.tail(20),
                    };
                }
                let inner = s.lock();
                let state = if s.closed.load(Ordering::SeqCst) {
                    McpState::Closed
                } else if inner.failed {
                    McpState::Failed
                } else if inner.conn.as_ref().is_some_and(|c| !c.is_dead()) {
                    McpState::Connected
                } else {
                    McpState::Disconnected
                };
                let error = inner.error.clone().or_else(|| inner.conn.as_ref().and_then(|c| c.shared.dead()));
                McpServerStatus {
                    name: s.name.clone(),
                    state,
                    tools: inner.tools.iter().map(|t| t.public.clone()).collect(),
                    protocol_version: inner.protocol_version.clone(),
                    restarts: inner.restarts,
                    error,
                    log_tail: s.log.tail(20),
                }
            })
            .collect()
    }

    /// Send `ping` to server `name` and wait up to `timeout` for its answer; returns the round-trip time.
    /// Does not restart a dead server (that happens on the next tool call).
    pub fn ping(&self, name: &str, timeout: Duration) -> std::result::Result<Duration, String> {
        let s = self.servers.iter().find(|s| s.name == name).ok_or_else(|| format!("no MCP server named '{name}'"))?;
        let conn = s.lock().conn.clone().ok_or_else(|| format!("MCP server '{name}' is not connected"))?;
        let started = std::time::Instant::now();
        conn.request("ping", json!({}), timeout, None).map_err(|e| format!("MCP server '{name}': ping failed: {e}"))?;
        Ok(started.elapsed())
    }

    /// The process id of a stdio server's current process (for tests and diagnostics).
    pub fn server_pid(&self, name: &str) -> Option<u32> {
        let s = self.servers.iter().find(|s| s.name == name)?;
        let inner = s.lock();
        inner.conn.as_ref().and_then(|c| c.pid())
    }

    /// Unregister every MCP tool and stop every server (stdin closed, then SIGTERM, then SIGKILL to its
    /// process group; HTTP sessions are ended with DELETE). Idempotent; also run on drop.
    pub fn close(&self) {
        for s in &self.servers {
            s.closed.store(true, Ordering::SeqCst);
            let mut inner = s.lock();
            for t in inner.tools.drain(..) {
                s.registry.unregister(&t.public);
            }
            if let Some(c) = inner.conn.take() {
                c.close();
            }
        }
    }
}

impl Drop for McpServers {
    fn drop(&mut self) {
        self.close();
    }
}

impl Server {
    fn lock(&self) -> std::sync::MutexGuard<'_, Inner> {
        self.inner.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Start (or restart) the server, list its tools and register them. Errors name the server.
    fn connect(&self, inner: &mut Inner, cancel: Option<&CancelToken>) -> std::result::Result<(), String> {
        let (conn, tools) = self.open(cancel)?;
        self.install(inner, conn, &tools);
        Ok(())
    }

    /// Start the server and list its tools (no lock held: servers start in parallel).
    fn open(&self, cancel: Option<&CancelToken>) -> std::result::Result<(Arc<Conn>, Vec<Value>), String> {
        let name = &self.name;
        let lookup = |var: &str| std::env::var(var).ok();
        let transport = self.config.transport(&lookup).map_err(|e| format!("MCP server '{name}': {e}"))?;
        // Checked at every start, restarts included: the code a user approved may have been rewritten.
        self.config.check_pins().map_err(|e| format!("MCP server '{name}': {e}"))?;
        let conn = Conn::open(&transport, self.init_timeout, self.call_timeout, self.log.clone(), cancel)
            .map_err(|e| self.with_log(format!("MCP server '{name}' did not start: {e}")))?;
        let conn = Arc::new(conn);
        // A list_changed outside a call (HTTP's GET stream, or an idle server): re-list on a short-lived
        // thread so the registry is current before the model's next request.
        let me = self.me.clone();
        let weak_conn = Arc::downgrade(&conn);
        conn.on_tools_changed(Box::new(move || {
            let (me, weak_conn) = (me.clone(), weak_conn.clone());
            let _ = std::thread::Builder::new().name("tooloop-mcp-relist".into()).spawn(move || {
                if let (Some(server), Some(conn)) = (me.upgrade(), weak_conn.upgrade()) {
                    server.refresh(&conn);
                }
            });
        }));
        let tools = conn
            .list_tools(self.init_timeout, cancel)
            .map_err(|e| self.with_log(format!("MCP server '{name}': tools/list failed: {e}")))?;
        Ok((conn, tools))
    }

    /// Make `conn` the live connection and register `tools`.
    fn install(&self, inner: &mut Inner, conn: Arc<Conn>, tools: &[Value]) {
        inner.protocol_version = Some(conn.protocol_version.clone());
        inner.instructions = conn.instructions.as_ref().map(|t| self.scrub(t));
        inner.conn = Some(conn);
        inner.error = None;
        self.sync_tools(inner, tools);
    }

    /// Text the server sends about itself, before the model sees it: secrets it names (`API_KEY=…`) are
    /// registered for redaction, and every registered secret is replaced.
    fn scrub(&self, text: &str) -> String {
        self.registry.add_secrets(secrets::named_values(text));
        self.registry.redact(text.to_string())
    }

    fn with_log(&self, mut msg: String) -> String {
        let tail = self.log.tail(5);
        if !tail.is_empty() && !msg.contains(&tail) {
            msg.push_str(&format!("; last stderr lines:\n{tail}"));
        }
        msg
    }

    /// Make the registry hold exactly `tools` of this server (names stable across re-lists and restarts).
    fn sync_tools(&self, inner: &mut Inner, tools: &[Value]) {
        for t in inner.tools.drain(..) {
            self.registry.unregister(&t.public);
        }
        let mut mine: Vec<Registered> = Vec::new();
        for t in tools {
            let Some(mcp) = t.get("name").and_then(Value::as_str) else {
                self.log.push(format!("[ignored] a tool without a name: {t}"));
                continue;
            };
            let public = names::tool_name(&self.name, mcp, &|n| {
                self.registry.get(n).is_some() || mine.iter().any(|r| r.public == n)
            });
            let schema = t.get("inputSchema").cloned().unwrap_or_else(|| json!({"type": "object"}));
            let schema = serde_json::from_str(&self.scrub(&schema.to_string())).unwrap_or(schema);
            let description = self.scrub(t.get("description").and_then(Value::as_str).unwrap_or_default());
            let read_only = t.pointer("/annotations/readOnlyHint").and_then(Value::as_bool).unwrap_or(false);
            let handler = McpToolHandler { server: self.me.clone(), tool: mcp.to_string() };
            match Tool::from_arc(public.clone(), description, schema, Arc::new(handler))
                .map(|mut tool| {
                    // The hint is the server's word, not the host's: it says what the tool does (progress,
                    // rendering), but does not make it `read_only`, so no host runs it unasked on that word.
                    if read_only {
                        tool.kind = crate::tools::ToolKind::Read;
                    }
                    tool.parallel_safe(read_only)
                })
                .and_then(|tool| self.registry.register(tool))
            {
                Ok(()) => mine.push(Registered { public }),
                Err(e) => self.log.push(format!("[skipped tool {mcp:?}] {e}")),
            }
        }
        inner.tools = mine;
    }

    /// The live connection: restarted when it died (bounded), re-listed when the tool list changed.
    fn ready(&self, cancel: &CancelToken) -> std::result::Result<Arc<Conn>, String> {
        let name = &self.name;
        let mut inner = self.lock();
        if self.closed.load(Ordering::SeqCst) {
            return Err(format!("MCP server '{name}' is closed"));
        }
        let alive = inner.conn.as_ref().filter(|c| !c.is_dead()).cloned();
        let conn = match alive {
            Some(c) => c,
            None => {
                if inner.failed && inner.restarts >= MAX_RESTARTS {
                    return Err(format!(
                        "MCP server '{name}' is unavailable (gave up after {MAX_RESTARTS} restarts): {}",
                        inner.error.as_deref().unwrap_or("unknown error")
                    ));
                }
                if inner.restarts >= MAX_RESTARTS {
                    inner.failed = true;
                    return Err(format!("MCP server '{name}' died and was already restarted {MAX_RESTARTS} times"));
                }
                self.starting.store(true, Ordering::SeqCst);
                inner.restarts += 1;
                if let Some(old) = inner.conn.take() {
                    old.close();
                }
                let connected = self.connect(&mut inner, Some(cancel));
                self.starting.store(false, Ordering::SeqCst);
                if let Err(e) = connected {
                    if cancel.is_cancelled() {
                        // Our run was cancelled during the restart: not the server's failure.
                        inner.restarts -= 1;
                        return Err(format!("MCP server '{name}': cancelled while restarting"));
                    }
                    inner.failed = true;
                    inner.error = Some(e.clone());
                    return Err(e);
                }
                inner.failed = false;
                inner.conn.clone().ok_or_else(|| format!("MCP server '{name}' has no connection"))?
            }
        };
        if conn.shared.tools_changed.load(Ordering::SeqCst) {
            self.relist(&mut inner, &conn);
        }
        Ok(conn)
    }

    /// Re-list if the server said its tools changed and `conn` is still the live connection.
    fn refresh(&self, conn: &Arc<Conn>) {
        if conn.is_dead() || self.closed.load(Ordering::SeqCst) {
            return;
        }
        let mut inner = self.lock();
        let current = inner.conn.as_ref().is_some_and(|c| Arc::ptr_eq(c, conn));
        if current && conn.shared.tools_changed.load(Ordering::SeqCst) && !self.closed.load(Ordering::SeqCst) {
            self.relist(&mut inner, conn);
        }
    }

    fn relist(&self, inner: &mut Inner, conn: &Conn) {
        match conn.list_tools(self.init_timeout, None) {
            Ok(tools) => self.sync_tools(inner, &tools),
            Err(e) => self.log.push(format!("[tools/list after list_changed failed] {e}")),
        }
    }

    fn call(&self, tool: &str, input: &Value, ctx: &ToolContext<'_>) -> std::result::Result<ToolOutput, ToolError> {
        let name = &self.name;
        let params = json!({"name": tool, "arguments": input});
        let mut conn = self.ready(ctx.cancel).map_err(ToolError::Respond)?;
        let mut result = conn.request("tools/call", params.clone(), self.call_timeout, Some(ctx.cancel));
        if let Err(CallError::Expired(_)) = &result {
            // The HTTP session expired before the server saw the call: open a new one and send it again.
            conn = self.ready(ctx.cancel).map_err(ToolError::Respond)?;
            result = conn.request("tools/call", params, self.call_timeout, Some(ctx.cancel));
        }
        // A list_changed sent during the call: re-list now, before the model's next request.
        self.refresh(&conn);
        match result {
            Ok(r) => convert_result(&r),
            Err(CallError::Rpc { code, message }) => Err(ToolError::Respond(format!(
                "MCP server '{name}' refused the call to '{tool}' (error {code}): {message}"
            ))),
            Err(CallError::Timeout(d)) => Err(ToolError::Respond(format!(
                "MCP tool '{tool}' of server '{name}' did not answer within {:.0} s and was cancelled",
                d.as_secs_f64()
            ))),
            Err(CallError::Cancelled) => Err(ToolError::Respond(format!("MCP tool '{tool}' was cancelled"))),
            Err(CallError::Closed(why) | CallError::Expired(why)) => Err(ToolError::Respond(format!(
                "MCP server '{name}' failed during the call to '{tool}': {why}. It will be restarted on its next use."
            ))),
        }
    }
}

struct McpToolHandler {
    server: Weak<Server>,
    tool: String,
}

impl ToolHandler for McpToolHandler {
    fn call(&self, input: &Value, ctx: &ToolContext<'_>) -> std::result::Result<ToolOutput, ToolError> {
        match self.server.upgrade() {
            Some(s) => s.call(&self.tool, input, ctx),
            None => Err(ToolError::Respond(format!("the MCP server of tool '{}' is closed", self.tool))),
        }
    }
}

/// A `tools/call` result as a tool output: text stays text, images become Anthropic image blocks, embedded
/// resources become text with their URI, `structuredContent` is used when there is no content;
/// `isError: true` makes an error the model reads.
///
/// An image the API would refuse (over [`MAX_IMAGE_BASE64_BYTES`], beyond [`MAX_IMAGES_PER_RESULT`], not one
/// of [`IMAGE_TYPES`], not base64) never enters the conversation, where it would fail every later request:
/// the result becomes an error saying which and why, with the rest of its text.
pub(crate) fn convert_result(r: &Value) -> std::result::Result<ToolOutput, ToolError> {
    let mut blocks: Vec<Value> = Vec::new();
    let (mut images, mut refused) = (0usize, Vec::<String>::new());
    for item in r.get("content").and_then(Value::as_array).into_iter().flatten() {
        let kind = item.get("type").and_then(Value::as_str).unwrap_or("");
        let s = |k: &str| item.get(k).and_then(Value::as_str).unwrap_or("").to_string();
        match kind {
            "text" => blocks.push(json!({"type": "text", "text": s("text")})),
            "image" => match check_image(&s("mimeType"), item.get("data"), images) {
                Ok(()) => {
                    images += 1;
                    blocks.push(json!({"type": "image", "source": {
                        "type": "base64", "media_type": s("mimeType"), "data": s("data")}}));
                }
                Err(why) => {
                    refused.push(why.clone());
                    blocks.push(json!({"type": "text", "text": format!("[{why}]")}));
                }
            },
            "resource" => {
                let res = item.get("resource").cloned().unwrap_or(Value::Null);
                let uri = res.get("uri").and_then(Value::as_str).unwrap_or("");
                let text = match (res.get("text").and_then(Value::as_str), res.get("blob").and_then(Value::as_str)) {
                    (Some(t), _) => format!("[resource {uri}]\n{t}"),
                    (None, Some(b)) => format!(
                        "[resource {uri}: binary {}, {} bytes base64, not shown]",
                        res.get("mimeType").and_then(Value::as_str).unwrap_or("data"),
                        b.len()
                    ),
                    _ => format!("[resource {uri}]"),
                };
                blocks.push(json!({"type": "text", "text": text}));
            }
            "resource_link" => {
                blocks.push(json!({"type": "text", "text": format!("[resource link {} {}]", s("uri"), s("name"))}))
            }
            "audio" => blocks.push(json!({"type": "text", "text": format!("[audio {} not shown]", s("mimeType"))})),
            other => blocks.push(json!({"type": "text", "text": format!("[unsupported content {other:?}]: {item}")})),
        }
    }
    let has_text = blocks.iter().any(|b| b["type"] == "text");
    if !has_text {
        if let Some(sc) = r.get("structuredContent").filter(|v| !v.is_null()) {
            blocks.push(json!({"type": "text", "text": sc.to_string()}));
        }
    }
    let all_text = blocks.iter().all(|b| b["type"] == "text");
    let is_error = r.get("isError").and_then(Value::as_bool).unwrap_or(false) || !refused.is_empty();
    if is_error || all_text {
        let text = blocks.iter().filter_map(|b| b["text"].as_str()).collect::<Vec<_>>().join("\n");
        if !refused.is_empty() {
            return Err(ToolError::Respond(format!(
                "the tool's result held an image the model cannot be sent ({}); the rest of the result:\n{text}",
                refused.join("; ")
            )));
        }
        if is_error {
            return Err(ToolError::Respond(if text.is_empty() { "the tool reported an error".into() } else { text }));
        }
        return Ok(ToolOutput::Text(text));
    }
    Ok(ToolOutput::Blocks(blocks))
}

/// Why an image cannot go to the model, if it cannot.
fn check_image(mime: &str, data: Option<&Value>, kept: usize) -> std::result::Result<(), String> {
    let data = data.and_then(Value::as_str).unwrap_or("");
    if !IMAGE_TYPES.contains(&mime) {
        return Err(format!(
            "an image of type {:?}, which the model API does not accept",
            crate::text::ellipsize(mime, 60)
        ));
    }
    if data.len() > MAX_IMAGE_BASE64_BYTES {
        return Err(format!(
            "an image of {} bytes (base64), over the {} bytes the model API accepts",
            data.len(),
            MAX_IMAGE_BASE64_BYTES
        ));
    }
    if kept >= MAX_IMAGES_PER_RESULT {
        return Err(format!("more than {MAX_IMAGES_PER_RESULT} images"));
    }
    let base64 = |b: u8| b.is_ascii_alphanumeric() || matches!(b, b'+' | b'/' | b'=');
    if data.is_empty() || data.len() % 4 != 0 || !data.bytes().all(base64) {
        return Err("an image whose data is not base64".into());
    }
    Ok(())
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod tests {
    use super::*;

    #[test]
    fn results_convert_text_images_resources_structured_and_errors() {
        let r = json!({"content": [{"type": "text", "text": "a"}, {"type": "text", "text": "b"}]});
        assert_eq!(convert_result(&r), Ok(ToolOutput::Text("a\nb".into())));
        let r = json!({"content": [], "structuredContent": {"x": 1}});
        assert_eq!(convert_result(&r), Ok(ToolOutput::Text("{\"x\":1}".into())));
        let r = json!({"content": [{"type": "image", "data": "AAAA", "mimeType": "image/png"},
                                   {"type": "resource", "resource": {"uri": "file:///a", "text": "hi"}}]});
        let Ok(ToolOutput::Blocks(b)) = convert_result(&r) else { panic!("blocks") };
        assert_eq!(
            b[0],
            json!({"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": "AAAA"}})
        );
        assert_eq!(b[1]["text"], "[resource file:///a]\nhi");
        let r = json!({"content": [{"type": "text", "text": "boom"}], "isError": true});
        assert_eq!(convert_result(&r), Err(ToolError::Respond("boom".into())));
    }

    #[test]
    fn images_the_api_would_refuse_become_an_error_result_with_the_rest_of_the_text() {
        let big = "A".repeat(MAX_IMAGE_BASE64_BYTES + 4);
        for (image, why) in [
            (json!({"type": "image", "data": big, "mimeType": "image/png"}), "over the"),
            (json!({"type": "image", "data": "AAAA", "mimeType": "image/bmp"}), "does not accept"),
            (json!({"type": "image", "data": "not base64!", "mimeType": "image/png"}), "not base64"),
        ] {
            let r = json!({"content": [{"type": "text", "text": "kept"}, image]});
            let Err(ToolError::Respond(m)) = convert_result(&r) else { panic!("{why}: not an error") };
            assert!(m.contains(why) && m.contains("kept") && m.len() < 1000, "{m}");
        }
        let many: Vec<Value> = (0..MAX_IMAGES_PER_RESULT + 1)
            .map(|_| json!({"type": "image", "data": "AAAA", "mimeType": "image/png"}))
            .collect();
        let Err(ToolError::Respond(m)) = convert_result(&json!({"content": many})) else { panic!("too many") };
        assert!(m.contains(&format!("more than {MAX_IMAGES_PER_RESULT} images")), "{m}");
    }

    #[test]
    fn mcp_servers_is_send_and_sync() {
        fn is<T: Send + Sync>() {}
        is::<McpServers>();
    }
}
