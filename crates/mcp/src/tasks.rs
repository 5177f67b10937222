//! MCP's tasks extension (SEP-2663) over Clutch tasks: a tool whose work outlives the call
//! (`position_invoke`) answers a client that declares the extension with an MCP task whose id is the
//! Clutch task that stands for the work. Nothing is kept here: `tasks/get` reads that task from the
//! engine (its state while it works, then the tool's answer with the message that ended it), and
//! `tasks/cancel` is its requester's `task.cancel`, so any daemon sharing the store answers either.

use clutch_core::Engine;
use clutch_core::access::{Access, Caller};
use clutch_core::view::{self, TaskState};
use clutch_proto::MessageType;
use clutch_proto::error::quote;
use rmcp::ErrorData;
use rmcp::model::{
    CallToolResult, CreateTaskResult, DetailedTask, GetTaskResult, JsonObject, Task, TaskPayload, TaskStatus,
};

/// How often a client is asked to poll, in milliseconds.
const POLL_MS: u64 = 1000;

/// The MCP task standing for Clutch task `task_id`, as a call answers it: working.
pub(crate) fn created(task_id: &str) -> CreateTaskResult {
    let now = clutch_proto::validate::format_ts(std::time::SystemTime::now());
    CreateTaskResult::new(Task::new(task_id, TaskStatus::Working, now.clone(), now).with_poll_interval_ms(POLL_MS))
}

/// `tasks/get`: the Clutch task `task_id` as an MCP task. While it works, its state (a session's
/// phase and step) is the status message; once it has ended, the result is `position_invoke`'s
/// answer with the task's state and the message that ended it (`isError` unless it completed).
pub(crate) async fn get(engine: &Engine, caller: &Caller, task_id: &str) -> Result<GetTaskResult, ErrorData> {
    caller.may(Access::Read).map_err(|r| ErrorData::invalid_request(r.message, None))?;
    let task = engine
        .find_task(task_id)
        .await
        .map_err(|e| ErrorData::internal_error(e.to_string(), None))?
        .ok_or_else(|| unknown(task_id))?;
    let session = engine.sessions_list(Some(&task.run_id)).sessions.pop();
    let created = task.history.as_ref().and_then(|h| h.first()).map(|s| s.ts.clone()).unwrap_or_default();
    let updated = task.history.as_ref().and_then(|h| h.last()).map(|s| s.ts.clone()).unwrap_or_default();
    let mut base = Task::new(task_id, TaskStatus::Working, created, updated).with_poll_interval_ms(POLL_MS);
    if !task.state.is_final() {
        let message = match &session {
            Some(s) => match &s.step {
                Some(step) => format!("{} ({step})", s.status.as_str()),
                None => s.status.as_str().to_owned(),
            },
            None => task.state.as_str().to_owned(),
        };
        base = base.with_status_message(message);
        return Ok(GetTaskResult::new(DetailedTask::new(base, TaskPayload::Working)));
    }
    let outcome = engine.task_end(task_id).await.map_err(|e| ErrorData::internal_error(e.to_string(), None))?;
    if task.state == TaskState::Cancelled {
        let why = outcome.as_ref().and_then(|o| o.payload["reason"].as_str()).unwrap_or("cancelled");
        base = base.with_status_message(why.to_owned());
        return Ok(GetTaskResult::new(DetailedTask::new(base, TaskPayload::Cancelled)));
    }
    let failed = outcome.as_ref().is_none_or(|o| o.kind != MessageType::TaskResult);
    let answer = view::Invoked {
        session_id: task.run_id.clone(),
        task_id: task.task_id.clone(),
        thread_id: task.thread_id.clone(),
        position: session.map(|s| s.position).unwrap_or_default(),
        state: Some(task.state),
        outcome,
    };
    let answer = serde_json::to_value(answer).map_err(|e| ErrorData::internal_error(e.to_string(), None))?;
    let result = if failed { CallToolResult::structured_error(answer) } else { CallToolResult::structured(answer) };
    let result = match serde_json::to_value(result) {
        Ok(serde_json::Value::Object(map)) => map,
        _ => JsonObject::new(),
    };
    Ok(GetTaskResult::new(DetailedTask::new(base, TaskPayload::Completed { result })))
}

/// `tasks/cancel`: the caller (its token's agent, else `user:mcp`, who `position_invoke` invokes as
/// by default) cancels the Clutch task; refused unless it asked for it.
pub(crate) async fn cancel(engine: &Engine, caller: &Caller, task_id: &str) -> Result<(), ErrorData> {
    let from = caller
        .acting_agent(None)
        .map_err(|r| ErrorData::invalid_request(r.message, None))?
        .unwrap_or_else(|| "user:mcp".to_owned());
    if engine.find_task(task_id).await.map_err(|e| ErrorData::internal_error(e.to_string(), None))?.is_none() {
        return Err(unknown(task_id));
    }
    match engine.task_cancel(&from, task_id, "cancelled by its MCP client").await {
        Ok(_) => Ok(()),
        Err(e) => Err(ErrorData::invalid_params(e.to_string(), None)),
    }
}

fn unknown(task_id: &str) -> ErrorData {
    ErrorData::invalid_params(format!("no task `{}`", quote(task_id)), None)
}
