//! The agent configuration of the C API: one JSON object, mapped onto the core's `AgentConfig` and
//! `ProviderConfig`. The same keys as the Python `Agent(...)` keyword arguments.
//!
//! Must never: accept a key it does not know (a typo such as `"max_token"` would otherwise be ignored
//! silently), or put the API key in an error message.

use std::path::PathBuf;
use std::time::Duration;

use serde_json::{Value, json};
use tooloop::provider::Secret;
use tooloop::{AgentConfig, MaxTurnsPolicy, Protocol, ProviderConfig};

use crate::ffi::{Failure, FfiResult};
use crate::{TOOLOOP_INVALID_ARGUMENT, TOOLOOP_INVALID_JSON};

/// Every key the config object may hold, in the order the header documents them.
pub(crate) const KEYS: [&str; 20] = [
    "provider",
    "model",
    "system",
    "api_key",
    "base_url",
    "max_tokens",
    "max_turns",
    "thinking",
    "timeout",
    "max_retries",
    "stream",
    "builtin_tools",
    "workspace",
    "session",
    "max_turns_policy",
    "temperature",
    "stop_sequences",
    "tool_choice",
    "headers",
    "extra",
];

/// Which model backend the config asks for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Backend {
    Network(Protocol),
    Host,
}

/// A parsed configuration, ready to build an agent from.
#[derive(Debug)]
pub(crate) struct Parsed {
    pub(crate) agent: AgentConfig,
    pub(crate) provider: ProviderConfig,
    /// `None`: no built-in tools; `Some(empty)`: all of them.
    pub(crate) builtin_tools: Option<Vec<String>>,
    pub(crate) workspace: Option<PathBuf>,
    pub(crate) session: Option<PathBuf>,
}

fn bad(key: &str, expected: &str, got: &Value) -> Failure {
    // Never echo the value of api_key: it is a secret even when it is the wrong type.
    let shown = if key == "api_key" { "(hidden)".to_string() } else { truncate(&got.to_string()) };
    Failure::new(TOOLOOP_INVALID_ARGUMENT, format!("config key \"{key}\" must be {expected}, got {shown}"))
}

fn truncate(s: &str) -> String {
    const MAX: usize = 80;
    if s.len() <= MAX {
        return s.to_string();
    }
    let mut end = MAX;
    while !s.is_char_boundary(end) {
        end -= 1;
    }
    format!("{}…", &s[..end])
}

fn positive_u32(key: &str, v: &Value) -> FfiResult<u32> {
    v.as_u64()
        .filter(|n| *n >= 1 && *n <= u64::from(u32::MAX))
        .map(|n| n as u32)
        .ok_or_else(|| bad(key, "a positive integer", v))
}

fn string(key: &str, v: &Value) -> FfiResult<String> {
    v.as_str().map(str::to_string).ok_or_else(|| bad(key, "a string", v))
}

