//! Sessions: one append-only JSONL file per conversation, written as entries finish.
//!
//! Format (version 1), one JSON object per line:
//! - first line: `{"type":"session","version":1,"created_at":<ms>}`
//! - `{"type":"entry","entry":{...}}` — a finished conversation entry ([`Entry`]), in order; a later line with
//!   an earlier entry's id is that entry changed after it finished (a turn a policy left out of the API view
//!   as an error entry), and replaces it where it was
//! - `{"type":"reset","at":<ms>}` — the conversation was cleared; entries before it are history only
//! - `{"type":"compaction","entry":{...}}` — a compaction ([`crate::compaction`]): a system entry whose
//!   `meta.compaction` says which earlier entries left the API view and what summary stands in for them.
//!   Loading keeps every entry (the full history) and the record, so the view is the compacted one.
//!
//! Every line is flushed and fsynced before the next request goes out. A write that fails (a full disk)
//! is cut back off, so the file stays as it was and the next line starts on a line of its own; if even the
//! cut fails, the next line is written after a newline. Loading keeps every complete line, including a last
//! one that parses but lost its newline; a last line torn by a crash is reported and cut off; a line in the
//! middle that does not parse is reported and skipped. A file that is not a tooloop session, or one written
//! in a newer format version, is refused untouched. An open session holds an exclusive lock (`flock`), so a
//! second writer fails instead of interleaving lines. Files are created 0600 and folders 0700: a
//! conversation is private. Must never: write a secret (entries hold none), or modify a file it refuses.

use std::fs::{DirBuilder, File, OpenOptions};
use std::io::{BufRead, BufReader, ErrorKind, Seek, SeekFrom, Write};
use std::os::unix::fs::{DirBuilderExt, OpenOptionsExt};
use std::path::{Path, PathBuf};

use nix::fcntl::{Flock, FlockArg};
use serde_json::{Value, json};

use crate::conversation::{Entry, now_ms};
use crate::error::{Error, Result};

/// The session format version this build writes and reads.
pub const SESSION_VERSION: u64 = 1;

/// How every session file starts (the header as written; a crash can leave a prefix of it).
const HEADER_START: &[u8] = br#"{"type":"session""#;

/// Where a session's lines go: the session file itself ([`File`]) in production. A seam for tests, which
/// wrap the file in a writer that fails like a full disk to prove a failed append loses nothing.
pub trait SessionSink: Write + Send + std::fmt::Debug {
    /// Make what was written durable (`fsync`).
    fn sync(&mut self) -> std::io::Result<()>;
    /// Cut the file back to `len` bytes (writes go on at the end).
    fn truncate(&mut self, len: u64) -> std::io::Result<()>;
    /// The file's current length in bytes.
    fn file_len(&self) -> std::io::Result<u64>;
}

impl SessionSink for File {
    fn sync(&mut self) -> std::io::Result<()> {
        self.sync_data()
    }

    fn truncate(&mut self, len: u64) -> std::io::Result<()> {
        self.set_len(len)
    }

    fn file_len(&self) -> std::io::Result<u64> {
        Ok(self.metadata()?.len())
    }
}

/// What loading a session file found.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct LoadReport {
    /// The entries of the current conversation (after the last reset), in order.
    pub entries: Vec<Entry>,
    /// A torn last line that was cut off: (1-based line number, its byte length).
    pub torn_tail: Option<(usize, usize)>,
    /// Lines that did not parse and were skipped: (1-based line number, why).
    pub skipped: Vec<(usize, String)>,
    /// Whether this open started the file: it was missing or empty, or held only a session header torn while
    /// it was being created.
    pub created: bool,
}

/// An open session file.
///
/// # Threads and cloning
/// Not cloneable; `Send`. The agent keeps it behind a lock. The file is locked (`flock`, exclusive) while
/// the `Session` lives: another `Session::open` of it, from this process or another, fails.
#[derive(Debug)]
pub struct Session {
    path: PathBuf,
    sink: Box<dyn SessionSink>,
    /// The exclusive lock, on a second handle of the same open file; released on drop.
    _lock: Flock<File>,
    /// Length of the file up to its last good line, where a failed write is cut back to; `None` when
    /// unknown (a write went after a failed cut and the length could not be read).
    good_len: Option<u64>,
    /// A failed write may have left part of a line after `good_len` that could not be cut off.
    torn: bool,
    report: LoadReport,
}

