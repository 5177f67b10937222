//! The swarm pattern: the input partitioned across the agents of the first role (`workers` of
//! them), their results aggregated by the second role's agent when there is one, else joined. Its
//! rules (at least one role; `RESULTS`; the `workers` number) and its driver.

use clutch_core::session::Member;
use serde_json::{Value, json};

use super::error::Halt;
use super::session::Session;
use super::turns::{Turn, all_failed};
use super::world::World;
use crate::skill::{Params, Rules};

/// A scout's result, to the aggregator.
const RESULTS: &str = "RESULTS";
/// Scouts when neither the front matter nor the invocation says.
pub(crate) const DEFAULT_WORKERS: u32 = 3;
/// The most scouts an invocation may ask for.
const MOST_WORKERS: u32 = 32;

/// At least one role, `RESULTS`, and `workers` agents of the first role.
pub(super) const RULES: Rules = Rules { roles: (1, None), needs: &[RESULTS], params: &["workers"], agents: scouts };

impl Params {
    pub fn workers_or_default(&self) -> u32 {
        self.workers.unwrap_or(DEFAULT_WORKERS)
    }
}

/// The agents of role `i`: the invocation's `workers` (else the position's) for the first role, one
/// for the others.
fn scouts(i: usize, params: &Params, workers: Option<u32>) -> usize {
    if i == 0 { workers.unwrap_or(params.workers_or_default()).clamp(1, MOST_WORKERS) as usize } else { 1 }
}

/// Scatter, then aggregation.
pub(super) async fn drive<W: World>(s: &mut Session<W>) -> Result<Value, Halt> {
    let scouts = s.role_members(0);
    if scouts.is_empty() {
        return Err(Halt::no_members());
    }
    let aggregator = s.role_members(1).into_iter().next();
    let results = scatter(s, &scouts, aggregator.as_ref()).await?;
    s.produced.insert("parts".into(), json!(results));
    let joined = || results.iter().filter_map(|r| r["result"].as_str()).collect::<Vec<_>>().join("\n\n");
    let Some(agg) = aggregator else {
        return Ok(json!({"text": joined(), "parts": results}));
    };
    s.step(&s.phase_named("AGGREGATION", 2)).await?;
    let mut goal = String::from("Aggregate the swarm's results into one answer:\n");
    for r in &results {
        goal.push_str(&format!(
            "\n## {}\n{}\n",
            r["part"].as_str().unwrap_or_default(),
            r["result"].as_str().unwrap_or_default()
        ));
    }
    let answer = s.round("aggregate", vec![(agg.clone(), goal, Value::Null)], None).await?;
    let Some(text) = answer[0].1.as_ref().and_then(|o| o.text().map(str::to_owned)) else {
        return Ok(json!({"text": joined(), "parts": results, "note": "the aggregator failed: results concatenated"}));
    };
    Ok(json!({"text": text, "parts": results}))
}

/// Each scout works its part of the input; its result goes to the aggregator. The results: agent,
/// part and result of each.
async fn scatter<W: World>(
    s: &mut Session<W>,
    scouts: &[Member],
    aggregator: Option<&Member>,
) -> Result<Vec<Value>, Halt> {
    let parts = partition(&s.invoke.invocation.input, scouts.len());
    s.step(&s.phase_named("SCATTER", 0)).await?;
    let turns: Vec<Turn> = parts
        .iter()
        .zip(scouts)
        .map(|(part, m)| {
            let goal =
                format!("You are one of {} {}s; work on your share of the input:\n\n{part}", scouts.len(), m.role);
            (m.clone(), goal, Value::Null)
        })
        .collect();
    let answers = s.round("scatter", turns, None).await?;
    if all_failed(&answers) {
        return Err(Halt::all_failed());
    }
    let mut results = Vec::new();
    for (i, (m, o)) in answers.iter().enumerate() {
        if let Some(text) = o.as_ref().and_then(|o| o.text()) {
            if let Some(agg) = aggregator {
                s.say(&format!("result{i}"), &m.agent_id, vec![agg.agent_id.clone()], RESULTS, json!(text)).await?;
            }
            results.push(json!({"agent": m.agent_id, "part": parts[i], "result": text}));
        }
    }
    Ok(results)
}

