//! Incremental Server-Sent Events decoder.
//!
//! Implements the "event stream interpretation" algorithm of the WHATWG HTML
//! spec for a live HTTP body: the caller feeds whatever bytes have arrived and
//! gets back every event whose terminating blank line they completed. Nothing is
//! held back beyond the event currently being decoded, so a streaming UI sees
//! each delta as soon as the server has sent it.
//!
//! Choices that differ from, or go beyond, the spec:
//!
//! * The spec's "last event ID" and "reconnection time" are connection-level
//!   state; here `id` and `retry` are reported on the event whose block contained
//!   them, and the caller decides what to keep. A block that only sets `id`,
//!   `retry` or `event` (no `data` field) is not dispatched, as in the spec, so
//!   those values are dropped.
//! * [`SseDecoder::finish`] dispatches a final event that has data but no
//!   terminating blank line (the spec discards it), because real servers
//!   sometimes close the connection right after the last `data:` line.
//! * A `retry` value too large for `u64` is ignored like any other invalid value.

use std::borrow::Cow;
use std::mem;

/// UTF-8 encoding of U+FEFF, which the spec skips once at the start of the stream.
const BOM: &[u8] = b"\xEF\xBB\xBF";

/// One decoded SSE event.
#[derive(Clone, Debug, PartialEq, Eq, Default)]
pub struct SseEvent {
    /// The `event:` field, if any (None means the default type "message").
    pub event: Option<String>,
    /// The `data:` lines joined with "\n" (no trailing newline).
    pub data: String,
    /// The last `id:` field seen in this event, if any.
    pub id: Option<String>,
    /// The `retry:` field (milliseconds) if a valid integer was given in this event.
    pub retry: Option<u64>,
}

/// Incremental SSE decoder: bytes in, [`SseEvent`]s out.
///
/// Lines may end in `\n`, `\r\n` or `\r`, and chunk boundaries may fall
/// anywhere, including between the `\r` and `\n` of one line ending or inside a
/// multi-byte UTF-8 character. Each line is decoded as UTF-8 once it is
/// complete; invalid sequences become U+FFFD.
///
/// An event is dispatched only if its block contained at least one `data` field
/// (possibly empty: `data:` alone yields an event with `data == ""`). A block
/// with only `event:` (or `id:`/`retry:`) is discarded, as the spec requires.
///
/// ```
/// use tooloop::sse::SseDecoder;
///
/// let mut decoder = SseDecoder::new();
/// let mut events = Vec::new();
/// decoder.feed(b"event: ping\ndata: {}\n\n", &mut events);
/// assert_eq!(events[0].event.as_deref(), Some("ping"));
/// assert_eq!(events[0].data, "{}");
/// ```
#[derive(Clone, Debug, Default)]
pub struct SseDecoder {
    /// The line currently being received, without its terminator. Only used when
    /// a line spans `feed` calls; lines wholly inside one chunk are parsed in place.
    line: Vec<u8>,
    /// The last chunk ended in `\r`: a `\n` opening the next chunk completes that
    /// same CRLF and must not be read as a second (blank) line.
    after_cr: bool,
    /// The first line has been processed, so a BOM is no longer special.
    past_first_line: bool,
    /// Bytes (terminators included) of the complete lines since the last blank line.
    event_bytes: usize,
    /// The event being received: its type (None when unset or set to the empty string), data lines joined
    /// with `\n`, and the last valid `id` and `retry` of the block. Its buffers are reused from one event to
    /// the next ([`SseDecoder::feed_with`] lends it out), so a steady stream costs no allocation per event.
    cur: SseEvent,
    /// An `event` field was seen in the current block (else the event's type is the default).
    event_seen: bool,
    /// A `data` field was seen; distinguishes `data:` (dispatch "") from no data.
    data_seen: bool,
}

impl SseDecoder {
    /// A decoder at the start of a stream.
    pub fn new() -> Self {
        Self::default()
    }

