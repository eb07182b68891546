//! Kernel-enforced confinement of `bash` (Linux): Landlock (file contents, abstract sockets, signals), a
//! seccomp filter (terminal injection, Unix sockets, the network allow-list: `seccomp.rs`) and, as root,
//! a read-only mount namespace (metadata writes: `mounts.rs`).
//!
//! Only the command's process tree is confined, never the host: a short-lived thread enters its mount
//! namespace, restricts itself (a Landlock domain, a seccomp filter and `no_new_privs` belong to the
//! thread and are inherited by every process it starts), spawns the shell, and ends. No `unsafe` and no
//! `pre_exec` are needed.
//!
//! Must never: restrict the calling thread or any thread that outlives the spawn, or report confinement
//! that the kernel did not enforce.

use serde::{Deserialize, Serialize};
use std::fmt;
use std::path::Path;
use std::process::{Child, Command};
use std::str::FromStr;
use std::sync::OnceLock;

/// How `bash` is confined.
///
/// Serde and [`FromStr`] use the names `"off"`, `"workspace-write"` and `"read-only"`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum SandboxMode {
    /// Not confined: the command can do whatever the user running the host can.
    Off,
    /// Read everywhere; write only inside the workspace and a private temporary folder (`$TMPDIR`). The
    /// workspace folder itself cannot be removed or renamed.
    #[default]
    WorkspaceWrite,
    /// Read everywhere; write only in the private temporary folder.
    ReadOnly,
}

impl SandboxMode {
    /// The serde / [`FromStr`] name: `"off"`, `"workspace-write"` or `"read-only"`.
    pub fn as_str(self) -> &'static str {
        match self {
            SandboxMode::Off => "off",
            SandboxMode::WorkspaceWrite => "workspace-write",
            SandboxMode::ReadOnly => "read-only",
        }
    }
}

impl fmt::Display for SandboxMode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl FromStr for SandboxMode {
    type Err = String;

    /// `"off"`, `"workspace-write"` or `"read-only"` (also with `_` for `-`, any case).
    fn from_str(s: &str) -> Result<Self, String> {
        match s.trim().to_ascii_lowercase().replace('_', "-").as_str() {
            "off" => Ok(SandboxMode::Off),
            "workspace-write" => Ok(SandboxMode::WorkspaceWrite),
            "read-only" => Ok(SandboxMode::ReadOnly),
            other => Err(format!("unknown sandbox mode '{other}' (expected off, workspace-write or read-only)")),
        }
    }
}

/// The Landlock ABI version this kernel offers (1 = Linux 5.13 … 4 adds TCP rules, 6 signal scoping), or
/// `None` when `bash` cannot be confined here (not Linux, Landlock not built in or not enabled at boot).
///
/// Probed once per process (a throw-away thread restricts itself), then cached. Where this is `None`,
/// only [`SandboxMode::Off`] is accepted ([`sandbox_check`]): a host that wants unconfined commands there
/// says so explicitly.
pub fn sandbox_support() -> Option<u32> {
    static SUPPORT: OnceLock<Option<u32>> = OnceLock::new();
    *SUPPORT.get_or_init(imp::probe)
}

/// A short paragraph for the system prompt telling the model what `bash` may do under `mode`, with the
/// network allowed or not. Empty for [`SandboxMode::Off`] with the network on (nothing to say), and
/// wherever [`sandbox_check`] says this system cannot enforce it.
pub fn sandbox_prompt(mode: SandboxMode, network: bool) -> String {
    if sandbox_check(mode, network).is_err() {
        // Never tell the model it is confined when the kernel cannot confine it (the tool is refused then).
        return String::new();
    }
    let files = match mode {
        SandboxMode::Off => "",
        SandboxMode::WorkspaceWrite => {
            "Commands run by bash are sandboxed: they can read any file but write only inside the workspace \
             and in $TMPDIR (private, emptied after each command); other writes fail (\"Permission denied\" \
             or \"Read-only file system\"), and so do Unix sockets. Do not work around the sandbox; if a task \
             needs to write elsewhere, say so to the user."
        }
        SandboxMode::ReadOnly => {
            "Commands run by bash are sandboxed read-only: they can read any file but write only in $TMPDIR \
             (private, emptied after each command); other writes fail (\"Permission denied\" or \"Read-only \
             file system\"), and so do Unix sockets. Use bash to inspect, build into $TMPDIR, and run tests \
             that do not write to the workspace."
        }
    };
    let net = if network || mode == SandboxMode::Off {
        ""
    } else {
        "Network access is off: commands cannot open network sockets (TCP, UDP, loopback included)."
    };
    match (files.is_empty(), net.is_empty()) {
        (true, _) => String::new(),
        (false, true) => files.to_string(),
        (false, false) => format!("{files} {net}"),
    }
}

