//! HTTP over one reusable ureq agent: timeouts, retries with back-off, and cancellation of blocking reads.
//!
//! ureq is blocking on purpose (tooloop is a synchronous library: no async runtime leaks into hosts). The
//! exchange runs on the calling thread: every connection the agent opens is wrapped (`Watched`) so that
//! waiting for input happens in short slices (≤ 20 ms socket timeouts). Between slices the wrapper checks the
//! request's cancel token and its idle/total deadlines — found in a thread-local set by [`HttpClient::send_once`]
//! and [`HttpResponse::next_chunk`] around their blocking calls — and runs the thread's poll hook, if any
//! ([`with_poll_hook`]: a host's chance to notice e.g. a Ctrl+C). Cancel or a timeout therefore ends a wait for
//! the response head or for body bytes within one slice, without a thread hop per request. A slice that
//! expires appends nothing to the transport's buffer (TCP) or keeps partial TLS records in rustls's buffer, so
//! the connection stays usable. Host names are looked up on a helper thread, waited for in slices too, and
//! cached for 30 s (ureq would otherwise resolve, on a new thread, before every request, pooled connection or
//! not). A new TCP connection is opened on a short-lived helper thread (`CancellableTcp`) and waited for in
//! slices too (a pooled connection skips this); the TLS handshake is bounded by the connect timeout. A thread
//! that batches the events it hands on can flush them whenever a request is about to wait for the network
//! ([`with_wait_hook`]).
//!
//! Must never: retry after any body content has been handed to the caller (that duplicates output), or log
//! header values (they carry the API key).

use std::cell::RefCell;
use std::io::Read;
use std::rc::Rc;
use std::time::{Duration, Instant};

use ureq::unversioned::transport::{
    Buffers, ConnectProxyConnector, ConnectionDetails, Connector, NextTimeout, RustlsConnector, Transport,
    time::Duration as UDuration,
};

use crate::cancel::CancelToken;
use crate::error::{ApiError, ApiErrorKind, Error, Result};

/// The longest socket wait before the cancel token and the deadlines are looked at again.
const SLICE: Duration = Duration::from_millis(20);

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
            total_timeout: Duration::from_secs(crate::defaults::TIMEOUT_SECS),
            max_retries: crate::defaults::MAX_RETRIES,
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

/// Why a watched wait stopped early.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Stop {
    Cancelled,
    Idle,
    Total,
}

/// What the blocking calls on this thread are watched for: set by [`Watching::enter`], read by [`Watched`].
struct Watch {
    cancel: CancelToken,
    idle: Duration,
    deadline: Instant,
    stop: Option<Stop>,
}

thread_local! {
    static WATCH: RefCell<Option<Watch>> = const { RefCell::new(None) };
    static WAIT: RefCell<Option<Rc<dyn Fn()>>> = const { RefCell::new(None) };
}

/// Run `f` with `hook` as this thread's wait hook: it runs each time a request made by `f` on this thread is
/// about to wait for more bytes from the network. A host that batches the events it receives delivers the
/// batch there, so nothing decoded is held back while the stream is quiet (and a fast stream is handed over
/// a network read at a time, not an event at a time). Nested calls stack.
pub fn with_wait_hook<R>(hook: Rc<dyn Fn()>, f: impl FnOnce() -> R) -> R {
    struct Restore(Option<Rc<dyn Fn()>>);
    impl Drop for Restore {
        fn drop(&mut self) {
            let prev = self.0.take();
            WAIT.with_borrow_mut(|cur| *cur = prev);
        }
    }
    let prev = WAIT.with_borrow_mut(|cur| cur.replace(hook));
    let _restore = Restore(prev);
    f()
}

/// Run the wait hook, if one is set.
fn before_wait() {
    let hook = WAIT.with_borrow(|cur| cur.clone());
    if let Some(h) = hook {
        h();
    }
}

/// The watch of the current thread, for the duration of one blocking call (restores the previous one).
struct Watching {
    prev: Option<Watch>,
}

impl Watching {
    fn enter(cancel: &CancelToken, idle: Duration, deadline: Instant) -> Watching {
        let w = Watch { cancel: cancel.clone(), idle, deadline, stop: None };
        Watching { prev: WATCH.with_borrow_mut(|cur| cur.replace(w)) }
    }

    /// Why a wait under this watch gave up, if it did.
    fn stop(&self) -> Option<Stop> {
        WATCH.with_borrow(|cur| cur.as_ref().and_then(|w| w.stop))
    }
}

impl Drop for Watching {
    fn drop(&mut self) {
        let prev = self.prev.take();
        WATCH.with_borrow_mut(|cur| *cur = prev);
    }
}

fn set_stop(stop: Stop) {
    WATCH.with_borrow_mut(|cur| {
        if let Some(w) = cur {
            w.stop.get_or_insert(stop);
        }
    });
}

pub use crate::cancel::with_poll_hook;
use crate::cancel::{poll, sleep_watched};

/// How long a resolved host name is reused. ureq resolves the host before it looks in its pool, i.e. on every
/// request, and with a timeout it does so on a new thread: one thread and one DNS lookup per request.
const RESOLVED_FOR: Duration = Duration::from_secs(30);

/// ureq's resolver, with IP literals answered directly and host names cached for [`RESOLVED_FOR`]; with
/// `refuse` set, an answer holding a refused address fails the connection (see
/// [`HttpClient::with_address_check`]).
#[derive(Debug, Default)]
struct CachingResolver {
    inner: ureq::unversioned::resolver::DefaultResolver,
    cache: std::sync::Mutex<Vec<(String, Instant, ureq::unversioned::resolver::ResolvedSocketAddrs)>>,
    refuse: Option<fn(std::net::IpAddr) -> bool>,
}

