//! The tool registry: name → schema + handler. Handlers are Rust closures or host callbacks behind one
//! trait. Input is checked before the handler runs; every failure a model can fix becomes an `is_error`
//! result it can read, while a handler may also end the run on purpose ([`ToolError::Fatal`]).
//!
//! Must never: let a handler panic escape, send a result whose own text is larger than the configured limit
//! (a cut result keeps `limit` bytes of it and adds a one-line note saying how much was cut), or let a
//! registered secret through (see [`ToolRegistry::add_secrets`]).

use std::panic::{AssertUnwindSafe, catch_unwind};
use std::sync::{Arc, RwLock};
use std::time::{Duration, Instant};

use serde_json::{Map, Value};

use crate::cancel::CancelToken;
use crate::error::{Error, Result};
use crate::types::{ToolSpec, ToolUseBlock};

mod kind;
mod timeout;

pub use kind::{KIND_NAMES, ToolKind, builtin_kind};

/// Default cap on a result's size, in bytes of text.
pub const DEFAULT_MAX_OUTPUT_BYTES: usize = 50 * 1024;

/// What a tool produced.
#[derive(Clone, Debug, PartialEq)]
pub enum ToolOutput {
    /// Plain text.
    Text(String),
    /// Content blocks (text, image, …) as the Messages API takes them in a `tool_result`.
    Blocks(Vec<Value>),
}

impl From<String> for ToolOutput {
    fn from(s: String) -> Self {
        ToolOutput::Text(s)
    }
}

impl From<&str> for ToolOutput {
    fn from(s: &str) -> Self {
        ToolOutput::Text(s.to_string())
    }
}

/// How a tool failed.
#[derive(Clone, Debug, PartialEq)]
pub enum ToolError {
    /// The model should read this and adapt (sent as an `is_error` result; the run goes on).
    Respond(String),
    /// End the run on purpose (the run returns [`Error::ToolAborted`]).
    Fatal(String),
}

/// What a handler sees besides its input.
#[derive(Debug)]
pub struct ToolContext<'a> {
    /// The `tool_use` id being answered.
    pub tool_use_id: &'a str,
    /// The tool's name.
    pub tool_name: &'a str,
    /// The run's cancel token: long-running tools should poll it.
    pub cancel: &'a CancelToken,
    /// The call was approved only as read-only ([`crate::Permission::AllowReadOnly`]): a tool that can
    /// confine itself ([`Tool::confinable`]) must run with no power to write (the built-in `bash` runs under
    /// the kernel's read-only sandbox, network off). Always false for a tool that cannot.
    pub read_only: bool,
}

/// A tool's implementation.
pub trait ToolHandler: Send + Sync {
    /// Run the tool on `input` (a JSON object that passed the schema check).
    fn call(&self, input: &Value, ctx: &ToolContext<'_>) -> std::result::Result<ToolOutput, ToolError>;
}

impl<F> ToolHandler for F
where
    F: Fn(&Value, &ToolContext<'_>) -> std::result::Result<ToolOutput, ToolError> + Send + Sync,
{
    fn call(&self, input: &Value, ctx: &ToolContext<'_>) -> std::result::Result<ToolOutput, ToolError> {
        self(input, ctx)
    }
}

/// A registered tool.
#[derive(Clone)]
pub struct Tool {
    /// What the model sees.
    pub spec: ToolSpec,
    /// The implementation.
    pub handler: Arc<dyn ToolHandler>,
    /// Whether calls may run concurrently with other parallel-safe calls of the same turn.
    pub parallel_safe: bool,
    /// Whether the tool only reads: it changes no file, state or anything outside (codex's `is_mutating`,
    /// inverted). Hosts use it for policies such as "ask before anything that writes"; default false.
    pub read_only: bool,
    /// Whether the handler honours [`ToolContext::read_only`], confining itself to reading (the built-in
    /// `bash` does, through the kernel). A call approved only as read-only
    /// ([`crate::Permission::AllowReadOnly`]) of a tool that is neither `read_only` nor `confinable` is
    /// refused, never run with its full power; default false.
    pub confinable: bool,
    /// Whether the same call with the same input gives the same answer (default true). `false` for a tool
    /// such as `roll_dice`, `next_page` or a poll: the runaway and progress guards (`repeat_guard`,
    /// `progress_guard`) never refuse, count or comment on its calls.
    pub idempotent: bool,
    /// What the tool does ([`ToolKind`]; default [`ToolKind::Other`]): the loop's file-change events,
    /// progress detection and permission rules read it, never the tool's name.
    pub kind: ToolKind,
}

impl std::fmt::Debug for Tool {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Tool")
            .field("name", &self.spec.name)
            .field("parallel_safe", &self.parallel_safe)
            .field("read_only", &self.read_only)
            .field("confinable", &self.confinable)
            .field("idempotent", &self.idempotent)
            .field("kind", &self.kind)
            .finish()
    }
}

/// Check a tool name against `^[a-zA-Z0-9_-]{1,64}$` (the portable rule across providers).
pub fn check_name(name: &str) -> Result<()> {
    let ok = !name.is_empty()
        && name.len() <= 64
        && name.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-');
    if ok {
        Ok(())
    } else {
        Err(Error::Config(format!("invalid tool name {name:?}: names must match ^[a-zA-Z0-9_-]{{1,64}}$")))
    }
}

impl Tool {
    /// A tool. Fails when the name is invalid or the schema is not a JSON object of `"type": "object"`.
    pub fn new(
        name: impl Into<String>,
        description: impl Into<String>,
        input_schema: Value,
        handler: impl ToolHandler + 'static,
    ) -> Result<Self> {
        Self::from_arc(name.into(), description.into(), input_schema, Arc::new(handler))
    }

