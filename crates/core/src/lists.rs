//! Lists of runs, threads and tasks, and search, as every face asks for them: one input type
//! ([`ListInput`], the HTTP query and the MCP tools' arguments alike), checked into the store's
//! [`Query`] with a precise refusal for each bad field; the engine's operations (`Engine::list_runs`,
//! `list_threads`, `list_tasks`, `search`) read the store's rows ([`clutch_store::lists`]).

use std::time::{Duration, SystemTime};

use clutch_proto::ErrorCode;
use clutch_store::lists::{self, Cursor, List, PAGE_DEFAULT, PAGE_MAX, Query, RunKind, RunState};
use schemars::JsonSchema;
use serde::Deserialize;

use crate::view::TaskState;
use crate::{Error, Refusal, Result};

/// The longest search text taken.
pub const SEARCH_MAX: usize = 1000;

/// What a list or a search selects; each filter given must match. A list refuses the filters it does
/// not take.
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ListInput {
    /// Search only: the words to find (every one must match).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub q: Option<String>,
    /// Runs: active, completed, failed or cancelled. Tasks: a task state (requested, routed, accepted,
    /// running, completed, failed, cancelled, timed_out, pending, claimed, in_progress, blocked, ...).
    pub state: Option<String>,
    /// Runs: an agent involved; threads: a participant; tasks: the agent given it; search: the sender.
    pub agent: Option<String>,
    /// Tasks: a capability their request requires, as written (`skill:code`).
    pub capability: Option<String>,
    /// Threads, tasks and search: of this run.
    pub run: Option<String>,
    /// Tasks and search: of this workflow (its id).
    pub workflow: Option<String>,
    /// Tasks: children of this task.
    pub parent: Option<String>,
    /// Tasks and search: in this thread.
    pub thread: Option<String>,
    /// Search: about this task.
    pub task: Option<String>,
    /// Runs: chat, task, workflow or session.
    pub kind: Option<String>,
    /// Last activity (search: the event's time) at or after: an RFC 3339 time, or an age such as
    /// `90s`, `15m`, `2h`, `7d`.
    pub since: Option<String>,
    /// Last activity (search: the event's time) before: as `since`.
    pub until: Option<String>,
    /// Items in a page: 1 to 200, 50 when absent.
    pub limit: Option<usize>,
    /// The `next` of the previous page, as it was.
    pub cursor: Option<String>,
}

fn invalid(field: &str, why: String) -> Error {
    Error::Refused(Refusal::new(ErrorCode::ValidationFailed, why).field(field))
}

/// Milliseconds since the epoch of `text`: an RFC 3339 time, or an age (`15m`) before `now`.
fn when(text: &str, now: SystemTime, field: &str) -> Result<i64> {
    let text = text.trim();
    let parsed = time::OffsetDateTime::parse(text, &time::format_description::well_known::Rfc3339);
    if let Ok(t) = parsed {
        return Ok((t.unix_timestamp_nanos() / 1_000_000) as i64);
    }
    let split = text.find(|c: char| !c.is_ascii_digit()).unwrap_or(text.len());
    let (n, unit) = text.split_at(split);
    let unit_s = match unit {
        "s" => 1,
        "m" => 60,
        "h" => 3600,
        "d" => 86_400,
        "w" => 604_800,
        _ => 0,
    };
    match n.parse::<u64>() {
        Ok(n) if unit_s > 0 && n < 1 << 32 => {
            let at = now.checked_sub(Duration::from_secs(n * unit_s)).unwrap_or(SystemTime::UNIX_EPOCH);
            Ok(at.duration_since(SystemTime::UNIX_EPOCH).unwrap_or_default().as_millis() as i64)
        }
        _ => Err(Error::Refused(
            Refusal::new(
                ErrorCode::ValidationFailed,
                format!("`{}` is neither an RFC 3339 time nor an age", clutch_proto::error::quote(text)),
            )
            .field(field)
            .hint("2026-11-27T10:00:00Z, or an age: 90s, 15m, 2h, 7d, 2w"),
        )),
    }
}

