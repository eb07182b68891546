//! Agent options: the one description of how to build an [`Agent`], shared by every door.
//!
//! The C binding parses its config JSON straight into [`AgentOptions`]; the Python binding turns its
//! keyword arguments into the same JSON object; the `tooloop` command passes its flags through Python. So a
//! key, its default and its checks are written once, here, and every door refuses the same bad values with
//! the same message.
//!
//! Must never: accept a key it does not know (a typo such as `max_token` would otherwise pass silently),
//! accept a value the first request would fail on (a base URL that does not parse, a header with a line
//! break), or echo the API key in an error.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use serde::de::{Deserializer, Error as _};
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value, json};

use crate::agent::{Agent, AgentBuilder, AgentConfig, MaxTurnsPolicy, RepeatGuard};
use crate::defaults;
use crate::error::{Error, Result};
use crate::provider::{Protocol, Provider, ProviderConfig, Secret};
pub use crate::text::with_text;

/// Largest `max_tokens` accepted: far above any model's output limit, far below overflow.
pub const MAX_TOKENS_LIMIT: u32 = 1 << 24;
/// Longest `timeout` accepted, in seconds (one week): anything longer is a mistake, not a wish.
pub const TIMEOUT_LIMIT_SECS: f64 = 7.0 * 24.0 * 3600.0;
/// Most retries accepted.
pub const MAX_RETRIES_LIMIT: u32 = 100;

/// Which model backend an agent talks to.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum Backend {
    /// A network API.
    Network(Protocol),
    /// A model function supplied by the host (Python callable, C callback, scripted provider).
    #[default]
    Host,
}

impl Backend {
    /// A name of the provider table (`"anthropic"`, `"openai"` (or `"openai-compatible"`),
    /// `"openai-responses"`, `"bedrock"`; see [`crate::provider::PROVIDERS`]) or `"host"`.
    pub fn parse(s: &str) -> Result<Self> {
        if s == "host" {
            return Ok(Backend::Host);
        }
        Protocol::parse(s).map(Backend::Network).map_err(|_| {
            let names = crate::provider::table::names_for_message().replace(" or ", ", ");
            invalid("provider", format!("must be {names} or \"host\", got {s:?}"))
        })
    }
}

/// Which built-in tools to register: none (`false`), all (`true`) or the named ones.
#[derive(Clone, Debug, PartialEq, Eq, Default, Serialize)]
#[serde(untagged)]
pub enum BuiltinTools {
    /// None (the default).
    #[default]
    None,
    /// All of them.
    All,
    /// These.
    Named(Vec<String>),
}

impl BuiltinTools {
    /// The names to register (`Some(empty)` means all), `None` for none.
    pub fn names(&self) -> Option<Vec<String>> {
        match self {
            BuiltinTools::None => None,
            BuiltinTools::All => Some(Vec::new()),
            BuiltinTools::Named(n) if n.is_empty() => None,
            BuiltinTools::Named(n) => Some(n.clone()),
        }
    }
}

