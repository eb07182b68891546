//! A run's own record, and the final answer held to it: which files changed (`files_changed`) and which
//! commands ran with which exit code (`commands_run`), on every [`crate::RunResult`]; and, when asked
//! (`expect_changes`, `verify_claims`), whether the answer claims what the record does not show.
//!
//! Where the record comes from: the run's tool calls, by kind ([`crate::tools::ToolKind`]): a write-kind
//! call that succeeded changed the file named by its `path_field`; a shell-kind call ran its `command`
//! input, with the exit code the built-in `bash` reports (`exit code: N`, else 0; an error result without
//! one: `None`). What a shell command changed is found by comparing the workspace before and after the run
//! ([`Snapshot`]: size and modification time of each file, [`CACHE_DIRS`] and what the workspace's top
//! `.gitignore` names left out, at most [`SNAPSHOT_MAX_FILES`]), when the run has a workspace and a shell tool.
//!
//! Claims ([`claims`]), kept simple and conservative: a backquoted command after "ran", "run", "running",
//! "executed" or "executing" (``I ran `python3 test_x.py` ``) must have run (a command of the record that
//! contains it, or that it contains) and its last run must have passed; "test(s)"/"check" followed within
//! the same sentence by "pass"/"passes"/"passed"/"passing"/"succeeded", with no "not", "n't", "fail" or
//! "no " between them and no condition or plan in the sentence ("if", "when", "once", "should", "will",
//! "would", "until", "unless", "must", "to"), needs a passing last run of the latest command naming "test"
//! (else of the latest command at all), or a passing check.
//!
//! Must never: read file contents, or an ignore file that is not a regular file (a FIFO must not hang a
//! run), or follow a symlink out of the workspace.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::SystemTime;

pub use crate::run::CommandRun;
use crate::run::ToolCallRecord;
use crate::tools::ToolKind;

/// Files a [`Snapshot`] looks at, at most: past it a bash change may go unseen.
pub const SNAPSHOT_MAX_FILES: usize = 20_000;

/// Folders a [`Snapshot`] leaves out: caches a command or a test runner writes by itself (`python3 t.py`
/// writes `__pycache__/`), which are no change the task made.
pub const CACHE_DIRS: [&str; 7] =
    [".git", "__pycache__", ".pytest_cache", ".mypy_cache", ".ruff_cache", "node_modules", ".venv"];

/// The files of a workspace, each with its size and modification time.
#[derive(Clone, Debug, Default)]
pub struct Snapshot {
    root: PathBuf,
    files: BTreeMap<PathBuf, (u64, Option<SystemTime>)>,
}

/// The rules of `root/.gitignore`, when it is a regular file of at most 1 MB.
fn root_gitignore(root: &Path) -> Option<ignore::gitignore::Gitignore> {
    use std::io::Read;
    use std::os::unix::fs::OpenOptionsExt;
    let file = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(nix::fcntl::OFlag::O_NONBLOCK.bits())
        .open(root.join(".gitignore"))
        .ok()?;
    if !file.metadata().ok()?.is_file() {
        return None;
    }
    let mut text = String::new();
    file.take(1 << 20).read_to_string(&mut text).ok()?;
    let mut builder = ignore::gitignore::GitignoreBuilder::new(root);
    for line in text.lines() {
        // A line the matcher cannot read is left out, as git leaves it.
        let _ = builder.add_line(None, line);
    }
    builder.build().ok()
}

impl Snapshot {
    /// Look at the files under `root` (relative paths; [`CACHE_DIRS`] and ignored files left out).
    pub fn take(root: &Path) -> Snapshot {
        let mut files = BTreeMap::new();
        // The workspace's top `.gitignore` leaves build output out. Read here, opened without blocking and
        // only when it is a regular file (a FIFO must not hang the run); no other ignore file is read.
        let ignored = root_gitignore(root);
        let walker = ignore::WalkBuilder::new(root)
            .standard_filters(false)
            .follow_links(false)
            .filter_entry(move |e| {
                let dir = e.file_type().is_some_and(|t| t.is_dir());
                !CACHE_DIRS.iter().any(|d| e.file_name() == *d)
                    && !ignored.as_ref().is_some_and(|g| g.matched(e.path(), dir).is_ignore())
            })
            .build();
        for entry in walker.flatten().take(SNAPSHOT_MAX_FILES) {
            let path = entry.path();
            let Ok(meta) = entry.metadata() else { continue };
            if meta.is_dir() {
                continue;
            }
            if let Ok(rel) = path.strip_prefix(root) {
                files.insert(rel.to_path_buf(), (meta.len(), meta.modified().ok()));
            }
        }
        Snapshot { root: root.to_path_buf(), files }
    }

