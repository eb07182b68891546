//! Hooks: host code the loop calls around each tool call, each request and the end of a run.
//!
//! Order around one call, all on the agent's thread: the permission rules ([`crate::rules`]),
//! `before_tool`, the permission callable, the tool, `after_tool`. Every tool gets them — built-ins, host
//! tools, MCP tools and the calls of a subagent (a child agent inherits its parent's tool and request
//! hooks; `on_stop` and `after_check` stay the parent's). `after_check` sees a failed check's message before
//! the model does.
//!
//! A hook that fails (returns `Err`: a Python exception, a C callback returning non-zero) ends the run with
//! [`crate::Error::Hook`] — also when it fails in a subagent's call: the parent's run ends with the same
//! error; the calls of that turn still get their results first, so the conversation stays valid and can be
//! resumed.

use std::sync::Arc;

use serde_json::Value;

use crate::run::{CheckResult, RunResult};
use crate::types::{Request, ToolUseBlock};

/// What `before_tool` answers.
#[derive(Clone, Debug, PartialEq)]
pub enum BeforeTool {
    /// Carry on.
    Continue,
    /// Refuse the call; the model reads the reason.
    Deny(String),
    /// Run it with this input instead (checked against the permission rules again).
    Input(Value),
}

/// The result `after_tool` sees.
#[derive(Clone, Debug, PartialEq)]
pub struct ToolResultView {
    /// The content the model would see (a string or blocks).
    pub content: Value,
    /// Whether it is an error result.
    pub is_error: bool,
    /// Whether the call was refused (by a rule, a hook or the permission callable).
    pub denied: bool,
}

impl ToolResultView {
    /// The content as text (blocks' text joined).
    pub fn text(&self) -> String {
        match &self.content {
            Value::String(s) => s.clone(),
            Value::Array(blocks) => {
                blocks.iter().filter_map(|b| b.get("text").and_then(Value::as_str)).collect::<Vec<_>>().join("\n")
            }
            other => other.to_string(),
        }
    }
}

/// Called before each tool call (after the rules).
pub type BeforeToolHook = Arc<dyn Fn(&ToolUseBlock) -> Result<BeforeTool, String> + Send + Sync>;
/// Called after each tool call; `Some(text)` replaces the result the model sees.
pub type AfterToolHook = Arc<dyn Fn(&ToolUseBlock, &ToolResultView) -> Result<Option<String>, String> + Send + Sync>;
/// Called with each request as it will be sent (observe only).
pub type BeforeRequestHook = Arc<dyn Fn(&Request) -> Result<(), String> + Send + Sync>;
/// Called when a run would end; `Some(text)` is sent as a new user message and the run goes on.
pub type OnStopHook = Arc<dyn Fn(&RunResult) -> Result<Option<String>, String> + Send + Sync>;

/// Called when the `check` failed and its failure is about to go back to the model, with the check's
/// verdict and that message; `Some(text)` replaces the message (a host's hints on the failing lines).
pub type AfterCheckHook = Arc<dyn Fn(&CheckResult, &str) -> Result<Option<String>, String> + Send + Sync>;

/// The hooks of an agent (each optional).
#[derive(Clone, Default)]
pub struct Hooks {
    /// See [`BeforeToolHook`].
    pub before_tool: Option<BeforeToolHook>,
    /// See [`AfterToolHook`].
    pub after_tool: Option<AfterToolHook>,
    /// See [`BeforeRequestHook`].
    pub before_request: Option<BeforeRequestHook>,
    /// See [`OnStopHook`].
    pub on_stop: Option<OnStopHook>,
    /// See [`AfterCheckHook`].
    pub after_check: Option<AfterCheckHook>,
}

impl std::fmt::Debug for Hooks {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Hooks")
            .field("before_tool", &self.before_tool.is_some())
            .field("after_tool", &self.after_tool.is_some())
            .field("before_request", &self.before_request.is_some())
            .field("on_stop", &self.on_stop.is_some())
            .field("after_check", &self.after_check.is_some())
            .finish()
    }
}

/// The hook kinds by name, as the bindings spell them.
pub const KINDS: &[&str] = &["before_tool", "after_tool", "before_request", "on_stop", "after_check"];

impl Hooks {
    /// What a child agent inherits: everything but `on_stop` and `after_check` (a child has no check).
    pub fn for_child(&self) -> Hooks {
        Hooks { on_stop: None, after_check: None, ..self.clone() }
    }
}
