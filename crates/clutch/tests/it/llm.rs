//! Built-in LLM agents through the real binary: `clutch serve` with `[[providers]]` aimed at the
//! fake provider (started here; the key planted in an environment variable) and `[[llm_agents]]` in
//! clutch.toml. A routed task answered with an MCP tool (`server-everything`), the key on no
//! surface, a burst of tasks under the provider's rate, a budget that stops the next call, cancel,
//! `kill -9` mid-task and a restart that does not buy a recorded answer again, and a missing key.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use clutch_proto::id::{Kind, generate};
use clutch_runtime::fake::{Fake, Options, Reply};
use serde_json::{Value, json};

use crate::support::{DEADLINE, Daemon, all_events, clutch, post, run};

const KEY: &str = "sk-ant-planted-7f3c9e1d2b4a";
const KEY_VAR: &str = "CLUTCH_TEST_LLM_KEY";

fn everything() -> PathBuf {
    let bin = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../node_modules/.bin/mcp-server-everything");
    assert!(bin.exists(), "{} is missing: the test command installs it (npm ci)", bin.display());
    bin
}

/// clutch.toml: the fake as provider `fake` (`extra` lines added to it) and `agents`.
fn config(fake: &Fake, provider_extra: &str, agents: &str, with_tools: bool) -> String {
    let mut config = format!(
        "[[providers]]\nname = \"fake\"\nkind = \"anthropic\"\nbase_url = \"{}\"\napi_key_env = \"{KEY_VAR}\"\n\
         model = \"fake-model-1\"\nmax_tokens = 200\nretry_base_ms = 50\n{provider_extra}\n\
         [providers.prices.fake-model-1]\ninput = 3.0\noutput = 15.0\n\n{agents}\n",
        fake.url
    );
    if with_tools {
        config.push_str(&format!(
            "[[mcp_servers]]\nname = \"everything\"\ncommand = \"{}\"\nargs = [\"stdio\"]\n",
            everything().display()
        ));
    }
    config
}

fn agent(name: &str, extra: &str) -> String {
    format!(
        "[[llm_agents]]\nname = \"{name}\"\nprovider = \"fake\"\nsystem = \"You summarise text.\"\n\
         capabilities = [\"skill:summarise\"]\n{extra}\n"
    )
}

fn serve(dir: &Path, config: &str) -> Daemon {
    std::fs::write(dir.join("clutch.toml"), config).unwrap();
    let mut cmd = clutch();
    cmd.current_dir(dir).env(KEY_VAR, KEY).args(["serve", "--listen", "127.0.0.1:0", "--data-dir", "data"]);
    Daemon::spawn(cmd)
}

async fn ask(http: &reqwest::Client, url: &str, text: &str) -> String {
    let task = generate(Kind::Task);
    let request = json!({
        "run_id": generate(Kind::Run), "thread_id": generate(Kind::Thread), "task_id": task,
        "from": {"agent_id": "user:alice"}, "to": [{"agent_id": "agent:orchestrator"}], "type": "task.request",
        "requires": ["skill:summarise"], "payload": {"text": text},
    });
    let (status, body) = post(http, url, &request).await;
    assert_eq!(status, 201, "{body}");
    task
}