fn io(context: String) -> impl FnOnce(std::io::Error) -> Error {
    move |source| Error::Io { context, source }
}

/// Take the exclusive lock on a second handle of `file` (so the writer stays a plain `File`).
fn lock_exclusive(file: &File, shown: &str) -> Result<Flock<File>> {
    let handle = file.try_clone().map_err(io(format!("opening session {shown}")))?;
    Flock::lock(handle, FlockArg::LockExclusiveNonblock).map_err(|(_, errno)| {
        let context = format!(
            "session {shown} is in use: another tooloop agent (in this or another process) has it open; \
             close that one or use another session file"
        );
        if errno == nix::errno::Errno::EWOULDBLOCK {
            refused(context, ErrorKind::WouldBlock, "locked")
        } else {
            Error::Io { context, source: std::io::Error::from(errno) }
        }
    })
}

fn refused(context: String, kind: ErrorKind, why: &str) -> Error {
    Error::Io { context, source: std::io::Error::new(kind, why.to_string()) }
}

impl Session {
    /// Open (or create) the session at `path`, loading what it holds. Missing parent folders are created
    /// (mode 0700) and so is a missing file (mode 0600).
    ///
    /// Fails with [`Error::Io`] when the file cannot be read or written, when it is not a tooloop session
    /// (no session header: it is left untouched), when it was written in a newer format version, or when
    /// another open `Session` (in any process) holds it.
    pub fn open(path: impl AsRef<Path>) -> Result<Session> {
        let path = path.as_ref().to_path_buf();
        let shown = path.display().to_string();
        if let Some(parent) = path.parent().filter(|p| !p.as_os_str().is_empty()) {
            DirBuilder::new()
                .recursive(true)
                .mode(0o700)
                .create(parent)
                .map_err(io(format!("creating the folder of session {shown}")))?;
        }
        let mut file = OpenOptions::new()
            .read(true)
            .append(true)
            .create(true)
            .mode(0o600)
            .open(&path)
            .map_err(io(format!("opening session {shown}")))?;
        let lock = lock_exclusive(&file, &shown)?;
        let (mut report, layout) = read_lines(&mut file, &shown)?;
        let len = file.metadata().map_err(io(format!("reading session {shown}")))?.len();
        let mut good_len = layout.good_len;
        if good_len < len {
            // Cut the torn tail so the next line starts on a line of its own.
            file.set_len(good_len).map_err(io(format!("repairing the torn last line of {shown}")))?;
        }
        file.seek(SeekFrom::End(0)).map_err(io(format!("seeking in {shown}")))?;
        if layout.unterminated {
            // A complete last line that lost its newline is kept: end it, so the next line is not glued on.
            file.write_all(b"\n")
                .and_then(|()| file.sync_data())
                .map_err(io(format!("ending the last line of {shown}")))?;
            good_len += 1;
        }
        let mut session = Session {
            path,
            sink: Box::new(file),
            _lock: lock,
            good_len: Some(good_len),
            torn: false,
            report: LoadReport::default(),
        };
        if !layout.has_header {
            report.created = true;
            session.write_line(&json!({"type": "session", "version": SESSION_VERSION, "created_at": now_ms()}))?;
        }
        session.report = report;
        Ok(session)
    }

    /// Put `wrap` around the writer the session appends through (a test seam: a writer that fails like a
    /// full disk). The lock stays held.
    pub fn map_sink(mut self, wrap: impl FnOnce(Box<dyn SessionSink>) -> Box<dyn SessionSink>) -> Session {
        let sink = std::mem::replace(&mut self.sink, Box::new(NoSink));
        self.sink = wrap(sink);
        self
    }

    /// Read a session file without opening it for writing (and without taking its lock: reading what another
    /// agent is appending to is fine). Refuses, like [`Session::open`], a file that is not a tooloop session
    /// or was written in a newer format version.
    pub fn load(path: impl AsRef<Path>) -> Result<LoadReport> {
        let shown = path.as_ref().display().to_string();
        let mut file = File::open(path.as_ref()).map_err(io(format!("opening session {shown}")))?;
        Ok(read_lines(&mut file, &shown)?.0)
    }

