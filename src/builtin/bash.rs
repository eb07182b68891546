//! The `bash` tool: run one shell command in the workspace, bounded in time and in output, confined by
//! the [sandbox](super::SandboxMode), with every process it starts accounted for.
//!
//! # Process tree
//! The command runs as `bash -c <command>` (`sh -c` where there is no bash) under a small wrapper shell.
//! Where the kernel allows it (root, or an unprivileged user namespace), the wrapper is started by
//! util-linux `unshare [--user --map-current-user] --pid --fork --kill-child` and is process 1 of a new
//! PID namespace:
//! when it dies the kernel kills every process in the namespace, so `setsid cmd &`, double forks and
//! `set -m` jobs cannot outlive the call. Elsewhere the command gets a process group of its own and only
//! what stays in that group is killed (the reply says so when processes left it).
//!
//! The wrapper reports the command's exit status on a pipe of its own, then waits; the call then lists
//! what is still running (background jobs), kills it all, and names what it killed. Nothing outlives the
//! call, and no thread is left behind: the output pipe and the status pipe are read with `poll(2)` in the
//! calling thread.
//!
//! Must never: hang on a pipe held by an escaped process, let output grow memory past the cap, or leave
//! a process or thread running after it returns.

use super::env::{dropped_names, socket_names};
use super::sandbox::{self, Policy, SandboxMode, SpawnError};
use super::workspace::Workspace;
use super::{Args, ToolReply};
use crate::cancel::CancelToken;
use nix::sys::signal::{Signal, kill, killpg};
use nix::unistd::Pid;
use rustix::event::{PollFd, PollFlags, Timespec, poll};
use rustix::pipe::{PipeFlags, pipe_with};
use serde_json::Value;
use std::collections::VecDeque;
use std::fs::{self, File};
use std::io::{self, Read};
use std::os::unix::fs::DirBuilderExt;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::OnceLock;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

/// Seconds a command may run when the call gives no `timeout`.
pub const DEFAULT_TIMEOUT_SECS: u64 = 120;
/// The largest `timeout` a call may ask for; larger values are clamped to it (and the reply says so).
pub const MAX_TIMEOUT_SECS: u64 = 600;
/// Characters of output in a reply; past it the middle is cut.
pub const OUTPUT_CAP_CHARS: usize = 30_000;

/// The longest wait between checks of timeout and cancel.
const POLL: Duration = Duration::from_millis(10);
/// After a kill, how long we keep reading what is left in the output pipe.
const DRAIN_AFTER_KILL: Duration = Duration::from_millis(150);
/// After the command exits, how often we look for background jobs it left.
const BACKGROUND_CHECK: Duration = Duration::from_millis(50);
/// Processes named in a reply; the rest are counted.
const NAMED_PROCESSES: usize = 8;

/// Runs the command (`$1`) with the shell `$2`, its stdin closed and stderr merged into stdout (the
/// wrapper's own messages, such as "Killed", are dropped); then closes stdout, writes the exit status and
/// a newline to the saved stderr (the status pipe: its end of line, not
/// its closing, marks the exit, since `unshare` holds the pipe too), and waits on stdin (a pipe the host
/// holds) so that, as PID 1 of the namespace, it keeps the background jobs alive until the host has
/// listed them.
///
/// With bash, [`CLOSE_INHERITED`] runs first.
const WRAPPER: &str = r#"exec 3>&2 2>/dev/null; "$2" -c "$1" </dev/null 2>&1 3>&-; s=$?; exec >&-; printf '%s\n' "$s" >&3; exec 3>&-; read -r _ || :"#;

/// Closes every descriptor above 2 the wrapper inherited. The glob is expanded by the shell itself, so
/// `/proc/self` is the wrapper (its pid in a new namespace would not name it in the host's /proc).
const CLOSE_INHERITED: &str = r#"for f in /proc/self/fd/*; do n=${f##*/}; if [ "$n" -gt 2 ] 2>/dev/null; then eval "exec $n>&-" 2>/dev/null; fi; done; "#;

