//! Claude on Amazon Bedrock Runtime: `InvokeModel` (`POST {base}/model/{modelId}/invoke`, JSON) and
//! `InvokeModelWithResponseStream` (`…/invoke-with-response-stream`, the AWS event-stream binary framing),
//! signed with SigV4 (service `bedrock`).
//!
//! The body is the Messages API body with `anthropic_version: "bedrock-2023-05-31"` and without `model` and
//! `stream` (the model id travels in the path, the operation says whether to stream). Each `chunk` frame of
//! the stream carries `{"bytes": base64}` of one Anthropic stream event, folded by the Anthropic provider's
//! [`MessageAccumulator`]; the request body is built by the same code as the Anthropic provider's. Exception
//! frames (`throttlingException`, `modelStreamErrorException`, …) map onto [`ApiErrorKind`]s, so the retry
//! rules are the Anthropic ones: retried before any content reached the caller, a partial message after.
//!
//! Must never: write, log or show the secret access key, the session token or the access key id (they are
//! [`Secret`]s; errors that echo them are redacted).

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::SystemTime;

use aws_smithy_eventstream::frame::{DecodedFrame, MessageFrameDecoder};
use aws_smithy_types::event_stream::HeaderValue;
use serde_json::{Map, Value};

use super::anthropic::{MessageAccumulator, StreamDecoder, read_json, read_stream, with_object_tool_inputs};
use super::sigv4::{self, SigningKey};
use super::{Provider, Response, Secret, StreamEvent, redact_key};
use crate::cancel::CancelToken;
use crate::error::{ApiError, ApiErrorKind, Error, Result};
use crate::http::{HttpClient, HttpRequest, HttpResponse, header_value};
use crate::types::Request;

/// The `anthropic_version` body field Bedrock wants.
pub const API_VERSION: &str = "bedrock-2023-05-31";

/// Check that `region` names an AWS region (`us-west-2`, `eu-central-1`, `us-gov-west-1`): lowercase letters,
/// digits and `-`, starting with a letter, at most 32 characters. The region becomes part of the endpoint's
/// host name, so anything else (`@evil.example:8443/x`, a `.`, a `/`) could send the signed request and
/// its session token to another host. A workspace `.env` sets `AWS_REGION` too: it is not trusted.
pub fn check_region(region: &str) -> Result<(), String> {
    let ok = !region.is_empty()
        && region.len() <= 32
        && region.starts_with(|c: char| c.is_ascii_lowercase())
        && !region.ends_with('-')
        && region.contains('-')
        && !region.contains("--")
        && region.bytes().all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-');
    if ok {
        Ok(())
    } else {
        let shown: String = region.chars().take(40).collect();
        Err(format!("{shown:?} is not an AWS region: a region looks like us-west-2 (lowercase letters, digits and -)"))
    }
}

/// The official endpoint of `region`.
pub fn default_base_url(region: &str) -> String {
    format!("https://bedrock-runtime.{region}.amazonaws.com")
}

/// The region from `AWS_REGION`, then `AWS_DEFAULT_REGION`.
pub fn region_from_env() -> Option<String> {
    ["AWS_REGION", "AWS_DEFAULT_REGION"]
        .iter()
        .find_map(|k| std::env::var(k).ok().map(|v| v.trim().to_string()).filter(|v| !v.is_empty()))
}

/// AWS credentials: an access key id, its secret, and the session token of temporary credentials. All three
/// are kept as [`Secret`]s: Debug shows none of them.
#[derive(Clone, PartialEq, Eq)]
pub struct AwsCredentials {
    /// `AWS_ACCESS_KEY_ID`.
    pub access_key_id: Secret,
    /// `AWS_SECRET_ACCESS_KEY`.
    pub secret_access_key: Secret,
    /// `AWS_SESSION_TOKEN` (temporary credentials only).
    pub session_token: Option<Secret>,
}

impl std::fmt::Debug for AwsCredentials {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("AwsCredentials")
            .field("access_key_id", &self.access_key_id)
            .field("secret_access_key", &self.secret_access_key)
            .field("session_token", &self.session_token.as_ref().map(|_| "***"))
            .finish()
    }
}