    /// Like [`Tool::new`] with a shared handler.
    pub fn from_arc(
        name: String,
        description: String,
        input_schema: Value,
        handler: Arc<dyn ToolHandler>,
    ) -> Result<Self> {
        check_name(&name)?;
        let Value::Object(schema) = &input_schema else {
            return Err(Error::Config(format!(
                "tool '{name}': input_schema must be a JSON object, got {input_schema}"
            )));
        };
        if let Some(t) = schema.get("type") {
            if t != "object" {
                return Err(Error::Config(format!(
                    "tool '{name}': input_schema must have \"type\": \"object\", got {t}"
                )));
            }
        }
        let mut schema = schema.clone();
        schema.entry("type").or_insert_with(|| Value::String("object".into()));
        Ok(Tool {
            spec: ToolSpec { name, description, input_schema: Value::Object(schema), extra: Map::new() },
            handler,
            parallel_safe: false,
            read_only: false,
            confinable: false,
            idempotent: true,
            kind: ToolKind::Other,
        })
    }

    /// Mark the tool as safe to run concurrently with other parallel-safe tools.
    pub fn parallel_safe(mut self, yes: bool) -> Self {
        self.parallel_safe = yes;
        self
    }

    /// Mark the tool as read-only (it changes nothing).
    pub fn read_only(mut self, yes: bool) -> Self {
        self.read_only = yes;
        self
    }

    /// Mark the handler as one that confines itself to reading when [`ToolContext::read_only`] is set.
    pub fn confinable(mut self, yes: bool) -> Self {
        self.confinable = yes;
        self
    }

    /// Mark the tool as not idempotent (`false`): calling it again with the same input may rightly bring
    /// something new, so no repetition guard refuses or judges its calls.
    pub fn idempotent(mut self, yes: bool) -> Self {
        self.idempotent = yes;
        self
    }

    /// Say what the tool does ([`ToolKind`]). [`ToolKind::Read`] also marks it [read-only](Tool::read_only).
    ///
    /// # Errors
    /// [`Error::Config`] when a [`ToolKind::Write`]'s `path_field` is not a string property of the tool's
    /// input schema.
    pub fn kind(mut self, kind: ToolKind) -> Result<Self> {
        kind.check(&self.spec.input_schema).map_err(|m| Error::Config(format!("tool '{}': {m}", self.spec.name)))?;
        self.read_only |= kind == ToolKind::Read;
        self.kind = kind;
        Ok(self)
    }

