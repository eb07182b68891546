//! The Anthropic Messages API: `POST {base}/v1/messages`, JSON and SSE.
//!
//! Both paths produce the same [`MessageResponse`] for the same content: the stream is folded by
//! [`MessageAccumulator`], which is public so hosts can fold streams they read themselves.

use serde::Deserialize;
use serde_json::{Map, Value};

use super::{Provider, RawOpen, RawStream, Response, Secret, StreamEvent, TurnOpen, body_error, cut_short, redact_key};
use crate::cancel::CancelToken;
use crate::error::{ApiError, ApiErrorKind, Error, Result};
use crate::http::{HttpClient, HttpRequest, HttpResponse, parse_api_error};
use crate::sse::{SseDecoder, SseEvent};
use crate::types::{ContentBlock, MessageResponse, Request, StopReason};

/// The official endpoint.
pub const DEFAULT_BASE_URL: &str = "https://api.anthropic.com";
/// The `anthropic-version` header value.
pub const API_VERSION: &str = "2023-06-01";

/// Anthropic Messages API provider.
///
/// # Threads and cloning
/// `Send + Sync`; concurrent `send` calls share the connection pool.
pub struct AnthropicProvider {
    http: HttpClient,
    base_url: String,
    api_key: Option<Secret>,
    headers: Vec<(String, String)>,
    /// The last request's messages as JSON, so a turn serializes only what is new.
    bodies: super::body::BodyCache,
}

impl std::fmt::Debug for AnthropicProvider {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("AnthropicProvider").field("base_url", &self.base_url).field("api_key", &self.api_key).finish()
    }
}

impl AnthropicProvider {
    /// A provider for `base_url` (without `/v1`). `headers` are added to every request (e.g. `anthropic-beta`).
    pub fn new(http: HttpClient, base_url: String, api_key: Option<Secret>, headers: Vec<(String, String)>) -> Self {
        AnthropicProvider { http, base_url, api_key, headers, bodies: Default::default() }
    }

    /// `cached`: serialize through the cache of the last request's messages (an agent's requests, which
    /// share them), not for a raw client's request, which is parsed afresh and shares nothing.
    fn http_request(&self, request: &Request, cached: bool) -> Result<HttpRequest> {
        let sanitized = with_object_tool_inputs(request);
        let request = sanitized.as_ref().unwrap_or(request);
        let body = if cached { self.bodies.to_vec(request).map(|(b, _)| b) } else { serde_json::to_vec(request) }
            .map_err(|e| Error::Config(format!("request not serializable: {e}")))?;
        let mut headers = vec![
            ("content-type".to_string(), "application/json".to_string()),
            ("anthropic-version".to_string(), API_VERSION.to_string()),
            ("accept".to_string(), if request.stream { "text/event-stream" } else { "application/json" }.to_string()),
        ];
        if let Some(key) = &self.api_key {
            headers.push(("x-api-key".to_string(), key.expose().to_string()));
        }
        super::override_headers(&mut headers, &self.headers);
        Ok(HttpRequest { url: format!("{}/v1/messages", self.base_url), headers, body })
    }
}

/// The Messages API body this provider sends for `request` (what [`crate::carry`]'s property test checks
/// against the API's rules).
pub fn render_request(request: &Request) -> Value {
    let sanitized = with_object_tool_inputs(request);
    serde_json::to_value(sanitized.as_ref().unwrap_or(request)).unwrap_or(Value::Null)
}

/// The Messages API takes only objects as `tool_use.input`. A call cut off by max_tokens (or one whose JSON
/// never parsed) holds the raw string; it was never run, and its error result explains why, so `{}` stands
/// in for it on this wire. Returns `None` (no copy) when every input is already an object.
pub(crate) fn with_object_tool_inputs(request: &Request) -> Option<Request> {
    let bad = |b: &ContentBlock| matches!(b, ContentBlock::ToolUse(t) if !t.input.is_object());
    if !request.messages.iter().any(|m| m.content.iter().any(bad)) {
        return None;
    }
    let mut copy = request.clone();
    // Only the messages holding such a call are copied; the others stay shared.
    for i in 0..copy.messages.len() {
        if !copy.messages[i].content.iter().any(bad) {
            continue;
        }
        for block in copy.messages[i].content.iter_mut() {
            if let ContentBlock::ToolUse(t) = block {
                if !t.input.is_object() {
                    t.input = Value::Object(Map::new());
                }
            }
        }
    }
    Some(copy)
}

/// Adds the "which variable to set" hint to errors a person fixes in their environment.
pub(crate) fn api_error_with_hint(status: u16, headers: &[(String, String)], body: &[u8], key_var: &str) -> ApiError {
    let mut e = parse_api_error(status, headers, body);
    e.hint = match e.kind {
        ApiErrorKind::Authentication => Some(format!("Check the API key: set {key_var} or pass api_key")),
        ApiErrorKind::NotFound => Some("Check the model name and the base URL".to_string()),
        ApiErrorKind::PermissionDenied => Some("This key is not allowed to use this model or feature".to_string()),
        _ => None,
    };
    e
}

impl Provider for AnthropicProvider {
    fn supports_cache(&self) -> bool {
        true
    }

    fn native_output(&self) -> bool {
        true
    }

    fn name(&self) -> &str {
        super::Protocol::Anthropic.name()
    }

    fn secrets(&self) -> Vec<Secret> {
        self.api_key.iter().cloned().collect()
    }

