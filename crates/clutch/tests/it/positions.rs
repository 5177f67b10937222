//! `clutch positions check DIR` through the binary: a line per good file, one per error, and the
//! exit codes 0, 1 and 2; and what `positions invoke` refuses before anything is stored (over HTTP
//! and from the CLI).

use std::path::Path;
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use crate::support::{DEADLINE, Daemon, Output, all_events, clutch, run};

const GOOD: &str = "---
pattern: mirror
---
# Mirror Position

## Overview
Two agents independently analyze the same target and compare results.

## Agents
### Reflector
- **Personality**: Thorough
- **Responsibilities**:
  - Analyse

### Verifier
- **Personality**: Skeptical
- **Responsibilities**:
  - Verify

## Workflow
1. **ANALYSIS**: Independent parallel analysis
2. **COMPARISON**: Identify matches and discrepancies

## Communication Protocol
- RESULTS: Share analysis
- DISCREPANCY: Flag disagreement
- CONSENSUS: Agreement reached
- ESCALATE: Ask a human
";

fn check(dir: &Path) -> Output {
    let mut cmd = clutch();
    cmd.args(["positions", "check"]).arg(dir);
    run(cmd, "")
}

#[test]
fn positions_check_lists_good_files_and_every_error() {
    let dir = tempfile::tempdir().unwrap();
    let path = |p: &str| dir.path().join(p).display().to_string();
    std::fs::write(dir.path().join("mirror.md"), GOOD).unwrap();
    let out = check(dir.path());
    assert_eq!(out.code, Some(0), "{out:?}");
    assert_eq!(out.stdout, format!("ok  mirror  (mirror, 2 roles, 2 phases)  {}\n", path("mirror.md")));
    assert_eq!(out.stderr, "");

    // A bad file beside it, in the NAME/SKILL.md layout.
    std::fs::create_dir(dir.path().join("duo")).unwrap();
    std::fs::write(dir.path().join("duo/SKILL.md"), GOOD.replace("### Verifier", "### reflector")).unwrap();
    let out = check(dir.path());
    assert_eq!(out.code, Some(1), "{out:?}");
    assert_eq!(out.stdout, format!("ok  mirror  (mirror, 2 roles, 2 phases)  {}\n", path("mirror.md")));
    assert_eq!(
        out.stderr,
        format!(
            "{}:15: expected a role name of its own: \"reflector\" is also at line 10\n\
             clutch: 1 of 2 position files in {} has errors\n",
            path("duo/SKILL.md"),
            dir.path().display()
        )
    );

    // The shipped positions, as they are in the source tree.
    let shipped = Path::new(env!("CARGO_MANIFEST_DIR")).join("../runtime/positions");
    let out = check(&shipped);
    assert_eq!(out.code, Some(0), "{out:?}");
    let summaries: Vec<&str> =
        out.stdout.lines().map(|l| l.rsplit_once("  ").map_or(l, |(summary, _)| summary)).collect();
    assert_eq!(
        summaries,
        [
            "ok  circle  (circle, 3 roles, 5 phases)",
            "ok  contemplator  (solo, 1 role, 4 phases)",
            "ok  mirror  (mirror, 2 roles, 5 phases)",
            "ok  pyramid  (pyramid, 4 roles, 5 phases)",
            "ok  relay  (relay, 3 roles, 5 phases)",
            "ok  swarm  (swarm, 2 roles, 4 phases)",
        ],
        "{out:?}"
    );
}

#[test]
fn positions_check_without_position_files_is_a_usage_error() {
    let dir = tempfile::tempdir().unwrap();
    let missing = dir.path().join("missing");
    let out = check(&missing);
    assert_eq!(out.code, Some(2), "{out:?}");
    assert_eq!((out.stdout.as_str(), out.stderr), ("", format!("clutch: {} does not exist\n", missing.display())));

    std::fs::write(dir.path().join("notes.txt"), "not a position").unwrap();
    let out = check(dir.path());
    assert_eq!(out.code, Some(2), "{out:?}");
    assert_eq!(
        out.stderr,
        format!("clutch: no position files in {} (NAME.md or NAME/SKILL.md)\n", dir.path().display())
    );

    let out = check(&dir.path().join("notes.txt"));
    assert_eq!(out.code, Some(2), "{out:?}");
    assert!(out.stderr.ends_with(" is not a directory\n"), "{out:?}");
}

