//! Python callables as the core's objects: a model callable as a provider (its request dicts cached
//! message by message), a Python function as a tool. Their exceptions that must end the run are parked in
//! the run's slot and re-raised unchanged by the run.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use pyo3::exceptions::PyException;
use pyo3::prelude::*;
use pyo3::types::{PyList, PyString, PyTuple};
use serde_json::{Map, Value};
use tooloop::FnProvider;
use tooloop::{AgentOptions, Error, Message, MessageResponse, Provider, Request, Tool};
use tooloop::{ToolContext, ToolError, ToolOutput};

use crate::convert::{from_py, to_py};
use crate::errors::{config_error, to_pyerr};
use crate::run::{ErrSlot, park};
/// A provider from a name of the provider table (`"anthropic"`, `"openai"`, `"openai-responses"`,
/// `"bedrock"`) or a Python callable `model(request: dict) -> dict`, for the
/// raw `Client`: the network settings go through the core's options, so they are checked as for an Agent.
#[allow(clippy::too_many_arguments)]
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
        let mut map = Map::new();
        map.insert("provider".into(), Value::String(name.to_cow()?.into_owned()));
        map.insert("api_key".into(), api_key.map_or(Value::Null, Value::String));
        map.insert("base_url".into(), base_url.map_or(Value::Null, Value::String));
        map.insert("timeout".into(), serde_json::Number::from_f64(timeout).map_or(Value::Null, Value::Number));
        map.insert("max_retries".into(), Value::from(max_retries));
        let headers: Map<String, Value> =
            headers.unwrap_or_default().into_iter().map(|(k, v)| (k, Value::String(v))).collect();
        map.insert("headers".into(), Value::Object(headers));
        let options = AgentOptions::from_value(Value::Object(map)).map_err(|e| to_pyerr(py, &e))?;
        return options.provider_config().build().map_err(|e| to_pyerr(py, &e));
    }
    if !provider.is_callable() {
        return Err(config_error(
            py,
            format!(
                "provider must be {} or a callable, got {}",
                tooloop::provider_names_for_message().replace(" or ", ", "),
                provider.get_type().name()?
            ),
        ));
    }
    Ok(host_provider(provider, slot))
}

pub fn host_provider(model: &Bound<'_, PyAny>, slot: &ErrSlot) -> Arc<dyn Provider> {
    let model = model.clone().unbind();
    let slot = slot.clone();
    let dicts = Mutex::new(MessageDicts::default());
    Arc::new(FnProvider::new(move |request: &Request, _cancel| call_model(&model, request, &slot, &dicts)))
}

/// The Python dicts of the messages of the model's last request, each with the message it was built from.
/// A request shares the conversation's unchanged messages (the same `Arc`s turn after turn), and an `Arc`
/// held here cannot change, so the same `Arc` at the same place gets the same dict again: converting a
/// request costs what is new in it, not the whole history.
#[derive(Default)]
struct MessageDicts(Vec<(Arc<Message>, Py<PyAny>)>);

/// `request` as the dict a Python model receives: its messages' dicts reused from `dicts` where the message
/// is the one the last request held at that place.
fn request_to_py<'py>(
    py: Python<'py>,
    request: &Request,
    dicts: &Mutex<MessageDicts>,
) -> Result<Bound<'py, PyAny>, String> {
    let mut head = request.clone();
    head.messages.clear();
    let body = serde_json::to_value(&head).map_err(|e| format!("request not serializable: {e}"))?;
    let dict = to_py(py, &body).map_err(|e| e.to_string())?;
    // Busy means another thread converts a request of this model right now: do without the cache (waiting
    // for it while holding the GIL could deadlock with that thread).
    let mut cache = dicts.try_lock().ok();
    let old = cache.as_mut().map(|c| std::mem::take(&mut c.0)).unwrap_or_default();
    let mut fresh = Vec::with_capacity(request.messages.len());
    let list = PyList::empty(py);
    for (i, m) in request.messages.shared().iter().enumerate() {
        let obj = match old.get(i) {
            Some((held, obj)) if Arc::ptr_eq(held, m) => obj.clone_ref(py),
            _ => {
                let v = serde_json::to_value(&**m).map_err(|e| format!("request not serializable: {e}"))?;
                to_py(py, &v).map_err(|e| e.to_string())?.unbind()
            }
        };
        list.append(obj.bind(py)).map_err(|e| e.to_string())?;
        fresh.push((m.clone(), obj));
    }
    if let Some(c) = cache.as_mut() {
        c.0 = fresh;
    }
    dict.set_item("messages", list).map_err(|e| e.to_string())?;
    Ok(dict)
}

