//! The `grep` and `glob` tools end to end through `builtin::register`: ripgrep's rules (ignore files,
//! hidden and binary files), confinement (symlinks leading out are not followed), output modes, caps,
//! ordering, and cancellation on a big tree.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use serde_json::json;
use std::fs;
use std::os::unix::fs::symlink;
use std::time::{Duration, Instant, SystemTime};
use tooloop::builtin::{self, BuiltinOptions, SandboxMode};
use tooloop::cancel::CancelToken;
use tooloop::tools::ToolRegistry;

#[path = "common/builtin.rs"]
mod builtin_fixture;

use builtin_fixture::{Fixture, call, call_with, registry_with};

/// The search tools over the fixture's workspace, and the tree the grep tests search.
trait Search {
    fn search_tools(&self) -> ToolRegistry;
    fn tree(&self);
}

impl Search for Fixture {
    /// grep and glob alone, unconfined (the sandbox is bash's).
    fn search_tools(&self) -> ToolRegistry {
        registry_with(&BuiltinOptions {
            names: vec!["grep".into(), "glob".into()],
            ..self.options(SandboxMode::Off, true)
        })
    }

    /// The tree every grep test searches: a match in a plain file, in an ignored one, a hidden one, a
    /// binary one, and in a file reached through a symlink that leads out of the workspace.
    fn tree(&self) {
        self.write("src/main.rs", "fn main() {\n    let needle = 1;\n}\n");
        self.write("src/lib.rs", "// NEEDLE in caps\npub fn f() {}\n");
        self.write(".gitignore", "build/\n*.log\n");
        self.write("build/out.rs", "needle in build\n");
        self.write("debug.log", "needle in log\n");
        self.write(".ignore", "vendor/\n");
        self.write("vendor/dep.rs", "needle in vendor\n");
        self.write(".hidden/secret.rs", "needle hidden\n");
        self.write(".env", "needle=1\n");
        self.write("data.bin", b"needle\x00\x01\x02binary".as_slice());
        fs::write(self.base.join("outside/leak.rs"), "needle outside\n").unwrap();
        fs::create_dir_all(self.base.join("outside/dir")).unwrap();
        fs::write(self.base.join("outside/dir/deep.rs"), "needle deep outside\n").unwrap();
        symlink(self.base.join("outside/leak.rs"), self.ws.join("src/link.rs")).unwrap();
        symlink(self.base.join("outside/dir"), self.ws.join("linkdir")).unwrap();
    }
}

#[test]
fn grep_skips_ignored_hidden_binary_and_symlinked_out_files() {
    let f = Fixture::new("search-test");
    f.tree();
    let r = f.search_tools();
    let out = call(&r, "grep", json!({"pattern": "needle"})).unwrap();
    let files: Vec<&str> = out.lines().filter(|l| !l.starts_with('[')).collect();
    assert_eq!(files, vec!["src/main.rs"], "{out}");
    assert!(out.contains("1 binary file skipped"), "{out}");
    for absent in ["build", "debug.log", "vendor", ".hidden", ".env", "link.rs", "linkdir", "outside"] {
        assert!(!out.contains(absent), "{absent} in {out}");
    }
}

#[test]
fn grep_content_mode_numbers_lines_and_ignores_case_on_request() {
    let f = Fixture::new("search-test");
    f.tree();
    let r = f.search_tools();
    let out = call(&r, "grep", json!({"pattern": "needle", "output_mode": "content", "-i": true})).unwrap();
    assert!(out.contains("src/main.rs:2:    let needle = 1;"), "{out}");
    assert!(out.contains("src/lib.rs:1:// NEEDLE in caps"), "{out}");
    assert!(!out.contains("outside"), "{out}");
    let out = call(&r, "grep", json!({"pattern": "needle", "output_mode": "count", "-i": true})).unwrap();
    assert_eq!(out, "src/lib.rs:1\nsrc/main.rs:1\n[1 binary file skipped]");
    let out = call(&r, "grep", json!({"pattern": "needle", "output_mode": "content", "-n": false})).unwrap();
    assert_eq!(out, "src/main.rs:    let needle = 1;\n[1 binary file skipped]");
}

