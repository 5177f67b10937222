//! Positions: teams of agents following a collaboration pattern, each described by a SKILL.md file
//! (front matter as in Agent Skills, then the Markdown sections below). This module parses and
//! checks them, ships six, and keeps the catalog of those and the operator's own; running them is
//! not its business. `model` holds the types, `front` the front matter, `markdown` the Markdown
//! reader and `sections` what the body's sections hold, `parse` one file, `catalog` the shipped and
//! the operator's files, and `prompt` what a role's agent is told. What each pattern requires is
//! its own module's, in `positions`.
//!
//! # The format
//!
//! ```text
//! ---
//! name: mirror
//! pattern: mirror
//! description: Two agents analyse the same input independently and compare.
//! ---
//! # Mirror Position
//!
//! ## Overview
//! Two agents independently analyze the same target and compare results.
//!
//! ## Agents
//! ### Reflector
//! - **Personality**: Thorough, methodical, detail-oriented
//! - **Responsibilities**:
//!   - Perform primary analysis of target
//!
//! ## Workflow
//! 1. **DISCOVERY**: Both agents receive target, acknowledge readiness
//!
//! ## Communication Protocol
//! - RESULTS: Share analysis with checksum
//!
//! ## Success Criteria
//! - ...
//!
//! ## Error Handling
//! - ...
//! ```
//!
//! - **Front matter**: a first line `---`, then YAML `key: value` lines (read by the project's
//!   YAML reader, `clutch_core::config::yaml`: blank lines and `# comments` allowed, a value may be
//!   quoted with `"` or `'`) up to a closing `---`. Keys: `name` (the
//!   position's id, `[a-z0-9-]{1,64}`; default: the file's stem, or the directory's name for
//!   `NAME/SKILL.md`), `pattern` (required, one of [`Pattern`]), `description`, `rounds` (circle only,
//!   a whole number ≥ 1), `quorum` (circle only, a number in (0, 1]) and `workers` (swarm only, a whole
//!   number ≥ 1). Any other key, a key given twice, or a value that is a list or a mapping is an
//!   error.
//! - **Title**: the first `# ` heading. Text before the first `## ` section is ignored.
//! - **Sections** (`## `, names matched case-insensitively; `Protocol` is accepted for
//!   `Communication Protocol`; any other section is ignored, so notes may be added; a known section
//!   given twice is an error): `Overview` (required, non-empty: its paragraphs, and list items as
//!   `- item` lines, joined by blank lines), `Agents` (required: one `### Role` per role, with
//!   `- **Personality**: ...` and `- **Responsibilities**:` followed by a nested list, or by the one
//!   responsibility on the same line; other items are ignored), `Workflow` (required: numbered items
//!   `1. **PHASE**: description`), `Communication Protocol` (required: items `TYPE: description`,
//!   `**TYPE**: description` or `` `TYPE`: description ``), `Success Criteria` and `Error Handling`
//!   (optional: their list items). Labels may be written bold, as code, or plain.
//! - **Names**: phases and message types are `[A-Z][A-Z0-9_]*` (at most 64 characters), message
//!   types unique; role names are 1 to 64 letters, digits, spaces, `-` or `_`, unique ignoring case.
//! - **Patterns** (what [`parse`] requires of the roles and the protocol, and how a runner reads
//!   them):
//!   - `solo`: exactly 1 role.
//!   - `mirror`: exactly 2 roles, working the same input independently; the protocol has `RESULTS`,
//!     `CONSENSUS`, `DISCREPANCY` and `ESCALATE`.
//!   - `relay`: at least 2 roles; the handoff order is the order of the roles (each one's output is
//!     the next one's input); the protocol has `HANDOFF`.
//!   - `pyramid`: at least 2 roles, the first the lead and every other a worker; the protocol has
//!     `SUBTASK` and `RESULTS`.
//!   - `swarm`: at least 1 role; `workers` agents of the first role each work one partition of the
//!     input (three when absent); a second role, when there is one, aggregates their
//!     results; the protocol has `RESULTS`.
//!   - `circle`: at least 2 roles (one member each), `rounds` rounds of proposals and votes
//!     (three when absent); the protocol has `PROPOSAL` and `VOTE`. The quorum rule is
//!     [`Params::winner`]: a proposal wins a round when its votes are at least `quorum` × the voters
//!     (one half when absent) **and** strictly more than any other proposal's;
//!     otherwise no proposal wins that round.
//! - **Limits**: a file of more than [`MAX_BYTES`] is refused.
//!
//! # Errors
//!
//! [`parse`] stops at a file's first error and reports it as `FILE:LINE: expected ...` (1-based
//! lines of the whole file, front matter included; a missing section is reported at the title's
//! line, a missing key at the front matter's end, a problem with the whole file at line 1).
//! [`check_dir`] and [`Catalog::load`] report every bad file (one error each); an error reading a
//! directory or a file has line 0 and is shown as `FILE: expected ...`.

mod catalog;
mod error;
mod front;
mod markdown;
mod model;
mod parse;
mod prompt;
mod sections;

pub use catalog::{Catalog, check_dir, shipped};
pub use error::Error;
pub use model::{MessageKind, Params, Pattern, Role, Skill, Stage};
pub(crate) use model::{Rules, one_each};
pub use parse::{MAX_BYTES, parse};
pub use prompt::SessionFacts;
