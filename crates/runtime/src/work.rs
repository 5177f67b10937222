//! One task worked by an LLM agent: accept it, then turns of model call → tool calls → results
//! until the model answers (`task.result`) or something stops it (`task.error`: turns, time,
//! budget, a provider that keeps failing). Every model call is recorded in the log before its
//! answer is used (`clutch.llm.call.v1`, a `task.progress` carrying its usage, which the engine
//! accounts), and every tool call goes through the log like any agent's; so after a restart the
//! loop is replayed from the log: recorded answers are read back, not bought again, and tool calls
//! already made are not made again.

use std::collections::HashMap;
use std::time::{Duration, Instant};

use clutch_core::payload;
use clutch_proto::message::Recipient;
use clutch_proto::{Message, MessageType};
use clutch_store::Filter;
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};
use tokio::sync::mpsc;

use crate::agent::Agent;
use crate::provider::{self, Part, Request, Response, Role, ToolSpec, Turn, Usage};

/// `payload_type` of a model call's record.
pub const LLM_CALL_PAYLOAD: &str = "clutch.llm.call.v1";
/// `payload_type` of streamed text, coalesced.
pub const LLM_TEXT_PAYLOAD: &str = "clutch.llm.text.v1";

/// How often streamed text is written to the log at most.
const TEXT_EVERY: Duration = Duration::from_millis(500);
/// A turn's new messages larger than this (as JSON) are recorded as an artifact.
const INLINE_MAX: usize = 32 * 1024;
/// The most of a tool's answer handed to the model.
const TOOL_ANSWER_MAX: usize = 100 * 1024;

/// The record of one model call (`task.progress`, [`LLM_CALL_PAYLOAD`]).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Call {
    /// 1 for the task's first call.
    pub turn: u32,
    pub provider: String,
    pub model: String,
    pub request: CallRequest,
    pub response: Response,
    /// The engine accounts `input_tokens + output_tokens`, `cost_usd` and `requests`.
    pub usage: CallUsage,
    pub duration_ms: u64,
}

/// What a call sent: its parameters and what the conversation gained since the last call (the whole
/// request is the task's records read in order).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CallRequest {
    pub max_tokens: u32,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub temperature: Option<f32>,
    /// The system prompt and the tools offered, on the first call only.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub system: Option<String>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub tools: Vec<String>,
    /// The turns added since the previous call, or the artifact holding them when large.
    pub added: Value,
}

#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct CallUsage {
    pub input_tokens: u64,
    pub output_tokens: u64,
    pub cache_read_tokens: u64,
    pub cache_write_tokens: u64,
    pub cost_usd: f64,
    pub requests: u64,
}

/// Why a task failed.
struct Failed {
    code: &'static str,
    message: String,
    retryable: bool,
}

/// What the log already holds about this attempt of the task.
#[derive(Default)]
struct History {
    accepted: bool,
    calls: HashMap<u32, Response>,
    /// Tool calls made, by idempotency key → their message id.
    tool_calls: HashMap<String, String>,
    /// Answers, by call id.
    answers: HashMap<String, Message>,
    /// Usage already recorded.
    usage: Usage,
    cost_usd: f64,
}

/// Works the task `request` asks for, and answers it.
pub(crate) async fn run(agent: &Agent, request: Message) {
    let task_id = request.task_id.clone();
    let limit = Duration::from_millis(agent.config.task_timeout_ms);
    let outcome = match tokio::time::timeout(limit, work(agent, &request)).await {
        Ok(outcome) => outcome,
        Err(_) => Err(Failed {
            code: "TASK_TIMEOUT",
            message: format!("the task took more than {} ms (task_timeout_ms)", agent.config.task_timeout_ms),
            retryable: true,
        }),
    };
    let (kind, payload) = match outcome {
        Ok(None) => return,
        Ok(Some(payload)) => (MessageType::TaskResult, payload),
        Err(f) => {
            tracing::warn!(agent_id = %agent.id, task_id = %task_id, code = f.code, message = %f.message, "llm task failed");
            let error = payload::TaskError {
                code: f.code.to_owned(),
                message: f.message,
                retryable: f.retryable,
                details: None,
                error: None,
            };
            (MessageType::TaskError, payload::object(&error))
        }
    };
    if let Err(e) = send(agent, &request, kind, payload, kind.as_str()).await {
        tracing::warn!(agent_id = %agent.id, task_id = %task_id, error = %e, "cannot answer the task");
    }
}

