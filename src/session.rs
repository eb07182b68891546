//! Sessions: one append-only JSONL file per conversation, written as entries finish.
//!
//! Format (version 1), one JSON object per line:
//! - first line: `{"type":"session","version":1,"created_at":<ms>}`
//! - `{"type":"entry","entry":{...}}` — a finished conversation entry ([`Entry`]), in order
//! - `{"type":"reset","at":<ms>}` — the conversation was cleared; entries before it are history only
//!
//! Every line is flushed and fsynced before the next request goes out. Loading keeps every complete line;
//! a last line torn by a crash is reported and cut off (so new lines never glue onto it); a line in the
//! middle that does not parse is reported and skipped. Must never: write a secret (entries hold none).

use std::fs::{File, OpenOptions};
use std::io::{BufRead, BufReader, Seek, SeekFrom, Write};
use std::path::{Path, PathBuf};

use serde_json::{Value, json};

use crate::conversation::{Entry, now_ms};
use crate::error::{Error, Result};

/// What loading a session file found.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct LoadReport {
    /// The entries of the current conversation (after the last reset), in order.
    pub entries: Vec<Entry>,
    /// A torn last line that was cut off: (1-based line number, its byte length).
    pub torn_tail: Option<(usize, usize)>,
    /// Lines that did not parse and were skipped: (1-based line number, why).
    pub skipped: Vec<(usize, String)>,
    /// Whether the file was created by this open.
    pub created: bool,
}

/// An open session file.
///
/// # Threads and cloning
/// Not cloneable; `Send`. The agent keeps it behind a lock.
#[derive(Debug)]
pub struct Session {
    path: PathBuf,
    file: File,
    report: LoadReport,
}

fn io(context: String) -> impl FnOnce(std::io::Error) -> Error {
    move |source| Error::Io { context, source }
}

impl Session {
    /// Open (or create) the session at `path`, loading what it holds. Parent folders are created.
    pub fn open(path: impl AsRef<Path>) -> Result<Session> {
        let path = path.as_ref().to_path_buf();
        let shown = path.display().to_string();
        if let Some(parent) = path.parent().filter(|p| !p.as_os_str().is_empty()) {
            std::fs::create_dir_all(parent).map_err(io(format!("creating the folder of session {shown}")))?;
        }
        let mut file = OpenOptions::new()
            .read(true)
            .append(true)
            .create(true)
            .open(&path)
            .map_err(io(format!("opening session {shown}")))?;
        let (mut report, good_len) = read_lines(&mut file, &shown)?;
        let len = file.metadata().map_err(io(format!("reading session {shown}")))?.len();
        if good_len < len {
            // Cut the torn tail so the next line starts on a line of its own.
            file.set_len(good_len).map_err(io(format!("repairing the torn last line of {shown}")))?;
        }
        file.seek(SeekFrom::End(0)).map_err(io(format!("seeking in {shown}")))?;
        let mut session = Session { path, file, report: LoadReport::default() };
        if good_len == 0 {
            report.created = true;
            session.write_line(&json!({"type": "session", "version": 1, "created_at": now_ms()}))?;
        }
        session.report = report;
        Ok(session)
    }

    /// Read a session file without opening it for writing.
    pub fn load(path: impl AsRef<Path>) -> Result<LoadReport> {
        let shown = path.as_ref().display().to_string();
        let mut file = File::open(path.as_ref()).map_err(io(format!("opening session {shown}")))?;
        Ok(read_lines(&mut file, &shown)?.0)
    }

    /// Write `entries` (those still streaming are left out) as a complete session file at `path`, replacing
    /// any file there atomically: a temporary file beside it is written and fsynced, then renamed over it,
    /// so a crash leaves either the old file or the new one.
    pub fn save(path: impl AsRef<Path>, entries: &[Entry]) -> Result<()> {
        let path = path.as_ref();
        let Some(name) = path.file_name() else {
            return Err(Error::Config(format!("session path {} does not name a file", path.display())));
        };
        let mut tmp_name = name.to_os_string();
        tmp_name.push(format!(".tmp-{}", std::process::id()));
        let tmp = path.with_file_name(tmp_name);
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
        self.write_line(&json!({"type": "entry", "entry": entry}))
    }

    /// Record that the conversation was cleared.
    pub fn append_reset(&mut self) -> Result<()> {
        self.write_line(&json!({"type": "reset", "at": now_ms()}))
    }

    fn write_line(&mut self, v: &Value) -> Result<()> {
        let mut line = serde_json::to_vec(v).map_err(|e| Error::Config(format!("entry not serializable: {e}")))?;
        line.push(b'\n');
        let shown = self.path.display().to_string();
        self.file.write_all(&line).map_err(io(format!("writing session {shown}")))?;
        self.file.flush().map_err(io(format!("flushing session {shown}")))?;
        self.file.sync_data().map_err(io(format!("syncing session {shown}")))
    }
}

/// Parse the lines; returns the report and the byte length of the well-formed prefix.
fn read_lines(file: &mut File, shown: &str) -> Result<(LoadReport, u64)> {
    file.seek(SeekFrom::Start(0)).map_err(io(format!("seeking in {shown}")))?;
    let mut reader = BufReader::new(file);
    let mut report = LoadReport::default();
    let mut good_len: u64 = 0;
    let mut buf = Vec::new();
    let mut line_no = 0;
    loop {
        buf.clear();
        let n = reader.read_until(b'\n', &mut buf).map_err(io(format!("reading session {shown}")))?;
        if n == 0 {
            break;
        }
        line_no += 1;
        let complete = buf.last() == Some(&b'\n');
        let parsed: std::result::Result<Value, String> = serde_json::from_slice(&buf).map_err(|e| e.to_string());
        if !complete {
            // No newline: a crash tore this line, even if its bytes happen to parse.
            report.torn_tail = Some((line_no, n));
            break;
        }
        good_len += n as u64;
        let v = match parsed {
            Ok(v) => v,
            Err(e) if buf.iter().all(u8::is_ascii_whitespace) => {
                let _ = e;
                continue;
            }
            Err(e) => {
                report.skipped.push((line_no, e));
                continue;
            }
        };
        match v.get("type").and_then(Value::as_str) {
            Some("entry") => match v.get("entry").cloned().map(serde_json::from_value::<Entry>) {
                Some(Ok(e)) => report.entries.push(e),
                Some(Err(e)) => report.skipped.push((line_no, format!("invalid entry: {e}"))),
                None => report.skipped.push((line_no, "entry line without \"entry\"".into())),
            },
            Some("reset") => report.entries.clear(),
            Some("session") => {}
            other => report.skipped.push((line_no, format!("unknown line type {other:?}"))),
        }
    }
    Ok((report, good_len))
}
