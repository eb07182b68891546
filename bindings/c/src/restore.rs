//! `tooloop_restore_file`: the core's race-free file restore (what the CLI's `/undo` uses), for C hosts
//! that keep checkpoints of their own.

use std::ffi::c_char;

use crate::ffi::{Failure, boundary, str_arg};
use crate::status_codes::{TOOLOOP_IO, tooloop_status};

/// Put the file `path` (relative to `workspace`, or absolute inside it) back to the `len` bytes at
/// `content` with permission bits `mode`; with `content` NULL the file is removed instead (it did not
/// exist before). Every step goes through handles on the workspace that never follow a symlink out: the
/// temporary file is created new, its mode set on the open file, and a rename puts it in place, so a
/// symlink planted meanwhile cannot redirect the write. Missing parent folders are created.
///
/// `workspace` and `path` are borrowed NUL-terminated UTF-8; `content` is borrowed for the call (may be
/// NULL only to remove; with `len` 0 it may be any pointer). Returns `TOOLOOP_OK`,
/// `TOOLOOP_INVALID_ARGUMENT` (a NULL string), `TOOLOOP_INVALID_UTF8`, or `TOOLOOP_IO` when the path
/// leads outside the workspace, a folder stands there, or the write fails (`tooloop_last_error()` says
/// which). Thread-safe: any thread, any number at once (two restores of one file: the last rename wins).
#[unsafe(no_mangle)]
pub extern "C" fn tooloop_restore_file(
    workspace: *const c_char,
    path: *const c_char,
    content: *const u8,
    len: usize,
    mode: u32,
) -> tooloop_status {
    boundary("tooloop_restore_file", || {
        let workspace = str_arg(workspace, "workspace")?;
        let path = str_arg(path, "path")?;
        let data: Option<&[u8]> = if content.is_null() {
            None
        } else if len == 0 {
            Some(&[])
        } else {
            // SAFETY: non-NULL and `len` readable bytes for the call, per the documented contract.
            Some(unsafe { std::slice::from_raw_parts(content, len) })
        };
        let ws = tooloop::Workspace::new(workspace)
            .map_err(|e| Failure::new(TOOLOOP_IO, format!("workspace {workspace}: {e}")))?;
        tooloop::restore_file(&ws, path, data, mode).map(|_| ()).map_err(|m| Failure::new(TOOLOOP_IO, m))
    })
}
