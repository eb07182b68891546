//! Built-in coding tools: `bash` (with `bash_output` and `bash_kill` for commands run in the background),
//! `read_file`, `write_file`, `edit_file`, `grep`, `glob` and `web_fetch`, working in a [`Workspace`].
//!
//! [`register`] adds them to a [`ToolRegistry`] as [`ToolHandler`] types ([`Bash`], [`ReadFile`],
//! [`WriteFile`], [`EditFile`]) configured by one [`BuiltinOptions`]. Each tool takes a JSON object and
//! answers with a [`ToolReply`]: `Ok(text)` for the model, or `Err(message)` sent as an `is_error` tool
//! result. Messages are written for the model: they say what was wrong and what to do instead. Tools
//! never panic on bad input.
//!
//! # What is confined, and how
//! The file tools open every path relative to a directory handle on the workspace root (`cap-std`): `..`,
//! absolute paths outside the root and symlinks that lead out are refused at each step of the lookup, so
//! a symlink swapped in while a tool runs cannot redirect it. They refuse to write files with more than
//! one hard link and files without write permission.
//!
//! `bash` runs `bash -c <command>` in the workspace root, with secret-looking environment variables
//! removed ([`is_secret_name`]). Under [`SandboxMode::WorkspaceWrite`] (the default of
//! [`BuiltinOptions`]) or [`SandboxMode::ReadOnly`] the kernel (Landlock, Linux 5.13+) confines the
//! command and everything it starts: reads anywhere, writes only in the workspace (not in read-only
//! mode) and a private `$TMPDIR`; a seccomp filter refuses terminal injection (`TIOCSTI`), Unix sockets
//! (sandboxed modes) and, with `network: false`, every socket family but `AF_UNIX`; as root a mount
//! namespace makes metadata writes outside the writable folders fail too.
//! Where [`sandbox_support`] is `None`, only [`SandboxMode::Off`] is accepted ([`sandbox_check`]).
//! Every process the command starts is killed when the call ends (see [`run_bash`]).
//!
//! # Cancellation
//! `bash` checks the [`CancelToken`] at least every 10 ms and then kills every process the command
//! started. The file tools check it every 64 KB they scan, and before they write; input they scan is
//! bounded ([`MAX_SCAN_BYTES`]).

mod background;
mod bash;
mod env;
mod files;
mod mounts;
mod restore;
mod sandbox;
mod seccomp;
mod workspace;

pub(crate) use bash::unshare_args;
pub(crate) use sandbox::system_program;
mod glob;
mod grep;
mod web_fetch;

pub use background::{BACKGROUND_BUFFER_BYTES, BackgroundInfo, BackgroundShells, BackgroundStatus, MAX_BACKGROUND};
pub use glob::GLOB_MAX_RESULTS;
pub use grep::GREP_OUTPUT_CAP_CHARS;
pub use web_fetch::{FETCH_OUTPUT_CAP_CHARS, MAX_FETCH_BYTES, MAX_REDIRECTS, is_metadata_address};

pub use bash::{BashOptions, DEFAULT_TIMEOUT_SECS, MAX_TIMEOUT_SECS, OUTPUT_CAP_CHARS, process_containment, run_bash};
pub use env::{is_secret_name, is_socket_variable, secret_env_values};
pub use files::MAX_SCAN_BYTES;
pub(crate) use grep::walk_like_search;
pub use restore::{FileState, Restored, file_state, restore_file};
pub use sandbox::{
    DEFAULT_PROTECTED_PATHS, SandboxMode, check_protected_path, default_protected_paths, sandbox_check, sandbox_prompt,
    sandbox_support, short_sandbox_prompt,
};
pub use workspace::Workspace;

use crate::cancel::CancelToken;
use crate::error::{Error, Result};
use crate::tools::{Tool, ToolContext, ToolError, ToolHandler, ToolOutput, ToolRegistry};
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value, json};
use std::path::PathBuf;
use std::sync::Arc;

