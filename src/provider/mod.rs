//! Providers: one trait that turns a neutral [`Request`] into a complete assistant turn, streaming events
//! to the caller as they are decoded. Anthropic Messages, Claude on Amazon Bedrock, OpenAI-compatible Chat
//! Completions, OpenAI's Responses API, and a model supplied by the host (a function, or a scripted list of
//! replies). The network ones are listed in [`table::PROVIDERS`].
//!
//! Must never: retry after an event reached the caller, or put the API key in any output.

use std::sync::Arc;

use serde_json::Value;

use crate::cancel::CancelToken;
use crate::error::{ApiError, Error, Result};
use crate::http::{HttpClient, HttpConfig};
use crate::types::{ContentBlock, MessageResponse, Request, Usage};

pub mod anthropic;
pub mod bedrock;
mod body;
pub mod host;
pub mod openai;
pub mod responses;
mod sigv4;
pub mod table;

pub use anthropic::AnthropicProvider;
pub use bedrock::{AwsCredentials, BedrockProvider};
pub use host::{FnProvider, ScriptedProvider};
pub use openai::OpenAiProvider;
pub use responses::ResponsesProvider;
pub use table::{PROVIDERS, ProviderInfo, provider_info};

/// What a provider reports while a response is being produced.
#[derive(Clone, Debug, PartialEq)]
pub enum StreamEvent {
    /// A wire event exactly as received: the SSE event name and its JSON data (ping and unknown events
    /// included). Emitted after the typed events decoded from it. Not emitted for JSON (non-streaming) calls.
    Raw {
        /// The SSE `event:` name (OpenAI chunks: `chunk`).
        event: String,
        /// The parsed `data:` payload.
        data: Value,
    },
    /// A wire event whose data was not parsed into a value: what [`StreamEvent::Raw`] carries, as the JSON
    /// text received. The Anthropic provider's `send_raw` emits its events this way (all but non-text deltas
    /// and error events, which come as `Raw`), so a raw client that only wants the text never builds a value
    /// per event, and one that wants objects builds its own straight from the text.
    RawJson {
        /// The SSE `event:` name.
        event: String,
        /// The `data:` payload, verbatim.
        json: String,
    },
    /// Text arrived for block `index`.
    TextDelta {
        /// Block index.
        index: usize,
        /// The new text.
        text: String,
    },
    /// Thinking text arrived for block `index`.
    ThinkingDelta {
        /// Block index.
        index: usize,
        /// The new thinking text.
        thinking: String,
    },
    /// A tool_use block started.
    ToolUseStart {
        /// Block index.
        index: usize,
        /// The call id.
        id: String,
        /// The tool name.
        name: String,
    },
    /// A fragment of a tool call's JSON input.
    ToolInputDelta {
        /// Block index.
        index: usize,
        /// The fragment (concatenate; parse at block end).
        partial_json: String,
    },
    /// Usage so far (cumulative within this response).
    Usage(Usage),
}

/// A complete response: the assistant turn in the neutral (Messages API) shape, and the provider's own JSON.
#[derive(Clone, Debug, PartialEq)]
pub struct Response {
    /// The assistant turn.
    pub message: MessageResponse,
    /// The provider's own response JSON (for streams, the reassembled final object — equal to what the
    /// non-streaming call returns for the same content).
    pub raw: Value,
    /// The request id header, if any.
    pub request_id: Option<String>,
}

/// A model backend.
///
/// # Threads and cloning
/// Implementations are `Send + Sync`; `send` may run on several threads at once (each call independent).
pub trait Provider: Send + Sync {
    /// A short name for logs and sessions (`anthropic`, `openai`, `host`, `scripted`).
    fn name(&self) -> &str;

    /// Produce one assistant turn for `request`. Events go to `on_event` as they are decoded; the call
    /// returns when the turn is complete, failed, or `cancel` fired.
    fn send(&self, request: &Request, cancel: &CancelToken, on_event: &mut dyn FnMut(StreamEvent)) -> Result<Response>;

