//! Progress detection: whether the model's tool calls still move the task forward.
//!
//! The runaway guard ([`crate::agent::RepeatGuard`]) catches one thing: the same call with the same input in
//! consecutive turns. Models that are done but do not know how to say so do subtler things, and small ones do
//! them every time: they write a file with the content it already has, run a command whose output is the
//! same as last time (often a check that already passed), or go round a cycle of calls (write, run, write,
//! run). A model turn is *stalled* when every call in it is one of these; this module says which turns are.
//!
//! The loop calls [`Progress`] once per call, after the call ran, and once per turn. On the first stalled
//! turn the model gets a note (appended to the turn's last tool result) that says precisely what it repeated
//! and that it may answer without a tool if the task is done; when `stop_after` more turns in a row stall,
//! the run ends with stop_reason `"repetition"`. A turn with any call that changed something (new content, a
//! new output, a call not made before) starts the count again, so legitimate retries are never stopped.
//!
//! The same call in consecutive turns stays the runaway guard's to count and stop ([`Progress::again`]): such
//! a turn neither stalls nor moves here, but a result the same as last time still gets the note at once.
//!
//! The wrap-up turn ([`ProgressGuard::wrap_up`], on by default): a note alone does not make a small model
//! stop — it reads "answer without a tool" and calls the tool again. So when a turn only repeated a check
//! that had already passed (a command with the same output as before, exit code 0) or wrote a file with the
//! content it already had (or sent an edit whose old and new text are the same), with no command failing
//! since the last change, the next request is sent once with tools disabled (`tool_choice` none, the tools
//! still defined so the history stays valid) and a line asking for the final answer ([`wrap_up`]): the model
//! has to answer in text, and the run ends the natural way, with `end_turn`. Once per run. A repeat the
//! runaway guard refuses counts like the one that ran. When such a rewrite comes with nothing run since the
//! model's last change, its note first says so (once for each change) and the wrap-up waits for the next stalled
//! rewrite: a small model rewrites its file instead of running the test the task asked for. A server that
//! ignores `tool_choice` none (llama.cpp's Anthropic endpoint drops it) and sends calls anyway gets them
//! answered, not run ([`WRAP_UP_AGAIN`]), and the request goes once more, without the tools (so the server's
//! prompt no longer lists them); calls sent in that one too are answered [`WRAP_UP_IGNORED`] and the run
//! ends with `"repetition"`.
//!
//! A command that failed the last time it ran and passes now gets a note of its own
//! ([`Progress::turn_note`]): the moment a fix worked is the moment to say the task may be done. One that
//! fails exactly as it did before the model's last change gets a note too, and is not a repeat: the change
//! missed the cause, and the model needs to hear that rather than "if the task is done, answer".
//!
//! Unsticking ([`ProgressGuard::unstick_temperature`], off by default): after a turn stuck on a failure the
//! next request goes once at a higher temperature ([`unstick`]); a small model at a low one repeats its stuck
//! call whatever the notes say.
//!
//! Off unless asked for (the `progress_guard` option; the `tooloop` command turns it on): these are a coding
//! agent's policies, and a host's own tools called again are the host's business. A tool marked not
//! idempotent ([`crate::Tool::idempotent`]) is never judged here: its calls count as progress, and a cycle
//! through one is no cycle ([`Progress::set_not_idempotent`]).
//!
//! Must never: stop a run whose calls keep producing something new (a cycle of commands whose output changes,
//! like a poll, is left alone), or judge a call before it ran. It only reads what the loop hands it: no I/O,
//! nothing above it imported.

use std::collections::{HashMap, HashSet};

use serde_json::Value;

use crate::tools::ToolKind;
use crate::types::{ContentBlock, Request, ToolUseBlock};

/// How patient the progress detection is, once it is on (`stop_after` 2, `wrap_up` on by default).
///
/// Set through the `progress_guard` option: `false` (the default: off), `true`, or
/// `{"stop_after": N, "wrap_up": bool, "unstick_temperature": T}`.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct ProgressGuard {
    /// Stalled turns in a row, after the first one (which gets the note), before the run ends (default 2,
    /// at least 1).
    pub stop_after: u32,
    /// After a turn that only re-ran a check that had already passed (or rewrote a file with the content it
    /// had), no command failing since the last change, send the next request once with tools
    /// disabled, asking for the final answer (default true). See [`wrap_up`].
    pub wrap_up: bool,
    /// After a turn that repeated something while a failure is outstanding (the same failing call again, an
    /// edit that changes nothing after a failed test), send the next request with at least this temperature,
    /// when the request sets a lower one (default `None`: off). See [`unstick`].
    pub unstick_temperature: Option<f64>,
}

impl Default for ProgressGuard {
    fn default() -> Self {
        ProgressGuard { stop_after: 2, wrap_up: true, unstick_temperature: None }
    }
}

/// The line the wrap-up request adds to the last tool result.
pub const WRAP_UP_NOTE: &str = "[tooloop: tools are off for this answer. Your last call only repeated what was \
                                already done. Answer now in one or two plain sentences: what you did and whether \
                                it worked (or what is left).]";

/// The result of a call the model made in the wrap-up turn anyway (a server that ignores `tool_choice` none):
/// not run, and the wrap-up request goes once more.
pub const WRAP_UP_AGAIN: &str = "not run: tools are off for this answer, because your last call only repeated \
                                 what was already done. Do not call a tool: answer in plain words.";

/// The result of a call the model made in the second wrap-up turn too: not run, and the run ends with
/// stop_reason `"repetition"`.
pub const WRAP_UP_IGNORED: &str = "not run: tools were off for this answer, because your last call only repeated \
                                   what was already done. The run ends here.";

/// Where the wrap-up stands in this run.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
enum WrapUp {
    /// Not (yet) called for.
    #[default]
    Idle,
    /// The next request goes out with tools disabled.
    Due,
    /// Sent: once per run.
    Sent,
    /// Sent, and the server answered with calls anyway: the next request is the wrap-up again, the last one.
    Again,
    /// Sent again.
    SentAgain,
}

/// Longest cycle of turns looked for (A B A B and A B C A B C; one-turn repeats are the repeat guard's).
const MAX_PERIOD: usize = 3;
/// How much of a call's input the notes quote.
const QUOTE: usize = 80;

/// A stalled turn: what to tell the model, and whether the run ends here.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Stall {
    /// Stalled turns in a row, this one included.
    pub count: u32,
    /// Whether the run ends after this turn.
    pub stop: bool,
    /// The note for the model (also carried by the event).
    pub note: String,
}

/// What one run has seen; one per run.
#[derive(Default, Debug)]
pub struct Progress {
    /// The last result of each (name, input) call made in this run.
    results: HashMap<(String, String), String>,
    /// Each turn's calls, as one key per turn.
    turns: Vec<String>,
    /// Each turn's calls, said short (for the notes).
    shown: Vec<String>,
    /// Why each call of the current turn made no progress (None: it did).
    current: Vec<Option<String>>,
    /// The period of the cycle the current turn completes.
    cycle: Option<usize>,
    stalled: u32,
    /// Whether a call of the current turn re-ran a check that had passed, with the same output.
    passed_again: bool,
    /// Whether a call of the current turn wrote a file with the content this run had already written to it.
    rewrote_same: bool,
    /// Whether a call of the current turn failed (an error, or a command with a non-zero exit code).
    turn_failed: bool,
    /// Whether a call failed since the last turn that made progress: then the task is not done, and the
    /// tools stay on.
    failed_since_progress: bool,
    wrap_up: WrapUp,
    /// What the last stalled turn repeated, said for a person (the stop line names it).
    last_stall: String,
    /// The paths this run's writes and edits changed.
    changed: HashSet<String>,
    /// Whether a command of this run changed a file in the workspace (see [`Progress::commands_changed_files`]).
    commands_changed: bool,
    /// Whether something ran (a command, a host's tool) since the last write or edit that changed a file.
    ran_since_change: bool,
    /// Whether a note has told the model that nothing ran since its last change (once for each change: a
    /// change after the note makes it due again).
    run_hint: RunHint,
    /// The file whose rewrite brought that note, and whether it was a write (not an edit).
    hint_path: String,
    hint_write: bool,
    /// The path of the last write or edit that changed a file.
    changed_last: String,
    /// The tool that runs commands, if the agent has one (see [`Progress::set_command_tool`]).
    command_tool: Option<String>,
    /// The tool that writes a whole file, if the agent has one (see [`Progress::set_write_tool`]).
    write_tool: Option<String>,
    /// The file of the last edit that would have changed nothing (its old and new text the same), until a
    /// write or edit changes a file: while a failure is outstanding, the notes propose writing it whole.
    noop_edit: Option<String>,
    /// The calls whose last result was a passing check or a write that changed nothing (judged with the
    /// result's error flag, which `results` does not keep).
    idle: HashSet<(String, String)>,
    /// Whether the runaway guard refused a call of the current turn that repeated such a result.
    refused_idle: bool,
    /// A command of the current turn that failed the last time it ran and passes now, said short.
    passes_now: Option<String>,
    /// Writes and edits of this run that changed a file, counted.
    changes: u64,
    /// The last of them, said short (for the notes).
    last_change: String,
    /// For each call that runs something: `changes` when it last ran.
    ran_at: HashMap<(String, String), u64>,
    /// A command of the current turn that failed again with exactly the same output although a file changed
    /// since it last ran, said short, and where its output points in a file this run changed.
    same_failure: Option<(String, Option<Site>)>,
    /// The last call that failed (a command with a non-zero exit code, a host's tool's error), said short.
    last_failure: String,
    /// Whether a call of the current turn was the same as in the turn before with the same result, or was
    /// refused by the runaway guard.
    repeated: bool,
    /// Whether a call of the current turn failed again with exactly the error it had the last time.
    repeated_error: bool,
    /// The same, not counting an edit or write that changed nothing (the file tools answer it as an error).
    failed_again: bool,
    /// The calls whose last result was an error.
    errored: HashSet<(String, String)>,
    /// Whether the next request goes with the unstick temperature (see [`unstick`]).
    unstick: bool,
    /// The tools marked not idempotent: their calls are never judged (see [`Progress::set_not_idempotent`]).
    not_idempotent: HashSet<String>,
    /// What each tool does (see [`Progress::set_kinds`]); a tool not in it is [`ToolKind::Other`].
    kinds: HashMap<String, ToolKind>,
}

