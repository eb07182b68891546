//! The paths a path rule is matched against: the path as written and where it leads inside the
//! workspace, resolved through a `cap-std` directory handle on the workspace root, as the file tools open
//! it (so `src/hooks/x` through `src/hooks -> ../.git/hooks` is judged as `.git/hooks/x`, and a link to
//! `.env` as `.env`).
//!
//! A search (`grep`, `glob`) is a rule subject of its own: a deny or ask rule that names a path the search
//! would read stops it. The rule is decided before the tool runs and cannot see its results, so
//! [`search_reaches`] walks what the tool would walk — the same walker settings as the search tools
//! (`.gitignore`/`.ignore` honoured, hidden entries skipped, symlinks not followed), from the same start —
//! and reports the first path a rule names. That is sound for what the tools read (they visit nothing
//! else) and costs one walk of the tree, no more than the search itself; a tree of more than
//! [`MAX_SEARCH_ENTRIES`] entries is refused rather than half checked. A file created between this walk
//! and the search is not seen (the bash tool, which could create one, never runs alongside another call).
//!
//! Must never: follow a symlink out of the workspace to decide an allow, or let a search through that a
//! walk of its tree shows reaching a denied path.

use std::io;
use std::path::{Component, Path, PathBuf};

use cap_std::fs::Dir;

/// Entries checked under a search root at most; more and the search is refused (narrow the path).
pub const MAX_SEARCH_ENTRIES: usize = 200_000;

/// The forms of `path` to match: as written, and resolved inside `workspace` when that differs.
pub(super) fn forms(path: &str, workspace: &Path) -> Vec<String> {
    let mut out = vec![path.to_string()];
    if let Some(real) = resolve(path, workspace) {
        let real = real.to_string_lossy().into_owned();
        if super::relative(&real, workspace) != super::relative(path, workspace) {
            out.push(real);
        }
    }
    out
}

/// `path` relative to the workspace as written (no `..` resolved), or `None` when it is absolute outside.
fn below(path: &str, workspace: &Path) -> Option<PathBuf> {
    let p = Path::new(path);
    if p.is_absolute() { p.strip_prefix(workspace).ok().map(Path::to_path_buf) } else { Some(p.to_path_buf()) }
}

/// Where `path` leads: an absolute path (under `workspace` as given when it stays inside), following
/// symlinks for the part that exists. `None` when it cannot be told (the workspace cannot be opened).
fn resolve(path: &str, workspace: &Path) -> Option<PathBuf> {
    let rel = below(path, workspace)?;
    let root = Dir::open_ambient_dir(workspace, cap_std::ambient_authority()).ok()?;
    let parts: Vec<Component<'_>> = rel.components().collect();
    // The longest prefix that exists, resolved beneath the root; the rest is appended as written.
    for split in (0..=parts.len()).rev() {
        let prefix: PathBuf = parts[..split].iter().collect();
        let prefix = if prefix.as_os_str().is_empty() { PathBuf::from(".") } else { prefix };
        let real = match root.canonicalize(&prefix) {
            Ok(real) => workspace.join(real),
            Err(e) if e.kind() == io::ErrorKind::NotFound => continue,
            // Leads out of the workspace: where to, for absolute rules (the file tools refuse it anyway).
            Err(_) => std::fs::canonicalize(workspace.join(&prefix)).ok()?,
        };
        let mut real = real;
        for part in &parts[split..] {
            match part {
                Component::Normal(n) => real.push(n),
                Component::ParentDir => {
                    real.pop();
                }
                _ => {}
            }
        }
        return Some(real);
    }
    None
}

/// The first path under the search root (resolved: `forms` ends with it) that `named` reports a rule
/// for, with that rule: `(rule, path)`; `(fallback, why)` when the tree is too big to check. `None` when
/// no path the search would read is named.
pub(super) fn search_reaches(
    forms: &[String],
    workspace: &Path,
    fallback: &str,
    named: impl Fn(&str) -> Option<String>,
) -> Option<(String, String)> {
    let start = forms.last()?;
    let start = if Path::new(start).is_absolute() { PathBuf::from(start) } else { workspace.join(start) };
    if !start.starts_with(workspace) {
        return None;
    }
    let root = Dir::open_ambient_dir(workspace, cap_std::ambient_authority()).ok();
    let mut walk = ignore::WalkBuilder::new(&start);
    // The walker of `grep` and `glob`, the same settings.
    crate::builtin::walk_like_search(&mut walk);
    for (n, entry) in walk.build().enumerate() {
        let Ok(entry) = entry else { continue };
        let Ok(rel) = entry.path().strip_prefix(workspace) else { continue };
        let rel_text = rel.to_string_lossy().replace('\\', "/");
        if n >= MAX_SEARCH_ENTRIES {
            return Some((fallback.to_string(), format!("more than {MAX_SEARCH_ENTRIES} entries, too many to check")));
        }
        if let Some(rule) = named(&rel_text) {
            return Some((rule, rel_text));
        }
        // A link to a file inside is listed by `glob` under its own name: judge its target too (a link to
        // a folder is neither listed nor walked).
        if entry.path_is_symlink() && root.as_ref().is_some_and(|r| r.metadata(rel).is_ok_and(|m| m.is_file())) {
            let target = root.as_ref().and_then(|r| r.canonicalize(rel).ok());
            if let Some(t) = target {
                let t = t.to_string_lossy().replace('\\', "/");
                if let Some(rule) = named(&t) {
                    return Some((rule, rel_text));
                }
            }
        }
    }
    None
}
