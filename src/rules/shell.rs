//! A bash command read with bash's grammar (tree-sitter-bash), for the permission rules and the read-only
//! guess: which commands it runs, and whether it is nothing but plain commands.
//!
//! Two readings of one parse:
//! - [`Script::plain`]: the commands, word by word, when the whole script is plain commands (literal words,
//!   joined by `&&`, `||`, `;`, `|`, newlines, inside `if`/`while`/`until`, `( )`, `{ }`, `!`) with no
//!   redirection but to `/dev/null` or between descriptors. Anything else (a comment, a substitution, an
//!   expansion, an assignment, a heredoc, a function, `&`, a parse error, …) makes it `None`: an allow rule
//!   and the read-only guess then never apply (the codex rule: only what is plainly read is trusted).
//! - [`Script::everywhere`]: every command found anywhere (inside substitutions, loops, functions,
//!   `bash -c '…'`, `eval`, `xargs`, `find -exec`, after wrappers such as `sudo`, `env`, `time -p`), each
//!   wrapper level once, for deny and ask rules; and [`Script::opaque`], why part of it cannot be known
//!   (a parse error, a command whose name is computed, code in a variable, a shell reading its commands
//!   from input), which a deny rule treats as a match.
//!
//! Must never: report a script as plain when bash would run something not in [`Script::plain`], or panic
//! on any input (fuzzed: `fuzz/fuzz_targets/shell_rules.rs`).

use std::cell::RefCell;

use tree_sitter::{Node, Parser, Tree};

/// Scripts longer than this are not parsed (opaque, not plain): no command a model sends is this long.
pub(super) const MAX_SCRIPT_BYTES: usize = 64 * 1024;
/// `bash -c '…'`, `eval`, `env -S` inside one another at most this deep; deeper is opaque.
const MAX_NESTING: usize = 8;
/// Syntax nesting (substitutions in words in substitutions…) read at most this deep; deeper is opaque.
pub(super) const MAX_DEPTH: usize = 200;

/// What one parse says about a script.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Script {
    /// Every command met, with each wrapper level (`sudo rm x` gives `sudo rm x` and `rm x`).
    pub everywhere: Vec<Found>,
    /// The innermost command of each, wrappers looked through (what [`crate::rules::split_command`] shows).
    pub innermost: Vec<Vec<String>>,
    /// Why part of the script cannot be known, if it cannot.
    pub opaque: Option<String>,
    /// The commands, word by word as written, when the whole script is plain.
    pub plain: Option<Vec<Vec<String>>>,
    /// Something in it runs code given as text or input (`bash -c`, `eval`, `xargs`, `find -exec`, …).
    pub runs_code: bool,
}

/// One command met in a script.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Found {
    /// Its words: quotes removed, escapes applied; a computed word as written (`$X`).
    pub words: Vec<String>,
    /// Whether an argument is computed when it runs (an expansion, a substitution, a file pattern): it
    /// could be any words.
    pub computed: bool,
}

thread_local! {
    static PARSER: RefCell<Option<Parser>> = const { RefCell::new(None) };
}

/// Parse `script` with the bash grammar; `None` when the parser could not be set up or gave no tree. The
/// parser is lent only for the parse, so reading code inside the tree may parse again.
pub(super) fn parse_tree(script: &str) -> Option<Tree> {
    PARSER.with(|cell| {
        let mut slot = cell.try_borrow_mut().ok()?;
        if slot.is_none() {
            let mut p = Parser::new();
            p.set_language(&tree_sitter_bash::LANGUAGE.into()).ok()?;
            *slot = Some(p);
        }
        let parser = slot.as_mut()?;
        let tree = parser.parse(script, None);
        // A parse that stopped midway leaves state behind; the next one starts clean.
        parser.reset();
        tree
    })
}

/// The children of `node` with their field names (tree-sitter keeps those on the cursor).
pub(super) fn fields<'t>(node: Node<'t>) -> Vec<(Option<&'static str>, Node<'t>)> {
    let mut out = Vec::new();
    let mut c = node.walk();
    if c.goto_first_child() {
        loop {
            out.push((c.field_name(), c.node()));
            if !c.goto_next_sibling() {
                break;
            }
        }
    }
    out
}

