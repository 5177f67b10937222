//! README.md's shell examples run as written: every `sh` block against a fresh daemon (the real
//! `clutch` on `PATH`, `CLUTCH_URL` set, a data dir and a port of the test's own), the blocks of one
//! section in one `bash` session, in order, sections in the README's order. The README's own
//! address (`127.0.0.1:7700`, `localhost:7700`) is pointed at the test's daemon. A block fails the
//! test when a command in it fails (`set -euo pipefail`) or prints an API error
//! (`{"error": {"code": ...}}`, which `curl -s` does not turn into an exit code).
//!
//! A block that needs a program the suite does not run (Claude Code, Python frameworks, a real
//! LLM) or that runs until stopped is marked on the line right before its fence:
//! `<!-- readme-test: skip (needs Claude Code) -->`. Any other `readme-test` comment is an error.
//! `README_TEST_SHOW=1` prints what each section printed.

use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};

use serde_json::Value;

use crate::support::{DEADLINE, Daemon, run};

/// One shell block of a Markdown file.
#[derive(Debug, PartialEq)]
struct Block {
    /// The 1-based line of its first line of code.
    line: usize,
    /// The heading it is under (empty before the first).
    section: String,
    code: String,
}

const SKIP: &str = "<!-- readme-test: skip (";

/// The shell blocks of `markdown` not marked skipped, in order.
fn blocks(markdown: &str) -> Vec<Block> {
    let mut found = Vec::new();
    let mut section = String::new();
    let mut previous = "";
    let mut lines = markdown.lines().enumerate();
    while let Some((i, line)) = lines.next() {
        if let Some(heading) = line.strip_prefix('#').filter(|_| !line.starts_with("#!")) {
            section = heading.trim_start_matches('#').trim().to_owned();
        }
        if line.contains("readme-test") && !(line.starts_with(SKIP) && line.ends_with(") -->")) {
            panic!("README.md:{}: a readme-test mark is `{SKIP}WHY) -->`, not `{line}`", i + 1);
        }
        if previous.starts_with(SKIP) && !line.starts_with("```") {
            panic!("README.md:{i}: a readme-test mark must come right before a shell block's fence");
        }
        if let Some(info) = line.strip_prefix("```") {
            let shell = matches!(info.trim(), "sh" | "bash" | "shell");
            let skipped = previous.starts_with(SKIP);
            if skipped && !shell {
                panic!("README.md:{i}: a readme-test mark must come right before a shell block's fence");
            }
            let mut code = String::new();
            for (_, line) in lines.by_ref() {
                if line.starts_with("```") {
                    break;
                }
                code.push_str(line);
                code.push('\n');
            }
            if shell && !skipped {
                found.push(Block { line: i + 2, section: section.clone(), code });
            }
            previous = "";
            continue;
        }
        previous = line;
    }
    found
}

#[test]
fn blocks_are_read_by_section_and_marked_ones_left_out() {
    let markdown = "# A\n```sh\necho a\n```\n## B\n```text\n$ not run\n```\n<!-- readme-test: skip (needs X) -->\n```sh\nx\n```\n```bash\necho b\necho c\n```\n";
    let got = blocks(markdown);
    assert_eq!(
        got,
        [
            Block { line: 3, section: "A".into(), code: "echo a\n".into() },
            Block { line: 14, section: "B".into(), code: "echo b\necho c\n".into() },
        ]
    );
}

#[test]
#[should_panic(expected = "README.md:1: a readme-test mark is")]
fn a_misspelt_mark_is_an_error_not_a_run() {
    blocks("<!-- readme-test: skipp -->\n```sh\nx\n```\n");
}

/// What fails a section: an API error `curl -s` prints (an exit code of 0), and a failing command;
/// each said with its README line.
#[test]
fn an_api_error_or_a_failing_command_fails_its_section() {
    let dir = tempfile::tempdir().unwrap();
    let daemon = Daemon::start(&dir.path().join("data"));
    let failure = |code: &str| {
        let block = Block { line: 40, section: "S".into(), code: code.into() };
        let failed = std::panic::catch_unwind(|| section(&daemon, dir.path(), "S", &[block]));
        let panic = failed.expect_err("the section fails");
        panic.downcast_ref::<String>().cloned().unwrap_or_default()
    };
    let why = failure("echo fine\ncurl -s localhost:7700/v1/tasks/task_01JD0000000000000000000009\n");
    assert!(why.starts_with("README.md:41 (section \"S\"): an API error was printed"), "{why}");
    let why = failure("true\nclutch agents show nobody\necho not reached\n");
    assert!(why.starts_with("README.md:41 (section \"S\"): exit code Some(3)"), "{why}");
    assert!(why.contains("AGENT_NOT_FOUND"), "{why}");
}

