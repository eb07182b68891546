//! Cooperative cancellation shared between a run and the threads that may stop it.
//!
//! A [`CancelToken`] is a cheap, cloneable handle. `cancel()` may be called from any thread, any number
//! of times; everything blocking inside tooloop (network reads, retry back-off, tools) polls it or waits
//! on it, so a run ends within a bounded time (the target is 200 ms) after `cancel()`.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Condvar, Mutex};
use std::time::{Duration, Instant};

/// A thread-safe cancellation flag with a wake-up for sleepers.
///
/// # Threads and cloning
/// Clones share one flag: cancelling any clone cancels them all. `Send + Sync`; cancelling is lock-free
/// except for waking threads blocked in [`CancelToken::sleep`].
#[derive(Clone, Debug, Default)]
pub struct CancelToken {
    inner: Arc<Inner>,
}

#[derive(Debug, Default)]
struct Inner {
    flag: AtomicBool,
    lock: Mutex<()>,
    wake: Condvar,
}

impl CancelToken {
    /// A new token, not cancelled.
    pub fn new() -> Self {
        Self::default()
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