/// Read `script`.
pub fn parse(script: &str) -> Script {
    let mut out = Script::default();
    read_into(script, 0, &mut out);
    if !out.runs_code {
        out.plain = super::plain::plain(script);
    }
    out
}

fn read_into(script: &str, nesting: usize, out: &mut Script) {
    if script.len() > MAX_SCRIPT_BYTES {
        out.opaque.get_or_insert_with(|| "the command is too long to read".into());
        return;
    }
    if nesting > MAX_NESTING {
        out.opaque.get_or_insert_with(|| "commands nested too deep to read".into());
        return;
    }
    if odd_blank(script) {
        out.opaque.get_or_insert_with(|| "a carriage return or other blank that bash reads as part of a word".into());
    }
    let Some(tree) = parse_tree(script) else {
        out.opaque.get_or_insert_with(|| "the command could not be parsed".into());
        return;
    };
    let mut reader = Reader { src: script.as_bytes(), nesting, out, last: None };
    reader.walk(tree.root_node());
}

struct Reader<'a, 's> {
    src: &'s [u8],
    nesting: usize,
    out: &'a mut Script,
    /// The innermost command of the wrapper chain being read.
    last: Option<Vec<String>>,
}

impl Reader<'_, '_> {
    fn opaque(&mut self, why: &str) {
        self.out.runs_code = true;
        self.out.opaque.get_or_insert_with(|| why.to_string());
    }

    /// Visit every node (iteratively: a deep tree cannot overflow the stack).
    fn walk(&mut self, root: Node<'_>) {
        let mut cursor = root.walk();
        let mut depth = 0usize;
        loop {
            let node = cursor.node();
            if node.is_error() || node.is_missing() {
                self.opaque("the command does not parse as bash");
            }
            if node.kind() == "command" {
                self.command(node);
            }
            if node.kind() == "heredoc_redirect" {
                if let Some(why) = heredoc_doubt(node, self.src) {
                    self.opaque(why);
                }
            }
            if node.kind() == "word" && raw_newline(text(node, self.src)) {
                self.opaque("a line break the grammar reads differently from bash");
            }
            if depth < MAX_DEPTH && cursor.goto_first_child() {
                depth += 1;
                continue;
            }
            if depth >= MAX_DEPTH {
                self.opaque("the command is nested too deep to read");
            }
            loop {
                if cursor.goto_next_sibling() {
                    break;
                }
                if !cursor.goto_parent() {
                    return;
                }
                depth -= 1;
            }
        }
    }

    fn command(&mut self, node: Node<'_>) {
        let words: Vec<Word> = fields(node)
            .into_iter()
            .filter(|(f, _)| matches!(f, Some("name") | Some("argument")))
            .map(|(_, child)| word(child, self.src, 0))
            .collect();
        // What the command reads as its input, when it is a shell that would run it.
        let fed = redirect_text(node, self.src);
        self.last = None;
        self.unwrap(&words, fed, true);
        if let Some(last) = self.last.take() {
            self.out.innermost.push(last);
        }
    }

