//! `clutch runs list|show`, `clutch threads list|show`, `clutch tasks list` and `clutch search`: the
//! daemon's lists (`/v1/runs`, `/v1/threads`, `/v1/tasks`) and full-text search (`/v1/search`), a
//! page at a time or every page (`--all`), as tables for people or as the daemon's JSON for programs.

use clap::{Args, Subcommand};
use clutch_core::view::{self, TaskState};
use clutch_store::lists::{Page, RunState, RunSummary, SearchHit, TaskListing, ThreadSummary};
use serde::de::DeserializeOwned;
use serde_json::{Value, json};

use crate::args::{ClientArgs, NotFound};
use crate::client::{Client, path_segment, typed};
use crate::render;
use crate::table::{Cell, Table, paint};

/// Items a page of `--all` asks for when `--limit` does not say (the daemon's largest page).
const ALL_PAGE: usize = 200;
/// Events a page of `threads show` asks for (the most `/v1/events` gives).
const EVENTS_PAGE: usize = 1000;
/// Characters of a title or a snippet shown in a table.
const TITLE_MAX: usize = 60;
const SNIPPET_MAX: usize = 100;
/// Participants a thread's row names before `+N`.
const NAMES_SHOWN: usize = 3;

/// Which page, and how many: every list and the search take these.
#[derive(Debug, Args)]
pub struct PageArgs {
    /// Only those active at or after T (a search: events at or after T): an RFC 3339 time such as
    /// 2026-11-27T10:00:00Z, or an age such as 90s, 15m, 2h, 7d, 2w.
    #[arg(long, value_name = "T")]
    pub since: Option<String>,
    /// Only those last active before T (a search: events before T); T as for --since.
    #[arg(long, value_name = "T")]
    pub until: Option<String>,
    /// Items in a page, 1 to 200 [default: 50; 200 with --all].
    #[arg(long, value_name = "N")]
    pub limit: Option<usize>,
    /// Start at this page: the `next` of the previous one, as the `more:` line (or --json's `next`)
    /// gives it. The other filters must be the same as for the first page.
    #[arg(long, value_name = "CURSOR")]
    pub cursor: Option<String>,
    /// Follow the pages to the last one and print every item.
    #[arg(long)]
    pub all: bool,
    /// Print the daemon's page as JSON (`{"items": [...], "next": "...", "as_of": N}`); with --all,
    /// one object holding the items of every page.
    #[arg(long)]
    pub json: bool,
}

/// `clutch runs list`.
#[derive(Debug, Args)]
pub struct RunsListArgs {
    #[command(flatten)]
    pub client: ClientArgs,
    /// Only runs in this state: active, completed, failed or cancelled (the state of the run's first
    /// task; a workflow's, of its planned tasks).
    #[arg(long, value_name = "STATE")]
    pub state: Option<String>,
    /// Only runs of this kind: chat (messages only), task, workflow or session (a position's).
    #[arg(long, value_name = "KIND")]
    pub kind: Option<String>,
    /// Only runs this agent sent or was given messages in (`agent:NAME`).
    #[arg(long, value_name = "AGENT")]
    pub agent: Option<String>,
    #[command(flatten)]
    pub page: PageArgs,
}

/// `clutch runs show`.
#[derive(Debug, Args)]
pub struct RunShowArgs {
    #[command(flatten)]
    pub client: ClientArgs,
    /// The run.
    #[arg(value_name = "RUN_ID")]
    pub run: String,
    /// Print `{"run_id", "tasks", "threads"}` as JSON: the run's task tree as `clutch runs tasks
    /// --json` prints it (null for a run without tasks) and its threads as `clutch threads list`
    /// finds them.
    #[arg(long)]
    pub json: bool,
}

#[derive(Debug, Subcommand)]
pub enum ThreadsCommand {
    /// List threads by last activity, newest first: run, messages, participants, title.
    #[command(after_help = THREADS_LIST_EXAMPLES)]
    List(ThreadsListArgs),
    /// Print a thread's events in order, one line each (as `clutch tail` does).
    #[command(after_help = THREADS_SHOW_EXAMPLES)]
    Show(ThreadShowArgs),
}