/// Parse `json`. `host` says the agent gets a host model callback (`tooloop_agent_new_with_model`).
pub(crate) fn parse(json: &str, host: bool) -> FfiResult<Parsed> {
    let value: Value = serde_json::from_str(json)
        .map_err(|e| Failure::new(TOOLOOP_INVALID_JSON, format!("config_json is not valid JSON: {e}")))?;
    let Value::Object(map) = value else {
        return Err(Failure::invalid(format!(
            "config_json must be a JSON object such as {{\"model\": \"claude-sonnet-4-6\"}}, got {}",
            truncate(&value.to_string())
        )));
    };
    for key in map.keys() {
        if !KEYS.contains(&key.as_str()) {
            return Err(Failure::invalid(format!("unknown config key \"{key}\" (known keys: {})", KEYS.join(", "))));
        }
    }
    let get = |k: &str| map.get(k).filter(|v| !v.is_null());

    let backend = match get("provider") {
        None if host => Backend::Host,
        None => Backend::Network(Protocol::Anthropic),
        Some(Value::String(s)) if s == "host" => Backend::Host,
        Some(Value::String(s)) => match Protocol::parse(s) {
            Ok(p) => Backend::Network(p),
            Err(_) => return Err(bad("provider", "\"anthropic\", \"openai\" or \"host\"", &Value::String(s.clone()))),
        },
        Some(other) => return Err(bad("provider", "a string", other)),
    };
    match (backend, host) {
        (Backend::Host, false) => {
            return Err(Failure::invalid(
                "provider \"host\" needs a model callback: create the agent with tooloop_agent_new_with_model",
            ));
        }
        (Backend::Network(_), true) => {
            return Err(Failure::invalid(
                "tooloop_agent_new_with_model uses the host model: leave \"provider\" out or set it to \"host\"",
            ));
        }
        _ => {}
    }

    let mut agent = AgentConfig::default();
    match get("model") {
        Some(v) => agent.model = string("model", v)?,
        None if backend == Backend::Host => agent.model = "host".into(),
        None => {
            return Err(Failure::invalid("config key \"model\" is required, e.g. {\"model\": \"claude-sonnet-4-6\"}"));
        }
    }
    if let Some(v) = get("system") {
        if !(v.is_string() || v.is_array()) {
            return Err(bad("system", "a string or an array of text blocks", v));
        }
        agent.system = Some(v.clone());
    }
    if let Some(v) = get("max_tokens") {
        agent.max_tokens = positive_u32("max_tokens", v)?;
    }
    // max_turns: null means "no cap", so read it from the raw map rather than `get`.
    match map.get("max_turns") {
        Some(Value::Null) => agent.max_turns = None,
        Some(v) => agent.max_turns = Some(positive_u32("max_turns", v)?),
        None => {}
    }
    match get("thinking") {
        None | Some(Value::Bool(false)) => {}
        Some(Value::Object(o)) => agent.thinking = Some(Value::Object(o.clone())),
        Some(v) => {
            let budget = v.as_u64().filter(|n| *n >= 1).ok_or_else(|| {
                bad("thinking", "a budget in tokens (positive integer), a thinking object, false or null", v)
            })?;
            agent.thinking = Some(json!({"type": "enabled", "budget_tokens": budget}));
        }
    }
    if let Some(v) = get("stream") {
        agent.stream = v.as_bool().ok_or_else(|| bad("stream", "true or false", v))?;
    }
    if let Some(v) = get("max_turns_policy") {
        agent.max_turns_policy = match v.as_str() {
            Some("error") => MaxTurnsPolicy::Error,
            Some("return") => MaxTurnsPolicy::Return,
            _ => return Err(bad("max_turns_policy", "\"error\" or \"return\"", v)),
        };
    }
    if let Some(v) = get("temperature") {
        agent.temperature =
            Some(v.as_f64().filter(|t| t.is_finite()).ok_or_else(|| bad("temperature", "a number", v))?);
    }
    if let Some(v) = get("stop_sequences") {
        let items: Option<Vec<String>> =
            v.as_array().and_then(|a| a.iter().map(|i| i.as_str().map(str::to_string)).collect());
        agent.stop_sequences = items.ok_or_else(|| bad("stop_sequences", "an array of strings", v))?;
    }
    if let Some(v) = get("tool_choice") {
        if !v.is_object() {
            return Err(bad("tool_choice", "an object such as {\"type\": \"auto\"}", v));
        }
        agent.tool_choice = Some(v.clone());
    }
    if let Some(v) = get("extra") {
        // Request fields passed through unchanged, so a new API feature never waits for a release.
        agent.extra = v.as_object().cloned().ok_or_else(|| bad("extra", "an object of request fields", v))?;
    }

    let mut provider = ProviderConfig::new(match backend {
        Backend::Network(p) => p,
        Backend::Host => Protocol::Anthropic,
    });
    if let Some(v) = get("api_key") {
        provider.api_key = Some(Secret::new(string("api_key", v)?));
    }
    if let Some(v) = get("base_url") {
        provider.base_url = Some(string("base_url", v)?);
    }
    if let Some(v) = get("timeout") {
        let secs = v.as_f64().filter(|s| s.is_finite() && *s > 0.0 && *s <= 1e9);
        let secs = secs.ok_or_else(|| bad("timeout", "a positive number of seconds", v))?;
        let d = Duration::from_secs_f64(secs);
        provider.http.total_timeout = d;
        provider.http.idle_timeout = provider.http.idle_timeout.min(d);
    }
    if let Some(v) = get("headers") {
        // Extra HTTP headers on every request, e.g. {"anthropic-beta": "a,b"}.
        let pairs: Option<Vec<(String, String)>> =
            v.as_object().and_then(|o| o.iter().map(|(k, x)| x.as_str().map(|x| (k.clone(), x.to_string()))).collect());
        provider.headers = pairs.ok_or_else(|| bad("headers", "an object of string header values", v))?;
    }
    if let Some(v) = get("max_retries") {
        provider.http.max_retries = v
            .as_u64()
            .filter(|n| *n <= 100)
            .map(|n| n as u32)
            .ok_or_else(|| bad("max_retries", "an integer from 0 to 100", v))?;
    }

    let builtin_tools = match get("builtin_tools") {
        None | Some(Value::Bool(false)) => None,
        Some(Value::Bool(true)) => Some(Vec::new()),
        Some(Value::Array(items)) => {
            let names: Option<Vec<String>> = items.iter().map(|i| i.as_str().map(str::to_string)).collect();
            let names =
                names.ok_or_else(|| bad("builtin_tools", "true, false or an array of tool names", &json!(items)))?;
            if names.is_empty() { None } else { Some(names) }
        }
        Some(v) => return Err(bad("builtin_tools", "true, false or an array of tool names", v)),
    };
    let workspace = get("workspace").map(|v| string("workspace", v).map(PathBuf::from)).transpose()?;
    let session = get("session").map(|v| string("session", v).map(PathBuf::from)).transpose()?;
    Ok(Parsed { agent, provider, builtin_tools, workspace, session })
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn unknown_key_is_named() {
        let e = parse(r#"{"model": "m", "max_token": 5}"#, false).unwrap_err();
        assert_eq!(e.status, TOOLOOP_INVALID_ARGUMENT);
        assert!(e.message.contains("\"max_token\""), "{}", e.message);
    }

    #[test]
    fn api_key_value_never_appears_in_errors() {
        let e = parse(r#"{"model": "m", "api_key": 12345}"#, false).unwrap_err();
        assert!(!e.message.contains("12345"), "{}", e.message);
    }

    #[test]
    fn every_key_maps() {
        let p = parse(
            r#"{"provider": "openai", "model": "gpt", "system": "s", "api_key": "k", "base_url": "http://x",
                "max_tokens": 10, "max_turns": null, "thinking": 1024, "timeout": 2.5, "max_retries": 0,
                "stream": false, "builtin_tools": ["read_file"], "workspace": "/tmp", "session": "/tmp/s.jsonl"}"#,
            false,
        )
        .unwrap();
        assert_eq!(p.provider.protocol, Protocol::OpenAi);
        assert_eq!(p.agent.max_tokens, 10);
        assert_eq!(p.agent.max_turns, None);
        assert_eq!(p.agent.thinking, Some(json!({"type": "enabled", "budget_tokens": 1024})));
        assert!(!p.agent.stream);
        assert_eq!(p.provider.http.total_timeout, Duration::from_millis(2500));
        assert_eq!(p.provider.http.max_retries, 0);
        assert_eq!(p.builtin_tools, Some(vec!["read_file".to_string()]));
    }

    #[test]
    fn request_options_headers_and_extra_fields_map() {
        let p = parse(
            r#"{"model": "m", "max_turns_policy": "return", "temperature": 0.2, "stop_sequences": ["END"],
                "tool_choice": {"type": "any"}, "headers": {"anthropic-beta": "b1"}, "extra": {"metadata": {"user_id": "u"}}}"#,
            false,
        )
        .unwrap();
        assert_eq!(p.agent.max_turns_policy, MaxTurnsPolicy::Return);
        assert_eq!(p.agent.temperature, Some(0.2));
        assert_eq!(p.agent.stop_sequences, vec!["END".to_string()]);
        assert_eq!(p.agent.tool_choice, Some(json!({"type": "any"})));
        assert_eq!(p.provider.headers, vec![("anthropic-beta".to_string(), "b1".to_string())]);
        assert_eq!(p.agent.extra.get("metadata"), Some(&json!({"user_id": "u"})));
        for bad_cfg in [
            r#"{"model":"m","headers":{"x":1}}"#,
            r#"{"model":"m","max_turns_policy":"maybe"}"#,
            r#"{"model":"m","stop_sequences":"END"}"#,
            r#"{"model":"m","extra":[1]}"#,
        ] {
            assert_eq!(parse(bad_cfg, false).unwrap_err().status, TOOLOOP_INVALID_ARGUMENT, "{bad_cfg}");
        }
    }
}
