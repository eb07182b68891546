//! The thread's poll hook (`tooloop::cancel::with_poll_hook`) runs during every wait of a run on that
//! thread, not only the network's: parallel tools, a tool with a time limit (on its own thread), a bash
//! command. It is how a host that runs the loop on its own thread (Python's `Agent.run`) notices a Ctrl+C
//! and cancels the run within 200 ms, so each test cancels from the hook and times the run's end.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::cell::Cell;
use std::rc::Rc;
use std::sync::Arc;
use std::time::{Duration, Instant};

use serde_json::{Value, json};
use tooloop::provider::FnProvider;
use tooloop::provider::host::reply;
use tooloop::types::ToolUseBlock;
use tooloop::{
    Agent, AgentConfig, AgentOptions, CancelToken, ContentBlock, Error, Provider, StopReason, Tool, ToolContext,
    ToolOutput,
};

/// A model that asks for `calls` (name, input) in its first turn and then answers "done".
fn model(calls: Vec<(&'static str, Value)>) -> Arc<dyn Provider> {
    Arc::new(FnProvider::new(move |req: &tooloop::Request, _: &CancelToken| {
        let answered = req.messages.len() > 1;
        Ok(if answered {
            reply(vec![ContentBlock::text("done")], StopReason::EndTurn)
        } else {
            let blocks = calls
                .iter()
                .enumerate()
                .map(|(i, (name, input))| {
                    ContentBlock::ToolUse(ToolUseBlock {
                        id: format!("toolu_{i}"),
                        name: (*name).into(),
                        input: input.clone(),
                        ..Default::default()
                    })
                })
                .collect();
            reply(blocks, StopReason::ToolUse)
        })
    }))
}

/// A tool that waits (up to 10 s) until its run is cancelled.
fn waits_for_cancel(name: &str) -> Tool {
    Tool::new(name, "waits", json!({"type": "object"}), |_: &Value, ctx: &ToolContext<'_>| {
        let until = Instant::now() + Duration::from_secs(10);
        while !ctx.cancel.is_cancelled() && Instant::now() < until {
            std::thread::sleep(Duration::from_millis(5));
        }
        Ok(ToolOutput::Text("stopped".into()))
    })
    .unwrap()
}

/// Run `agent` on this thread with a poll hook that cancels the run at its third call (about 100 ms in):
/// (the run's error, how many times the hook ran, the time from the cancel to the run's end).
fn run_cancelled_by_the_hook(agent: &Agent) -> (Error, u32, Duration) {
    let token = CancelToken::new();
    let calls = Rc::new(Cell::new(0u32));
    let cancelled_at = Rc::new(Cell::new(None::<Instant>));
    let hook = {
        let (calls, cancelled_at, token) = (calls.clone(), cancelled_at.clone(), token.clone());
        Rc::new(move || {
            calls.set(calls.get() + 1);
            if calls.get() == 3 {
                cancelled_at.set(Some(Instant::now()));
                token.cancel();
            }
        })
    };
    let got = tooloop::cancel::with_poll_hook(hook, || {
        agent.run_cancellable(vec![ContentBlock::text("go")], token, &mut |_| {})
    });
    let ended = Instant::now();
    let err = got.expect_err("the run was cancelled");
    let took = ended - cancelled_at.get().expect("the hook cancelled the run");
    (err, calls.get(), took)
}

fn config() -> AgentConfig {
    AgentConfig { model: "claude-sonnet-4-6".into(), max_tokens: 1024, cache: false, ..Default::default() }
}

#[test]
fn the_poll_hook_runs_while_parallel_tools_run_and_its_cancel_stops_them() {
    let agent = Agent::new(model(vec![("a", json!({})), ("b", json!({}))]), config());
    agent.tools().register(waits_for_cancel("a").parallel_safe(true)).unwrap();
    agent.tools().register(waits_for_cancel("b").parallel_safe(true)).unwrap();
    let (err, calls, took) = run_cancelled_by_the_hook(&agent);
    println!("parallel tools: cancelled by the hook, the run ended {took:?} later");
    assert!(matches!(err, Error::Cancelled { .. }), "{err:?}");
    assert!(calls >= 3);
    assert!(took < Duration::from_millis(200), "{took:?}");
}

