//! The session store seam: where an agent's finished entries, compaction records and resets go.
//!
//! The loop writes through [`SessionStore`] and knows nothing else of storage. Two stores implement it: the
//! JSONL file ([`crate::session::Session`], the default) and a session of a SQLite database
//! ([`crate::session_sqlite::SqliteSession`]). Both keep the same promises: records appended in order and
//! durable before the next request goes out; a crash loses at most the record being written; a store that
//! is not tooloop's, or is in a newer format, is refused untouched; a second writer of one session fails
//! clearly; no secret is stored.
//!
//! The `session` option names either ([`Location::parse`]): a path ending in `.db`, `.sqlite` or `.sqlite3`
//! followed by `#<id>` is a session of that database; anything else is a JSONL file. [`migrate`] copies a
//! session from one to the other, record for record.
//! Must never: decide anything about the conversation (that is the agent's), or hold a session open itself.

use std::path::{Path, PathBuf};

use serde_json::Value;

use crate::conversation::Entry;
use crate::error::{Error, Result};
use crate::session::{LoadReport, Session};
use crate::session_sqlite::{Record, SqliteSession};

/// Where a session's records go. Implemented by the JSONL [`Session`] and by [`SqliteSession`].
///
/// Each method returns only once what it wrote is durable (fsynced); a failed write leaves the store as it
/// was before the call.
pub trait SessionStore: Send + std::fmt::Debug {
    /// How the session is named: a file path, or `db#id`.
    fn location(&self) -> String;
    /// What opening found (the entries move out; called once, when the agent adopts them).
    fn take_report(&mut self) -> LoadReport;
    /// Append one finished entry (a compaction record is an entry whose `meta.compaction` says so).
    fn append(&mut self, entry: &Entry) -> Result<()>;
    /// Record that the conversation was cleared.
    fn append_reset(&mut self) -> Result<()>;
}

impl SessionStore for Session {
    fn location(&self) -> String {
        self.path().display().to_string()
    }

    fn take_report(&mut self) -> LoadReport {
        Session::take_report(self)
    }

    fn append(&mut self, entry: &Entry) -> Result<()> {
        Session::append(self, entry)
    }

    fn append_reset(&mut self) -> Result<()> {
        Session::append_reset(self)
    }
}

impl SessionStore for SqliteSession {
    fn location(&self) -> String {
        SqliteSession::location(self)
    }

    fn take_report(&mut self) -> LoadReport {
        SqliteSession::take_report(self)
    }

    fn append(&mut self, entry: &Entry) -> Result<()> {
        SqliteSession::append(self, entry)
    }

    fn append_reset(&mut self) -> Result<()> {
        SqliteSession::append_reset(self)
    }
}

/// What a `session` option names.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Location {
    /// A JSONL session file.
    File(PathBuf),
    /// Session `id` of the SQLite database `db`.
    Database {
        /// The database file.
        db: PathBuf,
        /// The session id (after the `#`).
        id: String,
    },
}

/// The file name endings that make a path a database.
pub const DB_SUFFIXES: [&str; 3] = [".db", ".sqlite", ".sqlite3"];

fn is_db(path: &str) -> bool {
    DB_SUFFIXES.iter().any(|s| path.ends_with(s))
}

impl Location {
    /// Read a `session` option: `runs/sessions.db#task-17` names session `task-17` of `runs/sessions.db`;
    /// anything else is a JSONL file. Fails with [`Error::Config`] for a database path without a session id
    /// (`runs/sessions.db`, `runs/sessions.db#`): a JSONL file by that name would only confuse.
    pub fn parse(spec: impl AsRef<Path>) -> Result<Location> {
        let spec = spec.as_ref();
        let Some(text) = spec.to_str() else { return Ok(Location::File(spec.to_path_buf())) };
        // The first `#` that ends a database path: folders may hold `#`, and so may ids.
        let split = text.match_indices('#').map(|(i, _)| (&text[..i], &text[i + 1..])).find(|(db, _)| is_db(db));
        if let Some((db, id)) = split {
            if id.is_empty() {
                return Err(Error::Config(format!(
                    "session {text:?} names a database but no session id: write {db}#<id>"
                )));
            }
            return Ok(Location::Database { db: PathBuf::from(db), id: id.to_string() });
        }
        if is_db(text) {
            return Err(Error::Config(format!(
                "session {text:?} names a database but no session id: write {text}#<id> (a session file ends in .jsonl)"
            )));
        }
        Ok(Location::File(spec.to_path_buf()))
    }
}