/// Posts an invocation of `position`; the status and the answer.
async fn invoke(http: &reqwest::Client, url: &str, position: &str, body: Value) -> (u16, Value) {
    let response = http.post(format!("{url}/v1/positions/{position}/invoke")).json(&body).send().await.unwrap();
    (response.status().as_u16(), response.json().await.unwrap())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_invocation_naming_an_agent_that_cannot_play_is_refused_and_nothing_is_stored() {
    let dir = tempfile::tempdir().unwrap();
    let daemon = Daemon::start(dir.path());
    let (http, url) = (reqwest::Client::new(), daemon.url.clone());
    let deadline = Instant::now() + DEADLINE;
    while http.get(format!("{url}/v1/positions")).send().await.unwrap().json::<Value>().await.unwrap()["positions"]
        .as_array()
        .is_none_or(|p| p.is_empty())
    {
        assert!(Instant::now() < deadline, "the positions runner did not announce its positions");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let before = all_events(&http, &url).await.len();

    // Nobody is agent:kim: refused, naming the role, the id, why and what to do.
    let (status, body) =
        invoke(&http, &url, "mirror", json!({"input": "x", "agents": {"verifier": "agent:kim"}})).await;
    assert_eq!(status, 404, "{body}");
    let e = &body["error"];
    assert_eq!((e["code"].as_str(), e["field"].as_str()), (Some("AGENT_NOT_FOUND"), Some("agents.verifier")), "{e}");
    assert_eq!(
        e["message"],
        "`agent:kim` cannot play verifier: no agent `agent:kim` is registered (no agent is registered yet)"
    );
    assert!(e["hint"].as_str().unwrap().starts_with("register agent:kim first"), "{e}");

    // The same from the CLI: exit code 3 (not found), and where to look for the agents there are.
    let mut cmd = clutch();
    cmd.args(["positions", "invoke", "mirror", "--input", "x", "--agents", "verifier=agent:kim", "--url", &url]);
    let out = run(cmd, "");
    assert_eq!(out.code, Some(3), "{out:?}");
    assert_eq!(out.stdout, "");
    assert!(out.stderr.contains("AGENT_NOT_FOUND: `agent:kim` cannot play verifier: no agent `agent:kim`"), "{out:?}");
    assert!(out.stderr.contains("`clutch agents list` shows the registered agents"), "{out:?}");

    // Once ada is registered, the refusal names who is.
    let card = json!({"v": "clutch/0.1", "agent_id": "agent:ada", "capabilities": [{"id": "skill:review", "version": "1.0.0"}]});
    assert_eq!(http.post(format!("{url}/v1/agents")).json(&card).send().await.unwrap().status(), 201);
    let (_, body) = invoke(&http, &url, "mirror", json!({"input": "x", "agents": {"Verifier": "agent:kim"}})).await;
    assert!(body["error"]["message"].as_str().unwrap().ends_with("(registered: agent:ada)"), "{body}");

    // Other casts no session can run: one member in two roles, the daemon's own agents, a role
    // named twice, no rounds or workers.
    let refused = [
        (
            json!({"agents": {"Reflector": "agent:ada", "Verifier": "agent:ada"}}),
            "agents.Verifier",
            "a member plays one role",
        ),
        (
            json!({"agents": {"Reflector": "user:bo", "Verifier": "user:bo"}}),
            "agents.Verifier",
            "a member plays one role",
        ),
        (json!({"agents": {"Verifier": "agent:positions"}}), "agents.Verifier", "the daemon's own agent"),
        (json!({"agents": {"Verifier": "agent:orchestrator"}}), "agents.Verifier", "the daemon's own agent"),
        (json!({"agents": {"Verifier": "user:bo", "verifier": "user:cy"}}), "agents.verifier", "named twice"),
        (json!({"rounds": 0}), "rounds", "at least 1"),
        (json!({"workers": 0}), "workers", "at least 1"),
    ];
    for (mut body, field, why) in refused {
        body["input"] = json!("x");
        let (status, answer) = invoke(&http, &url, "mirror", body.clone()).await;
        let e = &answer["error"];
        assert_eq!((status, e["code"].as_str()), (400, Some("VALIDATION_FAILED")), "{body}: {answer}");
        assert_eq!(e["field"], field, "{body}: {answer}");
        assert!(e["message"].as_str().unwrap().contains(why), "{body}: {answer}");
    }

    // Nothing was stored for any of them: no session, and no event but ada's registration.
    let sessions: Value = http.get(format!("{url}/v1/sessions")).send().await.unwrap().json().await.unwrap();
    assert_eq!(sessions["sessions"], json!([]), "{sessions}");
    let events = all_events(&http, &url).await;
    let types: Vec<&str> = events[before..].iter().map(|e| e["type"].as_str().unwrap()).collect();
    assert_eq!(types, ["agent.register"], "{events:?}");

    // A registered agent and a person make a team; a removed agent is refused again.
    let (status, body) = invoke(
        &http,
        &url,
        "mirror",
        json!({"input": "x", "agents": {"Reflector": "agent:ada", "Verifier": "user:bo"}}),
    )
    .await;
    assert_eq!(status, 201, "{body}");
    assert_eq!(http.delete(format!("{url}/v1/agents/agent:ada")).send().await.unwrap().status(), 200);
    let (status, body) =
        invoke(&http, &url, "mirror", json!({"input": "x", "agents": {"Reflector": "agent:ada"}})).await;
    assert_eq!((status, body["error"]["code"].as_str()), (404, Some("AGENT_NOT_FOUND")), "{body}");
}
