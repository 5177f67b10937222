//! An agent's availability ([`Status`]): a word the registry, the router, the payloads, the shapes
//! and the workflows all use, kept in a module of its own that needs none of them.

/// Availability of an agent.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum Status {
    Online,
    Stale,
    Offline,
    Removed,
}

impl Status {
    pub fn as_str(self) -> &'static str {
        match self {
            Status::Online => "online",
            Status::Stale => "stale",
            Status::Offline => "offline",
            Status::Removed => "removed",
        }
    }
}
