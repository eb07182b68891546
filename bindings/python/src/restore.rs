//! `restore_file`: the core's race-free file restore (the CLI's `/undo`), for Python.

use pyo3::exceptions::PyOSError;
use pyo3::prelude::*;
use std::path::PathBuf;

/// Put `path` inside `workspace` back to `content` with permission bits `mode` (None: remove it), through
/// handles on the workspace that never follow a symlink out. Returns "written", "removed" or "absent".
/// Raises OSError when the path leads outside the workspace or the write fails.
#[pyfunction]
#[pyo3(signature = (workspace, path, content, mode=0o644))]
pub fn restore_file(
    py: Python<'_>,
    workspace: PathBuf,
    path: &str,
    content: Option<Vec<u8>>,
    mode: u32,
) -> PyResult<&'static str> {
    let path = path.to_string();
    let done = py.detach(move || {
        let ws = tooloop::Workspace::new(&workspace).map_err(|e| format!("workspace {}: {e}", workspace.display()))?;
        tooloop::restore_file(&ws, &path, content.as_deref(), mode)
    });
    match done {
        Ok(tooloop::Restored::Written) => Ok("written"),
        Ok(tooloop::Restored::Removed) => Ok("removed"),
        Ok(_) => Ok("absent"),
        Err(message) => Err(PyOSError::new_err(message)),
    }
}
