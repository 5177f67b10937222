//! LLM agents in a daemon built as `clutch serve` builds it, calling the fake provider: routed tasks
//! answered, tools called through the log, budgets, cancel, and a restart mid-task that reads the
//! recorded answers back instead of buying them again.

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, SystemTime};

use clutch_app::{App, face};
use clutch_core::view::ServerState;
use clutch_core::{Engine, Handle};
use clutch_proto::card::AgentCard;
use clutch_proto::id::{self, Kind as IdKind};
use clutch_proto::validate::{self, Defaults};
use clutch_proto::{Message, MessageType};
use clutch_runtime::agent::{self, Budget};
use clutch_runtime::fake::{Fake, Options, Reply};
use clutch_runtime::provider::{self, Kind};
use clutch_store::Filter;
use serde_json::{Value, json};

const WAIT: Duration = Duration::from_secs(30);

fn provider(fake: &Fake, kind: Kind) -> provider::Config {
    provider::Config {
        name: "fake".into(),
        kind,
        base_url: Some(match kind {
            Kind::Anthropic => fake.url.clone(),
            Kind::Openai => format!("{}/v1", fake.url),
        }),
        api_key_env: None,
        model: "fake-model-1".into(),
        max_tokens: 200,
        temperature: None,
        stream: true,
        timeout_ms: 20_000,
        idle_timeout_ms: 20_000,
        max_retries: 2,
        retry_base_ms: 20,
        requests_per_minute: None,
        tokens_per_minute: None,
        prices: [("fake-model-1".to_owned(), provider::Price { input: 3.0, output: 15.0, ..Default::default() })]
            .into(),
    }
}

fn summariser() -> agent::Config {
    agent::Config {
        name: "summariser".into(),
        provider: "fake".into(),
        model: None,
        description: Some("summarises text".into()),
        system: "You summarise text in one sentence.".into(),
        capabilities: vec!["skill:summarise".into()],
        tools: vec![],
        max_turns: 5,
        max_concurrency: 4,
        task_timeout_ms: 60_000,
        max_tokens: None,
        temperature: None,
        budget: None,
        task_budget: None,
    }
}

fn everything() -> PathBuf {
    let bin = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../node_modules/.bin/mcp-server-everything");
    assert!(bin.exists(), "{} is missing: the test command installs it (npm ci)", bin.display());
    bin
}

struct Daemon {
    log: Handle,
    engine: Engine,
    app: App,
}

async fn start(
    dir: &std::path::Path,
    providers: Vec<provider::Config>,
    agents: Vec<agent::Config>,
    servers: bool,
) -> Daemon {
    start_with(dir, providers, agents, servers, clutch_core::engine::Options::default()).await
}

async fn start_with(
    dir: &std::path::Path,
    providers: Vec<provider::Config>,
    agents: Vec<agent::Config>,
    servers: bool,
    engine: clutch_core::engine::Options,
) -> Daemon {
    let store = clutch_store_sqlite::Store::open(dir).unwrap();
    let runtime = clutch_runtime::Runtime::new(providers, agents).unwrap();
    let mut builder = App::builder(Arc::new(store)).engine(engine).face(face::Runtime::new(runtime));
    if servers {
        let server = clutch_tools::ServerConfig {
            name: "everything".into(),
            command: Some(everything().display().to_string()),
            args: vec!["stdio".into()],
            env: Default::default(),
            url: None,
            headers: Default::default(),
            connect_timeout_ms: 20_000,
            call_timeout_ms: 20_000,
        };
        builder = builder.face(face::Tools { servers: vec![server], ..Default::default() });
    }
    let app = builder.build().await.unwrap();
    let d = Daemon { log: app.log.clone(), engine: app.engine.clone(), app };
    if servers {
        d.until("the MCP server is ready", || {
            let tools = d.engine.adapters().tools();
            tools.servers.iter().all(|s| s.state == ServerState::Ready).then_some(())
        })
        .await;
    }
    d
}

