//! The panic boundary, the per-thread last error, and the NULL-check-and-cast helpers every exported
//! function goes through. All raw-pointer reading of the crate happens here or in a one-line `unsafe`
//! block next to a helper call, so the rules are checked in one place.
//!
//! Must never: let a panic unwind into C, write an out-parameter before the call has succeeded, or free
//! memory it did not allocate.

use std::any::Any;
use std::cell::RefCell;
use std::ffi::{CStr, CString, c_char, c_void};
use std::panic::{AssertUnwindSafe, catch_unwind};

use std::sync::{Arc, Mutex, MutexGuard};

use crate::status_codes::{TOOLOOP_INVALID_ARGUMENT, TOOLOOP_INVALID_UTF8, TOOLOOP_OK, TOOLOOP_PANIC, tooloop_status};

/// A destructor for host data (`userdata`). Called exactly once, with the pointer given at registration.
pub type tooloop_free_fn = Option<unsafe extern "C" fn(userdata: *mut c_void)>;

thread_local! {
    // One slot per thread: the detail of the last failure, handed out as a borrowed pointer.
    static LAST_ERROR: RefCell<Option<CString>> = const { RefCell::new(None) };
}

/// A failed call: the status it returns and the detail `tooloop_last_error()` shows.
#[derive(Debug)]
pub(crate) struct Failure {
    pub(crate) status: tooloop_status,
    pub(crate) message: String,
}

impl Failure {
    pub(crate) fn new(status: tooloop_status, message: impl Into<String>) -> Self {
        Failure { status, message: message.into() }
    }

    pub(crate) fn invalid(message: impl Into<String>) -> Self {
        Failure::new(TOOLOOP_INVALID_ARGUMENT, message)
    }
}

pub(crate) type FfiResult<T> = Result<T, Failure>;

/// C strings cannot hold NUL: a message that does contain one shows U+FFFD there instead.
pub(crate) fn c_string_lossy(s: &str) -> CString {
    CString::new(s.replace('\0', "\u{FFFD}")).unwrap_or_default()
}

pub(crate) fn set_last_error(message: &str) {
    let c = c_string_lossy(message);
    LAST_ERROR.with(|slot| *slot.borrow_mut() = Some(c));
}

pub(crate) fn clear_last_error() {
    LAST_ERROR.with(|slot| *slot.borrow_mut() = None);
}

/// The current thread's last error; an empty string when there is none. The pointer stays valid until the
/// slot is next written, i.e. until the next fallible tooloop call on this thread.
pub(crate) fn last_error_ptr() -> *const c_char {
    LAST_ERROR.with(|slot| match slot.borrow().as_ref() {
        Some(c) => c.as_ptr(),
        None => c"".as_ptr(),
    })
}

fn panic_text(payload: &(dyn std::any::Any + Send)) -> String {
    payload
        .downcast_ref::<&str>()
        .map(|s| s.to_string())
        .or_else(|| payload.downcast_ref::<String>().cloned())
        .unwrap_or_else(|| "a panic without a message".to_string())
}

/// A lock that a panic on another thread did not make unusable (the data behind it stays consistent: every
/// critical section here is a single assignment).
pub(crate) fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

/// Run the body of exported function `name`: catches any panic, and turns a failure into its status with
/// the detail (prefixed by `name`) in the last error. A success clears the last error on the way out, so a
/// run that succeeds does not leave behind the error of a call its callbacks made.
pub(crate) fn boundary(name: &str, body: impl FnOnce() -> FfiResult<()>) -> tooloop_status {
    match catch_unwind(AssertUnwindSafe(body)) {
        Ok(Ok(())) => {
            clear_last_error();
            TOOLOOP_OK
        }
        Ok(Err(f)) => {
            set_last_error(&format!("{name}: {}", f.message));
            f.status
        }
        Err(payload) => {
            let what = panic_text(payload.as_ref());
            set_last_error(&format!("{name}: internal panic in libtooloop: {what} (a bug: please report it)"));
            TOOLOOP_PANIC
        }
    }
}

/// The boundary for functions with no status to return (`_free`): a panic is swallowed and noted in the
/// last error, never unwound into C.
pub(crate) fn boundary_void(name: &str, body: impl FnOnce()) {
    if let Err(payload) = catch_unwind(AssertUnwindSafe(body)) {
        let what = panic_text(payload.as_ref());
        set_last_error(&format!("{name}: internal panic in libtooloop: {what} (a bug: please report it)"));
    }
}