/// Everything that configures an agent, with documented defaults. Build it from JSON
/// ([`AgentOptions::from_json`]) or in Rust (`AgentOptions { model: Some(..), ..Default::default() }`),
/// then [`AgentOptions::build`].
///
/// # Threads and cloning
/// Plain data: `Clone + Send + Sync`. The API key inside is a [`Secret`] (never shown by Debug).
#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct AgentOptions {
    /// `"anthropic"` (default), `"openai"` (any OpenAI-compatible server), `"openai-responses"` (OpenAI's
    /// Responses API), `"bedrock"` or `"host"` (a model function the host supplies through
    /// [`AgentOptions::build_with`]).
    #[serde(deserialize_with = "de_provider")]
    pub provider: Option<Backend>,
    /// Model name. Required for a network provider; `"host"` by default for a host model.
    #[serde(deserialize_with = "de_string")]
    pub model: Option<String>,
    /// System prompt: a string or an array of text blocks.
    #[serde(deserialize_with = "de_system")]
    pub system: Option<Value>,
    /// API key; default from `ANTHROPIC_API_KEY` / `OPENAI_API_KEY`.
    #[serde(deserialize_with = "de_secret")]
    pub api_key: Option<Secret>,
    /// Base URL; default from `ANTHROPIC_BASE_URL` / `OPENAI_BASE_URL`, then the official endpoint.
    #[serde(deserialize_with = "de_string")]
    pub base_url: Option<String>,
    /// Extra HTTP headers on every request (e.g. `anthropic-beta`).
    #[serde(deserialize_with = "de_headers")]
    pub headers: BTreeMap<String, String>,
    /// Seconds for one whole request, retries excluded (default 600); the idle and connect timeouts
    /// never exceed it.
    #[serde(deserialize_with = "de_timeout")]
    pub timeout: f64,
    /// Retries of a failed request (default 2, at most 100).
    #[serde(deserialize_with = "de_retries")]
    pub max_retries: u32,
    /// Output token cap per model turn (default 8192).
    #[serde(deserialize_with = "de_positive")]
    pub max_tokens: u32,
    /// Cap on model requests per run (default 20; `null`: no cap).
    #[serde(deserialize_with = "de_max_turns")]
    pub max_turns: Option<u32>,
    /// What reaching `max_turns` does: `"error"` (default) or `"return"`.
    #[serde(deserialize_with = "de_policy")]
    pub max_turns_policy: MaxTurnsPolicy,
    /// Extended thinking: a budget in tokens, a thinking object passed through (e.g. `{"type":
    /// "adaptive"}`), or `null` / `false` for off.
    #[serde(deserialize_with = "de_thinking")]
    pub thinking: Option<Value>,
    /// Stream responses (default: true for a network provider, false for a host model).
    #[serde(deserialize_with = "de_bool_opt")]
    pub stream: Option<bool>,
    /// Sampling temperature (0 to 2).
    #[serde(deserialize_with = "de_temperature")]
    pub temperature: Option<f64>,
    /// Stop sequences.
    #[serde(deserialize_with = "de_strings")]
    pub stop_sequences: Vec<String>,
    /// `tool_choice`, passed through (an object such as `{"type": "auto"}`).
    #[serde(deserialize_with = "de_object_opt")]
    pub tool_choice: Option<Value>,
    /// Other request body fields, passed through unchanged.
    #[serde(deserialize_with = "de_object")]
    pub extra: Map<String, Value>,
    /// Most parallel-safe tools run at once within one turn (default 4).
    #[serde(deserialize_with = "de_concurrency")]
    pub tool_concurrency: usize,
    /// Built-in coding tools: `false` (default), `true` or a list of names.
    #[serde(deserialize_with = "de_builtin")]
    pub builtin_tools: BuiltinTools,
    /// The folder the built-in tools work in (default: the current folder).
    #[serde(deserialize_with = "de_path")]
    pub workspace: Option<PathBuf>,
    /// A JSONL session file, or a session of a SQLite database (`runs/sessions.db#task-17`, see
    /// [`crate::store::Location`]): loaded if it exists, then every finished entry is appended.
    #[serde(deserialize_with = "de_path")]
    pub session: Option<PathBuf>,
    /// The runaway guard: `true` (`{"warn_after": 3, "stop_after": 2}`), `false`, or the object. Not given
    /// (`None`): on exactly when `progress_guard` is; `Some(None)`: off. See [`RepeatGuard`].
    #[serde(deserialize_with = "de_repeat_guard")]
    pub repeat_guard: Option<Option<RepeatGuard>>,
    /// Progress detection, a coding agent's policy: `false` (the default: off), `true`, or `{"stop_after": N,
    /// "wrap_up": bool, "unstick_temperature": T}`: turns that change nothing (identical rewrites, same output
    /// again, cycles) get a note, and after N more the run ends with stop_reason `"repetition"`; after a turn
    /// that only re-ran a passing check (or rewrote a file unchanged) the next request goes out once with tools
    /// disabled (`wrap_up`, default true). On, it turns the runaway guard on too (unless `repeat_guard` says
    /// otherwise). Tools marked not idempotent are never judged. See [`crate::progress`].
    #[serde(deserialize_with = "de_progress_guard")]
    pub progress_guard: Option<crate::progress::ProgressGuard>,
    /// Compact built-in tool definitions (default false), for small context windows: one sentence each, input
    /// schemas cut to their required fields, a one-sentence sandbox note (see
    /// [`BuiltinOptions::short_descriptions`](crate::builtin::BuiltinOptions::short_descriptions)).
    #[serde(deserialize_with = "de_false")]
    pub short_tool_descriptions: bool,
    /// The todo list (`todo_write` tool): `false` (default), `true`, or `{"remind_after": N}` — the model
    /// turns an unfinished list may be left alone before a reminder (default 3; `null`: never).
    #[serde(deserialize_with = "de_planning")]
    pub planning: Option<Option<u32>>,
    /// Folders holding skills (`<name>/SKILL.md`): their names and descriptions join the system prompt
    /// and the `skill` tool loads one when the model asks (see [`crate::skills`]).
    #[serde(deserialize_with = "de_paths")]
    pub skills: Vec<PathBuf>,
    /// Child agent types for the `task` tool: `{"explore": {"description": "...", "system": "...", "tools":
    /// ["read_file"], "model": null, "max_turns": 10}}` (see [`crate::subagent`]). Children cannot spawn
    /// children.
    #[serde(deserialize_with = "de_subagents")]
    pub subagents: BTreeMap<String, crate::subagent::SubAgent>,
    /// Kernel confinement of the built-in `bash` (Linux, Landlock): `"workspace-write"` (default),
    /// `"read-only"` or `"off"`. See [`crate::builtin`].
    #[serde(deserialize_with = "de_sandbox")]
    pub sandbox: crate::builtin::SandboxMode,
    /// Whether `bash` may use the network; `false` refuses every socket family but Unix sockets (a seccomp
    /// allow-list: TCP, UDP, MPTCP, loopback included). Default true.
    #[serde(deserialize_with = "de_network")]
    pub network: bool,
    /// Names of secret-looking environment variables `bash` keeps anyway (default none: every variable whose
    /// name holds KEY, SECRET, TOKEN, PASSWORD or CREDENTIAL, and the AWS ones, is dropped and its value
    /// redacted from tool results).
    #[serde(deserialize_with = "de_strings")]
    pub env_passthrough: Vec<String>,
    /// Paths relative to the workspace that `bash` sees read-only in `"workspace-write"` (default
    /// `[".tooloop", ".claude", ".mcp.json", ".git/hooks", ".git/config"]`; `[]` lifts it): settings, MCP
    /// config and git hooks whose content would run outside the sandbox later. Needs the read-only view
    /// (Linux, as root, mount namespaces allowed): elsewhere Landlock cannot make a read-only hole in a
    /// writable tree and they are as writable as the workspace. A path that does not exist when a command
    /// starts cannot be bound, so the command may create it. See
    /// [`BashOptions::protected_paths`](crate::builtin::BashOptions::protected_paths).
    #[serde(deserialize_with = "de_protected_paths")]
    pub protected_paths: Vec<PathBuf>,
    /// MCP servers whose tools the agent gets, as `mcp__<server>__<tool>`: `{"name": {"command": [...],
    /// "args": [...], "env": {...}, "cwd": ...} | {"url": "http://...", "headers": {...}}}` (Claude Code's
    /// shape; see [`crate::mcp`]). A server that fails to start is skipped and reported
    /// ([`Agent::mcp_failures`]).
    #[serde(deserialize_with = "de_mcp")]
    pub mcp_servers: BTreeMap<String, crate::mcp::McpServerConfig>,
    /// Prompt caching on the Anthropic API and Bedrock (default true): breakpoints on the last tool, the
    /// system prompt and the newest turns (see [`crate::cache`]).
    #[serde(deserialize_with = "de_cache")]
    pub cache: bool,
    /// The model's context window in tokens (default: from the model table; set it for local models).
    #[serde(deserialize_with = "de_window")]
    pub context_window: Option<u64>,
    /// Automatic compaction of long conversations: `"auto"` (default) or `"off"` (`true`/`false` too).
    /// See [`crate::compaction`].
    #[serde(deserialize_with = "de_compaction")]
    pub compaction: bool,
    /// Fraction of the context window a request may fill before it is compacted (default 0.8; 0.1 to 1).
    #[serde(deserialize_with = "de_threshold")]
    pub compact_threshold: f64,
    /// The model that writes compaction summaries (default: `model`; a cheaper one saves money).
    #[serde(deserialize_with = "de_string")]
    pub compaction_model: Option<String>,
    /// AWS region for `provider: "bedrock"` (default from `AWS_REGION` / `AWS_DEFAULT_REGION`).
    #[serde(deserialize_with = "de_string")]
    pub region: Option<String>,
    /// Tools the API runs itself, sent as given (`{"type": "web_search_20250305", "name": "web_search"}`).
    #[serde(deserialize_with = "de_server_tools")]
    pub server_tools: Vec<Value>,
    /// Project instructions added to the system prompt: `true` finds `AGENTS.md` (else `CLAUDE.md`) in the
    /// workspace and each parent up to the repository root, plus the user's own file; `false` (default)
    /// none; a list of paths: exactly those. See [`crate::instructions`].
    #[serde(deserialize_with = "de_instruction_files")]
    pub instruction_files: crate::instructions::InstructionFiles,
    /// No request is sent that would take the agent's spend (subagents and compaction summaries included)
    /// past this many US dollars; the run then ends with stop reason `budget`. Needs a model with a known
    /// price (see [`crate::pricing`]).
    #[serde(deserialize_with = "de_cost")]
    pub max_cost_usd: Option<f64>,
    /// `{"allow": [...], "ask": [...], "deny": [...]}`: rules such as `"bash(npm test:*)"` that decide tool
    /// calls before the permission callable is asked (see [`crate::rules`]).
    #[serde(deserialize_with = "de_rules")]
    pub permission_rules: Option<crate::rules::PermissionRules>,
    /// Structured output: a JSON Schema (an object) the final answer must be valid against (see
    /// [`crate::output`]); the result then carries it as `output`.
    #[serde(deserialize_with = "de_output_schema")]
    pub output_schema: Option<Value>,
    /// Invalid structured answers sent back to the model with the errors before the run fails (default 2).
    #[serde(deserialize_with = "de_output_retries")]
    pub output_retries: u32,
    /// How the schema reaches the model: `"auto"` (default: the API's native structured output where it has
    /// one, else a `final_answer` tool), `"native"` or `"tool"`.
    #[serde(deserialize_with = "de_output_mode")]
    pub output_mode: crate::output::OutputMode,
    /// Models tried in order when the model fails a turn (overloaded, rate-limited past its retries, down,
    /// or refusing the context size): each a model name (on the same provider) or an object `{"provider",
    /// "model", "api_key", "base_url", "region", "headers"}` (only `model` required). See
    /// [`Agent::set_fallback_models`].
    #[serde(deserialize_with = "de_fallback_models")]
    pub fallback_models: Vec<crate::agent::ModelSpec>,
    /// A check to finish against (default none): a shell command run in the workspace with the built-in
    /// `bash`'s sandbox when the model answers; its failure goes back to the model, the run ends `ok` only
    /// once it passes, and the workspace files it runs or names are read-only for the run. See [`crate::check`].
    #[serde(deserialize_with = "de_string")]
    pub check: Option<String>,
    /// Seconds the check may run (default 120).
    #[serde(deserialize_with = "de_check_timeout")]
    pub check_timeout: f64,
    /// The task asks for changes (default false): an answer with no file changed is challenged once, then
    /// the result says `unverified`. See [`crate::evidence`].
    #[serde(deserialize_with = "de_false")]
    pub expect_changes: bool,
    /// Hold the final answer to the run's record (default false): an answer that says a command ran or a
    /// test passed when the record shows otherwise is challenged once, then the result says `unverified`.
    #[serde(deserialize_with = "de_false")]
    pub verify_claims: bool,
    /// Whole files in fenced code blocks (default false): with the built-in `write_file`, a model turn with
    /// no tool calls whose text gives files as fenced blocks named on the line before them ("Here's the
    /// fixed `calc.py`:") gets one `write_file` call per file, run like any other. See [`crate::text_edits`].
    #[serde(deserialize_with = "de_false")]
    pub text_edits: bool,
    /// A first draft without tools (default false): with the built-in `write_file`, the run that starts a
    /// conversation (no model turn in it yet) sends its first request without tools, asking for every file
    /// to change as a whole fenced block ([`crate::text_edits::DRAFT_NOTE`], only in that request); the
    /// files become `write_file` calls as with `text_edits`, its shell blocks then `bash` calls (with the
    /// built-in `bash`), and the run goes on with the tools. A draft with no file or command in it is left
    /// out of the conversation and the task asked again with the tools; one cut off at `max_tokens` writes
    /// its whole files before the cut, except the one it was cut inside, and runs no command when the cut
    /// fell inside a block. An answer that writes the draft's results back, its note among them, is left out
    /// once a run and the request sent again (at the progress guard's `unstick_temperature`, if set).
    /// aider's format, for small models.
    #[serde(deserialize_with = "de_false")]
    pub draft_first: bool,
}