/// The README's sections, each run in a bash of its own against one daemon.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn readme_shell_examples_run_as_written() {
    let readme_path = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../README.md");
    let readme = std::fs::read_to_string(&readme_path).expect("README.md");
    for program in ["bash", "curl", "jq"] {
        let found = Command::new("sh").arg("-c").arg(format!("command -v {program}")).output().unwrap();
        assert!(found.status.success(), "the README's examples use `{program}`: install it to run this test");
    }
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    let work = dir.path().join("work");
    std::fs::create_dir(&work).unwrap();
    let daemon = Daemon::start(&data);
    until_positions(&daemon.url).await;

    let mut sections: Vec<(String, Vec<Block>)> = Vec::new();
    for block in blocks(&readme) {
        match sections.last_mut() {
            Some((name, list)) if *name == block.section => list.push(block),
            _ => sections.push((block.section.clone(), vec![block])),
        }
    }
    assert!(
        sections.len() >= 5,
        "the README's shell sections: {:?}",
        sections.iter().map(|s| &s.0).collect::<Vec<_>>()
    );
    let started = Instant::now();
    for (name, list) in &sections {
        section(&daemon, &work, name, list);
    }
    assert!(started.elapsed() < Duration::from_secs(60), "the README's examples took {:?}", started.elapsed());
}

/// Runs one section's blocks in one bash; fails the test with the README line at fault.
fn section(daemon: &Daemon, work: &Path, name: &str, list: &[Block]) {
    let address = daemon.url.trim_start_matches("http://");
    let mut script = String::from("set -euo pipefail\nPS4='+readme:${LINENO}: '\nset -x\n");
    // Script line → README line, at each block's start.
    let mut starts: Vec<(usize, usize)> = Vec::new();
    for block in list {
        starts.push((script.lines().count() + 1, block.line));
        let code = block
            .code
            .replace("http://127.0.0.1:7700", &daemon.url)
            .replace("localhost:7700", address)
            .replace("127.0.0.1:7700", address);
        script.push_str(&code);
    }
    let readme_line = |script_line: usize| {
        let (start, line) = starts.iter().rev().find(|(s, _)| *s <= script_line).copied().unwrap_or((1, 1));
        line + script_line - start
    };
    let bin = Path::new(env!("CARGO_BIN_EXE_clutch")).parent().unwrap();
    let mut cmd = Command::new("bash");
    cmd.arg("-c").arg(&script).current_dir(work);
    for (var, _) in std::env::vars_os() {
        if var.to_str().is_some_and(|v| v.starts_with("CLUTCH_") || v == "RUST_LOG") {
            cmd.env_remove(var);
        }
    }
    let path = std::env::var("PATH").unwrap_or_default();
    cmd.env("PATH", format!("{}:{path}", bin.display()))
        .env("CLUTCH_URL", &daemon.url)
        .env("HOME", work)
        .env("NO_COLOR", "1");
    let out = run(cmd, "");
    // bash -c counts lines from 1 at the script's start, as `starts` does.
    let last = out
        .stderr
        .lines()
        .filter_map(|l| l.strip_prefix("+readme:"))
        .filter_map(|l| l.split(':').next()?.parse::<usize>().ok())
        .next_back();
    let said: String = out.stderr.lines().filter(|l| !l.starts_with('+')).chain(out.stdout.lines()).collect();
    let compact: String = said.chars().filter(|c| !c.is_whitespace()).collect();
    let failed = if out.code != Some(0) {
        Some(format!("exit code {:?}", out.code))
    } else if compact.contains(r#""error":{"code""#) {
        Some("an API error was printed".to_owned())
    } else {
        None
    };
    if std::env::var_os("README_TEST_SHOW").is_some() {
        eprintln!("=== {name}\n{}\n{}", out.stdout, out.stderr);
    }
    if let Some(why) = failed {
        let at = last.map_or("?".to_owned(), |l| readme_line(l).to_string());
        panic!(
            "README.md:{at} (section {name:?}): {why}\n--- stdout ---\n{}\n--- stderr ---\n{}\n--- daemon ---\n{}",
            out.stdout,
            out.stderr,
            daemon.stderr()
        );
    }
}

/// Waits until the positions runner has announced its positions (the README invokes one).
async fn until_positions(url: &str) {
    let http = reqwest::Client::new();
    let deadline = Instant::now() + DEADLINE;
    loop {
        let listed: Value = http.get(format!("{url}/v1/positions")).send().await.unwrap().json().await.unwrap();
        if listed["positions"].as_array().is_some_and(|p| !p.is_empty()) {
            return;
        }
        assert!(Instant::now() < deadline, "no positions within {DEADLINE:?}: {listed}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}