    /// Limit each call to `limit`: the handler runs on a thread of its own, and a call that overruns is
    /// answered with an `is_error` result at once while the handler's [`ToolContext::cancel`] fires (so it
    /// can stop, if it polls it). A stuck handler never holds up the run; its thread ends when it returns.
    pub fn timeout(mut self, limit: std::time::Duration) -> Self {
        self.handler = Arc::new(timeout::TimeoutHandler { inner: self.handler, limit });
        self
    }
}

/// The outcome of one call, ready to become a `tool_result`.
#[derive(Clone, Debug, PartialEq)]
pub struct CallOutcome {
    /// A string or an array of blocks.
    pub content: Value,
    /// Whether the model should read it as an error.
    pub is_error: bool,
    /// Set when the handler asked to end the run.
    pub fatal: Option<String>,
    /// How long the handler ran.
    pub duration: Duration,
}

impl CallOutcome {
    /// An error result the model reads.
    pub fn error(message: impl Into<String>) -> Self {
        CallOutcome { content: Value::String(message.into()), is_error: true, fatal: None, duration: Duration::ZERO }
    }
}

/// The registry.
///
/// # Threads and cloning
/// Clones share the same tools. Registration and lookup take a short lock; handlers run without it.
#[derive(Clone, Default)]
pub struct ToolRegistry {
    tools: Arc<RwLock<Vec<Tool>>>,
    max_output_bytes: Arc<std::sync::atomic::AtomicUsize>,
    /// Values replaced by `[redacted]` in every result; held in memory only, never logged or written.
    secrets: Arc<RwLock<Vec<String>>>,
    /// Paths the current run holds read-only (see [`ToolRegistry::set_run_protected`]).
    run_protected: RunProtected,
}

/// Workspace paths (relative) a run holds read-only beyond the built-in `bash`'s own `protected_paths`:
/// the files a run's `check` command runs or names (see [`crate::check`]). Shared by a registry and the
/// built-in tools registered in it; empty between runs.
#[derive(Clone, Debug, Default)]
pub struct RunProtected(Arc<RwLock<Vec<std::path::PathBuf>>>);

impl RunProtected {
    /// The paths held read-only now.
    pub fn get(&self) -> Vec<std::path::PathBuf> {
        self.0.read().unwrap_or_else(|e| e.into_inner()).clone()
    }

    fn set(&self, paths: Vec<std::path::PathBuf>) {
        *self.0.write().unwrap_or_else(|e| e.into_inner()) = paths;
    }
}

/// What a secret value is replaced with in tool results.
pub const REDACTED: &str = "[redacted]";

/// Secrets shorter than this are not redacted: a value such as `1` or `true` cannot be told apart from
/// ordinary text, and replacing it everywhere would garble every result. Real keys are far longer.
pub const MIN_SECRET_LEN: usize = 8;

impl std::fmt::Debug for ToolRegistry {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_list().entries(self.names()).finish()
    }
}

impl ToolRegistry {
    /// An empty registry with the default output limit.
    pub fn new() -> Self {
        let r = ToolRegistry::default();
        r.set_max_output_bytes(DEFAULT_MAX_OUTPUT_BYTES);
        r
    }

    /// Set the cap on a result's text size (bytes).
    pub fn set_max_output_bytes(&self, n: usize) {
        self.max_output_bytes.store(n.max(1), std::sync::atomic::Ordering::Relaxed);
    }

    /// Redact these values from every tool result from now on: each exact occurrence becomes
    /// [`REDACTED`] before the result is stored, sent, written to the session or shown in an event. Values
    /// shorter than [`MIN_SECRET_LEN`] are ignored. The values stay in memory only.
    pub fn add_secrets(&self, values: impl IntoIterator<Item = String>) {
        let mut secrets = self.secrets.write().unwrap_or_else(|e| e.into_inner());
        for v in values {
            if v.len() >= MIN_SECRET_LEN && !secrets.contains(&v) {
                secrets.push(v);
            }
        }
        // Longest first, so a secret that contains another is replaced whole.
        secrets.sort_by_key(|s| std::cmp::Reverse(s.len()));
    }

    /// Hold these workspace paths (relative) read-only for the built-in `bash` from now on, beside its own
    /// `protected_paths` (empty: none). The loop sets the run's check files here and clears them at its end.
    pub fn set_run_protected(&self, paths: Vec<std::path::PathBuf>) {
        self.run_protected.set(paths);
    }

    /// The shared set behind [`ToolRegistry::set_run_protected`], for a tool that honours it.
    pub fn run_protected(&self) -> RunProtected {
        self.run_protected.clone()
    }