/// What a built-in tool returns: `Ok(text for the model)` or `Err(message for the model, sent as an
/// is_error result)`.
pub type ToolReply = std::result::Result<String, String>;

/// Names of all built-in tools, in a stable order.
pub const NAMES: [&str; 9] =
    ["bash", "read_file", "write_file", "edit_file", "grep", "glob", "web_fetch", "bash_output", "bash_kill"];

/// How [`register`] sets up the built-in tools. Deserializes from JSON / config with every field optional
/// (`{"sandbox": "read-only", "network": false}`); [`Default`] is the whole tool set in the current
/// folder, sandboxed [`SandboxMode::WorkspaceWrite`], network on, no secrets passed through.
///
/// # Threads and cloning
/// Plain data: `Send + Sync`, cheap to clone.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct BuiltinOptions {
    /// Root folder of the tools (must exist).
    pub workspace: PathBuf,
    /// Tools to register; empty means all of [`NAMES`].
    pub names: Vec<String>,
    /// Kernel confinement of `bash`.
    pub sandbox: SandboxMode,
    /// Whether `bash` commands may use the network (off: a seccomp allow-list refuses every socket family
    /// but `AF_UNIX`).
    pub network: bool,
    /// Names of secret-looking environment variables `bash` keeps anyway (e.g. `"GITHUB_TOKEN"`).
    pub env_passthrough: Vec<String>,
    /// Paths relative to the workspace that `bash` may not change in [`SandboxMode::WorkspaceWrite`]
    /// (default [`DEFAULT_PROTECTED_PATHS`]; empty: none). See [`BashOptions::protected_paths`].
    pub protected_paths: Vec<PathBuf>,
    /// Compact tool definitions for small context windows, where every definition costs prompt tokens and
    /// long instructions distract a small model: one-sentence descriptions (see [`short_description`]),
    /// input schemas cut to their required fields (see [`compact_schema`]; the tools still take their
    /// optional fields and check them as before), and the one-sentence sandbox note
    /// ([`short_sandbox_prompt`]).
    pub short_descriptions: bool,
}

impl Default for BuiltinOptions {
    fn default() -> Self {
        BuiltinOptions {
            workspace: PathBuf::from("."),
            names: Vec::new(),
            sandbox: SandboxMode::WorkspaceWrite,
            network: true,
            env_passthrough: Vec::new(),
            protected_paths: default_protected_paths(),
            short_descriptions: false,
        }
    }
}

/// Register the built-in tools chosen by `opts` in `registry`. `read_file` is parallel-safe.
///
/// # Errors
/// [`Error::Config`] when the workspace does not exist or is not a folder, a name is unknown (the message
/// lists the known ones), a tool of that name is already registered, or `bash` is wanted with a sandbox
/// mode or network setting this system cannot enforce ([`sandbox_check`]).
pub fn register(registry: &ToolRegistry, opts: &BuiltinOptions) -> Result<()> {
    register_owned(registry, opts).map(|_| ())
}

