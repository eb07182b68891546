//! One conversation, any provider: generated conversations whose turns were made by different wires and
//! models (text, parallel tool calls, results with errors and images, thinking with signatures, redacted
//! thinking, server tool blocks, citations) are rendered for every wire and model the way the agent renders
//! a request (`tooloop::carry`), and each wire's request body is checked against that wire's rules, the way
//! its server would check it: roles alternate where the wire needs it, every tool call is answered and every
//! answer has its call, ids fit the wire's pattern, no signature, encrypted reasoning or server tool block
//! reaches a wire (or model) that did not make it, and no thinking config the wire would refuse.
//!
//! A wire is one line of [`WIRES`]: its name (the provider's), its body builder and its checker.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use serde_json::{Map, Value, json};
use tooloop::carry::{Target, fit_request, view};
use tooloop::conversation::{Entry, EntryRole, EntryStatus};
use tooloop::http::{HttpClient, HttpConfig};
use tooloop::provider::{AwsCredentials, BedrockProvider, anthropic, openai};
use tooloop::types::{
    ContentBlock, RedactedThinkingBlock, Request, TextBlock, ThinkingBlock, ToolResultBlock, ToolUseBlock,
};

/// A wire: the provider name entries record, how a request becomes its body, and its server's checks.
struct Wire {
    name: &'static str,
    body: fn(&Request) -> Value,
    check: fn(&Value, &Target<'_>) -> Result<(), String>,
}

const WIRES: &[Wire] = &[
    Wire { name: "anthropic", body: anthropic_body, check: check_messages },
    Wire { name: "bedrock", body: bedrock_body, check: check_bedrock },
    Wire { name: "openai", body: openai_body, check: check_chat },
    Wire { name: "openai-responses", body: responses_body, check: check_responses },
];

fn responses_body(r: &Request) -> Value {
    tooloop::provider::responses::render_request(r)
}

fn anthropic_body(r: &Request) -> Value {
    anthropic::render_request(r)
}

fn openai_body(r: &Request) -> Value {
    openai::render_request(r)
}

fn bedrock_body(r: &Request) -> Value {
    let p = BedrockProvider::new(
        HttpClient::new(HttpConfig::default()),
        "http://127.0.0.1:9".into(),
        "us-east-1".into(),
        AwsCredentials::new("AKIDEXAMPLE", "secret", None),
        Vec::new(),
    );
    p.body(r).expect("bedrock body")
}

/// The models each wire's turns are made by (two, so a switch of model on one provider is covered too).
fn models(wire: &str) -> [String; 2] {
    [format!("{wire}-model-a"), format!("{wire}-model-b")]
}

// ------------------------------------------------------------------------------------------------------
// The checks
// ------------------------------------------------------------------------------------------------------

/// No marker of signed, encrypted or server-made content reaches a wire or model that did not make it: each
/// such block carries `sig|<wire>|<model>|`, `red|<wire>|<model>|` or `srv|<wire>|<model>|` (see the
/// generator).
fn check_markers(body: &Value, target: &Target<'_>, model_bound: bool) -> Result<(), String> {
    let text = body.to_string();
    for kind in ["sig|", "red|", "srv|"] {
        for (at, _) in text.match_indices(kind) {
            let rest = &text[at + 4..];
            let mut parts = rest.splitn(3, '|');
            let (wire, model) = (parts.next().unwrap_or(""), parts.next().unwrap_or(""));
            if wire != target.provider {
                return Err(format!("{kind}{wire}|{model} (made by {wire}) sent to {}", target.provider));
            }
            if kind != "srv|" && model_bound && model != target.model {
                return Err(format!("{kind}{wire}|{model} (made by model {model}) sent to model {}", target.model));
            }
        }
    }
    Ok(())
}

fn word_id(id: &str, max: usize) -> bool {
    !id.is_empty() && id.len() <= max && id.chars().all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-')
}

/// The Messages API's rules (Anthropic; Bedrock's body holds the same messages).
fn check_messages(body: &Value, target: &Target<'_>) -> Result<(), String> {
    check_markers(body, target, true)?;
    let msgs = body["messages"].as_array().ok_or("no messages")?;
    if msgs.is_empty() {
        return Err("no messages".into());
    }
    let mut seen_ids = std::collections::HashSet::new();
    for (i, m) in msgs.iter().enumerate() {
        let role = m["role"].as_str().ok_or("message without role")?;
        let expected = if i % 2 == 0 { "user" } else { "assistant" };
        if role != expected {
            return Err(format!("message {i} is {role}, expected {expected}: roles must alternate from user"));
        }
        let content = m["content"].as_array().ok_or(format!("message {i}: content not an array"))?;
        if content.is_empty() {
            return Err(format!("message {i}: empty content"));
        }
        let calls: Vec<&str> =
            content.iter().filter(|b| b["type"] == "tool_use").map(|b| b["id"].as_str().unwrap_or("")).collect();
        for id in &calls {
            if !word_id(id, 64) {
                return Err(format!("message {i}: tool_use id {id:?} does not match ^[a-zA-Z0-9_-]{{1,64}}$"));
            }
            if !seen_ids.insert(id.to_string()) {
                return Err(format!("message {i}: tool_use id {id:?} used twice"));
            }
        }
        for b in content {
            match b["type"].as_str() {
                Some("text") if b["text"].as_str().is_none_or(str::is_empty) => {
                    return Err(format!("message {i}: empty text block"));
                }
                Some("thinking") if b["signature"].as_str().is_none_or(str::is_empty) => {
                    return Err(format!("message {i}: thinking block without a signature"));
                }
                Some("thinking" | "redacted_thinking") if role == "user" => {
                    return Err(format!("message {i}: thinking in a user message"));
                }
                Some("tool_result") if role == "assistant" => {
                    return Err(format!("message {i}: tool_result in an assistant message"));
                }
                _ => {}
            }
        }
        if role == "user" {
            // Every result answers a call of the message before, and they come first.
            let prev_calls: Vec<&str> = if i == 0 {
                Vec::new()
            } else {
                msgs[i - 1]["content"]
                    .as_array()
                    .into_iter()
                    .flatten()
                    .filter(|b| b["type"] == "tool_use")
                    .map(|b| b["id"].as_str().unwrap_or(""))
                    .collect()
            };
            let results: Vec<&str> = content
                .iter()
                .take_while(|b| b["type"] == "tool_result")
                .map(|b| b["tool_use_id"].as_str().unwrap_or(""))
                .collect();
            if content.iter().skip(results.len()).any(|b| b["type"] == "tool_result") {
                return Err(format!("message {i}: a tool_result after other blocks"));
            }
            let mut want = prev_calls.clone();
            let mut got = results.clone();
            want.sort_unstable();
            got.sort_unstable();
            if want != got {
                return Err(format!("message {i}: results {results:?} do not answer the calls {prev_calls:?}"));
            }
        } else if !calls.is_empty() && i + 1 == msgs.len() {
            return Err(format!("message {i}: its calls are never answered"));
        }
    }
    // With thinking on, a tool loop's assistant turn starts with its own thinking.
    let thinking = body.get("thinking").filter(|t| t["type"] != "disabled");
    let last = &msgs[msgs.len() - 1];
    let answering =
        last["role"] == "user" && last["content"].as_array().into_iter().flatten().any(|b| b["type"] == "tool_result");
    if thinking.is_some() && answering {
        let first = &msgs[msgs.len() - 2]["content"][0]["type"];
        if first != "thinking" && first != "redacted_thinking" {
            return Err(format!("thinking is on but the turn whose calls are answered starts with {first}"));
        }
    }
    Ok(())
}

fn check_bedrock(body: &Value, target: &Target<'_>) -> Result<(), String> {
    if body.get("model").is_some() || body.get("stream").is_some() {
        return Err("a Bedrock body holds no model and no stream".into());
    }
    if body["anthropic_version"] != "bedrock-2023-05-31" {
        return Err("no anthropic_version".into());
    }
    check_messages(body, target)
}

/// Chat Completions' rules: each assistant message's `tool_calls` answered by one `tool` message each, right
/// after it; every `tool` message answers a call of that assistant message; ids at most 40 characters; no
/// signed content at all.
fn check_chat(body: &Value, target: &Target<'_>) -> Result<(), String> {
    check_markers(body, &Target { provider: "(none: Chat Completions takes no signed content)", ..*target }, true)?;
    let msgs = body["messages"].as_array().ok_or("no messages")?;
    let mut i = 0;
    while i < msgs.len() {
        let m = &msgs[i];
        match m["role"].as_str() {
            Some("tool") => return Err(format!("message {i}: a tool message that answers no call before it")),
            Some("assistant") => {
                let calls: Vec<&str> =
                    m["tool_calls"].as_array().into_iter().flatten().map(|c| c["id"].as_str().unwrap_or("")).collect();
                for id in &calls {
                    if id.is_empty() || id.chars().count() > 40 {
                        return Err(format!("message {i}: tool call id {id:?} is empty or longer than 40"));
                    }
                }
                for c in m["tool_calls"].as_array().into_iter().flatten() {
                    if !c["function"]["arguments"].is_string() {
                        return Err(format!("message {i}: arguments must be a string"));
                    }
                }
                let mut answered = Vec::new();
                while msgs.get(i + 1).is_some_and(|n| n["role"] == "tool") {
                    i += 1;
                    let id = msgs[i]["tool_call_id"].as_str().unwrap_or("");
                    if !calls.contains(&id) || answered.contains(&id) {
                        return Err(format!("message {i}: tool message for {id:?} answers no call (or twice)"));
                    }
                    answered.push(id);
                }
                if answered.len() != calls.len() {
                    return Err(format!("message {i}: calls {calls:?} answered only by {answered:?}"));
                }
            }
            Some("user" | "system") => {}
            other => return Err(format!("message {i}: role {other:?}")),
        }
        i += 1;
    }
    Ok(())
}

/// The Responses API's rules over `input`: every `function_call` answered by one `function_call_output`
/// with its `call_id` (and no output without its call); `reasoning` items (their `encrypted_content`) only
/// from this wire and model.
fn check_responses(body: &Value, target: &Target<'_>) -> Result<(), String> {
    check_markers(body, target, true)?;
    let items = body["input"].as_array().ok_or("no input")?;
    let calls: Vec<&str> =
        items.iter().filter(|x| x["type"] == "function_call").map(|x| x["call_id"].as_str().unwrap_or("")).collect();
    let outputs: Vec<&str> = items
        .iter()
        .filter(|x| x["type"] == "function_call_output")
        .map(|x| x["call_id"].as_str().unwrap_or(""))
        .collect();
    for id in &calls {
        if !word_id(id, 64) {
            return Err(format!("call_id {id:?}"));
        }
        if outputs.iter().filter(|o| *o == id).count() != 1 {
            return Err(format!("call {id:?} is not answered exactly once"));
        }
    }
    for o in &outputs {
        if !calls.contains(o) {
            return Err(format!("output for {o:?} has no call"));
        }
    }
    Ok(())
}

// ------------------------------------------------------------------------------------------------------
// The generator
// ------------------------------------------------------------------------------------------------------

/// A small deterministic generator, so a failing seed can be replayed.
struct Lcg(u64);

impl Lcg {
    fn below(&mut self, n: usize) -> usize {
        self.0 = self.0.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
        ((self.0 >> 33) as usize) % n.max(1)
    }
    fn chance(&mut self, in_n: usize) -> bool {
        self.below(in_n) == 0
    }
}

fn image() -> Value {
    json!({"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": "iVBORw0KGgo="}})
}

