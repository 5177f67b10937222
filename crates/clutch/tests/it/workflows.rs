//! `clutch workflows`: create, plan from YAML and from JSON on stdin, list, show and progress as tables
//! and as JSON, through the real binary against a real daemon; and the errors a user meets.

use clutch_core::workflow::api;
use serde_json::Value;

use crate::support::{Daemon, Output, clutch, run};

fn workflows(daemon: &Daemon, args: &[&str], stdin: &str) -> Output {
    let mut cmd = clutch();
    cmd.arg("workflows").args(args).args(["--url", &daemon.url]);
    run(cmd, stdin)
}

const PLAN: &str = "\
summary: Login page
tasks:
  - name: oauth
    description: Wire the OAuth provider
  - name: form
    description: The login form
    depends_on: [oauth]
  - name: docs
    parallel_group: side
";

#[test]
fn create_plan_list_show_and_follow_a_workflow() {
    let dir = tempfile::tempdir().unwrap();
    let daemon = Daemon::start(dir.path());

    let out = workflows(&daemon, &["list"], "");
    assert_eq!(out.code, Some(0), "{out:?}");
    assert!(out.stdout.is_empty() && out.stderr.contains("no workflow; create one"), "{out:?}");

    let out = workflows(&daemon, &["create", "Ship the login page", "--description", "OAuth, then the form"], "");
    assert_eq!(out.code, Some(0), "{out:?}");
    let id = out.stdout.split_whitespace().next().unwrap().to_owned();
    assert!(id.starts_with("run_"), "a workflow is a run: {out:?}");
    assert!(out.stdout.contains(" created: Ship the login page (root task task_"), "{out:?}");
    assert!(out.stdout.ends_with(&format!("plan it with `clutch workflows plan {id} FILE`\n")), "{out:?}");

    let plan = dir.path().join("plan.yaml");
    std::fs::write(&plan, PLAN).unwrap();
    let out = workflows(&daemon, &["plan", &id, plan.to_str().unwrap()], "");
    assert_eq!(out.code, Some(0), "{out:?}");
    assert_eq!(
        out.stdout,
        format!("{id}: a plan of 3 task(s); follow it with `clutch workflows progress {id}`\n"),
        "{out:?}"
    );

    let out = workflows(&daemon, &["list"], "");
    assert_eq!(out.code, Some(0), "{out:?}");
    let lines: Vec<&str> = out.stdout.lines().collect();
    assert_eq!(lines.len(), 2, "{out:?}");
    assert!(lines[0].starts_with("WORKFLOW ") && lines[0].ends_with("  NAME"), "{out:?}");
    let row: Vec<&str> = lines[1].split_whitespace().collect();
    assert_eq!((row[0], row[1], row[2]), (id.as_str(), "in_progress", "0/3"), "{out:?}");
    assert!(row[3].starts_with("20") && lines[1].ends_with("  Ship the login page"), "{out:?}");

    let out = workflows(&daemon, &["show", &id], "");
    assert_eq!(out.code, Some(0), "{out:?}");
    let text = &out.stdout;
    assert!(text.starts_with(&format!("{id} Ship the login page\n")), "{out:?}");
    for line in [
        "status       in_progress",
        "tasks        0 of 3 completed",
        "description  OAuth, then the form",
        "plan         Login page",
    ] {
        assert!(text.lines().any(|l| l == line), "{line:?} missing: {out:?}");
    }
    let table: Vec<Vec<&str>> =
        text.lines().skip_while(|l| !l.starts_with("# ")).map(|l| l.split_whitespace().collect()).collect();
    assert_eq!(
        table,
        [
            vec!["#", "TASK", "STATUS", "AGENT", "AFTER"],
            vec!["0", "oauth", "pending", "-", "-"],
            vec!["1", "form", "pending", "-", "oauth"],
            vec!["2", "docs", "pending", "-", "-"],
        ],
        "{out:?}"
    );

    let out = workflows(&daemon, &["progress", &id], "");
    assert_eq!(out.code, Some(0), "{out:?}");
    assert!(out.stdout.starts_with(&format!("{id} in_progress: 0% of 3 task(s) (3 pending)\n")), "{out:?}");
    let ready: Vec<&str> = out.stdout.split("ready:\n").nth(1).unwrap().split("\n\n").next().unwrap().lines().collect();
    assert_eq!(ready.len(), 3, "a header and the two ready tasks: {out:?}");
    assert!(ready[1].contains(" oauth ") && ready[2].contains(" docs "), "{out:?}");
    let waiting = out.stdout.split("waiting:\n").nth(1).expect("a waiting section");
    assert!(waiting.lines().nth(1).unwrap().starts_with("form  pending  "), "{out:?}");

    // The same as JSON, in the daemon's types.
    let out = workflows(&daemon, &["list", "--status", "in_progress,planning", "--json"], "");
    assert_eq!(out.code, Some(0), "{out:?}");
    let answer: Value = serde_json::from_str(out.stdout.trim()).unwrap();
    let list: Vec<api::WorkflowSummary> = serde_json::from_value(answer["workflows"].clone()).unwrap();
    assert_eq!(list.iter().map(|w| (w.id.as_str(), w.total_tasks)).collect::<Vec<_>>(), [(id.as_str(), 3)]);
    let out = workflows(&daemon, &["list", "--status", "completed", "--json"], "");
    assert_eq!(out.stdout.trim(), r#"{"workflows":[]}"#, "{out:?}");
    let out = workflows(&daemon, &["show", &id, "--json"], "");
    let detail: api::WorkflowDetail = serde_json::from_str(out.stdout.trim()).expect("the workflow view");
    assert_eq!(detail.tasks.iter().map(|t| t.name.as_str()).collect::<Vec<_>>(), ["oauth", "form", "docs"]);
    let out = workflows(&daemon, &["progress", &id, "--json"], "");
    let progress: api::Progress = serde_json::from_str(out.stdout.trim()).expect("the progress view");
    assert_eq!((progress.total, progress.available.len(), progress.blocked.len()), (3, 2, 1));

    // A plan as a JSON list on stdin replaces the tasks not started.
    let out = workflows(&daemon, &["plan", &id, "-", "--summary", "Smaller", "--json"], r#"[{"name": "all of it"}]"#);
    assert_eq!(out.code, Some(0), "{out:?}");
    let set: api::PlanSet = serde_json::from_str(out.stdout.trim()).expect("the plan view");
    assert_eq!((set.tasks.len(), set.replaced.len()), (1, 3), "{out:?}");
    let out = workflows(&daemon, &["show", &id], "");
    assert!(out.stdout.lines().any(|l| l == "plan         Smaller"), "{out:?}");
}

#[test]
fn unknown_workflows_and_bad_plans() {
    let dir = tempfile::tempdir().unwrap();
    let daemon = Daemon::start(dir.path());

    for args in [&["show", "wf_nope"][..], &["progress", "wf_nope"]] {
        let out = workflows(&daemon, args, "");
        assert_eq!(out.code, Some(3), "clutch workflows {args:?}: {out:?}");
        assert!(out.stdout.is_empty() && out.stderr.contains("wf_nope"), "{out:?}");
    }
    let out = workflows(&daemon, &["list", "--status", "done"], "");
    assert_eq!(out.code, Some(1), "{out:?}");
    assert!(
        out.stderr.contains("VALIDATION_FAILED") && out.stderr.contains("unknown workflow status `done`"),
        "{out:?}"
    );

    let out = workflows(&daemon, &["create", "w"], "");
    let id = out.stdout.split_whitespace().next().unwrap().to_owned();
    let out = workflows(&daemon, &["plan", &id, "-"], "summary: no tasks here\n");
    assert_eq!(out.code, Some(1), "{out:?}");
    assert!(out.stderr.contains("stdin must hold the plan's tasks"), "{out:?}");
    let out = workflows(&daemon, &["plan", &id, "-"], "tasks: [unclosed\n");
    assert_eq!(out.code, Some(1), "{out:?}");
    assert!(out.stderr.contains("stdin is neither JSON nor YAML"), "{out:?}");
    // The daemon's own checks: a dependency on a task the plan does not have.
    let out = workflows(&daemon, &["plan", &id, "-"], "- name: a\n  depends_on: [nothing]\n");
    assert_eq!(out.code, Some(1), "{out:?}");
    assert!(out.stderr.contains("nothing"), "{out:?}");
    let missing = dir.path().join("missing.yaml");
    let out = workflows(&daemon, &["plan", &id, missing.to_str().unwrap()], "");
    assert_eq!(out.code, Some(1), "{out:?}");
    assert!(out.stderr.contains("cannot read"), "{out:?}");
}
