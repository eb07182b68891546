//! Permission rules read bash with bash's grammar (issue 38): the bypasses of the old hand-written splitter
//! and of the read-only guess, as tables; path rules judged on the resolved path; and a property over
//! scripts built from fragments, checked against what bash itself runs.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::fs;
use std::os::unix::fs::symlink;
use std::path::Path;

use serde_json::{Value, json};
use tooloop::CancelToken;
use tooloop::builtin::{BashOptions, SandboxMode, Workspace, run_bash};
use tooloop::rules::{PermissionRules, RuleDecision, read_only_command};

#[path = "common/require.rs"]
mod require;
#[path = "common/tempdir.rs"]
mod tempdir;

fn rules(v: Value) -> PermissionRules {
    PermissionRules::from_value(&v).unwrap().unwrap()
}

fn bash(r: &PermissionRules, command: &str) -> RuleDecision {
    r.decide("bash", &json!({"command": command}), Path::new("/ws"))
}

// ---------------------------------------------------------------------------------------------------------
// Allow rules apply only to plain commands
// ---------------------------------------------------------------------------------------------------------

#[test]
fn an_allow_rule_applies_only_when_the_whole_script_is_plain_allowed_commands() {
    let r = rules(json!({"allow": ["Bash(echo:*)", "Bash(ls)", "Bash(git status:*)", "Bash(npm test:*)"]}));
    let allowed = [
        "echo hi",
        "echo 'a # b' \"c ; d\"",
        "echo hi && ls; git status | echo x",
        "echo hi >/dev/null 2>&1",
        "echo hi 2>/dev/null",
        "echo hi >&2",
        "timeout 60 npm test",
        "nice -n 5 npm test -- -k x",
        "if ls; then echo y; else echo n; fi",
        "(ls) && { echo a; }",
        "! ls",
        "echo a\\ b",
        "echo hi\necho there",
    ];
    for cmd in allowed {
        assert!(matches!(bash(&r, cmd), RuleDecision::Allow(_)), "{cmd:?}: {:?}", bash(&r, cmd));
    }
    let asked = [
        // The issue's own: a quote in a comment is no open quote; the second line is a command.
        "echo hi #'\ntouch pwned",
        "echo hi # a comment",
        "ls #'\ntouch x",
        "echo X > f 2>&1",
        "echo x >> f",
        "echo x >&f",
        "echo x > /dev/null.d/f",
        "echo $(touch x)",
        "echo `touch x`",
        "echo <(touch x)",
        "echo \"$(touch x)\"",
        "echo $HOME",
        "echo ${X:-y}",
        "echo $((1+2))",
        "cat <<EOF\nx\nEOF",
        "echo x <<< y",
        "f() { echo x; }; f",
        "echo x & echo y",
        "X=1 echo x",
        "LD_PRELOAD=/tmp/x.so ls",
        "env X=1 echo x",
        "eval echo x",
        "bash -c 'echo x'",
        "sh -c 'echo x'",
        "env -S 'echo x'",
        "echo x | xargs echo",
        "for i in a; do echo $i; done",
        "case x in x) echo y;; esac",
        "echo 'unterminated",
        "echo hi; touch x",
        "echo hi && rm -rf /",
        "./ls",
        "/opt/evil/ls",
        "l* x",
        "{echo,x}",
        "~/bin/echo x",
        "sudo echo x",
        "[ -f x ] && echo y",
        "echo x |& touch y",
        "coproc echo x",
        "echo $'\\x41'",
        "echo x; exec 3>f",
        // Found by the property below: the grammar hangs the words after a redirection on it.
        "echo >&2 <(touch w)",
        "echo >/dev/null $(touch w) x",
        "echo 2>/dev/null x",
        // Found by the property below: bash keeps a carriage return in the word (a file named "2\r").
        "echo >&2\r",
        "echo hi\u{a0}x",
        "",
    ];
    for cmd in asked {
        assert!(!matches!(bash(&r, cmd), RuleDecision::Allow(_)), "{cmd:?} was allowed");
    }
    // Even a rule naming the shell does not let code given as text through.
    let shells =
        rules(json!({"allow": ["Bash(bash:*)", "Bash(eval:*)", "Bash(xargs:*)", "Bash(find:*)", "Bash(env:*)"]}));
    for cmd in ["bash -c 'rm x'", "eval rm x", "echo rm | xargs rm", "find . -exec rm {} +", "env -S 'rm x'", "bash"] {
        assert!(!matches!(bash(&shells, cmd), RuleDecision::Allow(_)), "{cmd:?} was allowed");
    }
}

