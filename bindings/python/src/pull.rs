//! `_Stream`: a raw stream pulled on the calling thread — no worker, no thread hop per batch of events.
//!
//! Each call that needs more events (`next_event`, `next_text`, `result`) makes one network read through
//! the core's [`RawStream`] with the GIL released; the thread's poll hook (see
//! `tooloop::http::with_poll_hook`) takes the GIL back every 50 ms of waiting to run Python's signal
//! handlers, so Ctrl+C cancels the request within 200 ms and then propagates. `cancel()` from another
//! thread ends the wait within one 20 ms slice. Used by `_Client.start_stream` for built-in providers that
//! can hand out such a stream (Anthropic, OpenAI); the others stream through a worker (`_Run`).
//!
//! Must never: hold the GIL while waiting for the network, or block on the state lock while holding it.

use std::collections::VecDeque;
use std::sync::{Arc, Mutex, MutexGuard};

use pyo3::prelude::*;
use serde_json::Value;
use tooloop::{CancelToken, Error, Provider, StreamEvent};
use tooloop::{RawOpen, RawStream};

use crate::convert::to_py;
use crate::errors::to_pyerr;
use crate::run::{ErrSlot, Item, drain_text, item_to_py, lock, lock_detached, signal_hook};

/// Where the stream is.
enum Phase {
    /// Not sent yet: the request body (sent by the first call that wants events, so errors surface where
    /// the worker-based stream raises them: from the iteration).
    Unsent(Value),
    /// Under way.
    Open(Box<dyn RawStream>),
    /// Ended: the final message, or the error.
    Ended(Result<Value, PyErr>),
}

struct State {
    phase: Phase,
    /// Events of the last read not handed out yet.
    pending: VecDeque<Item>,
}

/// Handle on a raw stream read on the caller's thread (same methods as `_Run`).
#[pyclass(module = "tooloop._tooloop", name = "_Stream", frozen)]
pub struct PullStream {
    provider: Arc<dyn Provider>,
    cancel: CancelToken,
    state: Mutex<State>,
}

impl PullStream {
    pub fn new(provider: Arc<dyn Provider>, body: Value) -> Self {
        PullStream {
            provider,
            cancel: CancelToken::new(),
            state: Mutex::new(State { phase: Phase::Unsent(body), pending: VecDeque::new() }),
        }
    }

    /// The state, waiting (GIL released) while another thread is reading the stream.
    fn state(&self, py: Python<'_>) -> MutexGuard<'_, State> {
        lock_detached(py, &self.state)
    }

    /// One read: send the request if not sent yet, else read the next bytes; their events join `pending`
    /// (with `text_sink`, once sent: only the text of the text deltas, appended to it; see `RawStream::step_text`).
    /// A Ctrl+C (or another exception from a signal handler) while waiting ends the stream and is returned.
    fn pump(&self, py: Python<'_>, st: &mut State, text_sink: Option<&mut String>) -> PyResult<()> {
        let interrupt: ErrSlot = Arc::new(Mutex::new(None));
        let phase = std::mem::replace(&mut st.phase, Phase::Ended(Ok(Value::Null)));
        let (provider, cancel) = (&self.provider, &self.cancel);
        let (phase, items) = py.detach(|| {
            let hook = signal_hook(cancel, &interrupt);
            let mut items = Vec::new();
            // The core reports a lazily read text delta as its text, then its JSON: kept together.
            let mut text = None;
            let mut on_event = |ev: StreamEvent| match ev {
                StreamEvent::TextDelta { text: t, .. } => text = Some(t),
                StreamEvent::RawJson { json, .. } => items.push(match text.take() {
                    Some(text) => Item::TextJson { json, text },
                    None => Item::Json(json),
                }),
                StreamEvent::Raw { data, .. } => {
                    text = None;
                    items.push(Item::Value(data));
                }
                _ => {}
            };
            let next = tooloop::with_poll_hook(hook, || match phase {
                Phase::Unsent(body) => match provider.open_raw_stream(&body, cancel, &mut on_event) {
                    Ok(RawOpen::Open(s)) => Ok(Phase::Open(s)),
                    Ok(RawOpen::Done(v)) => Ok(Phase::Ended(Ok(v))),
                    Err(e) => Err(e),
                },
                Phase::Open(mut s) => {
                    let step = match text_sink {
                        Some(sink) => s.step_text(sink),
                        None => s.step(&mut on_event),
                    };
                    match step {
                        Ok(None) => Ok(Phase::Open(s)),
                        Ok(Some(v)) => Ok(Phase::Ended(Ok(v))),
                        Err(e) => Err(e),
                    }
                }
                ended @ Phase::Ended(_) => Ok(ended),
            });
            (next, items)
        });
        st.pending.extend(items);
        if let Some(e) = lock(&interrupt).take() {
            st.phase = Phase::Ended(Err(e.clone_ref(py)));
            return Err(e);
        }
        st.phase = match phase {
            Ok(p) => p,
            Err(e) => Phase::Ended(Err(to_pyerr(py, &e))),
        };
        Ok(())
    }
}

fn ended(st: &State) -> bool {
    matches!(st.phase, Phase::Ended(_))
}

#[pymethods]
impl PullStream {
    /// The next event as a dict, or None once the stream has ended (then `result()` tells how).
    fn next_event(&self, py: Python<'_>) -> PyResult<Option<Py<PyAny>>> {
        let mut st = self.state(py);
        loop {
            if let Some(item) = st.pending.pop_front() {
                return Ok(Some(item_to_py(py, item)?.unbind()));
            }
            if ended(&st) {
                return Ok(None);
            }
            self.pump(py, &mut st, None)?;
        }
    }