impl ureq::unversioned::resolver::Resolver for CachingResolver {
    fn resolve(
        &self,
        uri: &ureq::http::Uri,
        config: &ureq::config::Config,
        timeout: NextTimeout,
    ) -> std::result::Result<ureq::unversioned::resolver::ResolvedSocketAddrs, ureq::Error> {
        let addrs = self.lookup(uri, config, timeout)?;
        if let Some(ip) = self.refuse.and_then(|refuse| addrs.iter().map(|a| a.ip()).find(|ip| refuse(*ip))) {
            return Err(ureq::Error::Io(std::io::Error::new(
                std::io::ErrorKind::PermissionDenied,
                format!(
                    "{} resolved to {ip}, an address this client never connects to (link-local or cloud \
                     metadata)",
                    uri.host().unwrap_or("the host")
                ),
            )));
        }
        Ok(addrs)
    }
}

impl CachingResolver {
    fn lookup(
        &self,
        uri: &ureq::http::Uri,
        config: &ureq::config::Config,
        timeout: NextTimeout,
    ) -> std::result::Result<ureq::unversioned::resolver::ResolvedSocketAddrs, ureq::Error> {
        use ureq::unversioned::resolver::Resolver as _;
        let host = uri.host().unwrap_or("");
        let port = uri.port_u16().or_else(|| match uri.scheme_str() {
            Some("https") => Some(443),
            Some("http") => Some(80),
            _ => None,
        });
        let (Some(port), false) = (port, host.is_empty()) else {
            return self.inner.resolve(uri, config, timeout);
        };
        if let Ok(ip) = host.trim_start_matches('[').trim_end_matches(']').parse::<std::net::IpAddr>() {
            let mut out = self.empty();
            out.push(std::net::SocketAddr::new(ip, port));
            return Ok(out);
        }
        let key = format!("{host}:{port}");
        let now = Instant::now();
        {
            let mut cache = self.cache.lock().unwrap_or_else(|e| e.into_inner());
            cache.retain(|(_, at, _)| now.duration_since(*at) < RESOLVED_FOR);
            if let Some((_, _, addrs)) = cache.iter().find(|(k, _, _)| *k == key) {
                return Ok(addrs.clone());
            }
        }
        let addrs = resolve_watched(&key, config, timeout, self.empty())?;
        let mut cache = self.cache.lock().unwrap_or_else(|e| e.into_inner());
        if cache.len() < 64 {
            cache.push((key, now, addrs.clone()));
        }
        Ok(addrs)
    }
}

/// Look `host_port` up on a helper thread (as ureq does when a timeout is set), waiting in slices so a cancel
/// (or the poll hook) ends the wait promptly; the helper then finishes on its own.
fn resolve_watched(
    host_port: &str,
    config: &ureq::config::Config,
    timeout: NextTimeout,
    mut out: ureq::unversioned::resolver::ResolvedSocketAddrs,
) -> std::result::Result<ureq::unversioned::resolver::ResolvedSocketAddrs, ureq::Error> {
    use std::net::ToSocketAddrs;
    let (tx, rx) = std::sync::mpsc::sync_channel(1);
    let addr = host_port.to_string();
    std::thread::Builder::new()
        .name("tooloop-dns".into())
        .spawn(move || {
            let _ = tx.send(addr.to_socket_addrs().map(|a| a.collect::<Vec<_>>()));
        })
        .map_err(ureq::Error::Io)?;
    let started = Instant::now();
    let watch = WATCH.with_borrow(|cur| cur.as_ref().map(|w| (w.cancel.clone(), w.deadline)));
    let found = loop {
        match &watch {
            Some((cancel, _)) => cancel.poll(false),
            None => poll(false),
        }
        if let Some((cancel, deadline)) = &watch {
            let stop = if cancel.is_cancelled() {
                Some(Stop::Cancelled)
            } else if Instant::now() >= *deadline {
                Some(Stop::Total)
            } else {
                None
            };
            if let Some(stop) = stop {
                set_stop(stop);
                return Err(ureq::Error::Timeout(timeout.reason));
            }
        }
        if let UDuration::Exact(d) = timeout.after {
            if started.elapsed() >= d {
                return Err(ureq::Error::Timeout(timeout.reason));
            }
        }
        match rx.recv_timeout(SLICE) {
            Ok(Ok(found)) => break found,
            Ok(Err(e)) => return Err(ureq::Error::Io(e)),
            Err(std::sync::mpsc::RecvTimeoutError::Timeout) => continue,
            Err(std::sync::mpsc::RecvTimeoutError::Disconnected) => return Err(ureq::Error::HostNotFound),
        }
    };
    for a in config.ip_family().keep_wanted(found.into_iter()).take(16) {
        out.push(a);
    }
    if out.is_empty() { Err(ureq::Error::HostNotFound) } else { Ok(out) }
}

/// Opens TCP connections (ureq's own [`TcpConnector`]) so that the wait can be cancelled: a connect cannot
/// be interrupted from its thread, so a new connection is opened on a short-lived thread while the caller
/// waits in slices watched for cancel, the deadlines and the poll hook, like every other wait. Only new
/// connections pay for the thread; a pooled one never comes here. Abandoned on cancel, the thread ends by
/// itself within the connect timeout and its socket is closed.
#[derive(Debug)]
struct CancellableTcp;

/// The resolver a connect thread's [`ConnectionDetails`] name (the TCP connector does not resolve).
static NO_RESOLVE: once_cell::sync::Lazy<ureq::unversioned::resolver::DefaultResolver> =
    once_cell::sync::Lazy::new(Default::default);

