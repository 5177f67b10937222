//! The engine's rules on `engine::Machine`, at a manual clock: what the reactor emits, in order, and
//! the state it leaves, checked without a store, a subscription or a sleep. Each expectation is the
//! emitted messages written one a line (`type from -> to #attempt code`).

use std::time::{Duration, SystemTime};

use clutch_core::clock::Clock;
use clutch_core::engine::{Machine, Options};
use clutch_core::registry::Status;
use clutch_core::view::TaskState;
use clutch_proto::id::{self, Kind};
use clutch_proto::validate::{self, Defaults};
use clutch_proto::{Message, MessageType};
use serde_json::{Value, json};

struct Bench {
    machine: Machine,
    clock: Clock,
}

fn bench(options: Options) -> Bench {
    let clock = Clock::manual(SystemTime::now());
    Bench { machine: Machine::new(Options { clock: clock.clone(), ..options }), clock }
}

impl Bench {
    fn agent(&mut self, name: &str, card: Value) {
        let mut card = card;
        card["agent_id"] = json!(format!("agent:{name}"));
        self.machine.register(&validate::agent_card(&card).unwrap()).unwrap();
    }

    fn send(&mut self, value: Value) -> Result<u64, clutch_proto::error::ErrorBody> {
        let m = validate::message(&value, &Defaults { now: SystemTime::now() }).unwrap();
        self.machine.submit(m)
    }

    /// Moves the clock, then lets the reactor act: what it emitted, one line each.
    fn after(&mut self, ms: u64) -> Vec<String> {
        self.clock.advance(Duration::from_millis(ms));
        self.machine.react().iter().map(line).collect()
    }
}

fn line(m: &Message) -> String {
    let to: Vec<&str> = m.to.iter().map(|r| r.agent_id.as_str()).collect();
    let mut out = format!("{} {} -> {}", m.kind.as_str(), m.from.agent_id, to.join(","));
    if m.kind == MessageType::TaskRequest {
        out.push_str(&format!(" #{}", m.attempt));
    }
    if let Some(code) = m.payload.get("code").and_then(Value::as_str) {
        out.push_str(&format!(" {code}"));
    }
    if let Some(status) = m.payload.get("status").and_then(Value::as_str) {
        out.push_str(&format!(" {status}"));
    }
    out
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
    fn msg(&self, from: &str, kind: &str) -> Value {
        json!({
            "thread_id": self.thread, "run_id": self.run, "task_id": self.task,
            "from": {"agent_id": from}, "to": [], "type": kind, "payload": {},
        })
    }

    fn request(&self, requires: &[&str]) -> Value {
        let mut m = self.msg("user:ada", "task.request");
        m["to"] = json!([{"agent_id": "agent:orchestrator"}]);
        m["requires"] = json!(requires);
        m
    }
}

#[test]
fn an_unaccepted_task_is_delivered_three_times_then_fails() {
    let mut b = bench(Options { accept_timeout: Duration::from_millis(150), max_deliveries: 3, ..Options::default() });
    b.agent("slow", json!({"capabilities": [{"id": "skill:x"}]}));
    let t = new_task();
    b.send(t.request(&["skill:x"])).unwrap();
    assert_eq!(
        b.after(0),
        ["routing.decision agent:orchestrator -> ", "task.request agent:orchestrator -> agent:slow #1"]
    );
    assert_eq!(b.after(149), Vec::<String>::new(), "not before the accept timeout");
    assert_eq!(b.after(1), ["task.request agent:orchestrator -> agent:slow #2"]);
    assert_eq!(b.after(150), ["task.request agent:orchestrator -> agent:slow #3"]);
    assert_eq!(b.after(150), ["task.error agent:orchestrator -> agent:slow,user:ada DELIVERY_FAILED"]);
    assert_eq!(b.machine.task(&t.task).unwrap().state, TaskState::Failed);
    let late = b.send(t.msg("agent:slow", "task.accept")).unwrap_err();
    assert_eq!(late.code.as_str(), "INVALID_TRANSITION");
    assert_eq!(b.after(10_000), Vec::<String>::new(), "an ended task has no timer");
}

#[test]
fn an_accept_after_a_redelivery_stops_the_deliveries() {
    let mut b = bench(Options { accept_timeout: Duration::from_millis(150), ..Options::default() });
    b.agent("slow", json!({"capabilities": [{"id": "skill:x"}]}));
    let t = new_task();
    b.send(t.request(&["skill:x"])).unwrap();
    b.after(0);
    assert_eq!(b.after(150), ["task.request agent:orchestrator -> agent:slow #2"]);
    b.send(t.msg("agent:slow", "task.accept")).unwrap();
    assert_eq!(b.machine.task(&t.task).unwrap().state, TaskState::Accepted);
    assert_eq!(b.after(10_000), Vec::<String>::new());
    b.send(t.msg("agent:slow", "task.result")).unwrap();
    let task = b.machine.task(&t.task).unwrap();
    assert_eq!((task.state, task.attempt), (TaskState::Completed, 2));
}

