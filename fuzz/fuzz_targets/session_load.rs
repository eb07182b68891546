//! The session loader (src/session.rs). Any file content: `Session::load` must not panic, and when
//! `Session::open` adopts the file, an entry appended after it must come back on reload, after every entry
//! the open found — whatever state the file was in (torn tail, no final newline, junk lines).
#![no_main]

use libfuzzer_sys::fuzz_target;
use tooloop::{ContentBlock, Entry, EntryRole, Session};

fuzz_target!(|data: &[u8]| {
    let dir = std::env::temp_dir().join(format!("tooloop-fuzz-session-{}", std::process::id()));
    let _ = std::fs::create_dir_all(&dir);
    let path = dir.join("s.jsonl");
    if std::fs::write(&path, data).is_err() {
        return;
    }
    let _ = Session::load(&path);
    if let Ok(mut session) = Session::open(&path) {
        let mut expected = session.report().entries.clone();
        let entry = Entry::new(EntryRole::User, vec![ContentBlock::text("appended after fuzz input")]);
        session.append(&entry).ok();
        drop(session);
        expected.push(entry);
        let reloaded = Session::load(&path).map(|r| r.entries);
        assert_eq!(reloaded.ok(), Some(expected), "an appended entry was lost or an old one changed");
    }
    let _ = std::fs::remove_file(&path);
});
