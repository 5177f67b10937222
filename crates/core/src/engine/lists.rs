//! The lists and search (see [`crate::lists`]). A page of tasks or runs shows the engine's state of
//! what it holds (a task in flight, a workflow and its planned tasks), so that a list and a task's own
//! view never disagree: the stored rows follow the same rules, but cannot see the retry policy's
//! decision before its notice, nor a workflow's dependencies.

use std::time::{Duration, SystemTime};

use clutch_store::lists::{List, Page, RunKind, RunState, RunSummary, SearchHit, TaskListing, ThreadSummary};

use super::{Engine, State};
use crate::Result;
use crate::lists::ListInput;
use crate::view::TaskState;
use crate::workflow::api::WorkflowStatus;

impl Engine {
    /// Runs by last activity, newest first (each face's list of runs).
    pub async fn list_runs(&self, input: &ListInput) -> Result<Page<RunSummary>> {
        let query = input.query(List::Runs, self.now())?;
        let mut page = self.inner.log.list_runs(&query).await?;
        let state = self.state();
        for row in page.items.iter_mut().filter(|r| r.kind == RunKind::Workflow) {
            if let Some(w) = state.workflows.workflow(&row.run_id) {
                row.state = match state.workflows.status(w) {
                    WorkflowStatus::Completed => RunState::Completed,
                    WorkflowStatus::Failed => RunState::Failed,
                    _ => RunState::Active,
                };
            }
        }
        Ok(page)
    }

    /// Threads by last activity, newest first.
    pub async fn list_threads(&self, input: &ListInput) -> Result<Page<ThreadSummary>> {
        let query = input.query(List::Threads, self.now())?;
        self.inner.log.list_threads(&query).await
    }

    /// Tasks by last activity, newest first.
    pub async fn list_tasks(&self, input: &ListInput) -> Result<Page<TaskListing>> {
        let query = input.query(List::Tasks, self.now())?;
        let mut page = self.inner.log.list_tasks(&query).await?;
        let state = self.state();
        for row in &mut page.items {
            if let Some(now) = state.task_state(&row.task_id) {
                row.state = now.as_str().to_owned();
            }
        }
        Ok(page)
    }

    /// Events whose text holds every word of `input.q`, the newest matches by relevance first.
    pub async fn search(&self, input: &ListInput) -> Result<Page<SearchHit>> {
        let query = input.query(List::Search, self.now())?;
        let text = input.text()?;
        self.inner.log.search(text, &query).await
    }

    fn now(&self) -> SystemTime {
        SystemTime::UNIX_EPOCH + Duration::from_millis(self.inner.options.clock.now_ms().max(0) as u64)
    }

    /// Drops the lists and the search index and derives them again from the whole log (an admin's
    /// reindex); how many events they cover. Reads of the lists wait for it.
    pub async fn rebuild_lists(&self) -> Result<u64> {
        self.inner.log.rebuild_lists().await
    }
}

impl State {
    /// The state of a task the engine holds, as its views name it: a routed task's phase, a workflow
    /// root's workflow status, a planned task's status; `None` for one that left memory.
    pub(super) fn task_state(&self, task_id: &str) -> Option<TaskState> {
        if let Some(t) = self.tasks.get(task_id) {
            return Some(t.phase.into());
        }
        if let Some(w) = self.workflows.workflow_of_root(task_id) {
            return Some(self.workflows.status(w).into());
        }
        self.workflows.task(task_id).map(|t| t.status.into())
    }
}
