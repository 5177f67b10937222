//! Brings a schema up to date on open: the embedded migrations, each applied once, tracked in
//! `clutch_migrations`, under an advisory lock so daemons starting together take turns.

use tokio_postgres::NoTls;

use crate::{MIGRATION_LOCK_CLASS, quote_ident};

/// The migrations in the order they apply; a version is never reused or edited once released.
const MIGRATIONS: &[(i64, &str)] = &[
    (1, include_str!("../migrations/0001_events.sql")),
    (2, include_str!("../migrations/0002_artifacts.sql")),
    (3, include_str!("../migrations/0003_recipients.sql")),
    (4, include_str!("../migrations/0004_cursors.sql")),
    (5, include_str!("../migrations/0005_snapshots.sql")),
    (6, include_str!("../migrations/0006_records.sql")),
    (7, include_str!("../migrations/0007_log_floor.sql")),
    (8, include_str!("../migrations/0008_lists.sql")),
    (9, include_str!("../migrations/0009_list_filters.sql")),
    (10, include_str!("../migrations/0010_lists_rederived.sql")),
];

pub(crate) enum Error {
    Connect(tokio_postgres::Error),
    Db(tokio_postgres::Error),
    TooNew { found: i64, known: i64 },
}

impl From<tokio_postgres::Error> for Error {
    fn from(e: tokio_postgres::Error) -> Self {
        Error::Db(e)
    }
}

/// Migrates `schema` on a connection of its own: the session-level advisory lock it takes is released
/// when that connection ends, whatever happens.
pub(crate) async fn run(config: &tokio_postgres::Config, schema: &str, lock_key: i32) -> Result<(), Error> {
    let (mut client, connection) = config.connect(NoTls).await.map_err(Error::Connect)?;
    let driver = tokio::spawn(async move {
        if let Err(error) = connection.await {
            tracing::warn!(error = %error, "PostgreSQL migration connection failed");
        }
    });
    client.execute("SELECT pg_advisory_lock($1::int4, $2::int4)", &[&MIGRATION_LOCK_CLASS, &lock_key]).await?;
    let result = apply(&mut client, schema).await;
    drop(client);
    // The connection ends once the client is gone; waiting for it releases the lock before we go on.
    if let Err(error) = driver.await {
        tracing::warn!(error = %error, "PostgreSQL migration connection task failed");
    }
    result
}

async fn apply(client: &mut tokio_postgres::Client, schema: &str) -> Result<(), Error> {
    // Checked before creating, so a role without CREATE on the database can use an existing schema.
    if client.query_opt("SELECT 1 FROM pg_namespace WHERE nspname = $1", &[&schema]).await?.is_none() {
        client.batch_execute(&format!("CREATE SCHEMA {}", quote_ident(schema))).await?;
        tracing::info!(schema, "created PostgreSQL schema");
    }
    client.batch_execute(&format!("SET search_path TO {}; SET synchronous_commit = on", quote_ident(schema))).await?;

    let tx = client.transaction().await?;
    tx.batch_execute(
        "CREATE TABLE IF NOT EXISTS clutch_migrations (
            version BIGINT PRIMARY KEY,
            applied_at TIMESTAMPTZ NOT NULL DEFAULT now()
        )",
    )
    .await?;
    let mut applied = Vec::new();
    for row in tx.query("SELECT version FROM clutch_migrations", &[]).await? {
        applied.push(row.try_get::<_, i64>(0)?);
    }
    let known = MIGRATIONS.last().map_or(0, |(version, _)| *version);
    if let Some(&found) = applied.iter().max()
        && found > known
    {
        return Err(Error::TooNew { found, known });
    }
    for (version, sql) in MIGRATIONS.iter().filter(|(version, _)| !applied.contains(version)) {
        tx.batch_execute(sql).await?;
        tx.execute("INSERT INTO clutch_migrations (version) VALUES ($1)", &[version]).await?;
        tracing::info!(schema, version, "applied PostgreSQL migration");
    }
    tx.commit().await?;
    Ok(())
}
