//! Running the current test again in a child process, for what only a process of its own can have: other
//! environment variables, another uid, a resource limit, a seccomp filter. The child's part is a plain
//! function the test calls when it finds itself in the child, so a helper process is never a test of its
//! own (no `#[test]` that passes by doing nothing, no `#[ignore]`d entry in the counts).
//! Included with `#[path = "common/child.rs"] mod child;`.
//!
//! ```ignore
//! #[test]
//! fn secrets_are_not_inherited() {
//!     if child::is_child() {
//!         return print_the_environment();
//!     }
//!     let out = child::command().env("OPENAI_API_KEY", "sk-…").output().unwrap();
//!     ...
//! }
//! ```
#![allow(dead_code)]

use std::process::Command;

/// Set in the child to the name of the test that started it.
const CHILD_OF: &str = "TOOLOOP_TEST_CHILD_OF";

/// Whether this process is the child the current test started (and should do the child's part).
pub fn is_child() -> bool {
    std::env::var(CHILD_OF).is_ok_and(|name| name == test())
}

/// The test binary running exactly the current test, in child mode, its output not captured (so what the
/// child prints reaches the parent's pipe).
pub fn command() -> Command {
    wrapped(&[])
}

/// [`command`] behind a wrapper that execs the test binary given as its next argument: `setpriv …`, or
/// `bash -c '…; exec "$0" "$@"'` for a resource limit.
pub fn wrapped(wrapper: &[&str]) -> Command {
    let exe = std::env::current_exe().expect("the test binary's path");
    let mut cmd = match wrapper.split_first() {
        Some((program, args)) => {
            let mut cmd = Command::new(program);
            cmd.args(args).arg(exe);
            cmd
        }
        None => Command::new(exe),
    };
    let name = test();
    cmd.args(["--exact", &name, "--nocapture", "--test-threads=1"]).env(CHILD_OF, &name);
    cmd
}

/// The current test's name: libtest names the thread that runs it after it.
fn test() -> String {
    match std::thread::current().name() {
        Some(name) if name != "main" => name.to_string(),
        _ => panic!("child: not on a libtest test thread, so the current test has no name"),
    }
}