/// [`register`], handing back the manager of the background commands the tools will start, so the owner
/// can list them and end them ([`BackgroundShells::close`]; they also end when the tools are dropped).
///
/// # Errors
/// As [`register`].
pub fn register_owned(registry: &ToolRegistry, opts: &BuiltinOptions) -> Result<Arc<BackgroundShells>> {
    // What bash no longer sees must not come back through any tool either (`cat .env`, `read_file`): the
    // dropped variables' values are redacted from every result.
    registry.add_secrets(secret_env_values(&opts.env_passthrough));
    let ws = Arc::new(
        Workspace::new(&opts.workspace)
            .map_err(|e| Error::Config(format!("workspace {}: {e}", opts.workspace.display())))?,
    );
    let wanted: Vec<String> =
        if opts.names.is_empty() { NAMES.iter().map(|n| n.to_string()).collect() } else { opts.names.clone() };
    if wanted.iter().any(|n| n == "bash") {
        // A sandbox the kernel cannot enforce is refused here, in every host, rather than half-applied.
        sandbox_check(opts.sandbox, opts.network).map_err(Error::Config)?;
    }
    for p in &opts.protected_paths {
        check_protected_path(&p.to_string_lossy()).map_err(|m| Error::Config(format!("protected_paths: {m}")))?;
    }
    let background = Arc::new(BackgroundShells::new());
    let bash_opts = BashOptions {
        sandbox: opts.sandbox,
        network: opts.network,
        env_passthrough: opts.env_passthrough.clone(),
        protected_paths: opts.protected_paths.clone(),
        ..BashOptions::default()
    };
    for name in wanted {
        let Some((name, description, schema)) = spec(&name) else {
            return Err(Error::Config(format!("unknown built-in tool '{name}' (known: {})", NAMES.join(", "))));
        };
        let (description, schema) = if opts.short_descriptions {
            (short_description(name).unwrap_or(description), compact_schema(&schema))
        } else {
            (description, schema)
        };
        let ws = Arc::clone(&ws);
        let tool = match name {
            "bash" => {
                let background = Arc::clone(&background);
                let run_protected = registry.run_protected();
                Tool::new(name, description, schema, Bash { ws, opts: bash_opts.clone(), background, run_protected })?
            }
            "read_file" => Tool::new(name, description, schema, ReadFile { ws })?,
            "write_file" => Tool::new(name, description, schema, WriteFile { ws })?,
            "grep" | "glob" => Tool::new(name, description, schema, Search { ws, name })?,
            "web_fetch" => {
                Tool::new(name, description, schema, WebFetch { client: web_fetch::client(), network: opts.network })?
            }
            "bash_output" | "bash_kill" => {
                let background = Arc::clone(&background);
                Tool::new(name, description, schema, BackgroundTool { background, name })?
            }
            _ => Tool::new(name, description, schema, EditFile { ws })?,
        };
        let kind = crate::tools::builtin_kind(name);
        let parallel = is_read_only(name) || kind == crate::tools::ToolKind::Network;
        registry.register(
            tool.parallel_safe(parallel).read_only(is_read_only(name)).confinable(name == "bash").kind(kind)?,
        )?;
    }
    Ok(background)
}

fn reply(result: ToolReply) -> std::result::Result<ToolOutput, ToolError> {
    result.map(ToolOutput::Text).map_err(ToolError::Respond)
}

/// The `bash` tool as a [`ToolHandler`] (see [`run_bash`]); `run_in_background: true` starts the command
/// in [`Bash::background`] instead and returns its id.
#[derive(Clone, Debug)]
pub struct Bash {
    /// Where commands start.
    pub ws: Arc<Workspace>,
    /// Limits and confinement.
    pub opts: BashOptions,
    /// Where background commands are kept (shared with `bash_output` and `bash_kill`).
    pub background: Arc<BackgroundShells>,
    /// Paths the current run holds read-only beside `opts.protected_paths` (a run's check files).
    pub run_protected: crate::tools::RunProtected,
}

impl ToolHandler for Bash {
    fn call(&self, input: &Value, ctx: &ToolContext<'_>) -> std::result::Result<ToolOutput, ToolError> {
        if ctx.cancel.is_cancelled() {
            return reply(Err("cancelled: bash was not run".to_string()));
        }
        // Approved only as read-only: the kernel holds the command to that, whatever it looks like.
        let confined;
        let opts = if ctx.read_only {
            if let Err(why) = sandbox_check(SandboxMode::ReadOnly, false) {
                return reply(Err(format!(
                    "not run: this command was allowed only if it changes nothing, and the kernel cannot hold it \
                     to that here ({why})"
                )));
            }
            confined = BashOptions { sandbox: SandboxMode::ReadOnly, network: false, ..self.opts.clone() };
            &confined
        } else {
            &self.opts
        };
        // The run's check files (check.rs): read-only to the command like the configured protected paths.
        let extra = self.run_protected.get();
        let widened;
        let opts = if extra.is_empty() {
            opts
        } else {
            let mut protected = opts.protected_paths.clone();
            protected.extend(extra.into_iter().filter(|p| !opts.protected_paths.contains(p)));
            widened = BashOptions { protected_paths: protected, ..opts.clone() };
            &widened
        };
        match input.get("run_in_background") {
            Some(Value::Bool(true)) => reply(self.background.start(&self.ws, input, opts)),
            Some(Value::Bool(false) | Value::Null) | None => {
                // The foreground runner knows only its own parameters: drop the flags it does not need.
                let mut input = input.clone();
                if let Some(map) = input.as_object_mut() {
                    map.remove("run_in_background");
                    map.remove("description");
                }
                reply(run_bash(&self.ws, &input, opts, ctx.cancel))
            }
            Some(other) => reply(Err(format!("bash parameter 'run_in_background' must be true or false, got {other}"))),
        }
    }
}

