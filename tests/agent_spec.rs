//! An agent is built in one pass from its options into an immutable spec: the system prompt comes out of
//! named sections in one documented order, the same options give the same spec, and nothing changes the
//! spec of a built agent (a run neither).
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::{Path, PathBuf};
use std::sync::Arc;

use serde_json::json;
use tooloop::agent::{AgentSpec, PROMPT_SECTIONS};
use tooloop::provider::ScriptedProvider;
use tooloop::provider::host::reply;
use tooloop::{Agent, AgentOptions, ContentBlock, StopReason};

struct Dir(PathBuf);
impl Drop for Dir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

fn write(root: &Path, rel: &str, text: &str) {
    let p = root.join(rel);
    std::fs::create_dir_all(p.parent().unwrap()).unwrap();
    std::fs::write(p, text).unwrap();
}

/// A workspace with a skill folder and an instruction file, and options that use both beside the built-in
/// bash: every section but the MCP servers' (which needs a server) is present.
fn options(tag: &str) -> (Dir, AgentOptions) {
    let root = std::env::temp_dir().join(format!("tooloop-spec-{tag}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&root);
    write(&root, "skills/notes/SKILL.md", "---\nname: notes\ndescription: Write release notes.\n---\nbody\n");
    write(&root, "AGENTS.md", "Run the tests with make test.\n");
    let options = AgentOptions::from_value(json!({
        "system": "You are terse.",
        "builtin_tools": ["bash", "read_file"],
        "workspace": root,
        "skills": [root.join("skills")],
        "instruction_files": [root.join("AGENTS.md")],
        "planning": true,
    }))
    .unwrap();
    (Dir(root), options)
}

fn build(options: &AgentOptions) -> Agent {
    let steps = vec![reply(vec![ContentBlock::text("done")], StopReason::EndTurn)];
    options.build_with(Arc::new(ScriptedProvider::new(steps))).unwrap()
}

fn names(spec: &AgentSpec) -> Vec<&'static str> {
    spec.sections().iter().map(|s| s.name).collect()
}

#[test]
fn system_prompt_is_the_host_prompt_then_the_sections_in_their_documented_order() {
    let (_dir, options) = options("order");
    let agent = build(&options);
    let spec = agent.spec();
    assert_eq!(PROMPT_SECTIONS, ["sandbox", "skills", "mcp", "instructions"]);
    assert_eq!(names(&spec), ["sandbox", "skills", "instructions"]);
    assert_eq!(spec.host_system(), Some(&json!("You are terse.")));
    // The prompt the agent sends is the one assembled: the host's, then each section, in order.
    let mut expected = "You are terse.".to_string();
    for s in spec.sections() {
        expected = format!("{expected}\n\n{}", s.text);
    }
    assert_eq!(spec.system(), Some(&json!(expected)));
    assert_eq!(agent.config().system, Some(json!(expected)));
    assert!(spec.sections()[1].text.contains("notes"), "{:?}", spec.sections());
    assert!(spec.sections()[2].text.contains("make test"), "{:?}", spec.sections());
}

#[test]
fn the_same_options_build_the_same_spec() {
    let (_dir, options) = options("twice");
    let (a, b) = (build(&options), build(&options));
    let (a, b) = (a.spec(), b.spec());
    assert_eq!(a.sections(), b.sections());
    assert_eq!(a.system(), b.system());
    assert_eq!(a.tool_names(), b.tool_names());
    assert_eq!(a.tool_names(), ["bash", "read_file", "todo_write", "skill"]);
    assert_eq!(a.workspace(), b.workspace());
}

#[test]
fn a_built_agent_keeps_its_spec_through_a_run() {
    let (_dir, options) = options("run");
    let agent = build(&options);
    let before = agent.spec();
    agent.run("hi", &mut |_| {}).unwrap();
    assert!(Arc::ptr_eq(&before, &agent.spec()), "the spec of a built agent was replaced");
    assert_eq!(agent.config().system.as_ref(), before.system());
}