/// [`sandbox_prompt`] in one short sentence, for small context windows (the built-in tools'
/// `short_descriptions`): what a command may write, and whether it has the network.
pub fn short_sandbox_prompt(mode: SandboxMode, network: bool) -> String {
    if sandbox_check(mode, network).is_err() {
        return String::new();
    }
    let files = match mode {
        SandboxMode::Off => return String::new(),
        SandboxMode::WorkspaceWrite => "bash is sandboxed: it can write only in the workspace and $TMPDIR",
        SandboxMode::ReadOnly => "bash is sandboxed read-only: it can write only in $TMPDIR",
    };
    if network { format!("{files}.") } else { format!("{files}, and has no network.") }
}

/// Whether this system can enforce `mode` with the network `network`, or why not.
///
/// `read-only` and `workspace-write` need Landlock (files) and seccomp (Unix sockets, terminal
/// injection); `network: false` needs seccomp (the socket-family allow-list). `off` with the network on
/// needs nothing. [`register`](super::register) refuses the built-in `bash` with this message, so no host
/// (Python, C, the CLI) ever runs a command less confined than it asked, and no system prompt claims
/// confinement that is not there.
///
/// # Errors
/// A message naming what the kernel lacks and how to run unconfined on purpose (`sandbox="off"`).
pub fn sandbox_check(mode: SandboxMode, network: bool) -> Result<(), String> {
    if mode != SandboxMode::Off && sandbox_support().is_none() {
        return Err(format!(
            "sandbox \"{mode}\" cannot be enforced here: this kernel has no Landlock (Linux 5.13+ with \
             Landlock enabled), so bash would run unconfined. Pass sandbox \"off\" to accept that"
        ));
    }
    if mode != SandboxMode::Off && rustix::process::geteuid().is_root() && !on_path("setpriv") {
        return Err(format!(
            "sandbox \"{mode}\" cannot be enforced here: tooloop runs as root and util-linux `setpriv` is not \
             on PATH, so bash would keep root's capabilities (load kernel modules, create devices, change the \
             host's name). Install util-linux, run as another user, or pass sandbox \"off\" to accept that"
        ));
    }
    if (mode != SandboxMode::Off || !network) && !super::seccomp::seccomp_support() {
        let what = if mode == SandboxMode::Off { "network off".to_string() } else { format!("sandbox \"{mode}\"") };
        return Err(format!(
            "{what} cannot be enforced here: this system has no seccomp filters, so bash could still reach \
             Unix sockets and the network. Pass sandbox \"off\" and network on to accept that"
        ));
    }
    Ok(())
}

/// Capabilities a command started by root keeps under a sandbox (Docker's default set without `mknod`,
/// `setfcap`, `setpcap` and `sys_chroot`): enough for file ownership and permission checks, package tools
/// that switch users, and binding low ports, while Landlock and the read-only view keep confining what
/// those touch. Everything else — `sys_admin`, `sys_module`, `sys_boot`, `sys_time`, `net_admin`,
/// `sys_rawio`, `mknod`, … with which root could change the host's name or clock, load kernel code or
/// write a disk through a device node — is dropped from the bounding set, so no `exec` regains it.
const ROOT_KEPT_CAPS: &str =
    "-all,+chown,+dac_override,+fowner,+fsetid,+kill,+setgid,+setuid,+net_bind_service,+net_raw,+audit_write";

/// Whether `program` is a file in one of `PATH`'s absolute folders.
pub(crate) fn on_path(program: &str) -> bool {
    system_program(program).is_some()
}

/// `program` (`unshare`, `setsid`, `setpriv`) as an absolute path from `PATH`'s absolute folders only.
/// A relative entry (`.`, `bin`, an empty one) is resolved against the workspace, where a command could
/// plant its own `unshare` for the host to run unconfined at the next start of an MCP server, or its own
/// `setpriv` that keeps root's capabilities.
pub(crate) fn system_program(program: &str) -> Option<std::path::PathBuf> {
    let paths = std::env::var_os("PATH")?;
    std::env::split_paths(&paths).filter(|dir| dir.is_absolute()).map(|dir| dir.join(program)).find(|p| p.is_file())
}