impl AwsCredentials {
    /// Credentials from their three values.
    pub fn new(
        access_key_id: impl Into<String>,
        secret_access_key: impl Into<String>,
        session_token: Option<String>,
    ) -> Self {
        AwsCredentials {
            access_key_id: Secret::new(access_key_id),
            secret_access_key: Secret::new(secret_access_key),
            session_token: session_token.filter(|t| !t.is_empty()).map(Secret::new),
        }
    }

    /// `AWS_ACCESS_KEY_ID` + `AWS_SECRET_ACCESS_KEY` (+ `AWS_SESSION_TOKEN`), when both keys are set.
    pub fn from_env() -> Option<Self> {
        let env = |k: &str| std::env::var(k).ok().map(|v| v.trim().to_string()).filter(|v| !v.is_empty());
        Some(AwsCredentials::new(env("AWS_ACCESS_KEY_ID")?, env("AWS_SECRET_ACCESS_KEY")?, env("AWS_SESSION_TOKEN")))
    }

    /// The `[profile]` section of a shared credentials file (INI: `aws_access_key_id`,
    /// `aws_secret_access_key`, `aws_session_token`). `Ok(None)` when the file or the profile is missing.
    pub fn from_shared_file(path: &Path, profile: &str) -> Result<Option<Self>> {
        let text = match std::fs::read_to_string(path) {
            Ok(t) => t,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
            Err(e) => return Err(Error::Config(format!("cannot read {}: {e}", path.display()))),
        };
        let section = parse_profile(&text, profile)
            .map_err(|(line, why)| Error::Config(format!("{}:{line}: {why}", path.display())))?;
        let Some(keys) = section else { return Ok(None) };
        let get = |k: &str| keys.iter().find(|(name, _)| name == k).map(|(_, v)| v.clone());
        match (get("aws_access_key_id"), get("aws_secret_access_key")) {
            (Some(id), Some(secret)) => Ok(Some(AwsCredentials::new(id, secret, get("aws_session_token")))),
            _ => Err(Error::Config(format!(
                "profile [{profile}] of {} lacks aws_access_key_id or aws_secret_access_key",
                path.display()
            ))),
        }
    }

    /// The default chain: the environment keys, then the shared credentials file
    /// (`AWS_SHARED_CREDENTIALS_FILE`, else `~/.aws/credentials`) at profile `AWS_PROFILE` (else `default`).
    pub fn resolve() -> Result<Self> {
        if let Some(c) = AwsCredentials::from_env() {
            return Ok(c);
        }
        let env = |k: &str| std::env::var(k).ok().filter(|v| !v.trim().is_empty());
        let profile = env("AWS_PROFILE").unwrap_or_else(|| "default".to_string());
        let path = env("AWS_SHARED_CREDENTIALS_FILE")
            .map(PathBuf::from)
            .or_else(|| env("HOME").map(|h| Path::new(&h).join(".aws").join("credentials")));
        if let Some(path) = &path {
            if let Some(c) = AwsCredentials::from_shared_file(path, &profile)? {
                return Ok(c);
            }
        }
        Err(Error::Config(format!(
            "no AWS credentials: set AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY (and AWS_SESSION_TOKEN for \
             temporary credentials), or add a [{profile}] profile to {} (AWS_PROFILE selects another)",
            path.map(|p| p.display().to_string()).unwrap_or_else(|| "~/.aws/credentials".into())
        )))
    }
}

/// `key = value` pairs of one INI section, in file order.
type Pairs = Vec<(String, String)>;

