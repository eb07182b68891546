//! Sessions in SQLite under failure, misuse and load: the `session` spec, one writer per session
//! (in this process and another), a crashed writer (kill -9) never blocking the next open and losing at most
//! the entry being written, a full disk (a real file-size limit), foreign and newer databases refused
//! untouched, owner-only files, migration to and from JSONL, and 64 agents writing to one database at once.
//! The store-independent behaviours (resume, reset, no key stored, ...) run on both stores in
//! `tests/agent_session.rs`.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::result_large_err)]

use std::io::{BufRead, BufReader, ErrorKind, Write};
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::sync::Arc;

use serde_json::json;
use tooloop::provider::ScriptedProvider;
use tooloop::provider::host::reply;
use tooloop::session_sqlite::{self, Record, SqliteSession};
use tooloop::store::{self, Location};
use tooloop::{Agent, AgentConfig, AgentOptions, ContentBlock, Entry, EntryRole, Error, Session, StopReason, Tool};

#[path = "common/child.rs"]
mod child;
#[path = "common/tempdir.rs"]
mod tempdir;
use tempdir::TempDir;

fn entry(text: &str) -> Entry {
    Entry::new(EntryRole::User, vec![ContentBlock::text(text)])
}

fn texts(entries: &[Entry]) -> Vec<String> {
    entries
        .iter()
        .map(|e| match &e.content[0] {
            ContentBlock::Text(t) => t.text.clone(),
            other => format!("{other:?}"),
        })
        .collect()
}

fn io_error<T: std::fmt::Debug>(result: tooloop::Result<T>) -> (String, ErrorKind) {
    match result {
        Err(Error::Io { context, source }) => (format!("{context}: {source}"), source.kind()),
        other => panic!("expected an Io error, got {other:?}"),
    }
}

fn mode(path: &Path) -> u32 {
    std::fs::metadata(path).unwrap().permissions().mode() & 0o777
}

/// Every file of the database at `db` (with its WAL and shared memory, when present), as bytes.
fn snapshot(db: &Path) -> Vec<Option<Vec<u8>>> {
    ["", "-wal", "-shm", "-journal"].iter().map(|s| std::fs::read(format!("{}{s}", db.display())).ok()).collect()
}

// ---------------------------------------------------------------------------------------------------------
// The spec.
// ---------------------------------------------------------------------------------------------------------

#[test]
fn a_session_spec_names_a_database_session_by_suffix_and_hash() {
    for (text, db, id) in [
        ("runs/sessions.db#task-17", "runs/sessions.db", "task-17"),
        ("a.sqlite#x", "a.sqlite", "x"),
        ("/tmp/a b.sqlite3#id#with#hashes", "/tmp/a b.sqlite3", "id#with#hashes"),
        ("runs#2/s.db#x", "runs#2/s.db", "x"),
    ] {
        assert_eq!(
            Location::parse(text).unwrap(),
            Location::Database { db: PathBuf::from(db), id: id.to_string() },
            "{text}"
        );
    }
    for text in ["s.jsonl", "notes#1.jsonl", "x.dbx#1", "session"] {
        assert_eq!(Location::parse(text).unwrap(), Location::File(PathBuf::from(text)), "{text}");
    }
    for text in ["runs/sessions.db", "runs/sessions.db#", "x.sqlite3"] {
        let err = Location::parse(text).unwrap_err();
        assert!(matches!(&err, Error::Config(m) if m.contains("no session id")), "{text}: {err:?}");
    }
}

