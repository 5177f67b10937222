//! The one decision function: what a workflow event does to the workflows as they stand (with the
//! batch being vetted), one function per kind of event; a refused event changes nothing. A part of
//! the book (`super`), whose vetting and applying both call it.

use std::collections::HashMap;

use clutch_proto::error::Next;
use clutch_proto::{ErrorCode, Message, MessageType};
use serde_json::{Map, Value};

use super::*;
use crate::Refusal;
use crate::registry;
use crate::tasks::ORCHESTRATOR;
use crate::workflow::api::{CheckpointType, TaskStatus};
use crate::workflow::*;

/// The moves a planned task may make from `from` (one table; everything else is refused).
pub fn allowed(from: TaskStatus) -> &'static [TaskStatus] {
    use TaskStatus as S;
    match from {
        S::Pending => &[S::Claimed],
        S::Claimed => &[S::InProgress, S::Completed, S::Failed, S::Blocked, S::Pending],
        S::InProgress => &[S::Completed, S::Failed, S::Blocked, S::Pending],
        S::Blocked => &[S::InProgress, S::Pending, S::Failed],
        S::Completed | S::Failed => &[],
    }
}

/// Checks one move against [`allowed`]; the refusal lists the allowed moves.
pub fn check_move(task_id: &str, from: TaskStatus, to: TaskStatus) -> Result<(), Refusal> {
    let ok = allowed(from);
    if ok.contains(&to) {
        return Ok(());
    }
    let list = if ok.is_empty() {
        "none (it has ended)".to_owned()
    } else {
        ok.iter()
            .map(|s| if *s == TaskStatus::Claimed { "claimed (by a claim)" } else { s.as_str() })
            .collect::<Vec<_>>()
            .join(", ")
    };
    Err(Refusal::new(
        ErrorCode::InvalidTransition,
        format!("task {task_id} is {}; it cannot become {}. Allowed moves: {list}", from.as_str(), to.as_str()),
    )
    .field("status")
    .hint(format!("from {}: {list}", from.as_str())))
}

fn invalid(why: String) -> Refusal {
    Refusal::new(ErrorCode::InvalidTransition, why).field("task_id")
}

fn validation(field: &str, why: impl Into<String>) -> Refusal {
    Refusal::new(ErrorCode::ValidationFailed, why).field(field)
}

fn text<'a>(payload: &'a Map<String, Value>, key: &str) -> Option<&'a str> {
    payload.get(key).and_then(Value::as_str)
}

/// Non-empty text of at most `max` characters at `payload.key`.
fn required_text(payload: &Map<String, Value>, key: &str, max: usize) -> Result<String, Refusal> {
    match text(payload, key).map(str::trim) {
        Some(t) if !t.is_empty() && t.chars().count() <= max => Ok(t.to_owned()),
        Some(t) if !t.is_empty() => {
            Err(validation(&format!("payload.{key}"), format!("{key}: at most {max} characters")))
        }
        _ => Err(validation(&format!("payload.{key}"), format!("{key}: required (non-empty text)"))),
    }
}

/// What `message` does, against the state `view` shows. `live` is given when vetting (claims need a
/// live agent; lease expiry a dead holder); `seq` when applying.
pub(super) fn decide(view: &View<'_>, live: Live<'_>, m: &Message, seq: u64) -> Result<Change, Refusal> {
    let pt = m.payload_type.as_deref().unwrap_or("");
    if let Some(stage) = view.stage
        && let Some(plan) = m.meta.get(PLAN_META).and_then(Value::as_str)
        && !stage.plans.contains(plan)
    {
        return Err(invalid(format!("{} belongs to plan {plan}, which was not stored", m.id)));
    }
    if m.kind == MessageType::TaskRequest {
        if view.task(&m.task_id).is_some() || view.root(&m.task_id).is_some() {
            return Err(invalid(format!("task {} already exists; a new request needs a new task_id", m.task_id)));
        }
        return match pt {
            WORKFLOW_PAYLOAD => new_workflow(view, m),
            TASK_PAYLOAD => new_task(view, m),
            _ => Err(validation("payload_type", format!("`{pt}` is not a workflow request type"))),
        };
    }
    if let Some(wf) = view.root(&m.task_id) {
        let w = view.workflow(wf).expect("a root has its workflow").clone();
        return on_root(view, w, m);
    }
    let Some(item) = view.task(&m.task_id) else { return Ok(Change::Nothing) };
    let item = item.clone();
    on_task(view, item, live, m, seq)
}

