//! The configuration of one MCP server, in the JSON shape Claude Code's `.mcp.json` uses for one entry.
//!
//! Must never: print header values or environment values (they carry tokens) in errors or Debug output.

use std::collections::BTreeMap;
use std::time::Duration;

use serde::Deserialize;

/// `"command": "prog"` or `"command": ["prog", "arg", …]`.
#[derive(Clone, Deserialize, PartialEq)]
#[serde(untagged)]
pub enum McpCommand {
    /// One program name or path.
    Program(String),
    /// The program followed by its first arguments.
    Argv(Vec<String>),
}

/// One MCP server: a local process spoken to over stdio, or a remote one over Streamable HTTP.
///
/// ```
/// use tooloop::mcp::McpServerConfig;
/// let stdio: McpServerConfig =
///     serde_json::from_str(r#"{"command": ["python3", "server.py"], "env": {"TOKEN": "${HOME}"}}"#).unwrap();
/// let http: McpServerConfig =
///     serde_json::from_str(r#"{"type": "http", "url": "http://127.0.0.1:8000/mcp", "timeout": 30}"#).unwrap();
/// assert!(stdio.command.is_some() && http.url.is_some());
/// ```
///
/// `${VAR}` and `${VAR:-default}` in `command`, `args`, `env` values, `cwd`, `url` and `headers` values are
/// expanded from the process environment when the server starts; an unset variable without a default is an
/// error naming it.
#[derive(Clone, Default, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct McpServerConfig {
    /// `"stdio"` (the default when `command` is given) or `"http"` (the default when `url` is given).
    #[serde(rename = "type", default)]
    pub kind: Option<String>,
    /// stdio: the program (and optionally its first arguments).
    #[serde(default)]
    pub command: Option<McpCommand>,
    /// stdio: arguments after those in `command`.
    #[serde(default)]
    pub args: Vec<String>,
    /// stdio: extra environment variables for the server (added to ours).
    #[serde(default)]
    pub env: BTreeMap<String, String>,
    /// stdio: the server's working directory (default: ours).
    #[serde(default)]
    pub cwd: Option<String>,
    /// http: the MCP endpoint, e.g. `http://127.0.0.1:8000/mcp`.
    #[serde(default)]
    pub url: Option<String>,
    /// http: headers sent with every request (e.g. `Authorization`).
    #[serde(default)]
    pub headers: BTreeMap<String, String>,
    /// Seconds a tool call may take before it is cancelled and reported as an error (default 300).
    #[serde(default)]
    pub timeout: Option<f64>,
    /// Seconds the start (process spawn + `initialize` + `tools/list`) may take (default 30).
    #[serde(default)]
    pub init_timeout: Option<f64>,
    /// stdio: files (absolute paths) that must hold exactly this content — SHA-256, lowercase hex — each
    /// time the server starts, restarts included; otherwise it is not started. How the CLI pins the
    /// workspace code a user approved, which the model could rewrite meanwhile (a tooloop extension of
    /// the `.mcp.json` shape).
    #[serde(default)]
    pub pinned_files: BTreeMap<String, String>,
}

impl std::fmt::Debug for McpServerConfig {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // env and header values may be secrets: names only.
        f.debug_struct("McpServerConfig")
            .field("type", &self.kind)
            .field("command", &self.command.as_ref().map(|c| c.argv()))
            .field("args", &self.args)
            .field("env_names", &self.env.keys().collect::<Vec<_>>())
            .field("cwd", &self.cwd)
            .field("url", &self.url)
            .field("header_names", &self.headers.keys().collect::<Vec<_>>())
            .field("timeout", &self.timeout)
            .field("init_timeout", &self.init_timeout)
            .field("pinned_files", &self.pinned_files.keys().collect::<Vec<_>>())
            .finish()
    }
}

impl McpCommand {
    fn argv(&self) -> Vec<String> {
        match self {
            McpCommand::Program(p) => vec![p.clone()],
            McpCommand::Argv(v) => v.clone(),
        }
    }
}

/// A validated, expanded configuration.
#[derive(Clone)]
pub(crate) enum Transport {
    Stdio { argv: Vec<String>, env: Vec<(String, String)>, cwd: Option<String> },
    Http { url: String, headers: Vec<(String, String)> },
}

/// Default per-call timeout.
pub const DEFAULT_CALL_TIMEOUT: Duration = Duration::from_secs(300);
/// Default start timeout.
pub const DEFAULT_INIT_TIMEOUT: Duration = Duration::from_secs(30);

fn seconds(v: Option<f64>, default: Duration, what: &str) -> Result<Duration, String> {
    match v {
        None => Ok(default),
        Some(s) if s.is_finite() && s > 0.0 && s < 1e9 => Ok(Duration::from_secs_f64(s)),
        Some(s) => Err(format!("{what} must be a positive number of seconds, got {s}")),
    }
}

impl McpServerConfig {
    /// The per-call timeout.
    pub(crate) fn call_timeout(&self) -> Result<Duration, String> {
        seconds(self.timeout, DEFAULT_CALL_TIMEOUT, "timeout")
    }

    /// The start timeout.
    pub(crate) fn start_timeout(&self) -> Result<Duration, String> {
        seconds(self.init_timeout, DEFAULT_INIT_TIMEOUT, "init_timeout")
    }