/// The `grep` and `glob` tools as a [`ToolHandler`].
#[derive(Clone, Debug)]
struct Search {
    ws: Arc<Workspace>,
    name: &'static str,
}

impl ToolHandler for Search {
    fn call(&self, input: &Value, ctx: &ToolContext<'_>) -> std::result::Result<ToolOutput, ToolError> {
        reply(run(self.name, &self.ws, input, ctx.cancel))
    }
}

/// The `web_fetch` tool as a [`ToolHandler`].
#[derive(Clone, Debug)]
struct WebFetch {
    client: crate::http::HttpClient,
    network: bool,
}

impl ToolHandler for WebFetch {
    fn call(&self, input: &Value, ctx: &ToolContext<'_>) -> std::result::Result<ToolOutput, ToolError> {
        reply(web_fetch::web_fetch(&self.client, self.network, input, ctx.cancel))
    }
}

/// The `bash_output` and `bash_kill` tools as a [`ToolHandler`].
#[derive(Clone, Debug)]
struct BackgroundTool {
    background: Arc<BackgroundShells>,
    name: &'static str,
}

impl ToolHandler for BackgroundTool {
    fn call(&self, input: &Value, _ctx: &ToolContext<'_>) -> std::result::Result<ToolOutput, ToolError> {
        reply(if self.name == "bash_output" {
            self.background.output(input, OUTPUT_CAP_CHARS)
        } else {
            self.background.kill(input)
        })
    }
}

/// The `read_file` tool as a [`ToolHandler`].
#[derive(Clone, Debug)]
pub struct ReadFile {
    /// The folder paths are resolved in.
    pub ws: Arc<Workspace>,
}

impl ToolHandler for ReadFile {
    fn call(&self, input: &Value, ctx: &ToolContext<'_>) -> std::result::Result<ToolOutput, ToolError> {
        reply(run("read_file", &self.ws, input, ctx.cancel))
    }
}

/// The `write_file` tool as a [`ToolHandler`].
#[derive(Clone, Debug)]
pub struct WriteFile {
    /// The folder paths are resolved in.
    pub ws: Arc<Workspace>,
}

impl ToolHandler for WriteFile {
    fn call(&self, input: &Value, ctx: &ToolContext<'_>) -> std::result::Result<ToolOutput, ToolError> {
        reply(run("write_file", &self.ws, input, ctx.cancel))
    }
}

/// The `edit_file` tool as a [`ToolHandler`].
#[derive(Clone, Debug)]
pub struct EditFile {
    /// The folder paths are resolved in.
    pub ws: Arc<Workspace>,
}

impl ToolHandler for EditFile {
    fn call(&self, input: &Value, ctx: &ToolContext<'_>) -> std::result::Result<ToolOutput, ToolError> {
        reply(run("edit_file", &self.ws, input, ctx.cancel))
    }
}

const BASH_DESCRIPTION: &str = "\
Run a shell command with `bash -c` and return its output (stdout and stderr together, as a terminal \
shows them), followed by `exit code: N` when the command fails. The command starts in the workspace root. \
Standard input is closed: interactive programs see end-of-file at once, so pass flags that make them \
non-interactive. The command and everything it started are killed after `timeout` seconds (default 120, \
at most 600). Output over 30000 characters keeps its beginning and end and says how much was cut from the \
middle: filter long output yourself (head, tail, wc). Every process the command starts, `&` jobs included, \
is killed when the command ends. For a server or watcher that must keep running, set \
`run_in_background: true`: the call returns at once with an id; read new output with bash_output and stop \
it with bash_kill. Prefer read_file, write_file and edit_file for files, and grep and glob (not grep, rg or \
find through bash) to search.";

