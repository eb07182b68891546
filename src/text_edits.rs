//! Whole files written as fenced code blocks in a model's text (the `text_edits` option): a small model asked
//! for a file often answers "Here's the corrected `stats.py`:" and the whole file in a fenced block instead of
//! a `write_file` call. [`file_edits`] finds the blocks that name a file, so the loop can turn them into
//! `write_file` calls that take the normal path (permission, protected paths, events, evidence).
//!
//! A pure function on text: it never touches the file system and never decides whether a write is allowed
//! (the `write_file` tool does). It must stay conservative: a block taken by mistake overwrites a user's file,
//! so anything doubtful (a shell or output block, a tag that contradicts the name, a name that is not a
//! plain relative path, a block never closed) is not an edit.
//!
//! A `draft_first` answer's shell blocks are read too ([`commands`]): the draft's note says they are run after
//! its files are written, so they become `bash` calls, on the same path as the model's own.

/// One whole file found in a model's text: its workspace-relative path and its full content (ending with a
/// newline).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FileEdit {
    /// The path as the text names it (relative, no `..`; a leading `./` dropped).
    pub path: String,
    /// The block's body, the file's whole content.
    pub content: String,
}

/// The built-in tool an edit becomes a call of, with input `{"path": …, "content": …}`.
pub const WRITE_TOOL: &str = "write_file";

/// The built-in tool a draft's command becomes a call of, with input `{"command": …}`.
pub const RUN_TOOL: &str = "bash";

/// How the id of a call made from a text edit begins (`text_edit_<entry>_<n>`).
pub const ID_PREFIX: &str = "text_edit_";

/// What the `draft_first` turn (the run's first, sent without tools) adds to the task: the format
/// [`file_edits`] reads. The wording of issue 41's one-request experiment (`bench/edit_format.py`), where
/// Qwen2.5-Coder-1.5B wrote correct files 14 times of 27 this way against 6 of 27 as `write_file` calls;
/// and the shell blocks [`commands`] reads, which a small model writes in its draft anyway.
pub const DRAFT_NOTE: &str = "[tooloop: answer this first message without tools. For every file you create or \
change, write its path on a line of its own, then the whole new file in a fenced code block, like this:\n\n\
hello.py\n```python\nprint('hi')\n```\n\nCommands in a ```bash block are run after the files are written: to run \
what you wrote, or where commands do the task. Then you get the tools to check the result.]";

/// The example in [`DRAFT_NOTE`]: a path, then its block. Qwen2.5-Coder-1.5B gives it word for word after its
/// own files, without the rest of the note (the bench's cli_flag task: 4 of 6 plain drafts one day, 13 of 18
/// attempts' drafts the next): written, it is a file no task asked for.
pub const NOTE_EXAMPLE: &str = "hello.py\n```python\nprint('hi')\n```";

/// Tags of blocks that show commands, sessions, output or patches: never a file's content.
const NEVER: &[&str] = &[
    "bash",
    "sh",
    "shell",
    "console",
    "zsh",
    "fish",
    "terminal",
    "shellsession",
    "sh-session",
    "powershell",
    "pwsh",
    "ps1",
    "bat",
    "cmd",
    "batch",
    "diff",
    "patch",
    "udiff",
    "pycon",
    "python-repl",
    "repl",
];

/// Tags of plain text or output: a file only when its name is plain text too ([`PROSE`]).
const PLAIN: &[&str] = &["text", "txt", "plain", "plaintext", "output", "out", "log"];

/// Extensions of plain-text files a `text` block may be.
const PROSE: &[&str] = &["txt", "md", "markdown", "rst", "csv", "tsv", "log"];

/// A block's language tag and the file extensions it may be written to. A name whose extension is not in
/// this table is no file (too doubtful to write); a tag not in it must be the extension itself.
const LANGUAGES: &[(&[&str], &[&str])] = &[
    (&["python", "py", "python3", "py3"], &["py", "pyi", "pyw"]),
    (&["javascript", "js", "node", "nodejs"], &["js", "mjs", "cjs", "jsx"]),
    (&["jsx"], &["jsx", "js"]),
    (&["typescript", "ts"], &["ts", "tsx", "mts", "cts"]),
    (&["tsx"], &["tsx"]),
    (&["rust", "rs"], &["rs"]),
    (&["go", "golang"], &["go"]),
    (&["c"], &["c", "h"]),
    (&["cpp", "c++", "cxx", "cc", "hpp"], &["cpp", "cc", "cxx", "hpp", "hh", "hxx", "h"]),
    (&["java"], &["java"]),
    (&["kotlin", "kt"], &["kt", "kts"]),
    (&["ruby", "rb"], &["rb"]),
    (&["php"], &["php"]),
    (&["csharp", "cs", "c#"], &["cs"]),
    (&["swift"], &["swift"]),
    (&["scala"], &["scala"]),
    (&["lua"], &["lua"]),
    (&["perl", "pl"], &["pl", "pm"]),
    (&["r"], &["r"]),
    (&["sql"], &["sql"]),
    (&["html", "htm"], &["html", "htm"]),
    (&["css"], &["css"]),
    (&["scss"], &["scss"]),
    (&["json", "jsonc"], &["json"]),
    (&["yaml", "yml"], &["yaml", "yml"]),
    (&["toml"], &["toml"]),
    (&["ini", "cfg", "conf"], &["ini", "cfg", "conf"]),
    (&["markdown", "md"], &["md", "markdown"]),
    (&["rst"], &["rst"]),
    (&["xml"], &["xml"]),
    (&["csv"], &["csv"]),
    (&["tsv"], &["tsv"]),
    (&["txt"], &["txt"]),
];

