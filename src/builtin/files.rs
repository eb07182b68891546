//! The file tools: `read_file`, `write_file` and `edit_file`.
//!
//! Every path is checked by [`Workspace::resolve`] (for a message the model can act on) and then opened
//! relative to a `cap-std` directory handle on the workspace root, never by its absolute path: each step
//! of the lookup stays beneath the root, so a folder swapped for a symlink between the check and the use
//! is refused, not followed. The atomic replace (a temporary file in the same folder, fsync, rename) works
//! on a handle to the parent folder too. A file with more than one hard link, or without write
//! permission, is not written: the other names would change too, or the user marked it read-only.
//! Every file is opened non-blocking and checked on the handle to be a regular file: a FIFO, device or
//! socket is refused with an `is_error` result, never waited on.
//!
//! `read_file` streams the file, so a file of any size can be paged through with `offset`/`limit` in
//! bounded memory; it checks the cancel token every 64 KB and stops after [`MAX_SCAN_BYTES`]. Files up to
//! [`FULL_CHECK_BYTES`] are checked whole for UTF-8; larger ones only in their first 8 KB (for NUL bytes)
//! and in the lines returned. `edit_file` loads the file, so it refuses files over [`MAX_EDIT_BYTES`];
//! its not-found diagnostics do bounded work.

use super::workspace::Workspace;
use super::{Args, ToolReply, numbered};
use crate::cancel::CancelToken;
use cap_std::fs::{Dir, MetadataExt, OpenOptions, OpenOptionsExt, Permissions};
use serde_json::Value;
use std::io::{self, BufRead, BufReader, Cursor, Read, Write};
use std::path::{Path, PathBuf};
use std::time::{SystemTime, UNIX_EPOCH};

/// Lines `read_file` returns when no `limit` is given.
pub(crate) const DEFAULT_READ_LIMIT: u64 = 2000;
/// Characters of one line `read_file` shows before cutting it.
pub(crate) const MAX_LINE_CHARS: usize = 2000;
/// Files up to this size are checked whole for UTF-8 by `read_file`.
pub(crate) const FULL_CHECK_BYTES: u64 = 10 * 1024 * 1024;
/// The largest file `edit_file` loads.
pub(crate) const MAX_EDIT_BYTES: u64 = 10 * 1024 * 1024;
/// The most bytes a file tool scans in one call (read_file skipping to `offset`, edit_file searching);
/// past it the tool stops and says so.
pub const MAX_SCAN_BYTES: u64 = 256 * 1024 * 1024;
/// Bytes read at a time by `read_file`; the cancel token is checked after each.
const SCAN_CHUNK: usize = 64 * 1024;
/// Line comparisons `edit_file`'s not-found diagnostics may make before giving up on a hint.
const HINT_BUDGET: usize = 2_000_000;
/// Bytes at the start of a file searched for NUL to tell binary from text.
const BINARY_PROBE_BYTES: u64 = 8 * 1024;
/// Lines of context shown around an edit.
const EDIT_CONTEXT_LINES: usize = 3;
/// A file this small is shown whole, numbered like read_file, when `old_text` matches nothing in it: a model
/// that edited without reading (small models often do) then sees what is there instead of guessing again.
const SHOW_WHOLE_FILE_LINES: usize = 60;
const SHOW_WHOLE_FILE_BYTES: usize = 4_000;
/// Edited regions shown in full in `edit_file`'s reply (the rest are only counted).
const EDIT_REGIONS_SHOWN: usize = 3;

/// `read_file(path, offset?, limit?)`.
pub(crate) fn read_file(ws: &Workspace, input: &Value, cancel: &CancelToken) -> ToolReply {
    read_file_bounded(ws, input, cancel, MAX_SCAN_BYTES)
}

/// [`read_file`] that stops after scanning `max_scan` bytes.
pub(crate) fn read_file_bounded(ws: &Workspace, input: &Value, cancel: &CancelToken, max_scan: u64) -> ToolReply {
    let args = Args::new("read_file", input, &["path", "offset", "limit"])?;
    let path = args.string("path")?;
    // offset 0 is read as 1: models often count from 0, and the answer's line numbers show what was read.
    let offset = match args.opt_int("offset")? {
        None => 1,
        Some(n) if n < 0 => {
            return Err(format!("read_file offset must be a line number >= 1, got {n}"));
        }
        Some(n) => n.max(1) as u64,
    };
    let limit = match args.opt_int("limit")? {
        None => DEFAULT_READ_LIMIT,
        Some(n) if n < 1 => {
            return Err(format!("read_file limit must be a number of lines >= 1, got {n}"));
        }
        Some(n) => n as u64,
    };
    let (root, rel) = open_root(ws, path)?;
    let real = ws.root().join(&rel);
    let (file, meta) = open_regular(&root, ws, path, &rel, &real)?;
    let mut file = file.into_std();
    let mut probe = Vec::new();
    (&mut file).take(BINARY_PROBE_BYTES).read_to_end(&mut probe).map_err(|e| format!("cannot read '{path}': {e}"))?;
    if probe.contains(&0) {
        return Err(binary_message(path, "it has a NUL byte in its first 8 KB"));
    }
    let mut reader = BufReader::with_capacity(SCAN_CHUNK, Cursor::new(probe).chain(file));
    let mut scan = Scan { cancel, scanned: 0, max: max_scan };

    let check_all = meta.len() <= FULL_CHECK_BYTES;
    let last_wanted = offset.saturating_add(limit - 1);
    let mut out = String::new();
    let mut line = Vec::new();
    let mut count: u64 = 0;
    loop {
        let want = count + 1 >= offset && count < last_wanted;
        if count >= last_wanted && !check_all {
            // Past the wanted lines of a large file: count the rest only while the scan budget lasts.
            if scan.scanned >= scan.max {
                break;
            }
        }
        let keep = if want || check_all { MAX_LINE_CHARS * 4 } else { 0 };
        let info = match read_line_capped(&mut reader, &mut line, keep, &mut scan) {
            Ok(Some(info)) => info,
            Ok(None) => break,
            Err(ScanStop::Io(e)) => return Err(format!("cannot read '{path}': {e}")),
            Err(ScanStop::Cancelled) => return Err(format!("cancelled while reading '{path}'")),
            Err(ScanStop::Limit) if want || count >= last_wanted || (count >= offset && !out.is_empty()) => {
                let mut next = count + 1;
                if want {
                    // The wanted line itself is longer than the budget: show its kept start.
                    let text = decode_line(&line, true).unwrap_or("");
                    out.push_str(&format!("{next:>6}\t"));
                    out.extend(text.chars().take(MAX_LINE_CHARS));
                    out.push_str(&format!(" … [line cut: over {} bytes]\n", scan.scanned));
                    next += 1;
                }
                out.push_str(&format!(
                    "[stopped after scanning {} MB of '{path}'; the line count is not known; use offset={} to \
                     continue]",
                    scan.max / (1024 * 1024),
                    next
                ));
                return Ok(out);
            }
            Err(ScanStop::Limit) => {
                return Err(format!(
                    "read_file stopped after scanning {} MB of '{path}' without reaching line {offset} (a \
                     line may be enormous); inspect the file with bash, e.g. `head -c 2000 {path}` or \
                     `split`/`fold`",
                    scan.max / (1024 * 1024)
                ));
            }
        };
        count += 1;
        if !(want || check_all) {
            continue;
        }
        let Some(text) = decode_line(&line, info.cut) else {
            return Err(binary_message(path, &format!("line {count} is not valid UTF-8")));
        };
        if want {
            out.push_str(&format!("{count:>6}\t"));
            if info.chars > MAX_LINE_CHARS as u64 {
                out.extend(text.chars().take(MAX_LINE_CHARS));
                out.push_str(&format!(" … [line cut: {} characters in all]", info.chars));
            } else {
                out.push_str(text);
            }
            out.push('\n');
        }
    }

    if count == 0 {
        return Ok(format!("[{path} is empty]"));
    }
    let counted = if scan.scanned >= scan.max && count >= last_wanted { "at least " } else { "" };
    if offset > count {
        return Err(format!("offset {offset} is past the end of '{path}', which has {count} line{}", plural(count)));
    }
    let last_shown = last_wanted.min(count);
    if last_shown < count || !counted.is_empty() {
        out.push_str(&format!(
            "[lines {offset}-{last_shown} of {counted}{count}; use offset={} to continue]",
            last_shown + 1
        ));
    } else if offset > 1 {
        out.push_str(&format!("[lines {offset}-{last_shown} of {count}; end of file]"));
    }
    Ok(out)
}

