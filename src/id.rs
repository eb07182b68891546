//! Fresh ids and the wall clock, for entries, messages and sessions. Imports nothing of the crate.

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{SystemTime, UNIX_EPOCH};

/// Milliseconds since the Unix epoch.
pub fn now_ms() -> u64 {
    SystemTime::now().duration_since(UNIX_EPOCH).map(|d| d.as_millis() as u64).unwrap_or(0)
}

/// A fresh id: time, a process-wide counter and a per-process random part (unique across processes too,
/// which matters for entries of several sessions merged by a host).
pub fn new_id() -> String {
    use std::hash::{BuildHasher, Hasher};
    static COUNTER: AtomicU64 = AtomicU64::new(0);
    static SALT: once_cell::sync::Lazy<u64> = once_cell::sync::Lazy::new(|| {
        let mut h = std::collections::hash_map::RandomState::new().build_hasher();
        h.write_u32(std::process::id());
        h.finish()
    });
    let n = COUNTER.fetch_add(1, Ordering::Relaxed);
    format!("{:011x}{:06x}{:04x}", now_ms(), (*SALT & 0xff_ffff), n & 0xffff)
}
