//! Fuzzing the MCP endpoints' request parsing (proptest; `cargo fuzz` needs a nightly toolchain):
//! arbitrary bytes, JSON-like text, and valid JSON-RPC requests of both eras mutated (members removed,
//! replaced by other JSON types, huge strings, unknown keys, deep nesting), with or without the
//! 2026-07-28 headers, POSTed to the router with and without the fast path. No answer may be a 5xx
//! (or a panic), and every answer stays bounded: an error (a JSON-RPC error, a 4xx) small whatever
//! was sent but for the id JSON-RPC echoes, a failed tool call within the bounds of
//! `clutch_proto::error`, and any answer at most the largest legitimate one plus twice the request
//! (the id and arguments a result may echo), never a multiple of the input.
//!
//! Each target runs 128 cases by default (about a second each in a debug build); set `CLUTCH_FUZZ_CASES`
//! (or `PROPTEST_CASES`) for more, e.g. `CLUTCH_FUZZ_CASES=20000 cargo test -p clutch-mcp --release
//! --test it fuzz`.

use axum::body::Body;
use clutch_proto::error::{MESSAGE_MAX, PATH_MAX, PROBLEM_MAX, PROBLEMS_MAX};
use clutch_proto::fuzz::{self, mutate};
use proptest::prelude::*;
use proptest::sample::select;
use proptest::test_runner::{TestCaseError, TestRunner};
use serde_json::{Value, json};

use crate::bounded::{Answer, post};

/// Names the MCP endpoints know, so generated requests often hit real paths.
const WORDS: &[&str] = &[
    "2.0",
    "tools/call",
    "tools/list",
    "initialize",
    "ping",
    "server/discover",
    "resources/read",
    "prompts/get",
    "agent_list",
    "agent_register",
    "agent:fuzz",
    "2026-07-28",
    "2025-11-25",
    "",
];

fn string() -> impl Strategy<Value = String> {
    fuzz::string(WORDS)
}

fn meta() -> Value {
    json!({
        "io.modelcontextprotocol/protocolVersion": "2026-07-28",
        "io.modelcontextprotocol/clientInfo": {"name": "fuzz", "version": "0"},
        "io.modelcontextprotocol/clientCapabilities": {},
    })
}

