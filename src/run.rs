//! What a run returns: [`RunResult`] and the [`ToolCallRecord`] of each call. Plain data, below the loop
//! that fills it ([`crate::agent`]) and the hooks that read it ([`crate::hooks`]).

use serde::Serialize;
use serde_json::Value;

use crate::types::{MessageResponse, StopReason, Usage};

/// One tool call made during a run.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct ToolCallRecord {
    /// Call id.
    pub id: String,
    /// Tool name.
    pub name: String,
    /// Input.
    pub input: Value,
    /// Result content.
    pub output: Value,
    /// Whether it was an error result.
    pub is_error: bool,
    /// Whether the permission hook refused it.
    pub denied: bool,
    /// Duration.
    pub duration_ms: u64,
}

/// One shell-kind call of a run, on [`RunResult::commands_run`] (see [`crate::evidence`]).
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct CommandRun {
    /// The command as the model sent it.
    pub command: String,
    /// Its exit code (`None`: it did not finish — timed out, refused, could not start).
    pub exit_code: Option<i32>,
}

/// The outcome of a run that ended normally.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct RunResult {
    /// Text of the last assistant turn.
    pub text: String,
    /// Why the last turn stopped (`None` when max_turns stopped the run first).
    pub stop_reason: Option<StopReason>,
    /// Model requests made in this run.
    pub turns: u32,
    /// Usage of this run.
    pub usage: Usage,
    /// Tool calls of this run, in order.
    pub tool_calls: Vec<ToolCallRecord>,
    /// Whether the run stopped because of max_turns (policy `Return`).
    pub max_turns_reached: bool,
    /// The last assistant message.
    pub message: Option<MessageResponse>,
    /// Estimated cost in USD of this run (list prices, cache rates included; `None` for a model without a
    /// known price).
    pub cost_usd: Option<f64>,
    /// The structured answer, valid against `output_schema` (`None` without a schema, or when the run
    /// stopped before an answer: max_turns with policy `Return`, the runaway guard).
    pub output: Option<Value>,
    /// The `check` option's verdict (`None` without a check): `passed` only when its last run exited 0. See
    /// [`crate::check`].
    pub check: Option<CheckResult>,
    /// Workspace files this run changed (relative paths): written by write-kind tools, and, when the run
    /// has a workspace and a shell tool, changed by commands. See [`crate::evidence`].
    pub files_changed: Vec<String>,
    /// The shell-kind calls of this run, each with its exit code.
    pub commands_run: Vec<CommandRun>,
    /// With `verify_claims`/`expect_changes`: what the final answer claims that the run's record does not
    /// show, after the model was told once (`None`: nothing, or not checked).
    pub unverified: Option<String>,
}

/// What a run's check said, on [`crate::RunResult::check`].
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct CheckResult {
    /// The command.
    pub command: String,
    /// Whether its last run passed (exit code 0). `false` when it never ran.
    pub passed: bool,
    /// Its last exit code (`None`: it never ran, timed out or could not start).
    pub exit_code: Option<i32>,
    /// The tail of its last run's output (at most `check::TAIL_LINES` (60) lines, `check::TAIL_BYTES` (4096) bytes).
    pub output_tail: String,
    /// How many times it ran in this run.
    pub runs: u32,
}

impl CheckResult {
    /// A check that has not run yet.
    pub fn new(command: &str) -> Self {
        CheckResult {
            command: command.to_string(),
            passed: false,
            exit_code: None,
            output_tail: String::new(),
            runs: 0,
        }
    }

    /// The one line a host shows: `check passed` or `check failed: <why>`.
    pub fn line(&self) -> String {
        if self.passed {
            return "check passed".to_string();
        }
        let why = match (self.runs, self.exit_code) {
            (0, _) => "it did not run".to_string(),
            (_, Some(code)) => format!("`{}` exited {code}", self.command),
            (_, None) => format!("`{}` did not finish: {}", self.command, last_line(&self.output_tail)),
        };
        format!("check failed: {why}")
    }

    /// The user message that sends a failure back to the model.
    pub fn failure_message(&self) -> String {
        let code = self.exit_code.map_or_else(|| "did not finish".to_string(), |c| format!("exit {c}"));
        format!(
            "The check `{}` failed ({code}):\n{}\n\nThe task is done only when this check passes; the files it runs \
             are read-only. Fix the cause, then answer.",
            self.command, self.output_tail
        )
    }
}

fn last_line(text: &str) -> &str {
    text.lines().rev().find(|l| !l.trim().is_empty()).unwrap_or("no output")
}
