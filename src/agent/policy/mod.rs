//! Policies: what judges a run, called by the loop at fixed points of each turn. The loop (`run_loop.rs`,
//! `dispatch.rs`) is the mechanism — it sends requests, runs tools, keeps the store; a [`Policy`] is a guard
//! or a rule a host asked for by option (the repetition guard, the spend cap, output validation, the check,
//! a hook, …), told what happens and answering what the loop should do next ([`Flow`], [`CallVerdict`]).
//! A new guard is a new file here and one line in [`Policies::for_run`], not a branch in the loop.
//!
//! # The points of a turn
//! - `run_start` — once, before the run's first request.
//! - `before_request` — before a turn's request is made: may end the run, or make the turn a wrap-up
//!   (tools off; see [`TurnPlan`]).
//! - `shape_request` — the turn's request, built: may change it (compaction, temperature) or end the run.
//! - `before_send` — each request as it goes out (a request sent again after a fallback or an overflow too).
//! - `after_response` — the model's turn is in the store: may end the run or send the model back.
//! - `before_tools` — the turn's calls are about to be checked and run.
//! - `call_seen` — each call, as it is announced, before any check.
//! - `before_tool` — each call not already answered by the loop: run it, refuse it, or (the permission
//!   policy) decide it.
//! - `after_tool` — each call's result, before it is stored: may change what the model reads.
//! - `after_tools` — every call of the turn has its result: may end the run or give it a wrap-up turn.
//! - `at_stop` — the model answered without calls and the run would end: may send it back, once told why.
//! - `run_end` — the run ended, whichever way (an error too).
//!
//! Between the points the loop answers what no policy judges: a turn cut off (max_tokens, the window, a
//! refusal) has its calls answered "not run" before `after_response`; a call after one that aborted the run
//! or after a failed hook, after a policy stopped the run, past the per-turn cap, with an input that is not
//! an object, or in a cancelled run is answered by the loop before `before_tool`, and no policy sees it.
//!
//! # The order
//! One order for every point, fixed here ([`Policies::for_run`]); a policy that does nothing at a point is
//! passed over. At a point that decides ([`Flow`], [`CallVerdict`]) the first policy that does not say
//! `Go` has the last word: the policies after it are not asked.
//!
//! 1. `compaction` — compacts before a request that would pass the threshold (before anything judges the
//!    request, so the judges see what is sent).
//! 2. `after_tool hook` — the host's hook sees, and may replace, the tool's own result first.
//! 3. `result fit` — a result is fitted to the provider's size limit and the window's share before any note is
//!    appended (a note is never cut off).
//! 4. `repetition` — the runaway and progress guards and their wrap-up turn with tools off (`repeat_guard`,
//!    `progress_guard`); a wrap-up turn is past the turn cap, so this comes before it.
//! 5. `draft` — `draft_first`: the run's first request goes without tools, asking for whole files (after
//!    compaction, so it shapes what is sent; before the check, so a draft with no file is asked again first).
//! 6. `turn cap` — `max_turns` (with a check, the check is the verdict at the cap).
//! 7. `spend cap` — `max_cost_usd` and a batch's budget: the next request must fit.
//! 8. `output` — `output_schema`: a structured answer is validated, the model corrected.
//! 9. `check` — `check`, `expect_changes`, `verify_claims` (issue 41): the check's files are read-only for the
//!    run, and an answer is held to the check and the run's record.
//! 10. `permission` — the permission rules, the `before_tool` hook (its new input judged by the rules again),
//!     then the permission callable or a pause for the host: the last word on a call.
//! 11. `on_stop hook` — the host may keep a run going that every policy before it let end.
//! 12. `before_request hook` — the host sees each request as it goes out, as the policies shaped it.
//! 13. `todo reminder` — a reminder of an unfinished todo list, last on the turn's last result.
//!
//! So: before a request, repetition → draft → turn cap → spend cap; shaping it, compaction → repetition
//! (temperature) → draft; after a response, repetition → output; before a call, repetition → check →
//! permission; after a call, after_tool hook → result fit → repetition → todo reminder; at the stop, draft →
//! output → check → on_stop hook.
//!
//! # Which are on
//! The options build the set ([`Policies::for_run`], at each run's start): a policy is in it when its option
//! is set — the library's defaults are neutral. The ones always there act only on what the host gave the
//! agent (its hooks, rules, permission callable, a batch's ledger) or are the limits every request keeps
//! (the result fit, compaction when `compaction` is on).
//!
//! Must never: run a model's tool call or send a model turn itself (that is the loop's), or write the store
//! beyond what its option is for — a note or a correction the model reads, the result of a call it refused,
//! compaction's record and summary request, the check's command.

