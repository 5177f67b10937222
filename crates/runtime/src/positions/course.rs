//! A session's course from its invocation to its end, the same live and re-executed: accepted,
//! recorded, cast, its pattern driven, and ended with its final record and its task's outcome (or
//! left as it is when the daemon stops under it, to go on after the restart).

use clutch_core::session::Phase;
use clutch_proto::{ErrorCode, MessageType};
use serde_json::{Map, Value, json};

use super::error::Halt;
use super::pattern;
use super::session::Session;
use super::world::World;

/// Runs the session to its end.
pub(super) async fn run<W: World>(s: &mut Session<W>) {
    let outcome = drive(s).await;
    finish(s, outcome).await;
}

/// Accepts the invocation, casts the roles and drives the pattern.
async fn drive<W: World>(s: &mut Session<W>) -> Result<Value, Halt> {
    let accept = s.to_requester(MessageType::TaskAccept, Map::new());
    s.write("accept".into(), accept).await?;
    s.record(Phase::Initializing, None, None).await?;
    s.record(Phase::SpawningAgents, None, None).await?;
    let (members, cast) = s.cast().await?;
    s.members = members;
    s.record(Phase::Running, None, (!cast.is_empty()).then(|| json!({"cast": cast}))).await?;
    pattern::drive(s).await
}

/// Ends the session: its final record and its task's outcome; turns still open cancelled, spawned
/// agents removed.
async fn finish<W: World>(s: &mut Session<W>, outcome: Result<Value, Halt>) {
    if matches!(outcome, Err(Halt::Shutdown)) || s.closing() {
        tracing::info!(session_id = %s.session, "the daemon is stopping: the session goes on after the restart");
        return;
    }
    let partial = json!(s.produced);
    match outcome {
        Ok(result) => complete(s, result).await,
        Err(Halt::Cancelled(by)) => {
            let note = format!("cancelled by {by}; partial results kept");
            let _ = s.record(Phase::Error, Some(note), Some(json!({"cancelled": true, "partial": partial}))).await;
        }
        Err(Halt::TimedOut) => {
            let why = format!("the session took longer than {:?}", s.settings.session_timeout);
            fail(s, Phase::Timeout, ErrorCode::SessionTimeout, why, partial).await;
        }
        Err(Halt::Failed(code, why)) => fail(s, Phase::Error, code, why, partial).await,
        // Returned above.
        Err(Halt::Shutdown) => return,
    }
    let open = s.turns();
    s.cancel_open(&open).await;
    for agent in std::mem::take(&mut s.spawned) {
        s.world.remove(&agent).await;
    }
}

/// The session's result: its last records and its task's `task.result`.
async fn complete<W: World>(s: &mut Session<W>, mut result: Value) {
    let _ = s.record(Phase::Completing, None, None).await;
    let _ = s.record(Phase::Completed, None, None).await;
    if let Some(r) = result.as_object_mut() {
        r.insert("session_id".into(), json!(s.session));
        r.insert("position".into(), json!(s.skill.name));
        r.insert("pattern".into(), json!(s.skill.pattern.as_str()));
    }
    let m = s.to_requester(MessageType::TaskResult, result.as_object().cloned().unwrap_or_default());
    let _ = s.write("result".into(), m).await;
}

/// The session's failure: its final record (`phase`) and its task's `task.error`.
async fn fail<W: World>(s: &mut Session<W>, phase: Phase, code: ErrorCode, why: String, partial: Value) {
    let _ = s.record(phase, Some(why.clone()), Some(json!({"partial": partial}))).await;
    let payload = json!({"code": code.as_str(), "message": why, "retryable": false, "details": {"partial": partial}});
    let m = s.to_requester(MessageType::TaskError, payload.as_object().cloned().unwrap_or_default());
    let _ = s.write("error".into(), m).await;
}