/// `clutch threads list`.
#[derive(Debug, Args)]
pub struct ThreadsListArgs {
    #[command(flatten)]
    pub client: ClientArgs,
    /// Only the threads of this run.
    #[arg(long, value_name = "RUN_ID")]
    pub run: Option<String>,
    /// Only threads this agent or user wrote in (`agent:NAME`, `user:NAME`).
    #[arg(long, value_name = "AGENT")]
    pub agent: Option<String>,
    #[command(flatten)]
    pub page: PageArgs,
}

/// `clutch threads show`.
#[derive(Debug, Args)]
pub struct ThreadShowArgs {
    #[command(flatten)]
    pub client: ClientArgs,
    /// The thread.
    #[arg(value_name = "THREAD_ID")]
    pub thread: String,
    /// Print each event as one JSON line (NDJSON).
    #[arg(long)]
    pub json: bool,
}

/// `clutch tasks list`.
#[derive(Debug, Args)]
pub struct TasksListArgs {
    #[command(flatten)]
    pub client: ClientArgs,
    /// Only tasks in this state: requested, queued, routed, accepted, running, retrying, completed,
    /// failed, cancelled, timed_out; a workflow's tasks: planning, pending, claimed, in_progress,
    /// blocked.
    #[arg(long, value_name = "STATE")]
    pub state: Option<String>,
    /// Only tasks given to this agent (`agent:NAME`).
    #[arg(long, value_name = "AGENT")]
    pub agent: Option<String>,
    /// Only tasks whose request requires this capability, as written (`skill:code`).
    #[arg(long, value_name = "CAPABILITY")]
    pub capability: Option<String>,
    /// Only the tasks of this run.
    #[arg(long, value_name = "RUN_ID")]
    pub run: Option<String>,
    /// Only the tasks of this workflow (its id, a run id).
    #[arg(long, value_name = "WORKFLOW_ID")]
    pub workflow: Option<String>,
    /// Only the children of this task.
    #[arg(long, value_name = "TASK_ID")]
    pub parent: Option<String>,
    /// Only the tasks of this thread.
    #[arg(long, value_name = "THREAD_ID")]
    pub thread: Option<String>,
    #[command(flatten)]
    pub page: PageArgs,
}

/// `clutch search`.
#[derive(Debug, Args)]
pub struct SearchArgs {
    #[command(flatten)]
    pub client: ClientArgs,
    /// The words to find: an event matches when its text holds every one (letters and digits; case
    /// does not matter).
    #[arg(value_name = "TEXT", required = true, num_args = 1..)]
    pub text: Vec<String>,
    /// Only events of this run.
    #[arg(long, value_name = "RUN_ID")]
    pub run: Option<String>,
    /// Only events of this thread.
    #[arg(long, value_name = "THREAD_ID")]
    pub thread: Option<String>,
    /// Only events about this task.
    #[arg(long, value_name = "TASK_ID")]
    pub task: Option<String>,
    /// Only events sent by this agent or user (`agent:NAME`, `user:NAME`).
    #[arg(long, value_name = "SENDER")]
    pub agent: Option<String>,
    /// Only events of this workflow (its id, a run id).
    #[arg(long, value_name = "WORKFLOW_ID")]
    pub workflow: Option<String>,
    #[command(flatten)]
    pub page: PageArgs,
}

/// One listing: where it is read, the filters given, and how a page of it looks.
struct Listing<'a> {
    path: &'static str,
    /// The command that lists it, for the `more:` line (`runs list`).
    command: &'static str,
    /// What the command takes before its flags (a search's text).
    words: Option<String>,
    /// The filters given, by their query parameter's name (also their flag's).
    filters: Vec<(&'static str, String)>,
    page: &'a PageArgs,
    /// What to say on stderr when the page is empty.
    none: String,
}

