//! What a send gate is (re-exported by [`crate::gate`]): below [`crate::cancel`], whose tokens carry a run's
//! gate to every request the run makes, on whichever thread. Must never import anything of the crate.

use std::time::Duration;

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

/// A host's gate for the HTTP attempts of a run (see [`crate::gate`]).
pub trait SendGate {
    /// An attempt of `body_bytes` bytes is about to be sent.
    fn before_send(&self, body_bytes: usize) -> Admit;
    /// The response head of an attempt arrived: its status, and the server's `retry-after` if it gave one.
    fn after_response(&self, status: u16, retry_after: Option<Duration>);
}