impl<In: Transport> Connector<In> for CancellableTcp {
    type Out = ureq::unversioned::transport::Either<In, Box<dyn Transport>>;

    fn connect(
        &self,
        details: &ConnectionDetails,
        chained: Option<In>,
    ) -> std::result::Result<Option<Self::Out>, ureq::Error> {
        use ureq::unversioned::transport::{Either, TcpConnector};
        if let Some(c) = chained {
            // A proxy already connected us.
            return Ok(Some(Either::A(c)));
        }
        let boxed = |t: Option<Either<(), _>>| t.map(|t| Either::B(Box::new(t) as Box<dyn Transport>));
        let watch = WATCH.with_borrow(|cur| cur.as_ref().map(|w| (w.cancel.clone(), w.deadline)));
        let Some((cancel, deadline)) = watch else {
            return <TcpConnector as Connector<()>>::connect(&TcpConnector::default(), details, None).map(boxed);
        };
        let (uri, addrs, config) = (details.uri.clone(), details.addrs.clone(), details.config.clone());
        let (request_level, now, timeout) = (details.request_level, details.now, details.timeout);
        let (current_time, run_connector, register_shutdown) =
            (details.current_time.clone(), details.run_connector.clone(), details.register_shutdown.clone());
        let (tx, rx) = std::sync::mpsc::channel();
        std::thread::Builder::new()
            .name("tooloop-connect".into())
            .spawn(move || {
                let details = ConnectionDetails {
                    uri: &uri,
                    addrs,
                    config: &config,
                    request_level,
                    resolver: &*NO_RESOLVE,
                    now,
                    timeout,
                    current_time,
                    run_connector,
                    register_shutdown,
                };
                let opened = <TcpConnector as Connector<()>>::connect(&TcpConnector::default(), &details, None);
                let _ = tx.send(opened.map(boxed));
            })
            .map_err(ureq::Error::Io)?;
        loop {
            cancel.poll(false);
            let stop = if cancel.is_cancelled() {
                Some(Stop::Cancelled)
            } else if Instant::now() >= deadline {
                Some(Stop::Total)
            } else {
                None
            };
            if let Some(stop) = stop {
                set_stop(stop);
                return Err(ureq::Error::Timeout(ureq::Timeout::Connect));
            }
            match rx.recv_timeout(SLICE) {
                Ok(opened) => return opened,
                Err(std::sync::mpsc::RecvTimeoutError::Timeout) => {}
                Err(std::sync::mpsc::RecvTimeoutError::Disconnected) => {
                    return Err(ureq::Error::Io(std::io::Error::other("the connect thread ended without an answer")));
                }
            }
        }
    }
}

/// Wraps every transport of the agent so that waits happen in slices watched for cancel and deadlines.
#[derive(Debug)]
struct WatchConnector;

impl<In: Transport> Connector<In> for WatchConnector {
    type Out = Watched;

    fn connect(
        &self,
        _details: &ConnectionDetails,
        chained: Option<In>,
    ) -> std::result::Result<Option<Watched>, ureq::Error> {
        Ok(chained.map(|inner| Watched { inner: Box::new(inner) }))
    }
}

/// A transport whose input waits are sliced (see the module docs).
#[derive(Debug)]
struct Watched {
    inner: Box<dyn Transport>,
}

fn is_timeout(e: &ureq::Error) -> bool {
    match e {
        ureq::Error::Timeout(_) => true,
        ureq::Error::Io(io) => matches!(io.kind(), std::io::ErrorKind::TimedOut | std::io::ErrorKind::WouldBlock),
        _ => false,
    }
}

impl Transport for Watched {
    fn buffers(&mut self) -> &mut dyn Buffers {
        self.inner.buffers()
    }

    fn transmit_output(&mut self, amount: usize, timeout: NextTimeout) -> std::result::Result<(), ureq::Error> {
        let cancelled = WATCH.with_borrow(|cur| cur.as_ref().is_some_and(|w| w.cancel.is_cancelled()));
        if cancelled {
            set_stop(Stop::Cancelled);
            return Err(ureq::Error::Timeout(timeout.reason));
        }
        // The remaining global budget changes with every call, and the TCP transport re-arms the socket's send
        // timeout whenever it changes (a syscall per write): round it down to whole seconds (it is a backstop).
        let timeout = match timeout.after {
            UDuration::Exact(d) if d > Duration::from_secs(2) => {
                NextTimeout { after: UDuration::Exact(Duration::from_secs(d.as_secs())), ..timeout }
            }
            _ => timeout,
        };
        self.inner.transmit_output(amount, timeout)
    }

    fn await_input(&mut self, timeout: NextTimeout) -> std::result::Result<bool, ureq::Error> {
        before_wait();
        let watch = WATCH.with_borrow(|cur| cur.as_ref().map(|w| (w.cancel.clone(), w.idle, w.deadline)));
        let Some((cancel, idle, deadline)) = watch else {
            return self.inner.await_input(timeout);
        };
        // ureq's own budget (global, per-read) is applied here; the slices below carry what is left of it.
        let budget = timeout.for_read();
        let started = Instant::now();
        let idle_deadline = started + idle;
        loop {
            cancel.poll(false);
            let now = Instant::now();
            let stop = if cancel.is_cancelled() {
                Some(Stop::Cancelled)
            } else if now >= deadline {
                Some(Stop::Total)
            } else if now >= idle_deadline {
                Some(Stop::Idle)
            } else {
                None
            };
            if let Some(stop) = stop {
                set_stop(stop);
                return Err(ureq::Error::Timeout(budget.reason));
            }
            let (after, last) = match budget.after {
                UDuration::NotHappening => (SLICE, false),
                UDuration::Exact(d) => {
                    let left = d.saturating_sub(now - started);
                    if left.is_zero() {
                        return Err(ureq::Error::Timeout(budget.reason));
                    }
                    if left <= SLICE { (left, true) } else { (SLICE, false) }
                }
            };
            let slice = NextTimeout { after: UDuration::Exact(after), per_read: None, ..budget };
            match self.inner.await_input(slice) {
                Err(e) if !last && is_timeout(&e) => continue,
                other => return other,
            }
        }
    }

