//! Both providers' clients against the fake, in both wire formats, streamed and whole: text, tool
//! use with streamed arguments, usage, and every failure the client must classify and retry.

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use clutch_runtime::fake::{Fake, Options, Reply};
use clutch_runtime::provider::{self, Config, ErrorKind, Finish, Kind, Part, Request, Role, ToolSpec, Turn};
use serde_json::json;

const KEY: &str = "sk-planted-secret-0123456789";

fn config(fake: &Fake, kind: Kind, stream: bool) -> Config {
    Config {
        name: format!("fake-{kind:?}").to_lowercase(),
        kind,
        base_url: Some(match kind {
            Kind::Anthropic => fake.url.clone(),
            Kind::Openai => format!("{}/v1", fake.url),
        }),
        api_key_env: Some("FAKE_KEY".into()),
        model: "fake-model-1".into(),
        max_tokens: 256,
        temperature: Some(0.2),
        stream,
        timeout_ms: 10_000,
        idle_timeout_ms: 2_000,
        max_retries: 3,
        retry_base_ms: 20,
        requests_per_minute: None,
        tokens_per_minute: None,
        prices: [("fake-model-1".to_owned(), provider::Price { input: 3.0, output: 15.0, ..Default::default() })]
            .into(),
    }
}

fn provider(config: Config) -> provider::Provider {
    provider::Provider::with_env(config, |v| (v == "FAKE_KEY").then(|| KEY.to_owned())).unwrap()
}

fn request(tools: bool) -> Request {
    Request {
        model: "fake-model-1".into(),
        system: "You are a test.".into(),
        messages: vec![Turn { role: Role::User, content: vec![Part::Text { text: "Say hello.".into() }] }],
        tools: if tools {
            vec![ToolSpec {
                name: "echo".into(),
                description: "Echoes a message".into(),
                input_schema: json!({"type": "object", "properties": {"message": {"type": "string"}}}),
            }]
        } else {
            vec![]
        },
        max_tokens: 256,
        temperature: Some(0.2),
        tool_choice: None,
    }
}

async fn fake(script: impl Fn(&serde_json::Value, usize) -> Reply + Send + Sync + 'static) -> Fake {
    Fake::start(Options { key: Some(KEY.into()), ..Options::script(script) }).await.unwrap()
}

const EVERY: [(Kind, bool); 4] =
    [(Kind::Anthropic, true), (Kind::Anthropic, false), (Kind::Openai, true), (Kind::Openai, false)];

#[tokio::test]
async fn text_comes_whole_or_streamed_with_usage_in_both_formats() {
    let text = "Hello — wörld, in pieces: \"quoted\" and \\ escaped.";
    let fake = fake(move |_, _| Reply::Text(text.into())).await;
    for (kind, stream) in EVERY {
        let p = provider(config(&fake, kind, stream));
        let mut seen = String::new();
        let r = p.complete(&request(false), &mut |t: &str| seen.push_str(t)).await.unwrap();
        assert_eq!(r.text(), text, "{kind:?} stream={stream}");
        assert_eq!(seen, text, "what streamed is the answer ({kind:?} stream={stream})");
        assert_eq!(r.stop, Finish::EndTurn);
        assert_eq!(r.model, "fake-model-1");
        assert!(r.usage.input_tokens > 0 && r.usage.output_tokens > 0, "{:?}", r.usage);
        assert!(p.config.cost("fake-model-1", &r.usage) > 0.0);
    }
    // What went out: the key in the right header, the system prompt, the stream flag.
    let received = fake.received();
    assert_eq!(received.len(), 4);
    assert_eq!(received[0].path, "/v1/messages");
    assert_eq!(received[0].body["system"], "You are a test.");
    assert_eq!(received[0].body["stream"], true);
    assert!(received[1].body.get("stream").is_none());
    assert_eq!(received[2].path, "/v1/chat/completions");
    assert_eq!(received[2].body["messages"][0], json!({"role": "system", "content": "You are a test."}));
    assert_eq!(received[2].body["stream_options"], json!({"include_usage": true}));
}