    fn count_tokens(&self, request: &Request, cancel: &CancelToken) -> Result<Option<u64>> {
        let mut req = self.http_request(request, true)?;
        // The endpoint takes the prompt fields only (no max_tokens, stream, sampling).
        let body: Value = serde_json::from_slice(&req.body).map_err(|e| Error::Config(e.to_string()))?;
        let keep = ["model", "messages", "system", "tools", "tool_choice", "thinking"];
        let prompt: Map<String, Value> = body
            .as_object()
            .into_iter()
            .flatten()
            .filter(|(k, _)| keep.contains(&k.as_str()))
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect();
        req.body = serde_json::to_vec(&prompt).map_err(|e| Error::Config(e.to_string()))?;
        req.url = format!("{}/v1/messages/count_tokens", self.base_url);
        for h in req.headers.iter_mut().filter(|(k, _)| k == "accept") {
            h.1 = "application/json".to_string();
        }
        let on_error = |s: u16, h: &[(String, String)], b: &[u8]| {
            redact_key(api_error_with_hint(s, h, b, "ANTHROPIC_API_KEY"), self.api_key.as_ref())
        };
        let counted = self.http.exchange(&req, cancel, &on_error, &mut |mut resp| {
            let body =
                resp.read_all().map_err(|e| super::attempt(body_error(e, MessageResponse::default(), false), false))?;
            let v: Value = serde_json::from_slice(&body).map_err(|e| {
                crate::http::Attempt::Fail(Error::InvalidResponse {
                    message: format!("count_tokens answer is not JSON: {e}"),
                    request_id: None,
                })
            })?;
            v.get("input_tokens").and_then(Value::as_u64).ok_or_else(|| {
                crate::http::Attempt::Fail(Error::InvalidResponse {
                    message: format!(
                        "count_tokens answer has no input_tokens: {}",
                        String::from_utf8_lossy(&body[..body.len().min(200)])
                    ),
                    request_id: None,
                })
            })
        });
        match counted {
            Ok(n) => Ok(Some(n)),
            // A compatible server without the endpoint: the agent estimates instead.
            Err(Error::Api(a)) if matches!(a.status, 404 | 405 | 501) => Ok(None),
            Err(e) => Err(e),
        }
    }

    fn send(&self, request: &Request, cancel: &CancelToken, on_event: &mut dyn FnMut(StreamEvent)) -> Result<Response> {
        self.send_with(request, cancel, on_event, false)
    }

    /// Like the default, with events reported as [`StreamEvent::RawJson`] (their text) instead of
    /// [`StreamEvent::Raw`] (see [`MessageAccumulator::apply_sse_lazy`]): a raw client builds no value per event.
    fn send_raw(
        &self,
        body: &Value,
        stream: bool,
        cancel: &CancelToken,
        on_event: &mut dyn FnMut(StreamEvent),
    ) -> Result<Value> {
        self.send_with(&super::raw_request(body, stream)?, cancel, on_event, true).map(|r| r.raw)
    }

    fn pulls_raw_streams(&self) -> bool {
        true
    }

    /// The exchange of [`Provider::send_raw`] (retries included) up to the first delivered events; the rest
    /// is read by the caller through the returned [`RawStream`].
    fn open_raw_stream(
        &self,
        body: &Value,
        cancel: &CancelToken,
        on_event: &mut dyn FnMut(StreamEvent),
    ) -> Result<RawOpen> {
        let req = self.http_request(&super::raw_request(body, true)?, false)?;
        Ok(match self.open_with(&req, cancel, on_event, apply_lazy)? {
            Opened::Done(r) => RawOpen::Done(r.raw),
            Opened::Open(s) => RawOpen::Open(s),
        })
    }

    fn pulls_streams(&self) -> bool {
        true
    }

    /// The exchange of [`Provider::send`] (retries included) up to the first delivered events; the rest is
    /// read by the caller through the returned [`TurnStream`].
    fn open_stream(
        &self,
        request: &Request,
        cancel: &CancelToken,
        on_event: &mut dyn FnMut(StreamEvent),
    ) -> Result<TurnOpen> {
        let req = self.http_request(request, true)?;
        Ok(match self.open_with(&req, cancel, on_event, apply_full)? {
            Opened::Done(r) => TurnOpen::Done(r),
            Opened::Open(s) => TurnOpen::Open(s),
        })
    }
}

impl AnthropicProvider {
    /// Send `req` and read its answer until the first events reached `on_event` (within the retry budget of
    /// [`HttpClient::exchange`]), each stream event folded by `apply`: the whole answer, or the stream to pull.
    fn open_with(
        &self,
        req: &HttpRequest,
        cancel: &CancelToken,
        on_event: &mut dyn FnMut(StreamEvent),
        apply: SseApply,
    ) -> Result<Opened> {
        let on_error = |s: u16, h: &[(String, String)], b: &[u8]| {
            redact_key(api_error_with_hint(s, h, b, "ANTHROPIC_API_KEY"), self.api_key.as_ref())
        };
        self.http.exchange(req, cancel, &on_error, &mut |mut resp| {
            let request_id = resp.header("request-id").map(str::to_string);
            if !resp.header("content-type").is_some_and(|c| c.starts_with("text/event-stream")) {
                return read_json(&mut resp, request_id)
                    .map(|r| Opened::Done(Box::new(r)))
                    .map_err(|e| super::attempt(e, false));
            }
            let mut reader = StreamReader::new(request_id, SseDecoder::new(), apply);
            loop {
                match reader.step(&mut resp, on_event) {
                    Ok(Some(done)) => return Ok(Opened::Done(Box::new(done))),
                    Ok(None) if reader.emitted => return Ok(Opened::Open(Box::new(PulledSse { resp, reader }))),
                    Ok(None) => {}
                    Err(e) => return Err(super::attempt(e, reader.emitted)),
                }
            }
        })
    }
}

