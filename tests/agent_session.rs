//! Failure without loss, resume, and sessions (items 4 and 5), end to end: through the scripted provider
//! and through the real `AnthropicProvider` against the mock server (`tests/mock`). The loop itself
//! (tools, stop reasons, events, cancel) is in `tests/agent_loop.rs`.
//!
//! Every scenario ends with `assert_valid_view` on the agent's view AND on every request that went out.
//!
//! The tests of what every session store promises run on both stores (the JSONL file and a SQLite database
//! session, [`STORES`]), through the `session` spec and the store seam (`tooloop::store`); the ones about
//! the JSONL file's own format (torn lines, corrupt lines, `save`) run on the file.
#![allow(clippy::unwrap_used, clippy::expect_used)]

#[path = "common/mock.rs"]
mod mock;

use std::path::Path;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, OnceLock, mpsc};
use std::time::{Duration, Instant};

use mock::{MockServer, scenario};
use serde_json::{Value, json};
use tooloop::provider::host::reply;
use tooloop::provider::{FnProvider, ScriptedProvider};
use tooloop::{
    Agent, ApiErrorKind, ContentBlock, Entry, EntryRole, EntryStatus, Error, Event, LoadReport, Message, Session,
    SessionStore, StopReason,
};

#[path = "common/agent.rs"]
mod common;
use common::*;

// ---------------------------------------------------------------------------------------------------------
// Helpers of this file (the shared ones are in tests/common/agent.rs).
// ---------------------------------------------------------------------------------------------------------

// ---------------------------------------------------------------------------------------------------------
// Session helpers.
// ---------------------------------------------------------------------------------------------------------

#[path = "common/tempdir.rs"]
mod tempdir;
use tempdir::TempDir;

/// The two session stores every store test runs on.
#[derive(Clone, Copy, Debug, PartialEq)]
enum Store {
    Jsonl,
    Sqlite,
}

const STORES: [Store; 2] = [Store::Jsonl, Store::Sqlite];

/// The `session` spec of a new session called `name` in `dir`: `name.jsonl`, or `name.db#name`.
fn spec(dir: &TempDir, store: Store, name: &str) -> std::path::PathBuf {
    match store {
        Store::Jsonl => dir.file(&format!("{name}.jsonl")),
        Store::Sqlite => dir.file(&format!("{name}.db#{name}")),
    }
}

fn is_jsonl(spec: &Path) -> bool {
    spec.extension().is_some_and(|e| e == "jsonl")
}

/// Open the session a spec names, through the seam.
fn open_store(spec: &Path) -> Box<dyn SessionStore> {
    tooloop::store::open(spec, None).unwrap_or_else(|e| panic!("opening {}: {e}", spec.display()))
}

/// Read the session a spec names without opening it for writing.
fn load_store(spec: &Path) -> LoadReport {
    tooloop::store::load(spec).unwrap_or_else(|e| panic!("loading {}: {e}", spec.display()))
}

/// Every byte the store keeps on disk: the file, or the database with its WAL.
fn raw_bytes(spec: &Path) -> String {
    if is_jsonl(spec) {
        return std::fs::read_to_string(spec).unwrap();
    }
    let db = spec.to_str().unwrap().rsplit_once('#').unwrap().0;
    let mut all = Vec::new();
    for suffix in ["", "-wal"] {
        all.extend(std::fs::read(format!("{db}{suffix}")).unwrap_or_default());
    }
    String::from_utf8_lossy(&all).into_owned()
}

/// The session file's lines, each with its trailing newline.
fn lines_of(path: &Path) -> Vec<String> {
    let text = std::fs::read_to_string(path).unwrap();
    text.split_inclusive('\n').map(str::to_string).collect()
}