/// A line of a file that a failure's output points at (a traceback's frame, a compiler's `path:line:`).
#[derive(Clone, Debug, PartialEq, Eq)]
struct Site {
    path: String,
    line: u64,
    /// The line's code as the output quotes it (a Python traceback does), if it does.
    code: Option<String>,
}

/// Whether a note has said that nothing ran since the model's last change.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
enum RunHint {
    #[default]
    No,
    /// In the current turn: its rewrite does not call for the wrap-up yet.
    ThisTurn,
    Before,
}

impl Progress {
    /// The tools marked not idempotent (`roll_dice`, `next_page`, a poll): the same call may rightly bring
    /// something new each time. The loop answers their calls with [`Progress::moved`], and a turn with one
    /// of them never completes a cycle.
    pub fn set_not_idempotent(&mut self, names: HashSet<String>) {
        self.not_idempotent = names;
    }

    /// What the tools do, by name: a read-kind call is looking, not running a check; a write-kind call
    /// changes the file its `path_field` names; a shell-kind call passes or fails by its exit code. The
    /// loop sets it from the registry; a tool not named is judged by its results alone.
    pub fn set_kinds(&mut self, kinds: HashMap<String, ToolKind>) {
        self.kinds = kinds;
    }

    fn kind_of(&self, call: &ToolUseBlock) -> ToolKind {
        self.kinds.get(&call.name).cloned().unwrap_or_default()
    }

    /// A new turn with these calls begins. Looks for a cycle the turn completes.
    pub fn begin_turn(&mut self, calls: &[ToolUseBlock]) {
        let key: Vec<String> = calls
            .iter()
            .map(|c| {
                if self.not_idempotent.contains(&c.name) {
                    // Each call a key of its own: turns with one never repeat each other.
                    format!("{}\u{2}{}\u{2}{}", c.name, c.id, self.turns.len())
                } else {
                    call_key(c)
                }
            })
            .collect();
        self.turns.push(key.join("\u{1}"));
        self.shown.push(calls.iter().map(describe).collect::<Vec<_>>().join(" + "));
        self.current.clear();
        self.cycle = None;
        self.passed_again = false;
        self.rewrote_same = false;
        self.turn_failed = false;
        self.refused_idle = false;
        self.passes_now = None;
        self.same_failure = None;
        self.repeated = false;
        self.repeated_error = false;
        self.failed_again = false;
        if self.run_hint == RunHint::ThisTurn {
            self.run_hint = RunHint::Before;
        }
        let n = self.turns.len();
        for p in 2..=MAX_PERIOD {
            if n >= 2 * p && self.turns[n - p..] == self.turns[n - 2 * p..n - p] {
                // A period-p cycle whose turns are all the same is a one-turn repeat, not a cycle.
                if self.turns[n - p..].iter().any(|t| *t != self.turns[n - 1]) {
                    self.cycle = Some(p);
                    break;
                }
            }
        }
    }

    /// A command of this run changed a file in the workspace (`grep -c ERROR app.log > errors.txt`): the
    /// loop finds it by comparing the workspace with how it was before the run. Then the notes no longer say
    /// that no file has been written (a real model that had written its answer with a redirect was told so,
    /// and answered that it had made no change).
    pub fn commands_changed_files(&mut self) {
        self.commands_changed = true;
    }

    /// Whether a change to a file is known: a write or edit that changed one, or a command that did.
    pub fn knows_a_change(&self) -> bool {
        !self.changed.is_empty() || self.commands_changed
    }

    /// A call of the current turn ran with this result.
    pub fn see(&mut self, call: &ToolUseBlock, content: &Value, is_error: bool) {
        let key = (call.name.clone(), call.input.to_string());
        let text = result_text(content);
        let kind = &self.kind_of(call);
        self.turn_failed |= failure_counts(kind, &text, is_error);
        let why = if unchanged_write(kind, call, &text, is_error) {
            // The model's own earlier write or change, made again (a first write that finds the content there
            // is not).
            self.rewrote_same |= self.results.contains_key(&key) || self.changed.contains(&path_of(kind, call));
            Some(self.unchanged_why(call))
        } else if self.failed_the_same_after_a_change(call, &key, &text, is_error) {
            None
        } else if self.results.get(&key) == Some(&text) {
            self.passed_again |= passed(kind, &text, is_error);
            self.repeated_error |= is_error;
            self.failed_again |= is_error;
            Some(same_result(kind, call, &text, is_error))
        } else {
            if passed(kind, &text, is_error) && self.results.contains_key(&key) && !self.idle.contains(&key) {
                self.passes_now = Some(describe(call));
            }
            None
        };
        self.track(call, &key, &text, is_error);
        self.results.insert(key, text);
        self.current.push(why);
    }

    /// The runaway guard refused a call of the current turn (the same call and input as the turns before): a
    /// repeat of a passing check or of a write that changed nothing calls for the wrap-up like the repeat
    /// that ran did, rather than leaving the guard to refuse it until it stops the run.
    pub fn refused(&mut self, call: &ToolUseBlock) {
        self.repeated = true;
        self.refused_idle |= self.idle.contains(&(call.name.clone(), call.input.to_string()));
    }

    /// A call of the current turn told the model something new whatever its result (a refusal by the user).
    pub fn moved(&mut self) {
        self.current.push(None);
    }

    /// The same call as in the turn before ran again: the runaway guard counts those and stops them, so the
    /// turn neither stalls nor moves here. Returns the note for the model when the result is the same as
    /// last time (a check that passed, run again): the earliest moment to tell it.
    pub fn again(&mut self, call: &ToolUseBlock, content: &Value, is_error: bool) -> Option<String> {
        let key = (call.name.clone(), call.input.to_string());
        let text = result_text(content);
        let kind = &self.kind_of(call);
        self.turn_failed |= failure_counts(kind, &text, is_error);
        let why = if unchanged_write(kind, call, &text, is_error) {
            self.rewrote_same = true;
            Some(self.unchanged_why(call))
        } else if self.failed_the_same_after_a_change(call, &key, &text, is_error) {
            None
        } else {
            let same = self.results.get(&key) == Some(&text);
            self.passed_again |= same && passed(kind, &text, is_error);
            self.failed_again |= same && is_error;
            same.then(|| same_result(kind, call, &text, is_error))
        };
        if let Some(why) = &why {
            self.last_stall = capitalize(why);
            self.repeated = true;
            self.repeated_error |= is_error;
        }
        self.track(call, &key, &text, is_error);
        let note = why.map(|why| {
            if self.run_hint == RunHint::ThisTurn {
                self.run_hint_note()
            } else if let Some(failed) = self.outstanding_failure() {
                // A real model (OpenAI wire) wrote hello.py with `echo`, saw it fail, ran the same `echo` twice
                // more, heard "if the task is done, answer now" the second time, and answered that it was done.
                format!("[tooloop: no progress: {why}. {failed}]")
            } else if self.failed_again {
                format!("[tooloop: no progress: {why}.]")
            } else {
                format!("[tooloop: no progress: {why}. {}]", self.done_hint())
            }
        });
        self.results.insert(key, text);
        note
    }

