//! Benchmark (not a test): a 200-turn tool loop against the scripted provider, to see how the time per
//! turn grows with the conversation's length. A request shares the unchanged messages of the conversation's
//! cached view (no copy of the history), so a turn costs what is new: turns 190-200 should cost within 1.5x
//! of turns 1-10 (`render_view alone`, a fresh render of the whole store, is shown for scale).
//!
//! Run: `cargo bench --bench agent_loop` (or `bash bench/agent_loop.sh`). Environment: `AGENT_BENCH_RUNS`
//! (default 7), `AGENT_BENCH_TURNS` (default 200). `AGENT_BENCH_ONCE=N`: one run of N tool turns and nothing
//! else (no warm-up, no tables), for instruction counts: under callgrind, (I(200) - I(190)) / 10 against
//! (I(10) - I(0)) / 10 is the per-turn cost at turns 190-200 against 1-10, independent of the machine's load.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::sync::Arc;
use std::time::{Duration, Instant};

use serde_json::{Value, json};
use tooloop::conversation::render_view;
use tooloop::provider::ScriptedProvider;
use tooloop::provider::host::reply;
use tooloop::types::ToolUseBlock;
use tooloop::{Agent, AgentConfig, ContentBlock, Event, Session, StopReason, Tool, ToolContext, ToolOutput, Usage};

const RANGES: [(usize, usize); 3] = [(1, 10), (90, 100), (190, 200)];

fn script(tool_turns: usize) -> Vec<tooloop::MessageResponse> {
    let mut replies: Vec<_> = (1..=tool_turns)
        .map(|k| {
            let mut m = reply(
                vec![
                    ContentBlock::text(format!("Step {k}: calling the tool.")),
                    ContentBlock::ToolUse(ToolUseBlock {
                        id: format!("toolu_bench_{k:04}"),
                        name: "noop".into(),
                        input: json!({"n": k}),
                        extra: Default::default(),
                    }),
                ],
                StopReason::ToolUse,
            );
            m.usage = Usage { input_tokens: 100 + k as u64 * 30, output_tokens: 20, ..Default::default() };
            m
        })
        .collect();
    replies.push(reply(vec![ContentBlock::text("Done.")], StopReason::EndTurn));
    replies
}

/// One run: returns the duration of each turn (turn k = from its turn_start to the next turn's start, so it
/// covers rendering the request, the provider, recording the turn, and running its tool) and the store.
fn run_once(tool_turns: usize, session: Option<&std::path::Path>) -> (Vec<Duration>, Vec<tooloop::Entry>) {
    let provider = Arc::new(ScriptedProvider::new(script(tool_turns)));
    let agent = Agent::new(provider, AgentConfig { model: "bench".into(), max_turns: None, ..Default::default() });
    if let Some(path) = session {
        let _ = std::fs::remove_file(path);
        agent.attach_session(Session::open(path).unwrap()).unwrap();
    }
    let noop = Tool::new(
        "noop",
        "does nothing",
        json!({"type": "object", "properties": {"n": {"type": "integer"}}, "required": ["n"]}),
        |input: &Value, _: &ToolContext<'_>| Ok(ToolOutput::Text(format!("ok {}", input["n"]))),
    )
    .unwrap();
    agent.tools().register(noop).unwrap();
    let mut starts = Vec::with_capacity(tool_turns + 2);
    let result = agent
        .run("Run the tool until done.", &mut |e| {
            if let Event::TurnStart { .. } = e {
                starts.push(Instant::now());
            }
        })
        .unwrap();
    starts.push(Instant::now());
    assert_eq!(result.turns as usize, tool_turns + 1);
    assert_eq!(result.tool_calls.len(), tool_turns);
    (starts.windows(2).map(|w| w[1] - w[0]).collect(), agent.conversation().snapshot())
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(|a, b| a.total_cmp(b));
    let n = v.len();
    if n % 2 == 1 { v[n / 2] } else { (v[n / 2 - 1] + v[n / 2]) / 2.0 }
}

fn mean_us(turns: &[Duration], (a, b): (usize, usize)) -> f64 {
    let slice = &turns[a - 1..b.min(turns.len())];
    slice.iter().map(|d| d.as_secs_f64() * 1e6).sum::<f64>() / slice.len() as f64
}

