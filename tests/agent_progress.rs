//! Progress detection end to end: an agent built from options (the door every binding uses) with the
//! built-in tools in a temporary workspace, against the mock server speaking the Messages API. Three scripted
//! models: one that re-writes identical content and re-runs the same check, one that goes round a cycle of
//! reads and checks, and one that finishes (never touched).
#![allow(clippy::unwrap_used, clippy::expect_used)]

#[path = "common/mock.rs"]
mod mock;
#[path = "common/tempdir.rs"]
mod tempdir;

use mock::{MockServer, scripted};
use serde_json::{Value, json};
use tempdir::TempDir as Ws;
use tooloop::{AgentOptions, Event, RunResult, StopReason};

fn write(path: &str, content: &str) -> Value {
    json!({"name": "write_file", "input": {"path": path, "content": content}})
}

fn bash(command: &str) -> Value {
    json!({"name": "bash", "input": {"command": command}})
}

fn read(path: &str) -> Value {
    json!({"name": "read_file", "input": {"path": path}})
}

fn run(mock: &MockServer, ws: &Ws, extra: Value) -> (RunResult, Vec<Event>) {
    let (_, result, events) = run_agent(mock, ws, extra);
    (result, events)
}

/// An agent with the coding agent's guards on (`progress_guard`, off in the library by default), `extra` over
/// its options, run once.
fn run_agent(mock: &MockServer, ws: &Ws, extra: Value) -> (tooloop::Agent, RunResult, Vec<Event>) {
    let mut options = json!({"model": "claude-sonnet-4-6", "api_key": "sk-ant-mock", "base_url": mock.base_url(),
        "builtin_tools": true, "workspace": ws.0, "sandbox": "off", "max_turns": 12, "stream": false,
        "progress_guard": true});
    for (k, v) in extra.as_object().unwrap() {
        options[k] = v.clone();
    }
    let agent = AgentOptions::from_value(options).unwrap().build().unwrap();
    let mut events = Vec::new();
    let result = agent.run("make hello.txt say hi and check it", &mut |e| events.push(e.clone())).unwrap();
    (agent, result, events)
}

fn repetitions(events: &[Event]) -> Vec<(u32, bool, String)> {
    events
        .iter()
        .filter_map(|e| match e {
            Event::Repetition { count, stopped, note, .. } => Some((*count, *stopped, note.clone())),
            _ => None,
        })
        .collect()
}

/// The text of the tool_result in request `i`'s last message.
fn last_result(requests: &[Value], i: usize) -> String {
    let messages = requests[i]["body"]["messages"].as_array().unwrap();
    let content = &messages.last().unwrap()["content"][0]["content"];
    content.as_str().map(str::to_string).unwrap_or_else(|| content.to_string())
}

#[test]
fn a_model_that_rewrites_identical_content_and_reruns_the_check_is_told_then_stopped() {
    // write, check, write the same, check again, … — the loop small models fall into when they are done.
    let mut steps = Vec::new();
    for _ in 0..5 {
        steps.push(write("hello.txt", "hi\n"));
        steps.push(bash("cat hello.txt"));
    }
    let mock = MockServer::start(&scripted("progress detection", &steps));
    let ws = Ws::new("rewrite");
    // The mock ignores tool_choice none, so a wrap-up turn would end the run (tested below): off here.
    let (result, events) = run(&mock, &ws, json!({"progress_guard": {"wrap_up": false}}));
    assert_eq!(result.stop_reason, Some(StopReason::Repetition));
    assert_eq!(result.turns, 5, "turn 3 is told, turns 4 and 5 go on: stopped after 5");
    let reps = repetitions(&events);
    assert_eq!(reps.iter().map(|(c, s, _)| (*c, *s)).collect::<Vec<_>>(), vec![(1, false), (2, false), (3, true)]);
    assert!(
        reps[0].2.contains("write_file(hello.txt) wrote exactly the content the file already had"),
        "{}",
        reps[0].2
    );
    assert!(reps[1].2.contains("bash(cat hello.txt) already ran before with exactly the same output and it passed"));
    assert!(reps[2].2.contains("the run is stopped"), "{}", reps[2].2);
    // The model read the note in the result of its identical rewrite.
    let requests = mock.requests();
    assert_eq!(requests.len(), 5);
    let told = last_result(&requests, 3);
    assert!(told.starts_with("unchanged hello.txt"), "{told}");
    assert!(told.contains("If the task is done, answer now in plain words without calling a tool"), "{told}");
    assert_eq!(std::fs::read_to_string(ws.0.join("hello.txt")).unwrap(), "hi\n");
}

