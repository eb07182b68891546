//! Built-in coding tools: `bash`, `read_file`, `write_file` and `edit_file`, working in a [`Workspace`].
//!
//! Each tool takes a JSON object and answers with a [`ToolReply`]: `Ok(text)` for the model, or
//! `Err(message)` that the registry sends as an `is_error` tool result. Messages are written for the model:
//! they say what was wrong and what to do instead. Tools never panic on bad input.
//!
//! # What is confined, and what is not
//! The file tools resolve every path with [`Workspace::resolve`]: relative paths are taken from the
//! workspace root, and `..`, absolute paths and symlinks that lead outside the root are refused.
//!
//! **`bash` is not confined.** It runs `bash -c <command>` with the workspace root as its working folder,
//! as the user running the host, with the host's environment: the command can read, write and delete any
//! file that user can, and reach the network. The workspace only sets where it starts. A host that needs
//! a real boundary must run tooloop inside one (a container, a VM, a separate user) or leave `bash` out
//! of the tool set — [`is_read_only`] helps a read-only policy do that.
//!
//! # Cancellation
//! [`run`] polls the [`CancelToken`]: `bash` at least every 10 ms (then kills the command's whole process
//! group), `read_file` while it scans a file, `write_file` and `edit_file` before they write.

mod bash;
mod files;
mod sandbox;

pub use bash::{BashOptions, DEFAULT_TIMEOUT_SECS, MAX_TIMEOUT_SECS, OUTPUT_CAP_CHARS, run_bash};
pub use sandbox::Workspace;

use crate::cancel::CancelToken;
use serde_json::{Map, Value, json};

/// What a built-in tool returns: `Ok(text for the model)` or `Err(message for the model, sent as an
/// is_error result)`.
pub type ToolReply = Result<String, String>;

/// Names of all built-in tools, in a stable order.
pub const NAMES: [&str; 4] = ["bash", "read_file", "write_file", "edit_file"];

const BASH_DESCRIPTION: &str = "\
Run a shell command with `bash -c` and return its exit code, stdout and stderr. The command starts in the \
workspace root. Standard input is closed: interactive programs see end-of-file at once, so pass flags that \
make them non-interactive. The command and everything it started are killed after `timeout` seconds \
(default 120, at most 600). Output over 30000 characters keeps its beginning and end and says how much \
was cut from the middle: filter long output yourself (grep, head, tail, wc). A non-zero exit code is \
reported in the result, not treated as a failure. Background processes that still hold stdout or stderr \
shortly after the command exits are killed; to keep a server running, redirect its output \
(`cmd > log.txt 2>&1 &`). Prefer read_file, write_file and edit_file for files.";

const READ_FILE_DESCRIPTION: &str = "\
Read a UTF-8 text file in the workspace. Returns its lines numbered like `cat -n` (a right-aligned line \
number, a tab, then the line). By default lines 1-2000; for more use `offset` (1-based number of the \
first line) and `limit` (number of lines); the result says how to continue when there is more. Lines \
longer than 2000 characters are cut with a marker. Binary files are refused; use bash to list folders.";

const WRITE_FILE_DESCRIPTION: &str = "\
Write `content` to a file in the workspace, creating the file and any missing parent folders, or \
replacing the whole file if it exists. The write is atomic: readers see the old or the new content, \
never a mix. Returns the number of bytes written and whether the file was created or overwritten. \
For small changes to an existing file prefer edit_file.";

const EDIT_FILE_DESCRIPTION: &str = "\
Replace exact text in a file in the workspace. `old_text` must match the file exactly, including \
whitespace and indentation (copy it from read_file output without the line-number prefix), and must \
occur exactly once unless `replace_all` is true; add surrounding lines to make it unique. Returns the \
edited lines with some context. To create a file or rewrite it whole, use write_file.";

