//! `_Agent`: the core agent with Python tools, a Python model callable and a Python permission hook.
//!
//! Argument normalisation (thinking budgets, tool objects from plain functions, result objects) is done by
//! `tooloop/_agent.py`; this side converts, maps errors and manages the GIL. Python callables run on the
//! run's worker thread under `Python::attach`.

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::{Arc, Mutex, Weak};
use std::time::Duration;

use pyo3::exceptions::PyException;
use pyo3::prelude::*;
use pyo3::types::{PyList, PyString, PyTuple};
use serde_json::Value;
use tooloop::provider::FnProvider;
use tooloop::tools::{ToolContext, ToolError, ToolOutput};
use tooloop::types::ToolUseBlock;
use tooloop::{
    Agent, AgentConfig, CancelToken, ContentBlock, Error, MessageResponse, Permission, Protocol, Provider,
    ProviderConfig, Request, Tool,
};

use crate::convert::{from_py, to_py};
use crate::errors::{config_error, to_pyerr};
use crate::run::{ErrSlot, Run, lock, park};

fn secs(s: f64, what: &str, py: Python<'_>) -> PyResult<Duration> {
    if !(s.is_finite() && s > 0.0) {
        return Err(config_error(py, format!("{what} must be a positive number of seconds, got {s}")));
    }
    Ok(Duration::from_secs_f64(s))
}

/// A provider from `"anthropic"`, `"openai"` or a Python callable `model(request: dict) -> dict`.
#[allow(clippy::too_many_arguments)] // replaced by the core options type (issue 10)
pub fn build_provider(
    py: Python<'_>,
    provider: &Bound<'_, PyAny>,
    api_key: Option<String>,
    base_url: Option<String>,
    timeout: f64,
    max_retries: u32,
    headers: Option<HashMap<String, String>>,
    slot: &ErrSlot,
) -> PyResult<Arc<dyn Provider>> {
    if let Ok(name) = provider.cast::<PyString>() {
        let protocol = Protocol::parse(&name.to_cow()?).map_err(|e| to_pyerr(py, &e))?;
        let mut config = ProviderConfig::new(protocol);
        config.api_key = api_key.map(tooloop::provider::Secret::new);
        config.base_url = base_url;
        let total = secs(timeout, "timeout", py)?;
        config.http.total_timeout = total;
        config.http.idle_timeout = config.http.idle_timeout.min(total);
        config.http.connect_timeout = config.http.connect_timeout.min(total);
        config.http.max_retries = max_retries;
        // Sorted so requests are the same from run to run whatever the dict's hashing.
        let mut headers: Vec<(String, String)> = headers.unwrap_or_default().into_iter().collect();
        headers.sort();
        config.headers = headers;
        return config.build().map_err(|e| to_pyerr(py, &e));
    }
    if !provider.is_callable() {
        return Err(config_error(
            py,
            format!("provider must be \"anthropic\", \"openai\" or a callable, got {}", provider.get_type().name()?),
        ));
    }
    let model = provider.clone().unbind();
    let slot = slot.clone();
    Ok(Arc::new(FnProvider::new(move |request: &Request, _cancel| call_model(&model, request, &slot))))
}

/// Call the Python model. Its exceptions (including the validation errors `_agent.py` raises for a bad
/// reply) are parked and re-raised unchanged in the caller.
fn call_model(model: &Py<PyAny>, request: &Request, slot: &ErrSlot) -> Result<MessageResponse, Error> {
    Python::attach(|py| {
        let invalid = |message: String| Error::InvalidResponse { message, request_id: None };
        let body = serde_json::to_value(request).map_err(|e| invalid(format!("request not serializable: {e}")))?;
        let reply = to_py(py, &body).and_then(|req| model.bind(py).call1((req,)));
        let reply = match reply.and_then(|r| from_py(&r, "the model's reply")) {
            Ok(v) => v,
            Err(e) => {
                let message = format!("the model callable raised: {e}");
                park(slot, e);
                return Err(invalid(message));
            }
        };
        serde_json::from_value::<MessageResponse>(reply).map_err(|e| {
            let message = format!("the model callable returned an invalid message: {e}");
            park(slot, to_pyerr(py, &invalid(message.clone())));
            invalid(message)
        })
    })
}

