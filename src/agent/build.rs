//! A `task` call's child agent: put together by the one builder (`spec.rs`) from its type and what it
//! inherits from its parent, and its run.

use super::*;

impl Agent {
    /// Start one `task` call's child: a fresh agent whose run its parent steps (see `child.rs`), or the
    /// call's answer when it cannot start (bad input, an unknown agent type).
    pub(super) fn start_child(
        &self,
        call: &ToolUseBlock,
        cancel: &CancelToken,
        span: tracing::Span,
    ) -> std::result::Result<super::child::Child, CallOutcome> {
        let started = Instant::now();
        let fail = |m: String| CallOutcome { duration: started.elapsed(), ..CallOutcome::error(m) };
        // The same input check as every registered tool gets.
        if let Some(t) = self.tools.get(crate::subagent::TOOL_NAME) {
            if let Err(m) = crate::tools::validate_input(&t.spec.input_schema, &call.input) {
                return Err(fail(format!("Invalid input for tool 'task': {m}. Fix the arguments and call it again.")));
            }
        }
        let agent_type = call.input.get("agent_type").and_then(Value::as_str).unwrap_or("").to_string();
        let prompt = call.input.get("prompt").and_then(Value::as_str).unwrap_or("").to_string();
        let Some(kind) = lock(&self.control).subagents.get(&agent_type).cloned() else {
            let known: Vec<String> = lock(&self.control).subagents.keys().cloned().collect();
            return Err(fail(format!("no agent type {agent_type:?}; the types are: {}", known.join(", "))));
        };
        if prompt.trim().is_empty() {
            return Err(fail("`prompt` is empty: give the agent the full instructions".into()));
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
            max_turns: Some(kind.max_turns.unwrap_or(crate::defaults::MAX_TURNS)),
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
        let parent_builtin = self.spec().builtin.as_ref().map(|(o, _)| o.clone());
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
                None => {
                    return Err(fail(format!("agent type {agent_type} names tool {name:?}, which does not exist")));
                }
            }
        }
        tools.extend(kind.own_tools);
        // The child is told what its bash may do, as the parent is.
        let sandbox = parent_builtin.map(|p| (kind.sandbox.unwrap_or(p.sandbox), p.network));
        // The child is asked what its parent is: its calls go to the same callable, or, in a pausing run,
        // wait as the parent's step (approval.rs).
        let (permission, hooks, rules) = {
            let c = lock(&self.control);
            (c.permission.clone(), c.hooks.for_child(), c.rules.clone())
        };
        let mut builder = AgentBuilder::new(self.provider().clone(), config);
        builder.builtin = builtin;
        builder.tools = tools;
        builder.sandbox = sandbox;
        builder.secrets = Some(&self.tools);
        builder.trace_name = Some(agent_type.clone());
        builder.permission = permission;
        builder.hooks = hooks;
        builder.rules = rules;
        builder.workspace = self.spec().workspace.clone();
        // A child spends from this agent's own ledger (its requests count against this agent's cap and every
        // cap above it).
        builder.ledger = Some(self.ledger());
        // finish.rs: the parent's check files stay read-only to what the child runs, too.
        builder.run_protected = self.tools.run_protected().get();
        let child = match builder.build() {
            Ok(child) => child,
            Err(e) => return Err(fail(format!("agent type {agent_type}: {e}"))),
        };
        let agent = Arc::new(child);
        let driver = match agent.start(Some(vec![ContentBlock::text(prompt)]), cancel.clone()) {
            Ok(driver) => driver,
            Err(e) => return Err(fail(self.tools.redact(format!("the agent failed: {e}")))),
        };
        Ok(super::child::Child {
            agent,
            driver,
            agent_type,
            parent_id: call.id.clone(),
            model,
            started,
            span,
            paused: false,
        })
    }

    /// What a `task` call's child leaves with its parent: the call's answer, the run's record, and a host's
    /// hook failure, which ends the parent's run too.
    pub(super) fn end_child(
        &self,
        c: super::child::Child,
        result: Result<RunResult>,
    ) -> (CallOutcome, Option<crate::subagent::ChildRun>, Option<Error>) {
        let super::child::Child { agent: child, agent_type, model, started, .. } = c;
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
