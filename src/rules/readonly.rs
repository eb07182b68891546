//! The guess of whether a bash command only reads: what plan mode, `--read-only` and the CLI's ask mode use
//! to decide whether to ask before running it.
//!
//! It decides only whether to ask, never what can happen: a command judged read-only is run under the
//! read-only sandbox by the host, which is what stops a write the guess missed. So it is narrow on
//! purpose: the command must be plain ([`super::shell`]: literal words, no redirection but to `/dev/null`,
//! no substitution, assignment or comment), and every command a known reader named by its bare name (not
//! `./tools/cat`), with none of the options that write or run a program (`sort -o`, `sed -i`/`e`/`w`,
//! `git -c`/`--config-env`/`--output`, `find -exec`, `rg --pre`, …). `awk` is never read-only: its
//! programs run commands and write files.
//!
//! Must never: call a command read-only because its name is on the list when an option of it writes, or
//! look at anything but the words bash would run.

use super::shell;

/// Whether a bash command only reads: every command in it plain (see the module docs), a known reader,
/// with no writing option.
pub fn read_only_command(command: &str) -> bool {
    let script = shell::parse(command);
    let Some(plain) = &script.plain else { return false };
    !plain.is_empty() && plain.iter().all(|w| read_only_words(w))
}

/// The command inside a wrapper that changes nothing it can do: `timeout [opts] 5 cmd`, `nice [-n N] cmd`,
/// `time [-p] cmd`. `None` when `words` starts with no such wrapper.
pub(super) fn skip_plain_wrapper(words: &[String]) -> Option<&[String]> {
    let (name, args) = words.split_first()?;
    let mut i = 0;
    match name.as_str() {
        "timeout" => {
            while let Some(w) = args.get(i) {
                match w.as_str() {
                    "-s" | "--signal" | "-k" | "--kill-after" => i += 2,
                    "--foreground" | "--preserve-status" | "-v" | "--verbose" => i += 1,
                    w if w.starts_with("--signal=") || w.starts_with("--kill-after=") => i += 1,
                    w if w.starts_with('-') && w.len() > 2 && (w.starts_with("-s") || w.starts_with("-k")) => i += 1,
                    _ => break,
                }
            }
            // The duration.
            let d = args.get(i)?;
            if !d.starts_with(|c: char| c.is_ascii_digit() || c == '.') {
                return None;
            }
            i += 1;
        }
        "nice" => {
            while let Some(w) = args.get(i) {
                if w == "-n" || w == "--adjustment" {
                    i += 2;
                } else if w.starts_with("--adjustment=")
                    || (w.starts_with('-') && w.len() > 1 && w[1..].bytes().all(|b| b.is_ascii_digit()))
                    || (w.starts_with("-n") && w.len() > 2)
                {
                    i += 1;
                } else {
                    break;
                }
            }
        }
        "time" => {
            while args.get(i).is_some_and(|w| w == "-p") {
                i += 1;
            }
        }
        _ => return None,
    }
    args.get(i..)
}

