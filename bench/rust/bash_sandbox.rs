//! Overhead of the bash sandbox per call: the median wall time of 100 `true` commands through
//! `builtin::run_bash`, unconfined and under each sandbox mode, next to a bare `bash -c true`.
//! Run with `bash bench/bash_sandbox.sh` (BASH_BENCH_CALLS=100 by default).
#![allow(clippy::unwrap_used, clippy::expect_used)]

use serde_json::json;
use std::process::Command;
use std::time::{Duration, Instant};
use tooloop::builtin::{self, BashOptions, SandboxMode, Workspace};
use tooloop::cancel::CancelToken;

fn median(mut samples: Vec<Duration>) -> Duration {
    samples.sort();
    samples[samples.len() / 2]
}

fn p90(mut samples: Vec<Duration>) -> Duration {
    samples.sort();
    samples[samples.len() * 9 / 10]
}

fn main() {
    let calls: usize = std::env::var("BASH_BENCH_CALLS").ok().and_then(|v| v.parse().ok()).unwrap_or(100);
    let dir = std::env::temp_dir().join(format!("tooloop-bash-bench-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let ws = Workspace::new(&dir).unwrap();
    println!(
        "landlock ABI: {:?}; PID namespace containment: {}; {calls} calls each",
        builtin::sandbox_support(),
        builtin::process_containment()
    );
    let bare: Vec<Duration> = (0..calls)
        .map(|_| {
            let t = Instant::now();
            Command::new("bash").args(["-c", "true"]).status().unwrap();
            t.elapsed()
        })
        .collect();
    println!(
        "{:<34} median {:>8.2?}  p90 {:>8.2?}",
        "bare `bash -c true` (std Command)",
        median(bare.clone()),
        p90(bare)
    );
    let configs = [
        ("run_bash, sandbox off", SandboxMode::Off, true),
        ("run_bash, workspace-write", SandboxMode::WorkspaceWrite, true),
        ("run_bash, read-only", SandboxMode::ReadOnly, true),
        ("run_bash, workspace-write, no net", SandboxMode::WorkspaceWrite, false),
    ];
    for (label, sandbox, network) in configs {
        let opts = BashOptions { sandbox, network, ..BashOptions::default() };
        let input = json!({"command": "true"});
        let samples: Vec<Duration> = (0..calls)
            .map(|_| {
                let t = Instant::now();
                let out = builtin::run_bash(&ws, &input, &opts, &CancelToken::new()).unwrap();
                assert_eq!(out, "(no output)");
                t.elapsed()
            })
            .collect();
        println!("{label:<34} median {:>8.2?}  p90 {:>8.2?}", median(samples.clone()), p90(samples));
    }
    let _ = std::fs::remove_dir_all(&dir);
}