#[test]
fn a_model_that_cycles_through_the_same_calls_is_stopped() {
    // A B C A B C …: a read, a check and a look around that bring nothing new after the first round.
    let mut steps = Vec::new();
    for _ in 0..4 {
        steps.push(read("hello.txt"));
        steps.push(bash("cat hello.txt"));
        steps.push(bash("ls"));
    }
    let mock = MockServer::start(&scripted("progress detection", &steps));
    let ws = Ws::new("cycle");
    std::fs::write(ws.0.join("hello.txt"), "hi\n").unwrap();
    let (result, events) = run(&mock, &ws, json!({"progress_guard": {"wrap_up": false}}));
    assert_eq!(result.stop_reason, Some(StopReason::Repetition));
    assert_eq!(result.turns, 6);
    let reps = repetitions(&events);
    assert_eq!(reps.len(), 3);
    assert!(reps[2].1);
    assert!(
        reps[2].2.contains("a cycle: read_file(hello.txt), then bash(cat hello.txt), then bash(ls)"),
        "{}",
        reps[2].2
    );
}

#[test]
fn a_model_that_finishes_is_never_touched_and_the_guard_can_be_turned_off() {
    let steps = [write("hello.txt", "hi\n"), bash("cat hello.txt"), json!("hello.txt says hi.")];
    let mock = MockServer::start(&scripted("progress detection", &steps));
    let ws = Ws::new("finish");
    let (result, events) = run(&mock, &ws, json!({}));
    assert_eq!(result.stop_reason, Some(StopReason::EndTurn));
    assert!(repetitions(&events).is_empty());
    assert!(!last_result(&mock.requests(), 2).contains("tooloop:"));

    // Off: the identical rewrites run until max_turns.
    let mut steps = Vec::new();
    for _ in 0..3 {
        steps.push(write("hello.txt", "hi\n"));
        steps.push(bash("cat hello.txt"));
    }
    steps.push(json!("done"));
    let mock = MockServer::start(&scripted("progress detection", &steps));
    let ws = Ws::new("off");
    let (result, events) = run(&mock, &ws, json!({"progress_guard": false}));
    assert_eq!((result.stop_reason, result.turns), (Some(StopReason::EndTurn), 7));
    assert!(repetitions(&events).is_empty());
}

/// The tool_choice request `i` carried (Null when none).
fn tool_choice(requests: &[Value], i: usize) -> Value {
    requests[i]["body"].get("tool_choice").cloned().unwrap_or(Value::Null)
}

/// The indexes of the requests sent with tools off (`tool_choice` none).
fn tools_off(requests: &[Value]) -> Vec<usize> {
    (0..requests.len()).filter(|&i| tool_choice(requests, i) == json!({"type": "none"})).collect()
}

#[test]
fn a_model_that_reruns_a_passing_check_gets_one_tools_off_request_and_ends_with_end_turn() {
    // write, run (passes), run again (same output): the next request has tools disabled and asks for the
    // final answer; the model answers in text and the run ends the natural way.
    let steps = [
        write("hello.py", "print('hi')\n"),
        bash("python3 hello.py"),
        bash("python3 hello.py"),
        json!("hello.py prints hi."),
    ];
    let mock = MockServer::start(&scripted("progress detection", &steps));
    let ws = Ws::new("wrapup");
    let (result, events) = run(&mock, &ws, json!({}));
    assert_eq!((result.stop_reason, result.turns), (Some(StopReason::EndTurn), 4));
    assert_eq!(result.text, "hello.py prints hi.");
    let requests = mock.requests();
    assert_eq!(requests.len(), 4);
    for i in 0..3 {
        assert_eq!(tool_choice(&requests, i), Value::Null, "request {i} is an ordinary one");
    }
    assert_eq!(tool_choice(&requests, 3), json!({"type": "none"}));
    assert!(!requests[3]["body"]["tools"].as_array().unwrap().is_empty(), "the tools stay defined");
    let told = last_result(&requests, 3);
    assert!(told.contains("already ran before with exactly the same output and it passed"), "{told}");
    assert!(told.ends_with(tooloop::progress::WRAP_UP_NOTE), "{told}");
    assert!(repetitions(&events).iter().all(|(_, stopped, _)| !stopped));
    // Only the request changed: the stored tool result has no wrap-up line.
    assert!(!requests.iter().skip(4).any(|r| r.to_string().contains("tools are off")));

    // Turned off: the same model gets no tools-off request.
    let mock = MockServer::start(&scripted("progress detection", &steps));
    let ws = Ws::new("wrapup-off");
    let (result, _) = run(&mock, &ws, json!({"progress_guard": {"wrap_up": false}}));
    assert_eq!(result.stop_reason, Some(StopReason::EndTurn));
    assert!(mock.requests().iter().all(|r| r["body"].get("tool_choice").is_none()));
}

