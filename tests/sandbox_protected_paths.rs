//! Protected paths inside a writable workspace: sandboxed `bash` ("workspace-write", as root where the
//! read-only view exists) cannot change `.git/config`, `.git/hooks/*`, `.tooloop/*`, `.claude/*` or
//! `.mcp.json` when they exist, while the rest of the workspace stays writable and `git commit` works;
//! `protected_paths: []` lifts it, and a path that leaves the workspace is refused as an option.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::PathBuf;
use std::process::Command;

use tooloop::builtin::{BuiltinOptions, SandboxMode};

#[path = "common/builtin.rs"]
mod builtin_fixture;
#[path = "common/require.rs"]
mod require;

use builtin_fixture::{Fixture, bash, registry_with};

/// The protected files and what each holds before the command runs.
const FILES: [(&str, &str); 5] = [
    (".git/config", "[core]\n\trepositoryformatversion = 0\n"),
    (".git/hooks/pre-commit", "#!/bin/sh\nexit 0\n"),
    (".tooloop/settings.local.json", "{}\n"),
    (".claude/settings.json", "{}\n"),
    (".mcp.json", "{}\n"),
];

/// Try to change each protected file (write, append, replace by rename, remove) and a file elsewhere in
/// the workspace; print what worked.
const ATTACK: &str = "for f in .git/config .git/hooks/pre-commit .tooloop/settings.local.json .claude/settings.json \
                      .mcp.json; do echo evil > \"$f\" 2>/dev/null && echo \"WROTE $f\"; \
                      echo x > t.tmp; mv -f t.tmp \"$f\" 2>/dev/null && echo \"RENAMED $f\"; \
                      rm -f \"$f\" 2>/dev/null && [ ! -e \"$f\" ] && echo \"REMOVED $f\"; done; \
                      echo new > .git/hooks/post-checkout 2>/dev/null && echo 'WROTE .git/hooks/post-checkout'; \
                      mv .git/hooks .git/hooks.old 2>/dev/null && echo 'MOVED .git/hooks'; \
                      echo fine > src.txt && echo WROTE-ELSEWHERE";

fn read_only_view_here() -> bool {
    if !require::landlock() {
        return false;
    }
    require::require(rustix::process::geteuid().is_root(), "root (the read-only view is built in a mount namespace)")
}

fn setup(fx: &Fixture) {
    for (rel, content) in FILES {
        fx.write(rel, content);
    }
}

#[test]
fn sandboxed_bash_cannot_change_protected_paths_but_writes_elsewhere() {
    if !read_only_view_here() {
        return;
    }
    let fx = Fixture::new("protected");
    setup(&fx);
    let out = bash(&fx.registry(SandboxMode::WorkspaceWrite, true), ATTACK);
    assert!(out.contains("WROTE-ELSEWHERE"), "the workspace stays writable: {out}");
    assert!(!out.contains("WROTE .") && !out.contains("RENAMED") && !out.contains("REMOVED"), "{out}");
    assert!(!out.contains("MOVED"), "{out}");
    for (rel, content) in FILES {
        assert_eq!(std::fs::read_to_string(fx.ws.join(rel)).unwrap(), content, "{rel} changed: {out}");
    }
    assert!(!fx.ws.join(".git/hooks/post-checkout").exists());
}

#[test]
fn renaming_a_protected_paths_folder_away_cannot_plant_a_fresh_one() {
    if !read_only_view_here() {
        return;
    }
    let fx = Fixture::new("protected-rename");
    setup(&fx);
    // The parent of .git/config and .git/hooks, and of .tooloop/..., moved aside and made anew.
    let out = bash(
        &fx.registry(SandboxMode::WorkspaceWrite, true),
        "mv .git .git2 2>/dev/null && echo MOVED-GIT; mkdir -p .git && \
         printf '[core]\\n\\tfsmonitor = touch pwned\\n' > .git/config 2>/dev/null && echo PLANTED; \
         mv .tooloop .tooloop2 2>/dev/null && echo MOVED-TOOLOOP; echo checked",
    );
    assert!(out.contains("checked"), "{out}");
    assert!(!out.contains("MOVED") && !out.contains("PLANTED"), "{out}");
    assert_eq!(std::fs::read_to_string(fx.ws.join(".git/config")).unwrap(), FILES[0].1, "{out}");
}

#[test]
fn an_empty_protected_paths_list_lifts_the_protection() {
    if !read_only_view_here() {
        return;
    }
    let fx = Fixture::new("protected-off");
    setup(&fx);
    let opts = BuiltinOptions { protected_paths: Vec::new(), ..fx.options(SandboxMode::WorkspaceWrite, true) };
    let out = bash(&registry_with(&opts), "echo evil > .git/config && echo evil > .mcp.json && echo done");
    assert!(out.contains("done"), "{out}");
    assert_eq!(std::fs::read_to_string(fx.ws.join(".git/config")).unwrap(), "evil\n");
}

#[test]
fn git_commit_still_works_inside_a_protected_repository() {
    if !read_only_view_here() || !require::require(Command::new("git").arg("--version").output().is_ok(), "git") {
        return;
    }
    let fx = Fixture::new("protected-git");
    let git = |args: &[&str]| Command::new("git").current_dir(&fx.ws).args(args).output().unwrap();
    assert!(git(&["init", "-q"]).status.success());
    fx.write(".git/hooks/pre-commit", "#!/bin/sh\nexit 0\n");
    let config_before = std::fs::read_to_string(fx.ws.join(".git/config")).unwrap();
    let out = bash(
        &fx.registry(SandboxMode::WorkspaceWrite, true),
        "echo hi > a.txt && git add a.txt && git -c user.name=t -c user.email=t@example.com commit -qm first \
         && git log --oneline | wc -l && echo COMMITTED",
    );
    assert!(out.contains("COMMITTED"), "{out}");
    assert_eq!(std::fs::read_to_string(fx.ws.join(".git/config")).unwrap(), config_before);
}

#[test]
fn a_protected_path_that_leaves_the_workspace_is_refused() {
    let fx = Fixture::new("protected-bad");
    for bad in ["../x", "/etc", ""] {
        let opts = BuiltinOptions { protected_paths: vec![PathBuf::from(bad)], ..fx.options(SandboxMode::Off, true) };
        let registry = tooloop::tools::ToolRegistry::new();
        let e = tooloop::builtin::register(&registry, &opts).unwrap_err();
        assert!(e.to_string().contains("protected_paths"), "{e}");
        let e = tooloop::AgentOptions::from_value(serde_json::json!({"protected_paths": [bad]})).unwrap_err();
        assert!(e.to_string().contains("protected_paths"), "{e}");
    }
    let o = tooloop::AgentOptions::from_value(serde_json::json!({"protected_paths": null})).unwrap();
    assert_eq!(o.protected_paths.len(), 5);
}
