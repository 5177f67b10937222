//! The A2A face's integration tests: the face served on 127.0.0.1:0 over a real SQLite store and the
//! real engine (`clutch-app` with the A2A face), driven by plain JSON-RPC over HTTP in both versions,
//! with an agent of the test working the tasks the router gives it through the engine's inbox; two
//! such daemons federate. The official SDK drives the real binary in scripts/test-a2a.

mod conformance;
mod federation;
mod push;
mod server;
mod trust;

use std::sync::Arc;
use std::time::Duration;

use clutch_app::{App, face};
use serde_json::{Value, json};

pub struct Daemon {
    pub url: String,
    pub engine: clutch_core::Engine,
    pub log: clutch_core::Handle,
    app: App,
    options: clutch_core::engine::Options,
    a2a: clutch_a2a::Options,
    dir: tempfile::TempDir,
}

pub async fn start() -> Daemon {
    start_with(clutch_core::engine::Options::default()).await
}

/// A daemon whose engine has `engine`'s options (a guard that allows loopback, to reach another).
pub async fn start_with(engine: clutch_core::engine::Options) -> Daemon {
    open(tempfile::tempdir().unwrap(), engine, a2a_options()).await
}

/// A daemon whose A2A face has `a2a`'s options (keys, screening).
pub async fn start_a2a(a2a: clutch_a2a::Options) -> Daemon {
    open(tempfile::tempdir().unwrap(), clutch_core::engine::Options::default(), a2a).await
}

/// The tests' A2A options: short waits and polls.
pub fn a2a_options() -> clutch_a2a::Options {
    clutch_a2a::Options {
        blocking_wait: Duration::from_secs(20),
        remote_poll: Duration::from_millis(50),
        push: clutch_core::push::Options { rescan: Duration::from_millis(50), ..Default::default() },
        ..Default::default()
    }
}

async fn open(dir: tempfile::TempDir, engine: clutch_core::engine::Options, a2a: clutch_a2a::Options) -> Daemon {
    let store = clutch_store_sqlite::Store::open(dir.path()).unwrap();
    let mut app =
        App::builder(Arc::new(store)).engine(engine.clone()).face(face::A2a(a2a.clone())).build().await.unwrap();
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    app.listen(listener);
    Daemon {
        url: format!("http://{addr}"),
        engine: app.engine.clone(),
        log: app.log.clone(),
        app,
        options: engine,
        a2a,
        dir,
    }
}

impl Daemon {
    pub async fn stop(self) {
        self.app.stop().await.unwrap();
    }

    /// Stopped and started again on the same data (at another address).
    pub async fn restart(self) -> Daemon {
        self.app.stop().await.unwrap();
        open(self.dir, self.options, self.a2a).await
    }

    /// One JSON-RPC call at `/a2a` with `A2A-Version: version` (none when `None`): the response body.
    pub async fn rpc(&self, version: Option<&str>, method: &str, params: Value) -> Value {
        let (status, body) = self.rpc_as(&[], version, method, params).await;
        assert_eq!(status, 200, "JSON-RPC answers travel in HTTP 200");
        body
    }

    /// The same with `headers` (credentials): the HTTP status and the body.
    pub async fn rpc_as(
        &self,
        headers: &[(&str, &str)],
        version: Option<&str>,
        method: &str,
        params: Value,
    ) -> (u16, Value) {
        let mut request = reqwest::Client::new()
            .post(format!("{}/a2a", self.url))
            .json(&json!({"jsonrpc": "2.0", "id": 7, "method": method, "params": params}));
        if let Some(v) = version {
            request = request.header("A2A-Version", v);
        }
        for (name, value) in headers {
            request = request.header(*name, *value);
        }
        let response = request.send().await.unwrap();
        let status = response.status().as_u16();
        (status, response.json().await.unwrap())
    }
}