    /// Iterating the handle itself yields the events (`next_event`) and, at the end, raises the stream's
    /// exception if it failed: `MessageStream` hands this out so no Python frame runs per event.
    fn __iter__(slf: Py<Self>) -> Py<Self> {
        slf
    }

    fn __next__(&self, py: Python<'_>) -> PyResult<Option<Py<PyAny>>> {
        match self.next_event(py)? {
            Some(ev) => Ok(Some(ev)),
            // The end: raise the stream's exception if it failed (the final message is not built here;
            // `result()` builds it when asked).
            None => match &self.state(py).phase {
                Phase::Ended(Err(e)) => Err(e.clone_ref(py)),
                _ => Ok(None),
            },
        }
    }

    /// The text that arrived since the last call (one network read's worth at least), coalesced into one
    /// `str`, or None once the stream has ended. Other events are skipped.
    fn next_text(&self, py: Python<'_>) -> PyResult<Option<String>> {
        let mut st = self.state(py);
        let mut out = String::new();
        loop {
            drain_text(&mut st.pending, &mut out);
            if !out.is_empty() {
                return Ok(Some(out));
            }
            if ended(&st) {
                return Ok(None);
            }
            // Once sent, the text alone is read: no event is built only to be skipped.
            let text_only = matches!(st.phase, Phase::Open(_));
            self.pump(py, &mut st, text_only.then_some(&mut out))?;
        }
    }

    /// Read to the end (remaining events are dropped); the final message dict, or the stream's exception.
    fn result(&self, py: Python<'_>) -> PyResult<Py<PyAny>> {
        let mut st = self.state(py);
        st.pending.clear();
        while !ended(&st) {
            self.pump(py, &mut st, None)?;
            st.pending.clear();
        }
        match &st.phase {
            Phase::Ended(Ok(v)) => Ok(to_py(py, v)?.unbind()),
            Phase::Ended(Err(e)) => Err(e.clone_ref(py)),
            _ => Err(to_pyerr(py, &Error::Config("the stream has not ended".into()))),
        }
    }

    /// Whether the stream has ended (and its outcome was collected).
    #[getter]
    fn done(&self) -> bool {
        // Never wait here (a reader on another thread holds the lock while the network is quiet).
        self.state.try_lock().is_ok_and(|st| ended(&st))
    }

    /// Ask the stream to stop (any thread): a read in progress ends within 20 ms.
    fn cancel(&self) {
        self.cancel.cancel();
    }

    /// Cancel if still running and close the connection. Idempotent.
    fn close(&self, py: Python<'_>) -> PyResult<()> {
        // Ended already (the usual `with` exit): nothing to stop, and no cancel to signal (a wake-up syscall).
        if let Ok(mut st) = self.state.try_lock()
            && ended(&st)
        {
            st.pending.clear();
            return Ok(());
        }
        self.cancel.cancel();
        let mut st = self.state(py);
        st.pending.clear();
        match st.phase {
            // One more step ends at once, cancelled, with the partial message (as a worker's run would).
            Phase::Open(_) => self.pump(py, &mut st, None)?,
            Phase::Unsent(_) => st.phase = Phase::Ended(Err(to_pyerr(py, &Error::Cancelled { partial: None }))),
            Phase::Ended(_) => {}
        }
        st.pending.clear();
        Ok(())
    }
}
