//! Turns taken together, as every pattern takes them: a round of turns given at once and waited
//! for (until a time, or the session's deadline), the failed ones announced to the others, the
//! ones no longer waited for cancelled, and structured answers read and asked for once more.

use clutch_core::session::{self, Member, Phase, RUNNER};
use clutch_proto::{ErrorCode, MessageType};
use serde_json::{Value, json};
use tokio::time::Instant;

use super::error::Halt;
use super::outcome::{Bare, Outcome, Read};
use super::session::Session;
use super::world::World;

/// A turn to give: the member, its goal, and what else its request carries.
pub(super) type Turn = (Member, String, Value);

impl<W: World> Session<W> {
    /// Waits for the outcomes of `tasks`, until `until` (then the missing ones are `None`).
    pub async fn wait(&mut self, tasks: &[String], until: Option<Instant>) -> Result<Vec<Option<Outcome>>, Halt> {
        loop {
            if tasks.iter().all(|t| self.outcomes.contains_key(t)) {
                break;
            }
            if self.is_cancelled() {
                return Err(Halt::Cancelled(self.requester.clone()));
            }
            let until = until.map_or(self.deadline, |u| u.min(self.deadline));
            let mut cancelled = self.cancelled.clone();
            tokio::select! {
                next = self.next_event(Some(until)) => match next {
                    Ok(true) => {}
                    Ok(false) if until == self.deadline => return Err(Halt::TimedOut),
                    Ok(false) => break,
                    Err(_) if self.closing() => return Err(Halt::Shutdown),
                    Err(e) => return Err(Halt::Failed(ErrorCode::SessionReadFailed, e.to_string())),
                },
                _ = cancelled.changed() => return Err(Halt::Cancelled(self.requester.clone())),
            }
        }
        Ok(tasks.iter().map(|t| self.outcomes.get(t).cloned()).collect())
    }

    /// Turns of several members at once; the failed ones announced. Answers (member, outcome) of
    /// each, the outcome `None` for those not waited for any longer.
    pub async fn round(
        &mut self,
        key: &str,
        turns: Vec<Turn>,
        until: Option<Instant>,
    ) -> Result<Vec<(Member, Option<Outcome>)>, Halt> {
        let mut tasks = Vec::new();
        for (member, goal, extra) in &turns {
            let k = format!("{key}:{}", member.agent_id);
            tasks.push(self.turn(&k, &member.agent_id, &member.role, goal.clone(), extra.clone()).await?);
        }
        let outcomes = self.wait(&tasks, until).await?;
        if outcomes.iter().any(Option::is_none) {
            self.cancel_open(&tasks).await;
        }
        let mut answers = Vec::new();
        for ((member, _, _), outcome) in turns.into_iter().zip(outcomes) {
            if let Some(o @ Outcome::Failed { .. }) = &outcome {
                self.announce_failure(&member.agent_id, o).await?;
            }
            answers.push((member, outcome));
        }
        Ok(answers)
    }

    /// A [`Session::round`] of turns that ask for a structured answer (`schema` as their extra's
    /// `output_schema`), read: each unreadable answer is asked for once more (a turn keyed
    /// `{key}-again`, by `until` too), and stays unreadable if the second is no better, or does not
    /// come.
    pub async fn structured(
        &mut self,
        key: &str,
        asked: Vec<Turn>,
        (schema, bare): (&Value, Bare),
        until: Option<Instant>,
    ) -> Result<Vec<(Member, Read)>, Halt> {
        let answers = self.round(key, asked.clone(), until).await?;
        let mut reads: Vec<(Member, Read)> = answers
            .into_iter()
            .map(|(m, o)| {
                let read = o.as_ref().map_or(Read::Missing { timed_out: true }, |o| o.read(schema, bare));
                (m, read)
            })
            .collect();
        let again: Vec<Turn> = reads
            .iter()
            .filter_map(|(m, read)| {
                let Read::Unreadable(why) = read else { return None };
                let (_, goal, extra) = asked.iter().find(|(x, _, _)| x.agent_id == m.agent_id)?;
                let goal = format!(
                    "{goal}\n\nYour last answer could not be read: {why}. Answer with the JSON only, \
                     matching this schema:\n{}",
                    schema
                );
                Some((m.clone(), goal, extra.clone()))
            })
            .collect();
        if again.is_empty() {
            return Ok(reads);
        }
        for (m, o) in self.round(&format!("{key}-again"), again, until).await? {
            let Some(o) = o else { continue };
            if let (Some(slot), read @ Read::Given(_)) =
                (reads.iter_mut().find(|(x, _)| x.agent_id == m.agent_id), o.read(schema, bare))
            {
                slot.1 = read;
            }
        }
        Ok(reads)
    }

    /// Announces that `agent` failed its turn to the others.
    pub async fn announce_failure(&mut self, agent: &str, outcome: &Outcome) -> Result<(), Halt> {
        if self.failed.iter().any(|a| a == agent) {
            return Ok(());
        }
        self.failed.push(agent.to_owned());
        let why = match outcome {
            Outcome::Failed { code, message } => format!("{code}: {message}"),
            Outcome::Done { .. } => String::new(),
        };
        let note = format!("{agent} failed its turn ({why}); the others go on without it");
        let others: Vec<String> = self.members.iter().map(|m| m.agent_id.clone()).filter(|a| a != agent).collect();
        let warning = session::Warning {
            code: ErrorCode::AgentFailed.as_str().into(),
            agent_id: agent.to_owned(),
            message: note.clone(),
        };
        let mut m = self.message(
            MessageType::ChatSystem,
            RUNNER,
            &self.root.clone(),
            others,
            clutch_core::payload::object(&warning),
        );
        m.payload_type = Some(session::WARNING_PAYLOAD.into());
        let _ = self.write(format!("failed:{agent}"), m).await;
        self.record(Phase::Running, Some(note), None).await
    }

    /// Cancels turns still open (a forced synthesis, a stop).
    pub async fn cancel_open(&mut self, tasks: &[String]) {
        for task in tasks.iter().filter(|t| !self.outcomes.contains_key(*t)).cloned().collect::<Vec<_>>() {
            let agent = self.member_of_turn(&task);
            let payload = json!({"reason": "the session no longer waits for this turn"});
            let m = self.message(
                MessageType::TaskCancel,
                RUNNER,
                &task,
                agent.into_iter().collect(),
                payload.as_object().cloned().unwrap_or_default(),
            );
            let _ = self.write(format!("cancel:{task}"), m).await;
        }
    }
}

/// Whether every turn of a round failed (or was not waited for).
pub(super) fn all_failed(answers: &[(Member, Option<Outcome>)]) -> bool {
    !answers.is_empty() && answers.iter().all(|(_, o)| !matches!(o, Some(Outcome::Done { .. })))
}

/// The agents of `members` other than `agent`.
pub(super) fn others(members: &[Member], agent: &str) -> Vec<String> {
    members.iter().filter(|x| x.agent_id != agent).map(|x| x.agent_id.clone()).collect()
}
