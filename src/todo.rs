//! The todo list the model keeps to plan multi-step work (`planning`): the `todo_write` tool, the rules of a
//! valid list, and the current list read back from the conversation.
//!
//! The list lives in the conversation itself — it is the input of the last `todo_write` call that
//! succeeded — so it is recorded in the session file, restored on resume and carried by anything that keeps
//! the conversation, with no state of its own to lose. Must never: accept a list with more than one item in
//! progress, or let a rejected call change the list.

use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

use crate::conversation::{Entry, EntryRole};
use crate::tools::{Tool, ToolContext, ToolError, ToolOutput};
use crate::types::{ContentBlock, ToolSpec};

/// The tool's name.
pub const TOOL_NAME: &str = "todo_write";

/// Most items a list may hold: a plan longer than this is not a plan.
pub const MAX_ITEMS: usize = 100;

/// Where an item stands.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum TodoStatus {
    /// Not started.
    Pending,
    /// Being worked on (at most one item at a time).
    InProgress,
    /// Done.
    Completed,
}

/// One item of the list.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct TodoItem {
    /// What to do, in the imperative ("Run the tests").
    pub content: String,
    /// Where it stands.
    pub status: TodoStatus,
    /// The same in the present continuous ("Running the tests"), for a UI's spinner line; optional.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub active_form: Option<String>,
}

const DESCRIPTION: &str = "\
Write your todo list for the current task: a plan of steps you keep up to date as you work. Use it for any \
task of three steps or more. Each call replaces the whole list. Each item has `content` (what to do), `status` \
(pending, in_progress or completed) and optionally `active_form` (the same in the -ing form). Keep exactly one \
item in_progress while you work on it, mark it completed as soon as it is done, then start the next. Do not \
use it for a single trivial step.";

fn schema() -> Value {
    json!({
        "type": "object",
        "properties": {
            "todos": {
                "type": "array",
                "description": "The whole list, in order.",
                "items": {
                    "type": "object",
                    "properties": {
                        "content": {"type": "string", "description": "What to do."},
                        "status": {"type": "string", "enum": ["pending", "in_progress", "completed"]},
                        "active_form": {"type": "string", "description": "The same in the -ing form."}
                    },
                    "required": ["content", "status"]
                }
            }
        },
        "required": ["todos"]
    })
}

/// Check a `todo_write` input and return its list, or a message for the model saying which rule it broke.
pub fn parse(input: &Value) -> Result<Vec<TodoItem>, String> {
    let Some(items) = input.get("todos").and_then(Value::as_array) else {
        return Err("`todos` must be an array of {content, status} items".into());
    };
    if items.len() > MAX_ITEMS {
        return Err(format!("a todo list holds at most {MAX_ITEMS} items; group the steps"));
    }
    let mut list = Vec::with_capacity(items.len());
    for (i, item) in items.iter().enumerate() {
        let parsed: TodoItem = serde_json::from_value(item.clone()).map_err(|e| {
            format!(
                "item {i}: {e}; each item is {{\"content\": \"...\", \"status\": \"pending|in_progress|completed\"}}"
            )
        })?;
        if parsed.content.trim().is_empty() {
            return Err(format!("item {i}: `content` is empty"));
        }
        list.push(parsed);
    }
    let in_progress = list.iter().filter(|t| t.status == TodoStatus::InProgress).count();
    if in_progress > 1 {
        return Err(format!(
            "{in_progress} items are in_progress; at most one may be: finish one (completed) or set the others back \
             to pending, then write the list again"
        ));
    }
    Ok(list)
}

/// `✔` / `▸` / `○` lines, one per item.
pub fn render(list: &[TodoItem]) -> String {
    list.iter()
        .map(|t| {
            let mark = match t.status {
                TodoStatus::Completed => "✔",
                TodoStatus::InProgress => "▸",
                TodoStatus::Pending => "○",
            };
            format!("{mark} {}", t.content)
        })
        .collect::<Vec<_>>()
        .join("\n")
}