/// The loop. `Ok(None)`: the task is no longer this agent's (its accept was refused).
async fn work(agent: &Agent, request: &Message) -> Result<Option<Map<String, Value>>, Failed> {
    let mut history = history(agent, request).await;
    // Taken up again after a restart, it was accepted already (a second accept is no transition).
    if !history.accepted
        && let Err(e) = send(agent, request, MessageType::TaskAccept, Map::new(), "task.accept").await
    {
        tracing::info!(agent_id = %agent.id, task_id = %request.task_id, error = %e, "task not accepted");
        return Ok(None);
    }
    let (specs, names) = offered_tools(agent);
    let model = agent.config.model.clone().unwrap_or_else(|| agent.provider.config.model.clone());
    let mut req = Request {
        model: model.clone(),
        system: system_prompt(agent, request),
        messages: vec![Turn { role: Role::User, content: vec![Part::Text { text: task_text(request) }] }],
        tools: specs,
        max_tokens: agent.config.max_tokens.unwrap_or(agent.provider.config.max_tokens),
        temperature: agent.config.temperature.or(agent.provider.config.temperature),
    };
    let mut recorded_upto = 0;
    let mut totals = history.usage;
    let mut cost = history.cost_usd;
    for turn in 1..=agent.config.max_turns {
        let response = match history.calls.remove(&turn) {
            Some(response) => response,
            None => {
                check_budgets(agent, &req, &model, totals, cost)?;
                let began = Instant::now();
                let response = call(agent, request, turn, &req).await?;
                let usage = response.usage;
                let call_cost = agent.provider.config.cost(&model, &usage);
                let record = Call {
                    turn,
                    provider: agent.provider.config.name.clone(),
                    model: if response.model.is_empty() { model.clone() } else { response.model.clone() },
                    request: call_request(agent, &req, turn, recorded_upto).await,
                    response: response.clone(),
                    usage: CallUsage {
                        input_tokens: usage.input_tokens,
                        output_tokens: usage.output_tokens,
                        cache_read_tokens: usage.cache_read_tokens,
                        cache_write_tokens: usage.cache_write_tokens,
                        cost_usd: call_cost,
                        requests: 1,
                    },
                    duration_ms: began.elapsed().as_millis() as u64,
                };
                // Recorded before it is used: after a restart it is read back, not bought again.
                if let Err(e) = send_typed(
                    agent,
                    request,
                    MessageType::TaskProgress,
                    to_map(&record),
                    LLM_CALL_PAYLOAD,
                    &format!("llm:{turn}"),
                )
                .await
                {
                    tracing::info!(agent_id = %agent.id, task_id = %request.task_id, error = %e, "cannot record a model call; the task is no longer this agent's");
                    return Ok(None);
                }
                totals.input_tokens += usage.input_tokens;
                totals.output_tokens += usage.output_tokens;
                totals.cache_read_tokens += usage.cache_read_tokens;
                totals.cache_write_tokens += usage.cache_write_tokens;
                cost += call_cost;
                response
            }
        };
        recorded_upto = req.messages.len();
        let uses: Vec<(String, String, Value)> = response
            .content
            .iter()
            .filter_map(|p| match p {
                Part::ToolUse { id, name, input } => Some((id.clone(), name.clone(), input.clone())),
                _ => None,
            })
            .collect();
        req.messages.push(Turn { role: Role::Assistant, content: response.content.clone() });
        if uses.is_empty() {
            let mut result = Map::new();
            result.insert("text".into(), Value::String(response.text()));
            result.insert("stop".into(), serde_json::to_value(&response.stop).unwrap_or(Value::Null));
            result.insert("turns".into(), Value::from(turn));
            result.insert(
                "llm".into(),
                serde_json::json!({
                    "provider": agent.provider.config.name, "model": model,
                    "input_tokens": totals.input_tokens, "output_tokens": totals.output_tokens,
                    "cache_read_tokens": totals.cache_read_tokens, "cost_usd": cost,
                }),
            );
            return Ok(Some(result));
        }
        let mut results = Vec::with_capacity(uses.len());
        for (i, (id, name, input)) in uses.into_iter().enumerate() {
            let (content, is_error) = use_tool(agent, request, &names, &mut history, turn, i, &name, input).await;
            results.push(Part::ToolResult { tool_use_id: id, content, is_error });
        }
        req.messages.push(Turn { role: Role::User, content: results });
    }
    Err(Failed {
        code: "MAX_TURNS",
        message: format!("the model did not finish in {} calls (max_turns)", agent.config.max_turns),
        retryable: false,
    })
}

