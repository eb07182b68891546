//! Permission rules: `{"allow": [...], "ask": [...], "deny": [...]}` lists of patterns that decide a tool
//! call before anyone is asked, in Claude Code's syntax.
//!
//! A rule is `Tool` (every call of that tool) or `Tool(specifier)`:
//! - `bash(npm test:*)` a command prefix (word boundary: `npm test`, `npm test -- -x`, not `npm tests`),
//!   `bash(git status)` an exact command, `bash(git * main)` a glob (`*` is any text).
//! - `read_file(src/**)`, `edit_file(*.md)`, … a path glob relative to the workspace (`**` any folders, `*`
//!   and `?` within one name); `/abs/**` an absolute one.
//! - `web_fetch(domain:example.com)` the URL's host (or a subdomain of it).
//! - `mcp__github` every tool of an MCP server, `mcp__github__create_issue` one tool, `mcp__github__*` too.
//!
//! Claude Code's names are accepted as aliases (`Bash`, `Read`, `Write`, `Edit`, `MultiEdit`, `Grep`,
//! `Glob`, `WebFetch`), so an existing settings file works; as in Claude Code, an `Edit` rule covers every
//! tool that changes a file (`edit_file` and `write_file`). A path specifier `//abs/**` is absolute, and a
//! Claude Code `/src/**` (relative to the project) matches from the workspace as well as from the root.
//! Deny beats ask beats allow.
//!
//! A compound command (`a && b`, `a || b`, `a; b`, `a | b`, `a & b`, a newline, `$(…)` and backticks) is
//! split first: a deny or ask rule matching any part applies, and an allow rule counts only when every part
//! is allowed. Wrappers (`timeout 5`, `nice -n 10`, `env X=1`, `sudo`, `nohup`, `time`, `X=1 cmd`) are
//! looked through, so `timeout 9 rm -rf /` is matched as `rm -rf /`, and so are the shell's own words
//! (`if x; then rm y; fi` holds `rm y`); a command named by its path (`/bin/rm`) matches its name's rules.
//!
//! Must never: allow a command because one part of it is allowed, or match a path rule against a path
//! that leaves the pattern's folder through `..`.

use std::path::{Component, Path, PathBuf};

use serde_json::Value;

use crate::error::{Error, Result};

/// What the rules say about one call.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum RuleDecision {
    /// An allow rule covers it (for bash: every part of the command): run it without asking.
    Allow(String),
    /// An ask rule matches: the permission callable must decide (no callable: denied).
    Ask(String),
    /// A deny rule matches: refused, the model reads the rule.
    Deny(String),
    /// No rule says anything: the usual path (the permission callable, if any).
    NoMatch,
}

/// One parsed rule.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Rule {
    /// The rule as written.
    pub text: String,
    /// The tool name (aliases resolved), possibly ending in `*` for an MCP server.
    tool: String,
    /// The specifier, without the parentheses.
    spec: Option<String>,
    /// Written as Claude Code's `Edit`/`MultiEdit`: covers every file-changing tool (`write_file` too).
    edits: bool,
}

/// Claude Code's tool names → tooloop's.
pub fn alias(name: &str) -> &str {
    match name {
        "Bash" => "bash",
        "Read" => "read_file",
        "Write" => "write_file",
        "Edit" | "MultiEdit" => "edit_file",
        "Grep" => "grep",
        "Glob" => "glob",
        "WebFetch" => "web_fetch",
        "Task" => "task",
        "TodoWrite" => "todo_write",
        other => other,
    }
}

impl Rule {
    /// Parse `Tool` or `Tool(specifier)`.
    pub fn parse(text: &str) -> std::result::Result<Rule, String> {
        let t = text.trim();
        let (name, spec) = match t.find('(') {
            Some(open) => {
                if !t.ends_with(')') {
                    return Err(format!("rule {text:?} opens a parenthesis it does not close"));
                }
                (&t[..open], Some(t[open + 1..t.len() - 1].trim().to_string()))
            }
            None => (t, None),
        };
        let name = name.trim();
        let ok =
            !name.is_empty() && name.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-' || b == b'*');
        if !ok {
            return Err(format!(
                "rule {text:?}: expected a tool name such as \"bash\" or \"bash(npm test:*)\" or \"mcp__github\""
            ));
        }
        let spec = spec.filter(|s| !s.is_empty() && s != "*" && s != "**");
        let edits = matches!(name, "Edit" | "MultiEdit");
        Ok(Rule { text: t.to_string(), tool: alias(name).to_string(), spec, edits })
    }

