//! A gate every HTTP attempt passes through, set per thread by a host that runs many agents at once (a batch):
//! before each attempt it may let the request go, make it wait (a requests- or tokens-per-minute limit, a
//! `retry-after` another agent of the batch received) or stop it (the batch was cancelled); after each
//! response head it learns the status and the server's `retry-after`, so one 429 can pause every agent that
//! shares the gate. Spend is not the gate's: the agent loop keeps every cap, a batch's budget included, in
//! its [`crate::ledger`], for requests that never reach HTTP (a host model) too.
//!
//! The gate travels with the run's [`CancelToken`] ([`CancelToken::gated`]): every request made under the token
//! or a clone of it passes it, on whichever thread — the run's own, its subagents', its parallel tools'. (The
//! thread-local [`with_send_gate`] of earlier releases still works, for the requests of that thread only.)
//!
//! Must never: sleep without watching the request's cancel token, or hold anything across the attempt itself.

use std::cell::RefCell;
use std::rc::Rc;
use std::time::Duration;

use crate::cancel::CancelToken;

/// The longest single wait before the gate is asked again (a limit may free up sooner, another agent's
/// answer may change the picture).
const ASK_AGAIN: Duration = Duration::from_millis(50);

pub use crate::send_gate::{Admit, SendGate};

thread_local! {
    static GATE: RefCell<Option<Rc<dyn SendGate>>> = const { RefCell::new(None) };
}

/// Run `f` with `gate` as this thread's send gate, for the requests whose token carries none. Nested calls
/// stack.
#[deprecated(note = "give the run a gated token (CancelToken::gated): its subagents and parallel tools are gated too")]
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

/// The gate of a request made under `cancel`: the token's, else this thread's (see [`with_send_gate`]).
fn gate_of(cancel: &CancelToken) -> Option<Rc<dyn SendGate>> {
    match cancel.send_gate() {
        Some(g) => Some(Rc::new(Shared(g))),
        None => GATE.with_borrow(|cur| cur.clone()),
    }
}

/// A token's gate behind the thread-local's type.
struct Shared(std::sync::Arc<dyn SendGate + Send + Sync>);

impl SendGate for Shared {
    fn before_send(&self, body_bytes: usize) -> Admit {
        self.0.before_send(body_bytes)
    }
    fn after_response(&self, status: u16, retry_after: Option<Duration>) {
        self.0.after_response(status, retry_after)
    }
}

/// Wait until the request's gate (if any) lets an attempt of `body_bytes` go. `false`: do not send (the gate
/// said stop, or `cancel` fired while waiting).
pub(crate) fn admit(cancel: &CancelToken, body_bytes: usize) -> bool {
    let Some(gate) = gate_of(cancel) else { return true };
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

/// Tell the request's gate (if any) how an attempt was answered.
pub(crate) fn report(cancel: &CancelToken, status: u16, retry_after: Option<Duration>) {
    if let Some(g) = gate_of(cancel) {
        g.after_response(status, retry_after);
    }
}

#[cfg(test)]
#[allow(deprecated)]
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
            report(&CancelToken::new(), 429, None);
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
