//! Background commands end to end through `builtin::register_owned`: `bash` with `run_in_background`
//! returns an id at once, `bash_output` hands on what was printed since the last read, `bash_kill` and
//! `close` end the whole process tree (checked in the process table), the buffer is bounded, and the
//! sandbox confines a background command's writes as it does a foreground one's.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use serde_json::json;
use std::fs;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};
use tooloop::builtin::{self, BackgroundShells, BackgroundStatus, SandboxMode};
use tooloop::tools::ToolRegistry;

#[path = "common/builtin.rs"]
mod builtin_fixture;
#[path = "common/procs.rs"]
mod procs;
#[path = "common/require.rs"]
mod require;
#[path = "common/wait.rs"]
mod wait;

use builtin_fixture::{Fixture, call};

/// The id in a "Started in the background with id bash_N." reply.
fn id_of(reply: &str) -> String {
    let at = reply.find("with id ").unwrap() + "with id ".len();
    reply[at..].split(['.', ' ']).next().unwrap().to_string()
}

/// Pids of live (non-zombie) `sleep` processes whose command line holds `marker` (the shells that started
/// them hold it too, and are not counted).
fn pids_with(marker: &str) -> Vec<u32> {
    procs::live()
        .into_iter()
        .filter(|(_, cmd)| cmd.starts_with("sleep ") && cmd.contains(marker))
        .map(|(pid, _)| pid)
        .collect()
}

/// A sleep duration no other test uses, so its processes can be found by command line.
fn marker() -> String {
    static N: AtomicUsize = AtomicUsize::new(0);
    format!("{}.{}9", 300 + N.fetch_add(1, Ordering::SeqCst), std::process::id() % 1000)
}

