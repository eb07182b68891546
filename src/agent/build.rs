//! The one way an agent is put together ([`Agent::build`]), used for the agents the options describe and
//! for the child agents a `task` call runs (the run of a child is here too).

use super::*;

/// What [`Agent::build`] puts into a new agent besides its provider and config.
pub(crate) struct Parts<'a> {
    /// The built-in coding tools, registered first.
    pub builtin: Option<crate::builtin::BuiltinOptions>,
    /// Further tools, registered after them in this order.
    pub tools: Vec<crate::tools::Tool>,
    /// The sandbox (mode, network) its `bash` runs in, when it has the built-in one: the model is told.
    pub sandbox: Option<(crate::builtin::SandboxMode, bool)>,
    /// A registry whose secrets the new agent's results must not show either (a child's parent).
    pub secrets: Option<&'a ToolRegistry>,
}

impl Agent {
    /// The one way an agent is put together: [`AgentOptions::build`](crate::options::AgentOptions::build)
    /// builds its agents with it, and a `task` call its child agents. The built-in tools come first (in
    /// their sandbox mode), then `tools`; when the agent ends up with a `bash`, the model is told what its
    /// sandbox allows.
    pub(crate) fn build(provider: Arc<dyn Provider>, config: AgentConfig, parts: Parts<'_>) -> Result<Agent> {
        let agent = Agent::new(provider, config);
        if let Some(from) = parts.secrets {
            agent.tools.share_secrets(from);
        }
        if let Some(builtin) = parts.builtin {
            agent.register_builtins(builtin)?;
        }
        for t in parts.tools {
            agent.tools.register(t)?;
        }
        // The built-in bash by name, not any shell-kind tool: the prompt describes the sandbox only it runs in.
        if let (Some((mode, network)), true) = (parts.sandbox, agent.tools.get("bash").is_some()) {
            let prompt = crate::builtin::sandbox_prompt(mode, network);
            if !prompt.is_empty() {
                agent.update_config(|c| c.system = Some(crate::text::with_text(c.system.take(), &prompt)));
            }
        }
        Ok(agent)
    }

