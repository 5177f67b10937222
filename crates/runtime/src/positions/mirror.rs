//! The mirror pattern: two agents analyse the same input independently, exchange their analyses,
//! and each says whether they agree; both must say so for a consensus, else the session escalates.
//! Its rules (exactly two roles; `RESULTS`, `CONSENSUS`, `DISCREPANCY`, `ESCALATE`) and its driver.

use std::collections::BTreeMap;

use clutch_core::session::{Member, Phase, RUNNER};
use serde_json::{Value, json};
use tokio::time::Instant;

use super::error::Halt;
use super::outcome::Read;
use super::session::Session;
use super::turns::{all_failed, others};
use super::world::World;
use crate::skill::{Rules, one_each};

/// An analysis, sent to the partner.
const RESULTS: &str = "RESULTS";
/// A comparison's verdict: the analyses agree on every material point.
const CONSENSUS: &str = "CONSENSUS";
/// A comparison's verdict: they do not.
const DISCREPANCY: &str = "DISCREPANCY";
/// A person should decide.
const ESCALATE: &str = "ESCALATE";

/// Exactly two roles, and the four message types above.
pub(super) const RULES: Rules =
    Rules { roles: (2, Some(2)), needs: &[RESULTS, CONSENSUS, DISCREPANCY, ESCALATE], params: &[], agents: one_each };

/// An analysis: its member and its text.
type Analysis = (Member, String);

/// What the comparisons said.
#[derive(Default)]
struct Comparison {
    /// Each role's verdict.
    verdicts: BTreeMap<String, String>,
    /// The roles whose answer could not be read, and why.
    unreadable: BTreeMap<String, String>,
    /// A comparison was not waited for any longer (the consensus timeout).
    forced: bool,
}

/// Analysis, exchange, comparison, synthesis.
pub(super) async fn drive<W: World>(s: &mut Session<W>) -> Result<Value, Halt> {
    let members: Vec<Member> = (0..2).flat_map(|i| s.role_members(i)).collect();
    if members.len() < 2 {
        return Err(Halt::no_members());
    }
    let done = analyse(s, &members).await?;
    if done.len() < 2 {
        let (m, text) = done[0].clone();
        let why = json!("my partner failed: this analysis is unverified");
        s.say("escalate", &m.agent_id, vec![RUNNER.into()], ESCALATE, why).await?;
        return Ok(
            json!({"verdict": ESCALATE, "escalated": true, "text": text, "note": "only one analysis: unverified"}),
        );
    }
    s.step(&s.phase_named("EXCHANGE", 2)).await?;
    let (a, b) = (done[0].clone(), done[1].clone());
    s.say("results:a", &a.0.agent_id, vec![b.0.agent_id.clone()], RESULTS, json!(a.1)).await?;
    s.say("results:b", &b.0.agent_id, vec![a.0.agent_id.clone()], RESULTS, json!(b.1)).await?;
    let comparison = compare(s, &members, &a, &b).await?;
    synthesise(s, &members, a, b, comparison).await
}

/// Both members analyse the input: the analyses that came (at least one, or the session fails).
async fn analyse<W: World>(s: &mut Session<W>, members: &[Member]) -> Result<Vec<Analysis>, Halt> {
    s.step(&s.phase_named("ANALYSIS", 1)).await?;
    let input = s.input_text();
    let turns = members
        .iter()
        .map(|m| (m.clone(), format!("Analyse this independently, as {}; your partner does the same without seeing your work:\n\n{input}", m.role), Value::Null))
        .collect();
    let analyses = s.round("analysis", turns, None).await?;
    if all_failed(&analyses) {
        return Err(Halt::all_failed());
    }
    for (m, o) in &analyses {
        if let Some(text) = o.as_ref().and_then(|o| o.text()) {
            s.produced.insert(m.role.clone(), json!(text));
        }
    }
    Ok(analyses
        .iter()
        .filter_map(|(m, o)| o.as_ref().and_then(|o| o.text()).map(|t| (m.clone(), t.to_owned())))
        .collect())
}

