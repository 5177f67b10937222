//! A session's world in the daemon: its run followed in the log, its writes appended to the log
//! (each once, under its key), its members cast by the router and spawned in the engine.

use clutch_core::session::SESSION_KEY;
use clutch_core::{Engine, Handle, Subscription};
use clutch_proto::{AgentCard, Message};
use serde_json::{Value, json};
use tokio::time::Instant;

use super::error::Error;
use super::world::{Seen, World, Written};

/// The daemon's log and engine, and the session's run followed from where it was read up to.
pub(super) struct Live {
    log: Handle,
    engine: Engine,
    sub: Box<Subscription>,
}

impl Live {
    pub(super) fn new(log: Handle, engine: Engine, sub: Subscription) -> Live {
        Live { log, engine, sub: Box::new(sub) }
    }
}

impl World for Live {
    async fn next(&mut self, until: Option<Instant>) -> Result<Option<Message>, Error> {
        loop {
            let event = match until {
                Some(t) => match tokio::time::timeout_at(t, self.sub.next()).await {
                    Ok(event) => event,
                    Err(_) => return Ok(None),
                },
                None => self.sub.next().await,
            };
            // An event that is not a message changes nothing the session waits for.
            if let Ok(m) = event.map_err(Error::Stream)?.message() {
                return Ok(Some(m));
            }
        }
    }

    async fn write(&mut self, key: &str, mut m: Message, seen: &Seen) -> Result<Written, Error> {
        if let Some(task) = seen.turns.get(key) {
            return Ok(Written::Before(task.clone()));
        }
        if seen.keys.contains(key) {
            return Ok(Written::Before(m.task_id));
        }
        m.meta.insert(SESSION_KEY.into(), Value::from(key));
        m.idempotency_key = Some(format!("positions:{}:{key}", m.run_id));
        let task = m.task_id.clone();
        self.log.append_one(m).await.map_err(Error::Write)?;
        Ok(Written::Now(task))
    }

    fn closing(&self) -> bool {
        self.log.is_closing()
    }

    fn pick(&self, role: &str, capability: &str, taken: &[String]) -> Result<(String, Value), Error> {
        let d = self.engine.pick(&[capability.to_owned()], taken).map_err(Error::Pick)?;
        let why = json!({"role": role, "requires": capability, "agent": d.selected, "reason": d.reason, "candidates": d.candidates});
        Ok((d.selected, why))
    }

    async fn spawn(&self, card: &AgentCard) -> Result<(), Error> {
        if self.engine.agent(&card.agent_id).is_none() {
            self.engine.register(card).await.map_err(Error::Register)?;
        }
        Ok(())
    }

    async fn remove(&self, agent_id: &str) {
        if let Err(e) = self.engine.unregister(agent_id).await {
            tracing::debug!(agent_id = %agent_id, error = %e, "a spawned agent was already gone");
        }
    }
}
