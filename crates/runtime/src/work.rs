//! One task worked by an LLM agent: accept it, then turns of model call → tool uses → results
//! until the model answers (`task.result`) or something stops it (`task.error`: turns, time,
//! budget, a provider that keeps failing). Every model call is recorded in the log before its
//! answer is used (`clutch.llm.call.v1`, a `task.progress` carrying its usage, which the engine
//! accounts), and every tool call goes through the log like any agent's; so after a restart the
//! loop is replayed from the log: recorded answers are read back, not bought again, and tool calls
//! already made are not made again. The loop acts on the world through an [`Env`]: the live daemon
//! (`live`), or a recorded run re-executed (`replay`).
//!
//! The accept's commit overlaps the first call, whose answer is used only once the accept is stored. A
//! request naming an `output_schema` is answered in structure: an `answer` tool with that schema is
//! offered, the answer validated (`core::schemas::check`) into the result's `structured`, a misfit asked
//! for once more with the tool required (`Request::tool_choice`), then the text alone with
//! `structured_error`. Before each call its estimate (`provider::estimate_tokens`) is checked against the
//! task's budget, the agent's and the run's (org.yaml's `budgets.run`, `Engine::run_usage`); after it,
//! the call is recorded in the same commit as the first message that uses its answer (alone before a tool
//! call or the next call), and streamed text goes to the log coalesced (`clutch.llm.text.v1`). Tools are
//! the agent's `tools` entries matched against what the adapters serve (named `server__tool` for the
//! model), `emit`, and the daemon's own (`builtin`); a tool use is a `tool.call` from the agent through
//! the engine, so allowlists, approvals and in-doubt recovery apply. Every message carries an idempotency
//! key of agent, task, attempt and step.

use std::collections::HashMap;
use std::future::Future;
use std::time::{Duration, Instant};

use clutch_core::{Refusal, payload};
use clutch_proto::message::Recipient;
use clutch_proto::{ErrorCode, Message, MessageType};
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use crate::provider::{self, Part, Request, Response, Role, ToolSpec, Turn, Usage};
use crate::{builtin, spec};

/// `payload_type` of a model call's record.
pub const LLM_CALL_PAYLOAD: &str = "clutch.llm.call.v1";
/// `payload_type` of a built-in tool's answer (the workflow tools), recorded for resuming and
/// re-executing.
pub const LLM_TOOL_PAYLOAD: &str = "clutch.llm.tool.v1";
/// `payload_type` of streamed text, coalesced.
pub const LLM_TEXT_PAYLOAD: &str = "clutch.llm.text.v1";

/// The tool a task's structured answer is given through, offered when its request carries an
/// `output_schema` (its input schema); the answer is the task's `task.result` `structured`.
pub const ANSWER_TOOL: &str = "answer";

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
    /// The model asked for (the response names the one that answered).
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

/// Why a task failed. The code is text: a recorded run's may be one this daemon does not know.
#[derive(Debug, Clone)]
pub(crate) struct Failed {
    pub code: String,
    pub message: String,
    pub retryable: bool,
}

impl Failed {
    pub(crate) fn new(code: ErrorCode, message: impl Into<String>, retryable: bool) -> Failed {
        Failed { code: code.as_str().to_owned(), message: message.into(), retryable }
    }
}

