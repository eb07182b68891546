//! The module's functions that ask the core's tables and stores: prices, sessions, the sandbox, AWS
//! credentials, context windows.

use pyo3::prelude::*;

use crate::convert::{from_py, to_py};
use crate::errors::to_pyerr;

/// Estimated cost in USD of `usage` (a dict) on `model`, or None when the model's price is unknown.
#[pyfunction]
pub fn estimate_cost_usd(model: &str, usage: &Bound<'_, PyAny>) -> PyResult<Option<f64>> {
    let u: tooloop::Usage = serde_json::from_value(from_py(usage, "usage")?)
        .map_err(|e| pyo3::exceptions::PyValueError::new_err(format!("usage: {e}")))?;
    Ok(tooloop::estimate_cost_usd(model, &u))
}

/// Read the session file (or database session, `path.db#id`) at `path` without opening it for writing
/// (the core's `store::load`):
/// `{"path", "entries", "torn_tail", "skipped", "cost_usd"}`, `cost_usd` summing each assistant entry priced
/// with its own model (None when none has a known price). Raises SessionError when it cannot be read.
#[pyfunction]
pub fn load_session(py: Python<'_>, path: std::path::PathBuf) -> PyResult<Py<PyAny>> {
    let shown = path.display().to_string();
    let report = py.detach(|| tooloop::load_store(&path)).map_err(|e| to_pyerr(py, &e))?;
    let cost = tooloop::entries_cost_usd(&report.entries);
    let v = serde_json::json!({
        "path": shown,
        "entries": report.entries,
        "torn_tail": report.torn_tail.map(|(line, len)| serde_json::json!({"line": line, "bytes": len})),
        "skipped": report.skipped.iter().map(|(line, why)| serde_json::json!({"line": line, "reason": why})).collect::<Vec<_>>(),
        "cost_usd": cost,
    });
    Ok(to_py(py, &v)?.unbind())
}

/// The Landlock ABI version the kernel offers for the bash sandbox, or None where it has none (the sandbox
/// then cannot confine bash).
#[pyfunction]
pub fn sandbox_support() -> Option<u32> {
    tooloop::sandbox_support()
}

/// Whether Bedrock will find AWS credentials, asked the way the Bedrock provider asks (environment keys, else
/// the shared credentials file at `AWS_PROFILE`): raises ConfigError with the core's message when not.
#[pyfunction]
pub fn check_aws_credentials(py: Python<'_>) -> PyResult<()> {
    py.detach(tooloop::AwsCredentials::resolve).map(|_| ()).map_err(|e| to_pyerr(py, &e))
}

/// The context window of a known model in tokens (the core's table), or None.
#[pyfunction]
pub fn context_window(model: &str) -> Option<u64> {
    tooloop::context_window(model)
}

/// Whether `model` is one of OpenAI's reasoning models, which take tools with reasoning only on the Responses
/// API (the core's table, `models::RESPONSES_MODELS`).
#[pyfunction]
pub fn prefers_responses(model: &str) -> bool {
    tooloop::prefers_responses(model)
}
