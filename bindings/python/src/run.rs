//! A blocking operation on a Rust worker thread, waited on from Python without holding the GIL: what the raw
//! `_Client` uses for a provider that cannot hand out a stream to pull (a model callable, Bedrock). An agent's
//! run never goes here: it is stepped on the calling thread (see `drive.rs`).
//!
//! The calling thread waits on a channel in short slices with the GIL released, and between slices runs
//! Python's signal handlers (`check_signals`), so Ctrl+C (or any exception a handler raises) cancels the
//! operation, waits for the worker to wind down — it does within 200 ms, the core's cancel bound — and then
//! propagates. Python code the operation calls (a model callable) runs on the worker under
//! `Python::attach`; an exception that must abort the operation is parked in an [`ErrSlot`]
//! and re-raised here, on the calling thread, as the very same object. Workers are reused (a few idle ones
//! wait up to 30 s for the next operation), and events cross in batches, one per network read (see
//! `tooloop::http::with_wait_hook`).
//!
//! Must never: block while holding the GIL, or let a dropped handle leave its operation running.

use std::cell::RefCell;
use std::collections::VecDeque;
use std::rc::Rc;
use std::sync::mpsc::{self, Receiver, RecvTimeoutError, TryRecvError};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use pyo3::intern;
use pyo3::prelude::*;
use pyo3::types::{PyDict, PyString};
use serde_json::Value;
use tooloop::{CancelToken, Error};

use crate::convert::{json_to_py, to_py};
use crate::errors::to_pyerr;

/// How long the GIL stays released between two signal checks. Small enough for a prompt Ctrl+C,
/// large enough to cost nothing.
const SLICE: Duration = Duration::from_millis(20);

/// Batches of events decoded ahead of the consumer, at most (with [`BATCH_MAX`], a bound on the events
/// held in memory for a slow consumer).
const EVENT_BUFFER: usize = 8;

/// Events in one batch, at most.
const BATCH_MAX: usize = 512;

/// An exception raised by Python code on the worker that must end the operation and reach the caller.
pub type ErrSlot = Arc<Mutex<Option<PyErr>>>;

/// What the operation produces when it ends.
pub type Outcome = Result<Value, Error>;

/// One event of an operation: a value, or a raw stream event's JSON text not parsed yet (see
/// `StreamEvent::RawJson`): parsed only if Python asks for the event, read without a value for its text.
pub enum Item {
    /// An event as a value.
    Value(Value),
    /// A raw event's JSON text.
    Json(String),
    /// A raw text delta's JSON text, with the text the core already read from it (so `text_stream` does not
    /// parse it again).
    TextJson {
        /// The event's JSON text.
        json: String,
        /// Its text.
        text: String,
    },
}

impl Item {
    /// The text the event carries, if any (see [`text_of`]).
    pub fn text(&self) -> Option<std::borrow::Cow<'_, str>> {
        match self {
            Item::Value(v) => text_of(v).map(std::borrow::Cow::Borrowed),
            Item::Json(j) if may_be_text_delta(j) => tooloop::text_delta_of(j),
            Item::Json(_) => None,
            Item::TextJson { text, .. } => Some(std::borrow::Cow::Borrowed(text)),
        }
    }

    pub fn into_value(self) -> Value {
        match self {
            Item::Value(v) => v,
            Item::Json(j) | Item::TextJson { json: j, .. } => serde_json::from_str(&j).unwrap_or(Value::Null),
        }
    }
}

/// Append the text the events of `items` carry to `out` (see [`Item::text`]), dropping the events.
pub fn drain_text(items: &mut VecDeque<Item>, out: &mut String) {
    for item in items.drain(..) {
        if let Some(t) = item.text() {
            out.push_str(&t);
        }
    }
}

/// Whether an event's JSON text can be a text delta: it names one (or escapes something, which could
/// spell the name): a quick look that spares the other events a parse.
fn may_be_text_delta(json: &str) -> bool {
    json.contains("text_delta") || json.contains("\\u")
}

