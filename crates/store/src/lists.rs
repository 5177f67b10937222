//! Lists of runs, threads and tasks, and full-text search: rows derived from the log, in `seq` order,
//! by one fold both backends share ([`Rows::apply`]), so that a list's page costs the same at a
//! thousand events and at ten million. A backend loads the rows a chunk of events touches
//! ([`touched`]), applies the chunk, and writes back what changed ([`Rows::changed`]) with the
//! search documents of the chunk ([`Doc`]), in one transaction with how far it reached.
//!
//! A run's row holds its title, kind, state (from its root task; a workflow's from its planned
//! tasks), first and last activity, its tasks counted by state (a workflow's root is not counted: it
//! stands for the workflow), and its agents; a thread's its title, run, participants and count; a
//! task's its state, agent, requirements, workflow and error. Each event's text is a search document
//! ([`doc_text`]); a search ranks its matches a window at a time ([`SEARCH_WINDOW`]): the newest by
//! relevance, then the next older ones, so a word half the log holds costs a page no more than a rare
//! one.
//!
//! A page is sorted by last activity, newest first. Its cursor pins the log position the first page
//! was read at (`as_of`): later pages place a row that moved since by its last event at or before
//! `as_of` ([`merge_page`]), and leave out rows born after it, so paging while events arrive neither
//! skips nor repeats an item. A row's state and filters are read as they are now.
//!
//! A task's state uses the names of the engine's views (`core::view::TaskState`) and follows its
//! messages as the engine's table of transitions does: a routed task's lifecycle; a planned task's
//! claim, statuses and end; a workflow's root shows the workflow's state ([`workflow_state`]). A
//! retryable error shows `failed` until the daemon's note that it will be routed again
//! ([`TASK_RETRY_PAYLOAD`]) makes it `retrying`. The backends load a touched run's root row with the
//! chunk's rows ([`with_roots`]) so that it moves with its workflow.

use std::collections::{BTreeMap, HashMap, HashSet};

use clutch_proto::{Message, MessageType};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// Items in a page when the caller names no `limit`.
pub const PAGE_DEFAULT: usize = 50;
/// The most items a page holds.
pub const PAGE_MAX: usize = 200;
/// The most agents a run, or participants a thread, lists.
pub const NAMES_MAX: usize = 32;
/// Characters of a title.
const TITLE_MAX: usize = 120;
/// Matches a search ranks at once: the newest `SEARCH_WINDOW` matches (as of the listing's
/// `as_of`) are ranked by relevance, then the next `SEARCH_WINDOW` older ones, and so on, so a word
/// that half the log holds costs a page no more than a rare one, and recent matches come first. A
/// search costs about its window: on PostgreSQL, a word in 2% of a million events took 57–79 ms with
/// windows of 1,000.
pub const SEARCH_WINDOW: u64 = 500;

/// Where a search's page starts: the window (its first match's rank in recency order) and the rank
/// within it.
pub fn search_window(after: u64) -> (u64, u64) {
    let start = after / SEARCH_WINDOW * SEARCH_WINDOW;
    (start, after - start)
}

/// The page of a window's matches (`(seq, score)`, a higher score more relevant) from `within`, and
/// the next cursor's `after` when more follow (in this window, or in the next when this one is full).
pub fn rank_window(mut matches: Vec<(u64, f64)>, start: u64, within: u64, page: usize) -> (Vec<u64>, Option<u64>) {
    let full = matches.len() as u64 == SEARCH_WINDOW;
    matches.sort_by(|a, b| b.1.total_cmp(&a.1).then(b.0.cmp(&a.0)));
    let from = (within as usize).min(matches.len());
    let to = (from + page).min(matches.len());
    let seqs = matches[from..to].iter().map(|m| m.0).collect();
    let next = if to < matches.len() {
        Some(start + to as u64)
    } else if full {
        Some(start + SEARCH_WINDOW)
    } else {
        None
    };
    (seqs, next)
}

/// Characters of an event's text that search indexes.
pub const DOC_MAX: usize = 8192;

