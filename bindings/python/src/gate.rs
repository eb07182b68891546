//! A Python callable as the send gate of a run (see `tooloop::gate`; the run's token carries it to every
//! request of the run, its subagents' and parallel tools' too): how `tooloop.batch` shares request
//! limits, a 429's `retry-after` and its cancel between the agents of a batch (its budget is a ledger, see
//! `crate::ledger`).
//!
//! The callable is `gate(kind, n, retry_after)`: `gate("send", body_bytes, None)` before each HTTP attempt
//! returns None or 0 (go), a number of seconds (ask again after that long) or a negative number (do not send:
//! the run ends as cancelled); `gate("response", status, retry_after_seconds_or_None)` after each response
//! head (its return value is ignored). An exception from it stops the request and is re-raised by the run.
//!
//! Must never: call Python without taking the GIL, or wait while holding it (the core does the waiting).

use std::time::Duration;

use pyo3::prelude::*;
use tooloop::{Admit, SendGate};

use crate::run::{ErrSlot, park};

/// The longest wait one answer may ask for (a larger number is clamped; the gate is asked again after it).
const MAX_WAIT: f64 = 3600.0;

pub struct PyGate {
    gate: Py<PyAny>,
    slot: ErrSlot,
}

impl PyGate {
    pub fn new(gate: Py<PyAny>, slot: ErrSlot) -> Self {
        PyGate { gate, slot }
    }
}

impl SendGate for PyGate {
    fn before_send(&self, body_bytes: usize) -> Admit {
        Python::attach(|py| match self.gate.bind(py).call1(("send", body_bytes, py.None())) {
            Ok(v) if v.is_none() => Admit::Go,
            Ok(v) => match v.extract::<f64>() {
                Ok(s) if s.is_nan() || s < 0.0 => Admit::Stop,
                Ok(s) if s <= 0.0 => Admit::Go,
                Ok(s) => Admit::Wait(Duration::from_secs_f64(s.min(MAX_WAIT))),
                Err(e) => {
                    park(&self.slot, e);
                    Admit::Stop
                }
            },
            Err(e) => {
                park(&self.slot, e);
                Admit::Stop
            }
        })
    }

    fn after_response(&self, status: u16, retry_after: Option<Duration>) {
        Python::attach(|py| {
            let after = retry_after.map(|d| d.as_secs_f64());
            if let Err(e) = self.gate.bind(py).call1(("response", status, after)) {
                park(&self.slot, e);
            }
        })
    }
}
