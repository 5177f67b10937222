//! The engine's client API: messages from clients, agent registration and heartbeats, schema
//! registration, signatures, and refusals made visible.

use super::*;
use crate::{payload, view};

impl Engine {
    /// Appends messages from a client (HTTP, MCP...). The daemon's own sender and reserved kinds are
    /// refused; heartbeats are recorded without being stored; a `tool.call` refused by policy is
    /// answered with a `tool.error` in the log.
    pub async fn submit(&self, messages: Vec<Message>) -> Result<Vec<Result<Ack>>> {
        let mut answers: Vec<Option<Result<Ack>>> = (0..messages.len()).map(|_| None).collect();
        let mut to_store = Vec::new();
        let mut positions = Vec::new();
        for (i, message) in messages.into_iter().enumerate() {
            if let Err(refusal) = reserved(&message) {
                answers[i] = Some(Err(refusal.into()));
            } else if message.kind == MessageType::AgentHeartbeat {
                answers[i] = Some(self.heartbeat(&message.from.agent_id).await.map(Ack::Heartbeat));
            } else if let Some(Err(refusal)) = self.check_message_endpoints(&message).await {
                answers[i] = Some(Err(refusal.into()));
            } else if let Err(e) = self.recall(&message).await {
                answers[i] = Some(Err(e));
            } else {
                positions.push(i);
                to_store.push(message);
            }
        }
        let tool_calls: Vec<Option<Message>> =
            to_store.iter().map(|m| (m.kind == MessageType::ToolCall).then(|| m.clone())).collect();
        let outcomes = self.inner.log.append(to_store).await?;
        for ((i, outcome), call) in positions.into_iter().zip(outcomes).zip(tool_calls) {
            if let (Err(Error::Refused(r)), Some(call)) = (&outcome, call)
                && r.code == ErrorCode::Forbidden
            {
                self.answer_forbidden_call(&call, r).await;
            }
            answers[i] = Some(outcome.map(Ack::Stored));
        }
        Ok(answers.into_iter().map(|a| a.expect("every message is answered")).collect())
    }

    /// For a card sent as a message (`agent.register`, `agent.update`): its endpoints checked as
    /// [`Engine::register`] checks them. `None` for other messages and for payloads that are no
    /// card (the gate refuses those).
    pub(super) async fn check_message_endpoints(&self, message: &Message) -> Option<std::result::Result<(), Refusal>> {
        if !matches!(message.kind, MessageType::AgentRegister | MessageType::AgentUpdate)
            || !message.payload.contains_key("endpoints")
        {
            return None;
        }
        let card = clutch_proto::validate::agent_card(&Value::Object(message.payload.clone())).ok()?;
        Some(self.check_endpoints(&card, "payload.").await)
    }

    /// Registers (or replaces) an agent's card: an `agent.register` event from the agent.
    pub async fn register(&self, card: &AgentCard) -> Result<Outcome> {
        self.check_endpoints(card, "").await?;
        let exists = self.state().agents.get(&card.agent_id).is_some_and(|a| a.status != Status::Removed);
        let kind = if exists { MessageType::AgentUpdate } else { MessageType::AgentRegister };
        let payload = match serde_json::to_value(card) {
            Ok(Value::Object(map)) => map,
            _ => return Err(Refusal::new(ErrorCode::ValidationFailed, "the card is not a JSON object").into()),
        };
        let mut message = system_message(kind, Vec::new(), payload);
        message.from.agent_id = card.agent_id.clone();
        self.inner.log.append_one(message).await
    }

    /// Checks every endpoint of `card` against the outbound guard, its names resolved now (the gate
    /// checks what it can without a lookup; connections are checked again). `prefix` leads each
    /// endpoint's path in a refusal (`payload.` for a message's card).
    pub(super) async fn check_endpoints(&self, card: &AgentCard, prefix: &str) -> Result<(), Refusal> {
        for (name, endpoint) in &card.endpoints {
            let field = format!("{prefix}endpoints.{name}.url");
            match self.inner.options.outbound.check_target(&endpoint.url).await {
                Ok(Ok(())) => {}
                Ok(Err(refused)) => return Err(refused.refusal(&field)),
                Err(why) => {
                    return Err(Refusal::new(ErrorCode::ValidationFailed, format!("{field}: {why}")).field(field));
                }
            }
        }
        Ok(())
    }