    /// Take what changed between `before` and `after` (both of this root) as it is in `after`: changes
    /// made then (by the check command) are not the run's.
    pub fn absorb(&mut self, before: &Snapshot, after: &Snapshot) {
        for (path, meta) in &after.files {
            if before.files.get(path) != Some(meta) {
                self.files.insert(path.clone(), *meta);
            }
        }
        for path in before.files.keys() {
            if !after.files.contains_key(path) {
                self.files.remove(path);
            }
        }
    }

    /// The root this snapshot looked at.
    pub fn root(&self) -> &Path {
        &self.root
    }

    /// The files created, changed or removed since this snapshot.
    pub fn changed(&self) -> Vec<String> {
        let now = Snapshot::take(&self.root);
        let mut out: Vec<String> = Vec::new();
        for (path, meta) in &now.files {
            if self.files.get(path) != Some(meta) {
                out.push(path.to_string_lossy().into_owned());
            }
        }
        for path in self.files.keys() {
            if !now.files.contains_key(path) {
                out.push(path.to_string_lossy().into_owned());
            }
        }
        out
    }
}

/// The files written by the run's write-kind calls that succeeded, as the calls named them (`./a.py` is
/// `a.py`), in order, without duplicates; `kind` gives each tool's kind.
pub fn files_written(calls: &[ToolCallRecord], kind: &dyn Fn(&str) -> ToolKind) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    for call in calls.iter().filter(|c| !c.is_error) {
        if let Some(path) = kind(&call.name).written_path(&call.input) {
            let path = path.strip_prefix("./").unwrap_or(path).to_string();
            if !out.contains(&path) {
                out.push(path);
            }
        }
    }
    out
}

/// The run's shell-kind calls, in order.
pub fn commands_run(calls: &[ToolCallRecord], kind: &dyn Fn(&str) -> ToolKind) -> Vec<CommandRun> {
    calls
        .iter()
        .filter(|c| kind(&c.name) == ToolKind::Shell && !c.denied)
        .filter_map(|c| {
            let command = c.input.get("command")?.as_str()?.to_string();
            let text = match &c.output {
                serde_json::Value::String(s) => s.clone(),
                other => other.to_string(),
            };
            let exit_code = match crate::check::exit_code(&text) {
                Some(code) => Some(code),
                None if c.is_error => None,
                None => Some(0),
            };
            Some(CommandRun { command, exit_code })
        })
        .collect()
}

/// What the answer `text` claims that the record does not show (each a short sentence); empty when
/// nothing. `check_passed`: the run's check passed the last time it ran.
pub fn claims(text: &str, commands: &[CommandRun], check_passed: bool) -> Vec<String> {
    let mut out = Vec::new();
    let lower = text.to_lowercase();
    for cited in cited_commands(&lower) {
        let last = commands.iter().rev().find(|c| {
            let c = c.command.to_lowercase();
            c.contains(&cited) || cited.contains(c.trim())
        });
        match last {
            None => out.push(format!("the answer says `{cited}` ran, and it never ran in this run")),
            Some(c) if c.exit_code != Some(0) => out.push(format!(
                "the answer cites `{cited}`, and its last run failed ({})",
                c.exit_code.map_or_else(|| "it did not finish".to_string(), |n| format!("exit {n}"))
            )),
            Some(_) => {}
        }
    }
    if out.is_empty() && claims_pass(&lower) && !check_passed {
        let test = commands.iter().rev().find(|c| c.command.to_lowercase().contains("test"));
        match test.or(commands.last()) {
            None => out.push("the answer says a test passed, and no command ran in this run".to_string()),
            Some(c) if c.exit_code != Some(0) => out.push(format!(
                "the answer says a test passed, and the last run of `{}` failed ({})",
                c.command,
                c.exit_code.map_or_else(|| "it did not finish".to_string(), |n| format!("exit {n}"))
            )),
            Some(_) => {}
        }
    }
    out
}

