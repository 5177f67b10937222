//! Positions: teams of agents following a collaboration pattern, each described by a SKILL.md file
//! (front matter as in Agent Skills, then the Markdown sections below). This module parses and
//! checks them, ships six, and keeps the catalog of those and the operator's own; running them is
//! not its business.
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
//! - **Front matter**: a first line `---`, then `key: value` lines (blank lines and `# comments`
//!   allowed; a value may be quoted with `"` or `'`) up to a closing `---`. Keys: `name` (the
//!   position's id, `[a-z0-9-]{1,64}`; default: the file's stem, or the directory's name for
//!   `NAME/SKILL.md`), `pattern` (required, one of [`Pattern`]), `description`, `rounds` (circle only,
//!   a whole number ≥ 1), `quorum` (circle only, a number in (0, 1]) and `workers` (swarm only, a whole
//!   number ≥ 1). Any other key, or a key given twice, is an error.
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
//!     input ([`DEFAULT_WORKERS`] when absent); a second role, when there is one, aggregates their
//!     results; the protocol has `RESULTS`.
//!   - `circle`: at least 2 roles (one member each), `rounds` rounds of proposals and votes
//!     ([`DEFAULT_ROUNDS`] when absent); the protocol has `PROPOSAL` and `VOTE`. The quorum rule is
//!     [`Params::winner`]: a proposal wins a round when its votes are at least `quorum` × the voters
//!     ([`DEFAULT_QUORUM`], one half, when absent) **and** strictly more than any other proposal's;
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

use std::collections::BTreeMap;
use std::io::Read;
use std::ops::Range;
use std::path::Path;

use pulldown_cmark::{Event, HeadingLevel, Options, Parser, Tag};
use serde::{Deserialize, Serialize};

/// The largest position file read: 256 KiB.
pub const MAX_BYTES: usize = 256 * 1024;
/// A circle's rounds when its front matter gives none.
pub const DEFAULT_ROUNDS: u32 = 3;
/// A circle's quorum when its front matter gives none: half of the voters (see [`Params::winner`]).
pub const DEFAULT_QUORUM: f64 = 0.5;
/// A swarm's workers when its front matter gives none.
pub const DEFAULT_WORKERS: u32 = 3;

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
    pub workflow: Vec<Phase>,
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
pub struct Phase {
    pub name: String,
    pub description: String,
}

/// A type of message the agents send each other: `RESULTS`, `ESCALATE`, ...
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct MessageKind {
    pub name: String,
    pub description: String,
}

/// The front matter's numbers; absent ones take the runner's defaults ([`DEFAULT_ROUNDS`],
/// [`DEFAULT_QUORUM`], [`DEFAULT_WORKERS`]).
#[derive(Debug, Clone, Copy, PartialEq, Default, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Params {
    /// Circle: the most rounds of proposals and votes.
    pub rounds: Option<u32>,
    /// Circle: the fraction of the voters a proposal needs, in (0, 1].
    pub quorum: Option<f64>,
    /// Swarm: how many agents of the first role work partitions.
    pub workers: Option<u32>,
}

/// Why a position file was refused: `FILE:LINE: expected ...` (line 0: the file or directory as a
/// whole could not be read, shown as `FILE: expected ...`).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{file}{}: expected {expected}", if *line == 0 { String::new() } else { format!(":{line}") })]
pub struct Error {
    pub file: String,
    pub line: usize,
    pub expected: String,
}

/// What a role's system prompt says about the session it works in.
#[derive(Debug, Clone, PartialEq)]
pub struct SessionFacts {
    pub session_id: String,
    /// The agent the prompt is for.
    pub agent_id: String,
    /// The other agents: (role, agent id).
    pub others: Vec<(String, String)>,
}

/// Parses one position file. `file` names it in errors; `default_name` is the name when the front
/// matter gives none (the file's stem, or its directory's name for `NAME/SKILL.md`). The skill's
/// `source` is `file`.
pub fn parse(text: &str, file: &str, default_name: &str) -> Result<Skill, Error> {
    let fail = |line: usize, expected: String| Error { file: file.to_owned(), line, expected };
    if text.len() > MAX_BYTES {
        return Err(fail(1, format!("a file of at most {} KiB, found {} bytes", MAX_BYTES / 1024, text.len())));
    }
    let lines = LineIndex::new(text);
    let front = front_matter(text).map_err(|(line, expected)| fail(line, expected))?;
    let skill = body(text, front, default_name, &lines).map_err(|(line, expected)| fail(line, expected))?;
    Ok(Skill { source: file.to_owned(), ..skill })
}