impl Default for AgentOptions {
    fn default() -> Self {
        AgentOptions {
            provider: None,
            model: None,
            system: None,
            api_key: None,
            base_url: None,
            headers: BTreeMap::new(),
            timeout: defaults::TIMEOUT_SECS as f64,
            max_retries: defaults::MAX_RETRIES,
            max_tokens: defaults::MAX_TOKENS,
            max_turns: Some(defaults::MAX_TURNS),
            max_turns_policy: MaxTurnsPolicy::Error,
            thinking: None,
            stream: None,
            temperature: None,
            stop_sequences: Vec::new(),
            tool_choice: None,
            extra: Map::new(),
            tool_concurrency: defaults::TOOL_CONCURRENCY,
            builtin_tools: BuiltinTools::None,
            workspace: None,
            session: None,
            repeat_guard: None,
            progress_guard: None,
            short_tool_descriptions: false,
            planning: None,
            skills: Vec::new(),
            subagents: BTreeMap::new(),
            region: None,
            server_tools: Vec::new(),
            sandbox: crate::builtin::SandboxMode::WorkspaceWrite,
            network: defaults::NETWORK,
            env_passthrough: Vec::new(),
            protected_paths: crate::builtin::default_protected_paths(),
            mcp_servers: BTreeMap::new(),
            cache: defaults::CACHE,
            context_window: None,
            compaction: defaults::COMPACTION,
            compact_threshold: defaults::COMPACT_THRESHOLD,
            compaction_model: None,
            instruction_files: crate::instructions::InstructionFiles::Off,
            max_cost_usd: None,
            permission_rules: None,
            output_schema: None,
            output_retries: defaults::OUTPUT_RETRIES,
            output_mode: crate::output::OutputMode::Auto,
            fallback_models: Vec::new(),
            check: None,
            check_timeout: defaults::CHECK_TIMEOUT_SECS as f64,
            expect_changes: false,
            verify_claims: false,
            text_edits: false,
            draft_first: false,
        }
    }
}

fn invalid(key: &str, message: impl Into<String>) -> Error {
    Error::InvalidOption { key: key.to_string(), message: message.into() }
}

impl AgentOptions {
    /// Every key the JSON form may hold.
    pub const KEYS: [&'static str; 52] = [
        "provider",
        "model",
        "system",
        "api_key",
        "base_url",
        "headers",
        "timeout",
        "max_retries",
        "max_tokens",
        "max_turns",
        "max_turns_policy",
        "thinking",
        "stream",
        "temperature",
        "stop_sequences",
        "tool_choice",
        "extra",
        "tool_concurrency",
        "builtin_tools",
        "workspace",
        "session",
        "repeat_guard",
        "progress_guard",
        "short_tool_descriptions",
        "planning",
        "skills",
        "subagents",
        "region",
        "server_tools",
        "sandbox",
        "network",
        "env_passthrough",
        "protected_paths",
        "mcp_servers",
        "cache",
        "context_window",
        "compaction",
        "compact_threshold",
        "compaction_model",
        "instruction_files",
        "max_cost_usd",
        "permission_rules",
        "output_schema",
        "output_retries",
        "output_mode",
        "fallback_models",
        "check",
        "check_timeout",
        "expect_changes",
        "verify_claims",
        "text_edits",
        "draft_first",
    ];

    /// Parse a JSON object of options. Errors are [`Error::InvalidOption`] naming the key.
    pub fn from_json(json: &str) -> Result<Self> {
        let value: Value = serde_json::from_str(json)
            .map_err(|e| Error::InvalidOption { key: String::new(), message: format!("not valid JSON: {e}") })?;
        Self::from_value(value)
    }

    /// Options from a JSON value (an object). Errors are [`Error::InvalidOption`] naming the key; the
    /// options are then checked as a whole ([`AgentOptions::validate`]).
    pub fn from_value(value: Value) -> Result<Self> {
        let Value::Object(map) = value else {
            return Err(Error::InvalidOption {
                key: String::new(),
                message: format!(
                    "options must be a JSON object such as {{\"model\": \"claude-sonnet-4-6\"}}, got {}",
                    shorten(&value.to_string())
                ),
            });
        };
        for key in map.keys() {
            if !Self::KEYS.contains(&key.as_str()) {
                return Err(invalid(key, format!("unknown option (known: {})", Self::KEYS.join(", "))));
            }
        }
        let options = match AgentOptions::deserialize(Value::Object(map.clone())) {
            Ok(o) => o,
            Err(e) => {
                // serde does not say which field failed: find it by reading each key alone (every field has
                // a default), so the message can name it.
                for (k, v) in &map {
                    let one = Value::Object(Map::from_iter([(k.clone(), v.clone())]));
                    if let Err(e) = AgentOptions::deserialize(one) {
                        return Err(invalid(k, e.to_string()));
                    }
                }
                return Err(invalid("", e.to_string()));
            }
        };
        options.validate()?;
        Ok(options)
    }

    /// Check what single fields cannot: the base URL parses as http(s), header names and values are
    /// valid HTTP, the API key has no line break.
    pub fn validate(&self) -> Result<()> {
        if let Some(url) = &self.base_url {
            crate::http::check_base_url(url).map_err(|m| invalid("base_url", m))?;
        }
        for (name, value) in &self.headers {
            crate::http::check_header(name, value).map_err(|m| invalid("headers", m))?;
        }
        if let Some(k) = &self.api_key {
            if k.expose().chars().any(|c| c.is_control()) || k.expose().trim().is_empty() {
                return Err(invalid(
                    "api_key",
                    "must be a non-empty key without spaces at the ends or control characters",
                ));
            }
        }
        if let Some(t) = &self.thinking {
            check_thinking_budget(t, self.max_tokens)?;
        }
        Ok(())
    }

    /// The backend these options ask for (`anthropic` when not given).
    pub fn backend(&self) -> Backend {
        self.provider.unwrap_or(Backend::Network(Protocol::Anthropic))
    }

    /// The provider configuration (protocol, key, URL, headers, timeouts and retries). For a host model
    /// only the HTTP settings matter.
    pub fn provider_config(&self) -> ProviderConfig {
        let protocol = match self.backend() {
            Backend::Network(p) => p,
            Backend::Host => Protocol::Anthropic,
        };
        let mut config = ProviderConfig::new(protocol);
        config.api_key = self.api_key.clone();
        config.base_url = self.base_url.clone();
        config.region = self.region.clone();
        config.headers = self.headers.iter().map(|(k, v)| (k.clone(), v.clone())).collect();
        let total = Duration::from_secs_f64(self.timeout);
        config.http.total_timeout = total;
        config.http.idle_timeout = config.http.idle_timeout.min(total);
        config.http.connect_timeout = config.http.connect_timeout.min(total);
        config.http.max_retries = self.max_retries;
        config
    }

    /// The loop's configuration. `host`: the model is a host function (model name optional, no streaming
    /// unless asked for).
    pub fn agent_config(&self, host: bool) -> Result<AgentConfig> {
        let model = match (&self.model, host) {
            (Some(m), _) => m.clone(),
            (None, true) => defaults::HOST_MODEL.to_string(),
            (None, false) => return Err(invalid("model", "is required, e.g. \"claude-sonnet-4-6\"")),
        };
        Ok(AgentConfig {
            model,
            system: self.system.clone(),
            max_tokens: self.max_tokens,
            max_turns: self.max_turns,
            max_turns_policy: self.max_turns_policy,
            thinking: self.thinking.clone(),
            stream: self.stream.unwrap_or(defaults::stream(host)),
            tool_choice: self.tool_choice.clone(),
            temperature: self.temperature,
            stop_sequences: self.stop_sequences.clone(),
            extra: self.extra.clone(),
            tool_concurrency: self.tool_concurrency,
            // The runaway guard comes with progress detection unless asked for (or off) on its own.
            repeat_guard: self.repeat_guard.unwrap_or_else(|| self.progress_guard.map(|_| RepeatGuard::default())),
            progress_guard: self.progress_guard,
            todo_reminder_after: self.planning.unwrap_or(Some(defaults::TODO_REMIND_AFTER)),
            server_tools: self.server_tools.clone(),
            cache: self.cache,
            context_window: self.context_window,
            compaction: self.compaction,
            compact_threshold: self.compact_threshold,
            compaction_model: self.compaction_model.clone(),
            max_cost_usd: self.max_cost_usd,
            output: self.output_schema.clone().map(|schema| crate::output::OutputSpec {
                schema,
                retries: self.output_retries,
                mode: self.output_mode,
            }),
            check: self.check.clone().filter(|c| !c.trim().is_empty()).map(|command| crate::check::CheckSpec {
                command,
                timeout: Duration::from_secs_f64(self.check_timeout),
            }),
            expect_changes: self.expect_changes,
            verify_claims: self.verify_claims,
            text_edits: self.text_edits,
            draft_first: self.draft_first,
        })
        .and_then(|c| self.check_prices(c))
    }

