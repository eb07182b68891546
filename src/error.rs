//! The one error type of tooloop. Every variant says when it happens; messages tell a person what to do.
//!
//! Must never: include an API key in any Debug or Display output.

use std::fmt;
use std::time::Duration;

use crate::types::MessageResponse;

/// What kind of API error a response carried, from its HTTP status and `error.type`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum ApiErrorKind {
    /// 400 `invalid_request_error`: the request is wrong; retrying won't help.
    BadRequest,
    /// 401 `authentication_error`: missing or invalid API key.
    Authentication,
    /// 403 `permission_error`.
    PermissionDenied,
    /// 404 `not_found_error`: wrong model name or base URL.
    NotFound,
    /// 413 `request_too_large`.
    RequestTooLarge,
    /// 429 `rate_limit_error`.
    RateLimit,
    /// 529 `overloaded_error` (also an `overloaded_error` event mid-stream).
    Overloaded,
    /// 500 and other 5xx `api_error`.
    InternalServer,
    /// Any other status or error type.
    Other,
}

impl ApiErrorKind {
    /// Classify from an HTTP status and the body's `error.type`. A 4xx status with one meaning wins (OpenAI
    /// sends its generic `invalid_request_error` type with 401, 404 and 429 too); otherwise (5xx, or an
    /// `error` event inside a 200 stream) a known type wins, then the status decides.
    pub fn classify(status: u16, error_type: &str) -> Self {
        match status {
            400 | 422 => return ApiErrorKind::BadRequest,
            401 => return ApiErrorKind::Authentication,
            403 => return ApiErrorKind::PermissionDenied,
            404 => return ApiErrorKind::NotFound,
            413 => return ApiErrorKind::RequestTooLarge,
            429 => return ApiErrorKind::RateLimit,
            _ => {}
        }
        match error_type {
            "invalid_request_error" => return ApiErrorKind::BadRequest,
            "authentication_error" => return ApiErrorKind::Authentication,
            "permission_error" => return ApiErrorKind::PermissionDenied,
            "not_found_error" => return ApiErrorKind::NotFound,
            "request_too_large" => return ApiErrorKind::RequestTooLarge,
            "rate_limit_error" => return ApiErrorKind::RateLimit,
            "overloaded_error" => return ApiErrorKind::Overloaded,
            "api_error" => return ApiErrorKind::InternalServer,
            _ => {}
        }
        match status {
            400 | 422 => ApiErrorKind::BadRequest,
            401 => ApiErrorKind::Authentication,
            403 => ApiErrorKind::PermissionDenied,
            404 => ApiErrorKind::NotFound,
            413 => ApiErrorKind::RequestTooLarge,
            429 => ApiErrorKind::RateLimit,
            529 => ApiErrorKind::Overloaded,
            500..=599 => ApiErrorKind::InternalServer,
            _ => ApiErrorKind::Other,
        }
    }

    /// A stable snake_case name (used by the bindings).
    pub fn as_str(self) -> &'static str {
        match self {
            ApiErrorKind::BadRequest => "bad_request",
            ApiErrorKind::Authentication => "authentication",
            ApiErrorKind::PermissionDenied => "permission_denied",
            ApiErrorKind::NotFound => "not_found",
            ApiErrorKind::RequestTooLarge => "request_too_large",
            ApiErrorKind::RateLimit => "rate_limit",
            ApiErrorKind::Overloaded => "overloaded",
            ApiErrorKind::InternalServer => "internal_server",
            ApiErrorKind::Other => "other",
        }
    }
}

/// An error response from the API (HTTP status ≥ 400, or an `error` event inside a stream).
#[derive(Clone, Debug, PartialEq)]
pub struct ApiError {
    /// The class of error.
    pub kind: ApiErrorKind,
    /// HTTP status (200 for an `error` event that arrived inside a successful stream).
    pub status: u16,
    /// `error.type` from the body (e.g. `overloaded_error`), or empty when the body had none.
    pub error_type: String,
    /// `error.message` from the body, or the raw body text when it was not the API's error JSON.
    pub message: String,
    /// The `request-id` header (Anthropic) or `x-request-id` (OpenAI), for support tickets.
    pub request_id: Option<String>,
    /// What `retry-after-ms` / `retry-after` asked for, if present.
    pub retry_after: Option<Duration>,
    /// A hint for a person (e.g. which environment variable to set), appended to Display.
    pub hint: Option<String>,
}

