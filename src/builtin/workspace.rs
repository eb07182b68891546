//! The workspace: turns a path written by the model into a real path inside one root folder.
//!
//! Every path the file tools (`read_file`, `write_file`, `edit_file`) touch goes through
//! [`Workspace::resolve`] first. It must never hand out a path outside the root: not through `..`, not
//! through an absolute path, not through a symlink (a symlinked file, a symlinked folder on the way, or a
//! symlinked folder under which a new file would be created). Its answer is a check and the wording of a
//! refusal; the file tools then open the resolved path relative to a directory handle on the root
//! (`cap-std`), so a symlink swapped in between the check and the use is refused by the lookup itself.

use std::ffi::OsStr;
use std::fs;
use std::io;
use std::path::{Component, Path, PathBuf};

/// The folder the built-in tools work in, with its canonical (symlink-free, absolute) path.
///
/// # Threads and cloning
/// Immutable after [`Workspace::new`]: `Send + Sync`, and cloning copies one path.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Workspace {
    root: PathBuf,
}

impl Workspace {
    /// A workspace rooted at `root`, which must exist and be a folder. The root is canonicalized, so a
    /// root given through a symlink (e.g. `/tmp` on macOS) works, and later checks compare real paths.
    ///
    /// # Errors
    /// The error of [`std::fs::canonicalize`] when `root` does not exist or cannot be reached, or
    /// `InvalidInput` when it is not a folder.
    pub fn new(root: impl AsRef<Path>) -> io::Result<Workspace> {
        let root = fs::canonicalize(root.as_ref())?;
        if !root.is_dir() {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                format!("workspace root {} is not a folder", root.display()),
            ));
        }
        Ok(Workspace { root })
    }

    /// The canonical root folder.
    pub fn root(&self) -> &Path {
        &self.root
    }

    /// Resolve `path` (relative to the root, or absolute inside the root) to a real path inside the
    /// workspace, following symlinks, or `Err` with a message naming the rule that refused it.
    ///
    /// The path need not exist (so `write_file` can create it): the longest existing prefix is
    /// canonicalized and must lie inside the root, and the rest, which does not exist yet and so holds
    /// no symlink, may not contain `..`. A dangling symlink on the way is refused, since what it would
    /// create cannot be checked.
    ///
    /// # Errors
    /// A message for the model when the path is empty, holds a NUL byte, leaves the root (through `..`,
    /// as an absolute path, or through a symlink), uses `..` after a part that does not exist, goes
    /// through a dangling symlink, or cannot be resolved (e.g. a file used as a folder).
    pub fn resolve(&self, path: &str) -> Result<PathBuf, String> {
        if path.is_empty() {
            return Err("path is empty: give a file path relative to the workspace root".to_string());
        }
        if path.contains('\0') {
            return Err(format!("path {path:?} contains a NUL byte, which no file name may hold"));
        }
        let given = Path::new(path);
        let candidate = if given.is_absolute() { given.to_path_buf() } else { self.root.join(given) };
        let parts: Vec<Component<'_>> = candidate.components().collect();

        // Longest existing prefix: the first component is `/`, which always exists, so this ends.
        let mut split = parts.len();
        let real_prefix = loop {
            let prefix: PathBuf = parts[..split].iter().collect();
            match fs::canonicalize(&prefix) {
                Ok(real) => break real,
                Err(e) if e.kind() == io::ErrorKind::NotFound && split > 1 => {
                    // lstat succeeding where canonicalize failed means `prefix` is itself a dangling link.
                    if let Ok(meta) = fs::symlink_metadata(&prefix) {
                        if meta.file_type().is_symlink() {
                            let target = fs::read_link(&prefix)
                                .map(|t| t.display().to_string())
                                .unwrap_or_else(|_| "?".to_string());
                            return Err(format!(
                                "path '{path}' goes through the symlink {} whose target {target} does not \
                                 exist (dangling symlinks are not followed)",
                                prefix.display()
                            ));
                        }
                    }
                    split -= 1;
                }
                Err(e) => {
                    return Err(format!("path '{path}' cannot be resolved: {e}"));
                }
            }
        };

        let mut rest: Vec<&OsStr> = Vec::new();
        for part in &parts[split..] {
            match part {
                Component::Normal(name) => rest.push(name),
                Component::CurDir => {}
                Component::ParentDir => {
                    let missing =
                        rest.first().map(|n| n.to_string_lossy().into_owned()).unwrap_or_else(|| "..".to_string());
                    return Err(format!(
                        "path '{path}' uses '..' after '{missing}', which does not exist (write the path \
                         without '..')"
                    ));
                }
                Component::RootDir | Component::Prefix(_) => {
                    return Err(format!("path '{path}' is not a valid file path"));
                }
            }
        }
        let mut real = real_prefix;
        real.extend(rest);

        if real.starts_with(&self.root) {
            return Ok(real);
        }
        let root = self.root.display();
        if lexically_normal(&candidate).starts_with(&self.root) {
            Err(format!(
                "path '{path}' resolves through a symlink to {}, outside the workspace {root} (symlinks may \
                 not lead out of the workspace)",
                real.display()
            ))
        } else if given.is_absolute() {
            Err(format!(
                "path '{path}' is outside the workspace {root} (absolute paths are allowed only inside the \
                 workspace root)"
            ))
        } else {
            Err(format!("path '{path}' is outside the workspace {root} (paths must stay inside the workspace root)"))
        }
    }

    /// `real` (a path from [`Workspace::resolve`]) as the model should see it: relative to the root,
    /// or `.` for the root itself.
    pub(crate) fn display(&self, real: &Path) -> String {
        match real.strip_prefix(&self.root) {
            Ok(rel) if rel.as_os_str().is_empty() => ".".to_string(),
            Ok(rel) => rel.display().to_string(),
            Err(_) => real.display().to_string(),
        }
    }
}