    fn is_open(&mut self) -> bool {
        self.inner.is_open()
    }

    fn is_tls(&self) -> bool {
        self.inner.is_tls()
    }
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

/// A response whose body is still arriving. Read it on the thread that sent the request or any other.
pub struct HttpResponse {
    /// HTTP status.
    pub status: u16,
    /// Headers, names lower-cased.
    pub headers: Vec<(String, String)>,
    reader: ureq::BodyReader<'static>,
    buf: Vec<u8>,
    cancel: CancelToken,
    idle: Duration,
    deadline: Instant,
    total: Duration,
    done: bool,
    /// Whether the last read filled `buf` (the next one gets a bigger buffer, up to [`READ_MAX`]).
    filled: bool,
}

/// The first read buffer of a body, and the largest it grows to (see [`HttpResponse::next_slice`]).
const READ_MIN: usize = 4 * 1024;
const READ_MAX: usize = 16 * 1024;

thread_local! {
    /// The read buffer of the last body dropped on this thread, for the next one: a thread that makes one
    /// request after another zeroes no new buffer per response.
    static SPARE: RefCell<Vec<u8>> = const { RefCell::new(Vec::new()) };
}

/// A read buffer: this thread's spare one if it has one, else a new one of [`READ_MIN`] bytes.
fn spare_buffer() -> Vec<u8> {
    let spare = SPARE.with_borrow_mut(std::mem::take);
    if spare.is_empty() { vec![0u8; READ_MIN] } else { spare }
}

impl Drop for HttpResponse {
    fn drop(&mut self) {
        if !self.buf.is_empty() {
            let buf = std::mem::take(&mut self.buf);
            // `try_with`: a response dropped while the thread's locals are being torn down keeps nothing.
            let _ = SPARE.try_with(|spare| {
                if let Ok(mut spare) = spare.try_borrow_mut()
                    && spare.len() < buf.len()
                {
                    *spare = buf;
                }
            });
        }
    }
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

    /// Cancel and the total deadline win over bytes already buffered.
    fn check(&self) -> Result<(), BodyError> {
        if self.cancel.is_cancelled() {
            return Err(BodyError::Cancelled);
        }
        if Instant::now() >= self.deadline {
            return Err(BodyError::Timeout("total", self.total));
        }
        Ok(())
    }

    fn failed(&mut self, stop: Option<Stop>, e: &std::io::Error) -> BodyError {
        self.done = true;
        match stop {
            Some(Stop::Cancelled) => BodyError::Cancelled,
            Some(Stop::Total) => BodyError::Timeout("total", self.total),
            Some(Stop::Idle) => BodyError::Timeout("idle", self.idle),
            None if self.cancel.is_cancelled() => BodyError::Cancelled,
            None => BodyError::Broken(format!("reading the response body: {e}")),
        }
    }

    /// The next piece of the body, as soon as it arrives; `Ok(None)` at the end.
    pub fn next_chunk(&mut self) -> Result<Option<Vec<u8>>, BodyError> {
        self.next_slice().map(|s| s.map(<[u8]>::to_vec))
    }

    /// Like [`HttpResponse::next_chunk`], borrowing the bytes from the response's read buffer (valid until the
    /// next read): a stream decoder that copies what it keeps needs no allocation per read.
    pub fn next_slice(&mut self) -> Result<Option<&[u8]>, BodyError> {
        if self.done {
            return Ok(None);
        }
        if let Err(e) = self.check() {
            self.done = true;
            return Err(e);
        }
        // The buffer starts small and doubles whenever a read fills it: a short answer (most of them) zeroes
        // a few KB, not a big buffer it never uses; a long fast stream soon reads READ_MAX at a time.
        if self.buf.is_empty() {
            self.buf = spare_buffer();
        } else if self.filled && self.buf.len() < READ_MAX {
            self.buf.resize(self.buf.len() * 2, 0);
        }
        let watching = Watching::enter(&self.cancel, self.idle, self.deadline);
        loop {
            match self.reader.read(&mut self.buf) {
                Ok(0) => {
                    self.done = true;
                    return Ok(None);
                }
                Ok(n) => {
                    self.filled = n == self.buf.len();
                    return Ok(Some(&self.buf[..n]));
                }
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
                Err(e) => {
                    let stop = watching.stop();
                    return Err(self.failed(stop, &e));
                }
            }
        }
    }

    /// Read and discard the rest of the body for at most `within` (and at most 64 KB), then give up quietly.
    /// A body read to its end lets its connection go back to the pool; one still open is closed when the
    /// response is dropped.
    pub fn drain(&mut self, within: Duration) {
        if self.done || self.check().is_err() {
            return;
        }
        let deadline = (Instant::now() + within).min(self.deadline);
        let _watching = Watching::enter(&self.cancel, within, deadline);
        // Read into the body's own buffer rather than a fresh one per call.
        if self.buf.is_empty() {
            self.buf = spare_buffer();
        }
        let mut left = 64 * 1024usize;
        loop {
            match self.reader.read(&mut self.buf) {
                Ok(0) => {
                    self.done = true;
                    return;
                }
                Ok(n) if n < left => left -= n,
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                _ => return,
            }
        }
    }