/// `write_file(path, content)`.
pub(crate) fn write_file(ws: &Workspace, input: &Value, cancel: &CancelToken) -> ToolReply {
    let args = Args::new("write_file", input, &["path", "content"])?;
    let path = args.string("path")?;
    let content = args.string("content")?;
    let (root, rel) = open_root(ws, path)?;
    let real = ws.root().join(&rel);
    let (parent_rel, name) = split_parent(&rel, path)?;
    let old = match root.metadata(&rel) {
        Ok(meta) if meta.is_dir() => {
            return Err(format!("'{path}' is a folder; give the path of a file inside it"));
        }
        Ok(meta) if !meta.is_file() => {
            return Err(format!("'{path}' is not a regular file (a device, socket or pipe); not writing it"));
        }
        Ok(meta) => Some(meta),
        Err(e) if e.kind() == io::ErrorKind::NotFound => None,
        Err(e) => return Err(refusal(path, "inspect", &e)),
    };
    if !parent_rel.as_os_str().is_empty() {
        root.create_dir_all(&parent_rel).map_err(|e| refusal(path, "create the folders for", &e))?;
    }
    let parent = open_parent(&root, &parent_rel, path)?;
    let shown = ws.display(&real);
    if let Some(meta) = &old {
        check_writable(&parent, &name, meta, path)?;
        if meta.len() == content.len() as u64 {
            let same = open_regular_in(&parent, &name)
                .and_then(|f| {
                    let mut now = Vec::with_capacity(content.len());
                    f.into_std().take(content.len() as u64 + 1).read_to_end(&mut now)?;
                    Ok(now == content.as_bytes())
                })
                .unwrap_or(false);
            if same {
                return Ok(format!("unchanged {shown} ({} bytes; it already had this content)", content.len()));
            }
        }
    }
    if cancel.is_cancelled() {
        return Err(format!("cancelled: '{path}' was not written"));
    }
    write_atomic(&parent, &name, content.as_bytes(), old.as_ref().map(|m| m.permissions()))
        .map_err(|e| refusal(path, "write", &e))?;
    let bytes = content.len();
    Ok(match old {
        None => format!("created {shown} ({bytes} bytes)"),
        Some(meta) => format!("overwrote {shown} ({bytes} bytes; it had {} bytes)", meta.len()),
    })
}

/// `edit_file(path, old_text, new_text, replace_all?)`.
pub(crate) fn edit_file(ws: &Workspace, input: &Value, cancel: &CancelToken) -> ToolReply {
    let args = Args::new("edit_file", input, &["path", "old_text", "new_text", "replace_all"])?;
    let path = args.string("path")?;
    let old_text = args.string("old_text")?;
    let new_text = args.string("new_text")?;
    let replace_all = args.opt_bool("replace_all")?.unwrap_or(false);
    if old_text.is_empty() {
        return Err("old_text is empty: give the exact text to replace, copied from read_file output \
                    without the line-number prefix (to create or rewrite a whole file use write_file)"
            .to_string());
    }
    let (root, rel) = open_root(ws, path)?;
    let real = ws.root().join(&rel);
    let (parent_rel, name) = split_parent(&rel, path)?;
    let (file, meta) = open_regular(&root, ws, path, &rel, &real).map_err(|e| {
        if e.starts_with("file not found") { format!("{e}; to create a new file use write_file") } else { e }
    })?;
    if meta.len() > MAX_EDIT_BYTES {
        return Err(format!(
            "'{path}' is {} bytes, over edit_file's {MAX_EDIT_BYTES}-byte limit; edit it with bash (e.g. sed)",
            meta.len()
        ));
    }
    let parent = open_parent(&root, &parent_rel, path)?;
    check_writable(&parent, &name, &meta, path)?;
    let mut bytes = Vec::new();
    file.into_std()
        .take(MAX_EDIT_BYTES + 1)
        .read_to_end(&mut bytes)
        .map_err(|e| format!("cannot read '{path}': {e}"))?;
    if bytes.iter().take(BINARY_PROBE_BYTES as usize).any(|b| *b == 0) {
        return Err(binary_message(path, "it has a NUL byte in its first 8 KB"));
    }
    let text = String::from_utf8(bytes).map_err(|_| binary_message(path, "it is not valid UTF-8"))?;

    // A file with CRLF line ends read back through read_file shows plain lines; accept old_text
    // written with LF and keep the file's CRLF.
    let (old, new) = if text.contains(old_text) {
        (old_text.to_string(), new_text.to_string())
    } else if text.contains("\r\n") && old_text.contains('\n') && text.contains(&to_crlf(old_text)) {
        (to_crlf(old_text), to_crlf(new_text))
    } else if let Some(message) = already_made(path, &text, new_text) {
        return Err(message);
    } else {
        return Err(not_found_message(path, &text, old_text, cancel));
    };

    let starts: Vec<usize> = text.match_indices(&old).map(|(i, _)| i).collect();
    if old_text == new_text {
        // Shown where it is: a small model sends this when it means to fix something next to old_text (one
        // line too many closing parentheses) and cannot see the difference.
        let (at, shown) = located(&text, starts[0], old.len());
        return Err(format!(
            "old_text and new_text are the same: the edit would change nothing. old_text is at {at} (with \
             context; the numbers are not part of the file):\n{shown}"
        ));
    }
    if starts.len() > 1 && !replace_all {
        let mut lines: Vec<String> =
            line_numbers(&text, starts.iter().take(20).copied()).iter().map(|n| n.to_string()).collect();
        if starts.len() > 20 {
            lines.push("…".to_string());
        }
        return Err(format!(
            "old_text matches {} times in '{path}' (at lines {}); include more surrounding lines so it \
             matches exactly once, or set replace_all=true to replace every occurrence",
            starts.len(),
            lines.join(", ")
        ));
    }

    let mut edited = String::with_capacity(text.len() + starts.len() * new.len());
    let mut regions = Vec::new();
    let mut copied = 0;
    for start in &starts {
        edited.push_str(&text[copied..*start]);
        regions.push((edited.len(), edited.len() + new.len()));
        edited.push_str(&new);
        copied = start + old.len();
    }
    edited.push_str(&text[copied..]);

    if cancel.is_cancelled() {
        return Err(format!("cancelled: '{path}' was not edited"));
    }
    write_atomic(&parent, &name, edited.as_bytes(), Some(meta.permissions()))
        .map_err(|e| refusal(path, "write", &e))?;

    let lines: Vec<&str> = edited.lines().collect();
    let shown = ws.display(&real);
    let mut out = format!("edited {shown}: replaced {} occurrence{}", starts.len(), plural(starts.len() as u64));
    for (start, end) in regions.iter().take(EDIT_REGIONS_SHOWN) {
        let first = line_of(&edited, *start);
        // A replacement ending in a newline ends on the line before the next one.
        let last = if end > start && new.ends_with('\n') { line_of(&edited, end - 1) } else { line_of(&edited, *end) };
        let last = last.max(first);
        if new.is_empty() {
            out.push_str(&format!("\n\nremoved text at line {first}; now:\n"));
        } else if first == last {
            out.push_str(&format!("\n\nline {first} now reads (with context):\n"));
        } else {
            out.push_str(&format!("\n\nlines {first}-{last} now read (with context):\n"));
        }
        out.push_str(&snippet(&lines, first, last));
    }
    if regions.len() > EDIT_REGIONS_SHOWN {
        out.push_str(&format!("\n… and {} more occurrences", regions.len() - EDIT_REGIONS_SHOWN));
    }
    Ok(out.trim_end().to_string())
}