/// Every line is complete and parses as JSON (nothing glued onto a torn line).
fn assert_clean_jsonl(path: &Path) {
    for (i, line) in lines_of(path).iter().enumerate() {
        assert!(line.ends_with('\n'), "line {} has no newline: {line:?}", i + 1);
        serde_json::from_str::<Value>(line).unwrap_or_else(|e| panic!("line {} does not parse ({e}): {line:?}", i + 1));
    }
}

fn body_messages(body: &Value) -> Value {
    body["messages"].clone()
}

const SESSION_INPUT: &str = "What's the weather in Paris?";

/// Run the `agent_session_tool_turn` scenario's first run (tool turn + final text) with a session at `path`.
/// Returns the mock (for its recorded requests) and the agent.
fn first_run_with_session(path: &Path) -> (MockServer, Arc<Agent>, Arc<AtomicUsize>) {
    let mock = MockServer::start(&scenario("agent_session_tool_turn"));
    let agent = Arc::new(Agent::new(anthropic(&mock), config()));
    let report = agent.attach_store(open_store(path)).unwrap();
    assert!(report.created && report.entries.is_empty());
    let calls = Arc::new(AtomicUsize::new(0));
    agent.tools().register(weather_tool(calls.clone())).unwrap();
    let result = agent.run(SESSION_INPUT, &mut |_| {}).unwrap();
    assert_eq!(result.text, "Paris: 18 °C, partly cloudy.");
    assert_eq!(calls.load(Ordering::SeqCst), 1);
    (mock, agent, calls)
}

/// A fresh agent on a mock with `responses`, the session at `path` attached.
fn reload(path: &Path, responses: Value) -> (MockServer, Arc<Agent>, Arc<AtomicUsize>, LoadReport) {
    let mock = MockServer::start(&json!({ "responses": responses }));
    let agent = Arc::new(Agent::new(anthropic(&mock), config()));
    let calls = Arc::new(AtomicUsize::new(0));
    agent.tools().register(weather_tool(calls.clone())).unwrap();
    let report = agent.attach_store(open_store(path)).unwrap();
    (mock, agent, calls, report)
}

fn text_response(text: &str) -> Value {
    json!({"expect": {"method": "POST", "path": "/v1/messages"},
           "anthropic": {"id": "msg_reload", "type": "message", "role": "assistant", "model": "claude-sonnet-4-6",
                         "content": [{"type": "text", "text": text}], "stop_reason": "end_turn", "stop_sequence": null,
                         "usage": {"input_tokens": 9, "output_tokens": 3}}})
}

// ---------------------------------------------------------------------------------------------------------
// Item 4: nothing is lost; a failed request leaves a valid conversation that resumes without re-running tools.
// ---------------------------------------------------------------------------------------------------------

#[test]
fn input_assistant_turns_and_tool_results_are_stored_and_on_disk_before_each_request() {
    for store in STORES {
        stored_before_each_request(store);
    }
}