pub async fn runs(args: RunsListArgs) -> anyhow::Result<()> {
    let listing = Listing {
        path: "/v1/runs",
        command: "runs list",
        words: None,
        filters: filters([("state", args.state), ("kind", args.kind), ("agent", args.agent)]),
        page: &args.page,
        none: "no runs".into(),
    };
    list(&Client::connect(&args.client)?, listing, runs_table).await
}

pub async fn threads(command: ThreadsCommand) -> anyhow::Result<()> {
    match command {
        ThreadsCommand::List(args) => {
            let listing = Listing {
                path: "/v1/threads",
                command: "threads list",
                words: None,
                filters: filters([("run", args.run), ("agent", args.agent)]),
                page: &args.page,
                none: "no threads".into(),
            };
            list(&Client::connect(&args.client)?, listing, threads_table).await
        }
        ThreadsCommand::Show(args) => thread_show(args).await,
    }
}

pub async fn tasks(args: TasksListArgs) -> anyhow::Result<()> {
    let listing = Listing {
        path: "/v1/tasks",
        command: "tasks list",
        words: None,
        filters: filters([
            ("state", args.state),
            ("agent", args.agent),
            ("capability", args.capability),
            ("run", args.run),
            ("workflow", args.workflow),
            ("parent", args.parent),
            ("thread", args.thread),
        ]),
        page: &args.page,
        none: "no tasks".into(),
    };
    list(&Client::connect(&args.client)?, listing, tasks_table).await
}

pub async fn search(args: SearchArgs) -> anyhow::Result<()> {
    let text = args.text.join(" ");
    let mut filters = vec![("q", text.clone())];
    filters.extend(self::filters([
        ("run", args.run),
        ("thread", args.thread),
        ("task", args.task),
        ("agent", args.agent),
        ("workflow", args.workflow),
    ]));
    let listing = Listing {
        path: "/v1/search",
        command: "search",
        words: Some(shell_word(&text)),
        filters,
        page: &args.page,
        none: format!("nothing matches `{text}`"),
    };
    list(&Client::connect(&args.client)?, listing, search_table).await
}

/// The filters that were given.
fn filters<const N: usize>(given: [(&'static str, Option<String>); N]) -> Vec<(&'static str, String)> {
    given.into_iter().filter_map(|(name, value)| Some((name, value?))).collect()
}

/// Prints a page of `listing` (or, with `--all`, every page): its JSON, or a table by `render`
/// with a `more:` line on stderr when a next page follows.
async fn list<T: DeserializeOwned>(
    client: &Client,
    listing: Listing<'_>,
    render: fn(&[T], i64, bool) -> String,
) -> anyhow::Result<()> {
    let page = listing.page;
    let mut query = listing.filters.clone();
    query.extend(filters([("since", page.since.clone()), ("until", page.until.clone())]));
    if let Some(limit) = page.limit.or(page.all.then_some(ALL_PAGE)) {
        query.push(("limit", limit.to_string()));
    }
    let (items, next) = if page.all {
        let (items, as_of) = every_page(client, listing.path, query, page.cursor.clone()).await?;
        if page.json {
            return render::print(&format!("{}\n", json!({"items": items, "as_of": as_of})));
        }
        (items, None)
    } else {
        let mut request = client.get(listing.path).query(&query);
        if let Some(cursor) = &page.cursor {
            request = request.query(&[("cursor", cursor)]);
        }
        let Some(answer) = client.answer(request, page.json).await? else { return Ok(()) };
        let answer: Page<Value> = typed(answer)?;
        (answer.items, answer.next.map(|next| more(&listing, &query, &next)))
    };
    if items.is_empty() {
        eprintln!("clutch: {}", listing.none);
        return Ok(());
    }
    let items: Vec<T> = typed(Value::Array(items))?;
    render::print(&render(&items, now_ms(), render::stdout_color()))?;
    if let Some(more) = next {
        eprintln!("{}", paint(&more, Some("2"), render::stderr_color()));
    }
    Ok(())
}

/// `more: clutch runs list --state failed --cursor NEXT`: the command for the page after this one,
/// with the words and flags of this one (`query`, without its cursor).
fn more(listing: &Listing<'_>, query: &[(&'static str, String)], next: &str) -> String {
    let mut line = format!("more: clutch {}", listing.command);
    if let Some(words) = &listing.words {
        line.push_str(&format!(" {words}"));
    }
    for (name, value) in query.iter().filter(|(name, _)| *name != "q") {
        line.push_str(&format!(" --{name} {}", shell_word(value)));
    }
    line.push_str(&format!(" --cursor {}", shell_word(next)));
    line
}