#[test]
fn the_session_option_opens_a_database_session_created_if_new_and_resumed_if_it_exists() {
    let dir = TempDir::new("sqlite-option");
    let spec = dir.file("runs/deep/sessions.db#task-17");
    let options = |reply_text: &str| {
        let mut o: AgentOptions =
            serde_json::from_value(json!({"model": "m", "session": spec.to_str().unwrap()})).unwrap();
        o.session = Some(spec.clone());
        let provider =
            Arc::new(ScriptedProvider::new([reply(vec![ContentBlock::text(reply_text)], StopReason::EndTurn)]));
        o.build_with(provider).unwrap()
    };
    let first = options("one");
    assert!(first.session_info().unwrap().created);
    first.run("first", &mut |_| {}).unwrap();
    drop(first);
    let second = options("two");
    let info = second.session_info().unwrap();
    assert_eq!((info.created, info.entries), (false, 2));
    assert_eq!(info.path, PathBuf::from(format!("{}", spec.display())));
    second.run("second", &mut |_| {}).unwrap();
    assert_eq!(texts(&store::load(&spec).unwrap().entries), ["first", "one", "second", "two"]);
    // Folders 0700, the database 0600 (its WAL and shared-memory files take its mode).
    let db = dir.file("runs/deep/sessions.db");
    assert_eq!((mode(&dir.file("runs")), mode(&dir.file("runs/deep"))), (0o700, 0o700));
    assert_eq!(mode(&db), 0o600);
    for side in ["-wal", "-shm"] {
        let p = PathBuf::from(format!("{}{side}", db.display()));
        if p.exists() {
            assert_eq!(mode(&p), 0o600, "{}", p.display());
        }
    }
}

// ---------------------------------------------------------------------------------------------------------
// Foreign and newer databases.
// ---------------------------------------------------------------------------------------------------------

#[test]
fn a_database_that_is_not_tooloops_is_refused_and_left_untouched() {
    let dir = TempDir::new("sqlite-foreign");
    // Another program's SQLite database, in WAL mode like ours.
    let foreign = dir.file("app.db");
    {
        let c = rusqlite::Connection::open(&foreign).unwrap();
        c.execute_batch("PRAGMA journal_mode=WAL; CREATE TABLE sessions (id TEXT); INSERT INTO sessions VALUES ('x');")
            .unwrap();
    }
    // A text file with a database's name, and an empty-looking one that is not.
    let text = dir.file("notes.sqlite");
    std::fs::write(&text, "not a database\n").unwrap();
    for db in [&foreign, &text] {
        let before = snapshot(db);
        let spec = format!("{}#s", db.display());
        let (message, kind) = io_error(store::open(&spec, None));
        assert!(message.contains("is not a tooloop session database"), "{message}");
        assert_eq!(kind, ErrorKind::InvalidData);
        let (message, _) = io_error(store::load(&spec));
        assert!(message.contains("is not a tooloop session database"), "{message}");
        assert_eq!(snapshot(db), before, "{} was modified", db.display());
    }
}

#[test]
fn a_database_of_a_newer_schema_version_is_refused_and_left_untouched() {
    let dir = TempDir::new("sqlite-newer");
    let db = dir.file("s.db");
    let spec = format!("{}#a", db.display());
    {
        let mut s = SqliteSession::open(&db, "a", None).unwrap();
        s.append(&entry("kept")).unwrap();
    }
    {
        let c = rusqlite::Connection::open(&db).unwrap();
        c.execute("UPDATE tooloop_schema SET version = 2", []).unwrap();
    }
    let before = snapshot(&db);
    let (message, kind) = io_error(store::open(&spec, None));
    assert!(message.contains("schema version 2") && message.contains("newer tooloop"), "{message}");
    assert_eq!(kind, ErrorKind::InvalidData);
    assert_eq!(snapshot(&db), before);
}

// ---------------------------------------------------------------------------------------------------------
// One writer per session.
// ---------------------------------------------------------------------------------------------------------

#[test]
fn a_second_writer_of_one_session_is_refused_while_other_ids_open_at_the_same_time() {
    let dir = TempDir::new("sqlite-lock");
    let db = dir.file("s.db");
    let mut first = SqliteSession::open(&db, "one", None).unwrap();
    first.append(&entry("a")).unwrap();
    let (message, kind) = io_error(SqliteSession::open(&db, "one", None));
    assert!(message.contains("is in use") && message.contains("this process"), "{message}");
    assert_eq!(kind, ErrorKind::WouldBlock);
    // Another id of the same database is free, and both write at once.
    let mut other = SqliteSession::open(&db, "two", None).unwrap();
    other.append(&entry("b")).unwrap();
    first.append(&entry("c")).unwrap();
    // Reading is fine while it is held; the claim goes with the session.
    assert_eq!(texts(&SqliteSession::load(&db, "one").unwrap().entries), ["a", "c"]);
    drop(first);
    let again = SqliteSession::open(&db, "one", None).unwrap();
    assert_eq!(texts(&again.report().entries), ["a", "c"]);
    assert_eq!(texts(&SqliteSession::load(&db, "two").unwrap().entries), ["b"]);
}