/// Words on the naming line that say the block is something to run ("Run test_x.py:"), not a file's content.
const RUN_VERBS: &[&str] = &["run", "runs", "running", "execute", "executing", "executed", "terminal", "command"];

/// Words on a line that ends with the file's name that say the block is its output ("Output of calc.py:").
/// A line that names its file mid-sentence uses them to say what the change does ("Modify `fmt.py` to
/// include the currency in the output:"), so [`introduced_on`] does not read them.
const OUTPUT_WORDS: &[&str] = &["output", "outputs", "prints", "printed"];

/// The whole files the text gives as fenced code blocks that name them, in order; a file named twice is
/// given once, by its last block. See the module docs for what counts; an empty list when nothing does.
pub fn file_edits(text: &str) -> Vec<FileEdit> {
    let mut edits: Vec<FileEdit> = Vec::new();
    for block in blocks(text) {
        if let Some(edit) = edit_of(block.before, block.tag, &block.body) {
            edits.retain(|e| e.path != edit.path);
            edits.push(edit);
        }
    }
    edits
}

/// The shell commands a draft gives in fenced shell blocks (`bash`, `sh`, `shell`, `console`, …), one
/// script per block, in order, a block given twice once: what it asks to run after its files are written
/// (its program, its test), or commands that do the task (a rename with `sed`, a count with `grep`). In a
/// block with `$ ` prompts only the prompted lines are commands, the rest their output; a block of comments
/// alone is none. Only the draft's answer is read this way ([`DRAFT_NOTE`] says they are run): elsewhere a
/// shell block in a model's text shows a command, it does not ask to run it.
pub fn commands(text: &str) -> Vec<String> {
    let mut scripts: Vec<String> = Vec::new();
    for block in blocks(text).into_iter().filter(|b| SHELL.contains(&b.tag.as_str())) {
        let prompted: Vec<&str> = block.body.iter().filter_map(|l| l.trim_start().strip_prefix("$ ")).collect();
        let lines = if prompted.is_empty() { block.body } else { prompted };
        let script = lines.join("\n").trim().to_string();
        let code = script.lines().any(|l| !l.trim().is_empty() && !l.trim_start().starts_with('#'));
        if code && !scripts.contains(&script) {
            scripts.push(script);
        }
    }
    scripts
}

/// The text without the echoes of [`DRAFT_NOTE`] in it, each from the note's opening to the next `]` (its
/// end; the rest of the text when there is none); `None` when there is no echo. Qwen2.5-Coder-1.5B sometimes
/// ends its draft with the note word for word, whose example would be written as `hello.py` and sent back
/// to it as its own words.
pub fn without_note(text: &str) -> Option<String> {
    let opening = &DRAFT_NOTE[..DRAFT_NOTE.find('.')?];
    if !text.contains(opening) {
        return None;
    }
    let mut rest = text;
    let mut kept = String::new();
    while let Some(at) = rest.find(opening) {
        kept.push_str(&rest[..at]);
        rest = rest[at..].find(']').map_or("", |end| &rest[at + end + 1..]);
    }
    kept.push_str(rest);
    Some(kept.trim().to_string())
}

/// The text without the copies of [`NOTE_EXAMPLE`] in it (each as it stands in the note); `None` when there
/// is none. For a draft whose task does not name the example's file ([`names_example_file`]): there the copy
/// is the note's, not the model's file.
pub fn without_example(text: &str) -> Option<String> {
    let text = text.replace("\r\n", "\n");
    text.contains(NOTE_EXAMPLE).then(|| text.replace(NOTE_EXAMPLE, "").trim().to_string())
}

/// Whether `task` (the user's words, the draft's note taken out) names the example's file: then a block
/// like the example may be the file the task asks for.
pub fn names_example_file(task: &str) -> bool {
    let task = without_note(task).unwrap_or_else(|| task.to_string());
    NOTE_EXAMPLE.split('\n').next().is_some_and(|path| task.contains(path))
}

/// The block a text ends inside (opened, never closed): what an answer cut off at `max_tokens` was writing
/// when it stopped. `None` when every block is closed.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Unclosed {
    /// The file it names as a closed block would (the line before it, a first-line comment); `None` for a
    /// block that names no file (unnamed, or cut before its first line).
    pub path: Option<String>,
    /// A shell block: commands, cut before they were all written.
    pub shell: bool,
    /// A line the block gives over and over ([`REPEATED`] times or more), and how often: a small model that
    /// repeats itself runs to its output limit (Qwen2.5-Coder-1.5B's test of a palindrome function gave one
    /// `assert` a dozen times until it was cut off).
    pub repeated: Option<(String, usize)>,
}

/// How often one line must appear in a block cut off for it to count as the model repeating itself.
pub const REPEATED: usize = 4;

/// The block `text` ends inside, if it does ([`Unclosed`]): a draft cut off in a file's block gives its
/// closed blocks, except that file's (the cut block may have been rewriting it), and runs no command.
pub fn unclosed(text: &str) -> Option<Unclosed> {
    let (_, open) = scan(text);
    let open = open?;
    let shell = SHELL.contains(&open.tag.as_str());
    let path = match open.before.and_then(named_on) {
        _ if NEVER.contains(&open.tag.as_str()) => None,
        Some(Named::Path(p)) => Some(p),
        Some(Named::Refused) => None,
        None => open.body.first().and_then(|l| comment_name(l)),
    };
    Some(Unclosed { path, shell, repeated: most_repeated(&open.body) })
}