    /// Feed bytes; push every event completed by them onto `out` (in order).
    /// Never panics on any input.
    pub fn feed(&mut self, bytes: &[u8], out: &mut Vec<SseEvent>) {
        self.feed_sink(bytes, &mut |cur| out.push(take_owned(cur)));
    }

    /// Feed bytes; call `f` with every event completed by them (in order), lent from the decoder's own
    /// buffers: no allocation per event once the buffers have grown to the stream's event size (an event
    /// type is copied only when it differs from the previous event's). Never panics on any input.
    pub fn feed_with(&mut self, bytes: &[u8], f: &mut dyn FnMut(&SseEvent)) {
        self.feed_sink(bytes, &mut |cur| f(cur));
    }

    fn feed_sink(&mut self, bytes: &[u8], sink: &mut dyn FnMut(&mut SseEvent)) {
        let mut rest = bytes;
        // Only a non-empty chunk can tell whether the pending `\r` was a CRLF.
        if self.after_cr {
            if let Some((&first, tail)) = rest.split_first() {
                self.after_cr = false;
                if first == b'\n' {
                    rest = tail;
                }
            }
        }
        // Each byte is examined once: after a line ending we continue from the
        // next byte, and an unterminated tail is stashed, never rescanned.
        while let Some(pos) = memchr::memchr2(b'\n', b'\r', rest) {
            let (line, terminator) = rest.split_at(pos);
            let terminator_len = match terminator {
                [b'\r', b'\n', ..] => 2,
                [b'\r'] => {
                    self.after_cr = true;
                    1
                }
                _ => 1,
            };
            if self.end_line(line, terminator_len) {
                self.dispatch(sink);
            }
            rest = terminator.get(terminator_len..).unwrap_or_default();
        }
        self.line.extend_from_slice(rest);
    }

    /// The stream ended: flush a final line that had no line ending, and dispatch a pending event
    /// that had data but no terminating blank line (our choice, deliberately more lenient than the spec,
    /// because real servers sometimes close without it). Returns that event if any.
    ///
    /// Afterwards the decoder is back in its initial state, so calling `finish`
    /// again returns None and further bytes are decoded as a new stream.
    pub fn finish(&mut self) -> Option<SseEvent> {
        let line = mem::take(&mut self.line);
        if !line.is_empty() {
            self.process_line(&line, 0);
        }
        let mut event = None;
        self.dispatch(&mut |cur| event = Some(take_owned(cur)));
        *self = Self::default();
        event
    }

    /// Bytes received so far that belong to an event not yet complete (for diagnostics).
    ///
    /// Counts everything since the last blank line, comments included.
    pub fn pending_bytes(&self) -> usize {
        self.event_bytes.saturating_add(self.line.len())
    }

    /// Completes the stashed partial line with `tail` and processes it; true when it ended a block.
    fn end_line(&mut self, tail: &[u8], terminator_len: usize) -> bool {
        if self.line.is_empty() {
            return self.process_line(tail, terminator_len);
        }
        let mut line = mem::take(&mut self.line);
        line.extend_from_slice(tail);
        let event = self.process_line(&line, terminator_len);
        // Hand the buffer back so its capacity is reused for the next split line.
        line.clear();
        self.line = line;
        event
    }

