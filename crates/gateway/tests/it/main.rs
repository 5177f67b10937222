//! The gateway's integration tests: the real router served on 127.0.0.1:0 over a real SQLite store,
//! driven by real clients (reqwest, tokio-tungstenite); the workflow API in `workflows`.

mod api;
mod bounded;
mod push;
mod stream;
mod ui;
mod workflows;

use std::net::SocketAddr;
use std::sync::Arc;

use clutch_core::{Engine, Handle, Running};
use clutch_proto::id::{self, Kind};
use serde_json::{Value, json};
use tokio::sync::oneshot;

pub struct Daemon {
    pub url: String,
    pub addr: SocketAddr,
    pub log: Handle,
    pub engine: Engine,
    pub http: reqwest::Client,
    stop_http: Option<oneshot::Sender<()>>,
    server: Option<tokio::task::JoinHandle<()>>,
    core: Option<Running>,
    _dir: tempfile::TempDir,
}

pub async fn start() -> Daemon {
    start_with(clutch_core::Options::default(), clutch_gateway::Options::default()).await
}

pub async fn start_with(core: clutch_core::Options, options: clutch_gateway::Options) -> Daemon {
    start_full(core, clutch_core::engine::Options::default(), options).await
}

pub async fn start_full(
    core: clutch_core::Options,
    engine: clutch_core::engine::Options,
    options: clutch_gateway::Options,
) -> Daemon {
    start_in(tempfile::tempdir().unwrap(), core, engine, options).await
}

/// Starts the daemon over the store in `dir` (a restart when it holds one already).
async fn start_in(
    dir: tempfile::TempDir,
    core: clutch_core::Options,
    engine: clutch_core::engine::Options,
    options: clutch_gateway::Options,
) -> Daemon {
    let store = clutch_store_sqlite::Store::open(dir.path()).unwrap();
    let running = clutch_core::start(Arc::new(store), core, engine).await.unwrap();
    let log = running.log.clone();
    let engine = running.engine.clone();
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let router = clutch_gateway::router(log.clone(), engine.clone(), options);
    let (stop_http, http_stopped) = oneshot::channel::<()>();
    let server = tokio::spawn(async move {
        axum::serve(listener, router)
            .with_graceful_shutdown(async move {
                let _ = http_stopped.await;
            })
            .await
            .unwrap();
    });
    Daemon {
        url: format!("http://{addr}"),
        addr,
        log,
        engine,
        http: reqwest::Client::new(),
        stop_http: Some(stop_http),
        server: Some(server),
        core: Some(running),
        _dir: dir,
    }
}

impl Daemon {
    /// Shuts down as the binary does: end streams, drain HTTP, then close the log.
    pub async fn shutdown(mut self) {
        self.log.close_streams();
        let _ = self.stop_http.take().unwrap().send(());
        self.server.take().unwrap().await.unwrap();
        self.core.take().unwrap().stop().await.unwrap();
    }

    /// Shuts down, then starts again on the same store (with default options and `engine`).
    pub async fn restart(mut self, engine: clutch_core::engine::Options) -> Daemon {
        self.log.close_streams();
        let _ = self.stop_http.take().unwrap().send(());
        self.server.take().unwrap().await.unwrap();
        self.core.take().unwrap().stop().await.unwrap();
        let dir = std::mem::replace(&mut self._dir, tempfile::tempdir().unwrap());
        start_in(dir, clutch_core::Options::default(), engine, clutch_gateway::Options::default()).await
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