/// The `todo_write` tool. It only checks the list and answers with it: the list itself is read back from
/// the conversation ([`current`]).
pub fn tool() -> Tool {
    let handler = |input: &Value, _: &ToolContext<'_>| -> Result<ToolOutput, ToolError> {
        let list = parse(input).map_err(|m| ToolError::Respond(format!("The todo list was not changed: {m}")))?;
        let done = list.iter().filter(|t| t.status == TodoStatus::Completed).count();
        let text = if list.is_empty() {
            "Todo list cleared.".to_string()
        } else {
            format!("Todo list updated ({done}/{} done):\n{}", list.len(), render(&list))
        };
        Ok(ToolOutput::Text(text))
    };
    // Built directly: the name and schema are constants that `Tool::new` would accept.
    Tool {
        spec: ToolSpec {
            name: TOOL_NAME.into(),
            description: DESCRIPTION.into(),
            input_schema: schema(),
            extra: serde_json::Map::new(),
        },
        handler: std::sync::Arc::new(handler),
        parallel_safe: false,
        read_only: false,
        confinable: false,
        idempotent: true,
        kind: crate::tools::ToolKind::Other,
    }
}

/// The current list: the input of the last `todo_write` call whose result was not an error. Empty when
/// there is none.
pub fn current(entries: &[Entry]) -> Vec<TodoItem> {
    // Results first (newest last), so a call is taken only once its successful result is in.
    let mut ok_ids: Vec<&str> = Vec::new();
    for e in entries.iter().rev() {
        if e.role == EntryRole::Tool {
            for b in &e.content {
                if let ContentBlock::ToolResult(r) = b {
                    if r.is_error != Some(true) {
                        ok_ids.push(r.tool_use_id.as_str());
                    }
                }
            }
        }
        if e.role == EntryRole::Assistant {
            for b in e.content.iter().rev() {
                if let ContentBlock::ToolUse(t) = b {
                    if t.name == TOOL_NAME && ok_ids.contains(&t.id.as_str()) {
                        return parse(&t.input).unwrap_or_default();
                    }
                }
            }
        }
    }
    Vec::new()
}

/// Whether `list` still has work in it.
pub fn unfinished(list: &[TodoItem]) -> usize {
    list.iter().filter(|t| t.status != TodoStatus::Completed).count()
}

/// The reminder added to a tool result when the model has left an unfinished list alone for a while.
pub fn reminder(list: &[TodoItem]) -> String {
    format!(
        "<reminder>Your todo list has {} unfinished item(s) and you have not updated it for a few turns:\n{}\nIf \
         the list is out of date, update it with todo_write (mark finished items completed). Do not mention \
         this reminder.</reminder>",
        unfinished(list),
        render(list)
    )
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn at_most_one_item_may_be_in_progress() {
        let two = json!({"todos": [
            {"content": "a", "status": "in_progress"}, {"content": "b", "status": "in_progress"}]});
        assert!(parse(&two).unwrap_err().contains("at most one"));
        let ok = json!({"todos": [{"content": "a", "status": "in_progress", "active_form": "Doing a"},
                                  {"content": "b", "status": "pending"}]});
        assert_eq!(parse(&ok).unwrap().len(), 2);
    }

    #[test]
    fn bad_items_are_named() {
        for (input, needle) in [
            (json!({}), "`todos` must be an array"),
            (json!({"todos": [{"content": "a", "status": "doing"}]}), "item 0"),
            (json!({"todos": [{"content": " ", "status": "pending"}]}), "empty"),
            (json!({"todos": [{"status": "pending"}]}), "item 0"),
        ] {
            assert!(parse(&input).unwrap_err().contains(needle), "{input}");
        }
    }

    #[test]
    fn the_tool_answers_with_the_list_and_refuses_a_broken_one() {
        let t = tool();
        let c = crate::CancelToken::new();
        let ctx = ToolContext { tool_use_id: "t", tool_name: TOOL_NAME, cancel: &c, read_only: false };
        let ok = t.handler.call(&json!({"todos": [{"content": "a", "status": "completed"}]}), &ctx).unwrap();
        assert!(matches!(ok, ToolOutput::Text(s) if s.contains("1/1 done") && s.contains("✔ a")));
        assert!(t.handler.call(&json!({"todos": 5}), &ctx).is_err());
    }
}