/// The program and arguments to put before a sandboxed command's shell when the host runs as root:
/// util-linux `setpriv` dropping every capability but [`ROOT_KEPT_CAPS`] (bounding, inheritable and
/// ambient sets, so the shell's `exec` as uid 0 gets only those). Empty for `off` and for other users
/// (whose commands hold no capabilities over the host). [`sandbox_check`] refuses a sandbox as root where
/// `setpriv` is missing, so this is never silently skipped.
pub(crate) fn privilege_drop(mode: SandboxMode) -> Vec<String> {
    if mode == SandboxMode::Off || !rustix::process::geteuid().is_root() {
        return Vec::new();
    }
    let Some(setpriv) = system_program("setpriv") else {
        return Vec::new(); // sandbox_check refuses this case before any command runs
    };
    let caps = ROOT_KEPT_CAPS;
    let args = ["--inh-caps=-all", "--ambient-caps=-all", &format!("--bounding-set={caps}"), "--"];
    std::iter::once(setpriv.to_string_lossy().into_owned()).chain(args.iter().map(|s| s.to_string())).collect()
}

/// The paths inside a writable workspace that `bash` sees read-only by default (the `protected_paths`
/// option): the agent's and other agents' settings, the MCP config, and git's hooks and config, whose
/// content runs code outside the sandbox the next time the user works in the repository.
pub const DEFAULT_PROTECTED_PATHS: [&str; 5] = [".tooloop", ".claude", ".mcp.json", ".git/hooks", ".git/config"];

/// [`DEFAULT_PROTECTED_PATHS`] as paths.
pub fn default_protected_paths() -> Vec<std::path::PathBuf> {
    DEFAULT_PROTECTED_PATHS.iter().map(std::path::PathBuf::from).collect()
}

/// `path` as a protected path: relative to the workspace, not empty, without `..` (it must name
/// something inside the workspace).
///
/// # Errors
/// A message saying which rule `path` breaks.
pub fn check_protected_path(path: &str) -> Result<std::path::PathBuf, String> {
    use std::path::Component;
    let p = std::path::PathBuf::from(path);
    if path.is_empty() || path.contains('\0') {
        return Err(format!("{path:?} is not a path"));
    }
    if !p.components().all(|c| matches!(c, Component::Normal(_) | Component::CurDir)) {
        return Err(format!("{path:?} is absolute or holds '..'"));
    }
    Ok(p)
}

/// What [`spawn`] enforces on one command.
pub(crate) struct Policy<'a> {
    pub(crate) mode: SandboxMode,
    pub(crate) network: bool,
    pub(crate) workspace: &'a Path,
    pub(crate) temp: &'a Path,
    /// Allow writing files under /proc: `unshare` must write its new user namespace's uid_map. Only
    /// granted to non-root users, for whom /proc holds nothing writable but their own processes' files
    /// (and Landlock keeps ptrace-style access to processes outside the sandbox denied).
    pub(crate) proc_write: bool,
    /// Paths inside the workspace kept read-only in [`SandboxMode::WorkspaceWrite`] (absolute; only where
    /// the read-only view can be built, see [`super::mounts`]).
    pub(crate) protected: &'a [std::path::PathBuf],
}