const GREP_DESCRIPTION: &str = "\
Search file contents with a regular expression (ripgrep syntax) under `path` (default: the workspace \
root). Skips files ignored by .gitignore/.ignore, hidden files and binary files. `glob` filters files \
(\"*.py\", \"src/**/*.rs\"), `type` by file type (\"py\", \"rust\"). `output_mode`: \"files_with_matches\" (default: file paths, newest first), \
\"content\" (matching lines as path:line:text; `-A`/`-B`/`-C` add context lines, `-n` line numbers, on by \
default) or \"count\" (path:count). `-i` ignores case. `head_limit` keeps the first N entries. Output is \
capped and says how much was left out. Use this instead of grep or rg through bash.";

const GLOB_DESCRIPTION: &str = "\
Find files whose paths match a glob pattern such as \"**/*.py\" or \"src/*.rs\", relative to `path` \
(default: the workspace root). Returns paths, newest first, at most 200; files ignored by .gitignore and \
hidden files are skipped. Use this instead of find or ls through bash.";

const WEB_FETCH_DESCRIPTION: &str = "\
Fetch an http(s) URL and return the page as readable text (HTML turned into Markdown-like text; scripts \
and styles dropped). Follows up to 5 redirects; the text is capped at 40000 characters. Refused when the \
network is off and for link-local or cloud metadata addresses.";

const BASH_OUTPUT_DESCRIPTION: &str = "\
Read what a background command (started with bash and run_in_background: true) printed since the last \
read, followed by whether it is still running or its exit code. `id` is the id bash returned.";

const BASH_KILL_DESCRIPTION: &str = "\
Stop a background command (started with bash and run_in_background: true) and every process it started. \
`id` is the id bash returned.";

const READ_FILE_DESCRIPTION: &str = "\
Read a UTF-8 text file in the workspace. Returns its lines numbered like `cat -n` (a right-aligned line \
number, a tab, then the line). By default lines 1-2000; for more use `offset` (1-based number of the \
first line) and `limit` (number of lines); the result says how to continue when there is more. Lines \
longer than 2000 characters are cut with a marker. Binary files are refused; use bash to list folders.";

const WRITE_FILE_DESCRIPTION: &str = "\
Write `content` to a file in the workspace, creating the file and any missing parent folders, or \
replacing the whole file if it exists. The write is atomic: readers see the old or the new content, \
never a mix. Returns the number of bytes written and whether the file was created, overwritten or \
unchanged. Files without write permission are refused. \
For small changes to an existing file prefer edit_file.";

const EDIT_FILE_DESCRIPTION: &str = "\
Replace exact text in a file in the workspace. `old_text` must match the file exactly, including \
whitespace and indentation (copy it from read_file output without the line-number prefix), and must \
occur exactly once unless `replace_all` is true; add surrounding lines to make it unique. Returns the \
edited lines with some context. To create a file or rewrite it whole, use write_file.";

/// The one-sentence description of a built-in tool (`short_descriptions`), `None` where there is none.
pub fn short_description(name: &str) -> Option<&'static str> {
    Some(match name {
        "bash" => "Run a shell command; returns its output and exit code.",
        "read_file" => "Read a file; returns its lines numbered.",
        "write_file" => "Create or replace a whole file.",
        "edit_file" => "Replace old_text, which must match exactly and occur once, with new_text in a file.",
        "grep" => "Search file contents for a regular expression; returns matching files or lines.",
        "glob" => "List the files matching a pattern such as `**/*.py`, newest first.",
        "web_fetch" => "Fetch an http(s) page and return it as text.",
        "bash_output" => "Read what a background command printed since the last read, and whether it still runs.",
        "bash_kill" => "Stop a background command and everything it started.",
        _ => return None,
    })
}

