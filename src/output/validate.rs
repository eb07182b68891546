//! A JSON Schema validator for structured answers: the subset of draft 2020-12 that model output schemas
//! use (what pydantic, dataclasses and TypedDicts produce, and what the APIs' structured-output modes
//! accept), written here instead of taking the `jsonschema` crate, whose regex, URL and referencing
//! dependencies would more than double the core's build for keywords a model's answer never needs.
//!
//! Checked: `type` (one or a list; `integer` is a number without a fraction), `enum`, `const`,
//! `properties`, `required`, `additionalProperties` (false or a schema), `minProperties`, `maxProperties`,
//! `items`, `prefixItems`, `minItems`, `maxItems`, `uniqueItems`, `minLength`, `maxLength` (in characters),
//! `minimum`, `maximum`, `exclusiveMinimum`, `exclusiveMaximum`, `multipleOf`, `anyOf`, `oneOf`, `allOf`,
//! `not`, and local `$ref`s (`#`, `#/$defs/...`, `#/definitions/...`, any JSON pointer into the schema).
//! Not checked (accepted as written): `pattern`, `patternProperties`, `format`, `if`/`then`/`else`,
//! `dependentRequired`, remote `$ref`s. Must never: loop on a recursive schema, or panic on any schema.

use serde_json::{Map, Value};

/// Errors past this many are summarized: the model needs the first few, not hundreds.
const MAX_ERRORS: usize = 20;
/// `$ref` chains and nesting deeper than this are refused instead of recursing further.
const MAX_DEPTH: usize = 128;

/// Check `value` against `schema`. Every error says where (`$.items[2].name`) and what.
pub fn validate(schema: &Value, value: &Value) -> Result<(), Vec<String>> {
    let mut v = Validator { root: schema, errors: Vec::new() };
    v.check(schema, value, "$", 0);
    if v.errors.is_empty() {
        Ok(())
    } else {
        if v.errors.len() > MAX_ERRORS {
            let more = v.errors.len() - MAX_ERRORS;
            v.errors.truncate(MAX_ERRORS);
            v.errors.push(format!("… and {more} more"));
        }
        Err(v.errors)
    }
}

struct Validator<'a> {
    root: &'a Value,
    errors: Vec<String>,
}

fn type_name(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "boolean",
        Value::Number(n) if n.is_i64() || n.is_u64() => "integer",
        Value::Number(_) => "number",
        Value::String(_) => "string",
        Value::Array(_) => "array",
        Value::Object(_) => "object",
    }
}

fn is_type(t: &str, v: &Value) -> bool {
    match t {
        "null" => v.is_null(),
        "boolean" => v.is_boolean(),
        "object" => v.is_object(),
        "array" => v.is_array(),
        "string" => v.is_string(),
        "number" => v.is_number(),
        "integer" => v.as_f64().is_some_and(|f| f.fract() == 0.0),
        _ => true,
    }
}

fn short(v: &Value) -> String {
    crate::text::ellipsize(&v.to_string(), 60)
}

/// Follow a JSON pointer (`#/$defs/Item`) into the schema.
fn resolve<'a>(root: &'a Value, reference: &str) -> Option<&'a Value> {
    let pointer = reference.strip_prefix('#')?;
    if pointer.is_empty() {
        return Some(root);
    }
    root.pointer(pointer)
}

impl<'a> Validator<'a> {
    fn fail(&mut self, path: &str, message: String) {
        self.errors.push(format!("{path}: {message}"));
    }

    /// Whether `value` is valid against `schema`, without recording errors (for anyOf/oneOf/not).
    fn passes(&self, schema: &'a Value, value: &Value, depth: usize) -> bool {
        let mut probe = Validator { root: self.root, errors: Vec::new() };
        probe.check(schema, value, "$", depth);
        probe.errors.is_empty()
    }