    /// Begin one `task` call: a fresh child agent and its run, stepped by the parent's steps
    /// ([`Child::step`]) so its events reach the host as they happen, tagged with the call's id (`pausing`:
    /// the parent's run pauses for approvals). `Err`: the call's answer, no child was started.
    pub(super) fn begin_child(
        &self,
        call: &ToolUseBlock,
        cancel: &CancelToken,
        pausing: bool,
    ) -> std::result::Result<Child, CallOutcome> {
        let started = Instant::now();
        let fail = |m: String| Err(CallOutcome { duration: started.elapsed(), ..CallOutcome::error(m) });
        // The same input check as every registered tool gets.
        if let Some(t) = self.tools.get(crate::subagent::TOOL_NAME) {
            if let Err(m) = crate::tools::validate_input(&t.spec.input_schema, &call.input) {
                return fail(format!("Invalid input for tool 'task': {m}. Fix the arguments and call it again."));
            }
        }
        let agent_type = call.input.get("agent_type").and_then(Value::as_str).unwrap_or("").to_string();
        let prompt = call.input.get("prompt").and_then(Value::as_str).unwrap_or("").to_string();
        let Some(kind) = lock(&self.subagents).get(&agent_type).cloned() else {
            let known: Vec<String> = lock(&self.subagents).keys().cloned().collect();
            return fail(format!("no agent type {agent_type:?}; the types are: {}", known.join(", ")));
        };
        if prompt.trim().is_empty() {
            return fail("`prompt` is empty: give the agent the full instructions".into());
        }
        let parent = self.config();
        // The child answers in its own type's shape (a schema of its own), never in the parent's.
        let output = kind.output_schema.clone().map(|schema| crate::output::OutputSpec {
            schema,
            ..parent.output.clone().unwrap_or_else(|| crate::output::OutputSpec::new(Value::Null))
        });
        let config = AgentConfig {
            output,
            model: kind.model.clone().unwrap_or(parent.model),
            system: kind.system.clone().map(Value::String),
            max_turns: Some(kind.max_turns.unwrap_or(20)),
            max_turns_policy: MaxTurnsPolicy::Error,
            tool_choice: None,
            todo_reminder_after: None,
            // The child spends from the parent's ledger (below), under the parent's cap.
            max_cost_usd: parent.max_cost_usd,
            // The parent's check and claims are held at the parent's answer, not the child's.
            check: None,
            expect_changes: false,
            verify_claims: false,
            ..parent
        };
        let model = config.model.clone();
        let wanted: Vec<String> = match &kind.tools {
            Some(names) => names.clone(),
            None => self.tools.names(),
        };
        let parent_builtin = lock(&self.builtin).as_ref().map(|(o, _)| o.clone());
        // Built-in tools in the child's own sandbox mode, when its type asks for one.
        let (builtin, rebuilt) = match (kind.sandbox, parent_builtin.clone()) {
            (Some(mode), Some(parent)) => {
                let names: Vec<String> =
                    wanted.iter().filter(|n| crate::builtin::NAMES.contains(&n.as_str())).cloned().collect();
                let own = (!names.is_empty()).then(|| crate::builtin::BuiltinOptions {
                    names: names.clone(),
                    sandbox: mode,
                    ..parent
                });
                (own, names)
            }
            _ => (None, Vec::new()),
        };
        let mut tools = Vec::new();
        for name in wanted.iter().filter(|n| n.as_str() != crate::subagent::TOOL_NAME && !rebuilt.contains(n)) {
            match self.tools.get(name) {
                Some(t) => tools.push(t),
                None => return fail(format!("agent type {agent_type} names tool {name:?}, which does not exist")),
            }
        }
        tools.extend(kind.own_tools);
        // The child is told what its bash may do, as the parent is.
        let sandbox = parent_builtin.map(|p| (kind.sandbox.unwrap_or(p.sandbox), p.network));
        let parts = Parts { builtin, tools, sandbox, secrets: Some(&self.tools) };
        let child = match Agent::build(self.provider().clone(), config, parts) {
            Ok(child) => child,
            Err(e) => return fail(format!("agent type {agent_type}: {e}")),
        };
        self.lend_ledger(&child);
        *lock(&child.trace_name) = Some(agent_type.clone());
        // A child's calls cannot pause the parent's step (approval.rs): without a callable to ask, a pausing
        // run's child is refused what it would have been asked.
        let permission = lock(&self.permission).clone().or_else(|| {
            pausing.then(|| -> PermissionHook { Arc::new(|_| Permission::Deny(super::approval::CHILD_UNASKED.into())) })
        });
        child.set_permission(permission);
        child.set_hooks(lock(&self.hooks).for_child());
        *lock(&child.rules) = lock(&self.rules).clone();
        *lock(&child.workspace) = lock(&self.workspace).clone();
        // finish.rs: the parent's check files stay read-only to what the child runs, too.
        child.tools.set_run_protected(self.tools.run_protected().get());
        let child = Arc::new(child);
        let asks = lock(&child.permission).is_some();
        let mut driver = match child.start(Some(vec![ContentBlock::text(prompt)]), cancel.clone()) {
            Ok(driver) => driver,
            Err(e) => return fail(format!("agent type {agent_type}: {e}")),
        };
        // A call its callable is asked about pauses the child's step, and the callable answers at the next one:
        // a host stepping the parent has handed out the call's events (its tool_use, its approval_request)
        // before the question is asked, as for the parent's own calls.
        driver.pause_for_approvals(asks);
        Ok(Child { agent: child, driver, agent_type, parent_id: call.id.clone(), model, started, paused: false })
    }