/// The `key = value` pairs of `[profile]` in an INI text (`None` if there is no such section). Strict: a
/// line that is not a section, a pair, a comment (`#`, `;`) or blank is an error naming its line number.
/// Values are not echoed in errors (they are secrets).
fn parse_profile(text: &str, profile: &str) -> std::result::Result<Option<Pairs>, (usize, String)> {
    let mut current: Option<String> = None;
    let mut found: Option<Pairs> = None;
    for (i, raw) in text.lines().enumerate() {
        let line = raw.trim();
        if line.is_empty() || line.starts_with('#') || line.starts_with(';') {
            continue;
        }
        if let Some(name) = line.strip_prefix('[') {
            let Some(name) = name.strip_suffix(']') else {
                return Err((i + 1, "a section header must end with ']'".into()));
            };
            let name = name.trim();
            // The config file spells sections `[profile name]`; accept that spelling here too.
            let name = name.strip_prefix("profile ").map(str::trim).unwrap_or(name).to_string();
            if name == profile && found.is_none() {
                found = Some(Vec::new());
            }
            current = Some(name);
            continue;
        }
        let Some((key, value)) = line.split_once('=') else {
            return Err((i + 1, "expected 'key = value'".into()));
        };
        if current.is_none() {
            return Err((i + 1, "a key before any [section]".into()));
        }
        if current.as_deref() == Some(profile) {
            if let Some(pairs) = found.as_mut() {
                pairs.push((key.trim().to_ascii_lowercase(), value.trim().to_string()));
            }
        }
    }
    Ok(found)
}

/// Where the signing time comes from (injectable, so tests get stable signatures).
pub type Clock = Arc<dyn Fn() -> SystemTime + Send + Sync>;

/// One decoded event-stream frame: its string-valued headers and its payload.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Frame {
    /// Headers with string values (`:message-type`, `:event-type`, `:exception-type`, `:content-type`, …).
    pub headers: Vec<(String, String)>,
    /// The payload bytes.
    pub payload: Vec<u8>,
}

impl Frame {
    /// The value of header `name`.
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers.iter().find(|(k, _)| k == name).map(|(_, v)| v.as_str())
    }
}

/// Incremental decoder of the AWS event-stream framing (prelude with its CRC, headers, payload, message CRC),
/// on the official `aws-smithy-eventstream` frame decoder: bytes in, whole frames out, any chunking.
#[derive(Debug, Default)]
pub struct EventStreamDecoder {
    buf: Vec<u8>,
    inner: MessageFrameDecoder,
}

impl EventStreamDecoder {
    /// An empty decoder.
    pub fn new() -> Self {
        Self::default()
    }

    /// Feed bytes; every frame they complete is pushed to `out`. A bad prelude or message CRC, or a frame
    /// that cannot be parsed, is an error (the stream cannot be resynchronized after it); the frames before
    /// it are in `out` all the same.
    pub fn feed(&mut self, bytes: &[u8], out: &mut Vec<Frame>) -> std::result::Result<(), String> {
        self.buf.extend_from_slice(bytes);
        loop {
            let mut rest: &[u8] = &self.buf;
            let before = rest.len();
            let decoded = self.inner.decode_frame(&mut rest);
            let consumed = before - rest.len();
            self.buf.drain(..consumed);
            match decoded.map_err(|e| format!("corrupt event-stream frame: {e}"))? {
                DecodedFrame::Complete(message) => {
                    let headers = message
                        .headers()
                        .iter()
                        .filter_map(|h| match h.value() {
                            HeaderValue::String(s) => Some((h.name().as_str().to_string(), s.as_str().to_string())),
                            _ => None,
                        })
                        .collect();
                    out.push(Frame { headers, payload: message.payload().to_vec() });
                }
                DecodedFrame::Incomplete => return Ok(()),
            }
        }
    }

    /// Bytes received but not yet part of a complete frame (the decoder may hold a 12-byte prelude besides).
    pub fn pending_bytes(&self) -> usize {
        self.buf.len()
    }
}

impl StreamDecoder for EventStreamDecoder {
    type Unit = Frame;
    fn feed(&mut self, bytes: &[u8], out: &mut Vec<Frame>) -> std::result::Result<(), String> {
        EventStreamDecoder::feed(self, bytes, out)
    }
    /// A frame is whole only with its CRC: nothing comes out at the end of the body.
    fn finish(&mut self) -> Option<Frame> {
        None
    }
    fn ended_message(&self) -> String {
        format!(
            "the event stream ended before message_stop ({} bytes of an unfinished frame pending)",
            self.pending_bytes()
        )
    }
}

/// Claude on Bedrock Runtime.
///
/// # Threads and cloning
/// `Send + Sync`; concurrent `send` calls share the connection pool.
pub struct BedrockProvider {
    http: HttpClient,
    base_url: String,
    region: String,
    credentials: AwsCredentials,
    headers: Vec<(String, String)>,
    clock: Clock,
}