fn new_workflow(view: &View<'_>, m: &Message) -> Result<Change, Refusal> {
    if view.workflow(&m.run_id).is_some() {
        return Err(validation("run_id", format!("run {} already holds a workflow", m.run_id)));
    }
    let name = required_text(&m.payload, "name", 200)?;
    Ok(Change::Workflow(Workflow {
        id: m.run_id.clone(),
        root_task_id: m.task_id.clone(),
        thread_id: m.thread_id.clone(),
        name,
        source: text(&m.payload, "source").map(str::to_owned),
        description: text(&m.payload, "description").map(str::to_owned),
        created_by: m.from.agent_id.clone(),
        created_at: m.ts.clone(),
        updated_at: m.ts.clone(),
        plan_summary: None,
        tasks: Vec::new(),
        names: HashMap::new(),
        claimed: false,
        replaced: Vec::new(),
    }))
}

fn new_task(view: &View<'_>, m: &Message) -> Result<Change, Refusal> {
    let Some(w) = m.parent_task_id.as_deref().and_then(|p| view.root(p)).and_then(|id| view.workflow(id)) else {
        return Err(validation("parent_task_id", "a planned task's parent is its workflow's root task"));
    };
    if w.id != m.run_id {
        return Err(validation("run_id", "a planned task belongs to its workflow's run"));
    }
    let name = required_text(&m.payload, "name", dag::NAME_MAX)?;
    if w.names.contains_key(&name) {
        return Err(validation("payload.name", format!("workflow {} already has a task named `{name}`", w.id)));
    }
    let mut depends_on = Vec::new();
    for (i, d) in m.payload.get("depends_on").and_then(Value::as_array).into_iter().flatten().enumerate() {
        let Some(d) = d.as_str() else {
            return Err(validation(&format!("payload.depends_on[{i}]"), "a dependency is a task id"));
        };
        if !view.task(d).is_some_and(|t| t.workflow_id == w.id && !t.cancelled) {
            return Err(validation(
                &format!("payload.depends_on[{i}]"),
                format!("{d} is not a task of workflow {} stored before this one", w.id),
            ));
        }
        depends_on.push(d.to_owned());
    }
    let order = m.payload.get("order").and_then(Value::as_u64).map_or(w.tasks.len() as u32, |o| o as u32);
    let item = PlannedTask {
        id: m.task_id.clone(),
        workflow_id: w.id.clone(),
        name,
        description: text(&m.payload, "description").unwrap_or_default().to_owned(),
        depends_on,
        parallel_group: text(&m.payload, "parallel_group").map(str::to_owned),
        order,
        status: TaskStatus::Pending,
        cancelled: false,
        holder: None,
        last_agent: None,
        former: Vec::new(),
        claimed_at: None,
        claim_seq: 0,
        reason: None,
        plan: None,
        outcome: None,
        outcome_detail: None,
        error: None,
        updated_at: m.ts.clone(),
        ended_seq: None,
    };
    Ok(Change::Task(item, Listing::Added))
}

/// An event on a workflow's root task: a new plan or a workspace; anything else of the daemon's
/// is refused (the root is not claimed or worked on).
fn on_root(view: &View<'_>, w: Workflow, m: &Message) -> Result<Change, Refusal> {
    let pt = m.payload_type.as_deref().unwrap_or("");
    match (m.kind, pt) {
        (MessageType::TaskProgress, PLAN_PAYLOAD) => plan(view, w, m),
        (MessageType::TaskProgress, WORKSPACE_PAYLOAD) => workspace(view, &w, m),
        (MessageType::TaskCancel, _) if !pt.starts_with("clutch.") => {
            Err(invalid(format!("workflow {} cannot be cancelled (yet)", w.id)))
        }
        (MessageType::TaskProgress, _) if !pt.starts_with("clutch.") => Ok(Change::Nothing),
        _ => Err(invalid(format!(
            "task {} is the root of workflow {}: claim and update its planned tasks instead",
            m.task_id, w.id
        ))),
    }
}

/// A plan (`clutch.workflow.plan.v1`): replaces the previous one while no task has been claimed.
fn plan(view: &View<'_>, mut w: Workflow, m: &Message) -> Result<Change, Refusal> {
    if let Some(t) =
        w.tasks.iter().filter_map(|t| view.task(t)).find(|t| t.holder.is_some() || t.status != TaskStatus::Pending)
    {
        return Err(invalid(format!(
            "the plan of workflow {} cannot be replaced: task `{}` was already claimed",
            w.id, t.name
        )));
    }
    if w.claimed {
        return Err(invalid(format!("the plan of workflow {} cannot be replaced: work has begun", w.id)));
    }
    w.plan_summary = text(&m.payload, "summary").map(str::to_owned);
    w.updated_at = m.ts.clone();
    Ok(Change::Workflow(w))
}

