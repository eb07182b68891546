//! Project instructions: the `AGENTS.md` (else `CLAUDE.md`) files a project keeps for agents, found in the
//! workspace and each parent up to the repository root, plus the user's own
//! `$XDG_CONFIG_HOME/tooloop/AGENTS.md`, joined into one block of the system prompt with their paths.
//!
//! Order: the user's file first, then from the repository root down to the workspace (nearest last, so a
//! nearer file has the last word). Without a repository (no `.git` above the workspace) only the workspace
//! itself is looked at.
//!
//! Must never: block on a file (a FIFO or a device is skipped with a note, opened with `O_NONBLOCK` in any
//! case), read more than [`MAX_FILE_BYTES`] of one file, or fail a build because a discovered file is
//! unreadable (it is skipped with a note). A file named in an explicit list that does not exist is an error.

use std::io::Read;
use std::path::{Path, PathBuf};

use serde::Serialize;

use crate::error::{Error, Result};

/// Which instruction files an agent loads (the `instruction_files` option).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub enum InstructionFiles {
    /// None (the library's default).
    #[default]
    Off,
    /// Found by [`discover`].
    Discover,
    /// Exactly these ([`load`]).
    Paths(Vec<PathBuf>),
}

/// Most bytes read from one file (the rest is cut with a note).
pub const MAX_FILE_BYTES: usize = 32 * 1024;
/// Most bytes of instructions in all.
pub const MAX_TOTAL_BYTES: usize = 96 * 1024;

/// One file that was loaded.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct InstructionFile {
    /// Where it is.
    pub path: PathBuf,
    /// Its text (cut at [`MAX_FILE_BYTES`]).
    pub text: String,
    /// Whether it was cut.
    pub truncated: bool,
}

/// What discovery found.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct Instructions {
    /// Files loaded, in prompt order.
    pub files: Vec<InstructionFile>,
    /// Files skipped, with why.
    pub skipped: Vec<(PathBuf, String)>,
}

/// The user's own file: `$XDG_CONFIG_HOME/tooloop/AGENTS.md`, else `~/.config/tooloop/AGENTS.md`.
pub fn user_file() -> Option<PathBuf> {
    let base = std::env::var_os("XDG_CONFIG_HOME")
        .filter(|v| !v.is_empty())
        .map(PathBuf::from)
        .or_else(|| std::env::var_os("HOME").filter(|v| !v.is_empty()).map(|h| PathBuf::from(h).join(".config")))?;
    Some(base.join("tooloop").join("AGENTS.md"))
}

/// The folders from the repository root down to `workspace` (only `workspace` without a repository).
fn folders(workspace: &Path) -> Vec<PathBuf> {
    let ws = workspace.canonicalize().unwrap_or_else(|_| workspace.to_path_buf());
    let mut chain = Vec::new();
    let mut cur = Some(ws.as_path());
    while let Some(dir) = cur {
        chain.push(dir.to_path_buf());
        if dir.join(".git").exists() {
            chain.reverse();
            return chain;
        }
        cur = dir.parent();
    }
    vec![ws]
}

/// Find the files for `workspace` (see the module docs).
pub fn discover(workspace: &Path) -> Instructions {
    let mut found = Instructions::default();
    let mut candidates: Vec<Vec<PathBuf>> = Vec::new();
    if let Some(user) = user_file() {
        candidates.push(vec![user]);
    }
    for dir in folders(workspace) {
        candidates.push(vec![dir.join("AGENTS.md"), dir.join("CLAUDE.md")]);
    }
    for names in candidates {
        for path in names {
            match std::fs::metadata(&path) {
                Err(_) => continue,
                Ok(m) if !m.is_file() => {
                    found.skipped.push((path, "not a regular file".into()));
                    continue;
                }
                Ok(_) => {}
            }
            match read_capped(&path) {
                Ok(f) => found.files.push(f),
                Err(why) => found.skipped.push((path, why)),
            }
            break;
        }
    }
    found.cap_total();
    found
}

/// Load exactly these files (relative paths against `workspace`). A missing one is an error; a file that is
/// not a regular file is skipped with a note.
pub fn load(paths: &[PathBuf], workspace: &Path) -> Result<Instructions> {
    let mut found = Instructions::default();
    for p in paths {
        let path = if p.is_absolute() { p.clone() } else { workspace.join(p) };
        match std::fs::metadata(&path) {
            Err(e) => {
                return Err(Error::InvalidOption {
                    key: "instruction_files".into(),
                    message: format!("cannot read {}: {e}", path.display()),
                });
            }
            Ok(m) if !m.is_file() => found.skipped.push((path, "not a regular file".into())),
            Ok(_) => match read_capped(&path) {
                Ok(f) => found.files.push(f),
                Err(why) => found.skipped.push((path, why)),
            },
        }
    }
    found.cap_total();
    Ok(found)
}

fn read_capped(path: &Path) -> std::result::Result<InstructionFile, String> {
    use rustix::fs::{Mode, OFlags};
    // O_NONBLOCK: a file swapped for a FIFO after the check must not hang the build.
    let fd = rustix::fs::open(path, OFlags::RDONLY | OFlags::NONBLOCK | OFlags::CLOEXEC, Mode::empty())
        .map_err(|e| format!("cannot open: {e}"))?;
    let stat = rustix::fs::fstat(&fd).map_err(|e| format!("cannot stat: {e}"))?;
    if rustix::fs::FileType::from_raw_mode(stat.st_mode) != rustix::fs::FileType::RegularFile {
        return Err("not a regular file".into());
    }
    let mut file = std::fs::File::from(fd);
    let mut bytes = Vec::new();
    (&mut file).take(MAX_FILE_BYTES as u64 + 1).read_to_end(&mut bytes).map_err(|e| format!("cannot read: {e}"))?;
    let truncated = bytes.len() > MAX_FILE_BYTES;
    bytes.truncate(MAX_FILE_BYTES);
    let mut text = String::from_utf8_lossy(&bytes).into_owned();
    if truncated {
        // A cut may split a character: lossy decoding turns its half into U+FFFD at the very end.
        text = text.trim_end_matches('\u{FFFD}').to_string();
    }
    Ok(InstructionFile { path: path.to_path_buf(), text, truncated })
}

impl Instructions {
    fn cap_total(&mut self) {
        let mut total = 0;
        let mut keep = Vec::new();
        // Nearest files matter most: keep from the end.
        for f in self.files.drain(..).rev() {
            if total + f.text.len() > MAX_TOTAL_BYTES {
                self.skipped.push((f.path, format!("over the {MAX_TOTAL_BYTES}-byte total for instructions")));
                continue;
            }
            total += f.text.len();
            keep.push(f);
        }
        keep.reverse();
        self.files = keep;
    }

    /// The system prompt block, or `None` without files.
    pub fn prompt(&self) -> Option<String> {
        if self.files.is_empty() {
            return None;
        }
        let mut s = String::from(
            "# Project instructions\n\nThe user keeps these instruction files for this work (general first, the \
             nearest to the workspace last; where they disagree, the later one wins). Follow them.\n",
        );
        for f in &self.files {
            s.push_str(&format!("\n## {}\n\n{}\n", f.path.display(), f.text.trim_end()));
            if f.truncated {
                s.push_str(&format!("\n[cut: only the first {MAX_FILE_BYTES} bytes of this file are shown]\n"));
            }
        }
        Some(s)
    }
}