/// A tool call id in the style of `wire` (some of which other wires refuse).
fn call_id(wire: &str, n: usize, rng: &mut Lcg) -> String {
    match (wire, rng.below(3)) {
        ("anthropic", _) => format!("toolu_01{n:020}"),
        ("bedrock", 0) => format!("tooluse_{n:044}"),
        ("bedrock", _) => format!("tooluse_{n:012}"),
        ("openai", 0) => format!("call:{n}"),
        ("openai", 1) => format!("functions.get_weather:{n}"),
        ("openai", _) => format!("call_{n:024}"),
        (_, _) => format!("fc_{n:048}"),
    }
}

/// One assistant turn by `wire`/`model`, with its calls' ids.
fn assistant_turn(wire: &str, model: &str, rng: &mut Lcg, n: &mut usize) -> (Entry, Vec<String>) {
    let mut content = Vec::new();
    let signs = !wire.starts_with("openai");
    // Some entries come from before the maker was recorded: taken as made by whichever wire they go to, so
    // their blocks carry no maker's marker.
    let recorded = !rng.chance(12);
    let mark =
        |kind: &str, n: usize| if recorded { format!("{kind}|{wire}|{model}|{n}") } else { format!("legacy{n}") };
    *n += 1;
    if rng.chance(2) {
        content.push(ContentBlock::Thinking(ThinkingBlock {
            thinking: format!("thought {n}"),
            signature: if signs { mark("sig", *n) } else { String::new() },
            // The Responses wire keeps its reasoning item whole, its encrypted content readable only by its model.
            extra: if wire == "openai-responses" {
                let item = json!({"type": "reasoning", "id": format!("rs_{n}"), "summary": [],
                    "encrypted_content": mark("sig", *n)});
                Map::from_iter([(tooloop::provider::responses::REASONING_KEY.to_string(), item)])
            } else {
                Map::new()
            },
        }));
    }
    if signs && rng.chance(5) {
        content
            .push(ContentBlock::RedactedThinking(RedactedThinkingBlock { data: mark("red", *n), extra: Map::new() }));
    }
    if wire == "anthropic" && rng.chance(5) {
        content.push(ContentBlock::Unknown(json!({"type": "server_tool_use", "id": format!("srvtoolu_{n}"),
            "name": "web_search", "input": {"query": "q"}, "marker": mark("srv", *n)})));
        content.push(ContentBlock::Unknown(json!({"type": "web_search_tool_result",
            "tool_use_id": format!("srvtoolu_{n}"), "content": [], "marker": mark("srv", *n)})));
    }
    if rng.chance(2) || content.is_empty() {
        let citations = (wire == "anthropic" && rng.chance(4))
            .then(|| vec![json!({"type": "web_search_result_location", "url": "u", "marker": mark("srv", *n)})]);
        content.push(ContentBlock::Text(TextBlock { text: format!("answer {n}"), citations, extra: Map::new() }));
    }
    let mut ids = Vec::new();
    for _ in 0..rng.below(4) {
        *n += 1;
        let id = call_id(wire, *n, rng);
        let input = if rng.chance(8) { Value::String("{\"broken".into()) } else { json!({"x": *n}) };
        content.push(ContentBlock::ToolUse(ToolUseBlock {
            id: id.clone(),
            name: "f".into(),
            input,
            extra: Map::new(),
        }));
        ids.push(id);
    }
    let mut e = Entry::new(EntryRole::Assistant, content);
    if recorded {
        e.provider = Some(wire.to_string());
        e.model = Some(model.to_string());
    }
    if rng.chance(10) {
        e.status = EntryStatus::Error;
    }
    (e, ids)
}