fn to_map<T: Serialize>(value: &T) -> Map<String, Value> {
    match serde_json::to_value(value) {
        Ok(Value::Object(map)) => map,
        _ => Map::new(),
    }
}

/// What this attempt already did, from the task's events.
async fn history(agent: &Agent, request: &Message) -> History {
    let mut history = History::default();
    let filter = Filter { task_id: Some(request.task_id.clone()), ..Filter::default() };
    let prefix = key(agent, request, "");
    let mut after = 0;
    loop {
        let events = match agent.log.read(&filter, after, 1000).await {
            Ok(events) => events,
            Err(e) => {
                tracing::warn!(agent_id = %agent.id, task_id = %request.task_id, error = %e, "cannot read the task's history");
                return history;
            }
        };
        let Some(last) = events.last() else { break };
        after = last.seq;
        for event in events {
            let Ok(m) = event.message() else { continue };
            let mine =
                m.from.agent_id == agent.id && m.idempotency_key.as_deref().is_some_and(|k| k.starts_with(&prefix));
            match m.kind {
                MessageType::TaskAccept if mine => history.accepted = true,
                MessageType::TaskProgress if mine && m.payload_type.as_deref() == Some(LLM_CALL_PAYLOAD) => {
                    if let Ok(call) = serde_json::from_value::<Call>(Value::Object(m.payload.clone())) {
                        history.usage.input_tokens += call.usage.input_tokens;
                        history.usage.output_tokens += call.usage.output_tokens;
                        history.cost_usd += call.usage.cost_usd;
                        history.calls.insert(call.turn, call.response);
                    }
                }
                MessageType::ToolCall if mine => {
                    if let Some(k) = m.idempotency_key.clone() {
                        history.tool_calls.insert(k, m.id.clone());
                    }
                }
                MessageType::ToolResult | MessageType::ToolError if m.to.iter().any(|r| r.agent_id == agent.id) => {
                    if let Some(id) = m.payload.get("call_id").and_then(Value::as_str) {
                        history.answers.insert(id.to_owned(), m.clone());
                    }
                }
                _ => {}
            }
        }
    }
    if !history.calls.is_empty() {
        tracing::info!(agent_id = %agent.id, task_id = %request.task_id, recorded = history.calls.len(), "resuming a task from its recorded model calls");
    }
    history
}

/// The idempotency key of this agent's `what` in this attempt of the task.
fn key(agent: &Agent, request: &Message, what: &str) -> String {
    format!("{}:{}:{}:{what}", agent.id, request.task_id, request.attempt)
}

/// The tools offered: the agent's entries matched against the tools the adapters serve now, named
/// for the model (`server__tool`), plus `emit`.
fn offered_tools(agent: &Agent) -> (Vec<ToolSpec>, HashMap<String, String>) {
    let mut specs = vec![ToolSpec {
        name: "emit".into(),
        description: "Report progress on the task to the people and agents watching it.".into(),
        input_schema: serde_json::json!({
            "type": "object",
            "properties": {
                "message": {"type": "string", "description": "What you are doing or found."},
                "percent": {"type": "number", "minimum": 0, "maximum": 100},
            },
            "required": ["message"],
        }),
    }];
    let mut names = HashMap::new();
    if agent.config.tools.is_empty() {
        return (specs, names);
    }
    for server in agent.engine.adapters().tools().servers {
        for tool in server.tools {
            if !agent.config.tools.iter().any(|entry| clutch_core::tool::covers(entry, &tool.name)) {
                continue;
            }
            let model_name = model_name(&tool.name);
            if names.contains_key(&model_name) {
                continue;
            }
            specs.push(ToolSpec {
                name: model_name.clone(),
                description: tool.description.clone().or(tool.title.clone()).unwrap_or_else(|| tool.name.clone()),
                input_schema: tool.input_schema.clone(),
            });
            names.insert(model_name, tool.name);
        }
    }
    (specs, names)
}