/// Backquoted commands right after "ran", "run", "running", "executed", "executing" (a word or two
/// between allowed: "ran the tests with `pytest`").
fn cited_commands(lower: &str) -> Vec<String> {
    let mut out = Vec::new();
    let parts: Vec<&str> = lower.split('`').collect();
    // Odd indexes are inside backquotes.
    for i in (1..parts.len()).step_by(2) {
        if i + 1 >= parts.len() {
            break; // an unclosed quote
        }
        let before: Vec<&str> = parts[i - 1].split_whitespace().rev().take(4).collect();
        let verb = before.iter().position(|w| {
            let w = w.trim_matches(|c: char| !c.is_alphanumeric());
            matches!(w, "ran" | "run" | "running" | "executed" | "executing")
        });
        // The words before the verb, up to the sentence's start.
        let earlier = |v: usize| -> Vec<&str> {
            parts[i - 1]
                .split_whitespace()
                .rev()
                .skip(v + 1)
                .take(3)
                .take_while(|w| !w.ends_with(['.', '!', '?']))
                .map(|w| w.trim_matches(|c: char| !c.is_alphanumeric() && c != '\''))
                .collect()
        };
        // "did not run `x`", "never ran `x`": no claim. Nor a run the answer asks for, allows or foresees
        // ("when you run `main.py`, it prints 6", "you can run `pytest`", "to run `x`"), nor "run" without
        // "have"/"was" before it ("Run `pytest` to check"): an instruction, not what happened.
        let negated = verb.is_some_and(|v| {
            let words = earlier(v);
            let no = words.iter().any(|w| matches!(*w, "not" | "never" | "no") || w.ends_with("n't"));
            let hedged = words.iter().any(|w| {
                matches!(
                    *w,
                    "you"
                        | "to"
                        | "can"
                        | "could"
                        | "will"
                        | "would"
                        | "should"
                        | "may"
                        | "might"
                        | "when"
                        | "if"
                        | "once"
                        | "please"
                        | "try"
                        | "let's"
                )
            });
            let present = before[v].trim_matches(|c: char| !c.is_alphanumeric()) == "run"
                && !words
                    .iter()
                    .any(|w| matches!(*w, "have" | "has" | "had" | "i've" | "we've" | "been" | "was" | "were"));
            no || hedged || present
        });
        let cited = parts[i].trim();
        // "ran `write_file`": a built-in tool's name, not a command (a tool call is no shell command).
        let tool = crate::builtin::NAMES.contains(&cited);
        if verb.is_some() && !negated && !tool && !cited.is_empty() && !out.iter().any(|c| c == cited) {
            out.push(cited.to_string());
        }
    }
    out
}

/// Whether a sentence says a test or check passed.
fn claims_pass(lower: &str) -> bool {
    lower.split(['.', '\n', '!', ';']).any(|sentence| {
        let words: Vec<&str> =
            sentence.split_whitespace().map(|w| w.trim_matches(|c: char| !c.is_alphanumeric())).collect();
        let Some(subject) = words.iter().position(|w| matches!(*w, "test" | "tests" | "check" | "checks")) else {
            return false;
        };
        let rest = &words[subject + 1..];
        let Some(verb) = rest.iter().position(|w| matches!(*w, "pass" | "passes" | "passed" | "passing" | "succeeded"))
        else {
            return false;
        };
        let between = &rest[..verb];
        // A condition or a plan is no claim: "the test passes once add is fixed", "it should pass".
        let hedged = words.iter().any(|w| {
            matches!(*w, "if" | "when" | "once" | "should" | "will" | "would" | "until" | "unless" | "must" | "to")
        });
        !between.iter().any(|w| matches!(*w, "not" | "no" | "never") || w.contains("n't") || w.starts_with("fail"))
            && !hedged
            && !sentence.contains("n't")
            && !sentence.contains(" not ")
    })
}