/// `schema` as a small model needs it (`short_descriptions`): the required fields only, each with its type
/// (and `enum`) but no description, and no `additionalProperties`. Every definition is sent with every
/// request, and a small model calls the tools with their required fields alone. The built-in tools still
/// take their optional fields and refuse unknown ones themselves (each checks its input field by field), so
/// a call behaves as with the full schema.
pub fn compact_schema(schema: &Value) -> Value {
    let required: Vec<&str> = schema
        .get("required")
        .and_then(Value::as_array)
        .map(|r| r.iter().filter_map(Value::as_str).collect())
        .unwrap_or_default();
    let mut properties = Map::new();
    if let Some(props) = schema.get("properties").and_then(Value::as_object) {
        for name in &required {
            let Some(prop) = props.get(*name).and_then(Value::as_object) else { continue };
            let kept: Map<String, Value> = prop
                .iter()
                .filter(|(k, _)| matches!(k.as_str(), "type" | "enum"))
                .map(|(k, v)| (k.clone(), v.clone()))
                .collect();
            properties.insert((*name).to_string(), Value::Object(kept));
        }
    }
    json!({"type": "object", "properties": properties, "required": required})
}

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
                    },
                    "run_in_background": {
                        "type": "boolean",
                        "description": "Start the command and return its id at once; read it with bash_output."
                    },
                    "description": {"type": "string", "description": "A few words saying what the command does."}
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
        "grep" => (
            "grep",
            GREP_DESCRIPTION,
            json!({
                "type": "object",
                "properties": {
                    "pattern": {"type": "string", "description": "The regular expression to search for."},
                    "path": {"type": "string", "description": "File or folder to search (default: workspace root)."},
                    "glob": {"type": "string", "description": "Only files matching this glob, e.g. \"*.js\"."},
                    "type": {"type": "string", "description": "Only files of this type (ripgrep's names: py, rust, js)."},
                    "output_mode": {
                        "type": "string",
                        "enum": ["content", "files_with_matches", "count"],
                        "description": "What to return (default files_with_matches)."
                    },
                    "-i": {"type": "boolean", "description": "Ignore case."},
                    "-n": {"type": "boolean", "description": "Line numbers in content mode (default true)."},
                    "-A": {"type": "integer", "minimum": 0, "description": "Lines after each match (content)."},
                    "-B": {"type": "integer", "minimum": 0, "description": "Lines before each match (content)."},
                    "-C": {"type": "integer", "minimum": 0, "description": "Lines around each match (content)."},
                    "head_limit": {"type": "integer", "minimum": 0, "description": "Keep the first N entries."}
                },
                "required": ["pattern"],
                "additionalProperties": false
            }),
        ),
        "glob" => (
            "glob",
            GLOB_DESCRIPTION,
            json!({
                "type": "object",
                "properties": {
                    "pattern": {"type": "string", "description": "Glob pattern, e.g. \"**/*.py\"."},
                    "path": {"type": "string", "description": "Folder to search in (default: workspace root)."}
                },
                "required": ["pattern"],
                "additionalProperties": false
            }),
        ),
        "web_fetch" => (
            "web_fetch",
            WEB_FETCH_DESCRIPTION,
            json!({
                "type": "object",
                "properties": {
                    "url": {"type": "string", "description": "The http or https URL to fetch."}
                },
                "required": ["url"],
                "additionalProperties": false
            }),
        ),
        "bash_output" | "bash_kill" => (
            if name == "bash_output" { "bash_output" } else { "bash_kill" },
            if name == "bash_output" { BASH_OUTPUT_DESCRIPTION } else { BASH_KILL_DESCRIPTION },
            json!({
                "type": "object",
                "properties": {
                    "id": {"type": "string", "description": "The id bash returned, e.g. \"bash_1\"."}
                },
                "required": ["id"],
                "additionalProperties": false
            }),
        ),
        _ => return None,
    };
    Some(spec)
}

