//! Core errors → the Python exception tree of `tooloop.errors`.
//!
//! The classes are defined in Python (data-carrying, subclassable, documented in the stubs); this side
//! only describes the error as a dict and lets `tooloop.errors._from_core` pick the class, so the mapping
//! from the core's kinds to classes lives in one place.

use pyo3::prelude::*;
use pyo3::types::PyDict;
use serde_json::Value;
use tooloop::{ApiError, Error};

use crate::convert::to_py;

fn api_info(d: &Bound<'_, PyDict>, a: &ApiError) -> PyResult<()> {
    d.set_item("api_kind", a.kind.as_str())?;
    d.set_item("status_code", a.status)?;
    d.set_item("error_type", &a.error_type)?;
    d.set_item("api_message", &a.message)?;
    d.set_item("request_id", a.request_id.as_deref())?;
    d.set_item("retry_after", a.retry_after.map(|r| r.as_secs_f64()))?;
    Ok(())
}

/// The Python exception for a core error.
pub fn to_pyerr(py: Python<'_>, err: &Error) -> PyErr {
    match build(py, err) {
        Ok(e) => e,
        Err(e) => e,
    }
}

fn build(py: Python<'_>, err: &Error) -> PyResult<PyErr> {
    let d = PyDict::new(py);
    d.set_item("kind", err.kind_name())?;
    d.set_item("message", err.to_string())?;
    d.set_item("request_id", err.request_id())?;
    if let Some(p) = err.partial() {
        let v = serde_json::to_value(p).unwrap_or(Value::Null);
        d.set_item("partial", to_py(py, &v)?)?;
    }
    if let Some(a) = err.api() {
        api_info(&d, a)?;
    }
    match err {
        Error::Timeout { phase, after, .. } => {
            d.set_item("phase", *phase)?;
            d.set_item("after", after.as_secs_f64())?;
        }
        Error::StreamInterrupted { message, .. } => d.set_item("reason", message)?,
        Error::MaxTurns { turns } => d.set_item("turns", *turns)?,
        Error::ToolAborted { tool, message } => {
            d.set_item("tool", tool)?;
            d.set_item("reason", message)?;
        }
        Error::InvalidResponse { message, .. } => d.set_item("reason", message)?,
        Error::Config(m) => d.set_item("reason", m)?,
        Error::OutputValidation(f) => {
            d.set_item("errors", f.errors.clone())?;
            d.set_item("output", to_py(py, f.output.as_ref().unwrap_or(&Value::Null))?)?;
            d.set_item("text", &f.text)?;
            d.set_item("attempts", f.attempts)?;
        }
        Error::Io { context, source } => {
            d.set_item("reason", context)?;
            d.set_item("errno", source.raw_os_error())?;
        }
        _ => {}
    }
    let exc = py.import("tooloop.errors")?.getattr("_from_core")?.call1((d,))?;
    Ok(PyErr::from_value(exc))
}

/// A `tooloop.ConfigError` with `message` (bad arguments that are the caller's to fix).
pub fn config_error(py: Python<'_>, message: impl Into<String>) -> PyErr {
    to_pyerr(py, &Error::Config(message.into()))
}
