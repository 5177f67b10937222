//! The loop's world when an agent works for real: the daemon's log and engine, the provider, and
//! the agent's inbox for tool answers.

use std::collections::HashMap;
use std::time::Duration;

use clutch_proto::{ErrorCode, Message, MessageType};
use clutch_store::Filter;
use serde_json::{Map, Value};
use tokio::sync::mpsc;

use crate::agent::Agent;
use crate::provider::{Request, Response, ToolSpec, Usage};
use crate::work::{self, Env, Failed, LLM_TEXT_PAYLOAD, Params};
use crate::{builtin, spec};

/// How often streamed text is written to the log at most.
const TEXT_EVERY: Duration = Duration::from_millis(500);

impl Env for Agent {
    fn id(&self) -> &str {
        &self.id
    }

    fn config(&self) -> &spec::Config {
        &self.config
    }

    fn params(&self) -> Params {
        Params {
            provider: self.provider.config.name.clone(),
            model: self.config.model.clone().unwrap_or_else(|| self.provider.config.model.clone()),
            max_tokens: self.config.max_tokens.unwrap_or(self.provider.config.max_tokens),
            temperature: self.config.temperature.or(self.provider.config.temperature),
        }
    }

    fn system_prompt(&self, request: &Message) -> String {
        work::system_prompt(&self.config.system, &self.id, request)
    }

    /// The agent's entries matched against the tools the adapters serve now, plus `emit`.
    fn tools(&self) -> (Vec<ToolSpec>, HashMap<String, String>) {
        let mut specs = vec![work::emit_spec()];
        specs.extend(builtin::specs(&self.config.tools));
        let mut names = HashMap::new();
        if self.config.tools.is_empty() {
            return (specs, names);
        }
        for server in self.engine.adapters().tools().servers {
            for tool in server.tools {
                if !self.config.tools.iter().any(|entry| clutch_core::tool::covers(entry, &tool.name)) {
                    continue;
                }
                let model_name = work::model_name(&tool.name);
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

    async fn events(&self, request: &Message) -> Vec<Message> {
        let filter = Filter { task_id: Some(request.task_id.clone()), ..Filter::default() };
        let mut out = Vec::new();
        let mut after = 0;
        loop {
            let events = match self.log.read(&filter, after, 1000).await {
                Ok(events) => events,
                Err(e) => {
                    tracing::warn!(agent_id = %self.id, task_id = %request.task_id, error = %e, "cannot read the task's history");
                    return out;
                }
            };
            let Some(last) = events.last() else { return out };
            after = last.seq;
            out.extend(events.iter().filter_map(|e| e.message().ok()));
        }
    }

    fn check_budgets(&self, request: &Message, req: &Request, used: Usage, cost: f64) -> Result<(), Failed> {
        let mut limits = Vec::new();
        if let Some(v) = self.engine.agent(&self.id)
            && let Some(b) = v.budget
        {
            let budget = spec::Budget { tokens: b.tokens, cost_usd: b.cost_usd };
            limits.push((format!("{}'s", self.id), (v.usage.tokens, v.usage.cost_usd), budget));
        }
        if let Some(b) = self.engine.options().policy.org.budgets.run
            && (b.tokens.is_some() || b.cost_usd.is_some())
        {
            let spent = self.engine.run_usage(&request.run_id).map_or((0, 0.0), |u| (u.tokens, u.cost_usd));
            let budget = spec::Budget { tokens: b.tokens, cost_usd: b.cost_usd };
            limits.push((format!("run {}'s", request.run_id), spent, budget));
        }
        work::check_budget(&self.config, &self.provider.config, req, (used, cost), &limits)
    }

    async fn call(&self, request: &Message, turn: u32, req: &Request) -> Result<Response, Failed> {
        let (tx, rx) = mpsc::unbounded_channel::<String>();
        let provider = self.provider.clone();
        let making = async move {
            let mut on_text = move |t: &str| {
                let _ = tx.send(t.to_owned());
            };
            provider.complete(req, &mut on_text).await
        };
        let (answer, ()) = tokio::join!(making, pump_text(self, request, turn, rx));
        answer.map_err(|e| {
            let code = if e.kind.retryable() { ErrorCode::LlmUnavailable } else { ErrorCode::LlmFailed };
            Failed::new(code, e.to_string(), e.kind.retryable())
        })
    }

    fn cost(&self, model: &str, usage: &Usage, _turn: u32) -> f64 {
        self.provider.config.cost(model, usage)
    }

    async fn send(&self, messages: Vec<Message>, daemon: bool) -> Result<String, work::Error> {
        let refused = |e: clutch_core::Error| work::Error::Refused(Box::new(e.body()));
        if daemon {
            let outcomes = self.log.append(messages).await.map_err(refused)?;
            let mut last = String::new();
            for outcome in outcomes {
                last = outcome.map_err(refused)?.id;
            }
            return Ok(last);
        }
        match self.engine.submit(messages).await.map(|mut a| a.pop()) {
            Ok(Some(Ok(clutch_core::engine::Ack::Stored(outcome)))) => Ok(outcome.id),
            Ok(Some(Ok(_))) => Ok(String::new()),
            Ok(Some(Err(e))) | Err(e) => Err(refused(e)),
            Ok(None) => Err(work::Error::NotStored),
        }
    }

    async fn builtin(&self, _key: &str, name: &str, args: Map<String, Value>) -> Result<String, work::Error> {
        Ok(builtin::call(&self.engine, &self.id, name, args).await?.to_string())
    }

    async fn answer(&self, call_id: &str) -> Result<Message, work::Error> {
        let waiting = self.answers().take_or_wait(call_id);
        match waiting {
            Ok(answer) => Ok(answer),
            Err(rx) => rx.await.map_err(|_| work::Error::AnswerLost),
        }
    }

    async fn artifact(&self, bytes: Vec<u8>) -> Option<(String, u64)> {
        self.log.put_artifact(bytes::Bytes::from(bytes)).await.ok().map(|a| (a.reference, a.size))
    }
}

/// Writes streamed text to the log, at most every [`TEXT_EVERY`], until the call ends (a call
/// answered within the first window writes none: its record follows at once).
async fn pump_text(agent: &Agent, request: &Message, turn: u32, mut rx: mpsc::UnboundedReceiver<String>) {
    let mut part = 0;
    // A retry's restart (an empty piece) is told with the next text written, never alone.
    let mut restart_pending = false;
    while let Some(first) = rx.recv().await {
        let mut text = first;
        let mut restarted = restart_pending || text.is_empty();
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
        // A call that ended before the first window closed wrote nothing yet: its record, stored
        // next, holds the whole text, so the log gets no copy of it.
        if part == 0 && !open {
            break;
        }
        restart_pending = restarted && text.is_empty();
        if !text.is_empty() {
            restart_pending = false;
            part += 1;
            let mut payload = Map::new();
            payload.insert("turn".into(), Value::from(turn));
            payload.insert("text".into(), Value::String(text));
            if restarted {
                payload.insert("restarted".into(), Value::Bool(true));
            }
            let what = format!("text:{turn}:{part}");
            if let Err(e) =
                work::send(agent, request, MessageType::TaskProgress, payload, &what, Some(LLM_TEXT_PAYLOAD)).await
            {
                tracing::debug!(agent_id = %agent.id, error = %e, "streamed text not recorded");
            }
        }
        if !open {
            break;
        }
    }
}