/// Each member compares its analysis with its partner's, by the consensus timeout; each verdict is
/// sent to the partner.
async fn compare<W: World>(
    s: &mut Session<W>,
    members: &[Member],
    a: &Analysis,
    b: &Analysis,
) -> Result<Comparison, Halt> {
    s.step(&s.phase_named("COMPARISON", 3)).await?;
    let schema = verdict_schema();
    let ask = |mine: &str, theirs: &str| {
        format!(
            "Compare your analysis with your partner's. Give your verdict as JSON: {{\"verdict\": \"CONSENSUS\" or \"DISCREPANCY\", \"points\": [...]}}, CONSENSUS only if they agree on every material point; `points` lists the material points, each saying whether you agree.\n\nYour analysis:\n{mine}\n\nYour partner's analysis:\n{theirs}"
        )
    };
    let extra = json!({"output_schema": schema});
    let turns = vec![(a.0.clone(), ask(&a.1, &b.1), extra.clone()), (b.0.clone(), ask(&b.1, &a.1), extra)];
    let until = Instant::now() + s.settings.consensus_timeout;
    let reads = s.structured("comparison", turns, (&schema, bare_verdict), Some(until)).await?;
    let mut comparison = Comparison::default();
    for (m, read) in reads {
        // An answer that cannot be read counts as a discrepancy: never as agreement.
        let (verdict, content) = match read {
            Read::Given(v) => (v["verdict"].as_str().unwrap_or(DISCREPANCY).to_owned(), v),
            Read::Unreadable(why) => {
                let content = json!({"verdict": DISCREPANCY, "points": [], "unreadable": why});
                comparison.unreadable.insert(m.role.clone(), why);
                (DISCREPANCY.to_owned(), content)
            }
            Read::Missing { timed_out } => {
                comparison.forced |= timed_out;
                continue;
            }
        };
        s.say(&format!("verdict:{}", m.agent_id), &m.agent_id, others(members, &m.agent_id), &verdict, content).await?;
        comparison.verdicts.insert(m.role.clone(), verdict);
    }
    Ok(comparison)
}

/// The answer: the first analysis on a consensus, both and an escalation otherwise.
async fn synthesise<W: World>(
    s: &mut Session<W>,
    members: &[Member],
    a: Analysis,
    b: Analysis,
    Comparison { verdicts, unreadable, forced }: Comparison,
) -> Result<Value, Halt> {
    s.step(&s.phase_named("SYNTHESIS", 4)).await?;
    // Both must say CONSENSUS: a comparison that never came is no agreement either.
    let consensus = verdicts.len() == 2 && verdicts.values().all(|v| v == CONSENSUS);
    let note = forced.then(|| "consensus timeout: synthesis forced with the comparisons at hand".to_owned());
    let mut detail = json!({"comparison": verdicts});
    if !unreadable.is_empty() {
        detail["unreadable"] = json!(unreadable);
    }
    s.record(Phase::Running, note.clone(), Some(detail)).await?;
    if consensus {
        return Ok(
            json!({"verdict": CONSENSUS, "text": a.1, "analyses": {a.0.role.clone(): a.1, b.0.role.clone(): b.1}, "comparison": verdicts, "forced": forced}),
        );
    }
    let all = others(members, &b.0.agent_id);
    s.say("escalate", &b.0.agent_id, all, ESCALATE, json!("the analyses disagree: a person should decide")).await?;
    Ok(json!({
        "verdict": DISCREPANCY, "escalated": true,
        "text": format!("The analyses disagree.\n\n{}:\n{}\n\n{}:\n{}", a.0.role, a.1, b.0.role, b.1),
        "analyses": {a.0.role.clone(): a.1, b.0.role.clone(): b.1}, "comparison": verdicts, "forced": forced,
    }))
}

/// What a comparison answers (its turns' `output_schema`).
fn verdict_schema() -> Value {
    json!({
        "type": "object",
        "properties": {
            "verdict": {
                "enum": [CONSENSUS, DISCREPANCY],
                "description": "CONSENSUS only if the analyses agree on every material point",
            },
            "points": {
                "type": "array", "items": {"type": "string"},
                "description": "the material points compared, each saying whether the analyses agree on it",
            },
        },
        "required": ["verdict", "points"],
        "additionalProperties": false,
    })
}

/// A text that is only a verdict word (`CONSENSUS`, `discrepancy.`).
fn bare_verdict(text: &str) -> Option<Value> {
    let word = text.trim().trim_end_matches(['.', '!']).to_ascii_uppercase();
    [CONSENSUS, DISCREPANCY].contains(&word.as_str()).then(|| json!({"verdict": word, "points": []}))
}

#[cfg(test)]
mod tests {
    use clutch_proto::ErrorCode;

    use super::super::script::{Reply, Script, session};
    use super::*;

    const TEAM: [(&str, &str); 2] = [("Reflector", "agent:a"), ("Verifier", "agent:b")];

    fn verdict(word: &str) -> Reply {
        Reply::Answer(json!({"verdict": word, "points": ["the same"]}))
    }

    /// The writes up to the comparisons' turns, with both analyses in.
    const COMPARED: [&str; 9] = [
        "record:0 RUNNING ANALYSIS",
        "turn:analysis:agent:a → agent:a",
        "turn:analysis:agent:b → agent:b",
        "record:1 RUNNING EXCHANGE",
        "say:results:a agent:a → agent:b: RESULTS",
        "say:results:b agent:b → agent:a: RESULTS",
        "record:2 RUNNING COMPARISON",
        "turn:comparison:agent:a → agent:a",
        "turn:comparison:agent:b → agent:b",
    ];

    fn analysed() -> Script {
        Script::default()
            .reply("analysis:agent:a", Reply::Text("It is safe."))
            .reply("analysis:agent:b", Reply::Text("It is safe too."))
            .reply("comparison:agent:a", verdict(CONSENSUS))
    }