    /// Interprets one complete line (without terminator); true for a blank line (the block ends: see
    /// [`SseDecoder::dispatch`]).
    fn process_line(&mut self, line: &[u8], terminator_len: usize) -> bool {
        let raw_len = line.len();
        let line = if self.past_first_line {
            line
        } else {
            self.past_first_line = true;
            line.strip_prefix(BOM).unwrap_or(line)
        };
        if line.is_empty() {
            return true;
        }
        self.event_bytes = self.event_bytes.saturating_add(raw_len).saturating_add(terminator_len);
        if line.first() == Some(&b':') {
            return false;
        }
        // Field names and values are split on bytes: ':' and ' ' are ASCII and
        // never occur inside a multi-byte sequence, so this matches splitting the
        // decoded text, and values are decoded only for fields we keep.
        let mut parts = line.splitn(2, |&b| b == b':');
        let name = parts.next().unwrap_or_default();
        let value = parts.next().map_or(&[][..], |v| v.strip_prefix(b" ").unwrap_or(v));
        match name {
            b"event" => {
                self.event_seen = true;
                // An empty type means "message", the same as no `event` field. The same type as the previous
                // event's (the usual case) keeps its buffer.
                if value.is_empty() {
                    self.cur.event = None;
                } else {
                    let name = decode(value);
                    if self.cur.event.as_deref() != Some(&*name) {
                        self.cur.event = Some(name.into_owned());
                    }
                }
            }
            b"data" => {
                if self.data_seen {
                    self.cur.data.push('\n');
                }
                self.data_seen = true;
                self.cur.data.push_str(&decode(value));
            }
            // NUL in UTF-8 is only ever the byte 0, and lossy decoding never produces it.
            b"id" if !value.contains(&0) => self.cur.id = Some(decode(value).into_owned()),
            b"retry" => {
                if let Some(ms) = parse_retry(value) {
                    self.cur.retry = Some(ms);
                }
            }
            _ => {}
        }
        false
    }

    /// Ends the current block: hands its event to `sink` if a `data` field was seen, and resets the
    /// per-event state either way (keeping the buffers).
    fn dispatch(&mut self, sink: &mut dyn FnMut(&mut SseEvent)) {
        self.event_bytes = 0;
        if !self.event_seen {
            self.cur.event = None;
        }
        if mem::take(&mut self.data_seen) {
            sink(&mut self.cur);
        }
        self.event_seen = false;
        self.cur.data.clear();
        self.cur.id = None;
        self.cur.retry = None;
    }
}

/// An owned copy of the decoder's current event for [`SseDecoder::feed`]: the data buffer is taken (the
/// decoder grows a new one), the type copied (the decoder keeps it for the next event).
fn take_owned(cur: &mut SseEvent) -> SseEvent {
    SseEvent { event: cur.event.clone(), data: mem::take(&mut cur.data), id: cur.id.take(), retry: cur.retry.take() }
}

/// Lossy UTF-8: borrows when the bytes are valid, so valid data costs no allocation.
fn decode(bytes: &[u8]) -> Cow<'_, str> {
    // Valid UTF-8 (nearly always) is checked by the fast validator; only invalid bytes take the lossy path.
    match std::str::from_utf8(bytes) {
        Ok(s) => Cow::Borrowed(s),
        Err(_) => String::from_utf8_lossy(bytes),
    }
}

