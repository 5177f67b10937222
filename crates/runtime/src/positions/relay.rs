//! The relay pattern: a chain of agents in the order of the roles, each one's output the next
//! one's input; a leg that fails breaks the relay. Its rules (at least two roles; `HANDOFF`) and
//! its driver.

use clutch_core::session::Member;
use clutch_proto::ErrorCode;
use serde_json::{Value, json};

use super::error::Halt;
use super::session::Session;
use super::world::World;
use crate::skill::{Rules, one_each};

/// A leg's output, handed to the next.
const HANDOFF: &str = "HANDOFF";

/// At least two roles, and `HANDOFF`.
pub(super) const RULES: Rules = Rules { roles: (2, None), needs: &[HANDOFF], params: &[], agents: one_each };

/// One leg per role, in order, each on the last one's output.
pub(super) async fn drive<W: World>(s: &mut Session<W>) -> Result<Value, Halt> {
    let chain: Vec<Member> = (0..s.skill.agents.len()).filter_map(|i| s.role_members(i).into_iter().next()).collect();
    let mut carried = s.input_text();
    for (i, member) in chain.iter().enumerate() {
        s.step(&s.phase_named("", i)).await?;
        let goal = if i == 0 {
            format!(
                "You start the relay as {}. Work on this, then your output goes to {}:\n\n{carried}",
                member.role,
                chain.get(1).map_or("the requester", |m| m.role.as_str())
            )
        } else {
            format!(
                "You are {} in a relay. {} handed you this; continue from it:\n\n{carried}",
                member.role,
                chain[i - 1].role
            )
        };
        let answers = s.round(&format!("leg{i}"), vec![(member.clone(), goal, Value::Null)], None).await?;
        let Some(text) = answers[0].1.as_ref().and_then(|o| o.text().map(str::to_owned)) else {
            let why = format!("{} failed: the relay cannot go on", member.role);
            return Err(Halt::Failed(ErrorCode::RelayBroken, why));
        };
        s.produced.insert(member.role.clone(), json!(text));
        if let Some(next) = chain.get(i + 1) {
            s.say(&format!("handoff{i}"), &member.agent_id, vec![next.agent_id.clone()], HANDOFF, json!(text)).await?;
        }
        carried = text;
    }
    Ok(json!({"text": carried, "legs": s.produced}))
}

#[cfg(test)]
mod tests {
    use super::super::script::{Reply, Script, session};
    use super::*;

    const TEAM: [(&str, &str); 3] = [("Drafter", "agent:a"), ("Editor", "agent:b"), ("Finisher", "agent:c")];

    #[tokio::test]
    async fn each_leg_hands_its_output_to_the_next() {
        let script = Script::default()
            .reply("leg0:agent:a", Reply::Text("draft"))
            .reply("leg1:agent:b", Reply::Text("edited"))
            .reply("leg2:agent:c", Reply::Text("finished"));
        let (mut s, _keep) = session("relay", &TEAM, json!("Write a haiku."), script);
        let result = drive(&mut s).await.unwrap();
        assert_eq!(
            result,
            json!({"text": "finished", "legs": {"Drafter": "draft", "Editor": "edited", "Finisher": "finished"}})
        );
        assert_eq!(
            s.world.writes,
            [
                "record:0 RUNNING INTAKE",
                "turn:leg0:agent:a → agent:a",
                "say:handoff0 agent:a → agent:b: HANDOFF",
                "record:1 RUNNING DRAFT",
                "turn:leg1:agent:b → agent:b",
                "say:handoff1 agent:b → agent:c: HANDOFF",
                "record:2 RUNNING EDIT",
                "turn:leg2:agent:c → agent:c",
            ]
        );
    }

    #[tokio::test]
    async fn a_failed_leg_breaks_the_relay() {
        let script = Script::default()
            .reply("leg0:agent:a", Reply::Text("draft"))
            .reply("leg1:agent:b", Reply::Fail("LLM_FAILED"));
        let (mut s, _keep) = session("relay", &TEAM, json!("Write a haiku."), script);
        let result = drive(&mut s).await;
        let Err(Halt::Failed(ErrorCode::RelayBroken, why)) = result else { panic!("{result:?}") };
        assert_eq!(why, "Editor failed: the relay cannot go on");
        assert_eq!(s.produced.get("Drafter"), Some(&json!("draft")));
        assert_eq!(
            s.world.writes,
            [
                "record:0 RUNNING INTAKE",
                "turn:leg0:agent:a → agent:a",
                "say:handoff0 agent:a → agent:b: HANDOFF",
                "record:1 RUNNING DRAFT",
                "turn:leg1:agent:b → agent:b",
                "failed:agent:b → agent:a,agent:c",
                "record:2 RUNNING DRAFT",
            ]
        );
    }
}