    /// With a spend cap, every model that may be asked must have a known price: an unknown one would make
    /// the cap meaningless.
    fn check_prices(&self, config: AgentConfig) -> Result<AgentConfig> {
        if self.max_cost_usd.is_none() {
            return Ok(config);
        }
        let models = std::iter::once(Some(config.model.clone()))
            .chain(std::iter::once(config.compaction_model.clone()))
            .chain(self.fallback_models.iter().map(|f| Some(f.model.clone())))
            .chain(self.subagents.values().map(|s| s.model.clone()))
            .flatten();
        for m in models {
            if crate::models::price(&m).is_none() {
                return Err(invalid(
                    "max_cost_usd",
                    format!(
                        "model {m:?} has no known price, so a spend cap cannot be kept; use a model in the price \
                         table or leave max_cost_usd unset"
                    ),
                ));
            }
        }
        Ok(config)
    }

    /// Build an agent that talks to the network provider these options name.
    pub fn build(&self) -> Result<Agent> {
        if self.backend() == Backend::Host {
            return Err(invalid("provider", "\"host\" needs a model function: build the agent with build_with"));
        }
        let config = self.agent_config(false)?;
        let provider = self.provider_config().build()?;
        self.finish(provider, config)
    }

    /// Build an agent around a model the host supplies (`provider` must be absent or `"host"`).
    pub fn build_with(&self, provider: Arc<dyn Provider>) -> Result<Agent> {
        if let Some(Backend::Network(_)) = self.provider {
            return Err(invalid("provider", "a host model is given: leave \"provider\" out or set it to \"host\""));
        }
        let config = self.agent_config(true)?;
        self.finish(provider, config)
    }

    /// The agent, in one pass of the one builder (see [`crate::agent::AgentSpec`]): nothing is added to it
    /// after it is built.
    fn finish(&self, provider: Arc<dyn Provider>, config: AgentConfig) -> Result<Agent> {
        let mut b = AgentBuilder::new(provider, config);
        if let Some(names) = self.builtin_tools.names() {
            b.builtin = Some(crate::builtin::BuiltinOptions {
                workspace: self.workspace_dir()?,
                names,
                sandbox: self.sandbox,
                network: self.network,
                env_passthrough: self.env_passthrough.clone(),
                protected_paths: self.protected_paths.clone(),
                short_descriptions: self.short_tool_descriptions,
            });
            b.sandbox = Some((self.sandbox, self.network));
        }
        b.workspace = self.workspace_dir().ok();
        // A model switched or fallen back to takes its key and URL from these options on the same provider.
        let protocol = match self.backend() {
            Backend::Network(p) => Some(p),
            Backend::Host => None,
        };
        b.provider_base = Some((self.provider_config(), protocol));
        b.fallback_models = self.fallback_models.clone();
        b.planning = self.planning.is_some();
        b.prompt_secrets = self.api_key.iter().map(|k| k.expose().to_string()).collect();
        b.skills = self.skills.clone();
        b.subagents = self.subagents.clone();
        b.mcp_servers = self.mcp_servers.clone();
        if let Some(rules) = &self.permission_rules {
            b.rules = Some((Arc::new(rules.clone()), self.workspace_dir()?));
        }
        b.instructions = match &self.instruction_files {
            crate::instructions::InstructionFiles::Off => None,
            crate::instructions::InstructionFiles::Discover => {
                Some(crate::instructions::discover(&self.workspace_dir()?))
            }
            crate::instructions::InstructionFiles::Paths(p) => {
                Some(crate::instructions::load(p, &self.workspace_dir()?)?)
            }
        };
        b.session = self.session.clone().map(|path| (path, self.workspace.clone()));
        b.build()
    }
}

impl AgentOptions {
    /// The workspace folder: the option, else the current folder.
    pub fn workspace_dir(&self) -> Result<PathBuf> {
        match &self.workspace {
            Some(w) => Ok(w.clone()),
            None => std::env::current_dir()
                .map_err(|e| Error::Config(format!("no workspace given and no current folder: {e}"))),
        }
    }
}

fn shorten(s: &str) -> String {
    crate::text::ellipsize(s, 80)
}

/// The smallest thinking budget the API accepts (Anthropic refuses `budget_tokens` below it).
pub const MIN_THINKING_BUDGET: u64 = 1024;

fn check_thinking_budget(thinking: &Value, max_tokens: u32) -> Result<()> {
    if let Some(b) = thinking.get("budget_tokens").and_then(Value::as_u64) {
        // A budget given as a number became `{"type": "enabled", ...}`; an object of that type is checked
        // the same way, so the API never gets to refuse it after a turn's worth of work.
        if b < MIN_THINKING_BUDGET && thinking.get("type").and_then(Value::as_str) == Some("enabled") {
            return Err(invalid(
                "thinking",
                format!("budget_tokens ({b}) must be at least {MIN_THINKING_BUDGET}, or the thinking off (null)"),
            ));
        }
        if b >= u64::from(max_tokens) {
            return Err(invalid(
                "thinking",
                format!("budget_tokens ({b}) must be less than max_tokens ({max_tokens}); raise max_tokens"),
            ));
        }
    }
    Ok(())
}

// ---- field readers: each refuses with a message that says what is expected and shows what came ----

fn got(v: &Value) -> String {
    shorten(&v.to_string())
}

fn value<'de, D: Deserializer<'de>>(d: D) -> std::result::Result<Value, D::Error> {
    Value::deserialize(d)
}

fn de_provider<'de, D: Deserializer<'de>>(d: D) -> std::result::Result<Option<Backend>, D::Error> {
    match value(d)? {
        Value::Null => Ok(None),
        Value::String(s) => Backend::parse(&s).map(Some).map_err(|_| {
            let names = crate::provider::table::names_for_message().replace(" or ", ", ");
            D::Error::custom(format!("must be {names} or \"host\", got {s:?}"))
        }),
        v => Err(D::Error::custom(format!("must be a string such as \"anthropic\", got {}", got(&v)))),
    }
}

fn de_string<'de, D: Deserializer<'de>>(d: D) -> std::result::Result<Option<String>, D::Error> {
    match value(d)? {
        Value::Null => Ok(None),
        Value::String(s) => Ok(Some(s)),
        v => Err(D::Error::custom(format!("must be a string, got {}", got(&v)))),
    }
}

fn de_secret<'de, D: Deserializer<'de>>(d: D) -> std::result::Result<Option<Secret>, D::Error> {
    // Never echo the value: a key is a secret even when it has the wrong type.
    match value(d)? {
        Value::Null => Ok(None),
        Value::String(s) => Ok(Some(Secret::new(s))),
        _ => Err(D::Error::custom("must be a string (value hidden)")),
    }
}

fn de_system<'de, D: Deserializer<'de>>(d: D) -> std::result::Result<Option<Value>, D::Error> {
    match value(d)? {
        Value::Null => Ok(None),
        v @ Value::String(_) => Ok(Some(v)),
        Value::Array(items) => {
            if let Some(i) = items.iter().position(|b| b.get("type").and_then(Value::as_str).is_none()) {
                return Err(D::Error::custom(format!("system[{i}] must be a block with a \"type\" such as \"text\"")));
            }
            Ok(Some(Value::Array(items)))
        }
        v => Err(D::Error::custom(format!("must be a string or an array of text blocks, got {}", got(&v)))),
    }
}

fn de_headers<'de, D: Deserializer<'de>>(d: D) -> std::result::Result<BTreeMap<String, String>, D::Error> {
    match value(d)? {
        Value::Null => Ok(BTreeMap::new()),
        Value::Object(o) => o
            .into_iter()
            .map(|(k, v)| match v {
                Value::String(s) => Ok((k, s)),
                v => Err(D::Error::custom(format!("the value of header {k:?} must be a string, got {}", got(&v)))),
            })
            .collect(),
        v => Err(D::Error::custom(format!("must be an object of string header values, got {}", got(&v)))),
    }
}

fn number<E: serde::de::Error>(v: &Value, what: &str) -> std::result::Result<f64, E> {
    v.as_f64().filter(|x| x.is_finite()).ok_or_else(|| E::custom(format!("must be {what}, got {}", got(v))))
}

fn de_timeout<'de, D: Deserializer<'de>>(d: D) -> std::result::Result<f64, D::Error> {
    let v = value(d)?;
    if v.is_null() {
        return Ok(defaults::TIMEOUT_SECS as f64);
    }
    let what = "a positive number of seconds (at most one week)";
    let s = number::<D::Error>(&v, what)?;
    if s > 0.0 && s <= TIMEOUT_LIMIT_SECS {
        Ok(s)
    } else {
        Err(D::Error::custom(format!("must be {what}, got {}", got(&v))))
    }
}