fn read_only_words(words: &[String]) -> bool {
    let mut rest = words;
    while let Some(inner) = skip_plain_wrapper(rest) {
        rest = inner;
    }
    let Some((cmd, args)) = rest.split_first() else { return false };
    if cmd.contains('/') {
        // A path names some file, not the reader of that name (`./tools/cat`).
        return false;
    }
    let short_has =
        |letters: &[char]| args.iter().any(|a| a.starts_with('-') && !a.starts_with("--") && a[1..].contains(letters));
    let long = |prefixes: &[&str]| args.iter().any(|a| prefixes.iter().any(|p| a.starts_with(p)));
    let positional = || args.iter().filter(|a| !a.starts_with('-')).count();
    match cmd.as_str() {
        "ls" | "cat" | "head" | "tail" | "wc" | "grep" | "egrep" | "fgrep" | "pwd" | "echo" | "printf" | "stat"
        | "du" | "df" | "which" | "whoami" | "uname" | "printenv" | "diff" | "cmp" | "basename" | "dirname"
        | "realpath" | "readlink" | "nl" | "cut" | "tr" | "column" | "true" | "false" | "test" | "id" | "jq"
        | "md5sum" | "sha1sum" | "sha256sum" | "sha512sum" | "type" | "cd" | "comm" | "seq" => true,
        // `env` alone prints; with arguments it runs a command.
        "env" => args.is_empty(),
        // `sort -o FILE` writes; `--compress-program` runs one.
        "sort" => !short_has(&['o']) && !long(&["--output", "--compress-program"]),
        // `tree -o FILE` writes, `-R` (with -H) writes a file in every folder.
        "tree" => !short_has(&['o', 'R']) && !long(&["--output"]),
        // `uniq IN OUT` writes OUT.
        "uniq" => positional() < 2,
        // `file -C` compiles a magic file.
        "file" => !short_has(&['C']) && !long(&["--compile"]),
        // `date -s` and `date MMDDhhmm` set the clock.
        "date" => !short_has(&['s']) && !long(&["--set"]) && args.iter().all(|a| a.starts_with(['-', '+'])),
        "hostname" => args.iter().all(|a| {
            matches!(a.as_str(), "-f" | "-s" | "-d" | "-i" | "-I" | "-A" | "-a" | "--fqdn" | "--short" | "--domain")
        }),
        // ripgrep's `--pre` and `-z` run other programs on each file.
        "rg" => !long(&["--pre", "--search-zip", "--hostname-bin"]) && !short_has(&['z']),
        "ag" => !long(&["--pager"]),
        "fd" | "fdfind" => !long(&["--exec", "-x", "-X"]),
        "find" => !args.iter().any(|a| {
            matches!(a.as_str(), "-delete" | "-exec" | "-execdir" | "-ok" | "-okdir" | "-fls" | "-fprint" | "-fprintf")
                || a.starts_with("-fprint")
        }),
        "sed" => sed_reads_only(args),
        "git" => git_reads_only(args),
        _ => false,
    }
}

/// `sed` with only printing commands: no `-i`, no script file, and a script of `p`, `d`, `q`, `=`, `l`,
/// `n`, `N`, `s///` (flags `g`, `p`, `i`, `I`, digits) and `y///` after addresses; anything else (`e`, `w`,
/// `r`, `s///e`, `s///w`, labels, …) is not read-only.
fn sed_reads_only(args: &[String]) -> bool {
    let mut scripts: Vec<&str> = Vec::new();
    let mut i = 0;
    let mut explicit = false;
    while let Some(a) = args.get(i) {
        match a.as_str() {
            "-n" | "--quiet" | "--silent" | "-E" | "-r" | "--regexp-extended" | "-s" | "--separate" | "-z"
            | "--null-data" | "-u" | "--unbuffered" | "--posix" | "--debug" | "--sandbox" => {}
            "-e" | "--expression" => {
                explicit = true;
                match args.get(i + 1) {
                    Some(s) => scripts.push(s),
                    None => return false,
                }
                i += 1;
            }
            s if s.starts_with("--expression=") => {
                explicit = true;
                scripts.push(&s["--expression=".len()..]);
            }
            s if s.starts_with('-') && s.len() > 1 => {
                // Combined short options: only the harmless ones.
                if !s[1..].chars().all(|c| matches!(c, 'n' | 'E' | 'r' | 's' | 'z' | 'u')) {
                    return false;
                }
            }
            s => {
                if !explicit && scripts.is_empty() {
                    scripts.push(s);
                }
            }
        }
        i += 1;
    }
    !scripts.is_empty() && scripts.iter().all(|s| sed_script_reads_only(s))
}