impl std::fmt::Display for Location {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Location::File(p) => write!(f, "{}", p.display()),
            Location::Database { db, id } => write!(f, "{}#{id}", db.display()),
        }
    }
}

/// Open (or create) the session `spec` names, loading what it holds. `workspace` (default: the current
/// folder, where the built-in tools work without one) is recorded with a new database session, for listing;
/// a JSONL file does not record it. Fails like [`Session::open`] or [`SqliteSession::open`].
pub fn open(spec: impl AsRef<Path>, workspace: Option<&Path>) -> Result<Box<dyn SessionStore>> {
    Ok(match Location::parse(spec)? {
        Location::File(path) => Box::new(Session::open(path)?),
        Location::Database { db, id } => {
            let workspace = workspace.map(Path::to_path_buf).or_else(|| std::env::current_dir().ok());
            Box::new(SqliteSession::open(db, &id, workspace.as_deref())?)
        }
    })
}

/// Read the session `spec` names without opening it for writing.
pub fn load(spec: impl AsRef<Path>) -> Result<LoadReport> {
    match Location::parse(spec)? {
        Location::File(path) => Session::load(path),
        Location::Database { db, id } => SqliteSession::load(db, &id),
    }
}

/// Every record of a session file, resets included (what [`Session::load`] folds into the current
/// conversation), and when the file was created (ms since the epoch, from its header).
fn file_records(path: &Path) -> Result<(Vec<Record>, Option<u64>)> {
    Session::load(path)?; // refuses a foreign or newer file
    let text =
        std::fs::read(path).map_err(|source| Error::Io { context: format!("reading {}", path.display()), source })?;
    let (mut records, mut created) = (Vec::new(), None);
    for line in text.split(|b| *b == b'\n') {
        let Ok(v) = serde_json::from_slice::<Value>(line) else { continue };
        match v.get("type").and_then(Value::as_str) {
            Some("session") => created = v.get("created_at").and_then(Value::as_u64),
            Some("entry" | "compaction") => {
                if let Some(Ok(e)) = v.get("entry").cloned().map(serde_json::from_value::<Entry>) {
                    records.push(Record::Entry(e));
                }
            }
            Some("reset") => records.push(Record::Reset(v.get("at").and_then(Value::as_u64).unwrap_or(0))),
            _ => {}
        }
    }
    Ok((records, created))
}

/// Copy the session `from` names to a new session `to` names (a JSONL file into a database session, or
/// back), record for record: every entry, compaction record and reset, in order, so the conversation the API
/// sees is the same, byte for byte. Returns how many records were copied. Fails with [`Error::Config`] when
/// `to` already holds a session (nothing is written then), and like [`open`] and [`load`].
pub fn migrate(from: impl AsRef<Path>, to: impl AsRef<Path>) -> Result<usize> {
    let (records, created) = match Location::parse(from.as_ref())? {
        Location::File(path) => file_records(&path)?,
        Location::Database { db, id } => (SqliteSession::records(&db, &id)?.records, None),
    };
    let to_loc = Location::parse(to.as_ref())?;
    let exists = match &to_loc {
        Location::File(path) => std::fs::metadata(path).map(|m| m.len() > 0).unwrap_or(false),
        Location::Database { db, id } => {
            crate::session_sqlite::list(db).map(|rows| rows.iter().any(|r| &r.id == id)).unwrap_or(false)
        }
    };
    if exists {
        return Err(Error::Config(format!("{to_loc} already holds a session; migrate into a new one")));
    }
    let mut store: Box<dyn SessionStore> = match &to_loc {
        Location::File(path) => Box::new(Session::open(path)?),
        Location::Database { db, id } => {
            let mut s = SqliteSession::open(db, id, None)?;
            if let Some(ms) = created {
                s.set_created_at(ms)?;
            }
            Box::new(s)
        }
    };
    for record in &records {
        match record {
            Record::Entry(e) => store.append(e)?,
            Record::Reset(_) => store.append_reset()?,
        }
    }
    Ok(records.len())
}