    /// Redact `other`'s secrets here too (a child agent's tools hide what the parent's hide).
    pub fn share_secrets(&self, other: &ToolRegistry) {
        let theirs = other.secrets.read().unwrap_or_else(|e| e.into_inner()).clone();
        self.add_secrets(theirs);
    }

    /// `text` with every registered secret replaced by [`REDACTED`].
    pub fn redact(&self, text: String) -> String {
        let secrets = self.secrets.read().unwrap_or_else(|e| e.into_inner());
        redact_with(&secrets, text)
    }

    /// Host text that reaches the conversation as a tool result or a message (a hook's deny reason or
    /// replacement result, `on_stop`'s continuation, a permission callable's reason): redacted and cut to
    /// the output limit with the same marker as a tool's own output, so no hook can put megabytes into a
    /// request.
    pub fn cap_text(&self, text: String) -> String {
        truncate_output(self.redact(text), self.max_output_bytes.load(std::sync::atomic::Ordering::Relaxed))
    }

    fn redact_output(&self, out: ToolOutput) -> ToolOutput {
        let secrets = self.secrets.read().unwrap_or_else(|e| e.into_inner());
        if secrets.is_empty() {
            return out;
        }
        match out {
            ToolOutput::Text(t) => ToolOutput::Text(redact_with(&secrets, t)),
            ToolOutput::Blocks(mut blocks) => {
                for b in &mut blocks {
                    redact_json(&secrets, b);
                }
                ToolOutput::Blocks(blocks)
            }
        }
    }

    /// Add a tool. A duplicate name is [`Error::DuplicateTool`] (the old tool stays).
    pub fn register(&self, tool: Tool) -> Result<()> {
        let mut tools = self.tools.write().unwrap_or_else(|e| e.into_inner());
        if tools.iter().any(|t| t.spec.name == tool.spec.name) {
            return Err(Error::DuplicateTool { name: tool.spec.name.clone() });
        }
        tools.push(tool);
        Ok(())
    }

    /// Remove a tool; returns whether it existed.
    pub fn unregister(&self, name: &str) -> bool {
        let mut tools = self.tools.write().unwrap_or_else(|e| e.into_inner());
        let before = tools.len();
        tools.retain(|t| t.spec.name != name);
        before != tools.len()
    }

    /// The tool called `name`.
    pub fn get(&self, name: &str) -> Option<Tool> {
        self.tools.read().unwrap_or_else(|e| e.into_inner()).iter().find(|t| t.spec.name == name).cloned()
    }

    /// Names, in registration order.
    pub fn names(&self) -> Vec<String> {
        self.tools.read().unwrap_or_else(|e| e.into_inner()).iter().map(|t| t.spec.name.clone()).collect()
    }

    /// What the model is offered, in registration order.
    pub fn specs(&self) -> Vec<ToolSpec> {
        self.tools.read().unwrap_or_else(|e| e.into_inner()).iter().map(|t| t.spec.clone()).collect()
    }

    /// Run one call: unknown tool, invalid input, a handler error or panic all become `is_error` results.
    pub fn execute(&self, call: &ToolUseBlock, cancel: &CancelToken) -> CallOutcome {
        self.execute_as(call, cancel, false)
    }

