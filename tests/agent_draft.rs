//! `draft_first` (issue 41 items 5–6): a run that starts a conversation sends its first request without
//! tools, asking for whole files in fenced blocks; the blocks are written as `write_file` calls and the run goes
//! on with the tools. Against the mock server on both wires, the built-in tools in a scratch workspace.
#![allow(clippy::unwrap_used, clippy::expect_used)]

#[path = "common/mock.rs"]
mod mock;
#[path = "common/tempdir.rs"]
mod tempdir;

use mock::MockServer;
use serde_json::{Value, json};
use tempdir::TempDir as Ws;
use tooloop::{AgentOptions, RunResult, StopReason};

const WRONG: &str = "def add(a, b):\n    return a - b\n";
const RIGHT: &str = "def add(a, b):\n    return a + b\n";
const FIXED: &str = "calc.py\n```python\ndef add(a, b):\n    return a + b\n```";
/// Sentences of the draft's note (`text_edits::DRAFT_NOTE`) and of the note on its files' last result.
const DRAFT_SAYS: &str = "answer this first message without tools";
const CHECK_SAYS: &str = "the files of your draft are written. Check them now";
/// The note on the last result when the draft's commands ran.
const RAN_SAYS: &str = "the files of your draft are written and its commands ran";

fn anthropic(i: usize, text: &str) -> Value {
    json!({"anthropic": {"id": format!("msg_{i:02}"), "type": "message", "role": "assistant",
        "model": "claude-sonnet-4-6", "content": [{"type": "text", "text": text}], "stop_reason": "end_turn",
        "stop_sequence": null, "usage": {"input_tokens": 100, "output_tokens": 10}}})
}

fn openai(text: &str) -> Value {
    json!({"openai": {"id": "c", "object": "chat.completion", "created": 1, "model": "m", "choices": [{
        "index": 0, "finish_reason": "stop", "message": {"role": "assistant", "content": text}}],
        "usage": {"prompt_tokens": 3, "completion_tokens": 2, "total_tokens": 5}}})
}

/// The mock and the options of one wire, with the answers `texts`.
fn setup(wire: &str, name: &str, texts: &[&str], extra: Value) -> (MockServer, Ws, AgentOptions) {
    let responses = texts.iter().enumerate().map(|(i, t)| answer(wire, i, t)).collect();
    setup_with(wire, name, responses, extra)
}

fn answer(wire: &str, i: usize, text: &str) -> Value {
    if wire == "openai" { openai(text) } else { anthropic(i, text) }
}

/// An answer cut off at max_tokens.
fn cut_off(wire: &str, text: &str) -> Value {
    let mut v = answer(wire, 0, text);
    if wire == "openai" {
        v["openai"]["choices"][0]["finish_reason"] = json!("length");
    } else {
        v["anthropic"]["stop_reason"] = json!("max_tokens");
    }
    v
}

/// [`setup`] with whole responses.
fn setup_with(wire: &str, name: &str, responses: Vec<Value>, extra: Value) -> (MockServer, Ws, AgentOptions) {
    let ws = Ws::new(name);
    std::fs::write(ws.file("calc.py"), WRONG).unwrap();
    let mock = MockServer::start(&json!({"description": "draft", "responses": responses}));
    let mut options = json!({"model": "claude-sonnet-4-6", "api_key": "sk-ant-mock", "base_url": mock.base_url(),
        "builtin_tools": true, "workspace": ws.0, "sandbox": "off", "max_turns": 6, "draft_first": true});
    if wire == "openai" {
        options["provider"] = json!("openai");
        options["base_url"] = json!(format!("{}/v1", mock.base_url()));
    }
    for (k, v) in extra.as_object().unwrap() {
        match v {
            Value::Null => drop(options.as_object_mut().unwrap().remove(k)),
            v => options[k] = v.clone(),
        }
    }
    (mock, ws, AgentOptions::from_value(options).unwrap())
}

fn has_tools(request: &Value) -> bool {
    request["body"]["tools"].as_array().is_some_and(|t| !t.is_empty())
}

fn says(request: &Value, what: &str) -> bool {
    request["body"]["messages"].to_string().contains(what)
}