    /// Unregisters an agent: its status becomes `removed`; its unfinished tasks are routed again.
    pub async fn unregister(&self, agent_id: &str) -> Result<Outcome> {
        let previous = self.agent_status(agent_id)?;
        if previous == Status::Removed {
            return Err(not_found(agent_id));
        }
        self.inner.log.append_one(status_message(agent_id, Status::Removed, previous)).await
    }

    /// Records a sign of life. An agent that had gone stale or offline is online again (an event).
    pub async fn heartbeat(&self, agent_id: &str) -> Result<view::Heartbeat> {
        let previous = self.agent_status(agent_id)?;
        if previous == Status::Removed {
            return Err(not_found(agent_id));
        }
        if let Some(agent) = self.state().agents.get_mut(agent_id) {
            agent.last_seen_ms = self.inner.options.clock.now_ms();
        }
        if previous != Status::Online {
            self.inner.log.append_one(status_message(agent_id, Status::Online, previous)).await?;
        }
        Ok(view::Heartbeat {
            agent_id: agent_id.to_owned(),
            status: Status::Online,
            next_heartbeat_sec: self.inner.options.heartbeat_interval.as_secs().max(1),
        })
    }

    /// Agents that take their messages by push over `protocol`: (agent id, the card's
    /// `endpoints.<protocol>.url`, the seq of the card that named it).
    pub fn push_targets(&self, protocol: &str) -> Vec<(String, String, u64)> {
        let state = self.state();
        state
            .agents
            .values()
            .filter(|a| a.status != Status::Removed)
            .filter_map(|a| {
                a.card.endpoints.get(protocol).map(|e| (a.card.agent_id.clone(), e.url.clone(), a.card_seq))
            })
            .collect()
    }

    /// Registers a payload schema (an event, so it survives restarts). Registering the same schema
    /// again changes nothing; anything the registry refuses is `VALIDATION_FAILED` with every problem.
    pub async fn register_schema(
        &self,
        payload_type: &str,
        schema_ref: Option<&str>,
        schema: Value,
    ) -> Result<Option<view::Schema>> {
        let existed = {
            let state = self.state();
            let existed = state.schemas.get(payload_type).is_some();
            let mut trial = state.schemas.clone();
            drop(state);
            trial
                .register(payload_type, schema_ref, schema.clone())
                .map_err(|problems| invalid_payload("the schema cannot be registered".into(), problems))?;
            existed
        };
        if !existed {
            let payload = payload::object(&payload::SchemaRegistration {
                payload_type: payload_type.to_owned(),
                schema_ref: schema_ref.map(str::to_owned),
                schema,
            });
            let mut m = system_message(MessageType::ChatSystem, Vec::new(), payload);
            m.payload_type = Some(SCHEMA_PAYLOAD.to_owned());
            self.inner.log.append_one(m).await?;
        }
        Ok(self.state().schemas.get(payload_type).map(schema_view))
    }

    /// Every payload schema: built in, from workflows.yaml, registered.
    pub fn schemas(&self) -> Vec<view::Schema> {
        self.state().schemas.list().map(schema_view).collect()
    }

    /// One schema document by payload type or schema ref.
    pub fn schema(&self, name: &str) -> Option<Value> {
        let state = self.state();
        state.schemas.get(name).or_else(|| state.schemas.by_ref(name)).map(|s| s.document().clone())
    }