/// An event as a Python dict. A raw text delta (the bulk of a stream) is built straight from a borrowed
/// parse of its JSON text, with interned keys and type strings: no JSON value in between, one new `str`. Any
/// other event handed on as text is built straight from its text too.
pub fn item_to_py<'py>(py: Python<'py>, item: Item) -> PyResult<Bound<'py, PyAny>> {
    let json = match (&item, worker_streams()) {
        (Item::Json(j) | Item::TextJson { json: j, .. }, false) => j,
        _ => return to_py(py, &item.into_value()),
    };
    // A text delta comes paired with its text from the core (`TextJson`); through a worker it is plain
    // `Json`, told from the other events by its delta type before the stricter read.
    let maybe_delta = matches!(item, Item::TextJson { .. }) || may_be_text_delta(json);
    if maybe_delta && let Some((index, text)) = tooloop::text_delta_parts(json) {
        let delta = PyDict::new(py);
        delta.set_item(intern!(py, "type"), intern!(py, "text_delta"))?;
        delta.set_item(intern!(py, "text"), PyString::new(py, &text))?;
        let ev = PyDict::new(py);
        ev.set_item(intern!(py, "type"), intern!(py, "content_block_delta"))?;
        ev.set_item(intern!(py, "index"), index)?;
        ev.set_item(intern!(py, "delta"), delta)?;
        return Ok(ev.into_any());
    }
    Ok(json_to_py(py, json).unwrap_or_else(|| py.None().into_bound(py)))
}

/// `TOOLOOP_WORKER_STREAMS=1` in the environment (read once): raw streams go through a worker thread and
/// every event through a JSON value, as the worker path did — what `bench/speed.py` compares the new paths with,
/// in the same build and the same run. Not for production use.
pub fn worker_streams() -> bool {
    static ON: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
    *ON.get_or_init(|| std::env::var_os("TOOLOOP_WORKER_STREAMS").is_some_and(|v| v == "1"))
}

enum Msg {
    Events(Vec<Item>),
    Done(Outcome),
}

type Job = Box<dyn FnOnce() + Send>;

/// Workers waiting for a job: (worker id, its inbox). A run reuses an idle worker instead of starting a
/// thread: on a busy machine a new thread waits for a scheduler slot before it can even begin.
static IDLE: Mutex<Vec<(u64, mpsc::Sender<Job>)>> = Mutex::new(Vec::new());

/// Idle workers kept, at most; each also ends after [`IDLE_FOR`] without a job.
const MAX_IDLE: usize = 4;
const IDLE_FOR: Duration = Duration::from_secs(30);

/// Run `job` on an idle worker thread, or on a new one. A job that panics ends its worker (the run then
/// reports that the worker ended without a result); a job has run to its end, its captures dropped, before
/// anything it sent is read.
fn spawn_worker(job: Job) -> std::io::Result<()> {
    static NEXT_ID: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
    let idle = lock(&IDLE).pop();
    let job = match idle {
        // An idle worker leaves the list only here or by itself under the same lock, so it is still waiting.
        Some((_, inbox)) => match inbox.send(job) {
            Ok(()) => return Ok(()),
            Err(mpsc::SendError(back)) => back,
        },
        None => job,
    };
    let id = NEXT_ID.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let (tx, rx) = mpsc::channel::<Job>();
    std::thread::Builder::new().name("tooloop-run".into()).spawn(move || {
        let mut next = Some(job);
        while let Some(job) = next.take() {
            job();
            {
                let mut idle = lock(&IDLE);
                if idle.len() >= MAX_IDLE {
                    return;
                }
                idle.push((id, tx.clone()));
            }
            next = match rx.recv_timeout(IDLE_FOR) {
                Ok(job) => Some(job),
                Err(_) => {
                    let mut idle = lock(&IDLE);
                    match idle.iter().position(|(w, _)| *w == id) {
                        // Still listed: nobody can send any more; end.
                        Some(at) => {
                            idle.remove(at);
                            None
                        }
                        // Taken just now: its job is on the way.
                        None => {
                            drop(idle);
                            rx.recv().ok()
                        }
                    }
                }
            };
        }
    })?;
    Ok(())
}

pub fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

/// Lock `m`, waiting with the GIL released while another thread holds it (one that reads a stream on its
/// own thread holds it while the network is quiet, and may need the GIL meanwhile).
pub fn lock_detached<'a, T>(py: Python<'_>, m: &'a Mutex<T>) -> MutexGuard<'a, T> {
    loop {
        match m.try_lock() {
            Ok(g) => return g,
            Err(std::sync::TryLockError::Poisoned(e)) => return e.into_inner(),
            Err(std::sync::TryLockError::WouldBlock) => py.detach(|| std::thread::sleep(Duration::from_millis(1))),
        }
    }
}

