//! HTTP over one reusable ureq agent: timeouts, retries with back-off, and cancellation of blocking reads.
//!
//! ureq is blocking on purpose (tooloop is a synchronous library: no async runtime leaks into hosts). A
//! blocking socket read cannot be interrupted from another thread, so each exchange runs on a worker thread
//! that hands the response head and body chunks over a channel; the caller waits on that channel in short
//! slices, checking the cancel token and the idle/total deadlines. Cancel or a timeout therefore returns to
//! the caller within one slice (≤ 25 ms), whatever the socket is doing; the worker then stops at its next
//! wake-up and drops the connection.
//!
//! Must never: retry after any body content has been handed to the caller (that duplicates output), or log
//! header values (they carry the API key).

use std::io::Read;
use std::sync::mpsc::{self, Receiver, RecvTimeoutError};
use std::time::{Duration, Instant};

use crate::cancel::CancelToken;
use crate::error::{ApiError, ApiErrorKind, Error, Result};

/// Timeouts and retry policy of an [`HttpClient`]. Immutable once the client is built.
#[derive(Clone, Debug)]
pub struct HttpConfig {
    /// Time to establish a TCP (and TLS) connection. Default 10 s.
    pub connect_timeout: Duration,
    /// Longest silence while waiting for the response head or the next body bytes. Default 300 s
    /// (streams send `ping` events well within that).
    pub idle_timeout: Duration,
    /// Longest whole exchange (one attempt, head to last byte). Default 600 s.
    pub total_timeout: Duration,
    /// Retries after the first attempt, for connection errors, 408, 409, 429 and ≥ 500. Default 2.
    pub max_retries: u32,
    /// First back-off delay; doubles per retry, with jitter. Default 0.5 s.
    pub initial_backoff: Duration,
    /// Longest back-off delay. Default 8 s.
    pub max_backoff: Duration,
    /// A `retry-after` longer than this is not waited for: the error is returned instead. Default 60 s.
    pub max_retry_after: Duration,
}

impl Default for HttpConfig {
    fn default() -> Self {
        HttpConfig {
            connect_timeout: Duration::from_secs(10),
            idle_timeout: Duration::from_secs(300),
            total_timeout: Duration::from_secs(600),
            max_retries: 2,
            initial_backoff: Duration::from_millis(500),
            max_backoff: Duration::from_secs(8),
            max_retry_after: Duration::from_secs(60),
        }
    }
}

/// A POST request about to be sent.
#[derive(Clone)]
pub struct HttpRequest {
    /// Full URL.
    pub url: String,
    /// Headers (secrets included: never printed).
    pub headers: Vec<(String, String)>,
    /// The JSON body.
    pub body: Vec<u8>,
}

impl std::fmt::Debug for HttpRequest {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // Header values carry the API key: show names only.
        let names: Vec<&str> = self.headers.iter().map(|(k, _)| k.as_str()).collect();
        f.debug_struct("HttpRequest")
            .field("url", &self.url)
            .field("header_names", &names)
            .field("body_len", &self.body.len())
            .finish()
    }
}

/// The client: one ureq agent (keep-alive pool) plus the configuration.
///
/// # Threads and cloning
/// Cheap to clone (the pool is shared); `Send + Sync`; any number of threads may send at once.
#[derive(Clone)]
pub struct HttpClient {
    agent: ureq::Agent,
    config: HttpConfig,
}

impl std::fmt::Debug for HttpClient {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("HttpClient").field("config", &self.config).finish()
    }
}

enum Msg {
    Head { status: u16, headers: Vec<(String, String)> },
    Chunk(Vec<u8>),
    End,
    Failed(String, bool),
}

/// Turns an error response (status, headers, body) into an [`ApiError`].
pub type ApiErrorFn<'a> = &'a dyn Fn(u16, &[(String, String)], &[u8]) -> ApiError;

/// How reading a 2xx response failed, for [`HttpClient::exchange`].
#[derive(Debug)]
pub enum Attempt {
    /// Nothing reached the caller yet and the failure is transient: try again (within the retry budget).
    Retry(Error),
    /// Final: content reached the caller, or retrying cannot help.
    Fail(Error),
}

/// A response whose body is still arriving.
pub struct HttpResponse {
    /// HTTP status.
    pub status: u16,
    /// Headers, names lower-cased.
    pub headers: Vec<(String, String)>,
    rx: Receiver<Msg>,
    cancel: CancelToken,
    idle: Duration,
    deadline: Instant,
    total: Duration,
    done: bool,
}

