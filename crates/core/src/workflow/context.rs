//! Context loading under a token budget (`task_load_context`). Tokens are counted with the
//! cl100k_base tokenizer over the compact JSON of the answer's `context`, and parts are taken in a
//! fixed priority order until the budget is spent, so the answer never exceeds `max_tokens`:
//!
//! 1. the current task: id, name, status, holder, description (shortened only if nothing else fits);
//! 2. its plan; 3. its dependencies' ids;
//! 4. its newest checkpoints (`recent_checkpoints`, newest first);
//! 5. the outcomes of its direct dependencies;
//! 6. the workflow: name, source, description, status, plan summary; 7. the plan's task list;
//! 8. outcomes of the workflow's other ended tasks, most recent first;
//! 9. older checkpoints (only with `all_checkpoints`), newest first.
//!
//! Within a list, the first item that does not fit ends that list (no gaps); later parts may still
//! fit. Each shortening or omission is named in `trimmed`.

use clutch_proto::ErrorCode;
use serde::Serialize;

use super::api::{Checkpoint, Context, ContextAnswer, ContextTask, ContextWorkflow, Include, TaskOutcome};
use crate::Refusal;

/// The tokenizer's name, as reported in answers.
pub const TOKENIZER: &str = "cl100k_base";
/// The default budget.
pub const DEFAULT_MAX_TOKENS: usize = 8000;
/// The smallest budget accepted: room for the current task's ids and name.
pub const MIN_MAX_TOKENS: usize = 256;

/// Everything that could go into a context, gathered from the engine's state.
#[derive(Debug, Clone)]
pub struct Material {
    pub workflow: ContextWorkflow,
    /// The current task with every checkpoint, oldest first.
    pub task: ContextTask,
    pub dependencies: Vec<TaskOutcome>,
    /// Other ended tasks, most recent first.
    pub prior: Vec<TaskOutcome>,
}

/// Tokens of `text` (cl100k_base, ordinary text: special tokens count as text).
pub fn count(text: &str) -> usize {
    tiktoken_rs::cl100k_base_singleton().encode_ordinary(text).len()
}

fn tokens_of<T: Serialize>(value: &T) -> usize {
    count(&serde_json::to_string(value).unwrap_or_default())
}

/// One part that may go in, in priority order.
enum Part {
    Plan,
    DependsOn,
    Checkpoint(usize),
    Dependency(usize),
    WorkflowHead,
    PlanEntry(usize),
    Prior(usize),
    OldCheckpoint(usize),
}

impl Part {
    /// The list it belongs to (a list stops at its first part that does not fit), and its name.
    fn list(&self) -> &'static str {
        match self {
            Part::Plan => "current_task.plan",
            Part::DependsOn => "current_task.depends_on",
            Part::Checkpoint(_) => "current_task.checkpoints (recent)",
            Part::Dependency(_) => "dependency_outcomes",
            Part::WorkflowHead => "workflow",
            Part::PlanEntry(_) => "workflow.plan",
            Part::Prior(_) => "prior_tasks",
            Part::OldCheckpoint(_) => "current_task.checkpoints (older)",
        }
    }
}

