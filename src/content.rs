//! Content blocks from hosts: user input and tool results that carry images and documents (base64 or URL
//! sources) beside text, read from JSON and checked against the provider's size limits before anything is
//! sent, so an over-size picture is a clear error here instead of a 400 (or a 413 after uploading
//! megabytes) from the API.
//!
//! Must never: change a block it accepts (the bytes a host gives are the bytes sent), or accept a block the
//! API is certain to refuse for its size or media type.

use serde_json::Value;

use crate::types::ContentBlock;

/// What one provider accepts per block.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Limits {
    /// The provider's name as the limits' messages say it.
    pub provider: &'static str,
    /// Largest image, decoded bytes.
    pub image_bytes: u64,
    /// Largest document (PDF), decoded bytes.
    pub document_bytes: u64,
}

const MB: u64 = 1024 * 1024;

/// The limits of the provider named `name` ([`crate::Provider::name`]): Anthropic 5 MB per image and 32 MB
/// per PDF (the request limit); Bedrock 3.75 MB per image and 4.5 MB per document; OpenAI 20 MB per image;
/// others (host models) Anthropic's.
pub fn limits(name: &str) -> Limits {
    // The sizes are the provider table's (host models and unknown names: Anthropic's, its first row).
    let row = crate::provider::provider_info(name).unwrap_or(&crate::provider::PROVIDERS[0]);
    Limits { provider: row.label, image_bytes: row.image_bytes, document_bytes: row.document_bytes }
}

/// Image media types the APIs take.
pub const IMAGE_TYPES: [&str; 4] = ["image/jpeg", "image/png", "image/gif", "image/webp"];

/// The media type of an image or document file, from its extension (`None`: not one the APIs take).
pub fn media_type(path: &str) -> Option<&'static str> {
    let ext = path.rsplit_once('.').map(|(_, e)| e.to_ascii_lowercase())?;
    Some(match ext.as_str() {
        "png" => "image/png",
        "jpg" | "jpeg" => "image/jpeg",
        "gif" => "image/gif",
        "webp" => "image/webp",
        "pdf" => "application/pdf",
        "txt" | "md" => "text/plain",
        _ => return None,
    })
}

/// Decoded size of base64 text (padding and line breaks not counted).
pub fn decoded_len(data: &str) -> u64 {
    let n = data.bytes().filter(|b| !b.is_ascii_whitespace() && *b != b'=').count() as u64;
    n * 3 / 4
}

fn size(bytes: u64) -> String {
    if bytes >= MB { format!("{:.2} MB", bytes as f64 / MB as f64) } else { format!("{} KB", bytes.div_ceil(1024)) }
}

/// Read a JSON array of content blocks (`[{"type": "text", "text": ...}, {"type": "image", "source":
/// {"type": "base64", "media_type": "image/png", "data": ...}}, {"type": "document", ...}]`), checking each
/// block's shape. Other block kinds with a `type` pass through unchanged.
pub fn parse_blocks(json: &Value) -> Result<Vec<ContentBlock>, String> {
    let Value::Array(items) = json else {
        return Err("content must be a JSON array of blocks such as [{\"type\": \"text\", \"text\": \"...\"}]".into());
    };
    if items.is_empty() {
        return Err("content is an empty array: give at least one block".into());
    }
    let mut out = Vec::with_capacity(items.len());
    for (i, item) in items.iter().enumerate() {
        let kind = item.get("type").and_then(Value::as_str).ok_or_else(|| format!("block {i} has no \"type\""))?;
        match kind {
            "text" if item.get("text").and_then(Value::as_str).is_none() => {
                return Err(format!("block {i} (text) needs a \"text\" string"));
            }
            "image" | "document" => check_source(item, i, kind)?,
            _ => {}
        }
        out.push(serde_json::from_value(item.clone()).map_err(|e| format!("block {i}: {e}"))?);
    }
    Ok(out)
}

