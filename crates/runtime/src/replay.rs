//! Re-execution of a recorded run (`clutch runs replay RUN --reexecute`): each task an LLM agent
//! worked is worked again by the same loop, offline, its model calls answered by the recorded
//! responses and its tool calls by the recorded answers; what the loop sends is compared with what
//! the agent sent then. Ids and times aside (and the streamed text, whose coalescing follows the
//! clock), the sequences must be the same: agent behaviour is testable without a provider.

use std::collections::{BTreeMap, HashMap};
use std::sync::Mutex;

use clutch_proto::card::AgentCard;
use clutch_proto::{ErrorCode, Message, MessageType};
use serde_json::{Map, Value};
use sha2::Digest;

use crate::provider::{Request, Response, ToolSpec, Usage};
use crate::work::{self, Call, Env, Failed, LLM_CALL_PAYLOAD, LLM_TEXT_PAYLOAD, LLM_TOOL_PAYLOAD, Params};
use crate::{builtin, spec};

/// What re-executing one task showed.
#[derive(Debug, Clone, PartialEq)]
pub struct Outcome {
    pub task_id: String,
    pub agent_id: String,
    pub attempt: u32,
    /// Messages the agent sent then (the streamed text aside), all compared.
    pub compared: usize,
    /// The first difference, when there is one.
    pub difference: Option<String>,
}

/// Why a task's recording cannot be re-executed.
#[derive(Debug, thiserror::Error)]
enum Error {
    #[error("the run holds no delivery of {task_id} to {agent_id} (attempt {attempt})")]
    NoDelivery { task_id: String, agent_id: String, attempt: u32 },
    #[error("a model call's record of {task_id} does not read: {source}")]
    Unreadable { task_id: String, source: serde_json::Error },
    #[error("the first model call of {0} is not in the run")]
    NoFirstCall(String),
    #[error("{agent_id}'s card: {source}")]
    Card { agent_id: String, source: spec::Invalid },
}

/// Re-executes every task of `events` (one run's, in order) that an LLM agent worked, with each
/// agent's settings from its card in `cards` (or, without one, what its records say).
pub async fn reexecute(events: &[Message], cards: &HashMap<String, AgentCard>) -> Vec<Outcome> {
    // (task, agent, attempt) of every recorded model call, in the order first seen.
    let mut worked: Vec<(String, String, u32)> = Vec::new();
    for m in events {
        if m.kind == MessageType::TaskProgress && m.payload_type.as_deref() == Some(LLM_CALL_PAYLOAD) {
            let key = (m.task_id.clone(), m.from.agent_id.clone(), m.attempt);
            if !worked.contains(&key) {
                worked.push(key);
            }
        }
    }
    let mut outcomes = Vec::new();
    for (task_id, agent_id, attempt) in worked {
        let outcome = match Recorded::read(events, &task_id, &agent_id, attempt, cards.get(&agent_id)) {
            Ok(recorded) => recorded.rerun().await,
            Err(why) => Outcome { task_id, agent_id, attempt, compared: 0, difference: Some(why.to_string()) },
        };
        outcomes.push(outcome);
    }
    outcomes
}

/// One task's recording, and the world the loop sees when it is re-executed.
struct Recorded {
    agent_id: String,
    request: Message,
    config: spec::Config,
    params: Params,
    system: String,
    tools: Vec<String>,
    /// Model calls by turn: the response and its cost.
    calls: BTreeMap<u32, (Response, f64)>,
    /// Tool calls: idempotency key → the call's id, and answers by call id.
    tool_calls: HashMap<String, String>,
    answers: HashMap<String, Message>,
    /// How the task ended when no more calls were made (a failure), to give the loop back.
    ended: Option<Failed>,
    /// What the agent sent then, compared.
    sent: Vec<Message>,
    /// What the loop sends now.
    produced: Mutex<Vec<Message>>,
}

fn compared(m: &Message) -> bool {
    matches!(
        m.kind,
        MessageType::TaskAccept
            | MessageType::TaskProgress
            | MessageType::TaskResult
            | MessageType::TaskError
            | MessageType::ToolCall
    ) && m.payload_type.as_deref() != Some(LLM_TEXT_PAYLOAD)
}