/// Run a Python tool: `invoke(input) -> (content, is_error)`.
fn call_tool(invoke: &Py<PyAny>, name: &str, input: &Value, slot: &ErrSlot) -> Result<ToolOutput, ToolError> {
    Python::attach(|py| {
        let ret = to_py(py, input).and_then(|args| invoke.bind(py).call1((args,)));
        let ret = match ret {
            Ok(r) => r,
            Err(e) if e.is_instance_of::<PyException>(py) => {
                // Tool.invoke turns a tool's Exception into an error result itself; one escaping it is still
                // something the model can be told about rather than a reason to stop.
                return Err(ToolError::Respond(format!("Tool '{name}' failed: {e}")));
            }
            Err(e) => {
                // KeyboardInterrupt, SystemExit, …: end the run and re-raise this very exception.
                let what = e.to_string();
                park(slot, e);
                return Err(ToolError::Fatal(what));
            }
        };
        let (out, is_error) = parse_tool_return(&ret, name).map_err(ToolError::Respond)?;
        if !is_error {
            return Ok(out);
        }
        Err(ToolError::Respond(match out {
            ToolOutput::Text(t) => t,
            ToolOutput::Blocks(b) => Value::Array(b).to_string(),
        }))
    })
}

fn parse_tool_return(ret: &Bound<'_, PyAny>, name: &str) -> Result<(ToolOutput, bool), String> {
    let bad = || format!("Tool '{name}' returned an invalid result (expected (content, is_error) from Tool.invoke)");
    let tuple = ret.cast::<PyTuple>().map_err(|_| bad())?;
    if tuple.len() != 2 {
        return Err(bad());
    }
    let content = tuple.get_item(0).map_err(|_| bad())?;
    let is_error = tuple.get_item(1).and_then(|b| b.is_truthy()).map_err(|_| bad())?;
    if let Ok(s) = content.cast::<PyString>() {
        return Ok((ToolOutput::Text(s.to_string()), is_error));
    }
    if content.cast::<PyList>().is_ok() {
        let v = from_py(&content, &format!("the result of tool '{name}'")).map_err(|e| e.to_string())?;
        if let Value::Array(blocks) = v {
            if blocks.iter().all(|b| b.get("type").and_then(Value::as_str).is_some()) {
                return Ok((ToolOutput::Blocks(blocks), is_error));
            }
            return Ok((ToolOutput::Text(Value::Array(blocks).to_string()), is_error));
        }
    }
    Err(bad())
}

/// The core agent, shared with the runs it starts.
#[pyclass(module = "tooloop._tooloop", name = "_Agent", frozen)]
pub struct PyAgent {
    core: Arc<Agent>,
    slot: ErrSlot,
    /// The token of the last run started.
    latest: Mutex<Option<CancelToken>>,
}