    /// Read the rest of the body.
    pub fn read_all(&mut self) -> Result<Vec<u8>, BodyError> {
        let mut out = Vec::new();
        if self.done {
            return Ok(out);
        }
        if let Err(e) = self.check() {
            self.done = true;
            return Err(e);
        }
        let watching = Watching::enter(&self.cancel, self.idle, self.deadline);
        match self.reader.read_to_end(&mut out) {
            Ok(_) => {
                self.done = true;
                Ok(out)
            }
            Err(e) => {
                let stop = watching.stop();
                Err(self.failed(stop, &e))
            }
        }
    }
}

/// Most same-origin redirects followed for one request.
pub const MAX_REDIRECTS: u32 = 5;

/// `scheme://host:port` of an absolute http(s) URL (the port made explicit), lower-cased; `None` otherwise.
pub fn origin_of(url: &str) -> Option<String> {
    let uri: ureq::http::Uri = url.parse().ok()?;
    let scheme = uri.scheme_str()?.to_ascii_lowercase();
    let port = match (uri.port_u16(), scheme.as_str()) {
        (Some(p), _) => p,
        (None, "http") => 80,
        (None, "https") => 443,
        _ => return None,
    };
    let host = uri.host()?.to_ascii_lowercase();
    Some(format!("{scheme}://{host}:{port}"))
}

/// Whether two absolute URLs share scheme, host and port (the browser's "same origin").
pub fn same_origin(a: &str, b: &str) -> bool {
    matches!((origin_of(a), origin_of(b)), (Some(x), Some(y)) if x == y)
}

/// The absolute URL a `Location` header names, relative to `base`.
fn redirect_target(base: &str, location: &str) -> Option<String> {
    let location = location.trim();
    if location.contains("://") {
        return Some(location.to_string());
    }
    let uri: ureq::http::Uri = base.parse().ok()?;
    let scheme = uri.scheme_str()?;
    let authority = uri.authority()?.as_str();
    if let Some(rest) = location.strip_prefix("//") {
        return Some(format!("{scheme}://{rest}"));
    }
    if location.starts_with('/') {
        return Some(format!("{scheme}://{authority}{location}"));
    }
    let dir = uri.path().rsplit_once('/').map_or("", |(d, _)| d);
    Some(format!("{scheme}://{authority}{dir}/{location}"))
}

/// The first value of header `name` in a lower-cased header list.
pub fn header_value<'a>(headers: &'a [(String, String)], name: &str) -> Option<&'a str> {
    let name = name.to_ascii_lowercase();
    headers.iter().find(|(k, _)| *k == name).map(|(_, v)| v.as_str())
}

impl HttpClient {
    /// Build a client (one agent, one pool) from `config`.
    pub fn new(config: HttpConfig) -> Self {
        Self::build(config, CachingResolver::default())
    }

    /// Like [`HttpClient::new`], and every connection checks the addresses its host name resolved to at
    /// that moment: one for which `refuse` is true fails the request before anything is connected. A check
    /// made on the URL before the request is not enough, because a host name may resolve to another address
    /// the next time (DNS rebinding); this one is made on the addresses the connection uses. (Through an HTTP
    /// proxy the proxy resolves the target, and only the proxy's own address is checked here.)
    pub fn with_address_check(config: HttpConfig, refuse: fn(std::net::IpAddr) -> bool) -> Self {
        Self::build(config, CachingResolver { refuse: Some(refuse), ..CachingResolver::default() })
    }

    fn build(config: HttpConfig, resolver: CachingResolver) -> Self {
        let ureq_config = ureq::Agent::config_builder()
            .http_status_as_error(false)
            .timeout_connect(Some(config.connect_timeout))
            // Backstops only: the watched waits enforce the real idle and total deadlines first.
            .timeout_global(Some(config.total_timeout + Duration::from_secs(5)))
            .timeout_per_read(Some(config.idle_timeout + Duration::from_secs(1)))
            .user_agent(concat!("tooloop/", env!("CARGO_PKG_VERSION")))
            // Redirects are ours to follow (see `send_once`): secret headers never go to another origin.
            .max_redirects(0)
            .build();
        // ureq's default chain (a CONNECT proxy, TCP, rustls), with connects made cancellable, then every
        // transport watched. (The crate is built without SOCKS or native-tls.)
        let connector =
            ().chain(ConnectProxyConnector::default())
                .chain(CancellableTcp)
                .chain(RustlsConnector::default())
                .chain(WatchConnector);
        let agent = ureq::Agent::with_parts(ureq_config, connector, resolver);
        HttpClient { agent, config }
    }

    /// The configuration.
    pub fn config(&self) -> &HttpConfig {
        &self.config
    }

