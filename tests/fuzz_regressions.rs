//! Inputs the fuzzers (fuzz/) found that broke a parser, each pinned as the behaviour it should have had.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::result_large_err)]

use serde_json::json;
use tooloop::Error;
use tooloop::provider::anthropic::MessageAccumulator;
use tooloop::sse::SseDecoder;

fn message_start(id: &str) -> serde_json::Value {
    json!({"type": "message_start", "message": {"id": id, "type": "message", "role": "assistant", "model": "m",
        "content": [], "stop_reason": null, "stop_sequence": null, "usage": {"input_tokens": 1, "output_tokens": 1}}})
}

/// fuzz/anthropic_response: a second `message_start` after a block began emptied the content while the
/// block's position stayed, and the next delta indexed past the end (a panic inside the provider).
#[test]
fn anthropic_stream_a_second_message_start_after_content_is_a_broken_stream_not_a_panic() {
    let text_start = json!({"type": "content_block_start", "index": 0, "content_block": {"type": "text", "text": ""}});
    let delta = json!({"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": "Hi"}});
    let mut acc = MessageAccumulator::new();
    acc.apply("message_start", &message_start("a"), &mut |_| {}).unwrap();
    acc.apply("content_block_start", &text_start, &mut |_| {}).unwrap();
    acc.apply("content_block_delta", &delta, &mut |_| {}).unwrap();
    let err = acc.apply("message_start", &message_start("b"), &mut |_| {}).unwrap_err();
    assert!(matches!(&err, Error::StreamInterrupted { message, .. } if message.contains("message_start")), "{err:?}");
    // What had arrived is kept, and the accumulator stays usable without panicking.
    assert_eq!(acc.snapshot().content.len(), 1);
    let _ = acc.apply("content_block_delta", &delta, &mut |_| {});

    // The same through SSE bytes, as the fuzzer fed it.
    let mut sse = String::new();
    for v in [message_start("a"), text_start.clone(), message_start("b"), delta.clone()] {
        sse.push_str(&format!("event: {}\ndata: {v}\n\n", v["type"].as_str().unwrap()));
    }
    let mut events = Vec::new();
    let mut decoder = SseDecoder::new();
    decoder.feed(sse.as_bytes(), &mut events);
    let mut acc = MessageAccumulator::new();
    let outcome: Vec<bool> = events.iter().map(|ev| acc.apply_sse(ev, &mut |_| {}).is_ok()).collect();
    assert_eq!(outcome, [true, true, false, true], "the repeated message_start is refused; nothing panics");
}

/// A `message_start` repeated before any block (harmless) is still accepted.
#[test]
fn anthropic_stream_a_repeated_message_start_before_any_block_is_accepted() {
    let mut acc = MessageAccumulator::new();
    acc.apply("message_start", &message_start("a"), &mut |_| {}).unwrap();
    acc.apply("message_start", &message_start("b"), &mut |_| {}).unwrap();
    assert_eq!(acc.snapshot().id, "b");
}

/// fuzz/skill_front_matter: `? ? ? …` (68 bytes) nests mappings as mapping keys; each key's JSON form is the
/// text of the one inside it, escaped again, so the converted front matter doubled with every level (40 s
/// and 434 MB for one SKILL.md). Collection keys are refused before anything is built.
#[test]
fn skill_front_matter_with_nested_complex_keys_is_refused_at_once() {
    use std::time::{Duration, Instant};
    let input = "?  ? ? ?  ? ?  ? ? ?  ? ?   ? ?  ?   ? ?  ? ?  ? ? ?  ? ?  ? ?  ? ? "; // the fuzzer's artifact, byte for byte
    let started = Instant::now();
    let err = tooloop::skills::parse_front_matter(input).unwrap_err();
    assert!(err.contains("as a key"), "{err}");
    assert!(started.elapsed() < Duration::from_secs(1), "took {:?}", started.elapsed());
    // A plain complex-free mapping with nested values is still fine, and a key of one scalar too.
    let ok = tooloop::skills::parse_front_matter("? plain\n: {a: [1, {b: 2}]}\n").unwrap();
    assert_eq!(ok["plain"]["a"][1]["b"], 2);
}