/// Every item of a listing from `cursor` (or the first page) to the last page, and the log position
/// they were read at.
async fn every_page(
    client: &Client,
    path: &str,
    query: Vec<(&'static str, String)>,
    mut cursor: Option<String>,
) -> anyhow::Result<(Vec<Value>, u64)> {
    let mut items = Vec::new();
    let mut as_of = None;
    loop {
        let mut request = client.get(path).query(&query);
        if let Some(cursor) = &cursor {
            request = request.query(&[("cursor", cursor)]);
        }
        let page: Page<Value> = typed(client.json(request).await?)?;
        as_of.get_or_insert(page.as_of);
        items.extend(page.items);
        match page.next {
            Some(next) => cursor = Some(next),
            None => return Ok((items, as_of.unwrap_or(page.as_of))),
        }
    }
}

/// `clutch runs show RUN`: the run's facts from its threads, its tasks as a tree, then its threads.
pub async fn run_show(args: RunShowArgs) -> anyhow::Result<()> {
    let client = Client::connect(&args.client)?;
    let tasks = match client.json(client.get(&format!("/v1/runs/{}/tasks", path_segment(&args.run)))).await {
        Ok(tasks) => Some(tasks),
        Err(e) if e.is_not_found() => None,
        Err(e) => return Err(e.into()),
    };
    let query = vec![("run", args.run.clone()), ("limit", ALL_PAGE.to_string())];
    let (threads, _) = every_page(&client, "/v1/threads", query, None).await?;
    if tasks.is_none() && threads.is_empty() {
        return Err(NotFound(format!("no events belong to run `{}`", args.run)).into());
    }
    if args.json {
        return render::print(&format!("{}\n", json!({"run_id": args.run, "tasks": tasks, "threads": threads})));
    }
    let tasks: Option<view::RunTasks> = tasks.map(typed).transpose()?;
    let threads: Vec<ThreadSummary> = typed(Value::Array(threads))?;
    render::print(&run_detail(&args.run, tasks.as_ref(), &threads, now_ms(), render::stdout_color()))
}

/// `clutch threads show THREAD`: every event of the thread, a page of `/v1/events` at a time.
async fn thread_show(args: ThreadShowArgs) -> anyhow::Result<()> {
    let client = Client::connect(&args.client)?;
    let color = render::stdout_color();
    let mut after = 0u64;
    let mut printed = false;
    loop {
        let query =
            [("thread_id", args.thread.clone()), ("after", after.to_string()), ("limit", EVENTS_PAGE.to_string())];
        let answer = client.json(client.get("/v1/events").query(&query)).await?;
        let events = answer.get("events").and_then(Value::as_array).cloned().unwrap_or_default();
        if events.is_empty() {
            break;
        }
        let mut out = String::new();
        for event in &events {
            if args.json {
                out.push_str(&event.to_string());
            } else {
                out.push_str(&render::event_line(event, color));
            }
            out.push('\n');
        }
        render::print(&out)?;
        printed = true;
        let last = events.last().and_then(|e| e.get("seq")).and_then(Value::as_u64);
        match answer.get("next_after").and_then(Value::as_u64).or(last) {
            Some(next) if next > after && events.len() == EVENTS_PAGE => after = next,
            _ => break,
        }
    }
    if !printed {
        return Err(NotFound(format!("no events belong to thread `{}`", args.thread)).into());
    }
    Ok(())
}

fn now_ms() -> i64 {
    std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_millis() as i64)
}

