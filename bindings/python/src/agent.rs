//! `_Agent`: the core agent with Python tools, a Python model callable and a Python permission hook.
//!
//! Argument normalisation (thinking budgets, tool objects from plain functions, result objects) is done by
//! `tooloop/_agent.py`; this side converts, maps errors and manages the GIL. Every run is the core's
//! `RunDriver` stepped on the calling thread with the GIL released (`run` to its end, `start` a step per
//! call for events: a `_Driven`), and so is `compact`; Python callables run on the thread that steps (or a
//! tool's own thread) under `Python::attach`.

use std::sync::{Arc, Mutex, Weak};

use pyo3::prelude::*;
use pyo3::types::{PyDict, PyString};
use serde_json::{Map, Value};
use tooloop::ToolUseBlock;
use tooloop::{Agent, AgentOptions, CancelToken, ContentBlock, Error, Permission};

use crate::callables::{host_provider, python_tool, with_kind, with_timeout};
use crate::convert::{from_py, to_py};
use crate::drive::{Driven, RunContext};
use crate::errors::{config_error, to_pyerr};
use crate::gate::PyGate;
use crate::run::{ErrSlot, lock, park};

/// Keyword arguments → the core's options: each value converted on its own, so an error names its key.
fn options_from_kwargs(py: Python<'_>, kwargs: &Bound<'_, PyDict>) -> PyResult<Map<String, Value>> {
    let mut map = Map::new();
    for (k, v) in kwargs.iter() {
        let key: String = k.extract()?;
        let value = from_py(&v, &key).map_err(|e| {
            // Never echo an API key, even one of the wrong type.
            let detail = if key == "api_key" { "must be a string (value hidden)".to_string() } else { e.to_string() };
            to_pyerr(py, &Error::InvalidOption { key: key.clone(), message: detail })
        })?;
        map.insert(key, value);
    }
    Ok(map)
}

/// A run's input: None (resume), a str, or a list of content blocks.
fn input_blocks(py: Python<'_>, input: Option<&Bound<'_, PyAny>>) -> PyResult<Option<Vec<ContentBlock>>> {
    Ok(match input {
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
    })
}

/// The core agent, shared with the runs it starts.
#[pyclass(module = "tooloop._tooloop", name = "_Agent", frozen)]
pub struct PyAgent {
    core: Arc<Agent>,
    slot: ErrSlot,
    /// The token of the last run started.
    latest: Mutex<Option<CancelToken>>,
    /// The send gate of the runs started from now on (see `crate::gate`), set by `tooloop.batch`.
    gate: Mutex<Option<Py<PyAny>>>,
    /// Whether a Python permission callable is set (then it answers the runs' pauses, see `crate::drive`).
    asks: std::sync::atomic::AtomicBool,
}

impl PyAgent {
    /// What the next run's steps run under: the caller's tracing subscriber, chosen here on the caller's
    /// thread and in its context (see crate::otel).
    fn context(&self, py: Python<'_>) -> RunContext {
        RunContext { traced: crate::otel::dispatch(py) }
    }

    /// A new run's own token, published before the run begins: a cancel that comes before the first step
    /// is not lost, and a late cancel through an old handle never reaches a newer run. It carries the send
    /// gate set by `set_gate` to every request of the run (its subagents' too), and the poll hook that runs
    /// Python's signal handlers while any of its waits goes on (Ctrl+C cancels within 200 ms).
    fn new_token(&self, py: Python<'_>) -> CancelToken {
        let gate = lock(&self.gate).as_ref().map(|g| -> Arc<dyn tooloop::SendGate + Send + Sync> {
            Arc::new(PyGate::new(g.clone_ref(py), self.slot.clone()))
        });
        let token = CancelToken::with_hooks(gate, Some(crate::run::signal_poll(&self.slot)));
        *lock(&self.latest) = Some(token.clone());
        token
    }
}