#[test]
fn a_model_that_rewrites_a_fixed_file_unchanged_gets_the_tools_off_request_and_ends_with_end_turn() {
    // The fix is written, then written again unchanged (what a small model did on a bug fix). Nothing ran since
    // the fix: the note asks for the check once; the next unchanged rewrite means done.
    let fixed = "def add(a, b):\n    return a + b\n";
    let steps =
        [write("calc.py", fixed), write("calc.py", fixed), write("calc.py", fixed), json!("Fixed add in calc.py.")];
    let mock = MockServer::start(&scripted("progress detection", &steps));
    let ws = Ws::new("wrapup-rewrite");
    let (result, _) = run(&mock, &ws, json!({}));
    assert_eq!((result.stop_reason, result.turns), (Some(StopReason::EndTurn), 4));
    let requests = mock.requests();
    assert_eq!(tools_off(&requests), vec![3]);
    let asked = last_result(&requests, 2);
    assert!(
        asked.contains(
            "[tooloop: calc.py already has exactly this content: writing it again changes nothing. Nothing has \
             been run since you wrote it. If it is meant to be run"
        ),
        "{asked}"
    );
    assert!(!asked.contains("If the task is done"), "one thing to do, not two: {asked}");
    // The third identical write is the runaway guard's to refuse; the refusal of a repeat that changed
    // nothing calls for the wrap-up instead of more refusals until the guard stops the run.
    let told = last_result(&requests, 3);
    assert!(told.starts_with("not run: same call and same input"), "{told}");
    assert!(!told.contains("Nothing has been run"), "said once: {told}");
    assert!(told.ends_with(tooloop::progress::WRAP_UP_NOTE), "{told}");

    // A command ran after the fix: the first unchanged rewrite is enough.
    let steps = [write("calc.py", fixed), bash("python3 calc.py"), write("calc.py", fixed), json!("Fixed.")];
    let mock = MockServer::start(&scripted("progress detection", &steps));
    let ws = Ws::new("wrapup-rewrite-ran");
    let (result, _) = run(&mock, &ws, json!({}));
    assert_eq!((result.stop_reason, result.turns), (Some(StopReason::EndTurn), 4));
    assert_eq!(tools_off(&mock.requests()), vec![3]);
}

/// Runs `steps` on a workspace whose calc.py subtracts, expecting the run to end by the wrap-up (tools off in
/// request 3) with the scripted answer "Fixed: add returns a + b." in turn 4; the workspace, requests and events.
fn fix_calc_then_wrap_up(name: &str, steps: &[Value]) -> (Ws, Vec<Value>, Vec<Event>) {
    let mock = MockServer::start(&scripted("progress detection", steps));
    let ws = Ws::new(name);
    std::fs::write(ws.0.join("calc.py"), "def add(a, b):\n    return a - b\n").unwrap();
    let (result, events) = run(&mock, &ws, json!({}));
    assert_eq!(
        (result.stop_reason, result.turns, result.text.as_str()),
        (Some(StopReason::EndTurn), 4, "Fixed: add returns a + b.")
    );
    let requests = mock.requests();
    assert_eq!(tools_off(&requests), vec![3]);
    (ws, requests, events)
}