    /// Send a request body in the provider's own wire shape and return its response JSON in that shape:
    /// what a raw client (`tooloop.Client`) needs. Stream chunks reach `on_event` as [`StreamEvent::Raw`]
    /// (typed events may come too). The default parses a Messages API body into a [`Request`] and returns
    /// [`Response::raw`]; OpenAI sends a Chat Completions body as given and rebuilds the whole
    /// `chat.completion` (every choice) from a stream.
    fn send_raw(
        &self,
        body: &Value,
        stream: bool,
        cancel: &CancelToken,
        on_event: &mut dyn FnMut(StreamEvent),
    ) -> Result<Value> {
        self.send(&raw_request(body, stream)?, cancel, on_event).map(|r| r.raw)
    }

    /// Whether [`Provider::open_raw_stream`] works here: the caller can then drive a raw stream on its own
    /// thread, a network read at a time, instead of handing [`Provider::send_raw`] to a worker. False by
    /// default.
    fn pulls_raw_streams(&self) -> bool {
        false
    }

    /// Start a streamed raw request (a body in the provider's own shape) and read until the first events
    /// reached `on_event` (within the same retry budget as [`Provider::send_raw`]: nothing is retried after
    /// an event was delivered). Returns the final response JSON if the stream already ended, else the open
    /// stream to pull the rest from with [`RawStream::step`]. The default refuses (see
    /// [`Provider::pulls_raw_streams`]).
    fn open_raw_stream(
        &self,
        body: &Value,
        cancel: &CancelToken,
        on_event: &mut dyn FnMut(StreamEvent),
    ) -> Result<RawOpen> {
        let _ = (body, cancel, on_event);
        Err(Error::Config(format!("the {} provider cannot hand out a pull-based stream", self.name())))
    }

    /// Whether [`Provider::open_stream`] works here: an agent can then read a model turn on its caller's
    /// thread, a network read at a time (see `Agent::start`), instead of in one [`Provider::send`]. False by
    /// default.
    fn pulls_streams(&self) -> bool {
        false
    }

    /// Start `request` as [`Provider::send`] does (the same retries, the same errors before the first event)
    /// and read until the first events reached `on_event`. Returns the whole turn if it already ended (or
    /// was not streamed), else the open stream to pull the rest from with [`TurnStream::step`]. The default
    /// refuses (see [`Provider::pulls_streams`]).
    fn open_stream(
        &self,
        request: &Request,
        cancel: &CancelToken,
        on_event: &mut dyn FnMut(StreamEvent),
    ) -> Result<TurnOpen> {
        let _ = (request, cancel, on_event);
        Err(Error::Config(format!("the {} provider cannot hand out a pull-based stream", self.name())))
    }

    /// The secret values this provider holds (API key; AWS secret key, session token and key id), so a host
    /// can redact them from tool output and logs. Empty by default.
    fn secrets(&self) -> Vec<Secret> {
        Vec::new()
    }

    /// Whether the API takes prompt-caching breakpoints (`cache_control`), which the agent then places
    /// (see [`crate::cache`]). False by default.
    fn supports_cache(&self) -> bool {
        false
    }

    /// Whether the API takes a JSON schema for the final answer in the request (Anthropic
    /// `output_config.format`, OpenAI `response_format`), so structured output needs no final-answer tool
    /// (see [`crate::output`]). False by default.
    fn native_output(&self) -> bool {
        false
    }

    /// The input tokens `request` would carry, counted by the API (Anthropic's `count_tokens` endpoint), or
    /// `None` when this provider has no such endpoint (the agent then estimates). Default `None`.
    fn count_tokens(&self, request: &Request, cancel: &CancelToken) -> Result<Option<u64>> {
        let _ = (request, cancel);
        Ok(None)
    }
}

/// A raw stream the caller drives: each [`RawStream::step`] waits for the next bytes on the calling thread
/// (cancel and the timeouts end the wait within 20 ms, and the thread's poll hook runs, see
/// [`crate::http::with_poll_hook`]) and delivers the events they complete.
///
/// # Threads and cloning
/// `Send`: step it from any thread, one at a time. Dropping it closes the connection.
pub trait RawStream: Send {
    /// Read once; the events completed go to `on_event`. `Some(json)`: the stream is complete and this is
    /// the final response JSON (what [`Provider::send_raw`] returns). An error ends the stream.
    fn step(&mut self, on_event: &mut dyn FnMut(StreamEvent)) -> Result<Option<Value>>;