/// Limits and confinement of the `bash` tool. [`Default`] gives the documented limits, the
/// [`SandboxMode::WorkspaceWrite`] sandbox and the network on; hosts and tests may change them.
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
    /// After the command exits, how long background processes may keep the output pipe open before
    /// everything left is killed (default 500 ms).
    pub exit_grace: Duration,
    /// Kernel confinement of the command (see [`SandboxMode`]).
    pub sandbox: SandboxMode,
    /// Whether the command may use the network (`false`: only Unix sockets, by a seccomp allow-list).
    pub network: bool,
    /// Names of secret-looking environment variables the command keeps anyway (see
    /// [`is_secret_name`](super::is_secret_name)).
    pub env_passthrough: Vec<String>,
    /// Paths relative to the workspace the command sees read-only in [`SandboxMode::WorkspaceWrite`]
    /// (default [`DEFAULT_PROTECTED_PATHS`](super::DEFAULT_PROTECTED_PATHS): `.tooloop`, `.claude`,
    /// `.mcp.json`, `.git/hooks`, `.git/config`; empty: none). Each existing one is bound onto itself
    /// read-only in the command's mount namespace, so a write, a rename or a removal fails with "Read-only
    /// file system" or "Device or resource busy" while the rest of the workspace stays writable (`git
    /// commit` works). Limits: this needs the read-only view (Linux, running as root, mount namespaces
    /// allowed; elsewhere Landlock cannot carve a read-only hole in a writable tree, and these paths are as
    /// writable as the rest of the workspace); a path that does not exist when the command starts cannot be
    /// bound, so the command may create it (a host that trusts such files only after approval, as the
    /// `tooloop` CLI does with settings, is covered); a path that is a symlink is protected where it points,
    /// when that is in the workspace, while the link itself may be replaced.
    pub protected_paths: Vec<PathBuf>,
}

impl Default for BashOptions {
    fn default() -> Self {
        BashOptions {
            default_timeout: Duration::from_secs(DEFAULT_TIMEOUT_SECS),
            max_timeout: Duration::from_secs(MAX_TIMEOUT_SECS),
            output_cap: OUTPUT_CAP_CHARS,
            exit_grace: Duration::from_millis(500),
            sandbox: SandboxMode::WorkspaceWrite,
            network: true,
            env_passthrough: Vec::new(),
            protected_paths: super::default_protected_paths(),
        }
    }
}

/// Whether util-linux `unshare` can put a command in a PID namespace of its own here (unprivileged user
/// namespaces allowed). Probed once per process.
pub fn process_containment() -> bool {
    static OK: OnceLock<bool> = OnceLock::new();
    *OK.get_or_init(|| {
        let Some(unshare) = sandbox::system_program("unshare") else { return false };
        Command::new(unshare)
            .args(unshare_args())
            .arg("true")
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status()
            .is_ok_and(|s| s.success())
    })
}

/// Arguments of `unshare` before the program: root may create a PID namespace directly; anyone else
/// needs a user namespace (mapping their own uid, so files and `id` look the same inside).
pub(crate) fn unshare_args() -> &'static [&'static str] {
    if running_as_root() {
        &["--pid", "--fork", "--kill-child", "--"]
    } else {
        &["--user", "--map-current-user", "--pid", "--fork", "--kill-child", "--"]
    }
}

pub(crate) fn running_as_root() -> bool {
    rustix::process::geteuid().is_root()
}

/// The `bash` tool with explicit options: `input` is `{"command": string, "timeout"?: integer seconds}`.
///
/// `Ok` carries the output (stdout and stderr merged, as a terminal shows them), `(no output)` when
/// there is none, then `exit code: N` on a line of its own when N is not 0, then notes in brackets
/// (background processes killed, a clamped timeout, a write the sandbox refused). A non-zero exit is
/// `Ok`, since the model needs the output.
///
/// # Errors
/// `Err(message for the model)` when the input is invalid, the shell cannot be started, the time limit
/// is reached, or `cancel` fires (noticed within 10 ms); every process the command started is then
/// killed, and the message names them and ends with the output gathered so far.
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

    let temp = PrivateTemp::new().map_err(|e| format!("could not create a temporary folder for the command: {e}"))?;
    let mut running = start(ws, command, opts, temp.path())?;
    let deadline = Instant::now() + timeout;
    let ending = running.watch(deadline, opts.exit_grace, cancel);
    let leftover = if running.none_left { Vec::new() } else { running.processes() };
    running.kill_all();
    running.drain(Instant::now() + DRAIN_AFTER_KILL);
    running.reap();
    let output = render(&running.output, opts.output_cap);

    let killed = describe_processes(&leftover);
    match ending {
        Ending::Exited(code) => {
            let mut reply = if output.is_empty() {
                if code == 0 { "(no output)".to_string() } else { String::new() }
            } else {
                output
            };
            if code != 0 {
                if !reply.is_empty() {
                    reply.push('\n');
                }
                reply.push_str(&format!("exit code: {code}"));
            }
            if let Some((count, names)) = killed {
                notes.push(format!(
                    "[killed {count} still running when the command ended: {names}. Every process a command \
                     starts ends with it: start a server and use it within one command]"
                ));
            }
            if !running.contained && running.escaped {
                notes.push(
                    "[output may be incomplete: a process that left the command's process group holds the \
                     output pipe]"
                        .to_string(),
                );
            }
            if code != 0 && running.enforced {
                if let Some(note) = denial_note(&reply, opts) {
                    notes.push(note);
                }
            }
            for note in notes {
                reply.push('\n');
                reply.push_str(&note);
            }
            Ok(reply)
        }
        Ending::Failed(why) => Err(format!("could not run the command: {why}")),
        Ending::TimedOut | Ending::Cancelled => {
            let killed = killed.map(|(count, names)| format!(" ({count}: {names})")).unwrap_or_default();
            let output = if output.is_empty() { "(no output)".to_string() } else { output };
            Err(if matches!(ending, Ending::Cancelled) {
                format!("cancelled: the command was stopped and every process it started killed{killed}.\n{output}")
            } else {
                format!(
                    "the command timed out after {} s; it and every process it started were killed{killed}. \
                     Raise `timeout` (up to {} s) or run less at once. Output so far:\n{output}",
                    timeout.as_secs(),
                    opts.max_timeout.as_secs()
                )
            })
        }
    }
}

