//! The side doors of the bash sandbox, end to end through `builtin::register`:
//! terminal injection, the controlling terminal, Unix sockets (real listeners started here), the network
//! allow-list (MPTCP, UDP), metadata writes, and a sandbox the kernel cannot provide.
//!
//! Tests that need Landlock fail under CI=true where the kernel lacks it, and skip with a line saying so
//! elsewhere (tests/common/require.rs).
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::fs;
use std::os::unix::net::{UnixDatagram, UnixListener};
use std::path::PathBuf;
use std::process::Command;
use tooloop::builtin::{self, BuiltinOptions, SandboxMode};
use tooloop::tools::ToolRegistry;

#[path = "common/builtin.rs"]
mod builtin_fixture;
#[path = "common/child.rs"]
mod child;
#[path = "common/require.rs"]
mod require;

use builtin_fixture::{Fixture, bash, registry_with};
use require::landlock;

/// A Python one-liner run by bash (python3 is on every machine the suite runs on).
fn py(code: &str) -> String {
    format!("python3 -c '{code}' 2>&1")
}

const MODES: [SandboxMode; 3] = [SandboxMode::Off, SandboxMode::WorkspaceWrite, SandboxMode::ReadOnly];

// ---- item 2: the terminal ----------------------------------------------------------------------------

#[test]
fn tiocsti_and_tioclinux_fail_in_every_mode() {
    if !landlock() {
        return;
    }
    let fx = Fixture::new("side-doors");
    // A pseudo-terminal of the command's own (its master: the sandbox lets anyone open /dev/ptmx): as
    // root, TIOCSTI works on any terminal one can open, so only the seccomp filter stands between a
    // command and the user's terminal. The pty test in tests/python/test_sandbox_tty.py uses the real one.
    let code = "import os,fcntl,termios,errno\n\
                s=os.open(\"/dev/ptmx\", os.O_RDWR|os.O_NOCTTY)\n\
                for req in (termios.TIOCSTI, 0x541C):\n  \
                  try:\n    fcntl.ioctl(s, req, b\"x\"); print(\"allowed\")\n  \
                  except OSError as e: print(errno.errorcode[e.errno])\n\
                try:\n  fcntl.ioctl(s, 0xffffffff00005412, b\"x\"); print(\"allowed\")\n\
                except (OSError, OverflowError) as e: print(type(e).__name__)";
    for mode in MODES {
        let out = bash(&fx.registry(mode, true), &py(code));
        let lines: Vec<&str> = out.lines().collect();
        assert_eq!(lines.first(), Some(&"EPERM"), "{mode}: TIOCSTI: {out}");
        assert_eq!(lines.get(1), Some(&"EPERM"), "{mode}: TIOCLINUX: {out}");
        assert!(!out.contains("allowed"), "{mode}: {out}");
    }
}

#[test]
fn commands_run_in_a_session_of_their_own_without_a_terminal() {
    let fx = Fixture::new("side-doors");
    // Our own session as /proc shows it: 0 when the session leader lives outside our PID namespace
    // (a container), which getsid() cannot express.
    let own_stat = std::fs::read_to_string("/proc/self/stat").unwrap();
    let after_name = &own_stat[own_stat.rfind(')').unwrap() + 2..];
    let own_sid: i32 = after_name.split(' ').nth(3).unwrap().parse().unwrap();
    for mode in MODES {
        if mode != SandboxMode::Off && !landlock() {
            continue;
        }
        // Field 6 of stat is the session, 7 the controlling terminal (0: none). /proc is the host's, so
        // the session id is comparable with ours even inside a PID namespace.
        let out = bash(&fx.registry(mode, true), "cut -d' ' -f6,7 /proc/self/stat; test -t 0 || echo stdin-not-a-tty");
        let mut lines = out.lines();
        let fields: Vec<i32> = lines.next().unwrap().split(' ').map(|f| f.parse().unwrap()).collect();
        assert_ne!(fields[0], own_sid, "{mode}: the command shares the host's session: {out}");
        assert!(fields[0] > 0, "{mode}: a new session has an id of its own: {out}");
        assert_eq!(fields[1], 0, "{mode}: the command has a controlling terminal: {out}");
        assert_eq!(lines.next(), Some("stdin-not-a-tty"), "{mode}: {out}");
        let out = bash(&fx.registry(mode, true), "exec 3<>/dev/tty && echo opened-tty");
        assert!(!out.contains("opened-tty"), "{mode}: {out}");
    }
}

