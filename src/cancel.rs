//! Cooperative cancellation shared between a run and the threads that may stop it.
//!
//! A [`CancelToken`] is a cheap, cloneable handle. `cancel()` may be called from any thread, any number
//! of times; everything blocking inside tooloop (network reads, retry back-off, tools) polls it or waits
//! on it, so a run ends within a bounded time (the target is 200 ms) after `cancel()`.
//!
//! A token may carry a run's hooks ([`CancelToken::with_hooks`]) to every wait and request made under it or
//! a clone of it, on whichever thread — the run's own, its subagents', its parallel tools': a send gate (see
//! [`crate::gate`]) and a poll hook, which every wait of the core (network reads, retry back-off, a running
//! command, a tool on its own thread, parallel tools, an MCP reply, a send gate's pause) runs about every
//! 50 ms. It is how a host whose signals are handled on the waiting thread (Python's Ctrl+C) notices them
//! while the core waits, and cancels the run's token. A wait under a token without a poll hook runs the
//! thread's, if one is set ([`with_poll_hook`]: for waits outside a run, such as a raw client's request).

use std::cell::RefCell;
use std::rc::Rc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Condvar, Mutex};
use std::time::{Duration, Instant};

use crate::send_gate::SendGate;

/// A thread-safe cancellation flag with a wake-up for sleepers.
///
/// # Threads and cloning
/// Clones share one flag: cancelling any clone cancels them all. `Send + Sync`; cancelling is lock-free
/// except for waking threads blocked in [`CancelToken::sleep`].
#[derive(Clone, Debug, Default)]
pub struct CancelToken {
    inner: Arc<Inner>,
}

#[derive(Default)]
struct Inner {
    flag: AtomicBool,
    lock: Mutex<()>,
    wake: Condvar,
    /// The send gate of every request made under this token (see [`crate::gate`]).
    gate: Option<Arc<dyn SendGate + Send + Sync>>,
    /// The poll hook of every wait under this token, and when it last ran (see [`CancelToken::with_hooks`]).
    poll: Option<PollHook>,
    polled_at: Mutex<Option<Instant>>,
}

/// A run's poll hook: given the token of the wait that runs it (see [`CancelToken::with_hooks`]).
pub type PollHook = Arc<dyn Fn(&CancelToken) + Send + Sync>;

impl std::fmt::Debug for Inner {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Inner")
            .field("flag", &self.flag)
            .field("gated", &self.gate.is_some())
            .field("polled", &self.poll.is_some())
            .finish()
    }
}

impl CancelToken {
    /// A new token, not cancelled.
    pub fn new() -> Self {
        Self::default()
    }

    /// A new token, not cancelled, whose requests pass `gate` (see [`crate::gate`]): a run started with it
    /// hands it, with its clones, to its subagents and to the threads of its parallel tools, so every HTTP
    /// attempt of the run is gated, on whichever thread it is made.
    pub fn gated(gate: Arc<dyn SendGate + Send + Sync>) -> Self {
        CancelToken::with_hooks(Some(gate), None)
    }

    /// A new token, not cancelled, carrying a run's hooks to every wait and request made under it or a clone
    /// of it, on whichever thread (the run's own, its subagents', its parallel tools', a tool's own thread):
    /// `gate` for each HTTP attempt (see [`crate::gate`]), `poll` run about every 50 ms while the core waits
    /// (the network, a retry back-off, a command, tools on other threads, an MCP reply, a send gate's pause),
    /// given the token — how a host whose signals are handled on the waiting thread (Python's Ctrl+C) notices
    /// them and cancels. A wait under a token without a poll hook runs the thread's (see [`with_poll_hook`]).
    pub fn with_hooks(gate: Option<Arc<dyn SendGate + Send + Sync>>, poll: Option<PollHook>) -> Self {
        CancelToken { inner: Arc::new(Inner { gate, poll, ..Inner::default() }) }
    }

    /// Run the poll hook of a wait under this token if it is due (or `force`): the token's, else the
    /// thread's. Every wait loop in the core calls it once per slice.
    pub(crate) fn poll(&self, force: bool) {
        let Some(hook) = &self.inner.poll else { return poll(force) };
        let due = {
            let mut at = self.inner.polled_at.lock().unwrap_or_else(|e| e.into_inner());
            let due = force || at.is_none_or(|t| t.elapsed() >= POLL_EVERY);
            if due {
                *at = Some(Instant::now());
            }
            due
        };
        if due {
            hook(self);
        }
    }