/// The task's view once its state is one of `states`.
async fn task_in(http: &reqwest::Client, url: &str, task: &str, states: &[&str]) -> Value {
    let deadline = Instant::now() + DEADLINE;
    loop {
        let response = http.get(format!("{url}/v1/tasks/{task}")).send().await.unwrap();
        if response.status() == 200 {
            let view: Value = response.json().await.unwrap();
            if states.contains(&view["state"].as_str().unwrap_or("")) {
                return view;
            }
            assert!(Instant::now() < deadline, "task {task} is still {}: {view:#}", view["state"]);
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

async fn until_agent(http: &reqwest::Client, url: &str, agent: &str) -> Value {
    let deadline = Instant::now() + DEADLINE;
    loop {
        let response = http.get(format!("{url}/v1/agents/{agent}")).send().await.unwrap();
        if response.status() == 200 {
            return response.json().await.unwrap();
        }
        assert!(Instant::now() < deadline, "{agent} did not register");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

fn of_task<'a>(events: &'a [Value], task: &str) -> Vec<&'a Value> {
    events.iter().filter(|e| e["task_id"] == task).collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_llm_agent_answers_a_routed_task_with_an_mcp_tool_and_its_key_shows_nowhere() {
    let fake = Fake::start(Options {
        key: Some(KEY.into()),
        ..Options::script(|body, _| {
            let last = body["messages"].as_array().and_then(|m| m.last()).cloned().unwrap_or_default();
            if last.to_string().contains("tool_result") {
                Reply::Text("Summary: the tool said Echo: hello".into())
            } else {
                Reply::Tool {
                    text: "Checking.".into(),
                    name: "everything__echo".into(),
                    input: json!({"message": "hello"}),
                }
            }
        })
    })
    .await
    .unwrap();
    let dir = tempfile::tempdir().unwrap();
    let config = config(&fake, "", &agent("summariser", "tools = [\"mcp:everything/echo\"]"), true);
    let daemon = serve(dir.path(), &config);
    let http = reqwest::Client::new();
    let card = until_agent(&http, &daemon.url, "agent:summariser").await;
    assert_eq!(card["card"]["capabilities"][0]["id"], "skill:summarise");
    // Tools are offered once the server is up.
    let deadline = Instant::now() + DEADLINE;
    loop {
        let tools: Value = http.get(format!("{}/v1/tools", daemon.url)).send().await.unwrap().json().await.unwrap();
        if tools["servers"][0]["state"] == "ready" {
            break;
        }
        assert!(Instant::now() < deadline, "{tools}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }

    let task = ask(&http, &daemon.url, "Say hello through the echo tool.").await;
    let view = task_in(&http, &daemon.url, &task, &["completed", "failed"]).await;
    assert_eq!(view["state"], "completed", "{view:#}");
    assert_eq!(view["agent"], "agent:summariser");
    let events = all_events(&http, &daemon.url).await;
    let events = of_task(&events, &task);
    let result = events.iter().find(|e| e["type"] == "task.result").unwrap();
    assert_eq!(result["payload"]["text"], "Summary: the tool said Echo: hello");
    let answer = events.iter().find(|e| e["type"] == "tool.result").unwrap();
    assert_eq!(answer["payload"]["content"][0]["text"], "Echo: hello");
    assert_eq!(answer["to"][0]["agent_id"], "agent:summariser");
    // Usage and cost per agent in the API.
    let agent = until_agent(&http, &daemon.url, "agent:summariser").await;
    assert!(
        agent["usage"]["tokens"].as_u64().unwrap() > 0 && agent["usage"]["cost_usd"].as_f64().unwrap() > 0.0,
        "{agent}"
    );
    assert_eq!(agent["usage"]["requests"], 2);
    // ... per task and per run: this agent's only task, in the only run, spent all of it.
    let view: Value = http.get(format!("{}/v1/tasks/{task}", daemon.url)).send().await.unwrap().json().await.unwrap();
    let tree: Value = http
        .get(format!("{}/v1/runs/{}/tasks", daemon.url, view["run_id"].as_str().unwrap()))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let spent = |u: &Value| (u["tokens"].clone(), u["cost_usd"].clone(), u["requests"].clone());
    assert_eq!(spent(&view["usage"]), spent(&agent["usage"]), "{view:#}");
    assert_eq!(spent(&tree["usage"]), spent(&agent["usage"]), "{tree:#}");
    assert_eq!(spent(&tree["tasks"][0]["usage"]), spent(&agent["usage"]), "{tree:#}");

    // The planted key: sent to the provider, and on no surface of ours.
    let all = all_events(&http, &daemon.url).await;
    assert!(!serde_json::to_string(&all).unwrap().contains(KEY), "the key is in the log");
    let dump = run(
        {
            let mut cmd = clutch();
            cmd.current_dir(dir.path()).env(KEY_VAR, KEY).args(["config", "dump"]);
            cmd
        },
        "",
    );
    assert!(dump.stdout.contains(KEY_VAR) && !dump.stdout.contains(KEY), "{}", dump.stdout);
    let (_, stderr) = daemon.terminate();
    assert!(!stderr.contains(KEY), "the key is in the daemon's log");
    assert_eq!(fake.count(), 2);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_burst_of_tasks_stays_under_the_providers_rate_and_all_finish() {
    let fake = Fake::start(Options {
        key: Some(KEY.into()),
        per_second: Some(10),
        ..Options::script(|_, _| Reply::Text("done".into()))
    })
    .await
    .unwrap();
    let dir = tempfile::tempdir().unwrap();
    let config = config(&fake, "requests_per_minute = 600", &agent("summariser", "max_concurrency = 50"), false);
    let daemon = serve(dir.path(), &config);
    let http = reqwest::Client::new();
    until_agent(&http, &daemon.url, "agent:summariser").await;
    let began = Instant::now();
    let mut tasks = Vec::new();
    for i in 0..50 {
        tasks.push(ask(&http, &daemon.url, &format!("task {i}")).await);
    }
    for task in &tasks {
        let view = task_in(&http, &daemon.url, task, &["completed", "failed"]).await;
        assert_eq!(view["state"], "completed", "{view:#}");
    }
    assert_eq!(fake.over_limit(), 0, "no request went past the provider's 10 per second");
    assert_eq!(fake.count(), 50);
    assert!(began.elapsed() >= Duration::from_millis(4900), "{:?}", began.elapsed());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_budget_stops_the_next_call_and_cancel_stops_the_loop() {
    let fake = Fake::start(Options {
        key: Some(KEY.into()),
        ..Options::script(|body, _| {
            let text = body.to_string();
            if text.contains("slowly") {
                Reply::Slow(Duration::from_secs(30), Box::new(Reply::Text("too late".into())))
            } else {
                Reply::Tool { text: String::new(), name: "emit".into(), input: json!({"message": "more"}) }
            }
        })
    })
    .await
    .unwrap();
    let dir = tempfile::tempdir().unwrap();
    let config = config(&fake, "", &agent("summariser", "task_budget = { tokens = 900 }"), false);
    let daemon = serve(dir.path(), &config);
    let http = reqwest::Client::new();
    until_agent(&http, &daemon.url, "agent:summariser").await;

    let task = ask(&http, &daemon.url, "Keep going.").await;
    let view = task_in(&http, &daemon.url, &task, &["completed", "failed"]).await;
    assert_eq!(view["state"], "failed", "{view:#}");
    assert_eq!(view["error"]["code"], "BUDGET_EXCEEDED", "{view:#}");
    let made = fake.count();
    let events = all_events(&http, &daemon.url).await;
    let recorded = of_task(&events, &task).iter().filter(|e| e["payload_type"] == "clutch.llm.call.v1").count();
    assert_eq!(made, recorded, "the call over budget was not made");

    let task = ask(&http, &daemon.url, "Take it slowly.").await;
    let deadline = Instant::now() + DEADLINE;
    while fake.count() == made {
        assert!(Instant::now() < deadline, "the slow call was not made");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let view = task_in(&http, &daemon.url, &task, &["accepted", "in_progress", "running"]).await;
    let cancel = json!({
        "run_id": view["run_id"], "thread_id": view["thread_id"], "task_id": task,
        "from": {"agent_id": "user:alice"}, "to": [{"agent_id": "agent:orchestrator"}], "type": "task.cancel", "payload": {},
    });
    let (status, body) = post(&http, &daemon.url, &cancel).await;
    assert_eq!(status, 201, "{body}");
    task_in(&http, &daemon.url, &task, &["cancelled"]).await;
    tokio::time::sleep(Duration::from_millis(500)).await;
    let events = all_events(&http, &daemon.url).await;
    let after: Vec<&Value> = of_task(&events, &task)
        .into_iter()
        .filter(|e| {
            e["from"]["agent_id"] == "agent:summariser"
                && ["task.result", "task.error"].contains(&e["type"].as_str().unwrap())
        })
        .collect();
    assert!(after.is_empty(), "the agent answered a cancelled task: {after:?}");
    assert_eq!(fake.count(), made + 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kill_9_mid_task_then_the_restart_does_not_buy_a_recorded_answer_again() {
    let fake = Fake::start(Options {
        key: Some(KEY.into()),
        ..Options::script(|_, n| match n {
            1 => Reply::Tool { text: "Step one.".into(), name: "emit".into(), input: json!({"message": "one"}) },
            2 => Reply::Slow(Duration::from_secs(120), Box::new(Reply::Text("never seen".into()))),
            _ => Reply::Text("finished after the restart".into()),
        })
    })
    .await
    .unwrap();
    let dir = tempfile::tempdir().unwrap();
    let config = config(&fake, "", &agent("summariser", ""), false);
    let daemon = serve(dir.path(), &config);
    let http = reqwest::Client::new();
    until_agent(&http, &daemon.url, "agent:summariser").await;
    let task = ask(&http, &daemon.url, "Two steps.").await;
    let deadline = Instant::now() + DEADLINE;
    while fake.count() < 2 {
        assert!(Instant::now() < deadline, "the second call was not made");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    daemon.kill();

    let daemon = serve(dir.path(), &config);
    let view = task_in(&http, &daemon.url, &task, &["completed", "failed"]).await;
    assert_eq!(view["state"], "completed", "{view:#}");
    assert_eq!(fake.count(), 3, "the first call's answer was read back from the log");
    let third = &fake.received()[2].body;
    assert_eq!(
        third["messages"].as_array().unwrap().len(),
        3,
        "turn 2 again, after turn 1 and its tool result: {third}"
    );
    let events = all_events(&http, &daemon.url).await;
    let events = of_task(&events, &task);
    assert_eq!(events.iter().filter(|e| e["payload"]["message"] == "one").count(), 1, "emit ran once");
    let result = events.iter().find(|e| e["type"] == "task.result").unwrap();
    assert_eq!(result["payload"]["text"], "finished after the restart");

    // Re-executed offline from the log: the same messages as recorded, across the crash.
    let mut cmd = clutch();
    cmd.args(["runs", "replay", view["run_id"].as_str().unwrap(), "--reexecute", "--url", &daemon.url]);
    let out = run(cmd, "");
    assert_eq!(out.code, Some(0), "{out:?}");
    assert!(out.stdout.contains(&format!("{task} agent:summariser attempt 1: identical (5 messages)")), "{out:?}");
    assert_eq!(fake.count(), 3, "re-executing calls no provider");
}

#[test]
fn a_missing_key_stops_the_start_and_names_its_variable() {
    let dir = tempfile::tempdir().unwrap();
    let config = "[[providers]]\nname = \"fake\"\nkind = \"openai\"\napi_key_env = \"CLUTCH_TEST_UNSET_KEY\"\nmodel = \"m\"\n\
                  [[llm_agents]]\nname = \"a\"\nprovider = \"fake\"\nsystem = \"s\"\ncapabilities = [\"skill:a\"]\n";
    std::fs::write(dir.path().join("clutch.toml"), config).unwrap();
    let mut cmd = clutch();
    cmd.current_dir(dir.path()).env_remove("CLUTCH_TEST_UNSET_KEY").args([
        "serve",
        "--listen",
        "127.0.0.1:0",
        "--data-dir",
        "data",
    ]);
    let out = run(cmd, "");
    assert_ne!(out.code, Some(0), "{out:?}");
    assert!(out.stderr.contains("CLUTCH_TEST_UNSET_KEY") && out.stderr.contains("not set"), "{}", out.stderr);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn agents_created_through_the_api_run_survive_a_restart_and_stop_when_removed() {
    let fake =
        Fake::start(Options { key: Some(KEY.into()), ..Options::script(|_, _| Reply::Text("made by api".into())) })
            .await
            .unwrap();
    let dir = tempfile::tempdir().unwrap();
    // A provider, and no agent in clutch.toml.
    let config = config(&fake, "", "", false);
    let daemon = serve(dir.path(), &config);
    let http = reqwest::Client::new();
    let cli = |args: &[&str], url: &str| {
        let mut cmd = clutch();
        cmd.args(args).args(["--url", url]);
        run(cmd, "")
    };
    let out = cli(
        &[
            "agents",
            "create",
            "writer",
            "--provider",
            "fake",
            "--capability",
            "skill:summarise",
            "--system",
            "You write.",
        ],
        &daemon.url,
    );
    assert_eq!(out.code, Some(0), "{out:?}");
    assert!(out.stdout.contains("agent:writer created at seq"), "{out:?}");
    // A provider the daemon does not declare: refused, the field named.
    let out =
        cli(&["agents", "create", "w2", "--provider", "nope", "--capability", "skill:x", "--system", "s"], &daemon.url);
    assert_ne!(out.code, Some(0), "{out:?}");
    assert!(out.stderr.contains("VALIDATION_FAILED") && out.stderr.contains("no provider \"nope\""), "{out:?}");
    let (status, body) = {
        let card = json!({"v": "clutch/0.1", "agent_id": "agent:w3", "capabilities": [{"id": "skill:x"}],
            "meta": {"llm": {"provider": "fake", "system": "s", "max_turns": 0, "task_timeout_ms": 1}}});
        let r = http.post(format!("{}/v1/agents", daemon.url)).json(&card).send().await.unwrap();
        (r.status().as_u16(), r.json::<Value>().await.unwrap())
    };
    assert_eq!(status, 400, "{body}");
    assert_eq!(body["error"]["field"], "payload.meta.llm", "{body}");

    let task = ask(&http, &daemon.url, "Write something.").await;
    let view = task_in(&http, &daemon.url, &task, &["completed", "failed"]).await;
    assert_eq!((view["state"].as_str(), view["agent"].as_str()), (Some("completed"), Some("agent:writer")), "{view:#}");
    let out = cli(&["agents", "list"], &daemon.url);
    assert!(out.stdout.contains("RUNS ON") && out.stdout.contains("fake (its default model)"), "{out:?}");

    // A coordinator over MCP: agent_register with `llm` creates one; other agents' `meta.runtime`
    // (what runs them) is no LLM section and registers as before.
    let mcp = crate::mcp::http(&format!("{}/mcp", daemon.url), None, true).await.unwrap();
    let (failed, body) = crate::mcp::call(
        &mcp,
        "agent_register",
        json!({"name": "critic", "runtime": "clutch", "capabilities": ["skill:critique"],
               "llm": {"provider": "fake", "system": "You critique.", "model": "fake-model-1"}}),
    )
    .await;
    assert!(!failed, "{body}");
    let (failed, body) =
        crate::mcp::call(&mcp, "agent_register", json!({"name": "ken", "runtime": "claude_code"})).await;
    assert!(!failed, "{body}");
    let (failed, body) = crate::mcp::call(
        &mcp,
        "agent_register",
        json!({"name": "bad", "runtime": "clutch", "capabilities": ["skill:x"], "llm": {"provider": "nope", "system": "s"}}),
    )
    .await;
    assert!(failed && body["code"] == "VALIDATION_FAILED", "{body}");
    let critic = until_agent(&http, &daemon.url, "agent:critic").await;
    assert_eq!(critic["card"]["meta"]["llm"]["model"], "fake-model-1");
    let task = generate(Kind::Task);
    let request = json!({
        "run_id": generate(Kind::Run), "thread_id": generate(Kind::Thread), "task_id": task,
        "from": {"agent_id": "user:alice"}, "to": [{"agent_id": "agent:orchestrator"}], "type": "task.request",
        "requires": ["skill:critique"], "payload": {"text": "Critique this."},
    });
    assert_eq!(post(&http, &daemon.url, &request).await.0, 201);
    let view = task_in(&http, &daemon.url, &task, &["completed", "failed"]).await;
    assert_eq!((view["state"].as_str(), view["agent"].as_str()), (Some("completed"), Some("agent:critic")), "{view:#}");

    // After a restart the registry still has it, and the daemon runs it again.
    drop(daemon.terminate());
    let daemon = serve(dir.path(), &config);
    let task = ask(&http, &daemon.url, "Again.").await;
    let view = task_in(&http, &daemon.url, &task, &["completed", "failed"]).await;
    assert_eq!(view["state"], "completed", "{view:#}");
    let calls = fake.count();

    // Removed: the daemon stops it; a task for its skill waits for someone else.
    let out = cli(&["agents", "remove", "writer"], &daemon.url);
    assert_eq!(out.code, Some(0), "{out:?}");
    let task = ask(&http, &daemon.url, "Anyone?").await;
    tokio::time::sleep(Duration::from_millis(1500)).await;
    let response: Value =
        http.get(format!("{}/v1/tasks/{task}", daemon.url)).send().await.unwrap().json().await.unwrap();
    assert!(!["completed", "accepted", "running"].contains(&response["state"].as_str().unwrap_or("")), "{response:#}");
    assert_eq!(fake.count(), calls);
}