#[test]
fn a_writer_whose_claim_was_taken_over_fails_instead_of_interleaving() {
    let dir = TempDir::new("sqlite-taken-over");
    let db = dir.file("s.db");
    let mut first = SqliteSession::open(&db, "s", None).unwrap();
    first.append(&entry("mine")).unwrap();
    // Another host judged this writer gone and claimed the session (as after a pid-namespace mix-up).
    rusqlite::Connection::open(&db)
        .unwrap()
        .execute(
            "UPDATE sessions SET writer_pid = 1, writer_start = NULL, writer_token = 'someone-else' WHERE id = 's'",
            [],
        )
        .unwrap();
    let (message, kind) = io_error(first.append(&entry("must not land")));
    assert!(message.contains("took this session over"), "{message}");
    assert_eq!(kind, ErrorKind::WouldBlock);
    drop(first); // does not release someone else's claim
    let (records, _) = (SqliteSession::records(&db, "s").unwrap().records, ());
    assert_eq!(records.len(), 1);
    let (message, _) = io_error(SqliteSession::open(&db, "s", None));
    assert!(message.contains("is in use"), "pid 1 is alive: {message}");
}

const CHILD_DB: &str = "TOOLOOP_TEST_SQLITE_DB";

/// The current test again in a child process with `TOOLOOP_TEST_SQLITE_DB=db` (under `prefix`, a bash
/// line such as `ulimit -f 64;`), its stdin and stdout piped.
fn start_child(db: &Path, prefix: &str) -> std::process::Child {
    child::wrapped(&["bash", "-c", &format!("{prefix} exec \"$0\" \"$@\"")])
        .env(CHILD_DB, db)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap()
}

#[test]
fn a_session_held_by_another_process_is_refused_and_free_once_it_closes() {
    if child::is_child() {
        return hold_the_session_until_stdin_closes();
    }
    let dir = TempDir::new("sqlite-lock-process");
    let db = dir.file("s.db");
    let mut holder = start_child(&db, "");
    let mut out = BufReader::new(holder.stdout.take().unwrap());
    let mut line = String::new();
    while !line.contains("HOLDING") {
        line.clear();
        assert!(out.read_line(&mut line).unwrap() > 0, "the child ended before holding the session");
    }
    let (message, kind) = io_error(SqliteSession::open(&db, "held", None));
    assert!(message.contains("is in use") && message.contains(&format!("process {}", holder.id())), "{message}");
    assert_eq!(kind, ErrorKind::WouldBlock);
    SqliteSession::open(&db, "other", None).unwrap();
    drop(holder.stdin.take()); // the child lets go and exits
    assert!(holder.wait().unwrap().success());
    let s = SqliteSession::open(&db, "held", None).unwrap();
    assert_eq!(texts(&s.report().entries), ["from the child"]);
}

/// The child's part of the test above: holds session `held` until its stdin closes.
fn hold_the_session_until_stdin_closes() {
    let db = std::env::var_os(CHILD_DB).unwrap();
    let mut s = SqliteSession::open(PathBuf::from(db), "held", None).unwrap();
    s.append(&entry("from the child")).unwrap();
    println!("HOLDING");
    std::io::stdout().flush().unwrap();
    let mut rest = String::new();
    let _ = std::io::Read::read_to_string(&mut std::io::stdin(), &mut rest);
}

// ---------------------------------------------------------------------------------------------------------
// Crashes and a full disk.
// ---------------------------------------------------------------------------------------------------------

