//! The `bash` tool: run one shell command in the workspace, bounded in time and in output.
//!
//! The command runs as `bash -c <command>` (`sh -c` where there is no bash) in a process group of its
//! own, with the workspace root as its working folder and standard input closed. It must never outlive
//! its call by accident: on timeout or cancel the whole group gets SIGKILL, so `sleep 100 & wait` dies
//! with its children. It must never hang on pipes: stdout and stderr are drained by two threads into
//! bounded buffers (head and tail kept, the middle counted), and background processes that still hold
//! the pipes shortly after the command exits are killed with the group. Processes that let go of the
//! pipes (`server > log 2>&1 &`) are left running on purpose: starting a server is a normal step.
//!
//! This tool is NOT confined to the workspace (see the [module docs](super)).

use super::sandbox::Workspace;
use super::{Args, ToolReply};
use crate::cancel::CancelToken;
use nix::sys::signal::{Signal, killpg};
use nix::unistd::Pid;
use serde_json::Value;
use std::collections::VecDeque;
use std::io::{self, Read};
use std::os::unix::process::{CommandExt, ExitStatusExt};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::mpsc::{self, RecvTimeoutError};
use std::sync::{Arc, Mutex};
use std::thread;
use std::time::{Duration, Instant};

/// Seconds a command may run when the call gives no `timeout`.
pub const DEFAULT_TIMEOUT_SECS: u64 = 120;
/// The largest `timeout` a call may ask for; larger values are clamped to it (and the reply says so).
pub const MAX_TIMEOUT_SECS: u64 = 600;
/// Characters of stdout and stderr together in a reply; past it the middle is cut.
pub const OUTPUT_CAP_CHARS: usize = 30_000;

/// How often the command is checked for exit, timeout and cancel.
const POLL: Duration = Duration::from_millis(10);
/// After a kill, how long the reader threads get to see the pipes close before we stop waiting for them
/// (a process that left the group with `setsid` may hold a pipe forever).
const DRAIN_AFTER_KILL: Duration = Duration::from_millis(150);

/// Limits of the `bash` tool. [`Default`] gives the documented values; hosts and tests may tighten them.
///
/// # Threads and cloning
/// Plain data: `Send + Sync`, cheap to clone.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct BashOptions {
    /// Time limit when the call gives no `timeout` ([`DEFAULT_TIMEOUT_SECS`]).
    pub default_timeout: Duration,
    /// The largest time limit a call may ask for ([`MAX_TIMEOUT_SECS`]).
    pub max_timeout: Duration,
    /// Characters of output kept, head and tail together ([`OUTPUT_CAP_CHARS`]).
    pub output_cap: usize,
    /// After the command exits, how long background processes may keep stdout/stderr open before the
    /// process group is killed (default 500 ms).
    pub exit_grace: Duration,
}

impl Default for BashOptions {
    fn default() -> Self {
        BashOptions {
            default_timeout: Duration::from_secs(DEFAULT_TIMEOUT_SECS),
            max_timeout: Duration::from_secs(MAX_TIMEOUT_SECS),
            output_cap: OUTPUT_CAP_CHARS,
            exit_grace: Duration::from_millis(500),
        }
    }
}