impl Recorded {
    fn read(
        events: &[Message],
        task_id: &str,
        agent_id: &str,
        attempt: u32,
        card: Option<&AgentCard>,
    ) -> Result<Recorded, Error> {
        let of_task: Vec<&Message> = events.iter().filter(|m| m.task_id == task_id).collect();
        let request = of_task
            .iter()
            .rev()
            // Routed to it by the daemon, or sent to it by name (a position's turn), as the agent
            // takes them.
            .find(|m| {
                m.kind == MessageType::TaskRequest
                    && m.attempt == attempt
                    && m.to.iter().any(|r| r.agent_id == agent_id)
            })
            .map(|m| (*m).clone())
            .ok_or_else(|| Error::NoDelivery { task_id: task_id.to_owned(), agent_id: agent_id.to_owned(), attempt })?;
        let sent: Vec<Message> = of_task
            .iter()
            .filter(|m| m.from.agent_id == agent_id && m.attempt == attempt && compared(m))
            .map(|m| (*m).clone())
            .collect();
        let mut calls = BTreeMap::new();
        let mut first: Option<Call> = None;
        for m in &sent {
            if m.payload_type.as_deref() == Some(LLM_CALL_PAYLOAD) {
                let call: Call = serde_json::from_value(Value::Object(m.payload.clone()))
                    .map_err(|source| Error::Unreadable { task_id: task_id.to_owned(), source })?;
                if call.turn == 1 {
                    first = Some(call.clone());
                }
                calls.insert(call.turn, (call.response, call.usage.cost_usd));
            }
        }
        let first = first.ok_or_else(|| Error::NoFirstCall(task_id.to_owned()))?;
        let config = match card.and_then(spec::Config::from_card) {
            Some(Ok(config)) => config,
            Some(Err(source)) => return Err(Error::Card { agent_id: agent_id.to_owned(), source }),
            // Without the card, what the records say: as many turns as were recorded, at least.
            None => spec::Config {
                name: agent_id.trim_start_matches("agent:").to_owned(),
                provider: first.provider.clone(),
                model: Some(first.model.clone()),
                description: None,
                system: first.request.system.clone().unwrap_or_default(),
                capabilities: Vec::new(),
                // The built-in tools, when it used them (other tools are named by their calls).
                tools: if sent.iter().any(|m| m.payload_type.as_deref() == Some(LLM_TOOL_PAYLOAD)) {
                    builtin::ENTRIES.iter().map(|e| (*e).to_owned()).collect()
                } else {
                    Vec::new()
                },
                max_turns: u32::MAX,
                max_concurrency: 1,
                task_timeout_ms: u64::MAX / 4,
                max_tokens: Some(first.request.max_tokens),
                temperature: first.request.temperature,
                budget: None,
                task_budget: None,
            },
        };
        let mut tool_calls = HashMap::new();
        for m in &sent {
            if m.kind == MessageType::ToolCall
                && let Some(k) = &m.idempotency_key
            {
                tool_calls.insert(k.clone(), m.id.clone());
            }
        }
        let answers = of_task
            .iter()
            .filter(|m| matches!(m.kind, MessageType::ToolResult | MessageType::ToolError))
            .filter_map(|m| Some((m.payload.get("call_id")?.as_str()?.to_owned(), (*m).clone())))
            .collect();
        let ended = sent.iter().rev().find(|m| m.kind == MessageType::TaskError).map(|m| {
            let text = |k: &str| m.payload.get(k).and_then(Value::as_str).unwrap_or_default().to_owned();
            Failed {
                code: text("code"),
                message: text("message"),
                retryable: m.payload.get("retryable").and_then(Value::as_bool).unwrap_or(false),
            }
        });
        Ok(Recorded {
            agent_id: agent_id.to_owned(),
            params: Params {
                provider: first.provider.clone(),
                model: first.model.clone(),
                max_tokens: first.request.max_tokens,
                temperature: first.request.temperature,
            },
            system: first.request.system.clone().unwrap_or_default(),
            tools: first.request.tools.clone(),
            request,
            config,
            calls,
            tool_calls,
            answers,
            ended,
            sent,
            produced: Mutex::new(Vec::new()),
        })
    }

    async fn rerun(self) -> Outcome {
        work::run(&self, self.request.clone(), false).await;
        let produced = std::mem::take(&mut *self.produced.lock().unwrap_or_else(|e| e.into_inner()));
        let produced: Vec<Message> = produced.into_iter().filter(compared).collect();
        let mut difference = None;
        for i in 0..self.sent.len().max(produced.len()) {
            let (then, now) = (self.sent.get(i).map(normal), produced.get(i).map(normal));
            if then != now {
                difference = Some(format!(
                    "message {} differs: recorded {}, re-executed {}",
                    i + 1,
                    shown(then.as_ref()),
                    shown(now.as_ref())
                ));
                break;
            }
        }
        Outcome {
            task_id: self.request.task_id.clone(),
            agent_id: self.agent_id.clone(),
            attempt: self.request.attempt,
            compared: self.sent.len(),
            difference,
        }
    }
}

