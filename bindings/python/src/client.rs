//! `_Client`: the wire layer alone — one request, the provider's own JSON back, raw stream events as received.

use std::collections::HashMap;
use std::sync::Arc;

use pyo3::prelude::*;
use tooloop::{CancelToken, Provider, Request, StreamEvent};

use crate::agent::build_provider;
use crate::convert::from_py;
use crate::errors::config_error;
use crate::run::{ErrSlot, Run, lock};

#[pyclass(module = "tooloop._tooloop", name = "_Client", frozen)]
pub struct PyClient {
    provider: Arc<dyn Provider>,
    slot: ErrSlot,
}

impl PyClient {
    fn request(py: Python<'_>, request: &Bound<'_, PyAny>, stream: bool) -> PyResult<Request> {
        let v = from_py(request, "the request")?;
        if !v.is_object() {
            return Err(config_error(py, "the request must be a dict (a Messages API request body)"));
        }
        let mut req: Request =
            serde_json::from_value(v).map_err(|e| config_error(py, format!("invalid request: {e}")))?;
        req.stream = stream;
        Ok(req)
    }

    fn send(&self, py: Python<'_>, request: Request, stream: bool) -> PyResult<Run> {
        let cancel = CancelToken::new();
        let canceller = cancel.clone();
        let provider = self.provider.clone();
        *lock(&self.slot) = None;
        Run::spawn(py, Arc::new(move || canceller.cancel()), self.slot.clone(), stream, move |emit| {
            let mut on_event = |ev: StreamEvent| {
                if let StreamEvent::Raw { data, .. } = ev {
                    emit(data);
                }
            };
            provider.send(&request, &cancel, &mut on_event).map(|r| r.raw)
        })
    }
}

#[pymethods]
impl PyClient {
    #[new]
    #[pyo3(signature = (provider, *, api_key=None, base_url=None, timeout=600.0, max_retries=2, headers=None))]
    fn new(
        py: Python<'_>,
        provider: &Bound<'_, PyAny>,
        api_key: Option<String>,
        base_url: Option<String>,
        timeout: f64,
        max_retries: u32,
        headers: Option<HashMap<String, String>>,
    ) -> PyResult<Self> {
        let slot = ErrSlot::default();
        let provider = build_provider(py, provider, api_key, base_url, timeout, max_retries, headers, &slot)?;
        Ok(PyClient { provider, slot })
    }

    /// Start a non-streaming request; the handle's result is the response dict.
    fn start_create(&self, py: Python<'_>, request: &Bound<'_, PyAny>) -> PyResult<Run> {
        let req = Self::request(py, request, false)?;
        self.send(py, req, false)
    }

    /// Start a streaming request; the handle yields raw event dicts, its result is the final message dict.
    fn start_stream(&self, py: Python<'_>, request: &Bound<'_, PyAny>) -> PyResult<Run> {
        let req = Self::request(py, request, true)?;
        self.send(py, req, true)
    }

    /// The provider's name.
    #[getter]
    fn provider_name(&self) -> String {
        self.provider.name().to_string()
    }
}