/// How a body read failed.
#[derive(Debug)]
pub enum BodyError {
    /// The cancel token fired.
    Cancelled,
    /// No bytes for the idle timeout, or the total timeout ran out.
    Timeout(&'static str, Duration),
    /// The connection broke or the body was malformed (e.g. a chunked body cut short).
    Broken(String),
}

impl HttpResponse {
    /// The first value of header `name` (case-insensitive).
    pub fn header(&self, name: &str) -> Option<&str> {
        header_value(&self.headers, name)
    }

    /// The next piece of the body, as soon as it arrives; `Ok(None)` at the end.
    pub fn next_chunk(&mut self) -> Result<Option<Vec<u8>>, BodyError> {
        if self.done {
            return Ok(None);
        }
        match wait(&self.rx, &self.cancel, self.idle, self.deadline, self.total) {
            Ok(Msg::Chunk(c)) => Ok(Some(c)),
            Ok(Msg::End) => {
                self.done = true;
                Ok(None)
            }
            Ok(Msg::Head { .. }) => Err(BodyError::Broken("unexpected second response head".into())),
            Ok(Msg::Failed(m, _)) => {
                self.done = true;
                Err(BodyError::Broken(m))
            }
            Err(e) => {
                self.done = true;
                Err(e)
            }
        }
    }

    /// Read the rest of the body.
    pub fn read_all(&mut self) -> Result<Vec<u8>, BodyError> {
        let mut out = Vec::new();
        while let Some(c) = self.next_chunk()? {
            out.extend_from_slice(&c);
        }
        Ok(out)
    }
}

/// Wait for the next message from a worker, in short slices so cancel and deadlines are seen promptly.
fn wait(
    rx: &Receiver<Msg>,
    cancel: &CancelToken,
    idle: Duration,
    deadline: Instant,
    total: Duration,
) -> Result<Msg, BodyError> {
    const SLICE: Duration = Duration::from_millis(20);
    let idle_deadline = Instant::now() + idle;
    loop {
        if cancel.is_cancelled() {
            return Err(BodyError::Cancelled);
        }
        let now = Instant::now();
        if now >= deadline {
            return Err(BodyError::Timeout("total", total));
        }
        if now >= idle_deadline {
            return Err(BodyError::Timeout("idle", idle));
        }
        match rx.recv_timeout(SLICE) {
            Ok(m) => return Ok(m),
            Err(RecvTimeoutError::Timeout) => continue,
            // The worker also stops when it sees the cancel, which may land between the check above and
            // this receive: that is a cancel, not a broken stream.
            Err(RecvTimeoutError::Disconnected) if cancel.is_cancelled() => return Err(BodyError::Cancelled),
            Err(RecvTimeoutError::Disconnected) => {
                return Err(BodyError::Broken("the HTTP worker stopped unexpectedly".into()));
            }
        }
    }
}

/// The first value of header `name` in a lower-cased header list.
pub fn header_value<'a>(headers: &'a [(String, String)], name: &str) -> Option<&'a str> {
    let name = name.to_ascii_lowercase();
    headers.iter().find(|(k, _)| *k == name).map(|(_, v)| v.as_str())
}

impl HttpClient {
    /// Build a client (one agent, one pool) from `config`.
    pub fn new(config: HttpConfig) -> Self {
        let agent: ureq::Agent = ureq::Agent::config_builder()
            .http_status_as_error(false)
            .timeout_connect(Some(config.connect_timeout))
            // The worker thread's own backstops; the caller enforces the real deadlines. With the per-read
            // limit a worker abandoned by a cancel against a silent server ends after the idle timeout,
            // not after the whole total.
            .timeout_global(Some(config.total_timeout + Duration::from_secs(5)))
            .timeout_per_read(Some(config.idle_timeout + Duration::from_secs(1)))
            .user_agent(concat!("tooloop/", env!("CARGO_PKG_VERSION")))
            .build()
            .into();
        HttpClient { agent, config }
    }

    /// The configuration.
    pub fn config(&self) -> &HttpConfig {
        &self.config
    }

