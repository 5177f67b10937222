//! What a position is once read: its types, as the runner, the daemon's API and the catalog use
//! them, and the rules each pattern states about them (the rules themselves are the patterns'
//! modules', in `positions`).

use serde::{Deserialize, Serialize};

/// A position: a team of agents following a collaboration pattern.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Skill {
    /// The position's id, e.g. `mirror`: `[a-z0-9-]{1,64}`.
    pub name: String,
    /// The `# Title` text.
    pub title: String,
    pub pattern: Pattern,
    pub description: Option<String>,
    /// The `## Overview` text, paragraphs joined by a blank line.
    pub overview: String,
    /// The roles, in the file's order (which some patterns give a meaning: see the module doc).
    pub agents: Vec<Role>,
    pub workflow: Vec<Stage>,
    pub protocol: Vec<MessageKind>,
    pub success_criteria: Vec<String>,
    pub error_handling: Vec<String>,
    pub params: Params,
    /// Where it came from: `shipped:NAME` or the file's path.
    pub source: String,
}

/// How the agents of a position work together (the module doc says what each requires).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum Pattern {
    /// One agent thinks the input through.
    Solo,
    /// Two agents work the same input independently and compare.
    Mirror,
    /// A chain of agents, each one's output the next one's input.
    Relay,
    /// A lead splits the input into subtasks for workers and synthesises their results.
    Pyramid,
    /// The input partitioned across workers, their results aggregated.
    Swarm,
    /// Members propose and vote, round after round, until a proposal wins.
    Circle,
}

/// A role of a position: one agent (or, for a swarm's first role, several).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Role {
    pub name: String,
    pub personality: String,
    pub responsibilities: Vec<String>,
}

/// A step of the workflow: `DISCOVERY`, `ANALYSIS`, ...
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Stage {
    pub name: String,
    pub description: String,
}

/// A type of message the agents send each other: `RESULTS`, `ESCALATE`, ...
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct MessageKind {
    pub name: String,
    pub description: String,
}

/// The front matter's numbers; absent ones take the defaults of the pattern that reads them (a
/// circle's `rounds` and `quorum`, a swarm's `workers`).
#[derive(Debug, Clone, Copy, PartialEq, Default, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Params {
    /// Circle: the most rounds of proposals and votes.
    pub rounds: Option<u32>,
    /// Circle: the fraction of the voters a proposal needs, in (0, 1].
    pub quorum: Option<f64>,
    /// Swarm: how many agents of the first role work partitions.
    pub workers: Option<u32>,
}

/// What a pattern requires of a position, and how many agents play each of its roles: each
/// pattern's module states its own (`Pattern::rules`).
#[derive(Debug)]
pub(crate) struct Rules {
    /// The roles it needs: at least, and at most.
    pub roles: (usize, Option<usize>),
    /// The message types its protocol must have.
    pub needs: &'static [&'static str],
    /// The front-matter numbers it reads (`rounds`, `quorum`, `workers`); any other is an error.
    pub params: &'static [&'static str],
    /// How many agents play its role number `i` when nobody is named for it: the position's
    /// numbers, and the invocation's `workers`.
    pub agents: fn(i: usize, params: &Params, workers: Option<u32>) -> usize,
}

/// One agent per role.
pub(crate) fn one_each(_i: usize, _params: &Params, _workers: Option<u32>) -> usize {
    1
}

impl Pattern {
    pub const ALL: [Pattern; 6] =
        [Pattern::Solo, Pattern::Mirror, Pattern::Relay, Pattern::Pyramid, Pattern::Swarm, Pattern::Circle];

    pub fn as_str(self) -> &'static str {
        match self {
            Pattern::Solo => "solo",
            Pattern::Mirror => "mirror",
            Pattern::Relay => "relay",
            Pattern::Pyramid => "pyramid",
            Pattern::Swarm => "swarm",
            Pattern::Circle => "circle",
        }
    }

    pub(crate) fn from_name(name: &str) -> Option<Pattern> {
        Pattern::ALL.into_iter().find(|p| p.as_str() == name)
    }
}

impl std::fmt::Display for Pattern {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Role names are compared ignoring case.
pub(crate) fn same_role(a: &str, b: &str) -> bool {
    a.to_lowercase() == b.to_lowercase()
}
