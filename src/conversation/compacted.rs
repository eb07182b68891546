//! The compaction records inside a conversation: a `system` entry whose `meta.compaction` says which
//! earlier entries left the API view and what stands in for them, and [`effective`], which replays those
//! records so the view is rendered from what is left. The store and its renderer need this; deciding when
//! and how to compact (and writing the summary) is [`crate::compaction`]'s job, above this one.
//!
//! Must never: rewrite an entry of the history (records are replayed over copies).

use std::borrow::Cow;
use std::collections::HashSet;

use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::{Entry, EntryRole};
use crate::types::ContentBlock;

/// The key of a compaction record in a system entry's `meta`.
pub const META_KEY: &str = "compaction";

/// Bytes of one value as compact JSON.
pub fn json_bytes<T: Serialize + ?Sized>(v: &T) -> u64 {
    let mut w = Counter(0);
    let _ = serde_json::to_writer(&mut w, v);
    w.0
}

struct Counter(u64);

impl std::io::Write for Counter {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.0 += buf.len() as u64;
        Ok(buf.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

/// Why a compaction happened.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Reason {
    /// The next request would have passed `compact_threshold` of the window.
    Threshold,
    /// The API answered that the prompt is too long.
    Overflow,
    /// The host asked ([`crate::Agent::compact`]).
    Manual,
}

/// How the view was made smaller.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Method {
    /// Only old, large tool results were cleared.
    ClearToolResults,
    /// Older turns were replaced by a summary the model wrote.
    Summary,
    /// Older turns were dropped (the summary request failed or did not fit).
    Drop,
}

/// One compaction, as recorded in a system entry's `meta.compaction` (and in the session file).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Compaction {
    /// Why.
    pub reason: Reason,
    /// How.
    pub method: Method,
    /// Estimated tokens of the request before.
    pub tokens_before: u64,
    /// Estimated tokens of the request after.
    pub tokens_after: u64,
    /// Ids of the entries that left the view (the summary stands where the first of them was).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub removed: Vec<String>,
    /// Ids of the tool entries whose results are replaced by a note.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub cleared: Vec<String>,
    /// The summary the model wrote (method `summary`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub summary: Option<String>,
    /// What the summarizer failed with, when the method fell back to `drop`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub fallback_reason: Option<String>,
    /// The host's instructions for the summary, if any.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub instructions: Option<String>,
    /// The todo list when it was compacted (rendered), kept verbatim after the summary: the model's plan
    /// must survive even a compaction that had to drop turns.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub todos: Option<String>,
}

impl Compaction {
    /// The record of a system entry, if it is a compaction.
    pub fn of(entry: &Entry) -> Option<Compaction> {
        if entry.role != EntryRole::System {
            return None;
        }
        serde_json::from_value(entry.meta.get(META_KEY)?.clone()).ok()
    }

    /// The system entry that records this compaction (its text is a one-line note for people).
    pub fn into_entry(self) -> Entry {
        let note = self.note();
        let mut e = Entry::new(EntryRole::System, vec![ContentBlock::text(note)]);
        e.meta.insert(META_KEY.into(), serde_json::to_value(&self).unwrap_or(Value::Null));
        e
    }

    /// A line for people: "context compacted (summary): 150,000 → 40,000 tokens".
    pub fn note(&self) -> String {
        let how = match self.method {
            Method::ClearToolResults => "old tool results cleared",
            Method::Summary => "older turns summarized",
            Method::Drop => "older turns dropped",
        };
        format!("context compacted ({how}): ~{} → ~{} tokens", self.tokens_before, self.tokens_after)
    }

    /// The user message that stands in for the removed entries.
    fn stand_in(&self, id: &str) -> Option<Entry> {
        if self.removed.is_empty() {
            return None;
        }
        let mut text = match &self.summary {
            Some(s) => format!(
                "[Summary of the earlier conversation. The conversation was compacted to fit the context window: \
                 {} earlier messages were replaced by this summary, written by the assistant.]\n\n{s}",
                self.removed.len()
            ),
            None => format!(
                "[{} earlier messages were removed to fit the context window; no summary of them is available. \
                 Ask the user or look again (read files, run commands) if something from them is needed.]",
                self.removed.len()
            ),
        };
        if let Some(t) = &self.todos {
            text.push_str(&format!("\n\n[Your todo list at that point:]\n{t}"));
        }
        let mut e = Entry::new(EntryRole::User, vec![ContentBlock::text(text)]);
        e.id = id.to_string();
        Some(e)
    }
}

/// Whether `entries` hold any compaction record (cheap: a scan of roles and meta keys).
pub fn any(entries: &[Entry]) -> bool {
    entries.iter().any(|e| e.role == EntryRole::System && e.meta.contains_key(META_KEY))
}

/// The entries the API view is rendered from: the history with every compaction applied in order.
pub fn effective(entries: &[Entry]) -> Cow<'_, [Entry]> {
    if !any(entries) {
        return Cow::Borrowed(entries);
    }
    let mut current: Vec<Entry> = Vec::with_capacity(entries.len());
    for e in entries {
        match Compaction::of(e) {
            Some(record) => current = apply(current, &record, &e.id),
            None => current.push(e.clone()),
        }
    }
    Cow::Owned(current)
}

fn apply(current: Vec<Entry>, record: &Compaction, id: &str) -> Vec<Entry> {
    let removed: HashSet<&str> = record.removed.iter().map(String::as_str).collect();
    let cleared: HashSet<&str> = record.cleared.iter().map(String::as_str).collect();
    let mut out = Vec::with_capacity(current.len());
    let mut stand_in = record.stand_in(id);
    for mut e in current {
        if removed.contains(e.id.as_str()) {
            if let Some(s) = stand_in.take() {
                out.push(s);
            }
            continue;
        }
        if cleared.contains(e.id.as_str()) {
            clear(&mut e);
        }
        out.push(e);
    }
    out
}

/// Replace a tool entry's results by a one-line note with their size.
fn clear(e: &mut Entry) {
    let tool = e.meta.get("tool_name").and_then(Value::as_str).unwrap_or("the tool").to_string();
    for b in &mut e.content {
        if let ContentBlock::ToolResult(r) = b {
            let size = json_bytes(&r.content);
            r.content = Value::String(format!(
                "[output of {tool} cleared to save context: {size} bytes; run the tool again if it is needed]"
            ));
        }
    }
}

/// Bytes an entry takes in the view.
pub fn entry_bytes(e: &Entry) -> u64 {
    json_bytes(&e.content)
}