    /// Record `words` and every command it runs through a wrapper.
    fn unwrap(&mut self, words: &[Word], fed: Fed, chain: bool) {
        let mut i = 0;
        let mut fed = Some(fed);
        loop {
            let Some(first) = words.get(i) else { return };
            // `time -p X=1 cmd`, `sudo X=1 cmd`: an assignment after a wrapper is no command. (In first place
            // it is a command's name: bash reads a real assignment there as one, and the grammar too; a
            // quoted `"F=x"y` is a command named `F=xy`, found by the fuzzer.)
            if i > 0 && first.literal.as_deref().is_some_and(is_assignment) {
                i += 1;
                continue;
            }
            let rest = &words[i..];
            let computed = rest[1..].iter().any(|w| w.literal.is_none() || w.written.contains(['*', '?', '[']));
            self.out.everywhere.push(Found { words: texts(rest), computed });
            if chain {
                self.last = Some(texts(rest));
            }
            let Some(name) = first.literal.as_deref() else {
                return self.opaque("a command whose name is computed when it runs");
            };
            if name.contains(['*', '?', '[', '{', '~']) {
                return self.opaque("a command whose name is a pattern the shell expands");
            }
            let base = name.rsplit('/').next().unwrap_or(name);
            let args = &rest[1..];
            let skip = match base {
                "timeout" => options(args, &["-s", "--signal", "-k", "--kill-after"]).map(|n| n + 1),
                "nice" => options(args, &["-n", "--adjustment"]),
                "ionice" => options(args, &["-c", "--class", "-n", "--classdata", "-p", "--pid", "-P", "-u"]),
                "sudo" | "doas" => options(args, SUDO_VALUES),
                "nohup" | "builtin" | "unbuffer" | "busybox" => Some(0),
                "command" => options(args, &[]),
                "exec" => options(args, &["-a"]),
                "time" => options(args, &["-f", "--format", "-o", "--output"]),
                "stdbuf" => options(args, &["-i", "-o", "-e", "--input", "--output", "--error"]),
                "setsid" => options(args, &[]),
                "chroot" => options(args, &["--userspec", "--groups"]).map(|n| n + 1),
                "env" => return self.env(args, fed.take().unwrap_or_default(), chain),
                "xargs" => return self.xargs(args),
                "find" => return self.find_exec(args),
                "eval" => return self.code(args.iter().map(|w| w.literal.clone()).collect(), " "),
                "watch" => {
                    let Some(n) = options(args, &["-n", "--interval", "-d", "--differences", "-q", "--equexit"]) else {
                        return self.opaque("watch with a computed argument");
                    };
                    return self.code(args[n..].iter().map(|w| w.literal.clone()).collect(), " ");
                }
                "bash" | "sh" | "zsh" | "dash" | "ksh" | "ash" | "mksh" | "fish" | "rbash" => {
                    return self.shell(args, fed.take().unwrap_or_default());
                }
                _ => return,
            };
            let Some(skip) = skip else { return self.opaque("a wrapper given a computed argument") };
            if i + 1 + skip >= words.len() {
                return;
            }
            i += 1 + skip;
        }
    }

    /// `env [-i] [-u NAME] [NAME=value]… [-S 'command line'] command…`
    fn env(&mut self, args: &[Word], fed: Fed, chain: bool) {
        let mut i = 0;
        while let Some(w) = args.get(i) {
            let Some(t) = w.literal.as_deref() else { return self.opaque("env with a computed argument") };
            if t == "-S" || t == "--split-string" || t.starts_with("-S") || t.starts_with("--split-string=") {
                // The rest is a command line env splits itself: read it as one.
                let mut code: Vec<Option<String>> = Vec::new();
                let inline = t.strip_prefix("--split-string=").or_else(|| t.strip_prefix("-S")).unwrap_or("");
                if !inline.is_empty() {
                    code.push(Some(inline.to_string()));
                }
                code.extend(args[i + 1..].iter().map(|w| w.literal.clone()));
                return self.code(code, " ");
            }
            if matches!(t, "-u" | "--unset" | "-C" | "--chdir") {
                i += 2;
            } else if t.starts_with('-') || is_assignment(t) {
                i += 1;
            } else {
                return self.unwrap(&args[i..], fed, chain);
            }
        }
    }

    /// `xargs [options] command…`: the command runs with input words appended (`echo` when none).
    fn xargs(&mut self, args: &[Word]) {
        let with_value = ["-a", "--arg-file", "-d", "--delimiter", "-E", "-e", "-I", "-i", "-L", "-l", "-n"];
        let with_value = [&with_value[..], &["--max-args", "-P", "--max-procs", "-s", "--max-chars"]].concat();
        let Some(n) = options(args, &with_value) else { return self.opaque("xargs given a computed argument") };
        let replace = args[..n].iter().enumerate().find_map(|(k, w)| match w.literal.as_deref() {
            Some("-I") => args.get(k + 1).and_then(|w| w.literal.clone()),
            Some(t) if t.starts_with("-I") => Some(t[2..].to_string()),
            Some(t) if t.starts_with("--replace") => Some(t.split_once('=').map_or("{}", |(_, r)| r).to_string()),
            Some("-i") => Some("{}".to_string()),
            _ => None,
        });
        let rest = &args[n..];
        if let (Some(r), Some(first)) = (replace, rest.first()) {
            if first.literal.as_deref().is_none_or(|t| t.contains(r.as_str())) {
                return self.opaque("xargs runs a command named by its input");
            }
        }
        if !rest.is_empty() {
            self.out.runs_code = true;
            self.unwrap(rest, Fed::default(), false);
        }
    }