/// Everything that can go wrong in tooloop.
#[derive(Debug)]
#[non_exhaustive]
pub enum Error {
    /// The API answered with an error (after any retries).
    Api(Box<ApiError>),
    /// The connection could not be made or broke before any content reached the caller
    /// (DNS, refused, reset, TLS), after any retries.
    Connection {
        /// What failed.
        message: String,
    },
    /// A timeout fired: `phase` is `connect`, `idle` (no byte for the idle-read timeout) or `total`.
    Timeout {
        /// Which timeout.
        phase: &'static str,
        /// How long it was.
        after: Duration,
        /// The content received before the timeout, when a stream had started.
        partial: Option<Box<MessageResponse>>,
    },
    /// A stream broke after content had reached the caller (dropped connection, malformed event, or an
    /// `error` event). Not retried, because that would duplicate output; the partial message is kept.
    StreamInterrupted {
        /// Why it broke.
        message: String,
        /// What had arrived before it broke.
        partial: Box<MessageResponse>,
        /// The API error carried by an `error` event, when that is what ended the stream.
        api: Option<Box<ApiError>>,
    },
    /// `cancel()` was called. A run's conversation stays valid.
    Cancelled {
        /// What had streamed in before the cancel, if anything.
        partial: Option<Box<MessageResponse>>,
    },
    /// The run reached `max_turns` (policy `Error`). The conversation is valid; resume to go on.
    MaxTurns {
        /// The cap that was hit.
        turns: u32,
    },
    /// A tool asked to end the run on purpose (a fatal tool error, distinct from a result the model reads).
    ToolAborted {
        /// The tool's name.
        tool: String,
        /// Why.
        message: String,
    },
    /// The response was not valid for the protocol (malformed JSON, a missing field, a bad event).
    InvalidResponse {
        /// What was wrong.
        message: String,
        /// The request id, if the server sent one.
        request_id: Option<String>,
    },
    /// A configuration or argument problem (missing API key, bad tool name, invalid schema, nothing to
    /// resume).
    Config(String),
    /// A run, resume or compaction was started (or the conversation or session changed) while a run is in
    /// progress on the same agent, possibly on another thread or from inside one of its own callbacks. One
    /// run at a time: nothing was changed; [`crate::Agent::cancel`] stops the run in progress.
    Busy,
    /// A tool was registered under a name the agent already has (a built-in, MCP or host tool). The tool
    /// already registered stays; the new one was not added.
    DuplicateTool {
        /// The name both tools have.
        name: String,
    },
    /// A model or callback supplied by the host failed on its own terms: a C model callback returned
    /// non-zero, a host model function returned its own error. The run ends with the conversation valid
    /// (resume to go on). `source` is the host's error, when it has one: a binding downcasts it to give
    /// its host back the very error it raised.
    Host {
        /// What failed, for a person (e.g. "the host model callback returned 3").
        message: String,
        /// The host's own error, if any.
        source: Option<Box<dyn std::error::Error + Send + Sync + 'static>>,
    },
    /// An option given to build an agent ([`crate::options::AgentOptions`]: a Python keyword argument, a C
    /// config key) is unknown or has a value that cannot work; `key` names it (empty when the options as a
    /// whole are not an object). Raised at creation, before any request.
    InvalidOption {
        /// The option's name.
        key: String,
        /// What is wrong and what is expected.
        message: String,
    },
    /// A hook ([`crate::hooks`]) failed: it raised, returned non-zero or answered something invalid. The run
    /// ends; the turn's calls got their results first, so the conversation is valid and can be resumed.
    Hook {
        /// Which hook: `before_tool`, `after_tool`, `before_request` or `on_stop`.
        hook: String,
        /// What went wrong.
        message: String,
    },
    /// The run's final answer was not valid against `output_schema` after the last retry (see
    /// [`crate::output`]). Carries the errors and the last answer; the conversation stays valid.
    OutputValidation(Box<OutputFailure>),
    /// Reading or writing a session file failed.
    Io {
        /// What was being done.
        context: String,
        /// The OS error.
        source: std::io::Error,
    },
}

