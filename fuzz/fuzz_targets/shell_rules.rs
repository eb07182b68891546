//! Bash commands through the permission rules (src/rules, issue 38): any text must be decided without a
//! panic, and the two readings of one parse must agree: when the script is plain (what an allow rule and
//! the read-only guess trust), the commands the deny walker finds are the same commands, each the inner
//! end of a plain one (wrappers stripped), in the same order. An allow decision needs a plain script whose
//! every command an allow rule covers; a script holding `rm` anywhere the walker sees is denied.
#![no_main]

use libfuzzer_sys::fuzz_target;
use serde_json::json;
use std::path::Path;
use tooloop::rules::{PermissionRules, RuleDecision, read_only_command, shell, split_command};

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else { return };
    let rules = PermissionRules::from_value(&json!({
        "allow": ["Bash(echo:*)", "Bash(ls)", "Bash(git status:*)", "Bash(npm test:*)", "Bash(cat:*)"],
        "deny": ["Bash(rm:*)"],
    }))
    .unwrap()
    .unwrap();
    let decision = rules.decide("bash", &json!({"command": text}), Path::new("/nonexistent-ws"));
    let _ = read_only_command(text);
    let _ = split_command(text);
    let script = shell::parse(text);
    if let Some(plain) = &script.plain {
        assert!(!script.runs_code && script.opaque.is_none(), "plain yet opaque: {script:?}");
        assert_eq!(plain.len(), script.innermost.len(), "{text:?}: {script:?}");
        for (p, inner) in plain.iter().zip(&script.innermost) {
            assert!(p.ends_with(inner), "{text:?}: plain {p:?} vs walked {inner:?}");
        }
    }
    let has_rm = script.everywhere.iter().any(|f| f.words.first().is_some_and(|n| n.rsplit('/').next() == Some("rm")));
    match &decision {
        RuleDecision::Allow(_) => {
            let plain = script.plain.as_ref().expect("allowed yet not plain");
            for words in plain {
                assert!(
                    words.iter().any(|w| matches!(w.as_str(), "echo" | "ls" | "git" | "npm" | "cat")),
                    "{text:?}: allowed {words:?}"
                );
            }
            assert!(!has_rm, "{text:?} allowed with rm in it");
        }
        RuleDecision::Deny(_) => {}
        _ => assert!(!has_rm && script.opaque.is_none(), "{text:?}: rm or opaque not denied: {decision:?}"),
    }
});