mod check;
mod compaction;
mod draft;
mod hooks;
mod output;
mod permission;
mod repetition;
mod result_fit;
mod spend;
mod todo;
mod turn_cap;

use super::*;

pub(super) use draft::as_draft;
pub(super) use permission::{Gate, decided};

/// What the loop does after a point.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Flow {
    /// Nothing to say: the next policy, then the loop goes on.
    Go,
    /// Another model turn: the policy told the model why (a note or a correction in the store).
    Again,
    /// The run ends here (normally; the policy set the result's stop reason).
    Stop,
}

/// What a policy says about a call before it runs.
pub(super) enum CallVerdict {
    /// Nothing to say: the next policy.
    Go,
    /// Not run: the model reads `result` (an error result). `denied`: refused as a permission is; `stop`: the
    /// run stops after this turn, and its later calls are answered with this instead of running.
    Refuse { result: String, denied: bool, stop: Option<&'static str> },
    /// The permission decision: the last word.
    Decided(Gate),
}

/// What a policy is handed at a point: the agent, the run so far and the run's shared state.
pub(super) struct Cx<'a> {
    pub(super) agent: &'a Agent,
    pub(super) run: &'a mut RunResult,
    pub(super) state: &'a mut RunState,
    pub(super) cancel: &'a CancelToken,
    /// Whether a call that would go to the permission callable waits for the host instead.
    pub(super) pausing: bool,
    pub(super) on_event: &'a mut dyn FnMut(&Event),
}

/// A turn before its request is made.
#[derive(Default)]
pub(super) struct TurnPlan {
    /// The wrap-up: this request asks for the answer (`.0`), and goes without tools (`.1`); see
    /// [`crate::progress::wrap_up`].
    pub(super) wrap_up: (bool, bool),
    /// The run's first request, sent without tools for whole files in fenced blocks (`draft.rs`).
    pub(super) draft: bool,
    /// A guard's last request (its answer with tools off): past `max_turns` too.
    pub(super) past_caps: bool,
    /// The request's estimated tokens (set once it is built).
    pub(super) tokens: u64,
    /// The request's size in bytes when it was measured (then the answer's usage calibrates the estimate).
    pub(super) measured: Option<u64>,
}

/// A model turn's answer, as `after_response` sees it.
pub(super) struct Answer<'a> {
    pub(super) message: &'a MessageResponse,
    pub(super) calls: &'a [ToolUseBlock],
    pub(super) bad_inputs: &'a HashMap<String, Value>,
    /// Whether the turn was the progress guard's wrap-up.
    pub(super) wrap_up: bool,
    /// The turn was cut off (max_tokens, the window) or refused: its calls were answered "not run" and the run
    /// ends after this point.
    pub(super) cut_off: bool,
    /// The turn called the final-answer tool of `output_schema`.
    pub(super) final_answer: bool,
}

/// A call's result, as `after_tool` sees it.
pub(super) struct CallDone<'a> {
    pub(super) call: &'a ToolUseBlock,
    /// Its place among the turn's calls.
    pub(super) index: usize,
    /// Whether it ran (else a policy or the loop answered it).
    pub(super) ran: bool,
    /// Whether it was refused (a rule, a hook, the permission callable, the check's files).
    pub(super) denied: bool,
    /// Whether it is the turn's last call.
    pub(super) last: bool,
    /// Whether a host's hook failed earlier in the turn (the run ends after it; no hook is called again).
    pub(super) hook_failed: bool,
}

