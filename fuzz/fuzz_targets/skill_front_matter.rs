//! Skill front matter (src/skills.rs `parse_front_matter`, issue 20 item 15): any text must be parsed or
//! refused without a panic, a stack overflow or unbounded memory (aliases refused, depth and size bounded),
//! and what is accepted converts to JSON that serializes.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else { return };
    if let Ok(meta) = tooloop::skills::parse_front_matter(text) {
        let _ = serde_json::to_string(&meta).unwrap();
    }
});
