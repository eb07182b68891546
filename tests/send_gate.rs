//! A send gate carried by the run's token (`CancelToken::gated`): every HTTP attempt made under the token or a
//! clone of it passes the gate, whichever thread makes it — a subagent's requests, and a request on a thread
//! the token was handed to, as well as the run's own.
#![allow(clippy::unwrap_used, clippy::expect_used)]

#[path = "common/mock.rs"]
mod mock;

#[path = "common/agent.rs"]
mod common;

use std::sync::{Arc, Mutex};
use std::thread::ThreadId;
use std::time::Duration;

use common::*;
use mock::{MockServer, scripted};
use serde_json::json;
use tooloop::gate::{Admit, SendGate};
use tooloop::{AgentOptions, CancelToken, ContentBlock, Request};

/// Lets every attempt go; records the thread each came from, and the statuses.
#[derive(Default)]
struct Recorder {
    sends: Mutex<Vec<ThreadId>>,
    statuses: Mutex<Vec<u16>>,
}

impl SendGate for Recorder {
    fn before_send(&self, _body_bytes: usize) -> Admit {
        self.sends.lock().unwrap().push(std::thread::current().id());
        Admit::Go
    }
    fn after_response(&self, status: u16, _retry_after: Option<Duration>) {
        self.statuses.lock().unwrap().push(status);
    }
}

#[test]
fn a_subagents_requests_pass_the_gate_the_parents_token_carries() {
    let steps = [
        json!({"name": "task", "input": {"description": "d", "prompt": "say hi", "agent_type": "helper"}}),
        json!("hi from the child"),
        json!("parent done"),
    ];
    let mock = MockServer::start(&scripted("a parent hands a task to a child", &steps));
    let options = AgentOptions::from_value(json!({
        "model": "claude-sonnet-4-6", "subagents": {"helper": {"description": "says hi"}}
    }))
    .unwrap();
    let agent = options.build_with(anthropic(&mock)).unwrap();
    let gate = Arc::new(Recorder::default());
    let token = CancelToken::gated(gate.clone());
    let result = agent.run_cancellable(vec![ContentBlock::text("go")], token, &mut |_| {}).unwrap();
    assert_eq!(result.text, "parent done");
    assert_eq!(mock.requests().len(), 3);
    assert_eq!(gate.sends.lock().unwrap().len(), 3, "the child's request passed the gate too");
    assert_eq!(*gate.statuses.lock().unwrap(), [200, 200, 200]);
}

#[test]
fn a_request_under_a_clone_of_a_gated_token_on_another_thread_passes_the_gate() {
    let mock = MockServer::start(&scripted("one answer", &[json!("hello")]));
    let provider = anthropic(&mock);
    let gate = Arc::new(Recorder::default());
    let token = CancelToken::gated(gate.clone());
    let request: Request = serde_json::from_value(json!({
        "model": "claude-sonnet-4-6", "max_tokens": 64, "messages": [{"role": "user", "content": "hi"}]
    }))
    .unwrap();
    let clone = token.clone();
    let there = std::thread::spawn(move || {
        provider.send(&request, &clone, &mut |_| {}).unwrap();
        std::thread::current().id()
    })
    .join()
    .unwrap();
    assert_eq!(*gate.sends.lock().unwrap(), [there]);
    assert_eq!(*gate.statuses.lock().unwrap(), [200]);
    // A token without a gate lets its requests go unasked.
    assert!(CancelToken::new().send_gate().is_none() && token.send_gate().is_some());
}