fn read(ws: &Ws) -> String {
    std::fs::read_to_string(ws.file("calc.py")).unwrap()
}

#[test]
fn the_first_request_goes_without_tools_its_files_are_written_and_the_run_goes_on_with_them() {
    for wire in ["anthropic", "openai"] {
        for stream in [true, false] {
            let (mock, ws, options) = setup(wire, "draft-one", &[FIXED, "Done."], json!({"stream": stream}));
            let agent = options.build().unwrap();
            let result = agent.run("fix calc.py", &mut |_| {}).unwrap();
            let at = format!("{wire} stream {stream}");

            assert_eq!(read(&ws), RIGHT, "{at}");
            assert_eq!(result.files_changed, vec!["calc.py"], "{at}");
            assert_eq!((result.turns, result.text.as_str()), (2, "Done."), "{at}");
            let reqs = mock.requests();
            assert!(!has_tools(&reqs[0]) && reqs[0]["body"].get("tool_choice").is_none(), "{at}: {}", reqs[0]);
            assert!(says(&reqs[0], DRAFT_SAYS), "{at}: the draft asks for whole files");
            assert!(has_tools(&reqs[1]), "{at}: the tools are back after the draft");
            let messages = reqs[1]["body"]["messages"].as_array().unwrap();
            let result = messages.last().unwrap().to_string();
            assert!(result.contains(CHECK_SAYS), "{at}: the draft's files are to be checked: {result}");
            assert!(!says(&reqs[1], DRAFT_SAYS), "{at}: the note was in the draft's request only");
            assert!(!serde_json::to_string(&agent.messages()).unwrap().contains(DRAFT_SAYS), "{at}: not stored");
        }
    }
}

#[test]
fn a_draft_with_no_file_is_left_out_and_the_task_asked_again_with_the_tools() {
    for wire in ["anthropic", "openai"] {
        let (mock, ws, options) = setup(wire, "draft-none", &["calc.py subtracts.", "It subtracts."], json!({}));
        let agent = options.build().unwrap();
        let result = agent.run("what does calc.py do?", &mut |_| {}).unwrap();
        assert_eq!(read(&ws), WRONG);
        assert_eq!((result.turns, result.text.as_str()), (2, "It subtracts."), "{wire}");
        assert_eq!(result.stop_reason, Some(StopReason::EndTurn));
        let reqs = mock.requests();
        // The second request is the task alone, with the tools: the draft is not in it.
        assert!(has_tools(&reqs[1]) && !says(&reqs[1], "calc.py subtracts.") && !says(&reqs[1], DRAFT_SAYS));
        assert!(says(&reqs[1], "what does calc.py do?"), "{wire}");
        // Kept in the record, out of the API view.
        let entries = agent.conversation().snapshot();
        let draft = entries.iter().find(|e| e.content.iter().any(|b| format!("{b:?}").contains("subtracts."))).unwrap();
        assert_eq!(draft.status, tooloop::EntryStatus::Error, "{wire}");
        assert!(!serde_json::to_string(&agent.messages()).unwrap().contains("calc.py subtracts."), "{wire}");
    }
}

#[test]
fn only_the_run_that_starts_a_conversation_drafts() {
    // A first run answered in words (the draft left out, asked again with tools): the next run has no draft.
    let (mock, _ws, options) = setup("anthropic", "draft-chat", &["Hi.", "Hi.", "Sure."], json!({}));
    let agent = options.build().unwrap();
    agent.run("hello", &mut |_| {}).unwrap();
    agent.run("and now?", &mut |_| {}).unwrap();
    let reqs = mock.requests();
    assert!(!has_tools(&reqs[0]) && has_tools(&reqs[2]) && !says(&reqs[2], DRAFT_SAYS), "{}", reqs[2]);
}

#[test]
fn a_conversation_with_tool_calls_sends_no_draft() {
    // The first run drafts and writes; the next run of the same conversation has calls in its history.
    let (mock, _ws, options) = setup("anthropic", "draft-later", &[FIXED, "Done.", "Nothing else."], json!({}));
    let agent = options.build().unwrap();
    agent.run("fix calc.py", &mut |_| {}).unwrap();
    let result = agent.run("anything else?", &mut |_| {}).unwrap();
    assert_eq!((result.turns, result.text.as_str()), (1, "Nothing else."));
    let reqs = mock.requests();
    assert!(has_tools(&reqs[2]) && !says(&reqs[2], DRAFT_SAYS), "{}", reqs[2]);
}

