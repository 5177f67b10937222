//! The command line's contract: help with examples everywhere, exit code 2 for usage errors, and a
//! hint to start the daemon when none answers. (Exit code 3 for unknown agents, tasks and runs is
//! checked beside each command's tests.)

use crate::support::{clutch, run};

#[test]
fn every_command_has_help_with_examples() {
    let commands: &[&[&str]] = &[
        &[],
        &["serve"],
        &["send"],
        &["tail"],
        &["runs"],
        &["runs", "replay"],
        &["runs", "tasks"],
        &["agents"],
        &["agents", "list"],
        &["agents", "show"],
        &["agents", "register"],
        &["agents", "remove"],
        &["tasks"],
        &["tasks", "show"],
        &["config"],
        &["config", "dump"],
        &["positions"],
        &["positions", "check"],
        &["workflows"],
        &["workflows", "create"],
        &["workflows", "list"],
        &["workflows", "show"],
        &["workflows", "progress"],
        &["workflows", "plan"],
        &["completions"],
    ];
    for command in commands {
        let mut cmd = clutch();
        cmd.args(*command).arg("--help");
        let out = run(cmd, "");
        assert_eq!(out.code, Some(0), "clutch {command:?} --help: {out:?}");
        assert!(
            out.stdout.contains("EXAMPLES:") && out.stdout.contains("clutch "),
            "clutch {command:?} --help: {out:?}"
        );
    }
}

#[test]
fn usage_errors_exit_2() {
    let cases: &[&[&str]] = &[
        &["send", "--no-such-flag"],
        &["send", "--text", "hi"],
        &["send", "--from", "user:a", "--type", "no.such.type"],
        &["send", "--from", "user:a", "--payload", "[1]"],
        &["tail", "--after", "soon"],
        &["runs", "replay"],
        &["runs", "tasks"],
        &["agents", "show"],
        &["agents", "register"],
        &["agents", "remove"],
        &["agents", "list", "--table"],
        &["tasks", "show"],
        &["serve", "--listen", "not-an-address"],
        &["positions", "check"],
        &["workflows", "plan", "run_1"],
        &["completions"],
        &["completions", "tcsh"],
        &["frobnicate"],
    ];
    for args in cases {
        let mut cmd = clutch();
        cmd.args(*args);
        let out = run(cmd, "");
        assert_eq!(out.code, Some(2), "clutch {args:?}: {out:?}");
        assert!(out.stdout.is_empty(), "usage errors go to stderr: {out:?}");
    }
}

#[test]
fn no_daemon_means_a_hint_to_start_one() {
    let port = {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        listener.local_addr().unwrap().port()
    };
    let url = format!("http://127.0.0.1:{port}");
    let invocations: &[&[&str]] = &[
        &["send", "--from", "user:a", "--text", "hi"],
        &["tail"],
        &["runs", "replay", "run_x"],
        &["runs", "tasks", "run_x"],
        &["agents", "list"],
        &["agents", "show", "ken"],
        &["agents", "remove", "ken"],
        &["tasks", "show", "task_x"],
    ];
    for args in invocations {
        let mut cmd = clutch();
        cmd.args(*args).env("CLUTCH_URL", &url);
        let out = run(cmd, "");
        assert_eq!(out.code, Some(1), "clutch {args:?}: {out:?}");
        let hint = format!("no Clutch daemon at {url}: start one with `clutch serve` (or pass --url / set CLUTCH_URL)");
        assert!(out.stderr.contains(&hint), "clutch {args:?}: {out:?}");
    }
}

#[test]
fn completions_for_each_shell_name_every_command() {
    for (shell, marker) in [
        ("bash", "_clutch()"),
        ("zsh", "#compdef clutch"),
        ("fish", "complete -c clutch"),
        ("powershell", "Register-ArgumentCompleter"),
    ] {
        let mut cmd = clutch();
        cmd.args(["completions", shell]);
        let out = run(cmd, "");
        assert_eq!(out.code, Some(0), "{shell}: {out:?}");
        assert!(out.stdout.contains(marker), "{shell}: {marker} missing");
        for command in ["serve", "workflows", "agents", "completions"] {
            assert!(out.stdout.contains(command), "{shell}: `{command}` missing");
        }
    }
    // The bash script is valid bash.
    let mut cmd = clutch();
    cmd.args(["completions", "bash"]);
    let script = run(cmd, "").stdout;
    let mut check = std::process::Command::new("bash");
    check.arg("-n");
    let out = run(check, &script);
    assert_eq!(out.code, Some(0), "bash -n: {out:?}");
}