fn integer<E: serde::de::Error>(v: &Value, min: u64, max: u64, what: &str) -> std::result::Result<u64, E> {
    v.as_u64().filter(|n| (min..=max).contains(n)).ok_or_else(|| E::custom(format!("must be {what}, got {}", got(v))))
}

fn de_retries<'de, D: Deserializer<'de>>(d: D) -> std::result::Result<u32, D::Error> {
    let v = value(d)?;
    if v.is_null() {
        return Ok(defaults::MAX_RETRIES);
    }
    integer::<D::Error>(&v, 0, u64::from(MAX_RETRIES_LIMIT), "an integer from 0 to 100").map(|n| n as u32)
}

fn de_positive<'de, D: Deserializer<'de>>(d: D) -> std::result::Result<u32, D::Error> {
    let v = value(d)?;
    if v.is_null() {
        return Ok(defaults::MAX_TOKENS);
    }
    let what = format!("a positive integer (at most {MAX_TOKENS_LIMIT})");
    integer::<D::Error>(&v, 1, u64::from(MAX_TOKENS_LIMIT), &what).map(|n| n as u32)
}

fn de_max_turns<'de, D: Deserializer<'de>>(d: D) -> std::result::Result<Option<u32>, D::Error> {
    match value(d)? {
        Value::Null => Ok(None),
        v => integer::<D::Error>(&v, 1, u64::from(u32::MAX), "a positive integer, or null for no cap")
            .map(|n| Some(n as u32)),
    }
}

fn de_policy<'de, D: Deserializer<'de>>(d: D) -> std::result::Result<MaxTurnsPolicy, D::Error> {
    match value(d)? {
        Value::Null => Ok(MaxTurnsPolicy::Error),
        Value::String(s) if s == "error" => Ok(MaxTurnsPolicy::Error),
        Value::String(s) if s == "return" => Ok(MaxTurnsPolicy::Return),
        v => Err(D::Error::custom(format!("must be \"error\" or \"return\", got {}", got(&v)))),
    }
}

fn de_thinking<'de, D: Deserializer<'de>>(d: D) -> std::result::Result<Option<Value>, D::Error> {
    let what = "a budget in tokens (an integer of at least 1024), a thinking object such as {\"type\": \"adaptive\"}, \
                or null/false for off";
    match value(d)? {
        Value::Null | Value::Bool(false) => Ok(None),
        Value::Object(o) => {
            if !o.get("type").is_some_and(Value::is_string) {
                return Err(D::Error::custom(format!("a thinking object needs a \"type\"; it must be {what}")));
            }
            Ok(Some(Value::Object(o)))
        }
        v => {
            let budget = integer::<D::Error>(&v, MIN_THINKING_BUDGET, u64::from(MAX_TOKENS_LIMIT), what)?;
            Ok(Some(json!({"type": "enabled", "budget_tokens": budget})))
        }
    }
}

fn de_window<'de, D: Deserializer<'de>>(d: D) -> std::result::Result<Option<u64>, D::Error> {
    match value(d)? {
        Value::Null => Ok(None),
        v => integer::<D::Error>(&v, 1024, 1 << 30, "a number of tokens (at least 1024), or null for the model's")
            .map(Some),
    }
}

fn de_compaction<'de, D: Deserializer<'de>>(d: D) -> std::result::Result<bool, D::Error> {
    match value(d)? {
        Value::Null => Ok(defaults::COMPACTION),
        Value::Bool(b) => Ok(b),
        Value::String(s) if s == "auto" => Ok(true),
        Value::String(s) if s == "off" => Ok(false),
        v => Err(D::Error::custom(format!("must be \"auto\" or \"off\", got {}", got(&v)))),
    }
}

fn de_check_timeout<'de, D: Deserializer<'de>>(d: D) -> std::result::Result<f64, D::Error> {
    let v = value(d)?;
    if v.is_null() {
        return Ok(defaults::CHECK_TIMEOUT_SECS as f64);
    }
    let what = "a positive number of seconds (at most one day)";
    let s = number::<D::Error>(&v, what)?;
    if (1.0..=86_400.0).contains(&s) {
        Ok(s)
    } else {
        Err(D::Error::custom(format!("must be {what}, got {}", got(&v))))
    }
}

fn de_threshold<'de, D: Deserializer<'de>>(d: D) -> std::result::Result<f64, D::Error> {
    let v = value(d)?;
    if v.is_null() {
        return Ok(defaults::COMPACT_THRESHOLD);
    }
    let what = "a fraction of the context window from 0.1 to 1";
    let t = number::<D::Error>(&v, what)?;
    if (0.1..=1.0).contains(&t) { Ok(t) } else { Err(D::Error::custom(format!("must be {what}, got {t}"))) }
}

fn de_bool_opt<'de, D: Deserializer<'de>>(d: D) -> std::result::Result<Option<bool>, D::Error> {
    match value(d)? {
        Value::Null => Ok(None),
        Value::Bool(b) => Ok(Some(b)),
        v => Err(D::Error::custom(format!("must be true or false, got {}", got(&v)))),
    }
}

fn de_temperature<'de, D: Deserializer<'de>>(d: D) -> std::result::Result<Option<f64>, D::Error> {
    let v = value(d)?;
    if v.is_null() {
        return Ok(None);
    }
    let what = "a number from 0 to 2";
    let t = number::<D::Error>(&v, what)?;
    if (0.0..=2.0).contains(&t) { Ok(Some(t)) } else { Err(D::Error::custom(format!("must be {what}, got {t}"))) }
}

fn de_strings<'de, D: Deserializer<'de>>(d: D) -> std::result::Result<Vec<String>, D::Error> {
    match value(d)? {
        Value::Null => Ok(Vec::new()),
        Value::Array(items) => items
            .into_iter()
            .map(|i| match i {
                Value::String(s) => Ok(s),
                v => Err(D::Error::custom(format!("must be an array of strings, got an item {}", got(&v)))),
            })
            .collect(),
        v => Err(D::Error::custom(format!("must be an array of strings, got {}", got(&v)))),
    }
}

fn de_object_opt<'de, D: Deserializer<'de>>(d: D) -> std::result::Result<Option<Value>, D::Error> {
    match value(d)? {
        Value::Null => Ok(None),
        v @ Value::Object(_) => Ok(Some(v)),
        v => Err(D::Error::custom(format!("must be an object such as {{\"type\": \"auto\"}}, got {}", got(&v)))),
    }
}

fn de_object<'de, D: Deserializer<'de>>(d: D) -> std::result::Result<Map<String, Value>, D::Error> {
    match value(d)? {
        Value::Null => Ok(Map::new()),
        Value::Object(o) => Ok(o),
        v => Err(D::Error::custom(format!("must be an object of request fields, got {}", got(&v)))),
    }
}

fn de_concurrency<'de, D: Deserializer<'de>>(d: D) -> std::result::Result<usize, D::Error> {
    let v = value(d)?;
    if v.is_null() {
        return Ok(defaults::TOOL_CONCURRENCY);
    }
    integer::<D::Error>(&v, 1, 256, "an integer from 1 to 256").map(|n| n as usize)
}

fn de_builtin<'de, D: Deserializer<'de>>(d: D) -> std::result::Result<BuiltinTools, D::Error> {
    let what = "true, false or an array of built-in tool names";
    match value(d)? {
        Value::Null | Value::Bool(false) => Ok(BuiltinTools::None),
        Value::Bool(true) => Ok(BuiltinTools::All),
        Value::Array(items) => items
            .into_iter()
            .map(|i| match i {
                Value::String(s) => Ok(s),
                v => Err(D::Error::custom(format!("must be {what}, got an item {}", got(&v)))),
            })
            .collect::<std::result::Result<Vec<_>, _>>()
            .map(BuiltinTools::Named),
        v => Err(D::Error::custom(format!("must be {what}, got {}", got(&v)))),
    }
}

fn de_path<'de, D: Deserializer<'de>>(d: D) -> std::result::Result<Option<PathBuf>, D::Error> {
    match value(d)? {
        Value::Null => Ok(None),
        Value::String(s) if !s.is_empty() && !s.contains('\0') => Ok(Some(PathBuf::from(s))),
        v => Err(D::Error::custom(format!("must be a path (a non-empty string), got {}", got(&v)))),
    }
}

/// `null`: not given (it follows `progress_guard`); `false`: `Some(None)`.
fn de_repeat_guard<'de, D: Deserializer<'de>>(d: D) -> std::result::Result<Option<Option<RepeatGuard>>, D::Error> {
    let what = "false, true, or {\"warn_after\": N, \"stop_after\": M} (N ≥ 2, M ≥ 1)";
    match value(d)? {
        Value::Null => Ok(None),
        Value::Bool(true) => Ok(Some(Some(RepeatGuard::default()))),
        Value::Bool(false) => Ok(Some(None)),
        Value::Object(o) => {
            let mut g = RepeatGuard::default();
            for (k, v) in o {
                match k.as_str() {
                    "warn_after" => g.warn_after = integer::<D::Error>(&v, 2, 1000, what)? as u32,
                    "stop_after" => g.stop_after = integer::<D::Error>(&v, 1, 1000, what)? as u32,
                    _ => return Err(D::Error::custom(format!("unknown key {k:?}; must be {what}"))),
                }
            }
            Ok(Some(Some(g)))
        }
        v => Err(D::Error::custom(format!("must be {what}, got {}", got(&v)))),
    }
}

