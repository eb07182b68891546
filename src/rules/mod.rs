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
//! tool that changes a file (`edit_file`, `write_file` and any tool of kind write, judged by its `path_field`)
//! and a `Read` rule every built-in tool that reads (`read_file`, `grep`, `glob`). A call is judged by its
//! tool's kind ([`crate::tools::ToolKind`], see [`PermissionRules::decide_kind`]). A path specifier `//abs/**` is absolute, and a Claude Code `/src/**`
//! (relative to the project) matches from the workspace as well as from the root. Deny beats ask beats
//! allow.
//!
//! A bash command is read with bash's grammar ([`shell`], tree-sitter-bash), never split as text. An allow
//! rule counts only when the whole command is plain commands (`plain.rs`) each matched by an allow rule;
//! anything else (a comment, a substitution, a redirection to a file, `bash -c`, …) asks. A deny or ask
//! rule matches a command anywhere it runs — through wrappers, `bash -c`, `eval`, `xargs`, `find -exec`,
//! quoted, escaped or by path — and also a command the reader cannot read. Paths are judged as written and
//! as resolved inside the workspace (`paths.rs`). [`read_only_command`] is the read-only guess, on the same
//! parse. These decide whether a call is asked about; what a command can do is the sandbox's to enforce.
//!
//! Must never: allow a command that is not plain or has a command no allow rule covers, let a deny rule
//! miss a command it can see or one it cannot read, or allow a path whose resolved form the rule does not
//! cover.

use std::cell::OnceCell;
use std::path::{Component, Path, PathBuf};

use serde_json::Value;

use crate::error::{Error, Result};
use crate::tools::ToolKind;

mod paths;

/// The forms a path rule judges `path` in, relative to `workspace` (`..` taken out): as written, and resolved
/// inside the workspace through a cap-std handle on it (symlinks followed as the file tools would) when that
/// differs. A form outside the workspace is left out.
pub fn workspace_forms(path: &str, workspace: &std::path::Path) -> Vec<String> {
    paths::forms(path, workspace).iter().filter_map(|f| relative(f, workspace)).collect()
}
mod plain;
mod readonly;
pub mod shell;