/// A line telling the model that the sandbox, not the program, refused an operation.
fn denial_note(reply: &str, opts: &BashOptions) -> Option<String> {
    let denied = ["Permission denied", "Read-only file system", "Operation not permitted"];
    if !denied.iter().any(|d| reply.contains(d)) {
        return None;
    }
    let files = match opts.sandbox {
        SandboxMode::Off => None,
        SandboxMode::WorkspaceWrite => {
            Some("writes outside the workspace and $TMPDIR are refused (sandbox mode workspace-write)")
        }
        SandboxMode::ReadOnly => Some("writes anywhere but $TMPDIR are refused (sandbox mode read-only)"),
    };
    let unix = (opts.sandbox != SandboxMode::Off).then_some("Unix sockets are refused");
    let net = (!opts.network).then_some("network connections are refused");
    let what: Vec<&str> = files.into_iter().chain(unix).chain(net).collect();
    (!what.is_empty())
        .then(|| format!("[sandbox: {}; this is a policy of the host, not a bug to work around]", what.join("; ")))
}

/// A folder only this command writes to (its `$TMPDIR`), removed with everything in it on drop.
pub(super) struct PrivateTemp(PathBuf);

impl PrivateTemp {
    pub(super) fn new() -> io::Result<PrivateTemp> {
        static COUNTER: AtomicU64 = AtomicU64::new(0);
        let base = std::env::temp_dir();
        let mut last = None;
        for _ in 0..20 {
            let n = COUNTER.fetch_add(1, Ordering::Relaxed);
            let nanos =
                std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.subsec_nanos());
            let path = base.join(format!("tooloop-bash-{}-{n}-{nanos}", std::process::id()));
            match fs::DirBuilder::new().mode(0o700).create(&path) {
                Ok(()) => return Ok(PrivateTemp(path)),
                Err(e) if e.kind() == io::ErrorKind::AlreadyExists => last = Some(e),
                Err(e) => return Err(e),
            }
        }
        Err(last.unwrap_or_else(|| io::Error::other("no free name")))
    }

    pub(super) fn path(&self) -> &Path {
        &self.0
    }
}

impl Drop for PrivateTemp {
    fn drop(&mut self) {
        let _ = fs::remove_dir_all(&self.0);
    }
}

/// `command` run through util-linux `setsid`: a new session with no controlling terminal, so the command
/// can neither open `/dev/tty` nor be a foreground job of the user's terminal. The spawned process is not
/// a group leader (it starts in the host's group), so `setsid` makes it the leader of the new session and
/// group in place, without forking: its pid stays the group we kill. Without `setsid` the command gets a
/// process group of its own, and the seccomp filter still refuses terminal injection.
fn in_new_session(mut command: Command) -> Command {
    static SETSID: OnceLock<Option<PathBuf>> = OnceLock::new();
    let Some(setsid) = SETSID.get_or_init(|| sandbox::system_program("setsid")) else {
        command.process_group(0);
        return command;
    };
    // Called before anything but the program and its arguments is set on `command`.
    let mut outer = Command::new(setsid);
    outer.arg0("setsid");
    // No `--`: busybox setsid would take it for the program; ours never starts with a dash.
    outer.arg(command.get_program()).args(command.get_args());
    outer
}

/// The shell to run commands with: bash on `PATH`, else sh.
fn shell() -> &'static str {
    static SHELL: OnceLock<&'static str> = OnceLock::new();
    SHELL.get_or_init(|| {
        let found = std::env::var_os("PATH")
            .map(|paths| std::env::split_paths(&paths).any(|dir| dir.join("bash").is_file()))
            .unwrap_or(false);
        if found { "bash" } else { "sh" }
    })
}

/// A started command: the outer process (unshare or the wrapper), the pipes, and what was read.
pub(super) struct Running {
    child: Child,
    /// The outer process's id, also its process group.
    group: Pid,
    out: Option<File>,
    status: Option<File>,
    status_text: Vec<u8>,
    /// Held until the end: while it is open the wrapper waits; closing it lets the wrapper exit.
    sync: Option<File>,
    output: Capture,
    /// Whether the command runs in a PID namespace of its own.
    contained: bool,
    /// Whether Landlock enforced the sandbox.
    enforced: bool,
    /// Whether the output pipe was still open after everything we could kill was killed.
    escaped: bool,
    /// Whether the last look found nothing left running after the command exited.
    none_left: bool,
}

