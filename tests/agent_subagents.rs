//! Subagents through the loop: the `task` tool runs a fresh child agent (its own conversation, a subset of
//! the parent's tools), only its answer returns; child events reach the host tagged with the parent's call
//! id; usage rolls up; failures and max_turns become error results; cancel reaches the child; a resume
//! after a crash never runs a finished child again.
#![allow(clippy::unwrap_used, clippy::expect_used)]

#[path = "common/require.rs"]
mod require;

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use serde_json::{Map, Value, json};
use tooloop::provider::host::reply;
use tooloop::provider::{FnProvider, ScriptedProvider};
use tooloop::types::ToolUseBlock;
use tooloop::{
    AgentOptions, CancelToken, ContentBlock, Error, Event, MessageResponse, Request, StopReason, Tool, ToolContext,
    ToolOutput, Usage,
};

fn call(id: &str, name: &str, input: Value) -> ContentBlock {
    ContentBlock::ToolUse(ToolUseBlock { id: id.into(), name: name.into(), input, extra: Map::new() })
}

fn task(id: &str, agent_type: &str, prompt: &str) -> ContentBlock {
    call(id, "task", json!({"description": "look around", "prompt": prompt, "agent_type": agent_type}))
}

fn with_usage(mut m: MessageResponse, i: u64, o: u64) -> MessageResponse {
    m.usage = Usage { input_tokens: i, output_tokens: o, ..Default::default() };
    m
}

fn counting_tool(name: &str, calls: Arc<AtomicUsize>) -> Tool {
    Tool::new(name, "", json!({"type": "object"}), move |_: &Value, _: &ToolContext<'_>| {
        calls.fetch_add(1, Ordering::SeqCst);
        Ok(ToolOutput::Text("found main.rs".into()))
    })
    .unwrap()
}

fn types() -> Value {
    json!({
        "explore": {"description": "Reads code, never writes.", "system": "You explore.", "tools": ["look"], "max_turns": 3},
        "general": {"description": "Does anything.", "max_turns": 2}
    })
}

#[test]
fn two_tasks_in_one_turn_run_fresh_children_whose_answers_and_usage_come_back() {
    let steps = vec![
        // parent: two tasks
        with_usage(
            reply(vec![task("p1", "explore", "find main"), task("p2", "general", "say hi")], StopReason::ToolUse),
            10,
            5,
        ),
        // child 1 (explore): uses look, then answers
        with_usage(reply(vec![call("c1", "look", json!({}))], StopReason::ToolUse), 100, 10),
        with_usage(reply(vec![ContentBlock::text("main is in src/main.rs")], StopReason::EndTurn), 120, 20),
        // child 2 (general): answers
        with_usage(reply(vec![ContentBlock::text("hi")], StopReason::EndTurn), 50, 2),
        // parent: done
        with_usage(reply(vec![ContentBlock::text("all done")], StopReason::EndTurn), 30, 3),
    ];
    let provider = Arc::new(ScriptedProvider::new(steps));
    let agent = AgentOptions::from_value(json!({"subagents": types()})).unwrap().build_with(provider.clone()).unwrap();
    let looks = Arc::new(AtomicUsize::new(0));
    agent.tools().register(counting_tool("look", looks.clone())).unwrap();
    agent.tools().register(counting_tool("write", Arc::new(AtomicUsize::new(0)))).unwrap();
    let mut events = Vec::new();
    let result = agent.run("investigate", &mut |e| events.push(e.clone())).unwrap();
    assert_eq!(result.text, "all done");
    assert_eq!(looks.load(Ordering::SeqCst), 1);
    let outs: Vec<&str> = result.tool_calls.iter().map(|c| c.output.as_str().unwrap()).collect();
    assert!(outs[0].starts_with("main is in src/main.rs") && outs[0].contains("explore agent: 2 turns"), "{outs:?}");
    assert!(outs[1].starts_with("hi") && !result.tool_calls[1].is_error);

    let reqs = provider.requests();
    // The children start fresh: their first request holds only the prompt, with their own system prompt and
    // tools (explore: only look; never task).
    assert_eq!(reqs[1].messages.len(), 1);
    assert_eq!(reqs[1].system, Some(json!("You explore.")));
    let child_tools: Vec<&str> = reqs[1].tools.iter().map(|t| t.name.as_str()).collect();
    assert_eq!(child_tools, ["look"]);
    let general_tools: Vec<&str> = reqs[3].tools.iter().map(|t| t.name.as_str()).collect();
    assert_eq!(general_tools, ["look", "write"], "all the parent's tools but task");
    // The parent's next request does not carry the children's conversations.
    assert_eq!(reqs[4].messages.len(), 3);

    // Child events are tagged with the parent's call id.
    let tagged: Vec<(String, String)> = events
        .iter()
        .filter_map(|e| match e {
            Event::Subagent { parent_id, event, .. } if matches!(**event, Event::ToolUse { .. }) => {
                Some((parent_id.clone(), serde_json::to_value(event).unwrap()["name"].as_str().unwrap().to_string()))
            }
            _ => None,
        })
        .collect();
    assert_eq!(tagged, vec![("p1".to_string(), "look".to_string())]);

    // Usage rolls up: the run's and the conversation's totals include the children.
    assert_eq!(result.usage.input_tokens, 10 + 100 + 120 + 50 + 30);
    assert_eq!(agent.usage().output_tokens, 5 + 10 + 20 + 2 + 3);
    // The child's transcript is kept with the result.
    let entry = agent.conversation().snapshot().into_iter().find(|e| e.meta.contains_key("subagent")).unwrap();
    assert_eq!(entry.meta["subagent"]["agent_type"], "explore");
    assert_eq!(entry.meta["subagent"]["transcript"].as_array().unwrap().len(), 4);
}

