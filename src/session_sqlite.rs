//! Sessions in SQLite: many sessions in one database file, each an ordered list of records, with the same
//! guarantees as the JSONL file ([`crate::session`]).
//!
//! Schema (version 1; `PRAGMA application_id` is [`APPLICATION_ID`], "tool"):
//! - `tooloop_schema(version)` — one row, the schema version;
//! - `sessions(id, created_at, workspace, writer_pid, writer_start, writer_token)` — one row per session; the
//!   `writer_*` columns name the process that has it open for writing (NULL when none does);
//! - `entries(session_id, seq, kind, role, entry, at)` — the records, in order (`seq` from 1): `kind` is
//!   `entry`, `compaction` or `reset` (as the JSONL line types), `entry` the [`Entry`] as JSON text (NULL for a
//!   reset), `at` milliseconds since the epoch.
//!
//! Durability: WAL mode with `synchronous=FULL`, so each append is a transaction whose commit fsyncs the WAL
//! before [`SqliteSession::append`] returns (with `NORMAL`, a power loss may roll back the last commits). A
//! crash (kill -9) loses at most the transaction being written: SQLite rolls it back, whole. A write that
//! fails (a full disk) rolls back its transaction: the database stays as it was.
//!
//! One writer per session: opening claims the session's row (pid, process start time, a token) in a write
//! transaction, so two claims serialize on SQLite's own lock. A claim held by a live process (this one
//! included) is refused; one left by a process that is gone (kill -9, a crash) is taken over, so a crashed
//! writer never blocks the next open. Each append checks the claim in the same statement, so a writer whose
//! claim was taken over fails instead of interleaving. Other sessions of the database are usable at the same
//! time: writers wait for each other's short transactions (busy timeout), not for each other's sessions.
//!
//! Must never: touch a database that is not tooloop's (checked from the file's header bytes before SQLite
//! opens it) or that has a newer schema version, or store a secret (entries hold none).

use std::fs::{DirBuilder, OpenOptions};
use std::io::{ErrorKind, Read};
use std::os::unix::fs::{DirBuilderExt, OpenOptionsExt};
use std::path::{Path, PathBuf};
use std::time::Duration;

use rusqlite::{Connection, OpenFlags, OptionalExtension, TransactionBehavior, params};
use serde_json::Value;

use crate::conversation::{Entry, now_ms};
use crate::error::{Error, Result};
use crate::session::LoadReport;

/// The schema version this build writes and reads.
pub const SCHEMA_VERSION: i64 = 1;

/// `PRAGMA application_id` of a tooloop database: the bytes "tool".
pub const APPLICATION_ID: i32 = 0x746f_6f6c;

/// How long a writer waits for another connection's transaction before failing (appends are short; 64
/// writers at once queue for milliseconds each).
const BUSY_TIMEOUT: Duration = Duration::from_secs(60);

const SCHEMA: &str = "
CREATE TABLE IF NOT EXISTS tooloop_schema (version INTEGER NOT NULL);
CREATE TABLE IF NOT EXISTS sessions (
    id           TEXT PRIMARY KEY,
    created_at   INTEGER NOT NULL,
    workspace    TEXT,
    writer_pid   INTEGER,
    writer_start INTEGER,
    writer_token TEXT
);
CREATE TABLE IF NOT EXISTS entries (
    session_id TEXT NOT NULL REFERENCES sessions(id),
    seq        INTEGER NOT NULL,
    kind       TEXT NOT NULL CHECK (kind IN ('entry', 'compaction', 'reset')),
    role       TEXT,
    entry      TEXT CHECK (entry IS NULL OR json_valid(entry)),
    at         INTEGER NOT NULL,
    PRIMARY KEY (session_id, seq)
);
";

/// One record of a session, in order: what a JSONL line holds, without the header.
#[derive(Clone, Debug, PartialEq)]
#[allow(clippy::large_enum_variant)] // nearly every record is an entry: boxing would only add an allocation
pub enum Record {
    /// A finished conversation entry (a compaction record is an entry whose `meta.compaction` says so).
    Entry(Entry),
    /// The conversation was cleared at this time (ms since the epoch).
    Reset(u64),
}

/// Every record of a session, and those that did not parse.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Records {
    /// The records, in order (resets included).
    pub records: Vec<Record>,
    /// Records that did not parse and were skipped: (seq, why).
    pub skipped: Vec<(usize, String)>,
}

