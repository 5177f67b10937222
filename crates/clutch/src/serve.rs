//! `clutch serve`: opens the store the config names, builds the daemon over it (`clutch-app`: core,
//! HTTP API, MCP endpoints, push delivery), serves until SIGINT or SIGTERM, then drains in order:
//! streams end, requests in flight finish (bounded), push workers save their positions, queued
//! appends are committed and the store is closed.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{Context, bail};
use clutch_app::{App, face};
use clutch_core::config::Policy;
use clutch_store::Backend;
use tokio::net::TcpListener;
use tokio::sync::oneshot;

use crate::config::{Config, Database, Loaded};

/// How long requests in flight may take to finish after a shutdown signal.
const DRAIN_TIMEOUT: Duration = Duration::from_secs(10);
/// How long the event log may take to commit what is queued and close the store.
const CLOSE_TIMEOUT: Duration = Duration::from_secs(30);
/// Connections the PostgreSQL store keeps.
const PG_POOL_SIZE: usize = 8;

pub async fn run(loaded: Loaded, policy: Policy) -> anyhow::Result<()> {
    let started = Instant::now();
    let Loaded { config, file, deprecated } = loaded;
    if let Some(file) = &file {
        tracing::info!(path = %file.display(), "read config file");
    }
    for note in &deprecated {
        tracing::warn!("{note}");
    }
    if let Some(dir) = &config.config_dir {
        tracing::info!(
            path = %dir.display(),
            agents = policy.org.agents.len(),
            tokens = policy.org.tokens.len(),
            workflows = policy.workflows.workflows.len(),
            "read policy files"
        );
    }
    let policy = Arc::new(policy);
    let tokens: Option<Arc<dyn clutch_core::access::Tokens>> =
        policy.tokens_required().then(|| policy.clone() as Arc<dyn clutch_core::access::Tokens>);
    check_exposure(config.listen, tokens.is_some())?;
    // Handlers go in before anything can be announced: a signal from then on means a clean stop.
    let mut signals = Signals::new().context("cannot install signal handlers")?;

    let backend = tokio::select! {
        backend = open_store(&config) => backend?,
        name = signals.recv() => {
            tracing::info!(signal = name, "stopped while opening the store");
            return Ok(());
        }
    };
    let workspace_roots = config.workspace_roots()?;
    let engine = config.engine_options(policy, workspace_roots)?;
    let o = &config.outbound;
    if o.allow_loopback || !o.allow.is_empty() || !o.resolve.is_empty() {
        tracing::info!(
            allow = ?o.allow,
            allow_loopback = o.allow_loopback,
            pinned = o.resolve.len(),
            "the outbound guard allows more than public addresses"
        );
    }
    if !config.listen.ip().is_loopback() {
        tracing::info!(
            allowed_hosts = ?config.http.allowed_hosts,
            "listening beyond loopback: requests to any of the machine's addresses are served, by name only for \
             loopback names and http.allowed_hosts"
        );
    }
    let mut gateway = config.gateway_options();
    gateway.tokens = tokens;
    let mut builder = App::builder(backend)
        .core(config.core_options())
        .engine(engine)
        .gateway(gateway)
        .face(face::Mcp(config.mcp_options()))
        .face(face::A2a(config.a2a_options()?))
        .face(face::Push(clutch_core::push::Options::default()));
    if !(config.mcp_servers.is_empty() && config.hooks.is_empty() && config.webhooks.is_empty()) {
        builder = builder.face(face::Tools {
            servers: config.mcp_servers.clone(),
            hooks: config.hooks.clone(),
            webhooks: config.webhooks.clone(),
            dispatch: clutch_core::dispatch::Options::default(),
        });
    }
    if !(config.providers.is_empty() && config.llm_agents.is_empty()) {
        // Keys are read now: a variable that is not set stops the start, named.
        let runtime = clutch_runtime::Runtime::new(config.providers.clone(), config.llm_agents.clone())?;
        builder = builder.face(face::Runtime::new(runtime));
    }
    builder = builder.face(face::Positions(config.positions_options()?));
    let app = builder.build().await?;
    let served = serve(&config, &app, signals, started).await;

    // With no request left that could append, push workers save their positions, then the engine
    // and the log writer stop.
    match tokio::time::timeout(CLOSE_TIMEOUT, app.stop()).await {
        Ok(Ok(())) => {}
        Ok(Err(e)) => return Err(e.into()),
        Err(_) => bail!("the event log did not close within {} s", CLOSE_TIMEOUT.as_secs()),
    }
    served?;
    tracing::info!("stopped");
    Ok(())
}