#[test]
fn a_writer_killed_mid_write_loses_at_most_that_entry_and_never_blocks_the_next_open() {
    if child::is_child() {
        return append_until_killed();
    }
    let dir = TempDir::new("sqlite-kill");
    let db = dir.file("s.db");
    let mut writer = start_child(&db, "");
    let mut out = BufReader::new(writer.stdout.take().unwrap());
    let mut line = String::new();
    let mut reported = 0usize;
    while reported < 40 {
        line.clear();
        assert!(out.read_line(&mut line).unwrap() > 0, "the child ended early");
        if let Some(n) = line.trim().strip_prefix("APPENDED ") {
            reported = n.parse().unwrap();
        }
    }
    // SIGKILL while it is appending (it appends in a tight loop): no chance to let go of its claim.
    nix::sys::signal::kill(nix::unistd::Pid::from_raw(writer.id() as i32), nix::sys::signal::Signal::SIGKILL).unwrap();
    let status = writer.wait().unwrap();
    assert!(!status.success());
    // The next open is not blocked by the dead writer's claim, and finds every entry it reported, whole and
    // in order (plus perhaps ones committed after its last report).
    let mut s = SqliteSession::open(&db, "crash", None).unwrap();
    let got = texts(&s.report().entries);
    assert!(got.len() >= reported, "lost entries: {} < {reported}", got.len());
    for (i, t) in got.iter().enumerate() {
        assert!(t.starts_with(&format!("entry {i:06} ")), "entry {i} out of order or torn: {t:.40}");
        assert_eq!(t.len(), got[0].len(), "entry {i} torn");
    }
    s.append(&entry("after the crash")).unwrap();
    drop(s);
    assert_eq!(SqliteSession::load(&db, "crash").unwrap().entries.len(), got.len() + 1);
}

/// The child's part of the test above: appends numbered 8 KB entries until it is killed.
fn append_until_killed() {
    let db = std::env::var_os(CHILD_DB).unwrap();
    let mut s = SqliteSession::open(PathBuf::from(db), "crash", None).unwrap();
    let pad = "x".repeat(8000);
    for i in 0..100_000 {
        s.append(&entry(&format!("entry {i:06} {pad}"))).unwrap();
        println!("APPENDED {}", i + 1);
    }
}

#[test]
fn on_a_real_file_size_limit_a_failed_append_leaves_the_database_valid_and_later_appends_work() {
    if child::is_child() {
        return append_until_the_limit();
    }
    let dir = TempDir::new("sqlite-fsize");
    let db = dir.file("s.db");
    // SIGXFSZ ignored, so write(2) fails with EFBIG instead of killing the process: a full disk, for real.
    let limited = start_child(&db, "trap '' XFSZ; ulimit -f 256;").wait_with_output().unwrap();
    let stdout = String::from_utf8_lossy(&limited.stdout);
    let stderr = String::from_utf8_lossy(&limited.stderr);
    assert!(limited.status.success(), "the limited child failed:\n{stdout}\n{stderr}");
    let kept: usize = stdout
        .lines()
        .find_map(|l| l.split_once("FSIZE-CHILD-OK ").map(|(_, n)| n.trim()))
        .unwrap_or_else(|| panic!("the child did not run:\n{stdout}"))
        .parse()
        .unwrap();
    // Without the limit (space is back), the session opens with every entry that was acknowledged, and goes on.
    let mut s = SqliteSession::open(&db, "full", None).unwrap();
    assert_eq!(s.report().entries.len(), kept);
    s.append(&entry("small, after the failure")).unwrap();
    drop(s);
    let all = texts(&SqliteSession::load(&db, "full").unwrap().entries);
    assert_eq!(all.len(), kept + 1);
    assert_eq!(all.last().unwrap(), "small, after the failure");
}

/// The child's part of the test above, under a 256 KiB file-size limit.
fn append_until_the_limit() {
    let db = PathBuf::from(std::env::var_os(CHILD_DB).unwrap());
    let mut s = SqliteSession::open(&db, "full", None).unwrap();
    let big = "y".repeat(20_000);
    let mut kept = 0;
    loop {
        match s.append(&entry(&format!("{kept} {big}"))) {
            Ok(()) => kept += 1,
            Err(Error::Io { context, source }) => {
                assert!(context.contains("writing session"), "{context}: {source}");
                break;
            }
            Err(other) => panic!("{other:?}"),
        }
        assert!(kept < 100, "the file-size limit is not in force");
    }
    assert!(kept > 0, "not even one entry fitted");
    // The failed append left nothing behind: a reader sees exactly the acknowledged entries.
    let report = SqliteSession::load(&db, "full").unwrap();
    assert_eq!(report.entries.len(), kept);
    assert!(report.skipped.is_empty());
    println!("FSIZE-CHILD-OK {kept}");
}