    /// Checks a message's signature as the client sent it (`raw`, before the daemon filled anything):
    /// a signed message must verify against a key org.yaml gives its sender; an unsigned one is
    /// refused when the policy requires its sender to sign. Refusals are `UNAUTHORIZED`.
    pub fn verify_signature(&self, raw: &Value, message: &Message) -> std::result::Result<(), Refusal> {
        let policy = &self.inner.options.policy;
        let from = &message.from.agent_id;
        let signed = message.security.as_ref().is_some_and(|s| s.auth.is_some());
        if !signed {
            if policy.requires_signature(from) {
                return Err(Refusal::new(ErrorCode::Unauthorized, format!("{from} must sign its messages"))
                    .field("security.auth")
                    .hint("sign the envelope with the agent's ed25519 key (see README, Message signatures)"));
            }
            return Ok(());
        }
        let refuse = |e: clutch_proto::sign::Error| {
            let mut r = Refusal::new(ErrorCode::Unauthorized, format!("signature refused: {e}"));
            r.field = Some(e.field().unwrap_or("security.auth").to_owned());
            r
        };
        let kid = clutch_proto::sign::kid(raw).map_err(refuse)?;
        let Some(key) = policy.key(from, kid) else {
            return Err(Refusal::new(ErrorCode::Unauthorized, format!("{from} has no key `{kid}` in org.yaml"))
                .field("security.auth.kid"));
        };
        clutch_proto::sign::verify(raw, key).map_err(refuse)
    }

    /// Makes a refusal visible to operators: a `chat.system` event (`clutch.refusal.v1`) in the
    /// system run, a warning in the log and the refusals counter. A flood of refusals cannot flood
    /// the log: past a budget they are only counted, and the next one recorded says how many
    /// were left out (`unrecorded_before`).
    pub async fn report_refusal(&self, message: &Message, refusal: &Refusal) {
        let metrics = self.inner.log.metrics();
        metrics.refusals.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let sender = &message.from.agent_id;
        let Some(unrecorded) = self
            .inner
            .refusal_budget_per_sender
            .take(sender)
            .and_then(|own| Some(own + self.inner.refusal_budget.take()?))
        else {
            metrics.refusals_unrecorded.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
            tracing::debug!(id = %message.id, from = %message.from.agent_id, "message refused (not recorded: over budget)");
            return;
        };
        tracing::warn!(
            id = %message.id, from = %message.from.agent_id, code = refusal.code.as_str(),
            reason = %refusal.message, unrecorded_before = unrecorded, "message refused"
        );
        let payload = payload::object(&payload::Refusal {
            code: refusal.code.as_str().to_owned(),
            message: refusal.message.clone(),
            claimed_from: message.from.agent_id.clone(),
            message_id: message.id.clone(),
            kind: message.kind,
            run_id: message.run_id.clone(),
            unrecorded_before: (unrecorded > 0).then_some(unrecorded),
        });
        let mut m = system_message(MessageType::ChatSystem, Vec::new(), payload);
        m.payload_type = Some(REFUSAL_PAYLOAD.to_owned());
        if let Err(e) = self.inner.log.append_one(m).await {
            tracing::warn!(error = %e, "could not record a refusal");
        }
    }

    pub(super) async fn answer_forbidden_call(&self, call: &Message, refusal: &Refusal) {
        // The caller has its answer already; the log's copy is for observers, within the budget.
        if self.inner.refusal_budget.take().is_none() {
            self.inner.log.metrics().refusals_unrecorded.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
            return;
        }
        let tool = tool_name(call).unwrap_or_default();
        let payload = payload::object(&payload::TaskError {
            code: ErrorCode::Forbidden.as_str().to_owned(),
            message: refusal.message.clone(),
            retryable: false,
            details: Some(Value::Object(payload::object(&payload::CallRef {
                tool: tool.to_owned(),
                call_id: call.id.clone(),
            }))),
            error: None,
        });
        let mut answer = derived(call, MessageType::ToolError, vec![call.from.agent_id.clone()], payload);
        answer.idempotency_key = Some(format!("clutch:forbidden:{}", call.id));
        if let Err(e) = self.inner.log.append_one(answer).await {
            tracing::warn!(error = %e, call_id = %call.id, "could not answer a refused tool call");
        }
    }
}
