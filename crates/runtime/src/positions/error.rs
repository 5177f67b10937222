//! Why the positions runner, or one of its sessions, stops: the component's errors (the log and
//! the engine failing under it), and the ways a session ends early, each with its code from the
//! protocol's one table.

use clutch_core::End;
use clutch_proto::ErrorCode;

/// What failed under the runner or a session.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The runner's inbox could not be opened.
    #[error("cannot read its inbox: {0}")]
    Inbox(#[source] clutch_core::Error),
    /// The runner's inbox ended under it.
    #[error("its inbox ended: {0:?}")]
    InboxEnded(End),
    /// The stream of a session's run ended under it.
    #[error("the session's stream ended: {0:?}")]
    Stream(End),
    /// The log refused or failed a session's write.
    #[error("could not write to the log: {0}")]
    Write(#[source] clutch_core::Error),
    /// The invocation is not one.
    #[error("the invocation: {0}")]
    Invocation(#[source] serde_json::Error),
    /// The router picks nobody for a capability.
    #[error(transparent)]
    Pick(clutch_core::Error),
    /// A re-executed session: the recording casts nobody for a capability.
    #[error("the recording casts nobody for {0}")]
    NotCast(String),
    /// The engine refused to register an agent spawned for a session.
    #[error(transparent)]
    Register(clutch_core::Error),
}

/// Why a session stopped early.
#[derive(Debug)]
pub(super) enum Halt {
    /// Its task was cancelled (by whom).
    Cancelled(String),
    TimedOut,
    /// It failed: the task's error code, and why.
    Failed(ErrorCode, String),
    /// The daemon is stopping: the session is left as it is, to go on after the restart exactly as
    /// after a crash (nothing is written, no turn cancelled, no member removed).
    Shutdown,
}

impl Halt {
    /// A role the pattern needs has no member.
    pub(super) fn no_members() -> Halt {
        Halt::Failed(ErrorCode::NoAgentForRole, "the position's roles have no agents".into())
    }

    /// Every turn of a round failed.
    pub(super) fn all_failed() -> Halt {
        Halt::Failed(ErrorCode::AllAgentsFailed, "every agent of the session failed its turn".into())
    }
}