/// The `bash` tool with explicit limits: `input` is `{"command": string, "timeout"?: integer seconds}`.
///
/// `Ok` carries `exit code: N`, then stdout, then `[stderr]` and stderr when there is any. A non-zero
/// exit is `Ok`, since the model needs the output. A `timeout` over `opts.max_timeout` is clamped, with
/// a note at the end of the reply.
///
/// # Errors
/// `Err(message for the model)` when the input is invalid, the shell cannot be started, the time limit
/// is reached, or `cancel` fires (noticed within 10 ms, then the group is killed); after a timeout or a
/// cancel the output gathered so far follows the message.
pub fn run_bash(ws: &Workspace, input: &Value, opts: &BashOptions, cancel: &CancelToken) -> ToolReply {
    let args = Args::new("bash", input, &["command", "timeout"])?;
    let command = args.string("command")?;
    if command.trim().is_empty() {
        return Err("bash command is empty: give the shell command to run".to_string());
    }
    let mut notes = Vec::new();
    let timeout = match args.opt_int("timeout")? {
        None => opts.default_timeout,
        Some(secs) if secs < 1 => {
            return Err(format!("bash timeout must be a number of seconds >= 1, got {secs}"));
        }
        Some(secs) => {
            let asked = Duration::from_secs(secs as u64);
            if asked > opts.max_timeout {
                notes.push(format!(
                    "[timeout {secs} s is over the {} s maximum; used {} s]",
                    opts.max_timeout.as_secs(),
                    opts.max_timeout.as_secs()
                ));
                opts.max_timeout
            } else {
                asked
            }
        }
    };

    let mut child = spawn(ws, command)?;
    let group = match i32::try_from(child.id()) {
        Ok(pid) => Pid::from_raw(pid),
        Err(_) => {
            let _ = child.kill();
            let _ = child.wait();
            return Err("could not start the command: its process id is out of range".to_string());
        }
    };

    // Two reader threads fill bounded buffers and say when their pipe closed. The buffers are shared so
    // the output can be taken even if a reader never finishes (a pipe held by an escaped process).
    let stdout = Arc::new(Mutex::new(Capture::new(opts.output_cap)));
    let stderr = Arc::new(Mutex::new(Capture::new(opts.output_cap)));
    let (done_tx, done_rx) = mpsc::channel::<()>();
    let mut readers = 0;
    if let Some(pipe) = child.stdout.take() {
        spawn_reader(pipe, Arc::clone(&stdout), done_tx.clone());
        readers += 1;
    }
    if let Some(pipe) = child.stderr.take() {
        spawn_reader(pipe, Arc::clone(&stderr), done_tx.clone());
        readers += 1;
    }
    drop(done_tx);
    let mut drained = Drained { rx: done_rx, pending: readers };

    let started = Instant::now();
    let deadline = started + timeout;
    let ending = wait_for_exit(&mut child, group, deadline, cancel);

    let mut incomplete = false;
    let status = match ending {
        Ending::Exited(status) => {
            // The shell is gone; its background children may still hold the pipes.
            let grace_end = (Instant::now() + opts.exit_grace).min(deadline);
            match drained.wait_until(grace_end, cancel) {
                Drain::Done => {}
                Drain::Cancelled => {
                    kill_group(group);
                    drained.wait_until(Instant::now() + DRAIN_AFTER_KILL, &CancelToken::new());
                    let output = render(&stdout, &stderr, opts.output_cap);
                    return Err(format!("cancelled: the command was stopped.\n{output}"));
                }
                Drain::TimedOut => {
                    kill_group(group);
                    notes.push(
                        "[background processes still holding stdout/stderr after the command exited were \
                         killed; redirect their output (cmd > log 2>&1 &) to keep them running]"
                            .to_string(),
                    );
                    incomplete = !matches!(drained.wait_until(Instant::now() + DRAIN_AFTER_KILL, cancel), Drain::Done);
                }
            }
            status
        }
        Ending::TimedOut | Ending::Cancelled => {
            drained.wait_until(Instant::now() + DRAIN_AFTER_KILL, &CancelToken::new());
            let output = render(&stdout, &stderr, opts.output_cap);
            return Err(if matches!(ending, Ending::Cancelled) {
                format!("cancelled: the command was stopped and its process group killed.\n{output}")
            } else {
                format!(
                    "the command timed out after {} s and was killed with every process it started \
                     (raise `timeout`, up to {} s, or run less at once). Output so far:\n{output}",
                    timeout.as_secs(),
                    opts.max_timeout.as_secs()
                )
            });
        }
        Ending::Failed(e) => return Err(format!("lost track of the command: {e}")),
    };
    if incomplete {
        notes.push("[output may be incomplete: a process outside the command's group holds the pipes]".to_string());
    }

    let mut reply = format!("exit code: {}", describe(status));
    let output = render(&stdout, &stderr, opts.output_cap);
    if !output.is_empty() {
        reply.push('\n');
        reply.push_str(&output);
    }
    for note in notes {
        reply.push('\n');
        reply.push_str(&note);
    }
    Ok(reply)
}

