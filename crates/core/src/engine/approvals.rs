//! Tool calls waiting for a person's approval: the engine keeps those the log says wait (a
//! `clutch.approval.requested.v1` the dispatcher wrote, not yet followed by a decision), lists them,
//! and records a decision, the one a call gets (see [`crate::adapter`] for what follows it).

use super::*;
use crate::payload::{self, Decision};
use crate::view;

impl Engine {
    /// The calls waiting for approval, oldest first.
    pub fn approvals(&self) -> view::Approvals {
        let state = self.state();
        let mut pending: Vec<view::Approval> = state.approvals.values().cloned().collect();
        pending.sort_by(|a, b| a.requested_at.cmp(&b.requested_at).then_with(|| a.call_id.cmp(&b.call_id)));
        view::Approvals { pending }
    }

    /// Records `decision` about the call `call_id` by `by` (a person, `user:NAME`; the daemon when it
    /// expired), with an optional `note` of at most 1,000 characters. Refused when the call is not
    /// waiting: decided already (the decision that stands is named), or unknown.
    pub async fn decide_approval(
        &self,
        call_id: &str,
        decision: Decision,
        by: &str,
        note: Option<String>,
    ) -> Result<payload::ApprovalDecided> {
        if note.as_ref().is_some_and(|n| n.chars().count() > 1000) {
            return Err(Refusal::new(ErrorCode::ValidationFailed, "note: at most 1,000 characters")
                .field("note")
                .into());
        }
        let pending = self.state().approvals.get(call_id).cloned();
        let Some(pending) = pending else {
            return Err(match self.stored_decision(call_id).await {
                Some(d) => decided_already(call_id, &d),
                None => Refusal::new(
                    ErrorCode::NotFound,
                    format!("no tool call `{}` is waiting for approval", clutch_proto::error::quote(call_id)),
                )
                .field("call_id"),
            }
            .into());
        };
        let decided = payload::ApprovalDecided {
            tool: pending.tool.clone(),
            call_id: call_id.to_owned(),
            decision,
            by: by.to_owned(),
            note,
        };
        let mut m = Message::new(
            MessageType::ChatSystem,
            ORCHESTRATOR,
            (&pending.run_id, &pending.thread_id, &pending.task_id),
            payload::object(&decided),
        );
        m.payload_type = Some(APPROVAL_DECIDED_PAYLOAD.to_owned());
        // One decision per call: a second (a race, a retry) is a duplicate of the first.
        m.idempotency_key = Some(format!("clutch:approval:{call_id}"));
        let outcome = self.inner.log.append_one(m).await?;
        if outcome.duplicate {
            let stood = self.inner.log.get(&outcome.id).await?.and_then(|e| e.message().ok());
            return Err(match stood.and_then(|m| payload::read::<payload::ApprovalDecided>(&m.payload)) {
                Some(d) => decided_already(call_id, &d),
                None => {
                    Refusal::new(ErrorCode::InvalidTransition, format!("tool call `{call_id}` was decided already"))
                        .field("call_id")
                }
            }
            .into());
        }
        Ok(decided)
    }

    /// The decision the log holds about the call `call_id`, if it was decided.
    pub(crate) async fn stored_decision(&self, call_id: &str) -> Option<payload::ApprovalDecided> {
        let call = self.inner.log.get(call_id).await.ok()??.message().ok()?;
        let filter = Filter { task_id: Some(call.task_id), kind: Some(MessageType::ChatSystem), ..Filter::default() };
        let events = self.inner.log.read(&filter, 0, 10_000).await.ok()?;
        events.iter().filter_map(|e| e.message().ok()).find_map(|m| {
            (m.payload_type.as_deref() == Some(APPROVAL_DECIDED_PAYLOAD))
                .then(|| payload::read::<payload::ApprovalDecided>(&m.payload))
                .flatten()
                .filter(|d| d.call_id == call_id)
        })
    }
}

fn decided_already(call_id: &str, d: &payload::ApprovalDecided) -> Refusal {
    Refusal::new(
        ErrorCode::InvalidTransition,
        format!("tool call `{call_id}` was {} by {}: a call gets one decision", d.decision.as_str(), d.by),
    )
    .field("call_id")
}