/// The six positions shipped in the binary, parsed.
pub fn shipped() -> Vec<Skill> {
    SHIPPED
        .iter()
        .map(|(name, text)| {
            let source = format!("shipped:{name}");
            // The shipped files are tested to parse (tests/it/skills.rs).
            parse(text, &source, name).unwrap_or_else(|e| panic!("a shipped position does not parse: {e}"))
        })
        .collect()
}

/// Every position file in `dir` (`DIR/NAME.md`, `DIR/NAME/SKILL.md`; hidden files and `README.md`
/// are skipped), parsed, in the order of their paths: the good ones and one error per bad file. Two
/// files naming the same position make the later one an error. Nothing shipped is included.
pub fn check_dir(dir: &Path) -> (Vec<Skill>, Vec<Error>) {
    let mut skills: Vec<Skill> = Vec::new();
    let mut errors = Vec::new();
    let files = match files(dir) {
        Ok(files) => files,
        Err(e) => {
            let error =
                Error { file: dir.display().to_string(), line: 0, expected: format!("a readable directory ({e})") };
            return (skills, vec![error]);
        }
    };
    for (path, default_name) in files {
        let file = path.display().to_string();
        let parsed = read(&path).and_then(|text| parse(&text, &file, &default_name).map_err(|e| (e.line, e.expected)));
        match parsed {
            Ok(skill) => match skills.iter().find(|s| s.name == skill.name) {
                Some(first) => errors.push(Error {
                    file,
                    line: 1,
                    expected: format!("a position name of its own: {:?} is also {}", skill.name, first.source),
                }),
                None => skills.push(skill),
            },
            Err((line, expected)) => errors.push(Error { file, line, expected }),
        }
    }
    (skills, errors)
}

/// The positions that can be run, by name: the shipped ones, overridden or added to by the
/// operator's directory.
#[derive(Debug, Clone, PartialEq)]
pub struct Catalog {
    skills: BTreeMap<String, Skill>,
}

impl Catalog {
    /// The shipped positions, then every position file in `dir` (see [`check_dir`]), which replaces
    /// a shipped one of the same name or adds one. A `dir` that does not exist adds nothing. Any bad
    /// file refuses the whole catalog, with one error per bad file.
    pub fn load(dir: Option<&Path>) -> Result<Catalog, Vec<Error>> {
        let mut skills: BTreeMap<String, Skill> = shipped().into_iter().map(|s| (s.name.clone(), s)).collect();
        if let Some(dir) = dir.filter(|dir| dir.exists()) {
            let (found, errors) = check_dir(dir);
            if !errors.is_empty() {
                return Err(errors);
            }
            skills.extend(found.into_iter().map(|s| (s.name.clone(), s)));
        }
        Ok(Catalog { skills })
    }

    pub fn get(&self, name: &str) -> Option<&Skill> {
        self.skills.get(name)
    }

    /// Every position, by name.
    pub fn list(&self) -> impl Iterator<Item = &Skill> {
        self.skills.values()
    }
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

    fn from_name(name: &str) -> Option<Pattern> {
        Pattern::ALL.into_iter().find(|p| p.as_str() == name)
    }

    /// The roles it needs: at least, and at most.
    fn roles(self) -> (usize, Option<usize>) {
        match self {
            Pattern::Solo => (1, Some(1)),
            Pattern::Mirror => (2, Some(2)),
            Pattern::Relay | Pattern::Pyramid | Pattern::Circle => (2, None),
            Pattern::Swarm => (1, None),
        }
    }

    /// The message types its protocol must have.
    fn needs(self) -> &'static [&'static str] {
        match self {
            Pattern::Solo => &[],
            Pattern::Mirror => &["RESULTS", "CONSENSUS", "DISCREPANCY", "ESCALATE"],
            Pattern::Relay => &["HANDOFF"],
            Pattern::Pyramid => &["SUBTASK", "RESULTS"],
            Pattern::Swarm => &["RESULTS"],
            Pattern::Circle => &["PROPOSAL", "VOTE"],
        }
    }
}

impl std::fmt::Display for Pattern {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

impl Params {
    pub fn rounds_or_default(&self) -> u32 {
        self.rounds.unwrap_or(DEFAULT_ROUNDS)
    }

    pub fn quorum_or_default(&self) -> f64 {
        self.quorum.unwrap_or(DEFAULT_QUORUM)
    }

    pub fn workers_or_default(&self) -> u32 {
        self.workers.unwrap_or(DEFAULT_WORKERS)
    }

