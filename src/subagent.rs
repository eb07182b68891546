//! Subagents: the `task` tool hands a sub-problem to a fresh agent with its own conversation, so the
//! parent's context stays clean — only the child's final text (and a one-line usage summary) comes back.
//!
//! The agent loop runs `task` calls itself ([`crate::Agent`]): it builds the child from the parent's
//! provider and configuration, the agent type's system prompt and tools, forwards the child's events to the
//! host tagged with the parent's call id, rolls the child's usage into the parent's, and keeps the child's
//! transcript in the tool result entry (so it is in the session file, and a resume never runs a finished
//! child again). Must never: let a child spawn children, or let a child's failure end the parent's run — it
//! becomes an `is_error` result the parent's model reads.

use std::collections::BTreeMap;
use std::sync::Arc;

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value, json};

use crate::tools::{Tool, ToolContext, ToolError, ToolOutput};
use crate::types::{ToolSpec, Usage};

/// The tool's name.
pub const TOOL_NAME: &str = "task";

/// One kind of child agent the parent may start.
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SubAgent {
    /// What this agent is good for: the parent's model reads it to choose.
    pub description: String,
    /// The child's system prompt.
    #[serde(default)]
    pub system: Option<String>,
    /// Names of the parent's tools the child may use (`None`: all of them; never `task` itself).
    #[serde(default)]
    pub tools: Option<Vec<String>>,
    /// Model (default: the parent's).
    #[serde(default)]
    pub model: Option<String>,
    /// Cap on the child's model turns (default 20).
    #[serde(default)]
    pub max_turns: Option<u32>,
    /// The sandbox of the child's built-in tools (`"read-only"` for an agent that only explores), instead
    /// of the parent's mode; other settings (workspace, network, environment) stay the parent's.
    #[serde(default)]
    pub sandbox: Option<crate::builtin::SandboxMode>,
    /// A JSON Schema for the child's answer (structured output, see [`crate::output`]): the parent's model
    /// then receives the validated JSON as the `task` result.
    #[serde(default)]
    pub output_schema: Option<Value>,
    /// Tools of the child's own, beside the parent's (hosts add them in code; not in JSON).
    #[serde(skip)]
    pub own_tools: Vec<Tool>,
}

/// The `task` tool's spec, listing the agent types. The loop runs the calls; the handler only answers if
/// the tool is somehow called through the registry directly.
pub fn tool(types: &BTreeMap<String, SubAgent>) -> Tool {
    let mut description = String::from(
        "Hand a self-contained sub-task to a fresh agent that works on its own and answers with a short report. \
         Use it for searches and investigations whose details would clutter this conversation. The agent does \
         not see this conversation: put everything it needs in `prompt`. Agent types:\n",
    );
    for (name, t) in types {
        description.push_str(&format!("- {name}: {}\n", t.description));
    }
    let names: Vec<&String> = types.keys().collect();
    let handler = |_: &Value, _: &ToolContext<'_>| -> Result<ToolOutput, ToolError> {
        Err(ToolError::Respond("the task tool runs only inside an agent".into()))
    };
    Tool {
        spec: ToolSpec {
            name: TOOL_NAME.into(),
            description: description.trim_end().to_string(),
            input_schema: json!({
                "type": "object",
                "properties": {
                    "description": {"type": "string", "description": "A few words saying what the task is."},
                    "prompt": {"type": "string", "description": "The full instructions for the agent."},
                    "agent_type": {"type": "string", "enum": names}
                },
                "required": ["description", "prompt", "agent_type"]
            }),
            extra: Map::new(),
        },
        handler: Arc::new(handler),
        parallel_safe: false,
        read_only: false,
        confinable: false,
        idempotent: true,
        kind: crate::tools::ToolKind::Other,
    }
}

/// What a finished child leaves with the parent's tool result entry.
#[derive(Clone, Debug)]
pub struct ChildRun {
    /// The agent type.
    pub agent_type: String,
    /// The model it ran on.
    pub model: String,
    /// Its whole usage.
    pub usage: Usage,
    /// What its requests were charged in USD (to its parent's ledger; see [`crate::ledger`]).
    pub cost_usd: Option<f64>,
    /// Model turns it made.
    pub turns: u32,
    /// Its conversation, as internal entries (JSON).
    pub transcript: Value,
}

impl ChildRun {
    /// The one-line summary appended to the child's answer.
    pub fn summary(&self) -> String {
        format!(
            "({} agent: {} turn{}, {} tokens in, {} out)",
            self.agent_type,
            self.turns,
            if self.turns == 1 { "" } else { "s" },
            self.usage.total_input_tokens(),
            self.usage.output_tokens
        )
    }

    /// What the entry's `meta.subagent` holds.
    pub fn meta(&self) -> Value {
        json!({"agent_type": self.agent_type, "model": self.model, "turns": self.turns, "transcript": self.transcript})
    }
}