/// The line of `body` given most often, when it is given [`REPEATED`] times or more (blank lines and
/// lines of punctuation alone, such as closing brackets, do not count).
fn most_repeated(body: &[&str]) -> Option<(String, usize)> {
    let mut counts: Vec<(&str, usize)> = Vec::new();
    for line in body.iter().map(|l| l.trim()).filter(|l| l.chars().any(char::is_alphanumeric)) {
        match counts.iter_mut().find(|(l, _)| *l == line) {
            Some((_, n)) => *n += 1,
            None => counts.push((line, 1)),
        }
    }
    let (line, n) = counts.into_iter().max_by_key(|(_, n)| *n)?;
    (n >= REPEATED).then(|| (line.to_string(), n))
}

/// Tags of blocks whose lines a draft's answer asks to run ([`commands`]).
const SHELL: &[&str] = &["bash", "sh", "shell", "console", "zsh", "terminal", "shellsession", "sh-session"];

/// A closed fenced block: the last non-empty line before it (outside a block; none after a block's close),
/// its tag and its body, dedented.
struct Block<'a> {
    before: Option<&'a str>,
    tag: String,
    body: Vec<&'a str>,
}

/// The text's closed fenced blocks, in order; an unclosed block ends the list (the rest is incomplete).
fn blocks(text: &str) -> Vec<Block<'_>> {
    scan(text).0
}

/// The text's closed fenced blocks, in order, and the block it ends inside (never closed: the rest of the
/// text, incomplete), if any.
fn scan(text: &str) -> (Vec<Block<'_>>, Option<Block<'_>>) {
    let lines: Vec<&str> = text.lines().collect();
    let mut found = Vec::new();
    let mut before: Option<&str> = None;
    let mut i = 0;
    while i < lines.len() {
        let line = lines[i];
        let Some(open) = Fence::open(line) else {
            if !line.trim().is_empty() {
                before = Some(line);
            }
            i += 1;
            continue;
        };
        let Some(end) = (i + 1..lines.len()).find(|&j| open.closes(lines[j])) else {
            // Never closed: the rest of the text is an incomplete block, never a file or a command.
            let body = lines[i + 1..].iter().map(|l| open.dedent(l)).collect();
            return (found, Some(Block { before, tag: open.tag, body }));
        };
        let body = lines[i + 1..end].iter().map(|l| open.dedent(l)).collect();
        found.push(Block { before, tag: open.tag, body });
        // What follows a block is named afresh: the closing fence names nothing.
        before = None;
        i = end + 1;
    }
    (found, None)
}

/// The deepest indentation of an opening fence: a block in a list item nested twice.
const MAX_INDENT: usize = 8;

/// An opening fence: its character, length, indentation and the tag (first word of the info string,
/// lowercased).
struct Fence {
    ch: char,
    len: usize,
    indent: usize,
    tag: String,
}

impl Fence {
    fn open(line: &str) -> Option<Fence> {
        // Up to three spaces as CommonMark, or a list item's content (a small model writes "1. **Create
        // `pal.py`**:" then the block indented under it): deeper is an indented code block's text.
        let indent = line.len() - line.trim_start_matches(' ').len();
        if indent > MAX_INDENT {
            return None;
        }
        let rest = &line[indent..];
        let ch = rest.chars().next().filter(|c| *c == '`' || *c == '~')?;
        let len = rest.len() - rest.trim_start_matches(ch).len();
        if len < 3 {
            return None;
        }
        let info = rest[len..].trim();
        // CommonMark: a backtick fence's info string has no backtick.
        if ch == '`' && info.contains('`') {
            return None;
        }
        let tag = info.split_whitespace().next().unwrap_or("").trim_start_matches('{').trim_start_matches('.');
        Some(Fence { ch, len, indent, tag: tag.to_ascii_lowercase() })
    }

    fn closes(&self, line: &str) -> bool {
        let t = line.trim_start_matches(' ');
        if line.len() - t.len() > self.indent.max(3) {
            return false;
        }
        let n = t.len() - t.trim_start_matches(self.ch).len();
        n >= self.len && t[n..].trim().is_empty()
    }

    /// A body line without (at most) the fence's indentation, as CommonMark reads it.
    fn dedent<'a>(&self, line: &'a str) -> &'a str {
        let spaces = line.len() - line.trim_start_matches(' ').len();
        &line[spaces.min(self.indent)..]
    }
}

/// The edit a closed block makes, if it is one: named by the line before it, else by a first-line comment.
fn edit_of(before: Option<&str>, tag: String, body: &[&str]) -> Option<FileEdit> {
    if body.iter().all(|l| l.trim().is_empty()) || NEVER.contains(&tag.as_str()) {
        return None;
    }
    let path = match before.and_then(named_on) {
        Some(Named::Path(p)) => p,
        Some(Named::Refused) => return None,
        None => match body.first().and_then(|l| comment_name(l)) {
            Some(p) => p,
            // Named mid-sentence: only a block that starts at the margin (an indented first line is a piece
            // cut from inside a function or a class).
            None => before.and_then(introduced_on).filter(|_| !starts_indented(body))?,
        },
    };
    if !fits(&tag, &path) || (tag.is_empty() && looks_like_commands(body)) || elides(body) {
        return None;
    }
    let mut content = body.join("\n");
    content.push('\n');
    Some(FileEdit { path, content })
}

