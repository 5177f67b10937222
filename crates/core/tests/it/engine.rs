//! The engine on a real SQLite store: routing, the task state machine, redelivery, retries, queueing,
//! heartbeat expiry, runtime limits, cancels, tool allowlists, budgets, and timers that survive a
//! restart. Waits are on events in the log (a subscription), bounded by a generous guard timeout.
//! Timer rules alone (redelivery, heartbeat expiry) are checked at a manual clock in `machine.rs`.

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, SystemTime};

use clutch_core::engine::{Ack, Options};
use clutch_core::registry::Status;
use clutch_core::view::{self, Load, TaskState};
use clutch_core::{Running, start};
use clutch_proto::id::{self, Kind};
use clutch_proto::validate::{self, Defaults};
use clutch_store::Filter;
use serde_json::{Value, json};

const GUARD: Duration = Duration::from_secs(20);

pub(crate) struct Hub {
    core: Option<Running>,
    dir: tempfile::TempDir,
}

async fn open(dir: &Path, options: Options) -> Running {
    let store = clutch_store_sqlite::Store::open(dir).unwrap();
    start(Arc::new(store), clutch_core::log::Options::default(), options).await.unwrap()
}

pub(crate) async fn hub(options: Options) -> Hub {
    let dir = tempfile::tempdir().unwrap();
    let core = open(dir.path(), options).await;
    Hub { core: Some(core), dir }
}

fn fast() -> Options {
    Options {
        accept_timeout: Duration::from_secs(30),
        retry_backoff: Duration::from_millis(20),
        retry_backoff_max: Duration::from_millis(100),
        ..Options::default()
    }
}

impl Hub {
    pub(crate) fn core(&self) -> &Running {
        self.core.as_ref().unwrap()
    }

    pub(crate) async fn register(&self, name: &str, card: Value) {
        let mut card = card;
        card["agent_id"] = json!(format!("agent:{name}"));
        let card = validate::agent_card(&card).unwrap();
        self.core().engine.register(&card).await.unwrap();
    }

    async fn send(&self, value: Value) -> Result<Ack, clutch_core::Error> {
        let m = validate::message(&value, &Defaults { now: SystemTime::now() }).unwrap();
        self.core().engine.submit(vec![m]).await.unwrap().pop().unwrap()
    }

    /// Waits for the first event of `task` after `after` for which `pred` holds; returns it.
    pub(crate) async fn wait(&self, task: &str, after: u64, pred: impl Fn(&Value) -> bool) -> Value {
        let filter = Filter { task_id: Some(task.to_owned()), ..Filter::default() };
        let mut sub = self.core().log.subscribe(filter, Some(after)).await.unwrap();
        let mut seen = Vec::new();
        let found = tokio::time::timeout(GUARD, async {
            loop {
                let event = sub.next().await.expect("stream ended");
                let v: Value = serde_json::from_str(&event.to_wire()).unwrap();
                seen.push(format!("{} {} {}", v["type"], v["from"]["agent_id"], v["payload"]));
                if pred(&v) {
                    return v;
                }
            }
        })
        .await;
        found.unwrap_or_else(|_| panic!("no matching event for {task}; saw:\n{}", seen.join("\n")))
    }

    pub(crate) async fn restart(&mut self, options: Options) {
        self.core.take().unwrap().stop().await.unwrap();
        self.core = Some(open(self.dir.path(), options).await);
    }

    /// Stops the core, once every payload the daemon wrote is checked against its published schema.
    pub(crate) async fn stop(mut self) {
        crate::published::check_log(&self.core().log).await;
        self.core.take().unwrap().stop().await.unwrap();
    }
}

struct Task {
    run: String,
    thread: String,
    task: String,
}

fn new_task() -> Task {
    Task { run: id::generate(Kind::Run), thread: id::generate(Kind::Thread), task: id::generate(Kind::Task) }
}

impl Task {
    fn msg(&self, from: &str, kind: &str, payload: Value) -> Value {
        json!({
            "thread_id": self.thread, "run_id": self.run, "task_id": self.task,
            "from": {"agent_id": from}, "to": [], "type": kind, "payload": payload,
        })
    }

    fn request(&self, requires: &[&str]) -> Value {
        let mut m = self.msg("user:ada", "task.request", json!({"goal": "work"}));
        m["to"] = json!([{"agent_id": "agent:orchestrator"}]);
        m["requires"] = json!(requires);
        m
    }
}

fn kind(v: &Value) -> &str {
    v["type"].as_str().unwrap()
}

fn delivered_to(v: &Value) -> Option<&str> {
    (kind(v) == "task.request" && v["from"]["agent_id"] == "agent:orchestrator")
        .then(|| v["to"][0]["agent_id"].as_str().unwrap())
}

fn code(e: clutch_core::Error) -> &'static str {
    e.code().as_str()
}