#[test]
fn an_edit_whose_old_and_new_text_are_the_same_after_the_fix_leads_to_the_wrap_up_not_the_runaway_guard() {
    // A real model (Anthropic wire) fixed calc.py with edit_file, then sent edit_file with old_text equal to
    // new_text, again and again, until the runaway guard ended the run.
    let fix = json!({"name": "edit_file", "input": {"path": "calc.py", "old_text": "a - b", "new_text": "a + b"}});
    let same = json!({"name": "edit_file", "input": {"path": "calc.py", "old_text": "a + b", "new_text": "a + b"}});
    let steps = [fix, same.clone(), same.clone(), json!("Fixed: add returns a + b.")];
    let (ws, requests, events) = fix_calc_then_wrap_up("wrapup-noop-edit", &steps);
    let told = last_result(&requests, 2);
    assert!(
        told.contains(
            "calc.py already reads like that: this edit changes nothing. Nothing has been run since you wrote it."
        ),
        "{told}"
    );
    assert!(repetitions(&events).iter().all(|(_, stopped, _)| !stopped));
    assert_eq!(std::fs::read_to_string(ws.0.join("calc.py")).unwrap(), "def add(a, b):\n    return a + b\n");
}

#[test]
fn a_wrong_edit_tried_again_after_the_fix_does_not_keep_the_wrap_up_away() {
    // A real model's bugfix run: a blind edit_file that matches nothing, twice; the fix made with write_file; the
    // wrong edit once more; the fix rewritten unchanged, twice. The edit's error says the call was wrong, not
    // that the task is undone: after the note asking for the check, the next request has tools off, and the
    // answer ends the run.
    let edit = json!({"name": "edit_file", "input": {"path": "calc.py", "old_text": "add(2, 3)", "new_text": "5"}});
    let fixed = "def add(a, b):\n    return a + b\n";
    let steps = [
        edit.clone(),
        edit.clone(),
        write("calc.py", fixed),
        edit,
        write("calc.py", fixed),
        write("calc.py", fixed),
        json!("Fixed."),
    ];
    let mock = MockServer::start(&scripted("progress detection", &steps));
    let ws = Ws::new("wrapup-after-edit-errors");
    std::fs::write(ws.0.join("calc.py"), "def add(a, b):\n    return a - b\n").unwrap();
    let (result, _) = run(&mock, &ws, json!({}));
    assert_eq!((result.stop_reason, result.turns, result.text.as_str()), (Some(StopReason::EndTurn), 7, "Fixed."));
    let requests = mock.requests();
    let off = tools_off(&requests);
    assert_eq!(off, vec![6]);
    assert_eq!(std::fs::read_to_string(ws.0.join("calc.py")).unwrap(), fixed);
    // A command that fails still keeps the tools on (the task is not done): see the test below.
}

#[test]
fn a_wrap_up_ignored_once_is_asked_again_and_a_text_answer_then_ends_the_run_with_end_turn() {
    let steps = [
        write("hello.py", "print('hi')\n"),
        bash("python3 hello.py"),
        bash("python3 hello.py"),
        bash("touch ran-anyway"),
        json!("hello.py prints hi."),
    ];
    let mock = MockServer::start(&scripted("progress detection", &steps));
    let ws = Ws::new("wrapup-again");
    let (_agent, result, _events) = run_agent(&mock, &ws, json!({}));
    assert_eq!((result.stop_reason, result.turns), (Some(StopReason::EndTurn), 5));
    assert_eq!(result.text, "hello.py prints hi.");
    assert!(!ws.0.join("ran-anyway").exists(), "a call made with tools off is not run");
    let requests = mock.requests();
    assert_eq!(tool_choice(&requests, 3), json!({"type": "none"}));
    assert!(!requests[3]["body"]["tools"].as_array().unwrap().is_empty(), "the first wrap-up keeps the tools defined");
    // The server ignored tool_choice none: the second wrap-up leaves the tools out, so its prompt no longer
    // lists them (a history with calls and no tools is fine there; the Anthropic API never gets this far).
    assert_eq!(tool_choice(&requests, 4), Value::Null);
    assert!(requests[4]["body"].get("tools").is_none(), "{}", requests[4]["body"]);
    let sent = serde_json::to_string(&requests[4]["body"]["messages"]).unwrap();
    assert!(sent.contains("Do not call a tool: answer in plain words."), "{sent}");
    assert!(sent.contains(tooloop::progress::WRAP_UP_NOTE), "{sent}");
}