/// The user message that tells the model what the record shows, once.
pub fn challenge(problems: &[String], files: &[String], commands: &[CommandRun]) -> String {
    let files = if files.is_empty() { "none".to_string() } else { files.join(", ") };
    let commands = if commands.is_empty() {
        "none".to_string()
    } else {
        commands
            .iter()
            .map(|c| {
                let code = c.exit_code.map_or_else(|| "did not finish".to_string(), |n| format!("exit {n}"));
                format!("`{}` ({code})", crate::text::ellipsize(&c.command, 120))
            })
            .collect::<Vec<_>>()
            .join(", ")
    };
    format!(
        "[tooloop: your answer does not match what this run did: {}. What actually happened: files changed: \
         {files}; commands run: {commands}. Do what the task asks and check it, or say plainly what was not done.]",
        problems.join("; ")
    )
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod tests {
    use super::*;

    #[test]
    fn a_negated_run_or_a_tool_name_is_no_claim_that_a_command_ran() {
        // Real answers of a small model that the record held "never ran": it had written the file with
        // write_file (and with `bash`, a command that had run), and said so.
        let none: [CommandRun; 0] = [];
        for text in [
            "I did not run the `write_file` command because it was already called with the same arguments.",
            "I didn't run `pytest`, there are no tests.",
            "I never ran `make` here.",
            "I ran `bash` to check it.",
        ] {
            assert!(claims(text, &none, false).is_empty(), "{text}: {:?}", claims(text, &none, false));
        }
        // A run asked for, allowed or foreseen: an answer that said so was held "unverified" (a real run whose
        // rename was right, and its check held).
        for text in [
            "Now, when you run `main.py`, it should correctly call the `load_data` function.",
            "You can run `pytest` to check.",
            "Run `python3 hello.py` to see it.",
            "To check it, try running `make test`.",
        ] {
            assert!(claims(text, &none, false).is_empty(), "{text}: {:?}", claims(text, &none, false));
        }
        assert_eq!(claims("I have run `pytest`.", &none, false).len(), 1);
        assert_eq!(claims("After running `python3 main.py`, it printed 6.", &none, false).len(), 1);
        // Still a claim: a run asserted, a negation in an earlier sentence.
        assert_eq!(claims("I ran `pytest -q` and it passed.", &none, false).len(), 1);
        assert_eq!(claims("It was not broken. I ran `pytest`.", &none, false).len(), 1);
    }

    #[test]
    fn a_snapshot_sees_changes_but_not_caches_ignored_output_or_a_fifo() {
        let root = std::env::temp_dir().join(format!("tooloop-evidence-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&root);
        std::fs::create_dir_all(root.join("build")).unwrap();
        std::fs::write(root.join(".gitignore"), "build/\n").unwrap();
        std::fs::write(root.join("a.py"), "a").unwrap();
        let before = Snapshot::take(&root);
        std::fs::write(root.join("a.py"), "changed").unwrap();
        std::fs::write(root.join("new.py"), "n").unwrap();
        std::fs::write(root.join("build/out.o"), "o").unwrap();
        std::fs::create_dir_all(root.join("__pycache__")).unwrap();
        std::fs::write(root.join("__pycache__/a.pyc"), "c").unwrap();
        let mut changed = before.changed();
        changed.sort();
        assert_eq!(changed, vec!["a.py", "new.py"]);
        // A FIFO where the ignore file is: not read (it would block), the walk goes on.
        std::fs::remove_file(root.join(".gitignore")).unwrap();
        nix::unistd::mkfifo(&root.join(".gitignore"), nix::sys::stat::Mode::from_bits_truncate(0o600)).unwrap();
        assert!(Snapshot::take(&root).files.contains_key(Path::new("a.py")));
        let _ = std::fs::remove_dir_all(&root);
    }

    fn run(command: &str, code: i32) -> CommandRun {
        CommandRun { command: command.into(), exit_code: Some(code) }
    }

    #[test]
    fn a_cited_command_must_have_run_and_passed() {
        let ran = [run("python3 test_x.py", 1), run("ls", 0)];
        assert_eq!(claims("I ran `python3 test_x.py` and it works.", &ran, false).len(), 1);
        assert_eq!(claims("I ran `pytest -q`.", &ran, false).len(), 1, "never ran");
        let ok = [run("python3 test_x.py", 1), run("python3 test_x.py", 0)];
        assert!(claims("I ran `python3 test_x.py`: all good.", &ok, false).is_empty());
        assert!(claims("The function `add` is in `x.py`.", &ran, false).is_empty(), "no verb");
    }

    #[test]
    fn a_test_said_to_pass_needs_a_passing_last_test_run() {
        assert_eq!(claims("Done. The test passed.", &[], false).len(), 1);
        assert_eq!(claims("All tests pass now.", &[run("python3 test_x.py", 1), run("ls", 0)], false).len(), 1);
        assert!(claims("All tests pass now.", &[run("python3 test_x.py", 0)], false).is_empty());
        assert!(claims("The test passed.", &[], true).is_empty(), "the check passed");
        assert!(claims("The test does not pass yet.", &[], false).is_empty());
        assert!(claims("The tests still fail, so nothing passed.", &[], false).is_empty());
        assert!(claims("I wrote the function.", &[], false).is_empty());
        assert!(claims("The test passes when add returns the sum.", &[], false).is_empty(), "a condition");
        assert!(claims("Run it: the tests should pass.", &[], false).is_empty(), "a plan");
    }
}