/// A session of a database, as listed by [`list`].
#[derive(Clone, Debug, PartialEq)]
pub struct SessionRow {
    /// The session id.
    pub id: String,
    /// When it was created, ms since the epoch.
    pub created_at: u64,
    /// The workspace of the agent that created it, if known.
    pub workspace: Option<String>,
    /// How many records it holds (entries, compactions and resets).
    pub records: u64,
    /// When its last record was written, ms since the epoch (`created_at` when it has none).
    pub updated_at: u64,
}

/// An open session in a database.
///
/// # Threads and cloning
/// Not cloneable; `Send`. The agent keeps it behind a lock. It holds the session's writer claim while it
/// lives: another [`SqliteSession::open`] of the same id, from this process or another, fails; other ids of
/// the same database open freely.
#[derive(Debug)]
pub struct SqliteSession {
    conn: Connection,
    db: PathBuf,
    id: String,
    token: String,
    next_seq: i64,
    report: LoadReport,
}

fn io(context: String) -> impl FnOnce(std::io::Error) -> Error {
    move |source| Error::Io { context, source }
}

fn db_err(context: String) -> impl FnOnce(rusqlite::Error) -> Error {
    move |e| {
        let kind = match e.sqlite_error_code() {
            Some(rusqlite::ErrorCode::DiskFull) => ErrorKind::StorageFull,
            // Distinct from WouldBlock (a session held by another writer): this one is worth retrying.
            Some(rusqlite::ErrorCode::DatabaseBusy | rusqlite::ErrorCode::DatabaseLocked) => ErrorKind::ResourceBusy,
            Some(rusqlite::ErrorCode::ReadOnly | rusqlite::ErrorCode::PermissionDenied) => ErrorKind::PermissionDenied,
            _ => ErrorKind::Other,
        };
        Error::Io { context, source: std::io::Error::new(kind, e.to_string()) }
    }
}

fn refused(context: String, kind: ErrorKind, why: &str) -> Error {
    Error::Io { context, source: std::io::Error::new(kind, why.to_string()) }
}

/// `db#id`, as sessions of a database are named.
fn shown(db: &Path, id: &str) -> String {
    format!("{}#{id}", db.display())
}

/// What the file at `db` is, judged from its first 100 bytes (the SQLite header) without opening it.
enum FileKind {
    /// Missing or empty: a database to create.
    Empty,
    /// A SQLite database whose application id is tooloop's.
    Ours,
}

fn check_file(db: &Path) -> Result<FileKind> {
    let shown = db.display().to_string();
    let mut file = match std::fs::File::open(db) {
        Ok(f) => f,
        Err(e) if e.kind() == ErrorKind::NotFound => return Ok(FileKind::Empty),
        Err(e) => return Err(Error::Io { context: format!("opening session database {shown}"), source: e }),
    };
    let mut header = [0u8; 100];
    let mut n = 0;
    while n < header.len() {
        match file.read(&mut header[n..]) {
            Ok(0) => break,
            Ok(k) => n += k,
            Err(e) if e.kind() == ErrorKind::Interrupted => {}
            Err(e) => return Err(Error::Io { context: format!("reading session database {shown}"), source: e }),
        }
    }
    if n == 0 {
        return Ok(FileKind::Empty);
    }
    let sqlite = n == 100 && header.starts_with(b"SQLite format 3\0");
    let app_id = i32::from_be_bytes([header[68], header[69], header[70], header[71]]);
    if sqlite && app_id == APPLICATION_ID {
        return Ok(FileKind::Ours);
    }
    let what = if sqlite { "a SQLite database of another application" } else { "not a SQLite database" };
    Err(refused(
        format!("{shown} is not a tooloop session database"),
        ErrorKind::InvalidData,
        &format!("it is {what}; refusing to read or write it"),
    ))
}