fn seq(a: Ack) -> u64 {
    match a {
        Ack::Stored(o) => o.seq,
        Ack::Heartbeat(_) => panic!("not stored"),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_task_is_routed_by_requirements_explained_and_followed_to_its_result() {
    let h = hub(fast()).await;
    h.register("res", json!({"capabilities": [{"id": "skill:research", "version": "1.2.0"}]})).await;
    h.register(
        "coder",
        json!({"capabilities": [{"id": "skill:code", "version": "2.1"}], "limits": {"max_concurrency": 2}}),
    )
    .await;
    let t = new_task();
    h.send(t.request(&["skill:code@^2"])).await.unwrap();
    let decision = h.wait(&t.task, 0, |v| kind(v) == "routing.decision").await;
    assert_eq!(decision["payload"]["selected"], "agent:coder");
    assert_eq!(decision["payload"]["candidates"], json!(["agent:coder"]));
    assert_eq!(decision["payload"]["excluded"]["agent:res"], "lacks required capability skill:code@^2");
    assert!(decision["payload"]["reason"].as_str().unwrap().contains("matched requires[skill:code@^2]"));
    let delivery = h.wait(&t.task, 0, |v| delivered_to(v).is_some()).await;
    assert_eq!(delivered_to(&delivery), Some("agent:coder"));
    assert_eq!(delivery["attempt"], 1);
    assert_eq!(delivery["run_id"], t.run.as_str());
    assert_eq!(delivery["payload"], json!({"goal": "work"}));

    // Only the agent it was routed to may accept it.
    let err = h.send(t.msg("agent:res", "task.accept", json!({}))).await.unwrap_err();
    assert_eq!(code(err), "INVALID_TRANSITION");
    h.send(t.msg("agent:coder", "task.accept", json!({}))).await.unwrap();
    assert_eq!(h.core().engine.agent("agent:coder").unwrap().load, Load { in_flight: 1, max_concurrency: Some(2) });
    h.send(t.msg("agent:coder", "task.progress", json!({"percent": 50, "usage": {"tokens": 120, "cost_usd": 0.01}})))
        .await
        .unwrap();
    let result = json!({"files": [], "language": "rust", "tests_passed": true});
    h.send(t.msg("agent:coder", "task.result", result.clone())).await.unwrap();
    // Answering twice is refused; the state does not change.
    let err = h.send(t.msg("agent:coder", "task.result", result)).await.unwrap_err();
    assert_eq!(code(err), "INVALID_TRANSITION");

    let task = h.core().engine.task(&t.task).unwrap();
    assert_eq!(task.state, TaskState::Completed);
    assert_eq!(task.agent.as_deref(), Some("agent:coder"));
    let kinds: Vec<&str> = task.history.unwrap().iter().map(|s| s.kind.as_str()).collect();
    assert_eq!(
        kinds,
        ["task.request", "routing.decision", "task.request", "task.accept", "task.progress", "task.result"]
    );
    let agent = h.core().engine.agent("agent:coder").unwrap();
    assert_eq!(agent.load.in_flight, 0);
    assert_eq!(agent.success_rate, Some(1.0));
    assert_eq!(agent.usage.tokens, 120);
    let tree = h.core().engine.run_tasks(&t.run).unwrap();
    assert_eq!(tree.tasks[0].task_id, t.task);
    assert_eq!(tree.counts, BTreeMap::from([(TaskState::Completed, 1)]));
    h.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_retryable_error_is_routed_again_to_another_agent_and_retries_are_bounded() {
    let h = hub(Options { max_routings: 2, ..fast() }).await;
    h.register("a", json!({"capabilities": [{"id": "skill:x"}]})).await;
    h.register("b", json!({"capabilities": [{"id": "skill:x"}]})).await;
    let t = new_task();
    h.send(t.request(&["skill:x"])).await.unwrap();
    let first = h.wait(&t.task, 0, |v| delivered_to(v).is_some()).await;
    let first_agent = delivered_to(&first).unwrap().to_owned();
    h.send(t.msg(&first_agent, "task.accept", json!({}))).await.unwrap();
    let after = seq(h
        .send(t.msg(
            &first_agent,
            "task.error",
            json!({"code": "TOOL_UNAVAILABLE", "message": "down", "retryable": true}),
        ))
        .await
        .unwrap());
    assert_eq!(h.core().engine.task(&t.task).unwrap().state, TaskState::Retrying);
    let second = h.wait(&t.task, after, |v| delivered_to(v).is_some()).await;
    let second_agent = delivered_to(&second).unwrap().to_owned();
    assert_ne!(second_agent, first_agent, "the agent that failed has the worse success rate");
    assert_eq!(second["attempt"], 2);
    // The second retryable error exhausts max_routings = 2: the task fails.
    h.send(t.msg(&second_agent, "task.error", json!({"code": "X", "message": "again", "retryable": true})))
        .await
        .unwrap();
    let task = h.core().engine.task(&t.task).unwrap();
    assert_eq!(task.state, TaskState::Failed);
    assert_eq!(task.routings, 2);
    h.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_busy_agent_queues_tasks_and_an_impossible_task_fails_at_once() {
    let h = hub(fast()).await;
    h.register("solo", json!({"capabilities": [{"id": "skill:x"}], "limits": {"max_concurrency": 1}})).await;
    let (t1, t2) = (new_task(), new_task());
    h.send(t1.request(&["skill:x"])).await.unwrap();
    h.wait(&t1.task, 0, |v| delivered_to(v).is_some()).await;
    h.send(t2.request(&["skill:x"])).await.unwrap();
    let queued = h.wait(&t2.task, 0, |v| kind(v) == "routing.failure").await;
    assert_eq!(queued["payload"]["queued"], true);
    assert!(queued["payload"]["excluded"]["agent:solo"].as_str().unwrap().contains("concurrency limit (1/1)"));
    assert_eq!(h.core().engine.task(&t2.task).unwrap().state, TaskState::Queued);
    h.send(t1.msg("agent:solo", "task.result", json!({}))).await.unwrap();
    let routed = h.wait(&t2.task, 0, |v| delivered_to(v).is_some()).await;
    assert_eq!(delivered_to(&routed), Some("agent:solo"));

    let t3 = new_task();
    h.send(t3.request(&["skill:translate"])).await.unwrap();
    let failure = h.wait(&t3.task, 0, |v| kind(v) == "routing.failure").await;
    assert_eq!(failure["payload"]["queued"], false);
    assert_eq!(failure["payload"]["excluded"]["agent:solo"], "lacks required capability skill:translate");
    let error = h.wait(&t3.task, 0, |v| kind(v) == "task.error").await;
    assert_eq!(error["payload"]["code"], "NO_ELIGIBLE_AGENT");
    assert_eq!(h.core().engine.task(&t3.task).unwrap().state, TaskState::Failed);
    h.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_task_past_its_runtime_limit_times_out_and_a_cancel_reaches_the_agent() {
    let h = hub(Options { default_max_runtime: Some(Duration::from_millis(200)), ..fast() }).await;
    h.register("w", json!({"capabilities": [{"id": "skill:x"}]})).await;
    let t = new_task();
    h.send(t.request(&["skill:x"])).await.unwrap();
    h.wait(&t.task, 0, |v| delivered_to(v).is_some()).await;
    h.send(t.msg("agent:w", "task.accept", json!({}))).await.unwrap();
    let timeout = h.wait(&t.task, 0, |v| kind(v) == "task.timeout").await;
    assert_eq!(timeout["from"]["agent_id"], "agent:orchestrator");
    assert_eq!(h.core().engine.task(&t.task).unwrap().state, TaskState::TimedOut);
    let err = h.send(t.msg("agent:w", "task.result", json!({}))).await.unwrap_err();
    assert_eq!(code(err), "INVALID_TRANSITION");

    let c = new_task();
    h.send(c.request(&["skill:x"])).await.unwrap();
    h.wait(&c.task, 0, |v| delivered_to(v).is_some()).await;
    // Only the requester or a user may cancel; the agent gets the cancel forwarded.
    let err = h.send(c.msg("agent:mallory", "task.cancel", json!({}))).await.unwrap_err();
    assert_eq!(code(err), "INVALID_TRANSITION");
    h.send(c.msg("user:ada", "task.cancel", json!({"reason": "changed my mind"}))).await.unwrap();
    let forwarded =
        h.wait(&c.task, 0, |v| kind(v) == "task.cancel" && v["from"]["agent_id"] == "agent:orchestrator").await;
    assert_eq!(forwarded["to"], json!([{"agent_id": "agent:w"}]));
    assert_eq!(h.core().engine.task(&c.task).unwrap().state, TaskState::Cancelled);
    let err = h.send(c.msg("agent:w", "task.result", json!({}))).await.unwrap_err();
    assert_eq!(code(err), "INVALID_TRANSITION");
    assert_eq!(h.core().engine.agent("agent:w").unwrap().load.in_flight, 0);
    h.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn delivery_timers_survive_a_restart() {
    let options = Options { accept_timeout: Duration::from_millis(400), max_deliveries: 3, ..fast() };
    let mut h = hub(options.clone()).await;
    h.register("w", json!({"capabilities": [{"id": "skill:x"}]})).await;
    let t = new_task();
    h.send(t.request(&["skill:x"])).await.unwrap();
    h.wait(&t.task, 0, |v| delivered_to(v).is_some()).await;
    h.restart(options).await;
    // Rebuilt from the log: the task is routed, its accept deadline still runs.
    assert_eq!(h.core().engine.task(&t.task).unwrap().state, TaskState::Routed);
    assert_eq!(h.core().engine.agent("agent:w").unwrap().load.in_flight, 1);
    let again = h.wait(&t.task, 0, |v| delivered_to(v).is_some() && v["attempt"] == 2).await;
    assert_eq!(delivered_to(&again), Some("agent:w"));
    h.send(t.msg("agent:w", "task.accept", json!({}))).await.unwrap();
    h.send(t.msg("agent:w", "task.result", json!({}))).await.unwrap();
    assert_eq!(h.core().engine.task(&t.task).unwrap().state, TaskState::Completed);
    h.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tool_calls_outside_the_allowlists_are_refused_and_answered() {
    let h = hub(fast()).await;
    h.register("w", json!({"capabilities": [{"id": "skill:x", "tools": ["mcp:browser", "mcp:files"]}]})).await;
    let t = new_task();
    let mut request = t.request(&["skill:x"]);
    request["security"] = json!({"policy": {"tool_allowlist": ["mcp:browser"]}});
    h.send(request).await.unwrap();
    h.wait(&t.task, 0, |v| delivered_to(v).is_some()).await;
    h.send(t.msg("agent:w", "task.accept", json!({}))).await.unwrap();
    h.send(t.msg("agent:w", "tool.call", json!({"tool": "mcp:browser", "args": {}}))).await.unwrap();
    // Allowed by the card but not by the task's policy.
    let err = h.send(t.msg("agent:w", "tool.call", json!({"tool": "mcp:files"}))).await.unwrap_err();
    assert_eq!(code(err), "FORBIDDEN");
    let answer = h.wait(&t.task, 0, |v| kind(v) == "tool.error").await;
    assert_eq!(answer["payload"]["code"], "FORBIDDEN");
    assert_eq!(answer["to"], json!([{"agent_id": "agent:w"}]));
    // Not on the card at all.
    let err = h.send(t.msg("agent:w", "tool.call", json!({"tool": "mcp:shell"}))).await.unwrap_err();
    assert_eq!(code(err), "FORBIDDEN");
    let calls = h
        .core()
        .log
        .read(
            &Filter {
                task_id: Some(t.task.clone()),
                kind: Some(clutch_proto::MessageType::ToolCall),
                ..Filter::default()
            },
            0,
            10,
        )
        .await
        .unwrap();
    assert_eq!(calls.len(), 1, "refused calls are not stored");
    h.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn crossing_a_budget_sends_a_notice_and_excludes_the_agent() {
    let h = hub(fast()).await;
    h.register("cheap", json!({"capabilities": [{"id": "skill:x"}], "budget": {"tokens": 100}})).await;
    let t = new_task();
    h.send(t.request(&["skill:x"])).await.unwrap();
    h.wait(&t.task, 0, |v| delivered_to(v).is_some()).await;
    h.send(t.msg("agent:cheap", "task.result", json!({"usage": {"input_tokens": 80, "output_tokens": 40}})))
        .await
        .unwrap();
    // The daemon's `chat.system` messages so far.
    let system = || async {
        let filter = Filter { kind: Some(clutch_proto::MessageType::ChatSystem), ..Filter::default() };
        let events = h.core().log.read(&filter, 0, 100).await.unwrap();
        events.iter().map(|e| serde_json::from_str::<Value>(&e.json).unwrap()).collect::<Vec<_>>()
    };
    let notices = async {
        loop {
            if let Some(notice) = system().await.into_iter().next() {
                return notice;
            }
            tokio::task::yield_now().await;
        }
    };
    let notice = tokio::time::timeout(GUARD, notices).await.unwrap();
    assert_eq!(notice["payload_type"], "clutch.budget.v1");
    assert_eq!(notice["payload"]["dimension"], "tokens");
    assert_eq!(notice["payload"]["used"], 120.0);
    let agent = h.core().engine.agent("agent:cheap").unwrap();
    assert!(agent.budget_exhausted);
    let t2 = new_task();
    h.send(t2.request(&["skill:x"])).await.unwrap();
    let queued = h.wait(&t2.task, 0, |v| kind(v) == "routing.failure").await;
    assert_eq!(queued["payload"]["excluded"]["agent:cheap"], "its budget is exhausted");

    // The reactor stops looking for crossings once the notice is out, and looks again at the next:
    // one notice per agent, however many events come after.
    h.register("thrifty", json!({"capabilities": [{"id": "skill:x"}], "budget": {"tokens": 100}})).await;
    h.wait(&t2.task, 0, |v| delivered_to(v) == Some("agent:thrifty")).await;
    h.send(t2.msg("agent:thrifty", "task.result", json!({"usage": {"input_tokens": 100, "output_tokens": 1}})))
        .await
        .unwrap();
    let noticed = || async {
        let mut ids: Vec<String> = system()
            .await
            .into_iter()
            .filter(|v| v["payload_type"] == "clutch.budget.v1")
            .map(|v| v["payload"]["id"].as_str().unwrap_or_default().to_owned())
            .collect();
        ids.sort();
        ids
    };
    let both = async {
        while noticed().await.len() < 2 {
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
    };
    tokio::time::timeout(GUARD, both).await.unwrap();
    for _ in 0..5 {
        h.send(new_task().request(&["skill:x"])).await.unwrap();
    }
    tokio::time::sleep(Duration::from_millis(100)).await;
    assert_eq!(noticed().await, ["agent:cheap", "agent:thrifty"]);
    h.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_daemons_own_voice_cannot_be_borrowed_and_heartbeats_are_not_stored() {
    let h = hub(fast()).await;
    h.register("w", json!({"capabilities": []})).await;
    let t = new_task();
    let err = h.send(t.msg("agent:orchestrator", "chat.message", json!({}))).await.unwrap_err();
    assert_eq!(code(err), "FORBIDDEN");
    let err = h.send(t.msg("agent:w", "routing.decision", json!({"selected": "agent:w"}))).await.unwrap_err();
    assert_eq!(code(err), "FORBIDDEN");
    let mut forged = t.msg("agent:w", "chat.system", json!({}));
    forged["payload_type"] = json!("clutch.budget.v1");
    assert_eq!(code(h.send(forged).await.unwrap_err()), "FORBIDDEN");
    let head = h.core().log.head().await.unwrap();
    match h.send(t.msg("agent:w", "agent.heartbeat", json!({}))).await.unwrap() {
        Ack::Heartbeat(b) => assert_eq!((b.status, b.next_heartbeat_sec), (Status::Online, 10)),
        other => panic!("{other:?}"),
    }
    assert_eq!(h.core().log.head().await.unwrap(), head, "a heartbeat is not an event");
    let err = h.send(t.msg("agent:ghost", "agent.heartbeat", json!({}))).await.unwrap_err();
    assert_eq!(code(err), "AGENT_NOT_FOUND");
    // A client retrying its request under the same idempotency key gets the duplicate answer.
    let mut r = t.request(&[]);
    r["idempotency_key"] = json!("job-1");
    let first = seq(h.send(r.clone()).await.unwrap());
    match h.send(r).await.unwrap() {
        Ack::Stored(o) => assert_eq!((o.seq, o.duplicate), (first, true)),
        other => panic!("{other:?}"),
    }
    h.stop().await;
}

fn policy(org: &str, workflows: &str) -> Arc<clutch_core::config::Policy> {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("org.yaml"), org).unwrap();
    std::fs::write(dir.path().join("workflows.yaml"), workflows).unwrap();
    Arc::new(clutch_core::config::Policy::load(dir.path()).unwrap())
}

const WORKFLOWS: &str = "
workflows:
  - workflow: product-research
    steps:
      - id: research
        requires: [skill:research]
        expects: {type: task.result, payload_type: research.summary.v1, required: [findings, citations]}
";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_workflow_step_holds_its_result_to_what_it_expects() {
    let h = hub(Options { policy: policy("", WORKFLOWS), ..fast() }).await;
    h.register("res", json!({"capabilities": [{"id": "skill:research"}]})).await;
    h.register("other", json!({"capabilities": [{"id": "skill:code"}]})).await;
    let t = new_task();
    let mut bad = t.request(&[]);
    bad["meta"] = json!({"workflow": "product-launch", "step": "research"});
    let err = h.send(bad).await.unwrap_err();
    assert_eq!(code(err), "VALIDATION_FAILED");
    // No requires of its own: the step's (skill:research) route it.
    let mut request = t.request(&[]);
    request["meta"] = json!({"workflow": "product-research", "step": "research"});
    h.send(request).await.unwrap();
    let delivery = h.wait(&t.task, 0, |v| delivered_to(v).is_some()).await;
    assert_eq!(delivered_to(&delivery), Some("agent:res"));
    h.send(t.msg("agent:res", "task.accept", json!({}))).await.unwrap();
    let mut result = t.msg("agent:res", "task.result", json!({"findings": ["the market grows"]}));
    result["payload_type"] = json!("research.summary.v1");
    let err = h.send(result.clone()).await.unwrap_err();
    let clutch_core::Error::Refused(r) = err else { panic!("not a refusal") };
    assert_eq!(r.code.as_str(), "VALIDATION_FAILED");
    assert!(r.problems.iter().any(|p| p.path == "payload.citations"), "{:?}", r.problems);
    assert_eq!(h.core().engine.task(&t.task).unwrap().state, TaskState::Accepted, "a refused result changes nothing");
    result["payload"] = json!({"findings": ["the market grows"], "citations": [{"url": "https://example.com/report", "title": "Report"}]});
    h.send(result).await.unwrap();
    assert_eq!(h.core().engine.task(&t.task).unwrap().state, TaskState::Completed);
    h.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn registered_schemas_validate_by_ref_and_survive_a_restart() {
    let mut h = hub(fast()).await;
    let schema = json!({"type": "object", "required": ["headline"], "properties": {"headline": {"type": "string"}}});
    let stored = h.core().engine.register_schema("market.brief.v1", None, schema.clone()).await.unwrap();
    assert_eq!(stored.unwrap().schema_ref, "schema://clutch/market/brief@1");
    // The same schema again changes nothing; a different one is refused with its problem.
    let head = h.core().log.head().await.unwrap();
    h.core().engine.register_schema("market.brief.v1", None, schema).await.unwrap();
    assert_eq!(h.core().log.head().await.unwrap(), head);
    let err = h.core().engine.register_schema("market.brief.v1", None, json!({"type": "string"})).await.unwrap_err();
    assert_eq!(code(err), "VALIDATION_FAILED");
    h.restart(fast()).await;
    assert!(h.core().engine.schema("schema://clutch/market/brief@1").is_some(), "rebuilt from the log");
    let t = new_task();
    let mut m = t.msg("agent:w", "chat.message", json!({"headline": 3}));
    m["schema_ref"] = json!("schema://clutch/market/brief@1");
    let clutch_core::Error::Refused(r) = h.send(m.clone()).await.unwrap_err() else { panic!() };
    assert_eq!(r.problems[0].path, "payload.headline");
    m["payload"] = json!({"headline": "Grows"});
    h.send(m).await.unwrap();
    h.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_operators_allowlist_and_budget_override_the_card() {
    let org = "
agents:
  agent:w:
    tool_allowlist: [mcp:browser]
    budget: {tokens: 50}
";
    let h = hub(Options { policy: policy(org, ""), ..fast() }).await;
    h.register(
        "w",
        json!({"capabilities": [{"id": "skill:x", "tools": ["mcp:browser", "mcp:files"]}], "budget": {"tokens": 1000}}),
    )
    .await;
    let t = new_task();
    h.send(t.request(&["skill:x"])).await.unwrap();
    h.wait(&t.task, 0, |v| delivered_to(v).is_some()).await;
    h.send(t.msg("agent:w", "tool.call", json!({"tool": "mcp:browser"}))).await.unwrap();
    let err = h.send(t.msg("agent:w", "tool.call", json!({"tool": "mcp:files"}))).await.unwrap_err();
    assert_eq!(code(err), "FORBIDDEN");
    h.send(t.msg("agent:w", "task.result", json!({"usage": {"tokens": 60}}))).await.unwrap();
    let agent = h.core().engine.agent("agent:w").unwrap();
    assert_eq!(agent.budget.unwrap().tokens, Some(50));
    assert!(agent.budget_exhausted);
    h.stop().await;
}

/// One rule, registered or not: a tool call passes the operator's list for the caller (org.yaml,
/// its own entry else its role's) and, when a card is registered and names tools, the card's. A
/// list that does not apply (no entry, no card, a card naming no tools, a removed card) limits
/// nothing. Every combination, for a tool both may allow and one only some allow.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_tool_call_passes_the_operators_list_and_the_cards_tools_registered_or_not() {
    let org = "
roles:
  adder: {tool_allowlist: [mcp:t/add]}
agents:
  agent:own-absent: {tool_allowlist: [mcp:t/add]}
  agent:own-notools: {tool_allowlist: [mcp:t/add]}
  agent:own-server: {tool_allowlist: [mcp:t/add]}
  agent:own-note: {tool_allowlist: [mcp:t/add]}
  agent:own-removed: {tool_allowlist: [mcp:t/add]}
  agent:role-absent: {role: adder}
  agent:role-notools: {role: adder}
  agent:role-server: {role: adder}
  agent:role-note: {role: adder}
  agent:role-removed: {role: adder}
";
    let h = hub(Options { policy: policy(org, ""), ..fast() }).await;
    // Cards: none; one naming no tools; one naming the whole server; one naming only write_note;
    // one naming only write_note, then removed.
    let cards: [(&str, Option<Value>); 5] = [
        ("absent", None),
        ("notools", Some(json!({"capabilities": [{"id": "skill:x"}]}))),
        ("server", Some(json!({"capabilities": [{"id": "tool:mcp", "servers": ["mcp:t"]}]}))),
        ("note", Some(json!({"capabilities": [{"id": "skill:x", "tools": ["mcp:t/write_note"]}]}))),
        ("removed", Some(json!({"capabilities": [{"id": "skill:x", "tools": ["mcp:t/write_note"]}]}))),
    ];
    let mut checked = 0;
    for org_entry in ["none", "own", "role"] {
        for (card_kind, card) in &cards {
            let name = format!("{org_entry}-{card_kind}");
            if let Some(card) = card {
                h.register(&name, card.clone()).await;
            }
            if *card_kind == "removed" {
                h.core().engine.unregister(&format!("agent:{name}")).await.unwrap();
            }
            for tool in ["mcp:t/add", "mcp:t/write_note"] {
                let operator_allows = org_entry == "none" || tool == "mcp:t/add";
                let card_allows = !matches!(*card_kind, "note") || tool == "mcp:t/write_note";
                let t = new_task();
                let sent = h.send(t.msg(&format!("agent:{name}"), "tool.call", json!({"tool": tool}))).await;
                let case = format!("agent:{name} calling {tool}");
                if operator_allows && card_allows {
                    assert!(sent.is_ok(), "{case}: {:?}", sent.err().map(|e| e.body()));
                } else {
                    let err = sent.expect_err(&case);
                    assert_eq!(code(err), "FORBIDDEN", "{case}");
                    let answer = h.wait(&t.task, 0, |v| kind(v) == "tool.error").await;
                    let why = answer["payload"]["message"].as_str().unwrap();
                    let expected = if operator_allows { "card" } else { "operator" };
                    assert!(why.contains(expected), "{case}: {why}");
                }
                checked += 1;
            }
        }
    }
    assert_eq!(checked, 30);
    h.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_payload_is_data_never_routing_or_policy() {
    let h = hub(fast()).await;
    h.register("res", json!({"capabilities": [{"id": "skill:research", "tools": ["mcp:shell"]}]})).await;
    h.register("coder", json!({"capabilities": [{"id": "skill:code"}]})).await;
    let t = new_task();
    let mut request = t.request(&["skill:code"]);
    request["payload"] = json!({
        "to": [{"agent_id": "agent:res"}], "requires": ["skill:research"], "type": "task.result",
        "security": {"policy": {"tool_allowlist": ["mcp:shell"]}}, "from": {"agent_id": "agent:orchestrator"},
    });
    h.send(request).await.unwrap();
    let delivery = h.wait(&t.task, 0, |v| delivered_to(v).is_some()).await;
    assert_eq!(delivered_to(&delivery), Some("agent:coder"), "routing reads the envelope only");
    assert_eq!(delivery["payload"]["requires"], json!(["skill:research"]), "the payload is passed on untouched");
    h.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_run_over_its_budget_fails_when_the_policy_says_so() {
    let org = "budgets:\n  run: {tokens: 100}\n  on_exceed: fail_run\n";
    let h = hub(Options { policy: policy(org, ""), ..fast() }).await;
    h.register("solo", json!({"capabilities": [{"id": "skill:x"}], "limits": {"max_concurrency": 1}})).await;
    let t1 = new_task();
    let t2 = Task { run: t1.run.clone(), thread: t1.thread.clone(), task: id::generate(Kind::Task) };
    h.send(t1.request(&["skill:x"])).await.unwrap();
    h.wait(&t1.task, 0, |v| delivered_to(v).is_some()).await;
    h.send(t2.request(&["skill:x"])).await.unwrap();
    h.wait(&t2.task, 0, |v| kind(v) == "routing.failure").await;
    h.send(t1.msg("agent:solo", "task.result", json!({"usage": {"tokens": 150}}))).await.unwrap();
    let failed = h.wait(&t2.task, 0, |v| kind(v) == "task.error").await;
    assert_eq!(failed["payload"]["code"], "BUDGET_EXCEEDED");
    // The wait may read the event from the store a moment before the engine has applied it.
    tokio::time::timeout(GUARD, async {
        while h.core().engine.task(&t2.task).unwrap().state != TaskState::Failed {
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
    })
    .await
    .expect("the task is failed");
    let tree = h.core().engine.run_tasks(&t1.run).unwrap();
    assert_eq!(tree.budget_exhausted, Some(true));
    assert_eq!(tree.usage.unwrap().tokens, 150);
    h.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn conversation_about_an_ended_task_goes_on() {
    let h = hub(fast()).await;
    h.register("w", json!({"capabilities": [{"id": "skill:x", "tools": ["mcp:browser"]}]})).await;
    let t = new_task();
    h.send(t.request(&["skill:x"])).await.unwrap();
    h.wait(&t.task, 0, |v| delivered_to(v).is_some()).await;
    h.send(t.msg("agent:w", "task.result", json!({}))).await.unwrap();
    h.send(t.msg("user:ada", "chat.message", json!({"text": "thanks!"}))).await.unwrap();
    h.send(t.msg("agent:w", "tool.call", json!({"tool": "mcp:browser"}))).await.unwrap();
    assert_eq!(
        code(h.send(t.msg("agent:w", "tool.call", json!({"tool": "mcp:shell"}))).await.unwrap_err()),
        "FORBIDDEN"
    );
    h.wait(&t.task, 0, |v| kind(v) == "tool.error").await;
    assert_eq!(code(h.send(t.msg("agent:w", "task.progress", json!({}))).await.unwrap_err()), "INVALID_TRANSITION");
    h.stop().await;
}

/// What a restart must bring back the same way, whether from a snapshot or from the whole log (an
/// ended task from memory or from the log).
async fn views(h: &Hub, tasks: &[&Task]) -> Value {
    let mut agents = h.core().engine.agents();
    for a in &mut agents {
        a.last_seen.clear();
    }
    let mut found = Vec::new();
    for t in tasks {
        found.push(h.core().engine.find_task(&t.task).await.unwrap().unwrap());
    }
    let tasks: Vec<view::Task> = found;
    json!({"agents": agents, "tasks": tasks, "schemas": h.core().engine.schemas()})
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_snapshot_restores_the_state_a_full_rebuild_would_and_the_tail_is_replayed() {
    let mut h = hub(fast()).await;
    h.register("w", json!({"capabilities": [{"id": "skill:x"}], "limits": {"max_concurrency": 4}})).await;
    h.register("v", json!({"capabilities": [{"id": "skill:y"}]})).await;
    h.core().engine.register_schema("market.brief.v1", None, json!({"type": "object"})).await.unwrap();
    let (done, pending) = (new_task(), new_task());
    for t in [&done, &pending] {
        h.send(t.request(&["skill:x"])).await.unwrap();
        h.wait(&t.task, 0, |v| delivered_to(v).is_some()).await;
    }
    h.send(done.msg("agent:w", "task.accept", json!({}))).await.unwrap();
    h.send(done.msg("agent:w", "task.result", json!({"usage": {"tokens": 120}}))).await.unwrap();
    let before = views(&h, &[&done, &pending]).await;

    // A clean stop saves a snapshot at the head; the next start loads it and replays nothing.
    let head = h.core().log.head().await.unwrap();
    h.restart(fast()).await;
    assert_eq!(h.core().engine.loaded_snapshot_seq(), head);
    assert_eq!(views(&h, &[&done, &pending]).await, before);

    // Events the engine never saw (written straight to the store, as after a crash between
    // snapshots) are replayed on top of the snapshot.
    h.core.take().unwrap().stop().await.unwrap();
    let late = new_task();
    {
        let store = clutch_store_sqlite::Store::open(h.dir.path()).unwrap();
        let accept =
            validate::message(&pending.msg("agent:w", "task.accept", json!({})), &Defaults { now: SystemTime::now() })
                .unwrap();
        let request = validate::message(&late.request(&["skill:y"]), &Defaults { now: SystemTime::now() }).unwrap();
        use clutch_store::Backend;
        store.append_messages(&[accept, request]).await.unwrap();
        store.close().await;
    }
    h.core = Some(open(h.dir.path(), fast()).await);
    assert_eq!(h.core().engine.loaded_snapshot_seq(), head, "the snapshot is older than the two events");
    assert_eq!(h.core().engine.task(&pending.task).unwrap().state, TaskState::Accepted);
    h.wait(&late.task, 0, |v| delivered_to(v) == Some("agent:v")).await;
    let with_tail = views(&h, &[&done, &pending, &late]).await;

    // Other options (a timer changed) make the snapshot unusable: the state is rebuilt from the whole
    // log, and comes out the same.
    h.restart(fast()).await;
    let snapshot_view = views(&h, &[&done, &pending, &late]).await;
    let other = Options { queue_timeout: Duration::from_secs(301), ..fast() };
    h.restart(other).await;
    assert_eq!(h.core().engine.loaded_snapshot_seq(), 0, "a snapshot saved under other options is ignored");
    assert_eq!(views(&h, &[&done, &pending, &late]).await, snapshot_view);
    assert_eq!(snapshot_view["tasks"][0], with_tail["tasks"][0]);
    h.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn snapshots_are_saved_every_so_many_events_while_running() {
    let h = hub(Options { snapshot_every: 3, snapshot_interval: Duration::ZERO, ..fast() }).await;
    for name in ["a", "b", "c", "d"] {
        h.register(name, json!({"capabilities": [{"id": "skill:x"}]})).await;
    }
    let saved = tokio::time::timeout(GUARD, async {
        loop {
            if let Some(s) = h.core().log.snapshot("engine").await.unwrap() {
                return s;
            }
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
    })
    .await
    .expect("no snapshot saved while running");
    assert!(saved.seq >= 3, "saved at seq {}", saved.seq);
    h.stop().await;
}

#[tokio::test]
async fn an_inbox_waits_for_work_and_a_reply_moves_the_task_as_its_holder() {
    use clutch_core::inbox::{Reply, Status as Said};
    let h = hub(fast()).await;
    h.register("kim", json!({"capabilities": [{"id": "skill:x", "version": "1.0.0"}]})).await;
    let engine = h.core().engine.clone();
    let waiting = {
        let engine = engine.clone();
        tokio::spawn(async move { engine.inbox("agent:kim", Duration::from_secs(15)).await })
    };
    let t = new_task();
    h.send(t.request(&["skill:x"])).await.unwrap();
    // The wait ends when the task arrives, not at its end.
    let inbox = tokio::time::timeout(GUARD, waiting).await.unwrap().unwrap().unwrap();
    assert_eq!(inbox.agent_id, "agent:kim");
    assert_eq!(inbox.tasks.len(), 1);
    assert_eq!((inbox.tasks[0].task.task_id.as_str(), inbox.tasks[0].task.state), (t.task.as_str(), TaskState::Routed));
    assert_eq!(inbox.tasks[0].request, json!({"goal": "work"}));
    assert_eq!(inbox.tasks[0].session_id, None);

    let reply = |status, text: Option<&str>, error: Option<&str>| Reply {
        status,
        text: text.map(str::to_owned),
        result: None,
        error: error.map(str::to_owned),
        retryable: false,
    };
    let refused = |r: Result<view::Task, clutch_core::Error>| match r {
        Err(clutch_core::Error::Refused(r)) => (r.code.as_str().to_owned(), r.field.unwrap_or_default()),
        other => panic!("not refused: {other:?}"),
    };
    for (who, task, said, code_and_field) in [
        ("agent:lee", t.task.as_str(), reply(Said::Accepted, None, None), ("FORBIDDEN", "agent_id")),
        ("kim", t.task.as_str(), reply(Said::Accepted, None, None), ("VALIDATION_FAILED", "agent_id")),
        ("agent:kim", "task_nope", reply(Said::Accepted, None, None), ("TASK_NOT_FOUND", "task_id")),
        ("agent:kim", t.task.as_str(), reply(Said::Completed, Some("  "), None), ("VALIDATION_FAILED", "text")),
        ("agent:kim", t.task.as_str(), reply(Said::Failed, None, None), ("VALIDATION_FAILED", "error")),
    ] {
        let (code, field) = refused(engine.task_reply(who, task, said).await);
        assert_eq!((code.as_str(), field.as_str()), code_and_field, "{who} {task}");
    }
    assert_eq!(engine.task(&t.task).unwrap().state, TaskState::Routed, "a refused reply changes nothing");

    // Accepting twice is accepting once; completing answers the requester.
    for _ in 0..2 {
        let task = engine.task_reply("agent:kim", &t.task, reply(Said::Accepted, None, None)).await.unwrap();
        assert_eq!(task.state, TaskState::Accepted);
    }
    let mut done = reply(Said::Completed, Some("42"), None);
    done.result = Some(json!({"confidence": 0.9}).as_object().unwrap().clone());
    let task = engine.task_reply("agent:kim", &t.task, done.clone()).await.unwrap();
    assert_eq!(task.state, TaskState::Completed);
    let result = h.wait(&t.task, 0, |v| kind(v) == "task.result").await;
    assert_eq!(result["from"]["agent_id"], "agent:kim");
    assert_eq!(result["to"], json!([{"agent_id": "user:ada"}]));
    assert_eq!(result["payload"], json!({"text": "42", "confidence": 0.9}));
    let history = engine.task(&t.task).unwrap().history.unwrap();
    assert_eq!(history.iter().filter(|s| s.kind.as_str() == "task.accept").count(), 1, "{history:?}");
    assert_eq!(refused(engine.task_reply("agent:kim", &t.task, done).await).0, "INVALID_TRANSITION");

    // Nothing waits now: a short wait answers empty once it is over.
    let inbox = engine.inbox("agent:kim", Duration::from_millis(100)).await.unwrap();
    assert!(inbox.tasks.is_empty());

    // How it ended, from the log; and the requester's side: only it may cancel.
    let end = engine.task_end(&t.task).await.unwrap().expect("it ended");
    assert_eq!((end.kind.as_str(), end.from.as_str()), ("task.result", "agent:kim"));
    assert_eq!(end.payload["text"], "42");
    let t2 = new_task();
    h.send(t2.request(&["skill:x"])).await.unwrap();
    h.wait(&t2.task, 0, |v| delivered_to(v) == Some("agent:kim")).await;
    assert_eq!(engine.task_end(&t2.task).await.unwrap(), None, "not ended yet");
    assert!(engine.task_cancel("agent:kim", &t2.task, "not mine").await.is_err(), "only the requester cancels");
    let cancelled = engine.task_cancel("user:ada", &t2.task, "enough").await.unwrap();
    assert_eq!(cancelled.state, TaskState::Cancelled);
    let end = engine.task_end(&t2.task).await.unwrap().expect("it ended");
    assert_eq!((end.kind.as_str(), end.payload["reason"].as_str()), ("task.cancel", Some("enough")));
    h.stop().await;
}

/// Waits until the engine's footprint shows what `holds` looks for (`what`, for the failure).
pub(crate) async fn until_footprint(h: &Hub, what: &str, holds: impl Fn(&clutch_core::view::Footprint) -> bool) {
    tokio::time::timeout(GUARD, async {
        while !holds(&h.core().engine.footprint()) {
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    })
    .await
    .unwrap_or_else(|_| panic!("never {what}: {:?}", h.core().engine.footprint()));
}

/// Waits until the engine holds `tombstones` tombstones.
async fn until_tombstones(h: &Hub, tombstones: u64) {
    until_footprint(h, &format!("{tombstones} tombstones"), |f| f.tombstones == tombstones).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ended_tasks_leave_memory_and_are_still_read_refused_and_deduplicated() {
    let retention = Options { ended_retention: Duration::from_millis(300), ..fast() };
    let mut h = hub(retention.clone()).await;
    h.register("w", json!({"capabilities": [{"id": "skill:x"}], "limits": {"max_concurrency": 4}})).await;
    let done = new_task();
    // A second task of the same run, still at work when the first leaves memory.
    let working = Task { task: id::generate(Kind::Task), ..new_task() };
    let working = Task { run: done.run.clone(), thread: done.thread.clone(), ..working };
    for t in [&done, &working] {
        h.send(t.request(&["skill:x"])).await.unwrap();
        h.wait(&t.task, 0, |v| delivered_to(v).is_some()).await;
        h.send(t.msg("agent:w", "task.accept", json!({}))).await.unwrap();
    }
    h.send(done.msg("agent:w", "task.progress", json!({"percent": 40, "usage": {"tokens": 70}}))).await.unwrap();
    let mut result = done.msg("agent:w", "task.result", json!({"usage": {"tokens": 50, "cost_usd": 0.5}}));
    result["id"] = json!(id::generate(Kind::Message));
    let stored = seq(h.send(result.clone()).await.unwrap());
    let engine = h.core().engine.clone();
    let task_before = engine.task(&done.task).unwrap();
    let run_before = engine.run_tasks(&done.run).unwrap();
    assert_eq!(engine.footprint().ended_in_memory, 1, "within its retention an ended task stays");

    until_tombstones(&h, 1).await;
    let footprint = engine.footprint();
    assert_eq!((footprint.tasks, footprint.ended_in_memory, footprint.runs), (1, 0, 1), "{footprint:?}");
    assert!(engine.task(&done.task).is_none(), "the ended task left memory");
    // Every read answers as before, from the log.
    assert_eq!(engine.find_task(&done.task).await.unwrap().unwrap(), task_before);
    assert_eq!(engine.find_run_tasks(&done.run).await.unwrap().unwrap(), run_before);
    assert_eq!(engine.task_end(&done.task).await.unwrap().unwrap().seq, stored);
    // A late lifecycle message is refused; a retry of a stored one is a duplicate.
    let late = || done.msg("agent:w", "task.progress", json!({}));
    assert_eq!(code(h.send(late()).await.unwrap_err()), "INVALID_TRANSITION");
    assert_eq!(code(h.send(done.request(&["skill:x"])).await.unwrap_err()), "INVALID_TRANSITION");
    let duplicate = |a: Ack| matches!(a, Ack::Stored(o) if o.duplicate && o.seq == stored);
    assert!(duplicate(h.send(result.clone()).await.unwrap()));

    // After a restart (from the snapshot, without tombstones, and none kept at all) the log says.
    h.restart(Options { tombstones: 0, ..retention.clone() }).await;
    assert!(h.core().engine.loaded_snapshot_seq() > 0);
    assert_eq!(h.core().engine.footprint().tombstones, 0);
    assert_eq!(code(h.send(late()).await.unwrap_err()), "INVALID_TRANSITION");
    assert!(duplicate(h.send(result.clone()).await.unwrap()));
    assert_eq!(h.core().engine.find_task(&done.task).await.unwrap().unwrap(), task_before);

    // A rebuild from the whole log lets ended work leave as it goes.
    h.restart(Options { queue_timeout: Duration::from_secs(301), ..retention }).await;
    assert_eq!(h.core().engine.loaded_snapshot_seq(), 0);
    let footprint = h.core().engine.footprint();
    assert_eq!((footprint.tasks, footprint.tombstones), (1, 1), "{footprint:?}");
    assert_eq!(h.core().engine.find_run_tasks(&done.run).await.unwrap().unwrap(), run_before);
    // The task at work is untouched: it still ends as usual.
    h.send(working.msg("agent:w", "task.result", json!({}))).await.unwrap();
    until_tombstones(&h, 2).await;
    let run = h.core().engine.find_run_tasks(&done.run).await.unwrap().unwrap();
    assert_eq!(run.counts, BTreeMap::from([(TaskState::Completed, 2)]));
    assert_eq!(h.core().engine.footprint().runs, 0, "a run leaves with its last task");
    let gone = h.core().engine.find_run_tasks(&done.run).await.unwrap().unwrap();
    assert_eq!(gone.usage.unwrap().tokens, 120);
    h.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_restart_gives_every_agent_a_grace_period_before_it_goes_stale() {
    let clock = clutch_core::clock::Clock::manual(SystemTime::now());
    let stale = Duration::from_secs(30);
    let options = Options { clock: clock.clone(), stale_after: stale, offline_after: stale * 3, ..fast() };
    let mut h = hub(options.clone()).await;
    h.register("a", json!({"capabilities": [{"id": "skill:x"}]})).await;
    h.core().engine.heartbeat("agent:a").await.unwrap();
    // The daemon is down far longer than the agent may be silent.
    h.core.take().unwrap().stop().await.unwrap();
    clock.advance(stale * 10);
    h.core = Some(open(h.dir.path(), options).await);
    let status = |h: &Hub| h.core().engine.agent("agent:a").unwrap().status;
    clock.advance(stale / 2);
    tokio::time::sleep(Duration::from_millis(100)).await;
    assert_eq!(status(&h), Status::Online, "silent only because the daemon was down: not stale");
    // Past the grace period, silence counts as usual.
    clock.advance(stale);
    tokio::time::timeout(GUARD, async {
        while status(&h) != Status::Stale {
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    })
    .await
    .expect("silence past the grace period never made the agent stale");
    h.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_operators_declared_agent_completes_and_bounds_its_card() {
    let org = "agents:\n  agent:w:\n    display: Worker\n    capabilities: [{id: skill:x, version: 2.0.0}]\n    \
               limits: {max_concurrency: 1}\n";
    let h = hub(Options { policy: policy(org, "workflows: []\n"), ..fast() }).await;
    // The card names no capability, and asks for more at once than the operator allows.
    h.register("w", json!({"limits": {"max_concurrency": 8, "max_runtime_sec": 60}})).await;
    let agent = h.core().engine.agent("agent:w").unwrap();
    assert_eq!(agent.card.display.as_ref().map(|d| d.name.as_str()), Some("Worker"));
    assert_eq!(agent.card.capabilities.len(), 1);
    assert_eq!(agent.load, Load { in_flight: 0, max_concurrency: Some(1) });
    assert_eq!(
        agent.card.limits.as_ref().and_then(|l| l.max_runtime_sec),
        Some(60),
        "the card's own where none is declared"
    );
    // The router takes the declared capability: the task goes to it, a second one waits.
    let (first, second) = (new_task(), new_task());
    h.send(first.request(&["skill:x@^2"])).await.unwrap();
    h.wait(&first.task, 0, |v| delivered_to(v) == Some("agent:w")).await;
    h.send(second.request(&["skill:x"])).await.unwrap();
    let queued = h.wait(&second.task, 0, |v| kind(v) == "routing.failure").await;
    assert_eq!(queued["payload"]["queued"], true, "{queued}");
    h.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn replies_and_cancels_about_work_that_left_memory_say_it_ended() {
    let h = hub(Options { ended_max: 0, ..fast() }).await;
    h.register("w", json!({"capabilities": [{"id": "skill:x"}]})).await;
    let t = new_task();
    h.send(t.request(&["skill:x"])).await.unwrap();
    h.wait(&t.task, 0, |v| delivered_to(v).is_some()).await;
    h.send(t.msg("agent:w", "task.result", json!({}))).await.unwrap();
    until_tombstones(&h, 1).await;
    let engine = &h.core().engine;
    let reply = clutch_core::inbox::Reply {
        status: clutch_core::inbox::Status::Completed,
        text: Some("again".into()),
        result: None,
        error: None,
        retryable: false,
    };
    for refused in [
        engine.task_reply("agent:w", &t.task, reply).await.unwrap_err(),
        engine.task_cancel("user:ada", &t.task, "too late").await.unwrap_err(),
    ] {
        let clutch_core::Error::Refused(r) = refused else { panic!("not refused: {refused:?}") };
        assert_eq!(r.code.as_str(), "INVALID_TRANSITION");
        assert!(r.message.contains("has ended (completed)"), "{}", r.message);
    }
    let unknown = engine.task_cancel("user:ada", &id::generate(Kind::Task), "never was").await.unwrap_err();
    assert_eq!(code(unknown), "TASK_NOT_FOUND");
    h.stop().await;
}

/// The wire lines of run `run`'s events, as the log holds them now.
async fn run_lines(h: &Hub, run: &str) -> Vec<String> {
    let filter = Filter { run_id: Some(run.to_owned()), ..Filter::default() };
    h.core().log.read(&filter, 0, 10_000).await.unwrap().iter().map(|e| e.to_wire()).collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn retention_archives_and_removes_ended_runs_and_leaves_work_in_flight() {
    let clock = clutch_core::clock::Clock::manual(SystemTime::now());
    let archive = tempfile::tempdir().unwrap();
    let policy = clutch_core::retention::Options {
        after: Some(Duration::from_secs(86_400)),
        archive_dir: Some(archive.path().to_path_buf()),
        remove: true,
        chunk: 3,
        ..clutch_core::retention::Options::default()
    };
    let options = Options { clock: clock.clone(), retention: policy, ..fast() };
    let mut h = hub(options.clone()).await;
    h.register("w", json!({"capabilities": [{"id": "skill:x"}], "limits": {"max_concurrency": 4}})).await;
    // Run `done`: a task that ended, and a chat in its run. Run `busy`: a task still at work.
    let (done, busy) = (new_task(), new_task());
    for t in [&done, &busy] {
        h.send(t.request(&["skill:x"])).await.unwrap();
        h.wait(&t.task, 0, |v| delivered_to(v).is_some()).await;
        h.send(t.msg("agent:w", "task.accept", json!({}))).await.unwrap();
    }
    h.send(done.msg("agent:w", "task.result", json!({"text": "done"}))).await.unwrap();
    h.send(done.msg("user:ada", "chat.message", json!({"text": "thanks"}))).await.unwrap();
    let engine = h.core().engine.clone();
    let head = h.core().log.head().await.unwrap();

    // Within the age nothing goes.
    let report = clutch_core::retention::pass(&engine, false).await.unwrap();
    assert!(report.enabled && report.runs.is_empty() && report.in_flight.is_empty(), "{report:?}");

    clock.advance(Duration::from_secs(2 * 86_400));
    let before = run_lines(&h, &done.run).await;
    let busy_before = run_lines(&h, &busy.run).await;
    let plan = clutch_core::retention::pass(&engine, true).await.unwrap();
    assert!(plan.dry_run);
    assert_eq!(plan.runs.iter().map(|r| r.run_id.as_str()).collect::<Vec<_>>(), [done.run.as_str()], "{plan:?}");
    assert_eq!(plan.runs[0].events, before.len() as u64);
    assert_eq!(plan.in_flight, std::slice::from_ref(&busy.run), "the run at work is left alone");
    assert_eq!(run_lines(&h, &done.run).await, before, "a dry run changes nothing");
    assert!(std::fs::read_dir(archive.path()).unwrap().next().is_none(), "a dry run writes no archive");

    let report = clutch_core::retention::pass(&engine, false).await.unwrap();
    assert_eq!((report.runs_total, report.events_total), (1, before.len() as u64), "{report:?}");
    let gone = &report.runs[0];
    assert!(gone.removed && gone.workflow.is_none());
    // The archive holds the run's events exactly as the log held them.
    let mut archived = Vec::new();
    let path = std::path::PathBuf::from(gone.archive.as_deref().unwrap());
    clutch_core::retention::read_archive(&path, |l| {
        archived.push(l.to_owned());
        Ok(())
    })
    .unwrap();
    assert_eq!(archived, before);
    assert!(run_lines(&h, &done.run).await.is_empty(), "the run left the log");
    assert_eq!(run_lines(&h, &busy.run).await, busy_before, "work in flight is untouched");
    assert!(h.core().log.head().await.unwrap() >= head, "seq never goes back");
    assert!(engine.agent("agent:w").is_some(), "the agent's registration run is kept");
    // A second pass finds nothing new to do.
    let again = clutch_core::retention::pass(&engine, false).await.unwrap();
    assert_eq!((again.runs_total, again.in_flight.clone()), (0, vec![busy.run.clone()]), "{again:?}");

    // Once its task ends, the other run goes too: its note survives a restart.
    h.send(busy.msg("agent:w", "task.result", json!({"text": "done"}))).await.unwrap();
    h.restart(options.clone()).await;
    clock.advance(Duration::from_secs(2 * 86_400));
    let engine = h.core().engine.clone();
    let report = clutch_core::retention::pass(&engine, false).await.unwrap();
    assert_eq!(report.runs.iter().map(|r| r.run_id.as_str()).collect::<Vec<_>>(), [busy.run.as_str()], "{report:?}");
    assert!(report.in_flight.is_empty());
    assert!(run_lines(&h, &busy.run).await.is_empty());
    // The log's dedup of what remains holds, and new work carries on after the highest seq.
    let next = new_task();
    let stored = seq(h.send(next.msg("user:ada", "chat.message", json!({"text": "hi"}))).await.unwrap());
    assert!(stored > head, "{stored} after {head}");
    h.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_removal_a_crash_interrupted_is_finished_by_the_next_pass() {
    let clock = clutch_core::clock::Clock::manual(SystemTime::now());
    let policy = clutch_core::retention::Options {
        after: Some(Duration::from_secs(86_400)),
        archive_dir: None,
        ..clutch_core::retention::Options::default()
    };
    let options = Options { clock: clock.clone(), retention: policy, ..fast() };
    let mut h = hub(options.clone()).await;
    let (gone, kept) = (new_task(), new_task());
    for i in 0..5 {
        h.send(gone.msg("user:ada", "chat.message", json!({"text": format!("old {i}")}))).await.unwrap();
    }
    h.send(kept.msg("user:ada", "chat.message", json!({"text": "kept"}))).await.unwrap();
    let log = h.core().log.clone();
    let upto = log.head().await.unwrap();
    // What a crash after the first chunk leaves: the note that removal began, and the run's newest events.
    log.put_record("retention", &format!("pruning/{}", gone.run), bytes::Bytes::from(upto.to_string())).await.unwrap();
    assert_eq!(log.remove_run(&gone.run, upto, 2).await.unwrap(), 2);
    h.restart(options.clone()).await;
    assert_eq!(run_lines(&h, &gone.run).await.len(), 3, "the store is as the crash left it: the newest events");
    // Before its age, the next pass still finishes what was begun, and touches nothing else.
    let report = clutch_core::retention::pass(&h.core().engine, false).await.unwrap();
    assert!(report.runs.is_empty(), "{report:?}");
    assert!(run_lines(&h, &gone.run).await.is_empty(), "the interrupted removal is finished");
    assert_eq!(run_lines(&h, &kept.run).await.len(), 1);
    assert!(h.core().log.records("retention").await.unwrap().is_empty(), "its note is gone");
    h.stop().await;
}