/// `value` as one shell word: as it is when it needs no quoting, else in single quotes.
fn shell_word(value: &str) -> String {
    let plain = |c: char| c.is_ascii_alphanumeric() || "_-.:/@%+=,".contains(c);
    if !value.is_empty() && value.chars().all(plain) {
        value.to_owned()
    } else {
        format!("'{}'", value.replace('\'', r"'\''"))
    }
}

fn run_color(state: RunState) -> Option<&'static str> {
    match state {
        RunState::Active => Some("33"),
        RunState::Completed => Some("32"),
        RunState::Failed => Some("31"),
        RunState::Cancelled => Some("35"),
    }
}

/// The colour of a task state's name; none for a name this build does not know.
fn task_color(state: &str) -> Option<&'static str> {
    TaskState::ALL.iter().find(|s| s.as_str() == state).and_then(|s| crate::task_tree::state_color(*s))
}

/// `2 completed, 1 failed`: the counts in the order of the task lifecycle; `-` for none.
fn task_counts(counts: &std::collections::BTreeMap<String, u64>) -> String {
    let rank = |name: &str| TaskState::ALL.iter().position(|s| s.as_str() == name).unwrap_or(TaskState::ALL.len());
    let mut counts: Vec<(&String, &u64)> = counts.iter().filter(|(_, n)| **n > 0).collect();
    counts.sort_by_key(|(name, _)| rank(name));
    if counts.is_empty() {
        return "-".into();
    }
    counts.iter().map(|(name, n)| format!("{n} {name}")).collect::<Vec<_>>().join(", ")
}

/// Names, the first few of them, and how many more.
fn names(names: &[String]) -> String {
    if names.is_empty() {
        return "-".into();
    }
    let mut text = names.iter().take(NAMES_SHOWN).cloned().collect::<Vec<_>>().join(", ");
    if names.len() > NAMES_SHOWN {
        text.push_str(&format!(" +{}", names.len() - NAMES_SHOWN));
    }
    text
}

fn runs_table(runs: &[RunSummary], now_ms: i64, color: bool) -> String {
    let mut table = Table::new(&["RUN", "STATE", "KIND", "TASKS", "LAST", "TITLE"]);
    for r in runs {
        table.row(vec![
            r.run_id.as_str().into(),
            Cell::colored(r.state.as_str(), run_color(r.state)),
            r.kind.as_str().into(),
            task_counts(&r.tasks).into(),
            render::age(&r.last_ts, now_ms).into(),
            render::one_line(&r.title, TITLE_MAX).into(),
        ]);
    }
    table.render(color)
}

fn threads_table(threads: &[ThreadSummary], now_ms: i64, color: bool) -> String {
    let mut table = Table::new(&["THREAD", "RUN", "MSGS", "PARTICIPANTS", "LAST", "TITLE"]);
    for t in threads {
        table.row(vec![
            t.thread_id.as_str().into(),
            t.run_id.as_str().into(),
            t.messages.to_string().into(),
            names(&t.participants).into(),
            render::age(&t.last_ts, now_ms).into(),
            render::one_line(&t.title, TITLE_MAX).into(),
        ]);
    }
    table.render(color)
}

fn tasks_table(tasks: &[TaskListing], now_ms: i64, color: bool) -> String {
    let mut table = Table::new(&["TASK", "STATE", "AGENT", "LAST", "TITLE"]);
    for t in tasks {
        table.row(vec![
            t.task_id.as_str().into(),
            Cell::colored(t.state.as_str(), task_color(&t.state)),
            t.agent.as_deref().unwrap_or("-").into(),
            render::age(&t.last_ts, now_ms).into(),
            render::one_line(&t.title, TITLE_MAX).into(),
        ]);
    }
    table.render(color)
}