// ---------------------------------------------------------------------------------------------------------
// Deny rules match a command anywhere
// ---------------------------------------------------------------------------------------------------------

#[test]
fn a_deny_rule_matches_the_command_name_wherever_it_runs() {
    let r = rules(json!({"allow": ["Bash"], "deny": ["Bash(rm:*)"]}));
    let denied = [
        "rm x",
        "\"rm\" x",
        "'rm' x",
        "\\rm x",
        "r\\m x",
        "/bin/rm x",
        "../../bin/rm x",
        "bash -c 'rm -rf /'",
        "sh -c \"rm x\"",
        "bash -lc 'rm x'",
        "bash -c 'bash -c \"rm x\"'",
        "eval rm x",
        "eval 'rm x'",
        "echo x | xargs rm",
        "xargs -0 -n1 rm < list",
        "find . -name x -exec rm {} +",
        "find . -execdir rm {} \\;",
        "time -p rm x",
        "time rm x",
        "env rm x",
        "env -i X=1 rm x",
        "env -S 'rm x'",
        "env --split-string='rm x'",
        "nice rm x",
        "nice -n 10 rm x",
        "ionice -c 3 rm x",
        "timeout -s KILL 5 rm x",
        "nohup rm x",
        "sudo -u root rm x",
        "command rm x",
        "builtin rm x",
        "exec rm x",
        "stdbuf -oL rm x",
        "setsid rm x",
        "busybox rm x",
        "watch rm x",
        "X=1 rm x",
        // Found by the property below: bash's `time` keyword takes assignments after it.
        "time -p X=1 rm x",
        "sudo X=1 rm x",
        // Found by the property below: tree-sitter-bash reads this line break as part of a word; bash ends
        // the command there.
        "echo touch | sh #'\n\\rm v",
        "ls #'\n\\rm v",
        // Found by the property below: an unterminated heredoc, and backquotes in one.
        "git status <<EOF\neval 'echo `rm x` # x\n",
        "cat <<EOF\n`rm x`\nEOF",
        // Found by the property below: a computed word where a wrapper's options end.
        "echo x | xargs r$X",
        // Found by the property below: `\` escapes the `\r` of `\r\n` for bash, and the line ends.
        "cat f\\\r\nrm x",
        "nice r$X",
        "echo $(rm x)",
        "echo `rm x`",
        "cat <(rm x)",
        "echo \"$(rm x)\"",
        "f() { rm x; }",
        "for f in *; do rm $f; done",
        "case a in a) rm x;; esac",
        "if true; then rm x; fi",
        "cat <<EOF\n$(rm x)\nEOF",
        "bash <<'EOF'\nrm x\nEOF",
        "bash <<< 'rm x'",
        "echo hi #'\nrm x",
    ];
    for cmd in denied {
        assert!(matches!(bash(&r, cmd), RuleDecision::Deny(_)), "{cmd:?}: {:?}", bash(&r, cmd));
    }
    // What the rules cannot read is refused under a deny rule: it could run anything.
    let unreadable = [
        "echo 'rm x' | sh",
        "echo rm x | bash",
        "bash -s < script",
        "bash -c \"$CMD\"",
        "eval \"$CMD\"",
        "$CMD x",
        "$(echo rm) x",
        "/bin/r? x",
        "{r,}m x",
        "echo x | xargs -I{} {} y",
        "find . -exec {} \\;",
        "echo 'unterminated",
        "if true; then",
        "cat <<EOF | bash\nrm $X\nEOF",
    ];
    for cmd in unreadable {
        assert!(matches!(bash(&r, cmd), RuleDecision::Deny(_)), "{cmd:?}: {:?}", bash(&r, cmd));
    }
    // An argument computed at run time may be the one the rule names.
    let args = rules(json!({"deny": ["Bash(rm -rf:*)"]}));
    for cmd in ["rm -rf /", "rm $FLAGS /", "rm -r? /", "rm \"-rf\" /"] {
        assert!(matches!(bash(&args, cmd), RuleDecision::Deny(_)), "{cmd:?}: {:?}", bash(&args, cmd));
    }
    // Not everything is rm.
    for cmd in ["echo rm", "git rm x", "grep rm f", "echo 'rm x'", "cat rm", "npm test", "bash script.sh"] {
        assert_eq!(bash(&r, cmd), RuleDecision::Allow("Bash".into()), "{cmd:?}");
    }
}