const ORCHESTRATOR: &str = "agent:orchestrator";
const WORKFLOW_PAYLOAD: &str = "clutch.workflow.v1";
const WORKFLOW_TASK_PAYLOAD: &str = "clutch.workflow.task.v1";
const WORKFLOW_STATUS_PAYLOAD: &str = "clutch.workflow.status.v1";
/// `payload_type` of the daemon's note that a failed task will be routed again (`chat.system`).
pub const TASK_RETRY_PAYLOAD: &str = "clutch.task.retry.v1";
const POSITIONS: &str = "agent:positions";
/// The thread and run the daemon files its own notices under: the thread spans runs (routing
/// decisions go to it in their task's run), so its row names the system run, never one of those.
const SYSTEM_THREAD: &str = "thr_00000000000000000000000000";
const SYSTEM_RUN: &str = "run_00000000000000000000000000";
/// What the system run and thread are called wherever they are listed.
pub const SYSTEM_TITLE: &str = "Daemon notices";

/// What a run is, from its first top-level request.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum RunKind {
    /// Messages only, no task.
    Chat,
    /// A routed task and what it started.
    Task,
    /// A durable workflow (`clutch workflows`).
    Workflow,
    /// A positions' session.
    Session,
}

impl RunKind {
    pub fn as_str(self) -> &'static str {
        match self {
            RunKind::Chat => "chat",
            RunKind::Task => "task",
            RunKind::Workflow => "workflow",
            RunKind::Session => "session",
        }
    }
}

/// Where a run is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum RunState {
    Active,
    Completed,
    Failed,
    Cancelled,
}

impl RunState {
    pub const ALL: [RunState; 4] = [RunState::Active, RunState::Completed, RunState::Failed, RunState::Cancelled];

    pub fn as_str(self) -> &'static str {
        match self {
            RunState::Active => "active",
            RunState::Completed => "completed",
            RunState::Failed => "failed",
            RunState::Cancelled => "cancelled",
        }
    }
}

/// A run as its list shows it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct RunSummary {
    pub run_id: String,
    /// Its first top-level request's goal or text (a workflow's name), else its first message's.
    pub title: String,
    pub kind: RunKind,
    /// From its root task: `active` until that ends (a workflow: until its planned tasks have).
    pub state: RunState,
    /// The first top-level `task.request` of the run.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub root_task_id: Option<String>,
    pub first_seq: u64,
    pub first_ts: String,
    pub last_seq: u64,
    pub last_ts: String,
    /// Events in the run.
    pub events: u64,
    /// Its tasks, counted by state (the names of `TaskState`).
    pub tasks: BTreeMap<String, u64>,
    /// Agents that sent or were given its messages (at most 32, first come first).
    pub agents: Vec<String>,
}

/// A thread as its list shows it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct ThreadSummary {
    pub thread_id: String,
    /// The run of its first event (the daemon's notices: the system run).
    pub run_id: String,
    /// Its first chat message's or request's text.
    pub title: String,
    /// Who wrote in it (at most 32, first come first).
    pub participants: Vec<String>,
    /// Events in the thread.
    pub messages: u64,
    pub first_seq: u64,
    pub first_ts: String,
    pub last_seq: u64,
    pub last_ts: String,
}

/// A task's error, as its `task.error` said it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct TaskFailure {
    pub code: String,
    pub message: String,
}

/// A task as its list shows it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct TaskListing {
    pub task_id: String,
    pub run_id: String,
    pub thread_id: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub parent_task_id: Option<String>,
    /// Its request's goal or text (a planned task's name).
    pub title: String,
    /// Who asked.
    pub requester: String,
    /// The agent it is given to (or was, once ended).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub agent: Option<String>,
    /// The capabilities its request requires.
    pub requires: Vec<String>,
    /// The workflow it belongs to (a workflow's id is its run's).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub workflow_id: Option<String>,
    /// A `TaskState` name.
    pub state: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<TaskFailure>,
    pub first_seq: u64,
    pub first_ts: String,
    pub last_seq: u64,
    pub last_ts: String,
    /// Events about the task.
    pub events: u64,
}