/// `mcp:files/read_file` → `files__read_file`: the characters providers accept, at most 64.
fn model_name(tool: &str) -> String {
    let bare = tool.strip_prefix("mcp:").unwrap_or(tool).replacen('/', "__", 1);
    let mut name: String =
        bare.chars().map(|c| if c.is_ascii_alphanumeric() || c == '_' || c == '-' { c } else { '_' }).collect();
    name.truncate(64);
    name
}

fn system_prompt(agent: &Agent, request: &Message) -> String {
    format!(
        "{}\n\n## Current task\n- You are {} in Clutch, working on task {} of run {}.\n- Use the `emit` tool to report \
         progress on long work.\n- When you are done, answer with your result as plain text.",
        agent.config.system.trim_end(),
        agent.id,
        request.task_id,
        request.run_id
    )
}

/// What the task asks, for the model: the payload's text (`text`, `prompt`, `goal`, `input` or
/// `query`), or the payload as JSON.
fn task_text(request: &Message) -> String {
    for field in ["text", "prompt", "goal", "input", "query"] {
        if let Some(text) = request.payload.get(field).and_then(Value::as_str) {
            return text.to_owned();
        }
    }
    serde_json::to_string_pretty(&request.payload).unwrap_or_default()
}

/// A call whose estimate would cross a hard budget (the task's, the agent's) is not made.
fn check_budgets(agent: &Agent, req: &Request, model: &str, used: Usage, cost: f64) -> Result<(), Failed> {
    let estimate = provider::estimate_tokens(req);
    let input = estimate.saturating_sub(u64::from(req.max_tokens));
    let worst = Usage { input_tokens: input, output_tokens: u64::from(req.max_tokens), ..Usage::default() };
    let worst_cost = agent.provider.config.cost(model, &worst);
    let over = |what: &str,
                used_tokens: u64,
                used_cost: f64,
                tokens: Option<u64>,
                cost_usd: Option<f64>|
     -> Option<Failed> {
        let message = if let Some(limit) = tokens.filter(|l| used_tokens + estimate > *l) {
            format!("{what} token budget is {limit}; {used_tokens} used and the next call may take {estimate}")
        } else if let Some(limit) = cost_usd.filter(|l| used_cost + worst_cost > *l) {
            format!("{what} budget is ${limit}; ${used_cost:.4} spent and the next call may cost ${worst_cost:.4}")
        } else {
            return None;
        };
        Some(Failed { code: "BUDGET_EXCEEDED", message: format!("{message}: the call was not made"), retryable: false })
    };
    if let Some(b) = agent.config.task_budget
        && let Some(f) = over("the task's", used.input_tokens + used.output_tokens, cost, b.tokens, b.cost_usd)
    {
        return Err(f);
    }
    if let Some(view) = agent.engine.agent(&agent.id)
        && let Some(b) = view.budget
        && let Some(f) = over(&format!("{}'s", agent.id), view.usage.tokens, view.usage.cost_usd, b.tokens, b.cost_usd)
    {
        return Err(f);
    }
    Ok(())
}

/// One model call, its streamed text written to the log as it comes (coalesced).
async fn call(agent: &Agent, request: &Message, turn: u32, req: &Request) -> Result<Response, Failed> {
    let (tx, rx) = mpsc::unbounded_channel::<String>();
    let provider = agent.provider.clone();
    let making = async move {
        let mut on_text = move |t: &str| {
            let _ = tx.send(t.to_owned());
        };
        provider.complete(req, &mut on_text).await
    };
    let (answer, ()) = tokio::join!(making, pump_text(agent, request, turn, rx));
    answer.map_err(|e| Failed {
        code: if e.kind.retryable() { "LLM_UNAVAILABLE" } else { "LLM_FAILED" },
        message: e.to_string(),
        retryable: e.kind.retryable(),
    })
}

