//! `clutch runs list|show`, `clutch threads list|show`, `clutch tasks list`, `clutch search` and `clutch reindex`
//! through the real binary against a real daemon: the rows of a few runs, a page at a time with the
//! `more:` line and `--cursor`, every page with `--all`, the daemon's JSON, and its refusals.

use std::time::Duration;

use clutch_proto::id::{Kind, generate};
use serde_json::{Value, json};

use crate::support::{Daemon, Output, clutch, post, run, run_id, stream_until};

fn cli(daemon: &Daemon, args: &[&str]) -> Output {
    let mut cmd = clutch();
    cmd.args(args).args(["--url", &daemon.url]);
    run(cmd, "")
}

/// The rows of a table on stdout, header first, split on whitespace.
fn rows(out: &Output) -> Vec<Vec<String>> {
    out.stdout.lines().map(|l| l.split_whitespace().map(str::to_owned).collect()).collect()
}

/// The ids in the first column of a table, without its header.
fn ids(out: &Output) -> Vec<String> {
    rows(out).into_iter().skip(1).map(|r| r[0].clone()).collect()
}

/// The page of a `--json` listing.
fn page(out: &Output) -> Value {
    assert_eq!(out.code, Some(0), "{out:?}");
    let page: Value = serde_json::from_str(out.stdout.trim()).unwrap_or_else(|e| panic!("{e}: {out:?}"));
    assert!(page["items"].is_array() && page["as_of"].is_u64(), "{page}");
    page
}

/// The cursor of the `more:` line on stderr.
fn more(out: &Output, command: &str) -> String {
    let line = out.stderr.lines().find(|l| l.starts_with("more: ")).unwrap_or_else(|| panic!("no more: line: {out:?}"));
    assert!(line.starts_with(&format!("more: clutch {command} ")), "{out:?}");
    line.rsplit_once(" --cursor ").map(|(_, c)| c.to_owned()).unwrap_or_else(|| panic!("no cursor: {out:?}"))
}

struct Runs {
    deploy: (String, String),
    invoice: (String, String),
    task: (String, String),
}