#[test]
fn the_poll_hook_runs_while_a_tool_with_a_time_limit_runs() {
    let agent = Agent::new(model(vec![("slow", json!({}))]), config());
    agent.tools().register(waits_for_cancel("slow").timeout(Duration::from_secs(10))).unwrap();
    let (err, _, took) = run_cancelled_by_the_hook(&agent);
    println!("a tool with a time limit: cancelled by the hook, the run ended {took:?} later");
    assert!(matches!(err, Error::Cancelled { .. }), "{err:?}");
    assert!(took < Duration::from_millis(200), "{took:?}");
}

#[test]
fn the_poll_hook_runs_while_a_bash_command_runs_and_its_cancel_stops_it() {
    let dir = std::env::temp_dir().join(format!("tooloop-poll-hook-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let options = AgentOptions::from_value(json!({
        "builtin_tools": ["bash"], "workspace": dir, "sandbox": "off", "cache": false,
        "model": "claude-sonnet-4-6",
    }))
    .unwrap();
    let agent = options.build_with(model(vec![("bash", json!({"command": "sleep 30"}))])).unwrap();
    let started = Instant::now();
    let (err, _, took) = run_cancelled_by_the_hook(&agent);
    println!("bash: cancelled by the hook, the run ended {took:?} later");
    assert!(matches!(err, Error::Cancelled { .. }), "{err:?}");
    assert!(took < Duration::from_millis(200), "{took:?}");
    assert!(started.elapsed() < Duration::from_secs(5));
    let _ = std::fs::remove_dir_all(&dir);
}

#[path = "common/mock.rs"]
mod mock;

#[test]
fn a_tokens_poll_hook_runs_in_a_wait_on_any_thread_the_token_is_handed_to_and_its_cancel_ends_it() {
    // A run's hook travels with its token (CancelToken::with_hooks), not with the thread that set it up: a
    // request under a clone on another thread (as a parallel tool's or a subagent's) runs it too.
    let server = mock::MockServer::start(&mock::scenario("anthropic_stream_stall"));
    let mut c = tooloop::provider::ProviderConfig::new(tooloop::provider::Protocol::Anthropic);
    c.api_key = Some(tooloop::provider::Secret::new("sk-ant-mock"));
    c.base_url = Some(server.base_url());
    let provider = c.build().unwrap();
    let calls = Arc::new(std::sync::atomic::AtomicU32::new(0));
    let cancelled_at = Arc::new(std::sync::Mutex::new(None::<Instant>));
    let hook: tooloop::cancel::PollHook = {
        let (calls, cancelled_at) = (calls.clone(), cancelled_at.clone());
        Arc::new(move |token: &CancelToken| {
            if calls.fetch_add(1, std::sync::atomic::Ordering::SeqCst) + 1 == 3 {
                *cancelled_at.lock().unwrap() = Some(Instant::now());
                token.cancel();
            }
        })
    };
    let token = CancelToken::with_hooks(None, Some(hook));
    let request: tooloop::Request = serde_json::from_value(json!({
        "model": "claude-sonnet-4-6", "max_tokens": 64, "stream": true,
        "messages": [{"role": "user", "content": "hi"}]
    }))
    .unwrap();
    let clone = token.clone();
    let started = Instant::now();
    let got = std::thread::spawn(move || provider.send(&request, &clone, &mut |_| {})).join().unwrap();
    let ended = Instant::now();
    assert!(matches!(got, Err(Error::Cancelled { .. })), "{got:?}");
    assert!(ended - started < Duration::from_secs(5), "the stall was not cut short");
    let at = cancelled_at.lock().unwrap().expect("the hook cancelled the request");
    assert!(ended - at < Duration::from_millis(200), "{:?}", ended - at);
}
