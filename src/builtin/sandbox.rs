//! Kernel-enforced confinement of `bash` (Landlock, Linux).
//!
//! Only the command's process tree is confined, never the host: a short-lived thread restricts itself
//! (a Landlock domain and `no_new_privs` belong to the thread and are inherited by every process it
//! starts), spawns the shell, and ends. No `unsafe` and no `pre_exec` are needed.
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
/// Probed once per process (a throw-away thread restricts itself), then cached. A host shows "sandbox
/// unavailable" once when this is `None` and the configured mode is not [`SandboxMode::Off`]; the
/// commands then run unconfined.
pub fn sandbox_support() -> Option<u32> {
    static SUPPORT: OnceLock<Option<u32>> = OnceLock::new();
    *SUPPORT.get_or_init(imp::probe)
}

/// A short paragraph for the system prompt telling the model what `bash` may do under `mode`, with the
/// network allowed or not. Empty for [`SandboxMode::Off`] with the network on (nothing to say).
pub fn sandbox_prompt(mode: SandboxMode, network: bool) -> String {
    let files = match mode {
        SandboxMode::Off => "",
        SandboxMode::WorkspaceWrite => {
            "Commands run by bash are sandboxed: they can read any file but write only inside the workspace \
             and in $TMPDIR (a private temporary folder, emptied after each command); writes anywhere else \
             fail with \"Permission denied\". Do not try to work around the sandbox; if a task needs to write \
             elsewhere, say so to the user."
        }
        SandboxMode::ReadOnly => {
            "Commands run by bash are sandboxed read-only: they can read any file but write only in $TMPDIR \
             (a private temporary folder, emptied after each command); any other write fails with \
             \"Permission denied\". Use bash to inspect, build into $TMPDIR, and run tests that do not write \
             to the workspace."
        }
    };
    let net = if network || mode == SandboxMode::Off {
        ""
    } else {
        "Network access is off: commands cannot open TCP connections or listen on ports."
    };
    match (files.is_empty(), net.is_empty()) {
        (true, _) => String::new(),
        (false, true) => files.to_string(),
        (false, false) => format!("{files} {net}"),
    }
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
}

/// Spawn `command` confined by `policy`: from a fresh thread that restricts itself first, so the host's
/// threads keep their rights. With [`SandboxMode::Off`], or where the kernel lacks Landlock, the command
/// is spawned unconfined. Returns the child and whether Landlock enforced the policy.
///
/// # Errors
/// A message when the ruleset cannot be built or applied (never silently unconfined when the kernel
/// supports Landlock), or when the spawn fails.
pub(crate) fn spawn(mut command: Command, policy: &Policy<'_>) -> Result<(Child, bool), SpawnError> {
    if policy.mode == SandboxMode::Off && policy.network {
        return command.spawn().map(|c| (c, false)).map_err(SpawnError::Spawn);
    }
    if sandbox_support().is_none() {
        return command.spawn().map(|c| (c, false)).map_err(SpawnError::Spawn);
    }
    let rules = imp::Rules::build(policy).map_err(SpawnError::Sandbox)?;
    std::thread::scope(|scope| {
        let spawner = scope.spawn(move || {
            let enforced = rules.restrict_self().map_err(SpawnError::Sandbox)?;
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
                ruleset = ruleset.scope(Scope::AbstractUnixSocket).map_err(|e| fail(&e))?;
            }
            // Signals only reach processes in the same sandbox: the command cannot kill the host.
            ruleset = ruleset.scope(Scope::Signal).map_err(|e| fail(&e))?;
            let mut created = ruleset.create().map_err(|e| fail(&e))?;
            if policy.mode != SandboxMode::Off {
                let read = AccessFs::from_read(TARGET);
                let all = AccessFs::from_all(TARGET);
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
    }
}
