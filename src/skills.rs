//! Skills: reusable capability packages the agent loads when a task needs them.
//!
//! A skill is a folder holding `SKILL.md`: YAML front matter (`name`, `description`; other keys are kept)
//! and a Markdown body of instructions, optionally with more files beside it (scripts, references). At
//! start only each skill's name and description reach the model (a few lines in the system prompt); the
//! built-in `skill` tool returns the body when the model asks for it — progressive disclosure — and reads
//! the skill's other files on request.
//!
//! Must never: fail the agent over a bad skill (it is reported with its path and skipped), read the body
//! before the model asks for it, or read a file outside the skill's own folder.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use serde::Serialize;
use serde_json::{Map, Value, json};

use crate::tools::{Tool, ToolContext, ToolError, ToolOutput};
use crate::types::ToolSpec;

/// The tool's name.
pub const TOOL_NAME: &str = "skill";
/// The file that makes a folder a skill.
pub const SKILL_FILE: &str = "SKILL.md";
/// Longest description kept (the API's own skills use the same bound).
pub const MAX_DESCRIPTION: usize = 1024;
/// Largest SKILL.md or skill file read.
pub const MAX_FILE_BYTES: u64 = 256 * 1024;
/// Largest front matter (the YAML between the `---` lines) parsed, in bytes.
pub const MAX_FRONT_MATTER_BYTES: usize = 64 * 1024;
/// Deepest nesting of sequences and mappings accepted in front matter.
pub const MAX_FRONT_MATTER_DEPTH: usize = 32;
/// Most YAML events (scalars, starts and ends of collections) accepted in front matter.
pub const MAX_FRONT_MATTER_EVENTS: usize = 10_000;

/// One discovered skill (its body is not read until the model asks for it).
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Skill {
    /// Its name (lowercase letters, digits and `-`, at most 64).
    pub name: String,
    /// What it is for and when to use it: what the model sees up front.
    pub description: String,
    /// The skill's folder.
    pub dir: PathBuf,
    /// Other front-matter keys, kept as they were (converted to JSON).
    pub meta: Map<String, Value>,
}

/// A skill that was skipped, and why.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct SkillProblem {
    /// The SKILL.md (or folder) concerned.
    pub path: PathBuf,
    /// What is wrong with it.
    pub reason: String,
}

/// What discovery found in the skill folders.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct SkillSet {
    /// The usable skills, by name.
    pub skills: Vec<Skill>,
    /// The skipped ones.
    pub problems: Vec<SkillProblem>,
}

impl SkillSet {
    /// Look in each folder of `roots` for `<name>/SKILL.md`. A folder that does not exist is skipped
    /// quietly (the CLI passes `~/.config/tooloop/skills` whether or not the user made it); a bad skill is
    /// reported and skipped; when two skills share a name the first root wins and the other is reported.
    pub fn discover(roots: &[PathBuf]) -> SkillSet {
        let mut set = SkillSet::default();
        let mut seen: BTreeMap<String, PathBuf> = BTreeMap::new();
        for root in roots {
            let Ok(entries) = std::fs::read_dir(root) else { continue };
            let mut dirs: Vec<PathBuf> = entries.flatten().map(|e| e.path()).filter(|p| p.is_dir()).collect();
            dirs.sort();
            for dir in dirs {
                let file = dir.join(SKILL_FILE);
                if !file.is_file() {
                    continue;
                }
                match read_front_matter(&file) {
                    Err(reason) => set.problems.push(SkillProblem { path: file, reason }),
                    Ok(skill) => {
                        if let Some(first) = seen.get(&skill.name) {
                            set.problems.push(SkillProblem {
                                path: file,
                                reason: format!(
                                    "duplicate skill name {:?} (already in {})",
                                    skill.name,
                                    first.display()
                                ),
                            });
                            continue;
                        }
                        seen.insert(skill.name.clone(), file.clone());
                        set.skills.push(skill);
                    }
                }
            }
        }
        set
    }