    /// One attempt: send `req` and wait for the response head (not retried here). Runs on the calling
    /// thread; cancel and the idle/total timeouts end the wait within 20 ms.
    ///
    /// Redirects: ureq follows none (its own following would carry `x-api-key` and custom headers to
    /// wherever a `Location` points). A 307 or 308 to the same origin (scheme, host and port) is followed
    /// here, with the same method, body and headers, at most [`MAX_REDIRECTS`] times; a redirect to another
    /// origin, or a 301/302/303 (which would turn the POST into a GET), is an
    /// [`Error::InvalidResponse`] naming where it pointed, and nothing is sent there.
    pub fn send_once(&self, req: &HttpRequest, cancel: &CancelToken) -> Result<HttpResponse> {
        let mut url = req.url.clone();
        for _ in 0..=MAX_REDIRECTS {
            let resp = self.send_to(&url, req, cancel)?;
            if !matches!(resp.status, 301 | 302 | 303 | 307 | 308) {
                return Ok(resp);
            }
            let status = resp.status;
            let Some(location) = resp.header("location").map(str::to_string) else { return Ok(resp) };
            drop(resp);
            let target = redirect_target(&url, &location);
            let refuse = |why: String| Error::InvalidResponse { message: why, request_id: None };
            match target {
                Some(t) if same_origin(&url, &t) && matches!(status, 307 | 308) => url = t,
                Some(t) if same_origin(&url, &t) => {
                    return Err(refuse(format!(
                        "the server answered HTTP {status} (redirect) to {}; a POST is not re-sent as a GET: \
                         point the base URL at the new address",
                        crate::text::ellipsize(&t, 200)
                    )));
                }
                Some(t) => {
                    return Err(refuse(format!(
                        "the server at {} answered HTTP {status}, a redirect to another origin ({}); not followed, \
                         so the API key and headers are not sent there",
                        origin_of(&url).unwrap_or_default(),
                        origin_of(&t).unwrap_or_else(|| crate::text::ellipsize(&t, 200))
                    )));
                }
                None => {
                    return Err(refuse(format!(
                        "the server answered HTTP {status} with a redirect this client cannot follow: {}",
                        crate::text::ellipsize(&location, 200)
                    )));
                }
            }
        }
        Err(Error::InvalidResponse {
            message: format!("more than {MAX_REDIRECTS} redirects within the same server"),
            request_id: None,
        })
    }

    fn send_to(&self, url: &str, req: &HttpRequest, cancel: &CancelToken) -> Result<HttpResponse> {
        let deadline = Instant::now() + self.config.total_timeout;
        let watching = Watching::enter(cancel, self.config.idle_timeout, deadline);
        let mut builder = self.agent.post(url);
        for (k, v) in &req.headers {
            builder = builder.header(k.as_str(), v.as_str());
        }
        let sent = builder.send(&req.body[..]);
        let stop = watching.stop();
        drop(watching);
        self.response(sent, stop, cancel, deadline)
    }

    /// One GET of `url` with `headers` (tools such as `web_fetch`): no retry, and redirects are NOT followed
    /// (a 3xx comes back as it is, so the caller checks every hop itself and sends no credential along).
    /// Cancel and the idle/total timeouts work as in [`HttpClient::send_once`].
    pub fn get_once(&self, url: &str, headers: &[(String, String)], cancel: &CancelToken) -> Result<HttpResponse> {
        let deadline = Instant::now() + self.config.total_timeout;
        let watching = Watching::enter(cancel, self.config.idle_timeout, deadline);
        let mut builder = self.agent.get(url);
        for (k, v) in headers {
            builder = builder.header(k.as_str(), v.as_str());
        }
        let sent = builder.config().max_redirects(0).build().call();
        let stop = watching.stop();
        drop(watching);
        self.response(sent, stop, cancel, deadline)
    }

