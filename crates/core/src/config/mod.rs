//! The policy configuration, loaded from a directory: who the agents are and what they may do
//! (`org.yaml`), and which workflows hold results to which contracts (`workflows.yaml`). Both files
//! are optional; with neither, everything is empty (no tokens, no signatures required, the built-in
//! payload schemas). Every error names the file, line, column and field path; all errors are
//! reported at once where YAML allows it (a structural error ends that file's parse).
//!
//! The files are read with `serde-saphyr` into raw types that keep locations (`yaml`), then checked into
//! plain types ([`Policy`], `Org`, `Workflows`) whose accessors answer the daemon's questions.

mod org;
mod workflows;
pub mod yaml;

use std::fmt;
use std::path::{Path, PathBuf};

use clutch_proto::sign::PublicKey;
use sha2::{Digest, Sha256};
use subtle::ConstantTimeEq;

pub use org::{Agent, Budget, Budgets, Key, OnExceed, Org, Role, SignaturePolicy, Token};
pub use workflows::{Step, Workflow, Workflows};

use crate::schemas::Registry;

/// The file of roles, agents, tokens, signatures and budgets.
pub const ORG_FILE: &str = "org.yaml";
/// The file of workflows and payload schemas.
pub const WORKFLOWS_FILE: &str = "workflows.yaml";

/// The whole policy configuration.
#[derive(Debug, Clone, Default)]
pub struct Policy {
    pub org: Org,
    pub workflows: Workflows,
}

/// One thing wrong with the configuration: `config/org.yaml:12:7: agents.agent:ken.keys[0].public_key:
/// not 32 bytes of base64url`. `line` and `column` are 1-based; 0 when the error is about the whole
/// file (it cannot be read).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Error {
    pub file: PathBuf,
    pub line: u64,
    pub column: u64,
    /// The field, e.g. `agents.agent:ken.role`; empty for the file as a whole.
    pub path: String,
    pub message: String,
}

/// Every error found; never empty. Displays one error per line.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Errors(Vec<Error>);

impl Policy {
    /// Loads `org.yaml` and `workflows.yaml` from `dir`; either may be absent. `dir` itself must be a
    /// directory.
    pub fn load(dir: &Path) -> Result<Policy, Errors> {
        if !dir.is_dir() {
            let message =
                if dir.exists() { "is not a directory" } else { "does not exist (expected a directory of YAML files)" };
            return Err(Errors(vec![Error::whole(dir, message)]));
        }
        let mut errors = Vec::new();
        let org_file = dir.join(ORG_FILE);
        let org = read(&org_file, &mut errors)
            .and_then(|text| parse(&org_file, &text, org::check, &mut errors))
            .unwrap_or_default();
        let workflows_file = dir.join(WORKFLOWS_FILE);
        let workflows = read(&workflows_file, &mut errors)
            .and_then(|text| parse(&workflows_file, &text, workflows::check, &mut errors))
            .unwrap_or_default();
        if errors.is_empty() { Ok(Policy { org, workflows }) } else { Err(Errors(errors)) }
    }

    /// A configured agent.
    pub fn agent(&self, agent_id: &str) -> Option<&Agent> {
        self.org.agents.get(agent_id)
    }

    /// The card an agent registers, as org.yaml completes and bounds it: the declared capabilities
    /// when the card names none, the declared limits over the card's measure by measure (the
    /// operator's word wins, as for budgets), and the declared display name when the card has none.
    pub fn declared(&self, mut card: clutch_proto::AgentCard) -> clutch_proto::AgentCard {
        let Some(agent) = self.agent(&card.agent_id) else { return card };
        if card.capabilities.is_empty() {
            card.capabilities = agent.capabilities.clone();
        }
        if let Some(declared) = &agent.limits {
            let limits =
                card.limits.get_or_insert(clutch_proto::card::Limits { max_concurrency: None, max_runtime_sec: None });
            limits.max_concurrency = declared.max_concurrency.or(limits.max_concurrency);
            limits.max_runtime_sec = declared.max_runtime_sec.or(limits.max_runtime_sec);
        }
        if card.display.is_none()
            && let Some(name) = &agent.display
        {
            card.display = Some(clutch_proto::card::Display { name: name.clone(), desc: None });
        }
        card
    }

    /// The tools `agent_id` may use: its own list, else its role's. `None` when neither sets one (or
    /// the agent is not configured).
    pub fn tool_allowlist(&self, agent_id: &str) -> Option<&[String]> {
        let agent = self.agent(agent_id)?;
        agent.tool_allowlist.as_deref().or_else(|| {
            agent.role.as_ref().and_then(|r| self.org.roles.get(r)).and_then(|r| r.tool_allowlist.as_deref())
        })
    }

