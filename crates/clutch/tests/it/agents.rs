//! `clutch agents`: register from a file and from stdin, list as a table and as JSON, show, remove,
//! and the exit codes and messages for unknown agents and bad cards.

use clutch_core::registry::Status;
use clutch_core::view;
use serde_json::{Value, json};

use crate::support::{Daemon, Output, clutch, run};

fn agents(daemon: &Daemon, args: &[&str], stdin: &str) -> Output {
    let mut cmd = clutch();
    cmd.arg("agents").args(args).args(["--url", &daemon.url]);
    run(cmd, stdin)
}

fn card(name: &str, skill: &str, max_concurrency: u32) -> Value {
    json!({
        "v": "clutch/0.1",
        "agent_id": format!("agent:{name}"),
        "display": {"name": name.to_uppercase(), "desc": "a test agent"},
        "capabilities": [{"id": skill, "version": "1.2.0", "tags": ["fast"]}],
        "limits": {"max_concurrency": max_concurrency},
        "budget": {"tokens": 1000},
    })
}

#[test]
fn register_list_show_remove() {
    let dir = tempfile::tempdir().unwrap();
    let daemon = Daemon::start(dir.path());

    let path = dir.path().join("ken.json");
    std::fs::write(&path, card("ken", "skill:research", 2).to_string()).unwrap();
    let out = agents(&daemon, &["register", path.to_str().unwrap()], "");
    assert_eq!(out.code, Some(0), "{out:?}");
    assert_eq!(
        out.stdout, "agent:ken registered at seq 1; heartbeat every 10 s (POST /v1/agents/agent:ken/heartbeat)\n",
        "{out:?}"
    );

    let out = agents(&daemon, &["register", "-", "--json"], &card("tom", "skill:code", 1).to_string());
    assert_eq!(out.code, Some(0), "{out:?}");
    let answer: Value = serde_json::from_str(out.stdout.trim()).expect("one JSON answer");
    assert_eq!(
        (&answer["agent_id"], &answer["seq"], &answer["heartbeat_interval_sec"]),
        (&json!("agent:tom"), &json!(2), &json!(10)),
        "{answer}"
    );

    let out = agents(&daemon, &["list"], "");
    assert_eq!(out.code, Some(0), "{out:?}");
    assert_eq!(
        out.stdout,
        "\
AGENT      STATUS  LOAD  SUCCESS  USAGE/BUDGET   CAPABILITIES
agent:ken  online  0/2   -        0/1000 tokens  skill:research@1.2.0
agent:tom  online  0/1   -        0/1000 tokens  skill:code@1.2.0
",
        "{out:?}"
    );
    let out = agents(&daemon, &["list", "--json"], "");
    assert_eq!(out.code, Some(0), "{out:?}");
    let list: view::Agents = serde_json::from_str(out.stdout.trim()).expect("the agents view");
    let ids: Vec<&str> = list.agents.iter().map(|a| a.agent_id.as_str()).collect();
    assert_eq!(ids, ["agent:ken", "agent:tom"]);
    assert_eq!(list.agents[0].load, view::Load { in_flight: 0, max_concurrency: Some(2) });

    // A bare name means agent:NAME.
    let out = agents(&daemon, &["show", "ken"], "");
    assert_eq!(out.code, Some(0), "{out:?}");
    let lines: Vec<&str> = out.stdout.lines().collect();
    assert_eq!(lines[0], "agent:ken (KEN): a test agent", "{out:?}");
    assert!(lines[1].starts_with("status        online, last seen 20"), "{out:?}");
    assert_eq!(
        &lines[2..],
        [
            "load          0/2",
            "success rate  -",
            "usage/budget  0/1000 tokens",
            "limits        max_concurrency 2",
            "capabilities  skill:research 1.2.0; tags: fast",
        ],
        "{out:?}"
    );
    let out = agents(&daemon, &["show", "agent:tom", "--json"], "");
    assert_eq!(out.code, Some(0), "{out:?}");
    let tom: view::Agent = serde_json::from_str(out.stdout.trim()).expect("the agent view");
    assert_eq!((tom.status, tom.card.limits.and_then(|l| l.max_concurrency)), (Status::Online, Some(1)));

    let out = agents(&daemon, &["remove", "agent:ken"], "");
    assert_eq!(out.code, Some(0), "{out:?}");
    assert_eq!(out.stdout, "agent:ken removed at seq 3\n", "{out:?}");
    let out = agents(&daemon, &["show", "ken"], "");
    assert_eq!(out.code, Some(3), "{out:?}");
    assert!(out.stdout.is_empty(), "{out:?}");
    assert!(out.stderr.contains("AGENT_NOT_FOUND: no agent `agent:ken` is registered"), "{out:?}");
    let out = agents(&daemon, &["list"], "");
    assert_eq!(out.stdout.lines().skip(1).map(|l| &l[..9]).collect::<Vec<_>>(), ["agent:tom"], "{out:?}");
}

#[test]
fn unknown_agents_and_bad_cards() {
    let dir = tempfile::tempdir().unwrap();
    let daemon = Daemon::start(dir.path());

    let out = agents(&daemon, &["list"], "");
    assert_eq!(out.code, Some(0), "{out:?}");
    assert!(out.stdout.is_empty() && out.stderr.contains("no agent is registered"), "{out:?}");

    for args in [&["show", "nobody"][..], &["remove", "agent:nobody"]] {
        let out = agents(&daemon, args, "");
        assert_eq!(out.code, Some(3), "clutch agents {args:?}: {out:?}");
        assert!(out.stderr.contains("AGENT_NOT_FOUND") && out.stderr.contains("agent:nobody"), "{out:?}");
    }

    // The daemon names every bad field; the exit code is 1 (a refusal, not a missing thing).
    let bad = json!({"v": "clutch/0.2", "agent_id": "ken"});
    let out = agents(&daemon, &["register", "-"], &bad.to_string());
    assert_eq!(out.code, Some(1), "{out:?}");
    assert!(out.stderr.contains("VALIDATION_FAILED"), "{out:?}");
    assert!(out.stderr.contains("\n  v: ") && out.stderr.contains("\n  agent_id: "), "{out:?}");

    let out = agents(&daemon, &["register", "-"], "[]");
    assert_eq!(out.code, Some(1), "{out:?}");
    assert!(out.stderr.contains("stdin must hold an AgentCard"), "{out:?}");
    let out = agents(&daemon, &["register", "-"], "{nope");
    assert_eq!(out.code, Some(1), "{out:?}");
    assert!(out.stderr.contains("stdin is not valid JSON"), "{out:?}");
    let missing = dir.path().join("missing.json");
    let out = agents(&daemon, &["register", missing.to_str().unwrap()], "");
    assert_eq!(out.code, Some(1), "{out:?}");
    assert!(out.stderr.contains("cannot read"), "{out:?}");
}