/// Run built-in `name` with `input` (a JSON object) in `ws`. `cancel` is polled (bash: at least every
/// 10 ms); a cancelled call returns `Err`. `bash` runs here with [`SandboxMode::Off`] and otherwise
/// default [`BashOptions`]; use [`run_bash`] or [`register`] to confine it.
///
/// # Errors
/// `Err(message for the model)` for an unknown name, invalid input, a path the sandbox refuses, an I/O
/// failure, a `bash` timeout or spawn failure, or a cancel. A `bash` command that exits non-zero is `Ok`.
pub fn run(name: &str, ws: &Workspace, input: &Value, cancel: &CancelToken) -> ToolReply {
    if cancel.is_cancelled() {
        return Err(format!("cancelled: {name} was not run"));
    }
    match name {
        "bash" => run_bash(ws, input, &BashOptions { sandbox: SandboxMode::Off, ..BashOptions::default() }, cancel),
        "read_file" => files::read_file(ws, input, cancel),
        "write_file" => files::write_file(ws, input, cancel),
        "edit_file" => files::edit_file(ws, input, cancel),
        "grep" => grep::grep(ws, input, cancel),
        "glob" => glob::glob(ws, input, cancel),
        "web_fetch" | "bash_output" | "bash_kill" => Err(format!(
            "{name} keeps state (an HTTP client, the background commands): call it through the tools that \
             register() adds"
        )),
        _ => Err(format!("unknown built-in tool '{name}' (built-in tools: {})", NAMES.join(", "))),
    }
}