    /// Read once, keeping only the text: the text of the text deltas completed is appended to `text`, the
    /// other events are dropped (what a host that prints the text as it arrives needs; a stream may then skip
    /// building what it would hand on for each event). Otherwise as [`RawStream::step`].
    fn step_text(&mut self, text: &mut String) -> Result<Option<Value>> {
        self.step(&mut |ev| {
            if let StreamEvent::TextDelta { text: t, .. } = ev {
                text.push_str(&t);
            }
        })
    }
}

/// What [`Provider::open_raw_stream`] gives back.
pub enum RawOpen {
    /// The whole answer arrived already (or it was not a stream): the final response JSON.
    Done(Value),
    /// The stream is under way: pull the rest.
    Open(Box<dyn RawStream>),
}

/// A model turn's stream the caller drives (see [`Provider::open_stream`]): each [`TurnStream::step`] waits
/// for the next bytes on the calling thread, as [`RawStream::step`] does, and delivers the events they
/// complete, as [`Provider::send`] would have.
///
/// # Threads and cloning
/// `Send`: step it from any thread, one at a time. Dropping it closes the connection.
pub trait TurnStream: Send {
    /// Read once; the events completed go to `on_event`. `Some(response)`: the turn is complete (what
    /// [`Provider::send`] returns). An error ends the stream (a cut-off turn's error carries its partial).
    fn step(&mut self, on_event: &mut dyn FnMut(StreamEvent)) -> Result<Option<Response>>;
}

/// What [`Provider::open_stream`] gives back.
pub enum TurnOpen {
    /// The whole turn arrived already (or it was not a stream).
    Done(Box<Response>),
    /// The stream is under way: pull the rest.
    Open(Box<dyn TurnStream>),
}

impl std::fmt::Debug for TurnOpen {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            TurnOpen::Done(r) => f.debug_tuple("Done").field(r).finish(),
            TurnOpen::Open(_) => f.write_str("Open(..)"),
        }
    }
}

impl std::fmt::Debug for RawOpen {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            RawOpen::Done(v) => f.debug_tuple("Done").field(v).finish(),
            RawOpen::Open(_) => f.write_str("Open(..)"),
        }
    }
}

/// A Messages API request body (what a raw client sends) as a [`Request`], streaming or not.
pub(crate) fn raw_request(body: &Value, stream: bool) -> Result<Request> {
    if !body.is_object() {
        return Err(Error::Config("the request must be an object (a Messages API request body)".into()));
    }
    let mut request: Request =
        serde_json::from_value(body.clone()).map_err(|e| Error::Config(format!("invalid request: {e}")))?;
    request.stream = stream;
    Ok(request)
}

/// Which wire protocol a [`ProviderConfig`] speaks.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Protocol {
    /// Anthropic Messages API.
    Anthropic,
    /// OpenAI-compatible Chat Completions.
    OpenAi,
    /// OpenAI's Responses API (see [`responses`]).
    OpenAiResponses,
    /// Claude on Amazon Bedrock Runtime (SigV4, AWS credentials; see [`bedrock`]).
    Bedrock,
}

impl Protocol {
    /// Parse a provider name of [`table::PROVIDERS`] (`anthropic`, `openai`, `openai-responses`, `bedrock`).
    pub fn parse(s: &str) -> Result<Self> {
        table::provider_info(s)
            .map(|p| p.protocol)
            .ok_or_else(|| Error::Config(format!("unknown provider '{s}': use {}", table::names_for_message())))
    }

    /// The provider's name (its row of [`table::PROVIDERS`]).
    pub fn name(self) -> &'static str {
        table::info(self).name
    }
}

/// A secret string (an API key): never shown by Debug or Display.
#[derive(Clone, PartialEq, Eq)]
pub struct Secret(String);

impl Secret {
    /// Wrap a key.
    pub fn new(s: impl Into<String>) -> Self {
        Secret(s.into())
    }
    /// The key itself, for the one place that needs it (the request header).
    pub fn expose(&self) -> &str {
        &self.0
    }
}

impl std::fmt::Debug for Secret {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Secret(***)")
    }
}