/// Park `err` for the caller (the first one wins: later ones are usually consequences of it).
pub fn park(slot: &ErrSlot, err: PyErr) {
    let mut s = lock(slot);
    if s.is_none() {
        *s = Some(err);
    }
}

thread_local! {
    /// Whether this thread is Python's main thread, the only one its signal handlers run on (None: not asked
    /// yet). A thread's answer never changes, so it is asked once, at the thread's first poll.
    static SIGNALS_RUN_HERE: std::cell::Cell<Option<bool>> = const { std::cell::Cell::new(None) };
}

/// Whether the calling thread is `threading.main_thread()`. Runs Python code, so a signal handler may raise
/// in it (its exception is returned).
fn on_main_thread(py: Python<'_>) -> PyResult<bool> {
    let threading = py.import(intern!(py, "threading"))?;
    let main = threading.call_method0(intern!(py, "main_thread"))?.getattr(intern!(py, "ident"))?;
    main.eq(threading.call_method0(intern!(py, "get_ident"))?)
}

/// The hook the core's HTTP waits poll (`tooloop::with_poll_hook`) while a read runs on the caller's
/// thread with the GIL released: it runs Python's signal handlers, and an exception one raises (Ctrl+C) is
/// parked in `slot` and cancels `cancel`. Off Python's main thread (an asyncio worker, a thread of the
/// host's), where no handler ever runs, it does nothing after its first call: taking the GIL every 50 ms
/// there bought nothing, and with many runs at once (64 `astream`s on one loop) those takes were a third of
/// the workers' competition for the GIL with the event loop's thread.
pub fn signal_hook(cancel: &CancelToken, slot: &ErrSlot) -> std::rc::Rc<dyn Fn()> {
    let (cancel, slot) = (cancel.clone(), slot.clone());
    std::rc::Rc::new(move || run_signal_handlers(&cancel, &slot))
}

/// Python's signal handlers, run on Python's main thread; an exception one raises is parked in `slot` and
/// cancels `cancel`. Off the main thread, nothing after the first call (see [`signal_hook`]).
fn run_signal_handlers(cancel: &CancelToken, slot: &ErrSlot) {
    if SIGNALS_RUN_HERE.get() == Some(false) {
        return;
    }
    Python::attach(|py| {
        // The handlers first: asking which thread this is runs Python code, where a pending Ctrl+C
        // would otherwise be raised (and is then parked the same way).
        let checked = py.check_signals().and_then(|()| match SIGNALS_RUN_HERE.get() {
            Some(_) => Ok(()),
            None => on_main_thread(py).map(|main| SIGNALS_RUN_HERE.set(Some(main))),
        });
        if let Err(e) = checked {
            park(slot, e);
            cancel.cancel();
        }
    })
}

/// The poll hook a run's token carries (see `tooloop::CancelToken::with_hooks`): every wait of the run, on
/// whichever thread, runs Python's signal handlers about every 50 ms; an exception one raises (Ctrl+C) is
/// parked in `slot` and cancels the run. Off Python's main thread (an asyncio worker, a tool's thread) it
/// takes no GIL after its first call there, as [`signal_hook`].
pub fn signal_poll(slot: &ErrSlot) -> tooloop::PollHook {
    let slot = slot.clone();
    Arc::new(move |token: &CancelToken| run_signal_handlers(token, &slot))
}

type Finished = Result<Value, PyErr>;

/// Handle on a running operation: its events, then its outcome.
#[pyclass(module = "tooloop._tooloop", name = "_Run", frozen)]
pub struct Run {
    rx: Mutex<Receiver<Msg>>,
    cancel: Arc<dyn Fn() + Send + Sync>,
    slot: ErrSlot,
    finished: Mutex<Option<Finished>>,
    /// Events of a received batch not handed out yet.
    pending: Mutex<VecDeque<Item>>,
}