    /// A `task` call's answer once its child's run has ended with `result`: the call's outcome, what the
    /// child leaves with the parent's entry, and a hook's failure that ends the parent's run too.
    pub(super) fn end_child(
        &self,
        child: Child,
        result: Result<RunResult>,
    ) -> (CallOutcome, Option<crate::subagent::ChildRun>, Option<Error>) {
        let Child { agent: child, driver, agent_type, model, started, .. } = child;
        drop(driver);
        let transcript = serde_json::to_value(child.conversation().snapshot()).unwrap_or(Value::Null);
        let turns = child
            .conversation()
            .snapshot()
            .iter()
            .filter(|e| e.role == EntryRole::Assistant && e.status != EntryStatus::Streaming)
            .count() as u32;
        let info = crate::subagent::ChildRun {
            agent_type: agent_type.clone(),
            model,
            usage: child.usage(),
            cost_usd: lock(&child.spend).usd,
            turns,
            transcript,
        };
        let duration = started.elapsed();
        // The host's hook failed in the child: that ends the parent's run too, with the same error.
        let hook_failed = match &result {
            Err(Error::Hook { hook, message }) => Some(Error::Hook { hook: hook.clone(), message: message.clone() }),
            _ => None,
        };
        let outcome = match result {
            Ok(r) if r.stop_reason == Some(StopReason::Budget) => CallOutcome {
                duration,
                ..CallOutcome::error(
                    "the agent stopped: its next request would have passed the spend cap (max_cost_usd)",
                )
            },
            Ok(r) if r.output.is_some() => {
                // A structured answer goes to the parent's model as the JSON itself.
                let json = r.output.as_ref().map(Value::to_string).unwrap_or_default();
                CallOutcome { content: Value::String(self.tools.redact(json)), is_error: false, fatal: None, duration }
            }
            Err(Error::OutputValidation(f)) => CallOutcome {
                duration,
                ..CallOutcome::error(self.tools.redact(format!(
                    "the agent's answer did not match its output schema: {}. Its last answer: {}",
                    f.errors.join("; "),
                    f.text
                )))
            },
            Ok(r) => {
                let text = if r.text.trim().is_empty() { "(the agent gave no answer)".to_string() } else { r.text };
                CallOutcome {
                    content: Value::String(self.tools.redact(format!("{text}\n\n{}", info.summary()))),
                    is_error: false,
                    fatal: None,
                    duration,
                }
            }
            Err(Error::Cancelled { .. }) => CallOutcome {
                duration,
                ..CallOutcome::error("interrupted: the run was cancelled while the agent worked on this task")
            },
            Err(Error::MaxTurns { turns }) => {
                let last = child
                    .conversation()
                    .snapshot()
                    .iter()
                    .rev()
                    .find(|e| e.role == EntryRole::Assistant)
                    .map(|e| {
                        e.content
                            .iter()
                            .filter_map(|b| if let ContentBlock::Text(t) = b { Some(t.text.as_str()) } else { None })
                            .collect::<Vec<_>>()
                            .join("")
                    })
                    .unwrap_or_default();
                CallOutcome {
                    duration,
                    ..CallOutcome::error(self.tools.redact(format!(
                        "the agent stopped after max_turns={turns} without finishing. Its last words: {}",
                        if last.is_empty() { "(none)".to_string() } else { last }
                    )))
                }
            }
            Err(e) => {
                CallOutcome { duration, ..CallOutcome::error(self.tools.redact(format!("the agent failed: {e}"))) }
            }
        };
        (outcome, Some(info), hook_failed)
    }
}

/// A `task` call's child agent under way (see [`Agent::begin_child`]).
pub(super) struct Child {
    agent: Arc<Agent>,
    driver: RunDriver,
    agent_type: String,
    parent_id: String,
    model: String,
    started: Instant,
    /// The last step paused for approvals: the child's permission callable answers first at the next one.
    paused: bool,
}

impl Child {
    /// One step of the child's run, its events forwarded tagged with the parent's call id; `Some` once it
    /// has ended. A pause ends the step; the child's permission callable answers it at the next.
    pub(super) fn step(&mut self, on_event: &mut dyn FnMut(&Event)) -> Option<Result<RunResult>> {
        // Cancelled while paused: the step answers the waiting calls as interrupted, asking no one.
        if std::mem::take(&mut self.paused) && !self.agent.token().is_cancelled() {
            let asked = self.driver.pending_approvals();
            self.driver.answer_with_callable(asked);
        }
        let (parent_id, agent_type) = (&self.parent_id, &self.agent_type);
        let mut forward = |ev: &Event| {
            on_event(&Event::Subagent {
                parent_id: parent_id.clone(),
                agent_type: agent_type.clone(),
                event: Box::new(ev.clone()),
            })
        };
        match self.driver.next(&mut forward) {
            Step::Done(outcome) => Some(outcome),
            Step::NeedsApproval(_) => {
                self.paused = true;
                None
            }
            _ => None,
        }
    }
}
