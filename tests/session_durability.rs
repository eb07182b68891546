//! Session files under failure and misuse: a failed append (a full disk) loses no later
//! entry, a last line without its newline is kept, unknown versions and files that are not sessions are
//! refused untouched, one writer at a time (flock), and owner-only permissions.
//!
//! The full disk is simulated through the `SessionSink` seam: a writer that writes the first N bytes of a
//! write to the real file, then fails with ENOSPC, like `write(2)` on a filesystem that ran out of space.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::result_large_err)]

use std::io::{ErrorKind, Write};
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};

use tooloop::provider::ScriptedProvider;
use tooloop::session::SessionSink;
use tooloop::{Agent, AgentConfig, ContentBlock, Entry, EntryRole, Error, Session};

#[path = "common/child.rs"]
mod child;
#[path = "common/require.rs"]
mod require;
#[path = "common/tempdir.rs"]
mod tempdir;
use tempdir::TempDir;

/// What the test controls in a [`Disk`]: how many more bytes fit (`usize::MAX`: no limit) and whether
/// cutting the file back fails too.
#[derive(Clone, Default)]
struct DiskControl {
    room: Arc<AtomicUsize>,
    truncate_fails: Arc<AtomicBool>,
}

impl DiskControl {
    fn new() -> DiskControl {
        let c = DiskControl::default();
        c.room.store(usize::MAX, Ordering::SeqCst);
        c
    }

    fn fill_after(&self, bytes: usize) {
        self.room.store(bytes, Ordering::SeqCst);
    }

    fn free(&self) {
        self.room.store(usize::MAX, Ordering::SeqCst);
    }
}

/// The seam: the real file behind a disk that runs out of room.
#[derive(Debug)]
struct Disk {
    inner: Box<dyn SessionSink>,
    room: Arc<AtomicUsize>,
    truncate_fails: Arc<AtomicBool>,
}

impl Disk {
    fn wrap(control: &DiskControl) -> impl FnOnce(Box<dyn SessionSink>) -> Box<dyn SessionSink> {
        let (room, truncate_fails) = (control.room.clone(), control.truncate_fails.clone());
        move |inner| Box::new(Disk { inner, room, truncate_fails })
    }
}

fn enospc() -> std::io::Error {
    std::io::Error::from_raw_os_error(28)
}

impl Write for Disk {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        let room = self.room.load(Ordering::SeqCst);
        if room == 0 {
            return Err(enospc());
        }
        let n = buf.len().min(room);
        let n = self.inner.write(&buf[..n])?;
        if room != usize::MAX {
            self.room.store(room - n, Ordering::SeqCst);
        }
        Ok(n)
    }

    fn flush(&mut self) -> std::io::Result<()> {
        self.inner.flush()
    }
}

impl SessionSink for Disk {
    fn sync(&mut self) -> std::io::Result<()> {
        self.inner.sync()
    }

    fn truncate(&mut self, len: u64) -> std::io::Result<()> {
        if self.truncate_fails.load(Ordering::SeqCst) {
            return Err(enospc());
        }
        self.inner.truncate(len)
    }

    fn file_len(&self) -> std::io::Result<u64> {
        self.inner.file_len()
    }
}

fn entry(text: &str) -> Entry {
    Entry::new(EntryRole::User, vec![ContentBlock::text(text)])
}

fn texts(entries: &[Entry]) -> Vec<String> {
    entries.iter().map(|e| e.content.iter().map(ContentBlock::text_or_empty).collect::<String>()).collect()
}

trait TextOrEmpty {
    fn text_or_empty(&self) -> String;
}

impl TextOrEmpty for ContentBlock {
    fn text_or_empty(&self) -> String {
        match self {
            ContentBlock::Text(t) => t.text.clone(),
            _ => String::new(),
        }
    }
}

/// Every line of the file is a whole JSON object ending in a newline.
fn assert_clean_jsonl(path: &Path) {
    let bytes = std::fs::read(path).unwrap();
    assert_eq!(bytes.last(), Some(&b'\n'), "the file ends mid-line");
    for line in bytes.split(|b| *b == b'\n').filter(|l| !l.is_empty()) {
        let v: serde_json::Value = serde_json::from_slice(line)
            .unwrap_or_else(|e| panic!("a line glued or torn ({e}): {}", String::from_utf8_lossy(line)));
        assert!(v.is_object());
    }
}

fn io_error(result: tooloop::Result<impl std::fmt::Debug>) -> (String, ErrorKind) {
    match result {
        Err(Error::Io { context, source }) => (format!("{context}: {source}"), source.kind()),
        other => panic!("expected Error::Io, got {other:?}"),
    }
}

const HEADER: &str = "{\"type\":\"session\",\"version\":1,\"created_at\":1}\n";

fn entry_line(text: &str) -> String {
    serde_json::json!({"type": "entry", "entry": entry(text)}).to_string()
}