#[pymethods]
impl PyAgent {
    /// `provider`: a name (`"anthropic"`, `"openai"`), a Python model callable or None (the core's default);
    /// `options`: the keyword arguments of `tooloop.Agent` the caller gave, read by the core's `AgentOptions`
    /// (the C config's keys), so every default is the core's.
    #[new]
    #[pyo3(signature = (provider, options))]
    fn new(py: Python<'_>, provider: &Bound<'_, PyAny>, options: &Bound<'_, PyDict>) -> PyResult<Self> {
        let slot = ErrSlot::default();
        let mut map = options_from_kwargs(py, options)?;
        let host = match provider.cast::<PyString>() {
            // None: the caller did not choose, so the core's default provider applies.
            _ if provider.is_none() => None,
            Ok(name) => {
                map.insert("provider".into(), Value::String(name.to_cow()?.into_owned()));
                None
            }
            Err(_) if provider.is_callable() => Some(host_provider(provider, &slot)),
            Err(_) => {
                return Err(config_error(
                    py,
                    format!(
                        "provider must be {} or a callable, got {}",
                        tooloop::provider_names_for_message().replace(" or ", ", "),
                        provider.get_type().name()?
                    ),
                ));
            }
        };
        let options = AgentOptions::from_value(Value::Object(map)).map_err(|e| to_pyerr(py, &e))?;
        // Building may open and read the session file: without the GIL.
        let agent = py
            .detach(move || match host {
                Some(p) => options.build_with(p),
                None => options.build(),
            })
            .map_err(|e| to_pyerr(py, &e))?;
        Ok(PyAgent {
            core: Arc::new(agent),
            slot,
            latest: Mutex::new(None),
            gate: Mutex::new(None),
            asks: Default::default(),
        })
    }

    /// What attaching the session file found: `{"entries", "torn_tail", "skipped", "created"}`, or None.
    fn session_report(&self, py: Python<'_>) -> PyResult<Py<PyAny>> {
        let Some(info) = self.core.session_info() else { return Ok(py.None()) };
        let v = serde_json::json!({
            "entries": info.entries,
            "torn_tail": info.torn_tail.map(|(line, len)| serde_json::json!({"line": line, "bytes": len})),
            "skipped": info.skipped.iter().map(|(line, why)| serde_json::json!({"line": line, "reason": why})).collect::<Vec<_>>(),
            "created": info.created,
        });
        Ok(to_py(py, &v)?.unbind())
    }

    /// Register a tool whose handler is `invoke(input: dict) -> (content, is_error)`. `read_only`: the tool
    /// changes nothing (hosts ask before the others; see `tool_info`). `idempotent=False`: no repetition guard
    /// touches its calls. `kind` (`"read"`, `"write"` with `path_field`, `"shell"`, `"network"`) says what it
    /// does (see `tooloop::ToolKind`).
    #[pyo3(signature = (name, description, input_schema, invoke, parallel_safe=false, read_only=false, timeout=None, idempotent=true, kind=None, path_field=None))]
    #[allow(clippy::too_many_arguments)]
    fn register_tool(
        &self,
        py: Python<'_>,
        name: String,
        description: String,
        input_schema: &Bound<'_, PyAny>,
        invoke: Py<PyAny>,
        parallel_safe: bool,
        read_only: bool,
        timeout: Option<f64>,
        idempotent: bool,
        kind: Option<&str>,
        path_field: Option<&str>,
    ) -> PyResult<()> {
        let tool = with_timeout(python_tool(py, name, description, input_schema, invoke, &self.slot)?, timeout)?;
        let tool = tool.parallel_safe(parallel_safe).read_only(read_only).idempotent(idempotent);
        let tool = with_kind(tool, kind, path_field)?;
        self.core.tools().register(tool).map_err(|e| to_pyerr(py, &e))
    }

    /// A tool of the child agent type `agent_type`'s own: `invoke(input) -> (content, is_error)`.
    #[pyo3(signature = (agent_type, name, description, input_schema, invoke, parallel_safe=false, read_only=false, timeout=None, idempotent=true, kind=None, path_field=None))]
    #[allow(clippy::too_many_arguments)]
    fn add_subagent_tool(
        &self,
        py: Python<'_>,
        agent_type: &str,
        name: String,
        description: String,
        input_schema: &Bound<'_, PyAny>,
        invoke: Py<PyAny>,
        parallel_safe: bool,
        read_only: bool,
        timeout: Option<f64>,
        idempotent: bool,
        kind: Option<&str>,
        path_field: Option<&str>,
    ) -> PyResult<()> {
        let tool = with_timeout(python_tool(py, name, description, input_schema, invoke, &self.slot)?, timeout)?;
        let tool =
            with_kind(tool.parallel_safe(parallel_safe).read_only(read_only).idempotent(idempotent), kind, path_field)?;
        self.core.add_subagent_tool(agent_type, tool).map_err(|e| to_pyerr(py, &e))
    }

    /// Stop the MCP servers and detach the session file (see `Agent::close`).
    fn close(&self, py: Python<'_>) {
        let core = self.core.clone();
        py.detach(move || core.close());
    }