    /// What a no-progress note asks next. With no file written or edited yet, not "if the task is done": a
    /// small model asked to change three files ran `python3 main.py` (as the task's last words said), ran it
    /// again, heard "if the task is done, answer now" and answered that the task was already done.
    fn done_hint(&self) -> &'static str {
        if !self.knows_a_change() {
            "No file has been written or edited in this run yet: if the task asks for a change, make it now; if \
             it only asks for an answer, answer in plain words without calling a tool."
        } else {
            "If the task is done, answer now in plain words without calling a tool; otherwise do something \
             different."
        }
    }

    /// Why a write or edit that changed nothing made no progress. The first time one comes with nothing run
    /// since the model's last change, the turn's note becomes [`Progress::run_hint_note`] instead, and that turn
    /// does not call for the wrap-up yet: a small model rewrites its file instead of running the test the task
    /// asked for.
    fn unchanged_why(&mut self, call: &ToolUseBlock) -> String {
        let kind = &self.kind_of(call);
        // Only the built-in write_file and edit_file say that they changed nothing (see `unchanged_write`), each
        // in its own way: their names tell which.
        if !self.ran_since_change && !self.changed.is_empty() && self.run_hint == RunHint::No {
            self.run_hint = RunHint::ThisTurn;
            self.hint_write = call.name == "write_file";
            self.hint_path = path_of(kind, call);
        }
        if call.name == "edit_file" {
            self.noop_edit = Some(path_of(kind, call));
            format!("{} would change nothing: its old_text and new_text are the same", describe(call))
        } else {
            // Written whole, as proposed, with the same content: proposing it again says nothing new.
            if self.noop_edit.as_deref() == Some(path_of(kind, call).as_str()) {
                self.noop_edit = None;
            }
            format!("{} wrote exactly the content the file already had, so nothing changed", describe(call))
        }
    }

    /// The note of the turn whose rewrite came with nothing run since the model's last change. Its words are
    /// the ones a real model acted on: replayed 4 times each at that moment of a failed run, this note got the
    /// test run 4 of 4 times, the usual "no progress … nothing has been run since your last change: if the task
    /// asks for something to be run or tested, do that now. If the task is done, answer now …" 0 of 3 (the
    /// model wrote the file a third time).
    fn run_hint_note(&self) -> String {
        let path = &self.hint_path;
        let since = if self.changed_last == *path {
            "you wrote it".to_string()
        } else {
            format!("your last change ({})", self.last_change)
        };
        let run = match &self.command_tool {
            Some(tool) => format!("If it is meant to be run, run it now with {tool}."),
            None => "If it is meant to be run or tested, do that now.".to_string(),
        };
        let same = if self.hint_write {
            "already has exactly this content: writing it again changes nothing"
        } else {
            "already reads like that: this edit changes nothing"
        };
        format!("[tooloop: {path} {same}. Nothing has been run since {since}. {run}]")
    }

    /// The tool that runs commands in this run (`bash`, when the agent has it): the note that asks for a run
    /// names it.
    pub fn set_command_tool(&mut self, name: Option<&str>) {
        self.command_tool = name.map(str::to_string);
    }

    /// The tool that writes a whole file in this run (`write_file`, when the agent has it): the note on an
    /// edit that changes nothing while a failure is outstanding names it.
    pub fn set_write_tool(&mut self, name: Option<&str>) {
        self.write_tool = name.map(str::to_string);
    }

    /// Keeps what changed and what ran: a write or edit that changed a file, or any call that runs something.
    fn track(&mut self, call: &ToolUseBlock, key: &(String, String), text: &str, is_error: bool) {
        let kind = &self.kind_of(call);
        if failure_counts(kind, text, is_error) {
            self.last_failure = describe(call);
        }
        let unchanged = unchanged_write(kind, call, text, is_error);
        if unchanged || passed(kind, text, is_error) {
            self.idle.insert(key.clone());
        } else {
            self.idle.remove(key);
        }
        if is_error && !unchanged {
            self.errored.insert(key.clone());
        } else {
            self.errored.remove(key);
        }
        match kind {
            ToolKind::Write { .. } if !is_error && !unchanged => {
                self.changed.insert(path_of(kind, call));
                self.changed_last = path_of(kind, call);
                self.ran_since_change = false;
                self.changes += 1;
                self.last_change = describe(call);
                self.noop_edit = None;
                // Told once, the model ran its test, changed the file, and rewrote another one untested: a
                // small model then heard "if the task is done, answer" (or got the wrap-up) and answered that
                // the test passed (two function runs of one block, Anthropic wire).
                if self.run_hint == RunHint::Before {
                    self.run_hint = RunHint::No;
                }
            }
            // Looking (and a write that failed or changed nothing) runs nothing.
            ToolKind::Write { .. } | ToolKind::Read => {}
            _ => {
                self.ran_since_change = true;
                self.ran_at.insert(key.clone(), self.changes);
            }
        }
    }

    /// A command (or a host's tool) that failed with exactly the output it had the last time it ran, although
    /// a write or edit changed a file in between: the change did not reach the cause. That is news for the
    /// model (a small one edits another line of the test than the one that fails, again and again), not a
    /// repeat; see [`Progress::turn_note`], which this sets up.
    fn failed_the_same_after_a_change(
        &mut self,
        call: &ToolUseBlock,
        key: &(String, String),
        text: &str,
        is_error: bool,
    ) -> bool {
        let same = failure_counts(&self.kind_of(call), text, is_error)
            && self.results.get(key).is_some_and(|last| last == text)
            && self.ran_at.get(key).is_some_and(|&at| at != self.changes);
        if same {
            self.same_failure = Some((describe(call), failure_site(text, &self.changed)));
        }
        same
    }

    /// The note for a turn that made progress, when one of its commands tells something about the model's
    /// last change; `None` for any other turn; call after [`Progress::end_turn`].
    /// - It failed the last time it ran and passes now (exit code 0): the moment a fix worked, when a small
    ///   model otherwise goes on to "clean up" (one deleted the files it had just tested).
    /// - It fails exactly as it did before the last change: the change missed the cause (one model edited line
    ///   9 of its test four times while the output said line 7 failed).
    pub fn turn_note(&mut self) -> Option<String> {
        if let Some(what) = self.passes_now.take() {
            return Some(format!(
                "[tooloop: {what} failed the last time it ran and passes now (exit code 0). If that is what the \
                 task asked for, answer now in plain words without calling a tool.]"
            ));
        }
        let (what, site) = self.same_failure.take()?;
        let missed = format!(
            "[tooloop: {what} fails exactly as it did before your last change ({}): that change did not reach the \
             cause.",
            self.last_change
        );
        Some(match site {
            // A real model told only "read where it fails" edited another line again every time; shown the
            // line, in the file it wrote itself, it went to that line (7 of 7 replays, 0 of 7 without).
            Some(Site { path, line, code }) => format!(
                "{missed} The output points at line {line} of {path}, a file you wrote or changed in this run{}\nCheck \
                 whether that line is right, and fix the line that is wrong.]",
                code.map_or_else(|| ".".to_string(), |c| format!(":\n{line:>6}\t{c}"))
            ),
            None => format!("{missed} Read where the output says it fails (the file and line), and change that.]"),
        })
    }

    /// The current turn ended (every call was seen). `Some` when it made no progress.
    pub fn end_turn(&mut self, guard: &ProgressGuard) -> Option<Stall> {
        let cycle = self.cycle.take().map(|p| {
            let n = self.shown.len();
            format!(
                "your last {p} turns made the same tool calls as the {p} turns before them (a cycle: {})",
                self.shown[n - p..].join(", then ")
            )
        });
        // A cycle counts when its calls also brought nothing new (commands whose output changes, like a poll,
        // are left alone).
        let all_idle = self.current.iter().all(Option::is_some);
        let any_idle = self.current.iter().any(Option::is_some);
        let stalled = all_idle || (cycle.is_some() && any_idle);
        // A turn that moved forgets older failures; a stalled one adds its own.
        self.failed_since_progress =
            if stalled { self.failed_since_progress || self.turn_failed } else { self.turn_failed };
        // Every call of the turn repeated something (or was the same call as the turn before), one of them
        // was a passing check or a rewrite of what a file already held, and nothing has failed since the last
        // change: the model is done but does not say so.
        // A rewrite (or a refused repeat) in the turn whose note asked for the check waits one turn.
        let idle_again =
            self.passed_again || ((self.rewrote_same || self.refused_idle) && self.run_hint != RunHint::ThisTurn);
        if stalled && idle_again && !self.failed_since_progress && guard.wrap_up && self.wrap_up == WrapUp::Idle {
            self.wrap_up = WrapUp::Due;
        }
        // Stuck on a failure: with a failure outstanding, the model repeated itself or made a turn of nothing
        // new; or it sent a call that failed again with the same error. At a low temperature its next turn is
        // most likely the same again.
        self.unstick = stalled && (self.repeated_error || self.failed_since_progress && (any_idle || self.repeated));
        if self.current.is_empty() {
            return None; // only calls the runaway guard counts: no verdict either way
        }
        if !stalled {
            self.stalled = 0;
            return None;
        }
        self.stalled += 1;
        let mut what: Vec<String> = cycle.into_iter().collect();
        what.extend(self.current.iter().flatten().cloned());
        let stop = self.stalled > guard.stop_after;
        self.last_stall = capitalize(&what.join("; "));
        let note = if stop {
            format!(
                "[tooloop: the run is stopped: {} turns in a row changed nothing. {}.]",
                self.stalled,
                capitalize(&what.join("; "))
            )
        } else if self.run_hint == RunHint::ThisTurn {
            self.run_hint_note()
        } else if let Some(failed) = self.outstanding_failure() {
            // Not "if the task is done, answer": a small model that wrote a broken hello.py with `echo`, saw
            // `python hello.py` fail and ran the same `echo` again heard that, and ran it until the runaway guard
            // stopped it.
            format!("[tooloop: no progress: {}. {failed}]", what.join("; "))
        } else if self.failed_again {
            // A call that failed again with the same error says nothing of whether the task is done: a small
            // model whose edit of calc.py matched nothing three times heard "if the task is done, answer now"
            // and answered "The task is done." with the bug in place.
            format!("[tooloop: no progress: {}.]", what.join("; "))
        } else {
            format!("[tooloop: no progress: {}. {}]", what.join("; "), self.done_hint())
        };
        Some(Stall { count: self.stalled, stop, note })
    }
}

impl Progress {
    /// The note of the event that ends a run whose wrap-up turn called a tool anyway: what happened, then what
    /// the turn before repeated (the CLI's stop line shows it).
    pub fn wrap_up_ignored_note(&self) -> String {
        let what = if self.last_stall.is_empty() { String::new() } else { format!(" {}.", self.last_stall) };
        format!(
            "[tooloop: the run is stopped: asked twice for its final answer with tools off, the model called a tool \
             again.{what}]"
        )
    }

    /// Whether the next request is the wrap-up (tools disabled); `true` once per run (twice when the first
    /// one was ignored, see [`Progress::wrap_up_ignored`]), then never again.
    pub fn take_wrap_up(&mut self) -> bool {
        match self.wrap_up {
            WrapUp::Due => self.wrap_up = WrapUp::Sent,
            WrapUp::Again => self.wrap_up = WrapUp::SentAgain,
            _ => return false,
        }
        true
    }

    /// What to say instead of "if the task is done, answer" while a failure is outstanding (a call failed since
    /// the last turn that made progress, or in the current one); `None` when none is.
    pub fn outstanding_failure(&self) -> Option<String> {
        (self.failed_since_progress || self.turn_failed).then(|| match (&self.noop_edit, &self.write_tool) {
            // A small model that means to fix a line but sends it back unchanged (old_text = new_text), told
            // "doing this again will not change that", ran the failing test again (4 of 4 replays at that
            // moment); told this, it wrote the file whole 6 of 7 times, the error fixed in each one looked at (3 of 3).
            (Some(path), Some(write)) => format!(
                "{} failed the last time it ran. If you cannot say the fix as one edit, write the whole of {path} \
                 again with {write}, with the error fixed.",
                self.last_failure
            ),
            _ => format!(
                "{} failed the last time it ran: doing this again will not change that. If that failure matters, \
                 change what causes it.",
                self.last_failure
            ),
        })
    }