/// Time of `render_view` alone on the store as it was when turn `k` started (entries: 1 user + 2 per turn).
fn render_us(entries: &[tooloop::Entry], (a, b): (usize, usize)) -> f64 {
    let reps = 200;
    let mut total = 0.0;
    for k in a..=b {
        let prefix = &entries[..(1 + 2 * (k - 1)).min(entries.len())];
        let t = Instant::now();
        for _ in 0..reps {
            std::hint::black_box(render_view(std::hint::black_box(prefix)));
        }
        total += t.elapsed().as_secs_f64() * 1e6 / reps as f64;
    }
    total / (b - a + 1) as f64
}

fn table(title: &str, runs: usize, tool_turns: usize, session: Option<&std::path::Path>) {
    // One warm-up run (page faults, allocator, lazy statics), not counted.
    let _ = run_once(tool_turns.min(20), session);
    let mut per_run: Vec<Vec<Duration>> = Vec::new();
    let mut totals = Vec::new();
    let mut entries = Vec::new();
    for _ in 0..runs {
        let t = Instant::now();
        let (turns, e) = run_once(tool_turns, session);
        totals.push(t.elapsed().as_secs_f64() * 1e3);
        per_run.push(turns);
        entries = e;
    }
    println!("\n{title}: {tool_turns} tool turns + 1 final turn, median of {runs} runs");
    println!(
        "| turns   | per turn, median | fastest run | slowest run | messages sent | render_view alone | vs turns 1-10 |"
    );
    println!(
        "|---------|------------------|-------------|-------------|---------------|-------------------|---------------|"
    );
    let mut first = None;
    let mut medians = Vec::new();
    for range in RANGES {
        if range.1 > tool_turns + 1 {
            continue;
        }
        let means: Vec<f64> = per_run.iter().map(|t| mean_us(t, range)).collect();
        let m = median(means.clone());
        let base = *first.get_or_insert(m);
        medians.push(m);
        let lo = means.iter().cloned().fold(f64::INFINITY, f64::min);
        let hi = means.iter().cloned().fold(0.0, f64::max);
        // Turn k sends 2k-1 messages (the user input, then a tool turn and its result per earlier turn).
        let msgs = format!("{}-{}", 2 * range.0 - 1, 2 * range.1 - 1);
        println!(
            "| {:<7} | {:>13.1} µs | {:>8.1} µs | {:>8.1} µs | {:>13} | {:>14.1} µs | {:>12.1}x |",
            format!("{}-{}", range.0, range.1),
            m,
            lo,
            hi,
            msgs,
            render_us(&entries, range),
            m / base
        );
    }
    if let [first, _, last] = medians[..] {
        let growth = last / first;
        let verdict = if growth <= 1.5 { "O(new content) per turn" } else { "grows with the history: profile it" };
        println!("turns 190-200 against 1-10: {growth:.2}x (target <= 1.5x) -> {verdict}");
    }
    println!("whole run: median {:.1} ms", median(totals));
}

fn main() {
    // `cargo bench` passes `--bench`; a filter argument that is not ours means "not this bench".
    if std::env::args().skip(1).any(|a| !a.starts_with('-') && !"agent_loop".contains(a.as_str())) {
        return;
    }
    let env = |k: &str, d: usize| std::env::var(k).ok().and_then(|v| v.parse().ok()).unwrap_or(d);
    if let Ok(n) = std::env::var("AGENT_BENCH_ONCE") {
        let (turns, _) = run_once(n.parse().expect("AGENT_BENCH_ONCE: a number of tool turns"), None);
        std::hint::black_box(turns);
        return;
    }
    let runs = env("AGENT_BENCH_RUNS", 7);
    let turns = env("AGENT_BENCH_TURNS", 200);
    table("agent loop, scripted provider, no session", runs, turns, None);
    let path = std::env::temp_dir().join(format!("tooloop-bench-{}.jsonl", std::process::id()));
    table("agent loop, scripted provider, JSONL session (fsync per entry)", runs.min(3), turns, Some(&path));
    let _ = std::fs::remove_file(&path);
}
