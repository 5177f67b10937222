//! Built-in LLM agents. `provider`: the providers they call (Anthropic Messages and
//! OpenAI-compatible Chat Completions, streamed or whole, with tool use), paced by one rate limiter
//! per provider (`limit`) and retried with backoff. `agent`: runtime agents as Clutch agents
//! (registered, heartbeating, given tasks by the router); `work`: one task's loop, recorded in the
//! log so that it resumes after a restart without buying a recorded answer twice; `live` is the
//! loop's world in the daemon, `replay` a recorded run's, re-executed to check that the agents
//! behave as recorded. `skill`: positions, teams of agents following a collaboration pattern,
//! read from SKILL.md files (six shipped, and the operator's own).

pub mod agent;
pub mod builtin;
mod limit;
mod live;
pub mod positions;
pub mod provider;
pub mod replay;
pub mod skill;
mod spec;
pub mod work;

#[cfg(feature = "fake")]
pub mod fake;

pub use agent::Runtime;
pub use provider::Provider;