    /// A circle round's winner: the index in `tally` (votes per proposal, out of `voters` voters)
    /// of the proposal whose votes are at least the quorum × `voters` and strictly more than every
    /// other proposal's; `None` when no proposal reaches the quorum or the most votes are tied.
    /// With the default quorum of 0.5: at least half the voters and no tie, so in a circle of three,
    /// two votes.
    pub fn winner(&self, tally: &[u32], voters: u32) -> Option<usize> {
        let quorum = self.quorum_or_default();
        let (best, votes) = tally.iter().copied().enumerate().max_by_key(|&(_, v)| v)?;
        let tied = tally.iter().filter(|&&v| v == votes).count() > 1;
        (voters > 0 && votes > 0 && !tied && f64::from(votes) >= quorum * f64::from(voters)).then_some(best)
    }
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
        if self.protocol.iter().any(|k| k.name == "ESCALATE") {
            out.push_str("- If you encounter an error or need human help, send an ESCALATE message\n");
        }
        Some(out)
    }
}

/// The shipped positions: (name, file).
const SHIPPED: [(&str, &str); 6] = [
    ("contemplator", include_str!("../positions/contemplator.md")),
    ("mirror", include_str!("../positions/mirror.md")),
    ("relay", include_str!("../positions/relay.md")),
    ("pyramid", include_str!("../positions/pyramid.md")),
    ("swarm", include_str!("../positions/swarm.md")),
    ("circle", include_str!("../positions/circle.md")),
];

const KEYS: [&str; 6] = ["name", "pattern", "description", "rounds", "quorum", "workers"];

/// A problem: its line and what was expected.
type Problem = (usize, String);

/// Byte offsets to 1-based line numbers.
struct LineIndex {
    starts: Vec<usize>,
}

impl LineIndex {
    fn new(text: &str) -> LineIndex {
        let starts = std::iter::once(0).chain(text.match_indices('\n').map(|(i, _)| i + 1)).collect();
        LineIndex { starts }
    }

    fn line(&self, offset: usize) -> usize {
        self.starts.partition_point(|&start| start <= offset)
    }
}

