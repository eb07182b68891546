//! The process table as /proc shows it, to check that what a test started has ended (by a marker on the
//! command line, since a PID namespace gives processes pids the test does not know). Included with
//! `#[path = "common/procs.rs"] mod procs;`.
#![allow(dead_code)]

/// Live processes (zombies left out: they have ended, only their parent has not reaped them yet), each
/// as its pid and its command line with the arguments joined by spaces.
pub fn live() -> Vec<(u32, String)> {
    let mut out = Vec::new();
    for e in std::fs::read_dir("/proc").into_iter().flatten().flatten() {
        let Ok(pid) = e.file_name().to_string_lossy().parse::<u32>() else { continue };
        let Ok(cmd) = std::fs::read(e.path().join("cmdline")) else { continue };
        let stat = std::fs::read_to_string(e.path().join("stat")).unwrap_or_default();
        let zombie = stat.rsplit_once(')').is_some_and(|(_, rest)| rest.trim_start().starts_with('Z'));
        if !zombie {
            out.push((pid, String::from_utf8_lossy(&cmd).trim_end_matches('\0').replace('\0', " ")));
        }
    }
    out
}

/// Pids of the live processes whose command line contains `marker`.
pub fn with(marker: &str) -> Vec<u32> {
    live().into_iter().filter(|(_, cmd)| cmd.contains(marker)).map(|(pid, _)| pid).collect()
}
