//! Hooks as Python callables, and the core's rule matcher and read-only bash check for the CLI.
//!
//! The callables `tooloop/_hooks.py` hands over answer in a fixed shape (checked there, so a wrong return is
//! a `TypeError` naming the hook): `before_tool(id, name, input) -> None | ("deny", reason) | ("input",
//! dict)`, `after_tool(id, name, input, content, is_error, denied) -> None | str`, `before_request(request)
//! -> None`, `on_stop(result) -> None | str`, `after_check(check, message) -> None | str`. An exception is
//! parked in the run's slot (the run re-raises it unchanged) and the core ends the run with `Error::Hook`.

use std::sync::Arc;

use pyo3::prelude::*;
use pyo3::types::{PyString, PyTuple};
use serde_json::Value;
use tooloop::ToolUseBlock;
use tooloop::{BeforeTool, CheckResult, Hooks, ToolResultView};
use tooloop::{Request, RunResult};

use crate::convert::{from_py, to_py};
use crate::run::{ErrSlot, park};

/// Run `f` under the GIL; an exception is parked and becomes the hook's failure message.
fn guarded<T>(slot: &ErrSlot, f: impl FnOnce(Python<'_>) -> PyResult<T>) -> Result<T, String> {
    Python::attach(|py| {
        f(py).map_err(|e| {
            let message = e.to_string();
            park(slot, e);
            message
        })
    })
}

fn opt_str(v: &Bound<'_, PyAny>) -> PyResult<Option<String>> {
    if v.is_none() { Ok(None) } else { Ok(Some(v.cast::<PyString>()?.to_string())) }
}

/// The core hooks calling these Python adapters (None: that hook is not set).
pub fn hooks(
    slot: &ErrSlot,
    before_tool: Option<Py<PyAny>>,
    after_tool: Option<Py<PyAny>>,
    before_request: Option<Py<PyAny>>,
    on_stop: Option<Py<PyAny>>,
    after_check: Option<Py<PyAny>>,
) -> Hooks {
    let mut h = Hooks::default();
    if let Some(f) = before_tool {
        let slot = slot.clone();
        h.before_tool = Some(Arc::new(move |call: &ToolUseBlock| {
            guarded(&slot, |py| {
                let answer = f.bind(py).call1((&call.id, &call.name, to_py(py, &call.input)?))?;
                if answer.is_none() {
                    return Ok(BeforeTool::Continue);
                }
                let t = answer.cast::<PyTuple>()?;
                let what: String = t.get_item(0)?.extract()?;
                let value = t.get_item(1)?;
                Ok(match what.as_str() {
                    "deny" => BeforeTool::Deny(value.extract()?),
                    _ => BeforeTool::Input(from_py(&value, "the new input")?),
                })
            })
        }));
    }
    if let Some(f) = after_tool {
        let slot = slot.clone();
        h.after_tool = Some(Arc::new(move |call: &ToolUseBlock, r: &ToolResultView| {
            guarded(&slot, |py| {
                let args =
                    (&call.id, &call.name, to_py(py, &call.input)?, to_py(py, &r.content)?, r.is_error, r.denied);
                opt_str(&f.bind(py).call1(args)?)
            })
        }));
    }
    if let Some(f) = before_request {
        let slot = slot.clone();
        h.before_request = Some(Arc::new(move |request: &Request| {
            guarded(&slot, |py| {
                let body = serde_json::to_value(request).unwrap_or(Value::Null);
                f.bind(py).call1((to_py(py, &body)?,))?;
                Ok(())
            })
        }));
    }
    if let Some(f) = on_stop {
        let slot = slot.clone();
        h.on_stop = Some(Arc::new(move |result: &RunResult| {
            guarded(&slot, |py| {
                let v = serde_json::to_value(result).unwrap_or(Value::Null);
                opt_str(&f.bind(py).call1((to_py(py, &v)?,))?)
            })
        }));
    }
    if let Some(f) = after_check {
        let slot = slot.clone();
        h.after_check = Some(Arc::new(move |check: &CheckResult, message: &str| {
            guarded(&slot, |py| {
                let v = serde_json::to_value(check).unwrap_or(Value::Null);
                opt_str(&f.bind(py).call1((to_py(py, &v)?, message))?)
            })
        }));
    }
    h
}

/// What permission rules say about the call `name(input)`: `("allow" | "ask" | "deny", rule)`, or None when
/// no rule matches. `rules` is `{"allow": [...], "ask": [...], "deny": [...]}`; relative path rules are
/// anchored at `workspace`. Raises ValueError for a rule that does not parse.
#[pyfunction]
pub fn match_rules(
    rules: &Bound<'_, PyAny>,
    name: &str,
    input: &Bound<'_, PyAny>,
    workspace: std::path::PathBuf,
) -> PyResult<Option<(String, String)>> {
    let parsed = tooloop::PermissionRules::from_value(&from_py(rules, "rules")?)
        .map_err(pyo3::exceptions::PyValueError::new_err)?
        .unwrap_or_default();
    use tooloop::RuleDecision;
    Ok(match parsed.decide(tooloop::rule_alias(name), &from_py(input, "input")?, &workspace) {
        RuleDecision::Allow(r) => Some(("allow".into(), r)),
        RuleDecision::Ask(r) => Some(("ask".into(), r)),
        RuleDecision::Deny(r) => Some(("deny".into(), r)),
        RuleDecision::NoMatch => None,
    })
}

/// Whether a bash command only reads (every part a known read-only command, no output redirection).
#[pyfunction]
pub fn read_only_command(command: &str) -> bool {
    tooloop::read_only_command(command)
}

/// The simple commands of a shell command (split at `&&`, `;`, `|`, …, wrappers looked through).
#[pyfunction]
pub fn split_command(command: &str) -> Vec<String> {
    tooloop::split_command(command)
}

/// The workspace files and folders a check command runs or names (the ones the run holds read-only),
/// relative to `workspace`, with `/` between parts.
#[pyfunction]
pub fn check_files(command: &str, workspace: &str) -> Vec<String> {
    tooloop::check_files(command, std::path::Path::new(workspace))
        .iter()
        .map(|p| p.to_string_lossy().replace(std::path::MAIN_SEPARATOR, "/"))
        .collect()
}
