//! The circle pattern: every member proposes, then votes for another's proposal, round after round,
//! until a proposal wins by the quorum rule; without a winner by the last round the session
//! escalates. Its rules (at least two roles; `PROPOSAL`, `VOTE`; the `rounds` and `quorum` numbers
//! and the quorum rule) and its driver.

use std::collections::BTreeMap;

use clutch_core::session::{Member, Phase};
use serde_json::{Value, json};
use tokio::time::Instant;

use super::error::Halt;
use super::outcome::Read;
use super::session::Session;
use super::turns::{Turn, all_failed, others};
use super::world::World;
use crate::skill::{Params, Rules, one_each};

/// A member's proposal, to the others.
const PROPOSAL: &str = "PROPOSAL";
/// A member's vote, to the others.
const VOTE: &str = "VOTE";
/// The winning proposal, from its proposer to the others; the verdict of a circle that has one.
const CONSENSUS: &str = "CONSENSUS";
/// The verdict of a circle whose last round has no winner.
const NO_QUORUM: &str = "NO_QUORUM";
/// A circle's rounds when neither the front matter nor the invocation says.
pub(crate) const DEFAULT_ROUNDS: u32 = 3;
/// A circle's quorum when its front matter gives none: half of the voters (see [`Params::winner`]).
pub(crate) const DEFAULT_QUORUM: f64 = 0.5;
/// The most rounds an invocation may ask for.
const MOST_ROUNDS: u32 = 20;

/// At least two roles (one member each), the two message types above, `rounds` and `quorum`.
pub(super) const RULES: Rules =
    Rules { roles: (2, None), needs: &[PROPOSAL, VOTE], params: &["rounds", "quorum"], agents: one_each };

impl Params {
    pub fn rounds_or_default(&self) -> u32 {
        self.rounds.unwrap_or(DEFAULT_ROUNDS)
    }

    pub fn quorum_or_default(&self) -> f64 {
        self.quorum.unwrap_or(DEFAULT_QUORUM)
    }

    /// A circle round's winner: the index in `tally` (votes per proposal, out of `voters` voters)
    /// of the proposal whose votes are at least the quorum × `voters` and strictly more than every
    /// other proposal's; `None` when no proposal reaches the quorum or the most votes are tied.
    /// With the default quorum of 0.5: at least half the voters and no tie, so in a circle of three,
    /// two votes.
    pub fn winner(&self, tally: &[u32], voters: u32) -> Option<usize> {
        let quorum = self.quorum_or_default();
        let (best, votes) = tally.iter().copied().enumerate().max_by_key(|&(_, v)| v)?;
        let tied = tally.iter().filter(|&&v| v == votes).count() > 1;
        (voters > 0 && votes > 0 && !tied && f64::from(votes) >= quorum * f64::from(voters)).then_some(best)
    }
}

/// How a round's votes went.
#[derive(Default)]
struct Votes {
    /// The proposals as numbered on the ballot.
    ballot: Vec<String>,
    /// Votes counted per proposal.
    tally: Vec<u32>,
    /// Each role's vote, by proposal number.
    cast: BTreeMap<String, usize>,
    /// The roles whose vote could not be read, and why.
    abstained: BTreeMap<String, String>,
}

/// Rounds of proposals and votes, until one wins.
pub(super) async fn drive<W: World>(s: &mut Session<W>) -> Result<Value, Halt> {
    let members: Vec<Member> = (0..s.skill.agents.len()).flat_map(|i| s.role_members(i)).collect();
    if members.len() < 2 {
        return Err(Halt::no_members());
    }
    let rounds = s.invoke.invocation.rounds.unwrap_or(s.skill.params.rounds_or_default()).clamp(1, MOST_ROUNDS);
    let mut last: Vec<(String, String)> = Vec::new();
    let mut history = Vec::new();
    for round in 1..=rounds {
        s.round = Some(round);
        let proposals = propose(s, &members, (round, rounds), &last).await?;
        let votes = vote(s, &members, round, &proposals).await?;
        let winner = s.skill.params.winner(&votes.tally, proposals.len() as u32);
        let Votes { ballot, tally, cast, abstained } = votes;
        let mut detail = json!({"round": round, "proposals": ballot, "votes": cast, "tally": tally, "winner": winner.map(|w| w + 1)});
        if !abstained.is_empty() {
            detail["abstained"] = json!(abstained);
        }
        history.push(detail.clone());
        s.record(Phase::Running, None, Some(detail)).await?;
        if let Some(w) = winner {
            let (m, text) = proposals[w].clone();
            s.say(&format!("consensus{round}"), &m.agent_id, others(&members, &m.agent_id), CONSENSUS, json!(text))
                .await?;
            return Ok(json!({"verdict": CONSENSUS, "text": text, "round": round, "rounds": history}));
        }
        last = proposals.iter().map(|(m, p)| (m.role.clone(), p.clone())).collect();
    }
    let text = last.first().map(|(_, p)| p.clone()).unwrap_or_default();
    Ok(json!({"verdict": NO_QUORUM, "escalated": true, "text": text, "rounds": history}))
}