enum Named {
    Path(String),
    /// The line names a file but says the block is something to run or its output.
    Refused,
}

/// The file the line before a block names: its last token is a path (`Here's the corrected `stats.py`:`),
/// or a path followed only by "file"/"module"/"script" (`the updated calc.py file:`). A path mid-sentence
/// ("I fixed calc.py. Test it with:") names nothing here: the block is likely something else, unless the
/// line introduces it as that file ([`introduced_on`]).
fn named_on(line: &str) -> Option<Named> {
    let tokens: Vec<&str> = line.split_whitespace().collect();
    let trailing = |t: &&&str| {
        let w = t.trim_matches(|c: char| !c.is_ascii_alphanumeric()).to_ascii_lowercase();
        ["file", "module", "script"].contains(&w.as_str())
    };
    let kept = tokens.len() - tokens.iter().rev().take_while(trailing).count();
    let path = path_token(tokens[..kept].last()?)?;
    let words = line.split(|c: char| !c.is_ascii_alphabetic()).map(|w| w.to_ascii_lowercase());
    let refused = words.into_iter().any(|w| RUN_VERBS.contains(&w.as_str()) || OUTPUT_WORDS.contains(&w.as_str()))
        || command_line(&tokens);
    Some(if refused { Named::Refused } else { Named::Path(path) })
}

/// Words that introduce a block as the file they make or change, named mid-sentence.
const MAKE_WORDS: &[&str] = &[
    "create",
    "created",
    "creating",
    "modify",
    "modified",
    "modifying",
    "update",
    "updated",
    "updating",
    "change",
    "changed",
    "changing",
    "edit",
    "edited",
    "editing",
    "rewrite",
    "rewritten",
    "write",
    "written",
    "fix",
    "fixed",
];

/// Words that say the block is a piece of a file, an example or what to look at, never the whole file ("4.
/// Check the `errors.txt` file to verify that the count was written correctly:").
const PART_WORDS: &[&str] = &[
    "line",
    "lines",
    "snippet",
    "part",
    "excerpt",
    "example",
    "usage",
    "check",
    "checking",
    "verify",
    "verifying",
    "see",
    "view",
];

/// Words that, before the file's name, say what in the file the block is or that it goes into the file
/// ("Change the function in `fmt.py` to:", "Add this to `fmt.py`:"); after it they are what the change does
/// ("Modify `main.py` to pass it to the `price` function:", "Modify `calc.py` to add the numbers:").
const MEMBER_WORDS: &[&str] = &[
    "function",
    "method",
    "class",
    "def",
    "body",
    "block",
    "loop",
    "statement",
    "add",
    "adding",
    "append",
    "insert",
    "replace",
];

/// The file a line names mid-sentence when it introduces the block as that file, made or changed, aider's
/// way of reading its whole-file format: the line ends with `:` and its last sentence has a verb of making
/// or changing ([`MAKE_WORDS`]) and a path in backticks, the first one being the file (`` 1. Modify `fmt.py`
/// to pass the currency to the `price` function: ``, `` Create a new file `count.py` with the following
/// content: ``, `` The file `pal.py` is created with the following content: ``; Qwen2.5-Coder-1.5B named
/// 39 of the 100 blocks of its kept three_files runs so, and those files were lost). Nothing when that
/// sentence says the block is a part, an example or something to run ([`PART_WORDS`], [`RUN_VERBS`], and
/// [`MEMBER_WORDS`] before the name): "In `calc.py`, change the line to:", "Add this to `calc.py`:", "I
/// fixed `calc.py`. Test it with:".
fn introduced_on(line: &str) -> Option<String> {
    let line = line.trim();
    let body = line.strip_suffix(':')?;
    // The last sentence: what follows the last ". ", "! " or "? " (a path's own dot is never followed by a
    // space).
    let start = [". ", "! ", "? "].iter().filter_map(|end| body.rfind(end).map(|i| i + end.len())).max();
    let sentence = &body[start.unwrap_or(0)..];
    let mut path = None;
    let (mut words, mut before) = (Vec::new(), 0);
    for token in sentence.split_whitespace() {
        let quoted = token.trim_matches(|c: char| "*_()[],;.".contains(c));
        if quoted.len() > 2 && quoted.starts_with('`') && quoted.ends_with('`') {
            if let Some(p) = path_token(quoted) {
                if path.is_none() {
                    path = Some(p);
                    before = words.len();
                }
                continue;
            }
        }
        // A hyphenated word is one word: "as a command-line argument" says neither "command" nor "line".
        let split = token.split(|c: char| !c.is_ascii_alphabetic() && c != '-');
        words.extend(split.map(|w| w.trim_matches('-').to_ascii_lowercase()));
    }
    let path = path?;
    let has = |words: &[String], list: &[&str]| words.iter().any(|w| list.contains(&w.as_str()));
    let doubtful = has(&words, PART_WORDS)
        || has(&words, RUN_VERBS)
        || has(&words[..before], MEMBER_WORDS)
        || command_line(&sentence.split_whitespace().collect::<Vec<_>>());
    (has(&words, MAKE_WORDS) && !doubtful).then_some(path)
}

/// Whether a block's first non-blank line is indented.
fn starts_indented(body: &[&str]) -> bool {
    body.iter().find(|l| !l.trim().is_empty()).is_some_and(|l| l.starts_with([' ', '\t']))
}