/// `(name, description, input JSON schema)` of a built-in tool, `None` for an unknown name.
pub fn spec(name: &str) -> Option<(&'static str, &'static str, Value)> {
    let spec = match name {
        "bash" => (
            "bash",
            BASH_DESCRIPTION,
            json!({
                "type": "object",
                "properties": {
                    "command": {"type": "string", "description": "The command to run, in bash syntax."},
                    "timeout": {
                        "type": "integer",
                        "minimum": 1,
                        "description": "Seconds before the command is killed (default 120, at most 600)."
                    }
                },
                "required": ["command"],
                "additionalProperties": false
            }),
        ),
        "read_file" => (
            "read_file",
            READ_FILE_DESCRIPTION,
            json!({
                "type": "object",
                "properties": {
                    "path": {"type": "string", "description": "File path, relative to the workspace root."},
                    "offset": {
                        "type": "integer",
                        "minimum": 1,
                        "description": "1-based number of the first line to read (default 1)."
                    },
                    "limit": {
                        "type": "integer",
                        "minimum": 1,
                        "description": "Number of lines to read (default 2000)."
                    }
                },
                "required": ["path"],
                "additionalProperties": false
            }),
        ),
        "write_file" => (
            "write_file",
            WRITE_FILE_DESCRIPTION,
            json!({
                "type": "object",
                "properties": {
                    "path": {"type": "string", "description": "File path, relative to the workspace root."},
                    "content": {"type": "string", "description": "The complete new content of the file."}
                },
                "required": ["path", "content"],
                "additionalProperties": false
            }),
        ),
        "edit_file" => (
            "edit_file",
            EDIT_FILE_DESCRIPTION,
            json!({
                "type": "object",
                "properties": {
                    "path": {"type": "string", "description": "File path, relative to the workspace root."},
                    "old_text": {"type": "string", "description": "The exact text to replace (not empty)."},
                    "new_text": {"type": "string", "description": "The text to put in its place."},
                    "replace_all": {
                        "type": "boolean",
                        "description": "Replace every occurrence instead of exactly one (default false)."
                    }
                },
                "required": ["path", "old_text", "new_text"],
                "additionalProperties": false
            }),
        ),
        _ => return None,
    };
    Some(spec)
}

/// Run built-in `name` with `input` (a JSON object) in `ws`. `cancel` is polled (bash: at least every
/// 50 ms); a cancelled call returns `Err`.
///
/// # Errors
/// `Err(message for the model)` for an unknown name, invalid input, a path the sandbox refuses, an I/O
/// failure, a `bash` timeout or spawn failure, or a cancel. A `bash` command that exits non-zero is `Ok`.
pub fn run(name: &str, ws: &Workspace, input: &Value, cancel: &CancelToken) -> ToolReply {
    if cancel.is_cancelled() {
        return Err(format!("cancelled: {name} was not run"));
    }
    match name {
        "bash" => run_bash(ws, input, &BashOptions::default(), cancel),
        "read_file" => files::read_file(ws, input, cancel),
        "write_file" => files::write_file(ws, input, cancel),
        "edit_file" => files::edit_file(ws, input, cancel),
        _ => Err(format!("unknown built-in tool '{name}' (built-in tools: {})", NAMES.join(", "))),
    }
}

/// Whether the tool changes nothing on disk or elsewhere (`read_file`: true; the others, and unknown
/// names, false) — used by read-only policies.
pub fn is_read_only(name: &str) -> bool {
    name == "read_file"
}

/// A tool's input object, checked field by field with messages the model can act on.
pub(crate) struct Args<'a> {
    tool: &'static str,
    map: &'a Map<String, Value>,
}

impl<'a> Args<'a> {
    /// `input` as an object whose keys are all in `allowed` (a misspelled parameter is an error, not
    /// silently ignored).
    pub(crate) fn new(tool: &'static str, input: &'a Value, allowed: &[&str]) -> Result<Self, String> {
        let Some(map) = input.as_object() else {
            return Err(format!(
                "{tool} input must be a JSON object with the parameters {}, got {}",
                allowed.join(", "),
                kind(input)
            ));
        };
        for key in map.keys() {
            if !allowed.contains(&key.as_str()) {
                return Err(format!("{tool} has no parameter '{key}' (its parameters are: {})", allowed.join(", ")));
            }
        }
        Ok(Args { tool, map })
    }

    /// A required string.
    pub(crate) fn string(&self, key: &str) -> Result<&'a str, String> {
        match self.map.get(key) {
            Some(Value::String(s)) => Ok(s),
            None | Some(Value::Null) => Err(format!("{} needs the string parameter '{key}'", self.tool)),
            Some(other) => Err(format!("{} parameter '{key}' must be a string, got {}", self.tool, kind(other))),
        }
    }

    /// An optional whole number (`5` or `5.0`; `null` counts as absent).
    pub(crate) fn opt_int(&self, key: &str) -> Result<Option<i64>, String> {
        match self.map.get(key) {
            None | Some(Value::Null) => Ok(None),
            Some(Value::Number(n)) => {
                if let Some(i) = n.as_i64() {
                    return Ok(Some(i));
                }
                match n.as_f64() {
                    Some(f) if f.fract() == 0.0 && f.abs() < 9.0e15 => Ok(Some(f as i64)),
                    _ => Err(format!("{} parameter '{key}' must be a whole number, got {n}", self.tool)),
                }
            }
            Some(other) => Err(format!("{} parameter '{key}' must be an integer, got {}", self.tool, kind(other))),
        }
    }

    /// An optional boolean (`null` counts as absent).
    pub(crate) fn opt_bool(&self, key: &str) -> Result<Option<bool>, String> {
        match self.map.get(key) {
            None | Some(Value::Null) => Ok(None),
            Some(Value::Bool(b)) => Ok(Some(*b)),
            Some(other) => Err(format!("{} parameter '{key}' must be true or false, got {}", self.tool, kind(other))),
        }
    }
}