/// The input cut into at most `n` parts: an array by items, text by lines (contiguous groups).
fn partition(input: &Value, n: usize) -> Vec<String> {
    let items: Vec<String> = match input {
        Value::Array(items) => items.iter().map(|v| v.as_str().map_or_else(|| v.to_string(), str::to_owned)).collect(),
        Value::String(s) => s.lines().map(str::trim).filter(|l| !l.is_empty()).map(str::to_owned).collect(),
        Value::Null => Vec::new(),
        other => vec![other.to_string()],
    };
    if items.is_empty() {
        return vec![String::new()];
    }
    let n = n.min(items.len()).max(1);
    let per = items.len().div_ceil(n);
    items.chunks(per).map(|c| c.join("\n")).collect()
}

#[cfg(test)]
mod tests {
    use clutch_proto::ErrorCode;

    use super::super::script::{Reply, Script, session};
    use super::*;

    const TEAM: [(&str, &str); 3] = [("Scout", "agent:s1"), ("Scout", "agent:s2"), ("Aggregator", "agent:g")];

    #[tokio::test]
    async fn scouts_work_their_parts_and_the_aggregator_merges_them() {
        let script = Script::default()
            .reply("scatter:agent:s1", Reply::Text("A and B seen"))
            .reply("scatter:agent:s2", Reply::Text("C seen"))
            .reply("aggregate:agent:g", Reply::Text("A, B and C seen"));
        let (mut s, _keep) = session("swarm", &TEAM, json!(["a", "b", "c"]), script);
        let result = drive(&mut s).await.unwrap();
        assert_eq!(result["text"], "A, B and C seen");
        assert_eq!(result["parts"][0], json!({"agent": "agent:s1", "part": "a\nb", "result": "A and B seen"}));
        assert_eq!(result["parts"][1]["part"], "c");
        assert_eq!(
            s.world.writes,
            [
                "record:0 RUNNING PARTITION",
                "turn:scatter:agent:s1 → agent:s1",
                "turn:scatter:agent:s2 → agent:s2",
                "say:result0 agent:s1 → agent:g: RESULTS",
                "say:result1 agent:s2 → agent:g: RESULTS",
                "record:1 RUNNING AGGREGATION",
                "turn:aggregate:agent:g → agent:g",
            ]
        );
    }

    #[tokio::test]
    async fn a_failed_aggregator_leaves_the_results_concatenated() {
        let script = Script::default()
            .reply("scatter:agent:s1", Reply::Text("A and B seen"))
            .reply("scatter:agent:s2", Reply::Fail("LLM_FAILED"))
            .reply("aggregate:agent:g", Reply::Fail("LLM_FAILED"));
        let (mut s, _keep) = session("swarm", &TEAM, json!("a\nb\n\nc"), script);
        let result = drive(&mut s).await.unwrap();
        assert_eq!(result["text"], "A and B seen");
        assert_eq!(result["note"], "the aggregator failed: results concatenated");
        assert_eq!(
            s.world.writes,
            [
                "record:0 RUNNING PARTITION",
                "turn:scatter:agent:s1 → agent:s1",
                "turn:scatter:agent:s2 → agent:s2",
                "failed:agent:s2 → agent:s1,agent:g",
                "record:1 RUNNING PARTITION",
                "say:result0 agent:s1 → agent:g: RESULTS",
                "record:2 RUNNING AGGREGATION",
                "turn:aggregate:agent:g → agent:g",
                "failed:agent:g → agent:s1,agent:s2",
                "record:3 RUNNING AGGREGATION",
            ]
        );
    }

    #[tokio::test]
    async fn every_scout_failing_fails_the_session() {
        let script = Script::default()
            .reply("scatter:agent:s1", Reply::Fail("LLM_FAILED"))
            .reply("scatter:agent:s2", Reply::Fail("LLM_FAILED"));
        let (mut s, _keep) = session("swarm", &TEAM, json!(["a", "b"]), script);
        let result = drive(&mut s).await;
        assert!(matches!(result, Err(Halt::Failed(ErrorCode::AllAgentsFailed, _))), "{result:?}");
    }

    #[test]
    fn the_first_role_takes_the_invocations_workers_else_the_positions() {
        let params = Params { workers: Some(5), ..Params::default() };
        assert_eq!((scouts(0, &params, None), scouts(0, &params, Some(2)), scouts(1, &params, Some(2))), (5, 2, 1));
        assert_eq!((scouts(0, &Params::default(), None), scouts(0, &params, Some(100))), (3, 32));
        assert_eq!(partition(&json!(null), 3), [""]);
        assert_eq!(partition(&json!([1, "b", 3, 4]), 3), ["1\nb", "3\n4"]);
    }
}