    /// Whether `call`, made exactly like this, failed (an error result) the last time it ran: the runaway
    /// guard's refusal of it then does not say "if the task is done, answer".
    pub fn failed_last_time(&self, call: &ToolUseBlock) -> bool {
        self.errored.contains(&(call.name.clone(), call.input.to_string()))
    }

    /// Whether the next request should go with the unstick temperature (see [`unstick`]); `true` once for each
    /// turn stuck on a failure.
    pub fn take_unstick(&mut self) -> bool {
        std::mem::take(&mut self.unstick)
    }

    /// Whether the wrap-up request just taken is the second one, to a server that ignored `tool_choice` none
    /// the first time: it goes without the tools (see [`wrap_up`]).
    pub fn wrap_up_without_tools(&self) -> bool {
        self.wrap_up == WrapUp::SentAgain
    }

    /// The wrap-up turn called tools anyway (its server ignores `tool_choice` none). `None`: the first time;
    /// answer the calls [`WRAP_UP_AGAIN`] and send the wrap-up request once more. `Some(note)`: the second
    /// time; answer them [`WRAP_UP_IGNORED`] and end the run, `note` saying why.
    pub fn wrap_up_ignored(&mut self) -> Option<String> {
        if self.wrap_up == WrapUp::Sent {
            self.wrap_up = WrapUp::Again;
            return None;
        }
        Some(self.wrap_up_ignored_note())
    }
}

/// Whether the wrap-up can change a request with this `tool_choice`: one the host (or output_schema's
/// final-answer tool) set, other than auto, is theirs, and the request is left alone.
pub fn wrap_up_applies(tool_choice: Option<&Value>) -> bool {
    tool_choice.is_none_or(|c| c.get("type").and_then(Value::as_str) == Some("auto"))
}

/// Make `request` the wrap-up request: tools disabled (`tool_choice` none; the tools stay defined, since the
/// history holds calls of them), and [`WRAP_UP_NOTE`] added to the last tool result, so the model answers in
/// text. Only the request changes, not the conversation. Does nothing when `on` is false or the request
/// already has a `tool_choice` other than auto ([`wrap_up_applies`]).
///
/// `without_tools`: the second wrap-up request, sent because the server answered the first with calls (it
/// ignores `tool_choice` none, as llama.cpp's Anthropic endpoint does). It leaves the tools and
/// `tool_choice` out altogether, so the server's prompt no longer lists them. (The Anthropic API refuses a
/// history with tool calls and no tools defined, but it honours `tool_choice` none, so it never gets this
/// request.)
pub fn wrap_up(request: &mut Request, on: bool, without_tools: bool) {
    if !on || !wrap_up_applies(request.tool_choice.as_ref()) {
        return;
    }
    if without_tools {
        request.tools.clear();
        request.tool_choice = None;
    } else {
        request.tool_choice = Some(serde_json::json!({"type": "none"}));
    }
    let last = request.messages.last_mut().and_then(|m| {
        m.content.iter_mut().rev().find_map(|b| match b {
            ContentBlock::ToolResult(r) => Some(r),
            _ => None,
        })
    });
    if let Some(result) = last {
        match &mut result.content {
            Value::String(s) => {
                s.push_str("\n\n");
                s.push_str(WRAP_UP_NOTE);
            }
            Value::Array(blocks) => blocks.push(serde_json::json!({"type": "text", "text": WRAP_UP_NOTE})),
            other => *other = Value::String(format!("{other}\n\n{WRAP_UP_NOTE}")),
        }
    }
}

/// Raise the request's temperature to `temperature` for one turn stuck on a failure
/// ([`ProgressGuard::unstick_temperature`]): at a low temperature a small model that sent a failing call, or an
/// edit that changes nothing, sends the same again whatever the notes say. Replayed at two such moments of real
/// runs (Qwen2.5-Coder-1.5B, 4–6 samples each), its next call fixed the cause 1 of 4 and 0 of 4 times at 0.2,
/// and 3 of 6 and 2 of 6 times at 0.8. Only a temperature the request sets (its field or `extra`) and that is
/// lower is raised: a request that leaves it to the API (whose default is usually 1, and which extended
/// thinking requires) is left alone. Only the request changes.
pub fn unstick(request: &mut Request, temperature: f64) {
    if let Some(t) = request.extra.get_mut("temperature") {
        if t.as_f64().is_some_and(|t| t < temperature) {
            *t = serde_json::json!(temperature);
        }
    } else if let Some(t) = request.temperature.as_mut() {
        *t = t.max(temperature);
    }
}

/// A call of a shell-kind tool that succeeded: not an error, and no `exit code: N` line (the built-in bash's
/// way to report a command that exited non-zero).
fn passed(kind: &ToolKind, text: &str, is_error: bool) -> bool {
    !is_error && *kind == ToolKind::Shell && !text.lines().any(|l| l.starts_with("exit code: "))
}

/// Whether a failed call says the task may not be done: a command that failed, or another tool that
/// reported an error. A read or write tool's error (an old_text that matches nothing, a path that does not
/// exist) says only that the call itself was wrong, so it does not keep the wrap-up away: a real model fixed
/// calc.py with write_file, tried its wrong edit_file once more, then rewrote the fix unchanged until the
/// guard stopped it.
fn failure_counts(kind: &ToolKind, text: &str, is_error: bool) -> bool {
    match kind {
        ToolKind::Write { .. } | ToolKind::Read => false,
        ToolKind::Shell => !passed(kind, text, is_error),
        _ => is_error,
    }
}

/// A write or edit that changed nothing: the built-in write_file compares before writing and says when the
/// file already had the content; an edit_file whose old_text and new_text are the same is refused, and one
/// whose new_text is already where its old_text is not says the edit looks already made. Those answers are
/// the built-ins' own wording, so their names decide here; a host's write-kind tool has words of its own.
fn unchanged_write(kind: &ToolKind, call: &ToolUseBlock, text: &str, is_error: bool) -> bool {
    if !matches!(kind, ToolKind::Write { .. }) {
        return false;
    }
    match call.name.as_str() {
        "write_file" => !is_error && text.starts_with("unchanged "),
        // Or one the built-in edit_file found already made: old_text gone, new_text there (a small model fixed
        // calc.py with write_file and then sent the same fix as an edit until the runaway guard stopped it).
        "edit_file" => {
            call.input.get("old_text").is_some_and(|o| Some(o) == call.input.get("new_text"))
                || (is_error && text.contains("this edit looks already made"))
        }
        _ => false,
    }
}

/// The path a write-kind call names (its `path_field`).
fn path_of(kind: &ToolKind, call: &ToolUseBlock) -> String {
    kind.written_path(&call.input).unwrap_or_default().to_string()
}

/// One string per call: its name and exact input.
fn call_key(call: &ToolUseBlock) -> String {
    format!("{}\u{0}{}", call.name, call.input)
}

/// A result as text, for comparing: with its timings masked ([`mask_timings`]).
fn result_text(content: &Value) -> String {
    mask_timings(&match content {
        Value::String(s) => s.clone(),
        Value::Array(blocks) => blocks
            .iter()
            .map(|b| b.get("text").and_then(Value::as_str).map_or_else(|| b.to_string(), str::to_string))
            .collect::<Vec<_>>()
            .join("\n"),
        other => other.to_string(),
    })
}

/// Where a failure's output points in one of the files this run changed (`changed`, as the model named
/// them): the last Python traceback frame (`File "…/test_pal.py", line 7`, with the code line under it) in
/// such a file, else the last `path:line:` (compilers, pytest's short form) naming one.
fn failure_site(text: &str, changed: &HashSet<String>) -> Option<Site> {
    let ours = |path: &str| {
        changed.iter().find(|c| !c.is_empty() && (path == c.as_str() || path.ends_with(&format!("/{c}")))).cloned()
    };
    let lines: Vec<&str> = text.lines().collect();
    let mut site = None;
    for (i, l) in lines.iter().enumerate() {
        let Some(rest) = l.trim_start().strip_prefix("File \"") else { continue };
        let Some((path, rest)) = rest.split_once("\", line ") else { continue };
        let digits: String = rest.chars().take_while(char::is_ascii_digit).collect();
        if let (Some(path), Ok(line)) = (ours(path), digits.parse::<u64>()) {
            let code = lines
                .get(i + 1)
                .filter(|n| n.starts_with("    ") && !n.trim_start().starts_with("File \""))
                .map(|n| n.trim().to_string())
                .filter(|n| !n.is_empty());
            site = Some(Site { path, line, code });
        }
    }
    if site.is_some() {
        return site;
    }
    lines.iter().rev().find_map(|l| {
        let mut parts = l.splitn(3, ':');
        // The path is the last word before the first colon (`  --> src/calc.rs:12:5` in rustc's output).
        let (path, line) = (parts.next()?.split_whitespace().last()?, parts.next()?);
        parts.next()?;
        Some(Site { path: ours(path)?, line: line.parse().ok()?, code: None })
    })
}

/// `text` with every decimal number of seconds (`0.001s`, `12.5ms`) written `#s`: a test runner prints how
/// long it took (unittest "Ran 1 test in 0.001s", pytest "1 failed in 0.03s", cargo "finished in 0.00s"), and
/// two runs of the same check with the same outcome are the same result.
fn mask_timings(text: &str) -> String {
    let b = text.as_bytes();
    let mut out = String::with_capacity(text.len());
    let (mut i, mut copied) = (0, 0);
    while i < b.len() {
        let starts = b[i].is_ascii_digit() && (i == 0 || !(b[i - 1].is_ascii_alphanumeric() || b[i - 1] == b'.'));
        if !starts {
            i += 1;
            continue;
        }
        let mut j = i;
        while j < b.len() && b[j].is_ascii_digit() {
            j += 1;
        }
        let point = j + 1 < b.len() && b[j] == b'.' && b[j + 1].is_ascii_digit();
        if point {
            j += 1;
            while j < b.len() && b[j].is_ascii_digit() {
                j += 1;
            }
        }
        let unit = if b[j..].starts_with(b"ms") { 2 } else { usize::from(b[j..].starts_with(b"s")) };
        let ends = b.get(j + unit).is_none_or(|c| !c.is_ascii_alphanumeric());
        if point && unit > 0 && ends {
            out.push_str(&text[copied..i]);
            out.push_str("#s");
            copied = j + unit;
        }
        i = j.max(i + 1);
    }
    out.push_str(&text[copied..]);
    out
}