/// Read `id` until `want` shows up in what was read so far, or 10 s pass.
fn read_until(registry: &ToolRegistry, id: &str, want: &str) -> String {
    let start = Instant::now();
    let mut seen = String::new();
    while start.elapsed() < Duration::from_secs(10) {
        // Each read is the new output, then a status line: keep the output of every read and the last status,
        // so text that arrived over two reads reads as one.
        let reply = call(registry, "bash_output", json!({"id": id})).unwrap();
        let (output, status) = reply.rsplit_once('\n').unwrap_or(("", &reply));
        seen.push_str(output.strip_suffix("(no new output)").unwrap_or(output).trim_end_matches('\n'));
        if !output.ends_with("(no new output)") && !output.is_empty() {
            seen.push('\n');
        }
        if seen.contains(want) || status.contains(want) {
            return format!("{seen}{status}");
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    panic!("{want:?} not seen in {seen}");
}

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port()
}

#[test]
fn a_background_server_is_started_queried_read_and_killed() {
    let f = Fixture::new("background-test");
    fs::write(f.ws.join("hello.txt"), "hello from the server\n").unwrap();
    let (r, _bg) = f.registry_owned(SandboxMode::Off);
    let port = free_port();
    let started = Instant::now();
    let command = format!("exec python3 -u -m http.server {port} --bind 127.0.0.1");
    let reply = call(&r, "bash", json!({"command": command, "run_in_background": true})).unwrap();
    assert!(started.elapsed() < Duration::from_secs(2), "bash waited for the server");
    let id = id_of(&reply);
    assert_eq!(id, "bash_1");
    read_until(&r, &id, "Serving HTTP");
    let fetch = format!(
        "python3 -c \"import urllib.request as u; print(u.urlopen('http://127.0.0.1:{port}/hello.txt').read().decode())\""
    );
    let out = call(&r, "bash", json!({"command": fetch, "timeout": 20})).unwrap();
    assert!(out.contains("hello from the server"), "{out}");
    // The server logged the request: read since the last read, so the banner is not repeated.
    let log = read_until(&r, &id, "GET /hello.txt");
    assert!(!log.contains("Serving HTTP"), "{log}");
    assert!(log.contains(&format!("[{id}: running]")), "{log}");
    let killed = call(&r, "bash_kill", json!({"id": id})).unwrap();
    assert!(killed.contains("was killed"), "{killed}");
    let after = call(&r, "bash_output", json!({"id": id})).unwrap();
    assert!(after.contains(&format!("[{id}: killed]")), "{after}");
    assert!(std::net::TcpStream::connect(("127.0.0.1", port)).is_err(), "the server still listens");
    let again = call(&r, "bash_kill", json!({"id": id})).unwrap();
    assert!(again.contains("already ended"), "{again}");
}

#[test]
fn close_kills_every_background_command_and_its_children() {
    let f = Fixture::new("background-test");
    let (r, bg) = f.registry_owned(SandboxMode::Off);
    let m = marker();
    // The command itself, a child, and a child that tries to leave the process group.
    let command = format!("sleep {m} & setsid sleep {m} & sleep {m}; wait");
    let reply = call(&r, "bash", json!({"command": command, "run_in_background": true})).unwrap();
    let id = id_of(&reply);
    wait::until("the three sleeps to start", Duration::from_secs(5), || pids_with(&m).len() == 3);
    let list = bg.list();
    assert_eq!(list.len(), 1);
    assert_eq!((list[0].id.as_str(), &list[0].status), (id.as_str(), &BackgroundStatus::Running));
    bg.close();
    if builtin::process_containment() {
        wait::until("every sleep to end after close", Duration::from_secs(5), || pids_with(&m).is_empty());
    } else {
        // Without a PID namespace only the process group is killed; setsid escapes it.
        wait::until("all but the setsid sleep to end after close", Duration::from_secs(5), || pids_with(&m).len() <= 1);
    }
    assert_eq!(bg.list()[0].status, BackgroundStatus::Killed);
}

#[test]
fn dropping_the_tools_kills_background_commands() {
    let f = Fixture::new("background-test");
    let m = marker();
    {
        let (r, bg) = f.registry_owned(SandboxMode::Off);
        call(&r, "bash", json!({"command": format!("sleep {m}"), "run_in_background": true})).unwrap();
        wait::until("the sleep to start", Duration::from_secs(5), || pids_with(&m).len() == 1);
        drop(bg);
    }
    wait::until("the sleep to end once the tools are dropped", Duration::from_secs(5), || pids_with(&m).is_empty());
}

#[test]
fn exit_code_is_reported_and_leftovers_are_killed() {
    let f = Fixture::new("background-test");
    let (r, _bg) = f.registry_owned(SandboxMode::Off);
    let m = marker();
    let command = format!("echo first; (sleep {m} &); echo second; exit 3");
    let id = id_of(&call(&r, "bash", json!({"command": command, "run_in_background": true})).unwrap());
    let out = read_until(&r, &id, "exit code: 3");
    assert!(out.contains("first\nsecond\n"), "{out}");
    // Only a PID namespace finds a process the command left behind in a subshell of its own.
    if require::process_containment() {
        wait::until("the process the command left to be killed", Duration::from_secs(5), || pids_with(&m).is_empty());
    }
}

#[test]
fn the_buffer_is_bounded_and_says_what_was_dropped() {
    let f = Fixture::new("background-test");
    let (r, _bg) = f.registry_owned(SandboxMode::Off);
    // 1 MB of output, four times the buffer.
    let command = "head -c 1048576 /dev/zero | tr '\\0' 'x'; echo; echo END";
    let id = id_of(&call(&r, "bash", json!({"command": command, "run_in_background": true})).unwrap());
    wait::until("the command to end", Duration::from_secs(10), || {
        builtin_status(&_bg, &id) != BackgroundStatus::Running
    });
    let out = call(&r, "bash_output", json!({"id": id})).unwrap();
    assert!(out.starts_with("["), "{}", &out[..200]);
    assert!(out.contains("bytes of older output were dropped"), "{}", &out[..300]);
    assert!(out.contains("END"));
    assert!(out.len() < 40_000, "{}", out.len());
}

fn builtin_status(bg: &BackgroundShells, id: &str) -> BackgroundStatus {
    bg.list().into_iter().find(|i| i.id == id).unwrap().status
}

#[test]
fn unknown_ids_and_bad_flags_are_errors() {
    let f = Fixture::new("background-test");
    let (r, _bg) = f.registry_owned(SandboxMode::Off);
    let err = call(&r, "bash_output", json!({"id": "bash_9"})).unwrap_err();
    assert!(err.contains("none was started"), "{err}");
    let err = call(&r, "bash", json!({"command": "true", "run_in_background": "yes"})).unwrap_err();
    assert!(err.contains("run_in_background"), "{err}");
    // run_in_background: false is an ordinary foreground command.
    assert_eq!(call(&r, "bash", json!({"command": "echo hi", "run_in_background": false})).unwrap(), "hi");
}

#[test]
fn a_background_command_is_confined_by_the_sandbox() {
    if !require::landlock() {
        return;
    }
    let f = Fixture::new("background-test");
    let (r, _bg) = f.registry_owned(SandboxMode::WorkspaceWrite);
    let outside = f.outside();
    let command = format!("echo in > inside.txt; echo out > {}/escaped.txt; echo done $?", outside.display());
    let id = id_of(&call(&r, "bash", json!({"command": command, "run_in_background": true})).unwrap());
    let out = read_until(&r, &id, "exit code");
    assert!(out.contains("done 1") || out.contains("Permission denied"), "{out}");
    assert!(f.ws.join("inside.txt").exists());
    assert!(!outside.join("escaped.txt").exists(), "a background command wrote outside the workspace");
}
