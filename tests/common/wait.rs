//! Waiting for a condition instead of sleeping for a guessed time: a test that waits for the thing it
//! needs is as fast as the machine allows and still passes on a loaded one. Included with
//! `#[path = "common/wait.rs"] mod wait;`.
#![allow(dead_code)]

use std::time::{Duration, Instant};

/// Returns once `ready()` holds, checking every 10 ms; panics naming `what` after `limit`.
pub fn until(what: &str, limit: Duration, mut ready: impl FnMut() -> bool) {
    let deadline = Instant::now() + limit;
    while !ready() {
        assert!(Instant::now() < deadline, "waited {limit:?} for {what}");
        std::thread::sleep(Duration::from_millis(10));
    }
}

/// Like [`until`], for a value: returns the first `Some` that `probe()` gives.
pub fn for_some<T>(what: &str, limit: Duration, mut probe: impl FnMut() -> Option<T>) -> T {
    let deadline = Instant::now() + limit;
    loop {
        if let Some(value) = probe() {
            return value;
        }
        assert!(Instant::now() < deadline, "waited {limit:?} for {what}");
        std::thread::sleep(Duration::from_millis(10));
    }
}