    /// Write `entries` (those still streaming are left out) as a complete session file at `path`, replacing
    /// any file there atomically: a temporary file beside it is written and fsynced, then renamed over it,
    /// so a crash leaves either the old file or the new one. The new file is 0600. Fails with [`Error::Io`]
    /// when another open `Session` holds the file at `path` (its later lines would go to the replaced file).
    pub fn save(path: impl AsRef<Path>, entries: &[Entry]) -> Result<()> {
        let path = path.as_ref();
        let Some(name) = path.file_name() else {
            return Err(Error::Config(format!("session path {} does not name a file", path.display())));
        };
        let mut tmp_name = name.to_os_string();
        tmp_name.push(format!(".tmp-{}", std::process::id()));
        let tmp = path.with_file_name(tmp_name);
        // Replacing a file another session appends to would send its later lines to an unlinked file.
        let _held = match File::open(path) {
            Ok(existing) => Some(lock_exclusive(&existing, &path.display().to_string())?),
            Err(_) => None,
        };
        let _ = std::fs::remove_file(&tmp);
        let written = (|| {
            let mut session = Session::open(&tmp)?;
            for entry in entries.iter().filter(|e| e.status != crate::conversation::EntryStatus::Streaming) {
                session.append(entry)?;
            }
            drop(session);
            std::fs::rename(&tmp, path).map_err(io(format!("replacing session {}", path.display())))
        })();
        if written.is_err() {
            let _ = std::fs::remove_file(&tmp);
        }
        written
    }

    /// The path.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// What opening found (entries, torn tail, skipped lines).
    pub fn report(&self) -> &LoadReport {
        &self.report
    }

    /// Take the load report (the entries move out; used when the agent adopts them).
    pub fn take_report(&mut self) -> LoadReport {
        std::mem::take(&mut self.report)
    }

    /// Append one finished entry, durably.
    pub fn append(&mut self, entry: &Entry) -> Result<()> {
        let kind = if crate::conversation::compacted::Compaction::of(entry).is_some() { "compaction" } else { "entry" };
        self.write_line(&json!({"type": kind, "entry": entry}))
    }

    /// Record that the conversation was cleared.
    pub fn append_reset(&mut self) -> Result<()> {
        self.write_line(&json!({"type": "reset", "at": now_ms()}))
    }

    fn write_line(&mut self, v: &Value) -> Result<()> {
        let mut line = serde_json::to_vec(v).map_err(|e| Error::Config(format!("entry not serializable: {e}")))?;
        line.push(b'\n');
        let shown = self.path.display().to_string();
        if self.torn {
            // An earlier failed write left part of a line behind: cut it now, or else start on a fresh line
            // (the fragment then reads as one skipped line, and this entry stays whole).
            match self.good_len {
                Some(len) if self.sink.truncate(len).is_ok() => self.torn = false,
                _ => line.insert(0, b'\n'),
            }
        }
        let written = self.sink.write_all(&line).and_then(|()| self.sink.flush()).and_then(|()| self.sink.sync());
        match written {
            Ok(()) => {
                self.good_len = match (self.torn, self.good_len) {
                    (false, Some(len)) => Some(len + line.len() as u64),
                    _ => self.sink.file_len().ok(),
                };
                self.torn = false;
                Ok(())
            }
            Err(e) => {
                // Leave the file as it was: a half-written line must not swallow the next one.
                self.torn = !matches!(self.good_len, Some(len) if self.sink.truncate(len).is_ok());
                Err(Error::Io { context: format!("writing session {shown}"), source: e })
            }
        }
    }
}

/// The placeholder while [`Session::map_sink`] swaps the writer; never written to.
#[derive(Debug)]
struct NoSink;

