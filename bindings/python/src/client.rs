//! `_Client`: the wire layer alone — one request in the provider's own shape (Messages API; Chat Completions
//! for OpenAI), its own JSON back, raw stream events as received.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use pyo3::prelude::*;
use pyo3::types::PyString;
use serde_json::Value;
use tooloop::{CancelToken, Provider, StreamEvent};
use tooloop::{Protocol, ProviderConfig};

use crate::callables::build_provider;
use crate::convert::{from_py, to_py};
use crate::errors::{config_error, to_pyerr};
use crate::pull::PullStream;
use crate::run::{ErrSlot, Item, Run, lock, signal_hook};

#[pyclass(module = "tooloop._tooloop", name = "_Client", frozen)]
pub struct PyClient {
    provider: Arc<dyn Provider>,
    slot: ErrSlot,
    /// A built-in provider (no Python code runs during a request): `create` runs on the calling thread.
    direct: bool,
}

impl PyClient {
    fn request(py: Python<'_>, request: &Bound<'_, PyAny>) -> PyResult<Value> {
        let v = from_py(request, "the request")?;
        if !v.is_object() {
            return Err(config_error(py, "the request must be a dict (a request body in the API's own shape)"));
        }
        Ok(v)
    }

    fn send(&self, py: Python<'_>, body: Value, stream: bool) -> PyResult<Run> {
        let cancel = CancelToken::new();
        let canceller = cancel.clone();
        let provider = self.provider.clone();
        *lock(&self.slot) = None;
        Run::spawn(py, Arc::new(move || canceller.cancel()), self.slot.clone(), stream, move |emit| {
            let mut on_event = |ev: StreamEvent| match ev {
                StreamEvent::Raw { data, .. } => emit(Item::Value(data)),
                StreamEvent::RawJson { json, .. } => emit(Item::Json(json)),
                _ => {}
            };
            provider.send_raw(&body, stream, &cancel, &mut on_event)
        })
    }
}

/// A Bedrock provider: region from the argument or the environment, AWS credentials from the environment
/// or the shared credentials file.
fn build_bedrock(
    py: Python<'_>,
    region: Option<String>,
    base_url: Option<String>,
    timeout: f64,
    max_retries: u32,
    headers: Option<HashMap<String, String>>,
) -> PyResult<Arc<dyn Provider>> {
    if !(timeout.is_finite() && timeout > 0.0) {
        return Err(config_error(py, format!("timeout must be a positive number of seconds, got {timeout}")));
    }
    let mut config = ProviderConfig::new(Protocol::Bedrock);
    config.region = region;
    config.base_url = base_url;
    let total = Duration::from_secs_f64(timeout);
    config.http.total_timeout = total;
    config.http.idle_timeout = config.http.idle_timeout.min(total);
    config.http.connect_timeout = config.http.connect_timeout.min(total);
    config.http.max_retries = max_retries;
    let mut headers: Vec<(String, String)> = headers.unwrap_or_default().into_iter().collect();
    headers.sort();
    config.headers = headers;
    config.build().map_err(|e| to_pyerr(py, &e))
}

#[pymethods]
impl PyClient {
    #[new]
    #[pyo3(signature = (provider, *, api_key=None, base_url=None, timeout=600.0, max_retries=2, headers=None, region=None))]
    #[allow(clippy::too_many_arguments)]
    fn new(
        py: Python<'_>,
        provider: &Bound<'_, PyAny>,
        api_key: Option<String>,
        base_url: Option<String>,
        timeout: f64,
        max_retries: u32,
        headers: Option<HashMap<String, String>>,
        region: Option<String>,
    ) -> PyResult<Self> {
        let slot = ErrSlot::default();
        let direct = provider.cast::<PyString>().is_ok();
        let bedrock = provider
            .cast::<PyString>()
            .is_ok_and(|s| s.to_cow().is_ok_and(|n| Protocol::parse(&n).ok() == Some(Protocol::Bedrock)));
        let provider = if bedrock {
            if api_key.is_some() {
                return Err(config_error(py, "provider=\"bedrock\" signs with AWS credentials, not api_key"));
            }
            build_bedrock(py, region, base_url, timeout, max_retries, headers)?
        } else if region.is_some() {
            return Err(config_error(py, "region is only for provider=\"bedrock\""));
        } else {
            build_provider(py, provider, api_key, base_url, timeout, max_retries, headers, &slot)?
        };
        Ok(PyClient { provider, slot, direct })
    }

    /// Start a non-streaming request; the handle's result is the response dict.
    fn start_create(&self, py: Python<'_>, request: &Bound<'_, PyAny>) -> PyResult<Run> {
        let body = Self::request(py, request)?;
        self.send(py, body, false)
    }

    /// Send a non-streaming request and wait for the response dict. With a built-in provider the request runs
    /// on the calling thread with the GIL released (no thread hop: that is what makes small requests cheap
    /// when the machine is busy); every 50 ms of waiting the GIL is taken back briefly to run Python's signal
    /// handlers, so Ctrl+C cancels the request within 200 ms and then propagates. A model callable runs on a
    /// worker thread, like `start_create`.
    fn create(&self, py: Python<'_>, request: &Bound<'_, PyAny>) -> PyResult<Py<PyAny>> {
        let body = Self::request(py, request)?;
        if !self.direct {
            return self.send(py, body, false)?.result(py);
        }
        let cancel = CancelToken::new();
        let interrupt: ErrSlot = Arc::new(Mutex::new(None));
        let provider = &self.provider;
        let outcome = py.detach(|| {
            let hook = signal_hook(&cancel, &interrupt);
            tooloop::with_poll_hook(hook, || provider.send_raw(&body, false, &cancel, &mut |_| {}))
        });
        if let Some(e) = lock(&interrupt).take() {
            return Err(e);
        }
        match outcome {
            Ok(v) => Ok(to_py(py, &v)?.unbind()),
            Err(e) => Err(to_pyerr(py, &e)),
        }
    }

    /// Start a streaming request; the handle yields raw event dicts, its result is the final message dict.
    /// A built-in provider that can hand out a pull-based stream (Anthropic, OpenAI) gives a `_Stream`, read on the
    /// caller's thread as the caller asks for events (sent at the first ask); the others a `_Run` on a worker.
    fn start_stream(&self, py: Python<'_>, request: &Bound<'_, PyAny>) -> PyResult<Py<PyAny>> {
        let body = Self::request(py, request)?;
        if self.direct && self.provider.pulls_raw_streams() && !crate::run::worker_streams() {
            return Ok(Bound::new(py, PullStream::new(self.provider.clone(), body))?.into_any().unbind());
        }
        Ok(Bound::new(py, self.send(py, body, true)?)?.into_any().unbind())
    }

    /// The provider's name.
    #[getter]
    fn provider_name(&self) -> String {
        self.provider.name().to_string()
    }
}
