//! Benchmark (not a test): what a session store costs the loop per turn, with the durability the guarantee
//! needs — the JSONL file (`write` + `fdatasync` per line) and a SQLite database session (one transaction
//! per record, WAL, `synchronous=FULL`). A turn is what the loop writes for one tool round: the assistant's
//! tool_use turn and its tool result (two records, ~1.5 KB of JSON). Prints the median time per turn at
//! turns 1-10, 91-100 and 991-1000 (a store whose cost grows with the session shows it there), then the
//! time to open (resume) the 1000-turn session. A second SQLite column writes into a database already
//! holding 63 other sessions (the batch case).
//!
//! Run: `cargo bench -p tooloop --bench session_store` (SESSION_BENCH_DIR picks the folder, default the
//! system temp dir: put it on the disk you care about; tmpfs makes fsync free).
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use serde_json::json;
use tooloop::session_sqlite::SqliteSession;
use tooloop::{ContentBlock, Entry, EntryRole, Session, SessionStore, StopReason};

const TURNS: usize = 1000;

fn turn(i: usize) -> [Entry; 2] {
    let mut assistant = Entry::new(
        EntryRole::Assistant,
        vec![
            ContentBlock::text(format!("Turn {i}: I will look at the file next, then run the tests again.")),
            serde_json::from_value(json!({"type": "tool_use", "id": format!("toolu_{i:05}"), "name": "read_file",
                                          "input": {"path": format!("src/module_{i}.rs"), "offset": 0, "limit": 200}}))
            .unwrap(),
        ],
    );
    assistant.stop_reason = Some(StopReason::ToolUse);
    assistant.model = Some("claude-sonnet-4-6".into());
    assistant.usage = Some(serde_json::from_value(json!({"input_tokens": 1200 + i, "output_tokens": 80})).unwrap());
    let body: String = "fn main() { println!(\"hello\"); }\n".repeat(30);
    let result: ContentBlock =
        serde_json::from_value(json!({"type": "tool_result", "tool_use_id": format!("toolu_{i:05}"), "content": body}))
            .unwrap();
    [assistant, Entry::new(EntryRole::Tool, vec![result])]
}

/// Append TURNS turns; the time of each.
fn run(store: &mut dyn SessionStore) -> Vec<Duration> {
    store.append(&Entry::new(EntryRole::User, vec![ContentBlock::text("Fix the failing test.")])).unwrap();
    (0..TURNS)
        .map(|i| {
            let [a, t] = turn(i);
            let t0 = Instant::now();
            store.append(&a).unwrap();
            store.append(&t).unwrap();
            t0.elapsed()
        })
        .collect()
}

fn median(d: &[Duration]) -> Duration {
    let mut v = d.to_vec();
    v.sort();
    v[v.len() / 2]
}

fn us(d: Duration) -> String {
    format!("{:>9.1} µs", d.as_secs_f64() * 1e6)
}

fn main() {
    let root = std::env::var_os("SESSION_BENCH_DIR").map(PathBuf::from).unwrap_or_else(std::env::temp_dir);
    let dir = root.join(format!("tooloop-session-bench-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();

    let jsonl = dir.join("s.jsonl");
    let db = dir.join("one.db");
    let shared = dir.join("shared.db");
    for i in 0..63 {
        let mut s = SqliteSession::open(&shared, &format!("other-{i}"), None).unwrap();
        for t in 0..20 {
            for e in turn(t) {
                s.append(&e).unwrap();
            }
        }
    }

    let columns: Vec<(&str, Vec<Duration>, Duration)> = vec![
        {
            let times = run(&mut Session::open(&jsonl).unwrap());
            let t0 = Instant::now();
            let n = Session::open(&jsonl).unwrap().report().entries.len();
            assert_eq!(n, 1 + 2 * TURNS);
            ("JSONL (fdatasync)", times, t0.elapsed())
        },
        open_sqlite("SQLite (WAL, FULL)", &db),
        open_sqlite("SQLite, 63 others", &shared),
    ];

    println!("per-turn cost of a session store (2 records per turn, durable before returning), in {}", dir.display());
    print!("{:<14}", "turns");
    for (name, _, _) in &columns {
        print!("{name:>22}");
    }
    println!();
    for (label, range) in [("1-10", 0..10), ("91-100", 90..100), ("991-1000", 990..1000)] {
        print!("{label:<14}");
        for (_, times, _) in &columns {
            print!("{:>22}", us(median(&times[range.clone()])));
        }
        println!();
    }
    print!("{:<14}", "all 1000");
    for (_, times, _) in &columns {
        print!("{:>22}", us(median(times)));
    }
    println!();
    print!("{:<14}", "open 1000");
    for (_, _, open) in &columns {
        print!("{:>22}", us(*open));
    }
    println!();
    let size = |p: &Path| std::fs::metadata(p).map(|m| m.len()).unwrap_or(0);
    println!(
        "on disk: JSONL {} KB, SQLite {} KB (+ WAL {} KB)",
        size(&jsonl) / 1024,
        size(&db) / 1024,
        size(Path::new(&format!("{}-wal", db.display()))) / 1024
    );
    let _ = std::fs::remove_dir_all(&dir);
}

fn open_sqlite(name: &'static str, db: &Path) -> (&'static str, Vec<Duration>, Duration) {
    let times = run(&mut SqliteSession::open(db, "bench", None).unwrap());
    let t0 = Instant::now();
    let n = SqliteSession::open(db, "bench", None).unwrap().report().entries.len();
    assert_eq!(n, 1 + 2 * TURNS);
    (name, times, t0.elapsed())
}