#[test]
fn a_child_that_hits_max_turns_or_names_an_unknown_type_is_an_error_result_and_the_parent_goes_on() {
    let steps = vec![
        reply(vec![task("p1", "general", "loop")], StopReason::ToolUse),
        reply(vec![call("c1", "look", json!({"n": 1}))], StopReason::ToolUse),
        reply(vec![call("c2", "look", json!({"n": 2}))], StopReason::ToolUse),
        reply(vec![task("p2", "nope", "x")], StopReason::ToolUse),
        reply(vec![ContentBlock::text("ok")], StopReason::EndTurn),
    ];
    let provider = Arc::new(ScriptedProvider::new(steps));
    let agent = AgentOptions::from_value(json!({"subagents": types()})).unwrap().build_with(provider).unwrap();
    agent
        .tools()
        .register(
            Tool::new("look", "", json!({"type": "object"}), |_: &Value, _: &ToolContext<'_>| {
                Ok(ToolOutput::Text("more".into()))
            })
            .unwrap(),
        )
        .unwrap();
    let result = agent.run("go", &mut |_| {}).unwrap();
    assert_eq!(result.text, "ok");
    assert!(result.tool_calls[0].is_error);
    assert!(result.tool_calls[0].output.as_str().unwrap().contains("max_turns=2"), "{:?}", result.tool_calls[0]);
    assert!(result.tool_calls[1].is_error);
    assert!(result.tool_calls[1].output.as_str().unwrap().contains("must be one of"), "{:?}", result.tool_calls[1]);
}

#[test]
fn cancelling_the_parent_stops_the_child_within_200_ms() {
    let (child_started, child_running) = std::sync::mpsc::channel::<()>();
    let child_started = Mutex::new(child_started);
    let provider = FnProvider::new(move |req: &Request, cancel: &CancelToken| {
        if req.system.is_some() {
            // The child's model: says it runs, then stalls until cancelled.
            let _ = child_started.lock().unwrap().send(());
            while !cancel.is_cancelled() {
                std::thread::sleep(Duration::from_millis(5));
            }
            return Err(Error::Cancelled { partial: None });
        }
        Ok(reply(vec![task("p1", "explore", "stall")], StopReason::ToolUse))
    });
    let agent = Arc::new(
        AgentOptions::from_value(json!({"subagents": types()})).unwrap().build_with(Arc::new(provider)).unwrap(),
    );
    agent.tools().register(counting_tool("look", Arc::new(AtomicUsize::new(0)))).unwrap();
    let token = CancelToken::new();
    let started = Arc::new(Mutex::new(None::<Instant>));
    let t = token.clone();
    let s = started.clone();
    let canceller = std::thread::spawn(move || {
        child_running.recv_timeout(Duration::from_secs(10)).expect("the child's model was called");
        *s.lock().unwrap() = Some(Instant::now());
        t.cancel();
    });
    let err = agent.run_cancellable(vec![ContentBlock::text("go")], token, &mut |_| {}).unwrap_err();
    let took = started.lock().unwrap().unwrap().elapsed();
    canceller.join().unwrap();
    assert!(matches!(err, Error::Cancelled { .. }), "{err:?}");
    assert!(took < Duration::from_millis(200), "cancel took {took:?}");
    println!("cancel reached the child and the run ended in {took:?}");
}