/// Valid requests of both eras: the mutations start from these.
fn requests() -> Vec<Value> {
    let call = |name: &str, arguments: Value| {
        json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call",
               "params": {"name": name, "arguments": arguments, "_meta": meta()}})
    };
    let plain = |method: &str, params: Value| json!({"jsonrpc": "2.0", "id": "a", "method": method, "params": params});
    vec![
        call("agent_list", json!({})),
        call("agent_register", json!({"name": "fuzz", "runtime": "x", "capabilities": ["skill:a"]})),
        call("agent_heartbeat", json!({"agent_id": "agent:fuzz", "status": "busy"})),
        call("workflow_list", json!({"status": ["in_progress"]})),
        call("task_get", json!({"task_id": "task_01J0000000000000000000000"})),
        plain("tools/list", json!({"_meta": meta()})),
        plain("server/discover", json!({"_meta": meta()})),
        plain(
            "initialize",
            json!({"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "f", "version": "0"}}),
        ),
        plain("ping", json!({})),
        plain("resources/read", json!({"uri": "file:///x"})),
        plain("prompts/get", json!({"name": "p"})),
        json!({"jsonrpc": "2.0", "method": "notifications/initialized"}),
    ]
}

/// Headers a request may carry: none, the 2026-07-28 ones matching the body, or mismatching ones.
fn headers() -> impl Strategy<Value = Vec<(&'static str, String)>> {
    let version = prop_oneof![Just("2026-07-28".to_string()), Just("2025-11-25".to_string()), string()];
    let method = prop_oneof![Just("tools/call".to_string()), Just("tools/list".to_string()), string()];
    let name = prop_oneof![Just("agent_list".to_string()), "[a-z_]{0,12}"];
    prop::option::of((version, method, prop::option::of(name))).prop_map(|h| match h {
        None => vec![],
        Some((version, method, name)) => {
            let mut out = vec![("mcp-protocol-version", version), ("mcp-method", method)];
            out.extend(name.map(|n| ("mcp-name", n)));
            out
        }
    })
}

/// A request as sent: the body and its headers (only those a header can carry).
#[derive(Clone)]
struct Sent {
    body: Vec<u8>,
    headers: Vec<(&'static str, String)>,
}

impl Sent {
    /// Bytes sent: body and headers.
    fn len(&self) -> usize {
        self.body.len() + self.headers.iter().map(|(n, v)| n.len() + v.len()).sum::<usize>()
    }
}

/// Shown short: a failing case may hold strings of 200,000 characters.
impl std::fmt::Debug for Sent {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let short = |s: &str| clutch_proto::error::clip(s, 300).into_owned();
        let headers: Vec<(&str, String)> = self.headers.iter().map(|(n, v)| (*n, short(v))).collect();
        write!(f, "{} ({} bytes) {headers:?}", short(&String::from_utf8_lossy(&self.body)), self.len())
    }
}

/// The 2026-07-28 headers that match `doc`, as a client sends them.
fn matching(doc: &Value) -> Vec<(&'static str, String)> {
    let text = |v: &Value| v.as_str().map(str::to_owned);
    let mut out = vec![("mcp-protocol-version", "2026-07-28".to_string())];
    out.extend(text(&doc["method"]).map(|m| ("mcp-method", m)));
    if doc["method"] == "tools/call" {
        out.extend(text(&doc["params"]["name"]).map(|n| ("mcp-name", n)));
    }
    out
}

fn mutated_requests() -> impl Strategy<Value = Sent> {
    (select(requests()), fuzz::mutations(WORDS), prop_oneof![Just(None), Just(None), headers().prop_map(Some)])
        .prop_map(|(request, changes, headers)| {
            let doc = mutate(request, &changes);
            let headers = headers.unwrap_or_else(|| matching(&doc));
            let headers = headers.into_iter().filter(|(_, v)| axum::http::HeaderValue::from_str(v).is_ok()).collect();
            Sent { body: serde_json::to_vec(&doc).unwrap(), headers }
        })
}

/// The routers with and without the fast path, the largest legitimate answer, and a runtime.
struct Bench {
    runtime: tokio::runtime::Runtime,
    daemon: Option<crate::Daemon>,
    routers: Vec<axum::Router>,
    largest: usize,
}

impl Bench {
    fn new() -> Bench {
        let runtime = tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().unwrap();
        let daemon = runtime.block_on(crate::start());
        let limit = 1 << 20;
        let routers: Vec<axum::Router> = [true, false]
            .map(|fast_path| {
                let options = clutch_mcp::Options { body_limit_bytes: limit, fast_path };
                clutch_mcp::router(daemon.engine.clone(), &options)
            })
            .into();
        // The largest answer to a valid request: tools/list (every tool with its schemas).
        let list = json!({"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": {"_meta": meta()}});
        let headers = [("mcp-protocol-version", "2026-07-28"), ("mcp-method", "tools/list")];
        let largest = runtime.block_on(post(&routers[0], Body::from(list.to_string()), &headers)).size;
        Bench { runtime, daemon: Some(daemon), routers, largest }
    }

    /// Sends `sent` to both routers and checks both answers.
    fn check(&self, sent: &Sent) -> Result<(), TestCaseError> {
        for router in &self.routers {
            let headers: Vec<(&str, &str)> = sent.headers.iter().map(|(n, v)| (*n, v.as_str())).collect();
            let answer = self.runtime.block_on(post(router, Body::from(sent.body.clone()), &headers));
            self.bounded(&answer, sent)?;
        }
        Ok(())
    }

    fn bounded(&self, a: &Answer, sent: &Sent) -> Result<(), TestCaseError> {
        prop_assert!(a.status < 500, "a {} answer: {:.500}", a.status, a.body.to_string());
        prop_assert!(a.size <= self.largest + 4096 + 2 * sent.len(), "{} bytes answered to {sent:?}", a.size);
        // An error is small whatever was sent, but for the request's id, which JSON-RPC echoes.
        if a.status >= 400 || a.body.get("error").is_some() || a.body.is_string() {
            let id =
                serde_json::from_slice::<Value>(&sent.body).ok().and_then(|b| b.get("id").map(|id| id.to_string()));
            let most = 7 * MESSAGE_MAX + 512 + id.map_or(0, |id| id.len());
            prop_assert!(
                a.size <= most,
                "an error of {} bytes answered to {sent:?}: {:.300}",
                a.size,
                a.body.to_string()
            );
        }
        let chars = |v: &Value| v.as_str().map_or(0, |s| s.chars().count());
        if let Some(error) = a.body.get("error") {
            prop_assert!(chars(&error["message"]) <= MESSAGE_MAX, "{:.500}", error.to_string());
            let data = error.get("data").map_or(0, |d| d.to_string().len());
            prop_assert!(data <= 8 * MESSAGE_MAX, "error data of {data} bytes");
        }
        let result = &a.body["result"];
        if result["isError"] == true {
            let e = &result["structuredContent"];
            prop_assert!(chars(&e["message"]) <= MESSAGE_MAX && chars(&e["suggestion"]) <= MESSAGE_MAX, "{e:.500}");
            prop_assert!(chars(&e["field"]) <= PATH_MAX, "{e:.500}");
            let problems = e["problems"].as_array().map_or(&[][..], Vec::as_slice);
            prop_assert!(problems.len() <= PROBLEMS_MAX);
            for p in problems {
                prop_assert!(chars(&p["path"]) <= PATH_MAX && chars(&p["message"]) <= PROBLEM_MAX, "{p}");
            }
        }
        Ok(())
    }

    fn run<S: Strategy>(&self, strategy: S, to_sent: impl Fn(S::Value) -> Sent) {
        let config = fuzz::config(128);
        let mut runner = TestRunner::new(config);
        if let Err(e) = runner.run(&strategy, |value| self.check(&to_sent(value))) {
            panic!("{e}");
        }
    }
}

impl Drop for Bench {
    fn drop(&mut self) {
        if let Some(daemon) = self.daemon.take() {
            self.runtime.block_on(daemon.stop());
        }
    }
}

#[test]
fn arbitrary_bytes() {
    let bench = Bench::new();
    bench.run(prop::collection::vec(any::<u8>(), 0..256), |body| Sent { body, headers: vec![] });
}

#[test]
fn json_like_text() {
    let bench = Bench::new();
    bench.run("[\\[\\]{}\",:0-9a-z_./ -]{0,160}", |text: String| Sent { body: text.into_bytes(), headers: vec![] });
}

#[test]
fn mutated_json_rpc_requests() {
    let bench = Bench::new();
    bench.run(mutated_requests(), |sent| sent);
}
