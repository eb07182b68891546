//! Putting a workspace file back as it was (the CLI's `/undo`, and any host keeping checkpoints), through
//! the same race-free directory handles as the file tools.
//!
//! Every step is relative to a `cap-std` handle on the workspace root: the parent folders are created
//! and opened without following a symlink out, the new content goes to a fresh temporary file created
//! with `O_EXCL` (never a name someone planted), its mode is set on the open file (never through a
//! path), and a rename puts it in place (a name planted meanwhile is replaced, never written through).
//!
//! Must never: write, chmod or remove anything outside the workspace, whatever a concurrent command
//! does to the paths meanwhile.

use super::files::{open_parent, open_regular_in, open_root, refusal, split_parent, write_atomic};
use super::workspace::Workspace;
use cap_std::fs::{Permissions, PermissionsExt};
use std::io;

/// What [`restore_file`] did.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Restored {
    /// The file now has the given content and mode.
    Written,
    /// The file (or a symlink at its name) was removed.
    Removed,
    /// There was nothing to remove.
    Absent,
}

/// Put `path` (relative to the workspace, or absolute inside it) back to `content` with permission bits
/// `mode`, or remove it when `content` is `None` (the file did not exist before).
///
/// Missing parent folders are created. Paths resolve as for `write_file`: a symlink that stays inside the
/// workspace is followed, one that leads out is refused; a folder at `path` is refused.
///
/// # Errors
/// A message when the path or one of its folders leads outside the workspace (also when a symlink is
/// swapped in while this runs), when a folder stands at `path`, or on an I/O failure.
pub fn restore_file(ws: &Workspace, path: &str, content: Option<&[u8]>, mode: u32) -> Result<Restored, String> {
    let (root, rel) = open_root(ws, path)?;
    let (parent_rel, name) = split_parent(&rel, path)?;
    match content {
        None => {
            let parent = match open_parent(&root, &parent_rel, path) {
                Ok(parent) => parent,
                Err(_) if !parent_rel.as_os_str().is_empty() && root.symlink_metadata(&parent_rel).is_err() => {
                    return Ok(Restored::Absent);
                }
                Err(e) => return Err(e),
            };
            match parent.symlink_metadata(&name) {
                Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(Restored::Absent),
                Err(e) => Err(refusal(path, "inspect", &e)),
                Ok(meta) if meta.is_dir() => Err(format!("'{path}' is now a folder; not removing it")),
                Ok(_) => parent.remove_file(&name).map(|()| Restored::Removed).map_err(|e| refusal(path, "remove", &e)),
            }
        }
        Some(data) => {
            if !parent_rel.as_os_str().is_empty() {
                root.create_dir_all(&parent_rel).map_err(|e| refusal(path, "create the folders for", &e))?;
            }
            let parent = open_parent(&root, &parent_rel, path)?;
            if parent.symlink_metadata(&name).is_ok_and(|m| m.is_dir()) {
                return Err(format!("'{path}' is now a folder; not replacing it"));
            }
            write_atomic(&parent, &name, data, Some(Permissions::from_mode(mode & 0o7777)))
                .map(|()| Restored::Written)
                .map_err(|e| refusal(path, "write", &e))
        }
    }
}

/// A file's state before a built-in tool changes it (see [`file_state`]): what a host needs to put it back
/// with [`restore_file`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FileState {
    /// The path relative to the workspace root, as [`restore_file`] takes it (`/`-separated).
    pub path: String,
    /// Content and permission bits, when a file stood there; `None` when there was none.
    pub before: Option<(Vec<u8>, u32)>,
    /// A file stood there but was larger than the cap given to [`file_state`]: its content was not read.
    pub too_large: bool,
}