#[test]
fn an_ask_rule_matches_anywhere_and_asks_for_what_it_cannot_read() {
    let r = rules(json!({"allow": ["Bash(echo:*)"], "ask": ["Bash(git push:*)"]}));
    for cmd in ["echo x && git push", "bash -c 'git push'", "echo $(git push)", "$X", "echo x | sh"] {
        assert!(matches!(bash(&r, cmd), RuleDecision::Ask(_)), "{cmd:?}: {:?}", bash(&r, cmd));
    }
}

/// fuzz/shell_rules: a quoted `"F=x"y` in first place is a command named `F=xy` (bash runs it; only an
/// unquoted one is an assignment), but the walker skipped it as an assignment, so no rule saw it.
#[test]
fn a_quoted_assignment_in_first_place_is_a_command_name() {
    assert_eq!(tooloop::rules::split_command("\"F=tg\"fx"), vec!["F=tgfx"]);
    let r = rules(json!({"deny": ["Bash(F=tgfx:*)"]}));
    assert!(matches!(bash(&r, "\"F=tg\"fx"), RuleDecision::Deny(_)));
    assert!(matches!(bash(&r, "sudo \"F=tg\"fx"), RuleDecision::NoMatch), "after a wrapper it is an assignment");
}

/// fuzz/shell_rules: a command of only a Unicode blank was taken for an empty one before it was read; bash
/// runs it as a command name, which no rule can read, so a deny rule refuses it.
#[test]
fn a_command_of_a_unicode_blank_is_not_empty() {
    let r = rules(json!({"allow": ["Bash"], "deny": ["Bash(rm:*)"]}));
    assert!(matches!(bash(&r, "\u{85}"), RuleDecision::Deny(_)));
    assert!(matches!(bash(&r, "\u{a0}"), RuleDecision::Deny(_)));
    assert_eq!(bash(&r, " \t\n"), RuleDecision::Allow("Bash".into()));
}

// ---------------------------------------------------------------------------------------------------------
// The read-only guess
// ---------------------------------------------------------------------------------------------------------

#[test]
fn read_only_command_trusts_only_plain_readers_with_safe_arguments() {
    let read_only = [
        "ls -la",
        "cat a b",
        "git status",
        "git --no-pager log -p -3",
        "git diff HEAD~1 -- src",
        "git show HEAD:README.md",
        "grep -rn foo src 2>/dev/null",
        "rg foo -g '*.rs'",
        "sort a | uniq -c",
        "sort -n -k2 a",
        "sed -n '1,5p' f",
        "sed 's/a/b/g' f",
        "sed -n -e '/x/p' -e '$=' f",
        "find . -name '*.rs' -type f",
        "head -n 5 a && wc -l a",
        "timeout 5 ls",
        "if true; then ls; fi",
        "tree -L 2",
        "date +%s",
        "jq .x f.json",
        "echo '$(touch x)'",
        "cd src && ls",
    ];
    assert!(!read_only_command("ls >&2 <(touch w)"));
    for cmd in read_only {
        assert!(read_only_command(cmd), "{cmd:?} should be read-only");
    }
    let not_read_only = [
        // The issue's bypasses.
        "awk 'BEGIN{print \"touch x\" | \"sh\"}'",
        "awk '{print}' f",
        "sed -n '1e touch x' f",
        "sed 's/a/touch x/e' f",
        "sed 's/a/b/w out' f",
        "sed -n '1w out' f",
        "sed -i s/a/b/ f",
        "sed -f script.sed f",
        "sed -ni p f",
        "sort -o out in",
        "sort -uo out in",
        "sort --output=out in",
        "sort --compress-program=sh in",
        "git --config-env=core.fsmonitor=X status",
        "git -c core.fsmonitor='touch x' status",
        "git -C /tmp/other status",
        "GIT_EXTERNAL_DIFF=./x git diff",
        "GIT_DIR=/tmp/x git log",
        "env GIT_EXTERNAL_DIFF=./x git diff",
        "git diff --ext-diff",
        "git diff --output=patch",
        "git grep -O'touch x' foo",
        "git grep --open-files-in-pager=sh foo",
        "git cat-file --textconv HEAD:x",
        "git reflog expire --all",
        "git branch new",
        "git commit -m x",
        "./tools/cat README.md",
        "tools/cat README.md",
        "/usr/bin/cat x",
        "echo X > f 2>&1",
        "echo X >> f",
        "ls #'\ntouch x",
        "ls # just a comment",
        "ls $(touch x)",
        "ls `touch x`",
        "cat <(touch x)",
        "X=1 ls",
        "env ls",
        "rm x",
        "find . -delete",
        "find . -exec touch {} +",
        "find . -fprint out",
        "tree -o out.txt",
        "tree -R -H x",
        "uniq in.txt out.txt",
        "file -C -m magic",
        "rg --pre ./x foo",
        "fd -x touch",
        "date -s 12:00",
        "hostname evil",
        "less f",
        "xargs cat",
        "bash -c ls",
        "eval ls",
        "time -o out ls",
        "ls &",
        "cat <<EOF\nx\nEOF",
        "ls 'unterminated",
        "",
    ];
    for cmd in not_read_only {
        assert!(!read_only_command(cmd), "{cmd:?} judged read-only");
    }
}

