//! OpenAI Responses API parsing (src/provider/responses.rs): `parse_response` on a `response` object, and an
//! SSE stream of Responses events through `EventAccumulator::apply`, as ResponsesProvider does; the folded
//! message rendered back as the next request's input. No input may panic.
#![no_main]

use libfuzzer_sys::fuzz_target;
use serde_json::Value;
use tooloop::provider::responses::{EventAccumulator, parse_response, render_request};
use tooloop::sse::SseDecoder;
use tooloop::{Message, Request, Role};

fuzz_target!(|data: &[u8]| {
    let Some((&mode, body)) = data.split_first() else { return };
    let message = if mode & 1 == 0 {
        let Ok(raw) = serde_json::from_slice::<Value>(body) else { return };
        match parse_response(&raw) {
            Ok(m) => m,
            Err(_) => return,
        }
    } else {
        let mut decoder = SseDecoder::new();
        let mut events = Vec::new();
        decoder.feed(body, &mut events);
        events.extend(decoder.finish());
        let mut acc = EventAccumulator::default();
        for ev in &events {
            let data = ev.data.trim();
            if data.is_empty() {
                continue;
            }
            let Ok(event) = serde_json::from_str::<Value>(data) else { break };
            if acc.apply(&event, &mut |_| {}).is_err() || acc.done {
                break;
            }
        }
        let _ = acc.response();
        acc.snapshot()
    };
    let _ = serde_json::to_value(&message);
    // What was folded goes back as the next request's input (reasoning items, calls): that must not panic.
    let request = Request {
        model: "gpt-5".into(),
        messages: vec![Message::user("hi"), Message { role: Role::Assistant, content: message.content }].into(),
        ..Default::default()
    };
    let _ = render_request(&request);
});