/// One search result: the event, where it is, and the text around what matched.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct SearchHit {
    pub seq: u64,
    pub id: String,
    #[serde(rename = "type")]
    pub kind: String,
    pub from: String,
    pub ts: String,
    pub run_id: String,
    pub thread_id: String,
    pub task_id: String,
    /// The matched text with each match between `[` and `]`, cut around the matches.
    pub snippet: String,
}

/// A page of a list.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[schemars(rename = "{T}Page")]
pub struct Page<T> {
    pub items: Vec<T>,
    /// Pass as `cursor` for the next page; absent on the last one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub next: Option<String>,
    /// The log position the pages of this listing are read at.
    pub as_of: u64,
}

/// Where the next page starts: the log position the first page was read at, and the position (last
/// activity, or rank for a search) the last page ended at.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Cursor {
    pub as_of: u64,
    /// Lists: rows whose last activity (as of `as_of`) is before this `seq`. Search: results after
    /// this many.
    pub after: u64,
}

impl Cursor {
    /// The opaque form clients pass back.
    pub fn encode(&self) -> String {
        format!("c{:x}.{:x}", self.as_of, self.after)
    }

    /// Reads a cursor this store made; `None` for anything else.
    pub fn decode(text: &str) -> Option<Cursor> {
        let (as_of, after) = text.strip_prefix('c')?.split_once('.')?;
        Some(Cursor { as_of: u64::from_str_radix(as_of, 16).ok()?, after: u64::from_str_radix(after, 16).ok()? })
    }
}

/// What a list selects: each field set must match (AND). Which fields a list takes is
/// [`Query::check`]'s to say.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Query {
    /// Runs: a `RunState`; tasks: a `TaskState` name.
    pub state: Option<String>,
    /// Runs: one of its agents; threads: a participant; tasks: its agent; search: the sender.
    pub agent: Option<String>,
    /// Tasks: a capability its request requires (as written, e.g. `skill:code`).
    pub capability: Option<String>,
    pub run_id: Option<String>,
    /// Tasks and search: of this workflow (a workflow's id is its run's).
    pub workflow_id: Option<String>,
    pub parent_task_id: Option<String>,
    pub thread_id: Option<String>,
    pub task_id: Option<String>,
    /// Runs: a `RunKind`.
    pub kind: Option<String>,
    /// Last activity (a search: the event's time) at or after, ms since the epoch.
    pub since_ms: Option<i64>,
    /// Last activity (a search: the event's time) before, ms since the epoch.
    pub until_ms: Option<i64>,
    /// Items in the page, 1 to [`PAGE_MAX`].
    pub limit: usize,
    pub cursor: Option<Cursor>,
}

/// Which list a query is for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum List {
    Runs,
    Threads,
    Tasks,
    Search,
}

impl Query {
    /// The first filter `list` does not take, by its query parameter's name.
    pub fn unsupported(&self, list: List) -> Option<&'static str> {
        let set = [
            ("state", self.state.is_some(), matches!(list, List::Runs | List::Tasks)),
            ("agent", self.agent.is_some(), true),
            ("capability", self.capability.is_some(), list == List::Tasks),
            ("run", self.run_id.is_some(), list != List::Runs),
            ("workflow", self.workflow_id.is_some(), matches!(list, List::Tasks | List::Search)),
            ("parent", self.parent_task_id.is_some(), list == List::Tasks),
            ("thread", self.thread_id.is_some(), matches!(list, List::Tasks | List::Search)),
            ("task", self.task_id.is_some(), list == List::Search),
            ("kind", self.kind.is_some(), list == List::Runs),
        ];
        set.into_iter().find(|(_, given, takes)| *given && !*takes).map(|(name, _, _)| name)
    }

    /// The page size to use: `limit` within 1 and [`PAGE_MAX`].
    pub fn page(&self) -> usize {
        self.limit.clamp(1, PAGE_MAX)
    }
}

/// Milliseconds since the epoch of an RFC 3339 time; 0 for one that does not parse.
pub fn ts_ms(ts: &str) -> i64 {
    time::OffsetDateTime::parse(ts, &time::format_description::well_known::Rfc3339)
        .map(|t| (t.unix_timestamp_nanos() / 1_000_000) as i64)
        .unwrap_or(0)
}

