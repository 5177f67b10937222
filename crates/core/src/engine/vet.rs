//! Vetting on the writer's path: whether a message may be stored now (task transitions, reserved
//! kinds, agents' cards, tool allowlists, workflow expectations, payload schemas).

use super::*;

impl State {
    /// Whether `message` may be stored now. `staged` holds tasks as earlier messages of the same batch
    /// leave them.
    pub(super) fn check<'a>(
        &self,
        options: &Options,
        staged: &mut HashMap<&'a str, Task>,
        flows: &mut workflow::Stage,
        message: &'a Message,
    ) -> Result<(), Refusal> {
        let daemon = message.from.agent_id == ORCHESTRATOR;
        if self.workflows.concerns(Some(flows), message) {
            if message.kind == MessageType::TaskRequest && self.tasks.contains_key(&message.task_id) {
                return Err(Refusal::new(
                    ErrorCode::InvalidTransition,
                    format!("task {} already exists; a new request needs a new task_id", message.task_id),
                )
                .field("task_id"));
            }
            let agents = &self.agents;
            return self.workflows.check(flows, &|a| agents.get(a).map(|x| x.status), message);
        }
        if !staged.contains_key(message.task_id.as_str())
            && let Some(refusal) = self.tombstone(message)
        {
            return Err(refusal);
        }
        if Sessions::concerns(message) {
            let task = staged.get(message.task_id.as_str()).or_else(|| self.tasks.get(&message.task_id));
            self.sessions.check(message, task.and_then(|t| t.agent.as_deref()), options.clock.now_ms())?;
        }
        match message.kind {
            MessageType::ChatSystem if message.payload_type.as_deref() == Some(APPROVAL_DECIDED_PAYLOAD) => {
                let call = message.payload.get("call_id").and_then(Value::as_str).unwrap_or_default();
                if !self.approvals.contains_key(call) {
                    return Err(Refusal::new(
                        ErrorCode::InvalidTransition,
                        format!("tool call `{}` is not waiting for approval", clutch_proto::error::quote(call)),
                    )
                    .field("call_id"));
                }
            }
            MessageType::AgentRegister | MessageType::AgentUpdate => return self.check_agent(options, message, daemon),
            MessageType::RoutingDecision | MessageType::RoutingFailure if !daemon => {
                return Err(Refusal::new(ErrorCode::Forbidden, "routing events are the daemon's own").field("type"));
            }
            MessageType::ToolCall => return self.check_tool_call(options, message),
            MessageType::TaskRequest => {
                if !self.tasks.contains_key(&message.task_id) {
                    check_workflow(options, message)?;
                }
                for (i, text) in message.requires.iter().enumerate() {
                    Need::parse(text)
                        .map_err(|e| Refusal::new(ErrorCode::ValidationFailed, e).field(format!("requires[{i}]")))?;
                }
                router::preferences(&message.prefers, None)
                    .map_err(|(i, e)| Refusal::new(ErrorCode::ValidationFailed, e).field(format!("prefers[{i}]")))?;
            }
            _ => {}
        }
        if let Some(schema_ref) = &message.schema_ref
            && self.schemas.by_ref(schema_ref).is_some()
        {
            let problems = self.schemas.validate(schema_ref, &Value::Object(message.payload.clone()));
            if !problems.is_empty() {
                return Err(invalid_payload(format!("the payload does not match {schema_ref}"), problems));
            }
        }
        if let Some(task) = self.tasks.get(&message.task_id)
            && let Some((workflow, step)) = &task.step
            && let Some(expects) = options.policy.step(workflow, step).and_then(|s| s.expects.as_ref())
            && expects.applies_to(message)
        {
            let problems = schemas::check_expects(&self.schemas, expects, message);
            if !problems.is_empty() {
                let why = format!("step `{step}` of workflow `{workflow}` expects otherwise");
                return Err(invalid_payload(why, problems));
            }
        }
        let retries = Retries { max_routings: options.max_routings };
        let key = message.task_id.as_str();
        if let Some(task) = self.tasks.get(key)
            && message.kind == MessageType::TaskRequest
            && !daemon
            && message.idempotency_key.is_some()
            && task.request.idempotency_key == message.idempotency_key
            && task.run_id == message.run_id
        {
            // A retry of the request under its idempotency key: the store answers it as a duplicate.
            return Ok(());
        }
        let task = match staged.get(key).or_else(|| self.tasks.get(key)) {
            Some(task) => {
                let effect = tasks::next(task, message, daemon, retries)?;
                if effect == Effect::Stay {
                    return Ok(());
                }
                let mut task = task.clone();
                transition(&mut task, message, effect, 0);
                task
            }
            None if message.kind == MessageType::TaskRequest => new_task(message, 0),
            None => return Ok(()),
        };
        staged.insert(key, task);
        Ok(())
    }

    pub(super) fn check_agent(&self, options: &Options, message: &Message, daemon: bool) -> Result<(), Refusal> {
        if message.payload_type.as_deref() == Some(AGENT_STATUS_PAYLOAD) {
            if !daemon {
                return Err(Refusal::new(ErrorCode::Forbidden, "agent status changes are the daemon's own")
                    .field("payload_type"));
            }
            return Ok(());
        }
        let card = clutch_proto::validate::agent_card(&Value::Object(message.payload.clone())).map_err(|problems| {
            let first = problems.as_slice().first().map(|p| format!("payload.{}", p.path)).unwrap_or_default();
            Refusal::new(ErrorCode::ValidationFailed, format!("the payload is not a valid AgentCard: {problems}"))
                .field(first)
        })?;
        if !daemon && card.agent_id != message.from.agent_id && !message.from.agent_id.starts_with("user:") {
            return Err(Refusal::new(
                ErrorCode::Forbidden,
                format!("{} may not register or update {}", message.from.agent_id, card.agent_id),
            )
            .field("payload.agent_id"));
        }
        if message.kind == MessageType::AgentUpdate && !self.agents.contains_key(&card.agent_id) {
            return Err(unknown_agent(&card.agent_id));
        }
        options.adapters.check_card(&card)?;
        // What the outbound guard can tell without a lookup (names were checked before the append).
        for (name, endpoint) in &card.endpoints {
            let field = format!("payload.endpoints.{name}.url");
            match options.outbound.check_url(&endpoint.url) {
                Ok(Ok(_)) => {}
                Ok(Err(refused)) => return Err(refused.refusal(&field)),
                Err(why) => {
                    return Err(Refusal::new(ErrorCode::ValidationFailed, format!("{field}: {why}")).field(field));
                }
            }
        }
        Ok(())
    }

    /// A tool call must name a tool every list that applies allows: the operator's (org.yaml, for
    /// the caller's identity, whether or not it registered a card), the caller's card (when it is
    /// registered and names tools), the message's own `tool_allowlist` and the one of the task it
    /// belongs to. A list that does not apply places no limit: no org.yaml entry, no card, a card
    /// that names no tools.
    pub(super) fn check_tool_call(&self, options: &Options, message: &Message) -> Result<(), Refusal> {
        let caller = &message.from.agent_id;
        let own = message.security.as_ref().and_then(|s| s.policy.as_ref()).and_then(|p| p.tool_allowlist.as_ref());
        let task = self.tasks.get(&message.task_id);
        let inherited = task
            .and_then(|t| t.request.security.as_ref())
            .and_then(|s| s.policy.as_ref())
            .and_then(|p| p.tool_allowlist.as_ref());
        let operator = options.policy.tool_allowlist(caller);
        let card = self
            .agents
            .get(caller)
            .filter(|a| a.status != Status::Removed && a.profile.names_tools())
            .map(|a| &a.profile);
        if own.is_none() && inherited.is_none() && operator.is_none() && card.is_none() {
            return Ok(());
        }
        let Some(tool) = tool_name(message) else {
            return Err(Refusal::new(ErrorCode::ValidationFailed, "a tool.call names its tool in payload.tool")
                .field("payload.tool"));
        };
        let refuse = |why: String, hint: &str| {
            Err(Refusal::new(ErrorCode::Forbidden, why).field("payload.tool").hint(hint.to_owned()))
        };
        if let Some(list) = operator
            && !list.iter().any(|t| crate::tool::covers(t, tool))
        {
            return refuse(
                format!("{tool} is not in the operator's tool allowlist for {caller}"),
                "the operator's allowlist is tool_allowlist in org.yaml (the agent's, else its role's)",
            );
        }
        if let Some(profile) = card
            && !profile.has_tool(tool)
            && !crate::tool::server_of(tool).is_some_and(|s| profile.has_tool(s))
        {
            return refuse(
                format!("{tool} is not among the tools on {caller}'s card"),
                "a card that names tools (capabilities[].tools, servers, tool:/mcp: ids) may call only those",
            );
        }
        if let Some(list) = own
            && !list.iter().any(|t| crate::tool::covers(t, tool))
        {
            return refuse(format!("{tool} is not in this message's tool_allowlist"), "security.policy.tool_allowlist");
        }
        if let Some(list) = inherited
            && !list.iter().any(|t| crate::tool::covers(t, tool))
        {
            return refuse(
                format!("{tool} is not in the tool_allowlist of task {}", message.task_id),
                "the task's request sets security.policy.tool_allowlist",
            );
        }
        Ok(())
    }
}