fn conversation(seed: u64) -> Vec<Entry> {
    let mut rng = Lcg(seed);
    let mut entries = Vec::new();
    let mut n = 0;
    let turns = 1 + rng.below(8);
    entries.push(Entry::new(EntryRole::User, vec![ContentBlock::text("go")]));
    for t in 0..turns {
        let wire = WIRES[rng.below(WIRES.len())].name;
        let model = models(wire)[rng.below(2)].clone();
        let (e, mut ids) = assistant_turn(wire, &model, &mut rng, &mut n);
        let failed = e.status == EntryStatus::Error;
        entries.push(e);
        if failed {
            continue;
        }
        // Results in any order; now and then one missing (the view answers it) or an extra user message.
        for k in (1..ids.len()).rev() {
            ids.swap(k, rng.below(k + 1));
        }
        for id in ids {
            if rng.chance(10) {
                continue;
            }
            let content = if rng.chance(4) {
                json!([{"type": "text", "text": "see the picture"}, image()])
            } else {
                json!(format!("result of {id}"))
            };
            entries.push(Entry::tool_result(&id, "f", content, rng.chance(4)));
        }
        let last = t + 1 == turns;
        if rng.chance(3) || (last && rng.chance(2)) {
            let mut blocks = vec![ContentBlock::text(format!("user {t}"))];
            if rng.chance(3) {
                blocks.push(ContentBlock::Unknown(image()));
            }
            entries.push(Entry::new(EntryRole::User, blocks));
        }
    }
    entries
}

