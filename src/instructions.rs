//! Project instructions: the `AGENTS.md` (else `CLAUDE.md`) files a project keeps for agents, found in the
//! workspace and each parent up to the repository root, plus the user's own
//! `$XDG_CONFIG_HOME/tooloop/AGENTS.md`, joined into one block of the system prompt with their paths.
//!
//! Order: the user's file first, then from the repository root down to the workspace (nearest last, so a
//! nearer file has the last word). Without a repository (no `.git` above the workspace) only the workspace
//! itself is looked at.
//!
//! Where a file is read from (each open goes through a `cap-std` handle on that folder, so a symlink is
//! followed only while it stays beneath it, race-free): the workspace's files (and its parents' up to the
//! repository root) beneath the repository root, or the workspace without a repository; the user's file
//! beneath their config folder (`$XDG_CONFIG_HOME`, else `~/.config`: it may link elsewhere inside it); a
//! named file beneath the workspace when relative, beneath its own folder when absolute. So `AGENTS.md ->
//! ~/.ssh/id_ed25519` or `-> /proc/self/environ` is skipped with a note, not put into the prompt.
//!
//! Must never: block on a file (every open is `O_NONBLOCK`; only a regular file is read), read a pseudo-file
//! (`/proc`, `/sys` and the other kernel file systems, whatever the path), send a binary file (a NUL byte:
//! skipped with a note), read more than [`MAX_FILE_BYTES`] of one file, or fail a build because a
//! discovered file is unreadable (it is skipped with a note). A file named in an explicit list that does
//! not exist is an error. Secrets in the text are redacted by the agent's builder, as in tool results.

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
    user_config().map(|base| base.join(USER_FILE))
}

/// The user's file, relative to [`user_config`].
const USER_FILE: &str = "tooloop/AGENTS.md";

/// The user's config folder, beneath which their file is read.
fn user_config() -> Option<PathBuf> {
    std::env::var_os("XDG_CONFIG_HOME")
        .filter(|v| !v.is_empty())
        .map(PathBuf::from)
        .or_else(|| std::env::var_os("HOME").filter(|v| !v.is_empty()).map(|h| PathBuf::from(h).join(".config")))
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
    // (folder the lookup stays beneath, the names to try relative to it, in order)
    let mut candidates: Vec<(PathBuf, Vec<PathBuf>)> = Vec::new();
    if let Some(base) = user_config() {
        candidates.push((base, vec![PathBuf::from(USER_FILE)]));
    }
    let chain = folders(workspace);
    if let Some(top) = chain.first().cloned() {
        for dir in &chain {
            let rel = dir.strip_prefix(&top).unwrap_or(Path::new("")).to_path_buf();
            candidates.push((top.clone(), vec![rel.join("AGENTS.md"), rel.join("CLAUDE.md")]));
        }
    }
    for (base, names) in candidates {
        for rel in names {
            match read_beneath(&base, &rel) {
                Ok(None) => continue,
                Ok(Some(f)) => found.files.push(f),
                Err(why) => found.skipped.push((base.join(&rel), why)),
            }
            break;
        }
    }
    found.cap_total();
    found
}

/// Load exactly these files (relative paths against `workspace`, and read beneath it; an absolute path
/// beneath its own folder). A missing one is an error; one that cannot be read as instructions (not a
/// regular file, a pseudo-file, binary, or behind a symlink that leaves its folder) is skipped with a note.
pub fn load(paths: &[PathBuf], workspace: &Path) -> Result<Instructions> {
    let mut found = Instructions::default();
    for p in paths {
        let (base, rel) = match (p.is_absolute(), p.parent(), p.file_name()) {
            (true, Some(parent), Some(name)) => (parent.to_path_buf(), PathBuf::from(name)),
            _ => (workspace.to_path_buf(), p.clone()),
        };
        let path = base.join(&rel);
        match read_beneath(&base, &rel) {
            Ok(None) => {
                return Err(Error::InvalidOption {
                    key: "instruction_files".into(),
                    message: format!("cannot read {}: it does not exist", path.display()),
                });
            }
            Ok(Some(f)) => found.files.push(f),
            Err(why) => found.skipped.push((path, why)),
        }
    }
    found.cap_total();
    Ok(found)
}