    /// `find … -exec command… ;` (and `-execdir`, `-ok`, `-okdir`).
    fn find_exec(&mut self, args: &[Word]) {
        let mut i = 0;
        while i < args.len() {
            let t = args[i].literal.as_deref().unwrap_or("");
            if matches!(t, "-exec" | "-execdir" | "-ok" | "-okdir") {
                let end = args[i + 1..]
                    .iter()
                    .position(|w| matches!(w.literal.as_deref(), Some(";") | Some("+")))
                    .map_or(args.len(), |p| p + i + 1);
                let inner = &args[i + 1..end];
                if inner.first().is_some_and(|w| w.literal.as_deref().is_none_or(|t| t.contains("{}"))) {
                    return self.opaque("find -exec runs a command named by the files found");
                }
                if !inner.is_empty() {
                    self.out.runs_code = true;
                    self.unwrap(inner, Fed::default(), false);
                }
                i = end;
            }
            i += 1;
        }
    }

    /// `bash [options] -c 'code' …`, `bash script`, or `bash` reading its commands from its input.
    fn shell(&mut self, args: &[Word], fed: Fed) {
        let mut i = 0;
        while let Some(w) = args.get(i) {
            let Some(t) = w.literal.as_deref() else { return self.opaque("a shell given a computed argument") };
            if t == "--" {
                i += 1;
                break;
            }
            if t.starts_with("--") {
                // `--rcfile FILE`, `--init-file FILE` take a value.
                i += if matches!(t, "--rcfile" | "--init-file") { 2 } else { 1 };
                continue;
            }
            if t.starts_with('-') || t.starts_with('+') {
                if t.len() > 1 && t[1..].contains('c') && t.starts_with('-') {
                    // The code is the first argument after the options.
                    let code = args[i + 1..].iter().find(|w| w.literal.as_deref().is_none_or(|t| !t.starts_with('-')));
                    return match code {
                        Some(w) => self.code(vec![w.literal.clone()], " "),
                        None => self.opaque("a shell whose code cannot be read"),
                    };
                }
                if t.len() > 1 && t[1..].contains('s') && t.starts_with('-') {
                    break;
                }
                // `-o option` takes a value.
                i += if matches!(t, "-o" | "+o" | "-O" | "+O") { 2 } else { 1 };
                continue;
            }
            // A script file: what it runs is not in the command (as for any program).
            return;
        }
        let _ = i;
        match fed {
            Fed::Text(code) => self.code(vec![Some(code)], ""),
            Fed::Unknown | Fed::None => self.opaque("a shell reading its commands from its input"),
        }
    }

    /// Read code given as text (`bash -c`, `eval`, `env -S`): parts joined with `sep`; a computed part
    /// makes it opaque.
    fn code(&mut self, parts: Vec<Option<String>>, sep: &str) {
        self.out.runs_code = true;
        let mut text = String::new();
        for (k, p) in parts.into_iter().enumerate() {
            let Some(p) = p else { return self.opaque("code that is computed when it runs") };
            if k > 0 {
                text.push_str(sep);
            }
            text.push_str(&p);
        }
        if text.trim().is_empty() {
            return;
        }
        read_into(&text, self.nesting + 1, self.out);
    }
}

/// What a command is given as its input by a heredoc or a here-string around it.
#[derive(Clone, Debug, Default)]
enum Fed {
    /// No heredoc or here-string (it may still read a pipe: unknown to a shell).
    #[default]
    None,
    /// Literal text.
    Text(String),
    /// Text with expansions in it.
    Unknown,
}