/// What [`AnthropicProvider::open_with`] gives back: the stream itself serves as a raw or a turn stream.
enum Opened {
    Done(Box<Response>),
    Open(Box<PulledSse>),
}

/// How a pulled stream folds each event: typed events for an agent, their JSON text for a raw client.
type SseApply = fn(&SseEvent, &mut MessageAccumulator, &mut dyn FnMut(StreamEvent)) -> Result<()>;

fn apply_full(ev: &SseEvent, acc: &mut MessageAccumulator, emit: &mut dyn FnMut(StreamEvent)) -> Result<()> {
    acc.apply_sse(ev, emit)
}

fn apply_lazy(ev: &SseEvent, acc: &mut MessageAccumulator, emit: &mut dyn FnMut(StreamEvent)) -> Result<()> {
    acc.apply_sse_lazy(ev, emit)
}

/// An Anthropic stream under way, pulled by the caller (see [`Provider::open_raw_stream`] and
/// [`Provider::open_stream`]).
struct PulledSse {
    resp: HttpResponse,
    reader: StreamReader<SseDecoder, SseApply>,
}

impl super::TurnStream for PulledSse {
    fn step(&mut self, on_event: &mut dyn FnMut(StreamEvent)) -> Result<Option<Response>> {
        self.reader.step(&mut self.resp, on_event)
    }
}

impl RawStream for PulledSse {
    fn step(&mut self, on_event: &mut dyn FnMut(StreamEvent)) -> Result<Option<Value>> {
        Ok(self.reader.step(&mut self.resp, on_event)?.map(|r| r.raw))
    }

    /// Text deltas skip their JSON copy (and the other events go nowhere).
    fn step_text(&mut self, text: &mut String) -> Result<Option<Value>> {
        self.reader.acc.text_only = true;
        let step = self.reader.step(&mut self.resp, &mut |ev| {
            if let StreamEvent::TextDelta { text: t, .. } = ev {
                text.push_str(&t);
            }
        });
        self.reader.acc.text_only = false;
        Ok(step?.map(|r| r.raw))
    }
}

impl AnthropicProvider {
    /// One exchange; `lazy`: text deltas as [`StreamEvent::RawJson`].
    fn send_with(
        &self,
        request: &Request,
        cancel: &CancelToken,
        on_event: &mut dyn FnMut(StreamEvent),
        lazy: bool,
    ) -> Result<Response> {
        let req = self.http_request(request, !lazy)?;
        let on_error = |s: u16, h: &[(String, String)], b: &[u8]| {
            redact_key(api_error_with_hint(s, h, b, "ANTHROPIC_API_KEY"), self.api_key.as_ref())
        };
        self.http.exchange(&req, cancel, &on_error, &mut |resp| {
            let mut emitted = false;
            self.read(resp, on_event, &mut emitted, lazy).map_err(|e| super::attempt(e, emitted))
        })
    }
}

impl AnthropicProvider {
    /// Read one 2xx response (JSON or SSE) into the turn; `emitted` tells whether any event reached the caller.
    fn read(
        &self,
        mut resp: HttpResponse,
        on_event: &mut dyn FnMut(StreamEvent),
        emitted: &mut bool,
        lazy: bool,
    ) -> Result<Response> {
        let request_id = resp.header("request-id").map(str::to_string);
        let is_sse = resp.header("content-type").is_some_and(|c| c.starts_with("text/event-stream"));
        if !is_sse {
            return read_json(&mut resp, request_id);
        }
        let apply = |ev: &SseEvent, acc: &mut MessageAccumulator, emit: &mut dyn FnMut(StreamEvent)| {
            if lazy { acc.apply_sse_lazy(ev, emit) } else { acc.apply_sse(ev, emit) }
        };
        read_stream(&mut resp, request_id, SseDecoder::new(), apply, on_event, emitted)
    }
}

/// The framing of a Messages API event stream: SSE (Anthropic) or AWS event-stream frames (Bedrock).
pub(crate) trait StreamDecoder {
    /// One decoded piece: an SSE event, or a frame.
    type Unit;
    /// Feed body bytes and push the units they complete. An error (a corrupt frame) ends the stream; the
    /// units before it are pushed all the same.
    fn feed(&mut self, bytes: &[u8], out: &mut Vec<Self::Unit>) -> std::result::Result<(), String>;
    /// Like `feed`, handing each unit to `f` as it completes (a decoder that can lend its units out
    /// overrides this to spare an allocation per unit).
    fn feed_each(&mut self, bytes: &[u8], f: &mut dyn FnMut(&Self::Unit)) -> std::result::Result<(), String> {
        let mut out = Vec::new();
        let fed = self.feed(bytes, &mut out);
        out.iter().for_each(f);
        fed
    }
    /// The body ended: a last unit the framing lets through without its terminator, if any.
    fn finish(&mut self) -> Option<Self::Unit>;
    /// What to say of a body that ended before `message_stop`.
    fn ended_message(&self) -> String;
}

