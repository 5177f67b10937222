//! The daemon assembled: a store, the core over it (event log and engine), the faces that serve it
//! (their routes merged into one router, their work in the background), and the order it stops in.
//! `clutch serve`, the faces' integration tests and the bench all build their daemons here, so they
//! run the same daemon.
//!
//! ```text
//! let mut app = App::builder(store)
//!     .engine(engine_options)
//!     .gateway(gateway_options)
//!     .face(face::Mcp(mcp_options))
//!     .face(face::Push(push_options))
//!     .build()
//!     .await?;
//! app.listen(listener);
//! app.stop().await?;
//! ```

pub mod face;

use std::future::Future;
use std::io;
use std::sync::Arc;

use axum::Router;
use clutch_core::{Engine, Handle, Running};
use clutch_store::Backend;
use tokio::net::TcpListener;
use tokio::sync::oneshot;
use tokio::task::JoinHandle;

use crate::face::Face;

pub type Result<T, E = Error> = std::result::Result<T, E>;

#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("cannot rebuild the engine's state from the event log")]
    Start(#[source] clutch_core::Error),
    /// A face could not make its routes.
    #[error("{face}: {error}")]
    Face { face: &'static str, error: face::Error },
    #[error("the HTTP server failed")]
    Http(#[source] io::Error),
    #[error("the core failed while stopping")]
    Stopping(#[source] clutch_core::Error),
}

/// How a daemon is put together; [`App::builder`] starts one.
pub struct Builder {
    store: Arc<dyn Backend>,
    core: clutch_core::log::Options,
    engine: clutch_core::engine::Options,
    gateway: Option<clutch_gateway::Options>,
    faces: Vec<Box<dyn Face>>,
}

impl Builder {
    /// The event log's options (batches, queues, subscriber buffers, artifact limit).
    pub fn core(mut self, options: clutch_core::log::Options) -> Builder {
        self.core = options;
        self
    }

    /// The engine's options: timers, retries, the operator's policy, the outbound guard, the clock.
    pub fn engine(mut self, options: clutch_core::engine::Options) -> Builder {
        self.engine = options;
        self
    }

    /// The HTTP API. It is also the host of every other face's routes: its browser policy,
    /// bearer-token check, body limit, request metrics and answers for unknown routes cover them too. Without it the router
    /// holds the faces' routes alone (the MCP face's tests), behind the default browser policy.
    pub fn gateway(mut self, options: clutch_gateway::Options) -> Builder {
        self.gateway = Some(options);
        self
    }

    /// A face: routes to merge, work to run in the background, or both.
    pub fn face(mut self, face: impl Face + 'static) -> Builder {
        self.faces.push(Box::new(face));
        self
    }

    /// Starts the core (rebuilding the engine from the log), makes every face's routes, then starts
    /// their background work. Nothing is served yet: see [`App::serve`] and [`App::listen`].
    pub async fn build(self) -> Result<App> {
        let core = clutch_core::start(self.store, self.core, self.engine).await.map_err(Error::Start)?;
        let (mut routes, mut open) = (Router::new(), Router::new());
        let mut refused = None;
        for face in &self.faces {
            match face.routes(&core).and_then(|guarded| Ok((guarded, face.open_routes(&core)?))) {
                Ok((guarded, unguarded)) => {
                    routes = routes.merge(guarded);
                    open = open.merge(unguarded);
                }
                Err(error) => {
                    refused = Some(Error::Face { face: face.name(), error });
                    break;
                }
            }
        }
        if let Some(refused) = refused {
            // Nothing was served or spawned: close the log cleanly before saying why.
            if let Err(e) = core.stop().await {
                tracing::warn!(error = %e, "the core failed while stopping");
            }
            return Err(refused);
        }
        let router = match self.gateway {
            Some(options) => clutch_gateway::router_with(core.log.clone(), core.engine.clone(), options, routes, open),
            // The faces' routes alone (their tests): behind the default browser policy all the same.
            None => clutch_gateway::browser::guard(routes.merge(open), clutch_gateway::browser::Policy::default()),
        };
        let mut workers: Vec<Task<()>> = self
            .faces
            .iter()
            .filter_map(|face| {
                let (stop, stopped) = oneshot::channel();
                let work = face.background(&core, face::Stop::new(stopped))?;
                Some(Task { name: face.name(), stop, task: tokio::spawn(work) })
            })
            .collect();
        // Retention of the log: a pass now and then, when the operator set a policy.
        let (stop, stopped) = oneshot::channel();
        let retention = clutch_core::retention::run(core.engine.clone(), face::Stop::new(stopped));
        workers.push(Task { name: "retention", stop, task: tokio::spawn(retention) });
        Ok(App { log: core.log.clone(), engine: core.engine.clone(), router, core, workers, servers: Vec::new() })
    }
}

/// A running daemon: the core and the faces' background work, with the router that serves them.
pub struct App {
    pub log: Handle,
    pub engine: Engine,
    router: Router,
    core: Running,
    workers: Vec<Task<()>>,
    /// HTTP served by [`App::listen`].
    servers: Vec<Task<io::Result<()>>>,
}

/// A spawned task and the way to ask it to stop.
struct Task<T> {
    name: &'static str,
    stop: oneshot::Sender<()>,
    task: JoinHandle<T>,
}

impl App {
    /// A daemon over `store`, with default core and engine options and no face yet.
    pub fn builder(store: Arc<dyn Backend>) -> Builder {
        Builder {
            store,
            core: clutch_core::log::Options::default(),
            engine: clutch_core::engine::Options::default(),
            gateway: None,
            faces: Vec::new(),
        }
    }

    /// Every face's routes, merged (under the gateway when there is one).
    pub fn router(&self) -> Router {
        self.router.clone()
    }

    /// Serves the router on `listener` until `shutdown` resolves; then live streams end and the
    /// future finishes when the requests in flight have. The connections are the gateway's
    /// ([`clutch_gateway::conn`]): `TCP_NODELAY` on every accepted socket, and a socket an SSE stream
    /// can borrow. The caller owns the serving task (the daemon bounds the drain and drops what is
    /// left); call [`App::stop`] after it has ended.
    pub fn serve(
        &self,
        listener: TcpListener,
        shutdown: impl Future<Output = ()> + Send + 'static,
    ) -> impl Future<Output = io::Result<()>> + Send + 'static {
        let (router, log) = (self.router.clone(), self.log.clone());
        async move {
            let listener = clutch_gateway::conn::Listener::new(listener);
            axum::serve(listener, router.into_make_service_with_connect_info::<clutch_gateway::conn::Lender>())
                .with_graceful_shutdown(async move {
                    shutdown.await;
                    log.close_streams();
                })
                .await
        }
    }

    /// Serves the router on `listener` in a task of its own, until [`App::stop`].
    pub fn listen(&mut self, listener: TcpListener) {
        let (stop, stopped) = oneshot::channel::<()>();
        let task = tokio::spawn(self.serve(listener, async move {
            let _ = stopped.await;
        }));
        self.servers.push(Task { name: "http", stop, task });
    }

    /// Stops in order: the HTTP served by [`App::listen`] (live streams end, requests in flight
    /// finish), then the faces' background work (push workers save their positions), then, with no
    /// request left that could append, the core (the reactor, a snapshot, and the writer, which
    /// commits what is queued and closes the store). A server's failure is reported after the core
    /// has stopped.
    pub async fn stop(self) -> Result<()> {
        let mut failed = None;
        for server in self.servers {
            let _ = server.stop.send(());
            let result = server.task.await.unwrap_or_else(|e| Err(io::Error::other(e.to_string())));
            if let Err(e) = result {
                failed.get_or_insert(Error::Http(e));
            }
        }
        for worker in self.workers {
            let _ = worker.stop.send(());
            if worker.task.await.is_err() {
                tracing::warn!(face = worker.name, "background work ended abnormally");
            }
        }
        self.core.stop().await.map_err(Error::Stopping)?;
        failed.map_or(Ok(()), Err)
    }
}