fn redirect_text(command: Node<'_>, src: &[u8]) -> Fed {
    let Some(parent) = command.parent() else { return Fed::None };
    if parent.kind() != "redirected_statement" {
        return Fed::None;
    }
    let mut cursor = parent.walk();
    let mut fed = Fed::None;
    for r in parent.children(&mut cursor) {
        match r.kind() {
            "heredoc_redirect" => {
                let mut c2 = r.walk();
                let quoted = r
                    .children(&mut c2)
                    .any(|c| c.kind() == "heredoc_start" && text(c, src).starts_with(['\'', '"', '\\']));
                let mut c3 = r.walk();
                let body = r.children(&mut c3).find(|c| c.kind() == "heredoc_body");
                fed = match body {
                    // An unquoted heredoc expands `$…` and backquotes before the shell reads it.
                    Some(b) if quoted || b.named_child_count() == 0 => Fed::Text(text(b, src).to_string()),
                    Some(_) => Fed::Unknown,
                    None => Fed::Text(String::new()),
                };
            }
            "herestring_redirect" => {
                let mut c2 = r.walk();
                let arg = r.named_children(&mut c2).last();
                fed = match arg.map(|a| word(a, src, 0).literal) {
                    Some(Some(t)) => Fed::Text(t),
                    _ => Fed::Unknown,
                };
            }
            _ => {}
        }
    }
    fed
}

pub(super) fn text<'s>(node: Node<'_>, src: &'s [u8]) -> &'s str {
    std::str::from_utf8(&src[node.byte_range()]).unwrap_or("")
}

/// One word of a command: its text as written, and its value when it holds no expansion.
#[derive(Clone, Debug)]
struct Word {
    written: String,
    literal: Option<String>,
}

fn texts(words: &[Word]) -> Vec<String> {
    words.iter().map(|w| w.literal.clone().unwrap_or_else(|| w.written.clone())).collect()
}

/// The value of a word node, when it is literal: quotes removed, backslash escapes applied.
fn word(node: Node<'_>, src: &[u8], depth: usize) -> Word {
    let written = text(node, src).to_string();
    Word { literal: literal(node, src, depth), written }
}

pub(super) fn literal(node: Node<'_>, src: &[u8], depth: usize) -> Option<String> {
    if depth > MAX_DEPTH || node.has_error() {
        return None;
    }
    match node.kind() {
        "command_name" => {
            let mut c = node.walk();
            let kids: Vec<Node<'_>> = node.named_children(&mut c).collect();
            match kids.as_slice() {
                [one] => literal(*one, src, depth + 1),
                _ => None,
            }
        }
        "word" | "number" if raw_newline(text(node, src)) => None,
        "word" | "number" => Some(unescape(text(node, src))).filter(|_| node.named_child_count() == 0),
        "raw_string" => {
            let t = text(node, src);
            Some(t.strip_prefix('\'').and_then(|t| t.strip_suffix('\'')).unwrap_or(t).to_string())
        }
        "string" => {
            let mut c = node.walk();
            let mut out = String::new();
            for k in node.named_children(&mut c) {
                if k.kind() != "string_content" {
                    return None;
                }
                out.push_str(&unescape_double(text(k, src)));
            }
            // string_content leaves out some text between its children; a quote in the source says so.
            let inner = text(node, src);
            let inner = inner.strip_prefix('"').and_then(|t| t.strip_suffix('"'))?;
            if unescape_double(inner) != out {
                return None;
            }
            Some(out)
        }
        "concatenation" => {
            let mut c = node.walk();
            let mut out = String::new();
            let mut end = node.start_byte();
            for k in node.children(&mut c) {
                // Text between the parts that no child holds would be lost: not literal then.
                if k.start_byte() != end {
                    return None;
                }
                end = k.end_byte();
                out.push_str(&literal(k, src, depth + 1)?);
            }
            (end == node.end_byte()).then_some(out)
        }
        _ => None,
    }
}