#[tokio::test]
async fn tool_calls_with_streamed_arguments_parse_and_go_back_as_results() {
    let input = json!({"message": "a \"tricky\" \\ input ✓", "n": [1, 2, {"deep": null}]});
    let expected = input.clone();
    let fake = fake(move |body, _| {
        // The second turn carries the tool's result: then the model answers.
        if body.to_string().contains("echoed it") {
            Reply::Text("done".into())
        } else {
            Reply::Tool { text: "Let me call it.".into(), name: "echo".into(), input: input.clone() }
        }
    })
    .await;
    for (kind, stream) in EVERY {
        let p = provider(config(&fake, kind, stream));
        let mut req = request(true);
        let r = p.complete(&req, &mut |_: &str| {}).await.unwrap();
        assert_eq!(r.stop, Finish::ToolUse, "{kind:?} stream={stream}");
        let Some(Part::ToolUse { id, name, input }) = r.content.iter().find(|p| matches!(p, Part::ToolUse { .. }))
        else {
            panic!("no tool use: {r:?}")
        };
        assert_eq!((name.as_str(), input), ("echo", &expected), "{kind:?} stream={stream}");
        assert_eq!(r.text(), "Let me call it.");
        req.messages.push(Turn { role: Role::Assistant, content: r.content.clone() });
        req.messages.push(Turn {
            role: Role::User,
            content: vec![Part::ToolResult { tool_use_id: id.clone(), content: "echoed it".into(), is_error: false }],
        });
        let r = p.complete(&req, &mut |_: &str| {}).await.unwrap();
        assert_eq!((r.text().as_str(), &r.stop), ("done", &Finish::EndTurn));
    }
    // The result went back in each format's shape, after the call it answers.
    let received = fake.received();
    let anthropic = &received[1].body["messages"];
    assert_eq!(anthropic[1]["content"][1]["type"], "tool_use");
    assert_eq!(anthropic[2]["content"][0]["type"], "tool_result");
    assert_eq!(anthropic[2]["content"][0]["tool_use_id"], anthropic[1]["content"][1]["id"]);
    let openai = &received[5].body["messages"];
    assert_eq!(openai[2]["tool_calls"][0]["type"], "function");
    assert_eq!(openai[3]["role"], "tool");
    assert_eq!(openai[3]["tool_call_id"], openai[2]["tool_calls"][0]["id"]);
}

#[tokio::test]
async fn retryable_failures_are_retried_and_retry_after_is_honoured() {
    // Each request's answer by its number: 429 (retry-after 1 s), 529, 500, a stream error, then text.
    let fake = fake(|_, n| match n % 5 {
        1 => Reply::Status { status: 429, retry_after: Some(1) },
        2 => Reply::Status { status: 529, retry_after: None },
        3 => Reply::Status { status: 500, retry_after: None },
        4 => Reply::ErrorMidStream,
        _ => Reply::Text("at last".into()),
    })
    .await;
    for kind in [Kind::Anthropic, Kind::Openai] {
        let mut c = config(&fake, kind, true);
        c.max_retries = 4;
        let p = provider(c);
        let began = Instant::now();
        let restarts = Arc::new(Mutex::new(0));
        let r = {
            let restarts = restarts.clone();
            p.complete(&request(false), &mut move |t: &str| {
                if t.is_empty() {
                    *restarts.lock().unwrap() += 1;
                }
            })
            .await
            .unwrap()
        };
        assert_eq!(r.text(), "at last");
        assert!(began.elapsed() >= Duration::from_secs(1), "retry-after: 1 was honoured ({:?})", began.elapsed());
        assert_eq!(*restarts.lock().unwrap(), 4, "each retry is announced to the text's reader");
    }
    assert_eq!(fake.count(), 10);
}