// ---- item 3: Unix sockets ----------------------------------------------------------------------------

/// A stream service on a pathname socket outside the workspace and one on an abstract name; whether
/// either saw a connection.
struct Services {
    path: PathBuf,
    abstract_name: String,
    pathname: UnixListener,
    abstract_listener: UnixListener,
    datagram: UnixDatagram,
    datagram_path: PathBuf,
}

impl Services {
    fn start(fx: &Fixture) -> Services {
        use std::os::linux::net::SocketAddrExt;
        let path = fx.outside().join("service.sock");
        let pathname = UnixListener::bind(&path).unwrap();
        pathname.set_nonblocking(true).unwrap();
        let abstract_name = format!("tooloop-test-{}-{}", std::process::id(), fx.base.display().to_string().len());
        let addr = std::os::unix::net::SocketAddr::from_abstract_name(abstract_name.as_bytes()).unwrap();
        let abstract_listener = UnixListener::bind_addr(&addr).unwrap();
        abstract_listener.set_nonblocking(true).unwrap();
        let datagram_path = fx.outside().join("log.sock");
        let datagram = UnixDatagram::bind(&datagram_path).unwrap();
        datagram.set_nonblocking(true).unwrap();
        Services { path, abstract_name, pathname, abstract_listener, datagram, datagram_path }
    }

    fn connections(&self) -> usize {
        let mut n = 0;
        while self.pathname.accept().is_ok() {
            n += 1;
        }
        while self.abstract_listener.accept().is_ok() {
            n += 1;
        }
        let mut buf = [0u8; 64];
        while self.datagram.recv(&mut buf).is_ok() {
            n += 1;
        }
        n
    }

    fn client(&self) -> String {
        let code = format!(
            "import socket\n\
             for addr in (\"{}\", \"\\0{}\"):\n  \
               try:\n    s=socket.socket(socket.AF_UNIX); s.connect(addr); print(\"connected\")\n  \
               except OSError as e: print(\"refused\", e)\n\
             try:\n  d=socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM); d.sendto(b\"x\", \"{}\"); print(\"sent\")\n\
             except OSError as e: print(\"refused\", e)",
            self.path.display(),
            self.abstract_name,
            self.datagram_path.display()
        );
        py(&code)
    }
}

#[test]
fn unix_sockets_outside_the_workspace_are_out_of_reach_when_sandboxed() {
    if !landlock() {
        return;
    }
    let fx = Fixture::new("side-doors");
    let services = Services::start(&fx);
    // Unconfined, the client reaches all three: the test can tell a refusal from a broken client.
    let out = bash(&fx.registry(SandboxMode::Off, true), &services.client());
    assert_eq!(out.matches("connected").count(), 2, "{out}");
    assert!(out.contains("sent"), "{out}");
    assert_eq!(services.connections(), 3);
    for mode in [SandboxMode::WorkspaceWrite, SandboxMode::ReadOnly] {
        for network in [true, false] {
            let out = bash(&fx.registry(mode, network), &services.client());
            assert_eq!(out.matches("refused").count(), 3, "{mode} network={network}: {out}");
            assert_eq!(services.connections(), 0, "{mode} network={network}: a service was reached: {out}");
        }
    }
    // socketpair (pipes between processes, asyncio) keeps working.
    let out = bash(
        &fx.registry(SandboxMode::ReadOnly, false),
        &py("import socket\na,b=socket.socketpair(); a.send(b\"ok\"); print(b.recv(2).decode())"),
    );
    assert_eq!(out, "ok");
}