impl StreamDecoder for SseDecoder {
    type Unit = SseEvent;
    fn feed(&mut self, bytes: &[u8], out: &mut Vec<SseEvent>) -> std::result::Result<(), String> {
        SseDecoder::feed(self, bytes, out);
        Ok(())
    }
    fn feed_each(&mut self, bytes: &[u8], f: &mut dyn FnMut(&SseEvent)) -> std::result::Result<(), String> {
        SseDecoder::feed_with(self, bytes, f);
        Ok(())
    }
    fn finish(&mut self) -> Option<SseEvent> {
        SseDecoder::finish(self)
    }
    fn ended_message(&self) -> String {
        format!("the stream ended before message_stop ({} bytes of an unfinished event pending)", self.pending_bytes())
    }
}

/// Read a Messages API event stream (Anthropic's SSE, Bedrock's event stream) into the turn as the bytes
/// arrive: each unit `decoder` completes goes through `apply` (typed events, then the raw one, to
/// `on_event`), and the turn is whole at `message_stop`. A body that breaks or ends early, a corrupt frame,
/// or an `error` event ends it with the error [`attempt`](super::attempt) expects: retryable only while
/// `emitted` (whether any event reached the caller) is false.
pub(crate) fn read_stream<D, A>(
    resp: &mut HttpResponse,
    request_id: Option<String>,
    decoder: D,
    apply: A,
    on_event: &mut dyn FnMut(StreamEvent),
    emitted: &mut bool,
) -> Result<Response>
where
    D: StreamDecoder,
    A: FnMut(&D::Unit, &mut MessageAccumulator, &mut dyn FnMut(StreamEvent)) -> Result<()>,
{
    let mut reader = StreamReader::new(request_id, decoder, apply);
    loop {
        let step = reader.step(resp, on_event);
        *emitted = reader.emitted;
        if let Some(response) = step? {
            return Ok(response);
        }
    }
}

/// How long a finished stream waits for the rest of its body (see [`HttpResponse::drain`]).
const DRAIN_AFTER_STOP: std::time::Duration = std::time::Duration::from_millis(50);

/// A Messages API event stream being read, one network read per [`StreamReader::step`]: what
/// [`read_stream`] loops over, and what a caller that drives the stream itself (a pull-based raw stream,
/// see [`super::RawStream`]) keeps between reads.
pub(crate) struct StreamReader<D: StreamDecoder, A> {
    request_id: Option<String>,
    decoder: D,
    apply: A,
    acc: MessageAccumulator,
    /// Whether any event reached the caller (after which nothing may be retried).
    pub(crate) emitted: bool,
}

impl<D, A> StreamReader<D, A>
where
    D: StreamDecoder,
    A: FnMut(&D::Unit, &mut MessageAccumulator, &mut dyn FnMut(StreamEvent)) -> Result<()>,
{
    pub(crate) fn new(request_id: Option<String>, decoder: D, apply: A) -> Self {
        StreamReader { request_id, decoder, apply, acc: MessageAccumulator::new(), emitted: false }
    }

    /// Wait for the next bytes of `resp`, pass the events they complete to `on_event`, and return the whole
    /// turn once `message_stop` arrived (`None`: read again). An error ends the stream.
    pub(crate) fn step(
        &mut self,
        resp: &mut HttpResponse,
        on_event: &mut dyn FnMut(StreamEvent),
    ) -> Result<Option<Response>> {
        let chunk = resp.next_slice().map_err(|e| body_error(e, self.acc.snapshot(), self.emitted))?;
        let finished = chunk.is_none();
        // Each unit is applied as the decoder completes it (lent, not collected); the first one that fails
        // or completes the turn decides, and any after it are ignored.
        let mut outcome: Option<Result<Response>> = None;
        let mut complete = false;
        let (acc, apply, emitted, request_id) = (&mut self.acc, &mut self.apply, &mut self.emitted, &self.request_id);
        let mut take = |unit: &D::Unit| {
            if outcome.is_some() {
                return;
            }
            let step = apply(unit, acc, &mut |e| {
                *emitted = true;
                on_event(e)
            });
            if let Err(e) = step {
                outcome = Some(Err(stream_failure(e, *emitted, request_id)));
            } else if acc.is_complete() {
                complete = true;
                // The turn is whole and nothing is applied after it: the message is moved out, not copied.
                let message = acc.take_message();
                let raw = serde_json::to_value(&message).unwrap_or(Value::Null);
                outcome = Some(Ok(Response { message, raw, request_id: request_id.clone() }));
            }
        };
        // Units that completed before a corrupt frame are still applied (one read can hold several).
        let fed = match chunk {
            Some(bytes) => self.decoder.feed_each(bytes, &mut take),
            None => {
                if let Some(unit) = self.decoder.finish() {
                    take(&unit);
                }
                Ok(())
            }
        };
        if complete {
            // The end of the body (a chunked body's last chunk) follows `message_stop` at once: read it, so
            // the connection goes back to the pool instead of a new one being opened for the next request.
            resp.drain(DRAIN_AFTER_STOP);
        }
        if let Some(outcome) = outcome {
            return outcome.map(Some);
        }
        if let Err(message) = fed {
            let request_id = self.request_id.clone();
            return Err(cut_short(message, self.acc.snapshot(), self.emitted, |message| Error::InvalidResponse {
                message,
                request_id,
            }));
        }
        if finished {
            return Err(cut_short(self.decoder.ended_message(), self.acc.snapshot(), self.emitted, |message| {
                Error::Connection { message }
            }));
        }
        Ok(None)
    }
}