impl Run {
    /// Start `op` on a worker thread. `op` gets an event sink (a no-op unless `stream`).
    pub fn spawn(
        py: Python<'_>,
        cancel: Arc<dyn Fn() + Send + Sync>,
        slot: ErrSlot,
        stream: bool,
        op: impl FnOnce(&mut dyn FnMut(Item)) -> Outcome + Send + 'static,
    ) -> PyResult<Run> {
        // Bounded: a consumer slower than the network makes the worker wait (and TCP push back) instead of
        // piling decoded events up in memory. Every path that waits for the end reads the channel, so a
        // full channel never blocks the worker for good; dropping the handle drops the receiver.
        let (tx, rx) = mpsc::sync_channel(EVENT_BUFFER);
        spawn_worker(Box::new(move || {
            let batch: Rc<RefCell<Vec<Item>>> = Rc::default();
            let flush: Rc<dyn Fn()> = {
                let (batch, events) = (batch.clone(), tx.clone());
                Rc::new(move || {
                    let ready = std::mem::take(&mut *batch.borrow_mut());
                    if !ready.is_empty() {
                        // The receiver may be gone (handle dropped); the run is being cancelled then.
                        let _ = events.send(Msg::Events(ready));
                    }
                })
            };
            let mut emit = |v: Item| {
                if stream {
                    // Delivered when the worker is about to wait for the network (the wait hook), or when full.
                    batch.borrow_mut().push(v);
                    if batch.borrow().len() >= BATCH_MAX {
                        flush();
                    }
                }
            };
            let outcome = tooloop::with_wait_hook(flush.clone(), || op(&mut emit));
            flush();
            let _ = tx.send(Msg::Done(outcome));
        }))
        .map_err(|e| to_pyerr(py, &Error::Config(format!("cannot start a worker thread: {e}"))))?;
        Ok(Run { rx: Mutex::new(rx), cancel, slot, finished: Mutex::new(None), pending: Mutex::new(VecDeque::new()) })
    }

    fn is_finished(&self) -> bool {
        lock(&self.finished).is_some()
    }

    /// Next message, waiting with the GIL released and signals checked. `Ok(None)`: the worker is gone.
    fn recv(&self, py: Python<'_>) -> PyResult<Option<Msg>> {
        loop {
            match lock(&self.rx).try_recv() {
                Ok(m) => return Ok(Some(m)),
                Err(TryRecvError::Disconnected) => return Ok(None),
                Err(TryRecvError::Empty) => {}
            }
            let got = py.detach(|| lock(&self.rx).recv_timeout(SLICE));
            match got {
                Ok(m) => return Ok(Some(m)),
                Err(RecvTimeoutError::Disconnected) => return Ok(None),
                Err(RecvTimeoutError::Timeout) => {}
            }
            if let Err(interrupt) = py.check_signals() {
                return Err(self.abandon(py, interrupt));
            }
        }
    }

    /// A signal handler raised while we waited: cancel, let the worker finish, and hand back the exception
    /// (a second one while waiting wins, and stops the wait: the user insists).
    fn abandon(&self, py: Python<'_>, interrupt: PyErr) -> PyErr {
        (self.cancel)();
        match self.drain(py) {
            Ok(()) => interrupt,
            Err(again) => again,
        }
    }

    /// Wait for the outcome, discarding events, and record it (an error from the slot wins).
    fn drain(&self, py: Python<'_>) -> PyResult<()> {
        while !self.is_finished() {
            let msg = loop {
                let got = py.detach(|| lock(&self.rx).recv_timeout(SLICE));
                match got {
                    Ok(m) => break Some(m),
                    Err(RecvTimeoutError::Disconnected) => break None,
                    Err(RecvTimeoutError::Timeout) => py.check_signals()?,
                }
            };
            match msg {
                Some(Msg::Events(_)) => {}
                Some(Msg::Done(o)) => self.finish(py, Some(o)),
                None => self.finish(py, None),
            }
        }
        Ok(())
    }

    fn finish(&self, py: Python<'_>, outcome: Option<Outcome>) {
        let parked = lock(&self.slot).take();
        let done = match (parked, outcome) {
            (Some(e), _) => Err(e),
            (None, Some(Ok(v))) => Ok(v),
            (None, Some(Err(e))) => Err(to_pyerr(py, &e)),
            (None, None) => Err(to_pyerr(py, &Error::Config("the worker thread ended without a result".into()))),
        };
        *lock(&self.finished) = Some(done);
    }

