//! The one table of the models tooloop knows: context window, list price and family, and the one function
//! that turns a request's usage into USD ([`cost_usd`]) — used per turn, per run, for the spend cap, and
//! for a loaded session (summed by [`Conversation::cost_usd`](crate::conversation::Conversation::cost_usd)).
//!
//! A model id is looked up by its name alone: lowercased, after the last `/` (Hugging Face names such as
//! `Qwen/Qwen2.5-Coder-7B`), without a Bedrock region and vendor prefix (`us.anthropic.claude-…-v1:0` is
//! `claude-…`); the longest matching prefix in the table wins. Prices are list prices in USD per million
//! tokens as published when the table was written; an unknown model gives `None`, never a guess.
//!
//! Must never import anything of the crate but [`crate::types`]: every layer prices and sizes through it.

use crate::types::Usage;

/// One row: what a model id starting with `prefix` is.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct ModelInfo {
    /// The id prefix (normalized as the module docs say).
    pub prefix: &'static str,
    /// Context window in tokens (`None`: unknown). Local families are listed at the context their servers
    /// usually run them with (a server's own report or the `context_window` option wins).
    pub context_window: Option<u64>,
    /// List price in USD per million tokens: (input, output). `None`: unknown.
    pub price: Option<(f64, f64)>,
    /// The family: `claude`, `gpt`, `o-series`, `deepseek`, `qwen`, `llama`.
    pub family: &'static str,
}

const fn row(prefix: &'static str, window: u64, price: Option<(f64, f64)>, family: &'static str) -> ModelInfo {
    ModelInfo { prefix, context_window: Some(window), price, family }
}

/// The table. Longest matching prefix wins.
pub const MODELS: &[ModelInfo] = &[
    row("claude-opus-4-5", 200_000, Some((5.0, 25.0)), "claude"),
    row("claude-opus-4", 200_000, Some((15.0, 75.0)), "claude"),
    row("claude-sonnet-4", 200_000, Some((3.0, 15.0)), "claude"),
    row("claude-3-7-sonnet", 200_000, Some((3.0, 15.0)), "claude"),
    row("claude-3-5-sonnet", 200_000, Some((3.0, 15.0)), "claude"),
    row("claude-haiku-4", 200_000, Some((1.0, 5.0)), "claude"),
    row("claude-3-5-haiku", 200_000, Some((0.8, 4.0)), "claude"),
    row("claude", 200_000, None, "claude"),
    row("gpt-4o-mini", 128_000, Some((0.15, 0.6)), "gpt"),
    row("gpt-4o", 128_000, Some((2.5, 10.0)), "gpt"),
    row("gpt-4.1-mini", 1_047_576, Some((0.4, 1.6)), "gpt"),
    row("gpt-4.1", 1_047_576, Some((2.0, 8.0)), "gpt"),
    // OpenAI's reasoning models: list prices from the stored pricing pages (openai-cost's table and
    // SciCode's show_pricing.py for the gpt-5 family; calcis.dev and perunit.ai for o3 after its mid-2025
    // cut and for o4-mini; openai-models for o1), windows from the same pages.
    row("gpt-5-mini", 400_000, Some((0.25, 2.0)), "gpt"),
    row("gpt-5-nano", 400_000, Some((0.05, 0.4)), "gpt"),
    row("gpt-5", 400_000, Some((1.25, 10.0)), "gpt"),
    row("gpt-4-turbo", 128_000, None, "gpt"),
    row("gpt-3.5-turbo", 16_385, None, "gpt"),
    row("o1", 200_000, Some((15.0, 60.0)), "o-series"),
    row("o3", 200_000, Some((2.0, 8.0)), "o-series"),
    row("o4-mini", 200_000, Some((1.1, 4.4)), "o-series"),
    row("deepseek-chat", 128_000, None, "deepseek"),
    row("deepseek-reasoner", 128_000, None, "deepseek"),
    row("qwen2.5-coder", 32_768, None, "qwen"),
    row("qwen3", 32_768, None, "qwen"),
    row("llama3", 8_192, None, "llama"),
    row("llama3.1", 131_072, None, "llama"),
    row("llama3.2", 131_072, None, "llama"),
    row("llama3.3", 131_072, None, "llama"),
];

