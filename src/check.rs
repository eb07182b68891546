//! A check to finish against: the command (the `check` option) that says a run's task is done. The loop
//! runs it when the model would end its turn with an answer, feeds its failure back, and ends the run `ok`
//! only once it passes; this module holds what does not need the loop: which workspace files the command
//! runs or names (held read-only for the run so the check cannot be gamed), running it through the built-in
//! `bash`'s runner and sandbox, and the texts the model and the host read.
//!
//! Must never: hold the whole workspace read-only (`.`, the root itself, a path outside it are never check
//! files), or return a check's whole output (only its failing tail: [`TAIL_LINES`], [`TAIL_BYTES`]).

use std::path::{Component, Path, PathBuf};
use std::time::Duration;

use serde_json::json;

use crate::builtin::{BashOptions, Workspace, run_bash};
use crate::cancel::CancelToken;

/// Seconds a check may run when `check_timeout` is not given.
pub const DEFAULT_CHECK_TIMEOUT_SECS: u64 = crate::defaults::CHECK_TIMEOUT_SECS;
/// Lines of a failing check's output kept (its tail: where test runners print the failure).
pub const TAIL_LINES: usize = 60;
/// Bytes of a failing check's output kept, at most.
pub const TAIL_BYTES: usize = 4096;

/// The `check` option: a shell command run in the workspace, and its time limit.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CheckSpec {
    /// The command, as `bash -c` runs it.
    pub command: String,
    /// Its time limit ([`DEFAULT_CHECK_TIMEOUT_SECS`] by default); one that runs out is a failure.
    pub timeout: Duration,
}

pub use crate::run::CheckResult;

/// The workspace files and folders `command` runs or names: every literal word of every command in it
/// (read with bash's grammar, [`crate::rules::shell`]) that is a relative path to something existing in
/// `root`, without `..`, other than the root itself. Sorted, without duplicates; relative to `root`.
pub fn files_named(command: &str, root: &Path) -> Vec<PathBuf> {
    let script = crate::rules::shell::parse(command);
    let mut found: Vec<PathBuf> = Vec::new();
    for cmd in &script.everywhere {
        for word in &cmd.words {
            // A pytest node id names its file: `tests/test_x.py::test_add`.
            let word = word.split("::").next().unwrap_or(word);
            let Some(rel) = workspace_relative(word) else { continue };
            if root.join(&rel).symlink_metadata().is_ok() && !found.contains(&rel) {
                found.push(rel);
            }
        }
    }
    found.sort();
    found
}

/// `word` as a path inside a workspace: relative, no `..`, not empty and not the root (`.`, `./`).
fn workspace_relative(word: &str) -> Option<PathBuf> {
    if word.is_empty() || word.starts_with('-') {
        return None;
    }
    let path = Path::new(word);
    let mut clean = PathBuf::new();
    for c in path.components() {
        match c {
            Component::Normal(part) => clean.push(part),
            Component::CurDir => {}
            _ => return None,
        }
    }
    (!clean.as_os_str().is_empty()).then_some(clean)
}

/// Why a write-kind call that writes `path` is refused, when `path` is one of the run's check files
/// (`protected`, relative to `root`) or inside one of its folders; `None` otherwise. Paths are compared
/// as written and as resolved (a symlink to a check file is that file).
pub fn write_refusal(path: &str, root: &Path, protected: &[PathBuf], command: Option<&str>) -> Option<String> {
    // Both sides in every form the permission rules judge a path in (as written with `..` taken out, and
    // resolved beneath the root through its cap-std handle, as the file tools open it): `sub/../test_x.py`, a
    // link to the file, or the file a protected link leads to are all the protected file.
    let forms =
        |p: &str| -> Vec<PathBuf> { crate::rules::workspace_forms(p, root).into_iter().map(PathBuf::from).collect() };
    let targets = forms(path);
    let hit = protected.iter().find(|p| {
        let protected = forms(&p.to_string_lossy());
        targets.iter().any(|t| protected.iter().any(|f| t.starts_with(f)))
    })?;
    let check = command.map_or_else(|| "the run's check".to_string(), |c| format!("the check `{c}`"));
    Some(format!(
        "{} is read-only in this run: {check} runs it (it decides when the task is done, so it may not change). \
         Change the code it tests instead.",
        hit.display()
    ))
}