    /// Check that every pinned file still holds the content it was pinned with.
    pub(crate) fn check_pins(&self) -> Result<(), String> {
        use std::io::Read;
        for (path, want) in &self.pinned_files {
            let mut file =
                std::fs::File::open(path).map_err(|e| format!("{path}, pinned when the server was approved: {e}"))?;
            let mut ctx = ring::digest::Context::new(&ring::digest::SHA256);
            let mut buf = vec![0u8; 64 * 1024];
            loop {
                let n = file.read(&mut buf).map_err(|e| format!("{path}: {e}"))?;
                if n == 0 {
                    break;
                }
                ctx.update(&buf[..n]);
            }
            let got: String = ctx.finish().as_ref().iter().map(|b| format!("{b:02x}")).collect();
            if !got.eq_ignore_ascii_case(want.trim()) {
                return Err(format!(
                    "{path} changed since the server was approved; it is not started (approve it again)"
                ));
            }
        }
        Ok(())
    }

    /// Check the combination of fields and expand `${VAR}`s.
    pub(crate) fn transport(&self, lookup: &dyn Fn(&str) -> Option<String>) -> Result<Transport, String> {
        let kind = match (self.kind.as_deref(), &self.command, &self.url) {
            (Some("stdio") | None, Some(_), None) => "stdio",
            (Some("http" | "streamable-http") | None, None, Some(_)) => "http",
            (Some("sse"), _, _) => {
                return Err("\"type\": \"sse\" (the 2024-11-05 HTTP+SSE transport) is not supported; \
                            use \"type\": \"http\" (Streamable HTTP)"
                    .into());
            }
            (Some(k), _, _) if !matches!(k, "stdio" | "http" | "streamable-http") => {
                return Err(format!("unknown \"type\": {k:?} (expected \"stdio\" or \"http\")"));
            }
            (_, Some(_), Some(_)) => return Err("give either \"command\" (stdio) or \"url\" (http), not both".into()),
            _ => return Err("missing \"command\" (stdio server) or \"url\" (http server)".into()),
        };
        let x = |s: &str| expand(s, lookup);
        if kind == "stdio" {
            if !self.headers.is_empty() {
                return Err("\"headers\" apply to http servers only".into());
            }
            let mut argv = Vec::new();
            for a in self.command.iter().flat_map(McpCommand::argv).chain(self.args.iter().cloned()) {
                argv.push(x(&a)?);
            }
            if argv.first().is_none_or(|p| p.is_empty()) {
                return Err("\"command\" is empty".into());
            }
            let mut env = Vec::new();
            for (k, v) in &self.env {
                env.push((k.clone(), x(v)?));
            }
            let cwd = self.cwd.as_deref().map(x).transpose()?;
            Ok(Transport::Stdio { argv, env, cwd })
        } else {
            if !self.args.is_empty() || !self.env.is_empty() || self.cwd.is_some() || !self.pinned_files.is_empty() {
                return Err("\"args\", \"env\", \"cwd\" and \"pinned_files\" apply to stdio servers only".into());
            }
            let url = x(self.url.as_deref().unwrap_or_default())?;
            if !(url.starts_with("http://") || url.starts_with("https://")) {
                return Err(format!("\"url\" must start with http:// or https://, got {url:?}"));
            }
            let mut headers = Vec::new();
            for (k, v) in &self.headers {
                headers.push((k.clone(), x(v)?));
            }
            Ok(Transport::Http { url, headers })
        }
    }
}

/// Expand `${VAR}` and `${VAR:-default}`; `$` not followed by `{` is kept as is.
pub(crate) fn expand(s: &str, lookup: &dyn Fn(&str) -> Option<String>) -> Result<String, String> {
    let mut out = String::with_capacity(s.len());
    let mut rest = s;
    while let Some(start) = rest.find("${") {
        out.push_str(&rest[..start]);
        let after = &rest[start + 2..];
        let Some(end) = after.find('}') else {
            return Err(format!("unclosed \"${{\" in {s:?}"));
        };
        let body = &after[..end];
        let (name, default) = match body.split_once(":-") {
            Some((n, d)) => (n, Some(d)),
            None => (body, None),
        };
        match (lookup(name), default) {
            (Some(v), _) => out.push_str(&v),
            (None, Some(d)) => out.push_str(d),
            (None, None) => return Err(format!("environment variable {name} is not set (used as ${{{name}}})")),
        }
        rest = &after[end + 1..];
    }
    out.push_str(rest);
    Ok(out)
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod tests {
    use super::*;

    fn env(name: &str) -> Option<String> {
        (name == "HOME_X").then(|| "/home/x".to_string())
    }

    #[test]
    fn expand_replaces_set_variables_and_defaults() {
        assert_eq!(expand("a${HOME_X}/b", &env).unwrap(), "a/home/x/b");
        assert_eq!(expand("${NOPE:-d}", &env).unwrap(), "d");
        assert_eq!(expand("$HOME_X", &env).unwrap(), "$HOME_X");
        assert!(expand("${NOPE}", &env).unwrap_err().contains("NOPE"));
    }

    #[test]
    fn unknown_fields_and_bad_combinations_are_refused() {
        assert!(serde_json::from_str::<McpServerConfig>(r#"{"command": "x", "bogus": 1}"#).is_err());
        let both: McpServerConfig = serde_json::from_str(r#"{"command": "x", "url": "http://a"}"#).unwrap();
        assert!(both.transport(&env).err().is_some());
        let sse: McpServerConfig = serde_json::from_str(r#"{"type": "sse", "url": "http://a"}"#).unwrap();
        assert!(sse.transport(&env).err().unwrap_or_default().contains("sse"));
        let argv: McpServerConfig =
            serde_json::from_str(r#"{"command": ["p", "${HOME_X}"], "args": ["z"], "env": {"A": "${HOME_X}"}}"#)
                .unwrap();
        let Ok(Transport::Stdio { argv, env: e, .. }) = argv.transport(&env) else { panic!("stdio") };
        assert_eq!(argv, ["p", "/home/x", "z"]);
        assert_eq!(e, [("A".to_string(), "/home/x".to_string())]);
    }
}
