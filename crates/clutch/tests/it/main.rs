//! The `clutch` binary's integration tests, in one test binary: each starts the real executable and
//! talks to it as a user or a client would.

mod a2a;
mod agents;
#[cfg(feature = "bench")]
mod bench;
mod cli;
mod config;
mod crash;
mod lists;
mod llm;
mod mcp;
mod policy;
mod positions;
mod readme;
mod replay;
mod security;
mod send;
mod serve;
mod sessions;
mod states;
mod support;
mod tail;
mod tasks;
mod tidy;
mod tools;
mod workers;
mod workflows;