/// The child's part of `socket_variables_are_not_inherited_under_a_sandbox`, in a process whose
/// environment holds the socket variables: what bash sees in each mode, and with TMUX passed through.
fn print_the_environment_bash_sees() {
    let fx = Fixture::new("side-doors");
    for mode in [SandboxMode::WorkspaceWrite, SandboxMode::Off] {
        println!("CHILD-ENV-{mode}-BEGIN\n{}\nCHILD-ENV-END", bash(&fx.registry(mode, true), "env | sort"));
    }
    let opts = BuiltinOptions { env_passthrough: vec!["TMUX".to_string()], ..fx.options(SandboxMode::ReadOnly, true) };
    println!("CHILD-ENV-kept-BEGIN\n{}\nCHILD-ENV-END", bash(&registry_with(&opts), "env | sort"));
}

#[test]
fn socket_variables_are_not_inherited_under_a_sandbox() {
    if child::is_child() {
        return print_the_environment_bash_sees();
    }
    if !landlock() {
        return;
    }
    let out = child::command()
        .env("TMUX", "/tmp/tmux-1000/default,4242,0")
        .env("SSH_AUTH_SOCK", "/tmp/ssh-XXXX/agent.42")
        .env("DBUS_SESSION_BUS_ADDRESS", "unix:path=/run/user/1000/bus")
        .env("DOCKER_HOST", "unix:///var/run/docker.sock")
        .env("XDG_RUNTIME_DIR", "/run/user/1000")
        .env("MY_APP_SOCKET", "/srv/app.sock")
        .env("EDITOR_PIPE", "/run/user/1000/editor")
        .env("KEEP_ME", "plain-value")
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{stdout}\n{}", String::from_utf8_lossy(&out.stderr));
    let section = |mode: &str| {
        stdout
            .split(&format!("CHILD-ENV-{mode}-BEGIN"))
            .nth(1)
            .unwrap()
            .split("CHILD-ENV-END")
            .next()
            .unwrap()
            .to_string()
    };
    let names =
        ["TMUX", "SSH_AUTH_SOCK", "DBUS_SESSION_BUS_ADDRESS", "DOCKER_HOST", "XDG_RUNTIME_DIR", "MY_APP_SOCKET"];
    let sandboxed = section("workspace-write");
    for gone in names.iter().chain(&["EDITOR_PIPE"]) {
        assert!(!sandboxed.contains(&format!("\n{gone}=")), "{gone} was inherited:\n{sandboxed}");
    }
    assert!(sandboxed.contains("KEEP_ME=plain-value"), "{sandboxed}");
    // Off is unconfined: the user's sockets and their variables stay (nothing to protect there).
    let off = section("off");
    assert!(off.contains("TMUX=/tmp/tmux-1000/default,4242,0"), "{off}");
    let kept = section("kept");
    assert!(kept.contains("TMUX=/tmp/tmux-1000/default,4242,0"), "passthrough ignored:\n{kept}");
    assert!(!kept.contains("SSH_AUTH_SOCK="), "{kept}");
}

// ---- item 4: the network allow-list ------------------------------------------------------------------