/// Programs a line that is a command starts with, as typed (lowercase).
const RUNNERS: &[&str] = &[
    "python", "python3", "py", "node", "deno", "bun", "ruby", "perl", "php", "bash", "sh", "zsh", "pytest", "go",
    "cargo", "npm", "npx", "java", "make",
];

/// Whether the naming line is a command (`python3 test_x.py`, `$ node a.js`): the block after it is what the
/// command printed (a small model writes the output it expects under the command), not the file.
fn command_line(tokens: &[&str]) -> bool {
    let first = tokens.iter().map(|t| t.trim_matches(|c: char| "`$>*".contains(c))).find(|t| !t.is_empty());
    first.is_some_and(|t| RUNNERS.contains(&t))
}

/// A first body line that is only a comment naming the file: `# x.py`, `// x.js`, `-- x.sql`, optionally
/// with `file:`/`filename:` before the name.
/// The marker must be a comment in the named file's language (a `# notes.md` is a heading, not a name).
fn comment_name(line: &str) -> Option<String> {
    let t = line.trim();
    let (marker, rest) = COMMENTS.iter().find_map(|(m, _)| t.strip_prefix(m).map(|r| (*m, r.trim())))?;
    let rest = ["file:", "filename:", "File:", "Filename:"].iter().find_map(|p| rest.strip_prefix(p)).unwrap_or(rest);
    let mut words = rest.split_whitespace();
    let name = path_token(words.next()?)?;
    let ext = name.rsplit_once('.').map(|(_, e)| e.to_ascii_lowercase()).unwrap_or_default();
    let commented = COMMENTS.iter().any(|(m, exts)| *m == marker && exts.contains(&ext.as_str()));
    (commented && words.next().is_none()).then_some(name)
}

/// Line-comment markers and the extensions whose language has them.
const COMMENTS: &[(&str, &[&str])] = &[
    (
        "//",
        &[
            "js", "mjs", "cjs", "jsx", "ts", "tsx", "mts", "cts", "rs", "go", "c", "h", "cpp", "cc", "cxx", "hpp",
            "hh", "hxx", "java", "kt", "kts", "cs", "swift", "scala", "php", "scss",
        ],
    ),
    ("#", &["py", "pyi", "pyw", "rb", "pl", "pm", "r", "yaml", "yml", "toml", "ini", "cfg", "conf"]),
    ("--", &["sql", "lua"]),
];

/// A block that leaves parts out ("# ... rest of the code unchanged ...", "// ... existing code ..."): an
/// excerpt, not the whole file; written, it would cut the file down to the excerpt.
fn elides(body: &[&str]) -> bool {
    const SAYS: &[&str] =
        &["existing", "rest of", "unchanged", "same as", "remaining", "other code", "previous", "omitted"];
    let dot = |c: char| c == '.' || c == '\u{2026}';
    body.iter().any(|line| {
        let t = line.trim();
        let Some(comment) = ["#", "//", "--", "/*", "<!--"].iter().find_map(|m| t.strip_prefix(m)) else {
            return false;
        };
        let c = comment.to_ascii_lowercase();
        let only_dots = c.trim_matches(|ch: char| dot(ch) || ch.is_whitespace() || "*/->".contains(ch)).is_empty();
        (c.contains("...") || c.contains('\u{2026}')) && (only_dots || SAYS.iter().any(|w| c.contains(w)))
    })
}

/// A token that is a plain relative file path once markup and punctuation around it are stripped:
/// `` `stats.py`: ``, `**x.py**`, `src/a.rs,`. Its extension must be one of [`LANGUAGES`]'.
fn path_token(token: &str) -> Option<String> {
    let t = token.trim_matches(|c: char| "`*'\"()[]<>:;,!?".contains(c));
    let t = t.trim_end_matches('.');
    let t = t.trim_matches(|c: char| "`*'\"".contains(c));
    let t = t.strip_prefix("./").unwrap_or(t);
    if t.is_empty() || !t.chars().all(|c| c.is_ascii_alphanumeric() || "._-/".contains(c)) {
        return None;
    }
    if t.starts_with('/') || t.ends_with('/') || t.contains("//") {
        return None;
    }
    if t.split('/').any(|part| part == ".." || part == "." || part.is_empty()) {
        return None;
    }
    let file = t.rsplit('/').next()?;
    let (stem, ext) = file.rsplit_once('.')?;
    if stem.is_empty() || !known_extension(&ext.to_ascii_lowercase()) {
        return None;
    }
    Some(t.to_string())
}

fn known_extension(ext: &str) -> bool {
    LANGUAGES.iter().any(|(_, exts)| exts.contains(&ext))
}

/// Whether a block tagged `tag` may be the file `path`: no tag, the tag's language writes that extension, a
/// plain-text tag for a plain-text file, or the tag is the extension itself.
fn fits(tag: &str, path: &str) -> bool {
    let ext = path.rsplit_once('.').map(|(_, e)| e.to_ascii_lowercase()).unwrap_or_default();
    if tag.is_empty() || tag == ext {
        return true;
    }
    if PLAIN.contains(&tag) {
        return PROSE.contains(&ext.as_str());
    }
    LANGUAGES.iter().any(|(tags, exts)| tags.contains(&tag) && exts.contains(&ext.as_str()))
}

