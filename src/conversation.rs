//! The conversation store: rich internal entries, and the API view every request is rendered from.
//!
//! Entries are provider-neutral and never rewritten behind the host's back (only appended to, or updated by
//! id). The API view is derived from them on every request (the part before the newest complete assistant turn
//! is kept rendered, so a request renders only what is new: see `ViewCache`) and is valid by construction: it starts with a user turn,
//! roles alternate, every `tool_use` is answered by exactly one `tool_result` at the front of the next user
//! message, thinking blocks are kept verbatim. Must never: drop information silently — an orphan result is
//! kept as text, a missing one is synthesized as an `is_error` result that says so.

use std::sync::{Arc, Mutex, RwLock};

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use crate::types::{ContentBlock, Message, Messages, Role, StopReason, ToolResultBlock, ToolUseBlock, Usage};

pub(crate) mod compacted;

/// Who an entry belongs to.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum EntryRole {
    /// Input from the user.
    User,
    /// A model turn.
    Assistant,
    /// One tool result (a `tool_result` block).
    Tool,
    /// A note for the host or UI; never sent to the model.
    System,
}

/// Where an entry is in its life.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum EntryStatus {
    /// Still being produced (an assistant turn mid-stream).
    Streaming,
    /// Done; part of the API view.
    Complete,
    /// Failed or interrupted; kept for the record, left out of the API view.
    Error,
}

/// One internal entry.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Entry {
    /// Unique, stable id.
    pub id: String,
    /// Whose entry.
    pub role: EntryRole,
    /// The blocks.
    pub content: Vec<ContentBlock>,
    /// Life-cycle status.
    pub status: EntryStatus,
    /// Creation time, milliseconds since the Unix epoch.
    pub created_at: u64,
    /// How long the model turn or the tool call took.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub duration_ms: Option<u64>,
    /// The model that produced an assistant entry.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub model: Option<String>,
    /// The provider (its wire: `anthropic`, `openai`, `bedrock`, or a host model's name) that produced an
    /// assistant entry: what decides which of its blocks another provider may be sent (see [`crate::carry`]).
    /// `None` (entries from before it was recorded): taken as made by whichever provider the request goes to.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub provider: Option<String>,
    /// Token usage of an assistant entry.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub usage: Option<Usage>,
    /// Why an assistant entry stopped.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stop_reason: Option<StopReason>,
    /// For an error entry: what went wrong.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    /// Host metadata (e.g. a tool entry's `tool_name`), verbatim.
    #[serde(default, skip_serializing_if = "Map::is_empty")]
    pub meta: Map<String, Value>,
}

impl Entry {
    /// A new complete entry with a fresh id and the current time.
    pub fn new(role: EntryRole, content: Vec<ContentBlock>) -> Self {
        Entry {
            id: new_id(),
            role,
            content,
            status: EntryStatus::Complete,
            created_at: now_ms(),
            duration_ms: None,
            model: None,
            provider: None,
            usage: None,
            stop_reason: None,
            error: None,
            meta: Map::new(),
        }
    }

    /// A tool entry holding one result.
    pub fn tool_result(tool_use_id: &str, tool_name: &str, content: Value, is_error: bool) -> Self {
        let mut e = Entry::new(
            EntryRole::Tool,
            vec![ContentBlock::ToolResult(ToolResultBlock {
                tool_use_id: tool_use_id.to_string(),
                content,
                is_error: is_error.then_some(true),
                extra: Map::new(),
            })],
        );
        e.meta.insert("tool_name".into(), Value::String(tool_name.to_string()));
        e
    }

    /// The tool_use blocks of this entry.
    pub fn tool_uses(&self) -> impl Iterator<Item = &ToolUseBlock> {
        self.content.iter().filter_map(|b| if let ContentBlock::ToolUse(t) = b { Some(t) } else { None })
    }

    /// The ids this entry answers (its tool_result blocks).
    pub fn result_ids(&self) -> impl Iterator<Item = &str> {
        self.content
            .iter()
            .filter_map(|b| if let ContentBlock::ToolResult(r) = b { Some(r.tool_use_id.as_str()) } else { None })
    }
}

pub use crate::id::{new_id, now_ms};

/// The thread-safe store.
///
/// # Threads and cloning
/// Clones share one store (`Arc`); every method takes a short lock, so a UI thread can snapshot while a run
/// appends.
#[derive(Clone, Debug, Default)]
pub struct Conversation {
    inner: Arc<Store>,
}