fn request(entries: &[Entry], target: &Target<'_>, thinking: bool) -> Request {
    let mut r = Request {
        model: target.model.to_string(),
        max_tokens: 4096,
        messages: view(entries, *target).into(),
        thinking: thinking.then(|| json!({"type": "enabled", "budget_tokens": 2048})),
        stream: true,
        ..Default::default()
    };
    fit_request(&mut r, *target);
    r
}

#[test]
fn every_wire_takes_a_conversation_made_by_any_mix_of_wires_and_models() {
    let mut checked = 0;
    let mut carried = 0;
    for seed in 1..=400u64 {
        let entries = conversation(seed);
        for wire in WIRES {
            for model in models(wire.name) {
                let target = Target { provider: wire.name, model: &model };
                if tooloop::carry::needs_carrying(&entries, target) {
                    carried += 1;
                }
                for thinking in [false, true] {
                    let body = (wire.body)(&request(&entries, &target, thinking));
                    if let Err(why) = (wire.check)(&body, &target) {
                        panic!(
                            "seed {seed}, to {} {model} (thinking {thinking}): {why}\nbody: {}",
                            wire.name,
                            serde_json::to_string_pretty(&body).unwrap_or_default()
                        );
                    }
                    checked += 1;
                }
            }
        }
    }
    assert!(checked >= 400 * WIRES.len() * 4);
    // The walk must have exercised the carrying, not only conversations made by one wire.
    assert!(carried > 1000, "only {carried} requests needed carrying");
}