/// Spawn `command` confined by `policy`: from a fresh thread that restricts itself first (Landlock, then
/// the seccomp filter), so the host's threads keep their rights. The seccomp filter (no terminal
/// injection) applies in every mode where the kernel has seccomp; Landlock applies unless the mode is
/// [`SandboxMode::Off`] with the network on. Returns the child and whether Landlock enforced the policy.
///
/// # Errors
/// A message when the policy cannot be enforced here (see [`sandbox_check`]), when the ruleset or filter
/// cannot be built or applied (never silently unconfined), or when the spawn fails.
pub(crate) fn spawn(mut command: Command, policy: &Policy<'_>) -> Result<(Child, bool), SpawnError> {
    sandbox_check(policy.mode, policy.network).map_err(SpawnError::Sandbox)?;
    let filter = if super::seccomp::seccomp_support() {
        let rules = super::seccomp::SocketRules::new(policy.mode, policy.network);
        Some(super::seccomp::Filter::build(rules).map_err(SpawnError::Sandbox)?)
    } else {
        None
    };
    let landlock = if policy.mode == SandboxMode::Off && policy.network {
        None
    } else {
        sandbox_support().map(|_| imp::Rules::build(policy)).transpose().map_err(SpawnError::Sandbox)?
    };
    // Metadata writes (chmod, chown, utimes, setxattr) outside the writable folders: a read-only view.
    let mut writable = vec![policy.temp];
    if policy.mode == SandboxMode::WorkspaceWrite {
        writable.push(policy.workspace);
    }
    let view = policy.mode != SandboxMode::Off && super::mounts::read_only_view();
    let protected: &[std::path::PathBuf] =
        if policy.mode == SandboxMode::WorkspaceWrite { policy.protected } else { &[] };
    if filter.is_none() && landlock.is_none() {
        return command.spawn().map(|c| (c, false)).map_err(SpawnError::Spawn);
    }
    std::thread::scope(|scope| {
        let spawner = scope.spawn(move || {
            // Mounts first: a thread under Landlock can no longer change its mounts.
            if view {
                super::mounts::enter(&writable, protected).map_err(SpawnError::Sandbox)?;
            }
            let enforced = match landlock {
                Some(rules) => rules.restrict_self().map_err(SpawnError::Sandbox)?,
                None => false,
            };
            if let Some(filter) = &filter {
                filter.install().map_err(SpawnError::Sandbox)?;
            }
            // `command` moves into and drops in this thread, so the parent's copies of the pipe ends
            // close before the caller reads them.
            command.spawn().map(|c| (c, enforced)).map_err(SpawnError::Spawn)
        });
        spawner.join().unwrap_or_else(|_| Err(SpawnError::Sandbox("the sandbox thread panicked".to_string())))
    })
}

/// Why [`spawn`] failed.
#[derive(Debug)]
pub(crate) enum SpawnError {
    /// The Landlock ruleset could not be built or applied.
    Sandbox(String),
    /// The process could not be started.
    Spawn(std::io::Error),
}

#[cfg(target_os = "linux")]
mod imp {
    use super::{Policy, SandboxMode};
    use landlock::{
        ABI, Access, AccessFs, AccessNet, CompatLevel, Compatible, LandlockStatus, PathBeneath, PathFd, Ruleset,
        RulesetAttr, RulesetCreated, RulesetCreatedAttr, RulesetStatus, Scope,
    };

    /// The newest ABI whose rights we ask for; older kernels get the subset they know (best effort).
    const TARGET: ABI = ABI::V6;

    /// Files under /dev that ordinary commands write to.
    const DEV_WRITABLE: [&str; 5] = ["/dev/null", "/dev/zero", "/dev/full", "/dev/tty", "/dev/ptmx"];

    pub(super) fn probe() -> Option<u32> {
        // Restricting a throw-away thread is the only safe way to ask the kernel; the thread then ends.
        std::thread::spawn(|| {
            let ruleset = Ruleset::default().handle_access(AccessFs::Execute).ok()?.create().ok()?;
            let status = ruleset.restrict_self().ok()?;
            match status.landlock {
                LandlockStatus::Available { effective_abi, kernel_abi } => {
                    Some(kernel_abi.map_or(effective_abi as u32, |v| v.max(0) as u32))
                }
                _ => None,
            }
        })
        .join()
        .ok()
        .flatten()
        .filter(|abi| *abi > 0)
    }

    /// A ruleset built in the caller's thread, applied in the spawning thread.
    pub(super) struct Rules(RulesetCreated);