impl ListInput {
    /// The store's query for `list`, or the refusal of the first bad field.
    pub fn query(&self, list: List, now: SystemTime) -> Result<Query> {
        let limit = self.limit.unwrap_or(PAGE_DEFAULT);
        if limit == 0 || limit > PAGE_MAX {
            return Err(invalid("limit", format!("limit must be 1 to {PAGE_MAX}, not {limit}")));
        }
        let cursor = match &self.cursor {
            Some(text) => Some(Cursor::decode(text).ok_or_else(|| {
                Error::Refused(
                    Refusal::new(ErrorCode::ValidationFailed, "this is not a cursor of this list")
                        .field("cursor")
                        .hint("pass the `next` of the previous page as it was, or leave it out for the first page"),
                )
            })?),
            None => None,
        };
        let query = Query {
            state: self.state.clone(),
            agent: self.agent.clone(),
            capability: self.capability.clone(),
            run_id: self.run.clone(),
            workflow_id: self.workflow.clone(),
            parent_task_id: self.parent.clone(),
            thread_id: self.thread.clone(),
            task_id: self.task.clone(),
            kind: self.kind.clone(),
            since_ms: self.since.as_deref().map(|t| when(t, now, "since")).transpose()?,
            until_ms: self.until.as_deref().map(|t| when(t, now, "until")).transpose()?,
            limit,
            cursor,
        };
        if let Some(field) = query.unsupported(list) {
            let name = match list {
                List::Runs => "runs",
                List::Threads => "threads",
                List::Tasks => "tasks",
                List::Search => "search results",
            };
            return Err(invalid(field, format!("a list of {name} takes no `{field}` filter")));
        }
        if let Some(state) = &query.state {
            let known: Vec<&str> = match list {
                List::Runs => RunState::ALL.iter().map(|s| s.as_str()).collect(),
                _ => TaskState::ALL.iter().map(|s| s.as_str()).collect(),
            };
            if !known.contains(&state.as_str()) {
                return Err(Error::Refused(
                    Refusal::new(
                        ErrorCode::ValidationFailed,
                        format!("unknown state `{}`", clutch_proto::error::quote(state)),
                    )
                    .field("state")
                    .hint(known.join(", ")),
                ));
            }
        }
        if let Some(kind) = &query.kind {
            let known = [RunKind::Chat, RunKind::Task, RunKind::Workflow, RunKind::Session].map(RunKind::as_str);
            if !known.contains(&kind.as_str()) {
                return Err(Error::Refused(
                    Refusal::new(
                        ErrorCode::ValidationFailed,
                        format!("unknown run kind `{}`", clutch_proto::error::quote(kind)),
                    )
                    .field("kind")
                    .hint(known.join(", ")),
                ));
            }
        }
        if list != List::Search && self.q.is_some() {
            return Err(invalid("q", "only a search takes `q`".into()));
        }
        Ok(query)
    }

    /// The search text, checked: present, with a word, at most [`SEARCH_MAX`] bytes.
    pub fn text(&self) -> Result<&str> {
        let q = self.q.as_deref().unwrap_or("");
        if q.len() > SEARCH_MAX {
            return Err(invalid("q", format!("the search text has {} bytes, more than {SEARCH_MAX}", q.len())));
        }
        if lists::words(q).is_empty() {
            return Err(Error::Refused(
                Refusal::new(ErrorCode::ValidationFailed, "the search text has no word to find")
                    .field("q")
                    .hint("give one or more words, e.g. q=deploy failed"),
            ));
        }
        Ok(q)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn input(f: impl FnOnce(&mut ListInput)) -> ListInput {
        let mut i = ListInput::default();
        f(&mut i);
        i
    }

    fn refused_field(r: Result<Query>) -> String {
        match r {
            Err(Error::Refused(r)) => r.field.unwrap_or_default(),
            other => panic!("expected a refusal, got {other:?}"),
        }
    }

    #[test]
    fn each_bad_field_is_named() {
        let now = SystemTime::now();
        assert_eq!(refused_field(input(|i| i.limit = Some(0)).query(List::Runs, now)), "limit");
        assert_eq!(refused_field(input(|i| i.limit = Some(201)).query(List::Runs, now)), "limit");
        assert_eq!(refused_field(input(|i| i.cursor = Some("x".into())).query(List::Runs, now)), "cursor");
        assert_eq!(
            refused_field(input(|i| i.capability = Some("skill:x".into())).query(List::Runs, now)),
            "capability"
        );
        assert_eq!(refused_field(input(|i| i.state = Some("running".into())).query(List::Runs, now)), "state");
        assert_eq!(refused_field(input(|i| i.state = Some("sleeping".into())).query(List::Tasks, now)), "state");
        assert_eq!(refused_field(input(|i| i.kind = Some("party".into())).query(List::Runs, now)), "kind");
        assert_eq!(refused_field(input(|i| i.since = Some("yesterday".into())).query(List::Tasks, now)), "since");
        assert_eq!(refused_field(input(|i| i.q = Some("x".into())).query(List::Tasks, now)), "q");
        assert!(input(|i| i.q = Some(" ,; ".into())).text().is_err());
    }

    #[test]
    fn times_are_rfc3339_or_ages() {
        let now = SystemTime::UNIX_EPOCH + Duration::from_secs(1_000_000);
        let q = input(|i| {
            i.since = Some("2h".into());
            i.until = Some("1970-01-01T00:00:10Z".into());
        })
        .query(List::Tasks, now)
        .unwrap();
        assert_eq!((q.since_ms, q.until_ms), (Some((1_000_000 - 7200) * 1000), Some(10_000)));
        assert_eq!(q.limit, PAGE_DEFAULT);
    }
}
