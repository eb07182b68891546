//! The tool results of a turn never take more than a share of the model's context window.
//!
//! Tools cap their own output (bash at 30,000 characters, read_file at 2,000 lines), but those caps are made
//! for large windows: on a local model with 4,096 tokens one `read_file` of a log is already several times
//! the whole window, every request after it is refused as too long, and compaction cannot help, because the
//! result is part of the turn it keeps. So before a result is stored (and sent), text past the turn's budget
//! is cut out of its middle: the model sees the start and the end, and a note saying how much was left out
//! and how to ask for less at a time.
//!
//! The budget is in tokens, for all the results of one turn together ([`turn_budget`]): a quarter of the
//! window, and no more than the room the next request leaves. A real model's draft ran `cat app.log`, a
//! `grep` and two more commands in one turn, each result once allowed its own quarter, and the next request
//! was 4,625 tokens of a 4,096 window. Tokens are estimated from what a text is made of ([`text_tokens`]), not
//! from the request's average: a request is mostly JSON and prose (about 6 bytes a token as llama.cpp counted
//! one), a log is under 2 characters a token, and the log cut at the request's ratio took 3,500 tokens.
//!
//! Must never: cut a result that fits, cut a small result (at most [`SMALL_TOKENS`]), split a character, or
//! touch a non-text block (images are checked against the API's limits elsewhere).

use serde_json::Value;

/// The share of the context window the results of one turn may take together.
pub const RESULT_SHARE: f64 = 0.25;
/// However small the window or the room left, the results of a turn may keep this many tokens.
const MIN_TOKENS: u64 = 512;
/// A text of at most this many tokens is never cut (an exit code, a count, a short error), whatever the
/// results before it took.
pub const SMALL_TOKENS: f64 = 64.0;
/// Of what is kept, the share taken from the start (the rest from the end).
const HEAD_SHARE: f64 = 0.7;

/// Tokens `text` would take, estimated from what it is made of: a digit or a non-ASCII character about one
/// each (common tokenizers, Qwen's and Llama's among them, split numbers into single digits), four ASCII
/// letters one, two other characters (spaces, punctuation) one. Against Qwen2.5's tokenizer this is 0.8 to
/// 1.7 times the real count on logs, code, prose, JSON, Chinese text, `ls` and `seq` output; random base64
/// is the known miss (half its real count).
pub fn text_tokens(text: &str) -> f64 {
    let (mut single, mut letters, mut other) = (0u64, 0u64, 0u64);
    for c in text.chars() {
        if c.is_ascii_digit() || !c.is_ascii() {
            single += 1;
        } else if c.is_ascii_alphabetic() {
            letters += 1;
        } else {
            other += 1;
        }
    }
    single as f64 + letters as f64 / 4.0 + other as f64 / 2.0
}

/// Tokens the results of one turn may take together in a window of `window` tokens: a quarter of it, no more
/// than `room` (what the next request leaves free, when known), never under [`MIN_TOKENS`].
pub fn turn_budget(window: u64, room: Option<u64>) -> f64 {
    let share = (window as f64 * RESULT_SHARE) as u64;
    share.min(room.unwrap_or(u64::MAX)).max(MIN_TOKENS) as f64
}

/// Cuts the text of `content` (a string, or the text blocks of a list) down to what is `left` of the turn's
/// budget (in tokens), keeping each cut text's start and end around a note; what it keeps is taken from
/// `left`. Returns whether anything was cut.
pub fn fit_result(content: &mut Value, left: &mut f64, window: u64) -> bool {
    let mut cut = false;
    let mut fit = |text: &mut String| {
        let tokens = text_tokens(text);
        if tokens <= SMALL_TOKENS || tokens <= *left {
            *left = (*left - tokens).max(0.0);
            return;
        }
        let chars = text.chars().count();
        // The text's own density: what is kept costs what the whole costs, per character.
        let keep = (chars as f64 * *left / tokens) as usize;
        *text = cut_middle(text, chars, keep, window);
        *left = 0.0;
        cut = true;
    };
    match content {
        Value::String(s) => fit(s),
        Value::Array(blocks) => {
            for block in blocks.iter_mut() {
                if block.get("type").and_then(Value::as_str) != Some("text") {
                    continue;
                }
                if let Some(Value::String(s)) = block.get_mut("text") {
                    fit(s);
                }
            }
        }
        _ => {}
    }
    cut
}