/// Call the Python model. Its exceptions (including the validation errors `_agent.py` raises for a bad
/// reply) are parked and re-raised unchanged in the caller.
fn call_model(
    model: &Py<PyAny>,
    request: &Request,
    slot: &ErrSlot,
    dicts: &Mutex<MessageDicts>,
) -> Result<MessageResponse, Error> {
    Python::attach(|py| {
        let invalid = |message: String| Error::InvalidResponse { message, request_id: None };
        let req = request_to_py(py, request, dicts).map_err(invalid)?;
        let reply = match model.bind(py).call1((req,)) {
            Ok(r) => r,
            Err(e) => {
                let message = format!("the model callable raised: {e}");
                park(slot, e);
                return Err(invalid(message));
            }
        };
        let checked = from_py(&reply, "the model callable's reply")
            .map_err(|e| e.to_string())
            .and_then(tooloop::check_host_reply);
        checked.map_err(|e| {
            let e = invalid(format!("the model callable returned an invalid reply: {e}"));
            park(slot, to_pyerr(py, &e));
            e
        })
    })
}

/// Run a Python tool: `invoke(input) -> (content, is_error)`.
fn call_tool(invoke: &Py<PyAny>, name: &str, input: &Value, slot: &ErrSlot) -> Result<ToolOutput, ToolError> {
    Python::attach(|py| {
        // Spans the tool makes itself (OpenTelemetry in the tool's code) nest under its execute_tool span.
        let call = || to_py(py, input).and_then(|args| invoke.bind(py).call1((args,)));
        let ret = crate::otel::in_tool_span(py, call);
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

/// A core tool whose handler is the Python `invoke(input) -> (content, is_error)`.
pub fn python_tool(
    py: Python<'_>,
    name: String,
    description: String,
    input_schema: &Bound<'_, PyAny>,
    invoke: Py<PyAny>,
    slot: &ErrSlot,
) -> PyResult<Tool> {
    let schema = from_py(input_schema, &format!("the input_schema of tool '{name}'"))?;
    let slot = slot.clone();
    let tool_name = name.clone();
    let handler = move |input: &Value, _ctx: &ToolContext<'_>| call_tool(&invoke, &tool_name, input, &slot);
    Tool::new(name, description, schema, handler).map_err(|e| to_pyerr(py, &e))
}

/// `tool` limited to `timeout` seconds a call (see `Tool::timeout`), or as it is for None.
pub fn with_timeout(tool: Tool, timeout: Option<f64>) -> PyResult<Tool> {
    match timeout {
        None => Ok(tool),
        Some(t) if t.is_finite() && t > 0.0 && t < 1e9 => Ok(tool.timeout(std::time::Duration::from_secs_f64(t))),
        Some(t) => Err(pyo3::exceptions::PyValueError::new_err(format!(
            "tool '{}': timeout must be a positive number of seconds, got {t}",
            tool.spec.name
        ))),
    }
}

/// `tool` of the kind named `kind` (`"read"`, `"write"` with `path_field`, `"shell"`, `"network"`; None: no
/// kind), checked against its schema: a ValueError says what is wrong.
pub fn with_kind(tool: Tool, kind: Option<&str>, path_field: Option<&str>) -> PyResult<Tool> {
    let parsed = tooloop::ToolKind::parse(kind, path_field, &tool.spec.input_schema)
        .map_err(|m| pyo3::exceptions::PyValueError::new_err(format!("tool '{}': {m}", tool.spec.name)))?;
    tool.kind(parsed).map_err(|e| pyo3::exceptions::PyValueError::new_err(e.to_string()))
}