/// Why a heredoc cannot be read as bash reads it, if it cannot: its end line is not its delimiter (bash
/// then reads to the end of the script), or, unquoted, it holds a backquote (bash runs it; tree-sitter-bash
/// does not see it as a command). Both found by the property test.
fn heredoc_doubt(node: Node<'_>, src: &[u8]) -> Option<&'static str> {
    let mut c = node.walk();
    let kids: Vec<Node<'_>> = node.children(&mut c).collect();
    let start = kids.iter().find(|k| k.kind() == "heredoc_start").map(|k| text(*k, src))?;
    let quoted = start.contains(['\'', '"', '\\']);
    let delimiter: String = start.chars().filter(|c| !matches!(c, '\'' | '"' | '\\')).collect();
    let end = kids.iter().find(|k| k.kind() == "heredoc_end").map(|k| text(*k, src).trim_matches(['\t', '\n', ' ']));
    if end != Some(delimiter.as_str()) {
        return Some("a heredoc whose end the grammar reads differently from bash");
    }
    let body = kids.iter().find(|k| k.kind() == "heredoc_body").map_or("", |k| text(*k, src));
    if !quoted && body.contains('`') {
        return Some("a heredoc with a backquoted command in it");
    }
    None
}

/// Whether `script` holds a character the grammar reads as a blank and bash does not: a carriage return,
/// a vertical tab or form feed, a non-ASCII space. Bash keeps it in the word (`echo >&2\r` writes a file
/// named `2\r`; a backslash before `\r\n` escapes the `\r` and the line ends); found by the property test.
pub(super) fn odd_blank(script: &str) -> bool {
    script.chars().any(|c| c.is_whitespace() && !matches!(c, ' ' | '\t' | '\n'))
}

/// Whether an unquoted word holds a line break not escaped by a backslash. Bash ends the word (and the
/// command) there; tree-sitter-bash sometimes does not (`sh #'` then a newline and `\\env`: found by the
/// property test), so such a word means the parse cannot be trusted.
fn raw_newline(t: &str) -> bool {
    let mut escaped = false;
    for c in t.chars() {
        if c == '\n' && !escaped {
            return true;
        }
        escaped = c == '\\' && !escaped;
    }
    false
}

/// Backslash escapes outside quotes: `\x` is `x`, a backslash-newline joins lines.
fn unescape(t: &str) -> String {
    let mut out = String::with_capacity(t.len());
    let mut chars = t.chars();
    while let Some(c) = chars.next() {
        if c == '\\' {
            match chars.next() {
                Some('\n') | None => {}
                Some(n) => out.push(n),
            }
        } else {
            out.push(c);
        }
    }
    out
}

/// Backslash escapes inside double quotes: only before `$`, `` ` ``, `"`, `\` and a newline.
fn unescape_double(t: &str) -> String {
    let mut out = String::with_capacity(t.len());
    let mut chars = t.chars().peekable();
    while let Some(c) = chars.next() {
        if c == '\\' {
            match chars.peek() {
                Some('$' | '`' | '"' | '\\') => out.push(chars.next().unwrap_or('\\')),
                Some('\n') => {
                    chars.next();
                }
                _ => out.push(c),
            }
        } else {
            out.push(c);
        }
    }
    out
}

const SUDO_VALUES: &[&str] = &[
    "-u",
    "--user",
    "-g",
    "--group",
    "-C",
    "-D",
    "--chdir",
    "-h",
    "--host",
    "-p",
    "--prompt",
    "-r",
    "--role",
    "-t",
    "--type",
    "-U",
    "--other-user",
    "-T",
    "--command-timeout",
];

fn is_assignment(w: &str) -> bool {
    w.split_once('=').is_some_and(|(k, _)| {
        !k.is_empty() && k.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_') && !k.as_bytes()[0].is_ascii_digit()
    })
}

/// How many leading words of `args` are options (with the values of those in `with_value`); `None` when
/// one is computed (the command after them cannot be known).
fn options(args: &[Word], with_value: &[&str]) -> Option<usize> {
    let mut i = 0;
    while let Some(w) = args.get(i) {
        let t = w.literal.as_deref()?;
        if t == "--" {
            return Some(i + 1);
        }
        if !t.starts_with('-') || t == "-" {
            break;
        }
        i += if with_value.contains(&t) { 2 } else { 1 };
    }
    Some(i.min(args.len()))
}
