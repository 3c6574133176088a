//! The README's commands are real: every `braid ...` line in its ```sh
//! blocks (and `cargo run --release -- ...`, which runs `braid`), and every
//! inline `braid ...` command, names a subcommand that exists and only
//! flags that subcommand's `--help` lists. The user-facing pages in docs/
//! are checked the same way (their ```sh blocks). Nothing is run but
//! `braid ... --help`, so the test is fast and needs no network. `braid
//! bench ...` shows braid-bench's help, so that one must be built too.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::process::Command;

/// One command line found in a document, with where it came from.
#[derive(Debug)]
struct Found {
    origin: String,
    line: String,
}

fn repo_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// The lines of each ```sh block, continuation lines (ending in `\`) joined.
fn sh_block_lines(text: &str, file: &str) -> Vec<Found> {
    let mut out = Vec::new();
    let mut in_sh = false;
    let mut pending = String::new();
    let mut start = 0;
    for (i, raw) in text.lines().enumerate() {
        let trimmed = raw.trim_start();
        if trimmed.starts_with("```") {
            in_sh = !in_sh && trimmed.trim_end() == "```sh";
            pending.clear();
            continue;
        }
        if !in_sh {
            continue;
        }
        if pending.is_empty() {
            start = i + 1;
        }
        let line = strip_comment(raw);
        let line = line.trim();
        match line.strip_suffix('\\') {
            Some(head) => {
                pending.push_str(head.trim_end());
                pending.push(' ');
            }
            None => {
                pending.push_str(line);
                if !pending.trim().is_empty() {
                    out.push(Found {
                        origin: format!("{file}:{start}"),
                        line: pending.trim().to_owned(),
                    });
                }
                pending.clear();
            }
        }
    }
    out
}

/// Inline code spans (which may wrap across lines) that run `braid` and
/// name a flag: the typical lines in running text.
fn inline_commands(text: &str, file: &str) -> Vec<Found> {
    let mut out = Vec::new();
    let mut in_fence = false;
    let mut prose = String::new();
    let mut line_of = Vec::new();
    for (i, raw) in text.lines().enumerate() {
        if raw.trim_start().starts_with("```") {
            in_fence = !in_fence;
            continue;
        }
        if !in_fence {
            for _ in raw.chars().chain(std::iter::once('\n')) {
                line_of.push(i + 1);
            }
            prose.push_str(raw);
            prose.push('\n');
        }
    }
    let chars: Vec<char> = prose.chars().collect();
    let mut i = 0;
    while i < chars.len() {
        if chars[i] != '`' {
            i += 1;
            continue;
        }
        let Some(len) = chars[i + 1..].iter().position(|&c| c == '`') else {
            break;
        };
        let span: String = chars[i + 1..i + 1 + len].iter().collect();
        let span = span.split_whitespace().collect::<Vec<_>>().join(" ");
        let is_command = simple_commands(&span)
            .iter()
            .any(|words| braid_args(words).is_some());
        // `braid <command> --help` is a pattern, not a command line.
        if is_command && span.contains(" -") && !span.contains('<') {
            out.push(Found {
                origin: format!("{file}:{}", line_of[i]),
                line: span,
            });
        }
        i += len + 2;
    }
    out
}

/// Drops a `# comment` that is not inside quotes.
fn strip_comment(line: &str) -> String {
    let (mut single, mut double) = (false, false);
    let mut prev = ' ';
    for (i, c) in line.char_indices() {
        match c {
            '\'' if !double => single = !single,
            '"' if !single => double = !double,
            '#' if !single && !double && prev.is_whitespace() => return line[..i].to_owned(),
            _ => {}
        }
        prev = c;
    }
    line.to_owned()
}

/// Shell-like words, split into simple commands at `|`, `&&`, `||`, `;`
/// and `&` outside quotes.
fn simple_commands(line: &str) -> Vec<Vec<String>> {
    let mut commands = vec![Vec::new()];
    let mut word = String::new();
    let mut in_word = false;
    let (mut single, mut double) = (false, false);
    let mut chars = line.chars().peekable();
    let end_word = |word: &mut String, in_word: &mut bool, commands: &mut Vec<Vec<String>>| {
        if *in_word {
            commands.last_mut().unwrap().push(std::mem::take(word));
            *in_word = false;
        }
    };
    while let Some(c) = chars.next() {
        match c {
            '\'' if !double => {
                single = !single;
                in_word = true;
            }
            '"' if !single => {
                double = !double;
                in_word = true;
            }
            c if single || double => word.push(c),
            c if c.is_whitespace() => end_word(&mut word, &mut in_word, &mut commands),
            '|' | '&' | ';' => {
                end_word(&mut word, &mut in_word, &mut commands);
                if matches!(chars.peek(), Some('|' | '&')) {
                    chars.next();
                }
                commands.push(Vec::new());
            }
            c => {
                word.push(c);
                in_word = true;
            }
        }
    }
    end_word(&mut word, &mut in_word, &mut commands);
    commands.retain(|c| !c.is_empty());
    commands
}

