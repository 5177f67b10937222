//! Failures as MCP tool results: `isError: true` with `{code, message, recoverable, suggestion}`
//! (plus `field` when one argument is at fault), mapped once from the protocol's `ErrorBody`; and
//! this crate's own `Error`, for the stdio bridge.

use clutch_core::Refusal;
use clutch_proto::ErrorCode;
use clutch_proto::error::{MESSAGE_MAX, Next, PATH_MAX, PROBLEMS_MAX, bound_text};
use rmcp::model::CallToolResult;
use serde_json::{Value, json};

/// Why the stdio bridge could not start or stopped.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// `clutch mcp --profile` names no profile.
    #[error("unknown profile `{0}`: use `worker` or `coordinator`")]
    Profile(String),
    /// Nothing answers at the daemon's URL.
    #[error(
        "no Clutch daemon answers at {url}: start one with `clutch serve` (or pass --url / set CLUTCH_URL to \
         where one runs)"
    )]
    NoDaemon { url: String },
    /// The daemon answered, but not as an MCP server would.
    #[error("the Clutch daemon at {url} refused the MCP connection: {detail}")]
    Upstream { url: String, detail: String },
    /// The URL or token cannot be used.
    #[error("{0}")]
    Config(String),
    /// Reading or writing stdio failed.
    #[error("stdio: {0}")]
    Stdio(String),
}

pub type Result<T, E = Error> = std::result::Result<T, E>;

/// A core failure as the protocol's error body.
pub(crate) fn from_core(e: clutch_core::Error) -> Refusal {
    e.body()
}

/// Whether the caller can still get what it asked for by itself: by retrying later (the retryable
/// codes) or by changing its request (the other 4xx codes: bad arguments, unknown ids, a state that
/// does not allow the change yet). Not when someone else must act: `UNAUTHORIZED`, `FORBIDDEN`,
/// `HOST_NOT_ALLOWED`, `ORIGIN_NOT_ALLOWED` and `BUDGET_EXCEEDED` need an operator, and a 5xx that
/// is not retryable will not go away.
pub fn recoverable(code: ErrorCode) -> bool {
    code.retryable()
        || ((400..500).contains(&code.http_status())
            && !matches!(
                code,
                ErrorCode::Unauthorized
                    | ErrorCode::Forbidden
                    | ErrorCode::HostNotAllowed
                    | ErrorCode::OriginNotAllowed
                    | ErrorCode::BudgetExceeded
            ))
}

/// What to do next when the failure carries no hint of its own.
fn suggestion(code: ErrorCode) -> &'static str {
    match code {
        ErrorCode::InvalidJson | ErrorCode::ValidationFailed | ErrorCode::UnknownType => {
            "fix the arguments named in the message and call again; the tool's inputSchema lists what it takes"
        }
        ErrorCode::AgentNotFound => "call agent_register first; agent ids look like `agent:<name>`",
        ErrorCode::TaskNotFound => "check the task id; workflow_next_tasks lists the tasks you can take",
        ErrorCode::InvalidTransition => "read the current state (task_get) and make a change it allows",
        ErrorCode::LeaseLost => "the task is no longer yours: claim it again or pick another",
        ErrorCode::Unauthorized => "configure the API token (CLUTCH_TOKEN or --token) the daemon expects",
        ErrorCode::Forbidden => "act only as your own agent id, or ask an operator for a token with that right",
        ErrorCode::BudgetExceeded => "stop and report: an operator has to raise the budget",
        ErrorCode::RateLimited | ErrorCode::Unavailable | ErrorCode::SlowConsumer => "wait a moment and call again",
        ErrorCode::Internal => "call again; if it keeps failing, report it (the daemon's log has the details)",
        ErrorCode::IdConflict | ErrorCode::Duplicate => "use a new id, or repeat the original request exactly",
        _ if code.retryable() => "wait a moment and call again",
        _ => "check the ids and arguments against the tool's description",
    }
}

/// A next step the core names by intent, as this face's tools.
fn words(next: &Next) -> String {
    match next {
        Next::RegisterAgent => {
            "call agent_register first (again after an unregister); agent ids look like `agent:<name>`".into()
        }
        Next::Heartbeat => "call agent_heartbeat first".into(),
        Next::ClaimTask { task_id } => format!(
            "claim the task ({task_id}) with task_claim before writing to it; keep the lease alive with agent_heartbeat"
        ),
        Next::ShowTask { task_id } => format!("task_get shows the state of {task_id}"),
        Next::NextTasks { workflow_id } => {
            format!("workflow_next_tasks ({workflow_id}) lists the tasks you can claim now")
        }
        Next::ShowWorkflows { .. } => "workflow_list shows the workflows; workflow_get shows one's tasks".into(),
    }
}

/// The structured error body of a failed tool call, bounded as the protocol's error body is written
/// (`clutch_proto::error`): however large the arguments it is about, it stays small.
pub fn body(refusal: &Refusal) -> Value {
    let suggestion = match (&refusal.hint, &refusal.next) {
        (Some(hint), _) => bound_text(hint, MESSAGE_MAX),
        (None, Some(next)) => words(next).into(),
        (None, None) => suggestion(refusal.code).into(),
    };
    let mut body = json!({
        "code": refusal.code.as_str(),
        "message": bound_text(&refusal.message, MESSAGE_MAX),
        "recoverable": recoverable(refusal.code),
        "suggestion": suggestion,
    });
    if let Some(field) = &refusal.field {
        body["field"] = json!(bound_text(field, PATH_MAX));
    }
    if refusal.problems.len() > 1 {
        body["problems"] = json!(refusal.problems[..refusal.problems.len().min(PROBLEMS_MAX)]);
    }
    body
}

/// A failed tool call: `isError: true`, the body as structured content and as its JSON text.
pub(crate) fn tool_result(refusal: &Refusal) -> CallToolResult {
    CallToolResult::structured_error(body(refusal))
}