/// `path` with `..` applied textually, ignoring symlinks. Only used to pick the wording of a refusal
/// (did the path leave through `..` or through a symlink?), never to decide.
fn lexically_normal(path: &Path) -> PathBuf {
    let mut out = PathBuf::new();
    for part in path.components() {
        match part {
            Component::ParentDir => {
                out.pop();
            }
            Component::CurDir => {}
            other => out.push(other),
        }
    }
    out
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
pub(crate) mod tests {
    use super::*;
    use std::os::unix::fs::symlink;
    use std::sync::atomic::{AtomicUsize, Ordering};

    /// A fresh folder under the system temp dir, removed (with its contents) on drop.
    pub(crate) struct TempDir(PathBuf);

    impl TempDir {
        pub(crate) fn new() -> TempDir {
            static COUNTER: AtomicUsize = AtomicUsize::new(0);
            let n = COUNTER.fetch_add(1, Ordering::SeqCst);
            let path = std::env::temp_dir().join(format!("tooloop-builtin-test-{}-{n}", std::process::id()));
            let _ = fs::remove_dir_all(&path);
            fs::create_dir_all(&path).unwrap();
            TempDir(path)
        }

        pub(crate) fn path(&self) -> &Path {
            &self.0
        }
    }

    impl Drop for TempDir {
        fn drop(&mut self) {
            let _ = fs::remove_dir_all(&self.0);
        }
    }

    /// A workspace in `<tmp>/ws`, with `<tmp>/outside/secret.txt` next to it.
    pub(crate) fn setup() -> (TempDir, Workspace) {
        let tmp = TempDir::new();
        fs::create_dir_all(tmp.path().join("ws/sub")).unwrap();
        fs::create_dir_all(tmp.path().join("outside")).unwrap();
        fs::write(tmp.path().join("outside/secret.txt"), "secret\n").unwrap();
        fs::write(tmp.path().join("ws/sub/inside.txt"), "inside\n").unwrap();
        let ws = Workspace::new(tmp.path().join("ws")).unwrap();
        (tmp, ws)
    }

    #[test]
    fn relative_path_joins_the_root() {
        let (_tmp, ws) = setup();
        assert_eq!(ws.resolve("sub/inside.txt").unwrap(), ws.root().join("sub/inside.txt"));
        assert_eq!(ws.resolve("new/deep/file.txt").unwrap(), ws.root().join("new/deep/file.txt"));
        assert_eq!(ws.resolve(".").unwrap(), ws.root());
    }

    #[test]
    fn dot_dot_that_leaves_the_root_is_refused() {
        let (_tmp, ws) = setup();
        let err = ws.resolve("../outside/secret.txt").unwrap_err();
        assert!(err.contains("outside the workspace"), "{err}");
        assert!(err.contains("paths must stay inside the workspace root"), "{err}");
        let err = ws.resolve("sub/../../outside/new.txt").unwrap_err();
        assert!(err.contains("outside the workspace"), "{err}");
        assert!(ws.resolve("..").is_err());
    }

    #[test]
    fn dot_dot_that_stays_inside_is_allowed() {
        let (_tmp, ws) = setup();
        assert_eq!(ws.resolve("sub/../sub/inside.txt").unwrap(), ws.root().join("sub/inside.txt"));
        assert_eq!(ws.resolve("sub/../created.txt").unwrap(), ws.root().join("created.txt"));
    }

    #[test]
    fn dot_dot_after_a_missing_folder_is_refused() {
        let (_tmp, ws) = setup();
        let err = ws.resolve("missing/../x.txt").unwrap_err();
        assert!(err.contains("'..'") && err.contains("missing"), "{err}");
    }

    #[test]
    fn absolute_path_outside_is_refused() {
        let (tmp, ws) = setup();
        let err = ws.resolve("/etc/passwd").unwrap_err();
        assert!(err.contains("absolute paths are allowed only inside"), "{err}");
        let secret = tmp.path().join("outside/secret.txt");
        assert!(ws.resolve(secret.to_str().unwrap()).is_err());
    }

    #[test]
    fn absolute_path_inside_is_allowed() {
        let (_tmp, ws) = setup();
        let abs = ws.root().join("sub/inside.txt");
        assert_eq!(ws.resolve(abs.to_str().unwrap()).unwrap(), abs);
        let new = ws.root().join("brand/new.txt");
        assert_eq!(ws.resolve(new.to_str().unwrap()).unwrap(), new);
    }

    #[test]
    fn symlinked_file_leading_out_is_refused() {
        let (tmp, ws) = setup();
        symlink(tmp.path().join("outside/secret.txt"), ws.root().join("link.txt")).unwrap();
        let err = ws.resolve("link.txt").unwrap_err();
        assert!(err.contains("resolves through a symlink to"), "{err}");
        assert!(err.contains("secret.txt"), "{err}");
    }

    #[test]
    fn symlinked_parent_folder_leading_out_is_refused() {
        let (tmp, ws) = setup();
        symlink(tmp.path().join("outside"), ws.root().join("out")).unwrap();
        let err = ws.resolve("out/secret.txt").unwrap_err();
        assert!(err.contains("resolves through a symlink"), "{err}");
    }

    #[test]
    fn new_path_under_symlinked_folder_leading_out_is_refused() {
        let (tmp, ws) = setup();
        symlink(tmp.path().join("outside"), ws.root().join("out")).unwrap();
        let err = ws.resolve("out/does/not/exist.txt").unwrap_err();
        assert!(err.contains("resolves through a symlink"), "{err}");
    }

    #[test]
    fn symlink_staying_inside_is_allowed() {
        let (_tmp, ws) = setup();
        symlink(ws.root().join("sub"), ws.root().join("alias")).unwrap();
        assert_eq!(ws.resolve("alias/inside.txt").unwrap(), ws.root().join("sub/inside.txt"));
        assert_eq!(ws.resolve("alias/new.txt").unwrap(), ws.root().join("sub/new.txt"));
    }

    #[test]
    fn dangling_symlink_is_refused() {
        let (tmp, ws) = setup();
        symlink(tmp.path().join("outside/not-yet"), ws.root().join("dangling")).unwrap();
        let err = ws.resolve("dangling").unwrap_err();
        assert!(err.contains("dangling"), "{err}");
        assert!(ws.resolve("dangling/x.txt").is_err());
    }

    #[test]
    fn nul_byte_and_empty_path_are_refused() {
        let (_tmp, ws) = setup();
        assert!(ws.resolve("a\0b").unwrap_err().contains("NUL"));
        assert!(ws.resolve("").unwrap_err().contains("empty"));
    }

    #[test]
    fn root_given_through_a_symlink_is_canonicalized() {
        let (tmp, _ws) = setup();
        symlink(tmp.path().join("ws"), tmp.path().join("ws-link")).unwrap();
        let ws = Workspace::new(tmp.path().join("ws-link")).unwrap();
        assert_eq!(ws.root(), fs::canonicalize(tmp.path().join("ws")).unwrap());
        let via_link = tmp.path().join("ws-link/sub/inside.txt");
        assert_eq!(ws.resolve(via_link.to_str().unwrap()).unwrap(), ws.root().join("sub/inside.txt"));
    }

    #[test]
    fn workspace_root_must_exist() {
        let tmp = TempDir::new();
        assert!(Workspace::new(tmp.path().join("nope")).is_err());
        fs::write(tmp.path().join("file"), "x").unwrap();
        assert!(Workspace::new(tmp.path().join("file")).is_err());
    }
}
