//! Workflows in the engine on a real SQLite store: plans as DAGs, next-task selection, the status
//! machine through the engine, racing claims, lease expiry on a manual clock with recovery by
//! another agent, LEASE_LOST, restarts and the recovery flow, context budgets, and git worktrees in a
//! temporary repository.

use std::path::Path;
use std::time::{Duration, SystemTime};

use clutch_core::clock::Clock;
use clutch_core::engine::{Options, SYSTEM_TASK};
use clutch_core::view::TaskState;
use clutch_core::workflow::api::{
    AddCheckpoint, CheckpointType, Claim, CreateWorkflow, CreateWorkspace, Include, ListWorkflows, LoadContext,
    NextTasks, PlanTask, Release, SetPlan, SetTaskPlan, TaskRef, TaskStatus, UpdateStatus, UpdateWorkspace,
    WorkflowStatus, WorkspaceStatus,
};
use clutch_core::{Engine, Error};
use serde_json::json;

use crate::engine::{Hub, hub, until_footprint};

fn code(e: Error) -> &'static str {
    e.code().as_str()
}

fn field(e: &Error) -> Option<String> {
    match e {
        Error::Refused(r) => r.field.clone(),
        _ => None,
    }
}

fn task(name: &str, deps: &[&str]) -> PlanTask {
    PlanTask {
        name: name.to_owned(),
        description: format!("do {name}"),
        depends_on: deps.iter().map(|d| TaskRef::Name((*d).to_owned())).collect(),
        parallel_group: None,
    }
}

async fn agents(h: &Hub, names: &[&str]) {
    for n in names {
        h.register(n, json!({})).await;
    }
}

/// A workflow with the plan `tasks`; returns (workflow id, task ids in plan order).
async fn workflow(engine: &Engine, tasks: Vec<PlanTask>) -> (String, Vec<String>) {
    let w = engine
        .workflow_create(CreateWorkflow { name: "oauth".into(), source: Some("issue 7".into()), ..Default::default() })
        .await
        .unwrap();
    let plan = engine
        .workflow_set_plan(SetPlan {
            workflow_id: w.id.clone(),
            summary: Some("the plan".into()),
            tasks,
            agent_id: None,
        })
        .await
        .unwrap();
    (w.id, plan.tasks.into_iter().map(|t| t.id).collect())
}

fn status(task: &str, status: TaskStatus) -> UpdateStatus {
    UpdateStatus {
        id: task.to_owned(),
        status,
        outcome: None,
        outcome_detail: None,
        error: None,
        reason: None,
        agent_id: None,
    }
}

fn done(task: &str, agent: &str, outcome: &str) -> UpdateStatus {
    UpdateStatus { outcome: Some(outcome.into()), agent_id: Some(agent.into()), ..status(task, TaskStatus::Completed) }
}

fn checkpoint(task: &str, agent: &str, summary: &str) -> AddCheckpoint {
    AddCheckpoint {
        task_id: task.to_owned(),
        kind: CheckpointType::Progress,
        summary: summary.to_owned(),
        detail: Some(json!({"step": summary})),
        files_changed: vec!["src/auth.rs".into()],
        agent_id: Some(agent.to_owned()),
    }
}

async fn claim(engine: &Engine, task: &str, agent: &str) -> clutch_core::workflow::api::ClaimAnswer {
    engine.task_claim(Claim { task_id: task.to_owned(), agent_id: agent.to_owned() }).await.unwrap()
}

