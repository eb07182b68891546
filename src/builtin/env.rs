//! Which environment variables `bash` inherits: everything except the host's secrets.
//!
//! A variable whose name holds KEY, SECRET, TOKEN, PASSWORD or CREDENTIAL (any case), or is one of the AWS
//! credential variables, is removed from the command's environment unless the user listed its name in
//! `env_passthrough`. The values removed are available to the host (in memory only) so it can redact them
//! from tool results. This module must never log, print or write those values anywhere.
//!
//! Under a sandbox, variables pointing at the user's Unix sockets (`TMUX`, `SSH_AUTH_SOCK`, `DOCKER_HOST`,
//! …, see [`is_socket_variable`]) are dropped as well, unless listed in `env_passthrough`.

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

/// Variables that name a Unix socket (or a service reached through one) of the user's session: a terminal
/// multiplexer, the session bus, an agent, a container engine, a display or an editor. Under a sandbox
/// the socket itself is out of reach; the variable is dropped too, so tools fail plainly instead of
/// trying, and nothing learns the path.
const SOCKET_NAMES: [&str; 27] = [
    "TMUX",
    "TMUX_PANE",
    "STY",
    "ZELLIJ_SESSION_NAME",
    "DBUS_SESSION_BUS_ADDRESS",
    "DBUS_SYSTEM_BUS_ADDRESS",
    "SSH_AUTH_SOCK",
    "SSH_AGENT_PID",
    "GPG_AGENT_INFO",
    "GNOME_KEYRING_CONTROL",
    "DOCKER_HOST",
    "CONTAINER_HOST",
    "PODMAN_HOST",
    "BUILDKIT_HOST",
    "CONTAINERD_ADDRESS",
    "XDG_RUNTIME_DIR",
    "WAYLAND_DISPLAY",
    "PULSE_SERVER",
    "SWAYSOCK",
    "I3SOCK",
    "HYPRLAND_INSTANCE_SIGNATURE",
    "KITTY_LISTEN_ON",
    "NVIM",
    "NVIM_LISTEN_ADDRESS",
    "VSCODE_IPC_HOOK_CLI",
    "VSCODE_GIT_IPC_HANDLE",
    "DISPLAY",
];

/// Whether a variable points at a Unix socket of the user's session: one of the known names (`TMUX`,
/// `DBUS_SESSION_BUS_ADDRESS`, `SSH_AUTH_SOCK`, `DOCKER_HOST`, `XDG_RUNTIME_DIR`, …), a value starting with
/// `unix:`, or a path under the session's runtime folder (`$XDG_RUNTIME_DIR/…`, `/run/user/…`).
pub fn is_socket_variable(name: &str, value: &str) -> bool {
    let upper = name.to_ascii_uppercase();
    if SOCKET_NAMES.contains(&upper.as_str()) || upper.ends_with("_SOCK") || upper.ends_with("_SOCKET") {
        return true;
    }
    let value = value.trim();
    if value.starts_with("unix:") || value.starts_with("/run/user/") || value.starts_with("/var/run/user/") {
        return true;
    }
    std::env::var("XDG_RUNTIME_DIR").is_ok_and(|dir| {
        let dir = dir.trim_end_matches('/');
        !dir.is_empty() && (value == dir || value.starts_with(&format!("{dir}/")))
    })
}

/// Names of the host's variables pointing at Unix sockets ([`is_socket_variable`]) that a sandboxed
/// `bash` does not inherit, given the names the user keeps.
pub(crate) fn socket_names(passthrough: &[String]) -> Vec<OsString> {
    std::env::vars_os()
        .filter(|(name, value)| {
            let text = name.to_string_lossy();
            is_socket_variable(&text, &value.to_string_lossy()) && !passthrough.iter().any(|kept| *kept == text)
        })
        .map(|(name, _)| name)
        .collect()
}

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

    #[test]
    fn socket_variables_are_recognised_by_name_and_by_value() {
        for (name, value) in [
            ("TMUX", "/tmp/tmux-1000/default,1234,0"),
            ("SSH_AUTH_SOCK", "/tmp/ssh-x/agent.1"),
            ("DBUS_SESSION_BUS_ADDRESS", "unix:path=/run/user/1000/bus"),
            ("DOCKER_HOST", "unix:///var/run/docker.sock"),
            ("MY_TOOL_SOCKET", "/srv/x"),
            ("WHATEVER", "unix:abstract=/tmp/dbus-x"),
            ("SOME_DIR", "/run/user/1000/some"),
        ] {
            assert!(is_socket_variable(name, value), "{name}={value}");
        }
        for (name, value) in [("PATH", "/usr/bin:/bin"), ("HOME", "/home/u"), ("TERM", "xterm"), ("LANG", "C")] {
            assert!(!is_socket_variable(name, value), "{name}={value}");
        }
    }
}