impl std::fmt::Debug for BedrockProvider {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("BedrockProvider")
            .field("base_url", &self.base_url)
            .field("region", &self.region)
            .field("credentials", &self.credentials)
            .finish()
    }
}

impl BedrockProvider {
    /// A provider for `base_url` (the endpoint, e.g. [`default_base_url`]) in `region`. `headers` are added
    /// to every request unsigned, except `anthropic-beta`, whose values go into the body's `anthropic_beta`
    /// (the way Bedrock takes them).
    pub fn new(
        http: HttpClient,
        base_url: String,
        region: String,
        credentials: AwsCredentials,
        headers: Vec<(String, String)>,
    ) -> Self {
        let base_url = base_url.trim_end_matches('/').to_string();
        BedrockProvider { http, base_url, region, credentials, headers, clock: Arc::new(SystemTime::now) }
    }

    /// Sign with times from `clock` instead of the system clock.
    pub fn with_clock(mut self, clock: Clock) -> Self {
        self.clock = clock;
        self
    }

    /// The region requests are signed for.
    pub fn region(&self) -> &str {
        &self.region
    }

    /// The Bedrock body of `request`: the Messages body without `model` and `stream`, with
    /// `anthropic_version` (unless the request sets its own) and `anthropic_beta` from `anthropic-beta` headers.
    pub fn body(&self, request: &Request) -> Result<Value> {
        let sanitized = with_object_tool_inputs(request);
        let mut body = serde_json::to_value(sanitized.as_ref().unwrap_or(request))
            .map_err(|e| Error::Config(format!("request not serializable: {e}")))?;
        let Some(obj) = body.as_object_mut() else {
            return Err(Error::Config("the request did not serialize to an object".into()));
        };
        obj.remove("model");
        obj.remove("stream");
        let mut out = Map::new();
        if !obj.contains_key("anthropic_version") {
            out.insert("anthropic_version".into(), Value::String(API_VERSION.into()));
        }
        let betas: Vec<Value> = self
            .headers
            .iter()
            .filter(|(k, _)| k.eq_ignore_ascii_case("anthropic-beta"))
            .flat_map(|(_, v)| v.split(',').map(|b| Value::String(b.trim().to_string())))
            .filter(|b| b.as_str().is_some_and(|s| !s.is_empty()))
            .collect();
        if !betas.is_empty() && !obj.contains_key("anthropic_beta") {
            out.insert("anthropic_beta".into(), Value::Array(betas));
        }
        out.append(obj);
        Ok(Value::Object(out))
    }

    /// The signed HTTP request for `request` at time `now`.
    fn http_request(&self, request: &Request, now: SystemTime) -> Result<HttpRequest> {
        if request.model.is_empty() {
            return Err(Error::Config("Bedrock needs a model id (or an inference profile id or ARN)".into()));
        }
        let body = serde_json::to_vec(&self.body(request)?)
            .map_err(|e| Error::Config(format!("request not serializable: {e}")))?;
        let op = if request.stream { "invoke-with-response-stream" } else { "invoke" };
        let url = format!("{}/model/{}/{op}", self.base_url, sigv4::uri_encode(&request.model));
        let (host, path) = split_url(&url)?;
        let accept = if request.stream { "application/vnd.amazon.eventstream" } else { "application/json" };
        let signed_headers = vec![
            ("accept".to_string(), accept.to_string()),
            ("content-type".to_string(), "application/json".to_string()),
            ("host".to_string(), host),
        ];
        let key = SigningKey {
            access_key_id: self.credentials.access_key_id.expose(),
            secret_access_key: self.credentials.secret_access_key.expose(),
            session_token: self.credentials.session_token.as_ref().map(Secret::expose),
        };
        let (path, query) = path.split_once('?').unwrap_or((&path, ""));
        let added = sigv4::sign("POST", path, query, &signed_headers, &body, &key, &self.region, "bedrock", now);
        // ureq sends the Host header itself, from the same URL.
        let mut headers: Vec<(String, String)> = signed_headers.into_iter().filter(|(k, _)| k != "host").collect();
        headers.extend(added);
        for (k, v) in &self.headers {
            let k = k.to_ascii_lowercase();
            if k == "anthropic-beta" || headers.iter().any(|(existing, _)| *existing == k) {
                continue; // never let an extra header replace a signed one
            }
            headers.push((k, v.clone()));
        }
        Ok(HttpRequest { url, headers, body })
    }