fn stored_before_each_request(store: Store) {
    let dir = TempDir::new("session-before-each-request");
    let path = spec(&dir, store, "s");
    let store: Arc<OnceLock<tooloop::Conversation>> = Arc::default();
    let checked = Arc::new(AtomicUsize::new(0));
    let (s, p, n) = (store.clone(), path.clone(), checked.clone());
    let provider = FnProvider::new(move |req: &tooloop::Request, _: &tooloop::CancelToken| {
        let store = s.get().expect("the store is set before the first run");
        // Every finished entry (all but the assistant turn now streaming) is in the store AND on disk...
        let finished: Vec<Entry> =
            store.snapshot().into_iter().filter(|e| e.status != EntryStatus::Streaming).collect();
        let on_disk = load_store(&p);
        assert_eq!(on_disk.torn_tail, None);
        assert_eq!(
            on_disk.entries,
            finished,
            "the session file lags behind the store at request {}",
            n.load(Ordering::SeqCst)
        );
        // ...and the request is exactly what the file alone reproduces.
        assert_eq!(req.messages, tooloop::conversation::render_view(&on_disk.entries));
        let turn = n.fetch_add(1, Ordering::SeqCst);
        Ok(match turn {
            0 => reply(
                vec![
                    tool_use("t1", "get_weather", json!({"city": "Paris"})),
                    tool_use("t2", "get_weather", json!({"city": "Rome"})),
                ],
                StopReason::ToolUse,
            ),
            1 => reply(vec![tool_use("t3", "get_weather", json!({"city": "Oslo"}))], StopReason::ToolUse),
            _ => reply(vec![ContentBlock::text("All three are mild.")], StopReason::EndTurn),
        })
    });
    let agent = Agent::new(Arc::new(provider), config());
    store.set(agent.conversation().clone()).unwrap();
    agent.attach_store(open_store(&path)).unwrap();
    agent.tools().register(weather_tool(Arc::default())).unwrap();
    let result = agent.run("Paris, Rome, then Oslo.", &mut |_| {}).unwrap();
    assert_eq!(result.text, "All three are mild.", "{store:?}");
    assert_eq!(checked.load(Ordering::SeqCst), 3);
    // After the run, the file holds the whole conversation.
    assert_eq!(load_store(&path).entries, agent.conversation().snapshot());
    if is_jsonl(&path) {
        assert_clean_jsonl(&path);
    }
    assert_valid_view(&agent.messages());
}

#[test]
fn a_request_failing_after_retries_keeps_everything_and_resume_does_not_rerun_the_tool() {
    for (kind, store) in
        [Kind::Scripted, Kind::MockSse, Kind::MockJson].into_iter().flat_map(|k| STORES.map(|s| (k, s)))
    {
        let dir = TempDir::new(&format!("529-{kind:?}-{store:?}"));
        let path = spec(&dir, store, "s");
        let mut scen = scenario("agent_529_after_tool");
        if kind == Kind::Scripted {
            // No HTTP layer, so no retries: one failure stands for the three 529s.
            scen["responses"].as_array_mut().unwrap().drain(2..4);
        }
        let rig = Rig::new(kind, &scen, config());
        rig.agent.attach_store(open_store(&path)).unwrap();
        let calls = Arc::new(AtomicUsize::new(0));
        rig.agent.tools().register(weather_tool(calls.clone())).unwrap();

        let err = rig.agent.run("Weather in Paris?", &mut |_| {}).unwrap_err();
        let api = err.api().unwrap_or_else(|| panic!("{kind:?}: expected an API error, got {err:?}"));
        assert_eq!((api.kind, api.status), (ApiErrorKind::Overloaded, 529));
        assert_eq!(calls.load(Ordering::SeqCst), 1);
        // Mock: 1 + 3 attempts (2 retries). Scripted: no HTTP layer, one failure.
        let expected_requests = if kind == Kind::Scripted { 2 } else { 4 };
        assert_eq!(rig.requests().len(), expected_requests, "{kind:?}");
        // The failure is visible: an error entry, in the store and in the file.
        let failed = rig.agent.conversation().snapshot().pop().unwrap();
        assert_eq!((failed.role, failed.status), (EntryRole::Assistant, EntryStatus::Error));
        assert!(failed.error.as_deref().unwrap().contains("Overloaded"), "{:?}", failed.error);
        assert_eq!(load_store(&path).entries.last(), Some(&failed));
        let view = rig.agent.messages();
        assert_eq!(view.len(), 3, "user, the tool turn, its result");
        rig.check();

        let done = rig.agent.resume(&mut |_| {}).unwrap();
        assert_eq!(done.text, "Paris: 18 °C.");
        assert_eq!(calls.load(Ordering::SeqCst), 1, "{kind:?}: resume re-ran the tool");
        let requests = rig.requests();
        assert_eq!(requests.len(), expected_requests + 1);
        assert_eq!(
            body_messages(&requests[expected_requests]),
            body_messages(&requests[1]),
            "resume re-sends the same view"
        );
        rig.check();

        // The file alone gives back the same conversation (once the first agent, which holds the session's
        // lock, is gone, as after a crash).
        let (messages, entries) = (rig.agent.messages(), rig.agent.conversation().snapshot());
        drop(rig);
        let reloaded = Agent::new(Arc::new(ScriptedProvider::new([])), config());
        reloaded.attach_store(open_store(&path)).unwrap();
        assert_eq!(reloaded.messages(), messages);
        assert_eq!(reloaded.conversation().snapshot(), entries);
    }
}