#[test]
fn network_off_refuses_every_family_but_unix_mptcp_and_udp_included() {
    if !landlock() {
        return;
    }
    let fx = Fixture::new("side-doors");
    let tcp = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    tcp.set_nonblocking(true).unwrap();
    let port = tcp.local_addr().unwrap().port();
    let udp = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
    udp.set_nonblocking(true).unwrap();
    let udp_port = udp.local_addr().unwrap().port();
    let code = format!(
        "import socket\n\
         def attempt(name, make, go):\n  \
           try:\n    s=make(); go(s); print(name, \"open\")\n  \
           except OSError as e: print(name, \"refused\", e.errno)\n\
         attempt(\"mptcp\", lambda: socket.socket(socket.AF_INET, socket.SOCK_STREAM, 262), lambda s: s.connect((\"127.0.0.1\", {port})))\n\
         attempt(\"udp\", lambda: socket.socket(socket.AF_INET, socket.SOCK_DGRAM), lambda s: s.sendto(b\"x\", (\"127.0.0.1\", {udp_port})))\n\
         attempt(\"udp6\", lambda: socket.socket(socket.AF_INET6, socket.SOCK_DGRAM), lambda s: None)\n\
         attempt(\"netlink\", lambda: socket.socket(socket.AF_NETLINK, socket.SOCK_RAW, 0), lambda s: None)\n\
         attempt(\"packet\", lambda: socket.socket(17, socket.SOCK_DGRAM, 0), lambda s: None)"
    );
    let drained = |udp: &std::net::UdpSocket| {
        let mut n = 0;
        while tcp.accept().is_ok() {
            n += 1;
        }
        let mut buf = [0u8; 16];
        while udp.recv(&mut buf).is_ok() {
            n += 1;
        }
        n
    };
    for mode in MODES {
        let on = bash(&fx.registry(mode, true), &py(&code));
        assert!(on.contains("mptcp open") && on.contains("udp open"), "{mode} network on: {on}");
        assert_eq!(drained(&udp), 2, "{mode}: the control run reached neither service: {on}");
        let off = bash(&fx.registry(mode, false), &py(&code));
        assert_eq!(off.matches("refused 1").count(), 5, "{mode} network off: {off}");
        assert_eq!(drained(&udp), 0, "{mode}: a service was reached with the network off: {off}");
    }
    // Unconfined files, network off: Unix sockets stay usable.
    let dir = fx.ws.join("srv.sock");
    let listener = UnixListener::bind(&dir).unwrap();
    let out = bash(
        &fx.registry(SandboxMode::Off, false),
        &py(&format!(
            "import socket\ns=socket.socket(socket.AF_UNIX); s.connect(\"{}\"); print(\"ok\")",
            dir.display()
        )),
    );
    assert_eq!(out, "ok");
    drop(listener);
}

// ---- item 5: metadata writes ------------------------------------------------------------------------

#[test]
fn metadata_writes_outside_the_writable_folders_fail() {
    if !landlock() {
        return;
    }
    if !rustix::process::geteuid().is_root() {
        require::skip("the read-only view needs root (an unprivileged user gets Landlock's content rules only)");
        return;
    }
    let fx = Fixture::new("side-doors");
    let outside = fx.outside().join("victim.txt");
    let inside = fx.ws.join("mine.txt");
    let script = |target: &std::path::Path| {
        let t = target.display();
        format!(
            "chmod 0777 {t} && echo chmod-ok; chown 1:1 {t} && echo chown-ok; touch -d 2001-01-01 {t} && echo touch-ok; \
             python3 -c 'import os; os.setxattr(\"{t}\", \"user.x\", b\"1\"); print(\"xattr-ok\")' 2>/dev/null; \
             echo tmp > $TMPDIR/t && chmod 0700 $TMPDIR/t && echo tmp-ok"
        )
    };
    use std::os::unix::fs::{MetadataExt, PermissionsExt};
    for mode in [SandboxMode::WorkspaceWrite, SandboxMode::ReadOnly] {
        fs::write(&outside, "x").unwrap();
        fs::set_permissions(&outside, fs::Permissions::from_mode(0o600)).unwrap();
        fs::write(&inside, "x").unwrap();
        fs::set_permissions(&inside, fs::Permissions::from_mode(0o600)).unwrap();
        let before = fs::metadata(&outside).unwrap();
        let out = bash(&fx.registry(mode, true), &script(&outside));
        assert!(!out.contains("chmod-ok") && !out.contains("chown-ok") && !out.contains("touch-ok"), "{mode}: {out}");
        assert!(!out.contains("xattr-ok"), "{mode}: {out}");
        assert!(out.contains("tmp-ok"), "{mode}: $TMPDIR stays writable: {out}");
        let after = fs::metadata(&outside).unwrap();
        assert_eq!(after.mode() & 0o7777, 0o600, "{mode}");
        assert_eq!((after.uid(), after.mtime()), (before.uid(), before.mtime()), "{mode}");
        let out = bash(&fx.registry(mode, true), &script(&inside));
        if mode == SandboxMode::WorkspaceWrite {
            assert!(out.contains("chmod-ok") && out.contains("touch-ok"), "{mode}: the workspace is writable: {out}");
        } else {
            assert!(!out.contains("chmod-ok") && !out.contains("touch-ok"), "{mode}: {out}");
            assert_eq!(fs::metadata(&inside).unwrap().mode() & 0o7777, 0o600);
        }
    }
    // The host's own mounts are untouched: it can still change the file.
    fs::set_permissions(&outside, fs::Permissions::from_mode(0o644)).unwrap();
}