/// Open a connection to a tooloop database (creating it, 0600 in 0700 folders, when missing or empty), in
/// WAL mode with `synchronous=FULL`, its schema checked. Refuses, untouched, a file that is not a tooloop
/// database or one with a newer schema.
fn connect(db: &Path, create: bool) -> Result<Connection> {
    let shown = db.display().to_string();
    let kind = check_file(db)?;
    if matches!(kind, FileKind::Empty) {
        if !create {
            return Err(refused(
                format!("opening session database {shown}"),
                ErrorKind::NotFound,
                "no such database (or it is empty)",
            ));
        }
        if let Some(parent) = db.parent().filter(|p| !p.as_os_str().is_empty()) {
            DirBuilder::new()
                .recursive(true)
                .mode(0o700)
                .create(parent)
                .map_err(io(format!("creating the folder of session database {shown}")))?;
        }
        // SQLite would create it with the umask's mode; its -wal and -shm files take the database's mode.
        OpenOptions::new()
            .write(true)
            .create(true)
            .truncate(false)
            .mode(0o600)
            .open(db)
            .map_err(io(format!("creating session database {shown}")))?;
    }
    let flags = OpenFlags::SQLITE_OPEN_READ_WRITE | OpenFlags::SQLITE_OPEN_NO_MUTEX | OpenFlags::SQLITE_OPEN_URI;
    let mut conn =
        Connection::open_with_flags(db, flags).map_err(db_err(format!("opening session database {shown}")))?;
    conn.busy_timeout(BUSY_TIMEOUT).map_err(db_err(format!("opening session database {shown}")))?;
    if matches!(kind, FileKind::Empty) {
        // The application id and the schema go in in one transaction, before WAL mode: in rollback mode the
        // commit writes the header to the file itself, so another opener's header check sees it at once.
        let tx = conn
            .transaction_with_behavior(TransactionBehavior::Immediate)
            .map_err(db_err(format!("creating session database {shown}")))?;
        let app_id: i32 = tx
            .query_row("PRAGMA application_id", [], |r| r.get(0))
            .map_err(db_err(format!("reading session database {shown}")))?;
        let tables: i64 = tx
            .query_row("SELECT count(*) FROM sqlite_master", [], |r| r.get(0))
            .map_err(db_err(format!("reading session database {shown}")))?;
        if app_id == 0 && tables == 0 {
            tx.execute_batch(&format!("PRAGMA application_id = {APPLICATION_ID};{SCHEMA}"))
                .and_then(|()| tx.execute("INSERT INTO tooloop_schema (version) VALUES (?1)", [SCHEMA_VERSION]))
                .map_err(db_err(format!("creating session database {shown}")))?;
        } else if app_id != APPLICATION_ID {
            return Err(refused(
                format!("{shown} is not a tooloop session database"),
                ErrorKind::InvalidData,
                "another program created it while it was being opened; refusing to write it",
            ));
        }
        tx.commit().map_err(db_err(format!("creating session database {shown}")))?;
    }
    let version: Option<i64> =
        retry_busy(|| conn.query_row("SELECT max(version) FROM tooloop_schema", [], |r| r.get(0))).map_err(|e| {
            refused(
                format!("{shown} is not a tooloop session database"),
                ErrorKind::InvalidData,
                &format!("its schema version cannot be read ({e}); refusing to write it"),
            )
        })?;
    match version {
        Some(SCHEMA_VERSION) => {}
        Some(v) if v > SCHEMA_VERSION => {
            return Err(refused(
                format!("session database {shown} has schema version {v}"),
                ErrorKind::InvalidData,
                &format!(
                    "it was written by a newer tooloop (this one reads version {SCHEMA_VERSION}); upgrade tooloop to open it"
                ),
            ));
        }
        other => {
            return Err(refused(
                format!("session database {shown} has an unknown schema version {other:?}"),
                ErrorKind::InvalidData,
                &format!("this tooloop reads version {SCHEMA_VERSION}"),
            ));
        }
    }
    // WAL is a property of the file: set once, by whoever finds it unset (usually the creator).
    let mut mode: String = retry_busy(|| conn.query_row("PRAGMA journal_mode", [], |r| r.get(0)))
        .map_err(db_err(format!("opening session database {shown}")))?;
    if !mode.eq_ignore_ascii_case("wal") {
        mode = retry_busy(|| conn.query_row("PRAGMA journal_mode = WAL", [], |r| r.get(0)))
            .map_err(db_err(format!("opening session database {shown}")))?;
    }
    if !mode.eq_ignore_ascii_case("wal") {
        return Err(refused(
            format!("opening session database {shown}"),
            ErrorKind::Unsupported,
            &format!("WAL mode is not available on this filesystem (journal mode {mode})"),
        ));
    }
    conn.execute_batch("PRAGMA synchronous = FULL;").map_err(db_err(format!("opening session database {shown}")))?;
    Ok(conn)
}

