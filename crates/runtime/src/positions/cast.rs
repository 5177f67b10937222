//! Who plays each role of a session: the agents (or people) the invocation names, the agents the
//! router picks for the capabilities it names (with why, for the record), and built-in LLM agents
//! spawned for the rest, each told its part by the position's system prompt.

use std::collections::HashMap;

use clutch_core::session::Member;
use clutch_proto::{AgentCard, ErrorCode};
use serde_json::{Value, json};

use super::error::Halt;
use super::session::Session;
use super::world::World;
use crate::skill::SessionFacts;

/// A role nobody was named for: its name, and its agent's number when several play it.
type Missing = (String, Option<usize>);

impl<W: World> Session<W> {
    /// The members in role order (the pattern reads roles in the SKILL.md's order), and the
    /// router's picks with why.
    pub async fn cast(&mut self) -> Result<(Vec<Member>, Vec<Value>), Halt> {
        let named = self.named()?;
        let mut members = Vec::new();
        let mut missing: Vec<Missing> = Vec::new();
        let mut cast = Vec::new();
        // Named agents are not picked again for a capability.
        let mut taken: Vec<String> = named
            .values()
            .flat_map(|a| a.split(',').map(str::trim).map(str::to_owned))
            .filter(|a| is_agent(a))
            .collect();
        let rules = self.skill.pattern.rules();
        for (i, role) in self.skill.agents.iter().enumerate() {
            let Some(agents) = named.get(&role.name.to_lowercase()) else {
                let count = (rules.agents)(i, &self.skill.params, self.invoke.invocation.workers);
                missing.extend((0..count).map(|n| (role.name.clone(), (count > 1).then_some(n + 1))));
                continue;
            };
            for agent in agents.split(',').map(str::trim).filter(|a| !a.is_empty()) {
                let agent_id = if is_agent(agent) {
                    agent.to_owned()
                } else {
                    let (picked, why) = self.cast_by(&role.name, agent, &taken)?;
                    cast.push(why);
                    taken.push(picked.clone());
                    picked
                };
                members.push(Member { agent_id, role: role.name.clone() });
            }
        }
        if !missing.is_empty() {
            members = self.spawn(members, &missing).await?;
        }
        Ok((members, cast))
    }

    /// The invocation's named agents by role (lowercase), each role one of the position's.
    fn named(&self) -> Result<HashMap<String, String>, Halt> {
        let named: HashMap<String, String> =
            self.invoke.invocation.agents.iter().map(|(r, a)| (r.to_lowercase(), a.clone())).collect();
        for role in named.keys() {
            if !self.skill.agents.iter().any(|r| r.name.to_lowercase() == *role) {
                let roles: Vec<&str> = self.skill.agents.iter().map(|r| r.name.as_str()).collect();
                return Err(Halt::Failed(
                    ErrorCode::ValidationFailed,
                    format!("position {} has no role `{role}` (its roles: {})", self.skill.name, roles.join(", ")),
                ));
            }
        }
        Ok(named)
    }

    /// The agent that plays `role` for capability `capability` (see [`World::pick`]).
    fn cast_by(&self, role: &str, capability: &str, taken: &[String]) -> Result<(String, Value), Halt> {
        self.world
            .pick(role, capability, taken)
            .map_err(|e| Halt::Failed(ErrorCode::NoAgentForRole, format!("nobody can play {role}: {e}")))
    }

    /// `members` and an LLM agent spawned for each role in `missing`, in role order.
    async fn spawn(&mut self, members: Vec<Member>, missing: &[Missing]) -> Result<Vec<Member>, Halt> {
        let Some(provider) = self.settings.provider.clone() else {
            let roles: Vec<String> = missing.iter().map(|(r, _)| r.clone()).collect();
            return Err(Halt::Failed(
                ErrorCode::NoAgentForRole,
                format!(
                    "nobody plays {} and no provider is declared to spawn an LLM agent: name agents (--agents ROLE=agent:ID) or declare a provider",
                    roles.join(", ")
                ),
            ));
        };
        let planned: Vec<Member> = missing.iter().map(|(role, n)| self.planned(role, *n)).collect();
        let mut everyone: Vec<Member> = members.into_iter().chain(planned.iter().cloned()).collect();
        for member in &planned {
            let card = self.card(member, &everyone, &provider)?;
            if let Err(e) = self.world.spawn(&card).await {
                if self.closing() {
                    return Err(Halt::Shutdown);
                }
                return Err(Halt::Failed(ErrorCode::SpawnFailed, format!("cannot spawn {}: {e}", member.agent_id)));
            }
            self.spawned.push(member.agent_id.clone());
        }
        // Keep role order: the pattern reads roles in the SKILL.md's order.
        let order: Vec<String> = self.skill.agents.iter().map(|r| r.name.clone()).collect();
        everyone.sort_by_key(|m| order.iter().position(|r| *r == m.role));
        Ok(everyone)
    }

    /// The agent spawned for `role` (its `n`th when several play it): named after the position,
    /// the role and the session.
    fn planned(&self, role: &str, n: Option<usize>) -> Member {
        let suffix = self.session.rsplit('_').next().unwrap_or_default().to_lowercase();
        let suffix = &suffix[suffix.len().saturating_sub(8)..];
        let slug: String =
            role.to_lowercase().chars().map(|c| if c.is_ascii_alphanumeric() { c } else { '-' }).collect();
        let agent_id = match n {
            Some(n) => format!("agent:{}-{slug}{n}-{suffix}", self.skill.name),
            None => format!("agent:{}-{slug}-{suffix}", self.skill.name),
        };
        Member { agent_id, role: role.to_owned() }
    }

    /// The card of the LLM agent spawned as `member`, one of `everyone`.
    fn card(&self, member: &Member, everyone: &[Member], provider: &str) -> Result<AgentCard, Halt> {
        let facts = SessionFacts {
            session_id: self.session.clone(),
            agent_id: member.agent_id.clone(),
            others: everyone
                .iter()
                .filter(|m| m.agent_id != member.agent_id)
                .map(|m| (m.role.clone(), m.agent_id.clone()))
                .collect(),
        };
        let system = self.skill.system_prompt(&member.role, &facts).unwrap_or_default();
        let mut llm =
            json!({"provider": provider, "system": system, "max_turns": 8, "tools": [crate::builtin::SESSIONS]});
        if let Some(model) = &self.settings.model {
            llm["model"] = json!(model);
        }
        let card = json!({
            "v": "clutch/0.1", "agent_id": member.agent_id,
            "display": {"name": format!("{} ({})", member.role, self.skill.name)},
            "capabilities": [{"id": format!("skill:role-{}", member.role.to_lowercase().replace(' ', "-")), "version": "1.0.0", "tags": ["llm", "position"]}],
            "limits": {"max_concurrency": 4},
            "meta": {"llm": llm, "session_id": self.session},
        });
        clutch_proto::validate::agent_card(&card)
            .map_err(|p| Halt::Failed(ErrorCode::SpawnFailed, format!("an agent's card: {p}")))
    }
}

/// An agent or a person by id, rather than a capability to cast one for.
fn is_agent(name: &str) -> bool {
    name.starts_with("agent:") || name.starts_with("user:")
}
