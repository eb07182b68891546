//! Background commands: `bash` with `run_in_background: true`, read with `bash_output`, ended with
//! `bash_kill`.
//!
//! A background command is started exactly like a foreground one (the same wrapper, PID namespace or
//! process group, Landlock sandbox and private `$TMPDIR`; see the `bash` module), but the call returns at
//! once with an id. One thread per command reads its output into a bounded buffer (the oldest bytes are
//! dropped and counted) and watches for its exit; when the command exits, whatever it left running is
//! killed, as for a foreground command. [`BackgroundShells::close`] (called by `Agent::close`, and on
//! drop) kills every command and its whole process tree and joins the threads.
//!
//! Must never: let a command or a process it started outlive the manager, let a buffer grow past its
//! bound, or leave a reader thread running after `close`.

use super::bash::{BashOptions, Ending, PrivateTemp, Running, start};
use super::workspace::Workspace;
use super::{Args, ToolReply};
use serde_json::Value;
use std::collections::VecDeque;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant, SystemTime};

/// Bytes of not-yet-read output kept per background command; older bytes are dropped (and counted).
pub const BACKGROUND_BUFFER_BYTES: usize = 256 * 1024;
/// Background commands that may run at once per agent.
pub const MAX_BACKGROUND: usize = 16;

/// How often the reader thread looks at the stop flag and the pipes.
const POLL: Duration = Duration::from_millis(20);
/// After a kill, how long the reader keeps draining the output pipe.
const DRAIN_AFTER_KILL: Duration = Duration::from_millis(150);

/// Where a background command is.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum BackgroundStatus {
    /// Still running.
    Running,
    /// Exited by itself with this code.
    Exited(i32),
    /// Ended by `bash_kill`, `close` or its time limit.
    Killed,
    /// Could not be watched any more (the reason).
    Failed(String),
}

impl BackgroundStatus {
    /// `"running"`, `"exited"`, `"killed"` or `"failed"`.
    pub fn as_str(&self) -> &'static str {
        match self {
            BackgroundStatus::Running => "running",
            BackgroundStatus::Exited(_) => "exited",
            BackgroundStatus::Killed => "killed",
            BackgroundStatus::Failed(_) => "failed",
        }
    }
}

/// What a host shows about one background command (the CLI's `/bashes`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct BackgroundInfo {
    /// The id the model uses (`bash_1`, …).
    pub id: String,
    /// The command line.
    pub command: String,
    /// Where it is.
    pub status: BackgroundStatus,
    /// Its exit code once it exited by itself.
    pub exit_code: Option<i32>,
    /// When it started.
    pub started: SystemTime,
    /// Bytes of output not read yet.
    pub unread_bytes: usize,
}

/// Output not read yet, and the state, shared by a command's reader thread and the tools.
#[derive(Debug)]
struct Buffer {
    data: VecDeque<u8>,
    /// Bytes dropped since the last read because the buffer was full.
    dropped: u64,
    status: BackgroundStatus,
    /// A note about the ending (what was killed), given with the next read.
    note: Option<String>,
}

#[derive(Debug)]
struct Shell {
    id: String,
    command: String,
    started: SystemTime,
    buffer: Arc<Mutex<Buffer>>,
    stop: Arc<AtomicBool>,
    thread: Mutex<Option<JoinHandle<()>>>,
}

impl Shell {
    /// Ask the reader thread to kill the command's tree, and wait until it has.
    fn stop_and_join(&self) {
        self.stop.store(true, Ordering::SeqCst);
        let handle = self.thread.lock().unwrap_or_else(|e| e.into_inner()).take();
        if let Some(h) = handle {
            let _ = h.join();
        }
    }
}

/// The background commands of one agent (one registration of the built-in tools).
///
/// # Threads and cloning
/// `Send + Sync`; shared through an `Arc` by the `bash`, `bash_output` and `bash_kill` handlers and the
/// agent. Dropping the last owner kills every command.
#[derive(Debug, Default)]
pub struct BackgroundShells {
    shells: Mutex<Vec<Arc<Shell>>>,
    next: AtomicU64,
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

impl BackgroundShells {
    /// No commands yet.
    pub fn new() -> Self {
        BackgroundShells::default()
    }