/// Capability bits a sandboxed command must not hold: with them root changes the host's name or clock,
/// loads kernel code, reboots, reconfigures the network, writes a disk through a device node it makes, or
/// traces and remounts at will.
const ROOT_ONLY_CAPS: [(u32, &str); 9] = [
    (12, "net_admin"),
    (16, "sys_module"),
    (17, "sys_rawio"),
    (19, "sys_ptrace"),
    (21, "sys_admin"),
    (22, "sys_boot"),
    (25, "sys_time"),
    (27, "mknod"),
    (31, "setfcap"),
];

#[test]
fn a_root_host_gives_sandboxed_commands_no_dangerous_capabilities_and_no_device_nodes() {
    if !landlock() {
        return;
    }
    if !rustix::process::geteuid().is_root() {
        require::skip("only a root host has capabilities to drop");
        return;
    }
    let fx = Fixture::new("side-doors");
    let script = "grep -E '^Cap(Eff|Prm|Bnd|Inh|Amb):' /proc/self/status; \
                  mknod devnull c 1 3 && echo MKNOD-OK; mkfifo fifo && echo FIFO-OK";
    for mode in [SandboxMode::WorkspaceWrite, SandboxMode::ReadOnly] {
        let out = bash(&fx.registry(mode, true), script);
        let mut sets = 0;
        for line in out.lines().filter(|l| l.starts_with("Cap")) {
            let (name, hex) = line.split_once(':').unwrap();
            let bits = u64::from_str_radix(hex.trim(), 16).unwrap();
            for (bit, cap) in ROOT_ONLY_CAPS {
                assert_eq!(bits & (1 << bit), 0, "{mode}: {name} holds cap_{cap}: {out}");
            }
            sets += 1;
        }
        assert_eq!(sets, 5, "{mode}: {out}");
        // Ordinary root work still goes on: files owned by another user can be written (dac_override).
        assert!(!out.contains("MKNOD-OK"), "{mode}: a device node was made: {out}");
        if mode == SandboxMode::WorkspaceWrite {
            assert!(out.contains("FIFO-OK"), "{mode}: a FIFO in the workspace is fine: {out}");
        }
        let _ = fs::remove_file(fx.ws.join("fifo"));
    }
    // Another user's file in the workspace stays writable by root (dac_override is kept).
    let theirs = fx.ws.join("theirs.txt");
    fs::write(&theirs, "x").unwrap();
    std::os::unix::fs::chown(&theirs, Some(65534), Some(65534)).unwrap();
    use std::os::unix::fs::PermissionsExt;
    fs::set_permissions(&theirs, fs::Permissions::from_mode(0o600)).unwrap();
    let out = bash(&fx.registry(SandboxMode::WorkspaceWrite, true), "echo y >> theirs.txt && echo WRITE-OK");
    assert_eq!(out, "WRITE-OK");
    // Off is unconfined on purpose: root keeps what it has.
    let out = bash(&fx.registry(SandboxMode::Off, true), "grep '^CapEff:' /proc/self/status");
    assert!(!out.ends_with("0000000000000000"), "{out}");
}

/// The child's part of `the_hosts_environment_and_memory_are_out_of_reach_of_a_sandboxed_command`: the
/// host (this process) holds `TOOLOOP_PROBE_MARK` in its environment, as it holds API keys.
fn read_the_hosts_proc_files() {
    let fx = Fixture::new("side-doors");
    let host = std::process::id();
    let script = format!(
        "for f in environ maps auxv mem; do python3 -c 'import sys\ntry:\n  d=open(sys.argv[1],\"rb\").read(4096); \
         print(sys.argv[2], \"read\", d.count(b\"probe-mark-7\"))\nexcept OSError as e: print(sys.argv[2], \"refused\", e.errno)' \
         /proc/{host}/$f $f; done"
    );
    for mode in [SandboxMode::WorkspaceWrite, SandboxMode::ReadOnly] {
        let out = bash(&fx.registry(mode, true), &script);
        for file in ["environ", "maps", "auxv", "mem"] {
            assert!(out.contains(&format!("{file} refused")), "{mode}: /proc/<host>/{file} is readable: {out}");
        }
        assert!(!out.contains("read"), "{mode}: {out}");
    }
    println!("PROC-CHILD-OK");
}