/// A conversation made by the wire and model it goes back to is sent as it was made: every signature, the
/// redacted thinking and the server tool blocks, verbatim.
#[test]
fn a_conversation_sent_back_to_its_maker_keeps_every_signed_block() {
    let mut rng = Lcg(7);
    let mut n = 0;
    let mut entries = vec![Entry::new(EntryRole::User, vec![ContentBlock::text("go")])];
    let (mut e, ids) = loop {
        let (e, ids) = assistant_turn("anthropic", "anthropic-model-a", &mut rng, &mut n);
        if e.status == EntryStatus::Complete && e.content.iter().any(|b| b.kind() == "thinking") {
            break (e, ids);
        }
    };
    e.provider = Some("anthropic".into());
    e.model = Some("anthropic-model-a".into());
    let made = e.content.clone();
    entries.push(e);
    for id in &ids {
        entries.push(Entry::tool_result(id, "f", json!("ok"), false));
    }
    let target = Target { provider: "anthropic", model: "anthropic-model-a" };
    assert!(!tooloop::carry::needs_carrying(&entries, target));
    let r = request(&entries, &target, true);
    assert_eq!(r.messages[1].content, made);
    assert!(r.thinking.is_some(), "its own thinking leads the turn: thinking stays on");
    // To the other model of the same provider the signed blocks stay behind; the reasoning is kept as text.
    let other = Target { provider: "anthropic", model: "anthropic-model-b" };
    let r = request(&entries, &other, true);
    assert!(!r.messages[1].content.iter().any(|b| matches!(b, ContentBlock::Thinking(_))));
    assert!(
        matches!(&r.messages[1].content[0], ContentBlock::Text(t) if t.text.contains("my reasoning") && t.text.contains("thought"))
    );
    assert!(r.thinking.is_none(), "the open turn has no thinking of its own: thinking off for this request");
    let results =
        r.messages[2].content.iter().filter(|b| matches!(b, ContentBlock::ToolResult(ToolResultBlock { .. })));
    assert_eq!(results.count(), ids.len());
}
