//! The engine's state machine without the log, for tests (feature `testing`): messages are vetted
//! and applied one by one as the writer's gate would, at the time of the options' clock (a manual
//! one in tests), and [`Machine::react`] returns what the reactor would append at that time, each
//! message vetted and applied too. A test reads the state and the emitted messages directly: no
//! store, no subscription, no waiting.

use super::*;

/// The engine's state and its rules, driven by hand.
pub struct Machine {
    state: State,
    options: Options,
}

impl Machine {
    pub fn new(options: Options) -> Machine {
        let state = State { schemas: options.policy.schemas().clone(), ..State::default() };
        Machine { state, options }
    }

    /// Moves `message` through the gate as a client's message (the daemon's own sender and kinds
    /// are refused) and, when it passes, applies it as the next event, stamped with the clock's
    /// time. Answers its `seq`.
    pub fn submit(&mut self, message: Message) -> Result<u64, Refusal> {
        reserved(&message)?;
        self.append(message).map(|(seq, _)| seq)
    }

    /// Registers (or replaces) an agent's card, as [`Engine::register`] does.
    pub fn register(&mut self, card: &AgentCard) -> Result<u64, Refusal> {
        let exists = self.state.agents.get(&card.agent_id).is_some_and(|a| a.status != Status::Removed);
        let kind = if exists { MessageType::AgentUpdate } else { MessageType::AgentRegister };
        let Ok(Value::Object(payload)) = serde_json::to_value(card) else {
            return Err(Refusal::new(ErrorCode::ValidationFailed, "the card is not a JSON object"));
        };
        let mut message = system_message(kind, Vec::new(), payload);
        message.from.agent_id = card.agent_id.clone();
        self.append(message).map(|(seq, _)| seq)
    }

    /// A sign of life from `agent_id` at the clock's time, as [`Engine::heartbeat`] takes it: not
    /// stored, but an agent that was stale or offline is online again, as an event (returned).
    pub fn heartbeat(&mut self, agent_id: &str) -> Option<Message> {
        let now = self.options.clock.now_ms();
        let agent = self.state.agents.get_mut(agent_id)?;
        agent.last_seen_ms = now;
        let previous = agent.status;
        if matches!(previous, Status::Online | Status::Removed) {
            return None;
        }
        self.append(status_message(agent_id, Status::Online, previous)).ok().map(|(_, stored)| stored)
    }

    /// What the reactor appends at the clock's time (routing decisions, deliveries, timeouts, status
    /// changes, budget notices), until it has nothing more to do: each message as stored (the gate
    /// refuses some, as it would in the log; those are left out).
    pub fn react(&mut self) -> Vec<Message> {
        let mut emitted = Vec::new();
        // Each round changes the state the next one reads; a round with nothing to do ends it.
        for _ in 0..1000 {
            let (actions, _) = self.state.collect(&self.options, self.options.clock.now_ms());
            self.state.evicted.clear();
            if actions.is_empty() {
                return emitted;
            }
            for action in actions {
                for message in action.messages {
                    if let Ok((_, stored)) = self.append(message) {
                        emitted.push(stored);
                    }
                }
            }
        }
        panic!("the reactor did not settle within 1000 rounds");
    }

    /// A task as the engine shows it.
    pub fn task(&self, task_id: &str) -> Option<crate::view::Task> {
        self.state.tasks.get(task_id).map(task_view)
    }

    /// An agent as the engine shows it.
    pub fn agent(&self, agent_id: &str) -> Option<crate::view::Agent> {
        self.state.agents.get(agent_id).map(|a| agent_view(&self.options, a))
    }

    /// The `seq` of the last event applied.
    pub fn seq(&self) -> u64 {
        self.state.seq
    }

    /// How many times a queued task was woken to be routed again.
    pub fn woken(&self) -> u64 {
        self.state.woken
    }

    /// Vets one message alone and applies it at the next `seq`, stamped with the clock's time.
    fn append(&mut self, mut message: Message) -> Result<(u64, Message), Refusal> {
        let now = self.options.clock.now_ms();
        message.ts =
            clutch_proto::validate::format_ts(SystemTime::UNIX_EPOCH + Duration::from_millis(now.max(0) as u64));
        let mut staged = HashMap::new();
        let mut flows = workflow::Stage::default();
        self.state.check(&self.options, &mut staged, &mut flows, &message)?;
        let seq = self.state.seq + 1;
        self.state.apply(&self.options, seq, &message);
        Ok((seq, message))
    }
}
