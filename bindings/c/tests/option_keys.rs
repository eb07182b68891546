//! The config keys `tooloop_agent_new` documents in include/tooloop.h are the core's option keys
//! (`tooloop::AgentOptions::KEYS`, whose fields carry the Rust docs): a key added to the core must be
//! documented for C programmers, and a key the header describes must be one the core accepts.
//!
//! How the header names keys: each list item of the config documentation starts with its key(s) as
//! `"key"` in backticks (`- \`"api_key"\`, \`"base_url"\`: ...`), or names one in its text as `"key"`
//! followed by a colon; values such as `"anthropic"` appear in backticks too, never right before a colon.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::collections::BTreeSet;
use std::path::PathBuf;

/// The `///` documentation of `tooloop_agent_new` as cbindgen wrote it into the header.
fn agent_new_doc() -> String {
    let header = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../include/tooloop.h");
    let text = std::fs::read_to_string(header).expect("include/tooloop.h");
    let end = text.find("tooloop_status tooloop_agent_new(").expect("tooloop_agent_new in the header");
    let start = text[..end].rfind("\n/**").expect("the doc comment of tooloop_agent_new");
    text[start..end].to_string()
}

/// Every `"snake_case"` word in backticks, with what follows the closing backtick.
fn quoted(doc: &str) -> Vec<(String, String)> {
    let mut out = Vec::new();
    let mut rest = doc;
    while let Some(i) = rest.find("`\"") {
        let after = &rest[i + 2..];
        let name: String = after.chars().take_while(|c| c.is_ascii_lowercase() || *c == '_').collect();
        let tail = &after[name.len()..];
        if !name.is_empty() && tail.starts_with('"') {
            let next = tail[1..].chars().take(2).collect::<String>();
            out.push((name, next));
        }
        rest = after;
    }
    out
}

/// The keys the header documents as keys: the leading names of each list item, and names followed by ':'.
fn documented_keys(doc: &str) -> BTreeSet<String> {
    let mut keys = BTreeSet::new();
    for item in doc.split("\n * - ").skip(1) {
        // The leading group: `"a"`, `"b"` and `"c"` ... up to the first other word.
        let mut lead = item;
        while let Some(rest) = lead.strip_prefix("`\"") {
            let name: String = rest.chars().take_while(|c| c.is_ascii_lowercase() || *c == '_').collect();
            keys.insert(name.clone());
            let rest = rest[name.len()..].trim_start_matches('"').trim_start_matches('`');
            let rest = rest.split_once(')').filter(|_| rest.starts_with(" (")).map_or(rest, |(_, r)| r);
            lead = rest.trim_start_matches(',').trim_start_matches(" and").trim_start();
        }
    }
    for (name, next) in quoted(doc) {
        if next.starts_with("`:") {
            keys.insert(name);
        }
    }
    keys
}

#[test]
fn the_header_documents_every_core_option_key_and_no_other() {
    let doc = agent_new_doc();
    let core: BTreeSet<String> = tooloop::AgentOptions::KEYS.iter().map(|k| k.to_string()).collect();
    let mentioned: BTreeSet<String> = quoted(&doc).into_iter().map(|(n, _)| n).collect();
    let undocumented: Vec<&String> = core.difference(&mentioned).collect();
    assert!(
        undocumented.is_empty(),
        "config keys the core accepts but the tooloop_agent_new documentation (bindings/c/src/agent.rs, then \
         the header) never names: {undocumented:?}"
    );
    let unknown: Vec<String> = documented_keys(&doc).difference(&core).cloned().collect();
    assert!(
        unknown.is_empty(),
        "keys the tooloop_agent_new documentation describes but the core refuses as unknown: {unknown:?}"
    );
}

#[test]
fn the_key_reader_finds_leading_groups_and_keys_before_a_colon() {
    let doc = "/**\n * Config:\n * - `\"api_key\"`, `\"base_url\"`: default\n * - `\"max_tokens\"` (default 8192), \
               `\"max_turns\"` (a cap).\n * - `\"sandbox\"`: `\"off\"` or `\"on\"`; `\"network\"`: false\n */";
    let keys: Vec<String> = documented_keys(doc).into_iter().collect();
    assert_eq!(keys, ["api_key", "base_url", "max_tokens", "max_turns", "network", "sandbox"]);
}