/// Id prefixes of OpenAI's reasoning models: they take tools together with reasoning only on the Responses
/// API (Chat Completions refuses `reasoning_effort` next to tools for them), so a host that can choose the
/// wire picks `openai-responses` for them (the CLI does, against OpenAI's own endpoint).
pub const RESPONSES_MODELS: &[&str] = &["gpt-5", "o1", "o3", "o4", "codex"];

/// Whether `model` is one of [`RESPONSES_MODELS`] (normalized as the table's ids are).
pub fn prefers_responses(model: &str) -> bool {
    let m = normalize(model);
    RESPONSES_MODELS.iter().any(|p| m.starts_with(p))
}

/// `model` as the table spells it: lowercased, after the last `/`, without a Bedrock region and vendor
/// prefix (`us.anthropic.`, `anthropic.`).
fn normalize(model: &str) -> String {
    let m = model.to_ascii_lowercase();
    let m = m.rsplit('/').next().unwrap_or(&m);
    match m.find("anthropic.") {
        // `anthropic.claude-…` or a region before it (`us.`, `eu.`, `apac.`, `global.`).
        Some(at) if !m[..at].contains(['-', ':']) => m[at + "anthropic.".len()..].to_string(),
        _ => m.to_string(),
    }
}

/// What the table knows of `model` (the row of the longest matching prefix), or `None`.
pub fn lookup(model: &str) -> Option<&'static ModelInfo> {
    let m = normalize(model);
    MODELS.iter().filter(|r| m.starts_with(r.prefix)).max_by_key(|r| r.prefix.len()).or_else(|| {
        // A Claude model behind some other naming scheme ("my-claude-proxy") still has Claude's window.
        MODELS.iter().find(|r| r.prefix == "claude" && m.contains("claude"))
    })
}

/// The context window of a known model, in tokens (`None`: unknown).
pub fn context_window(model: &str) -> Option<u64> {
    lookup(model)?.context_window
}

/// The list prices of `model` in USD per million tokens: (input, output). `None` for models without one.
pub fn price(model: &str) -> Option<(f64, f64)> {
    lookup(model)?.price
}

/// The family of `model` (`claude`, `gpt`, …), when the table knows it.
pub fn family(model: &str) -> Option<&'static str> {
    lookup(model).map(|r| r.family)
}

/// Cost in USD of `usage` on `model`: cache writes at 1.25× and cache reads at 0.1× the input price
/// (Anthropic's rates). `None` for models without a known price. The only place usage becomes money.
pub fn cost_usd(model: &str, usage: &Usage) -> Option<f64> {
    let (input, output) = price(model)?;
    let m = 1_000_000.0;
    let cache_write = usage.cache_creation_input_tokens.unwrap_or(0) as f64;
    let cache_read = usage.cache_read_input_tokens.unwrap_or(0) as f64;
    Some(
        usage.input_tokens as f64 * input / m
            + cache_write * input * 1.25 / m
            + cache_read * input * 0.1 / m
            + usage.output_tokens as f64 * output / m,
    )
}

/// Cost in USD of a request asked of `requested` and answered as `answered` (empty: the server did not say):
/// the higher of the two models' prices, so a server that answers under a name the table does not price (or a
/// cheaper one) never makes a request cheaper than what was asked for. `None` when neither has a price.
pub fn charged_cost_usd(requested: &str, answered: &str, usage: &Usage) -> Option<f64> {
    let asked = cost_usd(requested, usage);
    let said = if answered.is_empty() { None } else { cost_usd(answered, usage) };
    match (asked, said) {
        (Some(a), Some(b)) => Some(a.max(b)),
        (a, b) => a.or(b),
    }
}

