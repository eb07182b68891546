//! A scratch folder for integration tests, removed on drop (std only: the crate has no dev-dependencies).
//! Included with `#[path = "common/tempdir.rs"] mod tempdir;`.
#![allow(dead_code)]

use std::path::PathBuf;

/// A folder under the system temp dir, unique to this process and `name`, emptied at creation and removed
/// on drop (also when the test panics).
pub struct TempDir(pub PathBuf);

impl TempDir {
    pub fn new(name: &str) -> TempDir {
        let dir = std::env::temp_dir().join(format!("tooloop-test-{}-{name}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).expect("creating the test folder");
        TempDir(dir)
    }

    pub fn file(&self, name: &str) -> PathBuf {
        self.0.join(name)
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}
