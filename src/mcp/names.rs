//! Tool names for MCP tools: `mcp__<server>__<tool>`, sanitised to `^[a-zA-Z0-9_-]{1,64}$` and shortened
//! deterministically (a prefix plus a short hash of the full name), so the same server and tool always get
//! the same name and two different tools never share one.

/// FNV-1a, 64 bits: stable across runs and platforms (std's hasher is randomly seeded).
fn fnv1a(s: &str) -> u64 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for b in s.bytes() {
        h ^= u64::from(b);
        h = h.wrapping_mul(0x0000_0100_0000_01b3);
    }
    h
}

fn sanitize(s: &str) -> String {
    s.chars().map(|c| if c.is_ascii_alphanumeric() || c == '_' || c == '-' { c } else { '_' }).collect()
}

/// `prefix` cut so that `prefix_<8 hex>` fits in 64 bytes, the hash taken over `seed` (and `salt`).
fn hashed(sanitized: &str, seed: &str, salt: u32) -> String {
    let key = if salt == 0 { seed.to_string() } else { format!("{seed}#{salt}") };
    let hash = format!("{:08x}", fnv1a(&key) & 0xffff_ffff);
    let keep = 64 - 1 - hash.len();
    let head: String = sanitized.chars().take(keep).collect();
    format!("{head}_{hash}")
}

/// The public name of `tool` of `server`, different from every name in `taken`.
///
/// A name that is already valid and free is used as is; one that had to be changed (invalid characters,
/// too long) or collides gets a hash of the original `server`/`tool` pair.
pub fn tool_name(server: &str, tool: &str, taken: &dyn Fn(&str) -> bool) -> String {
    let raw = format!("mcp__{server}__{tool}");
    let clean = sanitize(&raw);
    if clean == raw && clean.len() <= 64 && !taken(&clean) {
        return clean;
    }
    let seed = format!("{server}\u{0}{tool}");
    let mut salt = 0;
    loop {
        let name = hashed(&clean, &seed, salt);
        if !taken(&name) {
            return name;
        }
        salt += 1;
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod tests {
    use super::*;
    use crate::tools::check_name;

    #[test]
    fn valid_short_names_are_kept() {
        assert_eq!(tool_name("fs", "read", &|_| false), "mcp__fs__read");
    }

    #[test]
    fn invalid_and_long_names_become_valid_deterministic_and_distinct() {
        let long = "x".repeat(100);
        let a = tool_name("my server", &long, &|_| false);
        let b = tool_name("my server", &format!("{long}y"), &|_| false);
        assert!(check_name(&a).is_ok() && check_name(&b).is_ok(), "{a} {b}");
        assert_ne!(a, b);
        assert_eq!(a, tool_name("my server", &long, &|_| false));
        let dotted = tool_name("s", "a.b", &|_| false);
        assert!(dotted.starts_with("mcp__s__a_b_") && check_name(&dotted).is_ok());
        // "a_b" is valid as is; "a.b" sanitises to the same text but gets its own hashed name.
        let plain = tool_name("s", "a_b", &|n| n == dotted);
        assert_eq!(plain, "mcp__s__a_b");
        let again = tool_name("s", "a.b", &|n| n == plain);
        assert_ne!(again, plain);
        let forced = tool_name("s", "a.b", &|n| n == dotted);
        assert_ne!(forced, dotted);
        assert!(check_name(&forced).is_ok());
    }
}