/// A handle on the workspace root and `path` resolved relative to it (empty for the root itself).
pub(super) fn open_root(ws: &Workspace, path: &str) -> Result<(Dir, PathBuf), String> {
    let real = ws.resolve(path)?;
    let rel = real.strip_prefix(ws.root()).map(Path::to_path_buf).map_err(|_| {
        format!(
            "path '{path}' is outside the workspace {} (paths must stay inside the workspace root)",
            ws.root().display()
        )
    })?;
    let root = Dir::open_ambient_dir(ws.root(), cap_std::ambient_authority())
        .map_err(|e| format!("cannot open the workspace {}: {e}", ws.root().display()))?;
    Ok((root, rel))
}

/// `(parent folder, file name)` of a path relative to the root.
pub(super) fn split_parent(rel: &Path, path: &str) -> Result<(PathBuf, PathBuf), String> {
    match (rel.parent(), rel.file_name()) {
        (Some(parent), Some(name)) => Ok((parent.to_path_buf(), PathBuf::from(name))),
        _ => Err(format!("'{path}' is the workspace folder itself; give the path of a file inside it")),
    }
}

pub(super) fn open_parent(root: &Dir, parent_rel: &Path, path: &str) -> Result<Dir, String> {
    if parent_rel.as_os_str().is_empty() {
        root.try_clone().map_err(|e| format!("cannot open the folder of '{path}': {e}"))
    } else {
        root.open_dir(parent_rel).map_err(|e| refusal(path, "open the folder of", &e))
    }
}

/// An I/O failure on `path` as a message; a lookup that tried to leave the root says so.
pub(super) fn refusal(path: &str, doing: &str, e: &io::Error) -> String {
    if e.kind() == io::ErrorKind::PermissionDenied && e.to_string().contains("outside") {
        format!("path '{path}' leads outside the workspace (a symlink or '..' changed while the tool ran): {e}")
    } else {
        format!("cannot {doing} '{path}': {e}")
    }
}

/// Open `rel` for reading (without blocking on a FIFO swapped in) and check that it is a regular file;
/// the checks are on the open handle, so they describe what will be read.
fn open_regular(
    root: &Dir,
    ws: &Workspace,
    path: &str,
    rel: &Path,
    real: &Path,
) -> Result<(cap_std::fs::File, cap_std::fs::Metadata), String> {
    let file = match root.open_with(if rel.as_os_str().is_empty() { Path::new(".") } else { rel }, &read_options()) {
        Ok(file) => file,
        Err(e) if e.kind() == io::ErrorKind::NotFound => {
            return Err(format!("file not found: '{path}' (looked for {} in the workspace)", ws.display(real)));
        }
        Err(e) => return Err(refusal(path, "open", &e)),
    };
    let meta = file.metadata().map_err(|e| format!("cannot open '{path}': {e}"))?;
    if meta.is_dir() {
        return Err(format!("'{path}' is a folder, not a file; list it with bash, e.g. `ls -la {}`", ws.display(real)));
    }
    if !meta.is_file() {
        return Err(format!("'{path}' is not a regular file (a device, socket or pipe)"));
    }
    Ok((file, meta))
}

/// Opening for reading that never blocks: `O_NONBLOCK` makes opening a FIFO without a writer (or a device
/// that waits) return at once, and `O_NOCTTY` keeps a terminal from becoming ours. The caller then checks
/// on the handle that it is a regular file before reading.
pub(super) fn read_options() -> OpenOptions {
    let mut options = OpenOptions::new();
    options.read(true).custom_flags((rustix::fs::OFlags::NONBLOCK | rustix::fs::OFlags::NOCTTY).bits() as i32);
    options
}

/// Open `name` in `dir` for reading without blocking, only if it is a regular file (checked on the open
/// handle, so a FIFO or device swapped in after an earlier check is refused, not read).
pub(super) fn open_regular_in(dir: &Dir, name: &Path) -> io::Result<cap_std::fs::File> {
    let file = dir.open_with(name, &read_options())?;
    if !file.metadata()?.is_file() {
        return Err(io::Error::other("not a regular file (a device, socket or pipe)"));
    }
    Ok(file)
}

/// Refuse to replace a file the user cannot write, or one with other hard links (they would keep the old
/// content while this name got the new one, or, written in place, change under their other names).
fn check_writable(parent: &Dir, name: &Path, meta: &cap_std::fs::Metadata, path: &str) -> Result<(), String> {
    if meta.nlink() > 1 {
        return Err(format!(
            "'{path}' has {} hard links; not writing it, since its other names would not follow. Copy it \
             (cp) or edit it with bash if that is what you want",
            meta.nlink()
        ));
    }
    let mode = meta.mode();
    let writable = if rustix::process::geteuid().is_root() {
        // Root may write anything; like an editor, respect a file marked read-only for everyone.
        mode & 0o222 != 0
    } else {
        rustix::fs::accessat(parent, name, rustix::fs::Access::WRITE_OK, rustix::fs::AtFlags::empty()).is_ok()
    };
    if writable {
        Ok(())
    } else {
        Err(format!(
            "'{path}' is read-only (mode {:o}); not writing it. Ask the user, or change its mode with chmod \
             first if that is intended",
            mode & 0o7777
        ))
    }
}

fn binary_message(path: &str, why: &str) -> String {
    format!(
        "'{path}' looks like a binary file ({why}); the file tools only handle UTF-8 text. Inspect it with \
         bash, e.g. `file {path}` or `xxd {path} | head`"
    )
}

fn plural(n: u64) -> &'static str {
    if n == 1 { "" } else { "s" }
}