    /// The secret values this provider holds (secret access key, session token, access key id), for hosts
    /// that redact them from tool output before it reaches the model or a log.
    pub fn secret_values(&self) -> Vec<Secret> {
        let c = &self.credentials;
        [Some(&c.secret_access_key), c.session_token.as_ref(), Some(&c.access_key_id)]
            .into_iter()
            .flatten()
            .cloned()
            .collect()
    }

    fn redact(&self, mut e: ApiError) -> ApiError {
        for s in self.secret_values() {
            e = redact_key(e, Some(&s));
        }
        e
    }
}

/// (`host[:port]` as the Host header carries it, the path and query) of an absolute http(s) URL.
fn split_url(url: &str) -> Result<(String, String)> {
    let bad = || Error::Config(format!("base_url must be an absolute http(s) URL, got {url}"));
    let (scheme, rest) = url.split_once("://").ok_or_else(bad)?;
    let (authority, path) = match rest.find('/') {
        Some(i) => (&rest[..i], &rest[i..]),
        None => (rest, "/"),
    };
    let authority = authority.rsplit('@').next().unwrap_or(authority);
    let default_port = match scheme {
        "https" => ":443",
        "http" => ":80",
        _ => return Err(bad()),
    };
    let host = authority.strip_suffix(default_port).unwrap_or(authority);
    if host.is_empty() {
        return Err(bad());
    }
    Ok((host.to_ascii_lowercase(), path.to_string()))
}

/// An AWS error type (`ThrottlingException`, `throttlingException`, `…Exception:http://…`,
/// `com.amazon…#ValidationException`) and its HTTP status as an [`ApiError`] of the matching kind.
pub(crate) fn aws_error(status: u16, error_type: &str, message: String, request_id: Option<String>) -> ApiError {
    let short = error_type.split(':').next().unwrap_or("");
    let short = short.rsplit('#').next().unwrap_or(short).trim().to_string();
    let kind = match short.to_ascii_lowercase().as_str() {
        "throttlingexception" | "toomanyrequestsexception" => ApiErrorKind::RateLimit,
        "serviceunavailableexception" | "modelnotreadyexception" => ApiErrorKind::Overloaded,
        "internalserverexception" | "modelstreamerrorexception" | "modelerrorexception" => ApiErrorKind::InternalServer,
        "validationexception" => ApiErrorKind::BadRequest,
        "accessdeniedexception" => ApiErrorKind::PermissionDenied,
        "resourcenotfoundexception" => ApiErrorKind::NotFound,
        "unrecognizedclientexception"
        | "invalidsignatureexception"
        | "incompletesignatureexception"
        | "expiredtokenexception"
        | "missingauthenticationtokenexception" => ApiErrorKind::Authentication,
        _ => ApiErrorKind::classify(status, ""),
    };
    let hint = match kind {
        ApiErrorKind::Authentication => Some(
            "Check the AWS credentials: AWS_ACCESS_KEY_ID / AWS_SECRET_ACCESS_KEY (and AWS_SESSION_TOKEN), or \
             AWS_PROFILE and ~/.aws/credentials"
                .to_string(),
        ),
        ApiErrorKind::NotFound => Some("Check the model id (or inference profile id) and the region".to_string()),
        ApiErrorKind::PermissionDenied => {
            Some("Check the IAM policy and that this model is enabled for the account in this region".to_string())
        }
        _ => None,
    };
    ApiError { kind, status, error_type: short, message, request_id, retry_after: None, hint }
}

