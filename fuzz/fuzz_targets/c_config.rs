//! The C binding's config parser (bindings/c/src/config.rs, what `tooloop_agent_new` runs on its
//! `config_json`). libtooloop is a staticlib + cdylib only (no rlib to depend on), so its two modules are
//! compiled in here by path, with the few crate-root items they name. No input may panic, and no error may
//! echo the api_key.
#![no_main]
#![allow(dead_code, non_camel_case_types, clippy::all)]

#[path = "../../bindings/c/src/config.rs"]
mod config;
#[path = "../../bindings/c/src/ffi.rs"]
mod ffi;

use libfuzzer_sys::fuzz_target;

pub type tooloop_status = i32;
pub type tooloop_free_fn = Option<unsafe extern "C" fn(*mut std::ffi::c_void)>;
pub const TOOLOOP_OK: tooloop_status = 0;
pub const TOOLOOP_INVALID_ARGUMENT: tooloop_status = 1;
pub const TOOLOOP_INVALID_UTF8: tooloop_status = 2;
pub const TOOLOOP_INVALID_JSON: tooloop_status = 3;
pub const TOOLOOP_PANIC: tooloop_status = 8;

/// What the two modules import from the C crate's `status` module.
mod status {
    pub use super::{
        TOOLOOP_INVALID_ARGUMENT, TOOLOOP_INVALID_JSON, TOOLOOP_INVALID_UTF8, TOOLOOP_OK, TOOLOOP_PANIC, tooloop_status,
    };
}

const SECRET: &str = "sk-fuzz-SECRET-0123456789";

fuzz_target!(|data: &[u8]| {
    let Some((&mode, body)) = data.split_first() else { return };
    let Ok(json) = std::str::from_utf8(body) else { return };
    let _ = config::parse(json, mode & 1 == 1);
    // With a known secret planted as the api_key (whatever its type), no error may show it.
    if let Ok(serde_json::Value::Object(mut map)) = serde_json::from_str::<serde_json::Value>(json) {
        let planted = match mode >> 1 & 3 {
            0 => serde_json::json!(SECRET),
            1 => serde_json::json!([SECRET]),
            2 => serde_json::json!({ "k": SECRET }),
            _ => serde_json::json!(SECRET.len()),
        };
        map.insert("api_key".into(), planted);
        if let Err(failure) = config::parse(&serde_json::Value::Object(map).to_string(), mode & 1 == 1) {
            assert!(!failure.message.contains(SECRET), "the api_key leaked into: {}", failure.message);
        }
    }
});