    /// Whether a wait under this token has a poll hook to run (its own or the thread's): such a wait takes
    /// slices instead of blocking in one piece.
    pub(crate) fn polled(&self) -> bool {
        self.inner.poll.is_some() || polled()
    }

    /// The send gate this token carries, if any.
    pub fn send_gate(&self) -> Option<Arc<dyn SendGate + Send + Sync>> {
        self.inner.gate.clone()
    }

    /// Cancel: every clone reports `is_cancelled() == true` from now on, and sleepers wake at once.
    pub fn cancel(&self) {
        self.inner.flag.store(true, Ordering::SeqCst);
        // Take the lock so a sleeper between its flag check and its wait cannot miss the wake-up.
        let _guard = self.inner.lock.lock().unwrap_or_else(|e| e.into_inner());
        self.inner.wake.notify_all();
    }

    /// Whether `cancel()` was called on this token or a clone of it.
    pub fn is_cancelled(&self) -> bool {
        self.inner.flag.load(Ordering::SeqCst)
    }

    /// Sleep for `duration` unless cancelled first. Returns `true` when the sleep was cut short by a cancel.
    pub fn sleep(&self, duration: Duration) -> bool {
        let deadline = Instant::now() + duration;
        let mut guard = self.inner.lock.lock().unwrap_or_else(|e| e.into_inner());
        loop {
            if self.is_cancelled() {
                return true;
            }
            let now = Instant::now();
            if now >= deadline {
                return false;
            }
            guard = match self.inner.wake.wait_timeout(guard, deadline - now) {
                Ok((g, _)) => g,
                Err(e) => e.into_inner().0,
            };
        }
    }
}

/// How often, at most, the thread's poll hook runs while the core waits.
const POLL_EVERY: Duration = Duration::from_millis(50);

struct PollState {
    hook: Rc<dyn Fn()>,
    last: Instant,
}

thread_local! {
    static POLL: RefCell<Option<PollState>> = const { RefCell::new(None) };
}

/// Run `f` with `hook` as this thread's poll hook: while the core waits on this thread for something (the
/// network, a retry back-off, a command, a tool on another thread, an MCP server, a send gate), `hook` runs
/// about every 50 ms. It may cancel the token of what is waiting, e.g. when a host sees a Ctrl+C; the wait
/// then ends as cancelled within 200 ms. Nested calls stack.
pub fn with_poll_hook<R>(hook: Rc<dyn Fn()>, f: impl FnOnce() -> R) -> R {
    struct Restore(Option<PollState>);
    impl Drop for Restore {
        fn drop(&mut self) {
            let prev = self.0.take();
            POLL.with_borrow_mut(|cur| *cur = prev);
        }
    }
    let prev = POLL.with_borrow_mut(|cur| cur.replace(PollState { hook, last: Instant::now() }));
    let _restore = Restore(prev);
    f()
}

/// Run this thread's poll hook if one is set and it is due (or `force`). Every wait loop in the core calls
/// it once per slice.
pub(crate) fn poll(force: bool) {
    let hook = POLL.with_borrow_mut(|cur| match cur {
        Some(p) if force || p.last.elapsed() >= POLL_EVERY => {
            p.last = Instant::now();
            Some(p.hook.clone())
        }
        _ => None,
    });
    if let Some(h) = hook {
        h();
    }
}

/// Whether this thread has a poll hook (a wait that would otherwise block in one piece takes slices then).
pub(crate) fn polled() -> bool {
    POLL.with_borrow(Option::is_some)
}

/// Sleep `delay` unless cancelled (returns `true` then), running the poll hook in between.
pub(crate) fn sleep_watched(cancel: &CancelToken, delay: Duration) -> bool {
    if !cancel.polled() {
        return cancel.sleep(delay);
    }
    let end = Instant::now() + delay;
    loop {
        cancel.poll(false);
        let now = Instant::now();
        if cancel.is_cancelled() {
            return true;
        }
        if now >= end {
            return false;
        }
        if cancel.sleep((end - now).min(POLL_EVERY)) {
            return true;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cancel_wakes_a_sleeper_from_another_thread() {
        let token = CancelToken::new();
        let other = token.clone();
        let started = Instant::now();
        let handle = std::thread::spawn(move || other.sleep(Duration::from_secs(10)));
        std::thread::sleep(Duration::from_millis(30));
        token.cancel();
        assert!(handle.join().unwrap_or(false));
        assert!(started.elapsed() < Duration::from_secs(2));
    }

    #[test]
    fn sleep_without_cancel_runs_its_course() {
        let token = CancelToken::new();
        assert!(!token.sleep(Duration::from_millis(20)));
        assert!(!token.is_cancelled());
    }
}