// ---------------------------------------------------------------------------------------------------------
// Item 5: a failed append does not corrupt the next one.
// ---------------------------------------------------------------------------------------------------------

#[test]
fn a_write_failing_after_n_bytes_leaves_the_file_as_it_was_and_the_next_entry_is_kept() {
    let dir = TempDir::new("durability-enospc");
    let line_len = entry_line("second, lost to the full disk").len() + 1;
    // Every cut point of the line: nothing written, one byte, the middle, all but the newline, all of it.
    for n in [0, 1, 7, line_len / 2, line_len - 1, line_len] {
        let path = dir.file(&format!("s{n}.jsonl"));
        let disk = DiskControl::new();
        let mut session = Session::open(&path).unwrap().map_sink(Disk::wrap(&disk));
        session.append(&entry("first")).unwrap();
        let before = std::fs::read(&path).unwrap();

        disk.fill_after(n);
        let err = session.append(&entry("second, lost to the full disk"));
        if n < line_len {
            let (message, _) = io_error(err);
            assert!(message.contains("No space left"), "{message}");
            assert_eq!(std::fs::read(&path).unwrap(), before, "n={n}: the failed write was not cut back off");
        } else {
            err.unwrap(); // the whole line fit
        }

        disk.free();
        session.append(&entry("third, after space was freed")).unwrap();
        drop(session);
        assert_clean_jsonl(&path);
        let report = Session::load(&path).unwrap();
        let mut expected = vec!["first", "third, after space was freed"];
        if n == line_len {
            expected.insert(1, "second, lost to the full disk");
        }
        assert_eq!(texts(&report.entries), expected, "n={n}: an entry written after the failure was lost");
        assert!(report.skipped.is_empty() && report.torn_tail.is_none(), "n={n}: {report:?}");
    }
}

#[test]
fn when_the_cut_fails_too_the_next_entry_starts_on_a_fresh_line() {
    let dir = TempDir::new("durability-nocut");
    let path = dir.file("s.jsonl");
    let disk = DiskControl::new();
    let mut session = Session::open(&path).unwrap().map_sink(Disk::wrap(&disk));
    session.append(&entry("first")).unwrap();

    disk.truncate_fails.store(true, Ordering::SeqCst);
    disk.fill_after(12);
    assert!(session.append(&entry("second")).is_err());
    disk.free();
    session.append(&entry("third")).unwrap();
    // The fragment is still there (the cut failed), on a line of its own; later writes know the real length.
    disk.truncate_fails.store(false, Ordering::SeqCst);
    disk.fill_after(5);
    assert!(session.append(&entry("fourth")).is_err());
    disk.free();
    session.append(&entry("fifth")).unwrap();
    drop(session);

    let report = Session::load(&path).unwrap();
    assert_eq!(texts(&report.entries), ["first", "third", "fifth"]);
    assert_eq!(report.skipped.len(), 1, "the one fragment that could not be cut: {:?}", report.skipped);
    assert_eq!(report.torn_tail, None);
    // Reopening keeps all of it and appends cleanly.
    let mut again = Session::open(&path).unwrap();
    again.append(&entry("sixth")).unwrap();
    drop(again);
    assert_eq!(texts(&Session::load(&path).unwrap().entries), ["first", "third", "fifth", "sixth"]);
}

#[test]
fn the_agent_keeps_an_entry_whose_append_failed_and_the_file_stays_loadable() {
    let dir = TempDir::new("durability-agent");
    let path = dir.file("s.jsonl");
    let disk = DiskControl::new();
    let agent = Agent::new(Arc::new(ScriptedProvider::new([])), AgentConfig::default());
    agent.attach_session(Session::open(&path).unwrap().map_sink(Disk::wrap(&disk))).unwrap();
    agent.record(entry("question")).unwrap();

    disk.fill_after(20);
    let (message, _) = io_error(agent.record(entry("a tool result the disk refused")));
    assert!(message.contains("writing session"), "{message}");
    // Store before file: the entry is in the conversation even though the file refused it.
    assert_eq!(texts(&agent.conversation().snapshot()), ["question", "a tool result the disk refused"]);

    disk.free();
    agent.record(entry("the next entry")).unwrap();
    assert_clean_jsonl(&path);
    let on_disk = Session::load(&path).unwrap();
    assert_eq!(texts(&on_disk.entries), ["question", "the next entry"], "the entry after the failure is on disk");
    assert!(on_disk.skipped.is_empty());
}

// ---------------------------------------------------------------------------------------------------------
// Item 6: reading what is there.
// ---------------------------------------------------------------------------------------------------------