/// A `retry` value: one or more ASCII digits that fit in a `u64`.
fn parse_retry(value: &[u8]) -> Option<u64> {
    if value.is_empty() {
        return None;
    }
    value.iter().try_fold(0u64, |acc, &b| {
        if b.is_ascii_digit() { acc.checked_mul(10)?.checked_add(u64::from(b - b'0')) } else { None }
    })
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    /// A tool-using Anthropic Messages stream, with multi-byte UTF-8 in the text deltas.
    const ANTHROPIC: &str = r#"event: message_start
data: {"type":"message_start","message":{"id":"msg_01","type":"message","role":"assistant","content":[],"model":"claude-x","stop_reason":null,"usage":{"input_tokens":12,"output_tokens":1}}}

event: ping
data: {"type": "ping"}

event: content_block_start
data: {"type":"content_block_start","index":0,"content_block":{"type":"text","text":""}}

event: content_block_delta
data: {"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"héllo "}}

event: content_block_delta
data: {"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"✓ 日本 🎉"}}

event: content_block_stop
data: {"type":"content_block_stop","index":0}

event: content_block_start
data: {"type":"content_block_start","index":1,"content_block":{"type":"tool_use","id":"toolu_01","name":"bash","input":{}}}

event: content_block_delta
data: {"type":"content_block_delta","index":1,"delta":{"type":"input_json_delta","partial_json":"{\"command\": \"ls"}}

event: content_block_delta
data: {"type":"content_block_delta","index":1,"delta":{"type":"input_json_delta","partial_json":" -la\"}"}}

event: content_block_stop
data: {"type":"content_block_stop","index":1}

event: message_delta
data: {"type":"message_delta","delta":{"stop_reason":"tool_use","stop_sequence":null},"usage":{"output_tokens":42}}

event: message_stop
data: {"type":"message_stop"}

"#;

    /// Feeds the chunks in order, then `finish`; returns every event.
    fn decode_chunks<'a>(chunks: impl IntoIterator<Item = &'a [u8]>) -> Vec<SseEvent> {
        let mut decoder = SseDecoder::new();
        let mut out = Vec::new();
        for chunk in chunks {
            decoder.feed(chunk, &mut out);
        }
        out.extend(decoder.finish());
        out
    }

    fn decode_all(bytes: &[u8]) -> Vec<SseEvent> {
        decode_chunks([bytes])
    }

    fn data_event(data: &str) -> SseEvent {
        SseEvent { data: data.to_owned(), ..SseEvent::default() }
    }

    /// Deterministic pseudo-random numbers (Knuth's MMIX LCG), high bits only.
    struct Lcg(u64);

    impl Lcg {
        fn next(&mut self) -> u64 {
            self.0 = self.0.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
            self.0 >> 33
        }
    }

    /// Splits `bytes` into chunks of pseudo-random sizes, mixing tiny and large ones.
    fn lcg_chunks(bytes: &[u8], seed: u64, max: u64) -> Vec<&[u8]> {
        let mut rng = Lcg(seed);
        let mut chunks = Vec::new();
        let mut rest = bytes;
        while !rest.is_empty() {
            let scale = [4, 64, max][(rng.next() % 3) as usize];
            let size = (1 + rng.next() % scale) as usize;
            let (chunk, tail) = rest.split_at(size.min(rest.len()));
            chunks.push(chunk);
            rest = tail;
        }
        chunks
    }

    fn assert_every_split_matches(bytes: &[u8], expected: &[SseEvent]) {
        for split in 0..=bytes.len() {
            let (a, b) = bytes.split_at(split);
            assert_eq!(decode_chunks([a, b]), expected, "split at byte {split}");
        }
    }

    /// What `feed_with` lends, copied, for every chunk; then `finish`.
    fn decode_chunks_lent<'a>(chunks: impl IntoIterator<Item = &'a [u8]>) -> Vec<SseEvent> {
        let mut decoder = SseDecoder::new();
        let mut out = Vec::new();
        for chunk in chunks {
            decoder.feed_with(chunk, &mut |e| out.push(e.clone()));
        }
        out.extend(decoder.finish());
        out
    }

    #[test]
    fn lent_events_equal_owned_events_at_every_split() {
        // Named and unnamed events, ids, retry, comments, CRLF: the lending path must agree with `feed`.
        let mixed =
            format!("{ANTHROPIC}data: no name\r\nid: 7\r\nretry: 10\r\n\r\n: comment\n\nevent: x\n\ndata: after\n\n");
        let bytes = mixed.as_bytes();
        let expected = decode_all(bytes);
        assert!(expected.iter().any(|e| e.event.is_none() && e.id.as_deref() == Some("7")));
        for split in 0..=bytes.len() {
            let (a, b) = bytes.split_at(split);
            assert_eq!(decode_chunks_lent([a, b]), expected, "split at byte {split}");
        }
    }

    #[test]
    fn lent_events_reuse_the_decoders_buffers() {
        // A steady stream allocates nothing per event: every delta is lent from the same data buffer.
        let one = "event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":0}\n\n";
        let mut decoder = SseDecoder::new();
        let mut seen = Vec::new();
        decoder.feed_with(one.repeat(50).as_bytes(), &mut |e| {
            seen.push((e.data.as_ptr() as usize, e.event.as_ref().map(|n| n.as_ptr() as usize)))
        });
        assert_eq!(seen.len(), 50);
        assert!(seen.windows(2).all(|w| w[0] == w[1]), "a buffer was reallocated between events");
    }

    #[test]
    fn anthropic_stream_decodes_in_one_shot() {
        let events = decode_all(ANTHROPIC.as_bytes());
        let names: Vec<_> = events.iter().map(|e| e.event.as_deref().unwrap()).collect();
        assert_eq!(
            names,
            [
                "message_start",
                "ping",
                "content_block_start",
                "content_block_delta",
                "content_block_delta",
                "content_block_stop",
                "content_block_start",
                "content_block_delta",
                "content_block_delta",
                "content_block_stop",
                "message_delta",
                "message_stop",
            ]
        );
        assert!(events[3].data.contains(r#""text":"héllo ""#));
        assert!(events[4].data.contains(r#""text":"✓ 日本 🎉""#));
        assert!(events[7].data.contains(r#""partial_json":"{\"command\": \"ls""#));
        assert_eq!(events[11].data, r#"{"type":"message_stop"}"#);
        assert!(events.iter().all(|e| e.id.is_none() && e.retry.is_none()));
    }

    #[test]
    fn anthropic_stream_split_at_every_byte_offset_matches_one_shot() {
        let bytes = ANTHROPIC.as_bytes();
        assert_every_split_matches(bytes, &decode_all(bytes));
    }

    #[test]
    fn anthropic_stream_fed_one_byte_at_a_time_matches_one_shot() {
        let bytes = ANTHROPIC.as_bytes();
        assert_eq!(decode_chunks(bytes.chunks(1)), decode_all(bytes));
    }

    #[test]
    fn anthropic_stream_in_pseudo_random_chunks_matches_one_shot() {
        let bytes = ANTHROPIC.as_bytes();
        let expected = decode_all(bytes);
        for seed in 0..200 {
            let chunks = lcg_chunks(bytes, seed, 512);
            assert_eq!(decode_chunks(chunks), expected, "seed {seed}");
        }
    }

    #[test]
    fn crlf_and_cr_line_endings_give_the_same_events_at_every_split() {
        let expected = decode_all(ANTHROPIC.as_bytes());
        for ending in ["\r\n", "\r"] {
            let converted = ANTHROPIC.replace('\n', ending);
            let bytes = converted.as_bytes();
            assert_eq!(decode_all(bytes), expected, "{ending:?}");
            assert_eq!(decode_chunks(bytes.chunks(1)), expected, "{ending:?}");
            assert_every_split_matches(bytes, &expected);
        }
    }

    #[test]
    fn cr_and_lf_split_across_chunks_is_one_line_ending() {
        // Were the `\n` read as a blank line, "a" and "b" would be two events.
        let chunks: [&[u8]; 2] = [b"data: a\r", b"\ndata: b\r\n\r\n"];
        assert_eq!(decode_chunks(chunks), [data_event("a\nb")]);
        // Empty feeds in between must not forget the pending `\r`.
        let chunks: [&[u8]; 4] = [b"data: a\r", b"", b"", b"\ndata: b\r\n\r\n"];
        assert_eq!(decode_chunks(chunks), [data_event("a\nb")]);
    }

    #[test]
    fn cr_at_chunk_end_followed_by_other_bytes_is_a_line_ending() {
        let chunks: [&[u8]; 3] = [b"data: a\r", b"data: b\r", b"\r"];
        assert_eq!(decode_chunks(chunks), [data_event("a\nb")]);
    }

    #[test]
    fn mixed_line_endings_in_one_stream() {
        let events = decode_all(b"data: a\rdata: b\r\ndata: c\n\r\ndata: d\r\r");
        assert_eq!(events, [data_event("a\nb\nc"), data_event("d")]);
    }

    #[test]
    fn events_are_emitted_as_soon_as_their_blank_line_arrives() {
        let mut decoder = SseDecoder::new();
        let mut out = Vec::new();
        decoder.feed(b"data: a\n", &mut out);
        assert!(out.is_empty());
        decoder.feed(b"\ndata: b\n", &mut out);
        assert_eq!(out, [data_event("a")]);
        decoder.feed(b"\n", &mut out);
        assert_eq!(out, [data_event("a"), data_event("b")]);
    }

    #[test]
    fn comments_are_ignored() {
        let events = decode_all(b": keep-alive\ndata: a\n:comment: with colon\ndata: b\n\n:\n\n");
        assert_eq!(events, [data_event("a\nb")]);
    }

    #[test]
    fn multi_line_data_is_joined_with_newlines() {
        let events = decode_all(b"data: first\ndata: second\ndata:\ndata: fourth\n\n");
        assert_eq!(events, [data_event("first\nsecond\n\nfourth")]);
    }

    #[test]
    fn data_without_space_after_colon() {
        assert_eq!(decode_all(b"data:x\n\n"), [data_event("x")]);
    }

    #[test]
    fn only_one_leading_space_is_stripped() {
        assert_eq!(decode_all(b"data:  two spaces \n\n"), [data_event(" two spaces ")]);
    }

    #[test]
    fn field_without_colon_has_empty_value() {
        assert_eq!(decode_all(b"data\n\n"), [data_event("")]);
        assert_eq!(decode_all(b"data\ndata\n\n"), [data_event("\n")]);
        // `event` alone sets the empty type, i.e. the default "message".
        assert_eq!(decode_all(b"event: x\nevent\ndata: y\n\n"), [data_event("y")]);
    }

    #[test]
    fn unknown_fields_are_ignored() {
        let events = decode_all(b"foo: bar\nDATA: upper\ndata : spaced\ndata: x\n\n");
        assert_eq!(events, [data_event("x")]);
        assert!(decode_all(b"foo: bar\n\n").is_empty());
    }

    #[test]
    fn id_and_retry_are_reported_on_their_event() {
        let events = decode_all(b"id: 1\nretry: 1500\nid: 2\nevent: tick\ndata: x\n\ndata: y\n\n");
        assert_eq!(
            events,
            [
                SseEvent { event: Some("tick".into()), data: "x".into(), id: Some("2".into()), retry: Some(1500) },
                data_event("y"),
            ]
        );
    }

    #[test]
    fn empty_id_is_reported_as_empty_string() {
        let events = decode_all(b"id\ndata: x\n\n");
        assert_eq!(events[0].id.as_deref(), Some(""));
    }

    #[test]
    fn id_containing_nul_is_ignored() {
        let events = decode_all(b"id: good\nid: b\0ad\ndata: x\n\n");
        assert_eq!(events[0].id.as_deref(), Some("good"));
    }

    #[test]
    fn retry_with_junk_is_ignored() {
        for junk in [
            "retry: 10a",
            "retry: -5",
            "retry: +5",
            "retry: 1 000",
            "retry: ",
            "retry",
            "retry: 1.5",
            "retry: 99999999999999999999999",
        ] {
            let events = decode_all(format!("{junk}\ndata: x\n\n").as_bytes());
            assert_eq!(events, [data_event("x")], "{junk:?}");
        }
        // A later invalid value keeps the earlier valid one.
        let events = decode_all(b"retry: 300\nretry: nope\ndata: x\n\n");
        assert_eq!(events[0].retry, Some(300));
        assert_eq!(decode_all(b"retry: 0\ndata: x\n\n")[0].retry, Some(0));
    }

    #[test]
    fn empty_data_event_is_dispatched() {
        assert_eq!(decode_all(b"data:\n\n"), [data_event("")]);
        assert_eq!(decode_all(b"data: \n\n"), [data_event("")]);
    }

    #[test]
    fn event_name_only_block_is_not_dispatched() {
        // Per spec the block is dropped and its type must not leak into the next event.
        let events = decode_all(b"event: ping\n\ndata: x\n\n");
        assert_eq!(events, [data_event("x")]);
        assert!(decode_all(b"event: a\nid: 1\nretry: 5\n\n").is_empty());
    }

    #[test]
    fn stream_ending_without_blank_line_is_dispatched_by_finish() {
        let mut decoder = SseDecoder::new();
        let mut out = Vec::new();
        decoder.feed(b"event: e\ndata: x\nid: 7", &mut out);
        assert!(out.is_empty());
        let expected = SseEvent { event: Some("e".into()), data: "x".into(), id: Some("7".into()), retry: None };
        assert_eq!(decoder.finish(), Some(expected));
        // A complete last line, with any ending, is dispatched too.
        for tail in ["data: y\n", "data: y\r", "data: y\r\n", "data: y"] {
            let mut decoder = SseDecoder::new();
            decoder.feed(tail.as_bytes(), &mut out);
            assert_eq!(decoder.finish(), Some(data_event("y")), "{tail:?}");
        }
        assert!(out.is_empty());
    }

    #[test]
    fn finish_on_empty_or_complete_stream_returns_none() {
        assert_eq!(SseDecoder::new().finish(), None);
        let mut decoder = SseDecoder::new();
        let mut out = Vec::new();
        decoder.feed(b"data: x\n\n: trailing comment\n", &mut out);
        assert_eq!(out.len(), 1);
        assert_eq!(decoder.finish(), None);
        let mut decoder = SseDecoder::new();
        decoder.feed(b"event: only-a-name", &mut out);
        assert_eq!(decoder.finish(), None);
    }

    #[test]
    fn finish_twice_returns_none() {
        let mut decoder = SseDecoder::new();
        let mut out = Vec::new();
        decoder.feed(b"data: x", &mut out);
        assert_eq!(decoder.finish(), Some(data_event("x")));
        assert_eq!(decoder.finish(), None);
        assert_eq!(decoder.pending_bytes(), 0);
    }

    #[test]
    fn decoder_is_reusable_after_finish() {
        let mut decoder = SseDecoder::new();
        let mut out = Vec::new();
        decoder.feed(b"data: a", &mut out);
        assert_eq!(decoder.finish(), Some(data_event("a")));
        // A fresh stream, so a BOM is skipped again.
        decoder.feed(b"\xEF\xBB\xBFdata: b\n\n", &mut out);
        assert_eq!(out, [data_event("b")]);
    }

    #[test]
    fn pending_bytes_counts_the_incomplete_event() {
        let mut decoder = SseDecoder::new();
        let mut out = Vec::new();
        assert_eq!(decoder.pending_bytes(), 0);
        decoder.feed(b"event: x\r\ndata: he", &mut out);
        assert_eq!(decoder.pending_bytes(), 10 + 8);
        decoder.feed(b"llo\n", &mut out);
        assert_eq!(decoder.pending_bytes(), 10 + 12);
        decoder.feed(b"\n", &mut out);
        assert_eq!(out.len(), 1);
        assert_eq!(decoder.pending_bytes(), 0);
    }

    #[test]
    fn bom_at_stream_start_is_skipped() {
        let bytes = b"\xEF\xBB\xBFdata: x\n\n";
        assert_eq!(decode_all(bytes), [data_event("x")]);
        assert_eq!(decode_chunks(bytes.chunks(1)), [data_event("x")]);
        assert_every_split_matches(bytes, &[data_event("x")]);
        // Only one BOM, and only at the start: elsewhere it is part of the field name.
        assert!(decode_all(b"\xEF\xBB\xBF\xEF\xBB\xBFdata: x\n\n").is_empty());
        let events = decode_all(b"data: a\n\n\xEF\xBB\xBFdata: b\n\n");
        assert_eq!(events, [data_event("a")]);
        // A BOM followed by a line ending is just a blank first line.
        assert_eq!(decode_all(b"\xEF\xBB\xBF\ndata: x\n\n"), [data_event("x")]);
    }

    #[test]
    fn multibyte_character_split_across_feeds_is_intact() {
        let text = "data: 🎉日\n\n".as_bytes();
        assert_every_split_matches(text, &[data_event("🎉日")]);
    }

    #[test]
    fn invalid_utf8_becomes_replacement_character() {
        assert_eq!(decode_all(b"data: a\xFFb\n\n"), [data_event("a\u{FFFD}b")]);
        // A truncated sequence at the end of a line is one replacement, not a panic.
        assert_eq!(decode_all(b"data: \xE6\x97\n\n"), [data_event("\u{FFFD}")]);
        let events = decode_all(b"event: \xC0\xAF\nid: \x80\ndata: x\n\n");
        assert_eq!(events[0].event.as_deref(), Some("\u{FFFD}\u{FFFD}"));
        assert_eq!(events[0].id.as_deref(), Some("\u{FFFD}"));
        // Invalid bytes in a field name make it an unknown field.
        assert!(decode_all(b"d\xFFta: x\n\n").is_empty());
    }

    #[test]
    fn openai_stream_with_done_sentinel() {
        let stream = concat!(
            "data: {\"id\":\"c1\",\"choices\":[{\"delta\":{\"content\":\"Hi\"}}]}\n\n",
            "data: {\"id\":\"c1\",\"choices\":[{\"delta\":{},\"finish_reason\":\"stop\"}]}\n\n",
            "data: [DONE]\n\n",
        );
        let events = decode_all(stream.as_bytes());
        assert_eq!(events.len(), 3);
        assert!(events.iter().all(|e| e.event.is_none()));
        assert!(events[0].data.contains("\"Hi\""));
        assert_eq!(events[2], data_event("[DONE]"));
    }

    #[test]
    fn arbitrary_bytes_never_panic_and_chunking_never_changes_the_result() {
        // Bytes chosen to hit every branch: terminators, colons, field names, BOM, bad UTF-8.
        let alphabet = b"\r\n\r\n: :datdaeventidretry0123\0\xEF\xBB\xBF\xFF\xE6\x97";
        let mut rng = Lcg(0x5EED);
        for _ in 0..300 {
            let len = (rng.next() % 200) as usize;
            let bytes: Vec<u8> = (0..len).map(|_| alphabet[(rng.next() as usize) % alphabet.len()]).collect();
            let expected = decode_all(&bytes);
            assert_eq!(decode_chunks(bytes.chunks(1)), expected);
            assert_eq!(decode_chunks(lcg_chunks(&bytes, rng.next(), 16)), expected);
        }
    }

    #[test]
    fn megabyte_stream_decodes_in_any_chunk_size() {
        let reps = (1 << 20) / ANTHROPIC.len() + 1;
        let stream = ANTHROPIC.repeat(reps);
        let bytes = stream.as_bytes();
        let expected_len = reps * 12;
        for size in [1, 7, 4096, 64 * 1024] {
            let events = decode_chunks(bytes.chunks(size));
            assert_eq!(events.len(), expected_len, "chunk size {size}");
        }
        let events = decode_chunks(lcg_chunks(bytes, 42, 64 * 1024));
        assert_eq!(events.len(), expected_len);
        // One 1 MB line fed byte by byte must not be rescanned per feed.
        let mut long = b"data: ".to_vec();
        long.resize(1 << 20, b'x');
        long.extend_from_slice(b"\n\n");
        let events = decode_chunks(long.chunks(1));
        assert_eq!(events.len(), 1);
        assert_eq!(events[0].data.len(), (1 << 20) - 6);
    }
}