#[test]
fn a_stream_cut_off_mid_response_keeps_the_partial_as_an_error_entry_and_resume_resends_the_same_view() {
    let rig = Rig::new(Kind::MockSse, &scenario("anthropic_stream_drop"), config());
    let err = rig.agent.run("Say something long.", &mut |_| {}).unwrap_err();
    assert!(matches!(err, Error::StreamInterrupted { .. }), "{err:?}");
    let failed = rig.agent.conversation().snapshot().pop().unwrap();
    assert_eq!(failed.status, EntryStatus::Error);
    assert!(!failed.content.is_empty(), "the partial text is kept for the record");
    assert_eq!(rig.agent.messages(), vec![Message::user("Say something long.")]);
    rig.check();
    rig.mock.as_ref().unwrap().load(&scenario("anthropic_text"));
    rig.agent.resume(&mut |_| {}).unwrap();
    assert_eq!(checked_messages(&rig.requests()[0]), vec![Message::user("Say something long.")]);
    rig.check();
}

#[test]
fn resume_on_an_empty_conversation_is_a_config_error() {
    let agent = Agent::new(Arc::new(ScriptedProvider::new([])), config());
    assert!(matches!(agent.resume(&mut |_| {}), Err(Error::Config(_))));
}

// ---------------------------------------------------------------------------------------------------------
// Item 5: sessions.
// ---------------------------------------------------------------------------------------------------------

#[test]
fn a_session_truncated_mid_line_keeps_every_complete_line_reports_the_torn_one_and_resumes() {
    let dir = TempDir::new("session-torn");
    let path = dir.file("s.jsonl");
    let (first_mock, first, _) = first_run_with_session(&path);
    let first_entries = first.conversation().snapshot();
    drop(first); // the crashed process: its lock on the session is gone
    let lines = lines_of(&path);
    assert_eq!(lines.len(), 5, "header, user, tool turn, tool result, final turn: {lines:#?}");
    // A crash while the final turn's line was being written: half of it made it to disk.
    let full: usize = lines.iter().map(String::len).sum();
    let torn = lines[4].len() / 2;
    let f = std::fs::OpenOptions::new().write(true).open(&path).unwrap();
    f.set_len((full - lines[4].len() + torn) as u64).unwrap();
    drop(f);

    let (mock, agent, calls, report) = reload(&path, json!([text_response("Yes, still 18 °C.")]));
    assert_eq!(report.torn_tail, Some((5, torn)), "the torn line is reported (line number, bytes)");
    assert!(report.skipped.is_empty());
    assert_eq!(report.entries.len(), 3);
    assert_eq!(report.entries, first_entries[..3].to_vec(), "every complete line is kept");
    // The torn line is gone from the file, so the next line starts on a line of its own.
    assert_clean_jsonl(&path);

    agent.resume(&mut |_| {}).unwrap();
    assert_eq!(calls.load(Ordering::SeqCst), 0, "the tool already ran before the crash");
    let requests = mock.requests();
    assert_eq!(requests.len(), 1);
    // The next request is the one the first agent sent after its tool ran: the turn lost in the crash is asked again.
    assert_eq!(body_messages(&requests[0]["body"]), body_messages(&first_mock.requests()[1]["body"]));
    checked_messages(&requests[0]["body"]);
    assert_clean_jsonl(&path);
    let after = Session::load(&path).unwrap();
    assert_eq!((after.torn_tail, after.entries.len()), (None, 4));
    assert_valid_view(&agent.messages());
}

