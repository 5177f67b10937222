//! The lists of runs, tasks and threads, and full-text search over the log, as coordinator tools:
//! `run_list`, `task_list`, `thread_list` and `search`. Each takes core's `ListInput` (the HTTP
//! query's fields, so a filter means the same on every face) and answers one page of a
//! `core::view` list with the `next` cursor to pass back; each is one engine call.

use clutch_core::Refusal;
use clutch_core::lists::ListInput;
use clutch_core::view;

use crate::error::from_core;
use crate::tools::{Context, Hints, Lane, Tool, tool};

const READ: Hints = Hints { read_only: true, destructive: false, idempotent: true };

/// The list tools, in no particular order (the registry sorts).
pub(crate) fn tools() -> Vec<Tool> {
    vec![
        tool(
            "run_list",
            "List runs",
            "List runs (a run is one piece of work: a chat, a task and what it started, a workflow or a \
             position's session), last active first: title, kind, state (active, completed, failed, \
             cancelled), its tasks counted by state, its agents. Filters: `state`, `kind`, `agent`, \
             `since`/`until` (an RFC 3339 time or an age such as `2h`); other filters are refused. A page \
             holds `limit` runs (default 50, at most 200); pass `next` back as `cursor` for the next page, \
             with the same filters. Changes nothing.",
            Lane::Coordination,
            READ,
            runs,
        ),
        tool(
            "task_list",
            "List tasks",
            "List tasks, last active first: title, state, requester, the agent given it, required \
             capabilities, workflow, error. Filters: `state` (requested, routed, accepted, running, \
             completed, failed, cancelled, timed_out; a workflow's tasks: pending, claimed, in_progress, \
             blocked...), `agent`, `capability`, `run`, `workflow`, `parent`, `thread`, `since`/`until`. \
             A page holds `limit` tasks (default 50, at most 200); pass `next` back as `cursor` for the \
             next page, with the same filters. Changes nothing.",
            Lane::Coordination,
            READ,
            tasks,
        ),
        tool(
            "thread_list",
            "List threads",
            "List conversation threads, last active first: run, title (the first message), participants, \
             message count. Filters: `run`, `agent` (a participant), `since`/`until`; other filters are \
             refused. A page holds `limit` threads (default 50, at most 200); pass `next` back as `cursor` \
             for the next page, with the same filters. Changes nothing.",
            Lane::Coordination,
            READ,
            threads,
        ),
        tool(
            "search",
            "Search the event log",
            "Find events (messages, task requests, results, errors...) whose text holds every word of `q`, \
             most relevant first among the newest 500 matches, then the next 500, and so on: each \
             hit with its seq, type, sender, run, thread and task, and a snippet with the matched words \
             between [ and ]. Filters: `run`, `thread`, `task`, `agent` (the sender), `workflow`, \
             `since`/`until`. A page holds `limit` hits (default 50, at most 200); pass `next` back as \
             `cursor` for the next page, with the same `q` and filters. Changes nothing.",
            Lane::Coordination,
            READ,
            search,
        ),
    ]
}

async fn runs(ctx: Context, input: ListInput) -> Result<view::Runs, Refusal> {
    ctx.engine.list_runs(&input).await.map_err(from_core)
}

async fn tasks(ctx: Context, input: ListInput) -> Result<view::Tasks, Refusal> {
    ctx.engine.list_tasks(&input).await.map_err(from_core)
}

async fn threads(ctx: Context, input: ListInput) -> Result<view::Threads, Refusal> {
    ctx.engine.list_threads(&input).await.map_err(from_core)
}

async fn search(ctx: Context, input: ListInput) -> Result<view::Search, Refusal> {
    ctx.engine.search(&input).await.map_err(from_core)
}