pub(super) enum Ending {
    Exited(i32),
    TimedOut,
    Cancelled,
    Failed(String),
}

fn pipe() -> Result<(File, std::os::fd::OwnedFd), String> {
    let (read, write) = pipe_with(PipeFlags::CLOEXEC).map_err(|e| format!("could not create a pipe: {e}"))?;
    Ok((File::from(read), write))
}

pub(super) fn start(ws: &Workspace, command: &str, opts: &BashOptions, temp: &Path) -> Result<Running, String> {
    let (out, out_w) = pipe()?;
    let (status, status_w) = pipe()?;
    let (sync_r, sync) = pipe_with(PipeFlags::CLOEXEC).map_err(|e| format!("could not create a pipe: {e}"))?;
    let contained = process_containment();
    let shell = shell();
    // As root, the shell starts without root's dangerous capabilities (after `unshare`, which needs them).
    let drop = sandbox::privilege_drop(opts.sandbox);
    let mut cmd = match (contained, drop.split_first()) {
        (true, _) => {
            let mut c = Command::new(sandbox::system_program("unshare").unwrap_or_else(|| "unshare".into()));
            // argv[0] stays the bare name, so process listings read as before.
            c.arg0("unshare").args(unshare_args()).args(&drop).arg(shell);
            c
        }
        (false, Some((setpriv, args))) => {
            let mut c = Command::new(setpriv);
            c.args(args).arg(shell);
            c
        }
        (false, None) => Command::new(shell),
    };
    // A descriptor the host opened without close-on-exec (a log file, a socket) would let the command
    // write past the sandbox, which checks paths only when files are opened: bash closes them first (sh
    // cannot name descriptors above 9, and a failed `exec` would end it).
    let script = if shell == "bash" { format!("{CLOSE_INHERITED}{WRAPPER}") } else { WRAPPER.to_string() };
    cmd.arg("-c").arg(script).arg("tooloop-bash").arg(command).arg(shell);
    let mut cmd = in_new_session(cmd);
    cmd.current_dir(ws.root())
        .env("TMPDIR", temp)
        .stdin(Stdio::from(sync_r))
        .stdout(Stdio::from(out_w))
        .stderr(Stdio::from(status_w));
    for name in dropped_names(&opts.env_passthrough) {
        cmd.env_remove(name);
    }
    if opts.sandbox != SandboxMode::Off {
        for name in socket_names(&opts.env_passthrough) {
            cmd.env_remove(name);
        }
    }
    // unshare writes its own /proc/<pid>/uid_map when it makes a user namespace (not as root).
    let proc_write = contained && !running_as_root();
    let protected = opts
        .protected_paths
        .iter()
        .map(|p| super::check_protected_path(&p.to_string_lossy()).map(|p| ws.root().join(p)))
        .collect::<Result<Vec<PathBuf>, String>>()
        .map_err(|m| format!("protected_paths: {m}"))?;
    let policy = Policy {
        mode: opts.sandbox,
        network: opts.network,
        workspace: ws.root(),
        temp,
        proc_write,
        protected: &protected,
    };
    let (child, enforced) = match sandbox::spawn(cmd, &policy) {
        Ok(spawned) => spawned,
        Err(SpawnError::Sandbox(why)) => return Err(why),
        Err(SpawnError::Spawn(e)) => {
            return Err(format!("could not start the command with {shell} in {}: {e}", ws.root().display()));
        }
    };
    let group = Pid::from_raw(i32::try_from(child.id()).unwrap_or(i32::MAX));
    Ok(Running {
        child,
        group,
        out: Some(out),
        status: Some(status),
        status_text: Vec::new(),
        sync: Some(File::from(sync)),
        output: Capture::new(opts.output_cap),
        contained,
        enforced,
        escaped: false,
        none_left: false,
    })
}

