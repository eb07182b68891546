//! Anthropic response parsing (src/provider/anthropic.rs), both paths the provider takes on a body:
//! a JSON Messages API message, and an SSE stream through `MessageAccumulator::apply_sse`. No input may
//! panic; an accumulated message must serialize (it is what the session file stores).
#![no_main]

use libfuzzer_sys::fuzz_target;
use serde_json::Value;
use tooloop::MessageResponse;
use tooloop::provider::anthropic::MessageAccumulator;
use tooloop::sse::SseDecoder;

fuzz_target!(|data: &[u8]| {
    let Some((&mode, body)) = data.split_first() else { return };
    if mode & 1 == 0 {
        // The non-streaming path: JSON, then the typed message (as AnthropicProvider does).
        if let Ok(raw) = serde_json::from_slice::<Value>(body) {
            if let Ok(message) = serde_json::from_value::<MessageResponse>(raw) {
                let _ = serde_json::to_value(&message);
            }
        }
        return;
    }
    let mut decoder = SseDecoder::new();
    let mut events = Vec::new();
    decoder.feed(body, &mut events);
    events.extend(decoder.finish());
    let mut acc = MessageAccumulator::new();
    for ev in &events {
        if acc.apply_sse(ev, &mut |_| {}).is_err() || acc.is_complete() {
            break;
        }
    }
    let snapshot = acc.snapshot();
    let _ = serde_json::to_value(&snapshot);
});
