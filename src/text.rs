//! Cutting text to a size without splitting a UTF-8 character (error messages, previews, tool output), and
//! adding a paragraph to a system prompt.

use serde_json::{Value, json};

/// The largest index at most `max` that is a character boundary of `s` (`s.len()` when `s` is shorter).
pub(crate) fn floor_boundary(s: &str, max: usize) -> usize {
    if max >= s.len() {
        return s.len();
    }
    let mut end = max;
    while !s.is_char_boundary(end) {
        end -= 1;
    }
    end
}

/// `s` cut to at most `max` bytes, ending in `…` when something was cut.
pub(crate) fn ellipsize(s: &str, max: usize) -> String {
    let end = floor_boundary(s, max);
    if end == s.len() { s.to_string() } else { format!("{}…", &s[..end]) }
}

/// A system prompt (string or text blocks) with `text` added at the end.
pub fn with_text(system: Option<Value>, text: &str) -> Value {
    match system {
        None => Value::String(text.to_string()),
        Some(Value::String(s)) if s.is_empty() => Value::String(text.to_string()),
        Some(Value::String(s)) => Value::String(format!("{s}\n\n{text}")),
        Some(Value::Array(mut blocks)) => {
            blocks.push(json!({"type": "text", "text": text}));
            Value::Array(blocks)
        }
        Some(other) => other,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cuts_fall_on_character_boundaries() {
        assert_eq!(floor_boundary("héllo", 2), 1, "é is two bytes: the cut moves back before it");
        assert_eq!(floor_boundary("héllo", 3), 3);
        assert_eq!(floor_boundary("ab", 10), 2);
        assert_eq!(ellipsize("héllo", 2), "h…");
        assert_eq!(ellipsize("short", 80), "short");
    }
}
