//! A read-only view of the file system for `bash` (Linux, as root): metadata writes follow content writes.
//!
//! Landlock confines writing a file's content, not its metadata: `chmod`, `chown`, `touch` (utimes) and
//! `setxattr` outside the workspace pass it. Here the thread that spawns the shell enters a mount
//! namespace of its own, binds the writable folders (the workspace in `workspace-write`, the private
//! `$TMPDIR`) onto themselves, and remounts every other mount read-only, as bubblewrap does: outside
//! those folders every write, content or metadata, fails with "Read-only file system". Session files
//! and checkpoints (outside the workspace) cannot be re-permissioned either.
//!
//! Only root can do this from a thread (and only where mount namespaces are allowed: some containers deny
//! them even to root): an unprivileged user needs a user namespace first, which a process with more than
//! one thread cannot create, and a Landlock-confined process can no longer mount.
//! Elsewhere [`read_only_view`] is `false` and only Landlock's content rules apply (the README says so).
//!
//! Protected paths inside a writable folder (`.git/hooks`, `.git/config`, `.tooloop`, ... see
//! [`super::BashOptions::protected_paths`]) are then bound onto themselves and made read-only, as
//! bubblewrap and codex keep `.git` read-only inside a writable root: the folder stays writable around them,
//! and a mount point can be neither renamed nor removed from inside the namespace. The folders between the
//! writable folder and a protected path (`.git` for `.git/hooks`) are bound onto themselves too, writable,
//! so that renaming them away cannot put a fresh `.git/config` in the protected one's place.
//!
//! Must never: change the host's mounts (the namespace is the spawning thread's, made private first), or
//! leave a mount outside the writable folders writable without saying so (an error aborts the spawn).

use std::path::Path;

/// Whether [`enter`] can build the read-only view here (Linux, running as root, mount namespaces allowed).
pub(crate) fn read_only_view() -> bool {
    imp::supported()
}

/// Enter a new mount namespace (this thread only) in which everything but `writable` is read-only, and
/// the existing `protected` paths inside `writable` are read-only again.
///
/// # Errors
/// A message when the namespace cannot be made or a mount cannot be made read-only.
pub(crate) fn enter(writable: &[&Path], protected: &[std::path::PathBuf]) -> Result<(), String> {
    imp::enter(writable, protected)
}

#[cfg(target_os = "linux")]
mod imp {
    use nix::mount::{MsFlags, mount};
    use nix::sched::{CloneFlags, unshare};
    use std::path::{Path, PathBuf};

    /// Root, and allowed to make a mount namespace (a container may deny it even to root): probed once
    /// on a throw-away thread, whose private namespace ends with it.
    pub(super) fn supported() -> bool {
        static OK: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
        *OK.get_or_init(|| {
            rustix::process::geteuid().is_root()
                && std::thread::spawn(|| {
                    unshare(CloneFlags::CLONE_NEWNS).is_ok()
                        && mount(None::<&str>, "/", None::<&str>, MsFlags::MS_REC | MsFlags::MS_PRIVATE, None::<&str>)
                            .is_ok()
                })
                .join()
                .unwrap_or(false)
        })
    }

    /// `\040`-style octal escapes of /proc mountinfo paths, decoded.
    fn unescape(field: &str) -> PathBuf {
        let bytes = field.as_bytes();
        let mut out = Vec::with_capacity(bytes.len());
        let mut i = 0;
        while i < bytes.len() {
            if bytes[i] == b'\\' && i + 3 < bytes.len() && bytes[i + 1..i + 4].iter().all(|b| (b'0'..=b'7').contains(b))
            {
                let value = bytes[i + 1..i + 4].iter().fold(0u32, |acc, b| acc * 8 + u32::from(b - b'0'));
                out.push(value as u8);
                i += 4;
            } else {
                out.push(bytes[i]);
                i += 1;
            }
        }
        PathBuf::from(<std::ffi::OsString as std::os::unix::ffi::OsStringExt>::from_vec(out))
    }

    /// Mount points and their per-mount options (`ro,nosuid,...`), in mount order.
    fn mounts() -> Result<Vec<(PathBuf, String)>, String> {
        // thread-self: this thread's namespace, not the process's.
        let text = std::fs::read_to_string("/proc/thread-self/mountinfo")
            .map_err(|e| format!("could not read the mount table: {e}"))?;
        Ok(text
            .lines()
            .filter_map(|line| {
                let mut fields = line.split(' ');
                let point = fields.nth(4)?;
                let options = fields.next()?;
                Some((unescape(point), options.to_string()))
            })
            .collect())
    }

