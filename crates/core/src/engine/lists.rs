//! The lists and search (see [`crate::lists`]).

use std::time::{Duration, SystemTime};

use clutch_store::lists::{List, Page, RunSummary, SearchHit, TaskListing, ThreadSummary};

use super::Engine;
use crate::Result;
use crate::lists::ListInput;

impl Engine {
    /// Runs by last activity, newest first (each face's list of runs).
    pub async fn list_runs(&self, input: &ListInput) -> Result<Page<RunSummary>> {
        let query = input.query(List::Runs, self.now())?;
        self.inner.log.list_runs(&query).await
    }

    /// Threads by last activity, newest first.
    pub async fn list_threads(&self, input: &ListInput) -> Result<Page<ThreadSummary>> {
        let query = input.query(List::Threads, self.now())?;
        self.inner.log.list_threads(&query).await
    }

    /// Tasks by last activity, newest first.
    pub async fn list_tasks(&self, input: &ListInput) -> Result<Page<TaskListing>> {
        let query = input.query(List::Tasks, self.now())?;
        self.inner.log.list_tasks(&query).await
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