/// The words of a search: letters and digits, lower-cased, at most 16; every one must match.
pub fn words(text: &str) -> Vec<String> {
    text.split(|c: char| !c.is_alphanumeric()).filter(|w| !w.is_empty()).take(16).map(str::to_lowercase).collect()
}

/// Whether a task in state `state` has ended.
pub fn is_terminal(state: &str) -> bool {
    matches!(state, "completed" | "failed" | "cancelled" | "timed_out")
}

/// The text search indexes for one event.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Doc {
    pub seq: u64,
    pub ts_ms: i64,
    pub run_id: String,
    pub thread_id: String,
    pub task_id: String,
    pub from: String,
    pub body: String,
}

/// The run, thread and task ids a chunk of events touches, for a backend to load their rows.
pub fn touched(messages: &[(u64, Message)]) -> (Vec<String>, Vec<String>, Vec<String>) {
    let mut runs = HashSet::new();
    let mut threads = HashSet::new();
    let mut tasks = HashSet::new();
    for (_, m) in messages {
        runs.insert(m.run_id.as_str());
        threads.insert(m.thread_id.as_str());
        tasks.insert(m.task_id.as_str());
    }
    let own = |s: HashSet<&str>| s.into_iter().map(str::to_owned).collect();
    (own(runs), own(threads), own(tasks))
}

/// `tasks` (a chunk's touched task ids) and the root tasks of the workflow runs among `runs` (their
/// stored rows), whose state follows their planned tasks.
pub fn with_roots(mut tasks: Vec<String>, runs: &[RunSummary]) -> Vec<String> {
    let known: HashSet<String> = tasks.iter().cloned().collect();
    for run in runs.iter().filter(|r| r.kind == RunKind::Workflow) {
        if let Some(root) = &run.root_task_id
            && !known.contains(root)
        {
            tasks.push(root.clone());
        }
    }
    tasks
}

/// The rows a chunk touches, as stored before it, then as its events leave them.
#[derive(Debug, Default)]
pub struct Rows {
    pub runs: HashMap<String, RunSummary>,
    pub threads: HashMap<String, ThreadSummary>,
    pub tasks: HashMap<String, TaskListing>,
    changed_runs: HashSet<String>,
    changed_threads: HashSet<String>,
    changed_tasks: HashSet<String>,
    pub docs: Vec<Doc>,
}

impl Rows {
    /// Rows as stored (those the chunk's events touch; a missing one is new).
    pub fn new(runs: Vec<RunSummary>, threads: Vec<ThreadSummary>, tasks: Vec<TaskListing>) -> Rows {
        Rows {
            runs: runs.into_iter().map(|r| (r.run_id.clone(), r)).collect(),
            threads: threads.into_iter().map(|t| (t.thread_id.clone(), t)).collect(),
            tasks: tasks.into_iter().map(|t| (t.task_id.clone(), t)).collect(),
            ..Rows::default()
        }
    }