fn search_table(hits: &[SearchHit], _now_ms: i64, color: bool) -> String {
    let mut table = Table::new(&["SEQ", "TYPE", "FROM", "RUN", "SNIPPET"]);
    for h in hits {
        table.row(vec![
            h.seq.to_string().into(),
            Cell::colored(h.kind.as_str(), Some(render::kind_color(&h.kind))),
            h.from.as_str().into(),
            h.run_id.as_str().into(),
            render::one_line(&h.snippet, SNIPPET_MAX).into(),
        ]);
    }
    table.render(color)
}

/// A run: a title line and its facts (from its threads), its task tree, then its threads.
fn run_detail(
    run_id: &str,
    tasks: Option<&view::RunTasks>,
    threads: &[ThreadSummary],
    now_ms: i64,
    color: bool,
) -> String {
    let first = threads.iter().min_by_key(|t| t.first_seq);
    let last = threads.iter().max_by_key(|t| t.last_seq);
    let mut out = paint(run_id, Some("1"), color);
    if let Some(first) = first.filter(|t| !t.title.is_empty()) {
        out.push_str(&format!("  {}", render::one_line(&first.title, TITLE_MAX * 2)));
    }
    out.push('\n');
    let mut facts = Table::new(&[]);
    if let (Some(first), Some(last)) = (first, last) {
        facts.row(vec!["first".into(), first.first_ts.as_str().into()]);
        facts.row(vec!["last".into(), format!("{} ({})", last.last_ts, render::age(&last.last_ts, now_ms)).into()]);
    }
    let events: u64 = threads.iter().map(|t| t.messages).sum();
    let plural = |n: u64| if n == 1 { "" } else { "s" };
    let count = threads.len() as u64;
    facts.row(vec![
        "threads".into(),
        format!("{count} thread{}, {events} event{}", plural(count), plural(events)).into(),
    ]);
    let mut by_start: Vec<&ThreadSummary> = threads.iter().collect();
    by_start.sort_by_key(|t| t.first_seq);
    let mut who: Vec<String> = Vec::new();
    for name in by_start.iter().flat_map(|t| &t.participants) {
        if !who.contains(name) {
            who.push(name.clone());
        }
    }
    facts.row(vec!["participants".into(), if who.is_empty() { "-".into() } else { who.join(", ").into() }]);
    if let Some(workflow) = tasks.and_then(|t| t.workflow_id.as_deref()) {
        facts.row(vec!["workflow".into(), workflow.into()]);
    }
    out.push_str(&facts.render(color));
    out.push('\n');
    match tasks {
        Some(tasks) => out.push_str(&crate::task_tree::tree(tasks, color)),
        None => out.push_str("no tasks: only messages\n"),
    }
    if !threads.is_empty() {
        out.push('\n');
        out.push_str(&threads_table(threads, now_ms, color));
    }
    out
}

pub const RUNS_LIST_EXAMPLES: &str = "EXAMPLES:
  clutch runs list                               the latest 50 runs, last active first
  clutch runs list --state failed --since 1d     what failed today
  clutch runs list --kind workflow --all         every workflow run
  clutch runs list --json | jq '.items[].run_id'

  A `more:` line on stderr gives the command for the next page when there is one.";

pub const RUN_SHOW_EXAMPLES: &str = "EXAMPLES:
  clutch runs show run_01J...
  clutch runs show run_01J... --json | jq '.threads | length'

  The run's first and last event, its participants, its tasks as a tree (as `clutch runs tasks`
  draws it) and its threads. Exits 3 when no event belongs to the run.";

pub const THREADS_EXAMPLES: &str = "EXAMPLES:
  clutch threads list --run run_01J...           the threads of a run
  clutch threads show thr_01J...                 a thread's events, one line each";

const THREADS_LIST_EXAMPLES: &str = "EXAMPLES:
  clutch threads list
  clutch threads list --run run_01J... --all
  clutch threads list --agent user:ada --since 2h --json

  A `more:` line on stderr gives the command for the next page when there is one.";

const THREADS_SHOW_EXAMPLES: &str = "EXAMPLES:
  clutch threads show thr_01J...
  clutch threads show thr_01J... --json | jq .payload

  Exits 3 when no event belongs to the thread.";

