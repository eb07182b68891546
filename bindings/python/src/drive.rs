//! `_Driven`: an agent's run, stepped on the calling thread — the one way a Python run goes (`Agent.run`,
//! `stream`, and through the async layer `astream`): no worker, no thread hop per batch of events.
//!
//! Each call that needs more events (`next_event`, `next_text`, `result`) takes one step of the core's
//! [`RunDriver`] with the GIL released: everything up to the next network read of a model turn runs to
//! completion (tools, hooks, compaction, the next request), then one read, and the events it produced are
//! handed out. Python tools, hooks and a model callable re-attach on this thread, as in `Agent.run`, so
//! they see the caller's thread-locals and context variables. The run's token carries the poll hook (see
//! `crate::run::signal_poll`) that runs Python's signal handlers while the core waits, so Ctrl+C cancels
//! the run within 200 ms and its `KeyboardInterrupt` propagates; `cancel()` from another thread ends the
//! wait within one 20 ms slice. A batch's send gate travels with the run's token (see `crate::gate`).
//!
//! Approvals are pauses (the core's `Step::NeedsApproval`). With a permission callable, the run pauses for
//! the calls it would ask about; once the step's events (the calls' `tool_use` and `approval_request`
//! events among them) are handed out, the next step first has the callable answer them, on this thread:
//! so a host that draws a call before its question sees the call before the callable asks. Started pausing
//! for approvals (`_Agent.start(..., pause_for_approval=True)`), the host answers instead: `next_event`
//! returns the marker `{"type": "approval_pause", "calls": [...]}` without stepping until `approve`
//! answered the calls (or the run was cancelled: then the waiting calls are answered as interrupted).
//!
//! Must never: hold the GIL while waiting for the network, or block on the state lock while holding it.

use std::collections::VecDeque;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};

use pyo3::prelude::*;
use pyo3::types::PyList;
use serde_json::Value;
use tooloop::{Agent, CancelToken, ContentBlock, Error, Permission, RunDriver, Step};

use crate::convert::to_py;
use crate::errors::to_pyerr;
use crate::run::{ErrSlot, Item, drain_text, item_to_py, lock, lock_detached};

/// What a run's steps run under on the stepping thread: the run's `tracing` subscriber when OpenTelemetry
/// is on (see crate::otel). (A batch's send gate is not here: the run's token carries it, see `crate::gate`.)
#[derive(Default)]
pub struct RunContext {
    pub traced: Option<tracing::Dispatch>,
}

impl RunContext {
    /// Run `f` in this context. (Ctrl+C needs nothing here: the run's token carries the poll hook that runs
    /// Python's signal handlers while the run waits, see `crate::run::signal_poll`.)
    pub fn enter<R>(&self, f: impl FnOnce() -> R) -> R {
        crate::otel::scoped(self.traced.as_ref(), f)
    }
}

struct State {
    /// The agent and the run's input (None: resume) until the first call that wants events begins the run,
    /// so an error in beginning it (a run in progress, nothing to resume) surfaces where a worker's run
    /// raises it: from the iteration.
    unstarted: Option<(Arc<Agent>, Option<Vec<ContentBlock>>)>,
    /// The run, until it has ended.
    driver: Option<RunDriver>,
    /// Its outcome once it has ended: the result dict's value, or the exception.
    ended: Option<Result<Value, PyErr>>,
    /// Events of the last step not handed out yet.
    pending: VecDeque<Item>,
    /// Whether a call that needs a decision pauses the run for the host (see the module docs).
    pausing: bool,
    /// Whether the permission callable answers the run's pauses (one is set and the host does not pause).
    answers: bool,
    /// The last step paused for approvals, and no answer came since.
    paused: bool,
    /// The last step paused for the callable: the next one has it answer first.
    to_answer: bool,
}

/// Handle on an agent's run stepped on the caller's thread (same methods as `_Run`).
#[pyclass(module = "tooloop._tooloop", name = "_Driven", frozen)]
pub struct Driven {
    cancel: CancelToken,
    /// Where the agent's Python callables park an exception that ends the run (and the signal hook a
    /// Ctrl+C): it wins over the run's own error.
    slot: ErrSlot,
    state: Mutex<State>,
    /// What each step runs under.
    context: RunContext,
    /// A step is in progress (the state lock held, maybe for a network wait): no call waits for an answer
    /// then, so `pending_approvals` answers at once instead of waiting for the lock (asked on an event loop).
    stepping: AtomicBool,
}

impl Driven {
    pub fn new(
        agent: Arc<Agent>,
        input: Option<Vec<ContentBlock>>,
        cancel: CancelToken,
        slot: ErrSlot,
        pausing: bool,
        answers: bool,
        context: RunContext,
    ) -> Self {
        let state = State {
            unstarted: Some((agent, input)),
            driver: None,
            ended: None,
            pending: VecDeque::new(),
            pausing,
            answers: answers && !pausing,
            paused: false,
            to_answer: false,
        };
        Driven { cancel, slot, state: Mutex::new(state), context, stepping: AtomicBool::new(false) }
    }

