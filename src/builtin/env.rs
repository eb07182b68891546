//! Which environment variables `bash` inherits: everything except the host's secrets.
//!
//! A variable whose name holds KEY, SECRET, TOKEN, PASSWORD or CREDENTIAL (any case), or is one of the AWS
//! credential variables, is removed from the command's environment unless the user listed its name in
//! `env_passthrough`. The values removed are available to the host (in memory only) so it can redact them
//! from tool results. This module must never log, print or write those values anywhere.

use std::ffi::OsString;

/// Parts of a variable name (compared without case) that mark it as a secret.
const SECRET_PARTS: [&str; 5] = ["KEY", "SECRET", "TOKEN", "PASSWORD", "CREDENTIAL"];

/// AWS variables that select or hold credentials even though their names hold none of [`SECRET_PARTS`].
const AWS_CREDENTIAL_NAMES: [&str; 9] = [
    "AWS_ACCESS_KEY_ID",
    "AWS_SECRET_ACCESS_KEY",
    "AWS_SESSION_TOKEN",
    "AWS_SECURITY_TOKEN",
    "AWS_PROFILE",
    "AWS_DEFAULT_PROFILE",
    "AWS_ROLE_ARN",
    "AWS_CONTAINER_CREDENTIALS_FULL_URI",
    "AWS_CONTAINER_CREDENTIALS_RELATIVE_URI",
];

/// Values shorter than this are not offered for redaction: a secret is longer, and replacing every `1` or
/// `dev` in a tool result would garble it.
const MIN_REDACT_LEN: usize = 8;

/// Whether `bash` drops a variable called `name` (before `env_passthrough` is applied): its name holds
/// KEY, SECRET, TOKEN, PASSWORD or CREDENTIAL in any case, or it is an AWS credential variable
/// (`AWS_ACCESS_KEY_ID`, `AWS_SECRET_ACCESS_KEY`, `AWS_SESSION_TOKEN`, `AWS_PROFILE`, …).
pub fn is_secret_name(name: &str) -> bool {
    let upper = name.to_ascii_uppercase();
    SECRET_PARTS.iter().any(|part| upper.contains(part)) || AWS_CREDENTIAL_NAMES.contains(&upper.as_str())
}

/// Names of the host's variables that `bash` does not inherit, given the names the user keeps.
pub(crate) fn dropped_names(passthrough: &[String]) -> Vec<OsString> {
    std::env::vars_os()
        .map(|(name, _)| name)
        .filter(|name| {
            let text = name.to_string_lossy();
            is_secret_name(&text) && !passthrough.iter().any(|kept| *kept == text)
        })
        .collect()
}

/// The values of the host's environment variables that `bash` does not inherit (see [`is_secret_name`];
/// names in `passthrough` are kept and so not listed), for a redactor to replace in tool results.
///
/// Values shorter than 8 bytes are left out (they would garble unrelated text), and the list is sorted
/// longest first so a redactor replacing in order never leaves part of a longer secret behind. The values
/// live only in the returned memory: nothing here logs or stores them.
pub fn secret_env_values(passthrough: &[String]) -> Vec<String> {
    let mut values: Vec<String> = std::env::vars_os()
        .filter(|(name, _)| {
            let text = name.to_string_lossy();
            is_secret_name(&text) && !passthrough.iter().any(|kept| *kept == text)
        })
        .filter_map(|(_, value)| value.into_string().ok())
        .filter(|value| value.len() >= MIN_REDACT_LEN)
        .collect();
    values.sort_by(|a, b| b.len().cmp(&a.len()).then_with(|| a.cmp(b)));
    values.dedup();
    values
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn secret_names_are_recognised_in_any_case() {
        for name in ["OPENAI_API_KEY", "github_token", "DB_Password", "MY_SECRET", "GOOGLE_CREDENTIALS"] {
            assert!(is_secret_name(name), "{name}");
        }
        for name in ["AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN", "AWS_PROFILE"] {
            assert!(is_secret_name(name), "{name}");
        }
        for name in ["PATH", "HOME", "AWS_REGION", "LANG", "TERM", "CARGO_HOME"] {
            assert!(!is_secret_name(name), "{name}");
        }
    }
}
