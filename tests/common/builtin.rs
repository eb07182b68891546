//! The setup of the built-in tool tests (tests/builtin_*.rs, tests/sandbox_side_doors.rs): a workspace
//! beside a folder outside it, a registry of the built-ins over it, and calls that return the tool's
//! text. Included with `#[path = "common/builtin.rs"] mod builtin_fixture;`.
#![allow(dead_code)]

use serde_json::{Value, json};
use std::fs;
use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use tooloop::builtin::{self, BackgroundShells, BuiltinOptions, SandboxMode};
use tooloop::cancel::CancelToken;
use tooloop::tools::{ToolContext, ToolError, ToolOutput, ToolRegistry};

/// `<tmp>/ws` (the workspace) beside `<tmp>/outside` holding `secret.txt`, both canonical (the sandbox
/// and the file tools compare real paths), removed on drop.
pub struct Fixture {
    pub base: PathBuf,
    pub ws: PathBuf,
}

impl Fixture {
    /// A fresh pair of folders; `name` says which test file made them.
    pub fn new(name: &str) -> Fixture {
        static N: AtomicUsize = AtomicUsize::new(0);
        let base = std::env::temp_dir().join(format!(
            "tooloop-{name}-{}-{}",
            std::process::id(),
            N.fetch_add(1, Ordering::SeqCst)
        ));
        let _ = fs::remove_dir_all(&base);
        fs::create_dir_all(base.join("ws")).unwrap();
        fs::create_dir_all(base.join("outside")).unwrap();
        fs::write(base.join("outside/secret.txt"), "secret\n").unwrap();
        let base = fs::canonicalize(base).unwrap();
        let ws = base.join("ws");
        Fixture { base, ws }
    }

    pub fn outside(&self) -> PathBuf {
        self.base.join("outside")
    }

    /// Writes `content` at `rel` in the workspace, creating its folders.
    pub fn write(&self, rel: &str, content: impl AsRef<[u8]>) {
        let p = self.ws.join(rel);
        fs::create_dir_all(p.parent().unwrap()).unwrap();
        fs::write(p, content).unwrap();
    }

    pub fn options(&self, sandbox: SandboxMode, network: bool) -> BuiltinOptions {
        BuiltinOptions { workspace: self.ws.clone(), sandbox, network, ..BuiltinOptions::default() }
    }

    /// Every built-in over the workspace.
    pub fn registry(&self, sandbox: SandboxMode, network: bool) -> ToolRegistry {
        registry_with(&self.options(sandbox, network))
    }

    /// Every built-in, and the background shells the registry's bash starts (ended when dropped).
    pub fn registry_owned(&self, sandbox: SandboxMode) -> (ToolRegistry, Arc<BackgroundShells>) {
        let registry = ToolRegistry::new();
        let background = builtin::register_owned(&registry, &self.options(sandbox, true)).unwrap();
        (registry, background)
    }
}

impl Drop for Fixture {
    fn drop(&mut self) {
        let _ = fs::remove_dir_all(&self.base);
    }
}

/// A registry of the built-ins `opts` name.
pub fn registry_with(opts: &BuiltinOptions) -> ToolRegistry {
    let registry = ToolRegistry::new();
    builtin::register(&registry, opts).unwrap();
    registry
}

/// Calls tool `name`: `Ok(text)`, or `Err(text)` for a result the model reads as an error.
pub fn call(registry: &ToolRegistry, name: &str, input: Value) -> Result<String, String> {
    call_with(registry, name, input, &CancelToken::new())
}

/// [`call`] with a cancel token the test controls.
pub fn call_with(registry: &ToolRegistry, name: &str, input: Value, cancel: &CancelToken) -> Result<String, String> {
    let tool = registry.get(name).unwrap();
    let ctx = ToolContext { tool_use_id: "t1", tool_name: name, cancel, read_only: false };
    match tool.handler.call(&input, &ctx) {
        Ok(ToolOutput::Text(text)) => Ok(text),
        Ok(other) => panic!("unexpected output {other:?}"),
        Err(ToolError::Respond(text)) | Err(ToolError::Fatal(text)) => Err(text),
    }
}

/// What bash printed (with its notes), whether it exited 0 or not; 30 s at the most.
pub fn bash(registry: &ToolRegistry, command: &str) -> String {
    match call(registry, "bash", json!({"command": command, "timeout": 30})) {
        Ok(text) | Err(text) => text,
    }
}