#[test]
fn off_by_default_and_never_without_the_builtin_write_file_or_with_the_hosts_tool_choice() {
    for (name, extra) in [
        ("default", json!({"draft_first": null})),
        ("no-write", json!({"builtin_tools": ["read_file", "bash"]})),
        ("choice", json!({"tool_choice": {"type": "any"}})),
    ] {
        let (mock, ws, options) = setup("anthropic", "draft-off", &[FIXED, "unused"], extra);
        let result: RunResult = options.build().unwrap().run("fix calc.py", &mut |_| {}).unwrap();
        let reqs = mock.requests();
        assert!(has_tools(&reqs[0]) && !says(&reqs[0], DRAFT_SAYS), "{name}: {}", reqs[0]);
        assert_eq!(read(&ws), WRONG, "{name}: a fenced file without text_edits is only text");
        assert_eq!(result.turns, 1, "{name}");
    }
}

#[test]
fn a_draft_that_passes_the_check_ends_the_run_checked() {
    let (mock, ws, options) =
        setup("anthropic", "draft-check", &[FIXED, "Fixed."], json!({"check": "python3 test_calc.py"}));
    std::fs::write(ws.file("test_calc.py"), "from calc import add\nassert add(2, 3) == 5\n").unwrap();
    let result = options.build().unwrap().run("fix calc.py", &mut |_| {}).unwrap();
    assert_eq!(read(&ws), RIGHT);
    assert!(result.check.as_ref().unwrap().passed, "{:?}", result.check);
    assert_eq!((result.turns, result.text.as_str()), (2, "Fixed."));
    assert!(!has_tools(&mock.requests()[0]));
}

#[test]
fn a_draft_with_no_file_is_asked_again_before_the_check_runs() {
    // The order at the stop: draft, then check. The check runs once something could have changed.
    let (mock, ws, options) = setup(
        "anthropic",
        "draft-order",
        &["It subtracts; change - to +.", FIXED, "Fixed."],
        json!({"check": "python3 test_calc.py", "text_edits": true}),
    );
    std::fs::write(ws.file("test_calc.py"), "from calc import add\nassert add(2, 3) == 5\n").unwrap();
    let result = options.build().unwrap().run("fix calc.py", &mut |_| {}).unwrap();
    let reqs = mock.requests();
    assert!(!says(&reqs[1], "It subtracts") && !says(&reqs[1], "check"), "{}", reqs[1]["body"]["messages"]);
    assert_eq!(read(&ws), RIGHT);
    assert!(result.check.as_ref().unwrap().passed);
    assert_eq!(result.turns, 3);
}

#[test]
fn a_fallback_model_is_sent_the_draft_as_it_was() {
    // The first model is overloaded: the next one on the same server gets the draft's request built again.
    let ws = Ws::new("draft-fallback");
    std::fs::write(ws.file("calc.py"), WRONG).unwrap();
    let overloaded = json!({"status": 529, "json": {"type": "error",
        "error": {"type": "overloaded_error", "message": "Overloaded"}}});
    let mock = MockServer::start(&json!({"responses": [overloaded, anthropic(1, FIXED), anthropic(2, "Done.")]}));
    let options = json!({"model": "claude-sonnet-4-6", "api_key": "sk-ant-mock", "base_url": mock.base_url(),
        "builtin_tools": true, "workspace": ws.0, "sandbox": "off", "max_turns": 6, "draft_first": true,
        "max_retries": 0, "fallback_models": ["claude-haiku-4-5"]});
    let result = AgentOptions::from_value(options).unwrap().build().unwrap().run("fix calc.py", &mut |_| {}).unwrap();
    let reqs = mock.requests();
    assert_eq!(reqs[1]["body"]["model"], "claude-haiku-4-5");
    assert!(!has_tools(&reqs[1]) && says(&reqs[1], DRAFT_SAYS), "{}", reqs[1]);
    assert_eq!(reqs[1]["body"]["messages"].to_string().matches(DRAFT_SAYS).count(), 1, "the note once");
    assert!(has_tools(&reqs[2]));
    assert_eq!(read(&ws), RIGHT);
    assert_eq!(result.text, "Done.");
}