/// Run `f` again while SQLite answers "busy" or "locked" without waiting in its busy handler (a journal-mode
/// change, a WAL recovery by another connection, a lock upgrade it refuses to wait for), for up to
/// [`BUSY_TIMEOUT`].
fn retry_busy<T>(mut f: impl FnMut() -> rusqlite::Result<T>) -> rusqlite::Result<T> {
    let deadline = std::time::Instant::now() + BUSY_TIMEOUT;
    let mut pause = Duration::from_millis(1);
    loop {
        match f() {
            Err(e)
                if matches!(
                    e.sqlite_error_code(),
                    Some(rusqlite::ErrorCode::DatabaseBusy | rusqlite::ErrorCode::DatabaseLocked)
                ) && std::time::Instant::now() < deadline =>
            {
                std::thread::sleep(pause);
                pause = (pause * 2).min(Duration::from_millis(50));
            }
            other => return other,
        }
    }
}

/// When the process `pid` started (clock ticks after boot, from /proc), to tell a live writer from a new
/// process that reuses a dead writer's pid. `None` where /proc does not say.
fn process_start(pid: u32) -> Option<i64> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // Field 22; the command name (field 2) is in parentheses and may hold spaces.
    let rest = &stat[stat.rfind(')')? + 1..];
    rest.split_whitespace().nth(19)?.parse().ok()
}

/// Whether the writer recorded as (`pid`, `start`) is still running.
fn alive(pid: i64, start: Option<i64>) -> bool {
    let Ok(raw) = i32::try_from(pid) else { return false };
    if raw <= 0 {
        return false;
    }
    match nix::sys::signal::kill(nix::unistd::Pid::from_raw(raw), None) {
        Ok(()) | Err(nix::errno::Errno::EPERM) => {}
        Err(_) => return false,
    }
    match (start, process_start(raw as u32)) {
        (Some(recorded), Some(now)) => recorded == now,
        _ => true,
    }
}

fn validate_id(id: &str, db: &Path) -> Result<()> {
    if id.is_empty() || id.len() > 512 || id.chars().any(char::is_control) {
        return Err(Error::Config(format!(
            "session id {id:?} in {} must be 1 to 512 characters without control characters",
            db.display()
        )));
    }
    Ok(())
}

fn read_records(conn: &Connection, id: &str, shown: &str) -> Result<(Records, i64)> {
    let mut stmt = conn
        .prepare("SELECT seq, kind, entry, at FROM entries WHERE session_id = ?1 ORDER BY seq")
        .map_err(db_err(format!("reading session {shown}")))?;
    let rows = stmt
        .query_map([id], |r| {
            Ok((r.get::<_, i64>(0)?, r.get::<_, String>(1)?, r.get::<_, Option<String>>(2)?, r.get::<_, i64>(3)?))
        })
        .map_err(db_err(format!("reading session {shown}")))?;
    let (mut records, mut skipped, mut last) = (Vec::new(), Vec::new(), 0);
    for row in rows {
        let (seq, kind, entry, at) = row.map_err(db_err(format!("reading session {shown}")))?;
        last = seq;
        match (kind.as_str(), entry) {
            ("reset", _) => records.push(Record::Reset(u64::try_from(at).unwrap_or(0))),
            (_, Some(text)) => match serde_json::from_str::<Entry>(&text) {
                Ok(e) => records.push(Record::Entry(e)),
                Err(e) => skipped.push((seq as usize, format!("invalid entry: {e}"))),
            },
            (_, None) => skipped.push((seq as usize, "entry record without an entry".into())),
        }
    }
    Ok((Records { records, skipped }, last))
}

/// The entries of the current conversation: everything after the last reset.
fn current(records: &[Record]) -> Vec<Entry> {
    let start = records.iter().rposition(|r| matches!(r, Record::Reset(_))).map_or(0, |i| i + 1);
    let (mut entries, mut at) = (Vec::new(), std::collections::HashMap::new());
    for r in &records[start..] {
        if let Record::Entry(e) = r {
            crate::session::replace_or_push(&mut entries, &mut at, e.clone());
        }
    }
    entries
}