/// Emit the typed events a stream of `message` would have produced: what a provider that answered in one
/// piece (a JSON response, a host model) reports, so hosts see the same events whichever way it came.
pub fn emit_message_events(message: &MessageResponse, on_event: &mut dyn FnMut(StreamEvent)) {
    for (index, block) in message.content.iter().enumerate() {
        match block {
            ContentBlock::Text(t) => on_event(StreamEvent::TextDelta { index, text: t.text.clone() }),
            ContentBlock::Thinking(t) => on_event(StreamEvent::ThinkingDelta { index, thinking: t.thinking.clone() }),
            ContentBlock::ToolUse(t) => {
                on_event(StreamEvent::ToolUseStart { index, id: t.id.clone(), name: t.name.clone() });
                on_event(StreamEvent::ToolInputDelta { index, partial_json: t.input.to_string() });
            }
            _ => {}
        }
    }
    on_event(StreamEvent::Usage(message.usage.clone()));
}

/// Everything needed to build a network provider. Missing `api_key` / `base_url` fall back to the
/// environment variables of the protocol's row of [`table::PROVIDERS`]: `ANTHROPIC_API_KEY` /
/// `ANTHROPIC_BASE_URL`, or `OPENAI_API_KEY` / `OPENAI_BASE_URL` (Chat Completions and Responses alike).
/// Bedrock uses `region` (else `AWS_REGION` / `AWS_DEFAULT_REGION`) and `aws_credentials` (else the
/// environment keys, then the shared credentials file; see [`AwsCredentials::resolve`]); `api_key` is unused.
#[derive(Clone, Debug)]
pub struct ProviderConfig {
    /// Which protocol.
    pub protocol: Protocol,
    /// The API key (env fallback).
    pub api_key: Option<Secret>,
    /// Base URL (env fallback, then the official endpoint).
    pub base_url: Option<String>,
    /// Extra headers on every request (e.g. `anthropic-beta`).
    pub headers: Vec<(String, String)>,
    /// Timeouts and retries.
    pub http: HttpConfig,
    /// Bedrock: the AWS region (env fallback).
    pub region: Option<String>,
    /// Bedrock: explicit AWS credentials (default chain when `None`).
    pub aws_credentials: Option<AwsCredentials>,
}

impl ProviderConfig {
    /// A config for `protocol` with defaults everywhere.
    pub fn new(protocol: Protocol) -> Self {
        ProviderConfig {
            protocol,
            api_key: None,
            base_url: None,
            headers: Vec::new(),
            http: HttpConfig::default(),
            region: None,
            aws_credentials: None,
        }
    }

    /// Build the provider. Fails with a message naming the environment variable when no key is available
    /// for the official endpoint (a custom base URL, e.g. a local server, may need none).
    pub fn build(&self) -> Result<Arc<dyn Provider>> {
        if self.protocol == Protocol::Bedrock {
            return Ok(Arc::new(self.build_bedrock()?));
        }
        let row = table::info(self.protocol);
        let (key_var, default_url) = (row.key_var.unwrap_or_default(), row.default_base_url);
        let env = |k: Option<&str>| k.and_then(|k| std::env::var(k).ok()).filter(|v| !v.trim().is_empty());
        let api_key = self.api_key.clone().or_else(|| env(row.key_var).map(Secret::new));
        let base_url =
            self.base_url.clone().or_else(|| env(row.base_url_var)).unwrap_or_else(|| default_url.to_string());
        let base_url = base_url.trim_end_matches('/').to_string();
        crate::http::check_base_url(&base_url).map_err(|m| Error::Config(format!("base URL {m}")))?;
        for (name, value) in &self.headers {
            crate::http::check_header(name, value).map_err(Error::Config)?;
        }
        if api_key.is_none() && base_url == default_url {
            return Err(Error::Config(format!(
                "no API key: set {key_var} (or pass api_key), or point base_url at a local server"
            )));
        }
        let http = HttpClient::new(self.http.clone());
        Ok(match self.protocol {
            Protocol::Anthropic => Arc::new(AnthropicProvider::new(http, base_url, api_key, self.headers.clone())),
            Protocol::OpenAiResponses => {
                Arc::new(ResponsesProvider::new(http, base_url, api_key, self.headers.clone()))
            }
            Protocol::OpenAi | Protocol::Bedrock => {
                Arc::new(OpenAiProvider::new(http, base_url, api_key, self.headers.clone()))
            }
        })
    }

