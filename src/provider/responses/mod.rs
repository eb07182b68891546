//! OpenAI's Responses API: `POST {base}/responses` where `base` ends in `/v1`. The wire OpenAI's reasoning
//! models need for tools with reasoning (Chat Completions refuses the two together for them).
//!
//! Renders the neutral request as `instructions` + `input` items (user and assistant messages,
//! `function_call` / `function_call_output` items paired by `call_id`, the reasoning items this wire made)
//! with flat function tools, `store: false`, and folds the JSON response or its semantic stream events
//! (`response.output_item.added` … `response.completed`) back into the neutral [`MessageResponse`].
//!
//! A reasoning item becomes a `thinking` block whose text is the item's summary and whose `extra` holds the
//! whole item under [`REASONING_KEY`] (its `id` and `encrypted_content` included): that is what goes back to
//! the API on the next request, so multi-turn reasoning works without server-side state. Thinking blocks
//! without it (Anthropic's, a Chat Completions server's `reasoning_content`) are never sent here.
//!
//! Must never: send a reasoning item without its `encrypted_content` (with `store: false` the API cannot
//! find it by id), crash on invalid `arguments` JSON (it reaches the loop as the raw string), or take the
//! end of the body for the end of a stream that sent no terminal event.
//!
//! `render` builds the request body, `fold` turns a response object or its events into the neutral turn;
//! this file holds the provider and its readers.

use serde_json::Value;

use super::{
    Provider, RawOpen, RawStream, Response, Secret, StreamEvent, TurnOpen, TurnStream, body_error, cut_short,
    redact_key,
};
use crate::cancel::CancelToken;
use crate::error::{ApiError, Error, Result};
use crate::http::{HttpClient, HttpRequest, HttpResponse};
use crate::sse::{SseDecoder, SseEvent};
use crate::types::{MessageResponse, Request};

mod fold;
mod render;

pub use fold::{EventAccumulator, map_usage, parse_response, stream_error};
pub use render::{is_reasoning_model, reasoning_for, render_request};

/// The official endpoint (the same as Chat Completions').
pub const DEFAULT_BASE_URL: &str = "https://api.openai.com/v1";

/// The key of a thinking block's `extra` that holds the Responses reasoning item it came from (with its
/// `encrypted_content`). Only this wire sends such a block back; every other wire must drop it.
pub const REASONING_KEY: &str = "openai_reasoning";

/// Responses API provider.
///
/// # Threads and cloning
/// `Send + Sync`; concurrent `send` calls share the connection pool.
pub struct ResponsesProvider {
    http: HttpClient,
    base_url: String,
    api_key: Option<Secret>,
    headers: Vec<(String, String)>,
}

impl std::fmt::Debug for ResponsesProvider {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ResponsesProvider").field("base_url", &self.base_url).field("api_key", &self.api_key).finish()
    }
}

impl ResponsesProvider {
    /// A provider for `base_url` (ending in `/v1`).
    pub fn new(http: HttpClient, base_url: String, api_key: Option<Secret>, headers: Vec<(String, String)>) -> Self {
        ResponsesProvider { http, base_url, api_key, headers }
    }
}

/// The request id of a response (OpenAI's `x-request-id`, or `request-id`).
fn request_id(resp: &HttpResponse) -> Option<String> {
    resp.header("x-request-id").or_else(|| resp.header("request-id")).map(str::to_string)
}

fn is_sse(resp: &HttpResponse) -> bool {
    resp.header("content-type").is_some_and(|c| c.starts_with("text/event-stream"))
}

/// Read one 2xx response (JSON or SSE): the final `response` object and the neutral turn. Every stream
/// event goes to `on_event` as its typed events and then as [`StreamEvent::Raw`]; `emitted` tells whether
/// any event reached the caller.
fn read(mut resp: HttpResponse, on_event: &mut dyn FnMut(StreamEvent), emitted: &mut bool) -> Result<Response> {
    if !is_sse(&resp) {
        return read_json(resp);
    }
    let mut reader = EventReader::new(request_id(&resp));
    let whole = loop {
        let step = reader.step(&mut resp, on_event);
        *emitted = reader.emitted;
        match step {
            Ok(true) => break Ok(()),
            Ok(false) => {}
            Err(e) => break Err(e),
        }
    };
    whole.map(|()| reader.response())
}

/// A JSON (not streamed) response: the `response` object and its neutral turn; a `failed` one is its error.
fn read_json(mut resp: HttpResponse) -> Result<Response> {
    let request_id = request_id(&resp);
    let body = resp.read_all().map_err(|e| body_error(e, MessageResponse::default(), false))?;
    let raw: Value = serde_json::from_slice(&body).map_err(|e| Error::InvalidResponse {
        message: format!("response is not JSON ({e}): {}", String::from_utf8_lossy(&body[..body.len().min(200)])),
        request_id: request_id.clone(),
    })?;
    let message = parse_response(&raw).map_err(|mut a| {
        a.request_id = request_id.clone();
        Error::Api(Box::new(a))
    })?;
    Ok(Response { message, raw, request_id })
}