    /// The lines for the system prompt: each skill's name and description.
    pub fn prompt(&self) -> Option<String> {
        if self.skills.is_empty() {
            return None;
        }
        let mut s = String::from(
            "Skills: instructions for particular kinds of task. When a task matches one, load it first with the \
             skill tool (skill(name)) and follow it.\n",
        );
        for k in &self.skills {
            s.push_str(&format!("- {}: {}\n", k.name, k.description));
        }
        Some(s.trim_end().to_string())
    }

    /// The `skill` tool over these skills.
    pub fn tool(&self) -> Tool {
        let skills = Arc::new(self.skills.clone());
        let names: Vec<String> = self.skills.iter().map(|s| s.name.clone()).collect();
        let handler = move |input: &Value, _: &ToolContext<'_>| -> Result<ToolOutput, ToolError> {
            load(&skills, input).map(ToolOutput::Text).map_err(ToolError::Respond)
        };
        Tool {
            spec: ToolSpec {
                name: TOOL_NAME.into(),
                description: "Load a skill: its instructions (the body of its SKILL.md), or with `file` one of the \
                              other files in the skill's folder that the instructions mention."
                    .into(),
                input_schema: json!({
                    "type": "object",
                    "properties": {
                        "name": {"type": "string", "enum": names, "description": "The skill's name."},
                        "file": {"type": "string", "description": "A file of the skill, relative to its folder."}
                    },
                    "required": ["name"]
                }),
                extra: Map::new(),
            },
            handler: Arc::new(handler),
            parallel_safe: true,
            read_only: true,
            confinable: false,
            idempotent: true,
            kind: crate::tools::ToolKind::Other,
        }
    }
}

fn valid_name(name: &str) -> bool {
    !name.is_empty()
        && name.len() <= 64
        && name.bytes().all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
}

/// A skill's file as text: only a regular file (a FIFO could hang every start, and /proc files report a
/// size of 0 while `/proc/self/pagemap` holds gigabytes), opened without blocking and read no further
/// than the limit whatever size it claims.
fn read_limited(path: &Path) -> Result<String, String> {
    use std::io::Read;
    use std::os::unix::fs::OpenOptionsExt;
    let nonblocking = i32::try_from(rustix::fs::OFlags::NONBLOCK.bits()).unwrap_or(0);
    let file = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(nonblocking)
        .open(path)
        .map_err(|e| format!("cannot read it: {e}"))?;
    let meta = file.metadata().map_err(|e| format!("cannot read it: {e}"))?;
    if !meta.is_file() {
        return Err("it is not a regular file".to_string());
    }
    if meta.len() > MAX_FILE_BYTES {
        return Err(format!("it is {} bytes; the limit is {MAX_FILE_BYTES}", meta.len()));
    }
    let mut bytes = Vec::new();
    file.take(MAX_FILE_BYTES + 1).read_to_end(&mut bytes).map_err(|e| format!("cannot read it: {e}"))?;
    if bytes.len() as u64 > MAX_FILE_BYTES {
        return Err(format!("it is over {MAX_FILE_BYTES} bytes (the limit)"));
    }
    String::from_utf8(bytes).map_err(|_| "it is not UTF-8 text".to_string())
}

/// The skill's SKILL.md, read only when it lies inside the skill's folder (not a symlink leading out).
fn read_skill_file(dir: &Path) -> Result<String, String> {
    let file = dir.join(SKILL_FILE);
    match (file.canonicalize(), dir.canonicalize()) {
        (Ok(real), Ok(root)) if real.starts_with(&root) => read_limited(&real),
        (Ok(_), Ok(_)) => Err(format!("{SKILL_FILE} leads outside the skill's folder (a symlink); not read")),
        (Err(e), _) | (_, Err(e)) => Err(format!("cannot read it: {e}")),
    }
}

/// Split `text` into (front matter, body) at the `---` lines.
fn split_front_matter(text: &str) -> Result<(&str, &str), String> {
    let text = text.strip_prefix('\u{feff}').unwrap_or(text);
    let rest = text
        .strip_prefix("---\n")
        .or_else(|| text.strip_prefix("---\r\n"))
        .ok_or("no front matter: the file must start with a line `---`, then `name:` and `description:`, then `---`")?;
    let mut offset = 0;
    for line in rest.split_inclusive('\n') {
        if line.trim_end() == "---" {
            return Ok((&rest[..offset], &rest[offset + line.len()..]));
        }
        offset += line.len();
    }
    Err("the front matter has no closing `---` line".into())
}