/// The entries, and the rendered view of their stable front (see [`ViewCache`]). Lock order: `entries`
/// first, then `view`.
#[derive(Debug, Default)]
struct Store {
    entries: RwLock<Vec<Entry>>,
    view: Mutex<ViewCache>,
}

/// The rendered view of `entries[..cut]`, kept so a request renders only what came after it: the turns
/// before the newest complete assistant turn never render differently again unless an entry before `cut`
/// changes (update, clear) — appended entries only reach back through a compaction record, and the view is
/// rendered fresh whenever one lies after `cut`.
///
/// Invariant: `prefix == render_view(&entries[..cut])`; when `cut > 0`, `entries[cut]` is a complete,
/// non-empty assistant entry, `prefix` ends with a user message (so nothing after `cut` merges into it,
/// and the `tool_use`s before `cut` are answered inside it), and no compaction record lies at or after `cut`
/// at the time it was set.
#[derive(Debug, Default)]
struct ViewCache {
    cut: usize,
    prefix: Vec<Arc<Message>>,
}

impl Conversation {
    /// An empty store.
    pub fn new() -> Self {
        Self::default()
    }

    /// A store holding `entries`.
    pub fn from_entries(entries: Vec<Entry>) -> Self {
        Conversation { inner: Arc::new(Store { entries: RwLock::new(entries), view: Mutex::default() }) }
    }

    fn read(&self) -> std::sync::RwLockReadGuard<'_, Vec<Entry>> {
        self.inner.entries.read().unwrap_or_else(|e| e.into_inner())
    }

    fn write(&self) -> std::sync::RwLockWriteGuard<'_, Vec<Entry>> {
        self.inner.entries.write().unwrap_or_else(|e| e.into_inner())
    }

    fn view_cache(&self) -> std::sync::MutexGuard<'_, ViewCache> {
        self.inner.view.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Forget the cached view when the entry at `index` (or anything, with `0`) changed in place.
    fn invalidate_from(&self, index: usize) {
        let mut cache = self.view_cache();
        if index <= cache.cut {
            *cache = ViewCache::default();
        }
    }

    /// Append an entry; returns its id.
    pub fn push(&self, entry: Entry) -> String {
        let id = entry.id.clone();
        self.write().push(entry);
        id
    }

    /// Append a new complete entry; returns its id.
    pub fn add(&self, role: EntryRole, content: Vec<ContentBlock>) -> String {
        self.push(Entry::new(role, content))
    }

    /// Change the entry `id` in place. Returns false when there is no such entry.
    pub fn update(&self, id: &str, f: impl FnOnce(&mut Entry)) -> bool {
        let mut entries = self.write();
        match entries.iter_mut().enumerate().find(|(_, e)| e.id == id) {
            Some((i, e)) => {
                f(e);
                self.invalidate_from(i);
                true
            }
            None => false,
        }
    }

    /// Append blocks to the entry `id`.
    pub fn append(&self, id: &str, blocks: Vec<ContentBlock>) -> bool {
        self.update(id, |e| e.content.extend(blocks))
    }

    /// A copy of entry `id`.
    pub fn get(&self, id: &str) -> Option<Entry> {
        self.read().iter().find(|e| e.id == id).cloned()
    }

    /// Call `f` with the entries, in order, under a short read lock (no copy): what a check over every entry
    /// needs. `f` must not call back into this store.
    pub fn with_entries<T>(&self, f: impl FnOnce(&[Entry]) -> T) -> T {
        f(&self.read())
    }

    /// A copy of every entry, in order.
    pub fn snapshot(&self) -> Vec<Entry> {
        self.read().clone()
    }

    /// Bytes (compact JSON) of the content of the entries from index `start` on, or `None` when the store
    /// holds fewer than `start` entries (it was cleared). For estimating what was added since a request.
    pub fn content_bytes_from(&self, start: usize) -> Option<u64> {
        let entries = self.read();
        let added = entries.get(start..)?;
        Some(added.iter().filter(|e| e.status == EntryStatus::Complete).map(compacted::entry_bytes).sum())
    }

    /// Number of entries.
    pub fn len(&self) -> usize {
        self.read().len()
    }

    /// Whether the store is empty.
    pub fn is_empty(&self) -> bool {
        self.read().is_empty()
    }

    /// Remove every entry.
    pub fn clear(&self) {
        let mut entries = self.write();
        entries.clear();
        self.invalidate_from(0);
    }

    /// Sum of the usage of every assistant entry (errors included: those tokens were spent too).
    pub fn usage(&self) -> Usage {
        let mut total = Usage::default();
        for e in self.read().iter() {
            if let Some(u) = &e.usage {
                total.add(u);
            }
        }
        total
    }

    /// Estimated cost in USD of the whole conversation: each turn priced with its own model
    /// ([`crate::pricing`]). `None` when no turn's model has a known price.
    pub fn cost_usd(&self) -> Option<f64> {
        cost_usd(&self.read())
    }

    /// The tool calls of the last complete assistant turn that have no result yet (what a resume must
    /// run or answer before the next request).
    pub fn pending_tool_uses(&self) -> Vec<ToolUseBlock> {
        let entries = self.read();
        let Some(pos) =
            entries.iter().rposition(|e| e.role == EntryRole::Assistant && e.status == EntryStatus::Complete)
        else {
            return Vec::new();
        };
        let answered: Vec<&str> = entries[pos + 1..]
            .iter()
            .filter(|e| e.status == EntryStatus::Complete)
            .flat_map(|e| e.result_ids())
            .collect();
        entries[pos].tool_uses().filter(|t| !answered.contains(&t.id.as_str())).cloned().collect()
    }

    /// The API view (see the module docs for the rules it guarantees).
    pub fn api_view(&self) -> Vec<Message> {
        self.shared_view().into_vec()
    }

    /// The API view as shared messages: the turns before the newest complete assistant turn are the same
    /// `Arc`s from one call to the next (until a change reaches back, such as a compaction), so building a
    /// request costs what is new, and a binding can reuse what it built for an unchanged message.
    pub fn shared_view(&self) -> Messages {
        let entries = self.read();
        let mut cache = self.view_cache();
        advance(&mut cache, &entries);
        let tail = &entries[cache.cut..];
        if cache.cut == 0 || compacted::any(tail) {
            return render_view(&entries).into();
        }
        // Cut invariant: the tail starts with an assistant message and holds no compaction record, so its
        // rendering does not reach back, and nothing of it merges into the prefix.
        let tail = render_messages(tail);
        let mut msgs = Messages::with_capacity(cache.prefix.len() + tail.len());
        msgs.extend(cache.prefix.iter().cloned());
        msgs.extend(tail);
        msgs
    }
}