    #[tokio::test]
    async fn two_consensus_verdicts_are_a_consensus() {
        let script = analysed().reply("comparison:agent:b", verdict(CONSENSUS));
        let (mut s, _keep) = session("mirror", &TEAM, json!("Is it safe?"), script);
        let result = drive(&mut s).await.unwrap();
        assert_eq!((result["verdict"].clone(), result["text"].clone()), (json!("CONSENSUS"), json!("It is safe.")));
        assert_eq!(result["forced"], false);
        let mut expected = COMPARED.to_vec();
        expected.extend([
            "say:verdict:agent:a agent:a → agent:b: CONSENSUS",
            "say:verdict:agent:b agent:b → agent:a: CONSENSUS",
            "record:3 RUNNING SYNTHESIS",
            "record:4 RUNNING SYNTHESIS",
        ]);
        assert_eq!(s.world.writes, expected);
    }

    #[tokio::test]
    async fn a_discrepancy_escalates() {
        let script = analysed().reply("comparison:agent:b", verdict(DISCREPANCY));
        let (mut s, _keep) = session("mirror", &TEAM, json!("Is it safe?"), script);
        let result = drive(&mut s).await.unwrap();
        assert_eq!((result["verdict"].clone(), result["escalated"].clone()), (json!("DISCREPANCY"), json!(true)));
        let mut expected = COMPARED.to_vec();
        expected.extend([
            "say:verdict:agent:a agent:a → agent:b: CONSENSUS",
            "say:verdict:agent:b agent:b → agent:a: DISCREPANCY",
            "record:3 RUNNING SYNTHESIS",
            "record:4 RUNNING SYNTHESIS",
            "say:escalate agent:b → agent:a: ESCALATE",
        ]);
        assert_eq!(s.world.writes, expected);
    }

    #[tokio::test]
    async fn a_comparison_not_given_by_the_consensus_timeout_forces_synthesis() {
        let (mut s, _keep) = session("mirror", &TEAM, json!("Is it safe?"), analysed());
        let result = drive(&mut s).await.unwrap();
        assert_eq!((result["verdict"].clone(), result["forced"].clone()), (json!("DISCREPANCY"), json!(true)));
        let mut expected = COMPARED.to_vec();
        expected.extend([
            "cancel:t4 → agent:b",
            "say:verdict:agent:a agent:a → agent:b: CONSENSUS",
            "record:3 RUNNING SYNTHESIS",
            "record:4 RUNNING SYNTHESIS",
            "say:escalate agent:b → agent:a: ESCALATE",
        ]);
        assert_eq!(s.world.writes, expected);
    }

    #[tokio::test]
    async fn a_verdict_in_prose_is_asked_for_again_and_counts_as_a_discrepancy() {
        let script = analysed().reply("comparison:agent:b", Reply::Text("Yes, I think we agree."));
        let (mut s, _keep) = session("mirror", &TEAM, json!("Is it safe?"), script);
        let result = drive(&mut s).await.unwrap();
        assert_eq!(result["verdict"], "DISCREPANCY");
        let mut expected = COMPARED.to_vec();
        expected.extend([
            "turn:comparison-again:agent:b → agent:b",
            "cancel:t5 → agent:b",
            "say:verdict:agent:a agent:a → agent:b: CONSENSUS",
            "say:verdict:agent:b agent:b → agent:a: DISCREPANCY",
            "record:3 RUNNING SYNTHESIS",
            "record:4 RUNNING SYNTHESIS",
            "say:escalate agent:b → agent:a: ESCALATE",
        ]);
        assert_eq!(s.world.writes, expected);
    }

    #[tokio::test]
    async fn one_analysis_alone_is_escalated_unverified() {
        let script = Script::default()
            .reply("analysis:agent:a", Reply::Text("It is safe."))
            .reply("analysis:agent:b", Reply::Fail("LLM_FAILED"));
        let (mut s, _keep) = session("mirror", &TEAM, json!("Is it safe?"), script);
        let result = drive(&mut s).await.unwrap();
        assert_eq!((result["verdict"].clone(), result["text"].clone()), (json!("ESCALATE"), json!("It is safe.")));
        assert_eq!(
            s.world.writes,
            [
                "record:0 RUNNING ANALYSIS",
                "turn:analysis:agent:a → agent:a",
                "turn:analysis:agent:b → agent:b",
                "failed:agent:b → agent:a",
                "record:1 RUNNING ANALYSIS",
                "say:escalate agent:a → agent:positions: ESCALATE",
            ]
        );
    }

    #[tokio::test]
    async fn a_missing_partner_fails_before_any_turn() {
        let (mut s, _keep) = session("mirror", &TEAM[..1], json!("Is it safe?"), Script::default());
        let result = drive(&mut s).await;
        assert!(matches!(result, Err(Halt::Failed(ErrorCode::NoAgentForRole, _))), "{result:?}");
        assert!(s.world.writes.is_empty());
    }
}
