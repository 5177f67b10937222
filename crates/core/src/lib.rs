//! The orchestration core: the event log service (one writer, group commit), the live bus with
//! catch-up subscriptions, the engine (agent registry, router, task state, delivery timers, budgets)
//! that keeps its state in step with the log, the payload schema registry (`schemas`) and the policy
//! configuration (`config`), durable workflows (`workflow`), and the typed shapes it shows (`view`)
//! and writes (`payload`), whose schemas are published (`published`). It knows nothing of HTTP, SQL
//! or the CLI.

pub mod access;
pub mod adapter;
pub mod availability;
pub mod clock;
pub mod config;
pub mod dispatch;
pub mod engine;
pub mod guard;
pub mod inbox;
pub mod lists;
pub mod log;
pub mod metrics;
pub mod options;
pub mod payload;
pub mod published;
pub mod push;
pub mod registry;
pub mod retention;
pub mod retention_policy;
pub mod roots;
pub mod router;
mod running;
pub mod schemas;
pub mod session;
mod stream;
pub mod supervise;
pub mod tasks;
pub mod throttle;
pub mod tool;
pub mod view;
pub mod workflow;

pub use engine::Engine;
pub use log::{Gate, Handle, Service};
pub use running::{Running, start};
pub use stream::direct::{self, Feed, Out, Socket};
pub use stream::{End, Live, Subscription, Wire};

use clutch_proto::ErrorCode;

pub type Result<T, E = Error> = std::result::Result<T, E>;

#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error(transparent)]
    Store(#[from] clutch_store::Error),
    /// The daemon is shutting down and takes no new work.
    #[error("the daemon is shutting down")]
    ShuttingDown,
    #[error("the artifact has {size} bytes, more than the limit of {limit} bytes")]
    ArtifactTooLarge { size: u64, limit: u64 },
    #[error("{}", .0.message)]
    Refused(Refusal),
    /// A background task of the core panicked.
    #[error("a core task failed: {0}")]
    Task(String),
    /// Retention could not write a run's archive (nothing of the run was removed).
    #[error("cannot write a retention archive: {0}")]
    Archive(String),
}

impl Error {
    pub fn code(&self) -> ErrorCode {
        match self {
            Error::Store(e) => e.kind(),
            Error::ShuttingDown => ErrorCode::Unavailable,
            Error::ArtifactTooLarge { .. } => ErrorCode::PayloadTooLarge,
            Error::Refused(r) => r.code,
            Error::Task(_) | Error::Archive(_) => ErrorCode::Internal,
        }
    }

    /// The error body every face answers with. Store and task failures are answered without their
    /// details, which were logged where they happened: converting logs nothing.
    pub fn body(&self) -> Refusal {
        match self {
            Error::Store(clutch_store::Error::IdConflict { id, seq }) => {
                Refusal::new(ErrorCode::IdConflict, self.to_string()).field("id").hint(format!(
                    "message {id} is stored at seq {seq}; a retry must repeat the original exactly, new content needs a new id"
                ))
            }
            Error::ArtifactTooLarge { .. } => Refusal::new(ErrorCode::PayloadTooLarge, self.to_string()),
            Error::ShuttingDown => Refusal::new(ErrorCode::Unavailable, "the daemon is shutting down; retry shortly"),
            Error::Refused(r) => r.clone(),
            Error::Task(_) => Refusal::new(ErrorCode::Internal, "an internal task failed (details in the daemon log)"),
            Error::Archive(_) => Refusal::new(
                ErrorCode::Internal,
                "cannot write a retention archive; nothing was removed (details in the daemon log)",
            ),
            Error::Store(inner) => Refusal::new(
                inner.kind(),
                "the event store failed; the request was not applied (details in the daemon log)",
            ),
        }
    }

    /// A background task's failure, logged here, where it happened.
    pub(crate) fn task(detail: impl std::fmt::Display) -> Error {
        tracing::error!(error = %detail, "core task failure");
        Error::Task(detail.to_string())
    }
}

/// Why the engine refuses a message or a request: the protocol's one error body (a stable code, what
/// is wrong, the field at fault, every problem, what to do next), so every face answers it as it is.
pub use clutch_proto::error::ErrorBody as Refusal;

impl From<Refusal> for Error {
    fn from(r: Refusal) -> Error {
        Error::Refused(r)
    }
}

/// Exponential backoff with ±20% jitter: `base` doubled per failure after the first, at most `max`.
/// The jitter comes from `seed`, so the same seed and failure count always give the same delay.
pub fn backoff(base: std::time::Duration, max: std::time::Duration, failures: u32, seed: u64) -> std::time::Duration {
    let delay = base.saturating_mul(1 << failures.saturating_sub(1).min(16)).min(max);
    let mix = seed.wrapping_add(u64::from(failures)).wrapping_mul(0x9e37_79b9_7f4a_7c15);
    delay.mul_f64(0.8 + ((mix >> 32) % 401) as f64 / 1000.0)
}