/// Read what `path` holds now (through the same race-free handles as the file tools), reading at most
/// `cap` bytes of content.
///
/// # Errors
/// A message when the path leads outside the workspace, names a folder, or cannot be read.
pub fn file_state(ws: &Workspace, path: &str, cap: u64) -> Result<FileState, String> {
    use std::io::Read;
    let (root, rel) = open_root(ws, path)?;
    let (parent_rel, name) = split_parent(&rel, path)?;
    let shown = rel.to_string_lossy().replace(std::path::MAIN_SEPARATOR, "/");
    let absent = FileState { path: shown.clone(), before: None, too_large: false };
    let parent = match open_parent(&root, &parent_rel, path) {
        Ok(parent) => parent,
        Err(_) if root.symlink_metadata(&parent_rel).is_err() => return Ok(absent),
        Err(e) => return Err(e),
    };
    let meta = match parent.metadata(&name) {
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(absent),
        Err(e) => return Err(refusal(path, "inspect", &e)),
        Ok(meta) => meta,
    };
    if meta.is_dir() {
        return Err(format!("'{path}' is a folder"));
    }
    if !meta.is_file() {
        // A FIFO would block the open (and the run with it); a device could be endless.
        return Err(format!("'{path}' is not a regular file (a device, socket or pipe)"));
    }
    let mode = meta.permissions().mode() & 0o7777;
    if meta.len() > cap {
        return Ok(FileState { path: shown, before: None, too_large: true });
    }
    let mut data = Vec::new();
    open_regular_in(&parent, &name)
        .and_then(|f| f.take(cap.saturating_add(1)).read_to_end(&mut data))
        .map_err(|e| refusal(path, "read", &e))?;
    Ok(FileState { path: shown, before: Some((data, mode)), too_large: false })
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod tests {
    use super::super::workspace::tests::setup;
    use super::*;
    use std::fs;
    use std::os::unix::fs::{PermissionsExt as _, symlink};

    #[test]
    fn restores_content_and_mode_and_removes_what_did_not_exist() {
        let (_tmp, ws) = setup();
        assert_eq!(restore_file(&ws, "a/b/new.txt", Some(b"old\n"), 0o750).unwrap(), Restored::Written);
        let target = ws.root().join("a/b/new.txt");
        assert_eq!(fs::read(&target).unwrap(), b"old\n");
        assert_eq!(fs::metadata(&target).unwrap().permissions().mode() & 0o7777, 0o750);
        assert_eq!(restore_file(&ws, "a/b/new.txt", None, 0).unwrap(), Restored::Removed);
        assert!(!target.exists());
        assert_eq!(restore_file(&ws, "a/b/new.txt", None, 0).unwrap(), Restored::Absent);
        assert_eq!(restore_file(&ws, "gone/x.txt", None, 0).unwrap(), Restored::Absent);
        let names: Vec<_> = fs::read_dir(ws.root().join("a/b")).unwrap().collect();
        assert!(names.is_empty(), "a temporary file was left: {names:?}");
    }

    #[test]
    fn a_symlink_out_is_never_written_through() {
        let (tmp, ws) = setup();
        let outside = tmp.path().join("outside.txt");
        fs::write(&outside, "precious").unwrap();
        fs::set_permissions(&outside, fs::Permissions::from_mode(0o600)).unwrap();
        symlink(&outside, ws.root().join("f.txt")).unwrap();
        // The path resolves outside: refused before anything is written.
        assert!(restore_file(&ws, "f.txt", Some(b"old"), 0o777).is_err());
        // A symlink that stays inside is followed, as write_file does (the link is kept).
        fs::remove_file(ws.root().join("f.txt")).unwrap();
        fs::write(ws.root().join("real.txt"), "real").unwrap();
        symlink(ws.root().join("real.txt"), ws.root().join("f.txt")).unwrap();
        restore_file(&ws, "f.txt", Some(b"old"), 0o644).unwrap();
        assert_eq!(fs::read_to_string(ws.root().join("real.txt")).unwrap(), "old");
        assert!(fs::symlink_metadata(ws.root().join("f.txt")).unwrap().file_type().is_symlink());
        assert_eq!(fs::read_to_string(&outside).unwrap(), "precious");
        assert_eq!(fs::metadata(&outside).unwrap().permissions().mode() & 0o7777, 0o600);
    }

    #[test]
    fn a_folder_leading_out_is_refused() {
        let (tmp, ws) = setup();
        let out_dir = tmp.path().join("elsewhere");
        fs::create_dir(&out_dir).unwrap();
        symlink(&out_dir, ws.root().join("d")).unwrap();
        assert!(restore_file(&ws, "d/x.txt", Some(b"x"), 0o644).is_err());
        assert!(restore_file(&ws, "../x.txt", Some(b"x"), 0o644).is_err());
        fs::write(out_dir.join("y.txt"), "keep").unwrap();
        assert!(restore_file(&ws, "d/y.txt", None, 0).is_err());
        assert_eq!(fs::read_to_string(out_dir.join("y.txt")).unwrap(), "keep");
        assert!(!out_dir.join("x.txt").exists());
    }
}
