//! The raw client's fold (`MessageAccumulator::apply_sse_lazy`: events read from a borrowed parse of their
//! JSON and handed on as text) against the value path (`apply_sse`: every event parsed into a value): for
//! every stream, well-formed or not, both accept and refuse the same events with the same errors, report the
//! same typed events and raw events (the lazy path's JSON text parses to the value path's data), and fold
//! the same message.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use serde_json::{Value, json};
use tooloop::provider::StreamEvent;
use tooloop::provider::anthropic::MessageAccumulator;
use tooloop::sse::{SseDecoder, SseEvent};

/// One event as the caller sees it, the raw ones compared by their data.
fn seen(ev: StreamEvent) -> String {
    match ev {
        StreamEvent::Raw { event, data } => format!("raw {event} {data}"),
        StreamEvent::RawJson { event, json } => {
            let data: Value = serde_json::from_str(&json).expect("RawJson carries valid JSON");
            format!("raw {event} {data}")
        }
        other => format!("{other:?}"),
    }
}

/// Fold `events` both ways (each path stops at its first error, as a stream does) and compare every step.
fn same_both_ways(sse: &str) {
    let mut events: Vec<SseEvent> = Vec::new();
    let mut decoder = SseDecoder::new();
    decoder.feed(sse.as_bytes(), &mut events);
    events.extend(decoder.finish());
    let (mut value_acc, mut lazy_acc) = (MessageAccumulator::new(), MessageAccumulator::new());
    for (i, ev) in events.iter().enumerate() {
        let (mut by_value, mut lazily) = (Vec::new(), Vec::new());
        let a = value_acc.apply_sse(ev, &mut |e| by_value.push(seen(e)));
        let b = lazy_acc.apply_sse_lazy(ev, &mut |e| lazily.push(seen(e)));
        let (a, b) = (a.map_err(|e| e.to_string()), b.map_err(|e| e.to_string()));
        assert_eq!(a, b, "event {i} ({:?}) of\n{sse}", ev.data);
        assert_eq!(by_value, lazily, "events reported for event {i} ({:?})", ev.data);
        assert_eq!(value_acc.snapshot(), lazy_acc.snapshot(), "message after event {i} ({:?})", ev.data);
        assert_eq!(value_acc.is_complete(), lazy_acc.is_complete());
        if a.is_err() {
            break;
        }
    }
}

fn sse(events: &[(&str, Value)]) -> String {
    events.iter().map(|(name, data)| format!("event: {name}\ndata: {data}\n\n")).collect()
}

fn start() -> (&'static str, Value) {
    let message = json!({"id": "msg_1", "type": "message", "role": "assistant", "model": "m", "content": [],
        "stop_reason": null, "stop_sequence": null, "usage": {"input_tokens": 5, "output_tokens": 1},
        "container": {"id": "c1"}});
    ("message_start", json!({"type": "message_start", "message": message}))
}

fn text_block(index: u64) -> (&'static str, Value) {
    (
        "content_block_start",
        json!({"type": "content_block_start", "index": index, "content_block": {"type": "text", "text": ""}}),
    )
}

fn text_delta(index: u64, text: &str) -> (&'static str, Value) {
    (
        "content_block_delta",
        json!({"type": "content_block_delta", "index": index, "delta": {"type": "text_delta", "text": text}}),
    )
}

fn stop_block(index: u64) -> (&'static str, Value) {
    ("content_block_stop", json!({"type": "content_block_stop", "index": index}))
}