fn check_source(block: &Value, i: usize, kind: &str) -> Result<(), String> {
    let source = block.get("source").ok_or_else(|| format!("block {i} ({kind}) needs a \"source\""))?;
    match source.get("type").and_then(Value::as_str) {
        Some("base64") => {
            let media = source.get("media_type").and_then(Value::as_str).unwrap_or("");
            if source.get("data").and_then(Value::as_str).is_none() {
                return Err(format!("block {i} ({kind}): a base64 source needs \"data\""));
            }
            if kind == "image" && !IMAGE_TYPES.contains(&media) {
                return Err(format!(
                    "block {i} (image): media_type {media:?} is not one the APIs take ({})",
                    IMAGE_TYPES.join(", ")
                ));
            }
            Ok(())
        }
        Some("url") if source.get("url").and_then(Value::as_str).is_some() => Ok(()),
        Some("text" | "content" | "file") => Ok(()),
        _ => Err(format!(
            "block {i} ({kind}): source must be {{\"type\": \"base64\", \"media_type\": ..., \"data\": ...}} or {{\"type\": \"url\", \"url\": ...}}"
        )),
    }
}

/// Check every base64 image and document in `blocks` (and inside their tool results) against `limits`.
pub fn check(blocks: &[ContentBlock], limits: Limits) -> Result<(), String> {
    let mut n = 0;
    for b in blocks {
        match b {
            ContentBlock::Unknown(v) => check_value(v, limits, &mut n)?,
            ContentBlock::ToolResult(r) => check_value(&r.content, limits, &mut n)?,
            _ => {}
        }
    }
    Ok(())
}

/// Check a tool result's content (a string, or an array of blocks) against `limits`.
pub fn check_result(content: &Value, limits: Limits) -> Result<(), String> {
    check_value(content, limits, &mut 0)
}

fn check_value(v: &Value, limits: Limits, n: &mut usize) -> Result<(), String> {
    match v {
        Value::Array(items) => items.iter().try_for_each(|x| check_value(x, limits, n)),
        Value::Object(o) => {
            let kind = o.get("type").and_then(Value::as_str).unwrap_or("");
            if kind != "image" && kind != "document" {
                return Ok(());
            }
            *n += 1;
            let Some(data) = o.get("source").filter(|s| s["type"] == "base64").and_then(|s| s["data"].as_str()) else {
                return Ok(());
            };
            let bytes = decoded_len(data);
            let max = if kind == "image" { limits.image_bytes } else { limits.document_bytes };
            if bytes > max {
                return Err(format!(
                    "{kind} {} is {} ({bytes} bytes), over the {} limit of {} per {kind}; make it smaller before \
                     sending it (nothing was sent)",
                    *n,
                    size(bytes),
                    limits.provider,
                    size(max)
                ));
            }
            Ok(())
        }
        _ => Ok(()),
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use serde_json::json;

    fn image(bytes: usize) -> Value {
        json!({"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": "A".repeat(bytes * 4 / 3)}})
    }

    #[test]
    fn blocks_parse_and_sizes_are_checked_per_provider() {
        let blocks = parse_blocks(&json!([image(4 * 1024 * 1024), {"type": "text", "text": "what is this?"}])).unwrap();
        assert!(check(&blocks, limits("anthropic")).is_ok());
        let e = check(&blocks, limits("bedrock")).unwrap_err();
        assert!(e.contains("image 1 is 4.00 MB") && e.contains("Bedrock limit of 3.75 MB"), "{e}");
        let big = parse_blocks(&json!([image(6 * 1024 * 1024)])).unwrap();
        assert!(check(&big, limits("anthropic")).unwrap_err().contains("Anthropic limit of 5.00 MB"));
        assert!(check(&big, limits("openai")).is_ok());
    }

    #[test]
    fn bad_blocks_are_refused_with_the_reason() {
        for (bad, why) in [
            (json!("text"), "JSON array"),
            (json!([]), "empty"),
            (json!([{"text": "x"}]), "no \"type\""),
            (json!([{"type": "image"}]), "needs a \"source\""),
            (
                json!([{"type": "image", "source": {"type": "base64", "media_type": "image/bmp", "data": ""}}]),
                "image/bmp",
            ),
        ] {
            let e = parse_blocks(&bad).unwrap_err();
            assert!(e.contains(why), "{bad}: {e}");
        }
    }
}