#[test]
fn grep_context_lines_glob_filter_and_path() {
    let f = Fixture::new("search-test");
    f.write("a.py", "one\ntwo\nmatch here\nfour\nfive\n");
    f.write("b.txt", "match here too\n");
    f.write("sub/c.py", "x\nmatch\n");
    let r = f.search_tools();
    let out = call(&r, "grep", json!({"pattern": "match", "output_mode": "content", "-C": 1, "glob": "*.py"})).unwrap();
    assert_eq!(out, "a.py-2-two\na.py:3:match here\na.py-4-four\n--\nsub/c.py-1-x\nsub/c.py:2:match");
    let out = call(&r, "grep", json!({"pattern": "match", "output_mode": "content", "-A": 1, "path": "a.py"})).unwrap();
    assert_eq!(out, "a.py:3:match here\na.py-4-four");
    let out = call(&r, "grep", json!({"pattern": "match", "path": "sub"})).unwrap();
    assert_eq!(out, "sub/c.py");
    let out = call(&r, "grep", json!({"pattern": "match", "output_mode": "count", "type": "py"})).unwrap();
    assert_eq!(out, "a.py:1\nsub/c.py:1");
    let err = call(&r, "grep", json!({"pattern": "match", "type": "nosuchtype"})).unwrap_err();
    assert!(err.contains("unknown file type"), "{err}");
}

#[test]
fn grep_refuses_paths_outside_and_bad_input() {
    let f = Fixture::new("search-test");
    f.tree();
    let r = f.search_tools();
    let err = call(&r, "grep", json!({"pattern": "needle", "path": "../outside"})).unwrap_err();
    assert!(err.contains("outside the workspace"), "{err}");
    let err = call(&r, "grep", json!({"pattern": "needle", "path": "linkdir"})).unwrap_err();
    assert!(err.contains("symlink"), "{err}");
    let err = call(&r, "grep", json!({"pattern": "("})).unwrap_err();
    assert!(err.contains("invalid regular expression"), "{err}");
    let err = call(&r, "grep", json!({"pattern": "x", "output_mode": "lines"})).unwrap_err();
    assert!(err.contains("output_mode"), "{err}");
    assert!(call(&r, "grep", json!({"pattern": "nothing-matches-this"})).unwrap().starts_with("No matches"));
}

#[test]
fn grep_output_is_capped_with_a_note_saying_how_much_was_left_out() {
    let f = Fixture::new("search-test");
    let line = "match ".repeat(20);
    let body: String = (0..5000).map(|i| format!("{i} {line}\n")).collect();
    f.write("big.txt", &body);
    let r = f.search_tools();
    let out = call(&r, "grep", json!({"pattern": "match", "output_mode": "content"})).unwrap();
    assert!(out.chars().count() < builtin::GREP_OUTPUT_CAP_CHARS + 400, "{}", out.len());
    let note = out.lines().last().unwrap();
    assert!(note.contains("more lines left out") && note.contains("5000 matching lines in 1 files"), "{note}");
    let out = call(&r, "grep", json!({"pattern": "match", "output_mode": "content", "head_limit": 3})).unwrap();
    assert_eq!(out.lines().count(), 4, "{out}");
    assert!(out.contains("[4997 more lines left out (head_limit 3)"), "{out}");
}