    fn tool_matches(&self, name: &str) -> bool {
        let pat = self.tool.as_str();
        if pat == name || pat == "*" || (self.edits && name == "write_file") {
            return true;
        }
        if let Some(server) = pat.strip_prefix("mcp__") {
            // `mcp__github` or `mcp__github__*`: every tool of that server.
            let server = server.strip_suffix("__*").unwrap_or(server);
            if !server.contains("__") {
                return name
                    .strip_prefix("mcp__")
                    .and_then(|r| r.strip_prefix(server))
                    .is_some_and(|r| r.starts_with("__"));
            }
        }
        pat.contains('*') && glob(pat, name)
    }

    /// Whether this rule covers one simple command (already split and unwrapped). `by_name`: a command
    /// named by its path (`/bin/rm`) is also matched by its name (for deny and ask rules; an allow rule
    /// never lets an unknown file of a known name run).
    fn matches_command(&self, command: &str, by_name: bool) -> bool {
        let Some(spec) = &self.spec else { return true };
        let command = normalize_ws(command);
        // `/bin/rm -rf x` is `rm -rf x` to a rule about `rm` (a rule naming the path matches it as written).
        let named = command.split_once(' ').map_or(command.as_str(), |(first, _)| first);
        if by_name && named.contains('/') && !spec.contains('/') {
            let base = named.rsplit('/').next().unwrap_or(named);
            if !base.is_empty() {
                let plain = format!("{base}{}", &command[named.len()..]);
                if self.matches_command(&plain, false) {
                    return true;
                }
            }
        }
        if let Some(prefix) = spec.strip_suffix(":*") {
            let prefix = normalize_ws(prefix);
            return command == prefix
                || command.strip_prefix(&prefix).is_some_and(|rest| rest.starts_with(' '))
                || prefix.is_empty();
        }
        let spec = normalize_ws(spec);
        if spec.contains('*') {
            // `git * main`, and `npm run *` also covering `npm run` alone.
            return glob(&spec, &command) || spec.strip_suffix(" *").is_some_and(|p| p == command);
        }
        command == spec
    }

    fn matches_path(&self, path: &str, workspace: &Path) -> bool {
        let Some(spec) = &self.spec else { return true };
        // `~/x` is under the home folder: an absolute pattern.
        let home;
        let spec = match (spec.strip_prefix("~/"), std::env::var_os("HOME")) {
            (Some(rest), Some(h)) => {
                home = format!("{}/{rest}", Path::new(&h).display());
                &home
            }
            _ => spec,
        };
        let abs_match = || spec.starts_with('/') && glob_path(spec.trim_start_matches('/'), &absolute(path, workspace));
        let Some(rel) = relative(path, workspace) else {
            // Outside the workspace: only an absolute pattern can match it.
            return abs_match();
        };
        if spec.starts_with("//") {
            // Claude Code's absolute form.
            return abs_match();
        }
        if let Some(from_project) = spec.strip_prefix('/') {
            // Absolute, or Claude Code's "relative to the project" (its settings live in the workspace).
            return abs_match() || glob_path(from_project, &rel);
        }
        let spec = spec.strip_prefix("./").unwrap_or(spec);
        glob_path(spec, &rel) || (!spec.contains('/') && glob(spec, rel.rsplit('/').next().unwrap_or(&rel)))
    }

    fn matches_url(&self, url: &str) -> bool {
        let Some(spec) = &self.spec else { return true };
        match spec.strip_prefix("domain:") {
            Some(domain) => {
                let host = url_host(url);
                let domain = domain.trim().to_ascii_lowercase();
                host == domain || host.ends_with(&format!(".{domain}"))
            }
            None => glob(spec, url),
        }
    }
}

/// The three lists, parsed.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct PermissionRules {
    /// Calls these cover run without asking.
    pub allow: Vec<Rule>,
    /// Calls these match go to the permission callable.
    pub ask: Vec<Rule>,
    /// Calls these match are refused.
    pub deny: Vec<Rule>,
}