/// A borrowed input string: non-NULL, NUL-terminated, valid UTF-8.
///
/// The caller guarantees `p` is NULL or points at a NUL-terminated string that stays alive and unchanged
/// for the call (the documented contract of every `const char *` parameter).
pub(crate) fn str_arg<'a>(p: *const c_char, what: &str) -> FfiResult<&'a str> {
    if p.is_null() {
        return Err(Failure::invalid(format!("{what} is NULL")));
    }
    // SAFETY: non-NULL and NUL-terminated per the contract above; we only read up to the NUL.
    let bytes = unsafe { CStr::from_ptr(p) }.to_bytes();
    std::str::from_utf8(bytes).map_err(|e| {
        Failure::new(
            TOOLOOP_INVALID_UTF8,
            format!("{what} is not valid UTF-8 (the first invalid byte is at offset {})", e.valid_up_to()),
        )
    })
}

/// A borrowed handle: non-NULL, created by this library and not yet freed (the caller's contract).
pub(crate) fn handle<'a, T>(p: *const T, what: &str) -> FfiResult<&'a T> {
    // SAFETY: the pointer was produced by Box::into_raw in this crate and is still live, per the contract.
    unsafe { p.as_ref() }.ok_or_else(|| Failure::invalid(format!("{what} is NULL")))
}

/// A mutable borrowed handle (callback result handles): non-NULL, valid for the callback.
pub(crate) fn handle_mut<'a, T>(p: *mut T, what: &str) -> FfiResult<&'a mut T> {
    // SAFETY: as for `handle`; the library owns the object and lends it to one callback at a time.
    unsafe { p.as_mut() }.ok_or_else(|| Failure::invalid(format!("{what} is NULL")))
}

/// Check a required out-parameter before any work, so a NULL one fails without side effects.
pub(crate) fn out_arg<T>(p: *mut *mut T, what: &str) -> FfiResult<()> {
    if p.is_null() { Err(Failure::invalid(format!("{what} is NULL"))) } else { Ok(()) }
}

/// Check a required out-parameter for a plain value (`uint64_t *`), before any work.
pub(crate) fn value_out_arg<T>(p: *mut T, what: &str) -> FfiResult<()> {
    if p.is_null() { Err(Failure::invalid(format!("{what} is NULL"))) } else { Ok(()) }
}

/// Write a plain-value out-parameter already checked non-NULL by `value_out_arg`.
pub(crate) fn write_value<T>(p: *mut T, value: T) {
    if !p.is_null() {
        // SAFETY: non-NULL and pointing at caller storage for one value, per the contract.
        unsafe { p.write(value) };
    }
}

/// An optional borrowed input string: NULL gives `None`; otherwise as `str_arg`.
pub(crate) fn opt_str_arg<'a>(p: *const c_char, what: &str) -> FfiResult<Option<&'a str>> {
    if p.is_null() { Ok(None) } else { str_arg(p, what).map(Some) }
}

/// Write an out-parameter (already checked non-NULL by `out_arg`, or NULL for "not wanted").
pub(crate) fn write_out<T>(p: *mut *mut T, value: *mut T) {
    if !p.is_null() {
        // SAFETY: non-NULL and pointing at caller storage for one pointer, per the contract.
        unsafe { p.write(value) };
    }
}

/// A string for C that the caller owns and frees with `tooloop_string_free`.
pub(crate) fn owned_string(s: String) -> FfiResult<*mut c_char> {
    CString::new(s)
        .map(CString::into_raw)
        .map_err(|_| Failure::invalid("the output contains a NUL byte and cannot be returned as a C string"))
}

/// Host data with its destructor. Dropping it calls `free(ptr)` once, whatever path drops it: a failed
/// registration, a replaced handler, the agent being freed.
pub(crate) struct UserData {
    pub(crate) ptr: *mut c_void,
    free: tooloop_free_fn,
}

// SAFETY: the header documents that userdata handed to tooloop is used from the thread that runs the agent
// (which may differ from the one that registered it) and freed from the thread that frees the agent; the
// host accepts that by passing it. The library itself never reads through the pointer.
unsafe impl Send for UserData {}
// SAFETY: as above; the library only passes the pointer back to the host's own callbacks.
unsafe impl Sync for UserData {}

/// A host callback an agent keeps (its permission hook, a hook), whatever its kind. The agent holds it only
/// so that it is dropped, and its `UserData` freed, where the agent says (outside the core's locks, on the
/// thread that replaced it or freed the agent); it never calls it, so it need not know its type, and the
/// modules that own each kind of callback can use the agent handle without the agent using them back.
pub(crate) type HostHeld = Arc<dyn Any + Send + Sync>;

impl UserData {
    pub(crate) fn new(ptr: *mut c_void, free: tooloop_free_fn) -> Self {
        UserData { ptr, free }
    }
}

impl Drop for UserData {
    fn drop(&mut self) {
        if let Some(free) = self.free.take() {
            // SAFETY: the host's destructor for its own pointer, called exactly once (take() above).
            unsafe { free(self.ptr) };
        }
    }
}