impl Error {
    /// A short stable name of the variant (used by the bindings and logs).
    pub fn kind_name(&self) -> &'static str {
        match self {
            Error::Api(_) => "api",
            Error::Connection { .. } => "connection",
            Error::Timeout { .. } => "timeout",
            Error::StreamInterrupted { .. } => "stream_interrupted",
            Error::Cancelled { .. } => "cancelled",
            Error::MaxTurns { .. } => "max_turns",
            Error::ToolAborted { .. } => "tool_aborted",
            Error::InvalidResponse { .. } => "invalid_response",
            Error::Config(_) => "config",
            Error::Busy => "busy",
            Error::DuplicateTool { .. } => "duplicate_tool",
            Error::Host { .. } => "host",
            Error::InvalidOption { .. } => "invalid_option",
            Error::Io { .. } => "io",
            Error::Hook { .. } => "hook",
            Error::OutputValidation(_) => "output_validation",
        }
    }

    /// The OpenTelemetry `error.type` of this error (the GenAI conventions: the provider's error code, else
    /// a low-cardinality name): an API error's HTTP status (`429`), else [`Error::kind_name`].
    pub fn error_type(&self) -> String {
        match self.api() {
            Some(api) if api.status > 0 => api.status.to_string(),
            _ => self.kind_name().to_string(),
        }
    }

    /// The API error details, if this is an API error (or a stream ended by an `error` event).
    pub fn api(&self) -> Option<&ApiError> {
        match self {
            Error::Api(e) => Some(e),
            Error::StreamInterrupted { api, .. } => api.as_deref(),
            _ => None,
        }
    }

    /// The partial assistant message carried by a stream that broke, timed out or was cancelled.
    pub fn partial(&self) -> Option<&MessageResponse> {
        match self {
            Error::StreamInterrupted { partial, .. } => Some(partial),
            Error::Timeout { partial, .. } | Error::Cancelled { partial } => partial.as_deref(),
            _ => None,
        }
    }

    /// The request id, when the server sent one.
    pub fn request_id(&self) -> Option<&str> {
        match self {
            Error::InvalidResponse { request_id, .. } => request_id.as_deref(),
            other => other.api().and_then(|a| a.request_id.as_deref()),
        }
    }
}

impl fmt::Display for ApiError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.error_type.is_empty() {
            write!(f, "HTTP {}: {}", self.status, self.message)?;
        } else {
            write!(f, "HTTP {} {}: {}", self.status, self.error_type, self.message)?;
        }
        if let Some(id) = &self.request_id {
            write!(f, " (request-id {id})")?;
        }
        if let Some(h) = &self.hint {
            write!(f, ". {h}")?;
        }
        Ok(())
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Error::Api(e) => write!(f, "API error: {e}"),
            Error::Connection { message } => write!(f, "connection error: {message}"),
            Error::Timeout { phase, after, .. } => {
                write!(f, "timed out ({phase} timeout of {:.1} s)", after.as_secs_f64())
            }
            Error::StreamInterrupted { message, partial, .. } => write!(
                f,
                "stream interrupted after content had arrived ({} blocks kept): {message}",
                partial.content.len()
            ),
            Error::Cancelled { .. } => write!(f, "cancelled"),
            Error::MaxTurns { turns } => {
                write!(f, "stopped after max_turns={turns} model turns; the conversation is intact, resume to continue")
            }
            Error::ToolAborted { tool, message } => write!(f, "tool '{tool}' aborted the run: {message}"),
            Error::InvalidResponse { message, request_id } => {
                write!(f, "invalid response from the API: {message}")?;
                if let Some(id) = request_id {
                    write!(f, " (request-id {id})")?;
                }
                Ok(())
            }
            Error::Config(m) => write!(f, "configuration error: {m}"),
            Error::Busy => {
                write!(f, "the agent is busy: a run is already in progress (one at a time; cancel stops it)")
            }
            Error::DuplicateTool { name } => write!(f, "a tool named '{name}' is already registered"),
            Error::Host { message, .. } => write!(f, "{message}"),
            Error::InvalidOption { key, message } if key.is_empty() => write!(f, "invalid options: {message}"),
            Error::InvalidOption { key, message } => write!(f, "invalid option {key}: {message}"),
            Error::Io { context, source } => write!(f, "{context}: {source}"),
            Error::Hook { hook, message } => write!(f, "the {hook} hook failed: {message}"),
            Error::OutputValidation(o) => write!(
                f,
                "the final answer does not match output_schema after {} attempt{}: {}",
                o.attempts,
                if o.attempts == 1 { "" } else { "s" },
                o.errors.join("; ")
            ),
        }
    }
}

impl std::error::Error for Error {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            Error::Io { source, .. } => Some(source),
            Error::Host { source: Some(source), .. } => Some(source.as_ref()),
            _ => None,
        }
    }
}

/// `Result<T, tooloop::Error>`.
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// Why a run's structured answer was refused after the last retry, with that answer.
#[derive(Clone, Debug, PartialEq, serde::Serialize)]
pub struct OutputFailure {
    /// The validation errors of the last answer.
    pub errors: Vec<String>,
    /// The last answer as JSON, when it parsed.
    pub output: Option<serde_json::Value>,
    /// The last answer as the model wrote it (the text, or the `final_answer` input as JSON).
    pub text: String,
    /// Answers the model gave (the first one and its retries).
    pub attempts: u32,
}

#[cfg(test)]
mod size {
    /// Every `Result` in the crate carries an `Error`: keep it small (ureq keeps its own under 100 bytes),
    /// so the happy path does not move a large value around. Large parts (the API error, a partial message)
    /// are boxed.
    #[test]
    fn the_error_type_stays_under_100_bytes() {
        let size = std::mem::size_of::<super::Error>();
        assert!(size <= 64, "Error is {size} bytes: box the variant that grew");
    }
}