/// `text` (`chars` characters) with only `keep` of them: the start, a note, the end.
fn cut_middle(text: &str, chars: usize, keep: usize, window: u64) -> String {
    let head = (keep as f64 * HEAD_SHARE) as usize;
    let tail = keep - head;
    let left_out = chars - head - tail;
    let start: String = text.chars().take(head).collect();
    let end: String = text.chars().skip(chars - tail).collect();
    format!(
        "{start}\n[... {left_out} characters of this result are not shown: the tool results of one turn may take \
         at most a quarter of the model's context window ({window} tokens). Ask for less at a time: read_file with \
         offset and limit, grep, or head and tail in bash.]\n{end}"
    )
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn a_result_that_fits_is_untouched_and_taken_from_what_is_left() {
        let mut v = json!(
            "short text that fits in what is left of the budget, more than sixty-four tokens: 0123456789 0123456789 0123456789 0123456789"
        );
        let mut left = 1000.0;
        assert!(!fit_result(&mut v, &mut left, 4096));
        assert!(v.as_str().unwrap().starts_with("short text"));
        assert!(left < 1000.0 && left > 900.0, "{left}");
    }

    #[test]
    fn a_long_text_keeps_its_start_and_end_around_a_note() {
        let text: String = (0..1000).map(|i| format!("line {i}\n")).collect();
        let mut v = Value::String(text.clone());
        let mut left = 500.0;
        assert!(fit_result(&mut v, &mut left, 4096));
        assert_eq!(left, 0.0);
        let s = v.as_str().unwrap();
        assert!(s.starts_with("line 0\nline 1\n"), "{s}");
        assert!(s.ends_with("line 998\nline 999\n"), "{s}");
        assert!(s.contains("characters of this result are not shown"), "{s}");
        assert!(s.contains("(4096 tokens)"));
        let note_at = s.find("\n[... ").unwrap();
        let head = &s[..note_at];
        let tail = &s[s.find(".]\n").unwrap() + 3..];
        // What is kept costs about the 500 tokens that were left.
        let kept = text_tokens(head) + text_tokens(tail);
        assert!((440.0..=500.0).contains(&kept), "{kept}");
        let left_out: usize = s["\n[... ".len() + note_at..].split(' ').next().unwrap().parse().unwrap();
        assert_eq!(left_out, text.chars().count() - head.chars().count() - tail.chars().count());
    }

    #[test]
    fn characters_are_never_split_and_blocks_share_the_budget() {
        let mut v = json!([
            {"type": "text", "text": "é".repeat(100)},
            {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": "AAAA"}},
            {"type": "text", "text": "ü".repeat(100)},
        ]);
        let mut left = 140.0;
        assert!(fit_result(&mut v, &mut left, 100));
        assert_eq!(v[0]["text"], "é".repeat(100), "the first block fits");
        let second = v[2]["text"].as_str().unwrap();
        assert!(second.starts_with(&"ü".repeat(28)) && second.ends_with(&"ü".repeat(12)), "{second}");
        assert!(!second.starts_with(&"ü".repeat(29)), "{second}");
        assert_eq!(v[1]["source"]["data"], "AAAA", "an image is never touched");
    }

    #[test]
    fn a_small_result_is_never_cut_even_when_nothing_is_left() {
        let mut v = json!("37");
        let mut left = 0.0;
        assert!(!fit_result(&mut v, &mut left, 4096));
        assert_eq!(v, json!("37"));
        let mut v = json!("x".repeat(400));
        assert!(fit_result(&mut v, &mut left, 4096), "a larger one is cut to its note");
    }

    #[test]
    fn tokens_are_counted_by_what_a_text_is_made_of() {
        // A log line is dense (Qwen2.5 counts 1.8 characters a token), prose is not (about 4).
        let line = "2026-01-01 12:00:07 ERROR worker-0 handled request 7\n";
        assert!((text_tokens(line) - 28.25).abs() < 1e-9, "{}", text_tokens(line));
        assert_eq!(text_tokens("four"), 1.0);
        assert_eq!(text_tokens("日志"), 2.0);
        assert_eq!(text_tokens(""), 0.0);
    }

    #[test]
    fn the_turn_budget_is_a_quarter_of_the_window_within_the_room_left_with_a_floor() {
        assert_eq!(turn_budget(4096, None), 1024.0);
        assert_eq!(turn_budget(4096, Some(700)), 700.0);
        assert_eq!(turn_budget(4096, Some(100)), 512.0);
        assert_eq!(turn_budget(1000, None), 512.0);
        assert_eq!(turn_budget(200_000, Some(150_000)), 50_000.0);
    }
}
