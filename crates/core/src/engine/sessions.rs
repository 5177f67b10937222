//! The session operations every face serves (`sessions_send`, `sessions_list`, `sessions_history`):
//! messages between a position's members, checked on the writer's path by [`crate::session`].

use super::*;
use crate::session::{self, ALL, Invocation, MESSAGE_PAYLOAD, RUNNER, Said, WARNING_PAYLOAD, Warning};
use crate::{payload, view};
use clutch_proto::error::quote;

/// Messages `session_history` answers at most, and by default.
pub const HISTORY_MAX: usize = 1000;
pub const HISTORY_DEFAULT: usize = 50;

/// Registered agents an invocation's refusal names at most.
const NAMED_AGENTS_MAX: usize = 10;

impl Engine {
    /// The positions the runner serves, as it announced them; empty without a runner.
    pub fn positions(&self) -> Vec<Value> {
        self.inner.positions.read().unwrap_or_else(|e| e.into_inner()).clone()
    }

    /// What the positions runner announces when it starts: each position's name, pattern, roles,
    /// workflow and protocol (kept in memory, not in the log: the runner is part of the daemon).
    pub fn set_positions(&self, positions: Vec<Value>) {
        *self.inner.positions.write().unwrap_or_else(|e| e.into_inner()) = positions;
    }

    /// The tasks given to `assignee` (an agent id, registered or not) that have not ended, oldest
    /// first: what a component of the daemon takes up again after a restart. Scans every task.
    pub fn open_tasks_of(&self, assignee: &str) -> Vec<String> {
        let state = self.state();
        let mut open: Vec<(i64, String)> = state
            .tasks
            .values()
            .filter(|t| t.agent.as_deref() == Some(assignee) && !t.phase.is_terminal())
            .map(|t| (t.since_ms, t.id.clone()))
            .collect();
        open.sort();
        open.into_iter().map(|(_, id)| id).collect()
    }

    /// The agent the router would pick now for work that `requires` (capabilities, AND), leaving out
    /// the agents in `taken`: how a position's role named by a capability is cast. `attempt` is 0
    /// (no task is routed); `AGENT_NOT_FOUND` with every agent's reason when none can take it.
    pub fn pick(&self, requires: &[String], taken: &[String]) -> Result<payload::RoutingDecision> {
        let mut needs = Vec::new();
        for (i, r) in requires.iter().enumerate() {
            let need = router::Need::parse(r).map_err(|why| {
                Refusal::new(ErrorCode::ValidationFailed, format!("`{}` is no capability: {why}", quote(r)))
                    .field(format!("requires[{i}]"))
            })?;
            needs.push(need);
        }
        let ask = router::Ask { requires: needs, ..router::Ask::default() };
        let options = &self.inner.options;
        let state = self.state();
        let candidates = state.candidates(options, taken);
        let decision = router::route(&ask, &candidates);
        let names = |i: usize| candidates[i].profile.agent_id.clone();
        let excluded: BTreeMap<String, String> =
            decision.excluded.iter().map(|(i, e)| (names(*i), e.describe(&ask))).collect();
        let Some(chosen) = decision.selected else {
            let why: Vec<String> = excluded.iter().map(|(a, e)| format!("{a}: {e}")).collect();
            let why = if why.is_empty() { "no agent is registered".to_owned() } else { why.join("; ") };
            return Err(Refusal::new(
                ErrorCode::AgentNotFound,
                format!("no agent can take work requiring {}: {why}", requires.join(", ")),
            )
            .into());
        };
        Ok(payload::RoutingDecision {
            selected: names(chosen),
            candidates: decision.scored.iter().map(|(i, _)| names(*i)).collect(),
            scores: decision.scored.iter().map(|(i, s)| (names(*i), *s)).collect(),
            reason: decision.reason,
            excluded,
            attempt: 0,
        })
    }

    /// The position named `name`, as [`Engine::positions`] lists it.
    pub fn position(&self, name: &str) -> Result<Value> {
        let all = self.positions();
        if let Some(p) = all.iter().find(|p| p["name"] == name) {
            return Ok(p.clone());
        }
        let names: Vec<&str> = all.iter().filter_map(|p| p["name"].as_str()).collect();
        let hint = if names.is_empty() {
            "no position runner is registered yet".to_owned()
        } else {
            format!("known positions: {}", names.join(", "))
        };
        Err(Refusal::new(ErrorCode::PositionNotFound, format!("no position `{}`", clutch_proto::error::quote(name)))
            .field("position")
            .hint(hint)
            .into())
    }

