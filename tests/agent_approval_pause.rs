//! Approval as a pause: a stepped run set to pause for approvals (`RunDriver::pause_for_approvals`) stops
//! before the calls that need a decision and hands them to its host (`Step::NeedsApproval`); the host
//! answers each (`RunDriver::approve`) and steps again. Parallel calls pause together; cancel or drop while
//! paused answers the waiting calls as interrupted and leaves a valid conversation.
#![allow(clippy::unwrap_used, clippy::expect_used)]

#[path = "common/mock.rs"]
mod mock;

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use mock::scenario;
use serde_json::{Value, json};
use tooloop::{
    ApprovalError, CancelToken, ContentBlock, Error, Event, Permission, RunDriver, Step, Tool, ToolContext, ToolOutput,
};

#[path = "common/agent.rs"]
mod common;
use common::*;

/// The parallel scenario (get_weather Paris, get_weather Tokyo, get_time), get_weather parallel-safe: the
/// two weather calls are one batch, get_time one of its own. Returns the rig and the tools' call counts.
fn parallel_rig() -> (Rig, Arc<AtomicUsize>, Arc<AtomicUsize>) {
    let rig = Rig::new(Kind::MockSse, &scenario("anthropic_parallel_tools"), config());
    let weather = Arc::new(AtomicUsize::new(0));
    rig.agent.tools().register(weather_tool(weather.clone()).parallel_safe(true)).unwrap();
    let time = Arc::new(AtomicUsize::new(0));
    let counted = time.clone();
    let tool =
        Tool::new("get_time", "The current time.", json!({"type": "object"}), move |_: &Value, _: &ToolContext<'_>| {
            counted.fetch_add(1, Ordering::SeqCst);
            Ok(ToolOutput::Text("14:05 UTC".into()))
        })
        .unwrap();
    rig.agent.tools().register(tool).unwrap();
    (rig, weather, time)
}

fn start(rig: &Rig, token: CancelToken) -> RunDriver {
    let mut driver =
        rig.agent.start(Some(vec![ContentBlock::text("Weather in Paris and Tokyo, and the time?")]), token).unwrap();
    driver.pause_for_approvals(true);
    driver
}

/// Steps until the run pauses (panics if it ends first): the calls asked about.
fn until_paused(driver: &mut RunDriver, events: &mut Vec<Event>) -> Vec<tooloop::ApprovalRequest> {
    loop {
        match driver.next(&mut |e| events.push(e.clone())) {
            Step::Continue => {}
            Step::NeedsApproval(asked) => return asked,
            Step::Done(outcome) => panic!("the run ended without a pause: {outcome:?}"),
            other => panic!("unexpected step {other:?}"),
        }
    }
}

fn ids(asked: &[tooloop::ApprovalRequest]) -> Vec<(&str, &str)> {
    asked.iter().map(|a| (a.tool.as_str(), a.input["city"].as_str().unwrap_or(""))).collect()
}