// ---------------------------------------------------------------------------------------------------------
// Path rules judge the resolved path
// ---------------------------------------------------------------------------------------------------------

#[test]
fn path_rules_judge_where_a_symlink_leads_and_read_rules_cover_the_search_tools() {
    let tmp = tempdir::TempDir::new("rules-paths");
    let ws = tmp.0.join("ws");
    fs::create_dir_all(ws.join("src")).unwrap();
    fs::create_dir_all(ws.join(".git/hooks")).unwrap();
    fs::create_dir_all(ws.join("docs")).unwrap();
    fs::create_dir_all(ws.join("config")).unwrap();
    fs::write(ws.join(".env"), "KEY=1\n").unwrap();
    fs::write(ws.join("config/secrets.txt"), "k\n").unwrap();
    fs::write(ws.join("docs/a.md"), "a\n").unwrap();
    symlink("../.git/hooks", ws.join("src/hooks")).unwrap();
    symlink(".env", ws.join("settings")).unwrap();
    symlink("../config", ws.join("docs/conf")).unwrap();
    let r = rules(json!({"allow": ["Edit(src/**)", "Read(docs/**)"], "deny": ["Read(.env)", "Read(config/**)"]}));
    let d = |tool: &str, input: Value| r.decide(tool, &input, &ws);

    // Edit(src/**) does not reach .git/hooks through src/hooks.
    assert!(matches!(d("write_file", json!({"path": "src/main.rs"})), RuleDecision::Allow(_)));
    assert_eq!(d("write_file", json!({"path": "src/hooks/pre-commit"})), RuleDecision::NoMatch);
    assert_eq!(d("edit_file", json!({"path": "src/hooks/pre-commit"})), RuleDecision::NoMatch);
    // Read(.env) denies .env to every reading tool, and through a link to it.
    for (tool, input) in [
        ("read_file", json!({"path": ".env"})),
        ("read_file", json!({"path": "settings"})),
        ("read_file", json!({"path": "./src/../.env"})),
        ("read_file", json!({"path": ws.join("settings").to_str().unwrap()})),
        ("grep", json!({"pattern": "KEY", "path": ".env"})),
        ("glob", json!({"pattern": "*", "path": ".env"})),
        ("read_file", json!({"path": "docs/conf/secrets.txt"})),
        // A search rooted above a denied path that its walk reaches.
        ("grep", json!({"pattern": "k"})),
        ("grep", json!({"pattern": "k", "path": "."})),
        ("glob", json!({"pattern": "**/*.txt"})),
        ("grep", json!({"pattern": "k", "path": "config"})),
    ] {
        assert!(
            matches!(d(tool, input.clone()), RuleDecision::Deny(_)),
            "{tool} {input}: {:?}",
            d(tool, input.clone())
        );
    }
    // A search that never reaches a denied path runs (docs/conf is a link: the walk does not follow it).
    assert!(matches!(d("grep", json!({"pattern": "a", "path": "docs"})), RuleDecision::Allow(_)));
    assert_eq!(d("glob", json!({"pattern": "*", "path": "src"})), RuleDecision::NoMatch);
    // Read(docs/**) does not allow reading config/ through docs/conf.
    assert_eq!(d("read_file", json!({"path": "docs/conf/../a.md"})), RuleDecision::NoMatch);
    assert!(matches!(d("read_file", json!({"path": "docs/a.md"})), RuleDecision::Allow(_)));

    // .env is hidden (grep and glob never visit hidden entries): a search from the root is stopped only by
    // the visible link to it (glob would list it).
    let only_env = rules(json!({"deny": ["Read(.env)"]}));
    assert!(matches!(only_env.decide("grep", &json!({"pattern": "x"}), &ws), RuleDecision::Deny(_)));
    fs::remove_file(ws.join("settings")).unwrap();
    assert_eq!(only_env.decide("grep", &json!({"pattern": "x"}), &ws), RuleDecision::NoMatch);
}