impl PermissionRules {
    /// Parse `{"allow": [...], "ask": [...], "deny": [...]}` (every key optional; `null` for none).
    pub fn from_value(v: &Value) -> std::result::Result<Option<PermissionRules>, String> {
        let what =
            "an object {\"allow\": [...], \"ask\": [...], \"deny\": [...]} of rules such as \"bash(npm test:*)\"";
        let o = match v {
            Value::Null => return Ok(None),
            Value::Object(o) => o,
            _ => return Err(format!("must be {what}")),
        };
        let mut rules = PermissionRules::default();
        for (k, list) in o {
            let target = match k.as_str() {
                "allow" => &mut rules.allow,
                "ask" => &mut rules.ask,
                "deny" => &mut rules.deny,
                _ => return Err(format!("unknown key {k:?}; must be {what}")),
            };
            match list {
                Value::Null => {}
                Value::Array(items) => {
                    for i in items {
                        let Value::String(s) = i else { return Err(format!("{k}: each rule must be a string")) };
                        target.push(Rule::parse(s)?);
                    }
                }
                _ => return Err(format!("{k} must be a list of rules")),
            }
        }
        Ok(Some(rules))
    }

    /// Whether there are no rules at all.
    pub fn is_empty(&self) -> bool {
        self.allow.is_empty() && self.ask.is_empty() && self.deny.is_empty()
    }

    /// Decide the call `name(input)`; `workspace` anchors relative path rules.
    pub fn decide(&self, name: &str, input: &Value, workspace: &Path) -> RuleDecision {
        let hit = |rules: &[Rule], every: bool| -> Option<String> {
            let rules: Vec<&Rule> = rules.iter().filter(|r| r.tool_matches(name)).collect();
            if rules.is_empty() {
                return None;
            }
            match kind_of(name, input) {
                Subject::Command(cmd) => {
                    let parts = split_command(cmd);
                    if parts.is_empty() {
                        return rules.iter().find(|r| r.spec.is_none()).map(|r| r.text.clone());
                    }
                    let whole = rules.iter().find(|r| r.spec.is_none());
                    if let Some(r) = whole {
                        return Some(r.text.clone());
                    }
                    let mut found = None;
                    for p in &parts {
                        let m = rules.iter().find(|r| r.matches_command(p, !every));
                        match (m, every) {
                            (Some(r), false) => return Some(r.text.clone()),
                            (Some(r), true) => found = found.or(Some(r.text.clone())),
                            (None, true) => return None,
                            (None, false) => {}
                        }
                    }
                    found
                }
                Subject::Path(p) => rules.iter().find(|r| r.matches_path(p, workspace)).map(|r| r.text.clone()),
                Subject::Url(u) => rules.iter().find(|r| r.matches_url(u)).map(|r| r.text.clone()),
                Subject::Other(v) => rules
                    .iter()
                    .find(|r| r.spec.as_deref().is_none_or(|s| v.is_some_and(|v| glob(s, v))))
                    .map(|r| r.text.clone()),
            }
        };
        if let Some(r) = hit(&self.deny, false) {
            return RuleDecision::Deny(r);
        }
        if let Some(r) = hit(&self.ask, false) {
            return RuleDecision::Ask(r);
        }
        if let Some(r) = hit(&self.allow, true) {
            return RuleDecision::Allow(r);
        }
        RuleDecision::NoMatch
    }
}