#[test]
fn parallel_calls_pause_together_and_the_host_approves_one_and_denies_the_other() {
    let (rig, weather, time) = parallel_rig();
    let mut driver = start(&rig, CancelToken::new());
    let mut events = Vec::new();
    let asked = until_paused(&mut driver, &mut events);
    assert_eq!(ids(&asked), vec![("get_weather", "Paris"), ("get_weather", "Tokyo")]);
    assert!(asked.iter().all(|a| a.reason.is_none() && !a.read_only), "{asked:?}");
    let approvals: Vec<&str> = events
        .iter()
        .filter_map(|e| if let Event::ApprovalRequest { id, .. } = e { Some(id.as_str()) } else { None })
        .collect();
    assert_eq!(approvals, vec![asked[0].call_id.as_str(), asked[1].call_id.as_str()]);
    assert_eq!(weather.load(Ordering::SeqCst), 0, "nothing runs before its answer");

    // Stepping before every call is answered runs nothing and hands out the calls still waiting.
    driver.approve(&asked[0].call_id, Permission::Allow).unwrap();
    match driver.next(&mut |e| events.push(e.clone())) {
        Step::NeedsApproval(left) => assert_eq!(ids(&left), vec![("get_weather", "Tokyo")]),
        other => panic!("{other:?}"),
    }
    assert_eq!(weather.load(Ordering::SeqCst), 0);
    assert_eq!(driver.approve("toolu_nope", Permission::Allow), Err(ApprovalError::UnknownCall));
    driver.approve(&asked[1].call_id, Permission::Deny("not Tokyo today".into())).unwrap();

    // The next batch (get_time, not parallel-safe) pauses after the weather calls ran.
    let asked_time = until_paused(&mut driver, &mut events);
    assert_eq!(ids(&asked_time), vec![("get_time", "")]);
    assert_eq!(weather.load(Ordering::SeqCst), 1, "the approved call ran, the denied one did not");
    assert_eq!(driver.approve(&asked[0].call_id, Permission::Allow), Err(ApprovalError::UnknownCall), "settled");
    driver.approve(&asked_time[0].call_id, Permission::Allow).unwrap();
    let result = loop {
        match driver.next(&mut |e| events.push(e.clone())) {
            Step::Done(outcome) => break outcome.unwrap(),
            Step::Continue => {}
            other => panic!("{other:?}"),
        }
    };
    assert_eq!(result.turns, 2);
    assert_eq!(time.load(Ordering::SeqCst), 1);
    assert_eq!(driver.approve(&asked_time[0].call_id, Permission::Allow), Err(ApprovalError::Ended));
    assert!(matches!(driver.next(&mut |_| {}), Step::Done(Err(Error::Config(_)))), "a step after the end");

    // What the model read: one result per call, the denied one with the host's reason.
    let requests = rig.requests();
    assert_eq!(requests.len(), 2);
    let last = requests[1]["messages"].as_array().unwrap().last().unwrap().clone();
    let results = results_of(&last);
    assert_eq!(results.len(), 3, "{results:?}");
    assert_eq!((results[0].1.as_str(), results[0].2), ("18 °C, partly cloudy in Paris", false));
    assert_eq!((results[1].1.as_str(), results[1].2), ("Permission denied: not Tokyo today", true));
    assert_eq!((results[2].1.as_str(), results[2].2), ("14:05 UTC", false));
    let denied: Vec<bool> = events
        .iter()
        .filter_map(|e| if let Event::ToolResult { denied, .. } = e { Some(*denied) } else { None })
        .collect();
    assert_eq!(denied, vec![false, true, false]);
    rig.check();
}

/// The conversation after a run stopped while paused: every call answered as interrupted, none ran.
fn assert_interrupted(rig: &Rig, weather: &AtomicUsize, time: &AtomicUsize) {
    assert_eq!((weather.load(Ordering::SeqCst), time.load(Ordering::SeqCst)), (0, 0), "no tool ran");
    let view = rig.agent.messages();
    assert_valid_view(&view);
    let last = serde_json::to_value(view.last().unwrap()).unwrap();
    let results = results_of(&last);
    assert_eq!(results.len(), 3, "{results:?}");
    for (_, text, is_error) in &results {
        assert!(text.starts_with("interrupted") && *is_error, "{results:?}");
    }
}

#[test]
fn a_run_cancelled_while_paused_answers_the_waiting_calls_as_interrupted_and_resumes() {
    let (rig, weather, time) = parallel_rig();
    let token = CancelToken::new();
    let mut driver = start(&rig, token.clone());
    let asked = until_paused(&mut driver, &mut Vec::new());
    driver.approve(&asked[0].call_id, Permission::Allow).unwrap();
    token.cancel();
    let mut results = Vec::new();
    let outcome = loop {
        match driver.next(&mut |e| {
            if let Event::ToolResult { content, .. } = e {
                results.push(content.clone())
            }
        }) {
            Step::Done(outcome) => break outcome,
            Step::Continue => {}
            other => panic!("a cancelled run does not pause again: {other:?}"),
        }
    };
    assert!(matches!(outcome, Err(Error::Cancelled { .. })), "{outcome:?}");
    assert_eq!(results.len(), 3, "every call is answered, with an event: {results:?}");
    drop(driver);
    assert_interrupted(&rig, &weather, &time);

    // The conversation goes on from there.
    rig.mock.as_ref().unwrap().load(&scenario("anthropic_text"));
    let result = rig.agent.resume(&mut |_| {}).unwrap();
    assert_eq!(result.turns, 1);
    rig.check();
}