impl Daemon {
    /// Polls `check` until it gives something.
    async fn until<T>(&self, what: &str, mut check: impl FnMut() -> Option<T>) -> T {
        let deadline = tokio::time::Instant::now() + WAIT;
        loop {
            if let Some(v) = check() {
                return v;
            }
            assert!(tokio::time::Instant::now() < deadline, "waited too long for {what}");
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }

    /// A task for whoever offers `skill`; returns its id.
    async fn ask(&self, skill: &str, text: &str) -> String {
        let task = id::generate(IdKind::Task);
        let m = json!({
            "run_id": id::generate(IdKind::Run), "thread_id": id::generate(IdKind::Thread), "task_id": task,
            "from": {"agent_id": "agent:alice"}, "to": [{"agent_id": "agent:orchestrator"}], "type": "task.request",
            "requires": [skill], "payload": {"text": text},
        });
        let m = validate::message(&m, &Defaults { now: SystemTime::now() }).unwrap();
        assert!(self.engine.submit(vec![m]).await.unwrap().pop().unwrap().is_ok());
        task
    }

    /// Every message of the task's run.
    async fn run_of(&self, task: &str) -> Vec<Message> {
        let run = self.engine.task(task).unwrap().run_id;
        let events = self.log.read(&Filter { run_id: Some(run), ..Filter::default() }, 0, 100_000).await.unwrap();
        events.iter().map(|e| e.message().unwrap()).collect()
    }

    fn cards(&self) -> HashMap<String, AgentCard> {
        self.engine.agents().into_iter().map(|a| (a.agent_id.clone(), a.card)).collect()
    }

    async fn events(&self, task: &str) -> Vec<Value> {
        let events =
            self.log.read(&Filter { task_id: Some(task.to_owned()), ..Filter::default() }, 0, 10_000).await.unwrap();
        events.iter().map(|e| serde_json::to_value(e.message().unwrap()).unwrap()).collect()
    }

    /// The task's events once one of `kinds` is among them.
    async fn ended(&self, task: &str, kinds: &[&str]) -> Vec<Value> {
        self.events_until(task, |events| events.iter().any(|e| kinds.contains(&e["type"].as_str().unwrap_or("")))).await
    }

    /// The task's events once `done` says so.
    async fn events_until(&self, task: &str, done: impl Fn(&[Value]) -> bool) -> Vec<Value> {
        let deadline = tokio::time::Instant::now() + WAIT;
        loop {
            let events = self.events(task).await;
            if done(&events) {
                return events;
            }
            assert!(tokio::time::Instant::now() < deadline, "task {task} did not end: {events:#?}");
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }
}

fn of_type<'a>(events: &'a [Value], kind: &str, payload_type: Option<&str>) -> Vec<&'a Value> {
    events.iter().filter(|e| e["type"] == kind && e["payload_type"].as_str() == payload_type).collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_task_routed_by_skill_is_answered_by_an_llm_agent() {
    let fake = Fake::start(Options::script(|_, _| Reply::Text("A short summary.".into()))).await.unwrap();
    for kind in [Kind::Anthropic, Kind::Openai] {
        let dir = tempfile::tempdir().unwrap();
        let mut config = summariser();
        config.name = format!("summariser-{kind:?}").to_lowercase();
        let d = start(dir.path(), vec![provider(&fake, kind)], vec![config.clone()], false).await;
        let agent_id = config.agent_id();
        let card = d.until("the agent registers", || d.engine.agent(&agent_id)).await;
        assert_eq!(card.card.capabilities[0].id, "skill:summarise");
        assert_eq!(card.card.meta["llm"]["provider"], "fake");
        assert_eq!(agent::Config::from_card(&card.card).unwrap().unwrap(), config, "the card says all of the agent");

        let task = d.ask("skill:summarise", "Clutch is a control plane for teams of agents.").await;
        let events = d.ended(&task, &["task.result", "task.error"]).await;
        let result = of_type(&events, "task.result", None);
        assert_eq!(result.len(), 1, "{events:#?}");
        assert_eq!(result[0]["from"]["agent_id"], agent_id.as_str());
        assert_eq!(result[0]["payload"]["text"], "A short summary.");
        assert_eq!(result[0]["payload"]["turns"], 1);
        assert!(!of_type(&events, "routing.decision", None).is_empty());
        assert_eq!(of_type(&events, "task.accept", None).len(), 1);
        // The call recorded with its request and usage; the text streamed into the log.
        let calls = of_type(&events, "task.progress", Some("clutch.llm.call.v1"));
        assert_eq!(calls.len(), 1);
        let call = &calls[0]["payload"];
        assert_eq!(call["turn"], 1);
        assert!(call["request"]["system"].as_str().unwrap().contains("You summarise text"));
        assert_eq!(call["request"]["added"][0]["content"][0]["text"], "Clutch is a control plane for teams of agents.");
        assert_eq!(call["response"]["content"][0]["text"], "A short summary.");
        assert!(
            call["usage"]["input_tokens"].as_u64().unwrap() > 0 && call["usage"]["cost_usd"].as_f64().unwrap() > 0.0
        );
        // Answered at once: the record holds the text, and no streamed copy was written.
        assert!(of_type(&events, "task.progress", Some("clutch.llm.text.v1")).is_empty());
        // The engine accounted it against the agent.
        let agent = d.engine.agent(&agent_id).unwrap();
        assert!(agent.usage.tokens > 0 && agent.usage.cost_usd > 0.0 && agent.usage.requests == 1, "{:?}", agent.usage);
        let view = d.engine.task(&task).unwrap();
        assert_eq!(view.state, clutch_core::view::TaskState::Completed);
        d.app.stop().await.unwrap();
    }
    assert_eq!(fake.count(), 2);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tools_run_through_the_log_and_their_answers_go_back_to_the_model() {
    // Turn 1: emit progress and call echo; turn 2: call a tool that does not exist; turn 3: answer.
    let fake = Fake::start(Options::script(|body, n| {
        let last = body["messages"].as_array().and_then(|m| m.last()).cloned().unwrap_or_default();
        match n {
            1 => Reply::Tool {
                text: "Working.".into(),
                name: "emit".into(),
                input: json!({"message": "starting", "percent": 10}),
            },
            2 => Reply::Tool {
                text: String::new(),
                name: "everything__echo".into(),
                input: json!({"message": "hi there"}),
            },
            3 => {
                assert!(last.to_string().contains("Echo: hi there"), "the echo's answer went back: {last}");
                Reply::Tool { text: String::new(), name: "nope".into(), input: json!({}) }
            }
            _ => {
                assert!(last.to_string().contains("there is no tool named nope"), "{last}");
                Reply::Text("The server said: Echo: hi there".into())
            }
        }
    }))
    .await
    .unwrap();
    let dir = tempfile::tempdir().unwrap();
    let mut config = summariser();
    config.tools = vec!["mcp:everything/echo".into()];
    let d = start(dir.path(), vec![provider(&fake, Kind::Anthropic)], vec![config], true).await;
    d.until("the agent registers", || d.engine.agent("agent:summariser")).await;
    let task = d.ask("skill:summarise", "Echo hi there.").await;
    let events = d.ended(&task, &["task.result", "task.error"]).await;
    let result = of_type(&events, "task.result", None);
    assert_eq!(result.len(), 1, "{events:#?}");
    assert_eq!(result[0]["payload"]["text"], "The server said: Echo: hi there");
    assert_eq!(result[0]["payload"]["turns"], 4);
    // The tools offered: emit and the allowed echo, nothing else of the server's.
    let first = &fake.received()[0].body;
    let offered: Vec<&str> = first["tools"].as_array().unwrap().iter().map(|t| t["name"].as_str().unwrap()).collect();
    assert_eq!(offered, ["emit", "everything__echo"]);
    // emit became progress; echo a tool.call from the agent, answered by the daemon.
    let emitted: Vec<&Value> =
        events.iter().filter(|e| e["type"] == "task.progress" && e["payload"]["message"] == "starting").collect();
    assert_eq!(emitted.len(), 1);
    assert_eq!(emitted[0]["payload"]["percent"], 10.0);
    let calls = of_type(&events, "tool.call", None);
    assert_eq!(calls.len(), 1);
    assert_eq!(calls[0]["from"]["agent_id"], "agent:summariser");
    assert_eq!(calls[0]["payload"], json!({"tool": "mcp:everything/echo", "args": {"message": "hi there"}}));
    assert_eq!(of_type(&events, "tool.result", None)[0]["payload"]["call_id"], calls[0]["id"]);
    assert_eq!(fake.count(), 4);

    // Re-executed offline from the log and the card: the same messages, ids and times aside.
    let run: Vec<Message> = d.run_of(&task).await;
    let cards = d.cards();
    let outcomes = clutch_runtime::replay::reexecute(&run, &cards).await;
    assert_eq!(outcomes.len(), 1);
    assert_eq!(outcomes[0].difference, None, "{outcomes:?}");
    assert_eq!(outcomes[0].compared, 1 + 4 + 1 + 1 + 1, "accept, 4 calls, emit, the echo call, the result");
    // A tool that answered otherwise makes the loop send something else: the replay says where.
    let mut changed = run.clone();
    for m in &mut changed {
        if m.kind == MessageType::ToolResult {
            m.payload.insert("content".into(), json!([{"type": "text", "text": "Echo: something else"}]));
        }
    }
    let outcomes = clutch_runtime::replay::reexecute(&changed, &cards).await;
    let difference = outcomes[0].difference.clone().expect("a difference");
    assert!(difference.starts_with("message 6 differs") && difference.contains("something else"), "{difference}");
    d.app.stop().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_call_that_would_cross_the_budget_is_not_made() {
    let fake = Fake::start(Options::script(|_, _| Reply::Tool {
        text: String::new(),
        name: "emit".into(),
        input: json!({"message": "again"}),
    }))
    .await
    .unwrap();
    let dir = tempfile::tempdir().unwrap();
    let mut config = summariser();
    // The first call's estimate fits (about 200 input tokens + 200 max_tokens); the second's does not.
    config.task_budget = Some(Budget { tokens: Some(900), cost_usd: None });
    let d = start(dir.path(), vec![provider(&fake, Kind::Openai)], vec![config], false).await;
    d.until("the agent registers", || d.engine.agent("agent:summariser")).await;
    let task = d.ask("skill:summarise", "Keep going.").await;
    let events = d.ended(&task, &["task.result", "task.error"]).await;
    let error = of_type(&events, "task.error", None);
    assert_eq!(error.len(), 1, "{events:#?}");
    assert_eq!(error[0]["payload"]["code"], "BUDGET_EXCEEDED");
    assert_eq!(error[0]["payload"]["retryable"], false);
    assert!(
        error[0]["payload"]["message"].as_str().unwrap().contains("the task's token budget is 900"),
        "{}",
        error[0]
    );
    let made = of_type(&events, "task.progress", Some("clutch.llm.call.v1")).len();
    assert_eq!(fake.count(), made, "every call made was recorded, and the one over budget not made");
    assert!((1..=2).contains(&made), "{made}");
    d.app.stop().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cancel_stops_the_loop_and_the_call_in_flight() {
    let fake = Fake::start(Options::script(|_, _| {
        Reply::Slow(Duration::from_secs(20), Box::new(Reply::Text("too late".into())))
    }))
    .await
    .unwrap();
    let dir = tempfile::tempdir().unwrap();
    let d = start(dir.path(), vec![provider(&fake, Kind::Anthropic)], vec![summariser()], false).await;
    d.until("the agent registers", || d.engine.agent("agent:summariser")).await;
    let task = d.ask("skill:summarise", "Take your time.").await;
    d.until("the call is made", || (fake.count() == 1).then_some(())).await;
    let view = d.engine.task(&task).unwrap();
    let cancel = json!({
        "run_id": view.run_id, "thread_id": view.thread_id, "task_id": task,
        "from": {"agent_id": "agent:alice"}, "to": [{"agent_id": "agent:orchestrator"}], "type": "task.cancel", "payload": {},
    });
    let cancel = validate::message(&cancel, &Defaults { now: SystemTime::now() }).unwrap();
    assert!(d.engine.submit(vec![cancel]).await.unwrap().pop().unwrap().is_ok());
    d.until("the task is cancelled", || {
        (d.engine.task(&task)?.state == clutch_core::view::TaskState::Cancelled).then_some(())
    })
    .await;
    // Forwarded to the agent, whose loop stops: nothing more from it about the task.
    d.events_until(&task, |events| {
        events.iter().any(|e| e["type"] == "task.cancel" && e["to"][0]["agent_id"] == "agent:summariser")
    })
    .await;
    tokio::time::sleep(Duration::from_millis(500)).await;
    let events = d.events(&task).await;
    assert!(
        of_type(&events, "task.result", None).is_empty() && of_type(&events, "task.error", None).is_empty(),
        "{events:#?}"
    );
    assert_eq!(fake.count(), 1);
    d.app.stop().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_restart_mid_task_reads_recorded_answers_back_instead_of_buying_them_again() {
    // Call 1 asks for emit; call 2 (the first daemon) hangs until the daemon stops; call 3 (after the
    // restart, the same turn 2) answers.
    let fake = Fake::start(Options::script(|_, n| match n {
        1 => Reply::Tool { text: "Step one.".into(), name: "emit".into(), input: json!({"message": "one"}) },
        2 => Reply::Slow(Duration::from_secs(60), Box::new(Reply::Text("never seen".into()))),
        _ => Reply::Text("finished after the restart".into()),
    }))
    .await
    .unwrap();
    let dir = tempfile::tempdir().unwrap();
    let d = start(dir.path(), vec![provider(&fake, Kind::Anthropic)], vec![summariser()], false).await;
    d.until("the agent registers", || d.engine.agent("agent:summariser")).await;
    let task = d.ask("skill:summarise", "Two steps.").await;
    d.until("the second call is made", || (fake.count() == 2).then_some(())).await;
    d.app.stop().await.unwrap();

    let d = start(dir.path(), vec![provider(&fake, Kind::Anthropic)], vec![summariser()], false).await;
    let events = d.ended(&task, &["task.result", "task.error"]).await;
    let result = of_type(&events, "task.result", None);
    assert_eq!(result.len(), 1, "{events:#?}");
    assert_eq!(result[0]["payload"]["text"], "finished after the restart");
    assert_eq!(fake.count(), 3, "turn 1 was read back from the log, not asked again");
    // The third request is turn 2 again: the conversation rebuilt with turn 1's answer and emit's result.
    let third = &fake.received()[2].body;
    let messages = third["messages"].as_array().unwrap();
    assert_eq!(messages.len(), 3, "{third}");
    assert_eq!(messages[1]["content"][1]["name"], "emit");
    assert_eq!(messages[2]["content"][0]["type"], "tool_result");
    // emit ran once: its progress is stored once.
    let emitted = events.iter().filter(|e| e["type"] == "task.progress" && e["payload"]["message"] == "one").count();
    assert_eq!(emitted, 1);
    let calls = of_type(&events, "task.progress", Some("clutch.llm.call.v1"));
    assert_eq!(calls.len(), 2);
    // The run, cut by the restart, re-executes as one: the same messages in the same order.
    let outcomes = clutch_runtime::replay::reexecute(&d.run_of(&task).await, &d.cards()).await;
    assert_eq!((outcomes.len(), outcomes[0].difference.as_deref()), (1, None), "{outcomes:?}");
    d.app.stop().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_slow_answer_streams_into_the_log_as_it_comes_coalesced() {
    // 16 pieces of text, 100 ms apart: about 2 s of generation.
    let text = "Thinking about it slowly, one piece at a time, until done.";
    let fake = Fake::start(Options::script(move |_, _| {
        Reply::Drip(Duration::from_millis(100), Box::new(Reply::Text(text.into())))
    }))
    .await
    .unwrap();
    let dir = tempfile::tempdir().unwrap();
    let d = start(dir.path(), vec![provider(&fake, Kind::Anthropic)], vec![summariser()], false).await;
    d.until("the agent registers", || d.engine.agent("agent:summariser")).await;
    let task = d.ask("skill:summarise", "Think.").await;
    let events = d.ended(&task, &["task.result"]).await;
    let parts = of_type(&events, "task.progress", Some("clutch.llm.text.v1"));
    assert!((2..=6).contains(&parts.len()), "coalesced every 500 ms, not one event per piece: {}", parts.len());
    let streamed: String = parts.iter().map(|e| e["payload"]["text"].as_str().unwrap().to_owned()).collect();
    assert_eq!(streamed, text, "the parts make the whole text");
    // The first part came before the answer was complete.
    let first = events.iter().position(|e| e["payload_type"] == "clutch.llm.text.v1").unwrap();
    let record = events.iter().position(|e| e["payload_type"] == "clutch.llm.call.v1").unwrap();
    assert!(first < record);
    d.app.stop().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_llm_agent_claims_and_completes_a_workflow_task_with_the_workflow_tools() {
    use clutch_core::workflow::api;
    // The model: find the ready tasks, claim the first, complete it, then answer.
    let fake = Fake::start(Options::script(|body, n| {
        let last = body["messages"].as_array().and_then(|m| m.last()).cloned().unwrap_or_default();
        let result: Value = last["content"][0]["content"].as_str().and_then(|t| serde_json::from_str(t).ok()).unwrap_or_default();
        let workflow = body.to_string().split("workflow ").nth(1).map(|s| s[..30].to_owned()).unwrap_or_default();
        // The planned task's id, from the answer to workflow_next_tasks (the third message).
        let ready: Value = body["messages"][2]["content"][0]["content"].as_str().and_then(|t| serde_json::from_str(t).ok()).unwrap_or_default();
        match n {
            1 => Reply::Tool { text: String::new(), name: "workflow_next_tasks".into(), input: json!({"workflow_id": workflow}) },
            2 => Reply::Tool { text: String::new(), name: "task_claim".into(), input: json!({"task_id": result["tasks"][0]["id"]}) },
            3 => Reply::Tool {
                text: String::new(),
                name: "task_update_status".into(),
                input: json!({"id": ready["tasks"][0]["id"], "status": "completed", "outcome": "written", "agent_id": "agent:someone-else"}),
            },
            _ => Reply::Text(format!("done: {}", result["status"])),
        }
    }))
    .await
    .unwrap();
    let dir = tempfile::tempdir().unwrap();
    let mut config = summariser();
    config.tools = vec!["clutch:workflow".into()];
    let d = start(dir.path(), vec![provider(&fake, Kind::Anthropic)], vec![config], false).await;
    d.until("the agent registers", || d.engine.agent("agent:summariser")).await;
    let workflow = d
        .engine
        .workflow_create(api::CreateWorkflow {
            name: "docs".into(),
            agent_id: Some("agent:alice".into()),
            ..Default::default()
        })
        .await
        .unwrap();
    d.engine
        .workflow_set_plan(api::SetPlan {
            workflow_id: workflow.id.clone(),
            tasks: vec![api::PlanTask {
                name: "write".into(),
                description: "Write the docs".into(),
                ..Default::default()
            }],
            agent_id: Some("agent:alice".into()),
            ..Default::default()
        })
        .await
        .unwrap();
    let task = d.ask("skill:summarise", &format!("Work the ready tasks of workflow {}.", workflow.id)).await;
    let events = d.ended(&task, &["task.result", "task.error"]).await;
    let result = of_type(&events, "task.result", None);
    assert_eq!(result.len(), 1, "{events:#?}");
    let tools = of_type(&events, "task.progress", Some("clutch.llm.tool.v1"));
    assert_eq!(result[0]["payload"]["text"], "done: \"completed\"", "{tools:#?}");
    // The workflow's task was claimed and completed by the agent itself (not whom the model named).
    let ready: Value = serde_json::from_str(tools[0]["payload"]["answer"].as_str().unwrap()).unwrap();
    let planned = d.engine.task_detail(ready["tasks"][0]["id"].as_str().unwrap()).unwrap();
    assert_eq!(planned.summary.status, api::TaskStatus::Completed);
    assert_eq!(planned.summary.agent_id.as_deref(), Some("agent:summariser"));
    assert_eq!(tools.len(), 3, "each built-in answer recorded");
    assert_eq!(tools[2]["payload"]["tool"], "task_update_status");
    assert_eq!(tools[2]["payload"]["is_error"], false, "{}", tools[2]);
    let run: Vec<Message> = d.run_of(&task).await;
    let outcomes = clutch_runtime::replay::reexecute(&run, &d.cards()).await;
    assert_eq!(outcomes[0].difference, None, "{outcomes:?}");
    d.app.stop().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_call_that_would_cross_the_runs_budget_is_not_made() {
    let fake = Fake::start(Options::script(|_, _| Reply::Tool {
        text: String::new(),
        name: "emit".into(),
        input: json!({"message": "again"}),
    }))
    .await
    .unwrap();
    let dir = tempfile::tempdir().unwrap();
    let policy_dir = tempfile::tempdir().unwrap();
    std::fs::write(policy_dir.path().join("org.yaml"), "budgets:\n  run: {tokens: 900}\n").unwrap();
    let policy = Arc::new(clutch_core::config::Policy::load(policy_dir.path()).unwrap());
    let engine = clutch_core::engine::Options { policy, ..Default::default() };
    let d = start_with(dir.path(), vec![provider(&fake, Kind::Openai)], vec![summariser()], false, engine).await;
    d.until("the agent registers", || d.engine.agent("agent:summariser")).await;
    let task = d.ask("skill:summarise", "Keep going.").await;
    let events = d.ended(&task, &["task.result", "task.error"]).await;
    let error = of_type(&events, "task.error", None);
    assert_eq!(error.len(), 1, "{events:#?}");
    assert_eq!(error[0]["payload"]["code"], "BUDGET_EXCEEDED");
    let message = error[0]["payload"]["message"].as_str().unwrap();
    assert!(message.contains("'s token budget is 900") && message.starts_with("run run_"), "{message}");
    let made = of_type(&events, "task.progress", Some("clutch.llm.call.v1")).len();
    assert_eq!(fake.count(), made, "the call over the run's budget was not made");
    assert!(made >= 1, "{made}");
    d.app.stop().await.unwrap();
}

/// A task whose request carries an `output_schema` is answered in structure: through the `answer`
/// tool (offered with the schema as its input), or a text that is that JSON; a misfit is asked for
/// once more with the tool required, and a second misfit ends the task with its text alone and why
/// (`structured_error`), never with a guess.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_task_with_an_output_schema_is_answered_in_structure_or_says_why_not() {
    let schema = json!({
        "type": "object", "required": ["verdict"], "additionalProperties": false,
        "properties": {"verdict": {"enum": ["CONSENSUS", "DISCREPANCY"]}},
    });
    let fake = Fake::start(Options::script(|body, _| {
        let text = body.to_string();
        let asked_again = text.contains("could not be read");
        if text.contains("by tool") {
            Reply::Tool { text: "Agreed.".into(), name: "answer".into(), input: json!({"verdict": "CONSENSUS"}) }
        } else if text.contains("by text") {
            Reply::Text("Here it is:\n```json\n{\"verdict\": \"DISCREPANCY\"}\n```".into())
        } else if asked_again {
            Reply::Tool { text: String::new(), name: "answer".into(), input: json!({"verdict": "MAYBE"}) }
        } else {
            Reply::Text("There is no CONSENSUS here; I see a DISCREPANCY on the lock too.".into())
        }
    }))
    .await
    .unwrap();
    for kind in [Kind::Anthropic, Kind::Openai] {
        let dir = tempfile::tempdir().unwrap();
        let d = start(dir.path(), vec![provider(&fake, kind)], vec![summariser()], false).await;
        d.until("the agent registers", || d.engine.agent("agent:summariser")).await;
        let ask = async |text: &str| {
            let task = id::generate(IdKind::Task);
            let m = json!({
                "run_id": id::generate(IdKind::Run), "thread_id": id::generate(IdKind::Thread), "task_id": task,
                "from": {"agent_id": "agent:alice"}, "to": [{"agent_id": "agent:orchestrator"}], "type": "task.request",
                "requires": ["skill:summarise"], "payload": {"text": text, "output_schema": schema},
            });
            let m = validate::message(&m, &Defaults { now: SystemTime::now() }).unwrap();
            assert!(d.engine.submit(vec![m]).await.unwrap().pop().unwrap().is_ok());
            let events = d.ended(&task, &["task.result", "task.error"]).await;
            of_type(&events, "task.result", None).first().map(|r| r["payload"].clone()).expect("a result")
        };
        let by_tool = ask("Compare, by tool").await;
        assert_eq!(
            (by_tool["structured"].clone(), by_tool["text"].clone()),
            (json!({"verdict": "CONSENSUS"}), json!("Agreed."))
        );
        let by_text = ask("Compare, by text").await;
        assert_eq!(by_text["structured"], json!({"verdict": "DISCREPANCY"}));
        let stubborn_text = format!("Compare, stubborn ({kind:?})");
        let stubborn = ask(&stubborn_text).await;
        assert!(stubborn.get("structured").is_none(), "a misfit is never guessed: {stubborn}");
        let why = stubborn["structured_error"].as_str().unwrap();
        assert!(why.contains("MAYBE") || why.contains("verdict"), "{why}");
        assert_eq!(stubborn["turns"], 2);
        // The answer tool carries the schema; the second call required it.
        let calls: Vec<Value> =
            fake.received().into_iter().map(|r| r.body).filter(|b| b.to_string().contains(&stubborn_text)).collect();
        let tools = calls[0]["tools"].as_array().unwrap();
        let answer = tools.iter().find(|t| t["name"] == "answer" || t["function"]["name"] == "answer").unwrap();
        let offered = if kind == Kind::Anthropic { &answer["input_schema"] } else { &answer["function"]["parameters"] };
        assert_eq!(offered, &schema);
        let required = if kind == Kind::Anthropic {
            json!({"type": "tool", "name": "answer"})
        } else {
            json!({"type": "function", "function": {"name": "answer"}})
        };
        assert_eq!(
            calls.iter().map(|c| c.get("tool_choice").cloned()).collect::<Vec<_>>(),
            [None, Some(required)],
            "{kind:?}"
        );
        d.app.stop().await.unwrap();
    }
}