// ---------------------------------------------------------------------------------------------------------
// Property: scripts from fragments, checked against bash
// ---------------------------------------------------------------------------------------------------------

/// A small deterministic PRNG (xorshift64*), so every run builds the same scripts.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }

    fn pick<'a>(&mut self, items: &[&'a str]) -> &'a str {
        items[(self.next() % items.len() as u64) as usize]
    }
}

const COMMANDS: &[&str] = &[
    "echo hi",
    "echo",
    "ls",
    "ls -la",
    "git status",
    "npm test",
    "touch pwned",
    "rm x",
    "cat f",
    "true",
    "mark",
    "/bin/echo x",
    "\\touch p",
    "'touch' q",
    "\"rm\" y",
    "bash -c 'touch b'",
    "sh -c \"mark\"",
    "eval touch e",
    "echo touch | sh",
    "env touch v",
    "time -p touch t",
    "timeout 5 touch u",
    "nice mark",
    "echo x | xargs touch",
    "find . -maxdepth 0 -exec touch fx \\;",
    "X=1 mark",
    "$T z",
    "echo $(mark)",
    "echo `mark`",
    "cat <(mark)",
    "echo \"$(touch s)\"",
    "f() { mark; }",
    "ls > out",
    "echo 2>/dev/null",
    "echo >&2",
    "echo > f",
    "mark 2>&1",
    "{ mark; }",
    "(touch w)",
    "! echo",
    "command touch c",
    "exec touch ex",
    "nohup touch nh",
];
const GLUE: &[&str] = &[
    " && ",
    " || ",
    "; ",
    " | ",
    "\n",
    " & ",
    " #'\n",
    " # x\n",
    " '",
    "\"",
    " \\\n",
    " $(",
    ")",
    " `",
    "` ",
    " {",
    "}",
    " <<EOF\n",
    "\nEOF\n",
    " ;; ",
    " then ",
    " fi",
    "if ",
    " do ",
    " done",
    "for i in a; do ",
    " ( ",
    " ) ",
    " # '",
    "\n#",
    " $'\\x74ouch' ",
    " >",
    " <",
    " 2>",
    " \\",
    "'",
    "\t",
    " !",
    "\r",
    "\r\n",
    "\u{a0}",
    "\u{b}",
    "\u{c}",
    "\u{2028}",
    " \\\n",
    "\\\r\n",
];

/// Put before a command: wrappers, quoting and paths (with COMMANDS and GLUE, a few hundred fragments).
const BEFORE: &[&str] = &[
    "",
    "",
    "",
    "",
    "timeout 5 ",
    "nice -n 1 ",
    "time -p ",
    "env ",
    "command ",
    "X=1 ",
    "\\",
    "nohup ",
    "! ",
    "exec ",
    "builtin ",
    "/usr/bin/env ",
    "sh -c '",
    "eval '",
    "( ",
    "{ ",
    "if ",
    "while false; do ",
    "echo x | ",
];

fn script(rng: &mut Rng) -> String {
    let mut s = String::new();
    for _ in 0..(1 + rng.next() % 5) {
        s.push_str(rng.pick(BEFORE));
        s.push_str(rng.pick(COMMANDS));
        if rng.next() % 3 > 0 {
            s.push_str(rng.pick(GLUE));
        }
    }
    s
}