#[test]
fn a_drafts_commands_run_after_its_files_and_their_results_go_back() {
    let run = "python3 -c 'import calc; print(\"sum\", calc.add(2, 3))'";
    // The command first in the text: it still runs after the file is written.
    let draft = format!("Run it:\n```bash\n{run}\n```\n\n{FIXED}");
    for wire in ["anthropic", "openai"] {
        let (mock, ws, options) = setup(wire, "draft-run", &[&draft, "It prints sum 5."], json!({}));
        let result = options.build().unwrap().run("fix calc.py", &mut |_| {}).unwrap();
        assert_eq!(read(&ws), RIGHT, "{wire}");
        assert_eq!(result.commands_run.len(), 1, "{wire}: {:?}", result.commands_run);
        assert_eq!((result.commands_run[0].command.as_str(), result.commands_run[0].exit_code), (run, Some(0)));
        assert_eq!((result.turns, result.text.as_str()), (2, "It prints sum 5."), "{wire}");
        let reqs = mock.requests();
        assert!(has_tools(&reqs[1]), "{wire}");
        let last = reqs[1]["body"]["messages"].as_array().unwrap().last().unwrap().to_string();
        assert!(last.contains("sum 5") && last.contains(RAN_SAYS) && !last.contains(CHECK_SAYS), "{wire}: {last}");
    }
}

#[test]
fn a_draft_of_commands_alone_does_the_task() {
    let draft = "```console\n$ sed -i 's/a - b/a + b/' calc.py\n$ grep -c + calc.py\n1\n```";
    let (_mock, ws, options) = setup("anthropic", "draft-sed", &[draft, "Fixed."], json!({}));
    let result = options.build().unwrap().run("fix calc.py", &mut |_| {}).unwrap();
    assert_eq!(read(&ws), RIGHT);
    assert_eq!(result.files_changed, vec!["calc.py"]);
    let run: Vec<_> = result.commands_run.iter().map(|c| (c.command.as_str(), c.exit_code)).collect();
    assert_eq!(run, vec![("sed -i 's/a - b/a + b/' calc.py\ngrep -c + calc.py", Some(0))]);
    assert_eq!((result.turns, result.text.as_str()), (2, "Fixed."));
}

#[test]
fn shell_blocks_run_only_from_the_draft_and_only_with_the_builtin_bash() {
    let touch = "Then:\n```bash\ntouch ran.txt\n```";
    // text_edits without the draft: the file is written, the shell block is only text.
    let answer = format!("{FIXED}\n{touch}");
    let extra = json!({"draft_first": null, "text_edits": true});
    let (_mock, ws, options) = setup("anthropic", "draft-shell-later", &[&answer, "Done."], extra);
    let result = options.build().unwrap().run("fix calc.py", &mut |_| {}).unwrap();
    assert_eq!(read(&ws), RIGHT);
    assert!(!ws.file("ran.txt").exists() && result.commands_run.is_empty());
    // A draft without the built-in bash: its files are written, its commands are not run.
    let extra = json!({"builtin_tools": ["read_file", "write_file"]});
    let (mock, ws, options) = setup("anthropic", "draft-no-bash", &[&answer, "Done."], extra);
    let result = options.build().unwrap().run("fix calc.py", &mut |_| {}).unwrap();
    assert_eq!(read(&ws), RIGHT);
    assert!(!ws.file("ran.txt").exists() && result.commands_run.is_empty());
    assert!(mock.requests()[1]["body"]["messages"].to_string().contains(CHECK_SAYS));
}