    /// The background commands of the built-in bash, oldest first: `[{"id", "command", "status",
    /// "exit_code", "started", "unread_bytes"}]` (`started`: seconds since the Unix epoch).
    fn background_commands(&self, py: Python<'_>) -> PyResult<Py<PyAny>> {
        let list: Vec<Value> = self
            .core
            .background_commands()
            .into_iter()
            .map(|b| {
                let started = b.started.duration_since(std::time::UNIX_EPOCH).map_or(0.0, |d| d.as_secs_f64());
                serde_json::json!({
                    "id": b.id,
                    "command": b.command,
                    "status": b.status.as_str(),
                    "exit_code": b.exit_code,
                    "started": started,
                    "unread_bytes": b.unread_bytes,
                })
            })
            .collect();
        Ok(to_py(py, &Value::Array(list))?.unbind())
    }

    /// The current todo list as a list of dicts.
    fn todos(&self, py: Python<'_>) -> PyResult<Py<PyAny>> {
        let v = serde_json::to_value(self.core.todos()).unwrap_or(Value::Null);
        Ok(to_py(py, &v)?.unbind())
    }

    /// `{"servers": [...], "failures": [...]}` of the MCP servers.
    fn mcp_status(&self, py: Python<'_>) -> PyResult<Py<PyAny>> {
        let v = serde_json::json!({"servers": self.core.mcp_status(), "failures": self.core.mcp_failures()});
        Ok(to_py(py, &v)?.unbind())
    }

    /// `{"skills": [...], "problems": [...]}` of the skill folders (empty lists without any).
    fn skills(&self, py: Python<'_>) -> PyResult<Py<PyAny>> {
        let v = serde_json::to_value(self.core.skills().unwrap_or_default()).unwrap_or(Value::Null);
        Ok(to_py(py, &v)?.unbind())
    }