    /// The answer to one request, or the error its failure means (cancel and the timeouts named after the
    /// watch that stopped it). Shared by [`HttpClient::send_to`] and [`HttpClient::get_once`].
    fn response(
        &self,
        sent: std::result::Result<ureq::http::Response<ureq::Body>, ureq::Error>,
        stop: Option<Stop>,
        cancel: &CancelToken,
        deadline: Instant,
    ) -> Result<HttpResponse> {
        let response = match sent {
            Ok(r) => r,
            Err(e) => {
                return Err(match stop {
                    Some(Stop::Cancelled) => Error::Cancelled { partial: None },
                    Some(Stop::Idle) => {
                        Error::Timeout { phase: "idle", after: self.config.idle_timeout, partial: None }
                    }
                    Some(Stop::Total) => {
                        Error::Timeout { phase: "total", after: self.config.total_timeout, partial: None }
                    }
                    None if cancel.is_cancelled() => Error::Cancelled { partial: None },
                    None if matches!(e, ureq::Error::Timeout(_)) => {
                        Error::Timeout { phase: "connect", after: self.config.connect_timeout, partial: None }
                    }
                    None => Error::Connection { message: describe_ureq_error(&e) },
                });
            }
        };
        let status = response.status().as_u16();
        let headers = response
            .headers()
            .iter()
            .map(|(k, v)| (k.as_str().to_ascii_lowercase(), String::from_utf8_lossy(v.as_bytes()).into_owned()))
            .collect();
        let reader = response.into_body().into_with_config().limit(u64::MAX).reader();
        Ok(HttpResponse {
            status,
            headers,
            reader,
            buf: Vec::new(),
            cancel: cancel.clone(),
            idle: self.config.idle_timeout,
            deadline,
            total: self.config.total_timeout,
            done: false,
            filled: false,
        })
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
            // A run cancelled between turns must not spend a request (and tokens) whose answer nobody will
            // read: the token is looked at before anything is sent.
            if cancel.is_cancelled() {
                return Err(Error::Cancelled { partial: None });
            }
            // A batch's shared limits and budget (see crate::gate); no gate set: always go.
            if !crate::gate::admit(cancel, req.body.len()) {
                return Err(Error::Cancelled { partial: None });
            }
            let outcome = self.send_once(req, cancel);
            if let Ok(resp) = &outcome {
                crate::gate::report(cancel, resp.status, retry_after(&resp.headers));
            }
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
            // A span event in the model request's `chat` span (see crate::trace); nothing without a subscriber.
            tracing::event!(name: "retry", tracing::Level::INFO, {
                "tooloop.retry.attempt" = attempt,
                "tooloop.retry.delay_ms" = delay.as_millis() as u64,
                "error.type" = %err.error_type(),
            });
            if sleep_watched(cancel, delay) {
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
            if text.is_empty() {
                format!("HTTP status {status} with an empty body")
            } else {
                crate::text::ellipsize(text, 500)
            }
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

/// A base URL must be `http://` or `https://` with a host, and parse as a URI.
pub(crate) fn check_base_url(url: &str) -> std::result::Result<(), String> {
    let bad = |why: &str| format!("{why}, got {:?}; e.g. \"http://localhost:8080\"", crate::text::ellipsize(url, 80));
    if url.chars().any(|c| c.is_whitespace() || c.is_control()) {
        return Err(bad("must not contain spaces or control characters"));
    }
    let uri: ureq::http::Uri = url.parse().map_err(|_| bad("is not a valid URL"))?;
    match uri.scheme_str() {
        Some("http" | "https") => {}
        _ => return Err(bad("must start with http:// or https://")),
    }
    if uri.host().is_none_or(str::is_empty) {
        return Err(bad("has no host"));
    }
    Ok(())
}

/// A header name must be a valid HTTP token and its value free of CR, LF and other control characters.
pub(crate) fn check_header(name: &str, value: &str) -> std::result::Result<(), String> {
    if ureq::http::HeaderName::from_bytes(name.as_bytes()).is_err() {
        return Err(format!(
            "{:?} is not a valid header name (letters, digits and -, no spaces)",
            crate::text::ellipsize(name, 80)
        ));
    }
    if ureq::http::HeaderValue::from_str(value).is_err() || value.contains(['\r', '\n']) {
        return Err(format!("the value of header {name:?} must be printable text without line breaks"));
    }
    Ok(())
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    fn h(pairs: &[(&str, &str)]) -> Vec<(String, String)> {
        pairs.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect()
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

    /// A server on one socket: `answers` are (delay before the head, body pieces with a pause before each)
    /// for consecutive requests on the first connection. Returns the base URL and the count of connections.
    fn slow_server(
        answers: Vec<(u64, Vec<(u64, &'static str)>)>,
    ) -> (String, std::sync::Arc<std::sync::atomic::AtomicUsize>) {
        use std::io::{BufRead, BufReader, Write};
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let url = format!("http://{}/v1/messages", listener.local_addr().unwrap());
        let conns = std::sync::Arc::new(std::sync::atomic::AtomicUsize::new(0));
        let seen = conns.clone();
        std::thread::spawn(move || {
            let mut answers = answers.into_iter();
            for stream in listener.incoming() {
                let Ok(stream) = stream else { return };
                seen.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
                let mut reader = BufReader::new(stream.try_clone().unwrap());
                let mut out = stream;
                loop {
                    let mut len = 0usize;
                    loop {
                        let mut line = String::new();
                        if reader.read_line(&mut line).unwrap_or(0) == 0 {
                            break;
                        }
                        if let Some(v) = line.to_ascii_lowercase().strip_prefix("content-length:") {
                            len = v.trim().parse().unwrap();
                        }
                        if line == "\r\n" {
                            break;
                        }
                    }
                    let mut body = vec![0u8; len];
                    if reader.read_exact(&mut body).is_err() {
                        break;
                    }
                    let Some((head_delay, pieces)) = answers.next() else { return };
                    std::thread::sleep(Duration::from_millis(head_delay));
                    let total: usize = pieces.iter().map(|(_, p)| p.len()).sum();
                    let head = format!("HTTP/1.1 200 OK\r\ncontent-length: {total}\r\n\r\n");
                    if out.write_all(head.as_bytes()).is_err() {
                        break;
                    }
                    for (pause, piece) in pieces {
                        std::thread::sleep(Duration::from_millis(pause));
                        let _ = out.write_all(piece.as_bytes());
                    }
                }
            }
        });
        (url, conns)
    }

    fn post(url: &str) -> HttpRequest {
        HttpRequest { url: url.into(), headers: vec![], body: b"{}".to_vec() }
    }

    #[test]
    fn slices_that_expire_leave_the_connection_usable() {
        let (url, conns) = slow_server(vec![(120, vec![(0, "ab"), (70, "cd")]), (0, vec![(0, "ef")])]);
        let client = HttpClient::new(HttpConfig::default());
        let cancel = CancelToken::new();
        let mut r = client.send_once(&post(&url), &cancel).unwrap();
        assert_eq!(r.status, 200);
        let mut body = Vec::new();
        while let Some(c) = r.next_chunk().unwrap() {
            body.extend(c);
        }
        assert_eq!(body, b"abcd");
        let mut r = client.send_once(&post(&url), &cancel).unwrap();
        assert_eq!(r.read_all().unwrap(), b"ef");
        assert_eq!(conns.load(std::sync::atomic::Ordering::SeqCst), 1, "the connection was reused");
    }

    #[test]
    fn idle_timeout_while_waiting_for_the_head() {
        let (url, _) = slow_server(vec![(2000, vec![(0, "x")])]);
        let config = HttpConfig { idle_timeout: Duration::from_millis(100), ..HttpConfig::default() };
        let client = HttpClient::new(config);
        let t = Instant::now();
        let err = client.send_once(&post(&url), &CancelToken::new()).err().unwrap();
        assert!(matches!(err, Error::Timeout { phase: "idle", .. }), "{err:?}");
        assert!(t.elapsed() < Duration::from_millis(400), "{:?}", t.elapsed());
    }

    #[test]
    fn the_poll_hook_runs_while_waiting_and_can_cancel() {
        let (url, _) = slow_server(vec![(3000, vec![(0, "x")])]);
        let client = HttpClient::new(HttpConfig::default());
        let cancel = CancelToken::new();
        let calls = Rc::new(std::cell::Cell::new(0u32));
        let (hook_calls, hook_cancel) = (calls.clone(), cancel.clone());
        let t = Instant::now();
        let got = with_poll_hook(
            Rc::new(move || {
                hook_calls.set(hook_calls.get() + 1);
                if hook_calls.get() == 3 {
                    hook_cancel.cancel();
                }
            }),
            || client.send_once(&post(&url), &cancel),
        );
        assert!(matches!(got, Err(Error::Cancelled { .. })), "{:?}", got.err());
        assert_eq!(calls.get(), 3);
        assert!(t.elapsed() < Duration::from_millis(600), "{:?}", t.elapsed());
    }

    #[test]
    fn cancel_from_another_thread_mid_body() {
        let (url, _) = slow_server(vec![(0, vec![(0, "ab"), (3000, "cd")])]);
        let client = HttpClient::new(HttpConfig::default());
        let cancel = CancelToken::new();
        let mut r = client.send_once(&post(&url), &cancel).unwrap();
        assert_eq!(r.next_chunk().unwrap().unwrap(), b"ab");
        let other = cancel.clone();
        std::thread::spawn(move || {
            std::thread::sleep(Duration::from_millis(50));
            other.cancel();
        });
        let t = Instant::now();
        assert!(matches!(r.next_chunk(), Err(BodyError::Cancelled)));
        assert!(t.elapsed() < Duration::from_millis(250), "{:?}", t.elapsed());
    }

    /// A listener whose accept queue is full: a further connect to it hangs (its SYNs are dropped).
    fn hanging_listener() -> (std::net::TcpListener, Vec<std::net::TcpStream>, String) {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = listener.local_addr().unwrap();
        let mut held = Vec::new();
        while held.len() < 4096 {
            match std::net::TcpStream::connect_timeout(&addr, Duration::from_millis(200)) {
                Ok(s) => held.push(s),
                Err(_) => break,
            }
        }
        (listener, held, format!("http://{addr}/v1/messages"))
    }

    #[test]
    fn cancel_while_connecting_returns_promptly_and_the_connect_timeout_holds() {
        let (_listener, held, url) = hanging_listener();
        assert!(held.len() < 4096, "the accept queue never filled");
        let config = HttpConfig { connect_timeout: Duration::from_secs(30), max_retries: 0, ..HttpConfig::default() };
        let client = HttpClient::new(config);
        let cancel = CancelToken::new();
        let other = cancel.clone();
        std::thread::spawn(move || {
            std::thread::sleep(Duration::from_millis(100));
            other.cancel();
        });
        let t = Instant::now();
        let got = client.send_once(&post(&url), &cancel);
        assert!(matches!(got, Err(Error::Cancelled { .. })), "{:?}", got.err());
        assert!(t.elapsed() < Duration::from_millis(300), "{:?}", t.elapsed());
        // Without a cancel, the connect timeout ends the wait.
        let quick = HttpClient::new(HttpConfig {
            connect_timeout: Duration::from_millis(300),
            max_retries: 0,
            ..HttpConfig::default()
        });
        let t = Instant::now();
        let got = quick.send_once(&post(&url), &CancelToken::new());
        assert!(matches!(got, Err(Error::Timeout { phase: "connect", .. })), "{:?}", got.err());
        assert!(t.elapsed() < Duration::from_secs(3), "{:?}", t.elapsed());
    }

    #[test]
    fn a_client_with_an_address_check_refuses_what_a_name_resolves_to_when_it_connects() {
        // web_fetch checks a URL's addresses first; this check runs again on the addresses the connection
        // uses, so a name that resolves differently the second time (DNS rebinding) is refused too.
        let (url, conns) = slow_server(vec![(0, vec![(0, "{}")])]);
        let port = url.rsplit(':').next().unwrap().split('/').next().unwrap().to_string();
        let config = HttpConfig { max_retries: 0, ..HttpConfig::default() };
        let guarded = HttpClient::with_address_check(config.clone(), |ip| ip.is_loopback());
        for target in [format!("http://127.0.0.1:{port}/x"), format!("http://localhost:{port}/x")] {
            match guarded.get_once(&target, &[], &CancelToken::new()) {
                Err(Error::Connection { message }) => {
                    assert!(message.contains("an address this client never connects to"), "{message}");
                    assert!(
                        message.contains("resolved to 127.0.0.1") || message.contains("resolved to ::1"),
                        "{message}"
                    );
                }
                other => panic!("{target}: {:?}", other.map(|r| r.status)),
            }
        }
        assert_eq!(conns.load(std::sync::atomic::Ordering::SeqCst), 0, "nothing was connected");
        let plain = HttpClient::new(config);
        let got = plain.get_once(&format!("http://localhost:{port}/x"), &[], &CancelToken::new()).unwrap();
        assert_eq!(got.status, 200);
    }

    #[test]
    fn ip_literals_resolve_without_lookup_and_names_are_cached() {
        use ureq::unversioned::resolver::Resolver;
        let r = CachingResolver::default();
        let config = ureq::config::Config::default();
        let uri: ureq::http::Uri = "http://127.0.0.1:8123/v1/messages".parse().unwrap();
        let got = r.resolve(&uri, &config, NextTimeout::default()).unwrap();
        assert_eq!(&got[..], &["127.0.0.1:8123".parse::<std::net::SocketAddr>().unwrap()]);
        let v6: ureq::http::Uri = "https://[::1]/x".parse().unwrap();
        assert_eq!(r.resolve(&v6, &config, NextTimeout::default()).unwrap()[0], "[::1]:443".parse().unwrap());
        assert!(r.cache.lock().unwrap().is_empty());
        let named: ureq::http::Uri = "http://localhost:8123/".parse().unwrap();
        let first = r.resolve(&named, &config, NextTimeout::default()).unwrap();
        assert_eq!(r.cache.lock().unwrap().len(), 1);
        assert_eq!(r.resolve(&named, &config, NextTimeout::default()).unwrap(), first);
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