    /// One attempt: send `req` and wait for the response head (not retried here).
    pub fn send_once(&self, req: &HttpRequest, cancel: &CancelToken) -> Result<HttpResponse> {
        let (tx, rx) = mpsc::sync_channel::<Msg>(64);
        let agent = self.agent.clone();
        let req = req.clone();
        let worker_cancel = cancel.clone();
        let spawned = std::thread::Builder::new().name("tooloop-http".into()).spawn(move || {
            let mut builder = agent.post(&req.url);
            for (k, v) in &req.headers {
                builder = builder.header(k.as_str(), v.as_str());
            }
            let response = match builder.send(&req.body[..]) {
                Ok(r) => r,
                Err(e) => {
                    let timed_out = matches!(e, ureq::Error::Timeout(_));
                    let _ = tx.send(Msg::Failed(describe_ureq_error(&e), timed_out));
                    return;
                }
            };
            let status = response.status().as_u16();
            let headers = response
                .headers()
                .iter()
                .map(|(k, v)| (k.as_str().to_ascii_lowercase(), String::from_utf8_lossy(v.as_bytes()).into_owned()))
                .collect();
            if tx.send(Msg::Head { status, headers }).is_err() {
                return;
            }
            let mut reader = response.into_body().into_with_config().limit(u64::MAX).reader();
            let mut buf = vec![0u8; 16 * 1024];
            loop {
                if worker_cancel.is_cancelled() {
                    return;
                }
                match reader.read(&mut buf) {
                    Ok(0) => {
                        let _ = tx.send(Msg::End);
                        return;
                    }
                    Ok(n) => {
                        if tx.send(Msg::Chunk(buf[..n].to_vec())).is_err() {
                            return;
                        }
                    }
                    Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
                    Err(e) => {
                        let _ = tx.send(Msg::Failed(format!("reading the response body: {e}"), false));
                        return;
                    }
                }
            }
        });
        if let Err(e) = spawned {
            return Err(Error::Connection { message: format!("could not start the HTTP worker thread: {e}") });
        }
        let deadline = Instant::now() + self.config.total_timeout;
        let head = wait(&rx, cancel, self.config.idle_timeout, deadline, self.config.total_timeout);
        match head {
            Ok(Msg::Head { status, headers }) => Ok(HttpResponse {
                status,
                headers,
                rx,
                cancel: cancel.clone(),
                idle: self.config.idle_timeout,
                deadline,
                total: self.config.total_timeout,
                done: false,
            }),
            Ok(Msg::Failed(_, true)) => {
                Err(Error::Timeout { phase: "connect", after: self.config.connect_timeout, partial: None })
            }
            Ok(Msg::Failed(message, false)) => Err(Error::Connection { message }),
            Ok(_) => Err(Error::Connection { message: "response body before its head".into() }),
            Err(BodyError::Cancelled) => Err(Error::Cancelled { partial: None }),
            Err(BodyError::Timeout(phase, after)) => Err(Error::Timeout { phase, after, partial: None }),
            Err(BodyError::Broken(message)) => Err(Error::Connection { message }),
        }
    }

    /// Send with retries: connection errors and retryable statuses are retried with back-off (honouring
    /// `retry-after-ms`, `retry-after` and `x-should-retry`). Returns a response with a 2xx status whose body
    /// is still to be read, or the final error. `api_error` turns an error response into an [`ApiError`].
    pub fn send(&self, req: &HttpRequest, cancel: &CancelToken, api_error: ApiErrorFn<'_>) -> Result<HttpResponse> {
        self.exchange(req, cancel, api_error, &mut |resp| Ok(resp))
    }

    /// Like [`HttpClient::send`], and `read` consumes each 2xx response within the same retry budget: a body
    /// that fails before anything reached the caller ([`Attempt::Retry`]) is retried like a connection error
    /// (the official SDKs retry only up to the response head, so a stream cut before its first event
    /// surfaces as a raw error there).
    pub fn exchange<T>(
        &self,
        req: &HttpRequest,
        cancel: &CancelToken,
        api_error: ApiErrorFn<'_>,
        read: &mut dyn FnMut(HttpResponse) -> std::result::Result<T, Attempt>,
    ) -> Result<T> {
        let mut attempt: u32 = 0;
        loop {
            // The worker would send the request before anyone looks at the token: a run cancelled between
            // turns must not spend a request (and tokens) whose answer nobody will read.
            if cancel.is_cancelled() {
                return Err(Error::Cancelled { partial: None });
            }
            let outcome = self.send_once(req, cancel);
            let (err, server_wait) = match outcome {
                Ok(resp) if resp.status < 300 => match read(resp) {
                    Ok(t) => return Ok(t),
                    Err(Attempt::Fail(e)) => return Err(e),
                    Err(Attempt::Retry(e)) => {
                        let wait = e.api().and_then(|a| a.retry_after);
                        (e, wait)
                    }
                },
                Ok(mut resp) => {
                    let body = match resp.read_all() {
                        Ok(b) => b,
                        Err(BodyError::Cancelled) => return Err(Error::Cancelled { partial: None }),
                        Err(_) => Vec::new(),
                    };
                    let e = api_error(resp.status, &resp.headers, &body);
                    let should = should_retry(resp.status, &resp.headers);
                    if !should {
                        return Err(Error::Api(Box::new(e)));
                    }
                    let wait = e.retry_after;
                    (Error::Api(Box::new(e)), wait)
                }
                Err(e @ (Error::Connection { .. } | Error::Timeout { .. })) => (e, None),
                Err(e) => return Err(e),
            };
            if attempt >= self.config.max_retries {
                return Err(err);
            }
            let delay = match server_wait {
                Some(d) if d <= self.config.max_retry_after => d,
                Some(_) => return Err(err),
                None => self.backoff(attempt),
            };
            attempt += 1;
            if cancel.sleep(delay) {
                return Err(Error::Cancelled { partial: None });
            }
        }
    }