    /// Run one call approved only as read-only when `read_only` (see [`crate::Permission::AllowReadOnly`]):
    /// a read-only tool runs as it is, a [confinable](Tool::confinable) one confined, any other is refused
    /// with a reason the model reads.
    pub fn execute_as(&self, call: &ToolUseBlock, cancel: &CancelToken, read_only: bool) -> CallOutcome {
        let started = Instant::now();
        let Some(tool) = self.get(&call.name) else {
            let names = self.names();
            return CallOutcome::error(format!(
                "Unknown tool '{}'. Available tools: {}.",
                call.name,
                if names.is_empty() { "none".to_string() } else { names.join(", ") }
            ));
        };
        if let Err(msg) = validate_input(&tool.spec.input_schema, &call.input) {
            return CallOutcome::error(format!(
                "Invalid input for tool '{}': {msg}. Fix the arguments and call it again.",
                call.name
            ));
        }
        if read_only && !tool.read_only && !tool.confinable {
            return CallOutcome::error(format!(
                "Permission denied: this call was allowed only if it changes nothing, and {} cannot be held to \
                 that (it is not a read-only tool)",
                call.name
            ));
        }
        let read_only = read_only && tool.confinable;
        let ctx = ToolContext { tool_use_id: &call.id, tool_name: &call.name, cancel, read_only };
        let result = catch_unwind(AssertUnwindSafe(|| tool.handler.call(&call.input, &ctx))).map(|r| match r {
            // Secrets go before the size cap: a cut must never leave part of one behind.
            Ok(out) => Ok(self.redact_output(out)),
            Err(ToolError::Respond(m)) => Err(ToolError::Respond(self.redact(m))),
            Err(ToolError::Fatal(m)) => Err(ToolError::Fatal(self.redact(m))),
        });
        let duration = started.elapsed();
        let max = self.max_output_bytes.load(std::sync::atomic::Ordering::Relaxed);
        let mut out = match result {
            Ok(Ok(ToolOutput::Text(t))) => {
                CallOutcome { content: Value::String(truncate_output(t, max)), is_error: false, fatal: None, duration }
            }
            Ok(Ok(ToolOutput::Blocks(blocks))) => CallOutcome {
                content: Value::Array(truncate_blocks(blocks, max)),
                is_error: false,
                fatal: None,
                duration,
            },
            Ok(Err(ToolError::Respond(m))) => CallOutcome::error(truncate_output(m, max)),
            Ok(Err(ToolError::Fatal(m))) => CallOutcome {
                content: Value::String(format!("The tool aborted the run: {m}")),
                is_error: true,
                fatal: Some(m),
                duration,
            },
            Err(panic) => {
                let what = panic
                    .downcast_ref::<&str>()
                    .map(|s| s.to_string())
                    .or_else(|| panic.downcast_ref::<String>().cloned())
                    .unwrap_or_else(|| "unknown panic".to_string());
                let what = self.redact(what);
                CallOutcome::error(format!(
                    "Tool '{}' crashed (panic: {what}). Try different input or another approach.",
                    call.name
                ))
            }
        };
        out.duration = duration;
        out
    }
}

fn redact_with(secrets: &[String], mut text: String) -> String {
    for s in secrets {
        if text.contains(s.as_str()) {
            text = text.replace(s.as_str(), REDACTED);
        }
    }
    text
}

fn redact_json(secrets: &[String], v: &mut Value) {
    match v {
        Value::String(s) if secrets.iter().any(|x| s.contains(x.as_str())) => {
            *s = redact_with(secrets, std::mem::take(s));
        }
        Value::Array(items) => items.iter_mut().for_each(|i| redact_json(secrets, i)),
        Value::Object(map) => map.values_mut().for_each(|i| redact_json(secrets, i)),
        _ => {}
    }
}

/// Cut `text` to at most `max` bytes (at a char boundary), keeping the head and saying how much was cut.
pub fn truncate_output(text: String, max: usize) -> String {
    if text.len() <= max {
        return text;
    }
    let end = crate::text::floor_boundary(&text, max);
    let cut = text.len() - end;
    format!(
        "{}\n[output truncated: {cut} of {} bytes were cut; ask for less output or a narrower range]",
        &text[..end],
        text.len()
    )
}

/// Cut the text of `blocks` to `max` bytes in all. Text blocks past the budget are dropped (one note says how
/// many), not kept as a byte plus a note each: that would let many small blocks go far past the limit.
fn truncate_blocks(blocks: Vec<Value>, max: usize) -> Vec<Value> {
    let mut budget = max;
    let (mut dropped, mut dropped_bytes) = (0usize, 0usize);
    let mut out = Vec::with_capacity(blocks.len());
    for mut b in blocks {
        if let Some(Value::String(t)) = b.get_mut("text") {
            if budget == 0 {
                dropped += 1;
                dropped_bytes += t.len();
                continue;
            }
            let taken = std::mem::take(t);
            let len = taken.len();
            *t = truncate_output(taken, budget);
            budget = budget.saturating_sub(len);
        }
        out.push(b);
    }
    if dropped > 0 {
        let note = format!(
            "[output truncated: {dropped} more text block(s) ({dropped_bytes} bytes) were cut; \
             ask for less output or a narrower range]"
        );
        out.push(serde_json::json!({"type": "text", "text": note}));
    }
    out
}

fn type_matches(expected: &str, v: &Value) -> bool {
    match expected {
        "string" => v.is_string(),
        "integer" => v.is_i64() || v.is_u64() || v.as_f64().is_some_and(|f| f.fract() == 0.0),
        "number" => v.is_number(),
        "boolean" => v.is_boolean(),
        "array" => v.is_array(),
        "object" => v.is_object(),
        "null" => v.is_null(),
        _ => true,
    }
}