/// The front matter: its values and where the Markdown starts.
#[derive(Default)]
struct Front {
    name: Option<(String, usize)>,
    pattern: Option<Pattern>,
    description: Option<String>,
    params: Params,
    /// Where each number was given, to point at one its pattern does not use.
    param_lines: Vec<(&'static str, usize)>,
    /// The line of the closing `---` (1 when there is no front matter).
    end_line: usize,
    /// The byte offset of the Markdown after it.
    body: usize,
}

fn front_matter(text: &str) -> Result<Front, Problem> {
    // A byte-order mark (some editors write one) is not text.
    let bom = if text.starts_with('\u{feff}') { '\u{feff}'.len_utf8() } else { 0 };
    let text_after_bom = &text[bom..];
    let mut front = Front { end_line: 1, body: bom, ..Front::default() };
    let mut lines = text_after_bom.split_inclusive('\n');
    if lines.next().map(str::trim_end) != Some("---") {
        return Ok(front);
    }
    let unclosed = || (1, "a closing \"---\" line after the front matter".to_owned());
    // Checked first: without it, the Markdown would be read as keys.
    if !text_after_bom.split_inclusive('\n').skip(1).any(|line| line.trim() == "---") {
        return Err(unclosed());
    }
    let mut offset = bom + text_after_bom.find('\n').map_or(text_after_bom.len(), |i| i + 1);
    let mut seen: Vec<(&str, usize)> = Vec::new();
    for (i, raw) in lines.enumerate() {
        let line = i + 2;
        offset += raw.len();
        let entry = raw.trim();
        if entry == "---" {
            front.end_line = line;
            front.body = offset;
            return Ok(front);
        }
        if entry.is_empty() || entry.starts_with('#') {
            continue;
        }
        let Some((key, value)) = entry.split_once(':') else {
            return Err((line, format!("\"key: value\" in the front matter, found {:?}", clip(entry))));
        };
        let (key, value) = (key.trim(), unquote(value.trim()));
        let Some(&key) = KEYS.iter().find(|k| **k == key) else {
            return Err((line, format!("a front-matter key ({}), found {:?}", KEYS.join(", "), clip(key))));
        };
        if let Some((_, first)) = seen.iter().find(|(k, _)| *k == key) {
            return Err((line, format!("{key} once in the front matter (it is also at line {first})")));
        }
        seen.push((key, line));
        match key {
            "name" => front.name = Some((value.to_owned(), line)),
            "pattern" => {
                let names: Vec<&str> = Pattern::ALL.iter().map(|p| p.as_str()).collect();
                front.pattern = Some(
                    Pattern::from_name(value)
                        .ok_or_else(|| (line, format!("a pattern ({}), found {:?}", names.join(", "), clip(value))))?,
                );
            }
            "description" if value.is_empty() => return Err((line, "a text after \"description:\"".to_owned())),
            "description" => front.description = Some(value.to_owned()),
            "quorum" => {
                let quorum = value.parse::<f64>().ok().filter(|q| *q > 0.0 && *q <= 1.0).ok_or_else(|| {
                    (line, format!("quorum to be a number greater than 0 and at most 1, found {:?}", clip(value)))
                })?;
                front.params.quorum = Some(quorum);
                front.param_lines.push((key, line));
            }
            _ => {
                let n = value.parse::<u32>().ok().filter(|n| *n >= 1).ok_or_else(|| {
                    (line, format!("{key} to be a whole number of at least 1, found {:?}", clip(value)))
                })?;
                if key == "rounds" {
                    front.params.rounds = Some(n);
                } else {
                    front.params.workers = Some(n);
                }
                front.param_lines.push((key, line));
            }
        }
    }
    Err(unclosed())
}

fn unquote(value: &str) -> &str {
    for quote in ['"', '\''] {
        if let Some(inner) = value.strip_prefix(quote).and_then(|v| v.strip_suffix(quote)) {
            return inner;
        }
    }
    value
}

/// The Markdown after the front matter, checked against the format and the pattern.
fn body(text: &str, front: Front, default_name: &str, lines: &LineIndex) -> Result<Skill, Problem> {
    let (name, pattern) = identity(&front, default_name)?;
    let blocks = Reader::new(&text[front.body..], front.body, lines).blocks();
    // Where a missing title was expected: the first block, or the first line after the front matter.
    let first_line = blocks.first().map_or(if front.end_line == 1 { 1 } else { front.end_line + 1 }, |b| b.line);
    let doc = Doc::new(blocks)?;
    let Some((title, title_line)) = doc.title.clone() else {
        return Err((first_line, "a title line \"# ...\"".to_owned()));
    };
    if title.is_empty() {
        return Err((title_line, "a title after \"#\"".to_owned()));
    }
    let section =
        |key: &str, heading: &str| doc.section(key).ok_or_else(|| (title_line, format!("a \"## {heading}\" section")));

    let overview_section = section("overview", "Overview")?;
    let overview = overview(&overview_section.blocks);
    if overview.is_empty() {
        return Err((overview_section.line, "text under \"## Overview\"".to_owned()));
    }
    let agents_section = section("agents", "Agents")?;
    let agents = roles(agents_section)?;
    let workflow = workflow(section("workflow", "Workflow")?)?;
    let protocol_section = section("communication protocol", "Communication Protocol")?;
    let protocol = protocol(protocol_section)?;

    fits(pattern, &agents, agents_section.line, &protocol, protocol_section.line)?;

    let items = |key: &str| doc.section(key).map(|s| list_texts(&s.blocks)).unwrap_or_default();
    Ok(Skill {
        name,
        title,
        pattern,
        description: front.description,
        overview,
        agents,
        workflow,
        protocol,
        success_criteria: items("success criteria"),
        error_handling: items("error handling"),
        params: front.params,
        source: String::new(),
    })
}

/// The position's name and pattern, from the front matter (and the file's name), and whether the
/// numbers given are the pattern's.
fn identity(front: &Front, default_name: &str) -> Result<(String, Pattern), Problem> {
    let name = match &front.name {
        Some((name, line)) => check_name(name).map_err(|why| (*line, format!("name to be {why}, found {name:?}")))?,
        None => check_name(default_name).map_err(|why| {
            (1, format!("a \"name:\" in the front matter: the default, {default_name:?}, is not {why}"))
        })?,
    };
    let names: Vec<&str> = Pattern::ALL.iter().map(|p| p.as_str()).collect();
    let pattern = front
        .pattern
        .ok_or_else(|| (front.end_line, format!("\"pattern: ...\" in the front matter ({})", names.join(", "))))?;
    for (key, line) in &front.param_lines {
        let used_by = if *key == "workers" { Pattern::Swarm } else { Pattern::Circle };
        if pattern != used_by {
            return Err((*line, format!("{key} only with the {used_by} pattern (this position's is {pattern})")));
        }
    }
    Ok((name, pattern))
}

/// Whether the roles and the protocol are what the pattern needs.
fn fits(
    pattern: Pattern,
    agents: &[Role],
    agents_line: usize,
    protocol: &[MessageKind],
    protocol_line: usize,
) -> Result<(), Problem> {
    let roles = agents.len();
    let (least, most) = pattern.roles();
    if roles < least || most.is_some_and(|most| roles > most) {
        let wanted = match most {
            Some(most) if most == least => format!("exactly {}", count(least, "role")),
            _ => format!("at least {}", count(least, "role")),
        };
        return Err((agents_line, format!("{wanted} for the {pattern} pattern, found {roles}")));
    }
    match pattern.needs().iter().find(|need| !protocol.iter().any(|k| k.name == **need)) {
        Some(need) => {
            Err((protocol_line, format!("a \"- {need}: ...\" message type, which the {pattern} pattern needs")))
        }
        None => Ok(()),
    }
}

/// The sections this format knows, by their lowercase heading (and the key they are found by).
const SECTIONS: [(&str, &str); 7] = [
    ("overview", "overview"),
    ("agents", "agents"),
    ("workflow", "workflow"),
    ("communication protocol", "communication protocol"),
    ("protocol", "communication protocol"),
    ("success criteria", "success criteria"),
    ("error handling", "error handling"),
];

/// The document: its title and its known `##` sections.
struct Doc {
    title: Option<(String, usize)>,
    sections: Vec<(&'static str, Section)>,
}

struct Section {
    /// The heading's line.
    line: usize,
    blocks: Vec<Block>,
}

impl Doc {
    fn new(blocks: Vec<Block>) -> Result<Doc, Problem> {
        let mut doc = Doc { title: None, sections: Vec::new() };
        // The section the blocks go to: an index into `sections`, or none (before the first known
        // section, in an unknown one, after a second title).
        let mut current: Option<usize> = None;
        for block in blocks {
            match &block.kind {
                Kind::Heading(HeadingLevel::H1, text) => {
                    if doc.title.is_none() {
                        doc.title = Some((text.clone(), block.line));
                    }
                    current = None;
                }
                Kind::Heading(HeadingLevel::H2, text) => {
                    let heading = text.to_lowercase();
                    current = None;
                    if let Some((_, key)) = SECTIONS.iter().find(|(h, _)| *h == heading) {
                        if let Some((_, first)) = doc.sections.iter().find(|(k, _)| k == key) {
                            return Err((
                                block.line,
                                format!("one \"## {text}\" section (one is at line {})", first.line),
                            ));
                        }
                        doc.sections.push((key, Section { line: block.line, blocks: Vec::new() }));
                        current = Some(doc.sections.len() - 1);
                    }
                }
                _ => {
                    if let Some(i) = current {
                        doc.sections[i].1.blocks.push(block);
                    }
                }
            }
        }
        Ok(doc)
    }

