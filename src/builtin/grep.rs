//! The `grep` tool: a regular expression over the files under a path in the workspace, with ripgrep's
//! semantics, built on ripgrep's own crates: `ignore` walks the tree (`.gitignore`, `.ignore` and
//! `.git/info/exclude` respected, hidden files and folders skipped, symlinks not followed), `grep-regex`
//! matches and `grep-searcher` searches (binary files — a NUL byte — skipped, context lines).
//!
//! Confinement: the start path goes through [`Workspace::resolve`]; every file is then opened relative to
//! a `cap-std` handle on the workspace root, so a symlink swapped in during the walk cannot lead a read
//! out of the workspace. Symlinks met on the walk are not followed at all (like `rg` without `-L`).
//!
//! Must never: write anything, hold more than a bounded amount of output in memory, or keep searching more
//! than one file's worth after the cancel token fires (checked per file and per match).

use super::workspace::Workspace;
use super::{Args, ToolReply};
use crate::cancel::CancelToken;
use cap_std::fs::Dir;
use globset::{GlobBuilder, GlobMatcher};
use grep_regex::RegexMatcherBuilder;
use grep_searcher::{BinaryDetection, Searcher, SearcherBuilder, Sink, SinkContext, SinkContextKind, SinkMatch};
use ignore::{WalkBuilder, WalkState};
use serde_json::Value;
use std::io;
use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::time::SystemTime;

/// Characters of output `grep` returns; past it the rest is counted and a note says how much was left out.
pub const GREP_OUTPUT_CAP_CHARS: usize = 20_000;
/// Characters of one matching line shown; longer lines (minified files) are cut with a marker.
const MAX_LINE_CHARS: usize = 500;
/// Bytes of formatted lines kept while searching (output is sorted afterwards, then capped).
const KEEP_BYTES: usize = 4 * GREP_OUTPUT_CAP_CHARS * 4;

/// What `grep` prints.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Mode {
    Content,
    Files,
    Count,
}

/// The files the walker reads in each folder it enters (and in each parent of the start): `.gitignore`,
/// `.ignore`, `.git/info/exclude`.
const IGNORE_FILES: [&str; 3] = [".gitignore", ".ignore", ".git/info/exclude"];

/// Whether the walker may read the ignore files of `dir`: each one is absent or a regular file. The
/// `ignore` crate opens them blocking, so a FIFO there would hang the tool (and the run with it).
fn ignore_files_regular(dir: &Path) -> bool {
    IGNORE_FILES.iter().all(|name| std::fs::metadata(dir.join(name)).map_or(true, |m| m.is_file()))
}

/// The walker the search tools share: ripgrep's defaults (ignore files honoured even outside a git
/// repository, hidden entries skipped, symlinks not followed). A folder whose ignore file is not a regular
/// file is not entered; a start below such a folder is refused (the walker reads every parent's files).
pub(super) fn walker(start: &Path) -> Result<WalkBuilder, String> {
    if let Some(dir) = start.ancestors().find(|d| !ignore_files_regular(d)) {
        return Err(format!(
            "an ignore file in {} ({}) is not a regular file (a pipe or device), so it cannot be read; not \
             searching",
            dir.display(),
            IGNORE_FILES.join(", ")
        ));
    }
    let mut b = WalkBuilder::new(start);
    b.filter_entry(|e| !e.file_type().is_some_and(|t| t.is_dir()) || ignore_files_regular(e.path()));
    walk_like_search(&mut b);
    Ok(b)
}

/// What `grep` and `glob` walk: hidden files skipped, the workspace's ignore files (not the user's global
/// one) obeyed with or without git, symlinks not followed. The permission rules' check of a search's tree
/// (`rules::paths`) walks the same way.
pub(crate) fn walk_like_search(b: &mut WalkBuilder) {
    b.hidden(true)
        .ignore(true)
        .git_ignore(true)
        .git_exclude(true)
        .git_global(false)
        .require_git(false)
        .parents(true)
        .follow_links(false);
}

/// A glob filter on file names (a pattern without `/`) or on paths relative to the searched folder.
pub(super) struct NameFilter {
    matcher: GlobMatcher,
    whole_path: bool,
}

impl NameFilter {
    pub(super) fn new(tool: &str, glob: &str) -> Result<NameFilter, String> {
        let whole_path = glob.contains('/');
        let matcher = GlobBuilder::new(glob)
            .literal_separator(true)
            .build()
            .map_err(|e| format!("{tool}: invalid glob {glob:?}: {e}"))?
            .compile_matcher();
        Ok(NameFilter { matcher, whole_path })
    }

