//! A repository's skills cannot crash the agent: YAML front matter is bounded in size,
//! alias expansion and nesting depth; a bad SKILL.md is reported with its path and skipped, the good ones
//! beside it still load.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::{Path, PathBuf};

use tooloop::skills::SkillSet;

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

/// The 411-byte shape of the report: nine levels of nine aliases each (9^9 strings once expanded).
fn billion_laughs() -> String {
    let mut s = String::from(
        "---\nname: lol\ndescription: laughs\na: &a [\"lol\",\"lol\",\"lol\",\"lol\",\"lol\",\"lol\",\"lol\",\"lol\",\"lol\"]\n",
    );
    let names = ["a", "b", "c", "d", "e", "f", "g", "h", "i"];
    for w in names.windows(2) {
        let refs = vec![format!("*{}", w[0]); 9].join(",");
        s.push_str(&format!("{}: &{} [{refs}]\n", w[1], w[1]));
    }
    s.push_str("---\nbody\n");
    s
}

fn deep(levels: usize) -> String {
    format!("---\nname: deep\ndescription: deep\nx: {}{}\n---\nbody\n", "[".repeat(levels), "]".repeat(levels))
}

#[test]
fn billion_laughs_and_deep_nesting_skills_are_reported_and_skipped_and_the_good_one_loads() {
    let root = std::env::temp_dir().join(format!("tooloop-skill-bounds-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&root);
    let _guard = Dir(root.clone());
    write(&root, "lol/SKILL.md", &billion_laughs());
    write(&root, "deep/SKILL.md", &deep(20_000));
    write(
        &root,
        "deepmap/SKILL.md",
        &format!("---\nname: deepmap\ndescription: d\n{}\n---\n", {
            let mut s = String::new();
            for i in 0..300 {
                s.push_str(&format!("{}k{i}:\n", " ".repeat(i)));
            }
            s
        }),
    );
    write(&root, "big/SKILL.md", &format!("---\nname: big\ndescription: d\npad: {}\n---\n", "x".repeat(70_000)));
    write(&root, "good/SKILL.md", "---\nname: good\ndescription: A fine skill.\nlist: [1, [2, [3]]]\n---\nbody\n");
    let set = SkillSet::discover(std::slice::from_ref(&root));
    let names: Vec<&str> = set.skills.iter().map(|s| s.name.as_str()).collect();
    assert_eq!(names, ["good"]);
    let why = |dir: &str| problem_of(&set, dir);
    assert!(why("lol").contains("alias"), "{}", why("lol"));
    let too_deep = |r: String| r.contains("deeper than") || r.contains("recursion limit");
    assert!(too_deep(why("deep")), "{}", why("deep"));
    assert!(too_deep(why("deepmap")), "{}", why("deepmap"));
    assert!(why("big").contains("limit"), "{}", why("big"));
}

#[test]
fn front_matter_limits_hold_on_the_parser_alone() {
    use tooloop::skills::parse_front_matter;
    assert!(parse_front_matter("a: &x 1\nb: *x\n").unwrap_err().contains("alias"));
    assert!(parse_front_matter(&format!("x: {}", "{a: ".repeat(40) + &"}".repeat(40))).unwrap_err().contains("deeper"));
    let many = (0..20_000).map(|i| format!("k{i}: v\n")).collect::<String>();
    assert!(parse_front_matter(&many).is_err());
    assert_eq!(parse_front_matter("name: a\nn: [1, {b: 2}]\n").unwrap()["n"][1]["b"], 2);
    assert!(parse_front_matter("name: [unclosed\n").unwrap_err().contains("not YAML"));
}

#[test]
fn a_skill_file_that_is_a_proc_file_a_fifo_or_a_symlink_out_neither_hangs_nor_fills_memory() {
    // /proc files claim a size of 0: /proc/self/pagemap then read gigabytes at every start; a SKILL.md
    // swapped for a FIFO after discovery looked at it would hang the read; a symlink leading out of the
    // skill's folder reads a file that is not the skill's.
    let root = std::env::temp_dir().join(format!("tooloop-skill-special-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&root);
    let _guard = Dir(root.clone());
    write(&root, "good/SKILL.md", "---\nname: good\ndescription: A fine skill.\n---\nbody\n");
    std::fs::create_dir_all(root.join("pagemap")).unwrap();
    std::os::unix::fs::symlink("/proc/self/pagemap", root.join("pagemap/SKILL.md")).unwrap();
    write(&root, "../outside-skill.md", "---\nname: outside\ndescription: Not in its folder.\n---\nsecret\n");
    std::fs::create_dir_all(root.join("out")).unwrap();
    std::os::unix::fs::symlink(root.join("../outside-skill.md"), root.join("out/SKILL.md")).unwrap();
    let started = std::time::Instant::now();
    let set = SkillSet::discover(std::slice::from_ref(&root));
    assert!(started.elapsed() < std::time::Duration::from_secs(2), "{:?}", started.elapsed());
    let names: Vec<&str> = set.skills.iter().map(|s| s.name.as_str()).collect();
    assert_eq!(names, ["good"], "{:?}", set.problems);
    let why = |dir: &str| problem_of(&set, dir);
    assert!(why("pagemap").contains("outside the skill's folder"), "{}", why("pagemap"));
    assert!(why("out").contains("outside the skill's folder"), "{}", why("out"));
    // The skill's SKILL.md swapped for a FIFO after discovery: using the skill fails at once.
    let good = root.join("good/SKILL.md");
    std::fs::remove_file(&good).unwrap();
    nix::unistd::mkfifo(&good, nix::sys::stat::Mode::from_bits_truncate(0o600)).unwrap();
    use tooloop::tools::{ToolContext, ToolError};
    let tool = set.tool();
    let cancel = tooloop::cancel::CancelToken::new();
    let ctx = ToolContext { tool_use_id: "t1", tool_name: "skill", cancel: &cancel, read_only: false };
    let started = std::time::Instant::now();
    let out = tool.handler.call(&serde_json::json!({"name": "good"}), &ctx);
    assert!(started.elapsed() < std::time::Duration::from_secs(2));
    match out {
        Err(ToolError::Respond(text)) => assert!(text.contains("not a regular file"), "{text}"),
        Err(ToolError::Fatal(text)) => panic!("fatal: {text}"),
        Ok(other) => panic!("read a FIFO: {other:?}"),
    }
    let _ = std::fs::remove_file(root.join("../outside-skill.md"));
}

/// Why the skill in folder `dir` was skipped (the test fails when it was not reported).
fn problem_of(set: &SkillSet, dir: &str) -> String {
    set.problems
        .iter()
        .find(|p| p.path.ends_with(format!("{dir}/SKILL.md")))
        .map(|p| p.reason.clone())
        .unwrap_or_else(|| panic!("{dir} not reported: {:?}", set.problems))
}