    /// Applies the event at `seq` (events in `seq` order, each once).
    pub fn apply(&mut self, seq: u64, m: &Message) {
        let from = m.from.agent_id.as_str();
        let text = title_of(m);
        // The task first: the run counts its tasks by state.
        let moved = self.apply_task(seq, m, &text);
        let run = self.runs.entry(m.run_id.clone()).or_insert_with(|| RunSummary {
            run_id: m.run_id.clone(),
            title: if m.run_id == SYSTEM_RUN { SYSTEM_TITLE.into() } else { String::new() },
            kind: RunKind::Chat,
            state: RunState::Active,
            root_task_id: None,
            first_seq: seq,
            first_ts: m.ts.clone(),
            last_seq: seq,
            last_ts: m.ts.clone(),
            events: 0,
            tasks: BTreeMap::new(),
            agents: Vec::new(),
        });
        run.last_seq = seq;
        run.last_ts = m.ts.clone();
        run.events += 1;
        // The run's first top-level request (the daemon's own, for a workflow made without an agent);
        // a later one from the daemon is a delivery of a request already seen.
        if m.kind == MessageType::TaskRequest && m.parent_task_id.is_none() && run.root_task_id.is_none() {
            run.root_task_id = Some(m.task_id.clone());
            run.kind = match m.payload_type.as_deref() {
                Some(WORKFLOW_PAYLOAD) => RunKind::Workflow,
                _ if m.to.iter().any(|r| r.agent_id == POSITIONS) => RunKind::Session,
                _ => RunKind::Task,
            };
            if !text.is_empty() {
                run.title = text.clone();
            }
        } else if run.title.is_empty() && !text.is_empty() && titles(m) {
            run.title = text.clone();
        }
        for name in std::iter::once(from).chain(m.to.iter().map(|r| r.agent_id.as_str())) {
            if name.starts_with("agent:") && name != ORCHESTRATOR {
                add_name(&mut run.agents, name);
            }
        }
        // A workflow's root stands for the workflow: its planned tasks are what the run counts.
        let counted = !(run.kind == RunKind::Workflow && run.root_task_id.as_deref() == Some(m.task_id.as_str()));
        if let Some((before, after)) = moved.filter(|_| counted) {
            if let Some(before) = before
                && let Some(n) = run.tasks.get_mut(&before)
            {
                *n = n.saturating_sub(1);
                if *n == 0 {
                    run.tasks.remove(&before);
                }
            }
            *run.tasks.entry(after).or_insert(0) += 1;
        }
        let root = run.root_task_id.as_ref().and_then(|id| self.tasks.get_mut(id));
        if run.kind == RunKind::Workflow {
            let cancelled = root.as_ref().is_some_and(|t| t.state == "cancelled");
            let state = if cancelled { "cancelled" } else { workflow_state(&run.tasks) };
            run.state = match state {
                "completed" => RunState::Completed,
                "failed" => RunState::Failed,
                "cancelled" => RunState::Cancelled,
                _ => RunState::Active,
            };
            if let Some(root) = root
                && root.state != state
            {
                root.state = state.to_owned();
                self.changed_tasks.insert(root.task_id.clone());
            }
        } else {
            run.state = run_state(root.map(|t| t.state.as_str()));
        }
        self.changed_runs.insert(m.run_id.clone());

        let system = m.thread_id == SYSTEM_THREAD;
        let thread = self.threads.entry(m.thread_id.clone()).or_insert_with(|| ThreadSummary {
            thread_id: m.thread_id.clone(),
            run_id: if system { SYSTEM_RUN.into() } else { m.run_id.clone() },
            title: if system { SYSTEM_TITLE.into() } else { String::new() },
            participants: Vec::new(),
            messages: 0,
            first_seq: seq,
            first_ts: m.ts.clone(),
            last_seq: seq,
            last_ts: m.ts.clone(),
        });
        thread.last_seq = seq;
        thread.last_ts = m.ts.clone();
        thread.messages += 1;
        if from != ORCHESTRATOR {
            add_name(&mut thread.participants, from);
        }
        if thread.title.is_empty() && !text.is_empty() && titles(m) {
            thread.title = text.clone();
        }
        self.changed_threads.insert(m.thread_id.clone());

        let body = doc_text(m);
        if !body.is_empty() {
            self.docs.push(Doc {
                seq,
                ts_ms: ts_ms(&m.ts),
                run_id: m.run_id.clone(),
                thread_id: m.thread_id.clone(),
                task_id: m.task_id.clone(),
                from: from.to_owned(),
                body,
            });
        }
    }

