//! The tool registry: every tool of every topic, sorted by name, and the list each profile offers,
//! so that it is the same on every call and every daemon.

use std::sync::Arc;

use crate::tools::{Lane, Profile, Tool};
use crate::{agents, approvals, inbox, lists, sessions, workflows};

/// Every tool, sorted by name, and the definitions each profile lists.
pub(crate) struct Registry {
    tools: Vec<Tool>,
    worker: Arc<[rmcp::model::Tool]>,
    coordinator: Arc<[rmcp::model::Tool]>,
}

impl Registry {
    pub(crate) fn new() -> Registry {
        let mut tools = agents::tools();
        tools.extend(workflows::tools());
        tools.extend(approvals::tools());
        tools.extend(sessions::tools());
        tools.extend(inbox::tools());
        tools.extend(lists::tools());
        tools.sort_by(|a, b| a.definition.name.cmp(&b.definition.name));
        let list = |lanes: &[Lane]| -> Arc<[rmcp::model::Tool]> {
            tools.iter().filter(|t| lanes.contains(&t.lane)).map(|t| t.definition.clone()).collect()
        };
        let worker = list(&[Lane::Lifecycle]);
        let coordinator = list(&[Lane::Lifecycle, Lane::Coordination]);
        Registry { tools, worker, coordinator }
    }

    /// The definitions `profile` lists, sorted by name.
    pub(crate) fn list(&self, profile: Profile) -> Arc<[rmcp::model::Tool]> {
        match profile {
            Profile::Worker => self.worker.clone(),
            Profile::Coordinator => self.coordinator.clone(),
        }
    }

    /// The tool `name`, if `profile` offers it.
    pub(crate) fn find(&self, profile: Profile, name: &str) -> Option<&Tool> {
        let i = self.tools.binary_search_by(|t| t.definition.name.as_ref().cmp(name)).ok()?;
        let tool = &self.tools[i];
        (profile == Profile::Coordinator || tool.lane == Lane::Lifecycle).then_some(tool)
    }
}