impl Running {
    /// Read output and status until the command has exited and nothing it started is left (or `grace`
    /// after its exit has passed), the deadline passes, or `cancel` fires.
    fn watch(&mut self, deadline: Instant, grace: Duration, cancel: &CancelToken) -> Ending {
        let mut exited: Option<(Instant, Ending)> = None;
        let mut next_check = Instant::now();
        loop {
            cancel.poll(false);
            if cancel.is_cancelled() {
                return Ending::Cancelled;
            }
            let now = Instant::now();
            if let Some((at, _)) = &exited {
                let mut done = self.out.is_none() || now >= (*at + grace).min(deadline);
                if !done && now >= next_check {
                    // Background jobs still running? Scanning /proc costs a few ms, so not every round.
                    self.none_left = self.processes().is_empty();
                    done = self.none_left;
                    next_check = now + BACKGROUND_CHECK;
                }
                if done {
                    return exited.map_or(Ending::Failed("lost the exit status".to_string()), |(_, e)| e);
                }
            } else if now >= deadline {
                return Ending::TimedOut;
            }
            let wait = POLL.min(deadline.saturating_duration_since(now));
            if let Err(e) = self.poll_once(wait) {
                return Ending::Failed(format!("lost track of the command: {e}"));
            }
            if exited.is_none() && (self.status.is_none() || self.status_text.contains(&b'\n')) {
                exited = Some((Instant::now(), self.exit_status()));
            }
        }
    }

    /// One `poll(2)` round over the open pipes, reading whatever is ready.
    pub(super) fn poll_once(&mut self, wait: Duration) -> io::Result<()> {
        let timeout = Timespec { tv_sec: wait.as_secs() as _, tv_nsec: wait.subsec_nanos() as _ };
        let (out_ready, status_ready) = {
            let mut fds = Vec::with_capacity(2);
            if let Some(out) = &self.out {
                fds.push(PollFd::new(out, PollFlags::IN));
            }
            if let Some(status) = &self.status {
                fds.push(PollFd::new(status, PollFlags::IN));
            }
            if fds.is_empty() {
                std::thread::sleep(wait);
                return Ok(());
            }
            match poll(&mut fds, Some(&timeout)) {
                Ok(_) => {}
                Err(rustix::io::Errno::INTR) => return Ok(()),
                Err(e) => return Err(e.into()),
            }
            let mut ready = fds.iter().map(|fd| !fd.revents().is_empty());
            let out_ready = if self.out.is_some() { ready.next().unwrap_or(false) } else { false };
            let status_ready = if self.status.is_some() { ready.next().unwrap_or(false) } else { false };
            (out_ready, status_ready)
        };
        let mut chunk = [0u8; 65536];
        if out_ready {
            if let Some(out) = &mut self.out {
                match out.read(&mut chunk) {
                    Ok(0) | Err(_) => self.out = None,
                    Ok(n) => self.output.push(&chunk[..n]),
                }
            }
        }
        if status_ready {
            if let Some(status) = &mut self.status {
                match status.read(&mut chunk) {
                    Ok(0) | Err(_) => self.status = None,
                    // The status is a few digits; an error message from unshare is kept bounded too.
                    Ok(n) if self.status_text.len() < 4096 => self.status_text.extend_from_slice(&chunk[..n]),
                    Ok(_) => {}
                }
            }
        }
        Ok(())
    }

    /// What the wrapper wrote on the status pipe: the exit code, or (if it could not run) why.
    pub(super) fn exit_status(&self) -> Ending {
        let text = String::from_utf8_lossy(&self.status_text);
        // The status is the last line; the shell may have written a job message ("Killed") before it.
        let last = text.trim_end().lines().last().unwrap_or("").trim();
        match last.parse::<i32>() {
            Ok(code) => Ending::Exited(code),
            Err(_) if text.trim().is_empty() => {
                Ending::Failed("the shell ended without reporting an exit status (was it killed?)".to_string())
            }
            Err(_) => Ending::Failed(text.trim().to_string()),
        }
    }

    /// `(pid, name)` of every live process the command started (the wrapper excluded).
    fn processes(&self) -> Vec<(i32, String)> {
        let outer = self.group.as_raw();
        let members: Vec<Proc> = if self.contained {
            // unshare's `pid_for_children` names the new namespace. Reading a namespace link is cheap;
            // reading `stat` is not (about 0.1 ms a process on some VMs), so only members' are read.
            let Some(ns) = namespace(outer, "pid_for_children") else { return Vec::new() };
            if namespace_of_self().as_deref() == Some(ns.as_str()) {
                return Vec::new(); // unshare has not made the namespace yet: nothing started.
            }
            proc_pids()
                .filter(|pid| namespace(*pid, "pid").as_deref() == Some(ns.as_str()))
                .filter_map(read_proc)
                .filter(|p| p.ppid != outer)
                .collect()
        } else {
            proc_pids().filter_map(read_proc).filter(|p| p.pgid == outer && p.pid != outer).collect()
        };
        members.into_iter().filter(|p| !p.zombie).map(|p| (p.pid, p.name)).collect()
    }

    /// SIGKILL the whole tree: the outer process (its death ends the namespace) and its process group.
    pub(super) fn kill_all(&mut self) {
        // ESRCH (already gone) is the expected failure and means there is nothing to do.
        let _ = killpg(self.group, Signal::SIGKILL);
        let _ = kill(self.group, Signal::SIGKILL);
        self.sync = None;
    }