/// A Responses stream being read, one network read per [`EventReader::step`]: what [`read`] loops over, and
/// what a caller that drives the stream itself ([`PulledEvents`], [`PulledRaw`]) keeps between reads.
struct EventReader {
    acc: EventAccumulator,
    decoder: SseDecoder,
    /// The events of the last read (kept for its buffer).
    events: Vec<SseEvent>,
    request_id: Option<String>,
    /// Whether any event reached the caller (after which nothing may be retried).
    emitted: bool,
}

impl EventReader {
    fn new(request_id: Option<String>) -> Self {
        EventReader {
            acc: EventAccumulator::default(),
            decoder: SseDecoder::new(),
            events: Vec::new(),
            request_id,
            emitted: false,
        }
    }

    /// Wait for the next bytes of `resp` and fold the events they complete (typed events, then the `Raw`
    /// one, to `on_event`); `true` once the terminal event arrived (`false`: read again). An error ends the
    /// stream; a body that ends before the terminal event is one.
    fn step(&mut self, resp: &mut HttpResponse, on_event: &mut dyn FnMut(StreamEvent)) -> Result<bool> {
        let EventReader { acc, decoder, events, request_id, emitted } = self;
        let invalid = |message: String| Error::InvalidResponse { message, request_id: request_id.clone() };
        let chunk = resp.next_chunk().map_err(|e| body_error(e, acc.snapshot(), *emitted))?;
        let finished = chunk.is_none();
        match chunk {
            Some(bytes) => decoder.feed(&bytes, events),
            None => events.extend(decoder.finish()),
        }
        for ev in events.drain(..) {
            let data = ev.data.trim();
            if data.is_empty() || data == "[DONE]" {
                continue;
            }
            let parsed: Value = match serde_json::from_str(data) {
                Ok(v) => v,
                Err(e) => {
                    return Err(cut_short(format!("stream event is not JSON: {e}"), acc.snapshot(), *emitted, invalid));
                }
            };
            let step = acc.apply(&parsed, &mut |e| {
                *emitted = true;
                on_event(e)
            });
            if let Err(mut a) = step {
                a.request_id = request_id.clone();
                return Err(if *emitted {
                    Error::StreamInterrupted {
                        message: format!("error in stream: {}", a.message),
                        partial: Box::new(acc.snapshot()),
                        api: Some(Box::new(a)),
                    }
                } else {
                    Error::Api(Box::new(a))
                });
            }
            *emitted = true;
            let event = ev.event.clone().or_else(|| parsed.get("type").and_then(Value::as_str).map(str::to_string));
            on_event(StreamEvent::Raw { event: event.unwrap_or_else(|| "message".into()), data: parsed });
            if acc.done {
                // The terminal event: anything after it is not this response's.
                return Ok(true);
            }
        }
        if finished {
            let message = "the stream ended before response.completed".to_string();
            return Err(cut_short(message, acc.snapshot(), *emitted, |message| Error::Connection { message }));
        }
        Ok(false)
    }

    /// The whole turn (once [`EventReader::step`] said so).
    fn response(&self) -> Response {
        Response { message: self.acc.snapshot(), raw: self.acc.response(), request_id: self.request_id.clone() }
    }
}

/// Forward only the wire events (what a raw client hands out).
fn raw_only(on_event: &mut dyn FnMut(StreamEvent)) -> impl FnMut(StreamEvent) + '_ {
    move |e: StreamEvent| {
        if matches!(e, StreamEvent::Raw { .. }) {
            on_event(e)
        }
    }
}

/// A Responses turn under way, pulled by the caller (see [`Provider::open_stream`]).
struct PulledEvents {
    resp: HttpResponse,
    reader: EventReader,
}

impl TurnStream for PulledEvents {
    fn step(&mut self, on_event: &mut dyn FnMut(StreamEvent)) -> Result<Option<Response>> {
        Ok(self.reader.step(&mut self.resp, on_event)?.then(|| self.reader.response()))
    }
}

/// A raw Responses stream under way, pulled by the caller (see [`Provider::open_raw_stream`]).
struct PulledRaw {
    resp: HttpResponse,
    reader: EventReader,
}

impl RawStream for PulledRaw {
    fn step(&mut self, on_event: &mut dyn FnMut(StreamEvent)) -> Result<Option<Value>> {
        let mut raw = raw_only(on_event);
        Ok(self.reader.step(&mut self.resp, &mut raw)?.then(|| self.reader.acc.response()))
    }

    /// The text is what the typed text deltas carry (no event is handed out).
    fn step_text(&mut self, text: &mut String) -> Result<Option<Value>> {
        let done = self.reader.step(&mut self.resp, &mut |ev| {
            if let StreamEvent::TextDelta { text: t, .. } = ev {
                text.push_str(&t);
            }
        })?;
        Ok(done.then(|| self.reader.acc.response()))
    }
}