#[test]
fn a_draft_that_echoes_its_note_writes_its_files_not_the_notes_example() {
    let echo = format!("{FIXED}\n\n{}", tooloop::text_edits::DRAFT_NOTE);
    for wire in ["anthropic", "openai"] {
        let (mock, ws, options) = setup(wire, "draft-echo", &[&echo, "Done."], json!({}));
        let agent = options.build().unwrap();
        let result = agent.run("fix calc.py", &mut |_| {}).unwrap();
        assert_eq!(read(&ws), RIGHT, "{wire}");
        assert!(!ws.file("hello.py").exists(), "{wire}: the note's example is no file");
        assert_eq!(result.files_changed, vec!["calc.py"], "{wire}");
        let reqs = mock.requests();
        assert!(!says(&reqs[1], DRAFT_SAYS), "{wire}: the echo is not sent back: {}", reqs[1]["body"]["messages"]);
        assert!(says(&reqs[1], "return a + b"), "{wire}: the draft's own words are");
        assert!(!serde_json::to_string(&agent.messages()).unwrap().contains(DRAFT_SAYS), "{wire}");
    }
    // A draft that is the echo alone has no file or command: left out, the task asked again with the tools.
    let (mock, ws, options) =
        setup("anthropic", "draft-echo-only", &[tooloop::text_edits::DRAFT_NOTE, "It subtracts."], json!({}));
    let result = options.build().unwrap().run("what does calc.py do?", &mut |_| {}).unwrap();
    assert!(!ws.file("hello.py").exists());
    assert_eq!((result.turns, result.text.as_str()), (2, "It subtracts."));
    let reqs = mock.requests();
    assert!(has_tools(&reqs[1]) && !says(&reqs[1], DRAFT_SAYS), "{}", reqs[1]["body"]["messages"]);
}

#[test]
fn a_draft_that_gives_the_notes_example_alone_writes_its_files_not_the_example() {
    // Qwen2.5-Coder-1.5B's draft of a task about greet.py: its file, then the note's example word for word.
    let draft = format!("{FIXED}\n\n{}", tooloop::text_edits::NOTE_EXAMPLE);
    for wire in ["anthropic", "openai"] {
        let (mock, ws, options) = setup(wire, "draft-example", &[&draft, "Done."], json!({}));
        let result = options.build().unwrap().run("fix calc.py", &mut |_| {}).unwrap();
        assert_eq!(read(&ws), RIGHT, "{wire}");
        assert!(!ws.file("hello.py").exists(), "{wire}: the note's example is no file");
        assert_eq!(result.files_changed, vec!["calc.py"], "{wire}");
        assert!(!says(&mock.requests()[1], "print('hi')"), "{wire}: nor is it the model's words");
    }
    // A task that names the example's file may be given it: the block is that file.
    let (_mock, ws, options) = setup("anthropic", "draft-example-asked", &[&draft, "Done."], json!({}));
    let result = options.build().unwrap().run("fix calc.py and add hello.py printing hi", &mut |_| {}).unwrap();
    assert_eq!(std::fs::read_to_string(ws.file("hello.py")).unwrap(), "print('hi')\n");
    assert_eq!(result.files_changed, vec!["calc.py", "hello.py"]);
}

#[test]
fn a_draft_that_names_its_files_mid_sentence_writes_them() {
    // Qwen2.5-Coder-1.5B's three_files drafts: each file under a step that changes it, named mid-sentence; the
    // files were lost and the run changed nothing. A usage example after them is no file.
    let draft = "To add it:\n\n1. Modify `calc.py` to add the numbers in the output:\n```python\ndef add(a, b):\n    \
                 return a + b\n```\n\n2. Create a new file `use.py` with the following content:\n```python\nimport calc\n\
                 print(calc.add(2, 3))\n```\n\nNow, when you run `use.py`, it will print:\n```\n5\n```";
    for wire in ["anthropic", "openai"] {
        let (mock, ws, options) = setup(wire, "draft-mid-sentence", &[draft, "Done."], json!({}));
        let result = options.build().unwrap().run("fix calc.py and use it in use.py", &mut |_| {}).unwrap();
        assert_eq!(read(&ws), RIGHT, "{wire}");
        assert_eq!(std::fs::read_to_string(ws.file("use.py")).unwrap(), "import calc\nprint(calc.add(2, 3))\n");
        assert_eq!(result.files_changed, vec!["calc.py", "use.py"], "{wire}");
        assert!(has_tools(&mock.requests()[1]), "{wire}: the run goes on with the tools to check them");
    }
}