/// Run `script` under bash in `dir` with a PATH of stubs that log each command they are called as; the
/// commands bash ran (external ones; the builtins that run others are followed into them).
///
/// The scripts are generated and as hostile as the fragments make them (`> /usr/bin/env`, `rm`), and tests
/// may run as root: each runs through tooloop's own `bash` tool under the `workspace-write` sandbox with `dir`
/// as its workspace, the network off and its process tree ended with the call, so it can write nothing but
/// `dir`.
fn ran(script: &str, dir: &Path, stubs: &Path) -> Vec<String> {
    let log = dir.join("log");
    let _ = fs::remove_file(&log);
    let ws = Workspace::new(dir).unwrap();
    let opts = BashOptions {
        sandbox: SandboxMode::WorkspaceWrite,
        network: false,
        default_timeout: std::time::Duration::from_secs(10),
        exit_grace: std::time::Duration::from_millis(50),
        ..BashOptions::default()
    };
    // The environment first, on a line of its own: the script itself is then read by bash as it is.
    let command = format!("export PATH='{}' LOG='{}'\n{script}", stubs.display(), log.display());
    let _ = run_bash(&ws, &json!({"command": command}), &opts, &CancelToken::new());
    fs::read_to_string(&log).unwrap_or_default().lines().map(str::to_string).collect()
}

#[test]
fn no_script_of_fragments_is_allowed_unless_bash_runs_only_allowed_commands() {
    if !require::landlock() {
        return;
    }
    let tmp = tempdir::TempDir::new("rules-property");
    let stubs = tmp.0.join("bin");
    let work = tmp.0.join("work");
    fs::create_dir_all(&stubs).unwrap();
    fs::create_dir_all(&work).unwrap();
    // Each external command the fragments name logs its name; the shells and runners are the real ones,
    // so what they run is logged too.
    for name in ["touch", "rm", "ls", "git", "npm", "cat", "mark", "echo", "true", "z"] {
        let stub = stubs.join(name);
        fs::write(&stub, format!("#!/bin/sh\necho {name} >> \"$LOG\"\n")).unwrap();
        fs::set_permissions(&stub, std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
    }
    for real in ["bash", "sh", "env", "xargs", "find", "timeout", "nice", "nohup"] {
        for dir in ["/bin", "/usr/bin"] {
            if Path::new(dir).join(real).exists() {
                symlink(Path::new(dir).join(real), stubs.join(real)).unwrap();
                break;
            }
        }
    }
    let allow = rules(json!({"allow": ["Bash(echo:*)", "Bash(ls:*)", "Bash(git status:*)", "Bash(npm test:*)"]}));
    let deny = rules(json!({"allow": ["Bash"], "deny": ["Bash(touch:*)", "Bash(mark:*)"]}));
    let mut rng = Rng(0x5eed_1234_abcd_0042);
    let (mut allowed, mut denied, mut checked, mut logged) = (0, 0, 0, 0);
    let work = work.as_path();
    for n in 0..3000 {
        let s = script(&mut rng);
        let a = allow.decide("bash", &json!({"command": s}), work);
        let d = deny.decide("bash", &json!({"command": s}), work);
        let _ = read_only_command(&s);
        let is_allowed = matches!(a, RuleDecision::Allow(_));
        let is_denied = matches!(d, RuleDecision::Deny(_));
        allowed += usize::from(is_allowed);
        denied += usize::from(is_denied);
        if is_allowed || !is_denied {
            checked += 1;
            // A folder of its own: what a background command of another script does later lands elsewhere.
            let work = work.join(n.to_string());
            fs::create_dir_all(&work).unwrap();
            let log = ran(&s, &work, &stubs);
            logged += usize::from(!log.is_empty());
            if is_allowed {
                for cmd in &log {
                    assert!(matches!(cmd.as_str(), "echo" | "ls" | "git" | "npm"), "{s:?} allowed, ran {cmd}");
                }
                let left: Vec<String> = fs::read_dir(&work)
                    .unwrap()
                    .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
                    .filter(|n| n != "log")
                    .collect();
                assert!(left.is_empty(), "{s:?} allowed, wrote {left:?}");
            }
            if !is_denied {
                for cmd in &log {
                    assert!(cmd != "touch" && cmd != "mark", "{s:?} not denied, ran {cmd}");
                }
            }
        }
    }
    // The fragments reach both sides.
    assert!(allowed > 15 && denied > 600 && checked > 200, "allowed {allowed}, denied {denied}, checked {checked}");
    // The harness itself works: the stubs logged what bash ran (about half the scripts are not valid bash).
    assert!(logged * 3 > checked, "only {logged} of {checked} scripts logged a command");
}