#[test]
fn a_resume_after_a_crash_inside_the_second_child_does_not_run_the_finished_first_child_again() {
    let dir = std::env::temp_dir().join(format!("tooloop-subagent-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let session = dir.join("s.jsonl");
    let _ = std::fs::remove_file(&session);
    let model_calls = Arc::new(AtomicUsize::new(0));
    let n = model_calls.clone();
    let provider = Arc::new(FnProvider::new(move |req: &Request, _: &CancelToken| {
        n.fetch_add(1, Ordering::SeqCst);
        let prompt = req.messages[0]
            .content
            .iter()
            .find_map(|b| if let ContentBlock::Text(t) = b { Some(t.text.clone()) } else { None });
        match (req.system.is_some(), prompt.as_deref()) {
            (true, Some("first")) => Ok(reply(vec![ContentBlock::text("first done")], StopReason::EndTurn)),
            (true, _) => panic!("the process dies inside the second child"),
            (false, _) if req.messages.len() == 1 => {
                Ok(reply(vec![task("p1", "explore", "first"), task("p2", "explore", "second")], StopReason::ToolUse))
            }
            (false, _) => Ok(reply(vec![ContentBlock::text("resumed")], StopReason::EndTurn)),
        }
    }));
    let options = AgentOptions::from_value(json!({"subagents": types(), "session": session})).unwrap();
    let agent = options.build_with(provider.clone()).unwrap();
    agent.tools().register(counting_tool("look", Arc::new(AtomicUsize::new(0)))).unwrap();
    let crashed = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| agent.run("go", &mut |_| {})));
    assert!(crashed.is_err());
    drop(agent);
    assert_eq!(model_calls.load(Ordering::SeqCst), 3, "parent, first child, second child");

    let agent = options.build_with(provider).unwrap();
    agent.tools().register(counting_tool("look", Arc::new(AtomicUsize::new(0)))).unwrap();
    let result = agent.resume(&mut |_| {}).unwrap();
    assert_eq!(result.text, "resumed");
    assert_eq!(model_calls.load(Ordering::SeqCst), 4, "only the parent's next turn: no child ran again");
    let view = serde_json::to_string(&agent.messages()).unwrap();
    assert!(view.contains("first done"), "the finished child's answer was kept");
    assert!(view.contains("interrupted"), "the unfinished one is answered as interrupted");
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn a_read_only_explore_agent_gets_the_builtins_in_read_only_mode_while_the_parent_may_write() {
    if !require::landlock() {
        return;
    }
    let ws = std::env::temp_dir().join(format!("tooloop-sub-sandbox-{}", std::process::id()));
    std::fs::create_dir_all(&ws).unwrap();
    let steps = vec![
        reply(vec![task("p1", "explore", "try to write")], StopReason::ToolUse),
        reply(vec![call("c1", "bash", json!({"command": "echo child > child.txt"}))], StopReason::ToolUse),
        reply(vec![ContentBlock::text("could not write")], StopReason::EndTurn),
        reply(vec![call("p2", "bash", json!({"command": "echo parent > parent.txt"}))], StopReason::ToolUse),
        reply(vec![ContentBlock::text("done")], StopReason::EndTurn),
    ];
    let provider = Arc::new(ScriptedProvider::new(steps));
    let options = AgentOptions::from_value(json!({
        "builtin_tools": ["bash", "read_file"], "workspace": ws,
        "subagents": {"explore": {"description": "Explores, never writes.", "system": "Explore.",
                                  "tools": ["read_file", "bash"], "sandbox": "read-only"}}
    }))
    .unwrap();
    let agent = options.build_with(provider.clone()).unwrap();
    agent.run("go", &mut |_| {}).unwrap();
    assert!(!ws.join("child.txt").exists(), "the read-only child wrote into the workspace");
    assert!(ws.join("parent.txt").exists(), "the parent keeps its workspace-write mode");
    let child_system = provider.requests()[1].system.clone().unwrap().to_string();
    assert!(child_system.contains("Explore.") && child_system.contains("read-only"), "{child_system}");
    let _ = std::fs::remove_dir_all(&ws);
}

#[test]
fn a_stepped_parent_hands_out_its_childs_events_step_by_step_before_the_task_call_is_answered() {
    let steps = vec![
        reply(vec![task("p1", "explore", "find main")], StopReason::ToolUse),
        // child: uses look, then answers
        reply(vec![call("c1", "look", json!({}))], StopReason::ToolUse),
        reply(vec![ContentBlock::text("main is in src/main.rs")], StopReason::EndTurn),
        // parent: done
        reply(vec![ContentBlock::text("all done")], StopReason::EndTurn),
    ];
    let provider = Arc::new(ScriptedProvider::new(steps));
    let agent = AgentOptions::from_value(json!({"subagents": types()})).unwrap().build_with(provider).unwrap();
    agent.tools().register(counting_tool("look", Arc::new(AtomicUsize::new(0)))).unwrap();
    let agent = Arc::new(agent);
    let mut driver = agent.start(Some(vec![ContentBlock::text("investigate")]), CancelToken::new()).unwrap();
    // Each step's events, as a host stepping the run hands them out.
    let mut handed: Vec<Vec<Event>> = Vec::new();
    let result = loop {
        let mut events = Vec::new();
        let outcome = driver.step(&mut |e| events.push(e.clone()));
        handed.push(events);
        if let Some(outcome) = outcome {
            break outcome.unwrap();
        }
    };
    assert_eq!(result.text, "all done");
    let answered = |e: &Event| matches!(e, Event::ToolResult { id, .. } if id == "p1");
    let answered_at = handed.iter().position(|s| s.iter().any(answered)).unwrap();
    let child_steps: Vec<usize> = (0..handed.len())
        .filter(|&i| handed[i].iter().any(|e| matches!(e, Event::Subagent { parent_id, .. } if parent_id == "p1")))
        .collect();
    // The child's turns and its call came out a step at a time, before the step that answered the task call.
    assert!(child_steps.len() >= 2, "{child_steps:?} of {} steps", handed.len());
    assert!(child_steps[0] < answered_at && child_steps[1] < answered_at, "{child_steps:?}, answered at {answered_at}");
}
