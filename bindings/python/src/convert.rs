//! JSON values ⇄ Python objects (dict, list, str, int, float, bool, None).
//!
//! Hand-written rather than a serde bridge: the shapes are plain JSON, and the errors must name where in
//! the object a bad value sits, because they reach users who passed a tool result or a request dict.

use pyo3::exceptions::{PyTypeError, PyValueError};
use pyo3::intern;
use pyo3::prelude::*;
use pyo3::types::{PyBool, PyDict, PyFloat, PyInt, PyList, PyString, PyTuple};
use serde_json::{Map, Number, Value};

/// A JSON value as a new Python object.
pub fn to_py<'py>(py: Python<'py>, v: &Value) -> PyResult<Bound<'py, PyAny>> {
    Ok(match v {
        Value::Null => py.None().into_bound(py),
        Value::Bool(b) => PyBool::new(py, *b).to_owned().into_any(),
        Value::Number(n) => {
            if let Some(i) = n.as_i64() {
                i.into_pyobject(py)?.into_any()
            } else if let Some(u) = n.as_u64() {
                u.into_pyobject(py)?.into_any()
            } else {
                PyFloat::new(py, n.as_f64().unwrap_or(f64::NAN)).into_any()
            }
        }
        Value::String(s) => new_str(py, s).into_any(),
        Value::Array(items) => {
            let list = PyList::empty(py);
            for item in items {
                list.append(to_py(py, item)?)?;
            }
            list.into_any()
        }
        Value::Object(map) => {
            let dict = PyDict::new(py);
            for (k, item) in map {
                dict.set_item(new_str(py, k), to_py(py, item)?)?;
            }
            dict.into_any()
        }
    })
}

/// `s` as a Python `str`: the API's common keys and type names (`"type"`, `"content_block_delta"`, ...) as one
/// interned object each, the rest as a new one. A stream's events and messages repeat a few dozen such strings;
/// an interned one costs no allocation, no UTF-8 decoding and no hashing when it becomes a dict key (its hash is
/// kept). Equal either way: no caller can tell but by identity.
pub fn new_str<'py>(py: Python<'py>, s: &str) -> Bound<'py, PyString> {
    macro_rules! known {
        ($($name:literal)*) => {
            match s {
                $($name => intern!(py, $name).clone(),)*
                _ => PyString::new(py, s),
            }
        };
    }
    known! {
        // Messages API: keys of events, messages, blocks, usage.
        "type" "index" "delta" "text" "message" "id" "role" "model" "content" "stop_reason" "stop_sequence"
        "usage" "input_tokens" "output_tokens" "cache_creation_input_tokens" "cache_read_input_tokens"
        "cache_creation" "service_tier" "content_block" "name" "input" "partial_json" "thinking" "signature"
        "tool_use_id" "is_error" "citations" "error" "container"
        // Messages API: values.
        "message_start" "message_delta" "message_stop" "content_block_start" "content_block_delta"
        "content_block_stop" "ping" "assistant" "user" "text_delta" "input_json_delta" "thinking_delta"
        "signature_delta" "tool_use" "tool_result" "redacted_thinking" "end_turn" "max_tokens" "pause_turn"
        "refusal" "standard"
        // Chat Completions: keys and values.
        "object" "created" "choices" "finish_reason" "logprobs" "system_fingerprint" "tool_calls" "function"
        "arguments" "prompt_tokens" "completion_tokens" "total_tokens" "chat.completion.chunk" "chat.completion"
        "stop" "length"
    }
}

/// JSON text straight to Python objects, as `to_py` of its parsed value would give them (the same types, the
/// same key order, the last of duplicate keys), without the value in between: a stream event's dict is
/// built as its text is read. `None` if the text does not parse (the core has checked it before).
pub fn json_to_py<'py>(py: Python<'py>, json: &str) -> Option<Bound<'py, PyAny>> {
    use serde::de::DeserializeSeed;
    let mut de = serde_json::Deserializer::from_str(json);
    let obj = PySeed(py).deserialize(&mut de).ok()?;
    de.end().ok()?;
    Some(obj)
}

/// Builds the Python object of the JSON being read (see [`json_to_py`]).
#[derive(Clone, Copy)]
struct PySeed<'py>(Python<'py>);

impl<'de, 'py> serde::de::DeserializeSeed<'de> for PySeed<'py> {
    type Value = Bound<'py, PyAny>;
    fn deserialize<D: serde::Deserializer<'de>>(self, d: D) -> Result<Self::Value, D::Error> {
        d.deserialize_any(self)
    }
}

impl<'de, 'py> serde::de::Visitor<'de> for PySeed<'py> {
    type Value = Bound<'py, PyAny>;

    fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("JSON")
    }
    fn visit_unit<E>(self) -> Result<Self::Value, E> {
        Ok(self.0.None().into_bound(self.0))
    }
    fn visit_none<E>(self) -> Result<Self::Value, E> {
        Ok(self.0.None().into_bound(self.0))
    }
    fn visit_bool<E>(self, b: bool) -> Result<Self::Value, E> {
        Ok(PyBool::new(self.0, b).to_owned().into_any())
    }
    fn visit_i64<E: serde::de::Error>(self, i: i64) -> Result<Self::Value, E> {
        i.into_pyobject(self.0).map(Bound::into_any).map_err(E::custom)
    }
    fn visit_u64<E: serde::de::Error>(self, u: u64) -> Result<Self::Value, E> {
        u.into_pyobject(self.0).map(Bound::into_any).map_err(E::custom)
    }
    fn visit_f64<E>(self, x: f64) -> Result<Self::Value, E> {
        Ok(PyFloat::new(self.0, x).into_any())
    }
    fn visit_str<E>(self, s: &str) -> Result<Self::Value, E> {
        Ok(new_str(self.0, s).into_any())
    }
    fn visit_seq<A: serde::de::SeqAccess<'de>>(self, mut seq: A) -> Result<Self::Value, A::Error> {
        use serde::de::Error;
        let list = PyList::empty(self.0);
        while let Some(item) = seq.next_element_seed(self)? {
            list.append(item).map_err(A::Error::custom)?;
        }
        Ok(list.into_any())
    }
    fn visit_map<A: serde::de::MapAccess<'de>>(self, mut map: A) -> Result<Self::Value, A::Error> {
        use serde::de::Error;
        let dict = PyDict::new(self.0);
        while let Some(key) = map.next_key_seed(self)? {
            let value = map.next_value_seed(self)?;
            dict.set_item(key, value).map_err(A::Error::custom)?;
        }
        Ok(dict.into_any())
    }
}

/// A Python object (JSON-like) as a JSON value; `what` names it in errors (e.g. "the request").
pub fn from_py(obj: &Bound<'_, PyAny>, what: &str) -> PyResult<Value> {
    convert(obj, &Path::Root(what), 0)
}

/// Where a value sits in the object being converted (`the request["messages"][0]`), written out only when
/// an error names it: a request converts without formatting a string per key.
enum Path<'a> {
    Root(&'a str),
    Key(&'a Path<'a>, &'a str),
    Index(&'a Path<'a>, usize),
}

impl std::fmt::Display for Path<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Path::Root(what) => f.write_str(what),
            Path::Key(parent, key) => write!(f, "{parent}[{key:?}]"),
            Path::Index(parent, i) => write!(f, "{parent}[{i}]"),
        }
    }
}

fn convert(obj: &Bound<'_, PyAny>, path: &Path<'_>, depth: usize) -> PyResult<Value> {
    // A self-referencing dict would otherwise recurse until the stack overflows.
    if depth > 200 {
        return Err(PyValueError::new_err(format!("{path} is nested too deeply (a reference cycle?)")));
    }
    if obj.is_none() {
        return Ok(Value::Null);
    }
    // bool before int: Python's bool is a subclass of int.
    if let Ok(b) = obj.cast::<PyBool>() {
        return Ok(Value::Bool(b.is_true()));
    }
    if let Ok(s) = obj.cast::<PyString>() {
        return Ok(Value::String(s.to_cow()?.into_owned()));
    }
    if obj.cast::<PyInt>().is_ok() {
        if let Ok(i) = obj.extract::<i64>() {
            return Ok(Value::from(i));
        }
        if let Ok(u) = obj.extract::<u64>() {
            return Ok(Value::from(u));
        }
        return Err(PyValueError::new_err(format!("{path}: integer {obj} does not fit in 64 bits")));
    }
    if let Ok(f) = obj.cast::<PyFloat>() {
        let x = f.value();
        return Number::from_f64(x).map(Value::Number).ok_or_else(|| {
            PyValueError::new_err(format!("{path}: {x} is not a finite number (JSON has no NaN or infinity)"))
        });
    }
    if let Ok(d) = obj.cast::<PyDict>() {
        let mut map = Map::new();
        for (k, v) in d.iter() {
            let Ok(key) = k.cast::<PyString>() else {
                return Err(PyTypeError::new_err(format!(
                    "{path}: dict keys must be str, got {} ({k})",
                    k.get_type().name()?
                )));
            };
            let key = key.to_cow()?;
            let value = convert(&v, &Path::Key(path, &key), depth + 1)?;
            map.insert(key.into_owned(), value);
        }
        return Ok(Value::Object(map));
    }
    if obj.cast::<PyList>().is_ok() || obj.cast::<PyTuple>().is_ok() {
        let mut out = Vec::new();
        for (i, item) in obj.try_iter()?.enumerate() {
            out.push(convert(&item?, &Path::Index(path, i), depth + 1)?);
        }
        return Ok(Value::Array(out));
    }
    Err(PyTypeError::new_err(format!(
        "{path}: {} is not JSON-serializable (use dict, list, str, int, float, bool or None)",
        obj.get_type().name()?
    )))
}
