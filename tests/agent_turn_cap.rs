//! A model turn with hundreds of tool calls: at most `MAX_TOOL_CALLS_PER_TURN` run, the
//! rest are answered with an error result; identical calls inside one turn count for the runaway guard.
#![allow(clippy::unwrap_used, clippy::expect_used)]

#[path = "common/mock.rs"]
mod mock;

#[path = "common/agent.rs"]
mod common;
use common::*;

use serde_json::json;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use tooloop::agent::MAX_TOOL_CALLS_PER_TURN;
use tooloop::provider::ScriptedProvider;
use tooloop::provider::host::reply;
use tooloop::{Agent, ContentBlock, Event, StopReason};

#[test]
fn a_turn_of_hundreds_of_calls_runs_only_the_documented_number() {
    assert_eq!(MAX_TOOL_CALLS_PER_TURN, 64, "the README documents 64");
    let many: Vec<ContentBlock> =
        (0..200).map(|i| tool_use(&format!("c{i}"), "echo", json!({"text": format!("n{i}")}))).collect();
    let replies = vec![reply(many, StopReason::ToolUse), reply(vec![ContentBlock::text("done")], StopReason::EndTurn)];
    let agent = Agent::new(Arc::new(ScriptedProvider::new(replies)), config());
    let calls = Arc::new(AtomicUsize::new(0));
    agent.tools().register(echo_tool(calls.clone())).unwrap();
    let result = agent.run("go", &mut |_: &Event| {}).unwrap();
    assert_eq!(result.stop_reason, Some(StopReason::EndTurn));
    assert_eq!(calls.load(Ordering::SeqCst), MAX_TOOL_CALLS_PER_TURN);
    assert_eq!(result.tool_calls.len(), 200, "every call is answered");
    for (i, record) in result.tool_calls.iter().enumerate() {
        if i < MAX_TOOL_CALLS_PER_TURN {
            assert!(!record.is_error, "call {i}");
        } else {
            assert!(record.is_error, "call {i}");
            let text = record.output.as_str().unwrap();
            assert!(text.contains("at most 64 tool calls") && text.contains("made 200"), "{text}");
        }
    }
    assert_valid_view(&agent.messages());
}

#[test]
fn identical_calls_inside_one_turn_count_for_the_runaway_guard() {
    let same: Vec<ContentBlock> =
        (0..100).map(|i| tool_use(&format!("c{i}"), "echo", json!({"text": "again"}))).collect();
    let replies = vec![reply(same, StopReason::ToolUse), reply(vec![ContentBlock::text("never")], StopReason::EndTurn)];
    let provider = Arc::new(ScriptedProvider::new(replies));
    let agent = Agent::new(provider.clone(), guarded());
    let calls = Arc::new(AtomicUsize::new(0));
    agent.tools().register(echo_tool(calls.clone())).unwrap();
    let mut guard = Vec::new();
    let result = agent
        .run("go", &mut |e: &Event| {
            if let Event::Repetition { count, stopped, .. } = e {
                guard.push((*count, *stopped));
            }
        })
        .unwrap();
    // The guard (progress_guard on): two run, the 3rd and 4th are refused with a note, the 5th stops the run.
    assert_eq!(calls.load(Ordering::SeqCst), 2, "only the first two identical calls ran");
    assert_eq!(guard, vec![(3, false), (4, false), (5, true)]);
    assert_eq!(result.stop_reason, Some(StopReason::Repetition));
    // After the stop, one request with tools off for the model's answer (a guard's stop still answers).
    assert_eq!((result.turns, result.text.as_str()), (2, "never"));
    assert_eq!(provider.remaining(), 0, "no request after that answer");
    assert_eq!(result.tool_calls.len(), 100, "every call is answered");
    assert!(result.tool_calls[5..].iter().all(|r| r.is_error));
    assert_valid_view(&agent.messages());
}
