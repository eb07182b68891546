//! Sessions of a SQLite database, for the CLI's `tooloop sessions` and for hosts: list them, and migrate a
//! session between a JSONL file and a database (the core's `session_sqlite::list` and `store::migrate`).

use pyo3::prelude::*;

use crate::convert::to_py;
use crate::errors::to_pyerr;

/// The sessions of the database at `db`, oldest first: `[{"id", "created_at", "workspace", "records",
/// "updated_at"}]` (times in ms since the epoch). Raises SessionError when it cannot be read, is not a
/// tooloop database or has a newer schema.
#[pyfunction]
pub fn list_db_sessions(py: Python<'_>, db: std::path::PathBuf) -> PyResult<Py<PyAny>> {
    let rows = py.detach(|| tooloop::list_sqlite_sessions(&db)).map_err(|e| to_pyerr(py, &e))?;
    let v: Vec<serde_json::Value> = rows
        .into_iter()
        .map(|r| {
            serde_json::json!({"id": r.id, "created_at": r.created_at, "workspace": r.workspace,
                               "records": r.records, "updated_at": r.updated_at})
        })
        .collect();
    Ok(to_py(py, &serde_json::Value::Array(v))?.unbind())
}

/// Copy the session `source` names into a new session `dest` names (a JSONL file path or `path.db#id`),
/// record for record; returns how many records were copied. Raises ConfigError when `dest` already holds
/// a session, SessionError when either cannot be read or written.
#[pyfunction]
pub fn migrate_session(py: Python<'_>, source: std::path::PathBuf, dest: std::path::PathBuf) -> PyResult<usize> {
    py.detach(|| tooloop::migrate_store(&source, &dest)).map_err(|e| to_pyerr(py, &e))
}
