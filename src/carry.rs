//! One conversation, any provider: what a conversation made partly by one provider (or model) carries into
//! a request for another, so every request stays valid after a switch ([`crate::Agent::set_model`], a
//! fallback).
//!
//! The store keeps what each assistant entry was made by ([`Entry::provider`], [`Entry::model`]); the view a
//! request is rendered from is adapted to the provider and model it goes to (its *target*) by these rules:
//!
//! 1. **Signed or encrypted content goes back only to its maker.** A `thinking` block with a signature and a
//!    `redacted_thinking` block are sent only to the provider that made them *and* the same model (a
//!    signature is checked for the model that can read it; Anthropic and Bedrock are not assumed to share
//!    signatures). Blocks tooloop does not model (`server_tool_use`, `web_search_tool_result`, a wire's own
//!    reasoning items) in an assistant turn go only to the provider that made them. Text blocks lose their
//!    `citations` on another provider (they point into search results that were not carried). A `thinking`
//!    block without a signature never goes to Anthropic or Bedrock, which refuse it.
//! 2. **Thinking text is kept as plain text only in the open turn.** The reasoning a dropped block held is
//!    kept, as a text block saying whose reasoning it was, only in the turn whose tool calls are being
//!    answered right now (the newest assistant turn with calls, no user message after it): it is the plan
//!    those calls are part of, and the new model goes on with it. Older reasoning is dropped: the answers
//!    and calls after it carry its conclusions (Anthropic drops earlier turns' thinking from the context for
//!    the same reason). Thinking without a signature (Chat Completions `reasoning_content`) from another
//!    provider follows the same rule.
//! 3. **Tool call ids fit the target's rule** ([`id_rule`]): an id the target would refuse (Anthropic and
//!    Bedrock take `^[a-zA-Z0-9_-]{1,64}$`, Chat Completions at most 40 characters) is replaced, in the call
//!    and in its result alike, by [`wire_id`]: the same id always maps to the same replacement, which keeps
//!    the valid characters of the original and ends in a hash of it. The store keeps the original ids.
//! 4. **A tool loop that changes hands sends no thinking config the target would refuse**: Anthropic (and
//!    Bedrock) require, with thinking on, that the assistant turn whose calls are being answered start with
//!    its own thinking block; when that turn was made elsewhere (its thinking dropped by rule 1), the
//!    request goes without `thinking` — what the API itself recommends — and the next turn has it again.
//!
//! Roles alternating, every call answered by exactly one result and every result by its call stay what the
//! view guarantees ([`crate::conversation::render_view`]): an entry left empty by the rules is left out and
//! its neighbours merge.
//!
//! Must never: change the store (only the view a request is built from), or send a signature, encrypted
//! reasoning or a server tool's block to a provider other than its maker.

use std::borrow::Cow;

use serde_json::Value;

use crate::conversation::{Entry, EntryRole, EntryStatus, render_view};
use crate::types::{ContentBlock, Message, Request, Role, TextBlock};

/// Where a request goes: the provider's name ([`crate::provider::Provider::name`]) and the model asked for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Target<'a> {
    /// The provider (wire): `anthropic`, `openai`, `bedrock`, a host model's name, …
    pub provider: &'a str,
    /// The model name the request asks for.
    pub model: &'a str,
}

/// The key of an entry's `meta` holding the model a request asked for, when the answer named another (a
/// dated snapshot of an alias): signatures are matched against either.
pub const REQUESTED_MODEL_KEY: &str = "requested_model";

/// How an entry's maker relates to a target.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Maker {
    /// The same provider and model (or not recorded): everything goes back as made.
    Same,
    /// The same provider, another model: signed blocks stay behind.
    SameProvider,
    /// Another provider.
    Other,
}

fn maker(e: &Entry, target: Target<'_>) -> Maker {
    let Some(provider) = e.provider.as_deref() else { return Maker::Same };
    if provider != target.provider {
        return Maker::Other;
    }
    let requested = e.meta.get(REQUESTED_MODEL_KEY).and_then(Value::as_str);
    match e.model.as_deref() {
        None => Maker::Same,
        Some(m) if m == target.model || requested == Some(target.model) => Maker::Same,
        Some(_) => Maker::SameProvider,
    }
}

/// Whether the target takes `thinking` blocks only with a signature (the Messages API's wires).
fn signs(target: Target<'_>) -> bool {
    matches!(target.provider, "anthropic" | "bedrock")
}