#[test]
fn a_complete_last_line_without_its_newline_is_kept_and_the_next_line_starts_fresh() {
    let dir = TempDir::new("durability-nonewline");
    let path = dir.file("s.jsonl");
    std::fs::write(&path, format!("{HEADER}{}\n{}", entry_line("one"), entry_line("two"))).unwrap();
    let mut session = Session::open(&path).unwrap();
    assert_eq!(texts(&session.report().entries), ["one", "two"], "the unterminated last line was cut");
    assert_eq!(session.report().torn_tail, None);
    session.append(&entry("three")).unwrap();
    drop(session);
    assert_clean_jsonl(&path);
    assert_eq!(texts(&Session::load(&path).unwrap().entries), ["one", "two", "three"]);
}

#[test]
fn a_newer_or_unknown_format_version_is_refused_and_the_file_left_untouched() {
    let dir = TempDir::new("durability-version");
    for (header, says) in [
        ("{\"type\":\"session\",\"version\":2,\"created_at\":1}\n", "newer tooloop"),
        ("{\"type\":\"session\",\"version\":99}\n", "newer tooloop"),
        ("{\"type\":\"session\",\"version\":\"1.0\"}\n", "unknown format version"),
        ("{\"type\":\"session\",\"version\":0}\n", "unknown format version"),
        ("{\"type\":\"session\"}\n", "unknown format version"),
    ] {
        let path = dir.file("s.jsonl");
        let content = format!("{header}{}\n", entry_line("one"));
        std::fs::write(&path, &content).unwrap();
        let (message, kind) = io_error(Session::open(&path));
        assert!(message.contains(says), "{header}: {message}");
        assert_eq!(kind, ErrorKind::InvalidData);
        let (message, _) = io_error(Session::load(&path));
        assert!(message.contains(says), "{message}");
        assert_eq!(std::fs::read_to_string(&path).unwrap(), content, "a refused file was modified");
    }
}

#[test]
fn a_file_that_is_not_a_session_is_refused_and_left_untouched() {
    let dir = TempDir::new("durability-foreign");
    for content in [
        "{\"a\":1}\n{\"b\":2}\n",                    // someone else's JSONL
        "# notes\nremember the milk\n",              // a text file
        "just one line, no newline",                 // a line that is not even JSON
        "{\"a\":1}",                                 // a JSON object without a newline
        &format!("{}\n{HEADER}", entry_line("one")), // entries before any header
        "\u{0}\u{1}binary\u{ff}",                    // binary
    ] {
        let path = dir.file("notes.txt");
        std::fs::write(&path, content).unwrap();
        let (message, kind) = io_error(Session::open(&path));
        assert!(message.contains("is not a tooloop session"), "{content:?}: {message}");
        assert_eq!(kind, ErrorKind::InvalidData);
        assert!(Session::load(&path).is_err());
        assert_eq!(std::fs::read_to_string(&path).unwrap(), content, "a refused file was modified");
    }
}

#[test]
fn an_empty_file_or_a_header_torn_at_creation_becomes_a_new_session() {
    let dir = TempDir::new("durability-fresh");
    for content in ["", "\n", "{\"type\":\"sess", "{\"type\":\"session\",\"vers"] {
        let path = dir.file("s.jsonl");
        std::fs::write(&path, content).unwrap();
        let mut session = Session::open(&path).unwrap();
        assert!(session.report().created, "{content:?}");
        session.append(&entry("one")).unwrap();
        drop(session);
        assert_clean_jsonl(&path);
        assert_eq!(texts(&Session::load(&path).unwrap().entries), ["one"]);
    }
}

// ---------------------------------------------------------------------------------------------------------
// Item 6: one writer at a time.
// ---------------------------------------------------------------------------------------------------------

#[test]
fn a_second_open_of_a_session_fails_while_the_first_holds_it() {
    let dir = TempDir::new("durability-lock");
    let path = dir.file("s.jsonl");
    let first = Session::open(&path).unwrap();
    let (message, kind) = io_error(Session::open(&path));
    assert!(message.contains("is in use"), "{message}");
    assert_eq!(kind, ErrorKind::WouldBlock);
    // Reading is still fine, and the lock goes with the session.
    Session::load(&path).unwrap();
    drop(first);
    Session::open(&path).unwrap();
}

#[test]
fn a_session_held_by_another_process_is_refused() {
    let dir = TempDir::new("durability-lock-process");
    let path = dir.file("s.jsonl");
    drop(Session::open(&path).unwrap());
    // flock(1) from util-linux holds the same kind of lock from another process, for as long as `cat` runs
    // (-o: only flock itself holds the lock, and it exits when cat does, at the end of its input).
    let child = std::process::Command::new("flock")
        .arg("-n")
        .arg("-o")
        .arg(&path)
        .arg("cat")
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .spawn();
    if !require::require(child.is_ok(), "flock(1) from util-linux") {
        return;
    }
    let mut child = child.unwrap();
    let mut stdin = child.stdin.take().unwrap();
    stdin.write_all(b"x\n").unwrap();
    let mut echo = [0u8; 2];
    std::io::Read::read_exact(child.stdout.as_mut().unwrap(), &mut echo).unwrap(); // the lock is held
    let held = Session::open(&path);
    drop(stdin);
    assert!(child.wait().unwrap().success());
    let (message, _) = io_error(held);
    assert!(message.contains("is in use"), "{message}");
    Session::open(&path).unwrap();
}