/// An untagged block whose first line is a command (`python3 test_x.py`, `$ pytest`, `>>> f(1)`): something
/// to run, not a file.
fn looks_like_commands(body: &[&str]) -> bool {
    let Some(first) = body.iter().find(|l| !l.trim().is_empty()) else { return true };
    let word = first.split_whitespace().next().unwrap_or("");
    [
        "$", ">>>", "python", "python3", "pytest", "node", "npm", "npx", "cargo", "go", "pip", "pip3", "cd", "ls",
        "cat", "bash", "sh", "make", "gcc", "cc", "java", "javac", "ruby", "deno", "uv",
    ]
    .contains(&word)
        || first.trim_start().starts_with('$')
}

#[cfg(test)]
mod tests {
    use super::*;

    fn one(text: &str) -> Option<(String, String)> {
        let e = file_edits(text);
        assert!(e.len() <= 1, "{e:?}");
        e.into_iter().next().map(|e| (e.path, e.content))
    }

    #[test]
    fn an_excerpt_that_leaves_code_out_is_no_edit() {
        assert_eq!(one("calc.py:\n```python\n# ... existing code ...\ndef add(a, b):\n    return a + b\n```"), None);
        assert_eq!(one("a.js:\n```js\nlet a = 1;\n// ...\n```"), None);
        assert_eq!(one("a.rs:\n```rust\nfn a() {}\n/* rest of the file unchanged... */\n```"), None);
        // Python's Ellipsis and a comment that merely has dots are code.
        let stub = "class P(Protocol):\n    def f(self) -> int: ...\n    ...\n# see docs... for more\n";
        assert_eq!(one(&format!("p.py:\n```python\n{stub}```")), Some(("p.py".into(), stub.into())));
    }

    #[test]
    fn named_by_the_line_before_in_its_usual_forms() {
        for intro in [
            "Here's the corrected `stats.py`:",
            "stats.py",
            "**stats.py**",
            "`stats.py`:",
            "### stats.py",
            "Save this as stats.py.",
            "1. `stats.py`",
            "Here is the updated stats.py file:",
        ] {
            let text = format!("Sure.\n\n{intro}\n```python\ndef f():\n    return 1\n```\nDone.");
            assert_eq!(one(&text), Some(("stats.py".into(), "def f():\n    return 1\n".into())), "{intro}");
        }
    }

    #[test]
    fn a_command_line_before_a_block_names_no_file() {
        // Qwen2.5-Coder-1.5B's draft: the output it expected, under the command, overwrote the test it named.
        let output = "Ran 2 tests in 0.000s\n\nOK";
        for intro in ["python3 test_pal.py", "`python3 test_pal.py`", "$ python3 test_pal.py", "$ node a.js:"] {
            assert_eq!(one(&format!("{intro}\n```python\n{output}\n```")), None, "{intro}");
        }
        // A sentence that begins with the language's name still names its file.
        assert_eq!(one("Python file pal.py:\n```python\nx = 1\n```"), Some(("pal.py".into(), "x = 1\n".into())));
    }

    #[test]
    fn the_last_path_on_the_line_names_the_block() {
        let text = "I changed calc.py; here is `pkg/util.py`:\n```py\nx = 1\n```";
        assert_eq!(one(text), Some(("pkg/util.py".into(), "x = 1\n".into())));
        let text = "Here is the updated calc.py file:\n```python\nx = 1\n```";
        assert_eq!(one(text), Some(("calc.py".into(), "x = 1\n".into())));
        // A path mid-sentence: the block that follows is likely a usage example, not the file.
        assert_eq!(one("I fixed the bug in calc.py. Test it with:\n```python\nprint(add(1, 2))\n```"), None);
    }

    #[test]
    fn a_line_that_makes_or_changes_a_file_named_mid_sentence_names_the_block() {
        // Qwen2.5-Coder-1.5B's three_files drafts: both files were lost, the run changed nothing.
        let fmt = "def price(amount, currency):\n    return f'{amount:.2f} {currency}'";
        for intro in [
            "1. Modify `fmt.py` to include the currency in the output:",
            "2. Modify `fmt.py` to pass the currency to the `price` function:",
            "Create a new file `fmt.py` with the following content:",
            "The file `fmt.py` is created with the following content:",
            "**Update `fmt.py`** so that it takes a currency:",
            "Sure. Here it is, changed in `fmt.py` as asked:",
            "2. Modify `fmt.py` to accept the currency as a command-line argument and use it in the `price` function:",
        ] {
            let text = format!("{intro}\n```python\n{fmt}\n```");
            assert_eq!(one(&text), Some(("fmt.py".into(), format!("{fmt}\n"))), "{intro}");
        }
        // The first file named is the one changed; a comment naming the file wins.
        let text = "2. Modify `main.py` to pass the currency to the `fmt.py` function:\n```python\nx = 1\n```";
        assert_eq!(one(text), Some(("main.py".into(), "x = 1\n".into())));
        let text = "Modify `main.py` to pass the currency:\n```python\n# app.py\nx = 1\n```";
        assert_eq!(one(text).map(|e| e.0), Some("app.py".into()));
    }

