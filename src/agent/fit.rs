//! A tool result never takes more than a share of the model's context window.
//!
//! Tools cap their own output (bash at 30,000 characters, read_file at 2,000 lines), but those caps are made
//! for large windows: on a local model with 4,096 tokens one `read_file` of a log is already several times
//! the whole window, every request after it is refused as too long, and compaction cannot help, because the
//! result is part of the turn it keeps. So before a result is stored (and sent), text past
//! [`RESULT_SHARE`] of the window is cut out of its middle: the model sees the start and the end, and a note
//! saying how much was left out and how to ask for less at a time.
//!
//! Must never: cut a result that fits, split a character, or touch a non-text block (images are checked
//! against the API's limits elsewhere).

use serde_json::Value;

/// The share of the context window one tool result may take.
pub const RESULT_SHARE: f64 = 0.25;
/// However small the window, a result may keep this many characters.
const MIN_CHARS: usize = 2_000;
/// Of what is kept, the share taken from the start (the rest from the end).
const HEAD_SHARE: f64 = 0.7;

/// Characters a result may keep in a window of `window` tokens at `bytes_per_token`.
pub fn result_budget(window: u64, bytes_per_token: f64) -> usize {
    ((window as f64 * bytes_per_token * RESULT_SHARE) as usize).max(MIN_CHARS)
}

/// Cuts the text of `content` (a string, or the text blocks of a list) down to `budget` characters in all,
/// keeping each cut text's start and end around a note. Returns whether anything was cut.
pub fn fit_result(content: &mut Value, budget: usize, window: u64) -> bool {
    let mut left = budget;
    let mut cut = false;
    let mut fit = |text: &mut String| {
        let chars = text.chars().count();
        if chars <= left {
            left -= chars;
            return;
        }
        *text = cut_middle(text, chars, left, window);
        left = 0;
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
        "{start}\n[... {left_out} characters of this result are not shown: the whole result would take more than a \
         quarter of the model's context window ({window} tokens). Ask for less at a time: read_file with offset \
         and limit, grep, or head and tail in bash.]\n{end}"
    )
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn a_result_that_fits_is_untouched() {
        let mut v = json!("short");
        assert!(!fit_result(&mut v, 10, 4096));
        assert_eq!(v, json!("short"));
    }

    #[test]
    fn a_long_text_keeps_its_start_and_end_around_a_note() {
        let text: String = (0..1000).map(|i| format!("line {i}\n")).collect();
        let mut v = Value::String(text.clone());
        assert!(fit_result(&mut v, 2000, 4096));
        let s = v.as_str().unwrap();
        assert!(s.starts_with("line 0\nline 1\n"), "{s}");
        assert!(s.ends_with("line 998\nline 999\n"), "{s}");
        assert!(s.contains("characters of this result are not shown"), "{s}");
        assert!(s.contains("(4096 tokens)"));
        let note_at = s.find("\n[... ").unwrap();
        let kept = s[..note_at].chars().count() + s[s.find(".]\n").unwrap() + 3..].chars().count();
        assert_eq!(kept, 2000);
        let left_out: usize = s["\n[... ".len() + note_at..].split(' ').next().unwrap().parse().unwrap();
        assert_eq!(left_out, text.chars().count() - 2000);
    }

    #[test]
    fn characters_are_never_split_and_blocks_share_the_budget() {
        let mut v = json!([
            {"type": "text", "text": "é".repeat(30)},
            {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": "AAAA"}},
            {"type": "text", "text": "ü".repeat(30)},
        ]);
        assert!(fit_result(&mut v, 40, 100));
        assert_eq!(v[0]["text"], "é".repeat(30), "the first block fits");
        let second = v[2]["text"].as_str().unwrap();
        assert!(second.starts_with(&"ü".repeat(7)) && second.ends_with(&"ü".repeat(3)), "{second}");
        assert_eq!(v[1]["source"]["data"], "AAAA", "an image is never touched");
    }

    #[test]
    fn the_budget_is_a_quarter_of_the_window_with_a_floor() {
        assert_eq!(result_budget(4096, 3.5), 3584);
        assert_eq!(result_budget(1000, 3.5), MIN_CHARS);
        assert_eq!(result_budget(200_000, 3.5), 175_000);
    }
}