#[test]
fn a_silent_agent_goes_stale_then_offline_and_its_task_moves_to_a_live_one() {
    let options = Options {
        stale_after: Duration::from_millis(200),
        offline_after: Duration::from_millis(400),
        retry_backoff: Duration::ZERO,
        ..Options::default()
    };
    let mut b = bench(options);
    b.agent("quiet", json!({"capabilities": [{"id": "skill:x"}]}));
    let t = new_task();
    b.send(t.request(&["skill:x"])).unwrap();
    b.after(0);
    b.send(t.msg("agent:quiet", "task.accept")).unwrap();
    b.agent("alive", json!({"capabilities": [{"id": "skill:x"}]}));
    let mut emitted = Vec::new();
    for _ in 0..12 {
        assert_eq!(b.machine.heartbeat("agent:alive"), None);
        emitted.extend(b.after(50));
    }
    assert_eq!(
        emitted,
        [
            "agent.update agent:orchestrator ->  stale",
            "agent.update agent:orchestrator ->  offline",
            "task.error agent:orchestrator -> agent:quiet,user:ada AGENT_UNAVAILABLE",
            // The notice that it will be routed again: the lists read `retrying` from it.
            "chat.system agent:orchestrator -> user:ada AGENT_UNAVAILABLE",
            "routing.decision agent:orchestrator -> ",
            "task.request agent:orchestrator -> agent:alive #2",
        ]
    );
    assert_eq!(b.machine.agent("agent:quiet").unwrap().status, Status::Offline);
    assert_eq!(b.machine.agent("agent:alive").unwrap().status, Status::Online);
    assert_eq!(b.machine.task(&t.task).unwrap().agent.as_deref(), Some("agent:alive"));
    // A heartbeat brings it back, as an event.
    let back = b.machine.heartbeat("agent:quiet").map(|m| line(&m));
    assert_eq!(back.as_deref(), Some("agent.update agent:orchestrator ->  online"));
    assert_eq!(b.machine.agent("agent:quiet").unwrap().status, Status::Online);
    assert_eq!(b.machine.heartbeat("agent:quiet"), None, "online already: nothing to record");
}

#[test]
fn a_freed_slot_wakes_only_the_queued_tasks_its_agent_could_take() {
    let mut b = bench(Options::default());
    b.agent("x", json!({"capabilities": [{"id": "skill:x"}], "limits": {"max_concurrency": 1}}));
    b.agent("y", json!({"capabilities": [{"id": "skill:y"}], "limits": {"max_concurrency": 1}}));
    // Each agent busy with one task; 20 more wait for x, one more for y.
    let (busy_x, busy_y) = (new_task(), new_task());
    b.send(busy_x.request(&["skill:x"])).unwrap();
    b.send(busy_y.request(&["skill:y"])).unwrap();
    b.after(0);
    let for_x: Vec<Task> = (0..20).map(|_| new_task()).collect();
    for t in &for_x {
        b.send(t.request(&["skill:x"])).unwrap();
    }
    let for_y = new_task();
    b.send(for_y.request(&["skill:y"])).unwrap();
    let queued = b.after(0);
    assert_eq!(queued.iter().filter(|l| l.starts_with("routing.failure")).count(), 21, "{queued:?}");
    let before = b.machine.woken();

    // y frees its slot: only y's queued task is routed again, not x's twenty.
    b.send(busy_y.msg("agent:y", "task.accept")).unwrap();
    b.send(busy_y.msg("agent:y", "task.result")).unwrap();
    assert_eq!(
        b.after(0),
        ["routing.decision agent:orchestrator -> ", "task.request agent:orchestrator -> agent:y #1"]
    );
    assert_eq!(b.machine.woken() - before, 1);
    assert_eq!(b.machine.task(&for_y.task).unwrap().state, TaskState::Routed);
    // x frees its slot: one of its twenty is routed; all twenty were worth a look.
    b.send(busy_x.msg("agent:x", "task.accept")).unwrap();
    b.send(busy_x.msg("agent:x", "task.result")).unwrap();
    let routed = b.after(0);
    assert_eq!(routed.iter().filter(|l| l.starts_with("task.request")).count(), 1, "{routed:?}");
    assert_eq!(b.machine.woken() - before, 21);
}
