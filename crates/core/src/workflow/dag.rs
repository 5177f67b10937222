//! Plan validation: task names, dependencies by name or index, and their order. A plan is accepted
//! only when its dependencies form a DAG; a cycle is refused naming the tasks on it, an unknown
//! dependency naming what was asked for. Pure functions, property-tested.

use std::collections::HashMap;

use clutch_proto::ErrorCode;

use super::api::{PlanTask, TaskRef};
use crate::Refusal;

/// The longest task name.
pub const NAME_MAX: usize = 128;
/// The most tasks in one plan.
pub const TASKS_MAX: usize = 10_000;

/// Resolves each task's dependencies to indices in `tasks`, checking names (present, unique, at
/// most [`NAME_MAX`] characters) and references. Duplicated dependencies are kept once.
pub fn resolve(tasks: &[PlanTask]) -> Result<Vec<Vec<usize>>, Refusal> {
    if tasks.is_empty() {
        return Err(Refusal::new(ErrorCode::ValidationFailed, "a plan needs at least one task").field("tasks"));
    }
    if tasks.len() > TASKS_MAX {
        return Err(
            Refusal::new(ErrorCode::ValidationFailed, format!("a plan holds at most {TASKS_MAX} tasks")).field("tasks")
        );
    }
    let mut by_name: HashMap<&str, usize> = HashMap::with_capacity(tasks.len());
    for (i, task) in tasks.iter().enumerate() {
        let name = task.name.trim();
        if name.is_empty() || name.chars().count() > NAME_MAX {
            return Err(Refusal::new(
                ErrorCode::ValidationFailed,
                format!("task {i}: a name needs 1 to {NAME_MAX} characters"),
            )
            .field(format!("tasks[{i}].name")));
        }
        if let Some(first) = by_name.insert(name, i) {
            return Err(Refusal::new(
                ErrorCode::ValidationFailed,
                format!("tasks {first} and {i} are both named `{name}`; names must be unique"),
            )
            .field(format!("tasks[{i}].name")));
        }
    }
    let mut deps = Vec::with_capacity(tasks.len());
    for (i, task) in tasks.iter().enumerate() {
        let mut mine: Vec<usize> = Vec::with_capacity(task.depends_on.len());
        for (j, r) in task.depends_on.iter().enumerate() {
            let target = match r {
                TaskRef::Index(n) if *n < tasks.len() => *n,
                TaskRef::Index(n) => {
                    return Err(Refusal::new(
                        ErrorCode::ValidationFailed,
                        format!("task `{}` depends on task {n}, but the plan has {} tasks", task.name, tasks.len()),
                    )
                    .field(format!("tasks[{i}].depends_on[{j}]")));
                }
                TaskRef::Name(n) => *by_name.get(n.trim()).ok_or_else(|| {
                    Refusal::new(
                        ErrorCode::ValidationFailed,
                        format!("task `{}` depends on `{n}`, which is not a task of the plan", task.name),
                    )
                    .field(format!("tasks[{i}].depends_on[{j}]"))
                    .hint("name a dependency by its task's name or its index in `tasks`")
                })?,
            };
            if !mine.contains(&target) {
                mine.push(target);
            }
        }
        deps.push(mine);
    }
    Ok(deps)
}

/// A topological order of the tasks (each after its dependencies; ties in plan order), or one cycle
/// as the indices on it, each depending on the next and the last on the first.
pub fn order(deps: &[Vec<usize>]) -> Result<Vec<usize>, Vec<usize>> {
    let n = deps.len();
    let mut waiting: Vec<usize> = deps.iter().map(Vec::len).collect();
    let mut dependents: Vec<Vec<usize>> = vec![Vec::new(); n];
    for (i, ds) in deps.iter().enumerate() {
        for &d in ds {
            dependents[d].push(i);
        }
    }
    // A min-heap keeps ties in plan order.
    let mut ready: std::collections::BinaryHeap<std::cmp::Reverse<usize>> =
        (0..n).filter(|&i| waiting[i] == 0).map(std::cmp::Reverse).collect();
    let mut out = Vec::with_capacity(n);
    while let Some(std::cmp::Reverse(i)) = ready.pop() {
        out.push(i);
        for &j in &dependents[i] {
            waiting[j] -= 1;
            if waiting[j] == 0 {
                ready.push(std::cmp::Reverse(j));
            }
        }
    }
    if out.len() == n {
        return Ok(out);
    }
    // Every task left waits on another one left: walk dependencies until a task repeats.
    let left: Vec<bool> = (0..n).map(|i| waiting[i] > 0).collect();
    let start = (0..n).find(|&i| left[i]).expect("a task is left");
    let mut seen: HashMap<usize, usize> = HashMap::new();
    let mut path = Vec::new();
    let mut at = start;
    loop {
        if let Some(&pos) = seen.get(&at) {
            return Err(path[pos..].to_vec());
        }
        seen.insert(at, path.len());
        path.push(at);
        at = *deps[at].iter().find(|&&d| left[d]).expect("a waiting task has a waiting dependency");
    }
}