    /// The flags a read-only bind remount must keep (a remount that dropped a locked flag would fail).
    fn kept_flags(options: &str) -> MsFlags {
        let mut flags = MsFlags::empty();
        for option in options.split(',') {
            flags |= match option {
                "nosuid" => MsFlags::MS_NOSUID,
                "nodev" => MsFlags::MS_NODEV,
                "noexec" => MsFlags::MS_NOEXEC,
                "noatime" => MsFlags::MS_NOATIME,
                "nodiratime" => MsFlags::MS_NODIRATIME,
                "relatime" => MsFlags::MS_RELATIME,
                _ => MsFlags::empty(),
            };
        }
        flags
    }

    pub(super) fn enter(writable: &[&Path], protected: &[PathBuf]) -> Result<(), String> {
        let fail = |what: &str, path: &Path, e: nix::Error| format!("could not {what} {}: {e}", path.display());
        unshare(CloneFlags::CLONE_NEWNS).map_err(|e| format!("could not make a mount namespace: {e}"))?;
        let root = Path::new("/");
        // Nothing done from here on reaches the host's namespace.
        mount(None::<&str>, root, None::<&str>, MsFlags::MS_REC | MsFlags::MS_PRIVATE, None::<&str>)
            .map_err(|e| fail("make private", root, e))?;
        for dir in writable {
            mount(Some(*dir), *dir, None::<&str>, MsFlags::MS_BIND | MsFlags::MS_REC, None::<&str>)
                .map_err(|e| fail("bind", dir, e))?;
        }
        for (point, options) in mounts()? {
            if writable.iter().any(|dir| point.starts_with(dir)) || options.split(',').any(|o| o == "ro") {
                continue;
            }
            let flags = MsFlags::MS_REMOUNT | MsFlags::MS_BIND | MsFlags::MS_RDONLY | kept_flags(&options);
            match mount(None::<&str>, &point, None::<&str>, flags, None::<&str>) {
                Ok(()) => {}
                // A mount point hidden under a later mount (or gone) cannot be reached by its path; what
                // is on top of it is remounted in its own turn.
                Err(nix::Error::ENOENT) => {}
                Err(e) => return Err(fail("make read-only", &point, e)),
            }
        }
        // Only what exists can be bound; a symlink is bound where it points (mount follows it), and only
        // when that is inside a writable folder: anywhere else is read-only already.
        let targets: Vec<PathBuf> = protected
            .iter()
            .filter_map(|path| path.canonicalize().ok())
            .filter(|real| writable.iter().any(|dir| real.starts_with(dir)))
            .collect();
        // The folders between a writable folder and a protected path become mount points too (writable ones):
        // a mount point cannot be renamed or removed, so `mv .git .git2 && mkdir .git` cannot put a new
        // `.git/config` where the read-only one was.
        let mut between: Vec<PathBuf> = Vec::new();
        for real in &targets {
            let Some(top) = writable.iter().filter(|dir| real.starts_with(dir)).max_by_key(|d| d.as_os_str().len())
            else {
                continue;
            };
            let mut dir = real.parent();
            while let Some(d) = dir {
                if d == *top || !d.starts_with(top) {
                    break;
                }
                if !between.iter().any(|b| b == d) {
                    between.push(d.to_path_buf());
                }
                dir = d.parent();
            }
        }
        between.sort_by_key(|d| d.components().count());
        for dir in &between {
            mount(Some(dir), dir, None::<&str>, MsFlags::MS_BIND, None::<&str>).map_err(|e| fail("bind", dir, e))?;
        }
        for real in targets {
            mount(Some(&real), &real, None::<&str>, MsFlags::MS_BIND | MsFlags::MS_REC, None::<&str>)
                .map_err(|e| fail("bind", &real, e))?;
            // The new mount's own options: the remount must keep its flags.
            let options = mounts()?.into_iter().rev().find(|(point, _)| *point == real).map(|(_, o)| o);
            let flags = MsFlags::MS_REMOUNT
                | MsFlags::MS_BIND
                | MsFlags::MS_RDONLY
                | options.as_deref().map_or(MsFlags::empty(), kept_flags);
            mount(None::<&str>, &real, None::<&str>, flags, None::<&str>)
                .map_err(|e| fail("make read-only", &real, e))?;
        }
        Ok(())
    }

    #[cfg(test)]
    mod tests {
        #[test]
        fn mountinfo_escapes_are_decoded() {
            assert_eq!(super::unescape(r"/a\040b\011c"), std::path::PathBuf::from("/a b\tc"));
            assert_eq!(super::unescape(r"/plain\0"), std::path::PathBuf::from(r"/plain\0"));
        }
    }
}

#[cfg(not(target_os = "linux"))]
mod imp {
    use std::path::Path;

    pub(super) fn supported() -> bool {
        false
    }

    pub(super) fn enter(_: &[&Path], _: &[std::path::PathBuf]) -> Result<(), String> {
        Err("a read-only view needs Linux mount namespaces".to_string())
    }
}