    /// The state, waiting (GIL released) while another thread is stepping the run.
    fn state(&self, py: Python<'_>) -> MutexGuard<'_, State> {
        lock_detached(py, &self.state)
    }

    /// One step of the run (`keep`: whether its events are wanted); they join `pending`. Once the run has
    /// ended, its outcome is recorded. An exception parked by a signal handler or a Python callable ends the
    /// run at once (the cancel it set makes the remaining steps quick) and is returned.
    fn pump(&self, py: Python<'_>, st: &mut State, keep: bool) -> PyResult<()> {
        let (unstarted, driver) = (st.unstarted.take(), st.driver.take());
        if unstarted.is_none() && driver.is_none() {
            return Ok(());
        }
        let answer_first = std::mem::take(&mut st.to_answer);
        let (cancel, slot, context) = (&self.cancel, &self.slot, &self.context);
        let pausing = st.pausing || st.answers;
        self.stepping.store(true, Ordering::SeqCst);
        let stepping = &self.stepping;
        let (driver, outcome, items, paused) = py.detach(move || {
            let mut items = Vec::new();
            let mut on_event = |ev: &tooloop::Event| {
                if keep && let Ok(v) = serde_json::to_value(ev) {
                    items.push(Item::Value(v));
                }
            };
            let (driver, outcome, paused) = context.enter(|| {
                let mut driver = match (driver, unstarted) {
                    (Some(d), _) => d,
                    (None, Some((agent, input))) => match agent.start(input, cancel.clone()) {
                        Ok(mut d) => {
                            d.pause_for_approvals(pausing);
                            d
                        }
                        Err(e) => return (None, Some(Err(e)), false),
                    },
                    (None, None) => return (None, None, false),
                };
                // The pause of the last step, its events handed out: the callable answers it now (cancelled,
                // the step answers the calls as interrupted).
                if answer_first && !cancel.is_cancelled() {
                    let asked = driver.pending_approvals();
                    driver.answer_with_callable(asked);
                }
                let (outcome, paused) = match driver.next(&mut on_event) {
                    Step::Done(outcome) => (Some(outcome), false),
                    Step::NeedsApproval(_) => (None, true),
                    _ => (None, false),
                };
                // A parked exception (Ctrl+C, a tool's) cancelled the run: end it now, its events dropped.
                let outcome = match outcome {
                    None if lock(slot).is_some() => Some(driver.finish(&mut |_| {})),
                    other => other,
                };
                (Some(driver), outcome, paused)
            });
            stepping.store(false, Ordering::SeqCst);
            (driver, outcome, items, paused)
        });
        st.pending.extend(items);
        st.paused = paused && st.pausing;
        st.to_answer = paused && !st.pausing;
        let Some(outcome) = outcome else {
            st.driver = driver;
            return Ok(());
        };
        drop(driver);
        let parked = lock(&self.slot).take();
        if let Some(e) = parked {
            st.pending.clear();
            st.ended = Some(Err(e.clone_ref(py)));
            return Err(e);
        }
        st.ended = Some(match outcome {
            Ok(r) => Ok(serde_json::to_value(&r).unwrap_or(Value::Null)),
            Err(e) => Err(to_pyerr(py, &e)),
        });
        Ok(())
    }
}

#[pymethods]
impl Driven {
    /// The next event as a dict, or None once the run has ended (then `result()` tells how).
    fn next_event(&self, py: Python<'_>) -> PyResult<Option<Py<PyAny>>> {
        let mut st = self.state(py);
        loop {
            if let Some(item) = st.pending.pop_front() {
                return Ok(Some(item_to_py(py, item)?.unbind()));
            }
            if st.ended.is_some() {
                return Ok(None);
            }
            if st.paused && !self.cancel.is_cancelled() {
                let calls = st.driver.as_ref().map(RunDriver::pending_approvals).unwrap_or_default();
                let marker = serde_json::json!({"type": "approval_pause", "calls": calls});
                return Ok(Some(to_py(py, &marker)?.unbind()));
            }
            self.pump(py, &mut st, true)?;
        }
    }

    /// Every event not handed out yet, as a list of dicts, after one step when there is none: a network
    /// read's worth per call. None once the run has ended. At a pause for approvals, the marker (see
    /// `next_event`) comes alone, after the step's events. For `tooloop._aio`'s worker: it converts a step's
    /// events and hands them to the event loop in one piece, one wake-up of the loop per step (per event, the
    /// wake-up's socket write let the loop take the GIL mid-batch, and the worker had to win it back).
    fn next_events(&self, py: Python<'_>) -> PyResult<Option<Py<PyList>>> {
        let mut st = self.state(py);
        loop {
            if !st.pending.is_empty() {
                let list = PyList::empty(py);
                while let Some(item) = st.pending.pop_front() {
                    list.append(item_to_py(py, item)?)?;
                }
                return Ok(Some(list.unbind()));
            }
            if st.ended.is_some() {
                return Ok(None);
            }
            if st.paused && !self.cancel.is_cancelled() {
                let calls = st.driver.as_ref().map(RunDriver::pending_approvals).unwrap_or_default();
                let marker = serde_json::json!({"type": "approval_pause", "calls": calls});
                return Ok(Some(PyList::new(py, [to_py(py, &marker)?])?.unbind()));
            }
            self.pump(py, &mut st, true)?;
        }
    }

