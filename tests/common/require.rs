//! What a test needs of the machine (Landlock, a PID namespace, a program such as flock or setpriv, the
//! MCP SDK). Where it is missing the test skips, loudly, on a developer's machine, and fails under
//! `CI=true`: CI is meant to run the whole suite, and a test that passes without running would hide a
//! broken sandbox behind a green run. Included with `#[path = "common/require.rs"] mod require;`.
#![allow(dead_code)]

use std::io::Write;

/// Whether this run is CI's (`CI=true`, as CI services set it).
pub fn in_ci() -> bool {
    std::env::var("CI").is_ok_and(|v| v == "true")
}

/// `true` when `available`. Otherwise: under `CI=true` a panic naming `what`; elsewhere a `SKIPPED` line
/// naming the test and `what`, and `false`, on which the test returns.
///
/// ```ignore
/// if !require::require(flock_installed, "flock(1) from util-linux") {
///     return;
/// }
/// ```
pub fn require(available: bool, what: &str) -> bool {
    if available {
        return true;
    }
    if in_ci() {
        panic!("{}: this test needs {what}, which this machine lacks (CI=true: a missing capability fails)", test());
    }
    skip(&format!("needs {what}"));
    false
}

/// Landlock: the sandboxed modes of `bash` need it.
pub fn landlock() -> bool {
    require(
        tooloop::builtin::sandbox_support().is_some(),
        "Landlock (builtin::sandbox_support() is None on this kernel)",
    )
}

/// A PID namespace for each bash call (`unshare --pid`; a user namespace too when not root), so a process
/// that left the process group is still found and killed.
pub fn process_containment() -> bool {
    require(tooloop::builtin::process_containment(), "a PID namespace (`unshare --pid` fails here)")
}

/// Says on the terminal, past libtest's output capture, that the current test did not run its checks and
/// why. For a reason that holds on any machine, CI included (say, a root-only path when not root); a
/// missing capability goes through [`require`].
pub fn skip(why: &str) {
    // Written to the stderr handle itself: libtest captures print!/eprint! of a passing test, not this.
    let _ = writeln!(std::io::stderr(), "SKIPPED {}: {why}", test());
}

/// The current test's name: libtest names the thread that runs it after it.
fn test() -> String {
    std::thread::current().name().unwrap_or("this test").to_string()
}

/// The tests' Python (`$TOOLOOP_TEST_PYTHON`, default `python3`) when it can `import {modules}`; otherwise
/// [`require`]'s verdict on `what`, and `None` where the test skips.
pub fn python_importing(modules: &str, what: &str) -> Option<String> {
    let py = std::env::var("TOOLOOP_TEST_PYTHON").unwrap_or_else(|_| "python3".into());
    let ok = std::process::Command::new(&py)
        .args(["-c", &format!("import {modules}")])
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .status()
        .is_ok_and(|s| s.success());
    require(ok, &format!("{what} (`{py}` cannot import {modules})")).then_some(py)
}