/// An error response of Bedrock Runtime: `{"message": …}` with the type in `x-amzn-ErrorType` (or `__type`).
fn http_error(status: u16, headers: &[(String, String)], body: &[u8]) -> ApiError {
    let json: Option<Value> = serde_json::from_slice(body).ok();
    let field = |k: &str| json.as_ref().and_then(|j| j.get(k)).and_then(Value::as_str).map(str::to_string);
    let error_type = header_value(headers, "x-amzn-errortype").map(str::to_string).or_else(|| field("__type"));
    let message = field("message").or_else(|| field("Message")).unwrap_or_else(|| {
        let text = String::from_utf8_lossy(&body[..body.len().min(500)]).trim().to_string();
        if text.is_empty() { format!("HTTP status {status} with an empty body") } else { text }
    });
    let mut e = aws_error(status, error_type.as_deref().unwrap_or(""), message, request_id(headers));
    e.retry_after = crate::http::retry_after(headers);
    e
}

fn request_id(headers: &[(String, String)]) -> Option<String> {
    header_value(headers, "x-amzn-requestid").or_else(|| header_value(headers, "request-id")).map(str::to_string)
}

impl Provider for BedrockProvider {
    fn supports_cache(&self) -> bool {
        true
    }

    fn name(&self) -> &str {
        super::Protocol::Bedrock.name()
    }

    fn send(&self, request: &Request, cancel: &CancelToken, on_event: &mut dyn FnMut(StreamEvent)) -> Result<Response> {
        let req = self.http_request(request, (self.clock)())?;
        let on_error = |s: u16, h: &[(String, String)], b: &[u8]| self.redact(http_error(s, h, b));
        self.http.exchange(&req, cancel, &on_error, &mut |resp| {
            let mut emitted = false;
            self.read(resp, on_event, &mut emitted).map_err(|e| super::attempt(e, emitted))
        })
    }

    fn secrets(&self) -> Vec<Secret> {
        self.secret_values()
    }
}

impl BedrockProvider {
    /// Read one 2xx response (a JSON message, or an event stream) into the turn.
    fn read(
        &self,
        mut resp: HttpResponse,
        on_event: &mut dyn FnMut(StreamEvent),
        emitted: &mut bool,
    ) -> Result<Response> {
        let request_id = request_id(&resp.headers);
        let is_stream =
            resp.header("content-type").is_some_and(|c| c.starts_with("application/vnd.amazon.eventstream"));
        if !is_stream {
            return read_json(&mut resp, request_id);
        }
        let apply = |frame: &Frame, acc: &mut MessageAccumulator, emit: &mut dyn FnMut(StreamEvent)| {
            self.apply_frame(frame, acc, emit)
        };
        read_stream(&mut resp, request_id, EventStreamDecoder::new(), apply, on_event, emitted)
    }