/// Refuses a non-loopback address unless API tokens are configured.
fn check_exposure(listen: SocketAddr, has_tokens: bool) -> anyhow::Result<()> {
    if listen.ip().is_loopback() || has_tokens {
        return Ok(());
    }
    bail!(
        "binding {listen} would expose the API without authentication; configure API tokens in org.yaml \
         (`tokens:`, see README) or bind 127.0.0.1"
    );
}

async fn open_store(config: &Config) -> anyhow::Result<Arc<dyn Backend>> {
    let opened = Instant::now();
    let backend: Arc<dyn Backend> = match config.database()? {
        Database::Sqlite(dir) => {
            let shown = dir.display().to_string();
            let store = tokio::task::spawn_blocking(move || clutch_store_sqlite::Store::open(&dir))
                .await
                .context("opening the SQLite store panicked")?
                .context("cannot open the SQLite store")?;
            tracing::info!(path = %shown, elapsed_ms = opened.elapsed().as_millis() as u64, "opened SQLite store");
            Arc::new(store)
        }
        Database::Postgres(url) => {
            let options =
                clutch_store_postgres::Options { schema: None, pool_size: PG_POOL_SIZE, writer: true, lists: true };
            let store =
                clutch_store_postgres::Store::open(&url, options).await.context("cannot open the PostgreSQL store")?;
            tracing::info!(elapsed_ms = opened.elapsed().as_millis() as u64, "opened PostgreSQL store");
            Arc::new(store)
        }
    };
    Ok(backend)
}

/// Binds, announces the address, and serves until a signal and the drain that follows are done.
async fn serve(config: &Config, app: &App, mut signals: Signals, started: Instant) -> anyhow::Result<()> {
    let listener = TcpListener::bind(config.listen).await.map_err(|e| {
        let hint = if e.kind() == std::io::ErrorKind::AddrInUse {
            "; is another daemon running? Choose another address with --listen"
        } else {
            ""
        };
        anyhow::anyhow!("cannot listen on {}: {e}{hint}", config.listen)
    })?;
    let addr = listener.local_addr().context("cannot read the bound address")?;

    let (signalled, on_signal) = oneshot::channel::<Signals>();
    let graceful = async move {
        let name = signals.recv().await;
        tracing::info!(signal = name, "shutting down: ending streams, finishing requests in flight");
        let _ = signalled.send(signals);
    };
    let mut server = tokio::spawn(app.serve(listener, graceful));

    eprintln!("clutch: listening on http://{addr}");
    tracing::info!(%addr, startup_ms = started.elapsed().as_millis() as u64, "ready");

    let mut signals = tokio::select! {
        result = &mut server => return result.context("the HTTP server panicked")?.context("the HTTP server failed"),
        signals = on_signal => match signals {
            Ok(signals) => signals,
            // The server ended without a signal; its own result says why.
            Err(_) => return server.await.context("the HTTP server panicked")?.context("the HTTP server failed"),
        },
    };
    tokio::select! {
        result = &mut server => result.context("the HTTP server panicked")?.context("the HTTP server failed")?,
        () = tokio::time::sleep(DRAIN_TIMEOUT) => {
            tracing::warn!(timeout_secs = DRAIN_TIMEOUT.as_secs(), "requests still in flight after the drain timeout; dropping them");
            server.abort();
        }
        name = signals.recv() => {
            tracing::warn!(signal = name, "second signal: dropping requests in flight");
            server.abort();
        }
    }
    Ok(())
}

/// SIGINT and SIGTERM.
struct Signals {
    #[cfg(unix)]
    interrupt: tokio::signal::unix::Signal,
    #[cfg(unix)]
    terminate: tokio::signal::unix::Signal,
}

impl Signals {
    #[cfg(unix)]
    fn new() -> std::io::Result<Signals> {
        use tokio::signal::unix::{SignalKind, signal};
        Ok(Signals { interrupt: signal(SignalKind::interrupt())?, terminate: signal(SignalKind::terminate())? })
    }

    #[cfg(not(unix))]
    fn new() -> std::io::Result<Signals> {
        Ok(Signals {})
    }

    /// Waits for the next signal and names it.
    #[cfg(unix)]
    async fn recv(&mut self) -> &'static str {
        tokio::select! {
            _ = self.interrupt.recv() => "SIGINT",
            _ = self.terminate.recv() => "SIGTERM",
        }
    }

    #[cfg(not(unix))]
    async fn recv(&mut self) -> &'static str {
        let _ = tokio::signal::ctrl_c().await;
        "Ctrl-C"
    }
}