    /// Applies `m` to its task; the task's state before and after when it moved (before `None`: new).
    fn apply_task(&mut self, seq: u64, m: &Message, text: &str) -> Option<(Option<String>, String)> {
        use MessageType as T;
        let from = m.from.agent_id.as_str();
        let Some(task) = self.tasks.get_mut(&m.task_id) else {
            if m.kind != T::TaskRequest {
                return None;
            }
            let planned = m.payload_type.as_deref() == Some(WORKFLOW_TASK_PAYLOAD);
            let workflow = planned || m.payload_type.as_deref() == Some(WORKFLOW_PAYLOAD);
            let state = match m.payload_type.as_deref() {
                _ if planned => "pending",
                Some(WORKFLOW_PAYLOAD) => "planning",
                _ => "requested",
            };
            self.tasks.insert(
                m.task_id.clone(),
                TaskListing {
                    task_id: m.task_id.clone(),
                    run_id: m.run_id.clone(),
                    thread_id: m.thread_id.clone(),
                    parent_task_id: m.parent_task_id.clone(),
                    title: text.to_owned(),
                    requester: from.to_owned(),
                    // A request sent to an agent or a person by name is theirs from the start.
                    agent: m
                        .to
                        .iter()
                        .map(|r| r.agent_id.as_str())
                        .find(|a| (a.starts_with("agent:") && *a != ORCHESTRATOR) || a.starts_with("user:"))
                        .filter(|_| !planned)
                        .map(str::to_owned),
                    requires: m.requires.clone(),
                    workflow_id: workflow.then(|| m.run_id.clone()),
                    state: state.into(),
                    error: None,
                    first_seq: seq,
                    first_ts: m.ts.clone(),
                    last_seq: seq,
                    last_ts: m.ts.clone(),
                    events: 1,
                },
            );
            self.changed_tasks.insert(m.task_id.clone());
            return Some((None, state.into()));
        };
        task.last_seq = seq;
        task.last_ts = m.ts.clone();
        task.events += 1;
        self.changed_tasks.insert(m.task_id.clone());
        let ended = is_terminal(&task.state);
        let planned = task.workflow_id.is_some() && task.parent_task_id.is_some();
        let payload_str = |key: &str| m.payload.get(key).and_then(|v| v.as_str()).map(str::to_owned);
        let next: Option<&str> = match m.kind {
            // A delivery by the daemon (a retry's included).
            T::TaskRequest if from == ORCHESTRATOR && (!ended || task.state == "failed") => {
                if let Some(to) = m.to.iter().map(|r| r.agent_id.as_str()).find(|a| *a != ORCHESTRATOR) {
                    task.agent = Some(to.to_owned());
                }
                task.error = None;
                Some("routed")
            }
            T::RoutingDecision if !ended || task.state == "failed" => {
                if let Some(agent) = payload_str("selected") {
                    task.agent = Some(agent);
                }
                task.error = None;
                Some("routed")
            }
            T::RoutingFailure if !ended && m.payload.get("queued").and_then(|v| v.as_bool()) == Some(true) => {
                Some("queued")
            }
            T::TaskAccept if !ended => {
                task.agent = Some(from.to_owned());
                Some(if planned { "claimed" } else { "accepted" })
            }
            T::TaskProgress if !ended => match m.payload_type.as_deref() {
                Some(WORKFLOW_STATUS_PAYLOAD) => {
                    let status = payload_str("status");
                    match status.as_deref() {
                        Some("pending") => {
                            task.agent = None;
                            Some("pending")
                        }
                        Some("in_progress") => Some("in_progress"),
                        Some("blocked") => Some("blocked"),
                        _ => None,
                    }
                }
                Some(p) if p.starts_with("clutch.") => None,
                _ if planned => None,
                _ => Some("running"),
            },
            T::TaskResult if !ended => Some("completed"),
            T::TaskError if !ended => {
                task.error = Some(TaskFailure {
                    code: payload_str("code").unwrap_or_default(),
                    message: payload_str("message")
                        .or_else(|| {
                            m.payload
                                .get("error")
                                .and_then(|e| e.get("message"))
                                .and_then(|v| v.as_str())
                                .map(str::to_owned)
                        })
                        .unwrap_or_default(),
                });
                Some("failed")
            }
            T::TaskCancel if !ended || from == ORCHESTRATOR => (task.state != "cancelled").then_some("cancelled"),
            T::TaskTimeout if !ended => Some("timed_out"),
            T::ChatSystem
                if from == ORCHESTRATOR
                    && task.state == "failed"
                    && m.payload_type.as_deref() == Some(TASK_RETRY_PAYLOAD) =>
            {
                Some("retrying")
            }
            _ => None,
        };
        let next = next.filter(|n| *n != task.state)?;
        let before = std::mem::replace(&mut task.state, next.to_owned());
        Some((Some(before), next.to_owned()))
    }

