//! # tooloop
//!
//! An embeddable LLM agent core: a model calling tools in a loop. Send the conversation and the tool
//! schemas, run the tools the model asks for, append their results, repeat until the model stops.
//!
//! - [`error`]: the one error type, its kinds following the API's error types.
//! - [`http`]: the HTTP client: timeouts, retries with backoff, cancellation; [`sse`] decodes streams;
//!   [`gate`] is where a batch paces every agent's requests.
//! - [`cancel`]: cancellation from any thread.
//! - [`pricing`]: the old path of the prices, now in [`models`].
//! - [`types`]: wire types in the Anthropic Messages shape (also the neutral form), lossless.
//! - [`provider`]: Anthropic Messages, OpenAI-compatible Chat Completions, host-supplied models.
//! - [`conversation`]: the store of entries and the always-valid API view.
//! - [`carry`]: what a conversation carries into a request for another provider or model (switch, fallback).
//! - [`tools`]: the registry of tools and their handlers.
//! - [`agent`]: the loop.
//! - [`cache`]: where prompt-caching breakpoints go.
//! - [`models`]: the one model table (context windows, prices, families) and the one cost function.
//! - [`ledger`]: the spend account the loop holds each request against before sending it (caps, a batch's
//!   budget), shared by child agents and a batch's agents.
//! - [`compaction`]: token estimates and compaction of long conversations.
//! - [`output`]: structured output (`output_schema`): native or a final-answer tool, validated, retried.
//! - [`content`]: content blocks from hosts (images, documents), checked against the provider's size limits.
//! - [`defaults`]: every default of an agent's settings, written once.
//! - [`options`]: every option of an agent, with its default and checks, shared by every door.
//! - [`skills`]: skill folders (SKILL.md) the model loads on demand.
//! - [`subagent`]: the task tool's child agents.
//! - [`progress`]: whether the model's tool calls still change anything (cycles, no-op calls).
//! - [`todo`](mod@todo): the todo list the model keeps (`planning`).
//! - [`session`]: append-only JSONL persistence, crash-tolerant load, resume.
//! - [`session_sqlite`]: sessions in a SQLite database (many sessions, one file).
//! - [`store`]: the session store seam both implement, and migration between them.
//! - [`builtin`]: coding tools (bash with background commands, read_file, write_file, edit_file, grep, glob,
//!   web_fetch) confined to a workspace.
//! - [`rules`]: permission rules (`bash(npm test:*)`, `edit_file(src/**)`, `mcp__github`).
//! - [`hooks`]: host code around each tool call, each request and the end of a run.
//! - [`instructions`]: project instruction files (AGENTS.md, CLAUDE.md).
//! - [`mcp`]: MCP client (stdio and Streamable HTTP); server tools registered as `mcp__<server>__<tool>`.
//! - [`trace`](mod@trace): the spans a run reports through `tracing` (OpenTelemetry GenAI conventions).
//!
//! ## Why blocking
//! tooloop is embedded in Python scripts and C/C++ apps: a synchronous API with no async runtime is the one
//! every host can call. Blocking work (network waits, tools) is cancellable from any thread through
//! [`CancelToken`], within 200 ms.
#![forbid(unsafe_code)]
#![deny(missing_docs)]

pub mod agent;
pub mod builtin;
pub mod cache;
pub mod cancel;
pub mod carry;
pub mod check;
pub mod compaction;
pub mod content;
pub mod conversation;
pub mod defaults;
pub mod error;
pub mod evidence;
pub mod gate;
pub mod hooks;
pub mod http;
mod id;
pub mod instructions;
pub mod ledger;
pub mod mcp;
pub mod models;
pub mod options;
pub mod output;
pub mod pricing;
pub mod progress;
pub mod provider;
pub mod rules;
mod run;
mod send_gate;
pub mod session;
pub mod session_sqlite;
pub mod skills;
pub mod sse;
pub mod store;
pub mod subagent;
mod text;
pub mod text_edits;
pub mod todo;
pub mod tools;
pub mod trace;
pub mod types;

pub use agent::{
    Agent, AgentConfig, ApprovalError, ApprovalRequest, Event, FILE_CHANGE_BEFORE_CAP, FileChangeKind, MaxTurnsPolicy,
    ModelSpec, Permission, PermissionHook, RepeatGuard, RunDriver, RunResult, SessionInfo, Step, ToolCallRecord,
};
pub use cancel::{CancelToken, PollHook};
pub use conversation::{Conversation, Entry, EntryRole, EntryStatus};
pub use error::{ApiError, ApiErrorKind, Error, Result};
pub use options::AgentOptions;
pub use provider::{Protocol, Provider, ProviderConfig, Response, StreamEvent};
pub use session::{LoadReport, Session};
pub use session_sqlite::SqliteSession;
pub use store::SessionStore;
pub use tools::{Tool, ToolContext, ToolError, ToolOutput, ToolRegistry};
pub use types::{ContentBlock, Message, MessageResponse, Messages, Request, Role, StopReason, ToolSpec, Usage};

// What the bindings use besides the above. A door (the C and Python bindings, like any host) names the crate
// root's items, never a path through one of its modules: what a door needs is listed here, in one place, and
// the modules behind it may move. `scripts/module_graph.py` checks the bindings for it.
pub use builtin::{DEFAULT_PROTECTED_PATHS, Restored, Workspace, restore_file, sandbox_support};
pub use check::{CheckResult, files_named as check_files};
pub use content::parse_blocks;
pub use conversation::cost_usd as entries_cost_usd;
#[allow(deprecated)]
pub use gate::with_send_gate;
pub use gate::{Admit, SendGate};
pub use hooks::{
    AfterCheckHook, AfterToolHook, BeforeRequestHook, BeforeTool, BeforeToolHook, Hooks, KINDS as HOOK_KINDS,
    OnStopHook, ToolResultView,
};
pub use http::{with_poll_hook, with_wait_hook};
pub use ledger::Ledger;
pub use models::{context_window, cost_usd as estimate_cost_usd, prefers_responses};
pub use options::{Backend, model_spec};
pub use provider::anthropic::{text_delta_of, text_delta_parts};
pub use provider::bedrock::AwsCredentials;
pub use provider::host::check_reply as check_host_reply;
pub use provider::table::{names_for_message as provider_names_for_message, to_json as providers_json};
pub use provider::{FnProvider, RawOpen, RawStream};
pub use rules::{PermissionRules, RuleDecision, alias as rule_alias, read_only_command, split_command};
pub use session_sqlite::list as list_sqlite_sessions;
pub use store::{Location as StoreLocation, load as load_store, migrate as migrate_store, open as open_store};
pub use tools::{ToolHandler, ToolKind};
pub use trace::CONTENT_TARGET as TRACE_CONTENT_TARGET;
pub use types::ToolUseBlock;