#[test]
fn a_driver_dropped_while_paused_leaves_a_valid_conversation_and_a_free_agent() {
    let (rig, weather, time) = parallel_rig();
    let mut driver = start(&rig, CancelToken::new());
    until_paused(&mut driver, &mut Vec::new());
    drop(driver);
    assert_interrupted(&rig, &weather, &time);
    assert_eq!(rig.requests().len(), 1, "nothing was sent after the pause");

    // The agent is free: a new run starts.
    rig.mock.as_ref().unwrap().load(&scenario("anthropic_text"));
    let mut driver = rig.agent.start(Some(vec![ContentBlock::text("Hello")]), CancelToken::new()).unwrap();
    assert_eq!(driver.finish(&mut |_| {}).unwrap().turns, 1);
}

#[test]
fn a_pausing_run_stepped_with_step_asks_the_permission_callable_and_without_pauses_nothing_pauses() {
    // `step` answers a pause with the agent's callable: the same outcome as the blocking run.
    let (rig, weather, time) = parallel_rig();
    let asked = Arc::new(std::sync::Mutex::new(Vec::new()));
    let seen = asked.clone();
    rig.agent.set_permission(Some(Arc::new(move |call: &tooloop::types::ToolUseBlock| {
        seen.lock().unwrap().push(call.input["city"].as_str().unwrap_or(&call.name).to_string());
        if call.input["city"] == "Tokyo" { Permission::Deny("no".into()) } else { Permission::Allow }
    })));
    let mut driver = start(&rig, CancelToken::new());
    let result = driver.finish(&mut |_| {}).unwrap();
    assert_eq!(result.tool_calls.iter().map(|c| c.denied).collect::<Vec<_>>(), vec![false, true, false]);
    assert_eq!(*asked.lock().unwrap(), vec!["Paris", "Tokyo", "get_time"]);
    assert_eq!((weather.load(Ordering::SeqCst), time.load(Ordering::SeqCst)), (1, 1));

    // Not pausing, no callable: `next` never pauses, every call runs (as `run` does).
    let (rig, weather, time) = parallel_rig();
    let mut driver = rig.agent.start(Some(vec![ContentBlock::text("Weather?")]), CancelToken::new()).unwrap();
    loop {
        match driver.next(&mut |_| {}) {
            Step::Done(outcome) => break assert_eq!(outcome.unwrap().turns, 2),
            Step::Continue => {}
            other => panic!("{other:?}"),
        }
    }
    assert_eq!((weather.load(Ordering::SeqCst), time.load(Ordering::SeqCst)), (2, 1));
}

/// An Anthropic message for the mock server.
fn message(content: Value, stop: &str) -> Value {
    json!({"anthropic": {"id": "msg_1", "type": "message", "role": "assistant", "model": "claude-sonnet-4-6",
        "content": content, "stop_reason": stop, "stop_sequence": null,
        "usage": {"input_tokens": 10, "output_tokens": 5}}})
}

fn use_block(id: &str, name: &str, input: Value) -> Value {
    json!({"type": "tool_use", "id": id, "name": name, "input": input})
}

/// The parent calls `look` (p0), then `task` (p1) with an `explore` child; the child calls `look` (c1),
/// then answers; the parent answers "done". Returns the rig and the count of `look` runs.
fn subagent_rig() -> (Rig, Arc<AtomicUsize>) {
    let task = json!({"description": "look", "prompt": "find main", "agent_type": "explore"});
    let scenario = json!({"responses": [
        message(json!([use_block("p0", "look", json!({})), use_block("p1", "task", task)]), "tool_use"),
        message(json!([use_block("c1", "look", json!({}))]), "tool_use"),
        message(json!([{"type": "text", "text": "main is in src/main.rs"}]), "end_turn"),
        message(json!([{"type": "text", "text": "done"}]), "end_turn"),
    ]});
    let rig = Rig::new(Kind::MockSse, &scenario, config());
    let explore: tooloop::subagent::SubAgent =
        serde_json::from_value(json!({"description": "Reads.", "tools": ["look"], "max_turns": 3})).unwrap();
    rig.agent.set_subagents([("explore".to_string(), explore)].into_iter().collect()).unwrap();
    let looks = Arc::new(AtomicUsize::new(0));
    let counted = looks.clone();
    let look = Tool::new("look", "", json!({"type": "object"}), move |_: &Value, _: &ToolContext<'_>| {
        counted.fetch_add(1, Ordering::SeqCst);
        Ok(ToolOutput::Text("found main.rs".into()))
    })
    .unwrap();
    rig.agent.tools().register(look).unwrap();
    (rig, looks)
}

