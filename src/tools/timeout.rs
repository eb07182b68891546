//! A time limit on one tool's calls ([`Tool::timeout`](crate::tools::Tool::timeout)): the handler runs on a
//! thread of its own while the agent's thread waits at most the limit. An overrun is answered with an
//! `is_error` result at once, and the handler's [`ToolContext::cancel`] token fires so a handler that polls
//! it (a C tool through `tooloop_tool_result_is_cancelled`, a Rust handler, the Python wrapper) can stop.
//! A cancel of the run also ends the wait at once.
//!
//! Must never: let the run wait past the limit for a stuck handler, or drop a handler's state while it
//! still runs (the thread holds its own reference to the handler until the call returns).

use std::panic::{AssertUnwindSafe, catch_unwind};
use std::sync::Arc;
use std::sync::mpsc;
use std::time::{Duration, Instant};

use serde_json::Value;

use super::{ToolContext, ToolError, ToolHandler, ToolOutput};
use crate::cancel::CancelToken;

/// How often the wait looks at the run's cancel token.
const SLICE: Duration = Duration::from_millis(20);

/// A handler run under a time limit.
pub(crate) struct TimeoutHandler {
    pub(crate) inner: Arc<dyn ToolHandler>,
    pub(crate) limit: Duration,
}

type Reply = std::result::Result<ToolOutput, ToolError>;

impl ToolHandler for TimeoutHandler {
    fn call(&self, input: &Value, ctx: &ToolContext<'_>) -> Reply {
        let own = CancelToken::new();
        let (tx, rx) = mpsc::channel::<Reply>();
        let (inner, input_owned, own_clone) = (Arc::clone(&self.inner), input.clone(), own.clone());
        let (id, name, read_only) = (ctx.tool_use_id.to_string(), ctx.tool_name.to_string(), ctx.read_only);
        // The call's span goes with it: what the tool starts on its thread nests under its execute_tool.
        let carried = crate::trace::Carried::here();
        let spawned = std::thread::Builder::new().name(format!("tooloop-tool-{name}")).spawn(move || {
            let ctx = ToolContext { tool_use_id: &id, tool_name: &name, cancel: &own_clone, read_only };
            let call = || carried.run(|| inner.call(&input_owned, &ctx));
            let reply = catch_unwind(AssertUnwindSafe(call)).unwrap_or_else(|panic| {
                let what = panic
                    .downcast_ref::<&str>()
                    .map(|s| s.to_string())
                    .or_else(|| panic.downcast_ref::<String>().cloned())
                    .unwrap_or_else(|| "unknown panic".to_string());
                Err(ToolError::Respond(format!("Tool '{name}' crashed (panic: {what}). Try another approach.")))
            });
            let _ = tx.send(reply);
        });
        if let Err(e) = spawned {
            return Err(ToolError::Respond(format!("could not start tool '{}': {e}", ctx.tool_name)));
        }
        let deadline = Instant::now() + self.limit;
        loop {
            ctx.cancel.poll(false);
            if ctx.cancel.is_cancelled() {
                own.cancel();
                return Err(ToolError::Respond(format!("cancelled: tool '{}' was told to stop", ctx.tool_name)));
            }
            let now = Instant::now();
            if now >= deadline {
                own.cancel();
                return Err(ToolError::Respond(format!(
                    "Tool '{}' did not finish within its time limit of {} and was told to stop; its result is lost. \
                     Try smaller input or another approach.",
                    ctx.tool_name,
                    seconds(self.limit)
                )));
            }
            match rx.recv_timeout(SLICE.min(deadline - now)) {
                Ok(reply) => return reply,
                Err(mpsc::RecvTimeoutError::Timeout) => {}
                Err(mpsc::RecvTimeoutError::Disconnected) => {
                    return Err(ToolError::Respond(format!("Tool '{}' ended without a result", ctx.tool_name)));
                }
            }
        }
    }
}

fn seconds(d: Duration) -> String {
    let s = d.as_secs_f64();
    if s.fract() == 0.0 { format!("{s:.0} s") } else { format!("{s:.1} s") }
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod tests {
    use crate::cancel::CancelToken;
    use crate::tools::{Tool, ToolContext, ToolError, ToolOutput, ToolRegistry};
    use crate::types::ToolUseBlock;
    use serde_json::{Value, json};
    use std::sync::Arc;
    use std::sync::atomic::{AtomicBool, Ordering};
    use std::time::{Duration, Instant};

    fn call(name: &str) -> ToolUseBlock {
        serde_json::from_value(json!({"id": "t1", "name": name, "input": {}})).unwrap()
    }

    #[test]
    fn an_overrun_is_an_error_result_at_the_limit_and_the_handler_is_told_to_stop() {
        let told = Arc::new(AtomicBool::new(false));
        let seen = Arc::clone(&told);
        let handler = move |_: &Value, ctx: &ToolContext<'_>| -> Result<ToolOutput, ToolError> {
            let start = Instant::now();
            while start.elapsed() < Duration::from_secs(10) {
                if ctx.cancel.is_cancelled() {
                    seen.store(true, Ordering::SeqCst);
                    break;
                }
                std::thread::sleep(Duration::from_millis(5));
            }
            Ok("late".into())
        };
        let registry = ToolRegistry::new();
        let tool = Tool::new("slow", "", json!({"type": "object"}), handler).unwrap();
        registry.register(tool.timeout(Duration::from_millis(200))).unwrap();
        let start = Instant::now();
        let out = registry.execute(&call("slow"), &CancelToken::new());
        assert!(start.elapsed() < Duration::from_millis(600), "{:?}", start.elapsed());
        assert!(out.is_error, "{out:?}");
        assert!(out.content.as_str().unwrap().contains("time limit of 0.2 s"), "{out:?}");
        let until = Instant::now() + Duration::from_secs(2);
        while !told.load(Ordering::SeqCst) && Instant::now() < until {
            std::thread::sleep(Duration::from_millis(5));
        }
        assert!(told.load(Ordering::SeqCst));
    }

    #[test]
    fn a_call_within_the_limit_answers_as_usual_and_a_run_cancel_ends_the_wait() {
        let registry = ToolRegistry::new();
        let quick = Tool::new("quick", "", json!({"type": "object"}), |_: &Value, _: &ToolContext<'_>| {
            Ok(ToolOutput::Text("fine".into()))
        })
        .unwrap();
        registry.register(quick.timeout(Duration::from_secs(5))).unwrap();
        let out = registry.execute(&call("quick"), &CancelToken::new());
        assert_eq!((out.content, out.is_error), (json!("fine"), false));

        let stuck = Tool::new("stuck", "", json!({"type": "object"}), |_: &Value, _: &ToolContext<'_>| {
            std::thread::sleep(Duration::from_secs(3));
            Ok(ToolOutput::Text("late".into()))
        })
        .unwrap();
        registry.register(stuck.timeout(Duration::from_secs(60))).unwrap();
        let cancel = CancelToken::new();
        let c2 = cancel.clone();
        std::thread::spawn(move || {
            std::thread::sleep(Duration::from_millis(50));
            c2.cancel();
        });
        let start = Instant::now();
        let out = registry.execute(&call("stuck"), &cancel);
        assert!(start.elapsed() < Duration::from_millis(500));
        assert!(out.is_error && out.content.as_str().unwrap().contains("cancelled"));
    }
}