fn type_name(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "boolean",
        Value::Number(n) if n.is_f64() => "number",
        Value::Number(_) => "integer",
        Value::String(_) => "string",
        Value::Array(_) => "array",
        Value::Object(_) => "object",
    }
}

/// Check `value` against the schema's `type`, `enum`, and for objects `required` and each property's
/// schema (recursively), for arrays each item. Returns a message the model can act on.
pub fn validate_input(schema: &Value, value: &Value) -> std::result::Result<(), String> {
    if let Value::String(raw) = value {
        if schema.get("type").and_then(Value::as_str) == Some("object") {
            return Err(format!("the arguments are not a valid JSON object: {raw:?}"));
        }
    }
    check(schema, value, "input")
}

fn check(schema: &Value, value: &Value, path: &str) -> std::result::Result<(), String> {
    let Some(schema) = schema.as_object() else { return Ok(()) };
    match schema.get("type") {
        Some(Value::String(t)) if !type_matches(t, value) => {
            return Err(format!("{path} must be of type {t}, got {}", type_name(value)));
        }
        Some(Value::Array(ts)) => {
            let names: Vec<&str> = ts.iter().filter_map(Value::as_str).collect();
            if !names.is_empty() && !names.iter().any(|t| type_matches(t, value)) {
                return Err(format!("{path} must be one of the types {}, got {}", names.join(" | "), type_name(value)));
            }
        }
        _ => {}
    }
    if let Some(Value::Array(allowed)) = schema.get("enum") {
        if !allowed.contains(value) {
            let list: Vec<String> = allowed.iter().map(Value::to_string).collect();
            return Err(format!("{path} must be one of {}, got {value}", list.join(", ")));
        }
    }
    if let Value::Object(obj) = value {
        if let Some(Value::Array(req)) = schema.get("required") {
            let missing: Vec<&str> = req.iter().filter_map(Value::as_str).filter(|k| !obj.contains_key(*k)).collect();
            if !missing.is_empty() {
                return Err(format!("{path} is missing required field(s): {}", missing.join(", ")));
            }
        }
        if let Some(Value::Object(props)) = schema.get("properties") {
            for (k, v) in obj {
                if let Some(s) = props.get(k) {
                    check(s, v, &format!("{path}.{k}"))?;
                } else if schema.get("additionalProperties") == Some(&Value::Bool(false)) {
                    let known: Vec<&str> = props.keys().map(String::as_str).collect();
                    return Err(format!("{path} has an unknown field '{k}' (known: {})", known.join(", ")));
                }
            }
        }
    }
    if let (Value::Array(items), Some(item_schema)) = (value, schema.get("items")) {
        for (i, item) in items.iter().enumerate() {
            check(item_schema, item, &format!("{path}[{i}]"))?;
        }
    }
    Ok(())
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use serde_json::json;

    fn call(name: &str, input: Value) -> ToolUseBlock {
        ToolUseBlock { id: "toolu_1".into(), name: name.into(), input, extra: Map::new() }
    }

    fn registry() -> ToolRegistry {
        let r = ToolRegistry::new();
        let schema = json!({"type": "object", "properties": {"city": {"type": "string"}, "days": {"type": "integer"},
            "unit": {"type": "string", "enum": ["c", "f"]}}, "required": ["city"]});
        r.register(
            Tool::new("weather", "w", schema, |i: &Value, _: &ToolContext<'_>| {
                Ok(ToolOutput::Text(format!("sunny in {}", i["city"].as_str().unwrap_or("?"))))
            })
            .unwrap(),
        )
        .unwrap();
        r.register(
            Tool::new(
                "boom",
                "",
                json!({"type": "object"}),
                |_: &Value, _: &ToolContext<'_>| -> std::result::Result<ToolOutput, ToolError> { panic!("kaboom") },
            )
            .unwrap(),
        )
        .unwrap();
        r.register(
            Tool::new("big", "", json!({}), |_: &Value, _: &ToolContext<'_>| Ok(ToolOutput::Text("é".repeat(40_000))))
                .unwrap(),
        )
        .unwrap();
        r.register(
            Tool::new("stop", "", json!({}), |_: &Value, _: &ToolContext<'_>| Err(ToolError::Fatal("enough".into())))
                .unwrap(),
        )
        .unwrap();
        r
    }

    #[test]
    fn names_are_checked() {
        assert!(check_name("get_weather-2").is_ok());
        for bad in ["", "has space", "dot.name", &"x".repeat(65), "ünï"] {
            assert!(check_name(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn schema_must_be_an_object_schema() {
        let h = |_: &Value, _: &ToolContext<'_>| Ok(ToolOutput::Text(String::new()));
        assert!(Tool::new("a", "", json!("nope"), h).is_err());
        assert!(Tool::new("a", "", json!({"type": "array"}), h).is_err());
    }

    #[test]
    fn duplicate_names_are_refused() {
        let r = registry();
        let h = |_: &Value, _: &ToolContext<'_>| Ok(ToolOutput::Text(String::new()));
        let e = r.register(Tool::new("weather", "", json!({}), h).unwrap()).unwrap_err();
        assert!(matches!(&e, Error::DuplicateTool { name } if name == "weather"), "{e:?}");
        assert_eq!(e.to_string(), "a tool named 'weather' is already registered");
    }

    #[test]
    fn unknown_tool_lists_the_available_ones() {
        let out = registry().execute(&call("nope", json!({})), &CancelToken::new());
        assert!(out.is_error);
        assert!(out.content.as_str().unwrap().contains("Available tools: weather, boom, big, stop"));
    }

    #[test]
    fn invalid_input_is_reported_before_the_handler_runs() {
        let r = registry();
        let c = CancelToken::new();
        let missing = r.execute(&call("weather", json!({})), &c);
        assert!(missing.content.as_str().unwrap().contains("missing required field(s): city"));
        let wrong = r.execute(&call("weather", json!({"city": 5})), &c);
        assert!(wrong.content.as_str().unwrap().contains("input.city must be of type string"));
        let bad_enum = r.execute(&call("weather", json!({"city": "x", "unit": "k"})), &c);
        assert!(bad_enum.content.as_str().unwrap().contains("must be one of"));
        let not_json = r.execute(&call("weather", Value::String("{\"city\": \"Par".into())), &c);
        assert!(not_json.content.as_str().unwrap().contains("not a valid JSON object"));
        assert!(
            r.execute(&call("weather", json!({"city": "Paris", "days": 2})), &c).content == json!("sunny in Paris")
        );
    }

    #[test]
    fn a_panicking_handler_becomes_an_error_result() {
        let out = registry().execute(&call("boom", json!({})), &CancelToken::new());
        assert!(out.is_error);
        assert!(out.content.as_str().unwrap().contains("kaboom"));
    }

    #[test]
    fn long_output_is_cut_with_a_note() {
        let out = registry().execute(&call("big", json!({})), &CancelToken::new());
        let text = out.content.as_str().unwrap();
        assert!(text.len() < DEFAULT_MAX_OUTPUT_BYTES + 200);
        assert!(text.contains("[output truncated: 28800 of 80000 bytes were cut"), "{}", &text[text.len() - 120..]);
    }

    #[test]
    fn many_text_blocks_are_cut_to_the_limit_in_all_with_one_note() {
        let r = ToolRegistry::new();
        let blocks = |_: &Value, _: &ToolContext<'_>| {
            Ok(ToolOutput::Blocks((0..2000).map(|_| json!({"type": "text", "text": "y".repeat(1024)})).collect()))
        };
        r.register(Tool::new("many", "", json!({}), blocks).unwrap()).unwrap();
        let out = r.execute(&call("many", json!({})), &CancelToken::new());
        let items = out.content.as_array().unwrap();
        let total: usize = items.iter().map(|b| b["text"].as_str().unwrap().len()).sum();
        assert!(total < DEFAULT_MAX_OUTPUT_BYTES + 300, "{total} bytes of text went through");
        assert_eq!(items.len(), 51, "50 full blocks and one note");
        assert!(items[50]["text"].as_str().unwrap().contains("1950 more text block(s) (1996800 bytes) were cut"));
    }

    #[test]
    fn fatal_error_is_flagged() {
        let out = registry().execute(&call("stop", json!({})), &CancelToken::new());
        assert_eq!(out.fatal.as_deref(), Some("enough"));
    }
}