/// `bash -c command`, or `sh -c command` when bash is not installed.
fn spawn(ws: &Workspace, command: &str) -> Result<Child, String> {
    let start = |shell: &str| {
        Command::new(shell)
            .arg("-c")
            .arg(command)
            .current_dir(ws.root())
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            // A group of its own, so a timeout or cancel can kill everything the command started.
            .process_group(0)
            .spawn()
    };
    match start("bash") {
        Ok(child) => Ok(child),
        Err(e) if e.kind() == io::ErrorKind::NotFound => start("sh").map_err(|e2| {
            format!(
                "could not start the command: neither bash ({e}) nor sh ({e2}) could be run in {}",
                ws.root().display()
            )
        }),
        Err(e) => Err(format!("could not start the command with bash: {e}")),
    }
}

enum Ending {
    Exited(ExitStatus),
    TimedOut,
    Cancelled,
    Failed(io::Error),
}

/// Wait for the shell to exit, killing its group on timeout or cancel (and then reaping the shell).
fn wait_for_exit(child: &mut Child, group: Pid, deadline: Instant, cancel: &CancelToken) -> Ending {
    loop {
        match child.try_wait() {
            Ok(Some(status)) => return Ending::Exited(status),
            Ok(None) => {}
            Err(e) => {
                kill_group(group);
                let _ = child.wait();
                return Ending::Failed(e);
            }
        }
        let ending = if cancel.is_cancelled() {
            Ending::Cancelled
        } else if Instant::now() >= deadline {
            Ending::TimedOut
        } else {
            cancel.sleep(POLL.min(deadline.saturating_duration_since(Instant::now())));
            continue;
        };
        // Kill before reaping: while the shell is unreaped its pid cannot name another group.
        kill_group(group);
        let _ = child.wait();
        return ending;
    }
}

fn kill_group(group: Pid) {
    // ESRCH (the group is already empty) is the expected failure and means there is nothing to do.
    let _ = killpg(group, Signal::SIGKILL);
}

/// Completion of the reader threads.
struct Drained {
    rx: mpsc::Receiver<()>,
    pending: usize,
}

enum Drain {
    Done,
    TimedOut,
    Cancelled,
}

impl Drained {
    /// Wait until both pipes closed, `until` passed or `cancel` fired.
    fn wait_until(&mut self, until: Instant, cancel: &CancelToken) -> Drain {
        while self.pending > 0 {
            if cancel.is_cancelled() {
                return Drain::Cancelled;
            }
            let now = Instant::now();
            if now >= until {
                return Drain::TimedOut;
            }
            match self.rx.recv_timeout(POLL.min(until - now)) {
                Ok(()) => self.pending -= 1,
                Err(RecvTimeoutError::Timeout) => {}
                Err(RecvTimeoutError::Disconnected) => self.pending = 0,
            }
        }
        Drain::Done
    }
}

fn spawn_reader(mut pipe: impl Read + Send + 'static, capture: Arc<Mutex<Capture>>, done: mpsc::Sender<()>) {
    thread::spawn(move || {
        let mut chunk = [0u8; 8192];
        loop {
            match pipe.read(&mut chunk) {
                Ok(0) => break,
                Ok(n) => capture.lock().unwrap_or_else(|e| e.into_inner()).push(&chunk[..n]),
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(_) => break,
            }
        }
        let _ = done.send(());
    });
}

fn describe(status: ExitStatus) -> String {
    match (status.code(), status.signal()) {
        (Some(code), _) => code.to_string(),
        (None, Some(signal)) => format!("none (killed by signal {signal})"),
        (None, None) => "unknown".to_string(),
    }
}

/// One output stream, kept in bounded memory: the first bytes, the last bytes, and counts of the whole.
#[derive(Debug)]
struct Capture {
    head: Vec<u8>,
    tail: VecDeque<u8>,
    /// Bytes kept at each end. A character is at most 4 bytes, so `4 * cap` bytes hold at least `cap`
    /// characters: enough for whichever share of the cap this stream gets.
    keep: usize,
    /// Whether bytes between `head` and `tail` were dropped.
    dropped: bool,
    /// Characters (UTF-8 lead bytes) and newlines seen in total.
    chars: u64,
    newlines: u64,
}