fn sed_script_reads_only(script: &str) -> bool {
    let c: Vec<char> = script.chars().collect();
    let mut i = 0;
    // Skip a regex delimited by `d` starting after it; returns the index after the closing delimiter.
    let regex_end = |mut i: usize, d: char| -> Option<usize> {
        while i < c.len() {
            if c[i] == '\\' {
                i += 2;
                continue;
            }
            if c[i] == '\n' {
                return None;
            }
            if c[i] == d {
                return Some(i + 1);
            }
            i += 1;
        }
        None
    };
    let address = |mut i: usize| -> Option<usize> {
        match c.get(i) {
            Some(d) if d.is_ascii_digit() => {
                while c.get(i).is_some_and(|d| d.is_ascii_digit() || *d == '~') {
                    i += 1;
                }
            }
            Some('$') => i += 1,
            Some('/') => i = regex_end(i + 1, '/')?,
            Some('\\') => {
                let d = *c.get(i + 1)?;
                i = regex_end(i + 2, d)?;
            }
            _ => return Some(i),
        }
        while c.get(i).is_some_and(|x| matches!(x, 'I' | 'M')) {
            i += 1;
        }
        Some(i)
    };
    while i < c.len() {
        if c[i].is_whitespace() || c[i] == ';' || c[i] == '{' || c[i] == '}' {
            i += 1;
            continue;
        }
        let Some(mut j) = address(i) else { return false };
        if c.get(j) == Some(&',') {
            let Some(k) = address(j + 1) else { return false };
            j = k;
        }
        while c.get(j).is_some_and(|x| x.is_whitespace() || *x == '!') {
            j += 1;
        }
        match c.get(j) {
            Some('p' | 'd' | 'q' | 'Q' | '=' | 'l' | 'n' | 'N' | 'P' | 'D' | 'g' | 'G' | 'h' | 'H' | 'x' | 'z') => {
                j += 1;
                // `q5`, `Q5`, `l 70`: a number may follow.
                while c.get(j).is_some_and(|x| x.is_ascii_digit() || *x == ' ') {
                    j += 1;
                }
            }
            Some('{' | '}') => j += 1,
            // `s/re/text/flags` and `y/abc/xyz/`: two delimited parts; only `s` takes flags (not `w`, `e`).
            Some(&cmd @ ('s' | 'y')) => {
                let Some(&d) = c.get(j + 1) else { return false };
                if d == '\\' || d == '\n' {
                    return false;
                }
                let Some(k) = regex_end(j + 2, d) else { return false };
                let Some(k) = regex_end(k, d) else { return false };
                j = k;
                while cmd == 's' && c.get(j).is_some_and(|x| matches!(x, 'g' | 'p' | 'i' | 'I' | '0'..='9')) {
                    j += 1;
                }
            }
            None => {}
            // `e`, `w`, `W`, `r`, `R`, `a`, `i`, `c`, labels and branches, `F`, `v`, …
            Some(_) => return false,
        }
        // A command ends at `;`, `}`, a newline or the end.
        while c.get(j).is_some_and(|x| *x == ' ' || *x == '\t') {
            j += 1;
        }
        match c.get(j) {
            None | Some(';' | '\n' | '}') => i = j,
            Some(_) => return false,
        }
    }
    true
}

/// `git` reading: no global option that changes what runs (`-c`, `--config-env`, `-C`, `--exec-path`,
/// `--git-dir`, …), a subcommand that only reads, and none of its options that write a file or run a
/// program (`--output`, `--ext-diff`, `-O`/`--open-files-in-pager`, `--textconv`, `--filters`).
fn git_reads_only(args: &[String]) -> bool {
    let mut i = 0;
    while let Some(a) = args.get(i) {
        match a.as_str() {
            "--no-pager" | "-P" | "--no-optional-locks" | "--literal-pathspecs" | "--no-replace-objects" => i += 1,
            a if a.starts_with('-') => return false,
            _ => break,
        }
    }
    let Some(sub) = args.get(i) else { return false };
    let rest = &args[i + 1..];
    let writes = rest.iter().any(|a| {
        a.starts_with("--output")
            || a.starts_with("--ext-diff")
            || a.starts_with("--open-files-in-pager")
            || a.starts_with("-O")
            || a.starts_with("--textconv")
            || a.starts_with("--filters")
            || a.starts_with("--exec")
            || a.starts_with("--upload-pack")
    });
    if writes {
        return false;
    }
    match sub.as_str() {
        "status" | "log" | "diff" | "show" | "blame" | "ls-files" | "grep" | "rev-parse" | "describe" | "shortlog"
        | "ls-tree" | "cat-file" => true,
        "reflog" => rest.first().is_none_or(|a| a == "show" || a.starts_with('-')),
        // Listing only: `git branch NAME` creates one, `-d`/`-m`/`-c`/`-u` change them.
        "branch" => rest.iter().all(|w| {
            matches!(
                w.as_str(),
                "-a" | "-r" | "-v" | "-vv" | "-l" | "--all" | "--remotes" | "--list" | "--show-current"
            )
        }),
        "remote" => rest.len() <= 1 && rest.first().is_none_or(|w| w.starts_with('-')),
        _ => false,
    }
}