/// The arguments given to `braid`, if this simple command runs it.
fn braid_args(words: &[String]) -> Option<Vec<String>> {
    let mut words = words;
    if words.first().is_some_and(|w| w == "sudo") {
        words = &words[1..];
    }
    let first = words.first()?;
    if first == "braid" || first.ends_with("/braid") {
        return Some(words[1..].to_vec());
    }
    if first == "cargo" && words.get(1).is_some_and(|w| w == "run") {
        let sep = words.iter().position(|w| w == "--")?;
        let cargo_args = &words[2..sep];
        let other_binary = cargo_args.iter().enumerate().any(|(i, a)| {
            a.starts_with("--example")
                || a.starts_with("--manifest-path")
                || (a == "-p" || a == "--package")
                    && cargo_args.get(i + 1).is_some_and(|p| p != "braid-cli")
        });
        if !other_binary {
            return Some(words[sep + 1..].to_vec());
        }
    }
    None
}

/// `braid <path> --help`, cached: its exit status and output.
struct Helps {
    bin: &'static str,
    cache: HashMap<Vec<String>, (bool, String)>,
}

impl Helps {
    fn get(&mut self, path: &[String]) -> &(bool, String) {
        let bin = self.bin;
        if path.first().is_some_and(|p| p == "bench") {
            // `braid bench` runs the braid-bench beside braid, whose help
            // it shows.
            let bench = Path::new(bin)
                .with_file_name(format!("braid-bench{}", std::env::consts::EXE_SUFFIX));
            assert!(
                bench.is_file(),
                "no {}: `braid bench` commands are checked against it; build it \
                 (cargo build -p braid-bench) or run cargo test --workspace",
                bench.display()
            );
        }
        self.cache.entry(path.to_vec()).or_insert_with(|| {
            let out = Command::new(bin)
                .args(path)
                .arg("--help")
                .output()
                .expect("run braid --help");
            let text = String::from_utf8_lossy(&out.stdout).into_owned()
                + &String::from_utf8_lossy(&out.stderr);
            (out.status.success(), text)
        })
    }
}

/// The subcommand names a `--help` lists under "Commands:".
fn subcommands(help: &str) -> Vec<String> {
    help.lines()
        .skip_while(|l| l.trim() != "Commands:")
        .skip(1)
        .take_while(|l| l.starts_with("  "))
        .filter_map(|l| l.split_whitespace().next().map(str::to_owned))
        .collect()
}

/// Whether `flag` (`--to`, `-o`) appears in `help` as an option of its own.
fn lists_flag(help: &str, flag: &str) -> bool {
    help.match_indices(flag).any(|(at, _)| {
        let before = help[..at].chars().next_back();
        let after = help[at + flag.len()..].chars().next();
        let starts = match before {
            None => true,
            Some(c) => c.is_whitespace() || c == ',' || c == '[',
        };
        let ends = match after {
            None => true,
            Some(c) => !(c.is_alphanumeric() || c == '-' || c == '_'),
        };
        starts && ends
    })
}

/// What is wrong with one `braid` invocation, if anything.
fn check(helps: &mut Helps, args: &[String]) -> Result<(), String> {
    let Some(sub) = args.first().filter(|a| !a.starts_with('-')) else {
        return Err("no subcommand".into());
    };
    let mut path = vec![sub.clone()];
    let mut rest = &args[1..];
    loop {
        let (ok, help) = helps.get(&path).clone();
        if !ok {
            return Err(format!("`braid {} --help` fails: {help}", path.join(" ")));
        }
        match rest.first() {
            Some(next) if subcommands(&help).contains(next) => {
                path.push(next.clone());
                rest = &rest[1..];
            }
            _ => break,
        }
    }
    let help = helps.get(&path).1.clone();
    let mut unknown = Vec::new();
    for word in rest {
        if word == "--" {
            break; // what follows belongs to the command `braid link` runs
        }
        if word == "-" || !word.starts_with('-') || word.parse::<f64>().is_ok() {
            continue;
        }
        let flag = word.split('=').next().unwrap();
        if !lists_flag(&help, flag) {
            unknown.push(flag.to_owned());
        }
    }
    if unknown.is_empty() {
        Ok(())
    } else {
        Err(format!(
            "`braid {}` has no {}",
            path.join(" "),
            unknown.join(", ")
        ))
    }
}