fn kind(value: &Value) -> String {
    match value {
        Value::Null => "null".to_string(),
        Value::Bool(b) => format!("the boolean {b}"),
        Value::Number(n) => format!("the number {n}"),
        Value::String(s) if s.chars().count() > 40 => "a string".to_string(),
        Value::String(s) => format!("the string {s:?}"),
        Value::Array(_) => "an array".to_string(),
        Value::Object(_) => "an object".to_string(),
    }
}

/// Lines of `text` from `first` to `last` (1-based, inclusive, clamped), numbered like `cat -n`.
pub(crate) fn numbered(lines: &[&str], first: usize, last: usize) -> String {
    let mut out = String::new();
    let last = last.min(lines.len());
    for n in first.max(1)..=last {
        out.push_str(&format!("{n:>6}\t{}\n", lines[n - 1]));
    }
    out
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod tests {
    use super::sandbox::tests::setup;
    use super::*;

    #[test]
    fn every_name_has_a_spec_with_an_object_schema() {
        for name in NAMES {
            let (n, description, schema) = spec(name).unwrap();
            assert_eq!(n, name);
            assert!(!description.is_empty());
            assert_eq!(schema["type"], "object");
            for required in schema["required"].as_array().unwrap() {
                assert!(schema["properties"].get(required.as_str().unwrap()).is_some());
            }
        }
        assert!(spec("nope").is_none());
    }

    #[test]
    fn bash_description_states_the_configured_limits() {
        let (_, description, _) = spec("bash").unwrap();
        assert!(description.contains(&format!("default {DEFAULT_TIMEOUT_SECS}")));
        assert!(description.contains(&format!("at most {MAX_TIMEOUT_SECS}")));
        assert!(description.contains(&format!("{OUTPUT_CAP_CHARS} characters")));
    }

    #[test]
    fn only_read_file_is_read_only() {
        assert!(is_read_only("read_file"));
        assert!(!is_read_only("bash"));
        assert!(!is_read_only("write_file"));
        assert!(!is_read_only("edit_file"));
        assert!(!is_read_only("unknown"));
    }

    #[test]
    fn unknown_tool_is_an_error_listing_the_names() {
        let (_tmp, ws) = setup();
        let err = run("grep", &ws, &json!({}), &CancelToken::new()).unwrap_err();
        assert!(err.contains("unknown built-in tool 'grep'") && err.contains("read_file"), "{err}");
    }

    #[test]
    fn input_that_is_not_an_object_is_an_error() {
        let (_tmp, ws) = setup();
        let err = run("read_file", &ws, &json!("a.txt"), &CancelToken::new()).unwrap_err();
        assert!(err.contains("must be a JSON object"), "{err}");
    }

    #[test]
    fn missing_field_is_an_error_naming_it() {
        let (_tmp, ws) = setup();
        let err = run("write_file", &ws, &json!({"path": "a.txt"}), &CancelToken::new()).unwrap_err();
        assert!(err.contains("'content'"), "{err}");
    }

    #[test]
    fn wrong_typed_field_is_an_error_naming_the_type() {
        let (_tmp, ws) = setup();
        let err = run("read_file", &ws, &json!({"path": 7}), &CancelToken::new()).unwrap_err();
        assert!(err.contains("'path' must be a string, got the number 7"), "{err}");
        let err = run("read_file", &ws, &json!({"path": "a", "limit": "ten"}), &CancelToken::new()).unwrap_err();
        assert!(err.contains("'limit' must be an integer"), "{err}");
        let err = run("read_file", &ws, &json!({"path": "a", "limit": 2.5}), &CancelToken::new()).unwrap_err();
        assert!(err.contains("whole number"), "{err}");
        let input = json!({"path": "a", "old_text": "x", "new_text": "y", "replace_all": "yes"});
        let err = run("edit_file", &ws, &input, &CancelToken::new()).unwrap_err();
        assert!(err.contains("'replace_all' must be true or false"), "{err}");
    }

    #[test]
    fn misspelled_parameter_is_an_error_listing_the_right_ones() {
        let (_tmp, ws) = setup();
        let err = run("read_file", &ws, &json!({"file_path": "a"}), &CancelToken::new()).unwrap_err();
        assert!(err.contains("no parameter 'file_path'") && err.contains("path, offset, limit"), "{err}");
    }

    #[test]
    fn a_cancelled_token_runs_nothing() {
        let (_tmp, ws) = setup();
        let cancel = CancelToken::new();
        cancel.cancel();
        let input = json!({"path": "new.txt", "content": "x"});
        assert!(run("write_file", &ws, &input, &cancel).unwrap_err().contains("cancelled"));
        assert!(!ws.root().join("new.txt").exists());
    }
}