/// `null` and `false`: off (the default).
fn de_progress_guard<'de, D: Deserializer<'de>>(
    d: D,
) -> std::result::Result<Option<crate::progress::ProgressGuard>, D::Error> {
    let what = "false, true, or {\"stop_after\": N, \"wrap_up\": bool, \"unstick_temperature\": T} (N ≥ 1, 0 ≤ T ≤ 2)";
    match value(d)? {
        Value::Bool(true) => Ok(Some(crate::progress::ProgressGuard::default())),
        Value::Null | Value::Bool(false) => Ok(None),
        Value::Object(o) => {
            let mut g = crate::progress::ProgressGuard::default();
            for (k, v) in o {
                match k.as_str() {
                    "stop_after" => g.stop_after = integer::<D::Error>(&v, 1, 1000, what)? as u32,
                    "wrap_up" => {
                        g.wrap_up = v.as_bool().ok_or_else(|| {
                            D::Error::custom(format!("wrap_up must be true or false, got {}", got(&v)))
                        })?
                    }
                    "unstick_temperature" => {
                        g.unstick_temperature = match &v {
                            Value::Null => None,
                            _ => Some(v.as_f64().filter(|t| (0.0..=2.0).contains(t)).ok_or_else(|| {
                                D::Error::custom(format!(
                                    "unstick_temperature must be a number from 0 to 2 or null, got {}",
                                    got(&v)
                                ))
                            })?),
                        }
                    }
                    _ => return Err(D::Error::custom(format!("unknown key {k:?}; must be {what}"))),
                }
            }
            Ok(Some(g))
        }
        v => Err(D::Error::custom(format!("must be {what}, got {}", got(&v)))),
    }
}

fn de_paths<'de, D: Deserializer<'de>>(d: D) -> std::result::Result<Vec<PathBuf>, D::Error> {
    match value(d)? {
        Value::Null => Ok(Vec::new()),
        Value::String(s) if !s.is_empty() => Ok(vec![PathBuf::from(s)]),
        Value::Array(items) => items
            .into_iter()
            .map(|i| match i {
                Value::String(s) if !s.is_empty() => Ok(PathBuf::from(s)),
                v => Err(D::Error::custom(format!("must be a list of folder paths, got an item {}", got(&v)))),
            })
            .collect(),
        v => Err(D::Error::custom(format!("must be a list of folder paths, got {}", got(&v)))),
    }
}

fn de_protected_paths<'de, D: Deserializer<'de>>(d: D) -> std::result::Result<Vec<PathBuf>, D::Error> {
    let what = "a list of paths relative to the workspace, without '..', such as [\".git/hooks\"] (or [] for none)";
    match value(d)? {
        Value::Null => Ok(crate::builtin::default_protected_paths()),
        Value::Array(items) => items
            .into_iter()
            .map(|i| match i {
                Value::String(s) => crate::builtin::check_protected_path(&s)
                    .map_err(|m| D::Error::custom(format!("must be {what}: {m}"))),
                v => Err(D::Error::custom(format!("must be {what}, got an item {}", got(&v)))),
            })
            .collect(),
        v => Err(D::Error::custom(format!("must be {what}, got {}", got(&v)))),
    }
}

fn de_subagents<'de, D: Deserializer<'de>>(
    d: D,
) -> std::result::Result<BTreeMap<String, crate::subagent::SubAgent>, D::Error> {
    let what = "an object of agent types, e.g. {\"explore\": {\"description\": \"...\", \"tools\": [\"read_file\"]}}";
    match value(d)? {
        Value::Null => Ok(BTreeMap::new()),
        Value::Object(o) => o
            .into_iter()
            .map(|(name, v)| {
                if crate::tools::check_name(&name).is_err() {
                    return Err(D::Error::custom(format!("agent type {name:?} must be letters, digits, _ or -")));
                }
                let t: crate::subagent::SubAgent = serde_json::from_value(v)
                    .map_err(|e| D::Error::custom(format!("agent type {name:?}: {e}; it must be {what}")))?;
                if t.description.trim().is_empty() {
                    return Err(D::Error::custom(format!("agent type {name:?} needs a \"description\"")));
                }
                if let Some(schema) = &t.output_schema {
                    crate::output::check_schema(schema)
                        .map_err(|m| D::Error::custom(format!("agent type {name:?}: output_schema {m}")))?;
                }
                if t.max_turns == Some(0) {
                    return Err(D::Error::custom(format!("agent type {name:?}: max_turns must be at least 1")));
                }
                Ok((name, t))
            })
            .collect(),
        v => Err(D::Error::custom(format!("must be {what}, got {}", got(&v)))),
    }
}

fn de_server_tools<'de, D: Deserializer<'de>>(d: D) -> std::result::Result<Vec<Value>, D::Error> {
    let what = "a list of server tool objects with a \"type\", e.g. {\"type\": \"web_search_20250305\", \"name\": \"web_search\"}";
    match value(d)? {
        Value::Null => Ok(Vec::new()),
        Value::Array(items) => items
            .into_iter()
            .map(|t| {
                if t.get("type").and_then(Value::as_str).is_some() && t.get("name").and_then(Value::as_str).is_some() {
                    Ok(t)
                } else {
                    Err(D::Error::custom(format!("must be {what}, got an item {}", got(&t))))
                }
            })
            .collect(),
        v => Err(D::Error::custom(format!("must be {what}, got {}", got(&v)))),
    }
}

fn de_output_schema<'de, D: Deserializer<'de>>(d: D) -> std::result::Result<Option<Value>, D::Error> {
    match value(d)? {
        Value::Null => Ok(None),
        v => crate::output::check_schema(&v).map(|()| Some(v)).map_err(D::Error::custom),
    }
}

fn de_output_retries<'de, D: Deserializer<'de>>(d: D) -> std::result::Result<u32, D::Error> {
    let v = value(d)?;
    if v.is_null() {
        return Ok(defaults::OUTPUT_RETRIES);
    }
    integer::<D::Error>(&v, 0, 100, "an integer from 0 to 100").map(|n| n as u32)
}

fn de_output_mode<'de, D: Deserializer<'de>>(d: D) -> std::result::Result<crate::output::OutputMode, D::Error> {
    match value(d)? {
        Value::Null => Ok(crate::output::OutputMode::Auto),
        Value::String(s) => crate::output::OutputMode::parse(&s)
            .ok_or_else(|| D::Error::custom(format!("must be \"auto\", \"native\" or \"tool\", got {s:?}"))),
        v => Err(D::Error::custom(format!("must be \"auto\", \"native\" or \"tool\", got {}", got(&v)))),
    }
}

fn de_sandbox<'de, D: Deserializer<'de>>(d: D) -> std::result::Result<crate::builtin::SandboxMode, D::Error> {
    match value(d)? {
        Value::Null => Ok(crate::builtin::SandboxMode::WorkspaceWrite),
        Value::Bool(false) => Ok(crate::builtin::SandboxMode::Off),
        Value::String(s) => s
            .parse()
            .map_err(|_| D::Error::custom(format!("must be \"workspace-write\", \"read-only\" or \"off\", got {s:?}"))),
        v => Err(D::Error::custom(format!("must be \"workspace-write\", \"read-only\" or \"off\", got {}", got(&v)))),
    }
}

fn de_cache<'de, D: Deserializer<'de>>(d: D) -> std::result::Result<bool, D::Error> {
    match value(d)? {
        Value::Null => Ok(defaults::CACHE),
        Value::Bool(b) => Ok(b),
        v => Err(D::Error::custom(format!("must be true or false, got {}", got(&v)))),
    }
}

fn de_network<'de, D: Deserializer<'de>>(d: D) -> std::result::Result<bool, D::Error> {
    match value(d)? {
        Value::Null => Ok(defaults::NETWORK),
        Value::Bool(b) => Ok(b),
        v => Err(D::Error::custom(format!("must be true or false, got {}", got(&v)))),
    }
}

/// A flag that is off unless `true` (null: off).
fn de_false<'de, D: Deserializer<'de>>(d: D) -> std::result::Result<bool, D::Error> {
    match value(d)? {
        Value::Null => Ok(false),
        Value::Bool(b) => Ok(b),
        v => Err(D::Error::custom(format!("must be true or false, got {}", got(&v)))),
    }
}