    fn section(&self, key: &str) -> Option<&Section> {
        self.sections.iter().find(|(k, _)| *k == key).map(|(_, s)| s)
    }
}

/// Paragraphs, and lists as `- item` lines, joined by blank lines.
fn overview(blocks: &[Block]) -> String {
    let parts: Vec<String> = blocks
        .iter()
        .filter_map(|block| match &block.kind {
            Kind::Paragraph(spans) => Some(flatten(spans).trim().to_owned()),
            Kind::List(list) => {
                Some(list.items.iter().map(|i| format!("- {}", flatten(&i.head).trim())).collect::<Vec<_>>().join("\n"))
            }
            _ => None,
        })
        .filter(|p| !p.is_empty())
        .collect();
    parts.join("\n\n")
}

/// The text of every item of the lists among `blocks`.
fn list_texts(blocks: &[Block]) -> Vec<String> {
    lists(blocks).flat_map(|list| texts(&list.items)).collect()
}

/// The text of every item of `lists`.
fn item_texts(lists: &[List]) -> Vec<String> {
    lists.iter().flat_map(|list| texts(&list.items)).collect()
}

/// The items' own texts, the empty ones left out.
fn texts(items: &[Item]) -> impl Iterator<Item = String> + '_ {
    items.iter().map(|i| flatten(&i.head).trim().to_owned()).filter(|t| !t.is_empty())
}

fn lists<'a>(blocks: impl IntoIterator<Item = &'a Block>) -> impl Iterator<Item = &'a List> {
    blocks.into_iter().filter_map(|b| match &b.kind {
        Kind::List(list) => Some(list),
        _ => None,
    })
}

/// `## Agents`: a role per `###` heading.
fn roles(section: &Section) -> Result<Vec<Role>, Problem> {
    let mut headings: Vec<(String, usize, Vec<&Block>)> = Vec::new();
    for block in &section.blocks {
        match &block.kind {
            Kind::Heading(HeadingLevel::H3, text) => headings.push((text.clone(), block.line, Vec::new())),
            _ => {
                if let Some((.., blocks)) = headings.last_mut() {
                    blocks.push(block);
                }
            }
        }
    }
    if headings.is_empty() {
        return Err((section.line, "at least one role, \"### Name\", under \"## Agents\"".to_owned()));
    }
    let mut roles: Vec<(Role, usize)> = Vec::new();
    for (name, line, blocks) in headings {
        check_role_name(&name).map_err(|why| (line, format!("a role name of {why}, found {:?}", clip(&name))))?;
        if let Some((_, first)) = roles.iter().find(|(r, _)| same_role(&r.name, &name)) {
            return Err((line, format!("a role name of its own: {name:?} is also at line {first}")));
        }
        roles.push((role(name, line, &blocks)?, line));
    }
    Ok(roles.into_iter().map(|(role, _)| role).collect())
}

