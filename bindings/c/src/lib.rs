//! libtooloop: the C ABI of tooloop. A thin layer: handles, status codes, callbacks and JSON strings
//! around the core crate's `Agent`. No agent logic lives here, and no state about a run: whether an agent
//! is busy, a tool name taken or a host model failed, the core says through its `Error`, and `status.rs`
//! maps that onto a status code.
//!
//! One module per handle type, as in rustls-ffi: `agent` (`tooloop_agent`), `tool` (host tools and
//! `tooloop_tool_result`), `permission` (`tooloop_permission`), `model` (host models and
//! `tooloop_model_response`), `hooks` (`tooloop_hook_result`), `events` (`tooloop_event`), `run` (`tooloop_run`,
//! a run the host steps, with approvals as pauses), `session` (session files of an agent); `status_codes` (the
//! status codes, at the bottom), `status` (their text, the last error, the core-error mapping), `config` (the
//! JSON config), `json` and `restore` (free functions), `ffi` (the panic boundary, the pointer helpers, the
//! host data an agent holds). No two modules import each other (`scripts/module_graph.py`).
//!
//! The `///` comments on exported items are the C documentation: cbindgen copies them into
//! `include/tooloop.h` (regenerate with
//! `TOOLOOP_BLESS=1 cargo test -p tooloop-capi --test header`; `tests/header.rs` fails when it is stale).
//!
//! Must never: let a panic unwind into C, write an out-parameter of a failed call, free memory the host
//! allocated (host data goes back through the host's own destructor), or put an API key in an error.
// The unsafe of the whole project lives here: every raw pointer is read through the helpers in ffi.rs.
#![deny(unsafe_op_in_unsafe_fn)]
// C names: `tooloop_agent`, `tooloop_status`, ... are the names C programs see.
#![allow(non_camel_case_types)]
// Exported functions take raw pointers from C; their contract (non-NULL or NULL, alive, NUL-terminated) is
// documented in the header, which is where C programmers read it — Rust's `unsafe fn` marker would not
// reach them. Each dereference goes through a checked helper in ffi.rs.
#![allow(clippy::not_unsafe_ptr_arg_deref)]

mod agent;
mod config;
mod events;
mod ffi;
mod hooks;
mod json;
mod model;
mod permission;
mod restore;
mod run;
mod session;
mod status;
mod status_codes;
mod tool;

pub use agent::*;
pub use events::*;
pub use ffi::tooloop_free_fn;
pub use hooks::*;
pub use json::*;
pub use model::*;
pub use permission::*;
pub use restore::*;
pub use run::*;
pub use session::*;
pub use status::*;
pub use status_codes::*;
pub use tool::*;
