//! A gate every HTTP attempt passes through, set per thread by a host that runs many agents at once (a batch):
//! before each attempt it may let the request go, make it wait (a requests- or tokens-per-minute limit, a
//! `retry-after` another agent of the batch received) or stop it (the batch was cancelled); after each
//! response head it learns the status and the server's `retry-after`, so one 429 can pause every agent that
//! shares the gate. Spend is not the gate's: the agent loop keeps every cap, a batch's budget included, in
//! its [`crate::ledger`], for requests that never reach HTTP (a host model) too.
//!
//! The gate is thread-local, like the poll and wait hooks of [`crate::http`]: the binding sets it around a run
//! on the run's worker thread; requests made on other threads (a subagent's, a parallel tool's) are not gated.
//!
//! Must never: sleep without watching the request's cancel token, or hold anything across the attempt itself.

use std::cell::RefCell;
use std::rc::Rc;
use std::time::Duration;

use crate::cancel::CancelToken;

/// The longest single wait before the gate is asked again (a limit may free up sooner, another agent's
/// answer may change the picture).
const ASK_AGAIN: Duration = Duration::from_millis(50);

/// What a gate says about the next attempt.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Admit {
    /// Send it now.
    Go,
    /// Ask again after this long.
    Wait(Duration),
    /// Do not send it: the run ends as cancelled (the host knows why).
    Stop,
}

/// A host's gate for the HTTP attempts of the runs on this thread.
pub trait SendGate {
    /// An attempt of `body_bytes` bytes is about to be sent.
    fn before_send(&self, body_bytes: usize) -> Admit;
    /// The response head of an attempt arrived: its status, and the server's `retry-after` if it gave one.
    fn after_response(&self, status: u16, retry_after: Option<Duration>);
}

thread_local! {
    static GATE: RefCell<Option<Rc<dyn SendGate>>> = const { RefCell::new(None) };
}

/// Run `f` with `gate` as this thread's send gate (see the module docs). Nested calls stack.
pub fn with_send_gate<R>(gate: Rc<dyn SendGate>, f: impl FnOnce() -> R) -> R {
    struct Restore(Option<Rc<dyn SendGate>>);
    impl Drop for Restore {
        fn drop(&mut self) {
            let prev = self.0.take();
            GATE.with_borrow_mut(|cur| *cur = prev);
        }
    }
    let prev = GATE.with_borrow_mut(|cur| cur.replace(gate));
    let _restore = Restore(prev);
    f()
}

/// Wait until the thread's gate (if any) lets an attempt of `body_bytes` go. `false`: do not send (the gate
/// said stop, or `cancel` fired while waiting).
pub(crate) fn admit(cancel: &CancelToken, body_bytes: usize) -> bool {
    let Some(gate) = GATE.with_borrow(|cur| cur.clone()) else { return true };
    loop {
        if cancel.is_cancelled() {
            return false;
        }
        match gate.before_send(body_bytes) {
            Admit::Go => return true,
            Admit::Stop => return false,
            Admit::Wait(d) => {
                if crate::cancel::sleep_watched(cancel, d.min(ASK_AGAIN)) {
                    return false;
                }
            }
        }
    }
}

/// Tell the thread's gate (if any) how an attempt was answered.
pub(crate) fn report(status: u16, retry_after: Option<Duration>) {
    let gate = GATE.with_borrow(|cur| cur.clone());
    if let Some(g) = gate {
        g.after_response(status, retry_after);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::cell::Cell;

    struct Count {
        waits: Cell<u32>,
        seen: Cell<u16>,
    }

    impl SendGate for Count {
        fn before_send(&self, _body_bytes: usize) -> Admit {
            let n = self.waits.get();
            if n == 0 {
                return Admit::Go;
            }
            self.waits.set(n - 1);
            Admit::Wait(Duration::from_millis(1))
        }
        fn after_response(&self, status: u16, _retry_after: Option<Duration>) {
            self.seen.set(status);
        }
    }

    struct Closed;

    impl SendGate for Closed {
        fn before_send(&self, _body_bytes: usize) -> Admit {
            Admit::Stop
        }
        fn after_response(&self, _status: u16, _retry_after: Option<Duration>) {}
    }

    #[test]
    fn no_gate_lets_everything_go() {
        assert!(admit(&CancelToken::new(), 10));
    }

    #[test]
    fn a_waiting_gate_is_asked_again_until_it_says_go_and_hears_the_status() {
        let gate = Rc::new(Count { waits: Cell::new(3), seen: Cell::new(0) });
        let g = gate.clone();
        let ok = with_send_gate(g, || {
            let ok = admit(&CancelToken::new(), 10);
            report(429, None);
            ok
        });
        assert!(ok);
        assert_eq!(gate.waits.get(), 0);
        assert_eq!(gate.seen.get(), 429);
        // Outside the scope the gate is gone.
        assert!(admit(&CancelToken::new(), 10));
    }

    #[test]
    fn a_stopping_gate_or_a_cancel_refuses_the_attempt() {
        assert!(!with_send_gate(Rc::new(Closed), || admit(&CancelToken::new(), 1)));
        let cancel = CancelToken::new();
        cancel.cancel();
        let gate = Rc::new(Count { waits: Cell::new(1000), seen: Cell::new(0) });
        assert!(!with_send_gate(gate, || admit(&cancel, 1)));
    }
}
