//! Instruction files are read only from where they are named, through the real wire (the mock server speaks
//! the Messages API; what it received is what a provider would have seen): a workspace `AGENTS.md` that
//! links out of the project (to a private key) or to a pseudo-file (`/proc/self/environ`) is skipped with a
//! note, the user's own file may link only within their config folder, a binary file is skipped, and a
//! secret inside a file that is read is redacted like a tool result.
#![allow(clippy::unwrap_used, clippy::expect_used)]

#[path = "common/mock.rs"]
mod mock;
#[path = "common/tempdir.rs"]
mod tempdir;

use std::os::unix::fs::symlink;
use std::path::Path;

use mock::{MockServer, scripted};
use serde_json::{Value, json};
use tempdir::TempDir;
use tooloop::AgentOptions;

const KEY_MATERIAL: &str = "-----BEGIN OPENSSH PRIVATE KEY----- b3BlbnNzaC1rZXktdjEAAAAA";

/// Build an agent over `ws` with `instruction_files`, run it once against the mock server, and return the
/// system prompt the server received and the agent's report of the files (`instructions()`).
fn system_sent(ws: &Path, instruction_files: Value, api_key: &str) -> (String, tooloop::instructions::Instructions) {
    let mock = MockServer::start(&scripted("instructions", &[json!("ok")]));
    let options = json!({"model": "claude-sonnet-4-6", "api_key": api_key, "base_url": mock.base_url(),
        "workspace": ws, "system": "BASE", "instruction_files": instruction_files, "stream": false});
    let agent = AgentOptions::from_value(options).unwrap().build().unwrap();
    agent.run("hi", &mut |_| {}).unwrap();
    let body = mock.requests()[0]["body"].clone();
    let system = match &body["system"] {
        Value::String(s) => s.clone(),
        Value::Array(blocks) => blocks.iter().filter_map(|b| b["text"].as_str()).collect::<Vec<_>>().join("\n"),
        other => panic!("no system prompt: {other}"),
    };
    (system, agent.instructions().unwrap())
}

fn skipped_why(found: &tooloop::instructions::Instructions, name: &Path) -> String {
    found
        .skipped
        .iter()
        .find(|(p, _)| p == name)
        .map(|(_, why)| why.clone())
        .unwrap_or_else(|| panic!("{} not among the skipped: {:?}", name.display(), found.skipped))
}

/// The only test here that reads the environment's config folder: it sets `XDG_CONFIG_HOME` first.
#[test]
fn discovered_files_never_follow_a_symlink_out_of_their_folder_nor_read_a_pseudo_file() {
    let root = TempDir::new("instructions-links");
    let home = root.0.join("home");
    std::fs::create_dir_all(home.join(".ssh")).unwrap();
    std::fs::write(home.join(".ssh/id_ed25519"), KEY_MATERIAL).unwrap();
    let config = home.join(".config");
    std::fs::create_dir_all(config.join("tooloop")).unwrap();
    std::fs::create_dir_all(config.join("shared")).unwrap();
    std::fs::write(config.join("shared/rules.md"), "USER RULES FROM A LINK IN THE CONFIG").unwrap();
    symlink(config.join("shared/rules.md"), config.join("tooloop/AGENTS.md")).unwrap();
    // SAFETY of the test: set before anything in this binary reads the environment from another thread.
    unsafe { std::env::set_var("XDG_CONFIG_HOME", &config) };

    // A repository whose AGENTS.md is the user's private key; a folder below whose AGENTS.md is the process's
    // environment (with the API key in it); a link that stays in the project is followed.
    let repo = root.0.join("repo");
    let sub = repo.join("sub");
    std::fs::create_dir_all(repo.join(".git")).unwrap();
    std::fs::create_dir_all(repo.join("docs")).unwrap();
    std::fs::create_dir_all(&sub).unwrap();
    std::fs::write(repo.join("docs/agents.md"), "PROJECT RULES FROM docs/").unwrap();
    symlink(home.join(".ssh/id_ed25519"), repo.join("AGENTS.md")).unwrap();
    symlink("/proc/self/environ", sub.join("AGENTS.md")).unwrap();
    symlink("../docs/agents.md", sub.join("CLAUDE.md")).unwrap();
    let (system, found) = system_sent(&sub, json!(true), "sk-ant-mock-not-a-real-key");
    assert!(system.contains("USER RULES FROM A LINK IN THE CONFIG"), "{system}");
    assert!(!system.contains("OPENSSH") && !system.contains("b3BlbnNzaC1r"), "the private key was sent: {system}");
    assert!(!system.contains("PATH=") && !system.contains("XDG_CONFIG_HOME="), "the environment was sent: {system}");
    let repo = repo.canonicalize().unwrap();
    assert!(skipped_why(&found, &repo.join("AGENTS.md")).contains("leads outside"), "{:?}", found.skipped);
    assert!(skipped_why(&found, &repo.join("sub/AGENTS.md")).contains("leads outside"), "{:?}", found.skipped);

    // The same file named directly is a pseudo-file, never read.
    let (system, found) = system_sent(&sub, json!(["/proc/self/environ"]), "sk-ant-mock-not-a-real-key");
    assert!(!system.contains("PATH="), "{system}");
    assert!(skipped_why(&found, Path::new("/proc/self/environ")).contains("pseudo-file"), "{:?}", found.skipped);

    // The user's file linking out of their config folder (to their key) is skipped too.
    std::fs::remove_file(config.join("tooloop/AGENTS.md")).unwrap();
    symlink(home.join(".ssh/id_ed25519"), config.join("tooloop/AGENTS.md")).unwrap();
    let (system, found) = system_sent(&sub, json!(true), "sk-ant-mock-not-a-real-key");
    assert!(!system.contains("OPENSSH"), "{system}");
    assert!(skipped_why(&found, &config.join("tooloop/AGENTS.md")).contains("leads outside"), "{:?}", found.skipped);
}

#[test]
fn a_binary_instruction_file_is_skipped_with_a_reason() {
    let ws = TempDir::new("instructions-binary");
    std::fs::write(ws.0.join("AGENTS.md"), b"BINARY RULES\0\x01\x02").unwrap();
    std::fs::write(ws.0.join("NOTES.md"), "TEXT RULES").unwrap();
    let (system, found) = system_sent(&ws.0, json!(["AGENTS.md", "NOTES.md"]), "sk-ant-mock-not-a-real-key");
    assert!(system.contains("TEXT RULES"), "{system}");
    assert!(!system.contains("BINARY RULES"), "{system}");
    assert!(skipped_why(&found, &ws.0.join("AGENTS.md")).contains("binary"), "{:?}", found.skipped);
}

#[test]
fn a_secret_inside_an_instruction_file_is_redacted_like_tool_output() {
    let ws = TempDir::new("instructions-secret");
    let key = "sk-ant-mock-0123456789abcdef";
    std::fs::write(ws.0.join("AGENTS.md"), format!("Use the key {key} for the API.")).unwrap();
    let (system, found) = system_sent(&ws.0, json!(["AGENTS.md"]), key);
    assert!(!system.contains(key), "{system}");
    assert!(system.contains("Use the key [redacted] for the API."), "{system}");
    assert!(found.files.iter().all(|f| !f.text.contains(key)));
}