impl Capture {
    fn new(cap_chars: usize) -> Self {
        Capture {
            head: Vec::new(),
            tail: VecDeque::new(),
            keep: cap_chars.saturating_mul(4).max(4),
            dropped: false,
            chars: 0,
            newlines: 0,
        }
    }

    fn push(&mut self, mut bytes: &[u8]) {
        self.chars += bytes.iter().filter(|b| (**b & 0xC0) != 0x80).count() as u64;
        self.newlines += bytes.iter().filter(|b| **b == b'\n').count() as u64;
        let room = self.keep - self.head.len();
        let into_head = room.min(bytes.len());
        self.head.extend_from_slice(&bytes[..into_head]);
        bytes = &bytes[into_head..];
        if bytes.len() >= self.keep {
            self.dropped |= !self.tail.is_empty() || bytes.len() > self.keep;
            self.tail.clear();
            bytes = &bytes[bytes.len() - self.keep..];
        }
        self.tail.extend(bytes);
        let excess = self.tail.len().saturating_sub(self.keep);
        if excess > 0 {
            self.dropped = true;
            self.tail.drain(..excess);
        }
    }
}

/// Text of one stream: whole, or its two kept ends when the middle was dropped while reading.
enum Text {
    Whole(String),
    Ends { head: String, tail: String, chars: u64, newlines: u64 },
}

impl Text {
    fn of(capture: &Capture) -> Text {
        if capture.dropped {
            let (a, b) = capture.tail.as_slices();
            Text::Ends {
                head: String::from_utf8_lossy(&capture.head).into_owned(),
                tail: String::from_utf8_lossy(&[a, b].concat()).into_owned(),
                chars: capture.chars,
                newlines: capture.newlines,
            }
        } else {
            let (a, b) = capture.tail.as_slices();
            Text::Whole(String::from_utf8_lossy(&[capture.head.as_slice(), a, b].concat()).into_owned())
        }
    }

    fn chars(&self) -> u64 {
        match self {
            Text::Whole(s) => s.chars().count() as u64,
            Text::Ends { chars, .. } => *chars,
        }
    }

    /// At most `budget` characters: the text whole if it fits, else its head and tail with a line saying
    /// how much of the middle was cut.
    fn fit(&self, budget: usize, stream: &str, cap: usize) -> String {
        let total = self.chars();
        if total <= budget as u64 {
            if let Text::Whole(s) = self {
                return s.clone();
            }
        }
        let (head_src, tail_src, newlines) = match self {
            Text::Whole(s) => (s.as_str(), s.as_str(), s.matches('\n').count() as u64),
            Text::Ends { head, tail, newlines, .. } => (head.as_str(), tail.as_str(), *newlines),
        };
        let head_len = budget / 2;
        let tail_len = budget - head_len;
        let head: String = head_src.chars().take(head_len).collect();
        let tail_start = tail_src.char_indices().rev().nth(tail_len.saturating_sub(1)).map_or(0, |(i, _)| i);
        let tail = if tail_len == 0 { "" } else { &tail_src[tail_start..] };
        let kept = head.chars().count() as u64 + tail.chars().count() as u64;
        let cut_chars = total.saturating_sub(kept);
        let cut_lines = newlines.saturating_sub(head.matches('\n').count() as u64 + tail.matches('\n').count() as u64);
        let mut out = head;
        if !out.ends_with('\n') {
            out.push('\n');
        }
        out.push_str(&format!(
            "[... {cut_chars} characters ({cut_lines} lines) cut from the middle of {stream}: output is \
             capped at {cap} characters ...]\n"
        ));
        out.push_str(tail);
        out
    }
}

