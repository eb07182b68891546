//! Every default of an agent's settings, written once: the options' defaults and the `null` branches of
//! their JSON readers ([`crate::options`]), [`AgentConfig::default`](crate::agent::AgentConfig), a child
//! agent's turns ([`crate::subagent`]) and the HTTP client ([`crate::http::HttpConfig`]) all read them here.
//!
//! Must never: import anything of the crate (every layer reads it, from the options down to `http`).

/// Output token cap per model turn.
pub const MAX_TOKENS: u32 = 8192;
/// Cap on model requests per run (a child agent's too, when its type sets none).
pub const MAX_TURNS: u32 = 20;
/// Seconds one whole HTTP request may take, retries excluded.
pub const TIMEOUT_SECS: u64 = 600;
/// Retries of a failed request.
pub const MAX_RETRIES: u32 = 2;
/// Most parallel-safe tools run at once within one turn.
pub const TOOL_CONCURRENCY: usize = 4;
/// Model turns an unfinished todo list may be left alone before a reminder (`planning`).
pub const TODO_REMIND_AFTER: u32 = 3;
/// Fraction of the context window a request may fill before compaction.
pub const COMPACT_THRESHOLD: f64 = 0.8;
/// Automatic compaction.
pub const COMPACTION: bool = true;
/// Prompt caching where the provider takes it.
pub const CACHE: bool = true;
/// Whether the built-in `bash` may use the network.
pub const NETWORK: bool = true;
/// Invalid structured answers sent back to the model before the run fails.
pub const OUTPUT_RETRIES: u32 = 2;
/// The runaway guard, when on: identical calls in a row before it answers instead of the tool.
pub const REPEAT_WARN_AFTER: u32 = 3;
/// The runaway guard, when on: further refused repeats before the run is stopped.
pub const REPEAT_STOP_AFTER: u32 = 2;
/// Seconds a `check` command may run.
pub const CHECK_TIMEOUT_SECS: u64 = 120;
/// The model name of a host model function when none is given.
pub const HOST_MODEL: &str = "host";

/// Whether responses are streamed when the options do not say: a network provider streams; a host model
/// gets the whole reply at once (asking it to "stream" would only confuse it).
pub const fn stream(host: bool) -> bool {
    !host
}
