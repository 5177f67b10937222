//! Positions at work: the runner (`agent:positions`) takes each invocation (a `task.request` to it
//! whose payload names a position), opens a session in the invocation's run, gives each role of
//! the position an agent (one named in the invocation, or a built-in LLM agent it spawns from the
//! SKILL.md), and drives the position's pattern with tasks (one per turn, children of the
//! invocation's task) and session messages, recording each phase in the log (`clutch.session.v1`).
//!
//! A session's driver is straight-line code over the log: every message it writes carries a key
//! (`meta.session_key`) derived from where it is in the pattern, and before it writes anything it
//! reads the session's run back, so after a restart it finds the turns it already gave and their
//! outcomes and writes nothing twice (LLM agents resume their own turns the same way).
//!
//! `runner` is the runner; `session` one session over its `world` (`live` in the daemon, `replay`
//! a recording re-executed), with `turns` its rounds of turns, `cast` its members and `course` its
//! way from accept to end; `pattern` dispatches to the one module per pattern (`solo`, `mirror`,
//! `relay`, `pyramid`, `swarm`, `circle`), each with its rules and its driver.

mod cast;
mod circle;
mod course;
mod error;
mod invoke;
mod live;
mod mirror;
mod options;
mod outcome;
mod pattern;
mod pyramid;
mod relay;
mod replay;
mod runner;
#[cfg(test)]
mod script;
mod session;
mod solo;
mod swarm;
mod turns;
mod world;

/// The runner's agent id: invocations are task requests to it.
pub use clutch_core::session::RUNNER;
pub use error::Error;
pub use invoke::{Invoke, TURN_PAYLOAD};
pub use options::Options;
pub use replay::{Replayed, reexecute};
pub use runner::{Runner, summary};