#[test]
fn a_draft_cut_off_in_a_block_writes_the_files_before_it_and_runs_nothing() {
    // Cut inside the test's block, after a whole calc.py and a command: calc.py is written; the test is not,
    // nor is the command run (it may need the file that was cut); the model is told what is missing.
    let draft = format!("{FIXED}\nRun:\n```bash\ntouch ran.txt\n```\ntest_calc.py\n```python\nimport calc\ndef te");
    for wire in ["anthropic", "openai"] {
        for stream in [true, false] {
            let at = format!("{wire} stream {stream}");
            let responses = vec![cut_off(wire, &draft), answer(wire, 1, "Done.")];
            let (mock, ws, options) = setup_with(wire, "draft-cut", responses, json!({"stream": stream}));
            let result = options.build().unwrap().run("fix calc.py and test it", &mut |_| {}).unwrap();
            assert_eq!(read(&ws), RIGHT, "{at}");
            assert!(!ws.file("test_calc.py").exists() && !ws.file("ran.txt").exists(), "{at}");
            assert!(result.commands_run.is_empty(), "{at}");
            assert_eq!((result.turns, result.text.as_str()), (2, "Done."), "{at}");
            let reqs = mock.requests();
            assert!(has_tools(&reqs[1]), "{at}");
            let last = reqs[1]["body"]["messages"].as_array().unwrap().last().unwrap().to_string();
            assert!(last.contains("your draft ended inside the block of `test_calc.py`"), "{at}: {last}");
            assert!(!last.contains(CHECK_SAYS) && !last.contains(RAN_SAYS), "{at}: {last}");
        }
    }
    // A draft that ends inside a block without the cut (the model never closed it): the same.
    let responses = vec![answer("anthropic", 0, &draft), answer("anthropic", 1, "Done.")];
    let (mock, ws, options) = setup_with("anthropic", "draft-unclosed", responses, json!({}));
    let result = options.build().unwrap().run("fix calc.py and test it", &mut |_| {}).unwrap();
    assert_eq!(read(&ws), RIGHT);
    assert!(!ws.file("ran.txt").exists() && result.commands_run.is_empty());
    assert!(says(&mock.requests()[1], "your draft ended inside the block of `test_calc.py`"));
    // A block that repeats a line until the cut: the note shows which, so it is not written so again.
    let draft = format!("{FIXED}\ntest_calc.py\n```python\nimport calc\n{}", "assert calc.add(1, 1) == 2\n".repeat(6));
    let responses = vec![cut_off("openai", &draft), answer("openai", 1, "Done.")];
    let (mock, _ws, options) = setup_with("openai", "draft-cut-again", responses, json!({}));
    options.build().unwrap().run("fix calc.py and test it", &mut |_| {}).unwrap();
    assert!(says(&mock.requests()[1], "gave the line `assert calc.add(1, 1) == 2` 6 times over"));
    // Cut inside a block that rewrites a file given whole before it: neither version is written.
    let draft = format!("{FIXED}\nOr better:\ncalc.py\n```python\ndef add(a, b):\n    return su");
    let responses = vec![cut_off("anthropic", &draft), answer("anthropic", 1, "Sorry.")];
    let (_mock, ws, options) = setup_with("anthropic", "draft-cut-same", responses, json!({}));
    let result = options.build().unwrap().run("fix calc.py", &mut |_| {}).unwrap();
    assert_eq!(read(&ws), WRONG);
    assert!(result.files_changed.is_empty());
}

#[test]
fn a_draft_cut_off_with_no_whole_file_is_left_out_and_the_task_asked_again_with_the_tools() {
    for wire in ["anthropic", "openai"] {
        let draft = "calc.py\n```python\ndef add(a, b):\n    return a +";
        let responses = vec![cut_off(wire, draft), answer(wire, 1, "I need the tools.")];
        let (mock, ws, options) = setup_with(wire, "draft-cut-none", responses, json!({}));
        let agent = options.build().unwrap();
        let result = agent.run("fix calc.py", &mut |_| {}).unwrap();
        assert_eq!(read(&ws), WRONG, "{wire}");
        assert_eq!((result.turns, result.text.as_str()), (2, "I need the tools."), "{wire}");
        assert_eq!(result.stop_reason, Some(StopReason::EndTurn), "{wire}");
        let reqs = mock.requests();
        assert!(has_tools(&reqs[1]) && !says(&reqs[1], "return a +") && !says(&reqs[1], DRAFT_SAYS), "{wire}");
        assert!(!serde_json::to_string(&agent.messages()).unwrap().contains("return a +"), "{wire}");
    }
}