    fn check(&mut self, schema: &'a Value, value: &Value, path: &str, depth: usize) {
        if depth > MAX_DEPTH {
            self.fail(path, "the schema nests (or refers to itself) too deeply to check".into());
            return;
        }
        let s = match schema {
            Value::Bool(true) => return,
            Value::Bool(false) => return self.fail(path, "no value is allowed here".into()),
            Value::Object(s) => s,
            _ => return,
        };
        if let Some(r) = s.get("$ref").and_then(Value::as_str) {
            match resolve(self.root, r) {
                Some(target) => self.check(target, value, path, depth + 1),
                None => self.fail(path, format!("the schema refers to {r:?}, which it does not define")),
            }
        }
        self.check_type(s, value, path);
        if let Some(Value::Array(allowed)) = s.get("enum") {
            if !allowed.contains(value) {
                let list: Vec<String> = allowed.iter().map(short).collect();
                self.fail(path, format!("must be one of {}, got {}", list.join(", "), short(value)));
            }
        }
        if let Some(c) = s.get("const") {
            if c != value {
                self.fail(path, format!("must be {}, got {}", short(c), short(value)));
            }
        }
        match value {
            Value::Object(o) => self.check_object(s, o, path, depth),
            Value::Array(a) => self.check_array(s, a, path, depth),
            Value::String(t) => self.check_string(s, t, path),
            Value::Number(_) => self.check_number(s, value, path),
            _ => {}
        }
        self.check_combinators(s, value, path, depth);
    }

    fn check_type(&mut self, s: &Map<String, Value>, value: &Value, path: &str) {
        match s.get("type") {
            Some(Value::String(t)) if !is_type(t, value) => {
                self.fail(path, format!("must be of type {t}, got {}", type_name(value)))
            }
            Some(Value::Array(ts)) => {
                let names: Vec<&str> = ts.iter().filter_map(Value::as_str).collect();
                if !names.is_empty() && !names.iter().any(|t| is_type(t, value)) {
                    self.fail(path, format!("must be of type {}, got {}", names.join(" or "), type_name(value)));
                }
            }
            _ => {}
        }
    }

    fn check_object(&mut self, s: &'a Map<String, Value>, o: &Map<String, Value>, path: &str, depth: usize) {
        if let Some(Value::Array(req)) = s.get("required") {
            for k in req.iter().filter_map(Value::as_str) {
                if !o.contains_key(k) {
                    self.fail(path, format!("missing required property {k:?}"));
                }
            }
        }
        let props = s.get("properties").and_then(Value::as_object);
        for (k, v) in o {
            let sub = format!("{path}.{k}");
            match props.and_then(|p| p.get(k)) {
                Some(ps) => self.check(ps, v, &sub, depth + 1),
                None => match s.get("additionalProperties") {
                    Some(Value::Bool(false)) => {
                        let known: Vec<&str> =
                            props.map(|p| p.keys().map(String::as_str).collect()).unwrap_or_default();
                        self.fail(path, format!("unexpected property {k:?} (allowed: {})", known.join(", ")));
                    }
                    Some(extra @ Value::Object(_)) => self.check(extra, v, &sub, depth + 1),
                    _ => {}
                },
            }
        }
        if let Some(n) = s.get("minProperties").and_then(Value::as_u64) {
            if (o.len() as u64) < n {
                self.fail(path, format!("must have at least {n} properties, has {}", o.len()));
            }
        }
        if let Some(n) = s.get("maxProperties").and_then(Value::as_u64) {
            if (o.len() as u64) > n {
                self.fail(path, format!("must have at most {n} properties, has {}", o.len()));
            }
        }
    }

    fn check_array(&mut self, s: &'a Map<String, Value>, a: &[Value], path: &str, depth: usize) {
        let prefix = s.get("prefixItems").and_then(Value::as_array).map(Vec::as_slice).unwrap_or_default();
        for (i, item) in a.iter().enumerate() {
            let sub = format!("{path}[{i}]");
            match prefix.get(i) {
                Some(ps) => self.check(ps, item, &sub, depth + 1),
                None => {
                    if let Some(items) = s.get("items") {
                        self.check(items, item, &sub, depth + 1);
                    }
                }
            }
        }
        if let Some(n) = s.get("minItems").and_then(Value::as_u64) {
            if (a.len() as u64) < n {
                self.fail(path, format!("must have at least {n} items, has {}", a.len()));
            }
        }
        if let Some(n) = s.get("maxItems").and_then(Value::as_u64) {
            if (a.len() as u64) > n {
                self.fail(path, format!("must have at most {n} items, has {}", a.len()));
            }
        }
        if s.get("uniqueItems") == Some(&Value::Bool(true)) {
            for (i, item) in a.iter().enumerate() {
                if a[..i].contains(item) {
                    self.fail(path, format!("items must be unique; {} repeats", short(item)));
                    break;
                }
            }
        }
    }

    fn check_string(&mut self, s: &Map<String, Value>, t: &str, path: &str) {
        let len = t.chars().count() as u64;
        if let Some(n) = s.get("minLength").and_then(Value::as_u64) {
            if len < n {
                self.fail(path, format!("must be at least {n} characters long, is {len}"));
            }
        }
        if let Some(n) = s.get("maxLength").and_then(Value::as_u64) {
            if len > n {
                self.fail(path, format!("must be at most {n} characters long, is {len}"));
            }
        }
    }