/// A guard or a rule, called at the points of a turn (see the module docs). Each point does nothing unless
/// a policy says otherwise.
#[allow(unused_variables)]
pub(super) trait Policy: Send {
    /// The policy's name, as the module docs list it (what the tests of the set's order read).
    #[cfg_attr(not(test), allow(dead_code))]
    fn name(&self) -> &'static str;
    fn run_start(&mut self, cx: &mut Cx<'_>) {}
    fn before_request(&mut self, cx: &mut Cx<'_>, plan: &mut TurnPlan) -> Result<Flow> {
        Ok(Flow::Go)
    }
    fn shape_request(&mut self, cx: &mut Cx<'_>, plan: &mut TurnPlan, request: &mut Request) -> Result<Flow> {
        Ok(Flow::Go)
    }
    fn before_send(&mut self, cx: &mut Cx<'_>, request: &Request) -> Result<()> {
        Ok(())
    }
    fn after_response(&mut self, cx: &mut Cx<'_>, answer: &Answer<'_>) -> Result<Flow> {
        Ok(Flow::Go)
    }
    fn before_tools(&mut self, cx: &mut Cx<'_>, calls: &[ToolUseBlock]) {}
    fn call_seen(&mut self, cx: &mut Cx<'_>, index: usize, call: &ToolUseBlock) {}
    fn before_tool(&mut self, cx: &mut Cx<'_>, index: usize, call: &ToolUseBlock) -> CallVerdict {
        CallVerdict::Go
    }
    /// `Err`: a host's hook failed — the loop goes on with the turn and ends the run after it.
    fn after_tool(&mut self, cx: &mut Cx<'_>, done: &CallDone<'_>, outcome: &mut CallOutcome) -> Result<()> {
        Ok(())
    }
    fn after_tools(&mut self, cx: &mut Cx<'_>) -> Flow {
        Flow::Go
    }
    fn at_stop(&mut self, cx: &mut Cx<'_>) -> Result<Flow> {
        Ok(Flow::Go)
    }
    fn run_end(&mut self, cx: &mut Cx<'_>) {}
}

/// A run's policies, in the one order (see the module docs).
pub(super) struct Policies {
    list: Vec<Box<dyn Policy>>,
    begun: bool,
}

impl Policies {
    /// The set the agent's options ask for, in the documented order.
    pub(super) fn for_run(agent: &Agent) -> Policies {
        let c = agent.config();
        let mut list: Vec<Box<dyn Policy>> = Vec::new();
        if c.compaction {
            list.push(Box::new(compaction::Compaction));
        }
        list.push(Box::new(hooks::AfterToolHook::default()));
        list.push(Box::new(result_fit::ResultFit::default()));
        if c.repeat_guard.is_some() || c.progress_guard.is_some() {
            list.push(Box::new(repetition::Repetition::default()));
        }
        if c.draft_first {
            list.push(Box::new(draft::Draft::default()));
        }
        if c.max_turns.is_some() {
            list.push(Box::new(turn_cap::TurnCap));
        }
        // Always: a batch's ledger may cap this agent's requests without `max_cost_usd`.
        list.push(Box::new(spend::SpendCap));
        if c.output.is_some() {
            list.push(Box::new(output::Output::default()));
        }
        // A child agent has no check of its own, but its parent's files stay read-only to it.
        if c.check.is_some() || c.expect_changes || c.verify_claims || !agent.tools.run_protected().get().is_empty() {
            list.push(Box::new(check::Check));
        }
        list.push(Box::new(permission::PermissionPolicy::default()));
        list.push(Box::new(hooks::OnStopHook));
        list.push(Box::new(hooks::BeforeRequestHook));
        if c.todo_reminder_after.is_some() {
            list.push(Box::new(todo::TodoReminder::default()));
        }
        Policies { list, begun: false }
    }

    /// The policies' names, in order.
    #[cfg(test)]
    pub(super) fn names(&self) -> Vec<&'static str> {
        self.list.iter().map(|p| p.name()).collect()
    }

    /// The first word that is not `Go` (the policies after it are not asked).
    fn first(&mut self, mut f: impl FnMut(&mut dyn Policy) -> Result<Flow>) -> Result<Flow> {
        for p in &mut self.list {
            match f(p.as_mut())? {
                Flow::Go => {}
                other => return Ok(other),
            }
        }
        Ok(Flow::Go)
    }

    /// `run_start`, once per run.
    pub(super) fn run_start(&mut self, cx: &mut Cx<'_>) {
        if std::mem::replace(&mut self.begun, true) {
            return;
        }
        self.list.iter_mut().for_each(|p| p.run_start(cx));
    }

    pub(super) fn before_request(&mut self, cx: &mut Cx<'_>, plan: &mut TurnPlan) -> Result<Flow> {
        self.first(|p| p.before_request(cx, plan))
    }

    pub(super) fn shape_request(
        &mut self,
        cx: &mut Cx<'_>,
        plan: &mut TurnPlan,
        request: &mut Request,
    ) -> Result<Flow> {
        self.first(|p| p.shape_request(cx, plan, request))
    }

    pub(super) fn before_send(&mut self, cx: &mut Cx<'_>, request: &Request) -> Result<()> {
        self.list.iter_mut().try_for_each(|p| p.before_send(cx, request))
    }

    pub(super) fn after_response(&mut self, cx: &mut Cx<'_>, answer: &Answer<'_>) -> Result<Flow> {
        self.first(|p| p.after_response(cx, answer))
    }

    pub(super) fn before_tools(&mut self, cx: &mut Cx<'_>, calls: &[ToolUseBlock]) {
        self.list.iter_mut().for_each(|p| p.before_tools(cx, calls));
    }

    pub(super) fn call_seen(&mut self, cx: &mut Cx<'_>, index: usize, call: &ToolUseBlock) {
        self.list.iter_mut().for_each(|p| p.call_seen(cx, index, call));
    }

    pub(super) fn before_tool(&mut self, cx: &mut Cx<'_>, index: usize, call: &ToolUseBlock) -> CallVerdict {
        for p in &mut self.list {
            match p.before_tool(cx, index, call) {
                CallVerdict::Go => {}
                other => return other,
            }
        }
        // No permission policy (never: it is always in the set) would leave the call to run.
        CallVerdict::Decided(Gate::Run(call.input.clone(), false))
    }

    /// Every policy's `after_tool`; the first hook failure, if any (the others still see the result).
    pub(super) fn after_tool(
        &mut self,
        cx: &mut Cx<'_>,
        done: &CallDone<'_>,
        outcome: &mut CallOutcome,
    ) -> Option<Error> {
        let mut failed = None;
        for p in &mut self.list {
            if let Err(e) = p.after_tool(cx, done, outcome) {
                failed.get_or_insert(e);
            }
        }
        failed
    }

    pub(super) fn after_tools(&mut self, cx: &mut Cx<'_>) -> Flow {
        self.first(|p| Ok(p.after_tools(cx))).unwrap_or(Flow::Go)
    }

    pub(super) fn at_stop(&mut self, cx: &mut Cx<'_>) -> Result<Flow> {
        self.first(|p| p.at_stop(cx))
    }

    pub(super) fn run_end(&mut self, cx: &mut Cx<'_>) {
        self.list.iter_mut().for_each(|p| p.run_end(cx));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn agent(config: AgentConfig) -> Agent {
        let http = crate::http::HttpClient::new(crate::http::HttpConfig::default());
        let provider: Arc<dyn Provider> = Arc::new(crate::provider::anthropic::AnthropicProvider::new(
            http,
            "http://127.0.0.1:9".into(),
            None,
            Vec::new(),
        ));
        Agent::new(provider, config)
    }

    #[test]
    fn the_default_set_holds_only_what_acts_on_what_the_host_gave() {
        let names = Policies::for_run(&agent(AgentConfig::default())).names();
        assert_eq!(
            names,
            [
                "compaction",
                "after_tool hook",
                "result fit",
                "turn cap",
                "spend cap",
                "permission",
                "on_stop hook",
                "before_request hook",
                "todo reminder"
            ]
        );
    }

    #[test]
    fn options_add_their_policies_in_the_one_order() {
        let config = AgentConfig {
            progress_guard: Some(Default::default()),
            output: Some(crate::output::OutputSpec::new(serde_json::json!({"type": "object"}))),
            expect_changes: true,
            draft_first: true,
            compaction: false,
            max_turns: None,
            todo_reminder_after: None,
            ..AgentConfig::default()
        };
        let names = Policies::for_run(&agent(config)).names();
        assert_eq!(
            names,
            [
                "after_tool hook",
                "result fit",
                "repetition",
                "draft",
                "spend cap",
                "output",
                "check",
                "permission",
                "on_stop hook",
                "before_request hook"
            ]
        );
    }
}