#[tokio::test]
async fn what_cannot_succeed_is_not_retried_and_retries_run_out() {
    let fake = fake(|body, _| match body["model"].as_str() {
        Some("bad") => Reply::Status { status: 400, retry_after: None },
        _ => Reply::Status { status: 500, retry_after: None },
    })
    .await;
    let mut c = config(&fake, Kind::Anthropic, true);
    c.max_retries = 2;
    let p = provider(c);
    let mut bad = request(false);
    bad.model = "bad".into();
    let e = p.complete(&bad, &mut |_: &str| {}).await.unwrap_err();
    assert_eq!((e.kind, e.status, e.attempts), (ErrorKind::Invalid, Some(400), 1));
    assert!(!e.kind.retryable());
    let e = p.complete(&request(false), &mut |_: &str| {}).await.unwrap_err();
    assert_eq!((e.kind, e.status, e.attempts), (ErrorKind::Server, Some(500), 3), "{e}");
    assert!(e.message.contains("Internal server error"), "{e}");
    assert_eq!(fake.count(), 4);
}

#[tokio::test]
async fn stalls_slow_starts_and_malformed_streams_are_retryable() {
    let fake = fake(|body, n| {
        let first = match body["model"].as_str() {
            Some("stall") => Reply::Stall,
            Some("slow") => Reply::Slow(Duration::from_secs(5), Box::new(Reply::Text("late".into()))),
            _ => Reply::Malformed,
        };
        // Odd requests fail as the model says; even ones answer.
        if n % 2 == 1 { first } else { Reply::Text("fine".into()) }
    })
    .await;
    for kind in [Kind::Anthropic, Kind::Openai] {
        for model in ["stall", "slow", "malformed"] {
            let mut c = config(&fake, kind, true);
            c.idle_timeout_ms = 300;
            c.max_retries = 0;
            let p = provider(c.clone());
            let mut req = request(false);
            req.model = model.into();
            let e = p.complete(&req, &mut |_: &str| {}).await.unwrap_err();
            let expected = if model == "malformed" { ErrorKind::Malformed } else { ErrorKind::Timeout };
            assert_eq!(e.kind, expected, "{kind:?} {model}: {e}");
            assert!(e.kind.retryable());
            // With a retry, the next attempt answers.
            c.max_retries = 1;
            let r = provider(c).complete(&req, &mut |_: &str| {}).await.unwrap();
            assert_eq!(r.text(), "fine");
        }
    }
}

#[tokio::test]
async fn a_missing_key_names_its_variable_and_a_key_never_shows() {
    let fake = fake(|_, _| Reply::Text("x".into())).await;
    let e = provider::Provider::with_env(config(&fake, Kind::Anthropic, true), |_| None).unwrap_err();
    assert_eq!(e.kind, ErrorKind::MissingKey);
    assert!(e.message.contains("FAKE_KEY"), "{e}");
    // A wrong key: 401, not retried; neither the error nor the provider's Debug shows a key.
    let p = provider::Provider::with_env(config(&fake, Kind::Openai, false), |_| Some("sk-wrong-key-98765".into()))
        .unwrap();
    let e = p.complete(&request(false), &mut |_: &str| {}).await.unwrap_err();
    assert_eq!((e.kind, e.attempts), (ErrorKind::Auth, 1));
    let shown = format!("{e} {e:?} {p:?} {:?}", provider(config(&fake, Kind::Anthropic, true)));
    assert!(!shown.contains("sk-wrong-key") && !shown.contains(KEY), "{shown}");
}

#[tokio::test]
async fn one_limiter_paces_concurrent_callers_under_the_providers_rate() {
    let fake = Fake::start(Options {
        per_second: Some(10),
        key: Some(KEY.into()),
        ..Options::script(|_, _| Reply::Text("ok".into()))
    })
    .await
    .unwrap();
    let mut c = config(&fake, Kind::Openai, true);
    c.requests_per_minute = Some(600);
    let p = Arc::new(provider(c));
    let began = Instant::now();
    let mut calls = tokio::task::JoinSet::new();
    for _ in 0..25 {
        let p = p.clone();
        calls.spawn(async move { p.complete(&request(false), &mut |_: &str| {}).await.map(|r| r.text()) });
    }
    while let Some(done) = calls.join_next().await {
        assert_eq!(done.unwrap().unwrap(), "ok");
    }
    assert_eq!(fake.over_limit(), 0, "no request went past the provider's rate");
    assert_eq!(fake.count(), 25);
    assert!(
        began.elapsed() >= Duration::from_millis(2400),
        "25 requests at 10/s take 2.4 s at least: {:?}",
        began.elapsed()
    );
}

