//! The runtime's integration tests: one binary, a module per subject.

mod agents;
mod providers;
mod skills;