/// A `content_block_delta` event, read without building a JSON value (the text borrowed unless escaped).
#[derive(serde::Deserialize)]
struct DeltaEvent<'a> {
    #[serde(rename = "type", borrow)]
    kind: std::borrow::Cow<'a, str>,
    index: usize,
    #[serde(borrow)]
    delta: TextDelta<'a>,
}

#[derive(serde::Deserialize)]
struct TextDelta<'a> {
    #[serde(rename = "type", borrow)]
    kind: std::borrow::Cow<'a, str>,
    #[serde(borrow, default)]
    text: std::borrow::Cow<'a, str>,
}

/// The fields of a stream event that [`MessageAccumulator::apply`] reads, from a borrowed parse of its JSON
/// (other fields skipped, no value built for the event). The message of a `message_start` is read into its
/// type directly.
#[derive(serde::Deserialize)]
struct EventParts<'a> {
    #[serde(rename = "type", borrow, default)]
    kind: Option<std::borrow::Cow<'a, str>>,
    #[serde(default)]
    index: Option<u64>,
    #[serde(default)]
    message: Option<Box<MessageResponse>>,
    #[serde(default)]
    content_block: Present,
    #[serde(default)]
    delta: Present,
    #[serde(default)]
    usage: Present,
}

/// Whether reading `json` as [`EventParts`] checks it as the value path does. The borrowed parse skips the
/// fields it does not read without converting them, so it lets through what only a conversion refuses: a
/// number out of range (`1e400`, or hundreds of digits) and a lone surrogate escape (`"\ud800"`). An event
/// with an exponent, a run of more than 18 digits or a `\uD…` escape anywhere (or text merely looking like
/// one) takes the value path.
fn checked_by_parts(json: &str) -> bool {
    let mut run = 0;
    let mut prev = [0u8; 2];
    for b in json.bytes() {
        if b.is_ascii_digit() {
            run += 1;
            if run > 18 {
                return false;
            }
        } else {
            if run > 0 && (b == b'e' || b == b'E') {
                return false;
            }
            run = 0;
        }
        if prev == *b"\\u" && (b == b'd' || b == b'D') {
            return false;
        }
        prev = [prev[1], b];
    }
    true
}

/// A field's value when the key is there, `null` included (an `Option` would read `null` as absent, where
/// the value path sees `Some(Null)`).
#[derive(Default)]
struct Present(Option<Value>);

impl<'de> serde::Deserialize<'de> for Present {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> std::result::Result<Self, D::Error> {
        Value::deserialize(d).map(|v| Present(Some(v)))
    }
}

/// The index and text of a text delta event's JSON in the exact layout the API sends,
/// `{"type":"content_block_delta","index":N,"delta":{"type":"text_delta","text":"…"}}` (no whitespace, a text
/// without escapes or control characters), read by matching its bytes: a tenth of a JSON parse's cost, on
/// the bulk of a stream. `None` for anything else, which the callers then parse: it accepts nothing a JSON
/// parse would refuse or read differently (tests/stream_fold_lazy.rs compares the two).
fn canonical_text_delta(json: &str) -> Option<(u64, &str)> {
    const HEAD: &str = r#"{"type":"content_block_delta","index":"#;
    const MID: &str = r#","delta":{"type":"text_delta","text":""#;
    const TAIL: &str = "\"}}";
    let rest = json.strip_prefix(HEAD)?;
    let digits = rest.bytes().take_while(u8::is_ascii_digit).count();
    // JSON numbers have no leading zeros; 15 digits stay far from u64's limit.
    if digits == 0 || digits > 15 || (digits > 1 && rest.starts_with('0')) {
        return None;
    }
    let index = rest[..digits].parse().ok()?;
    let text = rest[digits..].strip_prefix(MID)?.strip_suffix(TAIL)?;
    // A quote or backslash (an escape, or the string ending early) or a raw control character (invalid JSON):
    // the parse decides.
    if text.bytes().any(|b| b == b'"' || b == b'\\' || b < 0x20) {
        return None;
    }
    Some((index, text))
}

/// A text delta's block index and text, for [`MessageAccumulator::apply_sse_lazy`]: the canonical layout
/// matched, else a borrowed parse.
fn lazy_text_delta(json: &str) -> Option<(usize, std::borrow::Cow<'_, str>)> {
    if let Some((index, text)) = canonical_text_delta(json) {
        return Some((usize::try_from(index).ok()?, std::borrow::Cow::Borrowed(text)));
    }
    let d: DeltaEvent<'_> = serde_json::from_str(json).ok()?;
    (d.kind == "content_block_delta" && d.delta.kind == "text_delta").then_some((d.index, d.delta.text))
}

/// The text of a `content_block_delta` event's JSON (as [`StreamEvent::RawJson`] carries it) when it is a
/// text delta, read without building a JSON value; `None` for any other event.
pub fn text_delta_of(json: &str) -> Option<std::borrow::Cow<'_, str>> {
    if let Some((_, text)) = canonical_text_delta(json) {
        return Some(std::borrow::Cow::Borrowed(text));
    }
    let d: DeltaEvent<'_> = serde_json::from_str(json).ok()?;
    (d.kind == "content_block_delta" && d.delta.kind == "text_delta").then_some(d.delta.text)
}

/// A text delta event exactly as [`text_delta_parts`] accepts it: these fields and no others.
#[derive(serde::Deserialize)]
#[serde(deny_unknown_fields)]
struct StrictDeltaEvent<'a> {
    #[serde(rename = "type", borrow)]
    kind: std::borrow::Cow<'a, str>,
    index: u64,
    #[serde(borrow)]
    delta: StrictTextDelta<'a>,
}

