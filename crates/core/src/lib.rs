//! The orchestration core. For now: the event log service (one writer, group commit), the live bus
//! with catch-up subscriptions, the daemon's metrics, the payload schema registry (`schemas`) and the
//! policy configuration (`config`). It knows nothing of HTTP, SQL or the CLI.

pub mod config;
pub mod log;
pub mod metrics;
pub mod schemas;
mod stream;

pub use log::{Handle, Options, Service};
pub use stream::{End, Subscription};

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
}

impl Error {
    pub fn code(&self) -> ErrorCode {
        match self {
            Error::Store(e) => e.kind(),
            Error::ShuttingDown => ErrorCode::Unavailable,
            Error::ArtifactTooLarge { .. } => ErrorCode::PayloadTooLarge,
        }
    }
}
