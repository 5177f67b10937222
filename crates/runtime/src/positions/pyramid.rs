//! The pyramid pattern: the first role leads, splitting the input into subtasks for the workers
//! (every other role), then synthesising their results. Its rules (at least two roles; `SUBTASK`,
//! `RESULTS`) and its driver.

use clutch_core::session::Member;
use clutch_proto::ErrorCode;
use serde_json::{Value, json};

use super::error::Halt;
use super::session::Session;
use super::world::World;
use crate::skill::{Rules, one_each};

/// A subtask, from the lead to a worker.
const SUBTASK: &str = "SUBTASK";
/// A worker's result, to the lead.
const RESULTS: &str = "RESULTS";

/// At least two roles (a lead and workers), and the two message types above.
pub(super) const RULES: Rules = Rules { roles: (2, None), needs: &[SUBTASK, RESULTS], params: &[], agents: one_each };

/// Decomposition, execution, synthesis.
pub(super) async fn drive<W: World>(s: &mut Session<W>) -> Result<Value, Halt> {
    let Some(lead) = s.role_members(0).into_iter().next() else { return Err(Halt::no_members()) };
    let workers: Vec<Member> = (1..s.skill.agents.len()).flat_map(|i| s.role_members(i)).collect();
    if workers.is_empty() {
        return Err(Halt::no_members());
    }
    let subtasks = decompose(s, &lead, workers.len()).await?;
    let results = execute(s, &lead, &workers, &subtasks).await?;
    s.produced.insert(
        "subtasks".into(),
        json!(results.iter().map(|(s, r)| json!({"subtask": s, "result": r})).collect::<Vec<_>>()),
    );
    s.step(&s.phase_named("SYNTHESIS", 2)).await?;
    let mut goal = String::from("Your workers report. Synthesise one answer from their results:\n");
    for (s, r) in &results {
        goal.push_str(&format!("\n## {s}\n{r}\n"));
    }
    let answer = s.round("synthesis", vec![(lead.clone(), goal, Value::Null)], None).await?;
    let Some(text) = answer[0].1.as_ref().and_then(|o| o.text().map(str::to_owned)) else {
        return Err(Halt::Failed(ErrorCode::LeadFailed, format!("{} failed to synthesise", lead.role)));
    };
    Ok(json!({"text": text, "subtasks": s.produced.get("subtasks").cloned().unwrap_or_default()}))
}

/// The lead's plan: at most two subtasks per worker (the whole input when it lists none).
async fn decompose<W: World>(s: &mut Session<W>, lead: &Member, workers: usize) -> Result<Vec<String>, Halt> {
    s.step(&s.phase_named("DECOMPOSITION", 0)).await?;
    let goal = format!(
        "You lead a team of {} workers. Split this into at most {} independent subtasks, one per line, each line starting with \"- \":\n\n{}",
        workers,
        workers * 2,
        s.input_text()
    );
    let plan = s.round("plan", vec![(lead.clone(), goal, Value::Null)], None).await?;
    let Some(plan) = plan[0].1.as_ref().and_then(|o| o.text().map(str::to_owned)) else {
        return Err(Halt::Failed(ErrorCode::LeadFailed, format!("{} failed to decompose the work", lead.role)));
    };
    let mut subtasks: Vec<String> = plan.lines().filter_map(item).take(workers * 2).collect();
    if subtasks.is_empty() {
        subtasks.push(s.input_text());
    }
    Ok(subtasks)
}

/// A line of a plan that is a list item (`- `, `* ` or `1. `): its text.
fn item(line: &str) -> Option<String> {
    let l = line.trim();
    let text = l.strip_prefix("- ").or_else(|| l.strip_prefix("* ")).or_else(|| {
        let digits = l.find(|c: char| !c.is_ascii_digit())?;
        (digits > 0).then(|| l[digits..].strip_prefix(". ")).flatten()
    })?;
    Some(text.trim().to_owned()).filter(|t| !t.is_empty())
}