    /// What the registry knows of the tool `name` (built-ins included): `{"name", "description",
    /// "input_schema", "parallel_safe", "read_only", "idempotent", "confinable", "kind", "path_field"}`, or None
    /// when no such tool is registered.
    fn tool_info(&self, py: Python<'_>, name: &str) -> PyResult<Py<PyAny>> {
        let Some(tool) = self.core.tools().get(name) else { return Ok(py.None()) };
        let v = serde_json::json!({
            "name": tool.spec.name,
            "description": tool.spec.description,
            "input_schema": tool.spec.input_schema,
            "parallel_safe": tool.parallel_safe,
            "read_only": tool.read_only,
            "idempotent": tool.idempotent,
            "confinable": tool.confinable,
            "kind": tool.kind.name(),
            "path_field": tool.kind.path_field(),
        });
        Ok(to_py(py, &v)?.unbind())
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

    /// Set (None: clear) the permission hook `check(id, name, input) -> None | str | ALLOW_READ_ONLY` (None
    /// allows, a string is the denial reason, `ALLOW_READ_ONLY` allows the call only with no power to write). An exception from it cancels the run and is re-raised by the run.
    #[pyo3(signature = (check=None))]
    fn set_permission(&self, check: Option<Py<PyAny>>) {
        self.asks.store(check.is_some(), std::sync::atomic::Ordering::Relaxed);
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
                    Ok(a) if a.is_instance_of::<AllowReadOnly>() => Permission::AllowReadOnly,
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

    /// Set the hooks (each None: not set), adapters from `tooloop/_hooks.py` (see `control.rs`). An exception
    /// from one ends the run, which re-raises it.
    #[pyo3(signature = (before_tool=None, after_tool=None, before_request=None, on_stop=None, after_check=None))]
    fn set_hooks(
        &self,
        before_tool: Option<Py<PyAny>>,
        after_tool: Option<Py<PyAny>>,
        before_request: Option<Py<PyAny>>,
        on_stop: Option<Py<PyAny>>,
        after_check: Option<Py<PyAny>>,
    ) {
        let hooks = crate::control::hooks(&self.slot, before_tool, after_tool, before_request, on_stop, after_check);
        self.core.set_hooks(hooks);
    }

    /// The instruction files loaded into the system prompt: `{"files": [{"path", "truncated", "bytes"}],
    /// "skipped": [{"path", "reason"}]}`, or None when `instruction_files` is off.
    fn instructions(&self, py: Python<'_>) -> PyResult<Py<PyAny>> {
        let Some(found) = self.core.instructions() else { return Ok(py.None()) };
        let v = serde_json::json!({
            "files": found.files.iter().map(|f| serde_json::json!({"path": f.path, "truncated": f.truncated, "bytes": f.text.len()})).collect::<Vec<_>>(),
            "skipped": found.skipped.iter().map(|(p, why)| serde_json::json!({"path": p, "reason": why})).collect::<Vec<_>>(),
        });
        Ok(to_py(py, &v)?.unbind())
    }

    /// What the agent has spent in USD by the price table (what `max_cost_usd` is checked against).
    fn spent_usd(&self) -> f64 {
        self.core.spent_usd()
    }

    /// Run to the end on the calling thread and return the result dict: `input` None resumes, a str or a
    /// list of content blocks is new user input. The GIL is released while the loop runs; Python tools,
    /// hooks and the model callable re-attach on this thread, so they see its thread-locals and context
    /// variables, and a Ctrl+C raises inside them like in any Python code. While the core waits (the
    /// network, a command, tools on their own threads), Python's signal handlers run about every 50 ms: a
    /// Ctrl+C cancels the run within 200 ms and its KeyboardInterrupt propagates. An exception a tool, hook
    /// or model callable raised to end the run propagates unchanged.
    #[pyo3(signature = (input))]
    fn run(&self, py: Python<'_>, input: Option<&Bound<'_, PyAny>>) -> PyResult<Py<PyAny>> {
        let blocks = input_blocks(py, input)?;
        *lock(&self.slot) = None;
        let token = self.new_token(py);
        let context = self.context(py);
        let core = &self.core;
        let outcome = py.detach(|| {
            context.enter(|| {
                // Stepped to its end: a pause is answered by the permission callable, here, as it comes.
                core.start(blocks, token.clone()).and_then(|mut driver| driver.finish(&mut |_| {}))
            })
        });
        if let Some(e) = lock(&self.slot).take() {
            return Err(e);
        }
        match outcome {
            Ok(r) => Ok(to_py(py, &serde_json::to_value(&r).unwrap_or(Value::Null))?.unbind()),
            Err(e) => Err(to_pyerr(py, &e)),
        }
    }

    /// Compact the conversation now, on the calling thread like `run` (Ctrl+C cancels it): the compaction
    /// record as a dict (`method`, `summary`, `tokens_before`, ...), or None when there was nothing to
    /// compact.
    #[pyo3(signature = (instructions=None))]
    fn compact(&self, py: Python<'_>, instructions: Option<String>) -> PyResult<Py<PyAny>> {
        *lock(&self.slot) = None;
        let (core, slot) = (&self.core, &self.slot);
        let traced = crate::otel::dispatch(py);
        let outcome = py.detach(|| {
            let (agent, slot) = (core.clone(), slot.clone());
            let hook: std::rc::Rc<dyn Fn()> = std::rc::Rc::new(move || {
                Python::attach(|py| {
                    if let Err(e) = py.check_signals() {
                        park(&slot, e);
                        agent.cancel();
                    }
                })
            });
            let compact = || core.compact(instructions.as_deref(), &mut |_| {});
            crate::otel::scoped(traced.as_ref(), || tooloop::with_poll_hook(hook, compact))
        });
        if let Some(e) = lock(&self.slot).take() {
            return Err(e);
        }
        match outcome {
            Ok(record) => Ok(to_py(py, &serde_json::to_value(record).unwrap_or(Value::Null))?.unbind()),
            Err(e) => Err(to_pyerr(py, &e)),
        }
    }

    /// Start a run: `input` None resumes, a str or a list of content blocks is new user input. With
    /// `stream`, the run's events are delivered through the handle.
    ///
    /// The handle is a `_Driven` (see `drive.rs`): each call for events takes one step of the run on the
    /// calling thread with the GIL released, and Python tools, hooks and the permission callable run on
    /// this thread as in `run` (the callable once the step's events, its call's among them, are handed out).
    /// With `pause_for_approval` (streams only), a tool call that needs a decision pauses the run until the
    /// host answers it through the handle.
    #[pyo3(signature = (input, stream=false, pause_for_approval=false))]
    fn start(
        &self,
        py: Python<'_>,
        input: Option<&Bound<'_, PyAny>>,
        stream: bool,
        pause_for_approval: bool,
    ) -> PyResult<Py<PyAny>> {
        let blocks = input_blocks(py, input)?;
        *lock(&self.slot) = None;
        let token = self.new_token(py);
        if pause_for_approval && !stream {
            return Err(to_pyerr(py, &tooloop::Error::Config("pause_for_approval needs a stream".into())));
        }
        let answers = self.asks.load(std::sync::atomic::Ordering::Relaxed);
        let context = self.context(py);
        let driven =
            Driven::new(self.core.clone(), blocks, token, self.slot.clone(), pause_for_approval, answers, context);
        Ok(Py::new(py, driven)?.into_any())
    }

    /// Tokens the next request would carry (`input`: a str counted as if it were added): from the API's
    /// counting endpoint where offered, else estimated. With `estimate`, never asks the API.
    #[pyo3(signature = (input=None, estimate=false))]
    fn count_tokens(&self, py: Python<'_>, input: Option<String>, estimate: bool) -> PyResult<u64> {
        let core = self.core.clone();
        let blocks = input.map(|t| vec![ContentBlock::text(t)]);
        if estimate {
            return Ok(core.estimate_tokens(blocks));
        }
        py.detach(move || core.count_tokens(blocks)).map_err(|e| to_pyerr(py, &e))
    }

    /// The context window compaction works with (configured, else the model table's), or None.
    #[getter]
    fn context_window(&self) -> Option<u64> {
        self.core.context_window()
    }

    /// Count this agent's spending from now on in `ledger` too (a batch's: its cap then holds for every
    /// request this agent, its children and its compactions send); None: in its own account only again.
    #[pyo3(signature = (ledger=None))]
    fn set_ledger(&self, ledger: Option<PyRef<'_, crate::ledger::PyLedger>>) {
        self.core.join_ledger(ledger.map(|l| l.inner.clone()));
    }

    /// Set (None: clear) the send gate of the runs started from now on: `gate(kind, n, retry_after)`, see
    /// `crate::gate`. Used by `tooloop.batch` for rate limits and a cancel shared by many agents.
    #[pyo3(signature = (gate=None))]
    fn set_gate(&self, gate: Option<Py<PyAny>>) {
        *lock(&self.gate) = gate;
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
            // Each turn priced with its own model, as the conversation's cost is; before any priced turn, the
            // usage so far on the agent's model (0 when it has a price: the CLI shows $0 rather than n/a).
            let cost = self.core.cost_usd().or_else(|| tooloop::estimate_cost_usd(&self.core.config().model, &usage));
            m.insert("cost_usd".into(), cost.map(Value::from).unwrap_or(Value::Null));
        }
        Ok(to_py(py, &v)?.unbind())
    }

    /// Estimated cost in USD of the whole conversation, each turn priced with its own model (None when no
    /// turn's model has a known price).
    fn cost_usd(&self) -> Option<f64> {
        self.core.cost_usd()
    }

    /// The model name.
    #[getter]
    fn model(&self) -> String {
        self.core.model()
    }

    /// Continue the conversation on `model`, on `provider` (a name, a Python model callable, or None: the
    /// current one); `options` (`api_key`, `base_url`, `region`, `headers`) are the new provider's settings,
    /// else the agent's own on the provider it was built for, else the environment as at construction.
    #[pyo3(signature = (model, provider, options))]
    fn set_model(
        &self,
        py: Python<'_>,
        model: String,
        provider: &Bound<'_, PyAny>,
        options: &Bound<'_, PyDict>,
    ) -> PyResult<()> {
        let core = self.core.clone();
        if !provider.is_none() && provider.cast::<PyString>().is_err() {
            if !provider.is_callable() {
                return Err(config_error(py, "provider must be a name, a callable or None"));
            }
            if !options.is_empty() {
                return Err(config_error(py, "a model callable takes no api_key, base_url, region or headers"));
            }
            let host = host_provider(provider, &self.slot);
            return py.detach(move || core.set_model_on(host, &model)).map_err(|e| to_pyerr(py, &e));
        }
        let mut map = options_from_kwargs(py, options)?;
        map.insert("model".into(), Value::String(model));
        if let Ok(name) = provider.cast::<PyString>() {
            map.insert("provider".into(), Value::String(name.to_cow()?.into_owned()));
        }
        let spec = tooloop::model_spec(&Value::Object(map), "set_model").map_err(|e| to_pyerr(py, &e))?;
        py.detach(move || core.set_model(spec)).map_err(|e| to_pyerr(py, &e))
    }

    /// The provider's name (`anthropic`, `openai`, `host`).
    #[getter]
    fn provider_name(&self) -> String {
        self.core.provider().name().to_string()
    }
}

/// The answer of a permission callable that allows a call only with no power to change anything
/// (`tooloop.ALLOW_READ_ONLY`, the one instance): bash then runs under the kernel's read-only sandbox, a
/// read-only tool as it is, and any other tool is refused.
#[pyclass(frozen, module = "tooloop._tooloop", name = "_AllowReadOnly")]
pub(crate) struct AllowReadOnly;

#[pymethods]
impl AllowReadOnly {
    fn __repr__(&self) -> &'static str {
        "tooloop.ALLOW_READ_ONLY"
    }
}