/// A workspace as it now is (`clutch.workspace.v1`), on its own workflow's tasks.
fn workspace(view: &View<'_>, w: &Workflow, m: &Message) -> Result<Change, Refusal> {
    let ws: api::Workspace = serde_json::from_value(Value::Object(m.payload.clone()))
        .map_err(|e| validation("payload", format!("not a workspace: {e}")))?;
    if ws.workflow_id != w.id {
        return Err(validation("payload.workflow_id", "a workspace is recorded on its own workflow"));
    }
    clutch_proto::id::check(clutch_proto::id::Kind::Workspace, &ws.id).map_err(|e| validation("payload.id", e))?;
    if let Some(t) = ws.task_ids.iter().find(|t| view.task(t).is_none_or(|i| i.workflow_id != w.id)) {
        return Err(validation("payload.task_ids", format!("{t} is not a task of workflow {}", w.id)));
    }
    Ok(Change::Workspace(ws))
}

/// Who may write to `item`: its holder (or the daemon). Otherwise `LEASE_LOST` when someone else
/// holds it or the writer held it before; `move_` writes to an unheld task fall to the move table.
fn writer(item: &PlannedTask, from: &str, move_: bool) -> Result<(), Refusal> {
    if item.status.is_final() {
        return Err(invalid(format!(
            "task {} has ended ({}); nothing more can be written to it",
            item.id,
            item.status.as_str()
        )));
    }
    if from == ORCHESTRATOR || item.holder.as_deref() == Some(from) {
        return Ok(());
    }
    let lost = |why: String| {
        Err(Refusal::new(ErrorCode::LeaseLost, why)
            .field("agent_id")
            .next(Next::ClaimTask { task_id: item.id.clone() }))
    };
    match &item.holder {
        Some(other) => lost(format!("task {} is held by {other}, not {from}", item.id)),
        None if item.former.iter().any(|a| a == from) => {
            lost(format!("{from} no longer holds task {} (its claim was released or expired)", item.id))
        }
        None if move_ => Ok(()),
        None => lost(format!("task {} is not claimed by {from}", item.id)),
    }
}

/// An event on a planned task, by kind and payload type.
fn on_task(view: &View<'_>, mut item: PlannedTask, live: Live<'_>, m: &Message, seq: u64) -> Result<Change, Refusal> {
    if item.cancelled {
        return Err(invalid(format!("task {} was cancelled when its workflow's plan was replaced", item.id)));
    }
    item.updated_at = m.ts.clone();
    let from = m.from.agent_id.as_str();
    match (m.kind, m.payload_type.as_deref().unwrap_or("")) {
        (MessageType::TaskCancel, _) => cancel(view, item, from),
        (MessageType::TaskAccept, _) => claim(view, item, live, m, seq),
        (MessageType::TaskProgress, TASK_STATUS_PAYLOAD) => status(item, live, m),
        (MessageType::TaskProgress, CHECKPOINT_PAYLOAD) => checkpoint(item, m, seq),
        (MessageType::TaskProgress, TASK_PLAN_PAYLOAD) => task_plan(item, m),
        (MessageType::TaskProgress, p) if p.starts_with("clutch.") => {
            Err(validation("payload_type", format!("`{p}` is not a workflow task event")))
        }
        (MessageType::TaskProgress, _) => {
            writer(&item, from, false)?;
            Ok(Change::Nothing)
        }
        (MessageType::TaskResult, _) => result(item, m),
        (MessageType::TaskError, _) => error(item, m),
        _ => Err(invalid(format!("task {} belongs to a workflow: it is claimed, not routed", item.id))),
    }
}

/// `task.cancel`: a pending task leaves the plan, by its workflow's creator, a user or the daemon.
fn cancel(view: &View<'_>, mut item: PlannedTask, from: &str) -> Result<Change, Refusal> {
    let creator = view.workflow(&item.workflow_id).map(|w| w.created_by.as_str());
    if !(from == ORCHESTRATOR || from.starts_with("user:") || creator == Some(from)) {
        return Err(Refusal::new(
            ErrorCode::Forbidden,
            format!("only the workflow's creator, a user or the daemon may cancel task {}", item.id),
        )
        .field("from.agent_id"));
    }
    if item.status != TaskStatus::Pending {
        return Err(invalid(format!("task {} is {}; only pending tasks are cancelled", item.id, item.status.as_str())));
    }
    item.cancelled = true;
    Ok(Change::Task(item, Listing::Removed))
}

