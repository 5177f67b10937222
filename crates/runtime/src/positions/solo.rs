//! The solo pattern: one agent thinks the input through and answers. Its rules (exactly one role)
//! and its driver.

use serde_json::{Value, json};

use super::error::Halt;
use super::session::Session;
use super::world::World;
use crate::skill::{Rules, one_each};

/// The answer, to the requester when it is a member.
const RESULTS: &str = "RESULTS";

/// Exactly one role; no message type required.
pub(super) const RULES: Rules = Rules { roles: (1, Some(1)), needs: &[], params: &[], agents: one_each };

/// One turn of the first role's member: its text is the answer.
pub(super) async fn drive<W: World>(s: &mut Session<W>) -> Result<Value, Halt> {
    let Some(member) = s.role_members(0).into_iter().next() else { return Err(Halt::no_members()) };
    s.step(&s.first_phase()).await?;
    let goal = format!("Think this through and answer:\n\n{}", s.input_text());
    let answers = s.round("solo", vec![(member.clone(), goal, Value::Null)], None).await?;
    let text = answers[0].1.as_ref().and_then(|o| o.text().map(str::to_owned));
    let Some(text) = text else { return Err(Halt::all_failed()) };
    s.produced.insert(member.role.clone(), json!(text));
    let to = s.requester_if_member().into_iter().collect();
    s.say("results", &member.agent_id, to, RESULTS, json!(text)).await?;
    Ok(json!({"text": text}))
}

#[cfg(test)]
mod tests {
    use clutch_proto::ErrorCode;

    use super::super::script::{Reply, Script, session};
    use super::*;

    #[tokio::test]
    async fn one_turn_answers() {
        let script = Script::default().reply("solo:agent:a", Reply::Text("Because of Rayleigh scattering."));
        let (mut s, _keep) =
            session("contemplator", &[("Contemplator", "agent:a")], json!("Why is the sky blue?"), script);
        let result = drive(&mut s).await.unwrap();
        assert_eq!(result, json!({"text": "Because of Rayleigh scattering."}));
        assert_eq!(s.world.writes, ["record:0 RUNNING FRAMING", "turn:solo:agent:a → agent:a"]);
    }

    #[tokio::test]
    async fn a_failed_turn_fails_the_session_and_is_announced() {
        let script = Script::default().reply("solo:agent:a", Reply::Fail("LLM_FAILED"));
        let (mut s, _keep) = session("contemplator", &[("Contemplator", "agent:a")], json!("Why?"), script);
        let result = drive(&mut s).await;
        assert!(matches!(result, Err(Halt::Failed(ErrorCode::AllAgentsFailed, _))), "{result:?}");
        assert_eq!(
            s.world.writes,
            [
                "record:0 RUNNING FRAMING",
                "turn:solo:agent:a → agent:a",
                "failed:agent:a → ",
                "record:1 RUNNING FRAMING"
            ]
        );
    }

    #[tokio::test]
    async fn no_member_writes_nothing() {
        let (mut s, _keep) = session("contemplator", &[], json!("Why?"), Script::default());
        let result = drive(&mut s).await;
        assert!(matches!(result, Err(Halt::Failed(ErrorCode::NoAgentForRole, _))), "{result:?}");
        assert!(s.world.writes.is_empty());
    }

    #[tokio::test]
    async fn a_turn_never_answered_times_the_session_out() {
        let (mut s, _keep) = session("contemplator", &[("Contemplator", "agent:a")], json!("Why?"), Script::default());
        let result = drive(&mut s).await;
        assert!(matches!(result, Err(Halt::TimedOut)), "{result:?}");
        assert_eq!(s.world.writes, ["record:0 RUNNING FRAMING", "turn:solo:agent:a → agent:a"]);
    }
}