// ---------------------------------------------------------------------------------------------------------
// Migration.
// ---------------------------------------------------------------------------------------------------------

#[test]
fn migration_from_jsonl_to_a_database_and_back_keeps_what_the_api_sees_byte_for_byte() {
    let dir = TempDir::new("sqlite-migrate");
    let jsonl = dir.file("s.jsonl");
    {
        let mut s = Session::open(&jsonl).unwrap();
        s.append(&entry("before the reset")).unwrap();
        s.append_reset().unwrap();
        s.append(&entry("What's the weather?")).unwrap();
        let mut turn = Entry::new(
            EntryRole::Assistant,
            vec![
                ContentBlock::text("Looking: ünïcödé ✓"),
                serde_json::from_value(json!({"type": "tool_use", "id": "t1", "name": "w", "input": {"c": "Paris"}}))
                    .unwrap(),
            ],
        );
        turn.stop_reason = Some(StopReason::ToolUse);
        turn.model = Some("claude-sonnet-4-6".into());
        s.append(&turn).unwrap();
        let result: ContentBlock = serde_json::from_value(
            json!({"type": "tool_result", "tool_use_id": "t1", "content": "18 °C", "is_error": false}),
        )
        .unwrap();
        s.append(&Entry::new(EntryRole::Tool, vec![result])).unwrap();
    }
    let db_spec = format!("{}#migrated", dir.file("all.db").display());
    assert_eq!(store::migrate(&jsonl, &db_spec).unwrap(), 5, "every record, the reset included");
    let back = dir.file("back.jsonl");
    assert_eq!(store::migrate(&db_spec, &back).unwrap(), 5);
    let views: Vec<String> = [jsonl.to_str().unwrap(), db_spec.as_str(), back.to_str().unwrap()]
        .iter()
        .map(|spec| {
            let entries = store::load(spec).unwrap().entries;
            serde_json::to_string(&tooloop::conversation::render_view(&entries)).unwrap()
        })
        .collect();
    assert_eq!(views[0], views[1]);
    assert_eq!(views[0], views[2]);
    assert!(views[0].contains("ünïcödé") && !views[0].contains("before the reset"));
    // The entry lines themselves come back identical.
    let lines = |p: &Path| -> Vec<String> {
        std::fs::read_to_string(p)
            .unwrap()
            .lines()
            .skip(1)
            .filter(|l| !l.contains("\"reset\""))
            .map(String::from)
            .collect()
    };
    assert_eq!(lines(&jsonl), lines(&back));
    let records = SqliteSession::records(&dir.file("all.db"), "migrated").unwrap().records;
    assert!(matches!(records[1], Record::Reset(_)));
    // Migrating onto an existing session is refused, and writes nothing.
    let err = store::migrate(&jsonl, &db_spec).unwrap_err();
    assert!(matches!(&err, Error::Config(m) if m.contains("already holds")), "{err:?}");
    assert_eq!(SqliteSession::records(&dir.file("all.db"), "migrated").unwrap().records.len(), 5);
}

// ---------------------------------------------------------------------------------------------------------
// Many writers.
// ---------------------------------------------------------------------------------------------------------

