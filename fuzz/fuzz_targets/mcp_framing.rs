//! MCP JSON-RPC framing (src/mcp/conn.rs, issue 20 item 12): any bytes read as a stdio server's stdout
//! (lines capped at a size picked by the first byte, 16..4111 bytes) are routed without a panic: responses
//! to waiting requests, server requests answered (each with the id it came with), notifications, batches,
//! garbage ignored, and every result converted as a tool result would be.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Some((&cap, body)) = data.split_first() else { return };
    let max_line = 16 + usize::from(cap) * 16;
    let (_, replies) = tooloop::mcp::conn::route_stdio_bytes(body, max_line);
    for r in replies {
        // Every answer to a server request is a JSON-RPC response: an id and a result or an error.
        assert!(r.get("id").is_some() && (r.get("result").is_some() || r.get("error").is_some()), "{r}");
    }
});