enum Subject<'a> {
    Command(&'a str),
    Path(&'a str),
    Url(&'a str),
    /// Another tool: a specifier matches its `agent_type` / `skill` / `name` field, if it has one.
    Other(Option<&'a str>),
}

fn kind_of<'a>(name: &str, input: &'a Value) -> Subject<'a> {
    let s = |k: &str| input.get(k).and_then(Value::as_str);
    match name {
        "bash" => Subject::Command(s("command").unwrap_or("")),
        "read_file" | "write_file" | "edit_file" => Subject::Path(s("path").or(s("file_path")).unwrap_or("")),
        "grep" | "glob" => Subject::Path(s("path").unwrap_or(".")),
        "web_fetch" => Subject::Url(s("url").unwrap_or("")),
        _ => Subject::Other(s("agent_type").or(s("skill")).or(s("name"))),
    }
}

fn normalize_ws(s: &str) -> String {
    s.split_whitespace().collect::<Vec<_>>().join(" ")
}

/// `*` matches any text (`/` included), `?` one character.
fn glob(pat: &str, text: &str) -> bool {
    let p: Vec<char> = pat.chars().collect();
    let t: Vec<char> = text.chars().collect();
    let (mut pi, mut ti, mut star, mut mark) = (0, 0, None, 0);
    while ti < t.len() {
        if pi < p.len() && (p[pi] == '?' || p[pi] == t[ti]) {
            pi += 1;
            ti += 1;
        } else if pi < p.len() && p[pi] == '*' {
            star = Some(pi);
            mark = ti;
            pi += 1;
        } else if let Some(s) = star {
            pi = s + 1;
            mark += 1;
            ti = mark;
        } else {
            return false;
        }
    }
    while pi < p.len() && p[pi] == '*' {
        pi += 1;
    }
    pi == p.len()
}

/// A path glob over `/`-separated names: `**` any number of names, `*` and `?` within one name.
fn glob_path(pat: &str, path: &str) -> bool {
    let p: Vec<&str> = pat.split('/').filter(|s| !s.is_empty()).collect();
    let t: Vec<&str> = path.split('/').filter(|s| !s.is_empty()).collect();
    fn go(p: &[&str], t: &[&str]) -> bool {
        match p.first() {
            None => t.is_empty(),
            Some(&"**") => (0..=t.len()).any(|k| go(&p[1..], &t[k..])),
            Some(seg) => !t.is_empty() && glob_segment(seg, t[0]) && go(&p[1..], &t[1..]),
        }
    }
    go(&p, &t)
}

fn glob_segment(pat: &str, name: &str) -> bool {
    glob(pat, name)
}

/// `path` made lexically absolute against `workspace` (`.` and `..` resolved, no file system access).
fn absolute(path: &str, workspace: &Path) -> String {
    let joined = if Path::new(path).is_absolute() { PathBuf::from(path) } else { workspace.join(path) };
    let mut out = PathBuf::new();
    for c in joined.components() {
        match c {
            Component::ParentDir => {
                out.pop();
            }
            Component::CurDir => {}
            other => out.push(other),
        }
    }
    out.to_string_lossy().into_owned()
}

/// `path` relative to the workspace (`/`-separated), or `None` when it leaves it.
fn relative(path: &str, workspace: &Path) -> Option<String> {
    let ws = absolute(&workspace.to_string_lossy(), Path::new("/"));
    let abs = absolute(path, Path::new(&ws));
    let rest = Path::new(&abs).strip_prefix(&ws).ok()?;
    Some(rest.to_string_lossy().replace('\\', "/"))
}

fn url_host(url: &str) -> String {
    let rest = url.split_once("://").map(|(_, r)| r).unwrap_or(url);
    let authority = rest.split(['/', '?', '#']).next().unwrap_or("");
    let host = authority.rsplit('@').next().unwrap_or("");
    let host = if host.starts_with('[') {
        host.split(']').next().unwrap_or("").trim_start_matches('[')
    } else {
        host.split(':').next().unwrap_or("")
    };
    host.to_ascii_lowercase()
}

/// What a command substitution leaves in the outer command once its inside is split off.
const SUBST: &str = "$SUBST";

/// Split a shell command into its simple commands, wrappers looked through: `a && b | c` gives `a`, `b`,
/// `c`; `echo $(rm x)` gives `rm x` and `echo $SUBST`. Quotes are respected (an operator inside quotes does
/// not split). Empty parts are dropped.
pub fn split_command(command: &str) -> Vec<String> {
    let mut parts = Vec::new();
    split_into(command, &mut parts, 0);
    parts.into_iter().map(|p| unwrap_wrappers(&p)).filter(|p| !p.is_empty()).collect()
}

fn split_into(command: &str, parts: &mut Vec<String>, depth: usize) {
    let chars: Vec<char> = command.chars().collect();
    let mut cur = String::new();
    let mut i = 0;
    let (mut single, mut double) = (false, false);
    let push = |cur: &mut String, parts: &mut Vec<String>| {
        let t = cur.trim();
        // A subshell or group's own brackets are not part of the command.
        let t = t.trim_start_matches(['(', '{']).trim_end_matches([')', '}']).trim();
        if !t.is_empty() {
            parts.push(t.to_string());
        }
        cur.clear();
    };
    while i < chars.len() {
        let c = chars[i];
        if single {
            cur.push(c);
            if c == '\'' {
                single = false;
            }
            i += 1;
            continue;
        }
        match c {
            '\\' if i + 1 < chars.len() => {
                cur.push(c);
                cur.push(chars[i + 1]);
                i += 2;
                continue;
            }
            '\'' if !double => single = true,
            '"' => double = !double,
            '$' if chars.get(i + 1) == Some(&'(') => {
                // A command substitution: its inside is a command of its own.
                let (inner, end) = balanced(&chars, i + 2);
                if depth < 8 {
                    split_into(&inner, parts, depth + 1);
                }
                cur.push_str(SUBST);
                i = end + 1;
                continue;
            }
            '`' => {
                let end = chars[i + 1..].iter().position(|&c| c == '`').map(|p| p + i + 1).unwrap_or(chars.len());
                let inner: String = chars[(i + 1).min(chars.len())..end].iter().collect();
                if depth < 8 {
                    split_into(&inner, parts, depth + 1);
                }
                cur.push_str(SUBST);
                i = end + 1;
                continue;
            }
            '<' | '>' if chars.get(i + 1) == Some(&'(') && !double => {
                // Process substitution.
                let (inner, end) = balanced(&chars, i + 2);
                if depth < 8 {
                    split_into(&inner, parts, depth + 1);
                }
                cur.push_str(SUBST);
                i = end + 1;
                continue;
            }
            ';' | '\n' | '&' | '|' if !double => {
                // `>&2` and `&>` are redirections, not separators.
                let prev = cur.chars().last();
                if c == '&' && (prev == Some('>') || prev == Some('<') || chars.get(i + 1) == Some(&'>')) {
                    cur.push(c);
                    i += 1;
                    continue;
                }
                push(&mut cur, parts);
                // `&&`, `||`, `;;`, `|&`
                while i + 1 < chars.len() && matches!(chars[i + 1], '&' | '|' | ';') {
                    i += 1;
                }
                i += 1;
                continue;
            }
            _ => {}
        }
        cur.push(c);
        i += 1;
    }
    push(&mut cur, parts);
}

/// The text inside a `(`…`)` starting at `start` (just after the opening bracket), and the index of the
/// closing one (or the end).
fn balanced(chars: &[char], start: usize) -> (String, usize) {
    let mut depth = 1;
    let mut i = start;
    let (mut single, mut double) = (false, false);
    while i < chars.len() {
        let c = chars[i];
        match c {
            '\'' if !double => single = !single,
            '"' if !single => double = !double,
            '(' if !single && !double => depth += 1,
            ')' if !single && !double => {
                depth -= 1;
                if depth == 0 {
                    return (chars[start..i].iter().collect(), i);
                }
            }
            _ => {}
        }
        i += 1;
    }
    (chars[start.min(chars.len())..].iter().collect(), chars.len())
}

/// `timeout 5 nice -n 3 env A=1 sudo -u x cmd args` → `cmd args`; the shell's own words too (`then rm x` →
/// `rm x`; a lone `fi` or `done` is no command at all).
fn unwrap_wrappers(part: &str) -> String {
    let words: Vec<&str> = part.split_whitespace().collect();
    let mut i = 0;
    while let Some(w) = words.get(i) {
        let assignment = |w: &str| {
            w.split_once('=').is_some_and(|(k, _)| {
                !k.is_empty()
                    && k.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_')
                    && !k.as_bytes()[0].is_ascii_digit()
            })
        };
        if assignment(w) {
            i += 1;
            continue;
        }
        match *w {
            "timeout" => {
                i += 1;
                // options, then the duration
                while words.get(i).is_some_and(|w| w.starts_with('-')) {
                    let takes_value = matches!(words[i], "-s" | "-k" | "--signal" | "--kill-after");
                    i += if takes_value { 2 } else { 1 };
                }
                i += 1;
            }
            "nice" => {
                i += 1;
                while let Some(w) = words.get(i) {
                    if *w == "-n" {
                        i += 2;
                    } else if w.starts_with('-') {
                        i += 1;
                    } else {
                        break;
                    }
                }
            }
            "env" => {
                i += 1;
                while let Some(w) = words.get(i) {
                    if matches!(*w, "-u" | "--unset" | "-C" | "--chdir") {
                        i += 2;
                    } else if w.starts_with('-') || assignment(w) {
                        i += 1;
                    } else {
                        break;
                    }
                }
            }
            "sudo" => {
                i += 1;
                while let Some(w) = words.get(i) {
                    if matches!(*w, "-u" | "-g" | "-C" | "-D" | "-h" | "-p" | "-r" | "-t" | "-U") {
                        i += 2;
                    } else if w.starts_with('-') {
                        i += 1;
                    } else {
                        break;
                    }
                }
            }
            "if" | "then" | "else" | "elif" | "do" | "while" | "until" | "!" | "{" if i + 1 < words.len() => i += 1,
            "fi" | "done" | "esac" | "}" if i + 1 == words.len() => i += 1,
            "nohup" | "time" | "command" | "builtin" | "exec" | "stdbuf" if i + 1 < words.len() => {
                i += 1;
                if *w == "stdbuf" {
                    while words.get(i).is_some_and(|w| w.starts_with('-')) {
                        i += 1;
                    }
                }
            }
            _ => break,
        }
    }
    words.get(i..).map(|w| w.join(" ")).unwrap_or_default()
}

/// Whether a bash command only reads (every part is a known read-only command with no writing option or
/// output redirection): what plan mode lets run.
pub fn read_only_command(command: &str) -> bool {
    if command.contains('>') && !command.contains(">&") && !command.contains("2>/dev/null") {
        // An output redirection writes a file (stderr to /dev/null and `>&2` are fine).
        let cleaned = command.replace("2>/dev/null", "").replace(">/dev/null", "");
        if cleaned.contains('>') {
            return false;
        }
    }
    let parts = split_command(command);
    !parts.is_empty() && parts.iter().all(|p| read_only_simple(p))
}

fn read_only_simple(part: &str) -> bool {
    let words: Vec<&str> = part.split_whitespace().collect();
    let Some(cmd) = words.first() else { return true };
    let cmd = cmd.rsplit('/').next().unwrap_or(cmd);
    const PLAIN: &[&str] = &[
        "ls",
        "cat",
        "head",
        "tail",
        "wc",
        "grep",
        "rg",
        "ag",
        "pwd",
        "echo",
        "printf",
        "tree",
        "file",
        "stat",
        "du",
        "df",
        "which",
        "whoami",
        "date",
        "uname",
        "env",
        "printenv",
        "diff",
        "cmp",
        "basename",
        "dirname",
        "realpath",
        "readlink",
        "nl",
        "cut",
        "tr",
        "sort",
        "uniq",
        "column",
        "less",
        "more",
        "true",
        "false",
        "test",
        "[",
        "id",
        "hostname",
        "jq",
        "awk",
        "md5sum",
        "sha256sum",
        "type",
        "cd",
        "fd",
        "comm",
        "seq",
    ];
    if PLAIN.contains(&cmd) {
        // `sort -o file` and awk's system() or output redirection inside the program could write.
        // `tree -o file` too; `uniq IN OUT` writes OUT; `file -C` compiles a magic file.
        let output_flag =
            matches!(cmd, "sort" | "tree") && words.iter().any(|w| w.starts_with("-o") || w.starts_with("--output"));
        let awk_runs = cmd == "awk" && part.contains("system(");
        let uniq_writes = cmd == "uniq" && words.iter().skip(1).filter(|w| !w.starts_with('-')).count() >= 2;
        let file_compiles = cmd == "file" && words.iter().any(|w| *w == "-C" || *w == "--compile");
        return !output_flag && !awk_runs && !uniq_writes && !file_compiles;
    }
    match cmd {
        "find" => !words.iter().any(|w| {
            matches!(*w, "-delete" | "-exec" | "-execdir" | "-ok" | "-okdir" | "-fls") || w.starts_with("-fprint")
        }),
        "sed" => !words.iter().any(|w| w.starts_with("-i") || *w == "--in-place") && !part.contains("w "),
        // `git diff --output=FILE` and `git log -o`-style options write a file.
        "git" if words.iter().any(|w| w.starts_with("--output")) => false,
        "git" => {
            let sub = words.iter().skip(1).find(|w| !w.starts_with('-')).copied().unwrap_or("");
            matches!(
                sub,
                "status"
                    | "log"
                    | "diff"
                    | "show"
                    | "blame"
                    | "ls-files"
                    | "grep"
                    | "rev-parse"
                    | "describe"
                    | "shortlog"
                    | "ls-tree"
                    | "cat-file"
                    | "reflog"
            ) || (sub == "branch"
                // Listing only: `git branch NAME` creates one, `-d`/`-m`/`-c`/`-u` change them.
                && words.iter().skip_while(|w| **w != "branch").skip(1).all(|w| {
                    matches!(
                        *w,
                        "-a" | "-r" | "-v" | "-vv" | "-l" | "--all" | "--remotes" | "--list" | "--show-current"
                    )
                }))
                || (sub == "remote" && words.len() <= 3 && words.get(2).is_none_or(|w| w.starts_with('-')))
        }
        _ => false,
    }
}

/// Check rule lists for an option or a settings file (every rule parses).
pub fn check(v: &Value) -> Result<Option<PermissionRules>> {
    PermissionRules::from_value(v).map_err(|m| Error::InvalidOption { key: "permission_rules".into(), message: m })
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn splits_compound_commands_and_substitutions() {
        assert_eq!(split_command("a && b || c; d | e & f"), vec!["a", "b", "c", "d", "e", "f"]);
        assert_eq!(split_command("echo $(rm -rf x)"), vec!["rm -rf x", "echo $SUBST"]);
        assert_eq!(split_command("echo 'a && b'"), vec!["echo 'a && b'"]);
        assert_eq!(split_command("echo hi >&2"), vec!["echo hi >&2"]);
        assert_eq!(split_command("timeout 5 nice -n 3 env A=1 sudo -u x rm -rf /"), vec!["rm -rf /"]);
        assert_eq!(split_command("FOO=1 npm test"), vec!["npm test"]);
        assert_eq!(split_command("echo `whoami`"), vec!["whoami", "echo $SUBST"]);
    }

    #[test]
    fn globs() {
        assert!(glob_path("src/**", "src/a/b.rs"));
        assert!(glob_path("src/**/*.rs", "src/a/b.rs"));
        assert!(glob_path("src/**/*.rs", "src/b.rs"));
        assert!(!glob_path("src/*", "src/a/b.rs"));
        assert!(!glob_path("src/**", "secrets/x"));
        assert!(glob("git * main", "git push origin main"));
        assert_eq!(url_host("https://user@Docs.Example.com:8080/x"), "docs.example.com");
    }

    #[test]
    fn read_only_bash() {
        assert!(read_only_command("ls -la && git status | head"));
        assert!(read_only_command("grep -rn foo src 2>/dev/null"));
        assert!(!read_only_command("echo hi > file"));
        assert!(!read_only_command("rm x"));
        assert!(!read_only_command("find . -delete"));
        assert!(!read_only_command("sed -i s/a/b/ f"));
        assert!(!read_only_command("git commit -m x"));
        assert!(!read_only_command("ls $(touch x)"));
        assert!(read_only_command("git branch -a") && read_only_command("git branch"));
        assert!(!read_only_command("git branch feature"), "creates a branch");
        assert!(!read_only_command("git branch -u origin/main"));
        assert!(read_only_command("if true; then ls; fi"));
        assert!(!read_only_command("git diff --output=patch.diff"));
        assert!(!read_only_command("find . -fprint0 out") && read_only_command("find . -name '*.rs'"));
        assert!(!read_only_command("tree -o out.txt") && read_only_command("tree -L 2"));
        assert!(!read_only_command("uniq in.txt out.txt") && read_only_command("sort a | uniq -c"));
        assert!(!read_only_command("file -C -m magic"));
    }

    #[test]
    fn decide_orders_deny_ask_allow() {
        let r = PermissionRules::from_value(&json!({"allow": ["Bash(npm test:*)", "bash"], "deny": ["bash(rm:*)"]}))
            .unwrap()
            .unwrap();
        let ws = Path::new("/w");
        assert_eq!(r.decide("bash", &json!({"command": "rm -rf /"}), ws), RuleDecision::Deny("bash(rm:*)".into()));
        assert_eq!(r.decide("bash", &json!({"command": "ls"}), ws), RuleDecision::Allow("bash".into()));
    }
}