#[test]
fn a_command_that_failed_and_passes_now_says_so_and_invites_the_answer() {
    // A real model ran its test (it failed), fixed it, ran it again (it passed) and then deleted the files it
    // had just tested: the moment the fix worked is the moment to say the task may be done.
    let steps = [
        write("t.py", "raise SystemExit(1)\n"),
        bash("python3 t.py"),
        write("t.py", "print('ok')\n"),
        bash("python3 t.py"),
        json!("t.py passes now."),
    ];
    let mock = MockServer::start(&scripted("progress detection", &steps));
    let ws = Ws::new("passes-now");
    let (result, _) = run(&mock, &ws, json!({}));
    assert_eq!((result.stop_reason, result.turns), (Some(StopReason::EndTurn), 5));
    let requests = mock.requests();
    let failed = last_result(&requests, 2);
    assert!(!failed.contains("[tooloop:"), "{failed}");
    let passed = last_result(&requests, 4);
    assert!(passed.starts_with("ok"), "{passed}");
    assert!(
        passed.ends_with(
            "[tooloop: bash(python3 t.py) failed the last time it ran and passes now (exit code 0). If that is \
             what the task asked for, answer now in plain words without calling a tool.]"
        ),
        "{passed}"
    );
    assert!(tools_off(&requests).is_empty(), "only a note: the task may have more to it");
}

#[test]
fn a_host_that_chose_its_own_tool_choice_gets_no_wrap_up_and_the_calls_run() {
    // tool_choice {"type": "any"}: the model must call a tool every turn, so the wrap-up cannot apply; the
    // calls after a repeated passing check are the host's to have, and they run.
    let steps = [
        write("hello.py", "print('hi')\n"),
        bash("python3 hello.py"),
        bash("python3 hello.py"),
        bash("touch ran-as-asked"),
        json!("done"),
    ];
    let mock = MockServer::start(&scripted("progress detection", &steps));
    let ws = Ws::new("wrapup-host-choice");
    let (result, _) = run(&mock, &ws, json!({"tool_choice": {"type": "any"}}));
    assert_eq!((result.stop_reason, result.turns), (Some(StopReason::EndTurn), 5));
    assert!(ws.0.join("ran-as-asked").exists(), "the host's forced call ran");
    let requests = mock.requests();
    assert!((0..5).all(|i| tool_choice(&requests, i) == json!({"type": "any"})));
}

#[test]
fn the_wrap_up_is_sent_once_and_calls_a_server_sends_anyway_are_not_run_and_end_the_run() {
    // A server that ignores tool_choice none (llama.cpp's Anthropic endpoint drops it): the model keeps
    // re-running its check, and in both wrap-up turns it calls a tool that would change the workspace.
    let steps = [
        write("hello.py", "print('hi')\n"),
        bash("python3 hello.py"),
        bash("python3 hello.py"),
        bash("touch ran-anyway"),
        bash("touch ran-anyway-too"),
        json!("never asked for"),
    ];
    let mock = MockServer::start(&scripted("progress detection", &steps));
    let ws = Ws::new("wrapup-once");
    let (agent, result, events) = run_agent(&mock, &ws, json!({}));
    assert_eq!((result.stop_reason, result.turns), (Some(StopReason::Repetition), 5));
    let requests = mock.requests();
    assert_eq!(tools_off(&requests), vec![3], "sent, ignored, ...");
    assert!(
        requests[4]["body"].get("tools").is_none(),
        "... sent once more without the tools: the run ends with that turn"
    );
    assert!(!ws.0.join("ran-anyway").exists(), "a call made with tools off is not run");
    assert!(!ws.0.join("ran-anyway-too").exists(), "a call made with tools off is not run");
    let reps = repetitions(&events);
    assert_eq!(reps.len(), 2, "the first ignored wrap-up, the stop: {reps:?}");
    assert!(!reps[0].1 && reps[0].2.contains("asked once more"), "{reps:?}");
    let (_, stopped, note) = reps[1].clone();
    assert!(stopped, "{note}");
    assert!(
        note.starts_with("[tooloop: the run is stopped: asked twice for its final answer with tools off"),
        "{note}"
    );
    assert!(note.contains("Bash(python3 hello.py) already ran before with exactly the same output"), "{note}");
    // Each call got its one result: the conversation stays valid for the next run.
    let mut messages = agent.messages();
    let last = serde_json::to_value(messages.pop().unwrap()).unwrap();
    assert_eq!(last["content"][0]["type"], "tool_result", "{last}");
    assert_eq!(last["content"][0]["is_error"], true, "{last}");
    assert_eq!(last["content"][0]["content"], tooloop::progress::WRAP_UP_IGNORED, "{last}");
    let first = serde_json::to_value(&messages[messages.len() - 2]).unwrap();
    assert_eq!(first["content"][0]["content"], tooloop::progress::WRAP_UP_AGAIN, "{first}");
    // A failing check run again is no reason to take the tools away: the model may still fix it.
    let mut steps = vec![write("t.py", "raise SystemExit(1)\n")];
    for _ in 0..4 {
        steps.push(bash("python3 t.py"));
        steps.push(bash("cat t.py"));
    }
    let mock = MockServer::start(&scripted("progress detection", &steps));
    let ws = Ws::new("wrapup-failing");
    let (result, _) = run(&mock, &ws, json!({}));
    let requests = mock.requests();
    let (last, before) = requests.split_last().unwrap();
    assert!(before.iter().all(|r| r["body"].get("tool_choice").is_none()));
    // The cycle's stop then asks once for the answer with tools off (a guard's stop still answers).
    assert_eq!(result.stop_reason, Some(StopReason::Repetition));
    assert_eq!(last["body"]["tool_choice"], json!({"type": "none"}));
}