impl Write for NoSink {
    fn write(&mut self, _: &[u8]) -> std::io::Result<usize> {
        Err(ErrorKind::Unsupported.into())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

impl SessionSink for NoSink {
    fn sync(&mut self) -> std::io::Result<()> {
        Ok(())
    }

    fn truncate(&mut self, _: u64) -> std::io::Result<()> {
        Err(ErrorKind::Unsupported.into())
    }

    fn file_len(&self) -> std::io::Result<u64> {
        Err(ErrorKind::Unsupported.into())
    }
}

/// Entries as a session's records give them: `e` after `entries`, or in place of the entry of its id (`at`:
/// where each id is), which changed after it finished (a turn a policy left out as an error entry).
pub(crate) fn replace_or_push(entries: &mut Vec<Entry>, at: &mut std::collections::HashMap<String, usize>, e: Entry) {
    match at.get(&e.id) {
        Some(&i) => entries[i] = e,
        None => {
            at.insert(e.id.clone(), entries.len());
            entries.push(e);
        }
    }
}

/// The shape of a file's lines, beyond what they hold.
struct Layout {
    /// Byte length of the well-formed prefix (up to the end of the last line kept).
    good_len: u64,
    /// The last line kept has no trailing newline.
    unterminated: bool,
    /// The file starts with a session header (else it is empty, or holds only a header torn at creation).
    has_header: bool,
}

/// Parse the lines; returns the report and the layout. Refuses (without touching the file) one that is not a
/// tooloop session or was written in a format version this build does not know.
fn read_lines(file: &mut File, shown: &str) -> Result<(LoadReport, Layout)> {
    file.seek(SeekFrom::Start(0)).map_err(io(format!("seeking in {shown}")))?;
    let mut reader = BufReader::new(file);
    let mut report = LoadReport::default();
    let mut layout = Layout { good_len: 0, unterminated: false, has_header: false };
    let mut buf = Vec::new();
    let mut line_no = 0;
    // Where each entry id is in `report.entries`: a later line of the same id replaces it.
    let mut at: std::collections::HashMap<String, usize> = std::collections::HashMap::new();
    loop {
        buf.clear();
        let n = reader.read_until(b'\n', &mut buf).map_err(io(format!("reading session {shown}")))?;
        if n == 0 {
            break;
        }
        line_no += 1;
        let complete = buf.last() == Some(&b'\n');
        let parsed: std::result::Result<Value, String> = serde_json::from_slice(&buf).map_err(|e| e.to_string());
        let blank = buf.iter().all(u8::is_ascii_whitespace);
        if !complete && !matches!(parsed, Ok(Value::Object(_))) {
            // No newline and not a whole JSON object: a crash tore this line.
            let header_like = HEADER_START.starts_with(&buf) || buf.starts_with(HEADER_START);
            if !(layout.has_header || blank || header_like) {
                return Err(not_a_session(shown));
            }
            report.torn_tail = Some((line_no, n));
            break;
        }
        // A JSON object without its newline is whole (no prefix of an object parses): kept, not cut.
        layout.unterminated = !complete;
        layout.good_len += n as u64;
        if blank {
            continue;
        }
        if !layout.has_header {
            check_header(parsed.as_ref().ok(), shown)?;
            layout.has_header = true;
            continue;
        }
        let v = match parsed {
            Ok(v) => v,
            Err(e) => {
                report.skipped.push((line_no, e));
                continue;
            }
        };
        match v.get("type").and_then(Value::as_str) {
            Some("entry" | "compaction") => match v.get("entry").cloned().map(serde_json::from_value::<Entry>) {
                Some(Ok(e)) => replace_or_push(&mut report.entries, &mut at, e),
                Some(Err(e)) => report.skipped.push((line_no, format!("invalid entry: {e}"))),
                None => report.skipped.push((line_no, "entry line without \"entry\"".into())),
            },
            Some("reset") => {
                report.entries.clear();
                at.clear();
            }
            Some("session") => {}
            other => report.skipped.push((line_no, format!("unknown line type {other:?}"))),
        }
    }
    Ok((report, layout))
}

fn not_a_session(shown: &str) -> Error {
    refused(
        format!("{shown} is not a tooloop session"),
        ErrorKind::InvalidData,
        "its first line is not a session header such as {\"type\":\"session\",\"version\":1}; \
         refusing to read or append to it",
    )
}

/// The first line must be a session header of a version this build reads.
fn check_header(first: Option<&Value>, shown: &str) -> Result<()> {
    let Some(header) = first.filter(|v| v.get("type").and_then(Value::as_str) == Some("session")) else {
        return Err(not_a_session(shown));
    };
    match header.get("version").and_then(Value::as_u64) {
        Some(SESSION_VERSION) => Ok(()),
        Some(v) if v > SESSION_VERSION => Err(refused(
            format!("session {shown} has format version {v}"),
            ErrorKind::InvalidData,
            &format!(
                "it was written by a newer tooloop (this one reads version {SESSION_VERSION}); upgrade tooloop to open it"
            ),
        )),
        _ => Err(refused(
            format!("session {shown} has an unknown format version {}", header.get("version").unwrap_or(&Value::Null)),
            ErrorKind::InvalidData,
            &format!("this tooloop reads version {SESSION_VERSION}"),
        )),
    }
}
