//! What an MCP server must not bring back to the model: the secrets handed to it, and secrets it shows
//! about itself.
//!
//! - Every value substituted from `${VAR}` into a server's `env` or `headers` (the user's own variables,
//!   expanded when the server starts) is a secret, except a few variables that are plainly not (`HOME`,
//!   `PATH`, …: redacting them would garble every path in every result); so is the whole value of an
//!   `env` entry or header whose name is secret-like (`…_TOKEN`, `Authorization`), and a secret-named
//!   variable substituted anywhere in the configuration (`url`, `args`).
//! - Text a server sends about itself (tool descriptions, instructions) is scanned for `NAME=value`,
//!   `NAME: value` and `"NAME": "value"` where NAME is secret-like: those values are secrets too.
//!
//! The values are handed to the tool registry, which redacts them from every result, and the descriptions
//! and instructions are redacted before they reach the model. Must never: log or print a value.

use std::collections::BTreeSet;

use super::config::McpServerConfig;

/// Variables whose values are not secrets, and too common in paths to redact.
const PLAIN_VARS: [&str; 10] =
    ["HOME", "USER", "LOGNAME", "PATH", "PWD", "SHELL", "LANG", "TERM", "TMPDIR", "HOSTNAME"];

/// Whether a name (of a variable, an env entry or a header) marks its value as a secret.
pub(crate) fn is_secret_key(name: &str) -> bool {
    let n = name.to_ascii_lowercase();
    crate::builtin::is_secret_name(name)
        || n == "authorization"
        || n == "proxy-authorization"
        || n == "cookie"
        || n.contains("auth")
        || n.contains("api-key")
        || n.contains("apikey")
}

fn plain(var: &str) -> bool {
    PLAIN_VARS.contains(&var) || var.starts_with("LC_") || var.starts_with("XDG_")
}

/// The `${VAR}` / `${VAR:-default}` references of `s`: (name, what it expands to).
fn substitutions(s: &str, lookup: &dyn Fn(&str) -> Option<String>) -> Vec<(String, String)> {
    let mut out = Vec::new();
    let mut rest = s;
    while let Some(start) = rest.find("${") {
        let after = &rest[start + 2..];
        let Some(end) = after.find('}') else { break };
        let body = &after[..end];
        let (name, default) = match body.split_once(":-") {
            Some((n, d)) => (n, Some(d)),
            None => (body, None),
        };
        if let Some(v) = lookup(name).or_else(|| default.map(str::to_string)) {
            out.push((name.to_string(), v));
        }
        rest = &after[end + 1..];
    }
    out
}

/// The values of `config` that are secrets once expanded with `lookup` (see the module docs).
pub(crate) fn config_secrets(config: &McpServerConfig, lookup: &dyn Fn(&str) -> Option<String>) -> Vec<String> {
    let mut found = BTreeSet::new();
    for (key, value) in config.env.iter().chain(config.headers.iter()) {
        let subs = substitutions(value, lookup);
        if is_secret_key(key) {
            found.insert(value.clone());
            if let Ok(expanded) = super::config::expand(value, lookup) {
                // "Bearer <token>": the token alone is the secret too.
                for word in expanded.split_whitespace() {
                    found.insert(word.to_string());
                }
                found.insert(expanded);
            }
        }
        for (var, v) in subs {
            if !plain(&var) {
                found.insert(v);
            }
        }
    }
    let mut elsewhere: Vec<&String> = config.args.iter().chain(config.url.iter()).chain(config.cwd.iter()).collect();
    if let Some(c) = &config.command {
        match c {
            super::config::McpCommand::Program(p) => elsewhere.push(p),
            super::config::McpCommand::Argv(v) => elsewhere.extend(v.iter()),
        }
    }
    for s in elsewhere {
        for (var, v) in substitutions(s, lookup) {
            if is_secret_key(&var) {
                found.insert(v);
            }
        }
    }
    found.into_iter().filter(|v| v.len() >= crate::tools::MIN_SECRET_LEN).collect()
}

