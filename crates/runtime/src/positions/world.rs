//! Where a session's driver writes and what it reads, as `work::Env` is for an agent's loop: the
//! daemon's log and engine (`live`), or a recorded session re-executed (`replay`); the patterns'
//! tests give it a script.

use std::collections::{HashMap, HashSet};
use std::future::Future;

use clutch_proto::{AgentCard, Message};
use serde_json::Value;
use tokio::time::Instant;

use super::error::Error;

/// What a session's driver needs from the world.
pub(super) trait World: Send + Sync {
    /// The next event of the session's run; `None` when `until` came first (in a replay: when the
    /// recording's next event is one the runner wrote that the driver has not written yet, since
    /// then the runner stopped waiting; or when the recording ends).
    fn next(&mut self, until: Option<Instant>) -> impl Future<Output = Result<Option<Message>, Error>> + Send;
    /// Writes `m` under `key` (its `meta.session_key`); `seen` is what the session has read of its
    /// run. Answers the task id it carries: the one the key gave before when the log already holds
    /// it (a restart), or the recorded one in a replay, which compares instead of writing.
    fn write(&mut self, key: &str, m: Message, seen: &Seen) -> impl Future<Output = Result<Written, Error>> + Send;
    /// The daemon has begun stopping (its streams end, its log soon refuses appends).
    fn closing(&self) -> bool;
    /// The agent that plays `role` for `capability`, none of `taken`: the router's pick (live), or
    /// the one the recording's records say it picked (a replay). Answers it, and the cast's record.
    fn pick(&self, role: &str, capability: &str, taken: &[String]) -> Result<(String, Value), Error>;
    /// Registers an agent spawned for the session, unless it is registered (a restart).
    fn spawn(&self, card: &AgentCard) -> impl Future<Output = Result<(), Error>> + Send;
    /// Removes an agent spawned for the session, at its end.
    fn remove(&self, agent_id: &str) -> impl Future<Output = ()> + Send;
}

/// How a write went.
#[derive(Debug)]
pub(super) enum Written {
    /// Written now (compared, in a replay): the task id it carries.
    Now(String),
    /// The log held it already: the task id it carried then.
    Before(String),
}

/// What a session has read of its run, and written: the runner's keys, and the turn each turn's
/// key gave.
#[derive(Debug, Default)]
pub(super) struct Seen {
    pub keys: HashSet<String>,
    /// Turn key → its task id.
    pub turns: HashMap<String, String>,
}