/// Builds the context for `include` within `max_tokens` (default [`DEFAULT_MAX_TOKENS`]).
pub fn build(material: Material, include: &Include, max_tokens: Option<usize>) -> Result<ContextAnswer, Refusal> {
    let max = max_tokens.unwrap_or(DEFAULT_MAX_TOKENS);
    if max < MIN_MAX_TOKENS {
        return Err(Refusal::new(ErrorCode::ValidationFailed, format!("max_tokens must be at least {MIN_MAX_TOKENS}"))
            .field("max_tokens"));
    }
    let Material { workflow, task, dependencies, prior } = material;
    let mut trimmed = Vec::new();

    // 1. The task itself must fit; only its description (then its name) is shortened for that.
    let mut core = ContextTask { plan: None, checkpoints: Vec::new(), depends_on: Vec::new(), ..task.clone() };
    shorten(&mut core, max, &mut trimmed);

    // The candidates, in priority order.
    let total = task.checkpoints.len();
    let recent = if include.all_checkpoints { include.recent_checkpoints.max(1) } else { include.recent_checkpoints };
    let recent = recent.min(total);
    let mut parts = Vec::new();
    if task.plan.is_some() {
        parts.push(Part::Plan);
    }
    if !task.depends_on.is_empty() {
        parts.push(Part::DependsOn);
    }
    parts.extend((0..recent).map(|k| Part::Checkpoint(total - 1 - k)));
    if include.dependency_outcomes {
        parts.extend((0..dependencies.len()).map(Part::Dependency));
    }
    if include.workflow_plan {
        parts.push(Part::WorkflowHead);
        parts.extend((0..workflow.plan.len()).map(Part::PlanEntry));
    }
    if include.prior_task_outcomes {
        parts.extend((0..prior.len()).map(Part::Prior));
    }
    if include.all_checkpoints {
        parts.extend((recent..total).map(|k| Part::OldCheckpoint(total - 1 - k)));
    }

    // Estimated costs (each part's own JSON, plus a little for separators and its list's key); the
    // exact count over the assembled context below has the last word.
    let cost = |part: &Part| -> usize {
        2 + match part {
            Part::Plan => tokens_of(&task.plan) + 4,
            Part::DependsOn => tokens_of(&task.depends_on) + 6,
            Part::Checkpoint(i) | Part::OldCheckpoint(i) => tokens_of(&task.checkpoints[*i]),
            Part::Dependency(i) => tokens_of(&dependencies[*i]),
            Part::WorkflowHead => tokens_of(&ContextWorkflow { plan: Vec::new(), ..workflow.clone() }) + 4,
            Part::PlanEntry(i) => tokens_of(&workflow.plan[*i]),
            Part::Prior(i) => tokens_of(&prior[*i]),
        }
    };
    let list_overhead = 8;
    let base = tokens_of(&Context {
        workflow: None,
        current_task: core.clone(),
        dependency_outcomes: Vec::new(),
        prior_tasks: Vec::new(),
    });
    let mut left = max.saturating_sub(base);
    let mut taken: Vec<Part> = Vec::new();
    let mut closed: Vec<&'static str> = Vec::new();
    let mut dropped: Vec<(&'static str, usize)> = Vec::new();
    let mut opened: Vec<&'static str> = Vec::new();
    for part in parts {
        let list = part.list();
        let needs_head = matches!(part, Part::PlanEntry(_)) && !taken.iter().any(|p| matches!(p, Part::WorkflowHead));
        if closed.contains(&list) || needs_head {
            note(&mut dropped, list);
            continue;
        }
        let c = cost(&part) + if opened.contains(&list) { 0 } else { list_overhead };
        if c <= left {
            left -= c;
            if !opened.contains(&list) {
                opened.push(list);
            }
            taken.push(part);
        } else {
            closed.push(list);
            note(&mut dropped, list);
        }
    }

    let assemble = |taken: &[Part]| -> Context {
        let mut current = core.clone();
        let mut ctx_workflow: Option<ContextWorkflow> = None;
        let mut deps = Vec::new();
        let mut priors = Vec::new();
        let mut checkpoints: Vec<&Checkpoint> = Vec::new();
        for part in taken {
            match part {
                Part::Plan => current.plan = task.plan.clone(),
                Part::DependsOn => current.depends_on = task.depends_on.clone(),
                Part::Checkpoint(i) | Part::OldCheckpoint(i) => checkpoints.push(&task.checkpoints[*i]),
                Part::Dependency(i) => deps.push(dependencies[*i].clone()),
                Part::WorkflowHead => ctx_workflow = Some(ContextWorkflow { plan: Vec::new(), ..workflow.clone() }),
                Part::PlanEntry(i) => {
                    if let Some(w) = ctx_workflow.as_mut() {
                        w.plan.push(workflow.plan[*i].clone());
                    }
                }
                Part::Prior(i) => priors.push(prior[*i].clone()),
            }
        }
        checkpoints.sort_by_key(|c| c.seq);
        current.checkpoints = checkpoints.into_iter().cloned().collect();
        Context { workflow: ctx_workflow, current_task: current, dependency_outcomes: deps, prior_tasks: priors }
    };
    let mut context = assemble(&taken);
    let mut tokens = tokens_of(&context);
    // The estimates are close, not exact: drop the lowest-priority parts until the count fits.
    while tokens > max {
        let Some(last) = taken.pop() else { break };
        note(&mut dropped, last.list());
        if matches!(last, Part::WorkflowHead) {
            while matches!(taken.last(), Some(Part::PlanEntry(_))) {
                let entry = taken.pop().expect("an entry");
                note(&mut dropped, entry.list());
            }
        }
        context = assemble(&taken);
        tokens = tokens_of(&context);
    }
    if tokens > max {
        return Err(Refusal::new(
            ErrorCode::ValidationFailed,
            format!("the task alone needs {tokens} tokens, more than max_tokens {max}"),
        )
        .field("max_tokens"));
    }
    for (list, n) in dropped {
        trimmed.push(format!("{list}: {n} left out"));
    }
    Ok(ContextAnswer { context, tokens, max_tokens: max, tokenizer: TOKENIZER.to_owned(), trimmed })
}

fn note(dropped: &mut Vec<(&'static str, usize)>, list: &'static str) {
    match dropped.iter_mut().find(|(l, _)| *l == list) {
        Some((_, n)) => *n += 1,
        None => dropped.push((list, 1)),
    }
}

/// Shortens the task's description, then its name, until the bare task fits in `max` tokens.
fn shorten(core: &mut ContextTask, max: usize, trimmed: &mut Vec<String>) {
    let fits = |t: &ContextTask| {
        tokens_of(&Context {
            workflow: None,
            current_task: t.clone(),
            dependency_outcomes: Vec::new(),
            prior_tasks: Vec::new(),
        }) <= max
    };
    if fits(core) {
        return;
    }
    for field in ["description", "name"] {
        let text = if field == "description" { core.description.clone() } else { core.name.clone() };
        let chars: Vec<char> = text.chars().collect();
        let with = |t: &ContextTask, n: usize| {
            let mut t = t.clone();
            let cut: String = chars[..n].iter().collect::<String>() + if n < chars.len() { "…" } else { "" };
            if field == "description" {
                t.description = cut;
            } else {
                t.name = cut;
            }
            t
        };
        // The longest prefix that fits (binary search on characters).
        let (mut lo, mut hi) = (0usize, chars.len());
        while lo < hi {
            let mid = (lo + hi).div_ceil(2);
            if fits(&with(core, mid)) {
                lo = mid;
            } else {
                hi = mid - 1;
            }
        }
        *core = with(core, lo);
        trimmed.push(format!("current_task.{field}: shortened to {lo} of {} characters", chars.len()));
        if fits(core) {
            return;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::super::api::{CheckpointType, PlanEntry, TaskStatus, WorkflowStatus};
    use super::*;
    use proptest::prelude::*;
    use serde_json::json;

    fn checkpoint(i: usize, words: usize) -> Checkpoint {
        Checkpoint {
            id: format!("msg_{i:026}"),
            seq: i as u64 + 1,
            ts: "2026-01-01T00:00:00Z".into(),
            task_id: "task_01".into(),
            note: crate::payload::Checkpoint {
                kind: CheckpointType::Progress,
                summary: format!("step {i}: ") + &"did a thing ".repeat(words),
                detail: Some(json!({"n": i})),
                files_changed: vec![format!("src/f{i}.rs")],
            },
            agent_id: "agent:a".into(),
        }
    }

    fn outcome(i: usize, words: usize) -> TaskOutcome {
        TaskOutcome {
            id: format!("task_{i}"),
            name: format!("t{i}"),
            status: TaskStatus::Completed,
            outcome: Some("finished the work ".repeat(words)),
            outcome_detail: None,
            error: None,
        }
    }

    fn material(checkpoints: usize, deps: usize, prior: usize, words: usize, description: usize) -> Material {
        Material {
            workflow: ContextWorkflow {
                id: "run_01".into(),
                name: "wf".into(),
                source: Some("issue 4".into()),
                description: Some("a workflow ".repeat(words)),
                status: WorkflowStatus::InProgress,
                plan_summary: Some("the plan".into()),
                plan: (0..deps + prior + 1)
                    .map(|i| PlanEntry {
                        id: format!("task_{i}"),
                        name: format!("t{i}"),
                        status: TaskStatus::Pending,
                        depends_on: vec![],
                    })
                    .collect(),
            },
            task: ContextTask {
                id: "task_01".into(),
                name: "the task".into(),
                description: "describe it ".repeat(description),
                status: TaskStatus::InProgress,
                agent_id: Some("agent:a".into()),
                depends_on: (0..deps).map(|i| format!("task_{i}")).collect(),
                plan: Some(json!("plan: ".repeat(words))),
                checkpoints: (0..checkpoints).map(|i| checkpoint(i, words)).collect(),
                checkpoint_count: checkpoints,
            },
            dependencies: (0..deps).map(|i| outcome(i, words)).collect(),
            prior: (0..prior).map(|i| outcome(i + deps, words)).collect(),
        }
    }

    #[test]
    fn everything_fits_a_large_budget_and_nothing_is_trimmed() {
        let m = material(3, 2, 2, 3, 5);
        let all = Include { all_checkpoints: true, ..Include::default() };
        let a = build(m, &all, None).unwrap();
        assert!(a.trimmed.is_empty(), "{:?}", a.trimmed);
        assert_eq!(a.context.current_task.checkpoints.len(), 3);
        assert_eq!(a.context.dependency_outcomes.len(), 2);
        assert_eq!(a.context.prior_tasks.len(), 2);
        assert_eq!(a.tokens, count(&serde_json::to_string(&a.context).unwrap()));
    }

    #[test]
    fn recent_checkpoints_are_the_newest_and_all_checkpoints_brings_the_rest() {
        let include = Include { recent_checkpoints: 2, ..Include::default() };
        let a = build(material(6, 0, 0, 1, 1), &include, None).unwrap();
        let seqs: Vec<u64> = a.context.current_task.checkpoints.iter().map(|c| c.seq).collect();
        assert_eq!(seqs, vec![5, 6]);
        let a = build(material(6, 0, 0, 1, 1), &Include { all_checkpoints: true, ..include }, None).unwrap();
        assert_eq!(a.context.current_task.checkpoints.len(), 6);
        assert_eq!(a.context.current_task.checkpoint_count, 6);
    }

    #[test]
    fn a_tight_budget_keeps_the_task_and_its_newest_checkpoints_and_says_what_went() {
        let include = Include { all_checkpoints: true, ..Include::default() };
        let a = build(material(40, 5, 20, 30, 10), &include, Some(1200)).unwrap();
        assert!(a.tokens <= 1200);
        assert!(a.context.current_task.plan.is_some());
        let seqs: Vec<u64> = a.context.current_task.checkpoints.iter().map(|c| c.seq).collect();
        assert!(seqs.contains(&40), "the newest checkpoint is kept: {seqs:?}");
        assert!(!a.trimmed.is_empty());
        assert!(a.trimmed.iter().any(|t| t.starts_with("prior_tasks")), "{:?}", a.trimmed);
    }

    #[test]
    fn a_huge_description_is_shortened_to_fit() {
        let a = build(material(0, 0, 0, 1, 5000), &Include::default(), Some(300)).unwrap();
        assert!(a.tokens <= 300, "{}", a.tokens);
        assert!(a.trimmed[0].starts_with("current_task.description: shortened"), "{:?}", a.trimmed);
        assert!(build(material(0, 0, 0, 1, 1), &Include::default(), Some(10)).is_err());
    }

    proptest! {
        #![proptest_config(ProptestConfig { cases: 48, ..ProptestConfig::default() })]
        #[test]
        fn the_budget_is_never_exceeded(
            checkpoints in 0usize..30, deps in 0usize..6, prior in 0usize..12, words in 0usize..60,
            description in 0usize..400, max in 256usize..4000, all in any::<bool>(), recent in 0usize..8,
        ) {
            let include = Include { all_checkpoints: all, recent_checkpoints: recent, ..Include::default() };
            let a = build(material(checkpoints, deps, prior, words, description), &include, Some(max)).unwrap();
            let exact = count(&serde_json::to_string(&a.context).unwrap());
            prop_assert_eq!(exact, a.tokens);
            prop_assert!(a.tokens <= max, "{} > {}", a.tokens, max);
        }
    }
}
