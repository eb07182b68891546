//! The core's spend ledger as a Python object (`tooloop._tooloop._Ledger`): the one account the agents of a
//! `tooloop.batch` share, so its `budget_usd` is kept by each agent's loop before every request — whatever
//! the model is (HTTP, a Python callable) and whoever sends it (a child agent, a compaction summary).
//!
//! Must never: keep any count of its own (the core's `tooloop::ledger::Ledger` is the account).

use std::sync::Arc;

use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;
use tooloop::Ledger;

/// A shared spend account with an optional cap in USD.
#[pyclass(module = "tooloop._tooloop", name = "_Ledger", frozen)]
pub struct PyLedger {
    pub(crate) inner: Arc<Ledger>,
}

#[pymethods]
impl PyLedger {
    /// `cap_usd`: no request of an agent counted in this ledger is sent when it would take the spent and held
    /// dollars past it (None: it only counts).
    #[new]
    #[pyo3(signature = (cap_usd=None))]
    fn new(cap_usd: Option<f64>) -> PyResult<Self> {
        if let Some(c) = cap_usd.filter(|c| !c.is_finite() || *c < 0.0) {
            return Err(PyValueError::new_err(format!("cap_usd must be a finite number >= 0, got {c}")));
        }
        Ok(PyLedger { inner: Ledger::new(cap_usd) })
    }

    /// The cap in USD (None: none).
    #[getter]
    fn cap_usd(&self) -> Option<f64> {
        self.inner.cap()
    }

    /// USD spent by the requests counted here (answered ones, at what they were charged).
    #[getter]
    fn spent_usd(&self) -> f64 {
        self.inner.spent()
    }

    /// USD held by requests in flight.
    #[getter]
    fn reserved_usd(&self) -> f64 {
        self.inner.reserved()
    }

    /// Learn that a request of the batch elsewhere (another process) cost `usd`: the estimate of each next
    /// request counted here is never below it.
    fn note_request_cost(&self, usd: f64) {
        self.inner.note_request_cost(usd);
    }

    /// Whether a request was refused because of this ledger's cap.
    #[getter]
    fn exhausted(&self) -> bool {
        self.inner.exhausted()
    }
}