/// Whether the tool changes nothing on disk or elsewhere (`read_file`, `grep`, `glob` and `bash_output`:
/// true; the others, `web_fetch` included since it reaches out, and unknown names, false) — used by
/// read-only policies.
pub fn is_read_only(name: &str) -> bool {
    matches!(name, "read_file" | "grep" | "glob" | "bash_output")
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

    /// An optional string (`null` counts as absent).
    pub(crate) fn opt_string(&self, key: &str) -> Result<Option<&'a str>, String> {
        match self.map.get(key) {
            None | Some(Value::Null) => Ok(None),
            Some(Value::String(s)) => Ok(Some(s)),
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
    use super::workspace::tests::setup;
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
    fn builtin_options_deserialize_with_defaults_and_refuse_unknown_fields() {
        let opts: BuiltinOptions = serde_json::from_value(json!({"sandbox": "read-only", "network": false})).unwrap();
        assert_eq!(opts.sandbox, SandboxMode::ReadOnly);
        assert!(!opts.network && opts.names.is_empty() && opts.env_passthrough.is_empty());
        let opts: BuiltinOptions = serde_json::from_value(json!({})).unwrap();
        assert_eq!(opts, BuiltinOptions::default());
        assert_eq!(opts.sandbox, SandboxMode::WorkspaceWrite);
        assert!(serde_json::from_value::<BuiltinOptions>(json!({"sandbx": "off"})).is_err());
    }

    #[test]
    fn register_adds_handler_types_and_refuses_unknown_names() {
        let (_tmp, ws) = setup();
        let registry = ToolRegistry::new();
        let opts = BuiltinOptions { workspace: ws.root().to_path_buf(), ..BuiltinOptions::default() };
        register(&registry, &opts).unwrap();
        assert_eq!(registry.names(), NAMES);
        assert!(registry.get("read_file").unwrap().parallel_safe);
        let kind = |n: &str| registry.get(n).unwrap().kind.name();
        assert_eq!(
            ["read_file", "grep", "glob", "write_file", "edit_file", "bash", "web_fetch", "bash_output"].map(kind),
            [
                Some("read"),
                Some("read"),
                Some("read"),
                Some("write"),
                Some("write"),
                Some("shell"),
                Some("network"),
                None
            ]
        );
        assert_eq!(registry.get("edit_file").unwrap().kind.path_field(), Some("path"));
        let other = ToolRegistry::new();
        let bad = BuiltinOptions { names: vec!["grepp".to_string()], ..opts };
        assert!(register(&other, &bad).unwrap_err().to_string().contains("unknown built-in tool 'grepp'"));
    }

    #[test]
    fn short_descriptions_are_one_sentence_each_and_cut_the_definitions() {
        let (_tmp, ws) = setup();
        let (full, short) = (ToolRegistry::new(), ToolRegistry::new());
        let opts = BuiltinOptions { workspace: ws.root().to_path_buf(), ..BuiltinOptions::default() };
        register(&full, &opts).unwrap();
        register(&short, &BuiltinOptions { short_descriptions: true, ..opts }).unwrap();
        let (mut long_total, mut short_total) = (0, 0);
        for name in NAMES {
            let d = short.get(name).unwrap().spec.description.clone();
            assert_eq!(d.as_str(), short_description(name).unwrap());
            assert_eq!(d.matches(". ").count(), 0, "one sentence: {d}");
            long_total += full.get(name).unwrap().spec.description.clone().len();
            short_total += d.len();
        }
        assert!(short_total * 5 < long_total, "{short_total} vs {long_total}");
    }

    #[test]
    fn compact_schemas_keep_the_required_fields_and_the_tools_still_take_the_optional_ones() {
        let (_tmp, ws) = setup();
        let short = ToolRegistry::new();
        let opts =
            BuiltinOptions { workspace: ws.root().to_path_buf(), short_descriptions: true, ..Default::default() };
        register(&short, &opts).unwrap();
        for name in NAMES {
            let (_, _, full) = spec(name).unwrap();
            let compact = short.get(name).unwrap().spec.input_schema.clone();
            assert_eq!(compact["required"], full["required"], "{name}");
            let kept: Vec<&String> = compact["properties"].as_object().unwrap().keys().collect();
            let required: Vec<&str> = full["required"].as_array().unwrap().iter().filter_map(Value::as_str).collect();
            assert_eq!(kept.len(), required.len(), "{name}: only the required fields");
            for k in &required {
                assert_eq!(compact["properties"][*k]["type"], full["properties"][*k]["type"], "{name}.{k}");
            }
        }
        assert_eq!(compact_schema(&spec("grep").unwrap().2)["properties"], json!({"pattern": {"type": "string"}}));
        // The optional fields still work, and a misspelled one is still refused, by the tool itself.
        std::fs::write(ws.root().join("a.txt"), "1\n2\n3\n").unwrap();
        let call = |input: Value| {
            let block =
                crate::types::ToolUseBlock { id: "t".into(), name: "read_file".into(), input, extra: Map::new() };
            let out = short.execute(&block, &CancelToken::new());
            (out.content.as_str().unwrap_or_default().to_string(), out.is_error)
        };
        let (out, is_error) = call(json!({"path": "a.txt", "offset": 2, "limit": 1}));
        assert!(!is_error && out.starts_with("     2\t2") && !out.contains("     1\t"), "{out}");
        let (out, is_error) = call(json!({"path": "a.txt", "ofset": 2}));
        assert!(is_error && out.contains("no parameter 'ofset'"), "{out}");
        let (out, is_error) = call(json!({"path": "a.txt", "limit": "x"}));
        assert!(is_error && out.contains("'limit' must be an integer"), "{out}");
    }

    #[test]
    fn only_the_readers_are_read_only() {
        assert!(is_read_only("read_file") && is_read_only("grep") && is_read_only("glob"));
        assert!(!is_read_only("web_fetch") && !is_read_only("bash_kill"));
        assert!(!is_read_only("bash"));
        assert!(!is_read_only("write_file"));
        assert!(!is_read_only("edit_file"));
        assert!(!is_read_only("unknown"));
    }

    #[test]
    fn unknown_tool_is_an_error_listing_the_names() {
        let (_tmp, ws) = setup();
        let err = run("grepp", &ws, &json!({}), &CancelToken::new()).unwrap_err();
        assert!(err.contains("unknown built-in tool 'grepp'") && err.contains("read_file"), "{err}");
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