    /// The rows the applied events changed.
    pub fn changed(&self) -> (Vec<&RunSummary>, Vec<&ThreadSummary>, Vec<&TaskListing>) {
        (
            self.changed_runs.iter().filter_map(|id| self.runs.get(id)).collect(),
            self.changed_threads.iter().filter_map(|id| self.threads.get(id)).collect(),
            self.changed_tasks.iter().filter_map(|id| self.tasks.get(id)).collect(),
        )
    }
}

/// Where a run other than a workflow is: where its root task is.
fn run_state(root: Option<&str>) -> RunState {
    match root {
        Some("completed") => RunState::Completed,
        Some("failed" | "timed_out") => RunState::Failed,
        Some("cancelled") => RunState::Cancelled,
        _ => RunState::Active,
    }
}

/// A workflow's state from its planned tasks counted by state (those of a replaced plan are
/// cancelled and do not count), as the engine's `Workflows::status` derives it from the plan: none →
/// `planning`; all completed → `completed`; one failed and none held or pending → `failed`; none
/// claimed, in progress or pending and one blocked → `blocked`; else `in_progress`. Without the
/// plan's dependencies the lists cannot see that pending tasks wait for a failed or blocked one;
/// the engine's views (and the list pages, which take the engine's state for what it holds) can.
pub fn workflow_state(tasks: &BTreeMap<String, u64>) -> &'static str {
    let n = |state: &str| tasks.get(state).copied().unwrap_or(0);
    let live: u64 = tasks.iter().filter(|(s, _)| s.as_str() != "cancelled").map(|(_, n)| n).sum();
    let moving = n("claimed") + n("in_progress") + n("pending");
    if live == 0 {
        "planning"
    } else if n("completed") == live {
        "completed"
    } else if n("failed") > 0 && moving + n("blocked") == 0 {
        "failed"
    } else if moving == 0 && n("blocked") > 0 {
        "blocked"
    } else {
        "in_progress"
    }
}

fn add_name(names: &mut Vec<String>, name: &str) {
    if names.len() < NAMES_MAX && !names.iter().any(|n| n == name) {
        names.push(name.to_owned());
    }
}

/// Whether `m` may name its thread or run (the daemon's own deliveries do not).
fn titles(m: &Message) -> bool {
    m.from.agent_id != ORCHESTRATOR && matches!(m.kind, MessageType::ChatMessage | MessageType::TaskRequest)
}

/// The payload keys whose text names an event, in the order the web UI reads them.
const TEXT_KEYS: [&str; 8] = ["text", "content", "message", "goal", "summary", "title", "description", "subject"];

/// What names `m`: a workflow's or planned task's name, a tool call's tool, else its payload's text.
pub fn title_of(m: &Message) -> String {
    let named = match (m.kind, m.payload_type.as_deref()) {
        (MessageType::TaskRequest, Some(WORKFLOW_PAYLOAD)) => {
            m.payload.get("name").and_then(|v| v.as_str()).map(|n| format!("workflow {n}"))
        }
        (MessageType::TaskRequest, Some(WORKFLOW_TASK_PAYLOAD)) => {
            m.payload.get("name").and_then(|v| v.as_str()).map(str::to_owned)
        }
        (MessageType::ToolCall, _) => m.payload.get("tool").and_then(|v| v.as_str()).map(|t| format!("call {t}")),
        _ => None,
    };
    let text = named.or_else(|| {
        TEXT_KEYS.iter().find_map(|k| {
            m.payload.get(*k).and_then(|v| v.as_str()).filter(|s| !s.trim().is_empty()).map(str::to_owned)
        })
    });
    match text {
        Some(text) => cut(&text.split_whitespace().collect::<Vec<_>>().join(" "), TITLE_MAX),
        None => String::new(),
    }
}