    pub(super) fn matches(&self, rel: &Path) -> bool {
        if self.whole_path {
            self.matcher.is_match(rel)
        } else {
            rel.file_name().is_some_and(|n| self.matcher.is_match(Path::new(n)))
        }
    }
}

/// The start of a search: the resolved path, its path relative to the root, and a handle on the root.
pub(super) fn open_start(ws: &Workspace, path: &str) -> Result<(PathBuf, Dir), String> {
    let real = ws.resolve(path)?;
    if !real.exists() {
        return Err(format!("path not found: '{path}' (give a folder or file inside the workspace)"));
    }
    let root = Dir::open_ambient_dir(ws.root(), cap_std::ambient_authority())
        .map_err(|e| format!("cannot open the workspace {}: {e}", ws.root().display()))?;
    Ok((real, root))
}

/// Open `rel` for reading beneath `root`; `None` unless it is a regular file reachable without leaving.
fn open_beneath(root: &Dir, rel: &Path) -> Option<std::fs::File> {
    let rel = if rel.as_os_str().is_empty() { Path::new(".") } else { rel };
    super::files::open_regular_in(root, rel).ok().map(cap_std::fs::File::into_std)
}

/// Search results of one file.
struct FileHits {
    shown: String,
    lines: Vec<String>,
    count: u64,
    /// Matching lines counted but not kept (the memory bound was reached).
    dropped: u64,
    modified: Option<SystemTime>,
}

/// Collects one file's matching (and context) lines.
struct Collect<'a> {
    shown: &'a str,
    mode: Mode,
    number: bool,
    lines: Vec<String>,
    count: u64,
    dropped: u64,
    cancel: &'a CancelToken,
    kept: &'a AtomicUsize,
}

impl Collect<'_> {
    fn push(&mut self, line_number: Option<u64>, sep: char, bytes: &[u8]) {
        if self.mode != Mode::Content {
            return;
        }
        if self.kept.load(Ordering::Relaxed) > KEEP_BYTES {
            // Counted, not kept: the note says how much is left out.
            self.dropped += u64::from(sep == ':');
            return;
        }
        let text = String::from_utf8_lossy(bytes);
        let text = text.trim_end_matches(['\n', '\r']);
        let mut line = String::with_capacity(self.shown.len() + text.len().min(MAX_LINE_CHARS * 4) + 12);
        line.push_str(self.shown);
        line.push(sep);
        if let (true, Some(n)) = (self.number, line_number) {
            line.push_str(&n.to_string());
            line.push(sep);
        }
        let chars = text.chars().count();
        if chars > MAX_LINE_CHARS {
            line.extend(text.chars().take(MAX_LINE_CHARS));
            line.push_str(&format!(" … [line cut: {chars} characters]"));
        } else {
            line.push_str(text);
        }
        self.kept.fetch_add(line.len(), Ordering::Relaxed);
        self.lines.push(line);
    }
}

impl Sink for Collect<'_> {
    type Error = io::Error;

    fn matched(&mut self, _: &Searcher, m: &SinkMatch<'_>) -> Result<bool, io::Error> {
        if self.cancel.is_cancelled() {
            return Ok(false);
        }
        self.count += 1;
        self.push(m.line_number(), ':', m.bytes());
        // File names only: one match settles the file (like `rg -l`).
        Ok(self.mode != Mode::Files)
    }

    fn context(&mut self, _: &Searcher, c: &SinkContext<'_>) -> Result<bool, io::Error> {
        if matches!(c.kind(), SinkContextKind::Other) {
            return Ok(true);
        }
        self.push(c.line_number(), '-', c.bytes());
        Ok(!self.cancel.is_cancelled())
    }

    fn context_break(&mut self, _: &Searcher) -> Result<bool, io::Error> {
        if self.mode == Mode::Content && self.kept.load(Ordering::Relaxed) <= KEEP_BYTES {
            self.lines.push("--".to_string());
        }
        Ok(true)
    }
}

fn context_arg(args: &Args<'_>, key: &str) -> Result<Option<usize>, String> {
    match args.opt_int(key)? {
        None => Ok(None),
        Some(n) if n < 0 => Err(format!("grep parameter '{key}' must be a number of lines >= 0, got {n}")),
        Some(n) => Ok(Some(n.min(1000) as usize)),
    }
}