    /// Start `command` in the background (the `bash` tool's input with `run_in_background: true`):
    /// returns at once with the reply naming its id.
    pub(crate) fn start(&self, ws: &Workspace, input: &Value, opts: &BashOptions) -> ToolReply {
        let args = Args::new("bash", input, &["command", "timeout", "run_in_background", "description"])?;
        let command = args.string("command")?;
        if command.trim().is_empty() {
            return Err("bash command is empty: give the shell command to run".to_string());
        }
        let limit = match args.opt_int("timeout")? {
            None => None,
            Some(secs) if secs < 1 => {
                return Err(format!("bash timeout must be a number of seconds >= 1, got {secs}"));
            }
            Some(secs) => Some(Duration::from_secs(secs as u64)),
        };
        let running_now =
            lock(&self.shells).iter().filter(|s| lock(&s.buffer).status == BackgroundStatus::Running).count();
        if running_now >= MAX_BACKGROUND {
            return Err(format!(
                "{running_now} background commands are running already (at most {MAX_BACKGROUND}): end one with \
                 bash_kill first"
            ));
        }
        let temp =
            PrivateTemp::new().map_err(|e| format!("could not create a temporary folder for the command: {e}"))?;
        let running = start(ws, command, opts, temp.path())?;
        let id = format!("bash_{}", self.next.fetch_add(1, Ordering::Relaxed) + 1);
        let buffer = Arc::new(Mutex::new(Buffer {
            data: VecDeque::new(),
            dropped: 0,
            status: BackgroundStatus::Running,
            note: None,
        }));
        let stop = Arc::new(AtomicBool::new(false));
        let deadline = limit.map(|l| Instant::now() + l);
        let grace = opts.exit_grace;
        let thread = {
            let (buffer, stop) = (Arc::clone(&buffer), Arc::clone(&stop));
            std::thread::Builder::new()
                .name(format!("tooloop-{id}"))
                .spawn(move || watch(running, temp, &buffer, &stop, deadline, grace))
                .map_err(|e| format!("could not start a thread to watch the command: {e}"))?
        };
        let shell = Arc::new(Shell {
            id: id.clone(),
            command: command.to_string(),
            started: SystemTime::now(),
            buffer,
            stop,
            thread: Mutex::new(Some(thread)),
        });
        lock(&self.shells).push(shell);
        Ok(format!(
            "Started in the background with id {id}. Read its output with bash_output (id \"{id}\") and stop it \
             with bash_kill (id \"{id}\"); it is also stopped when the session ends."
        ))
    }

    fn find(&self, tool: &str, input: &Value) -> Result<Arc<Shell>, String> {
        let args = Args::new(if tool == "bash_output" { "bash_output" } else { "bash_kill" }, input, &["id"])?;
        let id = args.string("id")?;
        let shells = lock(&self.shells);
        shells.iter().find(|s| s.id == id).cloned().ok_or_else(|| {
            let known: Vec<&str> = shells.iter().map(|s| s.id.as_str()).collect();
            if known.is_empty() {
                format!("no background command has the id {id:?}: none was started (bash with run_in_background)")
            } else {
                format!("no background command has the id {id:?} (known: {})", known.join(", "))
            }
        })
    }

    /// `bash_output(id)`: what the command printed since the last read, then its state.
    pub(crate) fn output(&self, input: &Value, cap_chars: usize) -> ToolReply {
        let shell = self.find("bash_output", input)?;
        let mut buf = lock(&shell.buffer);
        let bytes: Vec<u8> = buf.data.drain(..).collect();
        let dropped = std::mem::take(&mut buf.dropped);
        let status = buf.status.clone();
        let note = buf.note.take();
        drop(buf);
        let mut out = String::new();
        if dropped > 0 {
            out.push_str(&format!(
                "[{dropped} bytes of older output were dropped: the buffer keeps the last {BACKGROUND_BUFFER_BYTES} \
                 bytes; read more often or make the command quieter]\n"
            ));
        }
        let text = String::from_utf8_lossy(&bytes);
        let chars = text.chars().count();
        if chars > cap_chars {
            let skip = chars - cap_chars;
            out.push_str(&format!("[{skip} characters of the oldest unread output are not shown]\n"));
            out.extend(text.chars().skip(skip));
        } else {
            out.push_str(&text);
        }
        if bytes.is_empty() && dropped == 0 {
            out.push_str("(no new output)");
        }
        if !out.ends_with('\n') {
            out.push('\n');
        }
        out.push_str(&match &status {
            BackgroundStatus::Running => format!("[{}: running]", shell.id),
            BackgroundStatus::Exited(code) => format!("[{}: exited, exit code: {code}]", shell.id),
            BackgroundStatus::Killed => format!("[{}: killed]", shell.id),
            BackgroundStatus::Failed(why) => format!("[{}: lost: {why}]", shell.id),
        });
        if let Some(note) = note {
            out.push('\n');
            out.push_str(&note);
        }
        Ok(out)
    }