/// Run the check in `ws` with the built-in `bash`'s runner (`opts`: its sandbox, network and protected
/// paths), bounded by `spec.timeout`; `result` takes the outcome (one more run).
pub fn run(spec: &CheckSpec, ws: &Workspace, opts: &BashOptions, cancel: &CancelToken, result: &mut CheckResult) {
    let secs = spec.timeout.as_secs().max(1);
    let opts = BashOptions {
        default_timeout: Duration::from_secs(secs),
        max_timeout: opts.max_timeout.max(Duration::from_secs(secs)),
        ..opts.clone()
    };
    let reply = run_bash(ws, &json!({"command": spec.command, "timeout": secs}), &opts, cancel);
    result.runs += 1;
    // Err: it timed out, was cancelled or could not start; no exit code of its own.
    let (text, code) = match reply {
        Ok(text) => {
            let code = exit_code(&text).unwrap_or(0);
            (text, Some(code))
        }
        Err(why) => (why, None),
    };
    result.exit_code = code;
    result.passed = result.exit_code == Some(0);
    result.output_tail = tail(&text);
}

/// The exit code the built-in `bash` reports on a line `exit code: N` (none: 0).
pub fn exit_code(text: &str) -> Option<i32> {
    text.lines().rev().find_map(|l| l.trim().strip_prefix("exit code: ").and_then(|n| n.trim().parse().ok()))
}

/// The last [`TAIL_LINES`] lines of `text`, at most [`TAIL_BYTES`] bytes (cut at a character boundary).
pub fn tail(text: &str) -> String {
    let lines: Vec<&str> = text.trim_end().lines().collect();
    let start = lines.len().saturating_sub(TAIL_LINES);
    let joined = lines[start..].join("\n");
    if joined.len() <= TAIL_BYTES {
        return joined;
    }
    let mut cut = joined.len() - TAIL_BYTES;
    while !joined.is_char_boundary(cut) {
        cut += 1;
    }
    joined[cut..].to_string()
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod tests {
    use super::*;

    struct Dir(PathBuf);
    impl Dir {
        fn path(&self) -> &Path {
            &self.0
        }
    }
    impl Drop for Dir {
        fn drop(&mut self) {
            let _ = std::fs::remove_dir_all(&self.0);
        }
    }
    fn tempdir(name: &str) -> Dir {
        let p = std::env::temp_dir().join(format!("tooloop-check-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&p);
        std::fs::create_dir_all(&p).unwrap();
        Dir(p.canonicalize().unwrap())
    }

    #[test]
    fn the_files_a_check_runs_or_names_are_found_and_the_root_never_is() {
        let dir = tempdir("named");
        std::fs::write(dir.path().join("test_x.py"), "").unwrap();
        std::fs::create_dir(dir.path().join("tests")).unwrap();
        let found =
            files_named("python3 test_x.py && pytest -q tests/ . ./ ../x missing.py test_x.py::test_a", dir.path());
        assert_eq!(found, vec![PathBuf::from("test_x.py"), PathBuf::from("tests")]);
    }

    #[test]
    fn a_write_to_a_check_file_or_inside_its_folder_is_refused() {
        let dir = tempdir("refused");
        std::fs::write(dir.path().join("test_x.py"), "").unwrap();
        std::fs::create_dir(dir.path().join("tests")).unwrap();
        let p = vec![PathBuf::from("test_x.py"), PathBuf::from("tests")];
        assert!(write_refusal("test_x.py", dir.path(), &p, Some("c")).is_some());
        assert!(write_refusal("./sub/../test_x.py", dir.path(), &p, Some("c")).is_some());
        assert!(write_refusal("tests/new.py", dir.path(), &p, Some("c")).is_some());
        assert!(write_refusal("x.py", dir.path(), &p, Some("c")).is_none());
        std::os::unix::fs::symlink(dir.path().join("test_x.py"), dir.path().join("link.py")).unwrap();
        assert!(write_refusal("link.py", dir.path(), &p, Some("c")).is_some(), "a link to it is it");
        // The check names a link: the file it leads to is what the check runs.
        std::fs::write(dir.path().join("real.py"), "").unwrap();
        std::os::unix::fs::symlink("real.py", dir.path().join("named.py")).unwrap();
        let named = vec![PathBuf::from("named.py")];
        assert!(write_refusal("real.py", dir.path(), &named, Some("c")).is_some(), "the link's target is it");
        assert!(write_refusal("other.py", dir.path(), &named, Some("c")).is_none());
    }

    #[test]
    fn the_tail_keeps_the_last_lines_within_the_byte_cap() {
        let text: String = (0..100).map(|i| format!("line {i}\n")).collect();
        let t = tail(&text);
        assert!(t.starts_with("line 40") && t.ends_with("line 99"));
        assert!(tail(&"é".repeat(5000)).len() <= TAIL_BYTES);
        assert_eq!(exit_code("out\nexit code: 3"), Some(3));
    }
}
