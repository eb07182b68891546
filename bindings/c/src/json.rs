//! Small JSON helpers for C hosts, and the test-only panic entry point.

use std::ffi::c_char;

use serde_json::Value;

use crate::ffi::{Failure, boundary, out_arg, owned_string, str_arg, write_out};
use crate::status_codes::{TOOLOOP_INVALID_JSON, TOOLOOP_NO_VALUE, tooloop_status};

// ---------------------------------------------------------------------------------------------------------
// JSON
// ---------------------------------------------------------------------------------------------------------

/// Read one value out of a JSON document, so C code can use tool inputs and results without a JSON
/// library. `pointer` is a JSON Pointer (RFC 6901): `""` is the whole document, `"/city"` a member,
/// `"/tool_calls/0/name"` a member of an array element (`~1` stands for `/` and `~0` for `~` in names).
///
/// On success `*out` receives the value as text: a string's own text (unquoted, unescaped, UTF-8); any
/// other value (number, true/false, null, object, array) as compact JSON. The caller frees it with
/// `tooloop_string_free`. On failure `*out` is left unchanged.
///
/// Example, inside a tool callback: `char *city; if (tooloop_json_get(input_json, "/city", &city) ==
/// TOOLOOP_OK) { ...; tooloop_string_free(city); }`.
///
/// Statuses: `TOOLOOP_OK`, `TOOLOOP_NO_VALUE` (nothing at `pointer`), `TOOLOOP_INVALID_ARGUMENT` (NULL
/// argument, or a string value holding a NUL character, which a C string cannot carry),
/// `TOOLOOP_INVALID_UTF8`, `TOOLOOP_INVALID_JSON` (`json` does not parse), `TOOLOOP_PANIC`.
/// Threads: any.
#[unsafe(no_mangle)]
pub extern "C" fn tooloop_json_get(
    json: *const c_char,
    pointer: *const c_char,
    out: *mut *mut c_char,
) -> tooloop_status {
    boundary("tooloop_json_get", || {
        out_arg(out, "out")?;
        let text = str_arg(json, "json")?;
        let pointer = str_arg(pointer, "pointer")?;
        let doc: Value = serde_json::from_str(text)
            .map_err(|e| Failure::new(TOOLOOP_INVALID_JSON, format!("json is not valid JSON: {e}")))?;
        let value = doc
            .pointer(pointer)
            .ok_or_else(|| Failure::new(TOOLOOP_NO_VALUE, format!("no value at JSON pointer {pointer:?}")))?;
        let s = match value {
            Value::String(s) => s.clone(),
            other => other.to_string(),
        };
        write_out(out, owned_string(s)?);
        Ok(())
    })
}

/// The providers `"provider"` takes, from the core's one provider table: a JSON array of objects with
/// `name` (`"anthropic"`, `"openai"`, `"openai-responses"`, `"bedrock"`), `wire`, `key_var` and
/// `base_url_var` (the environment variables read when `"api_key"` / `"base_url"` are not given; `null` for
/// Bedrock, which signs with AWS credentials), `default_base_url`, and the largest `image_bytes` and
/// `document_bytes` per block. Read its fields with `tooloop_json_get` (`"/2/name"`).
///
/// On success `*out` receives the JSON text; the caller frees it with `tooloop_string_free`. On failure
/// `*out` is left unchanged. Statuses: `TOOLOOP_OK`, `TOOLOOP_INVALID_ARGUMENT` (`out` is NULL),
/// `TOOLOOP_PANIC`. Threads: any.
#[unsafe(no_mangle)]
pub extern "C" fn tooloop_providers_json(out: *mut *mut c_char) -> tooloop_status {
    boundary("tooloop_providers_json", || {
        out_arg(out, "out")?;
        write_out(out, owned_string(tooloop::providers_json().to_string())?);
        Ok(())
    })
}

// ---------------------------------------------------------------------------------------------------------
// Testing
// ---------------------------------------------------------------------------------------------------------

/// For tests of the panic boundary only: panics inside libtooloop on purpose. The panic is caught at the
/// boundary like any internal bug would be: the call returns `TOOLOOP_PANIC` and `tooloop_last_error()`
/// says "internal panic". Nothing unwinds into C; the process goes on normally (Rust's panic message is
/// printed on stderr).
///
/// Statuses: `TOOLOOP_PANIC`, always. Threads: any. Built only with the cargo feature `test-panic` and not in
/// the public header.
#[cfg(feature = "test-panic")]
#[unsafe(no_mangle)]
pub extern "C" fn tooloop_debug_panic() -> tooloop_status {
    boundary("tooloop_debug_panic", || panic!("tooloop_debug_panic was called (a deliberate test panic)"))
}
