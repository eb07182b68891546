//! The seccomp filter that `bash`'s process tree runs under, beside Landlock (Linux).
//!
//! Landlock confines paths; it cannot see ioctls, socket families or Unix-socket `connect()`. This filter
//! makes those fail with `EPERM` ("Operation not permitted"):
//! - `ioctl(TIOCSTI)` and `ioctl(TIOCLINUX)` in every mode, `off` included: a command can never push
//!   keystrokes into a terminal, whichever terminal it opens (the command also runs in a session of its
//!   own without a controlling terminal, see `bash.rs`);
//! - `socket(AF_UNIX, …)` under `read-only` and `workspace-write`: a command cannot reach the user's
//!   services (tmux, the session bus, ssh-agent, docker, systemd) through pathname or abstract Unix
//!   sockets. `socketpair()` keeps working, so pipes between processes that use it still do;
//! - with the network off, `socket()` of every family but `AF_UNIX` (an allow-list, so MPTCP, UDP, raw,
//!   netlink, packet and families added to future kernels are all refused; `AF_UNIX` only where the
//!   point above does not already refuse it);
//! - `io_uring_setup/enter/register` whenever sockets are filtered, because io_uring opens and connects
//!   sockets without the system calls a filter sees.
//!
//! The filter is built in the caller's thread and installed by the short-lived thread that spawns the
//! shell (a seccomp filter, like a Landlock domain, belongs to the thread and its future children), so
//! the host is never filtered. Other architectures than the one compiled for are killed (seccompiler's
//! prologue); on x86-64 the x32 numbers of the filtered calls are refused too.
//!
//! Must never: install a filter on a thread that outlives the spawn, or allow what it says it refuses.

use super::SandboxMode;

/// What the filter refuses, decided from the sandbox mode and the network switch.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct SocketRules {
    /// Refuse `socket(AF_UNIX)` (sandboxed modes).
    pub(crate) deny_unix: bool,
    /// Refuse every other family (network off).
    pub(crate) deny_network: bool,
}

impl SocketRules {
    pub(crate) fn new(mode: SandboxMode, network: bool) -> SocketRules {
        SocketRules { deny_unix: mode != SandboxMode::Off, deny_network: !network }
    }
}

/// Whether this kernel accepts seccomp filters (probed once per process on a throw-away thread).
pub(crate) fn seccomp_support() -> bool {
    imp::support()
}

/// A compiled filter, ready to install.
pub(crate) struct Filter(imp::Program);

impl Filter {
    /// Compile the filter for `rules`.
    ///
    /// # Errors
    /// A message when the filter cannot be compiled (an architecture seccompiler does not know).
    pub(crate) fn build(rules: SocketRules) -> Result<Filter, String> {
        imp::build(rules).map(Filter)
    }

    /// Install the filter on the calling thread (and `no_new_privs` with it).
    ///
    /// # Errors
    /// A message when the kernel refuses it.
    pub(crate) fn install(&self) -> Result<(), String> {
        imp::install(&self.0)
    }
}

#[cfg(all(target_os = "linux", any(target_arch = "x86_64", target_arch = "aarch64", target_arch = "riscv64")))]
mod imp {
    use super::SocketRules;
    use seccompiler::{
        BpfProgram, SeccompAction, SeccompCmpArgLen, SeccompCmpOp, SeccompCondition, SeccompFilter, SeccompRule,
        TargetArch,
    };
    use std::collections::BTreeMap;
    use std::sync::OnceLock;

    pub(super) type Program = BpfProgram;

    const TIOCSTI: u64 = 0x5412;
    const TIOCLINUX: u64 = 0x541C;
    const AF_UNIX: u64 = 1;
    const EPERM: u32 = 1;

    #[cfg(target_arch = "x86_64")]
    const ARCH: TargetArch = TargetArch::x86_64;
    #[cfg(target_arch = "aarch64")]
    const ARCH: TargetArch = TargetArch::aarch64;
    #[cfg(target_arch = "riscv64")]
    const ARCH: TargetArch = TargetArch::riscv64;