fn start_subagent_run(rig: &Rig, token: CancelToken) -> RunDriver {
    let mut driver = rig.agent.start(Some(vec![ContentBlock::text("investigate")]), token).unwrap();
    driver.pause_for_approvals(true);
    driver
}

/// (call id, tool, agent type, parent id) of each request.
fn asked_of(asked: &[tooloop::ApprovalRequest]) -> Vec<(String, String, Option<String>, Option<String>)> {
    asked.iter().map(|a| (a.call_id.clone(), a.tool.clone(), a.agent_type.clone(), a.parent_id.clone())).collect()
}

fn owned(id: &str, tool: &str, child: Option<(&str, &str)>) -> (String, String, Option<String>, Option<String>) {
    (id.into(), tool.into(), child.map(|c| c.0.to_string()), child.map(|c| c.1.to_string()))
}

#[test]
fn a_subagents_call_pauses_the_parents_run_marked_as_the_childs_and_the_parents_approve_answers_it() {
    let (rig, looks) = subagent_rig();
    let mut driver = start_subagent_run(&rig, CancelToken::new());
    let mut events = Vec::new();
    // The parent's own call first, then its task call, then the child's call: one question at a time, in order.
    let asked = until_paused(&mut driver, &mut events);
    assert_eq!(asked_of(&asked), vec![owned("p0", "look", None)]);
    driver.approve("p0", Permission::Allow).unwrap();
    let asked = until_paused(&mut driver, &mut events);
    assert_eq!(asked_of(&asked), vec![owned("p1", "task", None)]);
    assert_eq!(looks.load(Ordering::SeqCst), 1);
    driver.approve("p1", Permission::Allow).unwrap();
    let asked = until_paused(&mut driver, &mut events);
    assert_eq!(asked_of(&asked), vec![owned("c1", "look", Some(("explore", "p1")))]);
    assert_eq!(asked_of(&driver.pending_approvals()), asked_of(&asked));
    assert_eq!(looks.load(Ordering::SeqCst), 1, "the child's call waits for its answer");
    // The child's question reached the host as the child's event, before the pause.
    let child_asked: Vec<(&str, &str)> = events
        .iter()
        .filter_map(|e| match e {
            Event::Subagent { parent_id, event, .. } => match event.as_ref() {
                Event::ApprovalRequest { id, .. } => Some((parent_id.as_str(), id.as_str())),
                _ => None,
            },
            _ => None,
        })
        .collect();
    assert_eq!(child_asked, vec![("p1", "c1")]);
    // The child waits while paused: a step before the answer does nothing and pauses again.
    match driver.next(&mut |e| events.push(e.clone())) {
        Step::NeedsApproval(left) => assert_eq!(asked_of(&left), asked_of(&asked)),
        other => panic!("{other:?}"),
    }
    assert_eq!(rig.requests().len(), 2, "the child sent nothing more while it waited");
    assert_eq!(driver.approve("c9", Permission::Allow), Err(ApprovalError::UnknownCall));
    driver.approve("c1", Permission::Allow).unwrap();
    let result = loop {
        match driver.next(&mut |e| events.push(e.clone())) {
            Step::Done(outcome) => break outcome.unwrap(),
            Step::Continue => {}
            other => panic!("{other:?}"),
        }
    };
    assert_eq!(result.text, "done");
    assert_eq!(looks.load(Ordering::SeqCst), 2);
    let task_output = result.tool_calls[1].output.as_str().unwrap();
    assert!(task_output.starts_with("main is in src/main.rs"), "{task_output}");
    let requests = rig.requests();
    assert_eq!(requests.len(), 4);
    let child_results = results_of(requests[2]["messages"].as_array().unwrap().last().unwrap());
    assert_eq!(child_results, vec![("c1".to_string(), "found main.rs".to_string(), false)]);
    rig.check();
}