/// The text search indexes for `m`: its payload's text fields (a task error's message, a
/// workflow's name), subject and goal included; empty for an event with none.
pub fn doc_text(m: &Message) -> String {
    let mut body = String::new();
    let mut add = |s: &str| {
        if !s.trim().is_empty() && body.len() < DOC_MAX {
            if !body.is_empty() {
                body.push('\n');
            }
            body.push_str(s);
        }
    };
    for key in TEXT_KEYS.iter().chain(&["name", "reason", "outcome", "outcome_detail", "tool"]) {
        if let Some(s) = m.payload.get(*key).and_then(|v| v.as_str()) {
            add(s);
        }
    }
    if let Some(s) = m.payload.get("error").and_then(|e| e.get("message")).and_then(|v| v.as_str()) {
        add(s);
    }
    cut(&body, DOC_MAX)
}

/// `text` cut to at most `max` characters.
fn cut(text: &str, max: usize) -> String {
    match text.char_indices().nth(max) {
        Some((at, _)) => text[..at].to_owned(),
        None => text.to_owned(),
    }
}

/// Orders rows by their last activity as of a listing's `as_of`: the rows stored with a last `seq`
/// past it (`moved`), each placed at its last `seq` at or before `as_of` (a row born after `as_of`
/// is not among them), merged with the rows read in order (`fresh`), the `limit` newest before the
/// cursor. Each item's key is its last `seq` as placed; `fresh` and `moved` each hold, newest first,
/// one row more than a page when there are more. The page and the next cursor.
pub fn merge_page<T>(fresh: Vec<(u64, T)>, moved: Vec<(u64, T)>, as_of: u64, before: u64, limit: usize) -> Page<T> {
    let mut all: Vec<(u64, T)> = fresh.into_iter().chain(moved.into_iter().filter(|(at, _)| *at < before)).collect();
    all.sort_by_key(|row| std::cmp::Reverse(row.0));
    let more = all.len() > limit;
    all.truncate(limit);
    let next = if more { all.last().map(|(at, _)| Cursor { as_of, after: *at }.encode()) } else { None };
    Page { items: all.into_iter().map(|(_, row)| row).collect(), next, as_of }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cursors_round_trip_and_refuse_anything_else() {
        let c = Cursor { as_of: 123_456, after: 99 };
        assert_eq!(Cursor::decode(&c.encode()), Some(c));
        assert_eq!(Cursor::decode("x1.2"), None);
        assert_eq!(Cursor::decode("c1"), None);
        assert_eq!(Cursor::decode("czz.1"), None);
    }

    #[test]
    fn a_list_refuses_filters_it_does_not_take() {
        let q = Query { capability: Some("skill:x".into()), ..Query::default() };
        assert_eq!(q.unsupported(List::Runs), Some("capability"));
        assert_eq!(q.unsupported(List::Tasks), None);
        let q = Query { run_id: Some("run_x".into()), ..Query::default() };
        assert_eq!(q.unsupported(List::Runs), Some("run"));
    }

    #[test]
    fn a_search_ranks_a_window_then_moves_to_the_next() {
        let m = vec![(1, 0.5), (2, 0.9), (3, 0.5)];
        assert_eq!(rank_window(m.clone(), 0, 0, 2), (vec![2, 3], Some(2)), "best first, then newest");
        assert_eq!(rank_window(m, 0, 2, 2), (vec![1], None));
        let full: Vec<(u64, f64)> = (0..SEARCH_WINDOW).map(|s| (s, 1.0)).collect();
        let (seqs, next) = rank_window(full, SEARCH_WINDOW, SEARCH_WINDOW - 1, 5);
        assert_eq!((seqs.len(), next), (1, Some(2 * SEARCH_WINDOW)), "a full window has a next one");
        assert_eq!(search_window(2 * SEARCH_WINDOW + 7), (2 * SEARCH_WINDOW, 7));
    }

    #[test]
    fn a_page_places_moved_rows_where_they_were() {
        // Rows a (last 9), b (last 7) read fresh; c moved (was at 8).
        let page = merge_page(vec![(9, "a"), (7, "b")], vec![(8, "c")], 10, 11, 2);
        assert_eq!(page.items, vec!["a", "c"]);
        let next = Cursor::decode(page.next.as_deref().unwrap()).unwrap();
        assert_eq!(next, Cursor { as_of: 10, after: 8 });
        let page = merge_page(vec![(7, "b")], vec![], 10, 8, 2);
        assert_eq!(page.items, vec!["b"]);
        assert_eq!(page.next, None);
    }
}