/// One `### Role`: its `**Personality**` and `**Responsibilities**` items.
fn role(name: String, line: usize, blocks: &[&Block]) -> Result<Role, Problem> {
    let items: Vec<&Item> = lists(blocks.iter().copied()).flat_map(|l| &l.items).collect();
    let labelled = |label: &str| {
        items.iter().find_map(|item| {
            let (l, rest) = labelled(&item.head)?;
            l.eq_ignore_ascii_case(label).then_some((*item, rest))
        })
    };
    let under = format!("under \"### {name}\"");
    let personality = match labelled("Personality") {
        Some((_, rest)) if !rest.is_empty() => rest,
        Some((item, _)) => return Err((item.line, format!("a text after \"- **Personality**:\" {under}"))),
        None => return Err((line, format!("\"- **Personality**: ...\" {under}"))),
    };
    let responsibilities = match labelled("Responsibilities") {
        Some((item, rest)) => {
            let nested = item_texts(&item.lists);
            match (nested.is_empty(), rest.is_empty()) {
                (false, _) => nested,
                (true, false) => vec![rest],
                (true, true) => {
                    let expected = format!("a list of responsibilities after \"- **Responsibilities**:\" {under}");
                    return Err((item.line, expected));
                }
            }
        }
        None => return Err((line, format!("\"- **Responsibilities**:\" and a list of them {under}"))),
    };
    Ok(Role { name, personality, responsibilities })
}

/// `## Workflow`: numbered `**PHASE**: description` items.
fn workflow(section: &Section) -> Result<Vec<Phase>, Problem> {
    let form = "\"1. **PHASE**: description\"";
    let mut phases = Vec::new();
    for list in lists(&section.blocks) {
        for item in &list.items {
            if !list.ordered {
                return Err((item.line, format!("a numbered item {form} under \"## Workflow\"")));
            }
            let (name, description) = labelled(&item.head)
                .ok_or_else(|| (item.line, format!("an item of the form {form} under \"## Workflow\"")))?;
            check_upper(&name).map_err(|()| {
                (item.line, format!("a phase name in UPPER_SNAKE_CASE like \"DISCOVERY\", found {:?}", clip(&name)))
            })?;
            if description.is_empty() {
                return Err((item.line, format!("a description after \"**{name}**:\"")));
            }
            phases.push(Phase { name, description });
        }
    }
    if phases.is_empty() {
        return Err((section.line, format!("at least one numbered item {form} under \"## Workflow\"")));
    }
    Ok(phases)
}

/// `## Communication Protocol`: `TYPE: description` items.
fn protocol(section: &Section) -> Result<Vec<MessageKind>, Problem> {
    let form = "\"- TYPE: description\"";
    let mut kinds: Vec<(MessageKind, usize)> = Vec::new();
    for item in lists(&section.blocks).flat_map(|l| &l.items) {
        let (name, description) = labelled(&item.head)
            .ok_or_else(|| (item.line, format!("an item of the form {form} under \"## Communication Protocol\"")))?;
        check_upper(&name).map_err(|()| {
            (item.line, format!("a message type in UPPER_SNAKE_CASE like \"RESULTS\", found {:?}", clip(&name)))
        })?;
        if let Some((_, first)) = kinds.iter().find(|(k, _)| k.name == name) {
            return Err((item.line, format!("a message type of its own: {name} is also at line {first}")));
        }
        if description.is_empty() {
            return Err((item.line, format!("a description after \"{name}:\"")));
        }
        kinds.push((MessageKind { name, description }, item.line));
    }
    if kinds.is_empty() {
        return Err((section.line, format!("at least one item {form} under \"## Communication Protocol\"")));
    }
    Ok(kinds.into_iter().map(|(k, _)| k).collect())
}

/// `**Label**: rest`, `` `Label`: rest ``, `**Label:** rest` or `Label: rest`, trimmed.
fn labelled(spans: &[Span]) -> Option<(String, String)> {
    let (label, rest) = match spans.first()? {
        Span::Strong(s) | Span::Code(s) => match s.trim().strip_suffix(':') {
            Some(label) => (label.to_owned(), flatten(&spans[1..])),
            None => match spans.get(1) {
                Some(Span::Plain(p)) => {
                    (s.clone(), p.trim_start().strip_prefix(':')?.to_owned() + &flatten(&spans[2..]))
                }
                _ => return None,
            },
        },
        Span::Plain(p) => {
            let (label, rest) = p.split_once(':')?;
            (label.to_owned(), rest.to_owned() + &flatten(&spans[1..]))
        }
    };
    let label = label.trim();
    (!label.is_empty()).then(|| (label.to_owned(), rest.trim().to_owned()))
}