fn end(usage: Value) -> [(&'static str, Value); 2] {
    [
        (
            "message_delta",
            json!({"type": "message_delta", "delta": {"stop_reason": "end_turn", "stop_sequence": null}, "usage": usage}),
        ),
        ("message_stop", json!({"type": "message_stop"})),
    ]
}

#[test]
fn a_text_answer_folds_the_same_both_ways() {
    let mut evs =
        vec![start(), text_block(0), text_delta(0, "Hel"), ("ping", json!({"type": "ping"})), text_delta(0, "lo")];
    evs.push(stop_block(0));
    evs.extend(end(json!({"output_tokens": 7})));
    same_both_ways(&sse(&evs));
}

#[test]
fn tool_use_server_tools_and_thinking_fold_the_same_both_ways() {
    let evs = vec![
        start(),
        (
            "content_block_start",
            json!({"type": "content_block_start", "index": 0, "content_block": {"type": "thinking", "thinking": "", "signature": ""}}),
        ),
        (
            "content_block_delta",
            json!({"type": "content_block_delta", "index": 0, "delta": {"type": "thinking_delta", "thinking": "hmm"}}),
        ),
        (
            "content_block_delta",
            json!({"type": "content_block_delta", "index": 0, "delta": {"type": "signature_delta", "signature": "sig"}}),
        ),
        stop_block(0),
        (
            "content_block_start",
            json!({"type": "content_block_start", "index": 1, "content_block": {"type": "tool_use", "id": "toolu_1", "name": "f", "input": {}}}),
        ),
        (
            "content_block_delta",
            json!({"type": "content_block_delta", "index": 1, "delta": {"type": "input_json_delta", "partial_json": "{\"a\": "}}),
        ),
        (
            "content_block_delta",
            json!({"type": "content_block_delta", "index": 1, "delta": {"type": "input_json_delta", "partial_json": "1}"}}),
        ),
        stop_block(1),
        (
            "content_block_start",
            json!({"type": "content_block_start", "index": 2, "content_block": {"type": "server_tool_use", "id": "srvtoolu_1", "name": "web_search", "input": {}}}),
        ),
        (
            "content_block_delta",
            json!({"type": "content_block_delta", "index": 2, "delta": {"type": "input_json_delta", "partial_json": "{\"q\": \"x\"}"}}),
        ),
        (
            "content_block_start",
            json!({"type": "content_block_start", "index": 3, "content_block": {"type": "tool_use", "id": "toolu_2", "name": "g", "input": {}}}),
        ),
        (
            "content_block_delta",
            json!({"type": "content_block_delta", "index": 3, "delta": {"type": "input_json_delta", "partial_json": "{\"unfinished"}}),
        ),
        (
            "message_delta",
            json!({"type": "message_delta", "delta": {"stop_reason": "tool_use"}, "usage": {"output_tokens": 3, "input_tokens": null}}),
        ),
        ("message_stop", json!({"type": "message_stop"})),
    ];
    same_both_ways(&sse(&evs));
}

#[test]
fn odd_and_broken_events_are_accepted_or_refused_the_same_both_ways() {
    let odd: Vec<Vec<(&str, Value)>> = vec![
        // usage: null is there (the value path merges it and reports usage); no usage at all; no delta.
        vec![
            start(),
            ("message_delta", json!({"type": "message_delta", "delta": {"stop_reason": "max_tokens"}, "usage": null})),
        ],
        vec![
            start(),
            ("message_delta", json!({"type": "message_delta"})),
            ("message_stop", json!({"type": "message_stop"})),
        ],
        vec![
            start(),
            ("message_delta", json!({"type": "message_delta", "delta": null, "usage": {"output_tokens": "many"}})),
        ],
        // message_start without a message, with null, with a message that is not one.
        vec![("message_start", json!({"type": "message_start"}))],
        vec![("message_start", json!({"type": "message_start", "message": null}))],
        vec![("message_start", json!({"type": "message_start", "message": {"content": 5}}))],
        // a second message_start after a block began (a fuzzer's find).
        vec![start(), text_block(0), start(), text_delta(0, "x")],
        // content_block_start without index, with a string index, without its block, with a bad block.
        vec![
            start(),
            (
                "content_block_start",
                json!({"type": "content_block_start", "content_block": {"type": "text", "text": ""}}),
            ),
        ],
        vec![
            start(),
            (
                "content_block_start",
                json!({"type": "content_block_start", "index": "0", "content_block": {"type": "text", "text": ""}}),
            ),
        ],
        vec![start(), ("content_block_start", json!({"type": "content_block_start", "index": 0}))],
        vec![
            start(),
            ("content_block_start", json!({"type": "content_block_start", "index": 0, "content_block": null})),
        ],
        vec![
            start(),
            (
                "content_block_start",
                json!({"type": "content_block_start", "index": 0, "content_block": {"type": "tool_use"}}),
            ),
        ],
        vec![
            start(),
            (
                "content_block_start",
                json!({"type": "content_block_start", "index": -1, "content_block": {"type": "text", "text": ""}}),
            ),
        ],
        // the data's own type wins over the event name, a type that is not a string does not.
        vec![start(), ("ping", json!({"type": "message_stop"}))],
        vec![start(), text_block(0), ("message_stop", json!({"type": 7}))],
        vec![start(), ("weird", json!({"no_type": true})), ("message", json!({"type": "message_stop"}))],
        // unknown event types and a stop for a block that never started.
        vec![start(), ("future_event", json!({"type": "future_event", "index": 0, "delta": {"x": 1}})), stop_block(9)],
        // error events, before and after content.
        vec![("error", json!({"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}}))],
        vec![
            start(),
            text_block(0),
            text_delta(0, "a"),
            ("message", json!({"type": "error", "error": {"type": "api_error", "message": "boom"}})),
        ],
        // duplicate keys (the value path keeps the last).
        vec![
            start(),
            (
                "content_block_start",
                json!({"type": "content_block_start", "index": 0, "content_block": {"type": "text", "text": ""}}),
            ),
            ("content_block_stop", json!({"type": "content_block_stop", "index": 0})),
        ],
    ];
    for evs in odd {
        same_both_ways(&sse(&evs));
    }
    // Text that is not what it claims: invalid JSON, an empty data line, duplicate keys, trailing garbage,
    // a number out of range in a field the fold does not read, no event name at all.
    for raw in [
        "event: message_start\ndata: {\"type\": \"message_start\", \"message\": \n\n",
        "event: ping\ndata:\n\n",
        "event: message_delta\ndata: {\"type\": \"message_delta\", \"usage\": {\"output_tokens\": 1}, \"usage\": {\"output_tokens\": 2}}\n\n",
        "event: message_stop\ndata: {\"type\": \"message_stop\"} x\n\n",
        "event: ping\ndata: {\"type\": \"ping\", \"when\": 1e400}\n\n",
        "data: {\"type\": \"message_stop\"}\n\n",
        "event: ping\ndata: {\"type\": \"ping\", \"note\": \"\\ud800\"}\n\n",
        "event: ping\ndata: {\"type\": \"ping\", \"note\": \"\\udc00x\\ud83d\\ude00\"}\n\n",
        "event: ping\ndata: {\"type\": \"ping\", \"note\": \"\\q\"}\n\n",
    ] {
        let mut s = sse(&[start()]);
        s.push_str(raw);
        same_both_ways(&s);
    }
}

/// What a JSON parse says of a text delta event: (index, text) when it is one (`strict`: with no other field).
fn parsed_text_delta(data: &str, strict: bool) -> Option<(u64, String)> {
    let v: Value = serde_json::from_str(data).ok()?;
    let (event, delta) = (v.as_object()?, v.get("delta")?.as_object()?);
    if strict && (event.len() != 3 || delta.len() != 2) {
        return None;
    }
    let index = v.get("index")?.as_u64()?;
    let text = match delta.get("text") {
        Some(t) => t.as_str()?.to_string(),
        None if !strict => String::new(),
        None => return None,
    };
    (v["type"] == "content_block_delta" && delta.get("type")? == "text_delta").then_some((index, text))
}

#[test]
fn text_deltas_in_the_apis_own_layout_and_near_misses_read_as_a_parse_does() {
    // The API's exact byte layout is matched without a parse; each near miss must read as the parse reads it.
    let head = r#"{"type":"content_block_delta","index":"#;
    let datas: Vec<String> = [
        r#"0,"delta":{"type":"text_delta","text":"Hello"}}"#,
        r#"0,"delta":{"type":"text_delta","text":""}}"#,
        r#"0,"delta":{"type":"text_delta","text":"héllo ✓ 日本 🎉"}}"#,
        "0,\"delta\":{\"type\":\"text_delta\",\"text\":\"del \u{7f} is no control character\"}}",
        r#"0,"delta":{"type":"text_delta","text":"\u00e9"}}"#,
        r#"0,"delta":{"type":"text_delta","text":"say \"hi\""}}"#,
        r#"0,"delta":{"type":"text_delta","text":"a\\nb\u00e9\n"}}"#,
        "0,\"delta\":{\"type\":\"text_delta\",\"text\":\"tab\there\"}}",
        "0,\"delta\":{\"type\":\"text_delta\",\"text\":\"nul\u{0}\"}}",
        r#"0,"delta":{"type":"text_delta","text":"a"}},"x":"b"}}"#,
        r#"0,"delta":{"type":"text_delta","text":"x","extra":1}}"#,
        r#"0,"delta":{"type":"text_delta","text":"x"}}  "#,
        r#"0,"delta":{"type":"text_delta","text":"x"}}x"#,
        r#"0,"delta":{"type":"text_delta","text":"x"},"more":true}"#,
        r#"0,"delta":{"type":"thinking_delta","text":"x"}}"#,
        r#"00,"delta":{"type":"text_delta","text":"x"}}"#,
        r#"01,"delta":{"type":"text_delta","text":"x"}}"#,
        r#"-1,"delta":{"type":"text_delta","text":"x"}}"#,
        r#"1.0,"delta":{"type":"text_delta","text":"x"}}"#,
        r#"1e0,"delta":{"type":"text_delta","text":"x"}}"#,
        r#"123456789012345,"delta":{"type":"text_delta","text":"x"}}"#,
        r#"99999999999999999999,"delta":{"type":"text_delta","text":"x"}}"#,
        r#""0","delta":{"type":"text_delta","text":"x"}}"#,
    ]
    .iter()
    .map(|tail| format!("{head}{tail}"))
    .chain([r#"{"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": "spaced"}}"#.into()])
    .collect();
    for data in &datas {
        let parts = tooloop::provider::anthropic::text_delta_parts(data).map(|(i, t)| (i, t.into_owned()));
        assert_eq!(parts, parsed_text_delta(data, true), "text_delta_parts of {data}");
        let text = tooloop::provider::anthropic::text_delta_of(data).map(|t| t.into_owned());
        assert_eq!(text, parsed_text_delta(data, false).map(|(_, t)| t), "text_delta_of of {data}");
        // Folded into a stream whose block 0 is text: the same both ways (accepted, refused, reported).
        let stream = sse(&[start(), text_block(0)]) + &format!("event: content_block_delta\ndata: {data}\n\n");
        same_both_ways(&stream);
    }
}
