//! What a tool does ([`ToolKind`]): reads, writes the file named by one of its fields, runs a shell, reaches
//! the network, or none of these the library knows of. Built-ins set theirs, hosts set their own tools'; the
//! loop's file-change events, progress detection and permission rules read the kind, never the tool's name,
//! so a host's own file-writing tool gets the same events, undo and progress credit as `write_file`.
//!
//! Must never: guess a kind from a name (only [`builtin_kind`], the built-ins' own table, maps names), or
//! accept a `path_field` the schema does not give as a string ([`ToolKind::check`]).

use serde_json::Value;

/// What a tool does, as far as the loop's policies care. Default [`ToolKind::Other`].
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum ToolKind {
    /// Nothing the library knows of (the default): judged by its results alone.
    #[default]
    Other,
    /// Reads (files, a search): changes nothing, and a call of it is looking, not running something (progress
    /// detection does not count it as a check run after a change). A host's tool of this kind is also
    /// [`crate::Tool::read_only`].
    Read,
    /// Writes (creates or replaces) the workspace file named by the string field `path_field` of its input:
    /// the loop sends a file-change event with the file's content before each call that succeeded (undo,
    /// diffs), progress detection counts the call as a change to that file, and an `Edit` permission rule
    /// covers it.
    Write {
        /// The input field holding the path, relative to the workspace or absolute inside it.
        path_field: String,
    },
    /// Runs a shell command: progress detection counts a call as a check that passed when it is not an
    /// error and has no `exit code: N` line (the built-in `bash`'s way to report a failed command).
    Shell,
    /// Reaches the network (the built-in `web_fetch`).
    Network,
}

/// The kinds' names, as hosts write them (`"read"`, `"write"`, `"shell"`, `"network"`).
pub const KIND_NAMES: [&str; 4] = ["read", "write", "shell", "network"];

impl ToolKind {
    /// The kind's name: `"read"`, `"write"`, `"shell"`, `"network"`, or `None` for [`ToolKind::Other`].
    pub fn name(&self) -> Option<&'static str> {
        Some(match self {
            ToolKind::Other => return None,
            ToolKind::Read => "read",
            ToolKind::Write { .. } => "write",
            ToolKind::Shell => "shell",
            ToolKind::Network => "network",
        })
    }

    /// The input field naming the file a [`ToolKind::Write`] tool writes (`None` for the other kinds).
    pub fn path_field(&self) -> Option<&str> {
        match self {
            ToolKind::Write { path_field } => Some(path_field),
            _ => None,
        }
    }

    /// The path a call of a [`ToolKind::Write`] tool writes: its `path_field` input, when a non-empty string.
    pub fn written_path<'a>(&self, input: &'a Value) -> Option<&'a str> {
        input.get(self.path_field()?)?.as_str().filter(|p| !p.is_empty())
    }

    /// The kind named `name` (one of [`KIND_NAMES`]; `None` or `""`: [`ToolKind::Other`]), with `path_field`
    /// for `"write"`, checked against the tool's `input_schema` (see [`ToolKind::check`]).
    ///
    /// # Errors
    /// A message naming the allowed kinds for an unknown name; see [`ToolKind::check`] for `path_field`.
    pub fn parse(name: Option<&str>, path_field: Option<&str>, input_schema: &Value) -> Result<Self, String> {
        let kind = match name.unwrap_or("") {
            "" => ToolKind::Other,
            "read" => ToolKind::Read,
            "write" => ToolKind::Write { path_field: path_field.unwrap_or_default().to_string() },
            "shell" => ToolKind::Shell,
            "network" => ToolKind::Network,
            other => {
                return Err(format!("unknown tool kind {other:?}: the kinds are \"{}\"", KIND_NAMES.join("\", \"")));
            }
        };
        if path_field.is_some() && !matches!(kind, ToolKind::Write { .. }) {
            return Err(format!(
                "path_field is for kind \"write\" only (it names the field holding the path the tool writes), \
                 not for {}",
                kind.name().map_or_else(|| "a tool without a kind".to_string(), |n| format!("kind {n:?}"))
            ));
        }
        kind.check(input_schema)?;
        Ok(kind)
    }

    /// Whether the kind fits a tool with this `input_schema`: a [`ToolKind::Write`]'s `path_field` must be a
    /// property of the schema of type `"string"`.
    ///
    /// # Errors
    /// A message saying what is wrong with `path_field`.
    pub fn check(&self, input_schema: &Value) -> Result<(), String> {
        let ToolKind::Write { path_field } = self else { return Ok(()) };
        if path_field.is_empty() {
            return Err("kind \"write\" needs path_field: the input field holding the path the tool writes".into());
        }
        let prop = input_schema.get("properties").and_then(|p| p.get(path_field));
        match prop.and_then(|p| p.get("type")) {
            Some(Value::String(t)) if t == "string" => Ok(()),
            Some(other) => {
                Err(format!("path_field {path_field:?} must be a string property of the schema, not {other}"))
            }
            None if prop.is_some() => Err(format!("path_field {path_field:?} must be declared \"type\": \"string\"")),
            None => {
                let known: Vec<&str> = input_schema
                    .get("properties")
                    .and_then(Value::as_object)
                    .map(|m| m.keys().map(String::as_str).collect())
                    .unwrap_or_default();
                Err(format!(
                    "path_field {path_field:?} is not a property of the input schema (its properties: {})",
                    if known.is_empty() { "none".to_string() } else { known.join(", ") }
                ))
            }
        }
    }
}

/// The kind of the built-in tool `name` (`read_file`, `grep`, `glob`: read; `write_file`, `edit_file`: write,
/// field `path`; `bash`: shell; `web_fetch`: network; the others [`ToolKind::Other`]). The one place a
/// built-in's name says what it does: [`crate::builtin::register`] sets it, and code that has a call but no
/// registry (the rules' [`crate::rules::PermissionRules::decide`]) falls back on it.
pub fn builtin_kind(name: &str) -> ToolKind {
    match name {
        "read_file" | "grep" | "glob" => ToolKind::Read,
        "write_file" | "edit_file" => ToolKind::Write { path_field: "path".into() },
        "bash" => ToolKind::Shell,
        "web_fetch" => ToolKind::Network,
        _ => ToolKind::Other,
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn unknown_kinds_and_misplaced_or_missing_path_fields_are_refused_with_the_reason() {
        let schema = json!({"type": "object", "properties": {"path": {"type": "string"}, "n": {"type": "integer"}}});
        let e = ToolKind::parse(Some("writes"), None, &schema).unwrap_err();
        assert!(e.contains("\"read\", \"write\", \"shell\", \"network\""), "{e}");
        assert!(ToolKind::parse(Some("read"), Some("path"), &schema).unwrap_err().contains("kind \"write\" only"));
        assert!(ToolKind::parse(Some("write"), None, &schema).unwrap_err().contains("needs path_field"));
        assert!(ToolKind::parse(Some("write"), Some("n"), &schema).unwrap_err().contains("must be a string"));
        let e = ToolKind::parse(Some("write"), Some("file"), &schema).unwrap_err();
        assert!(e.contains("not a property") && e.contains("path, n"), "{e}");
        let ok = ToolKind::parse(Some("write"), Some("path"), &schema).unwrap();
        assert_eq!(ok, ToolKind::Write { path_field: "path".into() });
        assert_eq!(ok.written_path(&json!({"path": "a.txt"})), Some("a.txt"));
        assert_eq!(ToolKind::parse(None, None, &schema).unwrap(), ToolKind::Other);
    }
}