#[test]
fn save_does_not_replace_a_session_another_agent_is_appending_to() {
    let dir = TempDir::new("durability-save-locked");
    let path = dir.file("s.jsonl");
    let mut held = Session::open(&path).unwrap();
    held.append(&entry("kept")).unwrap();
    let (message, _) = io_error(Session::save(&path, &[entry("replacement")]));
    assert!(message.contains("is in use"), "{message}");
    drop(held);
    assert_eq!(texts(&Session::load(&path).unwrap().entries), ["kept"]);
    Session::save(&path, &[entry("replacement")]).unwrap();
    assert_eq!(texts(&Session::load(&path).unwrap().entries), ["replacement"]);
}

// ---------------------------------------------------------------------------------------------------------
// Item 4: owner-only files and folders.
// ---------------------------------------------------------------------------------------------------------

fn mode(path: &Path) -> u32 {
    std::fs::metadata(path).unwrap().permissions().mode() & 0o777
}

#[test]
fn session_files_are_created_0600_and_their_folders_0700() {
    let dir = TempDir::new("durability-modes");
    let path = dir.file("a/b/s.jsonl");
    drop(Session::open(&path).unwrap());
    assert_eq!(mode(&path), 0o600);
    assert_eq!(mode(&dir.file("a/b")), 0o700);
    assert_eq!(mode(&dir.file("a")), 0o700);

    let saved = dir.file("c/saved.jsonl");
    Session::save(&saved, &[entry("one")]).unwrap();
    assert_eq!(mode(&saved), 0o600);
    assert_eq!(mode(&dir.file("c")), 0o700);
}

// ---------------------------------------------------------------------------------------------------------
// Item 5 on a real kernel: a file-size limit (RLIMIT_FSIZE) makes write(2) stop part-way, then fail with
// EFBIG, exactly as a full disk does (ENOSPC), without root or a mounted filesystem. The limit is set by
// bash (`ulimit -f`, with SIGXFSZ ignored so the write returns the error instead of killing the process)
// around a child run of this same test binary.
// ---------------------------------------------------------------------------------------------------------

const CHILD_DIR: &str = "TOOLOOP_TEST_FSIZE_DIR";

#[test]
fn on_a_real_file_size_limit_a_failed_append_is_cut_back_and_the_next_entry_is_kept() {
    if child::is_child() {
        return append_until_the_limit();
    }
    let dir = TempDir::new("durability-fsize");
    let out = child::wrapped(&["bash", "-c", "trap '' XFSZ; ulimit -f 8; exec \"$0\" \"$@\""])
        .env(CHILD_DIR, &dir.0)
        .output();
    if !require::require(out.is_ok(), "bash (to set the file-size limit)") {
        return;
    }
    let out = out.unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "the limited child failed:\n{stdout}\n{stderr}");
    assert!(stdout.contains("FSIZE-CHILD-OK") && stdout.contains("1 passed"), "the child did not run:\n{stdout}");
}

/// The child's part of the test above, under an 8 KiB file-size limit.
fn append_until_the_limit() {
    let path = PathBuf::from(std::env::var_os(CHILD_DIR).unwrap()).join("s.jsonl");
    let mut session = Session::open(&path).unwrap();
    session.append(&entry("first")).unwrap();
    let big = "x".repeat(3000);
    let mut kept = vec!["first".to_string()];
    let mut failures = 0;
    while failures == 0 {
        match session.append(&entry(&big)) {
            Ok(()) => kept.push(big.clone()),
            Err(Error::Io { source, .. }) => {
                assert_eq!(source.raw_os_error(), Some(27), "expected EFBIG: {source}");
                failures += 1;
            }
            Err(other) => panic!("{other:?}"),
        }
        assert!(kept.len() < 10, "the file-size limit is not in force");
    }
    // The kernel wrote part of that line before refusing; it was cut back, so a small entry still fits.
    let len = std::fs::metadata(&path).unwrap().len();
    assert!(len < 8192, "the partial line was left behind ({len} bytes)");
    session.append(&entry("small, after the failure")).unwrap();
    drop(session);
    kept.push("small, after the failure".into());
    assert_clean_jsonl(&path);
    let report = Session::load(&path).unwrap();
    assert_eq!(texts(&report.entries), kept);
    assert!(report.skipped.is_empty() && report.torn_tail.is_none());
    println!("FSIZE-CHILD-OK");
}