/// The key of an entry's `meta` that holds what its request was charged in USD, when the agent priced it (at
/// the higher of the requested and the answering model's price, or by its estimate when no usage came back).
pub const COST_KEY: &str = "cost_usd";

/// Cost in USD of `entries` (a store's, or a session's as loaded): each entry with usage at what it was
/// charged ([`COST_KEY`]), else priced with its own model by [`crate::models::cost_usd`]. `None` when no
/// entry has a cost.
pub fn cost_usd(entries: &[Entry]) -> Option<f64> {
    let charged = |e: &Entry| e.meta.get(COST_KEY).and_then(serde_json::Value::as_f64);
    let priced = entries
        .iter()
        .filter_map(|e| charged(e).or_else(|| crate::models::cost_usd(e.model.as_deref()?, e.usage.as_ref()?)));
    priced.fold(None, |total, c| Some(total.unwrap_or(0.0) + c))
}

/// Move the cache's cut to the newest complete assistant entry after which no compaction record lies,
/// when the view before it ends with a user message (see [`ViewCache`]).
fn advance(cache: &mut ViewCache, entries: &[Entry]) {
    if cache.cut > entries.len() {
        *cache = ViewCache::default();
    }
    let Some(cut) = entries.iter().rposition(|e| {
        (e.role == EntryRole::Assistant && e.status == EntryStatus::Complete && !e.content.is_empty())
            || (e.role == EntryRole::System && e.meta.contains_key(compacted::META_KEY))
    }) else {
        return;
    };
    if cut <= cache.cut || entries[cut].role != EntryRole::Assistant {
        return;
    }
    let between = &entries[cache.cut..cut];
    let prefix = if cache.cut == 0 || compacted::any(between) {
        // Merging is decided before results are paired: the entries themselves must end with a user turn.
        if !ends_with_user(&compacted::effective(&entries[..cut])) {
            return;
        }
        render_view(&entries[..cut]).into_iter().map(Arc::new).collect()
    } else {
        if !ends_with_user(between) {
            return;
        }
        let mut p = std::mem::take(&mut cache.prefix);
        p.extend(render_messages(between).into_iter().map(Arc::new));
        p
    };
    // Always true given the checks above; should it not be, render everything fresh rather than trust it.
    *cache = if prefix.last().map(|m| m.role) == Some(Role::User) {
        ViewCache { cut, prefix }
    } else {
        ViewCache::default()
    };
}