    /// Back-off before retry `attempt + 1`: initial × 2^attempt, capped, minus up to 25 % jitter.
    fn backoff(&self, attempt: u32) -> Duration {
        let base = self.config.initial_backoff.saturating_mul(1u32 << attempt.min(16));
        let capped = base.min(self.config.max_backoff);
        capped.mul_f64(1.0 - 0.25 * jitter_fraction())
    }
}

/// Whether a failed response should be retried: `x-should-retry` wins, else 408, 409, 429 and ≥ 500.
pub fn should_retry(status: u16, headers: &[(String, String)]) -> bool {
    match header_value(headers, "x-should-retry") {
        Some("true") => return true,
        Some("false") => return false,
        _ => {}
    }
    matches!(status, 408 | 409 | 429) || status >= 500
}

/// `retry-after-ms` (milliseconds) or `retry-after` (seconds, or an HTTP date — not parsed, ignored).
pub fn retry_after(headers: &[(String, String)]) -> Option<Duration> {
    if let Some(ms) = header_value(headers, "retry-after-ms").and_then(|v| v.trim().parse::<f64>().ok()) {
        if ms >= 0.0 && ms.is_finite() {
            return Some(Duration::from_secs_f64(ms / 1000.0));
        }
    }
    let secs = header_value(headers, "retry-after").and_then(|v| v.trim().parse::<f64>().ok())?;
    (secs >= 0.0 && secs.is_finite()).then(|| Duration::from_secs_f64(secs))
}

/// A number in [0, 1) that differs between calls; jitter needs spread, not cryptographic randomness.
fn jitter_fraction() -> f64 {
    use std::collections::hash_map::RandomState;
    use std::hash::{BuildHasher, Hasher};
    let mut h = RandomState::new().build_hasher();
    h.write_u128(Instant::now().elapsed().as_nanos());
    (h.finish() >> 11) as f64 / (1u64 << 53) as f64
}

fn describe_ureq_error(e: &ureq::Error) -> String {
    match e {
        ureq::Error::Io(io) => format!("{io}"),
        ureq::Error::ConnectionFailed => "connection failed".into(),
        ureq::Error::HostNotFound => "host not found".into(),
        ureq::Error::Timeout(t) => format!("timeout ({t})"),
        other => other.to_string(),
    }
}

/// Build an [`ApiError`] from an error response in the Anthropic/OpenAI shape
/// (`{"error": {"type", "message"}}`), falling back to the raw text.
pub fn parse_api_error(status: u16, headers: &[(String, String)], body: &[u8]) -> ApiError {
    let json: Option<serde_json::Value> = serde_json::from_slice(body).ok();
    let err = json.as_ref().and_then(|j| j.get("error"));
    let error_type =
        err.and_then(|e| e.get("type").or_else(|| e.get("code"))).and_then(|t| t.as_str()).unwrap_or("").to_string();
    let message = err
        .and_then(|e| e.get("message"))
        .and_then(|m| m.as_str())
        .map(str::to_string)
        .or_else(|| err.and_then(|e| e.as_str()).map(str::to_string))
        .unwrap_or_else(|| {
            let text = String::from_utf8_lossy(body);
            let text = text.trim();
            if text.is_empty() { format!("HTTP status {status} with an empty body") } else { truncate(text, 500) }
        });
    ApiError {
        kind: ApiErrorKind::classify(status, &error_type),
        status,
        error_type,
        message,
        request_id: header_value(headers, "request-id")
            .or_else(|| header_value(headers, "x-request-id"))
            .map(str::to_string),
        retry_after: retry_after(headers),
        hint: None,
    }
}