    /// Read what is left in the output pipe until it closes or `until` passes.
    pub(super) fn drain(&mut self, until: Instant) {
        self.status = None;
        while self.out.is_some() {
            let now = Instant::now();
            if now >= until {
                self.escaped = true;
                break;
            }
            if self.poll_once(POLL.min(until - now)).is_err() {
                break;
            }
        }
        // Dropping the read end: a process that escaped the group gets EPIPE, and no thread waits on it.
        self.out = None;
    }

    /// The output read since the last call (background commands hand it on as it arrives).
    pub(super) fn take_output(&mut self) -> Vec<u8> {
        let keep = self.output.keep / 4;
        let taken = std::mem::replace(&mut self.output, Capture::new(keep));
        let (a, b) = taken.tail.as_slices();
        [taken.head.as_slice(), a, b].concat()
    }

    /// Whether the command has reported its exit status (or its status pipe closed).
    pub(super) fn has_exited(&self) -> bool {
        self.status.is_none() || self.status_text.contains(&b'\n')
    }

    /// Whether the output pipe is still open.
    pub(super) fn output_open(&self) -> bool {
        self.out.is_some()
    }

    /// Collect the outer process's exit (it was killed, so this returns at once).
    pub(super) fn reap(&mut self) {
        let _ = self.child.wait();
    }
}

/// One line of the process table.
struct Proc {
    pid: i32,
    ppid: i32,
    pgid: i32,
    zombie: bool,
    name: String,
}

/// Pids of every process visible in /proc.
fn proc_pids() -> impl Iterator<Item = i32> {
    fs::read_dir("/proc").into_iter().flatten().filter_map(|e| e.ok()?.file_name().to_str()?.parse::<i32>().ok())
}

/// One process's `stat` line, parsed.
fn read_proc(pid: i32) -> Option<Proc> {
    let stat = fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // `pid (comm) state ppid pgrp ...`; comm may hold spaces and parentheses, so split at the last ')'.
    let (head, rest) = stat.rsplit_once(')')?;
    let name = head.split_once('(')?.1.to_string();
    let mut fields = rest.split_whitespace();
    let state = fields.next()?;
    let ppid = fields.next()?.parse().ok()?;
    let pgid = fields.next()?.parse().ok()?;
    Some(Proc { pid, ppid, pgid, zombie: state == "Z" || state == "X", name })
}

/// The `kind` namespace link of `pid` (`pid:[4026531836]`).
fn namespace(pid: i32, kind: &str) -> Option<String> {
    fs::read_link(format!("/proc/{pid}/ns/{kind}")).ok().map(|p| p.to_string_lossy().into_owned())
}

fn namespace_of_self() -> Option<String> {
    fs::read_link("/proc/self/ns/pid").ok().map(|p| p.to_string_lossy().into_owned())
}

