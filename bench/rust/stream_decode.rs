//! Benchmark (not a test): the per-event cost of reading a Messages API stream in the core, without the
//! network — SSE decoding and the fold into a message (`MessageAccumulator::apply_sse`), over a ~1.2 MB text
//! stream in 16-character deltas cut into 16 KB chunks (the shape of `bench/stream_bench.py`). Prints the
//! time per event for: decoding only; decoding + fold with the raw events dropped; and + keeping every raw
//! event's JSON value (what `Client.stream` hands to Python). Repeatable under
//! `valgrind --tool=callgrind` (set STREAM_BENCH_RUNS=1).
//!
//! Run: `cargo bench --bench stream_decode`.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::time::Instant;

use serde_json::json;
use tooloop::provider::StreamEvent;
use tooloop::provider::anthropic::MessageAccumulator;
use tooloop::sse::SseDecoder;

fn sse(text_bytes: usize, delta_chars: usize) -> (Vec<u8>, usize) {
    let mut out = String::new();
    let mut events = 0;
    let mut push = |name: &str, data: serde_json::Value, out: &mut String| {
        out.push_str(&format!("event: {name}\ndata: {}\n\n", serde_json::to_string(&data).unwrap()));
        events += 1;
    };
    push(
        "message_start",
        json!({"type": "message_start", "message": {"id": "msg_bench", "type": "message",
        "role": "assistant", "model": "claude-sonnet-4-6", "content": [], "stop_reason": null,
        "stop_sequence": null, "usage": {"input_tokens": 10, "output_tokens": 1}}}),
        &mut out,
    );
    push(
        "content_block_start",
        json!({"type": "content_block_start", "index": 0,
        "content_block": {"type": "text", "text": ""}}),
        &mut out,
    );
    let words = "agent loop tool model stream delta token cache rust café 東京 データ “quoted” ";
    let text: String = words.chars().cycle().take(text_bytes).collect();
    let chars: Vec<char> = text.chars().collect();
    for piece in chars.chunks(delta_chars) {
        let t: String = piece.iter().collect();
        push(
            "content_block_delta",
            json!({"type": "content_block_delta", "index": 0,
            "delta": {"type": "text_delta", "text": t}}),
            &mut out,
        );
    }
    push("content_block_stop", json!({"type": "content_block_stop", "index": 0}), &mut out);
    push(
        "message_delta",
        json!({"type": "message_delta", "delta": {"stop_reason": "end_turn",
        "stop_sequence": null}, "usage": {"output_tokens": 300000}}),
        &mut out,
    );
    push("message_stop", json!({"type": "message_stop"}), &mut out);
    (out.into_bytes(), events)
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(|a, b| a.partial_cmp(b).unwrap());
    v[v.len() / 2]
}

fn main() {
    let runs: usize = std::env::var("STREAM_BENCH_RUNS").ok().and_then(|s| s.parse().ok()).unwrap_or(7);
    let (body, events) = sse(1_200_000, 16);
    println!("stream: {} bytes, {events} events, 16 KB chunks, median of {runs} runs", body.len());
    for mode in ["decode only", "decode + fold", "decode + fold + keep raw values"] {
        let mut times = Vec::new();
        for _ in 0..runs {
            let t = Instant::now();
            let mut decoder = SseDecoder::new();
            let mut acc = MessageAccumulator::new();
            let mut kept = Vec::new();
            let mut batch = Vec::new();
            for chunk in body.chunks(16 * 1024) {
                decoder.feed(chunk, &mut batch);
                for ev in batch.drain(..) {
                    match mode {
                        "decode only" => {
                            std::hint::black_box(&ev);
                        }
                        "decode + fold" => acc.apply_sse(&ev, &mut |e| drop(std::hint::black_box(e))).unwrap(),
                        _ => acc
                            .apply_sse(&ev, &mut |e| {
                                if let StreamEvent::Raw { data, .. } = e {
                                    kept.push(data)
                                }
                            })
                            .unwrap(),
                    }
                }
            }
            std::hint::black_box(&kept);
            times.push(t.elapsed().as_secs_f64());
        }
        let m = median(times);
        println!("{mode:34} {:8.1} ms  {:6.0} ns/event", m * 1e3, m * 1e9 / events as f64);
    }
}