/// What [`read_line_capped`] learned about the line it read.
struct LineInfo {
    /// Characters in the whole line (counted as UTF-8 lead bytes), without the line end.
    chars: u64,
    /// Whether bytes of the line were dropped because it was longer than the cap.
    cut: bool,
}

/// Bytes scanned by one call, its budget, and the cancel token checked at each chunk.
struct Scan<'a> {
    cancel: &'a CancelToken,
    scanned: u64,
    max: u64,
}

/// Why [`read_line_capped`] stopped before the end of a line.
enum ScanStop {
    Io(io::Error),
    Cancelled,
    Limit,
}

/// Read one line into `buf` (cleared first; `\n` and a `\r` before it stripped), keeping at most `keep`
/// bytes so a giant line (minified code, a log without newlines) costs bounded memory. Checks `scan`'s
/// cancel token after every chunk and stops at its byte budget, so a line of gigabytes cannot hang the
/// call. `None` at the end of the input.
fn read_line_capped(
    reader: &mut impl BufRead,
    buf: &mut Vec<u8>,
    keep: usize,
    scan: &mut Scan<'_>,
) -> Result<Option<LineInfo>, ScanStop> {
    buf.clear();
    let mut chars: u64 = 0;
    let mut any = false;
    let mut cut = false;
    let mut pending_cr = false;
    loop {
        if scan.cancel.is_cancelled() {
            return Err(ScanStop::Cancelled);
        }
        if scan.scanned >= scan.max {
            return Err(ScanStop::Limit);
        }
        let available = match reader.fill_buf() {
            Ok(b) => b,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(ScanStop::Io(e)),
        };
        if available.is_empty() {
            break;
        }
        any = true;
        let (chunk, done) = match available.iter().position(|b| *b == b'\n') {
            Some(i) => (&available[..i], Some(i + 1)),
            None => (available, None),
        };
        if !chunk.is_empty() {
            if pending_cr {
                // The `\r` held back from the previous chunk was not a line end after all.
                chars += 1;
                push_capped(buf, b"\r", keep, &mut cut);
            }
            let (body, cr) = match chunk.last() {
                Some(b'\r') => (&chunk[..chunk.len() - 1], true),
                _ => (chunk, false),
            };
            pending_cr = cr;
            chars += body.iter().filter(|b| (**b & 0xC0) != 0x80).count() as u64;
            push_capped(buf, body, keep, &mut cut);
        }
        let consumed = done.unwrap_or(chunk.len());
        reader.consume(consumed);
        scan.scanned += consumed as u64;
        if done.is_some() {
            return Ok(Some(LineInfo { chars, cut }));
        }
    }
    if pending_cr {
        chars += 1;
        push_capped(buf, b"\r", keep, &mut cut);
    }
    Ok(any.then_some(LineInfo { chars, cut }))
}

fn push_capped(buf: &mut Vec<u8>, bytes: &[u8], keep: usize, cut: &mut bool) {
    let room = keep.saturating_sub(buf.len());
    if bytes.len() > room {
        *cut = true;
    }
    buf.extend_from_slice(&bytes[..bytes.len().min(room)]);
}

/// The kept bytes of a line as text, or `None` if they are not UTF-8. A line cut short may end inside
/// a character: that partial character is dropped, not counted as invalid.
fn decode_line(bytes: &[u8], cut: bool) -> Option<&str> {
    match std::str::from_utf8(bytes) {
        Ok(s) => Some(s),
        Err(e) if cut && e.error_len().is_none() => std::str::from_utf8(&bytes[..e.valid_up_to()]).ok(),
        Err(_) => None,
    }
}

/// Write `data` to `name` in `dir` atomically: a new temporary file in the same folder, fsync, rename
/// over `name` (all relative to the `dir` handle), then fsync the folder so the rename itself is durable.
/// The temporary file is removed on any failure.
pub(super) fn write_atomic(dir: &Dir, name: &Path, data: &[u8], permissions: Option<Permissions>) -> io::Result<()> {
    let (tmp_name, file) = create_temp(dir, &name.to_string_lossy())?;
    let written = (|| {
        let mut std_file = file.into_std();
        std_file.write_all(data)?;
        if let Some(permissions) = permissions {
            cap_std::fs::File::from_std(std_file.try_clone()?).set_permissions(permissions)?;
        }
        std_file.sync_all()?;
        drop(std_file);
        dir.rename(&tmp_name, dir, name)
    })();
    if let Err(e) = written {
        let _ = dir.remove_file(&tmp_name);
        return Err(e);
    }
    // Best effort: some file systems cannot fsync a folder, and the data itself is already safe.
    if let Ok(folder) = dir.try_clone() {
        let _ = folder.into_std_file().sync_all();
    }
    Ok(())
}

/// A new, empty, uniquely named file in `dir` (created with `create_new`, so never someone else's).
fn create_temp(dir: &Dir, name: &str) -> io::Result<(PathBuf, cap_std::fs::File)> {
    let nanos = SystemTime::now().duration_since(UNIX_EPOCH).map(|d| d.subsec_nanos()).unwrap_or(0);
    let mut last_error = None;
    let mut options = OpenOptions::new();
    options.write(true).create_new(true);
    for attempt in 0..100u32 {
        let tmp = PathBuf::from(format!(".{name}.{}-{nanos}-{attempt}.tooloop-tmp", std::process::id()));
        match dir.open_with(&tmp, &options) {
            Ok(file) => return Ok((tmp, file)),
            Err(e) if e.kind() == io::ErrorKind::AlreadyExists => last_error = Some(e),
            Err(e) => return Err(e),
        }
    }
    Err(last_error.unwrap_or_else(|| io::Error::other("could not create a temporary file")))
}

fn to_crlf(text: &str) -> String {
    text.replace("\r\n", "\n").replace('\n', "\r\n")
}

/// 1-based number of the line holding byte `index` of `text`.
fn line_of(text: &str, index: usize) -> usize {
    text.as_bytes()[..index.min(text.len())].iter().filter(|b| **b == b'\n').count() + 1
}

/// 1-based line numbers of the ascending byte offsets `indices`, in one pass over `text`.
fn line_numbers(text: &str, indices: impl Iterator<Item = usize>) -> Vec<usize> {
    let bytes = text.as_bytes();
    let (mut line, mut pos) = (1, 0);
    indices
        .map(|index| {
            let index = index.min(bytes.len()).max(pos);
            line += bytes[pos..index].iter().filter(|b| **b == b'\n').count();
            pos = index;
            line
        })
        .collect()
}

/// Lines `first..=last` of `lines` with context around them, numbered; a long region shows its two ends.
fn snippet(lines: &[&str], first: usize, last: usize) -> String {
    let from = first.saturating_sub(EDIT_CONTEXT_LINES).max(1);
    let to = last + EDIT_CONTEXT_LINES;
    if last - first < 20 {
        return numbered(lines, from, to);
    }
    let mut out = numbered(lines, from, first + 9);
    out.push_str("   ...\n");
    out.push_str(&numbered(lines, last - 9, to));
    out
}