/// `bash(python3 hello.py)`, `write_file(hello.py)`, `read_file(path: a.txt)`: short, for the notes.
fn describe(call: &ToolUseBlock) -> String {
    let main = ["command", "path", "file_path", "pattern", "query", "url"]
        .iter()
        .find_map(|k| call.input.get(*k).and_then(Value::as_str))
        .map(str::to_string)
        .unwrap_or_else(|| call.input.to_string());
    let main = main.split_whitespace().collect::<Vec<_>>().join(" ");
    format!("{}({})", call.name, crate::text::ellipsize(&main, QUOTE))
}

/// The note for a call whose result is the same as its last one.
fn same_result(kind: &ToolKind, call: &ToolUseBlock, text: &str, is_error: bool) -> String {
    if passed(kind, text, is_error) {
        format!("{} already ran before with exactly the same output and it passed (exit code 0)", describe(call))
    } else if is_error {
        format!(
            "{} failed again with exactly the same error, and made as it is it will keep failing: change its input \
             or use another tool",
            describe(call)
        )
    } else {
        format!("{} already ran before with exactly the same result", describe(call))
    }
}

fn capitalize(s: &str) -> String {
    let mut c = s.chars();
    c.next().map_or_else(String::new, |f| f.to_uppercase().collect::<String>() + c.as_str())
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod tests {
    use super::*;
    use serde_json::json;

    fn call(name: &str, input: Value) -> ToolUseBlock {
        ToolUseBlock { id: "t".into(), name: name.into(), input, extra: Default::default() }
    }

    /// A Progress that knows the built-in tools' kinds, as the loop tells it.
    fn progress() -> Progress {
        let mut p = Progress::default();
        p.set_kinds(crate::builtin::NAMES.iter().map(|n| (n.to_string(), crate::tools::builtin_kind(n))).collect());
        p
    }

    fn turn(p: &mut Progress, calls: &[(ToolUseBlock, &str)]) -> Option<Stall> {
        let only: Vec<ToolUseBlock> = calls.iter().map(|(c, _)| c.clone()).collect();
        p.begin_turn(&only);
        for (c, r) in calls {
            p.see(c, &Value::String((*r).into()), false);
        }
        p.end_turn(&ProgressGuard::default())
    }

    #[test]
    fn new_results_are_progress_and_identical_rewrites_then_same_output_stall_until_stop() {
        let mut p = progress();
        let write = call("write_file", json!({"path": "hello.py", "content": "print(1)"}));
        let run = call("bash", json!({"command": "python3 hello.py"}));
        assert_eq!(turn(&mut p, &[(write.clone(), "created hello.py (8 bytes)")]), None);
        assert_eq!(turn(&mut p, &[(run.clone(), "1")]), None);
        let s = turn(&mut p, &[(write.clone(), "unchanged hello.py (8 bytes; it already had this content)")]);
        let s = s.expect("an identical rewrite is no progress");
        assert_eq!((s.count, s.stop), (1, false));
        assert!(s.note.contains("write_file(hello.py) wrote exactly the content the file already had"), "{}", s.note);
        assert!(s.note.contains("answer now in plain words without calling a tool"), "{}", s.note);
        let s = turn(&mut p, &[(run.clone(), "1")]).expect("same output again");
        assert!(
            s.note.contains("bash(python3 hello.py) already ran before with exactly the same output and it passed")
        );
        assert!(s.note.contains("a cycle"), "{}", s.note);
        assert_eq!((s.count, s.stop), (2, false));
        let s = turn(&mut p, &[(write, "unchanged hello.py (8 bytes; it already had this content)")]).expect("stall");
        assert_eq!((s.count, s.stop), (3, true));
        assert!(s.note.starts_with("[tooloop: the run is stopped: 3 turns in a row changed nothing"), "{}", s.note);
    }

    #[test]
    fn a_cycle_is_named_and_one_whose_results_change_is_left_alone() {
        let mut p = progress();
        let a = call("write_file", json!({"path": "a", "content": "1"}));
        let b = call("write_file", json!({"path": "a", "content": "2"}));
        assert_eq!(turn(&mut p, &[(a.clone(), "created a (1 bytes)")]), None);
        assert_eq!(turn(&mut p, &[(b.clone(), "overwrote a (1 bytes; it had 1 bytes)")]), None);
        assert_eq!(turn(&mut p, &[(a.clone(), "overwrote a (1 bytes; it had 1 bytes)")]), None, "a new result");
        let s = turn(&mut p, &[(b, "overwrote a (1 bytes; it had 1 bytes)")]).expect("A B A B is a cycle");
        assert!(
            s.note.contains(
                "your last 2 turns made the same tool calls as the 2 turns before them (a cycle: \
                             write_file(a), then write_file(a))"
            ),
            "{}",
            s.note
        );
        // A poll: the same two commands, new output each time.
        let mut p = progress();
        let (x, y) = (call("bash", json!({"command": "date"})), call("bash", json!({"command": "cat log"})));
        for i in 0..6 {
            let c = if i % 2 == 0 { &x } else { &y };
            assert_eq!(turn(&mut p, &[(c.clone(), &format!("t{i}"))]), None);
        }
    }

    #[test]
    fn a_change_in_between_starts_the_count_again() {
        let mut p = progress();
        let run = call("bash", json!({"command": "python3 t.py"}));
        assert_eq!(turn(&mut p, &[(run.clone(), "FAIL\nexit code: 1")]), None);
        let s = turn(&mut p, &[(run.clone(), "FAIL\nexit code: 1")]).expect("same failure");
        assert!(s.note.contains("already ran before with exactly the same result"), "{}", s.note);
        // A tool error made again: the note says it will keep failing.
        let mut q = progress();
        let bad = call("edit_file", json!({"path": "calc.py", "old_text": "add(2, 3)", "new_text": "5"}));
        let missing = "old_text was not found in 'calc.py'";
        q.begin_turn(std::slice::from_ref(&bad));
        q.see(&bad, &json!(missing), true);
        assert_eq!(q.end_turn(&ProgressGuard::default()), None);
        q.begin_turn(&[bad.clone(), run.clone()]);
        q.see(&bad, &json!(missing), true);
        q.see(&run, &json!("ok"), false);
        assert!(q.end_turn(&ProgressGuard::default()).is_none(), "the other call moved");
        q.begin_turn(std::slice::from_ref(&bad));
        q.see(&bad, &json!(missing), true);
        let s = q.end_turn(&ProgressGuard::default()).expect("the same error again");
        let said =
            "edit_file(calc.py) failed again with exactly the same error, and made as it is it will keep failing";
        assert!(s.note.contains(said), "{}", s.note);
        let edit = call("edit_file", json!({"path": "t.py", "old_text": "a", "new_text": "b"}));
        assert_eq!(turn(&mut p, &[(edit, "edited t.py")]), None);
        assert_eq!(turn(&mut p, &[(run.clone(), "ok")]), None);
        assert_eq!(turn(&mut p, &[(run, "ok")]).map(|s| s.count), Some(1));
    }

    #[test]
    fn the_same_call_again_is_told_at_once_but_left_to_the_runaway_guard() {
        let mut p = progress();
        let run = call("bash", json!({"command": "python3 hello.py"}));
        assert_eq!(turn(&mut p, &[(run.clone(), "Hello")]), None);
        p.begin_turn(std::slice::from_ref(&run));
        let note = p.again(&run, &json!("Hello"), false).expect("the same passing output");
        assert!(note.contains("already ran before with exactly the same output and it passed"), "{note}");
        assert_eq!(p.end_turn(&ProgressGuard::default()), None, "no verdict: the runaway guard counts these");
        p.begin_turn(std::slice::from_ref(&run));
        assert_eq!(p.again(&run, &json!("Hello again"), false), None, "a new output is no repeat");
        // The second identical write says "unchanged" where the first said "created": told at once too.
        let write = call("write_file", json!({"path": "errors.txt", "content": "37"}));
        assert_eq!(turn(&mut p, &[(write.clone(), "created errors.txt (2 bytes)")]), None);
        p.begin_turn(std::slice::from_ref(&write));
        let note = p.again(&write, &json!("unchanged errors.txt (2 bytes; it already had this content)"), false);
        // Nothing ran since the write: the note asks for a run.
        let note = note.expect("an identical rewrite");
        assert!(
            note.contains("errors.txt already has exactly this content: writing it again changes nothing"),
            "{note}"
        );
    }

    #[test]
    fn a_rerun_passing_check_or_an_identical_rewrite_calls_for_one_wrap_up_but_not_after_a_failure_or_when_off() {
        let mut p = progress();
        let write = call("write_file", json!({"path": "hello.py", "content": "print(1)"}));
        let run = call("bash", json!({"command": "python3 hello.py"}));
        assert_eq!(turn(&mut p, &[(write.clone(), "created hello.py (8 bytes)")]), None);
        assert_eq!(turn(&mut p, &[(run.clone(), "1")]), None);
        assert!(!p.take_wrap_up(), "a first run is no repeat");
        assert!(turn(&mut p, &[(run.clone(), "1")]).is_some());
        assert!(p.take_wrap_up(), "the check passed again with the same output");
        assert!(!p.take_wrap_up(), "once");
        assert!(turn(&mut p, &[(run.clone(), "1")]).is_some());
        assert!(!p.take_wrap_up(), "once per run");
        // A server that ignores tool_choice none: the wrap-up goes once more, then the run ends.
        let mut p = progress();
        turn(&mut p, &[(run.clone(), "1")]);
        turn(&mut p, &[(run.clone(), "1")]);
        assert!(p.take_wrap_up());
        assert_eq!(p.wrap_up_ignored(), None, "ignored once: asked again");
        assert!(p.take_wrap_up(), "the second wrap-up request");
        assert!(!p.take_wrap_up());
        let note = p.wrap_up_ignored().unwrap();
        assert!(note.starts_with("[tooloop: the run is stopped: asked twice for its final answer"), "{note}");

        // A rewrite of what the file already held, nothing failing since the change: done too.
        let unchanged = "unchanged hello.py (8 bytes; it already had this content)";
        let mut p = progress();
        assert!(turn(&mut p, &[(write.clone(), unchanged)]).is_some());
        assert!(!p.take_wrap_up(), "a first write that finds its content there is no repeat of the model's own");
        assert_eq!(turn(&mut p, &[(run.clone(), "1")]), None);
        assert!(turn(&mut p, &[(write.clone(), unchanged)]).is_some());
        assert!(p.take_wrap_up(), "an identical rewrite with nothing failing");
        // ... but not after a failing check: the model may still be fixing something.
        let mut p = progress();
        assert_eq!(turn(&mut p, &[(write.clone(), "created hello.py (8 bytes)")]), None);
        assert_eq!(turn(&mut p, &[(run.clone(), "Traceback\nexit code: 1")]), None);
        assert!(turn(&mut p, &[(write.clone(), unchanged)]).is_some());
        assert!(!p.take_wrap_up(), "a rewrite after a failure");

        // A check that fails the same way again: the task is not done, the tools stay.
        let mut p = progress();
        let test = call("bash", json!({"command": "python3 t.py"}));
        let look = call("bash", json!({"command": "cat t.py"}));
        for _ in 0..3 {
            turn(&mut p, &[(test.clone(), "FAIL\nexit code: 1")]);
            turn(&mut p, &[(look.clone(), "raise SystemExit(1)")]);
            assert!(!p.take_wrap_up());
        }
        // Off.
        let mut p = progress();
        let off = ProgressGuard { wrap_up: false, ..ProgressGuard::default() };
        for _ in 0..3 {
            p.begin_turn(std::slice::from_ref(&run));
            p.see(&run, &json!("1"), false);
            p.end_turn(&off);
            assert!(!p.take_wrap_up());
        }
    }

    #[test]
    fn a_rewrite_with_nothing_run_since_the_change_asks_for_the_check_once_before_the_wrap_up() {
        // A real model wrote pal.py and a broken test_pal.py, never ran it, and rewrote pal.py unchanged: the
        // wrap-up then ended the run with the test broken.
        let write = call("write_file", json!({"path": "pal.py", "content": "x"}));
        let unchanged = "unchanged pal.py (1 bytes; it already had this content)";
        let mut p = progress();
        assert_eq!(turn(&mut p, &[(write.clone(), "created pal.py (1 bytes)")]), None);
        let s = turn(&mut p, &[(write.clone(), unchanged)]).expect("an identical rewrite is no progress");
        assert_eq!(
            s.note,
            "[tooloop: pal.py already has exactly this content: writing it again changes nothing. Nothing has been \
             run since you wrote it. If it is meant to be run or tested, do that now.]"
        );
        assert!(!p.take_wrap_up(), "told to run the check first");
        let s = turn(&mut p, &[(write.clone(), unchanged)]).expect("again");
        assert!(!s.note.contains("Nothing has been run"), "said once: {}", s.note);
        assert!(p.take_wrap_up(), "the second rewrite: done");

        // Something ran since the change: the first rewrite calls for the wrap-up at once.
        let mut p = progress();
        assert_eq!(turn(&mut p, &[(write.clone(), "created pal.py (1 bytes)")]), None);
        assert_eq!(turn(&mut p, &[(call("bash", json!({"command": "python3 pal.py"})), "")]), None);
        let s = turn(&mut p, &[(write.clone(), unchanged)]).expect("no progress");
        assert!(!s.note.contains("Nothing has been run"), "{}", s.note);
        assert!(p.take_wrap_up());

        // With a command tool the note names it; a rewrite of another file than the last one changed names that
        // change; an edit that changes nothing is said as an edit.
        let mut p = progress();
        p.set_command_tool(Some("bash"));
        let test = call("write_file", json!({"path": "test_pal.py", "content": "t"}));
        assert_eq!(turn(&mut p, &[(write.clone(), "created pal.py (1 bytes)")]), None);
        assert_eq!(turn(&mut p, &[(test, "created test_pal.py (1 bytes)")]), None);
        let noop = call("edit_file", json!({"path": "pal.py", "old_text": "x", "new_text": "x"}));
        let s = turn(&mut p, &[(noop, "old_text and new_text are the same: the edit would change nothing")]).unwrap();
        assert_eq!(
            s.note,
            "[tooloop: pal.py already reads like that: this edit changes nothing. Nothing has been run since your \
             last change (write_file(test_pal.py)). If it is meant to be run, run it now with bash.]"
        );
    }

    #[test]
    fn a_command_that_failed_and_passes_now_gets_its_note_once() {
        let test = call("bash", json!({"command": "python3 t.py"}));
        let other = call("bash", json!({"command": "ls"}));
        let mut p = progress();
        assert_eq!(turn(&mut p, &[(other.clone(), "t.py")]), None);
        assert_eq!(p.turn_note(), None, "a first run that passes is no news");
        assert_eq!(turn(&mut p, &[(test.clone(), "F\nexit code: 1")]), None);
        assert_eq!(p.turn_note(), None, "a failure");
        assert_eq!(turn(&mut p, &[(test.clone(), "ok")]), None);
        let note = p.turn_note().expect("failed before, passes now");
        assert!(note.starts_with("[tooloop: bash(python3 t.py) failed the last time it ran and passes now"), "{note}");
        assert_eq!(p.turn_note(), None, "taken");
        assert_eq!(turn(&mut p, &[(test.clone(), "ok, other output")]), None);
        assert_eq!(p.turn_note(), None, "it passed the last time too");
    }

    #[test]
    fn a_failure_the_same_as_before_the_last_change_says_the_change_missed_and_is_not_a_repeat() {
        let test = call("bash", json!({"command": "python3 test_pal.py"}));
        let edit =
            |n: u32| call("edit_file", json!({"path": "test_pal.py", "old_text": format!("a{n}"), "new_text": "b"}));
        let fail = "line 7\nAssertionError\nRan 1 test in 0.001s\nFAILED (failures=1)\nexit code: 1";
        let mut p = progress();
        assert_eq!(turn(&mut p, &[(test.clone(), fail)]), None);
        assert_eq!(p.turn_note(), None, "a first failure");
        assert_eq!(turn(&mut p, &[(edit(9), "edited test_pal.py")]), None);
        // Only the timing differs: the same failure, after the change.
        let again = fail.replace("0.001s", "0.000s");
        assert_eq!(turn(&mut p, &[(test.clone(), &again)]), None, "news, not a stall");
        let note = p.turn_note().expect("the change missed");
        assert_eq!(
            note,
            "[tooloop: bash(python3 test_pal.py) fails exactly as it did before your last change \
             (edit_file(test_pal.py)): that change did not reach the cause. Read where the output says it fails \
             (the file and line), and change that.]"
        );
        assert_eq!(p.turn_note(), None, "taken");
        // Run again with nothing changed in between: a repeat, as before.
        let stall = turn(&mut p, &[(test.clone(), fail)]).expect("a repeat with nothing changed stalls");
        assert!(stall.note.contains("already ran before with exactly the same result"), "{}", stall.note);
        assert_eq!(p.turn_note(), None);
        // A change and a failure that differs: no note.
        assert_eq!(turn(&mut p, &[(edit(7), "edited test_pal.py")]), None);
        assert_eq!(turn(&mut p, &[(test.clone(), "line 8\nexit code: 1")]), None);
        assert_eq!(p.turn_note(), None, "the output changed");
        // In one turn with the change (the runaway guard's path for the same call as the turn before).
        p.begin_turn(&[edit(8), test.clone()]);
        p.see(&edit(8), &json!("edited test_pal.py"), false);
        assert_eq!(p.again(&test, &json!("line 8\nexit code: 1"), false), None, "no repeat note");
        assert_eq!(p.end_turn(&ProgressGuard::default()), None);
        assert!(p.turn_note().is_some_and(|n| n.contains("fails exactly as it did before your last change")));
    }

    #[test]
    fn a_failure_in_a_file_the_run_wrote_is_pointed_at_with_its_line() {
        let changed: HashSet<String> = ["test_pal.py".to_string(), "src/calc.rs".to_string()].into();
        let traceback = "Traceback (most recent call last):\n  File \"/usr/lib/python3/unittest/case.py\", line 57, in x\n    \
                         foo()\n  File \"/tmp/b/ws/test_pal.py\", line 7, in test_is_palindrome\n    \
                         self.assertTrue(is_palindrome('hello'))\nAssertionError: False is not true\nexit code: 1";
        let code = Some("self.assertTrue(is_palindrome('hello'))".to_string());
        assert_eq!(failure_site(traceback, &changed), Some(Site { path: "test_pal.py".into(), line: 7, code }));
        // A syntax error's frame quotes the line too; one without a code line has none.
        let syntax = "  File \"/w/test_pal.py\", line 9\n    self.assertFalse(x('p')\n       ^\nSyntaxError: '(' was never closed";
        assert_eq!(
            failure_site(syntax, &changed).map(|s| (s.line, s.code)),
            Some((9, Some("self.assertFalse(x('p')".into())))
        );
        let bare = "  File \"test_pal.py\", line 3\nNameError";
        assert_eq!(failure_site(bare, &changed).map(|s| (s.line, s.code)), Some((3, None)));
        // A compiler's path:line:col.
        let rustc = "error[E0308]: mismatched types\n  --> src/calc.rs:12:5\nexit code: 101";
        assert_eq!(failure_site(rustc, &changed).map(|s| (s.path, s.line)), Some(("src/calc.rs".into(), 12)));
        // Frames in files the run did not write point nowhere.
        let theirs =
            "  File \"/usr/lib/python3/json/decoder.py\", line 355, in raw_decode\n    raise x\nlib.py:3: boom";
        assert_eq!(failure_site(theirs, &changed), None);
        assert_eq!(failure_site("", &HashSet::new()), None);
    }

    #[test]
    fn the_same_failure_after_a_change_shows_the_line_of_the_models_own_file_it_points_at() {
        let test = call("bash", json!({"command": "python3 test_pal.py"}));
        let fail = "  File \"/tmp/ws/test_pal.py\", line 7, in t\n    self.assertTrue(p('hello'))\nAssertionError\nexit code: 1";
        let mut p = progress();
        assert_eq!(
            turn(&mut p, &[(call("write_file", json!({"path": "test_pal.py", "content": "a"})), "created")]),
            None
        );
        assert_eq!(turn(&mut p, &[(test.clone(), fail)]), None);
        assert_eq!(
            turn(
                &mut p,
                &[(call("edit_file", json!({"path": "test_pal.py", "old_text": "x", "new_text": "y"})), "edited")]
            ),
            None
        );
        assert_eq!(turn(&mut p, &[(test.clone(), fail)]), None);
        assert_eq!(
            p.turn_note().as_deref(),
            Some(
                "[tooloop: bash(python3 test_pal.py) fails exactly as it did before your last change \
                 (edit_file(test_pal.py)): that change did not reach the cause. The output points at line 7 of \
                 test_pal.py, a file you wrote or changed in this run:\n     7\tself.assertTrue(p('hello'))\nCheck \
                 whether that line is right, and fix the line that is wrong.]"
            )
        );
    }

    #[test]
    fn a_repeat_before_any_file_was_written_says_so_not_if_the_task_is_done_answer() {
        // A real model asked to change three files ran `python3 main.py` (the task's last words), ran it again,
        // heard "if the task is done, answer now" and answered that the task was already done.
        let run = call("bash", json!({"command": "python3 main.py"}));
        let mut p = progress();
        assert_eq!(turn(&mut p, &[(run.clone(), "Total: 12.50")]), None);
        p.begin_turn(std::slice::from_ref(&run));
        let note = p.again(&run, &json!("Total: 12.50"), false).expect("the same as the turn before");
        assert!(!note.contains("If the task is done"), "{note}");
        assert!(note.contains("No file has been written or edited in this run yet"), "{note}");
        p.end_turn(&ProgressGuard::default());
        let stall = turn(&mut p, &[(run.clone(), "Total: 12.50")]).expect("a stall");
        assert!(stall.note.contains("if the task asks for a change, make it now"), "{}", stall.note);
    }

    #[test]
    fn a_repeat_after_a_failure_says_what_failed_not_if_the_task_is_done_answer() {
        // A real model wrote hello.py with echo (a syntax error), saw python fail, and wrote it the same way again.
        let echo = call("bash", json!({"command": "echo 'Hello, world!' > hello.py"}));
        let run = call("bash", json!({"command": "python hello.py"}));
        let mut p = progress();
        assert_eq!(turn(&mut p, &[(echo.clone(), "(no output)")]), None);
        assert_eq!(turn(&mut p, &[(run.clone(), "SyntaxError: invalid syntax\nexit code: 1")]), None);
        let stall = turn(&mut p, &[(echo.clone(), "(no output)")]).expect("a repeat");
        assert_eq!(
            stall.note,
            "[tooloop: no progress: bash(echo 'Hello, world!' > hello.py) already ran before with exactly the same \
             output and it passed (exit code 0). bash(python hello.py) failed the last time it ran: doing this \
             again will not change that. If that failure matters, change what causes it.]"
        );
        // With nothing failing and a file written, the note still invites the answer.
        let write = call("write_file", json!({"path": "hello.py", "content": "print('Hello, world!')"}));
        let mut q = progress();
        assert_eq!(turn(&mut q, &[(write, "created hello.py (22 bytes)")]), None);
        assert_eq!(turn(&mut q, &[(run.clone(), "Hello, world!")]), None);
        let stall = turn(&mut q, &[(run.clone(), "Hello, world!")]).expect("a repeat");
        assert!(stall.note.contains("If the task is done, answer now"), "{}", stall.note);
    }

    #[test]
    fn timings_are_masked_for_comparing_and_nothing_else_is() {
        for (text, masked) in [
            ("Ran 1 test in 0.001s", "Ran 1 test in #s"),
            ("1 failed in 0.03s; took 12.5ms.", "1 failed in #s; took #s."),
            ("finished in 0.00s\n", "finished in #s\n"),
            ("0.5s", "#s"),
            (
                "5s 10 tests 1.5 3.2sec v1.2s x0.1s 2.0seconds é1.0s",
                "5s 10 tests 1.5 3.2sec v1.2s x0.1s 2.0seconds é#s",
            ),
            ("", ""),
        ] {
            assert_eq!(mask_timings(text), masked, "{text:?}");
        }
    }

    #[test]
    fn an_edit_that_changes_nothing_after_the_models_own_fix_is_a_rewrite_of_the_same() {
        // A real model fixed calc.py with edit_file, then sent edit_file with old_text equal to new_text until
        // the runaway guard stopped it.
        let fix = call("edit_file", json!({"path": "calc.py", "old_text": "a - b", "new_text": "a + b"}));
        let same = call("edit_file", json!({"path": "calc.py", "old_text": "a + b", "new_text": "a + b"}));
        let refused = json!("old_text and new_text are the same: the edit would change nothing");
        let mut p = progress();
        p.begin_turn(std::slice::from_ref(&fix));
        p.see(&fix, &json!("edited calc.py: replaced 1 occurrence"), false);
        assert_eq!(p.end_turn(&ProgressGuard::default()), None);
        p.begin_turn(std::slice::from_ref(&same));
        p.see(&same, &refused, true);
        let s = p.end_turn(&ProgressGuard::default()).expect("an edit that changes nothing is no progress");
        assert!(s.note.contains("calc.py already reads like that: this edit changes nothing. Nothing has been run"));
        assert!(!p.take_wrap_up(), "nothing ran since the fix: asked to run it first");
        // The same call in the next turn is the runaway guard's to count, but it calls for the wrap-up.
        p.begin_turn(std::slice::from_ref(&same));
        let note = p.again(&same, &refused, true).expect("told at once");
        assert!(note.contains("would change nothing"), "{note}");
        assert_eq!(p.end_turn(&ProgressGuard::default()), None);
        assert!(p.take_wrap_up(), "the model is done but does not say so");
        // An edit with old_text equal to new_text before any change of the run's own is not a rewrite.
        let mut p = progress();
        p.begin_turn(std::slice::from_ref(&same));
        p.see(&same, &refused, true);
        assert!(p.end_turn(&ProgressGuard::default()).is_some());
        assert!(!p.take_wrap_up());
    }

    #[test]
    fn the_wrap_up_request_has_tools_off_and_asks_for_the_answer_unless_the_host_chose_a_tool() {
        let result = |text: &str| crate::types::Message {
            role: crate::types::Role::User,
            content: vec![ContentBlock::ToolResult(crate::types::ToolResultBlock {
                tool_use_id: "t".into(),
                content: json!(text),
                is_error: None,
                extra: Default::default(),
            })],
        };
        let mut r =
            Request { messages: vec![crate::types::Message::user("go"), result("1")].into(), ..Default::default() };
        let before = r.clone();
        wrap_up(&mut r, false, false);
        assert_eq!(r, before);
        wrap_up(&mut r, true, false);
        assert_eq!(r.tool_choice, Some(json!({"type": "none"})));
        let ContentBlock::ToolResult(t) = &r.messages[1].content[0] else { panic!() };
        assert_eq!(t.content, json!(format!("1\n\n{WRAP_UP_NOTE}")));
        // output_schema's forced final-answer tool, or a host's own choice, is left alone.
        let mut r = before.clone();
        r.tool_choice = Some(json!({"type": "tool", "name": "final_answer"}));
        let chosen = r.clone();
        wrap_up(&mut r, true, false);
        assert_eq!(r, chosen);
    }

    #[test]
    fn one_new_call_in_a_turn_is_progress() {
        let mut p = progress();
        let run = call("bash", json!({"command": "ls"}));
        assert_eq!(turn(&mut p, &[(run.clone(), "a")]), None);
        let read = call("read_file", json!({"path": "a"}));
        assert_eq!(turn(&mut p, &[(run, "a"), (read, "text")]), None);
    }

    #[test]
    fn a_turn_stuck_on_a_failure_calls_for_the_unstick_once_and_a_passing_repeat_does_not() {
        // The moment of a real run: the test fails at line 7, and the model sends an edit of line 7 whose old
        // and new text are the same.
        let test = call("bash", json!({"command": "python3 test_pal.py"}));
        let failing = "AssertionError: False is not true\nexit code: 1";
        let noop = call("edit_file", json!({"path": "test_pal.py", "old_text": "x", "new_text": "x"}));
        let mut p = progress();
        assert_eq!(
            turn(&mut p, &[(call("write_file", json!({"path": "test_pal.py", "content": "x"})), "created")]),
            None
        );
        assert_eq!(turn(&mut p, &[(test.clone(), failing)]), None);
        assert!(!p.take_unstick(), "a first failure is no repeat");
        assert!(turn(&mut p, &[(noop, "old_text and new_text are the same: the edit would change nothing")]).is_some());
        assert!(p.take_unstick(), "a turn of nothing new with the test failing");
        assert!(!p.take_unstick(), "once for each stuck turn");
        // The same failing call again, in the next turn (the runaway guard's to count): stuck too.
        p.begin_turn(std::slice::from_ref(&test));
        assert!(p.again(&test, &json!(failing), false).is_some());
        p.end_turn(&ProgressGuard::default());
        assert!(p.take_unstick());
        // A passing check run again is done, not stuck.
        let mut p = progress();
        let ok = call("bash", json!({"command": "python3 hello.py"}));
        assert_eq!(turn(&mut p, &[(ok.clone(), "hi")]), None);
        assert!(turn(&mut p, &[(ok.clone(), "hi")]).is_some());
        assert!(!p.take_unstick());
    }

    #[test]
    fn unstick_raises_a_temperature_the_request_sets_and_nothing_else() {
        let mut r = Request { temperature: Some(0.2), ..Request::default() };
        unstick(&mut r, 0.8);
        assert_eq!(r.temperature, Some(0.8));
        let mut r = Request { temperature: Some(1.0), ..Request::default() };
        unstick(&mut r, 0.8);
        assert_eq!(r.temperature, Some(1.0), "never lowered");
        let mut r = Request::default();
        unstick(&mut r, 0.8);
        assert_eq!(r.temperature, None, "left to the API");
        let mut r = Request::default();
        r.extra.insert("temperature".into(), json!(0.2));
        unstick(&mut r, 0.8);
        assert_eq!((r.extra["temperature"].clone(), r.temperature), (json!(0.8), None));
    }

    #[test]
    fn a_repeat_of_the_turn_before_while_a_failure_is_outstanding_names_it_not_if_done_answer() {
        // A real model wrote hello.py with `echo`, saw `python3 hello.py` fail, and sent the same `echo` in two
        // turns more; the second heard "if the task is done, answer now", and the model answered it was done.
        let echo = call("bash", json!({"command": "echo 'Hello, world!' > hello.py"}));
        let run = call("bash", json!({"command": "python3 hello.py"}));
        let mut p = progress();
        assert_eq!(turn(&mut p, &[(echo.clone(), "(no output)")]), None);
        assert_eq!(turn(&mut p, &[(run.clone(), "SyntaxError: invalid syntax\nexit code: 1")]), None);
        let s = turn(&mut p, &[(echo.clone(), "(no output)")]).expect("a repeat");
        assert!(s.note.contains("bash(python3 hello.py) failed the last time it ran"), "{}", s.note);
        p.begin_turn(std::slice::from_ref(&echo));
        let note = p.again(&echo, &json!("(no output)"), false).expect("the same as the turn before");
        assert!(
            note.contains("bash(python3 hello.py) failed the last time it ran: doing this again will not"),
            "{note}"
        );
        assert!(!note.contains("If the task is done"), "{note}");
        assert!(p.outstanding_failure().is_some(), "what the runaway guard's refusal says too");
        // The failing call itself, the same again: named.
        p.end_turn(&ProgressGuard::default());
        p.begin_turn(std::slice::from_ref(&run));
        let note = p.again(&run, &json!("SyntaxError: invalid syntax\nexit code: 1"), false).unwrap();
        assert!(note.contains("bash(python3 hello.py) failed the last time it ran"), "{note}");
        // Nothing failing, a file written: the usual words.
        let write = call("write_file", json!({"path": "hello.py", "content": "print('hi')"}));
        let mut p = progress();
        assert_eq!(turn(&mut p, &[(write, "created hello.py (11 bytes)")]), None);
        assert_eq!(turn(&mut p, &[(run.clone(), "hi")]), None);
        p.begin_turn(std::slice::from_ref(&run));
        assert!(p.again(&run, &json!("hi"), false).unwrap().contains("If the task is done, answer now"));
        assert_eq!(p.outstanding_failure(), None);
    }

    #[test]
    fn a_call_that_fails_again_the_same_way_is_never_told_if_the_task_is_done_answer() {
        // A real model's edit of calc.py matched nothing three times; the third heard "if the task is done,
        // answer now", and it answered "The task is done." with the bug in place.
        let edit = call("edit_file", json!({"path": "calc.py", "old_text": "return -1", "new_text": "return 5"}));
        let err = json!("old_text was not found in 'calc.py'.");
        let want = "[tooloop: no progress: edit_file(calc.py) failed again with exactly the same error, and made as \
                    it is it will keep failing: change its input or use another tool.]";
        let mut p = progress();
        let one = std::slice::from_ref(&edit);
        p.begin_turn(one);
        p.see(&edit, &err, true);
        assert_eq!(p.end_turn(&ProgressGuard::default()), None, "a first error is news");
        p.begin_turn(one);
        assert_eq!(p.again(&edit, &err, true).as_deref(), Some(want), "the same call as the turn before");
        assert!(p.failed_last_time(&edit), "what the runaway guard's refusal of it says");
        p.end_turn(&ProgressGuard::default());
        // Another call in between: the stalled turn's note.
        let read = call("read_file", json!({"path": "calc.py"}));
        p.begin_turn(std::slice::from_ref(&read));
        p.see(&read, &json!("def add(a, b):"), false);
        p.end_turn(&ProgressGuard::default());
        p.begin_turn(one);
        p.see(&edit, &err, true);
        assert_eq!(p.end_turn(&ProgressGuard::default()).map(|s| s.note).as_deref(), Some(want));
        assert!(!p.failed_last_time(&read));
    }

    #[test]
    fn the_note_that_asks_for_the_run_comes_again_after_each_new_change() {
        let pal = call("write_file", json!({"path": "pal.py", "content": "x"}));
        let test = call("write_file", json!({"path": "test_pal.py", "content": "t"}));
        let run = call("bash", json!({"command": "python3 test_pal.py"}));
        let unchanged = "unchanged pal.py (1 bytes; it already had this content)";
        let mut p = progress();
        p.set_command_tool(Some("bash"));
        assert_eq!(turn(&mut p, &[(pal.clone(), "created pal.py (1 bytes)")]), None);
        let s = turn(&mut p, &[(pal.clone(), unchanged)]).expect("a rewrite");
        assert!(s.note.contains("Nothing has been run since you wrote it"), "{}", s.note);
        assert_eq!(turn(&mut p, &[(run.clone(), "Traceback\nexit code: 1")]), None);
        assert_eq!(turn(&mut p, &[(test.clone(), "created test_pal.py (1 bytes)")]), None);
        let s = turn(&mut p, &[(pal.clone(), unchanged)]).expect("a rewrite after a new change");
        assert_eq!(
            s.note,
            "[tooloop: pal.py already has exactly this content: writing it again changes nothing. Nothing has been \
             run since your last change (write_file(test_pal.py)). If it is meant to be run, run it now with bash.]"
        );
        assert!(!p.take_wrap_up(), "the wrap-up waits for the run");
        // Without a change in between: not again.
        let s = turn(&mut p, &[(pal, unchanged)]).expect("again");
        assert!(!s.note.contains("Nothing has been run"), "{}", s.note);
    }

    #[test]
    fn an_edit_that_changes_nothing_while_a_check_fails_proposes_writing_the_file_whole() {
        // A real model's test had an unclosed parenthesis on line 9; it sent line 9 back unchanged as an edit,
        // again and again, and ran the failing test in between.
        let write = call("write_file", json!({"path": "test_pal.py", "content": "x"}));
        let run = call("bash", json!({"command": "python3 test_pal.py"}));
        let noop = call("edit_file", json!({"path": "test_pal.py", "old_text": "f(1", "new_text": "f(1"}));
        let same = "old_text and new_text are the same: the edit would change nothing";
        let failed = "SyntaxError: '(' was never closed\nexit code: 1";
        let mut p = progress();
        p.set_write_tool(Some("write_file"));
        assert_eq!(turn(&mut p, &[(write.clone(), "created test_pal.py (1 bytes)")]), None);
        assert_eq!(turn(&mut p, &[(run.clone(), failed)]), None);
        let s = turn(&mut p, &[(noop.clone(), same)]).expect("an edit that changes nothing");
        assert_eq!(
            s.note,
            "[tooloop: no progress: edit_file(test_pal.py) would change nothing: its old_text and new_text are the \
             same. bash(python3 test_pal.py) failed the last time it ran. If you cannot say the fix as one edit, \
             write the whole of test_pal.py again with write_file, with the error fixed.]"
        );
        assert!(p.outstanding_failure().unwrap().contains("write the whole of test_pal.py"), "the refusal's words");
        // Written whole as proposed, with the same content: the usual words again.
        let _ = turn(&mut p, &[(write.clone(), "unchanged test_pal.py (1 bytes; it already had this content)")]);
        assert!(p.outstanding_failure().unwrap().ends_with("If that failure matters, change what causes it."));
        let _ = turn(&mut p, &[(noop.clone(), same)]);
        assert!(p.outstanding_failure().unwrap().contains("write the whole of test_pal.py"), "a new no-op edit");
        // A change forgets it.
        let fixed = call("write_file", json!({"path": "test_pal.py", "content": "y"}));
        assert_eq!(turn(&mut p, &[(fixed, "wrote test_pal.py (1 bytes)")]), None);
        assert_eq!(turn(&mut p, &[(run.clone(), failed)]), None);
        assert!(p.outstanding_failure().unwrap().ends_with("If that failure matters, change what causes it."));
        // An agent without write_file: the usual words.
        let mut p = progress();
        assert_eq!(turn(&mut p, &[(write, "created test_pal.py (1 bytes)")]), None);
        assert_eq!(turn(&mut p, &[(run, failed)]), None);
        let s = turn(&mut p, &[(noop, same)]).expect("an edit that changes nothing");
        assert!(
            s.note.ends_with("doing this again will not change that. If that failure matters, change what causes it.]")
        );
    }
}