/// Whether the last entry of `entries` (compactions applied) that reaches the view speaks as the user.
fn ends_with_user(entries: &[Entry]) -> bool {
    let last = entries
        .iter()
        .rev()
        .find(|e| e.status == EntryStatus::Complete && !e.content.is_empty() && e.role != EntryRole::System);
    matches!(last.map(|e| e.role), Some(EntryRole::User | EntryRole::Tool))
}

/// Render entries into a valid API view (compactions applied: see [`crate::compaction`]).
pub fn render_view(entries: &[Entry]) -> Vec<Message> {
    let entries = compacted::effective(entries);
    let mut msgs = render_messages(&entries);
    // 4. Start with a user turn.
    if msgs.first().map(|m| m.role) == Some(Role::Assistant) {
        msgs.insert(0, Message::user("(conversation resumed)"));
    }
    msgs
}

/// Steps 1-3 of [`render_view`] over entries with compactions already applied.
fn render_messages(entries: &[Entry]) -> Vec<Message> {
    // 1. Keep complete, sendable entries; tool entries speak as the user.
    let mut msgs: Vec<Message> = Vec::new();
    for e in entries.iter() {
        if e.status != EntryStatus::Complete || e.content.is_empty() {
            continue;
        }
        let role = match e.role {
            EntryRole::User | EntryRole::Tool => Role::User,
            EntryRole::Assistant => Role::Assistant,
            EntryRole::System => continue,
        };
        // 2. Merge adjacent same-role turns.
        match msgs.last_mut() {
            Some(last) if last.role == role => last.content.extend(e.content.iter().cloned()),
            _ => msgs.push(Message { role, content: e.content.clone() }),
        }
    }
    // 3. Pair every tool_use with exactly one result at the front of the next user message.
    let mut i = 0;
    while i < msgs.len() {
        if msgs[i].role == Role::Assistant {
            let calls: Vec<(String, String)> = msgs[i]
                .content
                .iter()
                .filter_map(
                    |b| if let ContentBlock::ToolUse(t) = b { Some((t.id.clone(), t.name.clone())) } else { None },
                )
                .collect();
            if !calls.is_empty() {
                if msgs.get(i + 1).map(|m| m.role) != Some(Role::User) {
                    msgs.insert(i + 1, Message { role: Role::User, content: Vec::new() });
                }
                repair_results(&calls, &mut msgs[i + 1].content);
            }
        } else {
            // A user message not right after a tool-calling assistant turn may not hold results.
            let prev_calls = i > 0 && msgs[i - 1].content.iter().any(|b| matches!(b, ContentBlock::ToolUse(_)));
            if !prev_calls {
                orphans_to_text(&mut msgs[i].content, &[]);
            }
        }
        i += 1;
    }
    msgs
}

fn repair_results(calls: &[(String, String)], content: &mut Vec<ContentBlock>) {
    let ids: Vec<&str> = calls.iter().map(|(id, _)| id.as_str()).collect();
    orphans_to_text(content, &ids);
    // Keep the first result per id, in call order, ahead of everything else.
    let mut results = Vec::new();
    let mut rest = Vec::new();
    let mut seen: Vec<String> = Vec::new();
    for b in content.drain(..) {
        match b {
            ContentBlock::ToolResult(r) if !seen.contains(&r.tool_use_id) => {
                seen.push(r.tool_use_id.clone());
                results.push(r);
            }
            ContentBlock::ToolResult(r) => rest.push(ContentBlock::text(format!(
                "[a second result for tool call {} was dropped from the view: {}]",
                r.tool_use_id,
                r.text()
            ))),
            other => rest.push(other),
        }
    }
    let mut ordered = Vec::new();
    for (id, name) in calls {
        match results.iter().position(|r| &r.tool_use_id == id) {
            Some(p) => ordered.push(ContentBlock::ToolResult(results.remove(p))),
            None => ordered.push(ContentBlock::ToolResult(ToolResultBlock {
                tool_use_id: id.clone(),
                content: Value::String(format!("Tool '{name}' has no result: it was not run (the run stopped first).")),
                is_error: Some(true),
                extra: Map::new(),
            })),
        }
    }
    ordered.extend(rest);
    *content = ordered;
}