/// Whether `block` of an assistant entry by `maker` may go to the target as it is.
fn keeps(block: &ContentBlock, maker: Maker, target: Target<'_>) -> bool {
    match (maker, block) {
        // Reasoning without a signature (an entry from before makers were recorded, made by a Chat
        // Completions server) is refused by a wire that checks signatures.
        (_, ContentBlock::Thinking(t)) if t.signature.is_empty() && signs(target) => false,
        (Maker::Same, _) => true,
        (_, ContentBlock::RedactedThinking(_)) => false,
        // A Responses reasoning item (its `encrypted_content`) is readable only by the model that made it.
        (_, ContentBlock::Thinking(t)) if t.extra.contains_key(crate::provider::responses::REASONING_KEY) => false,
        (_, ContentBlock::Thinking(t)) => maker == Maker::SameProvider && t.signature.is_empty(),
        (Maker::Other, ContentBlock::Unknown(_)) => false,
        (Maker::Other, ContentBlock::Text(t)) => t.citations.is_none(),
        _ => true,
    }
}

/// Whether some entry of `entries` holds what the target may not take as it is (then the view must be
/// rendered through [`view`]; otherwise the plain view is the same).
pub fn needs_carrying(entries: &[Entry], target: Target<'_>) -> bool {
    entries.iter().any(|e| {
        e.role == EntryRole::Assistant && e.status == EntryStatus::Complete && {
            let m = maker(e, target);
            e.content.iter().any(|b| !keeps(b, m, target))
        }
    })
}

/// Index of the open turn: the newest complete assistant entry with tool calls that no user message
/// follows (its calls are what the next request answers).
fn open_turn(entries: &[Entry]) -> Option<usize> {
    for (i, e) in entries.iter().enumerate().rev() {
        if e.status != EntryStatus::Complete || e.content.is_empty() {
            continue;
        }
        match e.role {
            EntryRole::User => return None,
            EntryRole::Assistant if e.tool_uses().next().is_some() => return Some(i),
            EntryRole::Assistant => return None,
            EntryRole::Tool | EntryRole::System => {}
        }
    }
    None
}

/// The entries as the target may take them (rules 1 and 2 of the module docs); borrowed when nothing
/// changes.
pub fn carry_entries<'e>(entries: &'e [Entry], target: Target<'_>) -> Cow<'e, [Entry]> {
    if !needs_carrying(entries, target) {
        return Cow::Borrowed(entries);
    }
    let open = open_turn(entries);
    let mut out = entries.to_vec();
    for (i, e) in out.iter_mut().enumerate() {
        if e.role != EntryRole::Assistant || e.status != EntryStatus::Complete {
            continue;
        }
        let m = maker(e, target);
        if e.content.iter().all(|b| keeps(b, m, target)) {
            continue;
        }
        let mut reasoning = Vec::new();
        let mut content = Vec::with_capacity(e.content.len());
        for block in std::mem::take(&mut e.content) {
            if keeps(&block, m, target) {
                content.push(block);
                continue;
            }
            match block {
                ContentBlock::Thinking(t) if open == Some(i) && !t.thinking.trim().is_empty() => {
                    reasoning.push(t.thinking)
                }
                ContentBlock::Text(mut t) => {
                    t.citations = None;
                    content.push(ContentBlock::Text(t));
                }
                _ => {}
            }
        }
        if !reasoning.is_empty() {
            let by = e.model.as_deref().unwrap_or("another model");
            // Ends with a blank line: Chat Completions joins an assistant turn's text blocks as they are.
            let text = format!("[my reasoning before these tool calls, as {by}]\n{}\n\n", reasoning.join("\n\n"));
            content.insert(0, ContentBlock::Text(TextBlock { text, ..Default::default() }));
        }
        e.content = content;
    }
    Cow::Owned(out)
}

/// The API view of `entries` for `target`: [`render_view`] of what [`carry_entries`] keeps.
pub fn view(entries: &[Entry], target: Target<'_>) -> Vec<Message> {
    render_view(&carry_entries(entries, target))
}

/// What a target takes as a tool call id.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct IdRule {
    /// The longest id taken, in characters.
    pub max_len: usize,
    /// Only ASCII letters, digits, `_` and `-`.
    pub word_chars: bool,
}