/// `grep(pattern, path?, glob?, type?, output_mode?, -i?, -n?, -A?, -B?, -C?, head_limit?)`.
pub(crate) fn grep(ws: &Workspace, input: &Value, cancel: &CancelToken) -> ToolReply {
    let args = Args::new(
        "grep",
        input,
        &["pattern", "path", "glob", "type", "output_mode", "-i", "-n", "-A", "-B", "-C", "head_limit"],
    )?;
    let pattern = args.string("pattern")?;
    if pattern.is_empty() {
        return Err("grep pattern is empty: give a regular expression".to_string());
    }
    let path = args.opt_string("path")?.unwrap_or(".");
    let mode = match args.opt_string("output_mode")?.unwrap_or("files_with_matches") {
        "content" => Mode::Content,
        "files_with_matches" => Mode::Files,
        "count" => Mode::Count,
        other => {
            return Err(format!(
                "grep output_mode must be \"content\", \"files_with_matches\" or \"count\", got {other:?}"
            ));
        }
    };
    let ignore_case = args.opt_bool("-i")?.unwrap_or(false);
    let number = args.opt_bool("-n")?.unwrap_or(true);
    let both = context_arg(&args, "-C")?;
    let after = context_arg(&args, "-A")?.or(both).unwrap_or(0);
    let before = context_arg(&args, "-B")?.or(both).unwrap_or(0);
    let head_limit = match args.opt_int("head_limit")? {
        None | Some(0) => None,
        Some(n) if n < 0 => return Err(format!("grep head_limit must be >= 0, got {n}")),
        Some(n) => Some(n as usize),
    };
    let filter = args.opt_string("glob")?.map(|g| NameFilter::new("grep", g)).transpose()?;
    let matcher = RegexMatcherBuilder::new()
        .case_insensitive(ignore_case)
        .line_terminator(Some(b'\n'))
        .build(pattern)
        .map_err(|e| format!("grep: invalid regular expression {pattern:?}: {e}"))?;
    let types = match args.opt_string("type")? {
        None => None,
        Some(name) => {
            let mut b = ignore::types::TypesBuilder::new();
            b.add_defaults();
            b.select(name);
            let built = b.build().ok().filter(|_| b.definitions().iter().any(|d| d.name() == name));
            let Some(types) = built else {
                return Err(format!(
                    "grep: unknown file type {name:?} (ripgrep's names, e.g. \"py\", \"rust\", \"js\", \"ts\", \"go\"); \
                     or use glob"
                ));
            };
            Some(types)
        }
    };
    let (start, root) = open_start(ws, path)?;

    let results: Mutex<Vec<FileHits>> = Mutex::new(Vec::new());
    let kept = AtomicUsize::new(0);
    let binary_skipped = AtomicU64::new(0);
    let stopped = AtomicBool::new(false);
    let threads = std::thread::available_parallelism().map_or(2, |n| n.get()).min(8);
    let mut walk = walker(&start)?;
    if let Some(types) = types {
        walk.types(types);
    }
    walk.threads(threads).build_parallel().run(|| {
        let mut searcher = SearcherBuilder::new()
            .binary_detection(BinaryDetection::quit(0))
            .line_number(true)
            .before_context(if mode == Mode::Content { before } else { 0 })
            .after_context(if mode == Mode::Content { after } else { 0 })
            .build();
        let matcher = matcher.clone();
        let (results, kept, binary_skipped, stopped, root, filter, start) =
            (&results, &kept, &binary_skipped, &stopped, &root, &filter, &start);
        Box::new(move |entry| {
            if cancel.is_cancelled() {
                stopped.store(true, Ordering::Relaxed);
                return WalkState::Quit;
            }
            let Ok(entry) = entry else { return WalkState::Continue };
            if !entry.file_type().is_some_and(|t| t.is_file()) {
                return WalkState::Continue; // folders are walked; symlinks, devices, sockets are not read
            }
            let Ok(rel) = entry.path().strip_prefix(ws.root()) else { return WalkState::Continue };
            if let Some(filter) = filter {
                let below = entry.path().strip_prefix(start).unwrap_or(rel);
                let below = if below.as_os_str().is_empty() { rel } else { below };
                if !filter.matches(below) {
                    return WalkState::Continue;
                }
            }
            let Some(file) = open_beneath(root, rel) else { return WalkState::Continue };
            let shown = rel.display().to_string();
            let mut sink =
                Collect { shown: &shown, mode, number, lines: Vec::new(), count: 0, dropped: 0, cancel, kept };
            let mut binary = false;
            let reader = CancellableRead { file, cancel };
            let outcome =
                searcher.search_reader(&matcher, &reader, SinkWithBinary { inner: &mut sink, binary: &mut binary });
            if outcome.is_err() {
                return WalkState::Continue;
            }
            if binary {
                binary_skipped.fetch_add(1, Ordering::Relaxed);
                return WalkState::Continue;
            }
            let (count, dropped, lines) = (sink.count, sink.dropped, sink.lines);
            if count > 0 {
                let modified =
                    if mode == Mode::Files { reader.file.metadata().and_then(|m| m.modified()).ok() } else { None };
                let hits = FileHits { shown, lines, count, dropped, modified };
                results.lock().unwrap_or_else(|e| e.into_inner()).push(hits);
            }
            WalkState::Continue
        })
    });
    if cancel.is_cancelled() || stopped.load(Ordering::Relaxed) {
        return Err("cancelled: grep was stopped".to_string());
    }
    let mut hits = results.into_inner().unwrap_or_else(|e| e.into_inner());
    let binary_skipped = binary_skipped.load(Ordering::Relaxed);
    Ok(render(&mut hits, mode, before + after > 0, head_limit, binary_skipped, pattern))
}