fn check_name(name: &str) -> Result<String, &'static str> {
    let ok = (1..=64).contains(&name.len())
        && name.bytes().all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-');
    if ok { Ok(name.to_owned()) } else { Err("1 to 64 characters a-z, 0-9 or -") }
}

/// Role names are compared ignoring case.
fn same_role(a: &str, b: &str) -> bool {
    a.to_lowercase() == b.to_lowercase()
}

fn check_role_name(name: &str) -> Result<(), &'static str> {
    let ok = (1..=64).contains(&name.chars().count())
        && name.chars().all(|c| c.is_alphanumeric() || c == ' ' || c == '-' || c == '_');
    if ok { Ok(()) } else { Err("1 to 64 letters, digits, spaces, - or _") }
}

/// `[A-Z][A-Z0-9_]*`, at most 64 characters.
fn check_upper(name: &str) -> Result<(), ()> {
    let mut bytes = name.bytes();
    let first = bytes.next().is_some_and(|b| b.is_ascii_uppercase());
    let ok = first && name.len() <= 64 && bytes.all(|b| b.is_ascii_uppercase() || b.is_ascii_digit() || b == b'_');
    if ok { Ok(()) } else { Err(()) }
}

fn count(n: usize, what: &str) -> String {
    if n == 1 { format!("1 {what}") } else { format!("{n} {what}s") }
}

/// At most 40 characters of what was found, for an error.
fn clip(s: &str) -> String {
    match s.char_indices().nth(40) {
        Some((i, _)) => format!("{}…", &s[..i]),
        None => s.to_owned(),
    }
}

/// The position files of a directory: (path, default name), in the order of their paths.
fn files(dir: &Path) -> std::io::Result<Vec<(std::path::PathBuf, String)>> {
    let mut entries: Vec<_> = std::fs::read_dir(dir)?.collect::<Result<_, _>>()?;
    entries.sort_by_key(|e| e.file_name());
    let mut files = Vec::new();
    for entry in entries {
        let name = entry.file_name().to_string_lossy().into_owned();
        let path = entry.path();
        if name.starts_with('.') || name.eq_ignore_ascii_case("README.md") {
            continue;
        }
        if path.is_dir() {
            let skill = path.join("SKILL.md");
            if skill.is_file() {
                files.push((skill, name));
            }
        } else if let Some(stem) = name.strip_suffix(".md").filter(|_| path.is_file()) {
            files.push((path.clone(), stem.to_owned()));
        }
    }
    Ok(files)
}

/// A file's text, refused when larger than [`MAX_BYTES`] (without reading it all) or not UTF-8.
fn read(path: &Path) -> Result<String, Problem> {
    let file = std::fs::File::open(path).map_err(|e| (0, format!("a readable file ({e})")))?;
    let mut bytes = Vec::new();
    file.take(MAX_BYTES as u64 + 1).read_to_end(&mut bytes).map_err(|e| (0, format!("a readable file ({e})")))?;
    if bytes.len() > MAX_BYTES {
        return Err((1, format!("a file of at most {} KiB", MAX_BYTES / 1024)));
    }
    String::from_utf8(bytes).map_err(|e| {
        let valid = &e.as_bytes()[..e.utf8_error().valid_up_to()];
        (1 + valid.iter().filter(|&&b| b == b'\n').count(), "UTF-8 text".to_owned())
    })
}

/// A Markdown block, at its line.
struct Block {
    line: usize,
    kind: Kind,
}

enum Kind {
    Heading(HeadingLevel, String),
    Paragraph(Vec<Span>),
    List(List),
    Other,
}

struct List {
    ordered: bool,
    items: Vec<Item>,
}

/// A list item: its own text (the first paragraph and any after it, joined by a space) and its
/// nested lists.
struct Item {
    line: usize,
    head: Vec<Span>,
    lists: Vec<List>,
}

/// Inline text as far as this format cares: plain, bold or code.
#[derive(Debug, Clone, PartialEq)]
enum Span {
    Plain(String),
    Strong(String),
    Code(String),
}

/// Spans as text: bold without its markers, code with its backticks.
fn flatten(spans: &[Span]) -> String {
    spans
        .iter()
        .map(|s| match s {
            Span::Plain(t) | Span::Strong(t) => t.clone(),
            Span::Code(t) => format!("`{t}`"),
        })
        .collect()
}