    /// The budget of `agent_id`: its role's, each measure overridden by the agent's own. `None` when the
    /// agent is not configured.
    pub fn budget(&self, agent_id: &str) -> Option<Budget> {
        let agent = self.agent(agent_id)?;
        let role = agent.role.as_ref().and_then(|r| self.org.roles.get(r)).map(|r| r.budget).unwrap_or_default();
        Some(role.overridden_by(agent.budget))
    }

    /// The keys `agent_id` signs with (none when it is not configured).
    pub fn keys(&self, agent_id: &str) -> &[Key] {
        self.agent(agent_id).map_or(&[], |a| &a.keys)
    }

    /// The public key `agent_id` registered as `kid`.
    pub fn key(&self, agent_id: &str, kid: &str) -> Option<&PublicKey> {
        self.keys(agent_id).iter().find(|k| k.kid == kid).map(|k| &k.public_key)
    }

    /// Whether messages from `agent_id` must carry a valid signature: every `agent:` sender under
    /// `signatures.require: all`, and agents with `require_signature: true`. Humans (`user:`) are
    /// never asked to sign; they authenticate with tokens.
    pub fn requires_signature(&self, agent_id: &str) -> bool {
        match self.org.signatures {
            SignaturePolicy::All => agent_id.starts_with("agent:"),
            SignaturePolicy::None => self.agent(agent_id).is_some_and(|a| a.require_signature),
        }
    }

    /// Whether API requests need a token: true as soon as one is configured.
    pub fn tokens_required(&self) -> bool {
        !self.org.tokens.is_empty()
    }

    /// Who `token` (the secret a client sends) belongs to. Compares SHA-256 digests in constant time,
    /// against every configured token.
    pub fn authenticate(&self, token: &str) -> Option<crate::access::Grant> {
        let digest: [u8; 32] = Sha256::digest(token.as_bytes()).into();
        let mut found = None;
        for t in &self.org.tokens {
            if bool::from(t.sha256.ct_eq(&digest)) {
                found = Some(t);
            }
        }
        found.map(|t| crate::access::Grant { name: t.name.clone(), role: t.role, agent_id: t.agent_id.clone() })
    }

    /// A workflow by name.
    pub fn workflow(&self, name: &str) -> Option<&Workflow> {
        self.workflows.workflows.get(name)
    }

    /// A step of a workflow.
    pub fn step(&self, workflow: &str, step_id: &str) -> Option<&Step> {
        self.workflow(workflow)?.steps.iter().find(|s| s.id == step_id)
    }

    /// The payload schemas: the built-in ones and those `workflows.yaml` adds.
    pub fn schemas(&self) -> &Registry {
        &self.workflows.schemas
    }
}

impl crate::access::Tokens for Policy {
    fn authenticate(&self, token: &str) -> Option<crate::access::Grant> {
        Policy::authenticate(self, token)
    }
}

/// Reads a config file; `None` when it is absent (or unreadable, which is recorded).
fn read(file: &Path, errors: &mut Vec<Error>) -> Option<String> {
    match std::fs::read_to_string(file) {
        Ok(text) => Some(text),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => None,
        Err(e) => {
            errors.push(Error::whole(file, format!("cannot be read: {e}")));
            None
        }
    }
}

/// Parses and checks one file, recording its errors; `None` when it has any.
fn parse<Raw: for<'de> serde::Deserialize<'de>, T>(
    file: &Path,
    text: &str,
    check: fn(Raw, &mut yaml::Report<'_>) -> T,
    errors: &mut Vec<Error>,
) -> Option<T> {
    let raw = match yaml::parse::<Option<Raw>>(file, text) {
        Ok(raw) => raw,
        Err(e) => {
            errors.push(e);
            return None;
        }
    };
    let mut report = yaml::Report::new(file);
    let checked = raw.map(|raw| check(raw, &mut report));
    if report.errors.is_empty() {
        checked
    } else {
        errors.extend(report.errors);
        None
    }
}

impl Error {
    fn whole(file: &Path, message: impl Into<String>) -> Error {
        Error { file: file.to_path_buf(), line: 0, column: 0, path: String::new(), message: message.into() }
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.file.display())?;
        if self.line > 0 {
            write!(f, ":{}:{}", self.line, self.column)?;
        }
        if !self.path.is_empty() {
            write!(f, ": {}", self.path)?;
        }
        write!(f, ": {}", self.message)
    }
}

impl std::error::Error for Error {}

impl Errors {
    pub fn as_slice(&self) -> &[Error] {
        &self.0
    }

    pub fn into_vec(self) -> Vec<Error> {
        self.0
    }
}

impl fmt::Display for Errors {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (i, e) in self.0.iter().enumerate() {
            if i > 0 {
                f.write_str("\n")?;
            }
            write!(f, "{e}")?;
        }
        Ok(())
    }
}

impl std::error::Error for Errors {}