    /// Build a [`BedrockProvider`]: region and credentials from the config, else from the environment
    /// (and the shared credentials file). Fails with a message naming what to set.
    pub fn build_bedrock(&self) -> Result<BedrockProvider> {
        let region =
            self.region.clone().filter(|r| !r.trim().is_empty()).or_else(bedrock::region_from_env).ok_or_else(
                || {
                    Error::Config(
                        "no AWS region for Bedrock: set AWS_REGION (or AWS_DEFAULT_REGION), or pass region".into(),
                    )
                },
            )?;
        bedrock::check_region(&region).map_err(Error::Config)?;
        let credentials = match &self.aws_credentials {
            Some(c) => c.clone(),
            None => AwsCredentials::resolve()?,
        };
        let base_url = self.base_url.clone().unwrap_or_else(|| bedrock::default_base_url(&region));
        let http = HttpClient::new(self.http.clone());
        Ok(BedrockProvider::new(http, base_url, region, credentials, self.headers.clone()))
    }
}

/// Hide the API key in an error message that echoes it (some proxies and compatible servers repeat the
/// key they rejected), so it never reaches Display, Debug or logs.
pub(crate) fn redact_key(mut e: ApiError, key: Option<&Secret>) -> ApiError {
    // A key this short cannot be told apart from ordinary text; real keys are far longer.
    if let Some(k) = key.map(Secret::expose).filter(|k| k.len() >= 4) {
        if e.message.contains(k) {
            e.message = e.message.replace(k, "***");
        }
    }
    e
}

/// Add the configured `extra` headers (names lowercased) to a request's `headers`, each replacing a default of
/// the same name: sending both would make the server see "a, b".
pub(crate) fn override_headers(headers: &mut Vec<(String, String)>, extra: &[(String, String)]) {
    for (k, v) in extra {
        let k = k.to_ascii_lowercase();
        headers.retain(|(existing, _)| *existing != k);
        headers.push((k, v.clone()));
    }
}

/// Classify a failure while reading a 2xx response: transient ones (a broken connection, a timeout, an
/// overload/rate-limit/server `error` event) are retried only when no event reached the caller yet.
pub(crate) fn attempt(e: Error, emitted: bool) -> crate::http::Attempt {
    use crate::error::ApiErrorKind;
    use crate::http::Attempt;
    let transient = match &e {
        Error::Connection { .. } | Error::Timeout { .. } => true,
        Error::Api(a) => {
            matches!(a.kind, ApiErrorKind::Overloaded | ApiErrorKind::RateLimit | ApiErrorKind::InternalServer)
        }
        _ => false,
    };
    if transient && !emitted { Attempt::Retry(e) } else { Attempt::Fail(e) }
}

/// Turn a body read failure into the right error: before any event reached the caller a broken body is a
/// `Connection` error (which [`attempt`] lets the HTTP layer retry); after, it is a `StreamInterrupted`
/// carrying the partial message. Timeouts and cancels keep the partial when one exists.
pub(crate) fn body_error(e: crate::http::BodyError, partial: MessageResponse, emitted: bool) -> Error {
    use crate::http::BodyError;
    match e {
        BodyError::Cancelled => Error::Cancelled { partial: Some(Box::new(partial)) },
        BodyError::Timeout(phase, after) => {
            Error::Timeout { phase, after, partial: emitted.then(|| Box::new(partial)) }
        }
        BodyError::Broken(message) => cut_short(message, partial, emitted, |message| Error::Connection { message }),
    }
}

/// A stream that stopped short with `message`: after an event reached the caller, `StreamInterrupted`
/// carrying the partial message; before, `before(message)` (a body that ended early is a `Connection` error,
/// which [`attempt`] lets the HTTP layer retry; bytes that do not decode are an `InvalidResponse`).
pub(crate) fn cut_short(
    message: String,
    partial: MessageResponse,
    emitted: bool,
    before: impl FnOnce(String) -> Error,
) -> Error {
    if emitted { Error::StreamInterrupted { message, partial: Box::new(partial), api: None } } else { before(message) }
}