/// Writes streamed text to the log, at most every [`TEXT_EVERY`], until the call ends.
async fn pump_text(agent: &Agent, request: &Message, turn: u32, mut rx: mpsc::UnboundedReceiver<String>) {
    let mut part = 0;
    while let Some(first) = rx.recv().await {
        let mut text = first;
        let mut restarted = text.is_empty();
        let until = tokio::time::Instant::now() + TEXT_EVERY;
        let mut open = true;
        while open {
            tokio::select! {
                more = rx.recv() => match more {
                    Some(piece) => {
                        restarted |= piece.is_empty();
                        text.push_str(&piece);
                    }
                    None => open = false,
                },
                () = tokio::time::sleep_until(until) => break,
            }
        }
        if !text.is_empty() || restarted {
            part += 1;
            let mut payload = Map::new();
            payload.insert("turn".into(), Value::from(turn));
            payload.insert("text".into(), Value::String(text));
            if restarted {
                payload.insert("restarted".into(), Value::Bool(true));
            }
            let what = format!("text:{turn}:{part}");
            if let Err(e) =
                send_typed(agent, request, MessageType::TaskProgress, payload, LLM_TEXT_PAYLOAD, &what).await
            {
                tracing::debug!(agent_id = %agent.id, error = %e, "streamed text not recorded");
            }
        }
        if !open {
            break;
        }
    }
}

/// The record of what the call sent beyond the previous one.
async fn call_request(agent: &Agent, req: &Request, turn: u32, recorded_upto: usize) -> CallRequest {
    let added = serde_json::to_value(&req.messages[recorded_upto.min(req.messages.len())..]).unwrap_or(Value::Null);
    let text = added.to_string();
    let added = if text.len() > INLINE_MAX {
        match agent.log.put_artifact(bytes::Bytes::from(text)).await {
            Ok(artifact) => serde_json::json!({"artifact": artifact.reference, "size": artifact.size}),
            Err(_) => added,
        }
    } else {
        added
    };
    CallRequest {
        max_tokens: req.max_tokens,
        temperature: req.temperature,
        system: (turn == 1).then(|| req.system.clone()),
        tools: if turn == 1 { req.tools.iter().map(|t| t.name.clone()).collect() } else { Vec::new() },
        added,
    }
}

/// Carries out one tool use of the model: `emit`, or a tool call through the log. Returns what
/// goes back to the model, and whether it is an error (which the model may correct).
#[allow(clippy::too_many_arguments)]
async fn use_tool(
    agent: &Agent,
    request: &Message,
    names: &HashMap<String, String>,
    history: &mut History,
    turn: u32,
    i: usize,
    name: &str,
    input: Value,
) -> (String, bool) {
    let Value::Object(args) = input else {
        return (format!("the input of {name} must be a JSON object"), true);
    };
    if name == "emit" {
        let Some(text) = args.get("message").and_then(Value::as_str) else {
            return ("emit needs `message`, a string".into(), true);
        };
        let mut payload = Map::new();
        payload.insert("message".into(), Value::String(text.to_owned()));
        if let Some(p) = args.get("percent").and_then(Value::as_f64).filter(|p| (0.0..=100.0).contains(p)) {
            payload.insert("percent".into(), Value::from(p));
        }
        return match send(agent, request, MessageType::TaskProgress, payload, &format!("emit:{turn}:{i}")).await {
            Ok(()) => ("emitted".into(), false),
            Err(e) => (format!("not emitted: {e}"), true),
        };
    }
    let Some(tool) = names.get(name) else {
        let mut offered: Vec<&str> = names.keys().map(String::as_str).collect();
        offered.sort_unstable();
        offered.insert(0, "emit");
        return (format!("there is no tool named {name}; the tools are: {}", offered.join(", ")), true);
    };
    let idempotency = key(agent, request, &format!("tool:{turn}:{i}"));
    let call_id = match history.tool_calls.get(&idempotency) {
        Some(id) => id.clone(),
        None => {
            let call = payload::ToolCall { tool: tool.clone(), args };
            let mut m = message(agent, request, MessageType::ToolCall, payload::object(&call));
            m.idempotency_key = Some(idempotency);
            match agent.engine.submit(vec![m]).await.map(|mut a| a.pop()) {
                Ok(Some(Ok(clutch_core::engine::Ack::Stored(outcome)))) => outcome.id,
                Ok(Some(Err(e))) | Err(e) => return (format!("the call was refused: {}", e.body().message), true),
                Ok(_) => return ("the call was not stored".into(), true),
            }
        }
    };
    let answer = match history.answers.remove(&call_id) {
        Some(answer) => answer,
        None => {
            let waiting = agent.answers().take_or_wait(&call_id);
            match waiting {
                Ok(answer) => answer,
                Err(rx) => match rx.await {
                    Ok(answer) => answer,
                    Err(_) => return ("the call's answer was lost".into(), true),
                },
            }
        }
    };
    tool_answer(&answer)
}

