//! What the agent playing a role of a position is told: its system prompt, made of the position's
//! text and the session it works in.

use super::model::{Skill, same_role};

/// The message type a prompt tells its agent to escalate with, when the position has it.
const ESCALATE: &str = "ESCALATE";

/// What a role's system prompt says about the session it works in.
#[derive(Debug, Clone, PartialEq)]
pub struct SessionFacts {
    pub session_id: String,
    /// The agent the prompt is for.
    pub agent_id: String,
    /// The other agents: (role, agent id).
    pub others: Vec<(String, String)>,
}

impl Skill {
    /// The system prompt of the agent playing `role` (matched ignoring case) in a session of this
    /// position; `None` when the position has no such role.
    pub fn system_prompt(&self, role: &str, session: &SessionFacts) -> Option<String> {
        use std::fmt::Write;
        let role = self.agents.iter().find(|r| same_role(&r.name, role))?;
        let name = &role.name;
        // Writing to a String cannot fail.
        let mut out = String::new();
        let _ =
            writeln!(out, "You are {name}, an AI agent in a Clutch \"{}\" position ({}).", self.title, self.pattern);
        let _ = writeln!(out, "\n{}\n\n## Your Role\n{}\n\n## Your Responsibilities", self.overview, role.personality);
        for r in &role.responsibilities {
            let _ = writeln!(out, "- {r}");
        }
        let others = if session.others.is_empty() {
            "none".to_owned()
        } else {
            session.others.iter().map(|(role, id)| format!("{role} ({id})")).collect::<Vec<_>>().join(", ")
        };
        let _ = writeln!(out, "\n## Current Session\n- Session ID: {}\n- Position: {}", session.session_id, self.name);
        let _ = writeln!(out, "- Your Agent ID: {}\n- Other Agents: {others}\n\n## Workflow", session.agent_id);
        for (i, phase) in self.workflow.iter().enumerate() {
            let _ = writeln!(out, "{}. **{}**: {}", i + 1, phase.name, phase.description);
        }
        out.push_str(
            "\n## Communication\nUse the sessions_send tool to message other agents (to an agent id or \"all\") \
             with one of these types:\n",
        );
        for kind in &self.protocol {
            let _ = writeln!(out, "- {}: {}", kind.name, kind.description);
        }
        let _ = writeln!(
            out,
            "\n## Important\n- Stay in character as {name}\n- Follow the workflow phases in order\n\
             - Communicate with other agents using the prescribed protocol"
        );
        if self.protocol.iter().any(|k| k.name == ESCALATE) {
            out.push_str("- If you encounter an error or need human help, send an ESCALATE message\n");
        }
        Some(out)
    }
}