#[pymethods]
impl PyAgent {
    #[new]
    #[pyo3(signature = (provider, *, model, system=None, api_key=None, base_url=None, max_tokens=8192,
        max_turns=Some(20), thinking=None, timeout=600.0, max_retries=2, extra=None, headers=None))]
    #[allow(clippy::too_many_arguments)]
    fn new(
        py: Python<'_>,
        provider: &Bound<'_, PyAny>,
        model: String,
        system: Option<&Bound<'_, PyAny>>,
        api_key: Option<String>,
        base_url: Option<String>,
        max_tokens: u32,
        max_turns: Option<u32>,
        thinking: Option<&Bound<'_, PyAny>>,
        timeout: f64,
        max_retries: u32,
        extra: Option<&Bound<'_, PyAny>>,
        headers: Option<HashMap<String, String>>,
    ) -> PyResult<Self> {
        let slot = ErrSlot::default();
        let is_host = provider.cast::<PyString>().is_err();
        let p = build_provider(py, provider, api_key, base_url, timeout, max_retries, headers, &slot)?;
        let mut config = AgentConfig { model, max_tokens, max_turns, ..AgentConfig::default() };
        config.system = system.map(|s| from_py(s, "system")).transpose()?;
        config.thinking = thinking.map(|t| from_py(t, "thinking")).transpose()?;
        // A Python model gets the whole reply at once: asking it to "stream" would only confuse it.
        config.stream = !is_host;
        if let Some(extra) = extra {
            match from_py(extra, "extra")? {
                Value::Object(m) => config.extra = m,
                Value::Null => {}
                other => return Err(config_error(py, format!("extra must be a dict, got {other}"))),
            }
        }
        Ok(PyAgent { core: Arc::new(Agent::new(p, config)), slot, latest: Mutex::new(None) })
    }

    /// Register a tool whose handler is `invoke(input: dict) -> (content, is_error)`.
    #[pyo3(signature = (name, description, input_schema, invoke, parallel_safe=false))]
    fn register_tool(
        &self,
        py: Python<'_>,
        name: String,
        description: String,
        input_schema: &Bound<'_, PyAny>,
        invoke: Py<PyAny>,
        parallel_safe: bool,
    ) -> PyResult<()> {
        let schema = from_py(input_schema, &format!("the input_schema of tool '{name}'"))?;
        let slot = self.slot.clone();
        let tool_name = name.clone();
        let handler = move |input: &Value, _ctx: &ToolContext<'_>| call_tool(&invoke, &tool_name, input, &slot);
        let tool = Tool::new(name, description, schema, handler).map_err(|e| to_pyerr(py, &e))?;
        self.core.tools().register(tool.parallel_safe(parallel_safe)).map_err(|e| to_pyerr(py, &e))
    }

    /// Remove a tool; whether it existed.
    fn unregister_tool(&self, name: &str) -> bool {
        self.core.tools().unregister(name)
    }

    /// Names of the registered tools, in order.
    fn tool_names(&self) -> Vec<String> {
        self.core.tools().names()
    }

    /// The tool specs the model is offered (list of dicts).
    fn tool_specs(&self, py: Python<'_>) -> PyResult<Py<PyAny>> {
        let v = serde_json::to_value(self.core.tools().specs()).unwrap_or(Value::Null);
        Ok(to_py(py, &v)?.unbind())
    }

    /// Register the built-in coding tools `names` (all when empty) confined to `workspace`.
    fn register_builtins(&self, py: Python<'_>, workspace: PathBuf, names: Vec<String>) -> PyResult<()> {
        self.core.tools().register_builtins(&workspace, &names).map_err(|e| to_pyerr(py, &e))
    }

    /// Open (or create) the JSONL session at `path`, load it, and append to it from now on.
    fn attach_session(&self, py: Python<'_>, path: PathBuf) -> PyResult<Py<PyAny>> {
        let core = self.core.clone();
        let report = py
            .detach(move || tooloop::Session::open(&path).and_then(|s| core.attach_session(s)))
            .map_err(|e| to_pyerr(py, &e))?;
        let v = serde_json::json!({
            "entries": report.entries.len(),
            "torn_tail": report.torn_tail.map(|(line, len)| serde_json::json!({"line": line, "bytes": len})),
            "skipped": report.skipped.iter().map(|(line, why)| serde_json::json!({"line": line, "reason": why})).collect::<Vec<_>>(),
            "created": report.created,
        });
        Ok(to_py(py, &v)?.unbind())
    }

    /// Set (None: clear) the permission hook `check(id, name, input) -> None | str` (None allows, a string
    /// is the denial reason). An exception from it cancels the run and is re-raised by the run.
    #[pyo3(signature = (check=None))]
    fn set_permission(&self, check: Option<Py<PyAny>>) {
        let Some(check) = check else {
            self.core.set_permission(None);
            return;
        };
        let slot = self.slot.clone();
        // Weak: the hook lives inside the agent it cancels.
        let agent: Weak<Agent> = Arc::downgrade(&self.core);
        self.core.set_permission(Some(Arc::new(move |call: &ToolUseBlock| {
            Python::attach(|py| {
                let answer =
                    to_py(py, &call.input).and_then(|input| check.bind(py).call1((&call.id, &call.name, input)));
                match answer {
                    Ok(a) if a.is_none() => Permission::Allow,
                    Ok(a) => Permission::Deny(match a.cast::<PyString>() {
                        Ok(s) => s.to_string(),
                        Err(_) => a.str().map(|s| s.to_string()).unwrap_or_default(),
                    }),
                    Err(e) => {
                        park(&slot, e);
                        if let Some(a) = agent.upgrade() {
                            a.cancel();
                        }
                        Permission::Deny("the permission check failed".into())
                    }
                }
            })
        })));
    }

    /// Start a run on a worker thread: `input` None resumes, a str or a list of content blocks is new user
    /// input. With `stream`, the run's events are delivered through the handle.
    #[pyo3(signature = (input, stream=false))]
    fn start(&self, py: Python<'_>, input: Option<&Bound<'_, PyAny>>, stream: bool) -> PyResult<Run> {
        let blocks = match input {
            None => None,
            Some(i) if i.cast::<PyString>().is_ok() => Some(vec![ContentBlock::text(i.extract::<String>()?)]),
            Some(i) => {
                let v = from_py(i, "input")?;
                let Value::Array(items) = v else {
                    return Err(config_error(py, "input must be a str or a list of content blocks"));
                };
                let mut blocks = Vec::new();
                for item in items {
                    blocks.push(ContentBlock::from_value(item).map_err(|e| config_error(py, format!("input: {e}")))?);
                }
                Some(blocks)
            }
        };
        *lock(&self.slot) = None;
        let core = self.core.clone();
        // The run's own token, held here before the worker starts: a cancel that comes before the run has
        // begun is not lost, and a late cancel through an old handle never reaches a newer run.
        let token = CancelToken::new();
        *lock(&self.latest) = Some(token.clone());
        let canceller = token.clone();
        Run::spawn(py, Arc::new(move || canceller.cancel()), self.slot.clone(), stream, move |emit| {
            let mut on_event = |ev: &tooloop::Event| {
                if let Ok(v) = serde_json::to_value(ev) {
                    emit(v);
                }
            };
            let result = match blocks {
                Some(b) => core.run_cancellable(b, token, &mut on_event),
                None => core.resume_cancellable(token, &mut on_event),
            };
            result.map(|r| serde_json::to_value(&r).unwrap_or(Value::Null))
        })
    }

    /// Cancel the current run, if any (any thread), also one started but not yet begun.
    fn cancel(&self) {
        if let Some(t) = lock(&self.latest).as_ref() {
            t.cancel();
        }
        self.core.cancel();
    }

    /// Clear the conversation.
    fn reset(&self, py: Python<'_>) -> PyResult<()> {
        self.core.reset().map_err(|e| to_pyerr(py, &e))
    }

    /// The API view (list of message dicts).
    fn messages(&self, py: Python<'_>) -> PyResult<Py<PyAny>> {
        let v = serde_json::to_value(self.core.messages()).unwrap_or(Value::Null);
        Ok(to_py(py, &v)?.unbind())
    }

    /// The internal entries (list of dicts).
    fn history(&self, py: Python<'_>) -> PyResult<Py<PyAny>> {
        let v = serde_json::to_value(self.core.conversation().snapshot()).unwrap_or(Value::Null);
        Ok(to_py(py, &v)?.unbind())
    }

    /// Usage summed over the conversation, with `cost_usd` (None for models without a known price).
    fn usage(&self, py: Python<'_>) -> PyResult<Py<PyAny>> {
        let usage = self.core.usage();
        let mut v = serde_json::to_value(&usage).unwrap_or(Value::Null);
        if let Value::Object(m) = &mut v {
            let cost = tooloop::pricing::estimate_cost_usd(&self.core.config().model, &usage);
            m.insert("cost_usd".into(), cost.map(Value::from).unwrap_or(Value::Null));
        }
        Ok(to_py(py, &v)?.unbind())
    }

    /// The model name.
    #[getter]
    fn model(&self) -> String {
        self.core.config().model
    }

    /// The provider's name (`anthropic`, `openai`, `host`).
    #[getter]
    fn provider_name(&self) -> String {
        self.core.provider().name().to_string()
    }
}

/// Estimated cost in USD of `usage` (a dict) on `model`, or None when the model's price is unknown.
#[pyfunction]
pub fn estimate_cost_usd(model: &str, usage: &Bound<'_, PyAny>) -> PyResult<Option<f64>> {
    let u: tooloop::Usage = serde_json::from_value(from_py(usage, "usage")?)
        .map_err(|e| pyo3::exceptions::PyValueError::new_err(format!("usage: {e}")))?;
    Ok(tooloop::pricing::estimate_cost_usd(model, &u))
}