fn commands_in(file: &str, inline: bool) -> Vec<Found> {
    let text = std::fs::read_to_string(repo_root().join(file))
        .unwrap_or_else(|e| panic!("read {file}: {e}"));
    let mut found = sh_block_lines(&text, file);
    if inline {
        found.extend(inline_commands(&text, file));
    }
    found
}

fn check_all(found: &[Found]) -> (usize, Vec<String>) {
    let mut helps = Helps {
        bin: env!("CARGO_BIN_EXE_braid"),
        cache: HashMap::new(),
    };
    let mut checked = 0;
    let mut failures = Vec::new();
    for f in found {
        for words in simple_commands(&f.line) {
            if let Some(args) = braid_args(&words) {
                checked += 1;
                if let Err(e) = check(&mut helps, &args) {
                    failures.push(format!("{}: {}\n    {e}", f.origin, f.line));
                }
            }
        }
    }
    (checked, failures)
}

#[test]
fn readme_opens_with_the_demo_and_the_test_suite() {
    let text = std::fs::read_to_string(repo_root().join("README.md")).unwrap();
    let first = sh_block_lines(&text, "README.md");
    let firsts: Vec<&str> = first.iter().take(2).map(|f| f.line.as_str()).collect();
    assert_eq!(
        firsts,
        ["cargo run -- demo", "cargo test --workspace"],
        "the README's first commands"
    );
}

#[test]
fn every_braid_command_in_the_readme_parses() {
    let found = commands_in("README.md", true);
    let (checked, failures) = check_all(&found);
    assert!(
        checked >= 18,
        "only {checked} braid commands found in README.md: is the extraction broken?"
    );
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

#[test]
fn every_braid_command_in_the_user_docs_parses() {
    let mut found = Vec::new();
    for file in [
        "docs/transfers.md",
        "docs/emulation.md",
        "docs/scenarios.md",
        "docs/measurements.md",
        "docs/observability.md",
        "docs/reach.md",
        "deploy/README.md",
    ] {
        found.extend(commands_in(file, false));
    }
    let (checked, failures) = check_all(&found);
    assert!(checked >= 8, "only {checked} braid commands found in docs/");
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

#[test]
fn the_extraction_sees_what_a_reader_sees() {
    let doc = "text `braid send a --to b:1\n  --cdoe x` more\n\n```sh\n\
               braid recv --listen 0.0.0.0:7000 -o - | tar x   # a comment\n\
               sudo braid link --rate 1mbit \\\n  -- sh -c 'x --nope'\n\
               cargo run --release -- sim x.toml --json && echo '#'\n\
               cargo run --release --example echo -- server\n```\n";
    let found: Vec<String> = sh_block_lines(doc, "t")
        .into_iter()
        .chain(inline_commands(doc, "t"))
        .map(|f| f.line)
        .collect();
    assert_eq!(
        found,
        [
            "braid recv --listen 0.0.0.0:7000 -o - | tar x",
            "sudo braid link --rate 1mbit -- sh -c 'x --nope'",
            "cargo run --release -- sim x.toml --json && echo '#'",
            "cargo run --release --example echo -- server",
            "braid send a --to b:1 --cdoe x",
        ]
    );
    let args: Vec<Option<Vec<String>>> = found
        .iter()
        .flat_map(|l| simple_commands(l))
        .map(|w| braid_args(&w))
        .collect();
    let s = |v: &[&str]| Some(v.iter().map(|x| x.to_string()).collect::<Vec<_>>());
    assert_eq!(
        args,
        [
            s(&["recv", "--listen", "0.0.0.0:7000", "-o", "-"]),
            None,
            s(&["link", "--rate", "1mbit", "--", "sh", "-c", "x --nope"]),
            s(&["sim", "x.toml", "--json"]),
            None,
            None,
            s(&["send", "a", "--to", "b:1", "--cdoe", "x"]),
        ]
    );
    // A misspelt flag fails; the same line spelt right passes.
    let (checked, failures) = check_all(&[
        Found {
            origin: "t:1".into(),
            line: "braid send a --to b:1 --cdoe x".into(),
        },
        Found {
            origin: "t:2".into(),
            line: "braid send a --to b:1 --code x".into(),
        },
        Found {
            origin: "t:3".into(),
            line: "braid bench real --rounds 1".into(),
        },
        Found {
            origin: "t:4".into(),
            line: "braid bench --rounds 1".into(),
        },
        Found {
            origin: "t:5".into(),
            line: "braid sned a".into(),
        },
    ]);
    assert_eq!(checked, 5);
    assert_eq!(failures.len(), 3, "{failures:#?}");
    assert!(failures[0].contains("--cdoe"), "{}", failures[0]);
    assert!(failures[1].contains("--rounds"), "{}", failures[1]);
    assert!(failures[2].contains("sned"), "{}", failures[2]);
}