/// Where the `len` bytes of `text` at byte `start` are: `line N` or `lines N-M`, and those lines with context,
/// numbered.
fn located(text: &str, start: usize, len: usize) -> (String, String) {
    let first = line_of(text, start);
    let last = line_of(text, start + len.saturating_sub(1)).max(first);
    let lines: Vec<&str> = text.lines().collect();
    let at = if first == last { format!("line {first}") } else { format!("lines {first}-{last}") };
    (at, snippet(&lines, first, last).trim_end().to_string())
}

/// An edit whose `old_text` is not in the file and whose `new_text` is: most likely made already (a small
/// model fixed calc.py with write_file, then sent the same fix as an edit until the runaway guard stopped it).
/// Shown where, so the model can tell; nothing changed. The agent's progress detection reads the words
/// "this edit looks already made" as a rewrite of what the file holds (`crate::progress`).
fn already_made(path: &str, text: &str, new_text: &str) -> Option<String> {
    if new_text.trim().is_empty() {
        return None;
    }
    let (at, shown) = located(text, text.find(new_text)?, new_text.len());
    Some(format!(
        "old_text was not found in '{path}', but new_text is already there, at {at}: this edit looks already \
         made, so nothing changed. If it is the change you meant, go on with the task (or answer if it is \
         done); if not, copy old_text from the file as it is now (with context; the numbers are not part of the \
         file):\n{shown}"
    ))
}

/// Why `old_text` did not match, with the nearest thing that would have.
fn not_found_message(path: &str, text: &str, old_text: &str, cancel: &CancelToken) -> String {
    let mut message = format!("old_text was not found in '{path}'");
    let old_lines: Vec<&str> = old_text.lines().collect();

    // read_file output pasted with its line-number prefixes.
    let numbered_prefix = |l: &&str| {
        let (number, rest) = l.trim_start().split_once('\t').unwrap_or(("", ""));
        !number.is_empty() && number.bytes().all(|b| b.is_ascii_digit()) && !rest.is_empty()
    };
    if !old_lines.is_empty() && old_lines.iter().all(numbered_prefix) {
        message.push_str(
            ". It seems to include read_file's line-number prefixes (a number and a tab at the start of \
             each line); remove them and keep only the file's text",
        );
        return message;
    }

    // Same lines, different indentation or trailing spaces.
    let trimmed_old: Vec<&str> = {
        let all: Vec<&str> = old_lines.iter().map(|l| l.trim()).collect();
        let start = all.iter().position(|l| !l.is_empty()).unwrap_or(all.len());
        let end = all.iter().rposition(|l| !l.is_empty()).map_or(start, |i| i + 1);
        all[start..end].to_vec()
    };
    let file_lines: Vec<&str> = text.lines().collect();
    if !trimmed_old.is_empty() {
        // Candidates start where the first trimmed line matches (one linear pass, not a comparison of
        // every window), and the comparisons are capped, so a pathological file cannot make this slow.
        let candidates: Vec<usize> =
            file_lines.iter().enumerate().filter(|(_, l)| l.trim() == trimmed_old[0]).map(|(i, _)| i).collect();
        let mut budget = HINT_BUDGET;
        let mut hits = Vec::new();
        for i in candidates {
            if hits.len() == 5 || budget < trimmed_old.len() || cancel.is_cancelled() {
                break;
            }
            budget -= trimmed_old.len();
            let window = file_lines.get(i..i + trimmed_old.len());
            if window.is_some_and(|w| w.iter().map(|l| l.trim()).eq(trimmed_old.iter().copied())) {
                hits.push(if trimmed_old.len() == 1 {
                    format!("{}", i + 1)
                } else {
                    format!("{}-{}", i + 1, i + trimmed_old.len())
                });
            }
        }
        if !hits.is_empty() {
            message.push_str(&format!(
                ", but it matches line{} {} when leading and trailing whitespace is ignored: the \
                 indentation (tabs or spaces) or trailing spaces differ",
                if hits.len() == 1 && trimmed_old.len() == 1 { "" } else { "s" },
                hits.join(", ")
            ));
            return with_small_file(
                message,
                &file_lines,
                text,
                "Copy the exact text from read_file (without the line-number prefix) and try again",
            );
        }
    }
    if cancel.is_cancelled() {
        return format!("cancelled while searching '{path}'");
    }

    // Same words, different line breaks or spacing.
    let collapse = |s: &str| s.split_whitespace().collect::<Vec<_>>().join(" ");
    let collapsed_old = collapse(old_text);
    if !collapsed_old.is_empty() && collapse(text).contains(&collapsed_old) {
        message.push_str(
            ", but it matches when whitespace and line breaks are ignored: the spacing or line breaks \
             differ",
        );
        return with_small_file(message, &file_lines, text, "Copy the exact text, line breaks included");
    }

    // The first line is there, what follows differs.
    if let Some(first) = trimmed_old.first().filter(|l| l.chars().count() >= 4) {
        if let Some(i) = file_lines.iter().position(|l| l.contains(first)) {
            message.push_str(&format!(". Its first line occurs at line {}, but the lines after it differ", i + 1));
            return with_small_file(
                message,
                &file_lines,
                text,
                "Read the file around there again and copy the exact text",
            );
        }
    }
    with_small_file(
        message,
        &file_lines,
        text,
        "Read the file again (read_file) and copy the exact text to replace, whitespace included",
    )
}

