//! Starting and stopping the core as one piece: the state is rebuilt from the log, the engine is put
//! on the writer's path, and on stop the engine's reactor ends before the writer commits what is
//! queued and closes the store.

use std::sync::Arc;

use clutch_store::Backend;
use tokio::sync::oneshot;
use tokio::task::JoinHandle;

use crate::engine::{self, Engine};
use crate::log::{self, Handle, Service};
use crate::{Error, Result};

/// The core, running: the event log's writer and the engine's reactor.
pub struct Running {
    pub log: Handle,
    pub engine: Engine,
    stop_engine: oneshot::Sender<()>,
    stop_log: oneshot::Sender<()>,
    engine_task: JoinHandle<()>,
    log_task: JoinHandle<()>,
}

/// Starts the core over `backend`: rebuilds the engine from the log, then starts both tasks.
pub async fn start(backend: Arc<dyn Backend>, log: log::Options, engine: engine::Options) -> Result<Running> {
    let (mut service, handle) = Service::new(backend, log);
    let engine = Engine::recover(handle.clone(), engine).await?;
    service.set_gate(engine.gate());
    let (stop_log, log_stop) = oneshot::channel::<()>();
    let log_task = service.spawn(async move {
        let _ = log_stop.await;
    });
    let (stop_engine, engine_stop) = oneshot::channel::<()>();
    let engine_task = tokio::spawn(engine.clone().run(async move {
        let _ = engine_stop.await;
    }));
    Ok(Running { log: handle, engine, stop_engine, stop_log, engine_task, log_task })
}

impl Running {
    /// Stops the reactor, then the writer (which commits what is queued and closes the store).
    pub async fn stop(self) -> Result<()> {
        let _ = self.stop_engine.send(());
        self.engine_task.await.map_err(Error::task)?;
        // What the writer commits after this is replayed on the next start.
        if let Err(e) = self.engine.save_snapshot().await {
            tracing::warn!(error = %e, "engine snapshot not saved on stop; the next start replays more of the log");
        }
        let _ = self.stop_log.send(());
        self.log_task.await.map_err(Error::task)?;
        Ok(())
    }
}