fn de_mcp<'de, D: Deserializer<'de>>(
    d: D,
) -> std::result::Result<BTreeMap<String, crate::mcp::McpServerConfig>, D::Error> {
    match value(d)? {
        Value::Null => Ok(BTreeMap::new()),
        Value::Object(o) => o
            .into_iter()
            .map(|(name, v)| {
                serde_json::from_value(v).map(|c| (name.clone(), c)).map_err(|e| {
                    D::Error::custom(format!(
                        "server {name:?}: {e}; a server is {{\"command\": [...], \"args\": [...], \"env\": {{...}}}} \
                         or {{\"url\": \"http://...\", \"headers\": {{...}}}}"
                    ))
                })
            })
            .collect(),
        v => Err(D::Error::custom(format!("must be an object of servers by name, got {}", got(&v)))),
    }
}

fn de_instruction_files<'de, D: Deserializer<'de>>(
    d: D,
) -> std::result::Result<crate::instructions::InstructionFiles, D::Error> {
    use crate::instructions::InstructionFiles;
    let what = "true, false or a list of file paths";
    match value(d)? {
        Value::Null | Value::Bool(false) => Ok(InstructionFiles::Off),
        Value::Bool(true) => Ok(InstructionFiles::Discover),
        Value::String(s) if !s.is_empty() => Ok(InstructionFiles::Paths(vec![PathBuf::from(s)])),
        Value::Array(items) => items
            .into_iter()
            .map(|i| match i {
                Value::String(s) if !s.is_empty() && !s.contains('\0') => Ok(PathBuf::from(s)),
                v => Err(D::Error::custom(format!("must be {what}, got an item {}", got(&v)))),
            })
            .collect::<std::result::Result<Vec<_>, _>>()
            .map(InstructionFiles::Paths),
        v => Err(D::Error::custom(format!("must be {what}, got {}", got(&v)))),
    }
}

fn de_cost<'de, D: Deserializer<'de>>(d: D) -> std::result::Result<Option<f64>, D::Error> {
    let v = value(d)?;
    if v.is_null() {
        return Ok(None);
    }
    // 0 is a cap too: nothing may be spent (the run ends with "budget" before its first request).
    let what = "a number of US dollars, 0 or more";
    let x = number::<D::Error>(&v, what)?;
    if (0.0..1e9).contains(&x) {
        Ok(Some(x))
    } else {
        Err(D::Error::custom(format!("must be {what}, got {}", got(&v))))
    }
}

fn de_rules<'de, D: Deserializer<'de>>(d: D) -> std::result::Result<Option<crate::rules::PermissionRules>, D::Error> {
    crate::rules::PermissionRules::from_value(&value(d)?).map_err(D::Error::custom)
}

/// One model to switch or fall back to, from its JSON form: a model name, or an object `{"provider", "model",
/// "api_key", "base_url", "region", "headers"}`. `key` names the option in errors.
pub fn model_spec(v: &Value, key: &str) -> Result<crate::agent::ModelSpec> {
    let bad = |m: String| invalid(key, m);
    let obj = match v {
        Value::String(s) if !s.trim().is_empty() => return Ok(crate::agent::ModelSpec::new(s.clone())),
        Value::Object(o) => o,
        other => {
            return Err(bad(format!(
                "each model must be a name or {{\"provider\": ..., \"model\": ...}}, got {}",
                got(other)
            )));
        }
    };
    for k in obj.keys() {
        if !["provider", "model", "api_key", "base_url", "region", "headers"].contains(&k.as_str()) {
            return Err(bad(format!(
                "unknown key {k:?} in a model (known: provider, model, api_key, base_url, region, headers)"
            )));
        }
    }
    let text = |k: &str| -> Result<Option<String>> {
        match obj.get(k) {
            None | Some(Value::Null) => Ok(None),
            Some(Value::String(s)) if !s.trim().is_empty() => Ok(Some(s.clone())),
            Some(other) => Err(bad(format!("{k} must be a non-empty string, got {}", got(other)))),
        }
    };
    let model = text("model")?.ok_or_else(|| bad("each model object needs \"model\"".into()))?;
    let provider = match text("provider")? {
        None => None,
        Some(p) => match Backend::parse(&p) {
            Ok(Backend::Network(p)) => Some(p),
            _ => {
                return Err(bad(format!(
                    "provider {p:?} is not a network provider (\"anthropic\", \"openai\", \"bedrock\")"
                )));
            }
        },
    };
    let base_url = text("base_url")?;
    if let Some(url) = &base_url {
        crate::http::check_base_url(url).map_err(|m| bad(format!("base_url {m}")))?;
    }
    let api_key = text("api_key")?;
    if api_key.as_deref().is_some_and(|k| k.chars().any(char::is_control)) {
        return Err(bad("api_key must not hold control characters".into()));
    }
    let headers = match obj.get("headers") {
        None | Some(Value::Null) => None,
        Some(Value::Object(h)) => {
            let mut out = Vec::new();
            for (name, value) in h {
                let Some(value) = value.as_str() else {
                    return Err(bad(format!("header {name:?} must be a string")));
                };
                crate::http::check_header(name, value).map_err(bad)?;
                out.push((name.clone(), value.to_string()));
            }
            Some(out)
        }
        Some(other) => return Err(bad(format!("headers must be an object, got {}", got(other)))),
    };
    Ok(crate::agent::ModelSpec {
        model,
        provider,
        api_key: api_key.map(Secret::new),
        base_url,
        region: text("region")?,
        headers,
    })
}

fn de_fallback_models<'de, D: Deserializer<'de>>(d: D) -> std::result::Result<Vec<crate::agent::ModelSpec>, D::Error> {
    match value(d)? {
        Value::Null => Ok(Vec::new()),
        Value::Array(items) => items
            .iter()
            .map(|v| model_spec(v, "fallback_models").map_err(|e| D::Error::custom(error_message(e))))
            .collect(),
        other => Err(D::Error::custom(format!("must be a list of models, got {}", got(&other)))),
    }
}

/// The message of an option error, without the key (serde names it again).
fn error_message(e: Error) -> String {
    match e {
        Error::InvalidOption { message, .. } => message,
        other => other.to_string(),
    }
}