    /// `bash_kill(id)`: end the command and every process it started.
    pub(crate) fn kill(&self, input: &Value) -> ToolReply {
        let shell = self.find("bash_kill", input)?;
        let before = lock(&shell.buffer).status.clone();
        if before != BackgroundStatus::Running {
            return Ok(format!("{} had already ended ({}); nothing to kill", shell.id, before.as_str()));
        }
        shell.stop_and_join();
        Ok(format!("{} was killed, with every process it started", shell.id))
    }

    /// Every command started so far, oldest first.
    pub fn list(&self) -> Vec<BackgroundInfo> {
        lock(&self.shells)
            .iter()
            .map(|s| {
                let buf = lock(&s.buffer);
                BackgroundInfo {
                    id: s.id.clone(),
                    command: s.command.clone(),
                    exit_code: match buf.status {
                        BackgroundStatus::Exited(code) => Some(code),
                        _ => None,
                    },
                    status: buf.status.clone(),
                    started: s.started,
                    unread_bytes: buf.data.len(),
                }
            })
            .collect()
    }

    /// Kill every command and its process tree; wait for the reader threads. Idempotent.
    pub fn close(&self) {
        let shells: Vec<Arc<Shell>> = lock(&self.shells).clone();
        for s in &shells {
            s.stop.store(true, Ordering::SeqCst);
        }
        for s in &shells {
            s.stop_and_join();
        }
    }
}

impl Drop for BackgroundShells {
    fn drop(&mut self) {
        self.close();
    }
}

fn push(buffer: &Mutex<Buffer>, bytes: &[u8]) {
    if bytes.is_empty() {
        return;
    }
    let mut buf = lock(buffer);
    buf.data.extend(bytes);
    let excess = buf.data.len().saturating_sub(BACKGROUND_BUFFER_BYTES);
    if excess > 0 {
        buf.data.drain(..excess);
        buf.dropped += excess as u64;
    }
}

/// The reader thread: hand output on as it comes, notice the exit, the time limit or a stop request, then
/// kill what is left and record how it ended. `temp` lives (and is removed) with it.
fn watch(
    mut running: Running,
    temp: PrivateTemp,
    buffer: &Mutex<Buffer>,
    stop: &AtomicBool,
    deadline: Option<Instant>,
    grace: Duration,
) {
    let mut exited: Option<(Instant, Ending)> = None;
    let status = loop {
        if stop.load(Ordering::SeqCst) {
            break BackgroundStatus::Killed;
        }
        let now = Instant::now();
        if deadline.is_some_and(|d| now >= d) && exited.is_none() {
            break BackgroundStatus::Killed;
        }
        if let Some((at, _)) = &exited {
            if !running.output_open() || now >= *at + grace {
                break match exited.take().map(|(_, e)| e) {
                    Some(Ending::Exited(code)) => BackgroundStatus::Exited(code),
                    Some(Ending::Failed(why)) => BackgroundStatus::Failed(why),
                    _ => BackgroundStatus::Failed("lost the exit status".to_string()),
                };
            }
        }
        if let Err(e) = running.poll_once(POLL) {
            break BackgroundStatus::Failed(format!("lost track of the command: {e}"));
        }
        push(buffer, &running.take_output());
        if exited.is_none() && running.has_exited() {
            exited = Some((Instant::now(), running.exit_status()));
        }
    };
    running.kill_all();
    running.drain(Instant::now() + DRAIN_AFTER_KILL);
    running.reap();
    push(buffer, &running.take_output());
    drop(temp);
    let mut buf = lock(buffer);
    if status == BackgroundStatus::Killed
        && deadline.is_some_and(|d| Instant::now() >= d)
        && !stop.load(Ordering::SeqCst)
    {
        buf.note = Some("[its time limit (timeout) was reached: it and every process it started were killed]".into());
    }
    buf.status = status;
}