#[test]
fn a_session_ending_in_an_unanswered_tool_use_is_repaired_with_an_interrupted_error_result() {
    // Two ways to get there: a crash tore the tool result's line, or the process died before writing it.
    let dir = TempDir::new("session-unanswered");
    let torn_path = dir.file("torn.jsonl");
    first_run_with_session(&torn_path);
    let lines = lines_of(&torn_path);
    let keep: usize = lines[..3].iter().map(String::len).sum::<usize>() + lines[3].len() / 3;
    std::fs::OpenOptions::new().write(true).open(&torn_path).unwrap().set_len(keep as u64).unwrap();

    let written_paths = STORES.map(|store| spec(&dir, store, "written"));
    for written_path in &written_paths {
        let mut s = open_store(written_path);
        s.append(&Entry::new(EntryRole::User, vec![ContentBlock::text(SESSION_INPUT)])).unwrap();
        let mut turn = Entry::new(
            EntryRole::Assistant,
            vec![
                ContentBlock::text("Looking it up."),
                tool_use("toolu_01AgSs1", "get_weather", json!({"city": "Paris"})),
            ],
        );
        turn.stop_reason = Some(StopReason::ToolUse);
        s.append(&turn).unwrap();
    }

    let [written_jsonl, written_db] = written_paths;
    for path in [torn_path, written_jsonl, written_db] {
        let (mock, agent, calls, report) = reload(&path, json!([text_response("I could not check, sorry.")]));
        assert_eq!(report.entries.len(), 2, "{}", path.display());
        let repaired = agent.conversation().snapshot().pop().unwrap();
        assert_eq!(repaired.role, EntryRole::Tool);
        let text = serde_json::to_string(&repaired.content).unwrap();
        assert!(text.contains("\"is_error\":true") && text.contains("interrupted"), "{text}");
        assert!(!text.to_lowercase().contains("denied"), "an interrupted call is not a denied one: {text}");
        // The repair is itself recorded, so the file no longer ends in an unanswered call.
        let on_disk = load_store(&path);
        assert_eq!((on_disk.torn_tail, on_disk.entries.last()), (None, Some(&repaired)));
        assert_valid_view(&agent.messages());

        agent.resume(&mut |_| {}).unwrap();
        assert_eq!(calls.load(Ordering::SeqCst), 0, "a call that may have run is never re-run");
        let body = mock.requests()[0]["body"].clone();
        let results = results_of(&body["messages"][2]);
        assert_eq!(results.len(), 1);
        assert_eq!(results[0].0, "toolu_01AgSs1");
        assert!(results[0].2 && results[0].1.contains("interrupted"), "{results:?}");
        checked_messages(&body);
        if is_jsonl(&path) {
            assert_clean_jsonl(&path);
        }
    }
}

#[test]
fn a_reloaded_session_resumes_exactly_where_it_stopped() {
    for store in STORES {
        resumes_exactly(store);
    }
}

fn resumes_exactly(store: Store) {
    let dir = TempDir::new("session-exact");
    let path = spec(&dir, store, "s");
    let (_m, first, _) = first_run_with_session(&path);
    let (entries, messages, usage) = (first.conversation().snapshot(), first.messages(), first.usage());
    drop(first); // releases the session's lock
    let (mock, agent, _, report) = reload(&path, json!([text_response("Yes, still 18 °C.")]));
    assert_eq!(report.torn_tail, None);
    assert!(!report.created);
    assert_eq!(agent.conversation().snapshot(), entries, "entries come back identical");
    assert_eq!(agent.messages(), messages);
    assert_eq!(agent.usage(), usage, "usage, cache fields included, survives the reload");

    agent.run("Still?", &mut |_| {}).unwrap();
    let mut expected = serde_json::to_value(messages).unwrap();
    expected.as_array_mut().unwrap().push(json!({"role": "user", "content": [{"type": "text", "text": "Still?"}]}));
    assert_eq!(body_messages(&mock.requests()[0]["body"]), expected);
    assert_valid_view(&agent.messages());
}

