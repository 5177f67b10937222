//! The app builder's own tests, on a real SQLite store: the order a daemon stops in (HTTP, then the
//! faces' background work, then the core), and a face that cannot make its routes.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::SystemTime;

use axum::Router;
use clutch_app::face::{self, Face, Stop};
use clutch_app::{App, Error};
use clutch_core::Running;
use clutch_proto::id::{self, Kind};
use futures_util::future::BoxFuture;
use serde_json::json;
use tokio::sync::oneshot;

/// What a face's background work found once asked to stop.
#[derive(Debug)]
struct Found {
    http_answers: bool,
    /// The id of the message the core took, if it took it.
    appended: Option<String>,
}

/// A face with one route, whose background work, once asked to stop, checks whether HTTP still
/// answers at `addr` and whether the core still takes an append.
struct Witness {
    addr: SocketAddr,
    found: std::sync::Mutex<Option<oneshot::Sender<Found>>>,
}

impl Face for Witness {
    fn name(&self) -> &'static str {
        "witness"
    }

    fn routes(&self, _core: &Running) -> Result<Router, face::Error> {
        Ok(Router::new().route("/witness", axum::routing::get(|| async { "here" })))
    }

    fn background(&self, core: &Running, stop: Stop) -> Option<BoxFuture<'static, ()>> {
        let (addr, engine) = (self.addr, core.engine.clone());
        let found = self.found.lock().unwrap().take()?;
        Some(Box::pin(async move {
            stop.await;
            let http_answers = tokio::net::TcpStream::connect(addr).await.is_ok();
            let message = message();
            let id = message.id.clone();
            let answers = engine.submit(vec![message]).await;
            let appended = matches!(answers.as_deref(), Ok([Ok(_)])).then_some(id);
            let _ = found.send(Found { http_answers, appended });
        }))
    }
}

/// A face that refuses to make its routes.
struct Refusing;

impl Face for Refusing {
    fn name(&self) -> &'static str {
        "refusing"
    }

    fn routes(&self, _core: &Running) -> Result<Router, face::Error> {
        Err(face::Error::Refused("no routes today".into()))
    }
}

fn message() -> clutch_proto::Message {
    let value = json!({
        "thread_id": id::generate(Kind::Thread), "run_id": id::generate(Kind::Run),
        "task_id": id::generate(Kind::Task), "from": {"agent_id": "agent:ken"},
        "to": [{"agent_id": "agent:orchestrator"}], "type": "chat.message", "payload": {"text": "hi"},
    });
    clutch_proto::validate::message(&value, &clutch_proto::validate::Defaults { now: SystemTime::now() }).unwrap()
}

fn store(dir: &tempfile::TempDir) -> Arc<dyn clutch_store::Backend> {
    Arc::new(clutch_store_sqlite::Store::open(dir.path()).unwrap())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_daemon_stops_http_then_background_work_then_the_core() {
    let dir = tempfile::tempdir().unwrap();
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let (found, witnessed) = oneshot::channel();
    let witness = Witness { addr, found: std::sync::Mutex::new(Some(found)) };
    let mut app =
        App::builder(store(&dir)).gateway(clutch_gateway::Options::default()).face(witness).build().await.unwrap();
    app.listen(listener);
    let answer = reqwest::get(format!("http://{addr}/witness")).await.unwrap();
    assert_eq!(answer.status(), 200);
    assert_eq!(answer.text().await.unwrap(), "here", "the face's route is served beside the API");
    assert_eq!(reqwest::get(format!("http://{addr}/healthz")).await.unwrap().status(), 200);

    app.stop().await.unwrap();
    let found = witnessed.await.unwrap();
    assert!(!found.http_answers, "HTTP has stopped before background work is asked to: {found:?}");
    let id = found.appended.expect("the core still takes appends while background work stops");
    // The core committed that append before it closed the store: the next daemon has it.
    let app = App::builder(store(&dir)).build().await.unwrap();
    assert!(app.log.get(&id).await.unwrap().is_some(), "{id} is in the log");
    app.stop().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_face_that_cannot_make_its_routes_stops_the_start() {
    let dir = tempfile::tempdir().unwrap();
    let Err(e) = App::builder(store(&dir)).face(face::Mcp(clutch_mcp::Options::default())).face(Refusing).build().await
    else {
        panic!("a face's refusal fails the build")
    };
    assert!(matches!(e, Error::Face { face: "refusing", .. }), "{e:?}");
    assert_eq!(e.to_string(), "refusing: no routes today");
    // The core it had started is stopped again: the same store serves the next start, which can
    // run on a task of its own.
    let app = tokio::spawn(App::builder(store(&dir)).face(face::Mcp(clutch_mcp::Options::default())).build())
        .await
        .unwrap()
        .unwrap();
    app.stop().await.unwrap();
}