    fn check_number(&mut self, s: &Map<String, Value>, value: &Value, path: &str) {
        let Some(x) = value.as_f64() else { return };
        let bound = |k: &str| s.get(k).and_then(Value::as_f64);
        if let Some(m) = bound("minimum").filter(|m| x < *m) {
            self.fail(path, format!("must be ≥ {m}, got {x}"));
        }
        if let Some(m) = bound("maximum").filter(|m| x > *m) {
            self.fail(path, format!("must be ≤ {m}, got {x}"));
        }
        if let Some(m) = bound("exclusiveMinimum").filter(|m| x <= *m) {
            self.fail(path, format!("must be > {m}, got {x}"));
        }
        if let Some(m) = bound("exclusiveMaximum").filter(|m| x >= *m) {
            self.fail(path, format!("must be < {m}, got {x}"));
        }
        if let Some(m) = bound("multipleOf").filter(|m| *m > 0.0) {
            let q = x / m;
            if (q - q.round()).abs() > 1e-9 {
                self.fail(path, format!("must be a multiple of {m}, got {x}"));
            }
        }
    }

    fn check_combinators(&mut self, s: &'a Map<String, Value>, value: &Value, path: &str, depth: usize) {
        if let Some(Value::Array(all)) = s.get("allOf") {
            for sub in all {
                self.check(sub, value, path, depth + 1);
            }
        }
        if let Some(Value::Array(any)) = s.get("anyOf") {
            if !any.iter().any(|sub| self.passes(sub, value, depth + 1)) {
                self.fail(path, format!("must match at least one of the {} allowed shapes (anyOf)", any.len()));
            }
        }
        if let Some(Value::Array(one)) = s.get("oneOf") {
            let n = one.iter().filter(|sub| self.passes(sub, value, depth + 1)).count();
            if n != 1 {
                self.fail(
                    path,
                    format!("must match exactly one of the {} allowed shapes (oneOf), matches {n}", one.len()),
                );
            }
        }
        if let Some(not) = s.get("not") {
            if self.passes(not, value, depth + 1) {
                self.fail(path, "matches a shape that is not allowed (not)".into());
            }
        }
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn errors_name_the_path_and_the_problem() {
        let schema = json!({"type": "object", "required": ["name", "tags"], "additionalProperties": false,
            "properties": {"name": {"type": "string", "minLength": 2}, "age": {"type": "integer", "minimum": 0},
                           "tags": {"type": "array", "items": {"enum": ["a", "b"]}, "maxItems": 2}}});
        assert!(validate(&schema, &json!({"name": "Ann", "tags": ["a"], "age": 3})).is_ok());
        let errors =
            validate(&schema, &json!({"name": "A", "age": -1.5, "tags": ["a", "c", "b"], "x": 1})).unwrap_err();
        let all = errors.join("\n");
        for needle in [
            "$.name: must be at least 2",
            "$.age: must be of type integer",
            "$.age: must be ≥ 0",
            "$.tags[1]: must be one of",
            "$.tags: must have at most 2",
            "unexpected property \"x\"",
        ] {
            assert!(all.contains(needle), "{needle} not in:\n{all}");
        }
        assert!(validate(&schema, &json!({"tags": []})).unwrap_err()[0].contains("missing required property \"name\""));
    }

    #[test]
    fn refs_unions_and_recursion() {
        let schema = json!({"$defs": {"Node": {"type": "object", "properties": {
                "v": {"type": ["integer", "null"]}, "kids": {"type": "array", "items": {"$ref": "#/$defs/Node"}}}}},
            "$ref": "#/$defs/Node"});
        assert!(validate(&schema, &json!({"v": 1, "kids": [{"v": null, "kids": []}]})).is_ok());
        let e = validate(&schema, &json!({"v": 1, "kids": [{"v": "x"}]})).unwrap_err();
        assert!(e[0].starts_with("$.kids[0].v: must be of type integer or null"), "{e:?}");
        let looping = json!({"$ref": "#"});
        assert!(validate(&looping, &json!(1)).is_err());
        let one = json!({"oneOf": [{"type": "integer"}, {"type": "number"}]});
        assert!(validate(&one, &json!(1.5)).is_ok());
        assert!(validate(&one, &json!(1)).is_err());
        assert!(validate(&json!({"$ref": "#/$defs/Missing"}), &json!(1)).is_err());
    }
}