#[test]
fn the_session_file_never_contains_the_api_key() {
    for store in STORES {
        never_the_api_key(store);
    }
}

fn never_the_api_key(store: Store) {
    let dir = TempDir::new("session-secret");
    let path = spec(&dir, store, "s");
    let mut responses = vec![
        json!({"status": 401, "json": {"type": "error", "error": {"type": "authentication_error", "message": "invalid x-api-key"}}}),
    ];
    responses.extend(scenario("agent_session_tool_turn")["responses"].as_array().unwrap()[..2].iter().cloned());
    let mock = MockServer::start(&json!({ "responses": responses }));
    let agent = Agent::new(anthropic(&mock), config());
    agent.attach_store(open_store(&path)).unwrap();
    agent.tools().register(weather_tool(Arc::default())).unwrap();

    let err = agent.run("hello", &mut |_| {}).unwrap_err();
    assert_eq!(err.api().map(|a| a.kind), Some(ApiErrorKind::Authentication));
    agent.run(SESSION_INPUT, &mut |_| {}).unwrap();
    // The key did go over the wire (so this test can fail)...
    assert_eq!(mock.requests()[0]["headers"]["x-api-key"], KEY);
    // ...and is nowhere in the file, nor in what the agent and the error print.
    let file = raw_bytes(&path);
    assert!(file.contains("invalid x-api-key") && file.contains("18 °C"), "{store:?}: the store holds the run: {file}");
    for needle in [KEY, "SECRET-5f3c9e71"] {
        assert!(!file.contains(needle), "the session file contains the API key");
        assert!(!format!("{err} {err:?} {agent:?} {:?}", agent.provider().name()).contains(needle));
    }
    assert_valid_view(&agent.messages());
}

#[test]
fn a_cancelled_run_is_recorded_in_the_session_and_a_reload_resumes_it() {
    for store in STORES {
        cancelled_run_recorded(store);
    }
}

fn cancelled_run_recorded(store: Store) {
    let dir = TempDir::new("session-cancel");
    let path = spec(&dir, store, "s");
    let rig = Rig::new(Kind::MockSse, &scenario("anthropic_stream_stall"), config());
    rig.agent.attach_store(open_store(&path)).unwrap();
    let (tx, rx) = mpsc::channel::<()>();
    let agent = rig.agent.clone();
    let handle = std::thread::spawn(move || {
        agent.run("Tell me something.", &mut |e| {
            if matches!(e, Event::Text { .. }) {
                let _ = tx.send(());
            }
        })
    });
    rx.recv_timeout(Duration::from_secs(10)).unwrap();
    let t0 = Instant::now();
    rig.agent.cancel();
    let outcome = handle.join().unwrap();
    assert!(matches!(outcome, Err(Error::Cancelled { .. })), "{outcome:?}");
    println!("cancelled mid-stream in {} ms", t0.elapsed().as_millis());
    let on_disk = load_store(&path);
    assert_eq!(on_disk.entries.len(), 2, "{store:?}");
    assert_eq!(
        (on_disk.entries[1].status, on_disk.entries[1].error.as_deref()),
        (EntryStatus::Error, Some("cancelled"))
    );
    rig.check();
    drop(rig); // the first agent lets go of the session's lock

    let (mock, reloaded, _, _) = reload(&path, json!([text_response("Here is something.")]));
    reloaded.resume(&mut |_| {}).unwrap();
    assert_eq!(checked_messages(&mock.requests()[0]["body"]), vec![Message::user("Tell me something.")]);
    assert_valid_view(&reloaded.messages());
}