/// Ends a missed edit's message: a small file is shown whole, numbered, so the model can copy from it what
/// it could not reproduce (small models repeat the same wrong old_text when told only to read the file
/// again); a big one gets `otherwise`, a sentence.
fn with_small_file(mut message: String, file_lines: &[&str], text: &str, otherwise: &str) -> String {
    if file_lines.len() <= SHOW_WHOLE_FILE_LINES && text.len() <= SHOW_WHOLE_FILE_BYTES {
        message.push_str(&format!(
            ". old_text must be a piece of the file as it is now, copied exactly (or write the whole corrected \
             file with write_file). The file has {} line{}; it reads (numbered like read_file; the numbers are \
             not part of it):\n{}",
            file_lines.len(),
            if file_lines.len() == 1 { "" } else { "s" },
            numbered(file_lines, 1, file_lines.len())
        ));
    } else {
        message.push_str(&format!(". {otherwise}"));
    }
    message
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod tests {
    use super::super::run;
    use super::super::workspace::tests::setup;
    use super::*;
    use serde_json::json;
    use std::fs::{self, File, Permissions};
    use std::os::unix::fs::{PermissionsExt, symlink};

    fn call(ws: &Workspace, name: &str, input: Value) -> ToolReply {
        run(name, ws, &input, &CancelToken::new())
    }

    // ---- read_file

    #[test]
    fn read_file_numbers_lines_like_cat_n() {
        let (_tmp, ws) = setup();
        fs::write(ws.root().join("a.txt"), "alpha\nbeta\n").unwrap();
        let out = call(&ws, "read_file", json!({"path": "a.txt"})).unwrap();
        assert_eq!(out, "     1\talpha\n     2\tbeta\n");
    }

    #[test]
    fn read_file_last_line_without_newline_and_crlf_are_shown_plainly() {
        let (_tmp, ws) = setup();
        fs::write(ws.root().join("a.txt"), "one\r\ntwo\r\nthree").unwrap();
        let out = call(&ws, "read_file", json!({"path": "a.txt"})).unwrap();
        assert_eq!(out, "     1\tone\n     2\ttwo\n     3\tthree\n");
    }

    #[test]
    fn read_file_offset_and_limit_select_lines_and_say_how_to_continue() {
        let (_tmp, ws) = setup();
        let text: String = (1..=10).map(|i| format!("line {i}\n")).collect();
        fs::write(ws.root().join("a.txt"), text).unwrap();
        let out = call(&ws, "read_file", json!({"path": "a.txt", "offset": 3, "limit": 2})).unwrap();
        assert_eq!(out, "     3\tline 3\n     4\tline 4\n[lines 3-4 of 10; use offset=5 to continue]");
        let out = call(&ws, "read_file", json!({"path": "a.txt", "offset": 9})).unwrap();
        assert_eq!(out, "     9\tline 9\n    10\tline 10\n[lines 9-10 of 10; end of file]");
    }

    #[test]
    fn read_file_default_limit_is_2000_lines() {
        let (_tmp, ws) = setup();
        let text: String = (1..=2500).map(|i| format!("{i}\n")).collect();
        fs::write(ws.root().join("big.txt"), text).unwrap();
        let out = call(&ws, "read_file", json!({"path": "big.txt"})).unwrap();
        assert!(out.contains("  2000\t2000\n"));
        assert!(!out.contains("\t2001\n"));
        assert!(out.ends_with("[lines 1-2000 of 2500; use offset=2001 to continue]"), "{out}");
    }

    #[test]
    fn read_file_offset_past_the_end_is_an_error_with_the_line_count() {
        let (_tmp, ws) = setup();
        fs::write(ws.root().join("a.txt"), "x\ny\n").unwrap();
        let err = call(&ws, "read_file", json!({"path": "a.txt", "offset": 5})).unwrap_err();
        assert!(err.contains("past the end") && err.contains("2 lines"), "{err}");
    }

    #[test]
    fn read_file_bad_offset_or_limit_is_an_error() {
        let (_tmp, ws) = setup();
        fs::write(ws.root().join("a.txt"), "x\n").unwrap();
        assert!(call(&ws, "read_file", json!({"path": "a.txt", "limit": 0})).unwrap_err().contains("limit"));
        assert!(call(&ws, "read_file", json!({"path": "a.txt", "offset": -2})).unwrap_err().contains("offset"));
        // 0 is read as 1.
        assert_eq!(call(&ws, "read_file", json!({"path": "a.txt", "offset": 0})).unwrap(), "     1\tx\n");
    }

    #[test]
    fn read_file_empty_file_says_so() {
        let (_tmp, ws) = setup();
        fs::write(ws.root().join("e.txt"), "").unwrap();
        assert_eq!(call(&ws, "read_file", json!({"path": "e.txt"})).unwrap(), "[e.txt is empty]");
    }

    #[test]
    fn read_file_cuts_long_lines_with_a_marker() {
        let (_tmp, ws) = setup();
        let long = "é".repeat(50_000);
        fs::write(ws.root().join("long.txt"), format!("short\n{long}\nafter\n")).unwrap();
        let out = call(&ws, "read_file", json!({"path": "long.txt"})).unwrap();
        let second = out.lines().nth(1).unwrap();
        assert!(second.starts_with(&format!("     2\t{}", "é".repeat(MAX_LINE_CHARS))));
        assert!(second.ends_with(" … [line cut: 50000 characters in all]"), "{second}");
        assert!(out.ends_with("     3\tafter\n"));
    }

    #[test]
    fn read_file_refuses_a_binary_file() {
        let (_tmp, ws) = setup();
        fs::write(ws.root().join("bin.dat"), [0x7f, b'E', b'L', b'F', 0, 1, 2]).unwrap();
        let err = call(&ws, "read_file", json!({"path": "bin.dat"})).unwrap_err();
        assert!(err.contains("binary") && err.contains("NUL"), "{err}");
    }

    #[test]
    fn read_file_refuses_a_file_that_is_not_utf8() {
        let (_tmp, ws) = setup();
        fs::write(ws.root().join("latin1.txt"), b"ok\ncaf\xe9\n").unwrap();
        let err = call(&ws, "read_file", json!({"path": "latin1.txt"})).unwrap_err();
        assert!(err.contains("binary") && err.contains("line 2 is not valid UTF-8"), "{err}");
    }

    #[test]
    fn read_file_on_a_folder_suggests_ls() {
        let (_tmp, ws) = setup();
        let err = call(&ws, "read_file", json!({"path": "sub"})).unwrap_err();
        assert!(err.contains("is a folder") && err.contains("ls"), "{err}");
    }

    #[test]
    fn read_file_missing_file_names_the_path() {
        let (_tmp, ws) = setup();
        let err = call(&ws, "read_file", json!({"path": "nope/missing.txt"})).unwrap_err();
        assert!(err.contains("file not found: 'nope/missing.txt'"), "{err}");
    }

    #[test]
    fn read_file_refuses_a_symlink_out_of_the_workspace() {
        let (tmp, ws) = setup();
        symlink(tmp.path().join("outside/secret.txt"), ws.root().join("leak.txt")).unwrap();
        let err = call(&ws, "read_file", json!({"path": "leak.txt"})).unwrap_err();
        assert!(err.contains("outside the workspace"), "{err}");
        let err = call(&ws, "read_file", json!({"path": "../outside/secret.txt"})).unwrap_err();
        assert!(err.contains("outside the workspace"), "{err}");
    }

    #[test]
    fn read_file_follows_a_symlink_that_stays_inside() {
        let (_tmp, ws) = setup();
        symlink(ws.root().join("sub/inside.txt"), ws.root().join("alias.txt")).unwrap();
        assert_eq!(call(&ws, "read_file", json!({"path": "alias.txt"})).unwrap(), "     1\tinside\n");
    }

    #[test]
    fn read_line_capped_keeps_a_bounded_prefix_and_counts_the_whole_line() {
        let data = format!("{}\r\nb\rc\n", "x".repeat(100));
        let mut reader = BufReader::with_capacity(7, data.as_bytes());
        let mut buf = Vec::new();
        let cancel = CancelToken::new();
        let mut scan = Scan { cancel: &cancel, scanned: 0, max: u64::MAX };
        let info = read_line_capped(&mut reader, &mut buf, 10, &mut scan).ok().unwrap().unwrap();
        assert_eq!((buf.as_slice(), info.chars, info.cut), (&b"xxxxxxxxxx"[..], 100, true));
        let info = read_line_capped(&mut reader, &mut buf, 10, &mut scan).ok().unwrap().unwrap();
        assert_eq!((buf.as_slice(), info.chars, info.cut), (&b"b\rc"[..], 3, false));
        assert!(read_line_capped(&mut reader, &mut buf, 10, &mut scan).ok().unwrap().is_none());
    }

    // ---- write_file

    #[test]
    fn write_file_creates_a_file_and_reports_bytes() {
        let (_tmp, ws) = setup();
        let out = call(&ws, "write_file", json!({"path": "new.txt", "content": "héllo\n"})).unwrap();
        assert_eq!(out, "created new.txt (7 bytes)");
        assert_eq!(fs::read_to_string(ws.root().join("new.txt")).unwrap(), "héllo\n");
    }

    #[test]
    fn write_file_creates_missing_parent_folders() {
        let (_tmp, ws) = setup();
        let out = call(&ws, "write_file", json!({"path": "a/b/c/new.rs", "content": "fn main() {}\n"})).unwrap();
        assert_eq!(out, "created a/b/c/new.rs (13 bytes)");
        assert!(ws.root().join("a/b/c/new.rs").is_file());
    }

    #[test]
    fn write_file_overwrites_and_says_so_keeping_permissions() {
        let (_tmp, ws) = setup();
        let target = ws.root().join("run.sh");
        fs::write(&target, "old content\n").unwrap();
        fs::set_permissions(&target, Permissions::from_mode(0o755)).unwrap();
        let out = call(&ws, "write_file", json!({"path": "run.sh", "content": "new\n"})).unwrap();
        assert_eq!(out, "overwrote run.sh (4 bytes; it had 12 bytes)");
        assert_eq!(fs::read_to_string(&target).unwrap(), "new\n");
        assert_eq!(fs::metadata(&target).unwrap().permissions().mode() & 0o777, 0o755);
    }

    #[test]
    fn write_file_leaves_no_temporary_file_behind() {
        let (_tmp, ws) = setup();
        call(&ws, "write_file", json!({"path": "sub/a.txt", "content": "1"})).unwrap();
        call(&ws, "write_file", json!({"path": "sub/a.txt", "content": "2"})).unwrap();
        let mut names: Vec<String> = fs::read_dir(ws.root().join("sub"))
            .unwrap()
            .map(|e| e.unwrap().file_name().into_string().unwrap())
            .collect();
        names.sort();
        assert_eq!(names, ["a.txt", "inside.txt"]);
    }

    #[test]
    fn write_file_replaces_by_rename_so_old_readers_keep_the_old_content() {
        // An open handle to the old file still reads the old bytes: the new content is a new inode,
        // swapped in whole, never the old file truncated and rewritten in place.
        let (_tmp, ws) = setup();
        let target = ws.root().join("swap.txt");
        fs::write(&target, "old").unwrap();
        let mut before = File::open(&target).unwrap();
        call(&ws, "write_file", json!({"path": "swap.txt", "content": "new"})).unwrap();
        let mut seen = String::new();
        before.read_to_string(&mut seen).unwrap();
        assert_eq!(seen, "old");
        assert_eq!(fs::read_to_string(&target).unwrap(), "new");
    }

    #[test]
    fn write_file_through_an_inside_symlink_keeps_the_link() {
        let (_tmp, ws) = setup();
        symlink(ws.root().join("sub/inside.txt"), ws.root().join("alias.txt")).unwrap();
        call(&ws, "write_file", json!({"path": "alias.txt", "content": "changed\n"})).unwrap();
        assert!(fs::symlink_metadata(ws.root().join("alias.txt")).unwrap().file_type().is_symlink());
        assert_eq!(fs::read_to_string(ws.root().join("sub/inside.txt")).unwrap(), "changed\n");
    }

    #[test]
    fn write_file_refuses_paths_out_of_the_workspace() {
        let (tmp, ws) = setup();
        symlink(tmp.path().join("outside"), ws.root().join("out")).unwrap();
        for path in ["../escape.txt", "out/new/escape.txt", "out/secret.txt", "/tmp/escape-tooloop.txt"] {
            let err = call(&ws, "write_file", json!({"path": path, "content": "x"})).unwrap_err();
            assert!(err.contains("outside the workspace"), "{path}: {err}");
        }
        assert!(!tmp.path().join("escape.txt").exists());
        assert!(!tmp.path().join("outside/new").exists());
        assert_eq!(fs::read_to_string(tmp.path().join("outside/secret.txt")).unwrap(), "secret\n");
    }

    #[test]
    fn write_file_to_a_folder_is_an_error() {
        let (_tmp, ws) = setup();
        let err = call(&ws, "write_file", json!({"path": "sub", "content": "x"})).unwrap_err();
        assert!(err.contains("is a folder"), "{err}");
    }

    // ---- edit_file

    fn edit(ws: &Workspace, old: &str, new: &str, replace_all: Option<bool>) -> ToolReply {
        let mut input = json!({"path": "code.rs", "old_text": old, "new_text": new});
        if let Some(all) = replace_all {
            input["replace_all"] = json!(all);
        }
        call(ws, "edit_file", input)
    }

    fn code_file(ws: &Workspace, text: &str) -> PathBuf {
        let path = ws.root().join("code.rs");
        fs::write(&path, text).unwrap();
        path
    }

    #[test]
    fn edit_file_replaces_a_single_match_and_shows_the_region() {
        let (_tmp, ws) = setup();
        let text: String = (1..=10).map(|i| format!("line {i}\n")).collect();
        let path = code_file(&ws, &text);
        let out = edit(&ws, "line 5\n", "line five\nline 5.5\n", None).unwrap();
        assert_eq!(fs::read_to_string(&path).unwrap(), text.replace("line 5\n", "line five\nline 5.5\n"));
        assert!(out.starts_with("edited code.rs: replaced 1 occurrence\n"), "{out}");
        assert!(out.contains("lines 5-6 now read"), "{out}");
        assert!(out.contains("     2\tline 2\n"), "{out}");
        assert!(out.contains("     5\tline five\n     6\tline 5.5\n"), "{out}");
        assert!(out.ends_with("     9\tline 8"), "{out}");
    }

    #[test]
    fn edit_file_zero_matches_says_not_found() {
        let (_tmp, ws) = setup();
        let path = code_file(&ws, "fn main() {\n    run();\n}\n");
        let err = edit(&ws, "stop();", "halt();", None).unwrap_err();
        assert!(err.starts_with("old_text was not found in 'code.rs'"), "{err}");
        assert_eq!(fs::read_to_string(path).unwrap(), "fn main() {\n    run();\n}\n");
    }

    #[test]
    fn edit_file_zero_matches_in_a_small_file_shows_the_file() {
        let (_tmp, ws) = setup();
        code_file(&ws, "def add(a, b):\n    return a - b\n");
        let err = edit(&ws, "return a - c", "return a + b", None).unwrap_err();
        assert!(err.starts_with("old_text was not found in 'code.rs'"), "{err}");
        assert!(err.contains("The file has 2 lines"), "{err}");
        assert!(err.contains("copied exactly (or write the whole corrected file with write_file)"), "{err}");
        assert!(err.ends_with("     1\tdef add(a, b):\n     2\t    return a - b\n"), "{err}");
    }

    #[test]
    fn edit_file_a_miss_only_in_line_breaks_or_indentation_shows_the_small_file_too() {
        // A real model sent the two lines of calc.py as one, four times, when told only to read it again.
        let (_tmp, ws) = setup();
        code_file(&ws, "def add(a, b):\n    return a - b\n");
        let err = edit(&ws, "def add(a, b): return a - b", "def add(a, b): return a + b", None).unwrap_err();
        assert!(err.contains("matches when whitespace and line breaks are ignored"), "{err}");
        assert!(err.ends_with("     1\tdef add(a, b):\n     2\t    return a - b\n"), "{err}");
        code_file(&ws, "def add(a, b):\n\treturn a - b\n");
        let err = edit(&ws, "def add(a, b):\n    return a - b", "def add(a, b):\n    return a + b", None).unwrap_err();
        assert!(err.contains("matches lines 1-2 when leading and trailing whitespace is ignored"), "{err}");
        assert!(err.ends_with("     2\t\treturn a - b\n"), "{err}");
    }

    #[test]
    fn edit_file_with_the_same_old_and_new_text_changes_nothing_and_shows_where_old_text_is() {
        // A real model meant to remove a third closing parenthesis and sent old_text equal to new_text.
        let (_tmp, ws) = setup();
        let path = code_file(&ws, "import t\n\n    t.ok(p('racecar')))\n    t.ok(p('level'))\n");
        let err = edit(&ws, "t.ok(p('racecar'))", "t.ok(p('racecar'))", None).unwrap_err();
        assert!(
            err.starts_with("old_text and new_text are the same: the edit would change nothing. old_text is at line 3"),
            "{err}"
        );
        assert!(err.contains("     3\t    t.ok(p('racecar')))\n"), "{err}");
        assert_eq!(fs::read_to_string(&path).unwrap(), "import t\n\n    t.ok(p('racecar')))\n    t.ok(p('level'))\n");
        let err = edit(&ws, "no such text", "no such text", None).unwrap_err();
        assert!(err.starts_with("old_text was not found in 'code.rs'"), "{err}");
    }

    #[test]
    fn edit_file_whose_new_text_is_already_there_says_the_edit_looks_made_and_changes_nothing() {
        let (_tmp, ws) = setup();
        let path = code_file(&ws, "def add(a, b):\n    return a + b\n");
        let err = edit(&ws, "return a - b", "return a + b", None).unwrap_err();
        assert!(
            err.starts_with(
                "old_text was not found in 'code.rs', but new_text is already there, at line 2: this edit looks \
                 already made, so nothing changed."
            ),
            "{err}"
        );
        assert!(err.ends_with("     1\tdef add(a, b):\n     2\t    return a + b"), "{err}");
        assert_eq!(fs::read_to_string(path).unwrap(), "def add(a, b):\n    return a + b\n");
        // A blank new_text (a deletion) is no evidence: the plain miss.
        let err = edit(&ws, "return a - b", "\n", None).unwrap_err();
        assert!(!err.contains("already made"), "{err}");
    }

    #[test]
    fn edit_file_zero_matches_in_a_large_file_does_not_show_it() {
        let (_tmp, ws) = setup();
        let text: String = (1..=200).map(|i| format!("line {i}\n")).collect();
        code_file(&ws, &text);
        let err = edit(&ws, "no such line", "x", None).unwrap_err();
        assert!(!err.contains("line 100"), "{err}");
        assert!(err.ends_with("copy the exact text to replace, whitespace included"), "{err}");
    }

    #[test]
    fn edit_file_zero_matches_hints_at_indentation() {
        let (_tmp, ws) = setup();
        code_file(&ws, "fn main() {\n\tif x {\n\t\trun();\n\t}\n}\n");
        let err = edit(&ws, "    if x {\n        run();", "if y {", None).unwrap_err();
        assert!(err.contains("matches lines 2-3 when leading and trailing whitespace is ignored"), "{err}");
    }

    #[test]
    fn edit_file_zero_matches_hints_at_line_number_prefixes() {
        let (_tmp, ws) = setup();
        code_file(&ws, "a\nb\n");
        let err = edit(&ws, "     1\ta\n     2\tb", "c", None).unwrap_err();
        assert!(err.contains("line-number prefixes"), "{err}");
    }

    #[test]
    fn edit_file_several_matches_gives_the_count_and_lines() {
        let (_tmp, ws) = setup();
        let path = code_file(&ws, "x = 1\ny = 2\nx = 1\n\nx = 1\n");
        let err = edit(&ws, "x = 1", "x = 9", None).unwrap_err();
        assert!(err.contains("matches 3 times") && err.contains("at lines 1, 3, 5"), "{err}");
        assert!(err.contains("replace_all=true"), "{err}");
        assert_eq!(fs::read_to_string(path).unwrap(), "x = 1\ny = 2\nx = 1\n\nx = 1\n");
    }

    #[test]
    fn edit_file_replace_all_replaces_every_match() {
        let (_tmp, ws) = setup();
        let path = code_file(&ws, "x = 1\ny = 2\nx = 1\n");
        let out = edit(&ws, "x = 1", "x = 9", Some(true)).unwrap();
        assert!(out.starts_with("edited code.rs: replaced 2 occurrences"), "{out}");
        assert_eq!(fs::read_to_string(path).unwrap(), "x = 9\ny = 2\nx = 9\n");
    }

    #[test]
    fn edit_file_empty_old_text_is_an_error() {
        let (_tmp, ws) = setup();
        code_file(&ws, "a\n");
        let err = edit(&ws, "", "b", None).unwrap_err();
        assert!(err.contains("old_text is empty"), "{err}");
    }

    #[test]
    fn edit_file_identical_texts_is_an_error() {
        let (_tmp, ws) = setup();
        code_file(&ws, "a\n");
        assert!(edit(&ws, "a", "a", None).unwrap_err().contains("the same"));
    }

    #[test]
    fn edit_file_deletion_reports_where() {
        let (_tmp, ws) = setup();
        let path = code_file(&ws, "keep\ndrop me\nkeep too\n");
        let out = edit(&ws, "drop me\n", "", None).unwrap();
        assert!(out.contains("removed text at line 2"), "{out}");
        assert_eq!(fs::read_to_string(path).unwrap(), "keep\nkeep too\n");
    }

    #[test]
    fn edit_file_accepts_lf_old_text_in_a_crlf_file() {
        let (_tmp, ws) = setup();
        let path = code_file(&ws, "a\r\nb\r\nc\r\n");
        edit(&ws, "a\nb\n", "A\nB\n", None).unwrap();
        assert_eq!(fs::read_to_string(path).unwrap(), "A\r\nB\r\nc\r\n");
    }

    #[test]
    fn edit_file_missing_file_suggests_write_file() {
        let (_tmp, ws) = setup();
        let err = edit(&ws, "a", "b", None).unwrap_err();
        assert!(err.contains("file not found: 'code.rs'") && err.contains("write_file"), "{err}");
    }

    #[test]
    fn edit_file_keeps_permissions_and_leaves_no_temporary_file() {
        let (_tmp, ws) = setup();
        let path = code_file(&ws, "#!/bin/sh\necho a\n");
        fs::set_permissions(&path, Permissions::from_mode(0o750)).unwrap();
        edit(&ws, "echo a", "echo b", None).unwrap();
        assert_eq!(fs::metadata(&path).unwrap().permissions().mode() & 0o777, 0o750);
        let count = fs::read_dir(ws.root()).unwrap().count();
        assert_eq!(count, 2, "only sub/ and code.rs");
    }

    #[test]
    fn edit_file_refuses_a_symlink_out_of_the_workspace() {
        let (tmp, ws) = setup();
        symlink(tmp.path().join("outside/secret.txt"), ws.root().join("code.rs")).unwrap();
        let err = edit(&ws, "secret", "public", None).unwrap_err();
        assert!(err.contains("outside the workspace"), "{err}");
        assert_eq!(fs::read_to_string(tmp.path().join("outside/secret.txt")).unwrap(), "secret\n");
    }
}