    #[test]
    fn a_file_named_mid_sentence_with_doubt_names_nothing() {
        for intro in [
            // Not introduced: no colon, no verb of making or changing, no backticks.
            "1. Modify `fmt.py` to include the currency.",
            "Here is how `fmt.py` looks:",
            "1. Modify fmt.py to include the currency:",
            // A part of the file, an example, something to run.
            "In `fmt.py`, change the line to:",
            "Add the following to `fmt.py` after the import:",
            "Change the function in `fmt.py` to:",
            "Replace the body of `fmt.py` with:",
            "An example that shows `fmt.py` updated for it:",
            "Now, when you run the modified `fmt.py`, it will print:",
            "I fixed `fmt.py`. Test it with:",
            "The modified `fmt.py`, executed, gives:",
            "4. Check the `fmt.py` file to verify that the count was written correctly:",
            "I changed `fmt.py`. Here is the output:",
        ] {
            let text = format!("{intro}\n```python\nx = 1\n```");
            assert_eq!(one(&text), None, "{intro}");
        }
        // A block whose first line is indented is a piece from inside a function.
        assert_eq!(one("Modify `fmt.py` to take a currency:\n```python\n    return x\n```"), None);
        assert_eq!(one("Modify `fmt.py` so:\n```python\n\n\treturn x\n```"), None);
    }

    #[test]
    fn a_first_line_comment_names_an_unnamed_block() {
        assert_eq!(
            one("Fixed:\n```python\n# calc.py\nx = 1\n```"),
            Some(("calc.py".into(), "# calc.py\nx = 1\n".into()))
        );
        assert_eq!(one("```js\n// src/a.js\nlet a;\n```"), Some(("src/a.js".into(), "// src/a.js\nlet a;\n".into())));
        // A comment that says more than a name is code, not a name; a `#` line in Markdown is a heading.
        assert_eq!(one("```python\n# compute calc.py totals\nx = 1\n```"), None);
        assert_eq!(one("```markdown\n# notes.md\ntext\n```"), None);
        assert_eq!(one("```python\n// calc.py\nx = 1\n```"), None);
    }

    #[test]
    fn shell_output_and_diff_blocks_are_never_edits() {
        for tag in ["bash", "sh", "shell", "console", "zsh", "diff", "patch"] {
            assert_eq!(one(&format!("test_x.py:\n```{tag}\npython3 test_x.py\n```")), None, "{tag}");
        }
        assert_eq!(one("Run test_x.py:\n```bash\npython3 test_x.py\n```"), None);
        assert_eq!(one("Run test_x.py:\n```\npython3 test_x.py\n```"), None);
        assert_eq!(one("test_x.py:\n```\npython3 test_x.py\n```"), None);
        assert_eq!(one("Output of calc.py:\n```python\n3\n```"), None);
        // A text block is a file only when the name is plain text.
        assert_eq!(one("calc.py:\n```text\n3\n```"), None);
        assert_eq!(one("notes.txt:\n```text\nhello\n```"), Some(("notes.txt".into(), "hello\n".into())));
    }

    #[test]
    fn a_drafts_shell_blocks_are_its_commands_in_order_once_each() {
        let text = "calc.py\n```python\nx = 1\n```\nRun it:\n```bash\npython3 calc.py\n```\nOutput:\n```\n1\n```\n\
                    ```sh\nsed -i 's/a/b/g' *.py\ngrep -c b x.py\n```\nAgain:\n```shell\npython3 calc.py\n```";
        assert_eq!(commands(text), vec!["python3 calc.py", "sed -i 's/a/b/g' *.py\ngrep -c b x.py"]);
        // A session: the prompted lines are the commands, the rest their output.
        assert_eq!(commands("```console\n$ python3 t.py\nok\n$ echo done\ndone\n```"), vec!["python3 t.py\necho done"]);
        // Comments alone, an empty block, a python block, an unclosed block: nothing to run.
        for text in ["```bash\n# run it\n```", "```bash\n\n```", "```python\nprint(1)\n```", "```bash\nrm -rf x"] {
            assert!(commands(text).is_empty(), "{text}");
        }
        // Never files, whatever names them.
        assert!(file_edits("x.sh\n```bash\necho hi\n```").is_empty());
    }

    #[test]
    fn the_block_a_cut_text_ends_inside_names_its_file_or_says_it_is_a_command() {
        let done = "pal.py\n```python\nx = 1\n```\n";
        assert_eq!(unclosed(done), None);
        assert_eq!(unclosed(&format!("{done}Now run:\n")), None, "cut in prose: every block is whole");
        let cut = |rest: &str| unclosed(&format!("{done}{rest}"));
        let file = |p: &str| Some(Unclosed { path: Some(p.into()), shell: false, repeated: None });
        assert_eq!(cut("And `test_pal.py`:\n```python\nimport pal\ndef te"), file("test_pal.py"));
        assert_eq!(cut("```python\n# test_pal.py\nimport pal"), file("test_pal.py"));
        assert_eq!(cut("pal.py\n```"), file("pal.py"), "cut right after its fence");
        assert_eq!(cut("```python\nimport pal"), Some(Unclosed { path: None, shell: false, repeated: None }));
        assert_eq!(cut("Run it:\n```bash\npython3 pal"), Some(Unclosed { path: None, shell: true, repeated: None }));
        // A block that repeats a line until the cut says which, and how often; closing brackets do not count.
        let again = "    assert is_palindrome('abba')\n".repeat(5);
        let repeated = cut(&format!("test_pal.py\n```python\n)\n)\n)\n)\n)\n{again}    assert is_pal"));
        assert_eq!(repeated.and_then(|u| u.repeated), Some(("assert is_palindrome('abba')".into(), 5)));
        let thrice = "x = f()\n".repeat(3);
        assert_eq!(cut(&format!("a.py\n```python\n{thrice}")), file("a.py"), "three times is not a repetition");
        // The closed blocks before the cut stay what they were.
        assert_eq!(file_edits(&format!("{done}test_pal.py\n```python\nimport pal")).len(), 1);
    }

