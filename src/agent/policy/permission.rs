//! The permission decision on a call, in order: the permission rules ([`crate::rules`]), the `before_tool`
//! hook (a new input it gives is judged by the rules again), then the permission callable — or, in a run
//! that pauses for approvals, the host (`approval.rs`). Always in the set, and the last word on a call: a
//! call no earlier policy refused is decided here.
//!
//! Must never: run a call a rule denies, or one a rule asks about with no one to ask.

use super::*;

#[derive(Default)]
pub(super) struct PermissionPolicy {
    /// What decides, as the turn began: the callable, the hooks, the rules (and their workspace).
    permission: Option<PermissionHook>,
    hooks: crate::hooks::Hooks,
    rules: Option<(Arc<crate::rules::PermissionRules>, std::path::PathBuf)>,
}

impl Policy for PermissionPolicy {
    fn name(&self) -> &'static str {
        "permission"
    }

    fn before_tools(&mut self, cx: &mut Cx<'_>, _calls: &[ToolUseBlock]) {
        let c = lock(&cx.agent.control);
        (self.permission, self.hooks, self.rules) = (c.permission.clone(), c.hooks.clone(), c.rules.clone());
    }

    fn before_tool(&mut self, cx: &mut Cx<'_>, _index: usize, call: &ToolUseBlock) -> CallVerdict {
        let kind = cx.agent.tools.get(&call.name).map(|t| t.kind).unwrap_or_default();
        let (rules, permission) = (self.rules.as_ref(), self.permission.as_ref());
        CallVerdict::Decided(gate(call, &kind, rules, &self.hooks, permission, cx.pausing, cx.on_event))
    }
}

/// What the checks before a call decided.
pub(in crate::agent) enum Gate {
    /// Run it, with this input; `true`: only with no power to change anything
    /// ([`Permission::AllowReadOnly`]).
    Run(Value, bool),
    /// Refused, with the reason the model reads.
    Deny(String),
    /// The host decides (a pausing run): the input as it would run, and why it asks (`None`: every call not
    /// decided by a rule or a hook asks).
    Ask(Value, Option<String>),
    /// A hook failed: the run ends.
    Fail(Error),
}

/// The checks before one call, in order: the permission rules, `before_tool`, the permission callable.
fn gate(
    call: &ToolUseBlock,
    kind: &crate::tools::ToolKind,
    rules: Option<&(Arc<crate::rules::PermissionRules>, std::path::PathBuf)>,
    hooks: &crate::hooks::Hooks,
    permission: Option<&PermissionHook>,
    pausing: bool,
    on_event: &mut dyn FnMut(&Event),
) -> Gate {
    use crate::hooks::BeforeTool;
    use crate::rules::RuleDecision;
    let decide = |input: &Value| match rules {
        Some((r, ws)) => r.decide_kind(&call.name, kind, input, ws),
        None => RuleDecision::NoMatch,
    };
    let mut decision = decide(&call.input);
    if let RuleDecision::Deny(rule) = &decision {
        return Gate::Deny(format!("the rule {rule} forbids this call"));
    }
    let mut call = std::borrow::Cow::Borrowed(call);
    if let Some(hook) = &hooks.before_tool {
        match hook(&call) {
            Ok(BeforeTool::Continue) => {}
            Ok(BeforeTool::Deny(reason)) => return Gate::Deny(reason),
            Ok(BeforeTool::Input(input)) if input.is_object() => {
                decision = decide(&input);
                if let RuleDecision::Deny(rule) = &decision {
                    return Gate::Deny(format!("the rule {rule} forbids this call"));
                }
                call.to_mut().input = input;
            }
            Ok(BeforeTool::Input(other)) => {
                let message = format!(
                    "it replaced the input with {}, which is not an object",
                    crate::text::ellipsize(&other.to_string(), 100)
                );
                return Gate::Fail(Error::Hook { hook: "before_tool".into(), message });
            }
            Err(message) => return Gate::Fail(Error::Hook { hook: "before_tool".into(), message }),
        }
    }
    let mut ask = |call: &ToolUseBlock, rule: Option<String>| {
        if permission.is_none() && !pausing {
            return Gate::Run(call.input.clone(), false);
        }
        // Announced before the callable is asked, so a UI draws the question in order with the other events.
        on_event(&Event::ApprovalRequest { id: call.id.clone(), name: call.name.clone(), input: call.input.clone() });
        match permission.filter(|_| !pausing) {
            Some(p) => decided(p(call), call.input.clone()),
            None => Gate::Ask(call.input.clone(), rule.map(|r| format!("the rule {r} asks for approval of this call"))),
        }
    };
    match decision {
        RuleDecision::Allow(_) => Gate::Run(call.input.clone(), false),
        RuleDecision::Ask(rule) if permission.is_none() && !pausing => {
            Gate::Deny(format!("the rule {rule} asks for approval of this call, and there is no one to ask"))
        }
        RuleDecision::Ask(rule) => ask(&call, Some(rule.to_string())),
        _ => ask(&call, None),
    }
}

/// What a call's answer (the permission callable's or the host's) makes of it.
pub(in crate::agent) fn decided(answer: Permission, input: Value) -> Gate {
    match answer {
        Permission::Deny(reason) => Gate::Deny(reason),
        Permission::AllowReadOnly => Gate::Run(input, true),
        Permission::Allow => Gate::Run(input, false),
    }
}