    /// Answer a call the run paused for: `deny` a reason refuses it, else `read_only` allows it with no
    /// power to change anything, else it runs. Nothing runs until the next call for events. ValueError when
    /// no call with that id waits.
    #[pyo3(signature = (call_id, deny=None, read_only=false))]
    fn approve(&self, py: Python<'_>, call_id: &str, deny: Option<String>, read_only: bool) -> PyResult<()> {
        let mut st = self.state(py);
        let decision = match (deny, read_only) {
            (Some(reason), _) => Permission::Deny(reason),
            (None, true) => Permission::AllowReadOnly,
            (None, false) => Permission::Allow,
        };
        let Some(driver) = st.driver.as_mut() else {
            return Err(to_pyerr(py, &Error::Config("the run has ended (or not begun): nothing to approve".into())));
        };
        match driver.approve(call_id, decision) {
            Ok(()) => {
                st.paused = false;
                Ok(())
            }
            Err(tooloop::ApprovalError::UnknownCall) => {
                Err(pyo3::exceptions::PyValueError::new_err(format!("no tool call {call_id:?} waits for approval")))
            }
            Err(e) => Err(to_pyerr(py, &e.into())),
        }
    }

    /// The calls waiting for an answer now: `[{"call_id", "tool", "input", "reason", "read_only"}]`.
    fn pending_approvals(&self, py: Python<'_>) -> PyResult<Py<PyAny>> {
        if self.stepping.load(Ordering::SeqCst) {
            return Ok(PyList::empty(py).into_any().unbind());
        }
        let st = self.state(py);
        let calls = st.driver.as_ref().map(RunDriver::pending_approvals).unwrap_or_default();
        Ok(to_py(py, &serde_json::to_value(calls).unwrap_or(Value::Null))?.unbind())
    }

    /// The text that arrived since the last call (a step's worth at least), coalesced into one `str`, or
    /// None once the run has ended. Other events are skipped.
    fn next_text(&self, py: Python<'_>) -> PyResult<Option<String>> {
        let mut st = self.state(py);
        let mut out = String::new();
        loop {
            drain_text(&mut st.pending, &mut out);
            if !out.is_empty() {
                return Ok(Some(out));
            }
            if st.ended.is_some() {
                return Ok(None);
            }
            waits_for_approval(py, &st, &self.cancel)?;
            self.pump(py, &mut st, true)?;
        }
    }

    /// Run to the end (remaining events are dropped); the result dict, or the run's exception.
    fn result(&self, py: Python<'_>) -> PyResult<Py<PyAny>> {
        let mut st = self.state(py);
        st.pending.clear();
        while st.ended.is_none() {
            waits_for_approval(py, &st, &self.cancel)?;
            self.pump(py, &mut st, false)?;
        }
        match &st.ended {
            Some(Ok(v)) => Ok(to_py(py, v)?.unbind()),
            Some(Err(e)) => Err(e.clone_ref(py)),
            None => Err(to_pyerr(py, &Error::Config("the run has not ended".into()))),
        }
    }

    /// Whether the run has ended (and its outcome was collected).
    #[getter]
    fn done(&self) -> bool {
        // Never wait here (a step on another thread holds the lock while the network is quiet).
        self.state.try_lock().is_ok_and(|st| st.ended.is_some())
    }

    /// Ask the run to stop (any thread): a wait in progress ends within 20 ms.
    fn cancel(&self) {
        self.cancel.cancel();
    }

    /// Cancel if still running and step it to its end (at once: every wait ends on the cancel), so the
    /// conversation is valid and the agent free. Idempotent.
    fn close(&self, py: Python<'_>) -> PyResult<()> {
        if let Ok(mut st) = self.state.try_lock()
            && st.ended.is_some()
        {
            st.pending.clear();
            return Ok(());
        }
        self.cancel.cancel();
        let mut st = self.state(py);
        while st.ended.is_none() {
            self.pump(py, &mut st, false)?;
        }
        st.pending.clear();
        Ok(())
    }
}

/// A paused run, asked for more than its events: an error naming the calls to answer (stepping would only
/// pause again).
fn waits_for_approval(py: Python<'_>, st: &State, cancel: &CancelToken) -> PyResult<()> {
    if !st.paused || cancel.is_cancelled() {
        return Ok(());
    }
    let ids: Vec<String> = st
        .driver
        .as_ref()
        .map(RunDriver::pending_approvals)
        .unwrap_or_default()
        .into_iter()
        .map(|a| a.call_id)
        .collect();
    let message = format!("the run waits for approval of tool calls {}: answer each with approve()", ids.join(", "));
    Err(to_pyerr(py, &Error::Config(message)))
}