fn next(engine: &Engine, workflow: &str) -> Vec<String> {
    let answer = engine
        .workflow_next_tasks(&NextTasks { workflow_id: workflow.to_owned(), limit: Some(500), cursor: None })
        .unwrap();
    answer.tasks.into_iter().map(|t| t.name).collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_plan_is_a_dag_and_next_tasks_follow_its_dependencies_to_the_end() {
    let h = hub(Options::default()).await;
    let e = &h.core().engine;
    agents(&h, &["a"]).await;
    let w = e.workflow_create(CreateWorkflow { name: "oauth".into(), ..Default::default() }).await.unwrap();
    assert_eq!(w.status, WorkflowStatus::Planning);
    let head = h.core().log.head().await.unwrap();

    // A cycle, an unknown dependency and a duplicate name are refused, naming them; nothing is stored.
    let set = |tasks: Vec<PlanTask>| SetPlan { workflow_id: w.id.clone(), summary: None, tasks, agent_id: None };
    let cycle = e.workflow_set_plan(set(vec![task("a", &["c"]), task("b", &["a"]), task("c", &["b"])])).await;
    let err = cycle.unwrap_err();
    assert_eq!(err.code().as_str(), "VALIDATION_FAILED");
    assert!(err.to_string().contains("a → c → b → a"), "{err}");
    let unknown = e.workflow_set_plan(set(vec![task("a", &["ghost"])])).await.unwrap_err();
    assert!(unknown.to_string().contains("`ghost`"), "{unknown}");
    let twice = e.workflow_set_plan(set(vec![task("a", &[]), task("a", &[])])).await.unwrap_err();
    assert_eq!(code(twice), "VALIDATION_FAILED");
    assert_eq!(h.core().log.head().await.unwrap(), head, "refused plans store nothing");

    // Dependencies by name and by index; stored in a topological order, answered in plan order.
    let mut tasks = vec![task("test", &["build"]), task("build", &[]), task("docs", &[]), task("ship", &["test"])];
    tasks[3].depends_on.push(TaskRef::Index(2));
    tasks[2].parallel_group = Some("side".into());
    let plan = e.workflow_set_plan(set(tasks)).await.unwrap();
    let names: Vec<&str> = plan.tasks.iter().map(|t| t.name.as_str()).collect();
    assert_eq!(names, ["test", "build", "docs", "ship"]);
    let id = |n: &str| plan.tasks.iter().find(|t| t.name == n).unwrap().id.clone();
    assert_eq!(plan.tasks[0].depends_on, vec![id("build")]);
    assert_eq!(plan.tasks[3].depends_on, vec![id("test"), id("docs")]);
    assert_eq!(next(e, &w.id), ["build", "docs"]);

    // A task whose dependencies are unfinished cannot be claimed, and says which.
    let early = e.task_claim(Claim { task_id: id("test"), agent_id: "agent:a".into() }).await.unwrap_err();
    assert!(early.to_string().contains("`build` (pending)"), "{early}");
    assert_eq!(code(early), "INVALID_TRANSITION");

    assert!(claim(e, &id("build"), "agent:a").await.success);
    assert_eq!(next(e, &w.id), ["docs"]);
    let p = e.workflow_progress(&w.id).unwrap();
    assert_eq!(p.status, WorkflowStatus::InProgress);
    assert_eq!((p.counts[&TaskStatus::Claimed], p.counts[&TaskStatus::Pending], p.total), (1, 3, 4));
    assert_eq!(p.current[0].name, "build");
    let waiting = p.blocked.iter().find(|b| b.name == "test").unwrap();
    assert!(waiting.why.contains("waits for build"), "{}", waiting.why);

    for n in ["build", "docs", "test", "ship"] {
        if n != "build" {
            assert!(claim(e, &id(n), "agent:a").await.success, "{n}");
        }
        e.task_update_status(done(&id(n), "agent:a", &format!("{n} done"))).await.unwrap();
    }
    let p = e.workflow_progress(&w.id).unwrap();
    assert_eq!((p.status, p.percent, p.counts[&TaskStatus::Completed]), (WorkflowStatus::Completed, 100.0, 4));
    let listed = e.workflow_list(&ListWorkflows { status: vec![WorkflowStatus::Completed], limit: None });
    assert_eq!(listed.len(), 1);
    assert!(e.workflow_list(&ListWorkflows { status: vec![WorkflowStatus::InProgress], limit: None }).is_empty());
    // The routed-task view shows workflow tasks too.
    let view = e.task(&id("ship")).unwrap();
    assert_eq!((view.state, view.agent.as_deref()), (TaskState::Completed, Some("agent:a")));
    let tree = e.run_tasks(&w.id).unwrap();
    assert_eq!(tree.tasks[0].children.as_ref().unwrap().len(), 4);
    h.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_status_machine_takes_only_its_moves_and_demands_outcome_and_error() {
    let h = hub(Options::default()).await;
    let e = &h.core().engine;
    agents(&h, &["a"]).await;
    let (_, ids) = workflow(e, vec![task("one", &[]), task("two", &[]), task("three", &[])]).await;
    let as_a = |t: &str, s: TaskStatus| UpdateStatus { agent_id: Some("agent:a".into()), ..status(t, s) };

    // pending: only a claim moves it.
    for s in [TaskStatus::InProgress, TaskStatus::Blocked, TaskStatus::Pending] {
        let err = e.task_update_status(as_a(&ids[0], s)).await.unwrap_err();
        assert_eq!(err.code().as_str(), "INVALID_TRANSITION", "pending → {s:?}");
        assert!(err.to_string().contains("claimed (by a claim)"), "{err}");
    }
    let err = e.task_update_status(as_a(&ids[0], TaskStatus::Claimed)).await.unwrap_err();
    assert_eq!(code(err), "VALIDATION_FAILED");

    assert!(claim(e, &ids[0], "agent:a").await.success);
    // completed needs an outcome, failed an error.
    let err = e.task_update_status(as_a(&ids[0], TaskStatus::Completed)).await.unwrap_err();
    assert_eq!((err.code().as_str(), field(&err)), ("VALIDATION_FAILED", Some("outcome".into())));
    let err = e.task_update_status(as_a(&ids[0], TaskStatus::Failed)).await.unwrap_err();
    assert_eq!(field(&err), Some("error".into()));
    // claimed → in_progress → blocked → in_progress; blocked → completed is not a move.
    e.task_update_status(as_a(&ids[0], TaskStatus::InProgress)).await.unwrap();
    let blocked = UpdateStatus { reason: Some("waiting for API keys".into()), ..as_a(&ids[0], TaskStatus::Blocked) };
    e.task_update_status(blocked).await.unwrap();
    let err = e.task_update_status(done(&ids[0], "agent:a", "x")).await.unwrap_err();
    assert!(err.to_string().contains("Allowed moves: in_progress, pending, failed"), "{err}");
    let err = e.task_update_status(as_a(&ids[0], TaskStatus::Blocked)).await.unwrap_err();
    assert_eq!(code(err), "INVALID_TRANSITION");
    e.task_update_status(as_a(&ids[0], TaskStatus::InProgress)).await.unwrap();
    let t = e.task_update_status(done(&ids[0], "agent:a", "shipped")).await.unwrap();
    assert_eq!((t.status, t.outcome.as_deref()), (TaskStatus::Completed, Some("shipped")));
    // Final: nothing moves.
    for s in [TaskStatus::InProgress, TaskStatus::Pending, TaskStatus::Failed] {
        let err = e.task_update_status(UpdateStatus { error: Some("x".into()), ..as_a(&ids[0], s) }).await.unwrap_err();
        assert_eq!(code(err), "INVALID_TRANSITION");
    }
    // A claim on a finished task lost the race to whoever finished it: data, not an error.
    let late = e.task_claim(Claim { task_id: ids[0].clone(), agent_id: "agent:b".into() }).await.unwrap();
    assert_eq!((late.success, late.already_claimed_by.as_deref()), (false, Some("agent:a")));

    // A failure ends the workflow when nothing else can run; a blocked holder keeps it blocked.
    assert!(claim(e, &ids[1], "agent:a").await.success);
    let failed = UpdateStatus { error: Some("provider refused".into()), ..as_a(&ids[1], TaskStatus::Failed) };
    let t = e.task_update_status(failed).await.unwrap();
    assert_eq!((t.status, t.error.as_deref()), (TaskStatus::Failed, Some("provider refused")));
    assert!(claim(e, &ids[2], "agent:a").await.success);
    e.task_update_status(as_a(&ids[2], TaskStatus::Blocked)).await.unwrap();
    let w = e.workflow_progress(&e.workflow_list(&ListWorkflows::default())[0].id).unwrap();
    assert_eq!(w.status, WorkflowStatus::Blocked);
    e.task_update_status(UpdateStatus { error: Some("gave up".into()), ..as_a(&ids[2], TaskStatus::Failed) })
        .await
        .unwrap();
    let w = e.workflow_progress(&w.workflow_id).unwrap();
    assert_eq!(w.status, WorkflowStatus::Failed);
    // Unknown tasks and agents.
    assert_eq!(
        code(
            e.task_claim(Claim { task_id: "task_01J00000000000000000000000".into(), agent_id: "agent:a".into() })
                .await
                .unwrap_err()
        ),
        "TASK_NOT_FOUND"
    );
    h.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn of_many_racing_claimers_exactly_one_wins_and_the_rest_learn_who() {
    let h = hub(Options::default()).await;
    let names: Vec<String> = (0..32).map(|i| format!("r{i}")).collect();
    agents(&h, &names.iter().map(String::as_str).collect::<Vec<_>>()).await;
    let e = h.core().engine.clone();
    let (_, ids) = workflow(&e, vec![task("prize", &[])]).await;
    let racers: Vec<_> = names
        .iter()
        .map(|n| {
            let (e, task, agent) = (e.clone(), ids[0].clone(), format!("agent:{n}"));
            tokio::spawn(async move {
                (agent.clone(), e.task_claim(Claim { task_id: task, agent_id: agent }).await.unwrap())
            })
        })
        .collect();
    let mut winners = Vec::new();
    let mut told = Vec::new();
    for r in racers {
        let (agent, answer) = r.await.unwrap();
        if answer.success {
            // How to renew is each face's to say; core leaves it to them.
            assert!(answer.lease.as_ref().is_some_and(|l| l.agent_id == agent && l.renew.is_empty()));
            winners.push(agent);
        } else {
            told.push(answer.already_claimed_by.unwrap());
        }
    }
    assert_eq!(winners.len(), 1, "exactly one claim wins: {winners:?}");
    assert_eq!(told.len(), 31);
    assert!(told.iter().all(|t| *t == winners[0]), "losers are told the winner: {told:?}");
    // The winner claiming again is answered as holding it; an unregistered agent is refused.
    assert!(claim(&e, &ids[0], &winners[0]).await.success);
    let err = e.task_claim(Claim { task_id: ids[0].clone(), agent_id: "agent:ghost".into() }).await;
    assert!(!err.unwrap().success, "held: data, whoever asks");
    let (_, free) = workflow(&e, vec![task("free", &[])]).await;
    let err = e.task_claim(Claim { task_id: free[0].clone(), agent_id: "agent:ghost".into() }).await.unwrap_err();
    assert_eq!(code(err), "AGENT_NOT_FOUND");
    h.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_lost_lease_returns_the_task_with_a_recovery_note_and_another_agent_finishes_it() {
    let clock = Clock::manual(SystemTime::now());
    let options = Options {
        stale_after: Duration::from_secs(1),
        offline_after: Duration::from_secs(2),
        clock: clock.clone(),
        ..Options::default()
    };
    let h = hub(options).await;
    let e = &h.core().engine;
    agents(&h, &["a", "b"]).await;
    let (_, ids) = workflow(e, vec![task("migrate", &[])]).await;
    let t = &ids[0];
    assert!(claim(e, t, "agent:a").await.success);
    e.task_set_plan(SetTaskPlan {
        task_id: t.clone(),
        plan: json!(["schema", "backfill"]),
        agent_id: Some("agent:a".into()),
    })
    .await
    .unwrap();
    e.task_update_status(UpdateStatus { agent_id: Some("agent:a".into()), ..status(t, TaskStatus::InProgress) })
        .await
        .unwrap();
    e.checkpoint_add(checkpoint(t, "agent:a", "schema migrated")).await.unwrap();

    // a falls silent; b keeps beating. a goes stale, then offline, and loses its lease.
    let head = h.core().log.head().await.unwrap();
    clock.advance(Duration::from_millis(1500));
    e.heartbeat("agent:b").await.unwrap();
    h.wait(SYSTEM_TASK, head, |v| v["payload"]["agent_id"] == "agent:a" && v["payload"]["status"] == "stale").await;
    clock.advance(Duration::from_millis(1500));
    e.heartbeat("agent:b").await.unwrap();
    let released = h.wait(t, head, |v| v["payload"]["reason"] == "lease_expired").await;
    assert_eq!(released["from"]["agent_id"], "agent:orchestrator");
    let note =
        h.wait(t, head, |v| v["payload_type"] == "clutch.checkpoint.v1" && v["payload"]["type"] == "recovery").await;
    assert!(note["payload"]["summary"].as_str().unwrap().contains("schema migrated"), "{note}");

    // a's writes are refused now; the task is pending for someone else.
    let err = e.checkpoint_add(checkpoint(t, "agent:a", "backfill half done")).await.unwrap_err();
    assert_eq!(code(err), "LEASE_LOST");
    let err = e.task_update_status(done(t, "agent:a", "done")).await.unwrap_err();
    assert_eq!(code(err), "LEASE_LOST");
    let detail = e.task_detail(t).unwrap();
    assert_eq!((detail.summary.status, detail.summary.reason.as_deref()), (TaskStatus::Pending, Some("lease_expired")));

    let grant = claim(e, t, "agent:b").await;
    assert!(grant.success);
    let ctx = e
        .task_load_context(LoadContext {
            task_id: t.clone(),
            include: Include { all_checkpoints: true, ..Include::default() },
            max_tokens: None,
        })
        .await
        .unwrap();
    let kinds: Vec<CheckpointType> = ctx.context.current_task.checkpoints.iter().map(|c| c.note.kind).collect();
    assert_eq!(kinds, [CheckpointType::Progress, CheckpointType::Recovery]);
    assert_eq!(ctx.context.current_task.plan, Some(json!(["schema", "backfill"])));
    e.task_update_status(done(t, "agent:b", "migrated and backfilled")).await.unwrap();
    assert_eq!(e.task_detail(t).unwrap().summary.agent_id.as_deref(), Some("agent:b"));
    h.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn only_the_holder_writes_and_a_released_agent_has_lost_its_lease() {
    let h = hub(Options::default()).await;
    let e = &h.core().engine;
    agents(&h, &["a", "b"]).await;
    let (_, ids) = workflow(e, vec![task("one", &[])]).await;
    let t = &ids[0];
    // Writes to an unclaimed task: no lease.
    assert_eq!(code(e.checkpoint_add(checkpoint(t, "agent:a", "x")).await.unwrap_err()), "LEASE_LOST");
    assert!(claim(e, t, "agent:a").await.success);
    assert_eq!(code(e.checkpoint_add(checkpoint(t, "agent:b", "x")).await.unwrap_err()), "LEASE_LOST");
    let plan = SetTaskPlan { task_id: t.clone(), plan: json!("steal"), agent_id: Some("agent:b".into()) };
    assert_eq!(code(e.task_set_plan(plan).await.unwrap_err()), "LEASE_LOST");
    let release = Release { task_id: t.clone(), agent_id: Some("agent:b".into()), reason: None };
    assert_eq!(code(e.task_release(release).await.unwrap_err()), "LEASE_LOST");
    // Without an agent named, a write acts as the holder (admin callers).
    let c =
        e.checkpoint_add(AddCheckpoint { agent_id: None, ..checkpoint(t, "agent:a", "as the holder") }).await.unwrap();
    assert_eq!(c.agent_id, "agent:a");
    let back =
        e.task_release(Release { task_id: t.clone(), agent_id: Some("agent:a".into()), reason: None }).await.unwrap();
    assert_eq!((back.status, back.reason.as_deref()), (TaskStatus::Pending, Some("released")));
    assert_eq!(code(e.checkpoint_add(checkpoint(t, "agent:a", "late")).await.unwrap_err()), "LEASE_LOST");
    // The daemon's own voice is not for borrowing.
    let err = e.task_claim(Claim { task_id: t.clone(), agent_id: "agent:orchestrator".into() }).await.unwrap_err();
    assert_eq!(code(err), "FORBIDDEN");
    assert!(claim(e, t, "agent:b").await.success);
    h.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_plan_may_be_replaced_until_work_begins() {
    let h = hub(Options::default()).await;
    let e = &h.core().engine;
    agents(&h, &["a"]).await;
    let (w, old) = workflow(e, vec![task("draft", &[]), task("review", &["draft"])]).await;
    let set = |tasks| SetPlan { workflow_id: w.clone(), summary: None, tasks, agent_id: None };
    let plan = e.workflow_set_plan(set(vec![task("draft", &[]), task("polish", &["draft"])])).await.unwrap();
    assert_eq!(plan.replaced, old);
    assert_eq!(next(e, &w), ["draft"]);
    assert_eq!(e.workflow_get(&w).unwrap().tasks.len(), 2);
    assert_eq!(
        code(e.task_claim(Claim { task_id: old[0].clone(), agent_id: "agent:a".into() }).await.unwrap_err()),
        "TASK_NOT_FOUND"
    );
    assert!(claim(e, &plan.tasks[0].id, "agent:a").await.success);
    let err = e.workflow_set_plan(set(vec![task("other", &[])])).await.unwrap_err();
    assert_eq!(err.code().as_str(), "INVALID_TRANSITION");
    assert!(err.to_string().contains("`draft`"), "{err}");
    h.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn after_a_restart_the_recovery_flow_finds_the_work_and_every_checkpoint() {
    let mut h = hub(Options::default()).await;
    agents(&h, &["a"]).await;
    let e = h.core().engine.clone();
    let (w, ids) = workflow(&e, vec![task("setup", &[]), task("google", &["setup"]), task("github", &["setup"])]).await;
    assert!(claim(&e, &ids[0], "agent:a").await.success);
    e.task_update_status(done(&ids[0], "agent:a", "passport configured")).await.unwrap();
    assert!(claim(&e, &ids[1], "agent:a").await.success);
    e.task_update_status(UpdateStatus { agent_id: Some("agent:a".into()), ..status(&ids[1], TaskStatus::InProgress) })
        .await
        .unwrap();
    for i in 0..8 {
        e.checkpoint_add(checkpoint(&ids[1], "agent:a", &format!("step {i}"))).await.unwrap();
    }
    let before = e.workflow_get(&w).unwrap();
    let checkpoints = e.checkpoints(&ids[1]).unwrap();
    assert_eq!(next(&e, &w), ["github"]);
    // From the snapshot a clean stop saves, then (other options: the snapshot is ignored) from the log.
    h.restart(Options::default()).await;
    assert!(h.core().engine.loaded_snapshot_seq() > 0);
    assert_eq!(h.core().engine.workflow_get(&w).unwrap(), before, "the snapshot holds the workflows");
    assert_eq!(next(&h.core().engine, &w), ["github"], "and what is ready next");
    h.restart(Options { heartbeat_interval: Duration::from_secs(11), ..Options::default() }).await;
    assert_eq!(h.core().engine.loaded_snapshot_seq(), 0);
    let e = h.core().engine.clone();
    assert_eq!(e.workflow_get(&w).unwrap(), before, "the state is rebuilt exactly from the log");
    assert_eq!(next(&e, &w), ["github"]);
    assert_eq!(e.checkpoints(&ids[1]).unwrap(), checkpoints);

    // The agent's context was reset: workflow_list → workflow_progress → task_load_context.
    let found = e.workflow_list(&ListWorkflows { status: vec![WorkflowStatus::InProgress], limit: None });
    assert_eq!(found.len(), 1);
    let progress = e.workflow_progress(&found[0].id).unwrap();
    assert_eq!(progress.current.len(), 1);
    let current = &progress.current[0];
    assert_eq!((current.name.as_str(), current.agent_id.as_deref()), ("google", Some("agent:a")));
    let include =
        Include { workflow_plan: true, prior_task_outcomes: true, all_checkpoints: true, ..Include::default() };
    let ctx =
        e.task_load_context(LoadContext { task_id: current.id.clone(), include, max_tokens: None }).await.unwrap();
    let summaries: Vec<&str> = ctx.context.current_task.checkpoints.iter().map(|c| c.note.summary.as_str()).collect();
    assert_eq!(summaries, (0..8).map(|i| format!("step {i}")).collect::<Vec<_>>());
    assert_eq!(ctx.context.dependency_outcomes[0].outcome.as_deref(), Some("passport configured"));
    assert_eq!(ctx.context.workflow.as_ref().unwrap().plan.len(), 3);
    assert!(ctx.trimmed.is_empty());
    // The claim survived the restart: the holder finishes.
    e.task_update_status(done(&current.id, "agent:a", "google login works")).await.unwrap();
    h.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn loaded_context_never_exceeds_its_budget() {
    let h = hub(Options::default()).await;
    let e = &h.core().engine;
    agents(&h, &["a"]).await;
    let tasks: Vec<PlanTask> =
        (0..12).map(|i| task(&format!("t{i}"), if i == 11 { &["t0", "t1"] } else { &[] })).collect();
    let (_, ids) = workflow(e, tasks).await;
    for id in &ids[..11] {
        assert!(claim(e, id, "agent:a").await.success);
        e.task_update_status(done(id, "agent:a", &"a long outcome with many words ".repeat(40))).await.unwrap();
    }
    let t = &ids[11];
    assert!(claim(e, t, "agent:a").await.success);
    for i in 0..30 {
        let mut c = checkpoint(t, "agent:a", &format!("step {i} {}", "detail ".repeat(30)));
        c.kind = if i % 3 == 0 { CheckpointType::Decision } else { CheckpointType::Progress };
        e.checkpoint_add(c).await.unwrap();
    }
    let mut trimmed_some = false;
    for max in [256, 300, 500, 1000, 2000, 4000, 8000, 16000] {
        for all in [false, true] {
            let include = Include { all_checkpoints: all, ..Include::default() };
            let a =
                e.task_load_context(LoadContext { task_id: t.clone(), include, max_tokens: Some(max) }).await.unwrap();
            assert!(a.tokens <= max, "{} tokens over a budget of {max}", a.tokens);
            assert_eq!(a.tokens, clutch_core::workflow::context::count(&serde_json::to_string(&a.context).unwrap()));
            trimmed_some |= !a.trimmed.is_empty();
        }
    }
    assert!(trimmed_some);
    let err = e.task_load_context(LoadContext { task_id: t.clone(), max_tokens: Some(10), ..Default::default() }).await;
    assert_eq!(code(err.unwrap_err()), "VALIDATION_FAILED");
    h.stop().await;
}

fn git(dir: &Path, args: &[&str]) -> String {
    let out = std::process::Command::new("git")
        .arg("-C")
        .arg(dir)
        .args(["-c", "user.name=t", "-c", "user.email=t@example.com", "-c", "init.defaultBranch=main"])
        .args(args)
        .output()
        .unwrap();
    assert!(out.status.success(), "git {args:?}: {}", String::from_utf8_lossy(&out.stderr));
    String::from_utf8_lossy(&out.stdout).trim().to_owned()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn workspaces_are_git_worktrees_and_git_errors_store_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let roots = clutch_core::roots::Roots::new(&[dir.path().to_owned()]).unwrap();
    let h = hub(Options { workspace_roots: roots, ..Options::default() }).await;
    let e = &h.core().engine;
    let (w, ids) = workflow(e, vec![task("google", &[]), task("github", &[])]).await;
    let dir_path = dir.path().canonicalize().unwrap();
    let repo = dir.path().join("myapp");
    std::fs::create_dir(&repo).unwrap();
    git(&repo, &["init", "-q"]);
    std::fs::write(repo.join("README"), "hello\n").unwrap();
    git(&repo, &["add", "README"]);
    git(&repo, &["commit", "-q", "-m", "first"]);
    let create = |branch: &str| CreateWorkspace {
        workflow_id: w.clone(),
        branch: branch.to_owned(),
        base_branch: Some("main".into()),
        create_worktree: true,
        repo_path: repo.to_string_lossy().into_owned(),
        path: None,
        task_ids: vec![ids[0].clone()],
        agent_id: None,
    };
    let ws = e.workspace_create(create("feature/google-oauth")).await.unwrap();
    let path = Path::new(ws.path.as_deref().unwrap()).to_owned();
    assert_eq!(path, dir_path.join("myapp.worktrees").join("feature-google-oauth"));
    assert!(path.join("README").is_file());
    assert_eq!(git(&path, &["rev-parse", "--abbrev-ref", "HEAD"]), "feature/google-oauth");
    assert!(ws.id.starts_with("ws_") && ws.worktree && ws.status == WorkspaceStatus::Active);
    assert_eq!(e.workflow_get(&w).unwrap().workspaces, vec![ws.clone()]);

    // The branch exists; not a repository; an unknown base; an unknown task: clear errors, nothing stored.
    let head = h.core().log.head().await.unwrap();
    let err = e.workspace_create(create("feature/google-oauth")).await.unwrap_err();
    assert_eq!(err.code().as_str(), "GIT_FAILED");
    assert!(err.to_string().contains("already exists"), "{err}");
    let plain = dir.path().join("plain");
    std::fs::create_dir(&plain).unwrap();
    let err = e
        .workspace_create(CreateWorkspace { repo_path: plain.to_string_lossy().into_owned(), ..create("x") })
        .await
        .unwrap_err();
    assert_eq!((err.code().as_str(), field(&err)), ("VALIDATION_FAILED", Some("repo_path".into())));
    // Outside the roots, however it is spelled: refused before git runs.
    let elsewhere = tempfile::tempdir().unwrap();
    std::os::unix::fs::symlink(elsewhere.path(), dir.path().join("out")).unwrap();
    for (repo_path, path, at) in [
        (elsewhere.path().to_string_lossy().into_owned(), None, "repo_path"),
        (repo.to_string_lossy().into_owned(), Some(elsewhere.path().join("wt")), "path"),
        (repo.to_string_lossy().into_owned(), Some(repo.join("../../escape")), "path"),
        (repo.to_string_lossy().into_owned(), Some(dir.path().join("out/wt")), "path"),
    ] {
        let path = path.map(|p| p.to_string_lossy().into_owned());
        let err = e.workspace_create(CreateWorkspace { repo_path, path, ..create("w") }).await.unwrap_err();
        assert_eq!((err.code().as_str(), field(&err)), ("PATH_NOT_ALLOWED", Some(at.into())), "{err}");
    }
    assert_eq!(std::fs::read_dir(elsewhere.path()).unwrap().count(), 0, "nothing made outside");
    let err =
        e.workspace_create(CreateWorkspace { base_branch: Some("nope".into()), ..create("y") }).await.unwrap_err();
    assert_eq!(field(&err), Some("base_branch".into()));
    let err = e
        .workspace_create(CreateWorkspace { task_ids: vec!["task_01J00000000000000000000000".into()], ..create("z") })
        .await;
    assert_eq!(code(err.unwrap_err()), "VALIDATION_FAILED");
    assert_eq!(h.core().log.head().await.unwrap(), head);
    assert_eq!(e.workflow_get(&w).unwrap().workspaces.len(), 1);

    // A dirty worktree is not removed; a clean one is, and the workspace records the merge.
    std::fs::write(path.join("wip.txt"), "unsaved").unwrap();
    let update = UpdateWorkspace {
        id: ws.id.clone(),
        status: Some(WorkspaceStatus::Merged),
        merge_commit: Some(git(&repo, &["rev-parse", "HEAD"])),
        cleanup_worktree: true,
        agent_id: None,
    };
    let err = e.workspace_update(update.clone()).await.unwrap_err();
    assert_eq!(err.code().as_str(), "GIT_FAILED");
    assert!(err.to_string().contains("uncommitted changes (wip.txt)"), "{err}");
    assert!(path.is_dir());
    std::fs::remove_file(path.join("wip.txt")).unwrap();
    let merged = e.workspace_update(update).await.unwrap();
    assert!(!path.exists());
    assert_eq!((merged.status, merged.worktree), (WorkspaceStatus::Merged, false));
    assert_eq!(e.workflow_get(&w).unwrap().workspaces[0], merged);
    let err = e.workspace_update(UpdateWorkspace { id: "ws_01J00000000000000000000000".into(), ..Default::default() });
    assert_eq!(code(err.await.unwrap_err()), "NOT_FOUND");
    h.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn planned_tasks_sent_as_messages_are_vetted_by_name_and_dependency() {
    let mut h = hub(Options::default()).await;
    let e = h.core().engine.clone();
    let (w, ids) = workflow(&e, vec![task("draft", &[]), task("review", &["draft"])]).await;
    let (_, elsewhere) = workflow(&e, vec![task("elsewhere", &[])]).await;
    let root = e.workflow_get(&w).unwrap().summary;
    // A planned task as the engine writes one, appended to the log: vetted again by the workflow
    // book (clients cannot send `clutch.*` payloads; this is the check behind workflow_set_plan).
    let planned = |name: &str, deps: &[&String]| {
        json!({
            "run_id": w, "thread_id": root.thread_id, "task_id": clutch_proto::id::generate(clutch_proto::id::Kind::Task),
            "parent_task_id": root.root_task_id, "from": {"agent_id": "user:ana"}, "to": [], "type": "task.request",
            "payload_type": "clutch.workflow.task.v1", "payload": {"name": name, "depends_on": deps},
        })
    };
    let refused = |r: Result<_, Error>| {
        let e = r.unwrap_err();
        (code_of(&e), field(&e))
    };
    assert_eq!(
        refused(append(&h, planned("draft", &[])).await),
        ("VALIDATION_FAILED", Some("payload.name".to_owned())),
        "a second task named `draft`"
    );
    assert_eq!(
        refused(append(&h, planned("ship", &[&elsewhere[0]])).await),
        ("VALIDATION_FAILED", Some("payload.depends_on[0]".to_owned())),
        "a dependency on another workflow's task"
    );
    append(&h, planned("ship", &[&ids[1]])).await.unwrap();
    let names = |e: &Engine| e.workflow_get(&w).unwrap().tasks.into_iter().map(|t| t.name).collect::<Vec<_>>();
    assert_eq!(names(&e), ["draft", "review", "ship"]);

    // A replaced plan frees its names and its tasks can no longer be depended on; a restart (from
    // the snapshot, then from the log alone) keeps both.
    let plan = e
        .workflow_set_plan(SetPlan {
            workflow_id: w.clone(),
            summary: None,
            tasks: vec![task("ship", &[])],
            agent_id: None,
        })
        .await
        .unwrap();
    assert_eq!(plan.replaced.len(), 3);
    for options in [Options::default(), Options { heartbeat_interval: Duration::from_secs(11), ..Options::default() }] {
        h.restart(options).await;
        assert_eq!(names(&h.core().engine), ["ship"]);
        assert_eq!(next(&h.core().engine, &w), ["ship"], "a replaced plan's tasks are never next");
        assert_eq!(
            refused(append(&h, planned("ship", &[])).await),
            ("VALIDATION_FAILED", Some("payload.name".to_owned()))
        );
        assert_eq!(
            refused(append(&h, planned("polish", &[&ids[0]])).await),
            ("VALIDATION_FAILED", Some("payload.depends_on[0]".to_owned())),
            "a dependency on a cancelled task"
        );
    }
    append(&h, planned("draft", &[&plan.tasks[0].id])).await.unwrap();
    assert_eq!(names(&h.core().engine), ["ship", "draft"]);
    h.stop().await;
}

async fn append(h: &Hub, message: serde_json::Value) -> Result<(), Error> {
    let m = clutch_proto::validate::message(&message, &clutch_proto::validate::Defaults { now: SystemTime::now() })
        .unwrap();
    h.core().log.append(vec![m]).await.unwrap().pop().unwrap().map(|_| ())
}

fn code_of(e: &Error) -> &'static str {
    e.code().as_str()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn next_tasks_come_in_pages_each_ready_task_once() {
    let h = hub(Options::default()).await;
    let e = &h.core().engine;
    agents(&h, &["a"]).await;
    let names: Vec<String> = (0..500).map(|i| format!("t{i:03}")).collect();
    let (w, ids) = workflow(e, names.iter().map(|n| task(n, &[])).collect()).await;
    let page = |cursor: Option<String>, limit: Option<usize>| {
        e.workflow_next_tasks(&NextTasks { workflow_id: w.clone(), limit, cursor }).unwrap()
    };

    // Ten a page by default; the cursor walks the plan, and the last page has none.
    let (mut seen, mut cursor, mut pages) = (Vec::new(), None, 0);
    loop {
        let answer = page(cursor.take(), None);
        assert!(answer.tasks.len() <= 10);
        pages += 1;
        if pages == 15 {
            // Tasks claimed meanwhile: those not yet listed drop out; nothing comes twice.
            for id in &ids[140..160] {
                assert!(claim(e, id, "agent:a").await.success);
            }
        }
        seen.extend(answer.tasks.into_iter().map(|t| t.id));
        match answer.next_cursor {
            Some(c) => cursor = Some(c),
            None => break,
        }
    }
    assert_eq!(pages, 49, "490 tasks in pages of 10");
    let unique: std::collections::HashSet<&String> = seen.iter().collect();
    assert_eq!(unique.len(), seen.len(), "no task is listed twice");
    let expected: Vec<String> =
        ids.iter().enumerate().filter(|(i, _)| !(150..160).contains(i)).map(|(_, id)| id.clone()).collect();
    assert_eq!(seen, expected, "each ready task once, in plan order; those claimed before their page are not listed");

    // A page of 500 holds them all; a limit outside 1..=500 or a cursor not given is refused.
    let all = page(None, Some(500));
    assert_eq!((all.tasks.len(), all.next_cursor), (480, None));
    for (limit, cursor, wrong) in
        [(Some(0), None, "limit"), (Some(501), None, "limit"), (None, Some("t100".to_owned()), "cursor")]
    {
        let err = e.workflow_next_tasks(&NextTasks { workflow_id: w.clone(), limit, cursor }).unwrap_err();
        assert_eq!((err.code().as_str(), field(&err).as_deref()), ("VALIDATION_FAILED", Some(wrong)));
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_ended_workflow_leaves_memory_and_every_read_still_answers_from_the_log() {
    let clock = Clock::manual(SystemTime::now());
    let options = Options { ended_retention: Duration::from_millis(300), clock: clock.clone(), ..Options::default() };
    let mut h = hub(options.clone()).await;
    let e = h.core().engine.clone();
    agents(&h, &["a"]).await;
    let (done_w, ids) = workflow(&e, vec![task("build", &[]), task("test", &["build"])]).await;
    let (open_w, open_ids) = workflow(&e, vec![task("later", &[])]).await;
    claim(&e, &ids[0], "agent:a").await;
    e.checkpoint_add(checkpoint(&ids[0], "agent:a", "compiled")).await.unwrap();
    e.task_update_status(done(&ids[0], "agent:a", "built")).await.unwrap();
    claim(&e, &ids[1], "agent:a").await;
    e.task_update_status(done(&ids[1], "agent:a", "tested")).await.unwrap();
    claim(&e, &open_ids[0], "agent:a").await;

    let context = LoadContext { task_id: ids[1].clone(), max_tokens: Some(4000), include: Include::default() };
    let detail = e.find_workflow(&done_w).await.unwrap();
    let progress = e.find_workflow_progress(&done_w).await.unwrap();
    let task_detail = e.find_task_detail(&ids[0]).await.unwrap();
    let checkpoints = e.find_checkpoints(&ids[0]).await.unwrap();
    let loaded = e.task_load_context(context.clone()).await.unwrap();
    let next = NextTasks { workflow_id: done_w.clone(), limit: None, cursor: None };
    let next_before = e.find_next_tasks(&next).await.unwrap();
    assert_eq!(detail, e.workflow_get(&done_w).unwrap(), "in memory, both reads agree");
    let tree = e.run_tasks(&done_w).unwrap();
    let task_view = e.find_task(&ids[1]).await.unwrap().unwrap();
    assert_eq!(progress.status, WorkflowStatus::Completed);

    // Past its retention the ended workflow leaves; the open one stays.
    assert_eq!(e.footprint().workflows, 2);
    clock.advance(Duration::from_secs(1));
    until_footprint(&h, "one workflow", |f| f.workflows == 1).await;
    assert!(e.workflow_get(&done_w).is_err(), "the ended workflow left memory");
    assert!(e.workflow_get(&open_w).is_ok(), "the open one stays");
    let reads = |e: Engine| {
        let (done_w, ids, context, next) = (done_w.clone(), ids.clone(), context.clone(), next.clone());
        async move {
            (
                e.find_workflow(&done_w).await.unwrap(),
                e.find_workflow_progress(&done_w).await.unwrap(),
                e.find_task_detail(&ids[0]).await.unwrap(),
                e.find_checkpoints(&ids[0]).await.unwrap(),
                e.task_load_context(context).await.unwrap(),
                e.find_next_tasks(&next).await.unwrap(),
            )
        }
    };
    let expected = (detail, progress, task_detail, checkpoints, loaded, next_before);
    assert_eq!(e.find_run_tasks(&done_w).await.unwrap(), Some(tree), "the run's tree, from the log");
    assert_eq!(e.find_task(&ids[1]).await.unwrap(), Some(task_view));
    assert_eq!(reads(e.clone()).await, expected, "every read answers as before, from the log");
    // A late write about one of its tasks is refused as about an ended task.
    let late = e.task_update_status(done(&ids[1], "agent:a", "again")).await.unwrap_err();
    assert_eq!(code(late), "INVALID_TRANSITION");
    // After a restart too (from the snapshot, which no longer holds it).
    h.restart(options).await;
    let e = h.core().engine.clone();
    assert!(e.workflow_get(&done_w).is_err());
    assert_eq!(reads(e.clone()).await, expected);
    let late = e.task_claim(Claim { task_id: ids[0].clone(), agent_id: "agent:a".into() }).await.unwrap_err();
    assert_eq!(code(late), "INVALID_TRANSITION", "without tombstones the log says it ended");
    assert!(e.find_workflow(&clutch_proto::id::generate(clutch_proto::id::Kind::Run)).await.is_err());
    h.stop().await;
}