    /// Invokes position `name` for `from`: a `task.request` to the runner, whose task stands for the
    /// session (its run is the session's id). Roles are checked against the position's.
    pub async fn position_invoke(&self, from: &str, name: &str, invocation: Invocation) -> Result<view::Invoked> {
        let position = self.position(name)?;
        let roles: Vec<String> = position["roles"]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(|r| r["name"].as_str())
            .map(str::to_owned)
            .collect();
        self.check_cast(name, &roles, &invocation)?;
        let run = invocation.run_id.clone().unwrap_or_else(|| clutch_proto::id::generate(clutch_proto::id::Kind::Run));
        let thread =
            invocation.thread_id.clone().unwrap_or_else(|| clutch_proto::id::generate(clutch_proto::id::Kind::Thread));
        let task = clutch_proto::id::generate(clutch_proto::id::Kind::Task);
        let mut payload = payload::object(&Invocation { run_id: None, thread_id: None, ..invocation });
        payload.insert("position".into(), Value::from(name));
        payload.insert("goal".into(), Value::from(format!("Run position {name}")));
        let mut m = Message::new(MessageType::TaskRequest, from, (&run, &thread, &task), payload);
        m.to = vec![Recipient { agent_id: RUNNER.into() }];
        let raw = serde_json::to_value(&m).unwrap_or_default();
        let m = clutch_proto::validate::message(&raw, &clutch_proto::validate::Defaults { now: SystemTime::now() })
            .map_err(|p| {
                let field = p.as_slice().first().map(|x| x.path.clone()).unwrap_or_default();
                Refusal::new(ErrorCode::ValidationFailed, p.to_string()).field(field)
            })?;
        match self.submit(vec![m]).await?.pop() {
            Some(Ok(_)) => Ok(view::Invoked {
                session_id: run,
                task_id: task,
                thread_id: thread,
                position: name.to_owned(),
                state: None,
                outcome: None,
            }),
            Some(Err(e)) => Err(e),
            None => Err(Error::Task("an invocation went unanswered".into())),
        }
    }

    /// What an invocation names, checked before anything is stored: each role one of the
    /// position's; each member an `agent:` id that is registered (not the daemon's own), a person
    /// (`user:NAME`) or a capability the router casts; nobody named twice (a member plays one role);
    /// `rounds` and `workers` at least 1. A named agent that does not exist would be given turns
    /// nobody takes, so it is refused here rather than found out when its turn times out.
    fn check_cast(&self, name: &str, roles: &[String], invocation: &Invocation) -> Result<()> {
        let refused = |code: ErrorCode, field: String, message: String| Refusal::new(code, message).field(field);
        for (key, value) in [("rounds", invocation.rounds), ("workers", invocation.workers)] {
            if value == Some(0) {
                return Err(
                    refused(ErrorCode::ValidationFailed, key.into(), format!("{key} must be at least 1")).into()
                );
            }
        }
        let mut named: BTreeMap<&str, &str> = BTreeMap::new();
        let mut cast: BTreeMap<String, &str> = BTreeMap::new();
        for (role, agents) in &invocation.agents {
            let field = format!("agents.{role}");
            if !roles.iter().any(|r| r.eq_ignore_ascii_case(role)) {
                let why = format!("position {name} has no role `{}` (its roles: {})", quote(role), roles.join(", "));
                return Err(refused(ErrorCode::ValidationFailed, field, why).into());
            }
            if let Some(first) = cast.insert(role.to_lowercase(), role) {
                let why = format!("role {role} is named twice (also as {first}); roles are read without case");
                return Err(refused(ErrorCode::ValidationFailed, field, why).into());
            }
            for agent in agents.split(',').map(str::trim) {
                let named_id = agent.strip_prefix("agent:").or_else(|| agent.strip_prefix("user:"));
                let checked = match named_id {
                    Some(n) => clutch_proto::id::check_name(n).map_err(|e| e.to_string()),
                    None if ["skill:", "tool:", "mcp:"].iter().any(|p| agent.starts_with(p)) => {
                        router::Need::parse(agent).map(|_| ())
                    }
                    None => Err("not an `agent:` or `user:` id, nor a capability".to_owned()),
                };
                if let Err(why) = checked {
                    return Err(refused(
                        ErrorCode::ValidationFailed,
                        field,
                        format!("`{}` cannot play {role}: {why}", quote(agent)),
                    )
                    .hint("name an agent (agent:ID), a person (user:NAME) or a capability the router casts (skill:NAME); leave it out for an LLM agent")
                    .into());
                }
                if named_id.is_none() {
                    continue;
                }
                if let Some(first) = named.insert(agent, role) {
                    let why = format!("`{agent}` is named for {first} and for {role}: a member plays one role");
                    return Err(refused(ErrorCode::ValidationFailed, field, why).into());
                }
                if agent.starts_with("agent:") {
                    self.check_member(role, agent, &field)?;
                }
            }
        }
        Ok(())
    }

