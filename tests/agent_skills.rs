//! Skills through the agent: discovery from folders, bad skills reported with their path and skipped,
//! names and descriptions in the system prompt, the body loaded only when the model asks.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::{Path, PathBuf};
use std::sync::Arc;

use serde_json::{Map, Value, json};
use tooloop::provider::ScriptedProvider;
use tooloop::provider::host::reply;
use tooloop::types::ToolUseBlock;
use tooloop::{AgentOptions, ContentBlock, StopReason};

fn call(id: &str, name: &str, input: Value) -> ContentBlock {
    ContentBlock::ToolUse(ToolUseBlock { id: id.into(), name: name.into(), input, extra: Map::new() })
}

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

fn skill_tree(tag: &str) -> Dir {
    let root = std::env::temp_dir().join(format!("tooloop-skills-{tag}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&root);
    let a = root.join("a");
    write(
        &a,
        "release-notes/SKILL.md",
        "---\nname: release-notes\ndescription: Write release notes from the git log.\nversion: 2\nallowed-tools: [bash]\n---\n\
         # Release notes\nRun `git log --oneline` and group by kind. See templates/notes.md.\n",
    );
    write(&a, "release-notes/templates/notes.md", "## Added\n## Fixed\n");
    write(&a, "no-front/SKILL.md", "# Just markdown\n");
    write(&a, "no-desc/SKILL.md", "---\nname: no-desc\n---\nbody\n");
    write(&a, "bad-yaml/SKILL.md", "---\nname: [unclosed\n---\nbody\n");
    write(&a, "not-a-skill/README.md", "nothing\n");
    let b = root.join("b");
    write(&b, "dup/SKILL.md", "---\nname: release-notes\ndescription: A second one.\n---\nother\n");
    write(
        &b,
        "pdf/SKILL.md",
        "---\nname: pdf\ndescription: \"Fill PDF forms: use for any .pdf task.\"\n---\nUse pdftk.\n",
    );
    Dir(root)
}

#[test]
fn skills_are_discovered_bad_ones_reported_and_only_names_reach_the_prompt() {
    let tree = skill_tree("discover");
    let steps = vec![reply(vec![ContentBlock::text("hi")], StopReason::EndTurn)];
    let provider = Arc::new(ScriptedProvider::new(steps));
    let options = AgentOptions::from_value(json!({
        "system": "You are terse.",
        "skills": [tree.0.join("a"), tree.0.join("b"), tree.0.join("missing")]
    }))
    .unwrap();
    let agent = options.build_with(provider.clone()).unwrap();
    let set = agent.skills().unwrap();
    let names: Vec<&str> = set.skills.iter().map(|s| s.name.as_str()).collect();
    assert_eq!(names, ["release-notes", "pdf"]);
    assert_eq!(set.skills[0].meta.get("version"), Some(&json!(2)), "unknown keys are kept");
    let mut problems: Vec<(String, String)> = set
        .problems
        .iter()
        .map(|p| (p.path.parent().unwrap().file_name().unwrap().to_string_lossy().into_owned(), p.reason.clone()))
        .collect();
    problems.sort();
    let dirs: Vec<&str> = problems.iter().map(|p| p.0.as_str()).collect();
    assert_eq!(dirs, ["bad-yaml", "dup", "no-desc", "no-front"], "{problems:#?}");
    assert!(problems[1].1.contains("duplicate skill name"));
    assert!(problems[2].1.contains("no `description`"));
    agent.run("hello", &mut |_| {}).unwrap();
    let req = &provider.requests()[0];
    let system = req.system.as_ref().unwrap().as_str().unwrap();
    assert!(system.starts_with("You are terse.\n\n"));
    assert!(system.contains("- release-notes: Write release notes from the git log."));
    assert!(system.contains("- pdf: Fill PDF forms"));
    assert!(!system.contains("git log --oneline"), "the body is not sent up front");
    assert!(req.tools.iter().any(|t| t.name == "skill"));
}

#[test]
fn the_body_is_read_when_the_model_asks_and_files_stay_inside_the_skill() {
    let tree = skill_tree("load");
    let steps = vec![
        reply(vec![call("s1", "skill", json!({"name": "release-notes"}))], StopReason::ToolUse),
        reply(
            vec![call("s2", "skill", json!({"name": "release-notes", "file": "templates/notes.md"}))],
            StopReason::ToolUse,
        ),
        reply(
            vec![call("s3", "skill", json!({"name": "release-notes", "file": "../pdf/SKILL.md"}))],
            StopReason::ToolUse,
        ),
        reply(vec![call("s4", "skill", json!({"name": "nope"}))], StopReason::ToolUse),
        reply(vec![ContentBlock::text("done")], StopReason::EndTurn),
    ];
    let provider = Arc::new(ScriptedProvider::new(steps));
    let agent =
        AgentOptions::from_value(json!({"skills": [tree.0.join("a")]})).unwrap().build_with(provider.clone()).unwrap();
    // Edited after discovery: the body is read at the call, so the model gets the current text.
    write(
        &tree.0.join("a"),
        "release-notes/SKILL.md",
        "---\nname: release-notes\ndescription: Notes.\n---\nNEW BODY\n",
    );
    let result = agent.run("write the notes", &mut |_| {}).unwrap();
    let out: Vec<(String, bool)> =
        result.tool_calls.iter().map(|c| (c.output.as_str().unwrap().to_string(), c.is_error)).collect();
    assert!(out[0].0.starts_with("NEW BODY") && out[0].0.contains("templates/notes.md") && !out[0].1, "{out:?}");
    assert_eq!(out[1], ("## Added\n## Fixed\n".to_string(), false));
    assert!(out[2].1 && out[2].0.contains("a path inside the skill's folder"), "{out:?}");
    assert!(out[3].1 && out[3].0.contains("must be one of \"release-notes\""), "{out:?}");
}

#[test]
fn no_skill_folder_means_no_skill_tool() {
    let empty = std::env::temp_dir().join(format!("tooloop-skills-empty-{}", std::process::id()));
    std::fs::create_dir_all(&empty).unwrap();
    let _cleanup = Dir(empty.clone());
    let agent = AgentOptions::from_value(json!({"skills": [empty]}))
        .unwrap()
        .build_with(Arc::new(ScriptedProvider::new([])))
        .unwrap();
    assert!(agent.tools().get("skill").is_none());
    assert_eq!(agent.skills().unwrap().skills.len(), 0);
}