    fn outcome(&self, py: Python<'_>) -> PyResult<Py<PyAny>> {
        match lock(&self.finished).as_ref() {
            Some(Ok(v)) => Ok(to_py(py, v)?.unbind()),
            Some(Err(e)) => Err(e.clone_ref(py)),
            None => Err(to_pyerr(py, &Error::Config("the run has not finished".into()))),
        }
    }
}

#[pymethods]
impl Run {
    /// The next event as a dict, or None once the operation has ended (then `result()` tells how).
    fn next_event(&self, py: Python<'_>) -> PyResult<Option<Py<PyAny>>> {
        loop {
            let next = lock(&self.pending).pop_front();
            if let Some(item) = next {
                return Ok(Some(item_to_py(py, item)?.unbind()));
            }
            if self.is_finished() {
                return Ok(None);
            }
            match self.recv(py)? {
                Some(Msg::Events(batch)) => lock(&self.pending).extend(batch),
                Some(Msg::Done(o)) => self.finish(py, Some(o)),
                None => self.finish(py, None),
            }
        }
    }

    /// The text that arrived since the last call, coalesced into one `str` (waiting for at least one text
    /// piece), or None once the operation has ended (then `result()` tells how). Other events are skipped.
    /// Text is an agent's `text` event, or a raw stream's text delta (Anthropic `text_delta`, OpenAI
    /// `delta.content`). One Python object per batch instead of a dict per event: what `text_stream` is for.
    fn next_text(&self, py: Python<'_>) -> PyResult<Option<String>> {
        let mut out = String::new();
        drain_text(&mut lock(&self.pending), &mut out);
        while !self.is_finished() {
            // Block for the first piece only; then take what is already queued without waiting.
            let msg = if out.is_empty() {
                self.recv(py)?
            } else {
                match lock(&self.rx).try_recv() {
                    Ok(m) => Some(m),
                    Err(TryRecvError::Empty) => break,
                    Err(TryRecvError::Disconnected) => None,
                }
            };
            match msg {
                Some(Msg::Events(batch)) => {
                    for item in &batch {
                        if let Some(t) = item.text() {
                            out.push_str(&t);
                        }
                    }
                }
                Some(Msg::Done(o)) => self.finish(py, Some(o)),
                None => self.finish(py, None),
            }
        }
        Ok(if out.is_empty() { None } else { Some(out) })
    }

    /// Wait for the end (remaining events are dropped); the outcome as a dict, or its exception.
    pub fn result(&self, py: Python<'_>) -> PyResult<Py<PyAny>> {
        while !self.is_finished() {
            match self.recv(py)? {
                Some(Msg::Events(_)) => {}
                Some(Msg::Done(o)) => self.finish(py, Some(o)),
                None => self.finish(py, None),
            }
        }
        self.outcome(py)
    }

    /// Whether the operation has ended (and its outcome was collected).
    #[getter]
    fn done(&self) -> bool {
        self.is_finished()
    }

    /// Ask the operation to stop (any thread); it ends within 200 ms.
    fn cancel(&self) {
        (self.cancel)();
    }

    /// Cancel if still running and wait until the worker has ended. Idempotent.
    fn close(&self, py: Python<'_>) -> PyResult<()> {
        if !self.is_finished() {
            (self.cancel)();
            self.drain(py)?;
        }
        Ok(())
    }
}

/// The text an event carries: an agent `text` event, an Anthropic `text_delta`, an OpenAI chunk's content, a
/// Responses `response.output_text.delta`.
fn text_of(v: &Value) -> Option<&str> {
    match v.get("type").and_then(Value::as_str) {
        Some("text") => v.get("text").and_then(Value::as_str),
        Some("response.output_text.delta") => v.get("delta").and_then(Value::as_str),
        Some("content_block_delta") => {
            let d = v.get("delta")?;
            if d.get("type").and_then(Value::as_str) == Some("text_delta") {
                d.get("text").and_then(Value::as_str)
            } else {
                None
            }
        }
        _ => v.get("choices")?.get(0)?.get("delta")?.get("content").and_then(Value::as_str),
    }
}

impl Drop for Run {
    fn drop(&mut self) {
        // Never join here: the worker may be waiting for the GIL that whoever drops us may hold.
        if lock(&self.finished).is_none() {
            (self.cancel)();
        }
    }
}