/// Results whose id is not in `ids` become text, so nothing is lost and the API accepts the message.
fn orphans_to_text(content: &mut [ContentBlock], ids: &[&str]) {
    for b in content.iter_mut() {
        if let ContentBlock::ToolResult(r) = b {
            if !ids.contains(&r.tool_use_id.as_str()) {
                *b = ContentBlock::text(format!("[result of tool call {}]: {}", r.tool_use_id, r.text()));
            }
        }
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use crate::types::{ThinkingBlock, ToolUseBlock};
    use serde_json::json;

    fn tool_use(id: &str) -> ContentBlock {
        ContentBlock::ToolUse(ToolUseBlock { id: id.into(), name: "f".into(), input: json!({}), extra: Map::new() })
    }

    fn roles(v: &[Message]) -> Vec<Role> {
        v.iter().map(|m| m.role).collect()
    }

    /// A small deterministic generator, so a failing walk can be replayed.
    struct Lcg(u64);

    impl Lcg {
        fn below(&mut self, n: usize) -> usize {
            self.0 = self.0.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
            ((self.0 >> 33) as usize) % n.max(1)
        }
    }

    /// Every operation the store sees (turns, streamed turns, tool results in and out of order, interrupted
    /// calls, error turns, paused turns, compactions that remove and clear, in-place updates, reset, resume
    /// from a snapshot): after each, the view served with the cache must equal a fresh render, twice.
    #[test]
    fn cached_view_equals_a_fresh_render_after_every_operation() {
        use compacted::{Compaction, Method, Reason};
        let mut cached_steps = 0;
        for seed in 1..=6u64 {
            let mut rng = Lcg(seed);
            let mut c = Conversation::new();
            let mut calls: Vec<String> = Vec::new();
            let mut next = 0;
            for step in 0..300 {
                let entries = c.snapshot();
                match rng.below(16) {
                    0 | 1 => {
                        c.add(EntryRole::User, vec![ContentBlock::text(format!("user {step}"))]);
                    }
                    2 => {
                        c.add(EntryRole::Assistant, vec![ContentBlock::text(format!("answer {step}"))]);
                    }
                    3..=5 => {
                        // A streamed turn with calls: pushed while streaming, completed in place, like the loop.
                        let mut e = Entry::new(EntryRole::Assistant, Vec::new());
                        e.status = EntryStatus::Streaming;
                        let id = c.push(e);
                        let _ = c.api_view();
                        let mut content = vec![ContentBlock::text(format!("calling {step}"))];
                        for _ in 0..=rng.below(3) {
                            next += 1;
                            let call = format!("call_{seed}_{next}");
                            content.push(tool_use(&call));
                            calls.push(call);
                        }
                        c.update(&id, |e| {
                            e.content = content;
                            e.status = EntryStatus::Complete;
                        });
                    }
                    6..=8 if !calls.is_empty() => {
                        // A result: mostly for the newest calls, sometimes a late or a second one.
                        let k = if rng.below(4) == 0 { rng.below(calls.len()) } else { calls.len() - 1 };
                        let call = calls[k].clone();
                        c.push(Entry::tool_result(&call, "t", json!(format!("result {step}")), rng.below(5) == 0));
                    }
                    9 => {
                        for call in c.pending_tool_uses() {
                            c.push(Entry::tool_result(&call.id, &call.name, json!("interrupted"), true));
                        }
                    }
                    10 => {
                        let kind = rng.below(3);
                        let mut e = Entry::new(
                            if kind == 0 { EntryRole::System } else { EntryRole::Assistant },
                            if kind == 2 { Vec::new() } else { vec![ContentBlock::text("note")] },
                        );
                        if kind == 1 {
                            e.status = EntryStatus::Error;
                        }
                        c.push(e);
                    }
                    11 => {
                        let server = ContentBlock::Unknown(
                            json!({"type": "server_tool_use", "id": format!("s{step}"), "name": "web_search", "input": {}}),
                        );
                        c.add(EntryRole::Assistant, vec![ContentBlock::text("searching"), server]);
                    }
                    12 if entries.len() > 4 => {
                        let from = rng.below(entries.len() / 2);
                        let to = from + rng.below(entries.len() / 2 - from + 1);
                        let record = Compaction {
                            reason: Reason::Threshold,
                            method: if rng.below(2) == 0 { Method::Summary } else { Method::ClearToolResults },
                            tokens_before: 100,
                            tokens_after: 10,
                            removed: entries[from..to].iter().map(|e| e.id.clone()).collect(),
                            cleared: entries
                                .iter()
                                .filter(|e| e.role == EntryRole::Tool && rng.below(2) == 0)
                                .map(|e| e.id.clone())
                                .collect(),
                            summary: Some(format!("summary {step}")),
                            fallback_reason: None,
                            instructions: None,
                            todos: None,
                        };
                        c.push(record.into_entry());
                    }
                    13 if !entries.is_empty() => {
                        let e = &entries[rng.below(entries.len())];
                        let status = [EntryStatus::Complete, EntryStatus::Error][rng.below(2)];
                        c.update(&e.id, |e| {
                            e.content.push(ContentBlock::text(format!("edited {step}")));
                            e.status = status;
                        });
                    }
                    14 => {
                        // Resume: a new store from what a session would hold.
                        c = Conversation::from_entries(c.snapshot());
                    }
                    _ if rng.below(8) == 0 => c.clear(),
                    _ => {}
                }
                let fresh = render_view(&c.snapshot());
                assert_eq!(c.api_view(), fresh, "seed {seed}, step {step}");
                assert_eq!(c.api_view(), fresh, "seed {seed}, step {step}, second call");
                assert_eq!(c.shared_view(), fresh, "seed {seed}, step {step}, shared");
                if c.view_cache().cut > 0 {
                    cached_steps += 1;
                }
            }
        }
        // The walk must have exercised the cache, not only the fresh render.
        assert!(cached_steps > 600, "the cache served only {cached_steps} views");
    }

    /// A long tool loop renders through the cache: the cut follows the newest assistant turn.
    #[test]
    fn a_tool_loop_keeps_its_cut_at_the_newest_assistant_turn() {
        let c = Conversation::new();
        c.add(EntryRole::User, vec![ContentBlock::text("go")]);
        for k in 0..50 {
            let id = c.add(EntryRole::Assistant, vec![tool_use(&format!("c{k}"))]);
            c.push(Entry::tool_result(&format!("c{k}"), "t", json!("ok"), false));
            assert_eq!(c.api_view(), render_view(&c.snapshot()));
            let at = c.snapshot().iter().position(|e| e.id == id).unwrap();
            assert_eq!(c.view_cache().cut, at);
        }
    }

    /// Building a view costs what is new: the messages before the previous newest assistant turn are the
    /// very same `Arc`s as in the previous view, not copies (what makes a request O(new content)).
    #[test]
    fn a_tool_loop_shares_its_unchanged_messages_between_views() {
        let c = Conversation::new();
        c.add(EntryRole::User, vec![ContentBlock::text("go")]);
        let mut prev: Option<Messages> = None;
        for k in 0..30 {
            c.add(EntryRole::Assistant, vec![tool_use(&format!("c{k}"))]);
            c.push(Entry::tool_result(&format!("c{k}"), "t", json!("ok"), false));
            let view = c.shared_view();
            assert_eq!(view, render_view(&c.snapshot()));
            if let Some(prev) = prev.filter(|_| k >= 2) {
                let kept = prev.len() - 2;
                let same = (0..kept).filter(|&i| Arc::ptr_eq(&prev.shared()[i], &view.shared()[i])).count();
                assert_eq!(same, kept, "turn {k}: only {same} of {kept} unchanged messages shared");
            }
            prev = Some(view);
        }
    }

    #[test]
    fn empty_store_renders_empty_view() {
        assert!(Conversation::new().api_view().is_empty());
    }

    #[test]
    fn one_message_renders_one_user_turn() {
        let c = Conversation::new();
        c.add(EntryRole::User, vec![ContentBlock::text("hi")]);
        assert_eq!(c.api_view(), vec![Message::user("hi")]);
    }

    #[test]
    fn three_user_messages_in_a_row_merge_into_one() {
        let c = Conversation::new();
        for t in ["a", "b", "c"] {
            c.add(EntryRole::User, vec![ContentBlock::text(t)]);
        }
        let v = c.api_view();
        assert_eq!(v.len(), 1);
        assert_eq!(v[0].content.len(), 3);
    }

    #[test]
    fn system_entry_first_is_dropped_and_assistant_first_gets_a_user_turn() {
        let c = Conversation::new();
        c.add(EntryRole::System, vec![ContentBlock::text("note")]);
        c.add(EntryRole::Assistant, vec![ContentBlock::text("hello")]);
        let v = c.api_view();
        assert_eq!(roles(&v), vec![Role::User, Role::Assistant]);
    }

    #[test]
    fn error_entry_in_the_middle_is_left_out() {
        let c = Conversation::new();
        c.add(EntryRole::User, vec![ContentBlock::text("q")]);
        let mut bad = Entry::new(EntryRole::Assistant, vec![ContentBlock::text("partial")]);
        bad.status = EntryStatus::Error;
        c.push(bad);
        c.add(EntryRole::User, vec![ContentBlock::text("again")]);
        let v = c.api_view();
        assert_eq!(roles(&v), vec![Role::User]);
        assert_eq!(v[0].content.len(), 2);
    }

    #[test]
    fn parallel_results_go_into_one_user_message_results_first_in_call_order() {
        let c = Conversation::new();
        c.add(EntryRole::User, vec![ContentBlock::text("q")]);
        c.add(EntryRole::Assistant, vec![ContentBlock::text("calling"), tool_use("a"), tool_use("b"), tool_use("c")]);
        c.push(Entry::tool_result("c", "f", json!("C"), false));
        c.push(Entry::tool_result("a", "f", json!("A"), false));
        c.add(EntryRole::User, vec![ContentBlock::text("also this")]);
        c.push(Entry::tool_result("b", "f", json!("B"), true));
        let v = c.api_view();
        assert_eq!(roles(&v), vec![Role::User, Role::Assistant, Role::User]);
        let kinds: Vec<String> = v[2]
            .content
            .iter()
            .map(|b| match b {
                ContentBlock::ToolResult(r) => r.tool_use_id.clone(),
                other => other.kind().to_string(),
            })
            .collect();
        assert_eq!(kinds, vec!["a", "b", "c", "text"]);
    }

    #[test]
    fn missing_result_is_synthesized_as_error_and_orphan_kept_as_text() {
        let c = Conversation::new();
        c.add(EntryRole::User, vec![ContentBlock::text("q")]);
        c.add(EntryRole::Assistant, vec![tool_use("a")]);
        c.push(Entry::tool_result("zzz", "f", json!("orphan"), false));
        let v = c.api_view();
        match &v[2].content[0] {
            ContentBlock::ToolResult(r) => assert_eq!((r.tool_use_id.as_str(), r.is_error), ("a", Some(true))),
            other => panic!("{other:?}"),
        }
        assert!(matches!(&v[2].content[1], ContentBlock::Text(t) if t.text.contains("orphan")));
    }

    #[test]
    fn thinking_and_tool_use_round_trip_verbatim_and_unknown_kept() {
        let c = Conversation::new();
        c.add(EntryRole::User, vec![ContentBlock::text("q")]);
        let thinking = ContentBlock::Thinking(ThinkingBlock {
            thinking: "t".into(),
            signature: "S1g==".into(),
            extra: Map::new(),
        });
        let unknown =
            ContentBlock::Unknown(json!({"type": "server_tool_use", "id": "s1", "name": "web_search", "input": {}}));
        c.add(EntryRole::Assistant, vec![thinking.clone(), unknown.clone(), tool_use("a")]);
        c.push(Entry::tool_result("a", "f", json!("ok"), false));
        let v = c.api_view();
        assert_eq!(v[1].content[0], thinking);
        assert_eq!(v[1].content[1], unknown);
    }

    #[test]
    fn pending_tool_uses_lists_unanswered_calls() {
        let c = Conversation::new();
        c.add(EntryRole::User, vec![ContentBlock::text("q")]);
        c.add(EntryRole::Assistant, vec![tool_use("a"), tool_use("b")]);
        c.push(Entry::tool_result("a", "f", json!("A"), false));
        let pending: Vec<String> = c.pending_tool_uses().into_iter().map(|t| t.id).collect();
        assert_eq!(pending, vec!["b"]);
    }

    #[test]
    fn streaming_entries_are_left_out_of_the_view() {
        let c = Conversation::new();
        c.add(EntryRole::User, vec![ContentBlock::text("q")]);
        let mut live = Entry::new(EntryRole::Assistant, vec![ContentBlock::text("half an ans")]);
        live.status = EntryStatus::Streaming;
        c.push(live);
        assert_eq!(c.api_view(), vec![Message::user("q")]);
    }

    #[test]
    fn a_paused_turn_and_its_continuation_merge_into_one_assistant_message() {
        let c = Conversation::new();
        c.add(EntryRole::User, vec![ContentBlock::text("q")]);
        let server =
            ContentBlock::Unknown(json!({"type": "server_tool_use", "id": "s1", "name": "web_search", "input": {}}));
        c.add(EntryRole::Assistant, vec![ContentBlock::text("searching"), server.clone()]);
        c.add(EntryRole::Assistant, vec![ContentBlock::text("found it")]);
        let v = c.api_view();
        assert_eq!(roles(&v), vec![Role::User, Role::Assistant]);
        assert_eq!(v[1].content, vec![ContentBlock::text("searching"), server, ContentBlock::text("found it")]);
    }

    #[test]
    fn a_trailing_unanswered_tool_use_gets_a_synthesized_error_result() {
        let c = Conversation::new();
        c.add(EntryRole::User, vec![ContentBlock::text("q")]);
        c.add(EntryRole::Assistant, vec![tool_use("a"), tool_use("b")]);
        let v = c.api_view();
        assert_eq!(roles(&v), vec![Role::User, Role::Assistant, Role::User]);
        for (block, id) in v[2].content.iter().zip(["a", "b"]) {
            match block {
                ContentBlock::ToolResult(r) => {
                    assert_eq!((r.tool_use_id.as_str(), r.is_error), (id, Some(true)));
                    assert!(r.text().contains("not run"), "{}", r.text());
                }
                other => panic!("{other:?}"),
            }
        }
    }

    #[test]
    fn a_second_result_for_one_call_is_kept_as_text_not_sent_twice() {
        let c = Conversation::new();
        c.add(EntryRole::User, vec![ContentBlock::text("q")]);
        c.add(EntryRole::Assistant, vec![tool_use("a")]);
        c.push(Entry::tool_result("a", "f", json!("first"), false));
        c.push(Entry::tool_result("a", "f", json!("second"), false));
        let v = c.api_view();
        let results = v[2].content.iter().filter(|b| matches!(b, ContentBlock::ToolResult(_))).count();
        assert_eq!(results, 1);
        assert!(matches!(&v[2].content[0], ContentBlock::ToolResult(r) if r.text() == "first"));
        assert!(matches!(&v[2].content[1], ContentBlock::Text(t) if t.text.contains("second")));
    }

    #[test]
    fn a_late_result_for_an_earlier_turn_becomes_text_and_the_earlier_call_is_answered() {
        let c = Conversation::new();
        c.add(EntryRole::User, vec![ContentBlock::text("q")]);
        c.add(EntryRole::Assistant, vec![tool_use("a")]);
        c.add(EntryRole::User, vec![ContentBlock::text("never mind")]);
        c.add(EntryRole::Assistant, vec![ContentBlock::text("ok")]);
        c.push(Entry::tool_result("a", "f", json!("late"), false));
        let v = c.api_view();
        assert_eq!(roles(&v), vec![Role::User, Role::Assistant, Role::User, Role::Assistant, Role::User]);
        assert!(
            matches!(&v[2].content[0], ContentBlock::ToolResult(r) if r.tool_use_id == "a" && r.is_error == Some(true))
        );
        assert_eq!(v[4].content.len(), 1);
        assert!(matches!(&v[4].content[0], ContentBlock::Text(t) if t.text.contains("late")));
    }

    #[test]
    fn pending_tool_uses_skip_error_turns_and_empty_when_all_answered() {
        let c = Conversation::new();
        c.add(EntryRole::User, vec![ContentBlock::text("q")]);
        c.add(EntryRole::Assistant, vec![tool_use("a")]);
        c.push(Entry::tool_result("a", "f", json!("A"), false));
        let mut cut = Entry::new(EntryRole::Assistant, vec![tool_use("b")]);
        cut.status = EntryStatus::Error;
        c.push(cut);
        assert!(c.pending_tool_uses().is_empty(), "a failed turn's calls are not pending: they never ran");
    }

    #[test]
    fn usage_sums_complete_and_error_entries_cache_fields_included() {
        let c = Conversation::new();
        let mut ok = Entry::new(EntryRole::Assistant, vec![ContentBlock::text("a")]);
        ok.usage =
            Some(Usage { input_tokens: 10, output_tokens: 2, cache_read_input_tokens: Some(30), ..Default::default() });
        let mut failed = Entry::new(EntryRole::Assistant, vec![]);
        failed.status = EntryStatus::Error;
        failed.usage = Some(Usage { input_tokens: 5, cache_creation_input_tokens: Some(7), ..Default::default() });
        c.push(ok);
        c.push(failed);
        let u = c.usage();
        assert_eq!(
            (u.input_tokens, u.output_tokens, u.cache_read_input_tokens, u.cache_creation_input_tokens),
            (15, 2, Some(30), Some(7))
        );
    }

    #[test]
    fn update_and_append_by_id_and_unknown_ids_report_false() {
        let c = Conversation::new();
        let id = c.add(EntryRole::Assistant, vec![ContentBlock::text("a")]);
        assert!(c.append(&id, vec![ContentBlock::text("b")]));
        assert!(c.update(&id, |e| e.status = EntryStatus::Error));
        assert_eq!(c.get(&id).unwrap().content.len(), 2);
        assert_eq!(c.get(&id).unwrap().status, EntryStatus::Error);
        assert!(!c.update("nope", |_| {}));
        assert!(!c.append("nope", vec![]));
    }

    #[test]
    fn ids_are_unique() {
        let ids: std::collections::HashSet<String> = (0..1000).map(|_| new_id()).collect();
        assert_eq!(ids.len(), 1000);
    }
}