/// `("2 processes", "sleep (pid 12), python3 (pid 13)")`, or `None` for none.
fn describe_processes(procs: &[(i32, String)]) -> Option<(String, String)> {
    if procs.is_empty() {
        return None;
    }
    let mut named: Vec<String> =
        procs.iter().take(NAMED_PROCESSES).map(|(pid, name)| format!("{name} (pid {pid})")).collect();
    if procs.len() > NAMED_PROCESSES {
        named.push(format!("and {} more", procs.len() - NAMED_PROCESSES));
    }
    let n = procs.len();
    Some((format!("{n} process{}", if n == 1 { "" } else { "es" }), named.join(", ")))
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

/// The merged output within `cap` characters, its middle cut when longer; trailing newlines trimmed.
fn render(capture: &Capture, cap: usize) -> String {
    let text = Text::of(capture);
    if text.chars() == 0 {
        return String::new();
    }
    text.fit(cap, "the output", cap).trim_end_matches('\n').to_string()
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod tests {
    use super::super::run;
    use super::super::workspace::tests::setup;
    use super::*;
    use serde_json::json;
    use std::thread;

    fn bash(ws: &Workspace, command: &str) -> ToolReply {
        run("bash", ws, &json!({"command": command}), &CancelToken::new())
    }

    /// Whether `pid` is gone (or a zombie waiting for its parent: dead all the same).
    fn is_dead(pid: i32) -> bool {
        match fs::read_to_string(format!("/proc/{pid}/stat")) {
            Err(_) => true,
            Ok(stat) => stat.rsplit_once(')').is_some_and(|(_, rest)| rest.trim_start().starts_with('Z')),
        }
    }

    /// Pids of live processes whose command line holds `marker` (a `sleep` with a unique duration).
    fn pids_with(marker: &str) -> Vec<i32> {
        proc_pids()
            .filter_map(read_proc)
            .filter(|p| !p.zombie)
            .filter(|p| {
                fs::read(format!("/proc/{}/cmdline", p.pid))
                    .map(|c| String::from_utf8_lossy(&c).replace('\0', " ").contains(marker))
                    .unwrap_or(false)
            })
            .map(|p| p.pid)
            .collect()
    }

    fn none_left_within(marker: &str, limit: Duration) -> bool {
        let until = Instant::now() + limit;
        loop {
            let left = pids_with(marker);
            if left.iter().all(|p| is_dead(*p)) {
                return true;
            }
            if Instant::now() > until {
                for pid in left {
                    let _ = kill(Pid::from_raw(pid), Signal::SIGKILL);
                }
                return false;
            }
            thread::sleep(Duration::from_millis(20));
        }
    }

    /// A sleep duration no other test uses, so its processes can be found by command line.
    fn marker() -> String {
        static N: AtomicU64 = AtomicU64::new(0);
        format!("{}.{}{}", 300 + N.fetch_add(1, Ordering::SeqCst), std::process::id() % 1000, 7)
    }

    fn thread_count() -> usize {
        fs::read_dir("/proc/self/task").unwrap().count()
    }

    #[test]
    fn output_is_shown_as_it_is() {
        let (_tmp, ws) = setup();
        assert_eq!(bash(&ws, "echo hello").unwrap(), "hello");
    }

    #[test]
    fn non_zero_exit_code_follows_the_output() {
        let (_tmp, ws) = setup();
        assert_eq!(bash(&ws, "echo partial; exit 3").unwrap(), "partial\nexit code: 3");
        assert_eq!(bash(&ws, "exit 4").unwrap(), "exit code: 4");
    }

    #[test]
    fn stderr_is_merged_in_order_without_a_label() {
        let (_tmp, ws) = setup();
        assert_eq!(bash(&ws, "echo out; echo err >&2; echo out2").unwrap(), "out\nerr\nout2");
        assert_eq!(bash(&ws, "echo only-err >&2").unwrap(), "only-err");
    }

    #[test]
    fn no_output_says_so() {
        let (_tmp, ws) = setup();
        assert_eq!(bash(&ws, "true").unwrap(), "(no output)");
    }

    #[test]
    fn runs_in_the_workspace_root() {
        let (_tmp, ws) = setup();
        let out = bash(&ws, "pwd -P; cat sub/inside.txt").unwrap();
        assert_eq!(out, format!("{}\ninside", ws.root().display()));
    }

    #[test]
    fn stdin_is_closed_so_cat_returns_at_once() {
        let (_tmp, ws) = setup();
        let started = Instant::now();
        let input = json!({"command": "cat; read x; echo read=$?", "timeout": 10});
        let out = run("bash", &ws, &input, &CancelToken::new()).unwrap();
        assert_eq!(out, "read=1");
        assert!(started.elapsed() < Duration::from_secs(3));
    }

    #[test]
    fn tmpdir_is_private_and_removed_after_the_call() {
        let (_tmp, ws) = setup();
        let out = bash(&ws, "echo $TMPDIR; touch $TMPDIR/x && echo made").unwrap();
        let (dir, rest) = out.split_once('\n').unwrap();
        assert_eq!(rest, "made");
        assert!(dir.contains("tooloop-bash-"), "{dir}");
        assert!(!Path::new(dir).exists(), "{dir} was not removed");
    }

    #[test]
    fn inherited_environment_holds_no_secret_names() {
        // The variables themselves are set on a child test process in tests/builtin_sandbox.rs (setting
        // them here would need `unsafe`); this checks that whatever this process has, none leaks.
        let (_tmp, ws) = setup();
        let out = bash(&ws, "env | cut -d= -f1").unwrap();
        for line in out.lines() {
            assert!(!super::super::is_secret_name(line), "{line} was inherited");
        }
    }

    #[test]
    fn large_output_keeps_head_and_tail_and_says_what_was_cut() {
        let (_tmp, ws) = setup();
        let out = bash(&ws, "seq 1 300000").unwrap();
        assert!(out.starts_with("1\n2\n3\n"), "{}", &out[..100]);
        assert!(out.ends_with("299999\n300000"), "{}", &out[out.len() - 200..]);
        assert!(out.contains("cut from the middle of the output"), "no cut marker");
        let chars = out.chars().count();
        assert!(chars < OUTPUT_CAP_CHARS + 300, "{chars} characters");
        let marker = out.lines().find(|l| l.starts_with("[... ")).unwrap();
        let cut: u64 = marker[5..].split(' ').next().unwrap().parse().unwrap();
        assert!((1_950_000..1_970_000).contains(&cut), "{marker}");
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

    /// The known sandbox escapes: each must die on timeout, be named, and leak no thread.
    fn escape_dies_on_timeout(template: &str) {
        let (_tmp, ws) = setup();
        let m = marker();
        let command = template.replace("MARK", &m);
        let threads_before = thread_count();
        let started = Instant::now();
        let err = run("bash", &ws, &json!({"command": command, "timeout": 1}), &CancelToken::new()).unwrap_err();
        assert!(started.elapsed() < Duration::from_secs(3), "took {:?}", started.elapsed());
        assert!(err.contains("timed out after 1 s"), "{err}");
        if process_containment() {
            assert!(err.contains("sleep (pid "), "the reply names what was killed: {err}");
            assert!(none_left_within(&m, Duration::from_secs(2)), "{command}: a process survived");
        } else {
            println!("skipped the survival check: no unprivileged PID namespace here ({command})");
        }
        assert!(thread_count() <= threads_before, "threads leaked");
    }

    #[test]
    fn setsid_child_dies_on_timeout() {
        escape_dies_on_timeout("setsid sleep MARK & sleep 30");
    }

    #[test]
    fn double_fork_dies_on_timeout() {
        escape_dies_on_timeout("( ( sleep MARK & ) & ); sleep 30");
    }

    #[test]
    fn job_control_child_dies_on_timeout() {
        escape_dies_on_timeout("set -m; sleep MARK & wait");
    }

    #[test]
    fn detached_background_process_is_killed_and_named_when_the_command_ends() {
        let (_tmp, ws) = setup();
        let m = marker();
        let started = Instant::now();
        let out = bash(&ws, &format!("setsid sleep {m} > /dev/null 2>&1 & echo started")).unwrap();
        assert!(started.elapsed() < Duration::from_secs(3), "took {:?}", started.elapsed());
        if process_containment() {
            assert!(
                out.starts_with("started\n[killed 1 process still running when the command ended: sleep (pid "),
                "{out}"
            );
            assert!(none_left_within(&m, Duration::from_secs(2)));
        } else {
            println!("skipped: no unprivileged PID namespace here");
            none_left_within(&m, Duration::ZERO);
        }
    }

    #[test]
    fn background_child_holding_stdout_does_not_hang_the_call() {
        let (_tmp, ws) = setup();
        let m = marker();
        let started = Instant::now();
        let out = run(
            "bash",
            &ws,
            &json!({"command": format!("sleep {m} & echo started"), "timeout": 20}),
            &CancelToken::new(),
        )
        .unwrap();
        assert!(started.elapsed() < Duration::from_secs(3), "took {:?}", started.elapsed());
        assert!(
            out.starts_with("started\n[killed 1 process still running when the command ended: sleep (pid "),
            "{out}"
        );
        assert!(none_left_within(&m, Duration::from_secs(2)));
    }

    #[test]
    fn cancel_from_another_thread_stops_the_command_quickly() {
        let (_tmp, ws) = setup();
        let m = marker();
        let cancel = CancelToken::new();
        let canceller = cancel.clone();
        let trigger = thread::spawn(move || {
            thread::sleep(Duration::from_millis(300));
            canceller.cancel();
            Instant::now()
        });
        let err = run("bash", &ws, &json!({"command": format!("setsid sleep {m} & wait")}), &cancel).unwrap_err();
        let returned = Instant::now();
        let cancelled_at = trigger.join().unwrap();
        assert!(err.starts_with("cancelled"), "{err}");
        assert!(returned - cancelled_at < Duration::from_secs(1), "took {:?}", returned - cancelled_at);
        if process_containment() {
            assert!(none_left_within(&m, Duration::from_secs(2)));
        } else {
            none_left_within(&m, Duration::ZERO);
        }
    }

    #[test]
    fn timeout_keeps_the_output_gathered_so_far() {
        let (_tmp, ws) = setup();
        let input = json!({"command": "echo before; sleep 30", "timeout": 1});
        let err = run("bash", &ws, &input, &CancelToken::new()).unwrap_err();
        assert!(err.ends_with("Output so far:\nbefore"), "{err}");
    }

    #[test]
    fn timeout_over_the_cap_is_clamped_and_said() {
        let (_tmp, ws) = setup();
        let out = run("bash", &ws, &json!({"command": "echo hi", "timeout": 9000}), &CancelToken::new()).unwrap();
        assert_eq!(out, "hi\n[timeout 9000 s is over the 600 s maximum; used 600 s]");
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
    fn killed_by_a_signal_is_reported_as_its_shell_exit_code() {
        let (_tmp, ws) = setup();
        assert_eq!(bash(&ws, "kill -9 $$").unwrap(), "exit code: 137");
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
        let opts = BashOptions {
            max_timeout: Duration::from_secs(1),
            output_cap: 10,
            sandbox: SandboxMode::Off,
            ..BashOptions::default()
        };
        let input = json!({"command": "seq 1 100", "timeout": 5});
        let out = run_bash(&ws, &input, &opts, &CancelToken::new()).unwrap();
        assert!(out.starts_with("1\n2\n3\n[... "), "{out}");
        assert!(out.contains("[timeout 5 s is over the 1 s maximum; used 1 s]"), "{out}");
    }
}
