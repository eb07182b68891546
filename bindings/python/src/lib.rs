//! `tooloop._tooloop`: the compiled half of the Python package.
//!
//! Thin on purpose: it converts between JSON values and Python objects, maps core errors to the exception
//! classes of `tooloop.errors`, and manages the GIL (released while waiting, re-taken only to call Python).
//! The agent logic stays in the core crate; the Python-facing API (argument handling, result objects,
//! events) is the pure-Python package around this module.

mod agent;
mod callables;
mod client;
mod control;
mod convert;
mod drive;
mod errors;
mod functions;
mod gate;
mod ledger;
mod otel;
mod pull;
mod restore;
mod run;
mod sessions;

use pyo3::prelude::*;

#[pymodule]
fn _tooloop(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_class::<agent::PyAgent>()?;
    m.add_class::<client::PyClient>()?;
    m.add_class::<run::Run>()?;
    m.add_class::<pull::PullStream>()?;
    m.add_class::<drive::Driven>()?;
    m.add_class::<ledger::PyLedger>()?;
    m.add_function(wrap_pyfunction!(functions::estimate_cost_usd, m)?)?;
    m.add_function(wrap_pyfunction!(functions::load_session, m)?)?;
    m.add_function(wrap_pyfunction!(functions::sandbox_support, m)?)?;
    m.add_function(wrap_pyfunction!(functions::context_window, m)?)?;
    m.add_function(wrap_pyfunction!(functions::prefers_responses, m)?)?;
    m.add_function(wrap_pyfunction!(sessions::list_db_sessions, m)?)?;
    m.add_function(wrap_pyfunction!(sessions::migrate_session, m)?)?;
    m.add_function(wrap_pyfunction!(restore::restore_file, m)?)?;
    m.add_function(wrap_pyfunction!(control::match_rules, m)?)?;
    m.add_function(wrap_pyfunction!(control::read_only_command, m)?)?;
    m.add_function(wrap_pyfunction!(control::split_command, m)?)?;
    m.add_function(wrap_pyfunction!(control::check_files, m)?)?;
    m.add_function(wrap_pyfunction!(functions::check_aws_credentials, m)?)?;
    m.add_function(wrap_pyfunction!(otel::_set_span_source, m)?)?;
    // The core's option keys, the one list `tooloop.Agent` and the C config are checked against.
    m.add_class::<agent::AllowReadOnly>()?;
    m.add("ALLOW_READ_ONLY", agent::AllowReadOnly)?;
    m.add("DEFAULT_PROTECTED_PATHS", tooloop::DEFAULT_PROTECTED_PATHS.to_vec())?;
    m.add("OPTION_KEYS", tooloop::AgentOptions::KEYS.to_vec())?;
    // The core's provider table (name, wire, key and base-URL variables, default URL, size limits): what the
    // CLI lists and checks `--provider` against.
    m.add("PROVIDERS", convert::to_py(m.py(), &tooloop::providers_json())?)?;
    m.add("__version__", env!("CARGO_PKG_VERSION"))?;
    Ok(())
}