#[test]
fn a_check_that_fails_the_same_after_a_change_says_the_change_missed_and_the_run_goes_on() {
    // A real model's test failed at line 7; it edited line 9, ran the test (the same failure, the timing aside)
    // and heard "already ran before with exactly the same result ... if the task is done, answer now". Now it
    // hears that its change missed the cause, and three such rounds are not a stall.
    let test = "import time; print('line 7 fails in %.6fs' % time.time()); raise SystemExit(1)\n";
    let mut steps = vec![write("t.py", test), bash("python3 t.py")];
    for n in 0..3 {
        steps.push(write("notes.txt", &format!("try {n}\n")));
        steps.push(bash("python3 t.py"));
    }
    steps.push(json!("It still fails at line 7."));
    let mock = MockServer::start(&scripted("progress detection", &steps));
    let ws = Ws::new("same-failure");
    let (result, _) = run(&mock, &ws, json!({}));
    assert_eq!((result.stop_reason, result.turns), (Some(StopReason::EndTurn), 9));
    let requests = mock.requests();
    assert!(!last_result(&requests, 2).contains("[tooloop:"));
    for k in [4, 6, 8] {
        let again = last_result(&requests, k);
        assert!(again.contains("line 7 fails in"), "{again}");
        assert!(
            again.ends_with(
                "[tooloop: bash(python3 t.py) fails exactly as it did before your last change \
                 (write_file(notes.txt)): that change did not reach the cause. Read where the output says it \
                 fails (the file and line), and change that.]"
            ),
            "{again}"
        );
    }
    assert!(tools_off(&requests).is_empty());
}

#[test]
fn an_edit_already_made_after_the_fix_leads_to_the_wrap_up_not_the_runaway_guard() {
    // A real model (Anthropic wire) fixed calc.py with write_file, then sent the same fix as an edit (old_text
    // "return a - b", no longer there) until the runaway guard ended the run, the fix in place.
    let fixed = "def add(a, b):\n    return a + b\n";
    let edit = json!({"name": "edit_file", "input": {"path": "calc.py", "old_text": "return a - b", "new_text": "return a + b"}});
    let steps = [write("calc.py", fixed), edit.clone(), edit.clone(), json!("Fixed: add returns a + b.")];
    let (ws, requests, events) = fix_calc_then_wrap_up("wrapup-edit-made", &steps);
    let first = last_result(&requests, 2);
    assert!(first.contains("but new_text is already there, at line 2: this edit looks already made"), "{first}");
    assert!(
        first.contains(
            "calc.py already reads like that: this edit changes nothing. Nothing has been run since you wrote it."
        ),
        "{first}"
    );
    assert!(repetitions(&events).iter().all(|(_, stopped, _)| !stopped));
    assert_eq!(std::fs::read_to_string(ws.0.join("calc.py")).unwrap(), fixed);
}

