//! The SSE decoder (src/sse.rs): any bytes, cut into chunks anywhere, must decode without a panic to the
//! same events as the whole input fed at once (chunking must never change what the host sees).
#![no_main]

use libfuzzer_sys::fuzz_target;
use tooloop::sse::SseDecoder;

fuzz_target!(|data: &[u8]| {
    let Some((&step, body)) = data.split_first() else { return };
    let mut whole = Vec::new();
    let mut decoder = SseDecoder::new();
    decoder.feed(body, &mut whole);
    whole.extend(decoder.finish());

    // The first byte picks the chunk size (1..=64), so splits land inside CRLF pairs and UTF-8 characters.
    let size = usize::from(step % 64) + 1;
    let mut chunked = Vec::new();
    let mut decoder = SseDecoder::new();
    for chunk in body.chunks(size) {
        decoder.feed(chunk, &mut chunked);
    }
    chunked.extend(decoder.finish());
    assert_eq!(whole, chunked, "chunk size {size} changed the decoded events");
});