#[test]
fn configs_are_checked() {
    let fake_url = "http://127.0.0.1:1".to_owned();
    let good = Config {
        name: "ok".into(),
        kind: Kind::Anthropic,
        base_url: Some(fake_url),
        api_key_env: None,
        model: "m".into(),
        max_tokens: 1,
        temperature: None,
        stream: true,
        timeout_ms: 1,
        idle_timeout_ms: 1,
        max_retries: 0,
        retry_base_ms: 1,
        requests_per_minute: None,
        tokens_per_minute: None,
        prices: Default::default(),
    };
    assert_eq!(good.check(), Ok(()));
    for (bad, why) in [
        (Config { name: "a b".into(), ..good.clone() }, "letters"),
        (Config { model: String::new(), ..good.clone() }, "model"),
        (Config { base_url: Some("ftp://x".into()), ..good.clone() }, "base_url"),
        (Config { api_key_env: Some(String::new()), ..good.clone() }, "api_key_env"),
        (Config { requests_per_minute: Some(0), ..good.clone() }, "rate of 0"),
    ] {
        let e = bad.check().unwrap_err().to_string();
        assert!(e.contains(why), "{e}");
    }
}

/// The fake's wire format, checked by the official Python SDKs (`tests/sdk_check.py`): what they
/// parse, the real APIs would have to send too.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_official_sdks_parse_what_the_fake_sends() {
    let root = std::path::PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../..");
    let python = root.join(".tools/venv/bin/python");
    assert!(python.exists(), "{} is missing: the test command installs it (./scripts/py-setup)", python.display());
    let fake = Fake::start(Options::script(|body, _| {
        let last = body["messages"].as_array().and_then(|m| m.last()).map(|m| m["content"].clone()).unwrap_or_default();
        match last.as_str().unwrap_or("") {
            "tool" => Reply::Tool {
                text: String::new(),
                name: "echo".into(),
                input: json!({"message": "a \"tricky\" \\ input ✓", "n": [1, 2, {"deep": null}]}),
            },
            "overload" => Reply::ErrorMidStream,
            "ratelimit" => Reply::Status { status: 429, retry_after: Some(1) },
            _ => Reply::Text("Hello — wörld, in pieces: \"quoted\" and \\ escaped.".into()),
        }
    }))
    .await
    .unwrap();
    let out = tokio::process::Command::new(python)
        .arg(root.join("crates/runtime/tests/sdk_check.py"))
        .arg(&fake.url)
        .output()
        .await
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{stdout}\n{}", String::from_utf8_lossy(&out.stderr));
    assert!(stdout.contains("all checks passed") && stdout.matches("ok ").count() >= 16, "{stdout}");
}

/// The providers' real endpoints are https: the client speaks TLS (rustls), so an https URL fails
/// only as a network does (here: nothing listens), not as a scheme it cannot speak.
#[tokio::test]
async fn https_endpoints_are_spoken_to() {
    let fake = fake(|_, _| Reply::Text("x".into())).await;
    let mut c = config(&fake, Kind::Anthropic, true);
    c.base_url = Some("https://127.0.0.1:1".into());
    c.max_retries = 0;
    let e = provider(c).complete(&request(false), &mut |_: &str| {}).await.unwrap_err();
    assert_eq!(e.kind, ErrorKind::Network, "{e}");
    assert!(e.message.contains("cannot connect (https://127.0.0.1/v1/messages)"), "{e}");
}