#[derive(serde::Deserialize)]
#[serde(deny_unknown_fields)]
struct StrictTextDelta<'a> {
    #[serde(rename = "type", borrow)]
    kind: std::borrow::Cow<'a, str>,
    #[serde(borrow)]
    text: std::borrow::Cow<'a, str>,
}

/// The block index and text of a `content_block_delta` event's JSON when it is a text delta and holds
/// nothing else (`{"type", "index", "delta": {"type", "text"}}`), read without building a JSON value (the
/// text borrowed unless escaped): a host can then build its own object for the event, knowing it equals
/// the parsed JSON. `None` for any other event, or one with more fields.
pub fn text_delta_parts(json: &str) -> Option<(u64, std::borrow::Cow<'_, str>)> {
    if let Some((index, text)) = canonical_text_delta(json) {
        return Some((index, std::borrow::Cow::Borrowed(text)));
    }
    let d: StrictDeltaEvent<'_> = serde_json::from_str(json).ok()?;
    (d.kind == "content_block_delta" && d.delta.kind == "text_delta").then_some((d.index, d.delta.text))
}

/// Read a whole JSON Messages API message (the non-streaming answer; Bedrock's InvokeModel too).
pub(crate) fn read_json(resp: &mut HttpResponse, request_id: Option<String>) -> Result<Response> {
    let body = resp.read_all().map_err(|e| body_error(e, MessageResponse::default(), false))?;
    let raw: Value = serde_json::from_slice(&body).map_err(|e| Error::InvalidResponse {
        message: format!("response is not JSON ({e}): {}", String::from_utf8_lossy(&body[..body.len().min(200)])),
        request_id: request_id.clone(),
    })?;
    let message: MessageResponse = serde_json::from_value(raw.clone()).map_err(|e| Error::InvalidResponse {
        message: format!("response is not a Messages API message: {e}"),
        request_id: request_id.clone(),
    })?;
    Ok(Response { message, raw, request_id })
}

/// An error event (or a malformed one) that ended a stream: the request id is attached, and an API error
/// that came before any event reached the caller is reported as that API error (so the HTTP layer may
/// retry it) rather than as an interrupted stream with an empty partial.
fn stream_failure(mut e: Error, emitted: bool, request_id: &Option<String>) -> Error {
    if let Error::StreamInterrupted { api: Some(a), .. } = &mut e {
        a.request_id = a.request_id.clone().or_else(|| request_id.clone());
    }
    if !emitted {
        if let Error::StreamInterrupted { api: Some(a), .. } = e {
            return Error::Api(a);
        }
    }
    e
}

/// Folds Messages API stream events into a [`MessageResponse`], emitting typed [`StreamEvent`]s.
#[derive(Debug, Default)]
pub struct MessageAccumulator {
    message: MessageResponse,
    /// Wire index → position in `message.content`.
    positions: Vec<(usize, usize)>,
    /// Raw `partial_json` per content position, for tool_use blocks still streaming.
    partial_json: Vec<(usize, String)>,
    complete: bool,
    /// [`MessageAccumulator::apply_sse_lazy`] reports a text delta as its text alone, without its JSON (see
    /// [`super::RawStream::step_text`]).
    text_only: bool,
}

impl MessageAccumulator {
    /// An empty accumulator.
    pub fn new() -> Self {
        Self::default()
    }

    /// Whether `message_stop` arrived.
    pub fn is_complete(&self) -> bool {
        self.complete
    }

    /// The message as accumulated so far (tool inputs still streaming are parsed as far as possible:
    /// unfinished ones are left as `{}`).
    pub fn snapshot(&self) -> MessageResponse {
        self.message.clone()
    }

    /// The message, taken out (the accumulator is left empty): for a turn that is complete.
    pub fn take_message(&mut self) -> MessageResponse {
        std::mem::take(&mut self.message)
    }

    fn position(&self, index: usize) -> Option<usize> {
        self.positions.iter().find(|(w, _)| *w == index).map(|(_, p)| *p)
    }

    /// Apply one SSE event. Emits typed events first, then the raw event. An `error` event, or a
    /// malformed one, is returned as `StreamInterrupted` (with `api` set for `error` events).
    pub fn apply_sse(&mut self, ev: &SseEvent, on_event: &mut dyn FnMut(StreamEvent)) -> Result<()> {
        let name = ev.event.clone().unwrap_or_else(|| "message".to_string());
        if ev.data.is_empty() {
            return Ok(());
        }
        let data: Value = match serde_json::from_str(&ev.data) {
            Ok(v) => v,
            Err(e) => return Err(self.broken(format!("event '{name}' carried invalid JSON: {e}"), None)),
        };
        self.apply(&name, &data, on_event)?;
        on_event(StreamEvent::Raw { event: name, data });
        Ok(())
    }