/// Magic numbers (`statfs` `f_type`) of the kernel's pseudo-file systems: their "files" are the kernel's
/// state (a process's environment, memory maps, keys), never instructions. proc, sysfs, debugfs, tracefs,
/// securityfs, cgroup, cgroup2, configfs, efivarfs, bpf, pstore, devpts.
const PSEUDO_FS: [u64; 12] = [
    0x9fa0,
    0x6265_6572,
    0x6462_6720,
    0x7472_6163,
    0x7363_6673,
    0x0027_e0eb,
    0x6367_7270,
    0x6265_6570,
    0xde5e_81e4,
    0xcafe_4a11,
    0x6165_676c,
    0x1cd1,
];

/// Read `rel` beneath `base` (symlinks followed only while they stay beneath it). `Ok(None)`: nothing
/// there; `Err`: why it is skipped.
fn read_beneath(base: &Path, rel: &Path) -> std::result::Result<Option<InstructionFile>, String> {
    use cap_std::fs::{Dir, OpenOptions, OpenOptionsExt};
    use std::io::ErrorKind;
    let path = base.join(rel);
    let outside = || format!("it leads outside {} (a symlink out of its folder is not followed)", base.display());
    // The real path first (cap-std refuses every absolute symlink, also one that stays inside), checked to
    // lie beneath the real base; then opened beneath a handle on the base, so a symlink swapped in between
    // cannot lead the open out.
    let (base, rel) = match (base.canonicalize(), path.canonicalize()) {
        (Ok(base), Ok(real)) => match real.strip_prefix(&base) {
            Ok(inner) if !inner.as_os_str().is_empty() => (base.clone(), inner.to_path_buf()),
            _ => return Err(outside()),
        },
        (Err(e), _) | (_, Err(e)) if e.kind() == ErrorKind::NotFound => return Ok(None),
        (Err(e), _) | (_, Err(e)) => return Err(format!("cannot resolve: {e}")),
    };
    let dir = Dir::open_ambient_dir(&base, cap_std::ambient_authority())
        .map_err(|e| format!("cannot open its folder: {e}"))?;
    let mut options = OpenOptions::new();
    // O_NONBLOCK: a FIFO (or a device that waits) opens at once and is refused below, never waited on.
    options.read(true).custom_flags((rustix::fs::OFlags::NONBLOCK | rustix::fs::OFlags::NOCTTY).bits() as i32);
    let file = match dir.open_with(&rel, &options) {
        Ok(file) => file,
        Err(e) if e.kind() == ErrorKind::NotFound => return Ok(None),
        Err(e) if e.kind() == ErrorKind::PermissionDenied && e.to_string().contains("outside") => {
            return Err(outside());
        }
        Err(e) => return Err(format!("cannot open: {e}")),
    };
    // The checks are on the open handle, so they describe what is read.
    let stat = rustix::fs::fstat(&file).map_err(|e| format!("cannot stat: {e}"))?;
    if rustix::fs::FileType::from_raw_mode(stat.st_mode) != rustix::fs::FileType::RegularFile {
        return Err("not a regular file".into());
    }
    let fs = rustix::fs::fstatfs(&file).map_err(|e| format!("cannot stat its file system: {e}"))?;
    #[allow(clippy::unnecessary_cast, clippy::useless_conversion)]
    let kind = u64::try_from(fs.f_type as i64).unwrap_or(0);
    if PSEUDO_FS.contains(&kind) {
        return Err("a kernel pseudo-file (/proc, /sys, ...), not instructions".into());
    }
    let mut bytes = Vec::new();
    file.into_std().take(MAX_FILE_BYTES as u64 + 1).read_to_end(&mut bytes).map_err(|e| format!("cannot read: {e}"))?;
    if bytes.contains(&0) {
        return Err("binary (it holds NUL bytes); instructions are text".into());
    }
    let truncated = bytes.len() > MAX_FILE_BYTES;
    bytes.truncate(MAX_FILE_BYTES);
    let mut text = String::from_utf8_lossy(&bytes).into_owned();
    if truncated {
        // A cut may split a character: lossy decoding turns its half into U+FFFD at the very end.
        text = text.trim_end_matches('\u{FFFD}').to_string();
    }
    Ok(Some(InstructionFile { path, text, truncated }))
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