/// A message as compared: its kind, payload type, idempotency key and payload, without what
/// follows the clock (`duration_ms`).
fn normal(m: &Message) -> Value {
    let mut payload = m.payload.clone();
    payload.remove("duration_ms");
    serde_json::json!({
        "type": m.kind.as_str(), "payload_type": m.payload_type, "idempotency_key": m.idempotency_key,
        "payload": payload,
    })
}

fn shown(v: Option<&Value>) -> String {
    let Some(v) = v else { return "nothing".into() };
    let text = v.to_string();
    if text.len() <= 400 { text } else { format!("{}…", &text[..text.floor_char_boundary(400)]) }
}

impl Env for Recorded {
    fn id(&self) -> &str {
        &self.agent_id
    }

    fn config(&self) -> &spec::Config {
        &self.config
    }

    fn params(&self) -> Params {
        Params {
            provider: self.params.provider.clone(),
            model: self.params.model.clone(),
            max_tokens: self.params.max_tokens,
            temperature: self.params.temperature,
        }
    }

    fn system_prompt(&self, _request: &Message) -> String {
        self.system.clone()
    }

    /// The tools the first call offered, by name (their schemas are not recorded, and not compared).
    fn tools(&self) -> (Vec<ToolSpec>, HashMap<String, String>) {
        let specs = self
            .tools
            .iter()
            .map(|name| ToolSpec {
                name: name.clone(),
                description: String::new(),
                input_schema: serde_json::json!({}),
            })
            .collect();
        let mut names = HashMap::new();
        for m in &self.sent {
            if m.kind == MessageType::ToolCall
                && let Some(tool) = m.payload.get("tool").and_then(Value::as_str)
            {
                names.insert(work::model_name(tool), tool.to_owned());
            }
        }
        (specs, names)
    }

    async fn events(&self, _request: &Message) -> Vec<Message> {
        Vec::new()
    }

    fn check_budgets(&self, _request: &Message, _req: &Request, _used: Usage, _cost: f64) -> Result<(), Failed> {
        // The call the loop is about to make: recorded, or refused then as it ended.
        let next =
            self.produced.lock().unwrap_or_else(|e| e.into_inner()).iter().filter(|m| is_call(m)).count() as u32 + 1;
        match (self.calls.contains_key(&next), &self.ended) {
            (false, Some(f)) if f.code == ErrorCode::BudgetExceeded.as_str() => Err(f.clone()),
            _ => Ok(()),
        }
    }

    async fn call(&self, _request: &Message, turn: u32, _req: &Request) -> Result<Response, Failed> {
        match (self.calls.get(&turn), &self.ended) {
            (Some((response, _)), _) => Ok(response.clone()),
            (None, Some(f)) => Err(f.clone()),
            (None, None) => Err(Failed::new(
                ErrorCode::ReplayDiverged,
                format!("the loop made call {turn}, which was never made"),
                false,
            )),
        }
    }

    fn cost(&self, _model: &str, _usage: &Usage, turn: u32) -> f64 {
        self.calls.get(&turn).map_or(0.0, |(_, cost)| *cost)
    }

    async fn send(&self, messages: Vec<Message>, _daemon: bool) -> Result<String, work::Error> {
        let mut id = String::new();
        for message in messages {
            id = match (&message.kind, &message.idempotency_key) {
                (MessageType::ToolCall, Some(k)) => {
                    self.tool_calls.get(k).cloned().unwrap_or_else(|| message.id.clone())
                }
                _ => message.id.clone(),
            };
            self.produced.lock().unwrap_or_else(|e| e.into_inner()).push(message);
        }
        Ok(id)
    }

    async fn builtin(&self, key: &str, _name: &str, _args: Map<String, Value>) -> Result<String, work::Error> {
        let recorded = self
            .sent
            .iter()
            .find(|m| m.payload_type.as_deref() == Some(LLM_TOOL_PAYLOAD) && m.idempotency_key.as_deref() == Some(key))
            .ok_or_else(|| work::Error::NoBuiltinAnswer(key.to_owned()))?;
        let text = recorded.payload.get("answer").and_then(Value::as_str).unwrap_or_default().to_owned();
        if recorded.payload.get("is_error").and_then(Value::as_bool).unwrap_or(false) {
            Err(work::Error::Recorded(text))
        } else {
            Ok(text)
        }
    }

    async fn answer(&self, call_id: &str) -> Result<Message, work::Error> {
        self.answers.get(call_id).cloned().ok_or_else(|| work::Error::NoAnswer(call_id.to_owned()))
    }

    async fn artifact(&self, bytes: Vec<u8>) -> Option<(String, u64)> {
        let digest = sha2::Sha256::digest(&bytes);
        Some((format!("artifact:sha256:{}", hex::encode(digest)), bytes.len() as u64))
    }
}

fn is_call(m: &Message) -> bool {
    m.payload_type.as_deref() == Some(LLM_CALL_PAYLOAD)
}