/// Two chats (a run and a thread each) and a task no agent can take, which fails.
async fn three_runs(daemon: &Daemon) -> Runs {
    let http = reqwest::Client::new();
    let chat = |text: &str| {
        let (run, thread) = (run_id(), generate(Kind::Thread));
        let body = json!({
            "run_id": run, "thread_id": thread, "task_id": generate(Kind::Task),
            "from": {"agent_id": "user:ada"}, "to": [{"agent_id": "agent:ken"}],
            "type": "chat.message", "payload": {"text": text},
        });
        (run, thread, body)
    };
    let (deploy_run, deploy_thread, deploy) = chat("the deploy of the west region failed at noon");
    let (invoice_run, invoice_thread, invoice) = chat("the invoice numbers look fine");
    let (task_run, task_thread, task_id) = (run_id(), generate(Kind::Thread), generate(Kind::Task));
    let request = json!({
        "run_id": task_run, "thread_id": task_thread, "task_id": task_id,
        "from": {"agent_id": "user:ada"}, "to": [{"agent_id": "agent:orchestrator"}],
        "type": "task.request", "requires": ["skill:research"], "payload": {"goal": "summarise the quarterly report"},
    });
    for body in [&deploy, &invoice, &request] {
        let (status, ack) = post(&http, &daemon.url, body).await;
        assert_eq!(status, 201, "{ack}");
    }
    // No agent is registered: the router fails the task.
    stream_until(&daemon.url, &[("task_id", task_id.as_str())], Duration::from_secs(15), |events| {
        events.iter().any(|e| e["type"] == "task.error")
    })
    .await;
    Runs { deploy: (deploy_run, deploy_thread), invoice: (invoice_run, invoice_thread), task: (task_run, task_id) }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn lists_as_tables_and_json_a_page_at_a_time_or_all() {
    let dir = tempfile::tempdir().unwrap();
    let daemon = Daemon::start(dir.path());
    let runs = three_runs(&daemon).await;
    let (task_run, task_id) = (runs.task.0.as_str(), runs.task.1.as_str());

    // Newest first: the failed task's run, then the chats in reverse order.
    let out = cli(&daemon, &["runs", "list"]);
    assert_eq!(out.code, Some(0), "{out:?}");
    assert_eq!(rows(&out)[0], ["RUN", "STATE", "KIND", "TASKS", "LAST", "TITLE"], "{out:?}");
    assert_eq!(ids(&out), [task_run, runs.invoice.0.as_str(), runs.deploy.0.as_str()], "{out:?}");
    let lines: Vec<&str> = out.stdout.lines().collect();
    let task_row: Vec<&str> = lines[1].split("  ").filter(|c| !c.is_empty()).map(str::trim).collect();
    assert_eq!(task_row[1..4], ["failed", "task", "1 failed"], "{out:?}");
    assert!(task_row[4].ends_with(" ago") && task_row[5] == "summarise the quarterly report", "{out:?}");
    assert_eq!(rows(&out)[2][1..4], ["active", "chat", "-"], "{out:?}");
    assert!(lines[2].ends_with("  the invoice numbers look fine"), "{out:?}");
    assert!(!out.stderr.contains("more:"), "one page holds them all: {out:?}");

    let all = page(&cli(&daemon, &["runs", "list", "--json"]));
    assert_eq!(all["items"].as_array().unwrap().len(), 3, "{all}");
    assert_eq!(all["items"][0]["run_id"], task_run);
    assert!(all.get("next").is_none(), "{all}");
    let failed = page(&cli(&daemon, &["runs", "list", "--state", "failed", "--json"]));
    assert_eq!(failed["items"].as_array().unwrap().len(), 1, "{failed}");
    let chats = cli(&daemon, &["runs", "list", "--kind", "chat"]);
    assert_eq!(ids(&chats), [runs.invoice.0.as_str(), runs.deploy.0.as_str()], "{chats:?}");

    // A page at a time: the `more:` line on stderr names the next page, stdout holds the table only.
    let first = cli(&daemon, &["runs", "list", "--limit", "1"]);
    assert_eq!(first.code, Some(0), "{first:?}");
    assert_eq!(ids(&first), [task_run], "{first:?}");
    let cursor = more(&first, "runs list --limit 1");
    let second = cli(&daemon, &["runs", "list", "--limit", "1", "--cursor", &cursor]);
    assert_eq!(ids(&second), [runs.invoice.0.as_str()], "{second:?}");
    let cursor = more(&second, "runs list");
    let third = cli(&daemon, &["runs", "list", "--limit", "1", "--cursor", &cursor]);
    assert_eq!(ids(&third), [runs.deploy.0.as_str()], "{third:?}");
    assert!(!third.stderr.contains("more:"), "the last page: {third:?}");
    let json = page(&cli(&daemon, &["runs", "list", "--limit", "1", "--json"]));
    assert!(json["next"].is_string() && !first.stdout.contains("more:"), "{json}");

    // Every page.
    let out = cli(&daemon, &["runs", "list", "--limit", "1", "--all"]);
    assert_eq!(ids(&out), [task_run, runs.invoice.0.as_str(), runs.deploy.0.as_str()], "{out:?}");
    assert!(!out.stderr.contains("more:"), "{out:?}");
    let out = page(&cli(&daemon, &["runs", "list", "--limit", "1", "--all", "--json"]));
    let listed: Vec<&str> = out["items"].as_array().unwrap().iter().map(|r| r["run_id"].as_str().unwrap()).collect();
    assert_eq!(listed, [task_run, runs.invoice.0.as_str(), runs.deploy.0.as_str()], "{out}");

    // Threads: of a run, and one shown as its events.
    let out = cli(&daemon, &["threads", "list"]);
    assert_eq!(rows(&out)[0], ["THREAD", "RUN", "MSGS", "PARTICIPANTS", "LAST", "TITLE"], "{out:?}");
    assert_eq!(ids(&out).len(), 3, "{out:?}");
    let out = cli(&daemon, &["threads", "list", "--run", &runs.deploy.0]);
    assert_eq!(ids(&out), [runs.deploy.1.as_str()], "{out:?}");
    assert_eq!(rows(&out)[1][1..4], [runs.deploy.0.as_str(), "1", "user:ada"], "{out:?}");
    let out = page(&cli(&daemon, &["threads", "list", "--agent", "user:nobody", "--json"]));
    assert_eq!(out["items"], json!([]), "{out}");
    let out = cli(&daemon, &["threads", "show", &runs.invoice.1]);
    assert_eq!(out.code, Some(0), "{out:?}");
    let lines: Vec<&str> = out.stdout.lines().collect();
    assert_eq!(lines.len(), 1, "{out:?}");
    assert!(
        lines[0].contains("chat.message") && lines[0].ends_with("user:ada → agent:ken  the invoice numbers look fine")
    );
    let out = cli(&daemon, &["threads", "show", &runs.invoice.1, "--json"]);
    let event: Value = serde_json::from_str(out.stdout.trim()).expect("one event as JSON");
    assert_eq!(event["payload"]["text"], "the invoice numbers look fine");

    // Tasks, by state.
    let out = cli(&daemon, &["tasks", "list", "--state", "failed"]);
    assert_eq!(out.code, Some(0), "{out:?}");
    assert_eq!(rows(&out)[0], ["TASK", "STATE", "AGENT", "LAST", "TITLE"], "{out:?}");
    assert_eq!(ids(&out), [task_id], "{out:?}");
    assert_eq!(rows(&out)[1][1..3], ["failed", "-"], "{out:?}");
    let out = cli(&daemon, &["tasks", "list", "--state", "completed"]);
    assert_eq!(out.code, Some(0), "{out:?}");
    assert!(out.stdout.is_empty() && out.stderr.contains("no tasks"), "{out:?}");
    let out = page(&cli(&daemon, &["tasks", "list", "--run", task_run, "--json"]));
    assert_eq!(out["items"][0]["error"]["code"], "NO_ELIGIBLE_AGENT", "{out}");

    // A run in full: its facts, its task tree and its thread.
    let out = cli(&daemon, &["runs", "show", task_run]);
    assert_eq!(out.code, Some(0), "{out:?}");
    assert!(out.stdout.starts_with(&format!("{task_run}  summarise the quarterly report\n")), "{out:?}");
    assert!(out.stdout.lines().any(|l| l.starts_with(task_id) && l.contains("  failed  ")), "{out:?}");
    assert!(out.stdout.contains("1 task: 1 failed"), "{out:?}");
    assert!(out.stdout.lines().any(|l| l.starts_with("thr_") && l.contains(task_run)), "{out:?}");
    let out = cli(&daemon, &["runs", "show", &runs.deploy.0]);
    assert!(out.stdout.contains("no tasks: only messages"), "{out:?}");
    let out = cli(&daemon, &["runs", "show", &runs.deploy.0, "--json"]);
    let shown: Value = serde_json::from_str(out.stdout.trim()).unwrap();
    assert_eq!((shown["tasks"].clone(), shown["threads"][0]["thread_id"].clone()), (Value::Null, json!(runs.deploy.1)));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn search_finds_words_with_a_snippet() {
    let dir = tempfile::tempdir().unwrap();
    let daemon = Daemon::start(dir.path());
    let runs = three_runs(&daemon).await;

    let out = cli(&daemon, &["search", "WEST", "deploy"]);
    assert_eq!(out.code, Some(0), "{out:?}");
    assert_eq!(rows(&out)[0], ["SEQ", "TYPE", "FROM", "RUN", "SNIPPET"], "{out:?}");
    let hits = rows(&out);
    assert_eq!(hits.len(), 2, "one hit: {out:?}");
    assert_eq!(hits[1][1..4], ["chat.message", "user:ada", runs.deploy.0.as_str()], "{out:?}");
    assert!(out.stdout.contains("the [deploy] of the [west] region failed"), "{out:?}");

    let found = page(&cli(&daemon, &["search", "deploy", "--json"]));
    assert_eq!(found["items"].as_array().unwrap().len(), 1, "{found}");
    assert!(found["items"][0]["snippet"].as_str().unwrap().contains("[deploy]"), "{found}");
    let out = cli(&daemon, &["search", "the", "--run", &runs.invoice.0]);
    assert_eq!(ids(&out).len(), 1, "{out:?}");

    // Paging a search: the `more:` line repeats the words.
    let out = cli(&daemon, &["search", "the", "--limit", "1"]);
    assert_eq!(ids(&out).len(), 1, "{out:?}");
    let cursor = more(&out, "search the --limit 1");
    let next = cli(&daemon, &["search", "the", "--limit", "1", "--cursor", &cursor]);
    assert_eq!(ids(&next).len(), 1, "{next:?}");
    assert_ne!(ids(&out), ids(&next), "the next page holds the next hit");

    let out = cli(&daemon, &["search", "nowhere"]);
    assert_eq!(out.code, Some(0), "{out:?}");
    assert!(out.stdout.is_empty() && out.stderr.contains("nothing matches `nowhere`"), "{out:?}");

    // Derived again from the log, the search finds the same.
    let out = cli(&daemon, &["reindex"]);
    assert_eq!(out.code, Some(0), "{out:?}");
    assert!(out.stdout.starts_with("reindexed ") && out.stdout.contains(" events in "), "{out:?}");
    let json = page_of(&cli(&daemon, &["reindex", "--json"]));
    assert!(json["events"].as_u64().unwrap() >= 3, "{json}");
    let again = page(&cli(&daemon, &["search", "deploy", "--json"]));
    assert_eq!(again["items"], found["items"]);
}

/// A JSON answer on stdout.
fn page_of(out: &Output) -> Value {
    assert_eq!(out.code, Some(0), "{out:?}");
    serde_json::from_str(out.stdout.trim()).unwrap_or_else(|e| panic!("{e}: {out:?}"))
}

#[test]
fn refusals_name_the_field_and_unknown_things_exit_3() {
    let dir = tempfile::tempdir().unwrap();
    let daemon = Daemon::start(dir.path());
    for (args, field) in [
        (&["runs", "list", "--state", "sleeping"][..], "state"),
        (&["tasks", "list", "--state", "sleeping"], "state"),
        (&["runs", "list", "--kind", "party"], "kind"),
        (&["threads", "list", "--since", "yesterday"], "since"),
        (&["tasks", "list", "--limit", "0"], "limit"),
        (&["runs", "list", "--cursor", "nonsense"], "cursor"),
        (&["search", ",;"], "q"),
    ] {
        let out = cli(&daemon, args);
        assert_eq!(out.code, Some(1), "clutch {args:?}: {out:?}");
        assert!(out.stdout.is_empty(), "{out:?}");
        assert!(
            out.stderr.contains("VALIDATION_FAILED") && out.stderr.contains(&format!("\n  field: {field}\n")),
            "clutch {args:?}: {out:?}"
        );
    }
    let out = cli(&daemon, &["runs", "list", "--state", "sleeping"]);
    assert!(out.stderr.contains("hint: active, completed, failed, cancelled"), "{out:?}");

    for args in [&["runs", "show", "run_nope"][..], &["threads", "show", "thr_nope"]] {
        let out = cli(&daemon, args);
        assert_eq!(out.code, Some(3), "clutch {args:?}: {out:?}");
        assert!(out.stderr.contains("_nope"), "{out:?}");
    }
}

#[test]
fn every_list_command_has_help_with_examples() {
    for command in [
        &["runs", "list"][..],
        &["runs", "show"],
        &["threads"],
        &["threads", "list"],
        &["threads", "show"],
        &["tasks", "list"],
        &["search"],
        &["reindex"],
    ] {
        let mut cmd = clutch();
        cmd.args(command).arg("--help");
        let out = run(cmd, "");
        assert_eq!(out.code, Some(0), "clutch {command:?} --help: {out:?}");
        assert!(out.stdout.contains("EXAMPLES:\n  clutch "), "clutch {command:?} --help: {out:?}");
    }
    let mut cmd = clutch();
    cmd.arg("search");
    assert_eq!(run(cmd, "").code, Some(2), "the words are required");
}