#[test]
fn the_hosts_environment_and_memory_are_out_of_reach_of_a_sandboxed_command() {
    // The host's /proc files (its environment holds the API keys bash never inherits) through the host's
    // /proc, which the command still sees: as the host's user, and as root (who has CAP_SYS_PTRACE).
    if child::is_child() {
        return read_the_hosts_proc_files();
    }
    if !landlock() {
        return;
    }
    let mut runs = vec![child::command()];
    // The nobody child's fixture lives under a folder it owns.
    let fx = Fixture::new("side-doors");
    if rustix::process::geteuid().is_root() {
        std::os::unix::fs::chown(&fx.base, Some(65534), Some(65534)).unwrap();
        let mut nobody = child::wrapped(&["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups"]);
        nobody.env("TMPDIR", &fx.base);
        runs.push(nobody);
    }
    for mut run in runs {
        let out = run.env("TOOLOOP_PROBE_MARK", "probe-mark-7").output().unwrap();
        let stdout = String::from_utf8_lossy(&out.stdout);
        assert!(
            out.status.success() && stdout.contains("PROC-CHILD-OK"),
            "{stdout}\n{}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
}

/// The child's part of `helper_programs_are_never_taken_from_a_relative_path_entry`: its PATH starts with
/// `bin`, a relative entry that resolves against the workspace, where a command planted its own helpers.
fn run_with_planted_helpers() {
    let fx = Fixture::new("side-doors");
    let marker = fx.outside().join("planted-ran");
    for name in ["unshare", "setsid", "setpriv"] {
        fx.write(
            &format!("bin/{name}"),
            format!("#!/bin/sh\necho {name} >> {}\nexec /usr/bin/{name} \"$@\"\n", marker.display()),
        );
        use std::os::unix::fs::PermissionsExt;
        fs::set_permissions(fx.ws.join("bin").join(name), fs::Permissions::from_mode(0o755)).unwrap();
    }
    // bash, in every mode (off: nothing confines the planted helper at all).
    for mode in MODES {
        assert_eq!(bash(&fx.registry(mode, true), "echo fine"), "fine", "{mode}");
    }
    // An MCP server whose folder is the workspace: its helpers run unconfined, as the user.
    let config: tooloop::mcp::McpServerConfig =
        serde_json::from_value(serde_json::json!({"command": "true", "cwd": fx.ws.display().to_string()})).unwrap();
    let servers = tooloop::mcp::McpServers::start(
        &std::collections::BTreeMap::from([("x".to_string(), config)]),
        &ToolRegistry::new(),
    );
    drop(servers);
    assert!(!marker.exists(), "a planted helper ran: {}", fs::read_to_string(&marker).unwrap_or_default());
    println!("PATH-CHILD-OK");
}

#[test]
fn helper_programs_are_never_taken_from_a_relative_path_entry() {
    if child::is_child() {
        return run_with_planted_helpers();
    }
    if !landlock() {
        return;
    }
    let path = format!("bin:{}", std::env::var("PATH").unwrap_or_default());
    let out = child::command().env("PATH", path).output().unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success() && stdout.contains("PATH-CHILD-OK"),
        "{stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

// ---- item 6: a sandbox the kernel cannot provide -----------------------------------------------------

#[test]
fn a_sandbox_that_is_enforced_is_described_and_one_that_is_not_is_refused() {
    if child::is_child() {
        return refuse_a_sandbox_without_landlock();
    }
    // Where this kernel has both, every mode registers and the prompt says what is confined.
    if builtin::sandbox_support().is_some() {
        assert!(builtin::sandbox_check(SandboxMode::ReadOnly, false).is_ok());
        assert!(builtin::sandbox_prompt(SandboxMode::ReadOnly, true).contains("read-only"));
    }
    // In a child process whose kernel "has no Landlock" (a seccomp filter makes landlock_create_ruleset
    // fail with ENOSYS), an explicit mode is refused by register and the prompt claims nothing.
    let out = without_landlock(child::command());
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{stdout}\n{}", String::from_utf8_lossy(&out.stderr));
    assert!(stdout.contains("NO-LANDLOCK-CHILD-RAN"), "{stdout}");
}

/// Runs `command` under a seccomp filter that makes Landlock look absent.
fn without_landlock(mut command: Command) -> std::process::Output {
    use seccompiler::{BpfProgram, SeccompAction, SeccompFilter, TargetArch};
    let arch = match std::env::consts::ARCH {
        "x86_64" => TargetArch::x86_64,
        "aarch64" => TargetArch::aarch64,
        _ => TargetArch::riscv64,
    };
    let mut rules = std::collections::BTreeMap::new();
    rules.insert(444, Vec::new()); // landlock_create_ruleset, on every architecture
    let filter = SeccompFilter::new(rules, SeccompAction::Allow, SeccompAction::Errno(38), arch).unwrap();
    let program = BpfProgram::try_from(filter).unwrap();
    // The filter holds for the thread that applies it and what it starts: one spawned for this command.
    std::thread::spawn(move || {
        seccompiler::apply_filter(&program).unwrap();
        command.output().unwrap()
    })
    .join()
    .unwrap()
}

/// The child's part of `a_sandbox_that_is_enforced_is_described_and_one_that_is_not_is_refused`, where
/// the kernel "has no Landlock".
fn refuse_a_sandbox_without_landlock() {
    assert_eq!(builtin::sandbox_support(), None);
    let fx = Fixture::new("side-doors");
    for mode in [SandboxMode::WorkspaceWrite, SandboxMode::ReadOnly] {
        let opts = BuiltinOptions { workspace: fx.ws.clone(), sandbox: mode, ..BuiltinOptions::default() };
        let err = builtin::register(&ToolRegistry::new(), &opts).unwrap_err().to_string();
        assert!(err.contains("cannot be enforced") && err.contains("\"off\""), "{mode}: {err}");
        assert_eq!(builtin::sandbox_prompt(mode, true), "", "{mode}: the prompt claims a sandbox");
        assert_eq!(builtin::sandbox_prompt(mode, false), "", "{mode}: the prompt claims a sandbox");
        // The file tools alone need no kernel sandbox.
        let files = BuiltinOptions { names: vec!["read_file".to_string()], ..opts };
        builtin::register(&ToolRegistry::new(), &files).unwrap();
    }
    // Off is what the user chose: it registers, and the prompt says nothing.
    let registry = fx.registry(SandboxMode::Off, true);
    assert_eq!(bash(&registry, "echo fine"), "fine");
    // Network off is still enforced by seccomp alone.
    let registry = fx.registry(SandboxMode::Off, false);
    let out = bash(
        &registry,
        &py("import socket\ntry:\n  socket.socket(); print(\"open\")\nexcept OSError as e: print(e.errno)"),
    );
    assert_eq!(out, "1");
    // The agent's door (the JSON options Python and C pass): refused as a config error, no agent built.
    let provider: std::sync::Arc<dyn tooloop::Provider> =
        std::sync::Arc::new(tooloop::provider::host::FnProvider::new(|_, _| {
            Err(tooloop::Error::Config("never asked".to_string()))
        }));
    for sandbox in ["\"read-only\"", "\"workspace-write\"", "null"] {
        let json = format!(r#"{{"builtin_tools": true, "workspace": {:?}, "sandbox": {sandbox}}}"#, fx.ws);
        let options = tooloop::AgentOptions::from_json(&json).unwrap();
        let err = options.build_with(provider.clone()).err().map(|e| e.to_string()).unwrap_or_default();
        assert!(err.contains("cannot be enforced"), "{sandbox}: {err}");
    }
    let json = format!(r#"{{"builtin_tools": true, "workspace": {:?}, "sandbox": "off"}}"#, fx.ws);
    let agent = tooloop::AgentOptions::from_json(&json).unwrap().build_with(provider).unwrap();
    assert!(agent.tools().get("bash").is_some());
    println!("NO-LANDLOCK-CHILD-RAN");
}
