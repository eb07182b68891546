//! The `glob` tool: paths in the workspace matching a pattern such as `**/*.py`, newest first. Files only
//! (like `rg --files`): folders are not listed, nor symlinks that lead out of the workspace.
//!
//! The tree is walked by ripgrep's `ignore` crate with the same rules as `grep` (`.gitignore`/`.ignore`
//! respected, hidden entries skipped, symlinks not followed), from a start path checked by
//! [`Workspace::resolve`]; patterns are matched with `globset` against paths relative to that start.
//!
//! Must never: list anything outside the workspace, or hold more than [`GLOB_MAX_RESULTS`] paths'
//! worth of output (the rest is counted).

use super::grep::{open_start, walker};
use super::workspace::Workspace;
use super::{Args, ToolReply};
use crate::cancel::CancelToken;
use globset::GlobBuilder;
use ignore::WalkState;
use serde_json::Value;
use std::path::Path;
use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::SystemTime;

/// Paths `glob` returns at most; the reply says how many more matched.
pub const GLOB_MAX_RESULTS: usize = 200;

/// `glob(pattern, path?)`.
pub(crate) fn glob(ws: &Workspace, input: &Value, cancel: &CancelToken) -> ToolReply {
    let args = Args::new("glob", input, &["pattern", "path"])?;
    let pattern = args.string("pattern")?;
    if pattern.is_empty() {
        return Err("glob pattern is empty: give a pattern such as \"**/*.py\"".to_string());
    }
    let path = args.opt_string("path")?.unwrap_or(".");
    // A leading "./" is how people write "from here"; globset would take it literally.
    let pattern_rel = pattern.strip_prefix("./").unwrap_or(pattern);
    if Path::new(pattern_rel).is_absolute() || pattern_rel.split('/').any(|p| p == "..") {
        return Err(format!(
            "glob pattern {pattern:?} must be relative to `path` without '..' (give the folder as `path`)"
        ));
    }
    let matcher = GlobBuilder::new(pattern_rel)
        .literal_separator(true)
        .build()
        .map_err(|e| format!("glob: invalid pattern {pattern:?}: {e}"))?
        .compile_matcher();
    let (start, _root) = open_start(ws, path)?;
    let found: Mutex<Vec<(Option<SystemTime>, String)>> = Mutex::new(Vec::new());
    let stopped = AtomicBool::new(false);
    let threads = std::thread::available_parallelism().map_or(2, |n| n.get()).min(8);
    walker(&start)?.threads(threads).build_parallel().run(|| {
        let (found, stopped, matcher, start) = (&found, &stopped, &matcher, &start);
        Box::new(move |entry| {
            if cancel.is_cancelled() {
                stopped.store(true, Ordering::Relaxed);
                return WalkState::Quit;
            }
            let Ok(entry) = entry else { return WalkState::Continue };
            let Ok(below) = entry.path().strip_prefix(start) else { return WalkState::Continue };
            if below.as_os_str().is_empty() || !matcher.is_match(below) {
                return WalkState::Continue;
            }
            // Files only, as `rg --files` lists them: no folders, and a symlink only when it is a file
            // inside the workspace (one leading out is never named, like grep never reads it).
            match entry.file_type() {
                Some(t) if t.is_file() => {}
                Some(t) if t.is_symlink() => {
                    let inside = std::fs::canonicalize(entry.path())
                        .is_ok_and(|real| real.starts_with(ws.root()) && real.is_file());
                    if !inside {
                        return WalkState::Continue;
                    }
                }
                _ => return WalkState::Continue,
            }
            let Ok(rel) = entry.path().strip_prefix(ws.root()) else { return WalkState::Continue };
            // lstat: a symlink's own time, never its target's (which may be outside).
            let modified = entry.metadata().ok().and_then(|m| m.modified().ok());
            found.lock().unwrap_or_else(|e| e.into_inner()).push((modified, rel.display().to_string()));
            WalkState::Continue
        })
    });
    if cancel.is_cancelled() || stopped.load(Ordering::Relaxed) {
        return Err("cancelled: glob was stopped".to_string());
    }
    let mut found = found.into_inner().unwrap_or_else(|e| e.into_inner());
    if found.is_empty() {
        return Ok(format!("No files match {pattern:?} under '{path}'."));
    }
    found.sort_by(|a, b| b.0.cmp(&a.0).then_with(|| a.1.cmp(&b.1)));
    let total = found.len();
    let mut out: Vec<String> = found.into_iter().take(GLOB_MAX_RESULTS).map(|(_, p)| p).collect();
    if total > GLOB_MAX_RESULTS {
        out.push(format!(
            "[{} more paths match, not shown (at most {GLOB_MAX_RESULTS}, newest first): narrow the pattern or path]",
            total - GLOB_MAX_RESULTS
        ));
    }
    Ok(out.join("\n"))
}
