//! The agent configuration of the C API: one JSON object, parsed straight into the core's
//! [`AgentOptions`] — the same keys, defaults and checks as the Python `Agent(...)` keyword arguments.
//!
//! Must never: accept a key it does not know, or put the API key in an error message (the core's options
//! guarantee both; the tests below pin them at this door).

use serde_json::Value;
use tooloop::AgentOptions;
use tooloop::Backend;

use crate::ffi::{Failure, FfiResult};
use crate::status_codes::{TOOLOOP_INVALID_ARGUMENT, TOOLOOP_INVALID_JSON};

/// Parse `json`. `host` says the agent gets a host model callback (`tooloop_agent_new_with_model`).
pub(crate) fn parse(json: &str, host: bool) -> FfiResult<AgentOptions> {
    let value: Value = serde_json::from_str(json)
        .map_err(|e| Failure::new(TOOLOOP_INVALID_JSON, format!("config_json is not valid JSON: {e}")))?;
    if !value.is_object() {
        let shown: String = value.to_string().chars().take(80).collect();
        return Err(Failure::invalid(format!(
            "config_json must be a JSON object such as {{\"model\": \"claude-sonnet-4-6\"}}, got {shown}"
        )));
    }
    let options = AgentOptions::from_value(value).map_err(|e| match e {
        tooloop::Error::InvalidOption { key, message } if key.is_empty() => Failure::invalid(message),
        tooloop::Error::InvalidOption { key, message } => {
            Failure::new(TOOLOOP_INVALID_ARGUMENT, format!("config key \"{key}\": {message}"))
        }
        other => Failure::invalid(other.to_string()),
    })?;
    match (options.provider, host) {
        (Some(Backend::Host), false) => Err(Failure::invalid(
            "provider \"host\" needs a model callback: create the agent with tooloop_agent_new_with_model",
        )),
        (Some(Backend::Network(_)), true) => Err(Failure::invalid(
            "tooloop_agent_new_with_model uses the host model: leave \"provider\" out or set it to \"host\"",
        )),
        (None, false) if options.model.is_none() => {
            Err(Failure::invalid("config key \"model\" is required, e.g. {\"model\": \"claude-sonnet-4-6\"}"))
        }
        _ => Ok(options),
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use std::time::Duration;
    use tooloop::Protocol;

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
    fn syntax_errors_and_wrong_values_have_their_own_statuses() {
        assert_eq!(parse("{", false).unwrap_err().status, TOOLOOP_INVALID_JSON);
        assert_eq!(parse("[1]", false).unwrap_err().status, TOOLOOP_INVALID_ARGUMENT);
        assert_eq!(parse(r#"{"max_tokens": 5}"#, false).unwrap_err().status, TOOLOOP_INVALID_ARGUMENT);
        let e = parse(r#"{"model": "m", "base_url": "not a url"}"#, false).unwrap_err();
        assert!(e.message.contains("\"base_url\""), "{}", e.message);
        assert!(parse(r#"{"provider": "openai"}"#, true).is_err());
        assert!(parse(r#"{"provider": "host", "model": "m"}"#, false).is_err());
        assert!(parse("{}", true).is_ok());
    }

    #[test]
    fn keys_map_onto_the_core_options() {
        let o = parse(
            r#"{"provider": "openai", "model": "gpt", "timeout": 2.5, "max_retries": 0, "thinking": false,
                "builtin_tools": ["read_file"], "headers": {"anthropic-beta": "b1"}}"#,
            false,
        )
        .unwrap();
        let p = o.provider_config();
        assert_eq!(p.protocol, Protocol::OpenAi);
        assert_eq!(p.http.total_timeout, Duration::from_millis(2500));
        assert_eq!(p.http.max_retries, 0);
        assert_eq!(o.thinking, None);
        assert_eq!(o.builtin_tools.names(), Some(vec!["read_file".to_string()]));
    }
}