impl SqliteSession {
    /// Open session `id` of the database at `db`, creating the database (0600, missing folders 0700) and the
    /// session as needed, and loading what it holds. `workspace` is recorded with a new session (for
    /// listing).
    ///
    /// Fails with [`Error::Io`] when the database cannot be read or written, when it is not a tooloop
    /// database or has a newer schema (left untouched), or when a live writer (in any process, this one
    /// included) has the session open; with [`Error::Config`] for an empty or malformed id.
    pub fn open(db: impl AsRef<Path>, id: &str, workspace: Option<&Path>) -> Result<SqliteSession> {
        // Opening is idempotent (the schema is created only where missing, the claim is one transaction), so
        // a "busy" that SQLite's busy handler does not wait out (many openers of a new database at once
        // racing to create it and switch it to WAL) is retried whole.
        let deadline = std::time::Instant::now() + BUSY_TIMEOUT;
        let mut pause = Duration::from_millis(1);
        loop {
            match Self::open_once(db.as_ref(), id, workspace) {
                Err(Error::Io { source, .. })
                    if source.kind() == ErrorKind::ResourceBusy && std::time::Instant::now() < deadline =>
                {
                    std::thread::sleep(pause);
                    pause = (pause * 2).min(Duration::from_millis(50));
                }
                other => return other,
            }
        }
    }

    fn open_once(db: &Path, id: &str, workspace: Option<&Path>) -> Result<SqliteSession> {
        let db = db.to_path_buf();
        validate_id(id, &db)?;
        let shown = shown(&db, id);
        let mut conn = connect(&db, true)?;
        let pid = std::process::id();
        let start = process_start(pid);
        let token = format!("{pid}-{}-{}", now_ms(), crate::conversation::new_id());
        let tx = conn
            .transaction_with_behavior(TransactionBehavior::Immediate)
            .map_err(db_err(format!("opening session {shown}")))?;
        let holder: Option<(Option<i64>, Option<i64>)> = tx
            .query_row("SELECT writer_pid, writer_start FROM sessions WHERE id = ?1", [id], |r| {
                Ok((r.get(0)?, r.get(1)?))
            })
            .optional()
            .map_err(db_err(format!("opening session {shown}")))?;
        let created = holder.is_none();
        match holder {
            Some((Some(other), other_start)) if alive(other, other_start) => {
                let who = if other == i64::from(pid) { "this process".to_string() } else { format!("process {other}") };
                return Err(refused(
                    format!(
                        "session {shown} is in use: another tooloop agent ({who}) has it open; close that one or \
                         use another session id"
                    ),
                    ErrorKind::WouldBlock,
                    "locked",
                ));
            }
            Some(_) => {
                tx.execute(
                    "UPDATE sessions SET writer_pid = ?2, writer_start = ?3, writer_token = ?4 WHERE id = ?1",
                    params![id, pid, start, token],
                )
                .map_err(db_err(format!("opening session {shown}")))?;
            }
            None => {
                let ws = workspace.map(|w| std::path::absolute(w).unwrap_or_else(|_| w.to_path_buf()));
                tx.execute(
                    "INSERT INTO sessions (id, created_at, workspace, writer_pid, writer_start, writer_token) \
                     VALUES (?1, ?2, ?3, ?4, ?5, ?6)",
                    params![id, now_ms() as i64, ws.map(|w| w.display().to_string()), pid, start, token],
                )
                .map_err(db_err(format!("creating session {shown}")))?;
            }
        }
        let (Records { records, skipped }, last) = read_records(&tx, id, &shown)?;
        tx.commit().map_err(db_err(format!("opening session {shown}")))?;
        let report = LoadReport { entries: current(&records), torn_tail: None, skipped, created };
        Ok(SqliteSession { conn, db, id: id.to_string(), token, next_seq: last + 1, report })
    }

    /// Read session `id` without opening it for writing (and without claiming it: reading what another
    /// agent is appending to is fine). Refuses what [`SqliteSession::open`] refuses, and a missing session.
    pub fn load(db: impl AsRef<Path>, id: &str) -> Result<LoadReport> {
        let Records { records, skipped } = Self::records(db.as_ref(), id)?;
        Ok(LoadReport { entries: current(&records), torn_tail: None, skipped, created: false })
    }

    /// Every record of session `id`, resets included, and the records that did not parse (seq, why).
    pub fn records(db: &Path, id: &str) -> Result<Records> {
        let shown = shown(db, id);
        let conn = connect(db, false)?;
        let exists: bool = conn
            .query_row("SELECT EXISTS (SELECT 1 FROM sessions WHERE id = ?1)", [id], |r| r.get(0))
            .map_err(db_err(format!("reading session {shown}")))?;
        if !exists {
            return Err(refused(format!("reading session {shown}"), ErrorKind::NotFound, "no such session"));
        }
        Ok(read_records(&conn, id, &shown)?.0)
    }