    /// `agent` (an `agent:` id) can play `role`: a registered agent other than the daemon's own.
    fn check_member(&self, role: &str, agent: &str, field: &str) -> Result<()> {
        if agent == RUNNER || agent == ORCHESTRATOR {
            return Err(Refusal::new(
                ErrorCode::ValidationFailed,
                format!("`{agent}` cannot play {role}: it is the daemon's own agent, not a member"),
            )
            .field(field)
            .into());
        }
        let state = self.state();
        if state.agents.get(agent).is_some_and(|a| a.status != Status::Removed) {
            return Ok(());
        }
        let registered: Vec<&str> = state
            .agents
            .values()
            .filter(|a| a.status != Status::Removed && a.card.agent_id != RUNNER && a.card.agent_id != ORCHESTRATOR)
            .map(|a| a.card.agent_id.as_str())
            .collect();
        let known = match registered.len() {
            0 => "no agent is registered yet".to_owned(),
            n if n <= NAMED_AGENTS_MAX => format!("registered: {}", registered.join(", ")),
            n => {
                format!("registered: {}, and {} more", registered[..NAMED_AGENTS_MAX].join(", "), n - NAMED_AGENTS_MAX)
            }
        };
        Err(Refusal::new(
            ErrorCode::AgentNotFound,
            format!("`{agent}` cannot play {role}: no agent `{agent}` is registered ({known})"),
        )
        .field(field)
        .hint(format!(
            "register {agent} first (its AgentCard), or name a registered agent, a person (user:NAME) or a capability the router casts (skill:NAME)"
        ))
        .next(Next::RegisterAgent)
        .into())
    }

    /// Sends a message from `from` (a member) to members of session `session_id`: `to` names agent
    /// ids, or `all` (every other member). Refused as the bus rules say; each loop refused is also
    /// announced to the session's members (a warning uses the sender's rate, so a member repeating
    /// itself is soon refused for its rate instead, and cannot flood the log).
    pub async fn session_send(
        &self,
        from: &str,
        session_id: &str,
        to: &[String],
        kind: &str,
        content: Value,
    ) -> Result<view::SessionSent> {
        let (thread_id, root_task_id, recipients, members) = {
            let state = self.state();
            let s = state.sessions.get(session_id).ok_or_else(|| {
                Refusal::new(
                    ErrorCode::SessionNotFound,
                    format!("no session `{}`", clutch_proto::error::quote(session_id)),
                )
                .field("session_id")
            })?;
            let mut recipients: Vec<String> = Vec::new();
            for name in to {
                if name == ALL {
                    recipients.extend(s.members.keys().filter(|m| *m != from).cloned());
                } else {
                    recipients.push(name.clone());
                }
            }
            recipients.dedup();
            (s.thread_id.clone(), s.root_task_id.clone(), recipients, s.members.keys().cloned().collect::<Vec<_>>())
        };
        if recipients.is_empty() {
            return Err(Refusal::new(
                ErrorCode::ValidationFailed,
                "name a recipient: an agent id of the session, or `all`",
            )
            .field("to")
            .into());
        }
        let said = Said { kind: kind.to_owned(), content };
        let mut m = Message::new(
            MessageType::ChatMessage,
            from,
            (session_id, thread_id.as_str(), root_task_id.as_str()),
            payload::object(&said),
        );
        m.to = recipients.iter().map(|agent_id| Recipient { agent_id: agent_id.clone() }).collect();
        m.payload_type = Some(MESSAGE_PAYLOAD.to_owned());
        match self.inner.log.append_one(m).await {
            Ok(outcome) => Ok(view::SessionSent { id: outcome.id, seq: outcome.seq, to: recipients }),
            Err(Error::Refused(r)) if r.code == ErrorCode::LoopDetected => {
                self.warn_loop(session_id, &thread_id, &root_task_id, from, &r, members).await;
                Err(Error::Refused(r))
            }
            Err(e) => Err(e),
        }
    }