#[test]
fn reset_is_recorded_and_a_reload_starts_after_it() {
    for store in STORES {
        let dir = TempDir::new("session-reset");
        let path = spec(&dir, store, "s");
        let (_m, first, _) = first_run_with_session(&path);
        first.reset().unwrap();
        assert!(first.messages().is_empty());
        let report = load_store(&path);
        assert!(report.entries.is_empty(), "{store:?}: entries before a reset are history only");
        if is_jsonl(&path) {
            assert_eq!(lines_of(&path).len(), 6, "the old lines stay in the file (append-only)");
        } else {
            let db = dir.file("s.db");
            let records = tooloop::session_sqlite::SqliteSession::records(&db, "s").unwrap().records;
            assert_eq!(records.len(), 5, "the old records stay in the database (append-only)");
        }
        // A reload starts after the reset, and goes on from there.
        drop(first);
        let (_mock, again, _, report) = reload(&path, json!([text_response("Fresh start.")]));
        assert!(report.entries.is_empty(), "{store:?}");
        again.run("hello again", &mut |_| {}).unwrap();
        assert_eq!(load_store(&path).entries.len(), 2, "{store:?}");
    }
}

#[test]
fn a_corrupt_line_in_the_middle_is_skipped_and_reported_and_the_rest_kept() {
    let dir = TempDir::new("session-corrupt");
    let path = dir.file("s.jsonl");
    first_run_with_session(&path);
    let mut lines = lines_of(&path);
    lines.insert(2, "{\"type\": \"entry\", \"entry\": {garbage\n".to_string());
    std::fs::write(&path, lines.concat()).unwrap();
    let (_mock, agent, _, report) = reload(&path, json!([]));
    assert_eq!(report.skipped.len(), 1);
    assert_eq!(report.skipped[0].0, 3, "the 1-based line number of the bad line");
    assert_eq!(report.entries.len(), 4);
    assert_eq!(report.torn_tail, None);
    assert_valid_view(&agent.messages());
}

#[test]
fn attaching_a_session_to_a_conversation_that_has_entries_is_refused() {
    let dir = TempDir::new("session-attach-late");
    let agent = Agent::new(
        Arc::new(ScriptedProvider::new([reply(vec![ContentBlock::text("hi")], StopReason::EndTurn)])),
        config(),
    );
    agent.run("hello", &mut |_| {}).unwrap();
    for store in STORES {
        let err = agent.attach_store(open_store(&spec(&dir, store, "s"))).unwrap_err();
        assert!(matches!(err, Error::Config(_)), "{store:?}: {err:?}");
    }
}

#[test]
fn save_writes_the_whole_conversation_atomically_and_loads_back_without_streaming_entries() {
    let dir = TempDir::new("session-save");
    let path = dir.file("saved.jsonl");
    std::fs::write(&path, "an older file that the save replaces\n").unwrap();
    let mut streaming = Entry::new(EntryRole::Assistant, vec![ContentBlock::text("half")]);
    streaming.status = EntryStatus::Streaming;
    let entries = vec![
        Entry::new(EntryRole::User, vec![ContentBlock::text("q")]),
        Entry::new(EntryRole::Assistant, vec![ContentBlock::text("a")]),
        streaming,
    ];
    Session::save(&path, &entries).unwrap();
    assert_clean_jsonl(&path);
    let report = Session::load(&path).unwrap();
    assert_eq!(report.entries, entries[..2].to_vec());
    assert!(report.skipped.is_empty() && report.torn_tail.is_none(), "{report:?}");
    let left: Vec<_> = std::fs::read_dir(&dir.0).unwrap().map(|e| e.unwrap().file_name()).collect();
    assert_eq!(left, vec![std::ffi::OsString::from("saved.jsonl")], "no temporary file is left behind");
    assert!(Session::save(dir.0.join(".."), &entries).is_err(), "a path naming no file is refused");
}