    /// System call numbers (generic table on aarch64 and riscv64, its own on x86-64).
    #[cfg(target_arch = "x86_64")]
    mod nr {
        pub const IOCTL: i64 = 16;
        pub const SOCKET: i64 = 41;
        pub const IO_URING: [i64; 3] = [425, 426, 427];
        /// x32 system calls carry this bit under the x86-64 audit arch.
        pub const X32: i64 = 0x4000_0000;
        /// x32's own ioctl number (it does not share 16).
        pub const X32_IOCTL: i64 = 514;
    }
    #[cfg(not(target_arch = "x86_64"))]
    mod nr {
        pub const IOCTL: i64 = 29;
        pub const SOCKET: i64 = 198;
        pub const IO_URING: [i64; 3] = [425, 426, 427];
    }

    fn cond(arg: u8, op: SeccompCmpOp, value: u64) -> Result<SeccompCondition, String> {
        // Dword: the kernel reads `cmd` and `domain` as 32-bit ints, so the upper half a caller sets is
        // ignored by the kernel and must be ignored here too (else 0xffffffff00005412 would slip by).
        SeccompCondition::new(arg, SeccompCmpArgLen::Dword, op, value).map_err(|e| e.to_string())
    }

    fn rule(conditions: Vec<SeccompCondition>) -> Result<SeccompRule, String> {
        SeccompRule::new(conditions).map_err(|e| e.to_string())
    }

    pub(super) fn build(rules: SocketRules) -> Result<Program, String> {
        let fail = |e: String| format!("could not build the seccomp filter: {e}");
        let mut map: BTreeMap<i64, Vec<SeccompRule>> = BTreeMap::new();
        let ioctl = vec![
            rule(vec![cond(1, SeccompCmpOp::Eq, TIOCSTI).map_err(fail)?]).map_err(fail)?,
            rule(vec![cond(1, SeccompCmpOp::Eq, TIOCLINUX).map_err(fail)?]).map_err(fail)?,
        ];
        map.insert(nr::IOCTL, ioctl.clone());
        let socket: Option<Vec<SeccompRule>> = match (rules.deny_unix, rules.deny_network) {
            (false, false) => None,
            // Every family: an empty rule list matches the call whatever its arguments.
            (true, true) => Some(Vec::new()),
            (true, false) => Some(vec![rule(vec![cond(0, SeccompCmpOp::Eq, AF_UNIX).map_err(fail)?]).map_err(fail)?]),
            (false, true) => Some(vec![rule(vec![cond(0, SeccompCmpOp::Ne, AF_UNIX).map_err(fail)?]).map_err(fail)?]),
        };
        if let Some(socket) = &socket {
            map.insert(nr::SOCKET, socket.clone());
            for call in nr::IO_URING {
                map.insert(call, Vec::new());
            }
        }
        #[cfg(target_arch = "x86_64")]
        {
            // x32 (where a kernel enables it) reaches the same kernel code under other numbers.
            map.insert(nr::X32 | nr::X32_IOCTL, ioctl.clone());
            map.insert(nr::X32 | nr::IOCTL, ioctl);
            if let Some(socket) = socket {
                map.insert(nr::X32 | nr::SOCKET, socket);
                for call in nr::IO_URING {
                    map.insert(nr::X32 | call, Vec::new());
                }
            }
        }
        let filter = SeccompFilter::new(map, SeccompAction::Allow, SeccompAction::Errno(EPERM), ARCH)
            .map_err(|e| fail(e.to_string()))?;
        BpfProgram::try_from(filter).map_err(|e| fail(e.to_string()))
    }

    pub(super) fn install(program: &Program) -> Result<(), String> {
        seccompiler::apply_filter(program).map_err(|e| format!("could not install the seccomp filter: {e}"))
    }

    pub(super) fn support() -> bool {
        static OK: OnceLock<bool> = OnceLock::new();
        *OK.get_or_init(|| {
            let Ok(program) = build(SocketRules { deny_unix: false, deny_network: false }) else { return false };
            // Filtering a throw-away thread is the only safe way to ask; the thread then ends.
            std::thread::spawn(move || install(&program).is_ok()).join().unwrap_or(false)
        })
    }
}

#[cfg(not(all(target_os = "linux", any(target_arch = "x86_64", target_arch = "aarch64", target_arch = "riscv64"))))]
mod imp {
    use super::SocketRules;

    pub(super) struct Program;

    pub(super) fn build(_: SocketRules) -> Result<Program, String> {
        Ok(Program)
    }

    pub(super) fn install(_: &Program) -> Result<(), String> {
        Err("seccomp is not available on this system".to_string())
    }

    pub(super) fn support() -> bool {
        false
    }
}