fn yaml_to_json(y: &yaml_rust2::Yaml) -> Value {
    use yaml_rust2::Yaml;
    match y {
        Yaml::Real(r) => {
            r.parse::<f64>().ok().and_then(serde_json::Number::from_f64).map_or(Value::Null, Value::Number)
        }
        Yaml::Integer(i) => json!(i),
        Yaml::String(s) => json!(s),
        Yaml::Boolean(b) => json!(b),
        Yaml::Array(a) => Value::Array(a.iter().map(yaml_to_json).collect()),
        Yaml::Hash(h) => Value::Object(
            h.iter()
                .map(|(k, v)| {
                    let key = match k {
                        Yaml::String(s) => s.clone(),
                        other => yaml_to_json(other).to_string(),
                    };
                    (key, yaml_to_json(v))
                })
                .collect(),
        ),
        _ => Value::Null,
    }
}

/// Parse front matter, bounded: its size, its nesting depth and its number of events are checked on the
/// parser's event stream (iterative) before the tree is built (the loader recurses, once per nesting level,
/// and copies an anchored node at each alias), and aliases are refused: front matter has no use for them, and
/// a few bytes of nested aliases ("billion laughs") would expand to gigabytes.
pub fn parse_front_matter(front: &str) -> Result<Map<String, Value>, String> {
    use yaml_rust2::parser::{Event, Parser};
    if front.len() > MAX_FRONT_MATTER_BYTES {
        return Err(format!("the front matter is {} bytes; the limit is {MAX_FRONT_MATTER_BYTES}", front.len()));
    }
    let mut parser = Parser::new_from_str(front);
    let mut events = 0usize;
    // One entry per open collection: (is a mapping, its next node is a key).
    let mut open: Vec<(bool, bool)> = Vec::new();
    loop {
        let (event, mark) = parser.next_token().map_err(|e| format!("the front matter is not YAML: {e}"))?;
        events += 1;
        if events > MAX_FRONT_MATTER_EVENTS {
            return Err(format!("the front matter has more than {MAX_FRONT_MATTER_EVENTS} YAML elements"));
        }
        match event {
            Event::StreamEnd => break,
            Event::Alias(_) => {
                return Err(format!(
                    "the front matter uses a YAML alias (`*name`, line {}); aliases are not accepted in skills",
                    mark.line()
                ));
            }
            Event::Scalar(..) | Event::SequenceStart(..) | Event::MappingStart(..) => {
                let collection = !matches!(event, Event::Scalar(..));
                if let Some((true, next_is_key)) = open.last_mut() {
                    // A collection as a mapping key (`? [a]`, `? ? ? …`) has no JSON form but its text, which
                    // doubles with every level of nesting: refused.
                    if *next_is_key && collection {
                        return Err(format!(
                            "the front matter uses a sequence or mapping as a key (line {}); keys must be plain",
                            mark.line()
                        ));
                    }
                    *next_is_key = !*next_is_key;
                }
                match event {
                    Event::SequenceStart(..) => open.push((false, false)),
                    Event::MappingStart(..) => open.push((true, true)),
                    _ => {}
                }
                if open.len() > MAX_FRONT_MATTER_DEPTH {
                    return Err(format!(
                        "the front matter nests deeper than {MAX_FRONT_MATTER_DEPTH} levels (line {})",
                        mark.line()
                    ));
                }
            }
            Event::SequenceEnd | Event::MappingEnd => {
                open.pop();
            }
            _ => {}
        }
    }
    let docs =
        yaml_rust2::YamlLoader::load_from_str(front).map_err(|e| format!("the front matter is not YAML: {e}"))?;
    match docs.first().map(yaml_to_json) {
        Some(Value::Object(meta)) => Ok(meta),
        _ => Err("the front matter must be a YAML mapping with `name` and `description`".into()),
    }
}