/// Stdout and stderr (with a `[stderr]` line before it, if any) within `cap` characters together. A
/// short stream is kept whole and the other gets the rest of the cap.
fn render(stdout: &Mutex<Capture>, stderr: &Mutex<Capture>, cap: usize) -> String {
    let out = Text::of(&stdout.lock().unwrap_or_else(|e| e.into_inner()));
    let err = Text::of(&stderr.lock().unwrap_or_else(|e| e.into_inner()));
    let (out_chars, err_chars) = (out.chars(), err.chars());
    let half = (cap / 2) as u64;
    let (out_budget, err_budget) = if out_chars + err_chars <= cap as u64 {
        (out_chars, err_chars)
    } else if err_chars <= half {
        (cap as u64 - err_chars, err_chars)
    } else if out_chars <= half {
        (out_chars, cap as u64 - out_chars)
    } else {
        (half, cap as u64 - half)
    };
    let mut text = String::new();
    if out_chars > 0 {
        text.push_str(out.fit(out_budget as usize, "stdout", cap).trim_end_matches('\n'));
    }
    if err_chars > 0 {
        if !text.is_empty() {
            text.push('\n');
        }
        text.push_str("[stderr]\n");
        text.push_str(err.fit(err_budget as usize, "stderr", cap).trim_end_matches('\n'));
    }
    text
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod tests {
    use super::super::run;
    use super::super::sandbox::tests::setup;
    use super::*;
    use serde_json::json;
    use std::fs;
    use std::path::Path;

    fn bash(ws: &Workspace, command: &str) -> ToolReply {
        run("bash", ws, &json!({"command": command}), &CancelToken::new())
    }

    /// Whether `pid` is gone (or a zombie waiting for init to reap it: dead all the same).
    fn is_dead(pid: &str) -> bool {
        match fs::read_to_string(format!("/proc/{pid}/stat")) {
            Err(_) => true,
            Ok(stat) => stat.rsplit_once(')').is_some_and(|(_, rest)| rest.trim_start().starts_with('Z')),
        }
    }

    fn all_dead_within(pids: &[String], limit: Duration) -> bool {
        let until = Instant::now() + limit;
        loop {
            if pids.iter().all(|p| is_dead(p)) {
                return true;
            }
            if Instant::now() > until {
                return false;
            }
            thread::sleep(Duration::from_millis(20));
        }
    }

    fn read_pids(path: &Path) -> Vec<String> {
        fs::read_to_string(path).unwrap().split_whitespace().map(str::to_string).collect()
    }

    #[test]
    fn reports_exit_code_and_stdout() {
        let (_tmp, ws) = setup();
        assert_eq!(bash(&ws, "echo hello").unwrap(), "exit code: 0\nhello");
    }

    #[test]
    fn non_zero_exit_is_not_a_tool_error() {
        let (_tmp, ws) = setup();
        assert_eq!(bash(&ws, "echo partial; exit 3").unwrap(), "exit code: 3\npartial");
    }

    #[test]
    fn stderr_is_reported_after_stdout() {
        let (_tmp, ws) = setup();
        let out = bash(&ws, "echo out; echo err >&2; exit 1").unwrap();
        assert_eq!(out, "exit code: 1\nout\n[stderr]\nerr");
        assert_eq!(bash(&ws, "echo only-err >&2").unwrap(), "exit code: 0\n[stderr]\nonly-err");
    }

    #[test]
    fn no_output_gives_only_the_exit_code() {
        let (_tmp, ws) = setup();
        assert_eq!(bash(&ws, "true").unwrap(), "exit code: 0");
    }

    #[test]
    fn runs_in_the_workspace_root() {
        let (_tmp, ws) = setup();
        let out = bash(&ws, "pwd -P; cat sub/inside.txt").unwrap();
        assert_eq!(out, format!("exit code: 0\n{}\ninside", ws.root().display()));
    }

    #[test]
    fn stdin_is_closed_so_cat_returns_at_once() {
        let (_tmp, ws) = setup();
        let started = Instant::now();
        let input = json!({"command": "cat; read x; echo read=$?", "timeout": 10});
        let out = run("bash", &ws, &input, &CancelToken::new()).unwrap();
        assert_eq!(out, "exit code: 0\nread=1");
        assert!(started.elapsed() < Duration::from_secs(3));
    }

    #[test]
    fn large_output_keeps_head_and_tail_and_says_what_was_cut() {
        let (_tmp, ws) = setup();
        // About 1.9 MB on stdout, plus a little stderr that must survive whole.
        let out = bash(&ws, "seq 1 300000; echo tail-of-stderr >&2").unwrap();
        assert!(out.starts_with("exit code: 0\n1\n2\n3\n"), "{}", &out[..100]);
        assert!(out.ends_with("299999\n300000\n[stderr]\ntail-of-stderr"), "{}", &out[out.len() - 200..]);
        assert!(out.contains("cut from the middle of stdout"), "no cut marker");
        assert!(out.contains("output is capped at 30000 characters"));
        let chars = out.chars().count();
        assert!(chars < OUTPUT_CAP_CHARS + 300, "{chars} characters");
        let marker = out.lines().find(|l| l.starts_with("[... ")).unwrap();
        let cut: u64 = marker[5..].split(' ').next().unwrap().parse().unwrap();
        // seq 1 300000 prints 1_988_895 bytes; all but about 30000 were cut.
        assert!((1_950_000..1_970_000).contains(&cut), "{marker}");
    }

    #[test]
    fn output_under_the_cap_is_kept_whole() {
        let (_tmp, ws) = setup();
        let out = bash(&ws, "seq 1 3000").unwrap();
        assert!(!out.contains("cut from the middle"));
        assert_eq!(out.lines().count(), 3001);
    }

    #[test]
    fn capture_keeps_bounded_ends_of_a_long_stream() {
        let mut capture = Capture::new(4); // keeps 16 bytes at each end
        for chunk in (0..100).map(|i| format!("{i:02}\n")) {
            capture.push(chunk.as_bytes());
        }
        assert!(capture.dropped);
        assert_eq!(capture.head, b"00\n01\n02\n03\n04\n0");
        assert_eq!(capture.tail.iter().copied().collect::<Vec<_>>(), b"\n95\n96\n97\n98\n99\n");
        assert_eq!((capture.chars, capture.newlines), (300, 100));
        let fitted = Text::of(&capture).fit(6, "stdout", 6);
        assert!(fitted.starts_with("00\n[... 294 characters (98 lines) cut"), "{fitted}");
        assert!(fitted.ends_with("...]\n99\n"), "{fitted}");
    }

    #[test]
    fn timeout_kills_the_whole_process_group() {
        let (tmp, ws) = setup();
        let pids = tmp.path().join("pids");
        let command =
            format!("sleep 30 & echo $! > {p}; sleep 30 & echo $! >> {p}; echo $$ >> {p}; wait", p = pids.display());
        let started = Instant::now();
        let err = run("bash", &ws, &json!({"command": command, "timeout": 1}), &CancelToken::new()).unwrap_err();
        let elapsed = started.elapsed();
        assert!(err.contains("timed out after 1 s"), "{err}");
        assert!(elapsed < Duration::from_secs(3), "took {elapsed:?}");
        let pids = read_pids(&pids);
        assert_eq!(pids.len(), 3);
        assert!(all_dead_within(&pids, Duration::from_secs(2)), "still alive: {pids:?}");
    }

    #[test]
    fn timeout_keeps_the_output_gathered_so_far() {
        let (_tmp, ws) = setup();
        let input = json!({"command": "echo before; sleep 30", "timeout": 1});
        let err = run("bash", &ws, &input, &CancelToken::new()).unwrap_err();
        assert!(err.ends_with("Output so far:\nbefore"), "{err}");
    }

    #[test]
    fn cancel_from_another_thread_stops_the_command_quickly() {
        let (tmp, ws) = setup();
        let pids = tmp.path().join("pids");
        let command = format!("sleep 30 & echo $! > {p}; echo $$ >> {p}; wait", p = pids.display());
        let cancel = CancelToken::new();
        let canceller = cancel.clone();
        let trigger = thread::spawn(move || {
            thread::sleep(Duration::from_millis(300));
            canceller.cancel();
            Instant::now()
        });
        let err = run("bash", &ws, &json!({"command": command}), &cancel).unwrap_err();
        let returned = Instant::now();
        let cancelled_at = trigger.join().unwrap();
        assert!(err.starts_with("cancelled"), "{err}");
        assert!(returned - cancelled_at < Duration::from_secs(1), "took {:?}", returned - cancelled_at);
        let pids = read_pids(&pids);
        assert!(all_dead_within(&pids, Duration::from_secs(2)), "still alive: {pids:?}");
    }

    #[test]
    fn background_child_holding_stdout_does_not_hang_the_call() {
        let (tmp, ws) = setup();
        let pids = tmp.path().join("pids");
        let command = format!("sleep 30 & echo $! > {}; echo started", pids.display());
        let started = Instant::now();
        let out = run("bash", &ws, &json!({"command": command, "timeout": 20}), &CancelToken::new()).unwrap();
        assert!(started.elapsed() < Duration::from_secs(3), "took {:?}", started.elapsed());
        assert!(out.starts_with("exit code: 0\nstarted\n[background processes"), "{out}");
        assert!(all_dead_within(&read_pids(&pids), Duration::from_secs(2)));
    }

    #[test]
    fn background_child_that_let_go_of_the_pipes_keeps_running() {
        let (tmp, ws) = setup();
        let pids = tmp.path().join("pids");
        let command = format!("sleep 30 > /dev/null 2>&1 & echo $! > {}", pids.display());
        let out = bash(&ws, &command).unwrap();
        assert_eq!(out, "exit code: 0");
        let pids = read_pids(&pids);
        assert!(!is_dead(&pids[0]), "a detached server must survive the call");
        for pid in &pids {
            let _ = nix::sys::signal::kill(Pid::from_raw(pid.parse().unwrap()), Signal::SIGKILL);
        }
    }

    #[test]
    fn timeout_over_the_cap_is_clamped_and_said() {
        let (_tmp, ws) = setup();
        let out = run("bash", &ws, &json!({"command": "echo hi", "timeout": 9000}), &CancelToken::new()).unwrap();
        assert_eq!(out, "exit code: 0\nhi\n[timeout 9000 s is over the 600 s maximum; used 600 s]");
    }

    #[test]
    fn bad_timeout_and_empty_command_are_errors() {
        let (_tmp, ws) = setup();
        let err = run("bash", &ws, &json!({"command": "true", "timeout": 0}), &CancelToken::new()).unwrap_err();
        assert!(err.contains("timeout must be"), "{err}");
        let err = run("bash", &ws, &json!({"command": "  "}), &CancelToken::new()).unwrap_err();
        assert!(err.contains("command is empty"), "{err}");
        let err = run("bash", &ws, &json!({"timeout": 5}), &CancelToken::new()).unwrap_err();
        assert!(err.contains("'command'"), "{err}");
    }

    #[test]
    fn killed_by_a_signal_is_reported() {
        let (_tmp, ws) = setup();
        assert_eq!(bash(&ws, "kill -9 $$").unwrap(), "exit code: none (killed by signal 9)");
    }

    #[test]
    fn spawn_failure_is_a_tool_error() {
        let (tmp, _ws) = setup();
        let gone = tmp.path().join("gone");
        fs::create_dir(&gone).unwrap();
        let ws = Workspace::new(&gone).unwrap();
        fs::remove_dir(&gone).unwrap();
        let err = bash(&ws, "echo hi").unwrap_err();
        assert!(err.contains("could not start the command"), "{err}");
    }

    #[test]
    fn options_can_tighten_the_limits() {
        let (_tmp, ws) = setup();
        let opts = BashOptions { max_timeout: Duration::from_secs(1), output_cap: 10, ..BashOptions::default() };
        let input = json!({"command": "seq 1 100", "timeout": 5});
        let out = run_bash(&ws, &input, &opts, &CancelToken::new()).unwrap();
        assert!(out.starts_with("exit code: 0\n1\n2\n3\n[... "), "{out}");
        assert!(out.contains("[timeout 5 s is over the 1 s maximum; used 1 s]"), "{out}");
    }
}