    /// The database file.
    pub fn db(&self) -> &Path {
        &self.db
    }

    /// The session id.
    pub fn id(&self) -> &str {
        &self.id
    }

    /// `db#id`.
    pub fn location(&self) -> String {
        shown(&self.db, &self.id)
    }

    /// What opening found.
    pub fn report(&self) -> &LoadReport {
        &self.report
    }

    /// Take the load report (the entries move out; used when the agent adopts them).
    pub fn take_report(&mut self) -> LoadReport {
        std::mem::take(&mut self.report)
    }

    /// Append one finished entry, durably (committed and the WAL fsynced when this returns).
    pub fn append(&mut self, entry: &Entry) -> Result<()> {
        let kind = if crate::conversation::compacted::Compaction::of(entry).is_some() { "compaction" } else { "entry" };
        let text = serde_json::to_string(entry).map_err(|e| Error::Config(format!("entry not serializable: {e}")))?;
        let role = match serde_json::to_value(entry.role) {
            Ok(Value::String(s)) => Some(s),
            _ => None,
        };
        self.insert(kind, role, Some(text), now_ms())
    }

    /// Record that the conversation was cleared.
    pub fn append_reset(&mut self) -> Result<()> {
        self.insert("reset", None, None, now_ms())
    }

    /// Set the session's creation time (a migration keeps the original's).
    pub fn set_created_at(&mut self, ms: u64) -> Result<()> {
        let shown = self.location();
        self.conn
            .execute("UPDATE sessions SET created_at = ?2 WHERE id = ?1", params![self.id, ms as i64])
            .map_err(db_err(format!("writing session {shown}")))?;
        Ok(())
    }

    fn insert(&mut self, kind: &str, role: Option<String>, entry: Option<String>, at: u64) -> Result<()> {
        // One statement, so one transaction: the record goes in only while this writer's claim stands.
        let changed = self
            .conn
            .prepare_cached(
                "INSERT INTO entries (session_id, seq, kind, role, entry, at) \
                 SELECT ?1, ?2, ?3, ?4, ?5, ?6 WHERE EXISTS \
                 (SELECT 1 FROM sessions WHERE id = ?1 AND writer_token = ?7)",
            )
            .and_then(|mut s| s.execute(params![self.id, self.next_seq, kind, role, entry, at as i64, self.token]))
            .map_err(db_err(format!("writing session {}", shown(&self.db, &self.id))))?;
        if changed == 0 {
            return Err(refused(
                format!("writing session {}", shown(&self.db, &self.id)),
                ErrorKind::WouldBlock,
                "another writer took this session over (this one was judged gone); nothing was written",
            ));
        }
        self.next_seq += 1;
        Ok(())
    }
}

impl Drop for SqliteSession {
    fn drop(&mut self) {
        // Let go of the claim; if this fails (a full disk), the next opener sees this process gone anyway.
        let _ = self.conn.execute(
            "UPDATE sessions SET writer_pid = NULL, writer_start = NULL, writer_token = NULL \
             WHERE id = ?1 AND writer_token = ?2",
            params![self.id, self.token],
        );
    }
}

/// The sessions of the database at `db`, oldest first. Refuses what [`SqliteSession::open`] refuses.
pub fn list(db: impl AsRef<Path>) -> Result<Vec<SessionRow>> {
    let db = db.as_ref();
    let shown = db.display().to_string();
    let conn = connect(db, false)?;
    let mut stmt = conn
        .prepare(
            "SELECT s.id, s.created_at, s.workspace, count(e.seq), coalesce(max(e.at), s.created_at) \
             FROM sessions s LEFT JOIN entries e ON e.session_id = s.id \
             GROUP BY s.id ORDER BY s.created_at, s.id",
        )
        .map_err(db_err(format!("listing sessions of {shown}")))?;
    let rows = stmt
        .query_map([], |r| {
            Ok(SessionRow {
                id: r.get(0)?,
                created_at: u64::try_from(r.get::<_, i64>(1)?).unwrap_or(0),
                workspace: r.get(2)?,
                records: u64::try_from(r.get::<_, i64>(3)?).unwrap_or(0),
                updated_at: u64::try_from(r.get::<_, i64>(4)?).unwrap_or(0),
            })
        })
        .map_err(db_err(format!("listing sessions of {shown}")))?;
    rows.collect::<rusqlite::Result<Vec<_>>>().map_err(db_err(format!("listing sessions of {shown}")))
}
