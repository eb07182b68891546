//! The built-in `grep` tool against `rg` and `grep -rn` on one large tree, in one run: wall time of each
//! (the tool in-process through `builtin::run`, the others as processes writing to /dev/null), after one
//! untimed pass that warms the page cache, and the ratios. Run with `bash bench/grep_bench.sh`
//! (GREP_BENCH_DIR: the tree, GREP_BENCH_PATTERN: the regex).
//!
//! Not the same work: `grep -rn` also reads ignored, hidden and binary files; `rg` and the tool skip them.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use serde_json::json;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};
use tooloop::builtin::{self, Workspace};
use tooloop::cancel::CancelToken;

fn time_command(program: &str, args: &[&str]) -> Option<Duration> {
    let t = Instant::now();
    let status = Command::new(program).args(args).stdout(Stdio::null()).stderr(Stdio::null()).status().ok()?;
    // grep and rg exit 1 when nothing matched; anything above is a failure.
    (status.code().unwrap_or(2) <= 1).then(|| t.elapsed())
}

fn main() {
    let dir = std::env::var("GREP_BENCH_DIR").expect("GREP_BENCH_DIR: the tree to search");
    let pattern = std::env::var("GREP_BENCH_PATTERN").unwrap_or_else(|_| r"fn\s+new_\w+\(".to_string());
    let ws = Workspace::new(&dir).unwrap();
    let _ = time_command("grep", &["-rn", "-E", &pattern, &dir]); // warm the page cache
    let t = Instant::now();
    let input = json!({"pattern": pattern, "output_mode": "content"});
    let out = builtin::run("grep", &ws, &input, &CancelToken::new()).unwrap();
    let tool = t.elapsed();
    let note = out.lines().last().unwrap_or("").to_string();
    let rg = time_command("rg", &["-n", "--no-heading", &pattern, &dir]);
    let grep = time_command("grep", &["-rn", "-E", &pattern, &dir]);
    println!("tree: {dir}\npattern: {pattern}\ngrep tool's last line: {note}");
    println!("{:<24} {:>10.1?}", "grep tool (in-process)", tool);
    match rg {
        Some(d) => println!("{:<24} {:>10.1?}   tool/rg = {:.2}", "rg -n", d, tool.as_secs_f64() / d.as_secs_f64()),
        None => println!("{:<24} {:>10}", "rg -n", "not installed"),
    }
    if let Some(d) = grep {
        println!("{:<24} {:>10.1?}   tool/grep = {:.2}", "grep -rn -E", d, tool.as_secs_f64() / d.as_secs_f64());
    }
}