/// Refuses what no client may send: the daemon's own sender and its reserved payload types.
pub(super) fn reserved(message: &Message) -> Result<(), Refusal> {
    if message.from.agent_id == ORCHESTRATOR {
        return Err(Refusal::new(ErrorCode::Forbidden, format!("{ORCHESTRATOR} is the daemon's own sender"))
            .field("from.agent_id"));
    }
    if message.payload_type.as_deref().is_some_and(|p| p.starts_with("clutch.")) {
        return Err(Refusal::new(ErrorCode::Forbidden, "payload types starting with `clutch.` are the daemon's own")
            .field("payload_type"));
    }
    if matches!(message.kind, MessageType::RoutingDecision | MessageType::RoutingFailure | MessageType::TaskTimeout) {
        return Err(Refusal::new(
            ErrorCode::Forbidden,
            format!("{} events are the daemon's own", message.kind.as_str()),
        )
        .field("type"));
    }
    Ok(())
}

/// A request naming a workflow step must name one that exists.
pub(super) fn check_workflow(options: &Options, message: &Message) -> Result<(), Refusal> {
    let workflow = message.meta.get("workflow").and_then(Value::as_str);
    let step = message.meta.get("step").and_then(Value::as_str);
    match (workflow, step) {
        (None, None) => Ok(()),
        (Some(w), _) if options.policy.workflow(w).is_none() => {
            Err(Refusal::new(ErrorCode::ValidationFailed, format!("no workflow `{w}` is configured"))
                .field("meta.workflow")
                .hint("workflows come from workflows.yaml in the config directory"))
        }
        (Some(w), Some(s)) if options.policy.step(w, s).is_none() => {
            Err(Refusal::new(ErrorCode::ValidationFailed, format!("workflow `{w}` has no step `{s}`"))
                .field("meta.step"))
        }
        (None, Some(_)) => {
            Err(Refusal::new(ErrorCode::ValidationFailed, "meta.step needs meta.workflow").field("meta.workflow"))
        }
        _ => Ok(()),
    }
}

pub(super) fn invalid_payload(why: String, problems: Vec<clutch_proto::validate::Problem>) -> Refusal {
    let detail: Vec<String> = problems.iter().map(|p| format!("{}: {}", p.path, p.message)).collect();
    let mut r = Refusal::new(ErrorCode::ValidationFailed, format!("{why}: {}", detail.join("; ")));
    r.field = problems.first().map(|p| p.path.clone());
    r.problems = problems;
    r
}

pub(super) fn tool_name(message: &Message) -> Option<&str> {
    message.payload.get("tool").or_else(|| message.payload.get("name")).and_then(Value::as_str)
}