#[test]
fn an_answer_that_writes_the_drafts_results_back_is_left_out_once_and_asked_again_warmer() {
    // Qwen2.5-Coder-1.5B, after its draft's test failed: the results in its chat template's tags, note and all.
    let draft = format!("{FIXED}\n\n```bash\npython3 -c 'import calc; print(calc.add(2, 3))'\n```");
    let echo = format!("<tool_response>\n5\n\n[tooloop: {RAN_SAYS} (their results are above).]\n</tool_response>");
    for wire in ["anthropic", "openai"] {
        let extra = json!({"temperature": 0.2, "progress_guard": {"unstick_temperature": 0.8}});
        let (mock, ws, options) = setup(wire, "draft-echo", &[&draft, &echo, "Fixed: add adds."], extra);
        let agent = options.build().unwrap();
        let result = agent.run("fix calc.py", &mut |_| {}).unwrap();
        assert_eq!((read(&ws), result.text.as_str()), (RIGHT.to_string(), "Fixed: add adds."), "{wire}");
        let reqs = mock.requests();
        assert_eq!(reqs.len(), 3, "{wire}");
        // The third request is the second again, without the echo, and warmer.
        assert_eq!(reqs[2]["body"]["messages"], reqs[1]["body"]["messages"], "{wire}");
        assert_eq!(
            (reqs[1]["body"]["temperature"].as_f64(), reqs[2]["body"]["temperature"].as_f64()),
            (Some(0.2), Some(0.8))
        );
        assert!(!serde_json::to_string(&agent.messages()).unwrap().contains("<tool_response>"), "{wire}");
    }
    // Once a run: an echo again is the answer (the host's own correction, if any, takes it from there).
    let (mock, _ws, options) = setup("anthropic", "draft-echo-twice", &[&draft, &echo, &echo], json!({}));
    let result = options.build().unwrap().run("fix calc.py", &mut |_| {}).unwrap();
    assert_eq!((mock.requests().len(), result.text.as_str()), (3, echo.as_str()));
    // No draft, no such answer: a text that quotes the note in a run with no draft stays the answer.
    let (mock, _ws, options) = setup("anthropic", "no-draft-echo", &[&echo], json!({"draft_first": false}));
    let result = options.build().unwrap().run("fix calc.py", &mut |_| {}).unwrap();
    assert_eq!((mock.requests().len(), result.text.as_str()), (1, echo.as_str()));
}

#[test]
fn a_left_out_answer_stays_out_of_a_resumed_conversation() {
    // The session file says so too: loaded again, the conversation is the one the run ended with.
    let draft = format!("{FIXED}\n\n```bash\npython3 -c 'import calc; print(calc.add(2, 3))'\n```");
    let echo = format!("<tool_response>\n5\n\n[tooloop: {RAN_SAYS} (their results are above).]\n</tool_response>");
    let cases = [
        ("echo", vec![draft.as_str(), &echo, "Fixed."], "session.jsonl"),
        ("words", vec!["In words.", "Fixed."], "session.jsonl"),
        ("echo-sqlite", vec![draft.as_str(), &echo, "Fixed."], "sessions.db#t1"),
    ];
    for (name, answers, file) in cases {
        let (_mock, ws, _) = setup("anthropic", &format!("{name}-sessions"), &[], json!({}));
        let session = ws.file(file);
        let (_mock, _ws2, options) = setup("anthropic", name, &answers, json!({"session": session}));
        let agent = options.build().unwrap();
        agent.run("fix calc.py", &mut |_| {}).unwrap();
        let ran = serde_json::to_string(&agent.messages()).unwrap();
        drop(agent);
        let (_mock, _ws3, options) = setup("anthropic", &format!("{name}-resumed"), &[], json!({"session": session}));
        let resumed = serde_json::to_string(&options.build().unwrap().messages()).unwrap();
        assert_eq!(resumed, ran, "{name}");
        assert!(!resumed.contains("<tool_response>") && !resumed.contains("In words."), "{name}: {resumed}");
    }
}
