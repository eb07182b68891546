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

use crate::cancel::CancelToken;
use crate::tools::{ToolContext, ToolError, ToolHandler, ToolOutput};

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
        let (id, name) = (ctx.tool_use_id.to_string(), ctx.tool_name.to_string());
        let spawned = std::thread::Builder::new().name(format!("tooloop-tool-{name}")).spawn(move || {
            let ctx = ToolContext { tool_use_id: &id, tool_name: &name, cancel: &own_clone };
            let reply = catch_unwind(AssertUnwindSafe(|| inner.call(&input_owned, &ctx))).unwrap_or_else(|panic| {
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
