//! Whether a bash script is plain — literal words joined by `&&`, `||`, `;`, `|` and newlines, inside
//! `if`/`while`/`until`, `( )`, `{ }` and `!`, with no redirection but to `/dev/null` or between descriptors —
//! and its commands word by word when it is: what an allow rule and the read-only guess may trust.
//!
//! Must never: call a script plain when bash would run or write anything but the commands returned.

use tree_sitter::Node;

use super::shell::{MAX_DEPTH, MAX_SCRIPT_BYTES, fields, literal, odd_blank, parse_tree};

// ---------------------------------------------------------------------------------------------------------

/// The commands of `script` when it is nothing but plain commands, else `None`.
pub(super) fn plain(script: &str) -> Option<Vec<Vec<String>>> {
    if script.len() > MAX_SCRIPT_BYTES || odd_blank(script) {
        return None;
    }
    let tree = parse_tree(script)?;
    let root = tree.root_node();
    if root.has_error() {
        return None;
    }
    let mut out = Vec::new();
    plain_node(root, script.as_bytes(), &mut out, 0).then_some(out)
}

/// Tokens a plain script may hold between its commands.
const PLAIN_TOKENS: &[&str] = &[
    ";", "&&", "||", "|", "|&", "if", "then", "elif", "else", "fi", "while", "until", "do", "done", "{", "}", "(", ")",
    "!",
];

fn plain_node(node: Node<'_>, src: &[u8], out: &mut Vec<Vec<String>>, depth: usize) -> bool {
    if depth > MAX_DEPTH {
        return false;
    }
    match node.kind() {
        "program" | "list" | "pipeline" | "if_statement" | "elif_clause" | "else_clause" | "while_statement"
        | "do_group" | "compound_statement" | "subshell" | "negated_command" => {
            let mut c = node.walk();
            let kids: Vec<Node<'_>> = node.children(&mut c).collect();
            kids.into_iter().all(|k| {
                if k.is_named() { plain_node(k, src, out, depth + 1) } else { PLAIN_TOKENS.contains(&k.kind()) }
            })
        }
        "redirected_statement" => {
            let mut c = node.walk();
            let kids: Vec<Node<'_>> = node.children(&mut c).collect();
            kids.into_iter().all(|k| match k.kind() {
                "file_redirect" => harmless_redirect(k, src),
                _ if !k.is_named() => false,
                _ => {
                    let is_body = node.child_by_field_name("body").is_some_and(|b| b == k);
                    is_body && plain_node(k, src, out, depth + 1)
                }
            })
        }
        "command" => {
            let mut words = Vec::new();
            for (field, k) in fields(node) {
                match field {
                    Some("name") | Some("argument") => match literal(k, src, 0) {
                        Some(w) => words.push(w),
                        None => return false,
                    },
                    Some("redirect") if k.kind() == "file_redirect" => {
                        if !harmless_redirect(k, src) {
                            return false;
                        }
                    }
                    _ => return false,
                }
            }
            if words.is_empty() {
                return false;
            }
            // A name the shell would expand (a pattern, a brace list, `~`) is not the name written.
            if words[0].contains(['*', '?', '[', '{', '~']) || words[0].is_empty() {
                return false;
            }
            // An unquoted pattern in an argument stays allowed: it names files, never a command.
            out.push(words);
            true
        }
        _ => false,
    }
}

/// `>/dev/null`, `2>/dev/null`, `&>/dev/null`, `</dev/null`, `2>&1`, `>&2`, `<&-`. The grammar hangs the words
/// after a redirection on it as further destinations (`echo >&2 <(touch w)`): exactly one is harmless.
fn harmless_redirect(node: Node<'_>, src: &[u8]) -> bool {
    let (mut op, mut dest) = (None, None);
    for (field, k) in fields(node) {
        match field {
            Some("descriptor") if k.kind() == "file_descriptor" => {}
            Some("destination") if dest.is_none() => dest = Some(k),
            None if !k.is_named() && op.is_none() => op = Some(k.kind()),
            _ => return false,
        }
    }
    let (Some(op), Some(dest)) = (op, dest) else { return false };
    let Some(target) = literal(dest, src, 0) else { return false };
    match op {
        ">&" | "<&" | ">&-" | "<&-" => {
            target == "/dev/null" || target == "-" || (!target.is_empty() && target.bytes().all(|b| b.is_ascii_digit()))
        }
        ">" | ">>" | "&>" | "&>>" | ">|" | "<" => target == "/dev/null",
        _ => false,
    }
}