fn read_front_matter(file: &Path) -> Result<Skill, String> {
    let text = read_skill_file(file.parent().unwrap_or(Path::new(".")))?;
    let (front, _) = split_front_matter(&text)?;
    let mut meta = parse_front_matter(front)?;
    let name = match meta.remove("name") {
        Some(Value::String(s)) => s.trim().to_string(),
        Some(_) => return Err("`name` must be a string".into()),
        None => return Err("the front matter has no `name`".into()),
    };
    if !valid_name(&name) {
        return Err(format!("`name` {name:?} must be lowercase letters, digits and `-`, at most 64 characters"));
    }
    let description = match meta.remove("description") {
        Some(Value::String(s)) if !s.trim().is_empty() => s.trim().to_string(),
        Some(Value::String(_)) | None => return Err("the front matter has no `description`".into()),
        Some(_) => return Err("`description` must be a string".into()),
    };
    if description.chars().count() > MAX_DESCRIPTION {
        return Err(format!("`description` is longer than {MAX_DESCRIPTION} characters"));
    }
    let dir = file.parent().map(Path::to_path_buf).unwrap_or_default();
    Ok(Skill { name, description, dir, meta })
}

/// List the files of a skill folder (relative paths), for the model to know what it may open.
fn list_files(dir: &Path) -> Vec<String> {
    let mut out = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        let Ok(entries) = std::fs::read_dir(&d) else { continue };
        for e in entries.flatten() {
            let p = e.path();
            // Symlinks are not followed: a skill folder's files are its own.
            let Ok(ft) = e.file_type() else { continue };
            if ft.is_dir() {
                stack.push(p);
            } else if ft.is_file() {
                if let Ok(rel) = p.strip_prefix(dir) {
                    out.push(rel.to_string_lossy().into_owned());
                }
            }
            if out.len() >= 200 {
                return out;
            }
        }
    }
    out.sort();
    out
}

fn load(skills: &[Skill], input: &Value) -> Result<String, String> {
    let name = input.get("name").and_then(Value::as_str).unwrap_or("");
    let Some(skill) = skills.iter().find(|s| s.name == name) else {
        let known: Vec<&str> = skills.iter().map(|s| s.name.as_str()).collect();
        return Err(format!("no skill named {name:?}; the skills are: {}", known.join(", ")));
    };
    match input.get("file").and_then(Value::as_str) {
        None => {
            // Read now, not at discovery: the body reaches the model only when it asks.
            let text = read_skill_file(&skill.dir).map_err(|e| format!("skill {name}: {e}"))?;
            let (_, body) = split_front_matter(&text).map_err(|e| format!("skill {name}: {e}"))?;
            let files: Vec<String> = list_files(&skill.dir).into_iter().filter(|f| f != SKILL_FILE).collect();
            let mut out = body.trim().to_string();
            if !files.is_empty() {
                out.push_str(&format!(
                    "\n\n(Files of this skill, readable with skill(name=\"{name}\", file=...): {})",
                    files.join(", ")
                ));
            }
            Ok(out)
        }
        Some(rel) => {
            let wanted = Path::new(rel);
            if wanted.is_absolute() || wanted.components().any(|c| !matches!(c, std::path::Component::Normal(_))) {
                return Err(format!(
                    "`file` must be a path inside the skill's folder, such as \"scripts/run.sh\", got {rel:?}"
                ));
            }
            let root = skill.dir.canonicalize().map_err(|e| format!("skill {name}: {e}"))?;
            let path = root.join(wanted).canonicalize().map_err(|_| format!("skill {name} has no file {rel:?}"))?;
            if !path.starts_with(&root) || !path.is_file() {
                return Err(format!("skill {name} has no file {rel:?} inside its folder"));
            }
            read_limited(&path).map_err(|e| format!("{rel}: {e}"))
        }
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn front_matter_is_split_at_the_dashes() {
        let (front, body) = split_front_matter("---\nname: a\n---\nBody\n").unwrap();
        assert_eq!((front, body), ("name: a\n", "Body\n"));
        assert!(split_front_matter("name: a\n").is_err());
        assert!(split_front_matter("---\nname: a\n").is_err());
    }

    #[test]
    fn names_follow_the_rule() {
        assert!(valid_name("pdf-forms2"));
        assert!(!valid_name("PDF"));
        assert!(!valid_name("a b"));
        assert!(!valid_name(&"a".repeat(65)));
    }
}