fn truncate(s: &str, max: usize) -> String {
    if s.len() <= max {
        return s.to_string();
    }
    let mut end = max;
    while !s.is_char_boundary(end) {
        end -= 1;
    }
    format!("{}…", &s[..end])
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    fn h(pairs: &[(&str, &str)]) -> Vec<(String, String)> {
        pairs.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect()
    }

    /// The worker stops when it sees the cancel, dropping its sender: if that lands while the reader is in
    /// `recv_timeout`, the reader must report the cancel, not "the HTTP worker stopped unexpectedly" (a
    /// race that made the cancel tests of the agent, Python and C suites flaky).
    #[test]
    fn a_worker_that_stops_on_cancel_reads_as_cancelled_not_broken() {
        for _ in 0..20 {
            let (tx, rx) = std::sync::mpsc::channel::<Msg>();
            let cancel = CancelToken::new();
            let worker_cancel = cancel.clone();
            let worker = std::thread::spawn(move || {
                std::thread::sleep(Duration::from_millis(3));
                worker_cancel.cancel();
                drop(tx);
            });
            let got =
                wait(&rx, &cancel, Duration::from_secs(5), Instant::now() + Duration::from_secs(5), Duration::ZERO);
            worker.join().unwrap();
            assert!(matches!(got, Err(BodyError::Cancelled)), "{:?}", got.err());
        }
    }

    #[test]
    fn retry_after_ms_wins_over_seconds() {
        assert_eq!(
            retry_after(&h(&[("retry-after-ms", "250"), ("retry-after", "9")])),
            Some(Duration::from_millis(250))
        );
        assert_eq!(retry_after(&h(&[("retry-after", "2")])), Some(Duration::from_secs(2)));
        assert_eq!(retry_after(&h(&[("retry-after", "Wed, 21 Oct 2015 07:28:00 GMT")])), None);
    }

    #[test]
    fn x_should_retry_overrides_status() {
        assert!(!should_retry(529, &h(&[("x-should-retry", "false")])));
        assert!(should_retry(400, &h(&[("x-should-retry", "true")])));
        assert!(should_retry(429, &[]));
        assert!(should_retry(408, &[]));
        assert!(!should_retry(404, &[]));
    }

    #[test]
    fn a_worker_that_quit_on_cancel_reads_as_cancelled_not_broken() {
        // The worker sees the token between two reads and drops its end while the caller is inside
        // recv_timeout: the caller finds a closed channel, not the token, first.
        let (tx, rx) = mpsc::sync_channel::<Msg>(1);
        let cancel = CancelToken::new();
        let worker_cancel = cancel.clone();
        let worker = std::thread::spawn(move || {
            std::thread::sleep(Duration::from_millis(60));
            worker_cancel.cancel();
            drop(tx);
        });
        let far = Instant::now() + Duration::from_secs(5);
        let r = wait(&rx, &cancel, Duration::from_secs(5), far, Duration::from_secs(5));
        worker.join().unwrap();
        assert!(matches!(r, Err(BodyError::Cancelled)), "{:?}", r.err());
        // Without a cancel, a vanished worker is a broken body.
        let (tx, rx) = mpsc::sync_channel::<Msg>(1);
        drop(tx);
        let r = wait(&rx, &CancelToken::new(), Duration::from_secs(5), far, Duration::from_secs(5));
        assert!(matches!(r, Err(BodyError::Broken(_))));
    }

    #[test]
    fn backoff_doubles_and_caps() {
        let c = HttpClient::new(HttpConfig::default());
        let d0 = c.backoff(0);
        assert!(d0 <= Duration::from_millis(500) && d0 >= Duration::from_millis(375));
        assert!(c.backoff(10) <= Duration::from_secs(8));
        assert!(c.backoff(2) >= Duration::from_millis(1500));
    }

    #[test]
    fn api_error_body_parsed_and_raw_fallback() {
        let e = parse_api_error(
            529,
            &h(&[("request-id", "req_1")]),
            br#"{"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}"#,
        );
        assert_eq!(
            (e.kind, e.error_type.as_str(), e.message.as_str()),
            (ApiErrorKind::Overloaded, "overloaded_error", "Overloaded")
        );
        assert_eq!(e.request_id.as_deref(), Some("req_1"));
        let raw = parse_api_error(502, &[], b"<html>bad gateway</html>");
        assert_eq!(raw.kind, ApiErrorKind::InternalServer);
        assert!(raw.message.contains("bad gateway"));
    }
}