/// `clutch.workflow.status.v1`: in progress, blocked, or back to pending (a release; the daemon's
/// when the holder's lease expired, which needs the holder gone).
fn status(mut item: PlannedTask, live: Live<'_>, m: &Message) -> Result<Change, Refusal> {
    let from = m.from.agent_id.as_str();
    let to = match text(&m.payload, "status") {
        Some("in_progress") => TaskStatus::InProgress,
        Some("blocked") => TaskStatus::Blocked,
        Some("pending") => TaskStatus::Pending,
        Some("completed" | "failed") => {
            return Err(validation(
                "payload.status",
                "completed and failed are reported with task.result and task.error",
            ));
        }
        _ => return Err(validation("payload.status", "status: in_progress, blocked or pending")),
    };
    let reason = text(&m.payload, "reason").map(str::to_owned);
    if from == ORCHESTRATOR && reason.as_deref() == Some(LEASE_EXPIRED) {
        let Some(holder) = item.holder.clone() else {
            return Err(invalid(format!("task {} is not held; no lease can expire", item.id)));
        };
        if let Some(live) = live
            && matches!(live(&holder), Some(registry::Status::Online | registry::Status::Stale))
        {
            return Err(invalid(format!("{holder} is alive and keeps its claim on task {}", item.id)));
        }
    } else {
        writer(&item, from, true)?;
    }
    check_move(&item.id, item.status, to)?;
    if to == TaskStatus::Pending {
        if let Some(h) = item.holder.take()
            && !item.former.contains(&h)
        {
            item.former.push(h);
        }
        item.claimed_at = None;
    }
    item.status = to;
    item.reason = reason;
    Ok(Change::Task(item, Listing::Same))
}

/// `clutch.checkpoint.v1`: by the holder, or by the daemon on an unheld task (recovery).
fn checkpoint(item: PlannedTask, m: &Message, seq: u64) -> Result<Change, Refusal> {
    let from = m.from.agent_id.as_str();
    writer(&item, from, false)?;
    if from == ORCHESTRATOR && item.holder.is_some() {
        return Err(invalid(format!("task {} is held: the daemon records no checkpoint on it", item.id)));
    }
    let kind: CheckpointType = serde_json::from_value(m.payload.get("type").cloned().unwrap_or(Value::Null))
        .map_err(|_| validation("payload.type", "type: plan, progress, decision, error, recovery or complete"))?;
    let summary = required_text(&m.payload, "summary", 4000)?;
    let mut files = Vec::new();
    for (i, f) in m.payload.get("files_changed").and_then(Value::as_array).into_iter().flatten().enumerate() {
        let Some(f) = f.as_str() else {
            return Err(validation(&format!("payload.files_changed[{i}]"), "a file is a path (text)"));
        };
        files.push(f.to_owned());
    }
    Ok(Change::Checkpoint(api::Checkpoint {
        id: m.id.clone(),
        seq,
        ts: m.ts.clone(),
        task_id: item.id.clone(),
        note: crate::payload::Checkpoint {
            kind,
            summary,
            detail: m.payload.get("detail").filter(|d| !d.is_null()).cloned(),
            files_changed: files,
        },
        agent_id: from.to_owned(),
    }))
}

/// `clutch.workflow.task_plan.v1`: the holder's plan for its task.
fn task_plan(mut item: PlannedTask, m: &Message) -> Result<Change, Refusal> {
    writer(&item, &m.from.agent_id, false)?;
    let plan = m.payload.get("plan").filter(|p| !p.is_null()).cloned();
    if plan.is_none() {
        return Err(validation("payload.plan", "plan: required"));
    }
    item.plan = plan;
    Ok(Change::Task(item, Listing::Same))
}

/// `task.result`: completed, with its outcome.
fn result(mut item: PlannedTask, m: &Message) -> Result<Change, Refusal> {
    let from = m.from.agent_id.as_str();
    writer(&item, from, true)?;
    check_move(&item.id, item.status, TaskStatus::Completed)?;
    item.outcome = Some(required_text(&m.payload, "outcome", 100_000).map_err(|e| e.field("outcome"))?);
    item.outcome_detail = m.payload.get("outcome_detail").filter(|d| !d.is_null()).cloned();
    end(&mut item, TaskStatus::Completed, from);
    Ok(Change::Task(item, Listing::Same))
}

