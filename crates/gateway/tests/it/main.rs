//! The gateway's integration tests: the real router served on 127.0.0.1:0 over a real SQLite store,
//! driven by real clients (reqwest, tokio-tungstenite); the workflow API in `workflows`.

mod api;
mod bounded;
mod browser;
mod lists;
mod push;
mod stream;
mod ui;
mod ui_types;
mod workflows;

use std::net::SocketAddr;
use std::sync::Arc;

use clutch_app::App;
use clutch_core::{Engine, Handle};
use clutch_proto::id::{self, Kind};
use serde_json::{Value, json};

/// The daemon as `clutch serve` builds it (`clutch-app`), with the HTTP API only: no MCP endpoints,
/// no push delivery (the push tests start their own workers).
pub struct Daemon {
    pub url: String,
    pub addr: SocketAddr,
    pub log: Handle,
    pub engine: Engine,
    pub http: reqwest::Client,
    app: App,
    dir: tempfile::TempDir,
}

pub async fn start() -> Daemon {
    start_with(clutch_core::log::Options::default(), clutch_gateway::Options::default()).await
}

pub async fn start_with(core: clutch_core::log::Options, options: clutch_gateway::Options) -> Daemon {
    start_full(core, clutch_core::engine::Options::default(), options).await
}

pub async fn start_full(
    core: clutch_core::log::Options,
    engine: clutch_core::engine::Options,
    options: clutch_gateway::Options,
) -> Daemon {
    start_in(tempfile::tempdir().unwrap(), core, engine, options).await
}

/// Starts the daemon over the store in `dir` (a restart when it holds one already).
async fn start_in(
    dir: tempfile::TempDir,
    core: clutch_core::log::Options,
    engine: clutch_core::engine::Options,
    options: clutch_gateway::Options,
) -> Daemon {
    let store = clutch_store_sqlite::Store::open(dir.path()).unwrap();
    let mut app = App::builder(Arc::new(store)).core(core).engine(engine).gateway(options).build().await.unwrap();
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    app.listen(listener);
    Daemon {
        url: format!("http://{addr}"),
        addr,
        log: app.log.clone(),
        engine: app.engine.clone(),
        http: reqwest::Client::new(),
        app,
        dir,
    }
}

impl Daemon {
    /// Shuts down as the binary does: end streams, drain HTTP, then close the log.
    pub async fn shutdown(self) {
        self.app.stop().await.unwrap();
    }

    /// Shuts down, then starts again on the same store (with default options and `engine`).
    pub async fn restart(self, engine: clutch_core::engine::Options) -> Daemon {
        self.app.stop().await.unwrap();
        start_in(self.dir, clutch_core::log::Options::default(), engine, clutch_gateway::Options::default()).await
    }

    pub async fn post(&self, body: &Value) -> (u16, Value) {
        let r = self.http.post(format!("{}/v1/messages", self.url)).json(body).send().await.unwrap();
        let status = r.status().as_u16();
        (status, r.json().await.unwrap())
    }

    pub async fn get(&self, path: &str) -> (u16, Value) {
        let r = self.http.get(format!("{}{path}", self.url)).send().await.unwrap();
        let status = r.status().as_u16();
        (status, r.json().await.unwrap())
    }
}

/// A valid client message (no id, ts or v: the daemon fills them).
pub fn msg(run: &str, kind: &str) -> Value {
    json!({
        "thread_id": id::generate(Kind::Thread), "run_id": run, "task_id": id::generate(Kind::Task),
        "from": {"agent_id": "agent:ken"}, "to": [{"agent_id": "agent:orchestrator"}],
        "type": kind, "payload": {"text": "hi"},
    })
}

pub fn run_id() -> String {
    id::generate(Kind::Run)
}