#[test]
fn a_turn_stuck_on_a_failure_sends_the_next_request_at_the_unstick_temperature_once() {
    // A real model sent the same failing edit (old_text not in the file) until the runaway guard stopped it:
    // at 0.2 its next call is the same again. With unstick_temperature the request after each stuck turn goes
    // at that temperature, and the one after it at the host's again.
    let bad = json!({"name": "edit_file", "input": {"path": "calc.py", "old_text": "add(2, 3)", "new_text": "x"}});
    let fix = json!({"name": "edit_file", "input": {"path": "calc.py", "old_text": "a - b", "new_text": "a + b"}});
    let steps =
        [bad.clone(), bad.clone(), fix, bash("python3 -c 'import calc; print(calc.add(2, 3))'"), json!("Fixed.")];
    let temperatures = |options: Value| {
        let mock = MockServer::start(&scripted("progress detection", &steps));
        let ws = Ws::new("unstick");
        std::fs::write(ws.0.join("calc.py"), "def add(a, b):\n    return a - b\n").unwrap();
        let (result, _) = run(&mock, &ws, options);
        assert_eq!((result.stop_reason, result.turns), (Some(StopReason::EndTurn), 5));
        assert_eq!(std::fs::read_to_string(ws.0.join("calc.py")).unwrap(), "def add(a, b):\n    return a + b\n");
        mock.requests().iter().map(|r| r["body"]["temperature"].clone()).collect::<Vec<_>>()
    };
    // Through `extra` (how the CLI sets a local model's temperature).
    let t = temperatures(json!({"extra": {"temperature": 0.2}, "progress_guard": {"unstick_temperature": 0.8}}));
    assert_eq!(t, vec![json!(0.2), json!(0.2), json!(0.8), json!(0.2), json!(0.2)], "after the repeated failing edit");
    // Through the temperature option.
    let t = temperatures(json!({"temperature": 0.2, "progress_guard": {"unstick_temperature": 0.8}}));
    assert_eq!(t, vec![json!(0.2), json!(0.2), json!(0.8), json!(0.2), json!(0.2)]);
    // Off by default; a request that leaves the temperature to the API is left alone; never lowered.
    let t = temperatures(json!({"temperature": 0.2}));
    assert!(t.iter().all(|t| *t == json!(0.2)), "{t:?}");
    let t = temperatures(json!({"progress_guard": {"unstick_temperature": 0.8}}));
    assert!(t.iter().all(Value::is_null), "{t:?}");
    let t = temperatures(json!({"temperature": 1.0, "progress_guard": {"unstick_temperature": 0.8}}));
    assert!(t.iter().all(|t| *t == json!(1.0)), "{t:?}");
}

#[test]
fn repeats_while_a_check_fails_are_never_told_if_the_task_is_done_answer() {
    // A real model (OpenAI wire) wrote hello.py with `echo`, saw `python3 hello.py` fail, then sent the same
    // `echo` in three turns more: the second heard "if the task is done, answer now" and it answered it was
    // done. Every note and refusal now names the failing check.
    let echo = bash("echo 'Hello, world!' > hello.py");
    let steps = [echo.clone(), bash("python3 hello.py"), echo.clone(), echo.clone(), echo.clone(), json!("Done.")];
    let mock = MockServer::start(&scripted("progress detection", &steps));
    let ws = Ws::new("failing-repeats");
    let (result, _) = run(&mock, &ws, json!({}));
    assert_eq!(result.turns, 6);
    let requests = mock.requests();
    for i in 3..=5 {
        let told = last_result(&requests, i);
        assert!(told.contains("bash(python3 hello.py) failed the last time it ran"), "request {i}: {told}");
        assert!(!told.contains("If the task is done"), "request {i}: {told}");
    }
    assert!(last_result(&requests, 5).starts_with("not run: same call and same input"), "the runaway guard's");
}

#[test]
fn a_call_that_keeps_failing_the_same_way_is_never_told_if_the_task_is_done_answer() {
    // A real model's edit of calc.py matched nothing, three times in a row; it heard "if the task is done,
    // answer now" and answered "The task is done." with the bug in place. The note on the repeat and the
    // runaway guard's refusal now say only to change the call.
    let write =
        json!({"name": "write_file", "input": {"path": "calc.py", "content": "def add(a, b):\n    return a - b\n"}});
    let edit =
        json!({"name": "edit_file", "input": {"path": "calc.py", "old_text": "return -1", "new_text": "return 5"}});
    let steps = [write, edit.clone(), edit.clone(), edit, json!("Done.")];
    let mock = MockServer::start(&scripted("progress detection", &steps));
    let ws = Ws::new("failing-edits");
    let (result, _) = run(&mock, &ws, json!({}));
    assert_eq!(result.turns, 5);
    let requests = mock.requests();
    let again = last_result(&requests, 3);
    assert!(
        again.contains("[tooloop: no progress: edit_file(calc.py) failed again with exactly the same error"),
        "{again}"
    );
    let refused = last_result(&requests, 4);
    assert!(refused.starts_with("not run: same call and same input"), "the runaway guard's: {refused}");
    assert!(refused.contains("It failed the last time, and made as it is it will keep failing"), "{refused}");
    for told in [again, refused] {
        assert!(!told.contains("If the task is done"), "{told}");
    }
}