/// Why the loop's world did not do what the loop asked (its text is what the model or the log is
/// told), or why an answer does not fit the task's output schema.
#[derive(Debug, thiserror::Error)]
pub(crate) enum Error {
    /// The log or the engine refused a message.
    #[error("{}", .0.message)]
    Refused(Box<Refusal>),
    /// The engine gave no answer for the message.
    #[error("not stored")]
    NotStored,
    /// The answer to a tool call will not come (its task is being stopped).
    #[error("the call's answer was lost")]
    AnswerLost,
    /// Re-executing: the run holds no answer to this tool call.
    #[error("the run holds no answer to {0}")]
    NoAnswer(String),
    /// Re-executing: the run holds no answer to this built-in tool call (its idempotency key).
    #[error("the run holds no answer to the built-in tool call {0}")]
    NoBuiltinAnswer(String),
    /// A built-in tool refused the call.
    #[error(transparent)]
    Builtin(#[from] builtin::Error),
    /// Re-executing: a built-in tool's refusal, as the run recorded it.
    #[error("{0}")]
    Recorded(String),
    /// The answer was text that does not read as JSON, and the model did not call `answer`.
    #[error("it was text, not JSON, and no call of `{}`", ANSWER_TOOL)]
    NotJson,
    /// The answer does not fit the schema: its first problems.
    #[error("{}", .0.join("; "))]
    Misfit(Vec<String>),
}

/// The parameters of the agent's calls.
pub(crate) struct Params {
    pub provider: String,
    pub model: String,
    pub max_tokens: u32,
    pub temperature: Option<f32>,
}

/// What the loop needs from the world.
pub(crate) trait Env: Sync {
    /// `agent:<name>`.
    fn id(&self) -> &str;
    fn config(&self) -> &spec::Config;
    fn params(&self) -> Params;
    fn system_prompt(&self, request: &Message) -> String;
    /// The tools offered to the model, and the Clutch tool each model name stands for.
    fn tools(&self) -> (Vec<ToolSpec>, HashMap<String, String>);
    /// What the log holds of this task so far.
    fn events(&self, request: &Message) -> impl Future<Output = Vec<Message>> + Send;
    /// A call that may cross a budget (the task's, the agent's, the run's) is refused before it is
    /// made.
    fn check_budgets(&self, request: &Message, req: &Request, used: Usage, cost: f64) -> Result<(), Failed>;
    /// One model call (its text streamed to the log as it comes).
    fn call(
        &self,
        request: &Message,
        turn: u32,
        req: &Request,
    ) -> impl Future<Output = Result<Response, Failed>> + Send;
    fn cost(&self, model: &str, usage: &Usage, turn: u32) -> f64;
    /// Stores messages the agent sends, through the engine as a client's (one message), or
    /// (`daemon`) through the log's gate in one batch, for the daemon's own `clutch.*` records and
    /// what goes with them. Returns the last message's id (the original's for a repeat), or the
    /// first refusal.
    fn send(&self, messages: Vec<Message>, daemon: bool) -> impl Future<Output = Result<String, Error>> + Send;
    /// A built-in tool (`builtin`) run as this agent: the answer's text, or the refusal's. `key` is
    /// the idempotency key its answer is recorded under.
    fn builtin(
        &self,
        key: &str,
        name: &str,
        args: Map<String, Value>,
    ) -> impl Future<Output = Result<String, Error>> + Send;
    /// The answer to a tool call, when it comes.
    fn answer(&self, call_id: &str) -> impl Future<Output = Result<Message, Error>> + Send;
    /// Stores `bytes` as an artifact: its reference and size.
    fn artifact(&self, bytes: Vec<u8>) -> impl Future<Output = Option<(String, u64)>> + Send;
}

/// What the log already holds about this attempt of the task.
#[derive(Default)]
struct History {
    accepted: bool,
    /// A record could not be stored: the task is no longer this agent's (cancelled, taken over).
    lost: bool,
    calls: HashMap<u32, Response>,
    /// Tool calls made, by idempotency key → their message id.
    tool_calls: HashMap<String, String>,
    /// Answers, by call id.
    answers: HashMap<String, Message>,
    /// Built-in tools' answers, by idempotency key: (text, is_error).
    builtins: HashMap<String, (String, bool)>,
    /// Usage already recorded.
    usage: Usage,
    cost_usd: f64,
}

/// Works the task `request` asks for, and answers it. `resume`: the task may have been worked
/// before (taken up after a restart), so the log is read for what was done.
pub(crate) async fn run<E: Env>(env: &E, request: Message, resume: bool) {
    let task_id = request.task_id.clone();
    let limit = Duration::from_millis(env.config().task_timeout_ms);
    let mut record = None;
    let outcome = match tokio::time::timeout(limit, work(env, &request, resume, &mut record)).await {
        Ok(outcome) => outcome,
        Err(_) => Err(Failed::new(
            ErrorCode::TaskTimeout,
            format!("the task took more than {} ms (task_timeout_ms)", env.config().task_timeout_ms),
            true,
        )),
    };
    let (kind, payload) = match outcome {
        Ok(None) => return,
        Ok(Some(payload)) => (MessageType::TaskResult, payload),
        Err(f) => {
            tracing::warn!(agent_id = %env.id(), task_id = %task_id, code = %f.code, message = %f.message, "llm task failed");
            let error = payload::TaskError {
                code: f.code,
                message: f.message,
                retryable: f.retryable,
                details: None,
                error: None,
            };
            (MessageType::TaskError, payload::object(&error))
        }
    };
    // The last call's record goes with the answer made from it, in one commit.
    let answer = message(env, &request, kind, payload, kind.as_str(), None);
    if let Err(e) = send_with(env, &mut record, answer).await {
        tracing::warn!(agent_id = %env.id(), task_id = %task_id, error = %e, "cannot answer the task");
    }
}

/// The loop. `Ok(None)`: the task is no longer this agent's (its accept was refused).
/// `record`: the last call's record, not stored yet: it is stored with the first message that
/// uses its answer (in the same commit, so an answer is never used before its record is durable).
async fn work<E: Env>(
    env: &E,
    request: &Message,
    resume: bool,
    record_slot: &mut Option<Message>,
) -> Result<Option<Map<String, Value>>, Failed> {
    // A delivery seen live is this attempt's start: nothing to read back.
    let mut history = if resume { history(env, request).await } else { History::default() };
    // Taken up again after a restart, it was accepted already (a second accept is no transition).
    // Otherwise the accept is sent with the first call (below).
    let mut accepting = !history.accepted;
    let (mut specs, names) = env.tools();
    let output_schema = output_schema(request);
    // (A re-execution's tools are the recorded ones, `answer` among them.)
    if let Some(schema) = output_schema
        && !specs.iter().any(|s| s.name == ANSWER_TOOL)
    {
        specs.push(answer_spec(schema));
    }
    // Answers that did not fit the output schema: the first is asked for again, the second ends the
    // task with its text alone (the requester decides what an unreadable answer counts as).
    let mut misfits = 0;
    let params = env.params();
    let model = params.model.clone();
    let mut req = Request {
        model: model.clone(),
        system: env.system_prompt(request),
        messages: vec![Turn { role: Role::User, content: vec![Part::Text { text: task_text(request) }] }],
        tools: specs,
        max_tokens: params.max_tokens,
        temperature: params.temperature,
        tool_choice: None,
    };
    let mut recorded_upto = 0;
    let mut totals = history.usage;
    let mut cost = history.cost_usd;
    for turn in 1..=env.config().max_turns {
        let response = match history.calls.remove(&turn) {
            Some(response) => response,
            None => {
                // The next request carries the last answer: its record is stored first, if no
                // message of the last turn took it along (a tool the model named wrongly).
                if let Some(r) = record_slot.take()
                    && let Err(e) = env.send(vec![r], true).await
                {
                    tracing::info!(agent_id = %env.id(), task_id = %request.task_id, error = %e, "cannot record a model call; the task is no longer this agent's");
                    return Ok(None);
                }
                if let Err(f) = env.check_budgets(request, &req, totals, cost) {
                    // A task ends only once it was accepted.
                    if std::mem::take(&mut accepting) && accept(env, request).await.is_err() {
                        return Ok(None);
                    }
                    return Err(f);
                }
                let began = Instant::now();
                let response = if std::mem::take(&mut accepting) {
                    // The accept's commit and the first call overlap; the answer is used (recorded,
                    // acted on) only once the accept is stored, and dropped if it is refused.
                    let (accepted, response) = tokio::join!(accept(env, request), env.call(request, turn, &req));
                    if accepted.is_err() {
                        return Ok(None);
                    }
                    response?
                } else {
                    env.call(request, turn, &req).await?
                };
                let usage = response.usage;
                let call_cost = env.cost(&model, &usage, turn);
                let call_record = Call {
                    turn,
                    provider: params.provider.clone(),
                    model: model.clone(),
                    request: call_request(env, &req, turn, recorded_upto).await,
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
                // Recorded before (or with) what uses it: after a restart it is read back, not bought again.
                let what = format!("llm:{turn}");
                *record_slot = Some(message(
                    env,
                    request,
                    MessageType::TaskProgress,
                    to_map(&call_record),
                    &what,
                    Some(LLM_CALL_PAYLOAD),
                ));
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
        let finish = |text: String, structured: Result<Option<Value>, Error>| {
            let mut result = Map::new();
            result.insert("text".into(), Value::String(text));
            match structured {
                Ok(Some(value)) => {
                    result.insert("structured".into(), value);
                }
                Ok(None) => {}
                Err(why) => {
                    result.insert("structured_error".into(), Value::String(why.to_string()));
                }
            }
            result.insert("stop".into(), serde_json::to_value(&response.stop).unwrap_or(Value::Null));
            result.insert("turns".into(), Value::from(turn));
            result.insert(
                "llm".into(),
                serde_json::json!({
                    "provider": params.provider, "model": model,
                    "input_tokens": totals.input_tokens, "output_tokens": totals.output_tokens,
                    "cache_read_tokens": totals.cache_read_tokens, "cost_usd": cost,
                }),
            );
            result
        };
        let mut misfit = None;
        match output_schema.and_then(|schema| answer_of(schema, &uses, &response)) {
            Some(Ok(value)) => {
                let text = match response.text() {
                    t if t.trim().is_empty() => value.to_string(),
                    t => t,
                };
                return Ok(Some(finish(text, Ok(Some(value)))));
            }
            Some(Err(why)) => {
                misfits += 1;
                if misfits >= 2 {
                    return Ok(Some(finish(response.text(), Err(why))));
                }
                misfit = Some(why);
            }
            None => {}
        }
        if uses.is_empty() {
            if let Some(why) = misfit {
                // Asked once more, and this time the model must call the tool.
                let text = format!(
                    "Your answer could not be read: {why}. Give it again by calling the `{ANSWER_TOOL}` tool, \
                     whose input is the answer."
                );
                req.messages.push(Turn { role: Role::User, content: vec![Part::Text { text }] });
                req.tool_choice = Some(ANSWER_TOOL.to_owned());
                continue;
            }
            return Ok(Some(finish(response.text(), Ok(None))));
        }
        let mut results = Vec::with_capacity(uses.len());
        for (i, (id, name, input)) in uses.into_iter().enumerate() {
            if name == ANSWER_TOOL && output_schema.is_some() {
                let why = misfit.as_ref().map(ToString::to_string).unwrap_or_default();
                let content = format!("not taken: {why}; call `{ANSWER_TOOL}` again with an answer that fits");
                results.push(Part::ToolResult { tool_use_id: id, content, is_error: true });
                req.tool_choice = Some(ANSWER_TOOL.to_owned());
                continue;
            }
            let (content, is_error) =
                use_tool(env, request, &names, (&mut history, &mut *record_slot), (turn, i), &name, input).await;
            if history.lost {
                tracing::info!(agent_id = %env.id(), task_id = %request.task_id, "cannot record a model call; the task is no longer this agent's");
                return Ok(None);
            }
            results.push(Part::ToolResult { tool_use_id: id, content, is_error });
        }
        req.messages.push(Turn { role: Role::User, content: results });
    }
    Err(Failed::new(
        ErrorCode::MaxTurns,
        format!("the model did not finish in {} calls (max_turns)", env.config().max_turns),
        false,
    ))
}

/// Accepts the task; a refusal (the task was cancelled or is another's now) is logged.
async fn accept<E: Env>(env: &E, request: &Message) -> Result<String, Error> {
    let accepted = send(env, request, MessageType::TaskAccept, Map::new(), "task.accept", None).await;
    if let Err(e) = &accepted {
        tracing::info!(agent_id = %env.id(), task_id = %request.task_id, error = %e, "task not accepted");
    }
    accepted
}

fn to_map<T: Serialize>(value: &T) -> Map<String, Value> {
    match serde_json::to_value(value) {
        Ok(Value::Object(map)) => map,
        _ => Map::new(),
    }
}

/// What this attempt already did, from the task's events.
async fn history<E: Env>(env: &E, request: &Message) -> History {
    let mut history = History::default();
    let prefix = key(env, request, "");
    for m in env.events(request).await {
        let mine = m.from.agent_id == env.id() && m.idempotency_key.as_deref().is_some_and(|k| k.starts_with(&prefix));
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
            MessageType::TaskProgress if mine && m.payload_type.as_deref() == Some(LLM_TOOL_PAYLOAD) => {
                let text = m.payload.get("answer").and_then(Value::as_str).unwrap_or_default().to_owned();
                let is_error = m.payload.get("is_error").and_then(Value::as_bool).unwrap_or(false);
                if let Some(k) = m.idempotency_key.clone() {
                    history.builtins.insert(k, (text, is_error));
                }
            }
            MessageType::ToolCall if mine => {
                if let Some(k) = m.idempotency_key.clone() {
                    history.tool_calls.insert(k, m.id.clone());
                }
            }
            MessageType::ToolResult | MessageType::ToolError if m.to.iter().any(|r| r.agent_id == env.id()) => {
                if let Some(id) = m.payload.get("call_id").and_then(Value::as_str) {
                    history.answers.insert(id.to_owned(), m);
                }
            }
            _ => {}
        }
    }
    if !history.calls.is_empty() {
        tracing::info!(agent_id = %env.id(), task_id = %request.task_id, recorded = history.calls.len(), "resuming a task from its recorded model calls");
    }
    history
}

/// The idempotency key of this agent's `what` in this attempt of the task.
pub(crate) fn key<E: Env>(env: &E, request: &Message, what: &str) -> String {
    format!("{}:{}:{}:{what}", env.id(), request.task_id, request.attempt)
}

/// The `emit` tool, always offered.
pub(crate) fn emit_spec() -> ToolSpec {
    ToolSpec {
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
    }
}

/// `mcp:files/read_file` → `files__read_file`: the characters providers accept, at most 64.
pub(crate) fn model_name(tool: &str) -> String {
    let bare = tool.strip_prefix("mcp:").unwrap_or(tool).replacen('/', "__", 1);
    let mut name: String =
        bare.chars().map(|c| if c.is_ascii_alphanumeric() || c == '_' || c == '-' { c } else { '_' }).collect();
    name.truncate(64);
    name
}

pub(crate) fn system_prompt(system: &str, agent_id: &str, request: &Message) -> String {
    let done = if output_schema(request).is_some() {
        format!("When you are done, give your answer by calling the `{ANSWER_TOOL}` tool, whose input is the answer.")
    } else {
        "When you are done, answer with your result as plain text.".to_owned()
    };
    format!(
        "{}\n\n## Current task\n- You are {} in Clutch, working on task {} of run {}.\n- Use the `emit` tool to report \
         progress on long work.\n- {done}",
        system.trim_end(),
        agent_id,
        request.task_id,
        request.run_id
    )
}

/// The JSON Schema a task's answer must fit (`payload.output_schema`), when it names one.
fn output_schema(request: &Message) -> Option<&Value> {
    request.payload.get("output_schema").filter(|s| s.is_object())
}

/// The `answer` tool for `schema`.
fn answer_spec(schema: &Value) -> ToolSpec {
    ToolSpec {
        name: ANSWER_TOOL.into(),
        description: "Give your final answer to the task. Call it once, when you are done; its input is the answer."
            .into(),
        input_schema: schema.clone(),
    }
}

/// The structured answer a response gives for `schema`, validated: the `answer` tool's input,
/// else, when it uses no tool, its text read as that JSON. `None`: it uses other tools only.
fn answer_of(schema: &Value, uses: &[(String, String, Value)], response: &Response) -> Option<Result<Value, Error>> {
    let given = match uses.iter().find(|(_, name, _)| name == ANSWER_TOOL) {
        Some((_, _, input)) => Ok(input.clone()),
        None if uses.is_empty() => json_in(&response.text()).ok_or(Error::NotJson),
        None => return None,
    };
    Some(given.and_then(|v| fits(schema, &v).map(|()| v)))
}

/// Whether `value` fits `schema`; why not, in a few words, when it does not.
pub(crate) fn fits(schema: &Value, value: &Value) -> Result<(), Error> {
    let problems = clutch_core::schemas::check(schema, value, "answer");
    if problems.is_empty() {
        return Ok(());
    }
    let mut why: Vec<String> = problems.iter().take(5).map(|p| format!("{}: {}", p.path, p.message)).collect();
    if problems.len() > 5 {
        why.push(format!("and {} more", problems.len() - 5));
    }
    Err(Error::Misfit(why))
}

/// The JSON value `text` is, whole or as the one fenced block it holds (```json … ```).
pub fn json_in(text: &str) -> Option<Value> {
    let text = text.trim();
    if let Ok(v) = serde_json::from_str(text) {
        return Some(v);
    }
    let start = text.find("```")?;
    let body = &text[start + 3..];
    let body = body.strip_prefix("json").unwrap_or(body);
    let end = body.find("```")?;
    serde_json::from_str(body[..end].trim()).ok()
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

/// A call whose estimate would cross the task's budget, or one of `limits` (whose budget — the
/// agent's, the run's —, the tokens and dollars used, the budget), is refused.
pub(crate) fn check_budget(
    config: &spec::Config,
    provider: &provider::Config,
    req: &Request,
    (used, cost): (Usage, f64),
    limits: &[(String, (u64, f64), spec::Budget)],
) -> Result<(), Failed> {
    let estimate = provider::estimate_tokens(req);
    let input = estimate.saturating_sub(u64::from(req.max_tokens));
    let worst = Usage { input_tokens: input, output_tokens: u64::from(req.max_tokens), ..Usage::default() };
    let worst_cost = provider.cost(&req.model, &worst);
    let over = |what: &str, used_tokens: u64, used_cost: f64, b: spec::Budget| -> Option<Failed> {
        let message = if let Some(limit) = b.tokens.filter(|l| used_tokens + estimate > *l) {
            format!("{what} token budget is {limit}; {used_tokens} used and the next call may take {estimate}")
        } else if let Some(limit) = b.cost_usd.filter(|l| used_cost + worst_cost > *l) {
            format!("{what} budget is ${limit}; ${used_cost:.4} spent and the next call may cost ${worst_cost:.4}")
        } else {
            return None;
        };
        Some(Failed::new(ErrorCode::BudgetExceeded, format!("{message}: the call was not made"), false))
    };
    if let Some(b) = config.task_budget
        && let Some(f) = over("the task's", used.input_tokens + used.output_tokens, cost, b)
    {
        return Err(f);
    }
    for (whose, (tokens, spent), b) in limits {
        if let Some(f) = over(whose, *tokens, *spent, *b) {
            return Err(f);
        }
    }
    Ok(())
}

/// The record of what the call sent beyond the previous one.
async fn call_request<E: Env>(env: &E, req: &Request, turn: u32, recorded_upto: usize) -> CallRequest {
    let added = serde_json::to_value(&req.messages[recorded_upto.min(req.messages.len())..]).unwrap_or(Value::Null);
    let text = added.to_string();
    let added = if text.len() > INLINE_MAX {
        match env.artifact(text.into_bytes()).await {
            Some((reference, size)) => serde_json::json!({"artifact": reference, "size": size}),
            None => added,
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
async fn use_tool<E: Env>(
    env: &E,
    request: &Message,
    names: &HashMap<String, String>,
    (history, record): (&mut History, &mut Option<Message>),
    (turn, i): (u32, usize),
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
        let progress = message(env, request, MessageType::TaskProgress, payload, &format!("emit:{turn}:{i}"), None);
        let with_record = record.is_some();
        return match send_with(env, record, progress).await {
            Ok(_) => ("emitted".into(), false),
            Err(e) => {
                history.lost |= with_record;
                (format!("not emitted: {e}"), true)
            }
        };
    }
    if let Some(entry) = builtin::entry_of(name)
        && env.config().tools.iter().any(|t| t == entry)
    {
        let what = format!("builtin:{turn}:{i}");
        let key = key(env, request, &what);
        if let Some(recorded) = history.builtins.remove(&key) {
            return recorded;
        }
        let (text, is_error) = match env.builtin(&key, name, args).await {
            Ok(text) => (text, false),
            Err(e) => (e.to_string(), true),
        };
        // Recorded (with the call's record, when it waits) before the model sees it.
        let mut payload = Map::new();
        payload.insert("tool".into(), Value::String(name.to_owned()));
        payload.insert("answer".into(), Value::String(text.clone()));
        payload.insert("is_error".into(), Value::Bool(is_error));
        let note = message(env, request, MessageType::TaskProgress, payload, &what, Some(LLM_TOOL_PAYLOAD));
        let mut batch: Vec<Message> = record.take().into_iter().collect();
        batch.push(note);
        if let Err(e) = env.send(batch, true).await {
            history.lost = true;
            return (format!("not recorded: {e}"), true);
        }
        return (text, is_error);
    }
    let Some(tool) = names.get(name) else {
        let mut offered: Vec<&str> = names.keys().map(String::as_str).collect();
        offered.sort_unstable();
        offered.insert(0, "emit");
        return (format!("there is no tool named {name}; the tools are: {}", offered.join(", ")), true);
    };
    let what = format!("tool:{turn}:{i}");
    let call_id = match history.tool_calls.get(&key(env, request, &what)) {
        Some(id) => id.clone(),
        None => {
            // A tool call goes through the engine as a client's (its refusals are answered in the
            // log): the record it follows is stored first.
            if let Some(r) = record.take()
                && let Err(e) = env.send(vec![r], true).await
            {
                history.lost = true;
                return (format!("the call was not made: {e}"), true);
            }
            let call = payload::ToolCall { tool: tool.clone(), args };
            match send(env, request, MessageType::ToolCall, payload::object(&call), &what, None).await {
                Ok(id) => id,
                Err(e) => return (format!("the call was refused: {e}"), true),
            }
        }
    };
    let answer = match history.answers.remove(&call_id) {
        Some(answer) => answer,
        None => match env.answer(&call_id).await {
            Ok(answer) => answer,
            Err(e) => return (e.to_string(), true),
        },
    };
    tool_answer(&answer)
}

/// A `tool.result` or `tool.error` as text for the model.
fn tool_answer(answer: &Message) -> (String, bool) {
    if answer.kind == MessageType::ToolError {
        let code = answer.payload.get("code").and_then(Value::as_str).unwrap_or(ErrorCode::ToolFailed.as_str());
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

/// A message from the agent about the task: to the orchestrator (a tool call to no one), with the
/// idempotency key of `what`, and `payload_type` when given.
pub(crate) fn message<E: Env>(
    env: &E,
    request: &Message,
    kind: MessageType,
    payload: Map<String, Value>,
    what: &str,
    payload_type: Option<&str>,
) -> Message {
    let mut m = Message::new(kind, env.id(), (&request.run_id, &request.thread_id, &request.task_id), payload);
    m.parent_task_id = request.parent_task_id.clone();
    m.attempt = request.attempt;
    m.trace = request.trace.clone();
    if kind != MessageType::ToolCall {
        m.to = vec![Recipient { agent_id: clutch_core::tasks::ORCHESTRATOR.to_owned() }];
    }
    m.payload_type = payload_type.map(str::to_owned);
    m.idempotency_key = Some(key(env, request, what));
    m
}

/// Sends a message about the task; `clutch.*` payload types go through the log as the daemon's.
pub(crate) async fn send<E: Env>(
    env: &E,
    request: &Message,
    kind: MessageType,
    payload: Map<String, Value>,
    what: &str,
    payload_type: Option<&str>,
) -> Result<String, Error> {
    let m = message(env, request, kind, payload, what, payload_type);
    env.send(vec![m], payload_type.is_some()).await
}

/// Sends `m`, with the record waiting to be stored (if one is) in the same commit.
async fn send_with<E: Env>(env: &E, record: &mut Option<Message>, m: Message) -> Result<String, Error> {
    match record.take() {
        Some(r) => env.send(vec![r, m], true).await,
        None => env.send(vec![m], false).await,
    }
}