fn de_planning<'de, D: Deserializer<'de>>(d: D) -> std::result::Result<Option<Option<u32>>, D::Error> {
    let what = "true, false, or {\"remind_after\": N} (N ≥ 1, or null for no reminder)";
    match value(d)? {
        Value::Null | Value::Bool(false) => Ok(None),
        Value::Bool(true) => Ok(Some(Some(defaults::TODO_REMIND_AFTER))),
        Value::Object(o) => {
            let mut after = Some(defaults::TODO_REMIND_AFTER);
            for (k, v) in o {
                match (k.as_str(), v) {
                    ("remind_after", Value::Null) => after = None,
                    ("remind_after", v) => after = Some(integer::<D::Error>(&v, 1, 1000, what)? as u32),
                    _ => return Err(D::Error::custom(format!("unknown key {k:?}; must be {what}"))),
                }
            }
            Ok(Some(after))
        }
        v => Err(D::Error::custom(format!("must be {what}, got {}", got(&v)))),
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    fn err(json: &str) -> (String, String) {
        match AgentOptions::from_json(json).unwrap_err() {
            Error::InvalidOption { key, message } => (key, message),
            other => panic!("expected InvalidOption, got {other:?}"),
        }
    }

    #[test]
    fn unknown_key_is_named() {
        let (key, message) = err(r#"{"model": "m", "max_token": 5}"#);
        assert_eq!(key, "max_token");
        assert!(message.contains("known: provider"), "{message}");
    }

    #[test]
    fn each_bad_value_names_its_key() {
        for (json, key) in [
            (r#"{"max_tokens": -1}"#, "max_tokens"),
            (r#"{"max_tokens": 0}"#, "max_tokens"),
            (r#"{"max_tokens": 1e300}"#, "max_tokens"),
            (r#"{"max_tokens": 99999999999}"#, "max_tokens"),
            (r#"{"timeout": -1}"#, "timeout"),
            (r#"{"timeout": 1e12}"#, "timeout"),
            (r#"{"max_retries": 1000}"#, "max_retries"),
            (r#"{"temperature": 7}"#, "temperature"),
            (r#"{"thinking": true}"#, "thinking"),
            (r#"{"thinking": 0}"#, "thinking"),
            (r#"{"thinking": {"budget_tokens": 5}}"#, "thinking"),
            (r#"{"max_turns": 0}"#, "max_turns"),
            (r#"{"max_turns_policy": "maybe"}"#, "max_turns_policy"),
            (r#"{"headers": {"x": 1}}"#, "headers"),
            (r#"{"headers": {"bad name": "v"}}"#, "headers"),
            (r#"{"headers": {"x-a": "line\r\nInjected: 1"}}"#, "headers"),
            (r#"{"base_url": "not a url"}"#, "base_url"),
            (r#"{"base_url": "ftp://example.com"}"#, "base_url"),
            (r#"{"base_url": "http://"}"#, "base_url"),
            (r#"{"stop_sequences": "END"}"#, "stop_sequences"),
            (r#"{"extra": [1]}"#, "extra"),
            (r#"{"provider": "gemini"}"#, "provider"),
            (r#"{"builtin_tools": "yes"}"#, "builtin_tools"),
            (r#"{"repeat_guard": {"warn_after": 1}}"#, "repeat_guard"),
            (r#"{"progress_guard": {"stop_after": 0}}"#, "progress_guard"),
            (r#"{"progress_guard": "on"}"#, "progress_guard"),
            (r#"{"progress_guard": {"unstick_temperature": 3}}"#, "progress_guard"),
            (r#"{"progress_guard": {"wrap_up": 1}}"#, "progress_guard"),
            (r#"{"model": "m", "max_tokens": 100, "thinking": 2048}"#, "thinking"),
        ] {
            let (k, message) = err(json);
            assert_eq!(k, key, "{json}: {message}");
        }
    }

    #[test]
    fn thinking_budget_below_the_api_minimum_is_refused() {
        for json in [
            r#"{"thinking": 1}"#,
            r#"{"thinking": 1023}"#,
            r#"{"thinking": {"type": "enabled", "budget_tokens": 100}}"#,
        ] {
            let (k, message) = err(json);
            assert_eq!(k, "thinking", "{json}: {message}");
            assert!(message.contains("1024"), "{json}: {message}");
        }
        for json in [r#"{"thinking": 1024}"#, r#"{"thinking": {"type": "enabled", "budget_tokens": 1024}}"#] {
            assert!(AgentOptions::from_json(json).is_ok(), "{json}");
        }
    }

    #[test]
    fn api_key_value_never_appears_in_errors() {
        let (key, message) = err(r#"{"model": "m", "api_key": 12345}"#);
        assert_eq!(key, "api_key");
        assert!(!message.contains("12345"), "{message}");
        let (_, message) = err("{\"api_key\": \"sk-secret\\n\"}");
        assert!(!message.contains("sk-secret"), "{message}");
        let o = AgentOptions::from_json(r#"{"api_key": "sk-abcdef"}"#).unwrap();
        assert!(!format!("{o:?}").contains("sk-abcdef"));
    }

    #[test]
    fn defaults_are_documented_values() {
        let o = AgentOptions::from_json("{}").unwrap();
        assert_eq!(o.max_tokens, 8192);
        assert_eq!(o.max_turns, Some(20));
        assert_eq!(o.timeout, 600.0);
        assert_eq!(o.max_retries, 2);
        assert_eq!(o.backend(), Backend::Network(Protocol::Anthropic));
        assert_eq!((o.repeat_guard, o.progress_guard), (None, None));
        // null means "no cap" for max_turns, the default elsewhere.
        let o = AgentOptions::from_json(r#"{"max_turns": null, "max_tokens": null}"#).unwrap();
        assert_eq!(o.max_turns, None);
        assert_eq!(o.max_tokens, 8192);
    }

    #[test]
    fn the_guards_are_off_unless_asked_and_progress_guard_brings_the_runaway_guard() {
        let config = |json: &str| {
            let c = AgentOptions::from_json(json).unwrap().agent_config(true).unwrap();
            (c.repeat_guard, c.progress_guard)
        };
        let (on, progress) = (Some(RepeatGuard::default()), Some(crate::progress::ProgressGuard::default()));
        assert_eq!(config("{}"), (None, None), "the library's default is neutral");
        assert_eq!(config(r#"{"progress_guard": null, "repeat_guard": null}"#), (None, None));
        assert_eq!(config(r#"{"progress_guard": true}"#), (on, progress));
        assert_eq!(config(r#"{"progress_guard": true, "repeat_guard": false}"#), (None, progress));
        assert_eq!(config(r#"{"repeat_guard": true}"#), (on, None));
        let tight = RepeatGuard { warn_after: 2, stop_after: 1 };
        assert_eq!(
            config(r#"{"progress_guard": {}, "repeat_guard": {"warn_after": 2, "stop_after": 1}}"#),
            (Some(tight), progress)
        );
    }

    #[test]
    fn every_key_maps() {
        let o = AgentOptions::from_json(
            r#"{"provider": "openai", "model": "gpt", "system": "s", "api_key": "k", "base_url": "http://x:1/v1",
                "max_tokens": 10, "max_turns": null, "thinking": false, "timeout": 2.5, "max_retries": 0,
                "stream": false, "builtin_tools": ["read_file"], "workspace": "/tmp", "session": "/tmp/s.jsonl",
                "max_turns_policy": "return", "temperature": 0.2, "stop_sequences": ["END"],
                "tool_choice": {"type": "any"}, "headers": {"anthropic-beta": "b1"},
                "extra": {"metadata": {"user_id": "u"}}, "tool_concurrency": 2, "repeat_guard": false}"#,
        )
        .unwrap();
        let p = o.provider_config();
        assert_eq!(p.protocol, Protocol::OpenAi);
        assert_eq!(p.http.total_timeout, Duration::from_millis(2500));
        assert!(p.http.connect_timeout <= p.http.total_timeout && p.http.idle_timeout <= p.http.total_timeout);
        assert_eq!(p.http.max_retries, 0);
        assert_eq!(p.headers, vec![("anthropic-beta".to_string(), "b1".to_string())]);
        let a = o.agent_config(false).unwrap();
        assert_eq!((a.max_tokens, a.max_turns, a.thinking.clone(), a.stream), (10, None, None, false));
        assert_eq!(a.max_turns_policy, MaxTurnsPolicy::Return);
        assert_eq!(a.temperature, Some(0.2));
        assert_eq!(a.stop_sequences, vec!["END".to_string()]);
        assert_eq!(a.tool_choice, Some(json!({"type": "any"})));
        assert_eq!(a.extra.get("metadata"), Some(&json!({"user_id": "u"})));
        assert_eq!(a.tool_concurrency, 2);
        assert_eq!(a.repeat_guard, None);
        let p =
            AgentOptions::from_json(r#"{"model": "m", "progress_guard": false}"#).unwrap().agent_config(false).unwrap();
        assert_eq!(p.progress_guard, None);
        let p = AgentOptions::from_json(r#"{"model": "m", "progress_guard": {"stop_after": 5}}"#)
            .unwrap()
            .agent_config(false)
            .unwrap();
        let guard = crate::progress::ProgressGuard::default();
        assert_eq!(p.progress_guard, Some(crate::progress::ProgressGuard { stop_after: 5, ..guard }));
        let p = AgentOptions::from_json(r#"{"model": "m", "progress_guard": {"wrap_up": false}}"#)
            .unwrap()
            .agent_config(false)
            .unwrap();
        assert_eq!(p.progress_guard, Some(crate::progress::ProgressGuard { wrap_up: false, ..guard }));
        let p = AgentOptions::from_json(r#"{"model": "m", "progress_guard": {"unstick_temperature": 0.8}}"#)
            .unwrap()
            .agent_config(false)
            .unwrap();
        assert_eq!(p.progress_guard, Some(crate::progress::ProgressGuard { unstick_temperature: Some(0.8), ..guard }));
        assert_eq!(o.builtin_tools.names(), Some(vec!["read_file".to_string()]));
    }

    #[test]
    fn thinking_budget_becomes_the_api_object() {
        let o = AgentOptions::from_json(r#"{"thinking": 2048}"#).unwrap();
        assert_eq!(o.thinking, Some(json!({"type": "enabled", "budget_tokens": 2048})));
        let o = AgentOptions::from_json(r#"{"thinking": {"type": "adaptive"}}"#).unwrap();
        assert_eq!(o.thinking, Some(json!({"type": "adaptive"})));
    }

    #[test]
    fn model_is_required_for_a_network_provider_only() {
        let o = AgentOptions::from_json("{}").unwrap();
        assert!(matches!(o.agent_config(false), Err(Error::InvalidOption { key, .. }) if key == "model"));
        assert_eq!(o.agent_config(true).unwrap().model, "host");
        assert!(o.agent_config(true).map(|c| !c.stream).unwrap());
    }

    #[test]
    fn every_listed_key_is_a_field() {
        // A key in KEYS but not a field (or the reverse) would be refused or ignored: read each with null.
        for key in AgentOptions::KEYS {
            let one = Value::Object(Map::from_iter([(key.to_string(), Value::Null)]));
            AgentOptions::from_value(one).unwrap_or_else(|e| panic!("{key}: {e}"));
        }
    }
}