/// write hello.txt, look at it with the host's `peek` tool, write it again unchanged, answer: what the note on
/// the rewrite says, with `peek` registered of `kind` (None: no kind).
fn rewrite_after_a_host_look(kind: Option<tooloop::tools::ToolKind>) -> String {
    let steps = [
        write("hello.txt", "hi\n"),
        json!({"name": "peek", "input": {"path": "hello.txt"}}),
        write("hello.txt", "hi\n"),
        json!("done"),
    ];
    let mock = MockServer::start(&scripted("host read tool", &steps));
    let ws = Ws::new(if kind.is_some() { "peek-read" } else { "peek-none" });
    let options = json!({"model": "claude-sonnet-4-6", "api_key": "sk-ant-mock", "base_url": mock.base_url(),
        "builtin_tools": true, "workspace": ws.0, "sandbox": "off", "max_turns": 12, "stream": false,
        "progress_guard": {"wrap_up": false}});
    let agent = AgentOptions::from_value(options).unwrap().build().unwrap();
    let root = ws.0.clone();
    let schema = json!({"type": "object", "properties": {"path": {"type": "string"}}, "required": ["path"]});
    let peek = tooloop::Tool::new("peek", "Show a file.", schema, move |i: &Value, _: &tooloop::ToolContext<'_>| {
        Ok(tooloop::ToolOutput::Text(std::fs::read_to_string(root.join(i["path"].as_str().unwrap())).unwrap()))
    })
    .unwrap();
    agent
        .tools()
        .register(match kind {
            Some(k) => peek.kind(k).unwrap(),
            None => peek,
        })
        .unwrap();
    agent.run("write hello.txt", &mut |_| {}).unwrap();
    last_result(&mock.requests(), 3)
}

#[test]
fn a_host_tool_of_kind_read_is_looking_like_read_file_not_a_check_run_after_the_change() {
    // Reading the file is not running it: the rewrite's note asks for the check, as after a read_file.
    let told = rewrite_after_a_host_look(Some(tooloop::tools::ToolKind::Read));
    assert!(told.contains("Nothing has been run since you wrote it"), "{told}");
    // A tool of no kind may have run something: the usual note.
    let told = rewrite_after_a_host_look(None);
    assert!(!told.contains("Nothing has been run"), "{told}");
    assert!(told.contains("wrote exactly the content the file already had"), "{told}");
}

/// A file written by a command counts as a change: a real model wrote its answer with `grep -c ERROR app.log >
/// errors.txt`, ran the count again, was told that no file had been written in the run yet, and answered that
/// it had made no change. A command that writes nothing still gets that note.
#[test]
fn a_file_a_command_wrote_is_a_change_the_notes_know_of() {
    let steps = [bash("echo 37 > errors.txt"), bash("cat errors.txt"), bash("cat errors.txt"), json!("37.")];
    let mock = MockServer::start(&scripted("a command writes the answer", &steps));
    let ws = Ws::new("command-writes");
    let (result, _) = run(&mock, &ws, json!({}));
    assert_eq!(result.stop_reason, Some(StopReason::EndTurn));
    assert_eq!(std::fs::read_to_string(ws.0.join("errors.txt")).unwrap(), "37\n");
    let note = last_result(&mock.requests(), 3);
    assert!(note.contains("no progress") && note.contains("If the task is done, answer now"), "{note}");
    assert!(!note.contains("No file has been written"), "{note}");

    let steps = [bash("cat notes.txt"), bash("cat notes.txt"), json!("hi.")];
    let mock = MockServer::start(&scripted("a command that only reads", &steps));
    let ws = Ws::new("command-reads");
    std::fs::write(ws.0.join("notes.txt"), "hi\n").unwrap();
    let (result, _) = run(&mock, &ws, json!({}));
    assert_eq!(result.stop_reason, Some(StopReason::EndTurn));
    let note = last_result(&mock.requests(), 2);
    assert!(note.contains("No file has been written or edited in this run yet"), "{note}");
}