/// Values that `text` shows under a secret-like name: `NAME=value`, `NAME: value`, `"NAME": "value"`,
/// `Authorization: Bearer value`.
pub(crate) fn named_values(text: &str) -> Vec<String> {
    let bytes = text.as_bytes();
    let word = |b: u8| b.is_ascii_alphanumeric() || b == b'_' || b == b'-';
    let mut out = Vec::new();
    let mut i = 0;
    while i < bytes.len() {
        if !word(bytes[i]) || (i > 0 && word(bytes[i - 1])) {
            i += 1;
            continue;
        }
        let start = i;
        while i < bytes.len() && word(bytes[i]) {
            i += 1;
        }
        let name = &text[start..i];
        let mut j = i;
        if j < bytes.len() && (bytes[j] == b'"' || bytes[j] == b'\'') {
            j += 1;
        }
        while j < bytes.len() && bytes[j] == b' ' {
            j += 1;
        }
        if j >= bytes.len() || !(bytes[j] == b'=' || bytes[j] == b':') || !is_secret_key(name) {
            continue;
        }
        j += 1;
        let take = |j: &mut usize| -> String {
            while *j < bytes.len() && matches!(bytes[*j], b' ' | b'\t' | b'"' | b'\'') {
                *j += 1;
            }
            let s = *j;
            while *j < bytes.len()
                && !bytes[*j].is_ascii_whitespace()
                && !matches!(bytes[*j], b'"' | b'\'' | b',' | b';')
            {
                *j += 1;
            }
            text[s..*j].to_string()
        };
        let mut value = take(&mut j);
        if matches!(value.to_ascii_lowercase().as_str(), "bearer" | "basic" | "token") {
            value = take(&mut j);
        }
        let value = value.trim_end_matches(['.', ')', ']', '}']).to_string();
        if value.len() >= crate::tools::MIN_SECRET_LEN {
            out.push(value);
        }
        i = j.max(i);
    }
    out
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn named_values_are_found_in_prose_json_and_headers() {
        let t = r#"Use DEPLOY_API_KEY=sk-live-0123456789 to deploy. {"github_token": "ghp_abcdefghij"} Authorization: Bearer tok_0123456789. A key: short. name=value-not-secret"#;
        assert_eq!(named_values(t), ["sk-live-0123456789", "ghp_abcdefghij", "tok_0123456789"]);
        assert!(named_values("A key: short. token = ").is_empty());
    }

    #[test]
    fn expanded_values_are_secrets_but_home_is_not() {
        let lookup = |v: &str| match v {
            "MY_VAR" => Some("value-of-my-var".to_string()),
            "GH_TOKEN" => Some("ghp_secret_token".to_string()),
            "HOME" => Some("/home/someone".to_string()),
            _ => None,
        };
        let config: McpServerConfig = serde_json::from_value(serde_json::json!({
            "command": "srv", "args": ["--token=${GH_TOKEN}"],
            "env": {"PLAIN": "${MY_VAR}", "DATA": "${HOME}/data", "API_TOKEN": "literal-secret-1"}
        }))
        .unwrap();
        let found = config_secrets(&config, &lookup);
        assert!(found.contains(&"value-of-my-var".to_string()), "{}", found.len());
        assert!(found.contains(&"ghp_secret_token".to_string()));
        assert!(found.contains(&"literal-secret-1".to_string()));
        assert!(!found.iter().any(|v| v.contains("/home/someone")));
        let http: McpServerConfig = serde_json::from_value(serde_json::json!({
            "url": "http://x/mcp", "headers": {"Authorization": "Bearer ${GH_TOKEN}", "X-Client": "${MY_VAR}"}
        }))
        .unwrap();
        let found = config_secrets(&http, &lookup);
        for v in ["Bearer ghp_secret_token", "ghp_secret_token", "value-of-my-var"] {
            assert!(found.contains(&v.to_string()), "{v}");
        }
    }
}