fn push_plain(spans: &mut Vec<Span>, text: &str) {
    match spans.last_mut() {
        Some(Span::Plain(last)) => last.push_str(text),
        _ => spans.push(Span::Plain(text.to_owned())),
    }
}

/// pulldown-cmark's events, with their offsets in the whole file, turned into blocks.
struct Reader<'a> {
    events: std::vec::IntoIter<(Event<'a>, Range<usize>)>,
    /// Where the parsed text starts in the file.
    base: usize,
    lines: &'a LineIndex,
}

impl<'a> Reader<'a> {
    fn new(markdown: &'a str, base: usize, lines: &'a LineIndex) -> Reader<'a> {
        let events: Vec<_> = Parser::new_ext(markdown, Options::empty()).into_offset_iter().collect();
        Reader { events: events.into_iter(), base, lines }
    }

    fn line(&self, range: &Range<usize>) -> usize {
        self.lines.line(self.base + range.start)
    }

    fn blocks(&mut self) -> Vec<Block> {
        let mut blocks = Vec::new();
        while let Some((event, range)) = self.events.next() {
            let line = self.line(&range);
            let kind = match event {
                Event::Start(Tag::Heading { level, .. }) => {
                    Kind::Heading(level, flatten(&self.inline()).trim().to_owned())
                }
                Event::Start(Tag::Paragraph) => Kind::Paragraph(self.inline()),
                Event::Start(Tag::List(start)) => Kind::List(self.list(start.is_some())),
                Event::Start(_) => {
                    self.skip();
                    Kind::Other
                }
                _ => Kind::Other,
            };
            blocks.push(Block { line, kind });
        }
        blocks
    }

    /// After `Start(List)`: its items, up to its end.
    fn list(&mut self, ordered: bool) -> List {
        let mut items = Vec::new();
        while let Some((event, range)) = self.events.next() {
            match event {
                Event::Start(Tag::Item) => {
                    let line = self.line(&range);
                    items.push(self.item(line));
                }
                Event::Start(_) => self.skip(),
                Event::End(_) => break,
                _ => {}
            }
        }
        List { ordered, items }
    }

    /// After `Start(Item)`: its text and nested lists, up to its end.
    fn item(&mut self, line: usize) -> Item {
        let mut item = Item { line, head: Vec::new(), lists: Vec::new() };
        while let Some((event, _)) = self.events.next() {
            match event {
                Event::End(_) => break,
                Event::Start(Tag::Paragraph) => {
                    let spans = self.inline();
                    if !item.head.is_empty() {
                        push_plain(&mut item.head, " ");
                    }
                    for span in spans {
                        match span {
                            Span::Plain(t) => push_plain(&mut item.head, &t),
                            span => item.head.push(span),
                        }
                    }
                }
                Event::Start(Tag::List(start)) => item.lists.push(self.list(start.is_some())),
                // Text, or a block that is neither a paragraph nor a list (skipped whole).
                event => self.inline_event(event, &mut item.head),
            }
        }
        item
    }

    /// Inline events up to the end of the element they are in.
    fn inline(&mut self) -> Vec<Span> {
        let mut spans = Vec::new();
        while let Some((event, _)) = self.events.next() {
            if let Event::End(_) = event {
                break;
            }
            self.inline_event(event, &mut spans);
        }
        spans
    }

    /// Adds one inline event's text to `spans`; any other element is skipped whole.
    fn inline_event(&mut self, event: Event<'a>, spans: &mut Vec<Span>) {
        match event {
            Event::Text(t) | Event::InlineHtml(t) | Event::Html(t) | Event::InlineMath(t) => push_plain(spans, &t),
            Event::Code(t) => spans.push(Span::Code(t.into_string())),
            Event::SoftBreak | Event::HardBreak => push_plain(spans, " "),
            Event::Start(Tag::Strong) => {
                let inner = flatten(&self.inline());
                spans.push(Span::Strong(inner));
            }
            Event::Start(Tag::Emphasis | Tag::Strikethrough | Tag::Link { .. } | Tag::Superscript | Tag::Subscript) => {
                for span in self.inline() {
                    match span {
                        Span::Plain(t) => push_plain(spans, &t),
                        span => spans.push(span),
                    }
                }
            }
            Event::Start(_) => self.skip(),
            _ => {}
        }
    }

    /// After a `Start`: everything up to its matching `End`.
    fn skip(&mut self) {
        let mut depth = 1;
        for (event, _) in self.events.by_ref() {
            match event {
                Event::Start(_) => depth += 1,
                Event::End(_) => depth -= 1,
                _ => {}
            }
            if depth == 0 {
                break;
            }
        }
    }
}