/// Every member proposes (told last round's proposals); each proposal goes to the others. The
/// proposals made: (proposer, proposal).
async fn propose<W: World>(
    s: &mut Session<W>,
    members: &[Member],
    (round, rounds): (u32, u32),
    last: &[(String, String)],
) -> Result<Vec<(Member, String)>, Halt> {
    s.step(&s.phase_named("PROPOSAL", 0)).await?;
    let input = s.input_text();
    let earlier = if last.is_empty() {
        String::new()
    } else {
        let list: Vec<String> = last.iter().map(|(who, p)| format!("- {who}: {p}")).collect();
        format!("\n\nLast round's proposals (none won a quorum):\n{}", list.join("\n"))
    };
    let goal = format!("Round {round} of {rounds}. Propose an answer to:\n\n{input}{earlier}");
    let turns = members.iter().map(|m| (m.clone(), goal.clone(), json!({"round": round}))).collect();
    let proposed = s.round(&format!("propose{round}"), turns, None).await?;
    if all_failed(&proposed) {
        return Err(Halt::all_failed());
    }
    let proposals: Vec<(Member, String)> = proposed
        .iter()
        .filter_map(|(m, o)| o.as_ref().and_then(|o| o.text()).map(|t| (m.clone(), t.to_owned())))
        .collect();
    for (m, p) in &proposals {
        let to = others(members, &m.agent_id);
        s.say(&format!("proposal{round}:{}", m.agent_id), &m.agent_id, to, PROPOSAL, json!(p)).await?;
    }
    Ok(proposals)
}

/// Every proposer votes for one of `proposals` by the consensus timeout; each vote counted goes to
/// the others.
async fn vote<W: World>(
    s: &mut Session<W>,
    members: &[Member],
    round: u32,
    proposals: &[(Member, String)],
) -> Result<Votes, Halt> {
    s.step(&s.phase_named("VOTE", 1)).await?;
    let ballot: Vec<String> =
        proposals.iter().enumerate().map(|(i, (m, p))| format!("{}. ({}) {p}", i + 1, m.role)).collect();
    let schema = vote_schema(proposals.len());
    let goal = format!(
        "Vote for the best proposal other than your own. Answer with JSON: {{\"vote\": n}}, n its number.\n\n{}",
        ballot.join("\n")
    );
    let turns: Vec<Turn> = proposals
        .iter()
        .map(|(m, _)| (m.clone(), goal.clone(), json!({"round": round, "output_schema": schema})))
        .collect();
    let until = Instant::now() + s.settings.consensus_timeout;
    let reads = s.structured(&format!("vote{round}"), turns, (&schema, bare_vote), Some(until)).await?;
    let mut votes = Votes { tally: vec![0; proposals.len()], ballot, ..Votes::default() };
    for (m, read) in &reads {
        let n = match read {
            Read::Given(v) => v["vote"].as_u64().unwrap_or(0) as usize,
            // An unreadable vote is an abstention: recorded, never counted.
            Read::Unreadable(why) => {
                votes.abstained.insert(m.role.clone(), why.clone());
                continue;
            }
            Read::Missing { .. } => continue,
        };
        let Some((proposer, _)) = n.checked_sub(1).and_then(|i| proposals.get(i)) else { continue };
        // A vote for one's own proposal is recorded, not counted.
        if proposer.agent_id != m.agent_id {
            votes.tally[n - 1] += 1;
        }
        votes.cast.insert(m.role.clone(), n);
        let to = others(members, &m.agent_id);
        s.say(&format!("vote{round}:{}", m.agent_id), &m.agent_id, to, VOTE, json!({"proposal": n})).await?;
    }
    Ok(votes)
}

/// What a vote answers: one of `n` proposals by its number.
fn vote_schema(n: usize) -> Value {
    json!({
        "type": "object",
        "properties": {"vote": {"type": "integer", "minimum": 1, "maximum": n, "description": "the proposal's number"}},
        "required": ["vote"],
        "additionalProperties": false,
    })
}

/// A text that is only a vote: `2`, `#2`, `VOTE 2`.
fn bare_vote(text: &str) -> Option<Value> {
    let text = text.trim().trim_end_matches('.');
    let rest = match text.get(..4) {
        Some(head) if head.eq_ignore_ascii_case("vote") => &text[4..],
        _ => text,
    };
    let n: u64 = rest.trim().trim_start_matches('#').parse().ok()?;
    Some(json!({"vote": n}))
}

#[cfg(test)]
mod tests {
    use clutch_proto::ErrorCode;

    use super::super::invoke::Invoke;
    use super::super::script::{Reply, Script, invocation, session, session_with};
    use super::*;