impl IdRule {
    /// Whether `id` is taken as it is.
    pub fn accepts(&self, id: &str) -> bool {
        !id.is_empty()
            && id.chars().count() <= self.max_len
            && (!self.word_chars || id.chars().all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-'))
    }
}

/// The tool call id rule of a provider: Anthropic and Bedrock `^[a-zA-Z0-9_-]{1,64}$`; Chat Completions
/// (`openai`) any non-empty string of at most 40 characters (OpenAI refuses longer ones); a host model any
/// non-empty string; any other wire the rule every wire takes, `^[a-zA-Z0-9_-]{1,40}$`.
pub fn id_rule(provider: &str) -> IdRule {
    match provider {
        "anthropic" | "bedrock" => IdRule { max_len: 64, word_chars: true },
        "openai" => IdRule { max_len: 40, word_chars: false },
        "host" | "scripted" => IdRule { max_len: usize::MAX, word_chars: false },
        _ => IdRule { max_len: 40, word_chars: true },
    }
}

/// `id` as `rule` takes it: unchanged when it is taken, else its word characters (as many as fit) and a hash
/// of the whole id (`_` and 16 hex digits), so one id always maps to one replacement and two ids to two.
pub fn wire_id(id: &str, rule: IdRule) -> Cow<'_, str> {
    if rule.accepts(id) {
        return Cow::Borrowed(id);
    }
    // FNV-1a: stable across builds and platforms (a session resumed elsewhere maps the same way).
    let hash = id.bytes().fold(0xcbf2_9ce4_8422_2325_u64, |h, b| (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3));
    let room = rule.max_len.min(64).saturating_sub(17);
    let mut keep: String =
        id.chars().filter(|c| c.is_ascii_alphanumeric() || *c == '_' || *c == '-').take(room).collect();
    if keep.is_empty() {
        keep.push_str("id");
        keep.truncate(room.max(1));
    }
    Cow::Owned(format!("{keep}_{hash:016x}"))
}

/// Fit a request built from [`view`] to its target (rules 3 and 4 of the module docs): tool call ids the
/// target would refuse are mapped with [`wire_id`] (only the messages holding one are copied), and, for
/// Anthropic and Bedrock with thinking on, `thinking` is left out when the turn whose calls are answered
/// does not start with its own thinking block.
pub fn fit_request(request: &mut Request, target: Target<'_>) {
    let rule = id_rule(target.provider);
    let refused = |b: &ContentBlock| match b {
        ContentBlock::ToolUse(t) => !rule.accepts(&t.id),
        ContentBlock::ToolResult(r) => !rule.accepts(&r.tool_use_id),
        _ => false,
    };
    for i in 0..request.messages.len() {
        if !request.messages[i].content.iter().any(refused) {
            continue;
        }
        if let Some(m) = request.messages.get_mut(i) {
            for b in m.content.iter_mut() {
                match b {
                    ContentBlock::ToolUse(t) => t.id = wire_id(&t.id, rule).into_owned(),
                    ContentBlock::ToolResult(r) => r.tool_use_id = wire_id(&r.tool_use_id, rule).into_owned(),
                    _ => {}
                }
            }
        }
    }
    if matches!(target.provider, "anthropic" | "bedrock") && thinking_on(request.thinking.as_ref()) {
        let n = request.messages.len();
        let answering = n >= 2
            && request.messages[n - 1].role == Role::User
            && request.messages[n - 1].content.iter().any(|b| matches!(b, ContentBlock::ToolResult(_)))
            && request.messages[n - 2].role == Role::Assistant;
        let starts_thinking = n >= 2
            && matches!(
                request.messages[n - 2].content.first(),
                Some(ContentBlock::Thinking(_) | ContentBlock::RedactedThinking(_))
            );
        if answering && !starts_thinking {
            request.thinking = None;
        }
    }
}

fn thinking_on(thinking: Option<&Value>) -> bool {
    thinking.is_some_and(|t| t.get("type").and_then(Value::as_str) != Some("disabled"))
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn ids_map_to_one_replacement_each_within_the_rule() {
        let anthropic = id_rule("anthropic");
        let openai = id_rule("openai");
        assert_eq!(wire_id("toolu_01abc", anthropic), "toolu_01abc");
        for id in ["call:0", "functions.get_weather:0", "", &"x".repeat(80), "ça va?"] {
            for rule in [anthropic, openai, id_rule("openai-responses")] {
                let mapped = wire_id(id, rule);
                assert!(rule.accepts(&mapped), "{id:?} -> {mapped:?}");
                assert_eq!(mapped, wire_id(id, rule), "stable");
            }
        }
        assert_ne!(wire_id("call:0", anthropic), wire_id("call:1", anthropic));
        assert_ne!(wire_id("call.0", anthropic), wire_id("call:0", anthropic));
    }
}
