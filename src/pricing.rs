//! Rough cost estimates from usage, for status lines. Prices are list prices in USD per million tokens
//! as published when this table was written; unknown models give `None` rather than a guess.

use crate::types::Usage;

/// (model prefix, input, output) in USD per million tokens. Longest matching prefix wins.
const PRICES: &[(&str, f64, f64)] = &[
    ("claude-opus-4-5", 5.0, 25.0),
    ("claude-opus-4", 15.0, 75.0),
    ("claude-sonnet-4", 3.0, 15.0),
    ("claude-3-7-sonnet", 3.0, 15.0),
    ("claude-3-5-sonnet", 3.0, 15.0),
    ("claude-haiku-4", 1.0, 5.0),
    ("claude-3-5-haiku", 0.8, 4.0),
    ("gpt-4o-mini", 0.15, 0.6),
    ("gpt-4o", 2.5, 10.0),
    ("gpt-4.1-mini", 0.4, 1.6),
    ("gpt-4.1", 2.0, 8.0),
];

/// The list prices of `model` in USD per million tokens: (input, output). `None` for models not in the table.
pub fn price(model: &str) -> Option<(f64, f64)> {
    PRICES
        .iter()
        .filter(|(prefix, _, _)| model.starts_with(prefix))
        .max_by_key(|(prefix, _, _)| prefix.len())
        .map(|(_, i, o)| (*i, *o))
}

/// Estimated cost in USD of a request of `input_tokens` (all priced as uncached input) answered with
/// `output_tokens`, on `model`; what `max_cost_usd` judges a request by before it is sent.
pub fn request_cost_usd(model: &str, input_tokens: u64, output_tokens: u64) -> Option<f64> {
    let (i, o) = price(model)?;
    Some((input_tokens as f64 * i + output_tokens as f64 * o) / 1_000_000.0)
}

/// Estimated cost in USD of `usage` on `model`: cache writes at 1.25× and cache reads at 0.1× the input
/// price (Anthropic's rates). `None` for models not in the table.
pub fn estimate_cost_usd(model: &str, usage: &Usage) -> Option<f64> {
    let (_, input, output) =
        PRICES.iter().filter(|(prefix, _, _)| model.starts_with(prefix)).max_by_key(|(prefix, _, _)| prefix.len())?;
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

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn longest_prefix_wins_and_unknown_is_none() {
        let u = Usage { input_tokens: 1_000_000, output_tokens: 1_000_000, ..Default::default() };
        assert_eq!(estimate_cost_usd("claude-opus-4-5-20251101", &u), Some(30.0));
        assert_eq!(estimate_cost_usd("claude-sonnet-4-6", &u), Some(18.0));
        assert_eq!(estimate_cost_usd("my-local-llama", &u), None);
    }
}