    #[test]
    fn an_echo_of_the_drafts_note_is_cut_out_with_its_example() {
        let fixed = "calc.py\n```python\nx = 1\n```";
        assert_eq!(without_note(&format!("{fixed}\n\n{DRAFT_NOTE}")).as_deref(), Some(fixed));
        assert_eq!(without_note(&format!("{DRAFT_NOTE}\n{fixed}\n{DRAFT_NOTE}")).as_deref(), Some(fixed));
        // Cut off before its end: the rest of the text is the echo.
        assert_eq!(without_note(&format!("{fixed}\n{}", &DRAFT_NOTE[..120])).as_deref(), Some(fixed));
        assert_eq!(without_note(fixed), None);
        // The example alone, after the model's own file, is cut too; a task that names its file keeps it.
        assert!(DRAFT_NOTE.contains(NOTE_EXAMPLE));
        assert_eq!(
            without_example(&format!("{fixed}\n\n{NOTE_EXAMPLE}\n\nDone.")).as_deref(),
            Some(&*format!("{fixed}\n\n\n\nDone."))
        );
        assert_eq!(
            without_example(&format!("{fixed}\r\n\r\n{}", NOTE_EXAMPLE.replace('\n', "\r\n"))).as_deref(),
            Some(fixed)
        );
        assert_eq!(without_example(fixed), None);
        assert_eq!(without_example("hello.py\n```python\nprint('hi there')\n```"), None);
        assert!(!names_example_file(&format!("Add a --shout flag to greet.py\n\n{DRAFT_NOTE}")));
        assert!(names_example_file(&format!("Create hello.py that prints hi\n\n{DRAFT_NOTE}")));
        assert_eq!(without_note(&format!("{fixed}\n{DRAFT_NOTE}")).map(|t| file_edits(&t).len()), Some(1));
        assert_eq!(file_edits(&format!("{fixed}\n{DRAFT_NOTE}")).len(), 2, "the echo's example reads as a file");
    }

    #[test]
    fn a_tag_that_contradicts_the_extension_is_no_edit() {
        assert_eq!(one("x.js:\n```python\nx = 1\n```"), None);
        assert_eq!(one("x.py:\n```rust\nfn main() {}\n```"), None);
        assert_eq!(one("x.py:\n```weird\nx\n```"), None);
        assert_eq!(one("x.ts:\n```typescript\nlet x = 1;\n```"), Some(("x.ts".into(), "let x = 1;\n".into())));
    }

    #[test]
    fn paths_outside_the_workspace_or_unknown_kinds_are_no_edits() {
        for name in ["/etc/x.py", "../x.py", "a/../../x.py", "~/x.py", "C:\\x.py", "Makefile", "e.g.", "1.2"] {
            assert_eq!(one(&format!("{name}\n```\nx = 1\n```")), None, "{name}");
        }
        assert_eq!(one("./src/x.py\n```\nx = 1\n```"), Some(("src/x.py".into(), "x = 1\n".into())));
        assert_eq!(one("**pkg/__init__.py**\n```\nx = 1\n```"), Some(("pkg/__init__.py".into(), "x = 1\n".into())));
    }

    #[test]
    fn unnamed_unclosed_and_empty_blocks_are_no_edits() {
        assert_eq!(one("Here is the fix:\n```python\nx = 1\n```"), None);
        assert_eq!(one("calc.py:\n```python\nx = 1\n"), None);
        assert_eq!(one("calc.py:\n```python\n\n```"), None);
        // The closing fence of one block names nothing for the next.
        assert_eq!(one("a.py\n```python\nx = 1\n```\n```python\ny = 2\n```").map(|e| e.0), Some("a.py".into()));
    }

    #[test]
    fn two_files_both_and_a_file_named_twice_once_by_its_last_block() {
        let text = "a.py:\n```python\nv1\n```\nb.py:\n```python\nb\n```\nActually a.py:\n```python\nv2\n```";
        let e = file_edits(text);
        let got: Vec<(&str, &str)> = e.iter().map(|e| (e.path.as_str(), e.content.as_str())).collect();
        assert_eq!(got, vec![("b.py", "b\n"), ("a.py", "v2\n")]);
    }

    #[test]
    fn indented_and_longer_fences_keep_their_body() {
        let text = "1. `calc.py`:\n   ```python\n   def f():\n       return '```'\n   ```\n";
        assert_eq!(one(text), Some(("calc.py".into(), "def f():\n    return '```'\n".into())));
        // Under a list item, as a small model wrote its draft (the closing fence as deep as the opening one).
        let text = "1. **Create the `pal.py` file**:\n   - Add the following code to the `pal.py` file:\n     ```python\n\
                    \x20    def f():\n         return 1\n     ```\n";
        assert_eq!(one(text), Some(("pal.py".into(), "def f():\n    return 1\n".into())));
        // Deeper than a list's: an indented code block's text, no fence.
        assert_eq!(one("calc.py:\n          ```python\n          x = 1\n          ```\n"), None);
        let text = "README.md\n````markdown\n# T\n```sh\nls\n```\n````";
        assert_eq!(one(text), Some(("README.md".into(), "# T\n```sh\nls\n```\n".into())));
    }
}