/// `task.error`: failed, with what went wrong.
fn error(mut item: PlannedTask, m: &Message) -> Result<Change, Refusal> {
    let from = m.from.agent_id.as_str();
    writer(&item, from, true)?;
    check_move(&item.id, item.status, TaskStatus::Failed)?;
    let error = text(&m.payload, "error").or_else(|| text(&m.payload, "message")).map(str::trim).unwrap_or("");
    if error.is_empty() {
        return Err(validation("error", "error: required (non-empty text) for failed"));
    }
    item.error = Some(error.to_owned());
    end(&mut item, TaskStatus::Failed, from);
    Ok(Change::Task(item, Listing::Same))
}

fn end(item: &mut PlannedTask, status: TaskStatus, from: &str) {
    item.status = status;
    item.last_agent = item.holder.take().or_else(|| Some(from.to_owned()));
    item.reason = None;
}

fn claim(view: &View<'_>, mut item: PlannedTask, live: Live<'_>, m: &Message, seq: u64) -> Result<Change, Refusal> {
    let from = m.from.agent_id.as_str();
    // A task another agent took and finished meanwhile lost the race like one it still holds: the
    // claimer learns who, as data, and moves on to the next task.
    let taken_by = if item.status.is_final() { item.last_agent.as_ref() } else { item.holder.as_ref() };
    if item.status.is_final() && taken_by.is_none() {
        return Err(invalid(format!("task {} has ended ({}); it cannot be claimed", item.id, item.status.as_str())));
    }
    if let Some(holder) = taken_by {
        let mut r = Refusal::new(ErrorCode::AlreadyClaimed, format!("task {} is already claimed by {holder}", item.id))
            .field("task_id");
        r.problems = vec![clutch_proto::Problem { path: "already_claimed_by".into(), message: holder.clone() }];
        return Err(r);
    }
    if let Some(live) = live {
        match live(from) {
            None | Some(registry::Status::Removed) => {
                return Err(Refusal::new(ErrorCode::AgentNotFound, format!("no agent `{from}` is registered"))
                    .field("agent_id")
                    .next(Next::RegisterAgent));
            }
            Some(registry::Status::Offline) => {
                return Err(Refusal::new(ErrorCode::Forbidden, format!("{from} is offline and cannot take a lease"))
                    .field("agent_id")
                    .next(Next::Heartbeat));
            }
            Some(_) => {}
        }
    }
    let unfinished: Vec<String> = item
        .depends_on
        .iter()
        .filter_map(|d| view.task(d))
        .filter(|d| d.status != TaskStatus::Completed)
        .map(|d| format!("`{}` ({})", d.name, d.status.as_str()))
        .collect();
    if !unfinished.is_empty() {
        return Err(invalid(format!(
            "task {} cannot be claimed yet: it depends on unfinished tasks {}",
            item.id,
            unfinished.join(", ")
        ))
        .next(Next::NextTasks { workflow_id: item.workflow_id.clone() }));
    }
    check_move(&item.id, item.status, TaskStatus::Claimed)?;
    item.status = TaskStatus::Claimed;
    item.holder = Some(from.to_owned());
    item.last_agent = Some(from.to_owned());
    item.former.retain(|a| a != from);
    item.claimed_at = Some(m.ts.clone());
    item.claim_seq = seq;
    item.reason = None;
    Ok(Change::Task(item, Listing::Same))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_move_table_allows_exactly_the_documented_moves() {
        use TaskStatus as S;
        let legal: &[(S, S)] = &[
            (S::Pending, S::Claimed),
            (S::Claimed, S::InProgress),
            (S::Claimed, S::Completed),
            (S::Claimed, S::Failed),
            (S::Claimed, S::Blocked),
            (S::Claimed, S::Pending),
            (S::InProgress, S::Completed),
            (S::InProgress, S::Failed),
            (S::InProgress, S::Blocked),
            (S::InProgress, S::Pending),
            (S::Blocked, S::InProgress),
            (S::Blocked, S::Pending),
            (S::Blocked, S::Failed),
        ];
        for from in S::ALL {
            for to in S::ALL {
                let r = check_move("task_x", from, to);
                if legal.contains(&(from, to)) {
                    assert!(r.is_ok(), "{from:?} → {to:?} should be allowed");
                } else {
                    let e = r.expect_err("illegal");
                    assert_eq!(e.code, ErrorCode::InvalidTransition);
                    assert!(e.message.contains("Allowed moves:"), "{}", e.message);
                    for ok in allowed(from) {
                        assert!(e.message.contains(ok.as_str()), "{} lists {}", e.message, ok.as_str());
                    }
                }
            }
        }
    }
}
