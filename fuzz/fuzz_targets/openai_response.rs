//! OpenAI-compatible response parsing (src/provider/openai.rs): `parse_completion` on a chat.completion
//! body, and an SSE stream of chat.completion.chunk data through `ChunkAccumulator::apply`, as
//! OpenAiProvider does. No input may panic.
#![no_main]

use libfuzzer_sys::fuzz_target;
use serde_json::Value;
use tooloop::provider::openai::{ChunkAccumulator, parse_completion};
use tooloop::sse::SseDecoder;

fuzz_target!(|data: &[u8]| {
    let Some((&mode, body)) = data.split_first() else { return };
    if mode & 1 == 0 {
        if let Ok(raw) = serde_json::from_slice::<Value>(body) {
            if let Ok(message) = parse_completion(&raw) {
                let _ = serde_json::to_value(&message);
            }
        }
        return;
    }
    let mut decoder = SseDecoder::new();
    let mut events = Vec::new();
    decoder.feed(body, &mut events);
    events.extend(decoder.finish());
    let mut acc = ChunkAccumulator::default();
    for ev in &events {
        let data = ev.data.trim();
        if data.is_empty() {
            continue;
        }
        if data == "[DONE]" {
            break;
        }
        let Ok(chunk) = serde_json::from_str::<Value>(data) else { break };
        if acc.apply(&chunk, &mut |_| {}).is_err() {
            break;
        }
    }
    let _ = serde_json::to_value(acc.snapshot());
    let _ = acc.completion();
});