/// A `tool.result` or `tool.error` as text for the model.
fn tool_answer(answer: &Message) -> (String, bool) {
    if answer.kind == MessageType::ToolError {
        let code = answer.payload.get("code").and_then(Value::as_str).unwrap_or("TOOL_FAILED");
        let message = answer.payload.get("message").and_then(Value::as_str).unwrap_or("");
        return (format!("{code}: {message}"), true);
    }
    let mut text = String::new();
    for block in answer.payload.get("content").and_then(Value::as_array).into_iter().flatten() {
        if !text.is_empty() {
            text.push('\n');
        }
        match (block.get("type").and_then(Value::as_str), block.get("text").and_then(Value::as_str)) {
            (Some("text"), Some(t)) => text.push_str(t),
            _ => text.push_str(&block.to_string()),
        }
    }
    if text.is_empty()
        && let Some(structured) = answer.payload.get("structured_content")
    {
        text = structured.to_string();
    }
    if text.len() > TOOL_ANSWER_MAX {
        let mut end = TOOL_ANSWER_MAX;
        while !text.is_char_boundary(end) {
            end -= 1;
        }
        text.truncate(end);
        text.push_str("\n[cut: the answer was longer]");
    }
    (text, false)
}

fn message(agent: &Agent, request: &Message, kind: MessageType, payload: Map<String, Value>) -> Message {
    let mut m = Message::new(kind, &agent.id, (&request.run_id, &request.thread_id, &request.task_id), payload);
    m.parent_task_id = request.parent_task_id.clone();
    m.attempt = request.attempt;
    m.trace = request.trace.clone();
    if kind != MessageType::ToolCall {
        m.to = vec![Recipient { agent_id: clutch_core::tasks::ORCHESTRATOR.to_owned() }];
    }
    m
}

async fn send(
    agent: &Agent,
    request: &Message,
    kind: MessageType,
    payload: Map<String, Value>,
    what: &str,
) -> Result<(), String> {
    let mut m = message(agent, request, kind, payload);
    m.idempotency_key = Some(key(agent, request, what));
    submit(agent, m).await
}

async fn send_typed(
    agent: &Agent,
    request: &Message,
    kind: MessageType,
    payload: Map<String, Value>,
    payload_type: &str,
    what: &str,
) -> Result<(), String> {
    let mut m = message(agent, request, kind, payload);
    m.payload_type = Some(payload_type.to_owned());
    m.idempotency_key = Some(key(agent, request, what));
    // The daemon's own payload types: appended as the daemon appends its own (clients may not
    // send `clutch.*`), through the same gate.
    agent.log.append_one(m).await.map(|_| ()).map_err(|e| e.body().message)
}

async fn submit(agent: &Agent, m: Message) -> Result<(), String> {
    match agent.engine.submit(vec![m]).await.map(|mut a| a.pop()) {
        Ok(Some(Ok(_))) => Ok(()),
        Ok(Some(Err(e))) | Err(e) => Err(e.body().message),
        Ok(None) => Err("not stored".into()),
    }
}
