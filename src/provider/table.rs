//! The one table of the network providers tooloop speaks: name, wire format, the environment variables of
//! the key and the base URL, the default URL and the size limits per block. Every door lists providers from
//! it (Python `tooloop.PROVIDERS`, C `tooloop_providers_json`, the CLI's `--provider` choices), and the core
//! parses names and builds providers from it, so a new provider is one row here and one module.
//!
//! Must never: import anything of the crate above [`crate::provider`].

use super::Protocol;

const MB: u64 = 1024 * 1024;

/// One provider: what its name means on the wire and where its settings come from.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ProviderInfo {
    /// The name every door takes (`provider="..."`, `--provider ...`).
    pub name: &'static str,
    /// The protocol it speaks.
    pub protocol: Protocol,
    /// The wire format, as its docs name it.
    pub wire: &'static str,
    /// The environment variable of the API key (`None`: signs with AWS credentials instead).
    pub key_var: Option<&'static str>,
    /// The environment variable of the base URL (`None`: from the region).
    pub base_url_var: Option<&'static str>,
    /// The official endpoint (`{region}` stands for the AWS region).
    pub default_base_url: &'static str,
    /// The provider's name as error messages say it.
    pub label: &'static str,
    /// Largest image per block, decoded bytes.
    pub image_bytes: u64,
    /// Largest document (PDF) per block, decoded bytes.
    pub document_bytes: u64,
}

/// The table, in the order the doors list it (the default first).
pub const PROVIDERS: &[ProviderInfo] = &[
    ProviderInfo {
        name: "anthropic",
        protocol: Protocol::Anthropic,
        wire: "Anthropic Messages (POST /v1/messages)",
        key_var: Some("ANTHROPIC_API_KEY"),
        base_url_var: Some("ANTHROPIC_BASE_URL"),
        default_base_url: super::anthropic::DEFAULT_BASE_URL,
        label: "Anthropic",
        image_bytes: 5 * MB,
        document_bytes: 32 * MB,
    },
    ProviderInfo {
        name: "openai",
        protocol: Protocol::OpenAi,
        wire: "OpenAI-compatible Chat Completions (POST /v1/chat/completions)",
        key_var: Some("OPENAI_API_KEY"),
        base_url_var: Some("OPENAI_BASE_URL"),
        default_base_url: super::openai::DEFAULT_BASE_URL,
        label: "OpenAI",
        image_bytes: 20 * MB,
        document_bytes: 32 * MB,
    },
    ProviderInfo {
        name: "openai-responses",
        protocol: Protocol::OpenAiResponses,
        wire: "OpenAI Responses (POST /v1/responses)",
        key_var: Some("OPENAI_API_KEY"),
        base_url_var: Some("OPENAI_BASE_URL"),
        default_base_url: super::responses::DEFAULT_BASE_URL,
        label: "OpenAI",
        image_bytes: 20 * MB,
        document_bytes: 32 * MB,
    },
    ProviderInfo {
        name: "bedrock",
        protocol: Protocol::Bedrock,
        wire: "Claude on Amazon Bedrock Runtime (InvokeModel, SigV4)",
        key_var: None,
        base_url_var: None,
        default_base_url: "https://bedrock-runtime.{region}.amazonaws.com",
        label: "Bedrock",
        image_bytes: 3 * MB + 3 * MB / 4,
        document_bytes: 4 * MB + MB / 2,
    },
];

/// Names that mean a row under another name.
const ALIASES: &[(&str, &str)] = &[("openai-compatible", "openai")];

/// The row of the provider named `name` (or an alias of it).
pub fn provider_info(name: &str) -> Option<&'static ProviderInfo> {
    let name = ALIASES.iter().find(|(alias, _)| *alias == name).map_or(name, |(_, to)| *to);
    PROVIDERS.iter().find(|p| p.name == name)
}

/// The row of `protocol`.
pub fn info(protocol: Protocol) -> &'static ProviderInfo {
    // Every protocol has its row (a test checks it); the first row is never reached for a known one.
    PROVIDERS.iter().find(|p| p.protocol == protocol).unwrap_or(&PROVIDERS[0])
}

/// The provider names, quoted and joined for an error message: `"anthropic", "openai", … or "bedrock"`.
pub fn names_for_message() -> String {
    let names: Vec<String> = PROVIDERS.iter().map(|p| format!("\"{}\"", p.name)).collect();
    match names.split_last() {
        Some((last, rest)) if !rest.is_empty() => format!("{} or {last}", rest.join(", ")),
        _ => names.join(""),
    }
}

/// The table as JSON (what the bindings hand out): one object per row, fields as named above.
pub fn to_json() -> serde_json::Value {
    serde_json::Value::Array(
        PROVIDERS
            .iter()
            .map(|p| {
                serde_json::json!({
                    "name": p.name, "wire": p.wire, "key_var": p.key_var, "base_url_var": p.base_url_var,
                    "default_base_url": p.default_base_url, "image_bytes": p.image_bytes,
                    "document_bytes": p.document_bytes,
                })
            })
            .collect(),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_protocol_has_one_row_and_names_parse_back() {
        for p in [Protocol::Anthropic, Protocol::OpenAi, Protocol::OpenAiResponses, Protocol::Bedrock] {
            assert_eq!(PROVIDERS.iter().filter(|r| r.protocol == p).count(), 1, "{p:?}");
            assert_eq!(Protocol::parse(info(p).name).ok(), Some(p));
        }
        assert_eq!(provider_info("openai-compatible").map(|p| p.name), Some("openai"));
        assert!(names_for_message().ends_with("or \"bedrock\""));
    }
}