#[test]
fn a_subagents_call_denied_by_the_parents_host_is_refused_with_its_reason() {
    let (rig, looks) = subagent_rig();
    let mut driver = start_subagent_run(&rig, CancelToken::new());
    for id in ["p0", "p1"] {
        until_paused(&mut driver, &mut Vec::new());
        driver.approve(id, Permission::Allow).unwrap();
    }
    until_paused(&mut driver, &mut Vec::new());
    driver.approve("c1", Permission::Deny("not in the child".into())).unwrap();
    assert_eq!(driver.finish(&mut |_| {}).unwrap().text, "done");
    assert_eq!(looks.load(Ordering::SeqCst), 1, "only the parent's call ran");
    let requests = rig.requests();
    let child_results = results_of(requests[2]["messages"].as_array().unwrap().last().unwrap());
    assert_eq!(child_results[0].1, "Permission denied: not in the child");
    rig.check();
}

#[test]
fn cancelled_or_dropped_while_a_subagents_call_waits_the_call_and_its_task_are_answered_as_interrupted() {
    for dropped in [false, true] {
        let (rig, looks) = subagent_rig();
        let token = CancelToken::new();
        let mut driver = start_subagent_run(&rig, token.clone());
        for id in ["p0", "p1"] {
            until_paused(&mut driver, &mut Vec::new());
            driver.approve(id, Permission::Allow).unwrap();
        }
        until_paused(&mut driver, &mut Vec::new());
        let mut results = Vec::new();
        if dropped {
            drop(driver);
        } else {
            token.cancel();
            let outcome = loop {
                match driver.next(&mut |e| {
                    if let Event::Subagent { event, .. } = e {
                        if let Event::ToolResult { id, content, .. } = event.as_ref() {
                            results.push((id.clone(), content.clone()));
                        }
                    }
                }) {
                    Step::Done(outcome) => break outcome,
                    Step::Continue => {}
                    other => panic!("a cancelled run does not pause again: {other:?}"),
                }
            };
            assert!(matches!(outcome, Err(Error::Cancelled { .. })), "{outcome:?}");
            assert_eq!(results.len(), 1, "the child's waiting call is answered, with an event: {results:?}");
            assert!(results[0].1.as_str().unwrap().starts_with("interrupted"), "{results:?}");
        }
        assert_eq!(looks.load(Ordering::SeqCst), 1, "the child's call never ran");
        assert_eq!(rig.requests().len(), 2, "nothing was sent after the pause");
        let view = rig.agent.messages();
        assert_valid_view(&view);
        let last = results_of(&serde_json::to_value(view.last().unwrap()).unwrap());
        assert_eq!(last.len(), 2, "{last:?}");
        assert_eq!(last[0], ("p0".to_string(), "found main.rs".to_string(), false));
        assert!(last[1].0 == "p1" && last[1].1.starts_with("interrupted") && last[1].2, "{last:?}");
        // The agent is free for the next run.
        rig.mock.as_ref().unwrap().load(&scenario("anthropic_text"));
        assert_eq!(rig.agent.run("Hello", &mut |_| {}).unwrap().turns, 1);
    }
}

/// The blocking callable is the pause answered at once: a pausing run stepped with `step` asks it about the
/// child's calls as about the parent's, in order.
#[test]
fn a_pausing_run_stepped_with_step_asks_the_callable_about_the_subagents_calls_too() {
    let (rig, looks) = subagent_rig();
    let asked = Arc::new(std::sync::Mutex::new(Vec::new()));
    let seen = asked.clone();
    rig.agent.set_permission(Some(Arc::new(move |call: &tooloop::types::ToolUseBlock| {
        seen.lock().unwrap().push(call.id.clone());
        if call.id == "c1" { Permission::Deny("no".into()) } else { Permission::Allow }
    })));
    let mut driver = start_subagent_run(&rig, CancelToken::new());
    assert_eq!(driver.finish(&mut |_| {}).unwrap().text, "done");
    assert_eq!(*asked.lock().unwrap(), ["p0", "p1", "c1"]);
    assert_eq!(looks.load(Ordering::SeqCst), 1);
    rig.check();
}