    /// One frame: a `chunk` event is one Anthropic stream event (typed events, then the raw one); an
    /// exception or error frame ends the stream as `StreamInterrupted` carrying the API error.
    fn apply_frame(
        &self,
        frame: &Frame,
        acc: &mut MessageAccumulator,
        on_event: &mut dyn FnMut(StreamEvent),
    ) -> Result<()> {
        let interrupted = |acc: &MessageAccumulator, message: String, api: Option<ApiError>| Error::StreamInterrupted {
            message,
            partial: Box::new(acc.snapshot()),
            api: api.map(Box::new),
        };
        let payload: Option<Value> = serde_json::from_slice(&frame.payload).ok();
        let field = |k: &str| payload.as_ref().and_then(|p| p.get(k)).and_then(Value::as_str).map(str::to_string);
        match frame.header(":message-type") {
            Some("event") => {
                if frame.header(":event-type") != Some("chunk") {
                    return Ok(()); // event types newer than this code
                }
                let Some(b64) = field("bytes") else {
                    return Err(interrupted(acc, "a chunk event without \"bytes\"".into(), None));
                };
                let bytes = aws_smithy_types::base64::decode(&b64)
                    .map_err(|e| interrupted(acc, format!("a chunk event whose bytes are not base64: {e}"), None))?;
                let data: Value = serde_json::from_slice(&bytes)
                    .map_err(|e| interrupted(acc, format!("a chunk event that is not JSON: {e}"), None))?;
                let name = data.get("type").and_then(Value::as_str).unwrap_or("message").to_string();
                acc.apply(&name, &data, on_event)?;
                on_event(StreamEvent::Raw { event: name, data });
                Ok(())
            }
            Some(kind @ ("exception" | "error")) => {
                let (error_type, message) = if kind == "exception" {
                    let t = frame.header(":exception-type").unwrap_or("exception").to_string();
                    (t, field("message").or_else(|| field("Message")).unwrap_or_default())
                } else {
                    let t = frame.header(":error-code").unwrap_or("error").to_string();
                    (t, frame.header(":error-message").unwrap_or_default().to_string())
                };
                let api = self.redact(aws_error(200, &error_type, message, None));
                let text = format!("{} mid-stream: {}", api.error_type, api.message);
                Err(interrupted(acc, text, Some(api)))
            }
            _ => Ok(()),
        }
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use aws_smithy_types::event_stream::{Header, Message};

    /// Published examples of the framing (the `event_stream` Hex package's documented encodings of
    /// `{"foo": "bar"}`, without and with a `content-type` string header), and the AWS event-stream test
    /// suite's empty message.
    const EMPTY: [u8; 16] = [0, 0, 0, 16, 0, 0, 0, 0, 0x05, 0xc2, 0x48, 0xeb, 0x7d, 0x98, 0xc8, 0xff];
    const FOO: [u8; 30] = [
        0, 0, 0, 30, 0, 0, 0, 0, 186, 242, 246, 138, 123, 34, 102, 111, 111, 34, 58, 32, 34, 98, 97, 114, 34, 125, 174,
        114, 88, 228,
    ];
    const FOO_CT: [u8; 62] = [
        0, 0, 0, 62, 0, 0, 0, 32, 64, 93, 249, 70, 12, 99, 111, 110, 116, 101, 110, 116, 45, 116, 121, 112, 101, 7, 0,
        16, 97, 112, 112, 108, 105, 99, 97, 116, 105, 111, 110, 47, 106, 115, 111, 110, 123, 34, 102, 111, 111, 34, 58,
        32, 34, 98, 97, 114, 34, 125, 111, 162, 191, 59,
    ];

    fn all_frames(bytes: &[u8]) -> std::result::Result<Vec<Frame>, String> {
        let mut d = EventStreamDecoder::new();
        let mut out = Vec::new();
        d.feed(bytes, &mut out)?;
        assert_eq!(d.pending_bytes(), 0);
        Ok(out)
    }

    #[test]
    fn published_frames_decode() {
        let mut stream = EMPTY.to_vec();
        stream.extend_from_slice(&FOO);
        stream.extend_from_slice(&FOO_CT);
        let frames = all_frames(&stream).unwrap();
        assert_eq!(frames.len(), 3);
        assert_eq!(frames[0], Frame { headers: vec![], payload: vec![] });
        assert_eq!(frames[1].payload, br#"{"foo": "bar"}"#);
        assert_eq!(frames[2].header("content-type"), Some("application/json"));
        assert_eq!(frames[2].payload, br#"{"foo": "bar"}"#);
    }

    #[test]
    fn split_at_every_byte_gives_the_same_frames() {
        let mut stream = FOO_CT.to_vec();
        stream.extend_from_slice(&EMPTY);
        stream.extend_from_slice(&FOO);
        let whole = all_frames(&stream).unwrap();
        for cut in 0..=stream.len() {
            let mut d = EventStreamDecoder::new();
            let mut out = Vec::new();
            d.feed(&stream[..cut], &mut out).unwrap();
            d.feed(&stream[cut..], &mut out).unwrap();
            assert_eq!(out, whole, "split at {cut}");
        }
        // And one byte at a time.
        let mut d = EventStreamDecoder::new();
        let mut out = Vec::new();
        for b in &stream {
            d.feed(std::slice::from_ref(b), &mut out).unwrap();
        }
        assert_eq!(out, whole);
    }

    #[test]
    fn a_bad_message_crc_or_prelude_crc_is_an_error() {
        let mut bad = FOO_CT;
        bad[61] ^= 1; // message CRC
        let e = all_frames(&bad).unwrap_err();
        assert!(e.contains("corrupt event-stream frame"), "{e}");
        let mut bad = FOO_CT;
        bad[9] ^= 1; // prelude CRC
        assert!(all_frames(&bad).is_err());
        let mut bad = FOO_CT;
        bad[50] ^= 1; // a payload byte
        assert!(all_frames(&bad).is_err());
    }

    #[test]
    fn frames_before_a_corrupt_one_are_still_delivered() {
        let mut stream = FOO.to_vec();
        let mut bad = FOO_CT;
        bad[61] ^= 1;
        stream.extend_from_slice(&bad);
        let mut d = EventStreamDecoder::new();
        let mut out = Vec::new();
        assert!(d.feed(&stream, &mut out).is_err());
        assert_eq!(out.len(), 1);
        assert_eq!(out[0].payload, br#"{"foo": "bar"}"#);
    }

    #[test]
    fn frames_written_by_the_official_encoder_round_trip() {
        let msg = Message::new_from_parts(
            vec![
                Header::new(":event-type", HeaderValue::String("chunk".into())),
                Header::new(":message-type", HeaderValue::String("event".into())),
            ],
            &b"{\"bytes\":\"e30=\"}"[..],
        );
        let mut buf = Vec::new();
        aws_smithy_eventstream::frame::write_message_to(&msg, &mut buf).unwrap();
        let frames = all_frames(&buf).unwrap();
        assert_eq!(frames[0].header(":event-type"), Some("chunk"));
        assert_eq!(frames[0].payload, b"{\"bytes\":\"e30=\"}");
    }

    #[test]
    fn shared_credentials_file_profiles() {
        let text = "# comment\n[default]\naws_access_key_id = AKIDDEFAULT\naws_secret_access_key = s1\n\n\
                    [profile work]\n; c\naws_access_key_id=AKIDWORK\naws_secret_access_key=s2\naws_session_token = t2\n";
        let d = parse_profile(text, "default").unwrap().unwrap();
        assert_eq!(
            d,
            vec![("aws_access_key_id".into(), "AKIDDEFAULT".into()), ("aws_secret_access_key".into(), "s1".into())]
        );
        let w = parse_profile(text, "work").unwrap().unwrap();
        assert_eq!(w[2], ("aws_session_token".into(), "t2".into()));
        assert_eq!(parse_profile(text, "nope").unwrap(), None);
        assert_eq!(parse_profile("[a]\nnot a pair\n", "a").unwrap_err().0, 2);
        assert_eq!(parse_profile("key = v\n", "a").unwrap_err().0, 1);
    }

    #[test]
    fn credentials_never_show_in_debug() {
        let c = AwsCredentials::new("AKIDVISIBLE", "SECRETVALUE", Some("TOKENVALUE".into()));
        let shown = format!("{c:?}");
        for s in ["AKIDVISIBLE", "SECRETVALUE", "TOKENVALUE"] {
            assert!(!shown.contains(s), "{shown}");
        }
    }

    #[test]
    fn aws_error_types_map_to_kinds() {
        let k = |t: &str, s: u16| aws_error(s, t, String::new(), None).kind;
        assert_eq!(k("throttlingException", 200), ApiErrorKind::RateLimit);
        assert_eq!(
            k("ThrottlingException:http://internal.amazon.com/coral/com.amazon.bedrock/", 429),
            ApiErrorKind::RateLimit
        );
        assert_eq!(k("modelStreamErrorException", 200), ApiErrorKind::InternalServer);
        assert_eq!(k("internalServerException", 200), ApiErrorKind::InternalServer);
        assert_eq!(k("serviceUnavailableException", 200), ApiErrorKind::Overloaded);
        assert_eq!(k("validationException", 200), ApiErrorKind::BadRequest);
        assert_eq!(k("com.amazon.coral.service#UnrecognizedClientException", 403), ApiErrorKind::Authentication);
        assert_eq!(k("", 503), ApiErrorKind::InternalServer);
    }

    #[test]
    fn url_host_and_path() {
        assert_eq!(
            split_url("https://bedrock-runtime.us-east-1.amazonaws.com:443/model/a%3A0/invoke").unwrap(),
            ("bedrock-runtime.us-east-1.amazonaws.com".into(), "/model/a%3A0/invoke".into())
        );
        assert_eq!(split_url("http://127.0.0.1:8080/x").unwrap(), ("127.0.0.1:8080".into(), "/x".into()));
        assert!(split_url("ftp://x/").is_err());
    }
}