/// The subtasks dealt to the workers in turn: (subtask, result) of those done.
async fn execute<W: World>(
    s: &mut Session<W>,
    lead: &Member,
    workers: &[Member],
    subtasks: &[String],
) -> Result<Vec<(String, String)>, Halt> {
    s.step(&s.phase_named("EXECUTION", 1)).await?;
    let mut turns = Vec::new();
    for (i, sub) in subtasks.iter().enumerate() {
        let w = workers[i % workers.len()].clone();
        s.say(&format!("subtask{i}"), &lead.agent_id, vec![w.agent_id.clone()], SUBTASK, json!(sub)).await?;
        turns.push((w, format!("Your lead gave you this subtask:\n\n{sub}"), json!({"subtask": i})));
    }
    // A worker with two subtasks gets two turns: keys by subtask, not by agent.
    let mut results = Vec::new();
    let mut tasks = Vec::new();
    for (i, (w, goal, extra)) in turns.iter().enumerate() {
        tasks.push(s.turn(&format!("sub{i}"), &w.agent_id, &w.role, goal.clone(), extra.clone()).await?);
    }
    let outcomes = s.wait(&tasks, None).await?;
    for (i, ((w, _, _), o)) in turns.iter().zip(outcomes).enumerate() {
        match o.as_ref().and_then(|o| o.text().map(str::to_owned)) {
            Some(text) => {
                s.say(&format!("result{i}"), &w.agent_id, vec![lead.agent_id.clone()], RESULTS, json!(text)).await?;
                results.push((subtasks[i].clone(), text));
            }
            None => {
                if let Some(o) = &o {
                    s.announce_failure(&w.agent_id, o).await?;
                }
            }
        }
    }
    if results.is_empty() {
        return Err(Halt::all_failed());
    }
    Ok(results)
}

#[cfg(test)]
mod tests {
    use super::super::script::{Reply, Script, session};
    use super::*;

    const TEAM: [(&str, &str); 3] = [("Lead", "agent:l"), ("Researcher", "agent:r"), ("Analyst", "agent:n")];

    #[tokio::test]
    async fn the_lead_deals_subtasks_to_the_workers_and_synthesises_their_results() {
        let script = Script::default()
            .reply("plan:agent:l", Reply::Text("Here is the plan:\n- find the facts\n2. weigh them\n- check them"))
            .reply("sub0", Reply::Text("facts"))
            .reply("sub1", Reply::Fail("LLM_FAILED"))
            .reply("sub2", Reply::Text("checked"))
            .reply("synthesis:agent:l", Reply::Text("the answer"));
        let (mut s, _keep) = session("pyramid", &TEAM, json!("Is it true?"), script);
        let result = drive(&mut s).await.unwrap();
        assert_eq!(result["text"], "the answer");
        assert_eq!(
            result["subtasks"],
            json!([{"subtask": "find the facts", "result": "facts"}, {"subtask": "check them", "result": "checked"}])
        );
        assert_eq!(
            s.world.writes,
            [
                "record:0 RUNNING DECOMPOSITION",
                "turn:plan:agent:l → agent:l",
                "record:1 RUNNING EXECUTION",
                "say:subtask0 agent:l → agent:r: SUBTASK",
                "say:subtask1 agent:l → agent:n: SUBTASK",
                "say:subtask2 agent:l → agent:r: SUBTASK",
                "turn:sub0 → agent:r",
                "turn:sub1 → agent:n",
                "turn:sub2 → agent:r",
                "say:result0 agent:r → agent:l: RESULTS",
                "failed:agent:n → agent:l,agent:r",
                "record:2 RUNNING EXECUTION",
                "say:result2 agent:r → agent:l: RESULTS",
                "record:3 RUNNING SYNTHESIS",
                "turn:synthesis:agent:l → agent:l",
            ]
        );
    }

    #[tokio::test]
    async fn a_lead_that_cannot_decompose_fails_the_session() {
        let script = Script::default().reply("plan:agent:l", Reply::Fail("LLM_FAILED"));
        let (mut s, _keep) = session("pyramid", &TEAM, json!("Is it true?"), script);
        let result = drive(&mut s).await;
        let Err(Halt::Failed(ErrorCode::LeadFailed, why)) = result else { panic!("{result:?}") };
        assert_eq!(why, "Lead failed to decompose the work");
        assert_eq!(
            s.world.writes,
            [
                "record:0 RUNNING DECOMPOSITION",
                "turn:plan:agent:l → agent:l",
                "failed:agent:l → agent:r,agent:n",
                "record:1 RUNNING DECOMPOSITION",
            ]
        );
    }

    #[tokio::test]
    async fn a_lead_without_workers_is_no_team() {
        let (mut s, _keep) = session("pyramid", &TEAM[..1], json!("Is it true?"), Script::default());
        let result = drive(&mut s).await;
        assert!(matches!(result, Err(Halt::Failed(ErrorCode::NoAgentForRole, _))), "{result:?}");
        assert!(s.world.writes.is_empty());
    }

    #[test]
    fn a_plan_is_read_by_its_list_items() {
        let items: Vec<String> = "Plan:\n- a\n* b\n3. c\n-d\n4.e\n- \n".lines().filter_map(item).collect();
        assert_eq!(items, ["a", "b", "c"]);
    }
}