pub use readonly::read_only_command;

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
    /// Written as Claude Code's `Read`: covers every tool that reads files (`grep` and `glob` too).
    reads: bool,
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
        let reads = name == "Read";
        Ok(Rule { text: t.to_string(), tool: alias(name).to_string(), spec, edits, reads })
    }

    fn tool_matches(&self, name: &str, kind: &ToolKind) -> bool {
        let pat = self.tool.as_str();
        // `Read` stays with the built-in searches: a host's (or an MCP server's) read tool gives no path the
        // rule could judge, and an allow rule for reading files should not let it run unasked.
        if pat == name
            || pat == "*"
            || (self.edits && matches!(kind, ToolKind::Write { .. }))
            || (self.reads && matches!(name, "grep" | "glob"))
        {
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

    /// Whether this allow rule covers one plain command, as written or after a wrapper that changes
    /// nothing it can do (`timeout 60 npm test`, `nice -n 5 make`). A command named by a path matches
    /// only a rule naming that path: an allow rule never lets another file of a known name run.
    fn allows_command(&self, words: &[String]) -> bool {
        let mut rest = words;
        loop {
            if self.matches_words(rest, false, false) {
                return true;
            }
            match readonly::skip_plain_wrapper(rest) {
                Some(inner) if !inner.is_empty() => rest = inner,
                _ => return false,
            }
        }
    }

    /// Whether this rule covers one command found in a script. `by_name`: a command named by its path
    /// (`/bin/rm`) matches a rule about its name (deny and ask rules). `computed`: some argument is only
    /// known when it runs, so it may be whatever the rule names after the command name.
    fn matches_words(&self, words: &[String], by_name: bool, computed: bool) -> bool {
        let Some(spec) = &self.spec else { return true };
        let Some((name, args)) = words.split_first() else { return false };
        let (glob_spec, prefix) = match spec.strip_suffix(":*") {
            Some(p) => (None, Some(p)),
            None if spec.contains('*') => (Some(normalize_ws(spec)), None),
            None => (None, None),
        };
        let spec_words: Vec<&str> = prefix.unwrap_or(spec).split_whitespace().collect();
        let Some((spec_name, spec_args)) = spec_words.split_first() else { return prefix.is_some() };
        let mut names = vec![name.as_str()];
        if by_name && !spec_name.contains('/') {
            let base = name.rsplit('/').next().unwrap_or(name);
            if !base.is_empty() && base != name {
                names.push(base);
            }
        }
        names.into_iter().any(|n| {
            if let Some(g) = &glob_spec {
                let mut line = n.to_string();
                for a in args {
                    line.push(' ');
                    line.push_str(a);
                }
                let line = normalize_ws(&line);
                // `git * main`, and `npm run *` also covering `npm run` alone.
                return glob(g, &line)
                    || g.strip_suffix(" *").is_some_and(|p| p == line)
                    || (computed && g.split(' ').next().is_some_and(|first| glob(first, n)));
            }
            if n != *spec_name {
                return false;
            }
            if computed {
                return true;
            }
            let same = args.len() >= spec_args.len() && args.iter().zip(spec_args).all(|(a, b)| a == b);
            same && (prefix.is_some() || args.len() == spec_args.len())
        })
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
    ///
    /// A bash command is read with bash's grammar ([`shell`]): an allow rule applies only when the whole
    /// command is plain commands each covered by an allow rule; a deny or ask rule matches a command
    /// anywhere in it, and also a command it cannot read. A path is judged as written and as it resolves
    /// inside the workspace (symlinks followed): a deny or ask rule matching either applies, an allow rule
    /// must match both. A `Read` rule covers `grep` and `glob` too, and a deny or ask one also stops a
    /// search rooted above a path it names (see `src/rules/paths.rs`).
    pub fn decide(&self, name: &str, input: &Value, workspace: &Path) -> RuleDecision {
        self.decide_kind(name, &crate::tools::builtin_kind(name), input, workspace)
    }

    /// [`PermissionRules::decide`] for a call of a tool of this kind (the agent passes each registered tool's
    /// own): a shell tool's `command`, a write tool's `path_field`, a network tool's `url` are what the
    /// rules judge, and an `Edit` rule covers every write tool.
    pub fn decide_kind(&self, name: &str, kind: &ToolKind, input: &Value, workspace: &Path) -> RuleDecision {
        // A tool that says nothing of itself is judged as the built-in of its name, if there is one: a rule
        // names its tool (`bash(rm:*)`), and a host's own `bash` must not slip past it for lack of a kind.
        let builtin;
        let kind = if *kind == ToolKind::Other {
            builtin = crate::tools::builtin_kind(name);
            &builtin
        } else {
            kind
        };
        let subject = kind_of(name, kind, input);
        let script = OnceCell::new();
        let resolved = OnceCell::new();
        let hit = |rules: &[Rule], every: bool| -> Option<String> {
            let rules: Vec<&Rule> = rules.iter().filter(|r| r.tool_matches(name, kind)).collect();
            if rules.is_empty() {
                return None;
            }
            match &subject {
                Subject::Command(cmd) => {
                    if let Some(r) = rules.iter().find(|r| r.spec.is_none()) {
                        return Some(r.text.clone());
                    }
                    // Only bash's own blanks make an empty command (`\u{85}` alone is a command name to bash).
                    if cmd.chars().all(|c| matches!(c, ' ' | '\t' | '\n')) {
                        return None;
                    }
                    let script: &shell::Script = script.get_or_init(|| shell::parse(cmd));
                    if every {
                        // Allow: every command plain and covered.
                        let plain = script.plain.as_ref()?;
                        let mut found = None;
                        for words in plain {
                            let r = rules.iter().find(|r| r.allows_command(words))?;
                            found = found.or(Some(r.text.clone()));
                        }
                        return found;
                    }
                    for f in &script.everywhere {
                        if let Some(r) = rules.iter().find(|r| r.matches_words(&f.words, true, f.computed)) {
                            return Some(r.text.clone());
                        }
                    }
                    // What cannot be read may run what the rule names.
                    script.opaque.as_ref().and_then(|why| {
                        rules.first().map(|r| format!("{} (applied because {why}; write it plainly)", r.text))
                    })
                }
                Subject::Path(p) | Subject::Search(p) => {
                    let forms: &Vec<String> = resolved.get_or_init(|| paths::forms(p, workspace));
                    let matches = |r: &&&Rule| {
                        if every {
                            forms.iter().all(|f| r.matches_path(f, workspace))
                        } else {
                            forms.iter().any(|f| r.matches_path(f, workspace))
                        }
                    };
                    if let Some(r) = rules.iter().find(matches) {
                        return Some(r.text.clone());
                    }
                    if every || !matches!(subject, Subject::Search(_)) {
                        return None;
                    }
                    // A search rooted above a path the rule names would read it.
                    let searched: Vec<&Rule> = rules.iter().copied().filter(|r| r.spec.is_some()).collect();
                    let first = searched.first()?;
                    paths::search_reaches(forms, workspace, &first.text, |rel| {
                        searched.iter().find(|r| r.matches_path(rel, workspace)).map(|r| r.text.clone())
                    })
                    .map(|(rule, rel)| format!("{rule} (the search under '{p}' would read '{rel}')"))
                }
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
    /// The folder (or file) a search starts from.
    Search(&'a str),
    Url(&'a str),
    /// Another tool: a specifier matches its `agent_type` / `skill` / `name` field, if it has one.
    Other(Option<&'a str>),
}

fn kind_of<'a>(name: &str, kind: &ToolKind, input: &'a Value) -> Subject<'a> {
    let s = |k: &str| input.get(k).and_then(Value::as_str);
    match (kind, name) {
        (ToolKind::Shell, _) => Subject::Command(s("command").unwrap_or("")),
        (ToolKind::Write { path_field }, _) => Subject::Path(s(path_field).unwrap_or("")),
        // The built-in readers' inputs: read_file names a file, the searches the root of a walk (judged with
        // the walker's own settings). A host's read tool has fields the rules know nothing of.
        (ToolKind::Read, "read_file") => Subject::Path(s("path").or(s("file_path")).unwrap_or("")),
        (ToolKind::Read, "grep" | "glob") => Subject::Search(s("path").unwrap_or(".")),
        (ToolKind::Network, _) => Subject::Url(s("url").unwrap_or("")),
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

/// The commands of a shell command line, read with bash's grammar, wrappers looked through: `a && b | c`
/// gives `a`, `b`, `c`; `echo $(rm x)` gives `echo $(rm x)` and `rm x`; `timeout 5 npm test` gives
/// `npm test`. Each is its words joined by spaces (quotes removed). For showing and for "allow always"
/// prefixes; deciding goes through [`PermissionRules::decide`].
pub fn split_command(command: &str) -> Vec<String> {
    shell::parse(command).innermost.into_iter().map(|w| w.join(" ")).filter(|p| !p.is_empty()).collect()
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
        assert_eq!(split_command("echo $(rm -rf x)"), vec!["echo $(rm -rf x)", "rm -rf x"]);
        assert_eq!(split_command("echo 'a && b'"), vec!["echo a && b"]);
        assert_eq!(split_command("echo hi >&2"), vec!["echo hi"]);
        assert_eq!(split_command("timeout 5 nice -n 3 env A=1 sudo -u x rm -rf /"), vec!["rm -rf /"]);
        assert_eq!(split_command("FOO=1 npm test"), vec!["npm test"]);
        assert_eq!(split_command("echo `whoami`"), vec!["echo `whoami`", "whoami"]);
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