    /// Like [`MessageAccumulator::apply_sse`], but events are folded without building a JSON value and
    /// reported as [`StreamEvent::RawJson`] (their data verbatim) instead of [`StreamEvent::Raw`]: a text delta
    /// of a text block from a borrowed parse of its text, the other events from a borrowed parse of the fields
    /// the fold reads. Non-text deltas, error events, and any event that does not read that way take the
    /// ordinary path. Both paths accept, refuse and fold every stream alike (tests/stream_fold_lazy.rs).
    pub fn apply_sse_lazy(&mut self, ev: &SseEvent, on_event: &mut dyn FnMut(StreamEvent)) -> Result<()> {
        if ev.event.as_deref() == Some("content_block_delta") {
            if let Some((index, text)) = lazy_text_delta(&ev.data) {
                let pos = self.position(index);
                if let Some(ContentBlock::Text(t)) = pos.and_then(|p| self.message.content.get_mut(p)) {
                    t.text.push_str(&text);
                    on_event(StreamEvent::TextDelta { index, text: text.into_owned() });
                    if !self.text_only {
                        on_event(StreamEvent::RawJson { event: "content_block_delta".into(), json: ev.data.clone() });
                    }
                    return Ok(());
                }
            }
        } else if !ev.data.is_empty() && ev.event.as_deref() != Some("error") && checked_by_parts(&ev.data) {
            // The other events are read from a borrowed parse too (only the fields the fold needs), and
            // handed on as their text: a raw client builds its object straight from that.
            if let Ok(parts) = serde_json::from_str::<EventParts<'_>>(&ev.data) {
                let name = ev.event.as_deref().unwrap_or("message");
                if let Some(applied) = self.apply_parts(name, parts, on_event) {
                    applied?;
                    on_event(StreamEvent::RawJson { event: name.to_string(), json: ev.data.clone() });
                    return Ok(());
                }
            }
        }
        self.apply_sse(ev, on_event)
    }

    fn broken(&self, message: String, api: Option<ApiError>) -> Error {
        Error::StreamInterrupted { message, partial: Box::new(self.snapshot()), api: api.map(Box::new) }
    }

    /// Apply one decoded event (`name` is the SSE event name; the data's own `type` wins when present).
    pub fn apply(&mut self, name: &str, data: &Value, on_event: &mut dyn FnMut(StreamEvent)) -> Result<()> {
        let kind = data.get("type").and_then(Value::as_str).unwrap_or(name);
        let index = data.get("index").and_then(Value::as_u64).map(|i| i as usize);
        match kind {
            "message_start" => {
                // Read from the borrowed value (no copy of the message first).
                let msg = data.get("message").unwrap_or(&Value::Null);
                let parsed = MessageResponse::deserialize(msg)
                    .map_err(|e| self.broken(format!("invalid message_start: {e}"), None))?;
                self.start_message(parsed, on_event)?;
            }
            "content_block_start" => {
                let (Some(index), Some(block)) = (index, data.get("content_block")) else {
                    return Err(self.broken("content_block_start without index or content_block".into(), None));
                };
                self.start_block(index, block.clone(), on_event)?;
            }
            "content_block_delta" => {
                let (Some(index), Some(delta)) = (index, data.get("delta")) else {
                    return Err(self.broken("content_block_delta without index or delta".into(), None));
                };
                let Some(pos) = self.position(index) else {
                    return Err(self.broken(format!("delta for block {index}, which never started"), None));
                };
                self.apply_delta(index, pos, delta, on_event)?;
            }
            "content_block_stop" => self.stop_block(index),
            "message_delta" => self.delta_message(data.get("delta"), data.get("usage"), on_event),
            "message_stop" => self.stop_message(),
            "error" => {
                let err = data.get("error").cloned().unwrap_or(Value::Null);
                let error_type = err.get("type").and_then(Value::as_str).unwrap_or("").to_string();
                let message = err.get("message").and_then(Value::as_str).unwrap_or("error event").to_string();
                let api = ApiError {
                    kind: ApiErrorKind::classify(200, &error_type),
                    status: 200,
                    error_type: error_type.clone(),
                    message: message.clone(),
                    request_id: None,
                    retry_after: None,
                    hint: None,
                };
                return Err(self.broken(format!("error event mid-stream: {error_type}: {message}"), Some(api)));
            }
            _ => {} // ping and event types newer than this code
        }
        Ok(())
    }

    fn start_message(&mut self, parsed: MessageResponse, on_event: &mut dyn FnMut(StreamEvent)) -> Result<()> {
        if !self.positions.is_empty() {
            // A second message_start after blocks began would orphan their positions (found by fuzzing:
            // a later delta indexed past the emptied content and panicked).
            return Err(self.broken("message_start after content blocks had started".into(), None));
        }
        self.message = MessageResponse { content: Vec::new(), ..parsed };
        on_event(StreamEvent::Usage(self.message.usage.clone()));
        Ok(())
    }

    fn start_block(&mut self, index: usize, block: Value, on_event: &mut dyn FnMut(StreamEvent)) -> Result<()> {
        let block = ContentBlock::from_value(block).map_err(|e| self.broken(e, None))?;
        let pos = self.message.content.len();
        if let ContentBlock::ToolUse(t) = &block {
            on_event(StreamEvent::ToolUseStart { index, id: t.id.clone(), name: t.name.clone() });
            self.partial_json.push((pos, String::new()));
        } else if matches!(&block, ContentBlock::Unknown(v) if v.get("input").is_some()) {
            // server_tool_use / mcp_tool_use stream their input as input_json_delta too; without
            // collecting it the block would go back with `input: {}` (no typed events: not ours to run).
            self.partial_json.push((pos, String::new()));
        }
        self.positions.push((index, pos));
        self.message.content.push(block);
        Ok(())
    }

    fn stop_block(&mut self, index: Option<usize>) {
        if let Some(pos) = index.and_then(|i| self.position(i)) {
            self.finish_tool_input(pos);
        }
    }

    fn delta_message(&mut self, delta: Option<&Value>, usage: Option<&Value>, on_event: &mut dyn FnMut(StreamEvent)) {
        if let Some(d) = delta {
            if let Some(r) = d.get("stop_reason").and_then(Value::as_str) {
                self.message.stop_reason = Some(StopReason::parse(r));
            }
            if let Some(s) = d.get("stop_sequence") {
                self.message.stop_sequence = s.as_str().map(str::to_string);
            }
        }
        if let Some(u) = usage {
            self.message.usage.merge_cumulative(u);
            on_event(StreamEvent::Usage(self.message.usage.clone()));
        }
    }

    fn stop_message(&mut self) {
        let unfinished: Vec<usize> = self.partial_json.iter().map(|(p, _)| *p).collect();
        for pos in unfinished {
            self.finish_tool_input(pos);
        }
        self.complete = true;
    }

    /// [`MessageAccumulator::apply`] for an event read as [`EventParts`]; `None` when the event is not one
    /// this path takes (a non-text delta, an error event, a field missing): the value path then reads it
    /// and reports whatever is wrong with it, exactly as before.
    fn apply_parts(
        &mut self,
        name: &str,
        parts: EventParts<'_>,
        on_event: &mut dyn FnMut(StreamEvent),
    ) -> Option<Result<()>> {
        let index = parts.index.map(|i| i as usize);
        match parts.kind.as_deref().unwrap_or(name) {
            "message_start" => return Some(self.start_message(*parts.message?, on_event)),
            "content_block_start" => return Some(self.start_block(index?, parts.content_block.0?, on_event)),
            "content_block_stop" => self.stop_block(index),
            "message_delta" => self.delta_message(parts.delta.0.as_ref(), parts.usage.0.as_ref(), on_event),
            "message_stop" => self.stop_message(),
            "content_block_delta" | "error" => return None,
            _ => {} // ping and event types newer than this code, as in `apply`
        }
        Some(Ok(()))
    }

    fn apply_delta(
        &mut self,
        index: usize,
        pos: usize,
        delta: &Value,
        on_event: &mut dyn FnMut(StreamEvent),
    ) -> Result<()> {
        let s = |k: &str| delta.get(k).and_then(Value::as_str).unwrap_or("").to_string();
        let dtype = delta.get("type").and_then(Value::as_str).unwrap_or("");
        let block = &mut self.message.content[pos];
        match (dtype, block) {
            ("text_delta", ContentBlock::Text(t)) => {
                let text = s("text");
                t.text.push_str(&text);
                on_event(StreamEvent::TextDelta { index, text });
            }
            ("thinking_delta", ContentBlock::Thinking(t)) => {
                let thinking = s("thinking");
                t.thinking.push_str(&thinking);
                on_event(StreamEvent::ThinkingDelta { index, thinking });
            }
            ("signature_delta", ContentBlock::Thinking(t)) => t.signature.push_str(&s("signature")),
            ("input_json_delta", ContentBlock::ToolUse(_)) => {
                let partial_json = s("partial_json");
                if let Some((_, buf)) = self.partial_json.iter_mut().find(|(p, _)| *p == pos) {
                    buf.push_str(&partial_json);
                }
                on_event(StreamEvent::ToolInputDelta { index, partial_json });
            }
            ("citations_delta", ContentBlock::Text(t)) => {
                if let Some(c) = delta.get("citation") {
                    t.citations.get_or_insert_with(Vec::new).push(c.clone());
                }
            }
            ("input_json_delta", ContentBlock::Unknown(_)) if self.partial_json.iter().any(|(p, _)| *p == pos) => {
                if let Some((_, buf)) = self.partial_json.iter_mut().find(|(p, _)| *p == pos) {
                    buf.push_str(&s("partial_json"));
                }
            }
            (_, ContentBlock::Unknown(raw)) => merge_unknown_delta(raw, delta),
            (other, block) => {
                let kind = block.kind().to_string();
                return Err(self.broken(format!("delta '{other}' does not fit a {kind} block"), None));
            }
        }
        Ok(())
    }

    /// Parse the collected `partial_json` of the tool_use (or server-side tool block) at `pos`: none or ""
    /// means `{}`; JSON that does not parse is kept as the raw string so the tool registry reports it to
    /// the model.
    fn finish_tool_input(&mut self, pos: usize) {
        let Some(i) = self.partial_json.iter().position(|(p, _)| *p == pos) else { return };
        let (_, raw) = self.partial_json.remove(i);
        let trimmed = raw.trim();
        match self.message.content.get_mut(pos) {
            Some(ContentBlock::ToolUse(t)) => {
                t.input = if trimmed.is_empty() {
                    if t.input.is_null() { Value::Object(Map::new()) } else { t.input.clone() }
                } else {
                    serde_json::from_str(trimmed).unwrap_or(Value::String(raw))
                };
            }
            Some(ContentBlock::Unknown(Value::Object(obj))) if !trimmed.is_empty() => {
                let input = serde_json::from_str(trimmed).unwrap_or(Value::String(raw));
                obj.insert("input".to_string(), input);
            }
            _ => {}
        }
    }
}

/// Unknown block kinds may still stream deltas of known shapes: fold text-like fields, keep the rest.
fn merge_unknown_delta(raw: &mut Value, delta: &Value) {
    let Some(obj) = raw.as_object_mut() else { return };
    if let Some(d) = delta.as_object() {
        for (k, v) in d {
            if k == "type" {
                continue;
            }
            match (obj.get_mut(k), v) {
                (Some(Value::String(existing)), Value::String(more)) => existing.push_str(more),
                _ => {
                    obj.insert(k.clone(), v.clone());
                }
            }
        }
    }
}