#[test]
fn grep_is_cancelled_within_200_ms_on_a_big_tree() {
    let f = Fixture::new("search-test");
    let content = "nothing to see here, only filler text\n".repeat(1000);
    for d in 0..20 {
        for i in 0..100 {
            f.write(&format!("d{d}/f{i}.txt"), &content);
        }
    }
    let r = f.search_tools();
    let cancel = CancelToken::new();
    let c2 = cancel.clone();
    let t = std::thread::spawn(move || {
        std::thread::sleep(Duration::from_millis(20));
        c2.cancel();
        Instant::now()
    });
    // 2000 files, 76 MB: far more than 20 ms of searching, so the cancel lands mid-walk.
    let input = json!({"pattern": "fill[e]r text$", "output_mode": "count"});
    let result = call_with(&r, "grep", input, &cancel);
    let cancelled_at = t.join().unwrap();
    let late = cancelled_at.elapsed();
    assert!(result.as_ref().unwrap_err().contains("cancelled"), "{result:?}");
    assert!(late < Duration::from_millis(200), "grep returned {late:?} after cancel");
}

#[test]
fn glob_lists_matches_newest_first_and_respects_gitignore() {
    let f = Fixture::new("search-test");
    f.tree();
    let now = SystemTime::now();
    f.write("pkg/old.py", "x");
    f.write("pkg/new.py", "x");
    f.write("top.py", "x");
    f.write("build/gen.py", "x");
    let set = |rel: &str, secs_ago: u64| {
        let file = fs::File::options().write(true).open(f.ws.join(rel)).unwrap();
        file.set_modified(now - Duration::from_secs(secs_ago)).unwrap();
    };
    set("pkg/old.py", 3000);
    set("top.py", 2000);
    set("pkg/new.py", 1000);
    let r = f.search_tools();
    let out = call(&r, "glob", json!({"pattern": "**/*.py"})).unwrap();
    assert_eq!(out, "pkg/new.py\ntop.py\npkg/old.py");
    let out = call(&r, "glob", json!({"pattern": "*.py"})).unwrap();
    assert_eq!(out, "top.py");
    let out = call(&r, "glob", json!({"pattern": "*.py", "path": "pkg"})).unwrap();
    assert_eq!(out, "pkg/new.py\npkg/old.py");
    let out = call(&r, "glob", json!({"pattern": "**/*.rs"})).unwrap();
    assert!(!out.contains("outside") && !out.contains("deep") && !out.contains(".hidden"), "{out}");
    assert!(out.contains("src/main.rs") && !out.contains("build/"), "{out}");
    assert!(!out.contains("src/link.rs"), "a symlink leading out of the workspace is not listed: {out}");
    // Files only, as `rg --files` lists them: folders are not named, a symlink to a file inside is.
    symlink(f.ws.join("top.py"), f.ws.join("pkg/alias.py")).unwrap();
    let out = call(&r, "glob", json!({"pattern": "**/*"})).unwrap();
    assert!(out.lines().all(|p| !f.ws.join(p).is_dir()), "{out}");
    assert!(out.contains("pkg/alias.py") && !out.contains("linkdir"), "{out}");
    let err = call(&r, "glob", json!({"pattern": "../outside/*.rs"})).unwrap_err();
    assert!(err.contains("without '..'"), "{err}");
}

#[test]
fn glob_output_is_capped() {
    let f = Fixture::new("search-test");
    for i in 0..250 {
        f.write(&format!("many/f{i:03}.txt"), "x");
    }
    let r = f.search_tools();
    let out = call(&r, "glob", json!({"pattern": "many/*.txt"})).unwrap();
    assert_eq!(out.lines().count(), builtin::GLOB_MAX_RESULTS + 1);
    assert!(out.ends_with("[50 more paths match, not shown (at most 200, newest first): narrow the pattern or path]"));
}

#[test]
fn search_tools_are_in_the_default_set_and_read_only() {
    let f = Fixture::new("search-test");
    let registry = ToolRegistry::new();
    let opts = BuiltinOptions { workspace: f.ws.clone(), ..BuiltinOptions::default() };
    builtin::register(&registry, &opts).unwrap();
    for name in ["grep", "glob", "web_fetch", "bash_output", "bash_kill"] {
        assert!(registry.get(name).is_some(), "{name}");
    }
    assert!(registry.get("grep").unwrap().read_only && registry.get("glob").unwrap().parallel_safe);
    assert!(!registry.get("web_fetch").unwrap().read_only);
}