    impl Rules {
        pub(super) fn build(policy: &Policy<'_>) -> Result<Rules, String> {
            let fail = |e: &dyn std::fmt::Display| format!("could not set up the sandbox: {e}");
            let mut ruleset = Ruleset::default().set_compatibility(CompatLevel::BestEffort);
            if policy.mode != SandboxMode::Off {
                ruleset = ruleset.handle_access(AccessFs::from_all(TARGET)).map_err(|e| fail(&e))?;
            }
            if !policy.network {
                ruleset = ruleset.handle_access(AccessNet::from_all(TARGET)).map_err(|e| fail(&e))?;
            }
            if !policy.network || policy.mode != SandboxMode::Off {
                // Abstract Unix sockets outside the sandbox are out of reach (ABI 6; the seccomp filter
                // refuses Unix sockets on older kernels too).
                ruleset = ruleset.scope(Scope::AbstractUnixSocket).map_err(|e| fail(&e))?;
            }
            // Signals only reach processes in the same sandbox: the command cannot kill the host.
            ruleset = ruleset.scope(Scope::Signal).map_err(|e| fail(&e))?;
            let mut created = ruleset.create().map_err(|e| fail(&e))?;
            if policy.mode != SandboxMode::Off {
                let read = AccessFs::from_read(TARGET);
                // Everything in the writable folders but creating device nodes: a device node made there
                // would reach a disk or memory past every other rule.
                let all = AccessFs::from_all(TARGET) & !(AccessFs::MakeChar | AccessFs::MakeBlock);
                created = created
                    .add_rule(PathBeneath::new(PathFd::new("/").map_err(|e| fail(&e))?, read))
                    .map_err(|e| fail(&e))?;
                let mut writable = vec![policy.temp];
                if policy.mode == SandboxMode::WorkspaceWrite {
                    writable.push(policy.workspace);
                }
                for dir in writable {
                    let fd = PathFd::new(dir).map_err(|e| fail(&e))?;
                    created = created.add_rule(PathBeneath::new(fd, all)).map_err(|e| fail(&e))?;
                }
                if policy.proc_write {
                    let fd = PathFd::new("/proc").map_err(|e| fail(&e))?;
                    created = created
                        .add_rule(PathBeneath::new(fd, AccessFs::WriteFile | AccessFs::ReadFile))
                        .map_err(|e| fail(&e))?;
                }
                for dev in DEV_WRITABLE {
                    // A device this system lacks is simply not granted.
                    if let Ok(fd) = PathFd::new(dev) {
                        created = created
                            .add_rule(PathBeneath::new(fd, AccessFs::from_file(TARGET)))
                            .map_err(|e| fail(&e))?;
                    }
                }
            }
            Ok(Rules(created))
        }

        /// Restrict the current thread; whether the kernel enforced the rules (fully or partly).
        pub(super) fn restrict_self(self) -> Result<bool, String> {
            let status = self.0.restrict_self().map_err(|e| format!("could not enter the sandbox: {e}"))?;
            Ok(status.ruleset != RulesetStatus::NotEnforced)
        }
    }
}

#[cfg(not(target_os = "linux"))]
mod imp {
    use super::Policy;

    pub(super) fn probe() -> Option<u32> {
        None
    }

    pub(super) struct Rules;

    impl Rules {
        pub(super) fn build(_: &Policy<'_>) -> Result<Rules, String> {
            Ok(Rules)
        }

        pub(super) fn restrict_self(self) -> Result<bool, String> {
            Ok(false)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mode_names_round_trip_through_serde_and_from_str() {
        for mode in [SandboxMode::Off, SandboxMode::WorkspaceWrite, SandboxMode::ReadOnly] {
            let json = serde_json::to_string(&mode).unwrap_or_default();
            assert_eq!(json, format!("\"{}\"", mode.as_str()));
            assert_eq!(serde_json::from_str::<SandboxMode>(&json).ok(), Some(mode));
            assert_eq!(mode.as_str().parse::<SandboxMode>(), Ok(mode));
        }
        assert_eq!("Read_Only".parse::<SandboxMode>(), Ok(SandboxMode::ReadOnly));
        assert!("strict".parse::<SandboxMode>().is_err());
    }

    #[test]
    fn prompt_says_what_each_mode_allows() {
        assert_eq!(sandbox_prompt(SandboxMode::Off, true), "");
        assert!(sandbox_prompt(SandboxMode::WorkspaceWrite, true).contains("write only inside the workspace"));
        assert!(sandbox_prompt(SandboxMode::ReadOnly, true).contains("read-only"));
        assert!(sandbox_prompt(SandboxMode::ReadOnly, false).contains("Network access is off"));
        assert!(!sandbox_prompt(SandboxMode::WorkspaceWrite, true).contains("Network"));
        assert_eq!(short_sandbox_prompt(SandboxMode::Off, false), "");
        let short = short_sandbox_prompt(SandboxMode::WorkspaceWrite, false);
        assert!(short.contains("only in the workspace and $TMPDIR") && short.contains("no network"), "{short}");
        assert!(short_sandbox_prompt(SandboxMode::ReadOnly, true).contains("read-only"));
        assert!(short.len() * 3 < sandbox_prompt(SandboxMode::WorkspaceWrite, false).len());
    }
}