#[test]
fn sixty_four_agents_writing_to_one_database_at_once_lose_nothing_and_keep_their_order() {
    const AGENTS: usize = 64;
    const RUNS: usize = 3;
    let dir = TempDir::new("sqlite-many");
    let db = dir.file("runs/sessions.db");
    let barrier = Arc::new(std::sync::Barrier::new(AGENTS));
    let handles: Vec<_> = (0..AGENTS)
        .map(|i| {
            let (db, barrier) = (db.clone(), barrier.clone());
            std::thread::spawn(move || {
                // Each run: a tool call, its result, a final answer.
                let steps = (0..RUNS).flat_map(|r| {
                    [
                        reply(
                            vec![ContentBlock::ToolUse(tooloop::types::ToolUseBlock {
                                id: format!("t{i}-{r}"),
                                name: "echo".into(),
                                input: json!({"n": r}),
                                extra: Default::default(),
                            })],
                            StopReason::ToolUse,
                        ),
                        reply(vec![ContentBlock::text(format!("agent {i} run {r} done"))], StopReason::EndTurn),
                    ]
                });
                let agent =
                    Agent::new(Arc::new(ScriptedProvider::new(steps.collect::<Vec<_>>())), AgentConfig::default());
                agent
                    .tools()
                    .register(
                        Tool::new(
                            "echo",
                            "Echo.",
                            json!({"type": "object"}),
                            |input: &serde_json::Value, _: &tooloop::ToolContext<'_>| {
                                Ok(tooloop::ToolOutput::Text(input.to_string()))
                            },
                        )
                        .unwrap(),
                    )
                    .unwrap();
                barrier.wait();
                agent.attach_store(store::open(format!("{}#agent-{i}", db.display()), None).unwrap()).unwrap();
                for r in 0..RUNS {
                    agent.run(&format!("agent {i} run {r}"), &mut |_| {}).unwrap();
                }
                agent.conversation().snapshot()
            })
        })
        .collect();
    let written: Vec<Vec<Entry>> = handles.into_iter().map(|h| h.join().unwrap()).collect();
    let rows = session_sqlite::list(&db).unwrap();
    assert_eq!(rows.len(), AGENTS);
    for (i, entries) in written.iter().enumerate() {
        assert_eq!(entries.len(), RUNS * 4);
        let stored = SqliteSession::load(&db, &format!("agent-{i}")).unwrap();
        assert_eq!(&stored.entries, entries, "agent {i}: the database differs from what the agent holds");
        let row = rows.iter().find(|r| r.id == format!("agent-{i}")).unwrap();
        assert_eq!(row.records, (RUNS * 4) as u64);
    }
}

// ---------------------------------------------------------------------------------------------------------
// The README's queries run against the schema.
// ---------------------------------------------------------------------------------------------------------

#[test]
fn the_readme_queries_run_against_a_real_session_database() {
    let dir = TempDir::new("sqlite-readme");
    let db = dir.file("sessions.db");
    {
        let mut s = SqliteSession::open(&db, "busy", Some(dir.0.as_path())).unwrap();
        s.append(&entry("run the tests a lot")).unwrap();
        for i in 0..21 {
            let mut turn = Entry::new(
                EntryRole::Assistant,
                vec![
                    serde_json::from_value(json!({"type": "tool_use", "id": format!("t{i}"), "name": "bash",
                                                  "input": {"command": "make test"}}))
                    .unwrap(),
                ],
            );
            turn.model = Some("claude-sonnet-4-6".into());
            turn.usage = Some(serde_json::from_value(json!({"input_tokens": 100, "output_tokens": 10})).unwrap());
            s.append(&turn).unwrap();
        }
        let mut failed = Entry::new(EntryRole::Assistant, vec![ContentBlock::text("partial")]);
        failed.status = tooloop::EntryStatus::Error;
        s.append(&failed).unwrap();
    }
    let readme = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/README.md")).unwrap();
    let start = readme.find("Queries people run").expect("the README's queries");
    let block = &readme[start..];
    let sql = &block[block.find("```sql").unwrap() + 6..];
    let sql = &sql[..sql.find("```").unwrap()];
    let conn = rusqlite::Connection::open(&db).unwrap();
    let mut answers = Vec::new();
    for query in sql.split(';').map(str::trim).filter(|q| q.lines().any(|l| !l.trim().starts_with("--"))) {
        let mut stmt = conn.prepare(query).unwrap_or_else(|e| panic!("{e}: {query}"));
        let n = stmt.column_count();
        let rows: Vec<Vec<String>> = stmt
            .query_map([], |r| {
                (0..n).map(|i| r.get::<_, rusqlite::types::Value>(i).map(|v| format!("{v:?}"))).collect()
            })
            .unwrap()
            .collect::<rusqlite::Result<_>>()
            .unwrap();
        answers.push(rows);
    }
    assert_eq!(answers.len(), 3);
    assert_eq!(answers[0], vec![vec!["Text(\"busy\")".to_string(), "Integer(21)".to_string()]], "bash calls");
    assert_eq!(answers[1].len(), 1, "one day, one model: {:?}", answers[1]);
    assert_eq!(answers[1][0][2], "Integer(2100)");
    assert_eq!(answers[2].len(), 1, "the session that ended on an error: {:?}", answers[2]);
    assert_eq!(answers[2][0][2], "Text(\"run the tests a lot\")");
}