pub const TASKS_LIST_EXAMPLES: &str = "EXAMPLES:
  clutch tasks list                              the latest 50 tasks, last active first
  clutch tasks list --state failed --agent agent:ken
  clutch tasks list --run run_01J... --all
  clutch tasks list --capability skill:code --since 2h --json

  A `more:` line on stderr gives the command for the next page when there is one.";

pub const SEARCH_EXAMPLES: &str = "EXAMPLES:
  clutch search deploy failed                    events whose text holds both words
  clutch search invoice --run run_01J... --since 7d
  clutch search timeout --agent agent:ken --json | jq '.items[].seq'

  Most relevant first, then newest. Each snippet shows the words found between [ and ]; `clutch
  threads show` and `clutch runs show` show the thread and run of a hit.";

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn runs_are_rows_with_counts_and_ages() {
        let run: RunSummary = serde_json::from_value(json!({
            "run_id": "run_1", "title": "summarise\nthe report", "kind": "task", "state": "failed",
            "first_seq": 1, "first_ts": "2026-04-01T12:00:00Z", "last_seq": 9, "last_ts": "2026-04-01T12:00:00Z",
            "events": 9, "tasks": {"failed": 1, "completed": 2, "running": 0}, "agents": ["agent:ken"],
        }))
        .unwrap();
        let now = clutch_store::lists::ts_ms("2026-04-01T12:03:10Z");
        assert_eq!(
            runs_table(&[run], now, false),
            "\
RUN    STATE   KIND  TASKS                  LAST    TITLE
run_1  failed  task  2 completed, 1 failed  3m ago  summarise the report
"
        );
    }

    #[test]
    fn shell_words_are_quoted_only_when_needed() {
        assert_eq!(shell_word("c1a.5"), "c1a.5");
        assert_eq!(shell_word("agent:ken"), "agent:ken");
        assert_eq!(shell_word("deploy failed"), "'deploy failed'");
        assert_eq!(shell_word("it's"), r"'it'\''s'");
        assert_eq!(shell_word(""), "''");
    }

    #[test]
    fn names_stop_after_a_few() {
        let list: Vec<String> = ["a", "b", "c", "d", "e"].map(String::from).to_vec();
        assert_eq!(names(&list), "a, b, c +2");
        assert_eq!(names(&list[..1]), "a");
        assert_eq!(names(&[]), "-");
    }
}

pub const REINDEX_EXAMPLES: &str = "EXAMPLES:
  clutch reindex                     derive the lists and the search index again from the whole log
  clutch reindex --json              the daemon's answer as JSON: {events, seconds}";

#[derive(Debug, clap::Args)]
pub struct ReindexArgs {
    #[command(flatten)]
    pub client: ClientArgs,
    /// Print the daemon's answer as JSON.
    #[arg(long)]
    pub json: bool,
}

/// `clutch reindex`: `POST /v1/reindex` (admins), with the time it has taken so far ticking on
/// stderr while the daemon works (a terminal only).
pub async fn reindex(args: ReindexArgs) -> anyhow::Result<()> {
    use std::io::IsTerminal;
    let client = Client::connect(&args.client)?;
    let started = std::time::Instant::now();
    let ticking = std::io::stderr().is_terminal().then(|| {
        tokio::spawn(async move {
            loop {
                tokio::time::sleep(std::time::Duration::from_millis(500)).await;
                eprint!("\rreindexing the log … {:.0} s", started.elapsed().as_secs_f64());
            }
        })
    });
    let answer = client.answer(client.post("/v1/reindex"), args.json).await;
    if let Some(ticking) = ticking {
        ticking.abort();
        eprint!("\r\x1b[K");
    }
    if let Some(answer) = answer? {
        let events = answer["events"].as_u64().unwrap_or(0);
        let seconds = answer["seconds"].as_f64().unwrap_or(0.0);
        crate::render::print(&format!("reindexed {events} events in {seconds:.1} s\n"))?;
    }
    Ok(())
}