    /// Tells the members a loop was broken, unless the sender is at its rate (the warning counts
    /// against it).
    async fn warn_loop(
        &self,
        session_id: &str,
        thread_id: &str,
        root_task_id: &str,
        from: &str,
        refusal: &Refusal,
        members: Vec<String>,
    ) {
        let now = self.inner.options.clock.now_ms();
        let at_rate = self.state().sessions.get(session_id).is_none_or(|s| s.at_rate(from, now));
        if at_rate {
            return;
        }
        let warning = Warning {
            code: refusal.code.as_str().to_owned(),
            agent_id: from.to_owned(),
            message: format!("{} Say something new, or end your turn.", refusal.message),
        };
        let mut m = system_message(MessageType::ChatSystem, members, payload::object(&warning));
        m.run_id = session_id.to_owned();
        m.thread_id = thread_id.to_owned();
        m.task_id = root_task_id.to_owned();
        m.payload_type = Some(WARNING_PAYLOAD.to_owned());
        if let Err(e) = self.inner.log.append_one(m).await {
            tracing::warn!(error = %e, session_id, "could not record a session's loop warning");
        }
    }

    /// Every session in memory (or the one named), newest first: those open, and those that ended
    /// within `ended_retention` (an older one is read with [`Engine::find_session`]).
    pub fn sessions_list(&self, session_id: Option<&str>) -> view::Sessions {
        let state = self.state();
        let mut sessions: Vec<view::Session> =
            state.sessions.iter().filter(|s| session_id.is_none_or(|id| s.id == id)).map(session_view).collect();
        sessions.sort_by(|a, b| b.started_at.cmp(&a.started_at).then_with(|| b.id.cmp(&a.id)));
        view::Sessions { sessions }
    }

    /// One session as [`Engine::sessions_list`] shows it, whether in memory or ended and left it
    /// (then rebuilt from its run's records by the same rules).
    pub async fn find_session(&self, session_id: &str) -> Result<Option<view::Session>> {
        if let Some(found) = self.state().sessions.get(session_id).map(session_view) {
            return Ok(Some(found));
        }
        let mut book = Sessions::default();
        let filter = Filter { run_id: Some(session_id.to_owned()), ..Filter::default() };
        self.each_event(&filter, |_, m| {
            if Sessions::concerns(m) {
                book.apply(m, crate::clock::ts_ms(&m.ts).unwrap_or(0));
            }
        })
        .await?;
        Ok(book.get(session_id).map(session_view))
    }

    /// A session's messages, oldest first: the last `limit` (default 50, at most 1000), only those
    /// from or to `agent_id` when it is given.
    pub async fn session_history(
        &self,
        session_id: &str,
        limit: Option<usize>,
        agent_id: Option<&str>,
    ) -> Result<view::SessionHistory> {
        let known = self.state().sessions.get(session_id).is_some();
        if !known && self.find_session(session_id).await?.is_none() {
            return Err(Refusal::new(
                ErrorCode::SessionNotFound,
                format!("no session `{}`", clutch_proto::error::quote(session_id)),
            )
            .field("session_id")
            .into());
        }
        let limit = limit.unwrap_or(HISTORY_DEFAULT).clamp(1, HISTORY_MAX);
        let filter =
            Filter { run_id: Some(session_id.to_owned()), kind: Some(MessageType::ChatMessage), ..Filter::default() };
        let mut messages = std::collections::VecDeque::new();
        let mut after = 0;
        loop {
            let page = self.inner.log.read(&filter, after, 1000).await?;
            let Some(last) = page.last() else { break };
            after = last.seq;
            for event in page {
                let m = event.message()?;
                if m.payload_type.as_deref() != Some(MESSAGE_PAYLOAD)
                    || agent_id.is_some_and(|a| m.from.agent_id != a && !m.to.iter().any(|r| r.agent_id == a))
                {
                    continue;
                }
                let Some(said) = payload::read::<Said>(&m.payload) else { continue };
                messages.push_back(view::SessionMessage {
                    id: m.id.clone(),
                    seq: event.seq,
                    ts: m.ts.clone(),
                    from: m.from.agent_id.clone(),
                    to: m.to.iter().map(|r| r.agent_id.clone()).collect(),
                    kind: said.kind,
                    content: said.content,
                });
                if messages.len() > limit {
                    messages.pop_front();
                }
            }
        }
        Ok(view::SessionHistory { session_id: session_id.to_owned(), messages: messages.into() })
    }
}

fn session_view(s: &session::Session) -> view::Session {
    view::Session {
        id: s.id.clone(),
        position: s.position.clone(),
        pattern: s.pattern.clone(),
        status: s.phase,
        step: s.step.clone(),
        root_task_id: s.root_task_id.clone(),
        thread_id: s.thread_id.clone(),
        agents: s
            .members
            .iter()
            .map(|(id, role)| view::SessionAgent {
                id: id.clone(),
                role: role.clone(),
                status: if s.failed.contains(id) { "failed" } else { "active" }.to_owned(),
            })
            .collect(),
        protocol: s.protocol.clone(),
        started_at: s.started_at.clone(),
        message_count: s.messages,
    }
}