/// A raw request body as sent: `stream` set or removed.
fn raw_body(body: &Value, stream: bool) -> Result<Value> {
    let Some(obj) = body.as_object() else {
        return Err(Error::Config("the request must be an object (a Responses API request body)".into()));
    };
    let mut obj = obj.clone();
    if stream {
        obj.insert("stream".into(), Value::Bool(true));
    } else {
        obj.remove("stream");
    }
    Ok(Value::Object(obj))
}

impl Provider for ResponsesProvider {
    fn name(&self) -> &str {
        super::Protocol::OpenAiResponses.name()
    }

    /// `text.format` takes a JSON schema on OpenAI's own endpoint; other servers that speak this wire get
    /// the final-answer tool (`output_mode: "native"` asks them for `text.format` anyway).
    fn native_output(&self) -> bool {
        self.base_url.contains("://api.openai.com")
    }

    fn secrets(&self) -> Vec<Secret> {
        self.api_key.iter().cloned().collect()
    }

    fn send(&self, request: &Request, cancel: &CancelToken, on_event: &mut dyn FnMut(StreamEvent)) -> Result<Response> {
        let req = self.http_request(&render_request(request))?;
        let on_error = |s: u16, h: &[(String, String)], b: &[u8]| self.api_error(s, h, b);
        self.http.exchange(&req, cancel, &on_error, &mut |resp| {
            let mut emitted = false;
            read(resp, on_event, &mut emitted).map_err(|e| super::attempt(e, emitted))
        })
    }

    /// The body goes out as given (`stream` set as asked); the answer is the `response` object: the JSON
    /// body, or the one the stream's terminal event carries. A `failed` response is an error either way.
    fn send_raw(
        &self,
        body: &Value,
        stream: bool,
        cancel: &CancelToken,
        on_event: &mut dyn FnMut(StreamEvent),
    ) -> Result<Value> {
        let req = self.http_request(&raw_body(body, stream)?)?;
        let on_error = |s: u16, h: &[(String, String)], b: &[u8]| self.api_error(s, h, b);
        self.http.exchange(&req, cancel, &on_error, &mut |resp| {
            let mut emitted = false;
            read(resp, &mut raw_only(on_event), &mut emitted).map(|r| r.raw).map_err(|e| super::attempt(e, emitted))
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
        let req = self.http_request(&render_request(request))?;
        let on_error = |s: u16, h: &[(String, String)], b: &[u8]| self.api_error(s, h, b);
        self.http.exchange(&req, cancel, &on_error, &mut |mut resp| {
            if !is_sse(&resp) {
                return read_json(resp).map(|r| TurnOpen::Done(Box::new(r))).map_err(|e| super::attempt(e, false));
            }
            let mut reader = EventReader::new(request_id(&resp));
            loop {
                match reader.step(&mut resp, on_event) {
                    Ok(true) => return Ok(TurnOpen::Done(Box::new(reader.response()))),
                    Ok(false) if reader.emitted => return Ok(TurnOpen::Open(Box::new(PulledEvents { resp, reader }))),
                    Ok(false) => {}
                    Err(e) => return Err(super::attempt(e, reader.emitted)),
                }
            }
        })
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
        let req = self.http_request(&raw_body(body, true)?)?;
        let on_error = |s: u16, h: &[(String, String)], b: &[u8]| self.api_error(s, h, b);
        self.http.exchange(&req, cancel, &on_error, &mut |mut resp| {
            if !is_sse(&resp) {
                return read_json(resp).map(|r| RawOpen::Done(r.raw)).map_err(|e| super::attempt(e, false));
            }
            let mut reader = EventReader::new(request_id(&resp));
            let mut raw = raw_only(on_event);
            loop {
                match reader.step(&mut resp, &mut raw) {
                    Ok(true) => return Ok(RawOpen::Done(reader.acc.response())),
                    Ok(false) if reader.emitted => return Ok(RawOpen::Open(Box::new(PulledRaw { resp, reader }))),
                    Ok(false) => {}
                    Err(e) => return Err(super::attempt(e, reader.emitted)),
                }
            }
        })
    }
}

impl ResponsesProvider {
    fn http_request(&self, body: &Value) -> Result<HttpRequest> {
        let body = serde_json::to_vec(body).map_err(|e| Error::Config(format!("request not serializable: {e}")))?;
        let mut headers = vec![("content-type".to_string(), "application/json".to_string())];
        if let Some(key) = &self.api_key {
            headers.push(("authorization".to_string(), format!("Bearer {}", key.expose())));
        }
        super::override_headers(&mut headers, &self.headers);
        Ok(HttpRequest { url: format!("{}/responses", self.base_url), headers, body })
    }

    fn api_error(&self, s: u16, h: &[(String, String)], b: &[u8]) -> ApiError {
        let mut e = super::anthropic::api_error_with_hint(s, h, b, "OPENAI_API_KEY");
        if let Some(id) = crate::http::header_value(h, "x-request-id") {
            e.request_id = Some(id.to_string());
        }
        redact_key(e, self.api_key.as_ref())
    }
}