    const TEAM: [(&str, &str); 3] = [("Pragmatist", "agent:a"), ("Visionary", "agent:b"), ("Skeptic", "agent:c")];

    /// The writes of round 1 up to its votes' turns.
    const PROPOSED: [&str; 11] = [
        "record:0 RUNNING PROPOSAL round 1",
        "turn:propose1:agent:a → agent:a",
        "turn:propose1:agent:b → agent:b",
        "turn:propose1:agent:c → agent:c",
        "say:proposal1:agent:a agent:a → agent:b,agent:c: PROPOSAL",
        "say:proposal1:agent:b agent:b → agent:a,agent:c: PROPOSAL",
        "say:proposal1:agent:c agent:c → agent:a,agent:b: PROPOSAL",
        "record:1 RUNNING VOTE round 1",
        "turn:vote1:agent:a → agent:a",
        "turn:vote1:agent:b → agent:b",
        "turn:vote1:agent:c → agent:c",
    ];

    fn proposed() -> Script {
        Script::default()
            .reply("propose1:agent:a", Reply::Text("walk"))
            .reply("propose1:agent:b", Reply::Text("fly"))
            .reply("propose1:agent:c", Reply::Text("stay"))
    }

    fn vote(n: u64) -> Reply {
        Reply::Answer(json!({"vote": n}))
    }

    #[tokio::test]
    async fn a_proposal_with_the_quorum_wins_the_round() {
        let script =
            proposed().reply("vote1:agent:a", vote(2)).reply("vote1:agent:b", vote(1)).reply("vote1:agent:c", vote(2));
        let (mut s, _keep) = session("circle", &TEAM, json!("How do we get there?"), script);
        let result = drive(&mut s).await.unwrap();
        assert_eq!(
            (result["verdict"].clone(), result["text"].clone(), result["round"].clone()),
            (json!("CONSENSUS"), json!("fly"), json!(1))
        );
        assert_eq!(result["rounds"][0]["tally"], json!([1, 2, 0]));
        let mut expected = PROPOSED.to_vec();
        expected.extend([
            "say:vote1:agent:a agent:a → agent:b,agent:c: VOTE",
            "say:vote1:agent:b agent:b → agent:a,agent:c: VOTE",
            "say:vote1:agent:c agent:c → agent:a,agent:b: VOTE",
            "record:2 RUNNING VOTE round 1",
            "say:consensus1 agent:b → agent:a,agent:c: CONSENSUS",
        ]);
        assert_eq!(s.world.writes, expected);
    }

    #[tokio::test]
    async fn no_quorum_by_the_last_round_escalates_and_an_unreadable_vote_abstains() {
        let script = proposed()
            .reply("vote1:agent:a", vote(2))
            .reply("vote1:agent:b", vote(1))
            .reply("vote1:agent:c", Reply::Text("I like the second one"));
        let invoke = Invoke {
            position: "circle".into(),
            goal: None,
            invocation: clutch_core::session::Invocation {
                rounds: Some(1),
                ..invocation(json!("How do we get there?"))
            },
        };
        let (mut s, _keep) = session_with("circle", &TEAM, invoke, script);
        let result = drive(&mut s).await.unwrap();
        assert_eq!(
            (result["verdict"].clone(), result["escalated"].clone(), result["text"].clone()),
            (json!("NO_QUORUM"), json!(true), json!("walk"))
        );
        assert_eq!(result["rounds"][0]["tally"], json!([1, 1, 0]));
        assert!(result["rounds"][0]["abstained"]["Skeptic"].is_string(), "{result}");
        let mut expected = PROPOSED.to_vec();
        expected.extend([
            "turn:vote1-again:agent:c → agent:c",
            "cancel:t7 → agent:c",
            "say:vote1:agent:a agent:a → agent:b,agent:c: VOTE",
            "say:vote1:agent:b agent:b → agent:a,agent:c: VOTE",
            "record:2 RUNNING VOTE round 1",
        ]);
        assert_eq!(s.world.writes, expected);
    }

    #[tokio::test]
    async fn a_round_without_a_proposal_fails_the_session() {
        let script = Script::default()
            .reply("propose1:agent:a", Reply::Fail("LLM_FAILED"))
            .reply("propose1:agent:b", Reply::Fail("LLM_FAILED"))
            .reply("propose1:agent:c", Reply::Fail("LLM_FAILED"));
        let (mut s, _keep) = session("circle", &TEAM, json!("How?"), script);
        let result = drive(&mut s).await;
        assert!(matches!(result, Err(Halt::Failed(ErrorCode::AllAgentsFailed, _))), "{result:?}");
    }

    #[test]
    fn a_vote_is_read_from_a_bare_number() {
        assert_eq!(bare_vote("VOTE 2."), Some(json!({"vote": 2})));
        assert_eq!(bare_vote(" #3 "), Some(json!({"vote": 3})));
        assert_eq!(bare_vote("I vote 2"), None);
    }
}