/// Estimated cost in USD of a request of `input_tokens` (all priced as uncached input) answered with
/// `output_tokens`, on `model`; what `max_cost_usd` judges a request by before it is sent.
pub fn request_cost_usd(model: &str, input_tokens: u64, output_tokens: u64) -> Option<f64> {
    let usage = Usage { input_tokens, output_tokens, ..Usage::default() };
    cost_usd(model, &usage)
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn longest_prefix_wins_and_unknown_is_none() {
        let u = Usage { input_tokens: 1_000_000, output_tokens: 1_000_000, ..Default::default() };
        assert_eq!(cost_usd("claude-opus-4-5-20251101", &u), Some(30.0));
        assert_eq!(cost_usd("claude-sonnet-4-6", &u), Some(18.0));
        assert_eq!(cost_usd("my-local-llama", &u), None);
        assert_eq!(cost_usd("claude-3-opus-20240229", &u), None, "a Claude without a listed price");
        assert_eq!(request_cost_usd("gpt-4o-mini", 1_000_000, 1_000_000), Some(0.75));
    }

    #[test]
    fn a_request_is_charged_at_the_higher_of_the_asked_and_the_answering_price() {
        let u = Usage { input_tokens: 1_000_000, output_tokens: 1_000_000, ..Default::default() };
        assert_eq!(charged_cost_usd("claude-sonnet-4-6", "claude-mock-1", &u), Some(18.0));
        assert_eq!(charged_cost_usd("claude-sonnet-4-6", "", &u), Some(18.0));
        assert_eq!(charged_cost_usd("claude-haiku-4-5", "claude-opus-4-1", &u), Some(90.0));
        assert_eq!(charged_cost_usd("claude-opus-4-1", "claude-haiku-4-5", &u), Some(90.0));
        assert_eq!(charged_cost_usd("my-model", "gpt-4o-mini", &u), Some(0.75));
        assert_eq!(charged_cost_usd("my-model", "claude-mock-1", &u), None);
    }

    #[test]
    fn windows_of_known_models() {
        assert_eq!(context_window("claude-sonnet-4-6"), Some(200_000));
        assert_eq!(context_window("us.anthropic.claude-sonnet-4-5-20250929-v1:0"), Some(200_000));
        assert_eq!(context_window("gpt-4o-mini"), Some(128_000));
        assert_eq!(context_window("gpt-4.1-mini"), Some(1_047_576));
        assert_eq!(context_window("qwen2.5-coder:7b"), Some(32_768));
        assert_eq!(context_window("Qwen/Qwen2.5-Coder-7B-Instruct"), Some(32_768));
        assert_eq!(context_window("llama3.1:8b"), Some(131_072));
        assert_eq!(context_window("my-claude-proxy"), Some(200_000));
        assert_eq!(context_window("my-finetune"), None);
        assert_eq!(family("o4-mini-2025"), Some("o-series"));
        assert_eq!(context_window("gpt-5-mini-2025-08-07"), Some(400_000));
        assert_eq!(price("gpt-5-mini-2025-08-07"), Some((0.25, 2.0)));
        assert_eq!(price("o3-2025-04-16"), Some((2.0, 8.0)));
        assert!(prefers_responses("o4-mini") && prefers_responses("openai/gpt-5") && !prefers_responses("gpt-4.1"));
    }

    #[test]
    fn bedrock_ids_have_the_price_of_their_claude_model() {
        // The CLI's default Bedrock model had a window but no price: the status bar showed no cost.
        let u = Usage { input_tokens: 1_000_000, output_tokens: 1_000_000, ..Default::default() };
        for id in [
            "us.anthropic.claude-sonnet-4-5-20250929-v1:0",
            "anthropic.claude-sonnet-4-5-20250929-v1:0",
            "eu.anthropic.claude-sonnet-4-20250514-v1:0",
            "global.anthropic.claude-sonnet-4-5-20250929-v1:0",
        ] {
            assert_eq!(price(id), Some((3.0, 15.0)), "{id}");
            assert_eq!(cost_usd(id, &u), Some(18.0), "{id}");
        }
        assert_eq!(price("us.anthropic.claude-opus-4-5-20251101-v1:0"), Some((5.0, 25.0)));
        assert_eq!(price("apac.anthropic.claude-3-5-haiku-20241022-v1:0"), Some((0.8, 4.0)));
    }
}