/// A file read that fails once the cancel token fires, so a search stops within one buffer (64 KB).
struct CancellableRead<'a> {
    file: std::fs::File,
    cancel: &'a CancelToken,
}

impl io::Read for &CancellableRead<'_> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        if self.cancel.is_cancelled() {
            return Err(io::Error::other("cancelled"));
        }
        (&self.file).read(buf)
    }
}

/// Forwards to the collecting sink and notes whether the file turned out to be binary.
struct SinkWithBinary<'a, 'b> {
    inner: &'a mut Collect<'b>,
    binary: &'a mut bool,
}

impl Sink for SinkWithBinary<'_, '_> {
    type Error = io::Error;

    fn matched(&mut self, s: &Searcher, m: &SinkMatch<'_>) -> Result<bool, io::Error> {
        self.inner.matched(s, m)
    }

    fn context(&mut self, s: &Searcher, c: &SinkContext<'_>) -> Result<bool, io::Error> {
        self.inner.context(s, c)
    }

    fn context_break(&mut self, s: &Searcher) -> Result<bool, io::Error> {
        self.inner.context_break(s)
    }

    fn binary_data(&mut self, _: &Searcher, _: u64) -> Result<bool, io::Error> {
        *self.binary = true;
        Ok(false)
    }
}

/// The reply: entries sorted (paths; newest first for file names), cut at `head_limit` and at the cap.
fn render(
    hits: &mut [FileHits],
    mode: Mode,
    context: bool,
    head_limit: Option<usize>,
    binary_skipped: u64,
    pattern: &str,
) -> String {
    let mut entries: Vec<String> = Vec::new();
    let total_matches: u64 = hits.iter().map(|h| h.count).sum();
    match mode {
        Mode::Files => {
            hits.sort_by(|a, b| b.modified.cmp(&a.modified).then_with(|| a.shown.cmp(&b.shown)));
            entries.extend(hits.iter().map(|h| h.shown.clone()));
        }
        Mode::Count => {
            hits.sort_by(|a, b| a.shown.cmp(&b.shown));
            entries.extend(hits.iter().map(|h| format!("{}:{}", h.shown, h.count)));
        }
        Mode::Content => {
            hits.sort_by(|a, b| a.shown.cmp(&b.shown));
            for (i, h) in hits.iter_mut().enumerate() {
                if context && i > 0 && !h.lines.is_empty() {
                    entries.push("--".to_string());
                }
                entries.append(&mut h.lines);
            }
        }
    }
    let notes_binary = if binary_skipped > 0 {
        format!("\n[{binary_skipped} binary file{} skipped]", if binary_skipped == 1 { "" } else { "s" })
    } else {
        String::new()
    };
    if hits.is_empty() {
        return format!("No matches for {pattern:?}.{notes_binary}");
    }
    let available = entries.len();
    let limit = head_limit.unwrap_or(usize::MAX);
    let mut out = String::new();
    let mut shown = 0usize;
    let mut chars = 0usize;
    for e in &entries {
        if shown >= limit {
            break;
        }
        let n = e.chars().count() + 1;
        if chars + n > GREP_OUTPUT_CAP_CHARS && shown > 0 {
            break;
        }
        out.push_str(e);
        out.push('\n');
        chars += n;
        shown += 1;
    }
    let kind = match mode {
        Mode::Files => "file names",
        Mode::Count => "counts",
        Mode::Content => "lines",
    };
    // Lines counted but not kept while searching (the memory bound) are left out too.
    let lost: u64 = hits.iter().map(|h| h.dropped).sum();
    if shown < available || lost > 0 {
        let left = (available - shown) as u64 + lost;
        let why = if shown >= limit {
            format!("head_limit {limit}")
        } else {
            format!("the {GREP_OUTPUT_CAP_CHARS}-character cap")
        };
        out.push_str(&format!(
            "[{left} more {kind} left out ({why}); {total_matches} matching lines in {} files in all: narrow \
             the pattern, path or glob, or use output_mode \"files_with_matches\"/\"count\"]",
            hits.len()
        ));
    } else {
        let trimmed = out.trim_end_matches('\n').len();
        out.truncate(trimmed);
    }
    out.push_str(&notes_binary);
    out
}