/// Validates a plan: resolved dependencies in a topological order, or the refusal naming the cycle.
pub fn check(tasks: &[PlanTask]) -> Result<(Vec<Vec<usize>>, Vec<usize>), Refusal> {
    let deps = resolve(tasks)?;
    match order(&deps) {
        Ok(order) => Ok((deps, order)),
        Err(cycle) => {
            let mut names: Vec<&str> = cycle.iter().map(|&i| tasks[i].name.trim()).collect();
            names.push(names[0]);
            Err(Refusal::new(
                ErrorCode::ValidationFailed,
                format!("the dependencies form a cycle: {}", names.join(" → ")),
            )
            .field(format!("tasks[{}].depends_on", cycle[0]))
            .hint("each name depends on the next; remove one of these dependencies"))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn plan(spec: &[(&str, &[&str])]) -> Vec<PlanTask> {
        spec.iter()
            .map(|(name, deps)| PlanTask {
                name: (*name).to_owned(),
                depends_on: deps.iter().map(|d| TaskRef::Name((*d).to_owned())).collect(),
                ..PlanTask::default()
            })
            .collect()
    }

    #[test]
    fn a_dag_is_ordered_dependencies_first_ties_in_plan_order() {
        let p = plan(&[("test", &["build"]), ("build", &["fetch"]), ("fetch", &[]), ("docs", &[])]);
        let (deps, order) = check(&p).unwrap();
        assert_eq!(deps, vec![vec![1], vec![2], vec![], vec![]]);
        assert_eq!(order, vec![2, 1, 0, 3]);
    }

    #[test]
    fn indices_and_names_mix_and_repeats_collapse() {
        let mut p = plan(&[("a", &[]), ("b", &["a"])]);
        p[1].depends_on.push(TaskRef::Index(0));
        assert_eq!(resolve(&p).unwrap(), vec![vec![], vec![0]]);
    }

    #[test]
    fn refusals_name_the_cycle_the_unknown_dependency_and_the_duplicate() {
        let e = check(&plan(&[("a", &["c"]), ("b", &["a"]), ("c", &["b"]), ("d", &[])])).unwrap_err();
        assert_eq!(e.code, ErrorCode::ValidationFailed);
        assert_eq!(e.message, "the dependencies form a cycle: a → c → b → a");
        let e = check(&plan(&[("a", &["a"])])).unwrap_err();
        assert_eq!(e.message, "the dependencies form a cycle: a → a");
        let e = check(&plan(&[("a", &[]), ("b", &["nope"])])).unwrap_err();
        assert!(e.message.contains("`nope`"), "{}", e.message);
        assert_eq!(e.field.as_deref(), Some("tasks[1].depends_on[0]"));
        let e = check(&plan(&[("a", &[]), ("a", &[])])).unwrap_err();
        assert_eq!(e.field.as_deref(), Some("tasks[1].name"));
        let mut p = plan(&[("a", &[])]);
        p[0].depends_on.push(TaskRef::Index(3));
        assert!(check(&p).unwrap_err().message.contains("depends on task 3"));
        assert!(check(&[]).is_err());
    }

    /// A random DAG: task `i` may depend only on tasks with a larger index, shuffled by `perm`.
    fn dag() -> impl Strategy<Value = Vec<Vec<usize>>> {
        (1usize..40).prop_flat_map(|n| {
            let edges = proptest::collection::vec(proptest::collection::vec(any::<prop::sample::Index>(), 0..4), n);
            (edges, Just(n)).prop_map(|(edges, n)| {
                edges
                    .into_iter()
                    .enumerate()
                    .map(|(i, picks)| {
                        let mut ds: Vec<usize> =
                            picks.into_iter().filter(|_| i + 1 < n).map(|p| i + 1 + p.index(n - i - 1)).collect();
                        ds.sort_unstable();
                        ds.dedup();
                        ds
                    })
                    .collect()
            })
        })
    }

    proptest! {
        #[test]
        fn any_dag_gets_an_order_that_puts_dependencies_first(deps in dag()) {
            let order = order(&deps).expect("a DAG has an order");
            let mut pos = vec![usize::MAX; deps.len()];
            for (p, &i) in order.iter().enumerate() {
                prop_assert_eq!(pos[i], usize::MAX, "task {} twice", i);
                pos[i] = p;
            }
            for (i, ds) in deps.iter().enumerate() {
                for &d in ds {
                    prop_assert!(pos[d] < pos[i], "{} must come before {}", d, i);
                }
            }
        }

        #[test]
        fn a_back_edge_is_refused_with_a_real_cycle(deps in dag(), pick in any::<prop::sample::Index>()) {
            // Find an edge i → d (i depends on d) and add d → i: always a cycle.
            let edges: Vec<(usize, usize)> =
                deps.iter().enumerate().flat_map(|(i, ds)| ds.iter().map(move |&d| (i, d))).collect();
            prop_assume!(!edges.is_empty());
            let (i, d) = edges[pick.index(edges.len())];
            let mut deps = deps;
            deps[d].push(i);
            let cycle = order(&deps).expect_err("a cycle");
            prop_assert!(!cycle.is_empty());
            for (k, &a) in cycle.iter().enumerate() {
                let b = cycle[(k + 1) % cycle.len()];
                prop_assert!(deps[a].contains(&b), "{} does not depend on {}", a, b);
            }
        }

        #[test]
        fn names_resolve_like_indices(deps in dag()) {
            let named: Vec<PlanTask> = deps.iter().enumerate().map(|(i, ds)| PlanTask {
                name: format!("t{i}"),
                depends_on: ds.iter().map(|d| if d % 2 == 0 { TaskRef::Index(*d) } else { TaskRef::Name(format!("t{d}")) }).collect(),
                ..PlanTask::default()
            }).collect();
            prop_assert_eq!(resolve(&named).unwrap(), deps);
        }
    }
}
