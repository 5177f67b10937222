//! The policy files (`org.yaml`, `workflows.yaml`) as the binary sees them: loaded before `serve`
//! opens anything, and checked and summarized by `clutch config check`.

use std::path::Path;

use clutch_core::config::{ORG_FILE, Policy, SignaturePolicy, WORKFLOWS_FILE};

/// Loads the policy directory. Every error is on its own line of the returned error, after a line
/// saying how many there are.
pub fn load(dir: &Path) -> anyhow::Result<Policy> {
    Policy::load(dir).map_err(|errors| {
        let n = errors.as_slice().len();
        anyhow::anyhow!(
            "{} in the policy files in {}:\n{errors}",
            if n == 1 { "1 error".to_owned() } else { format!("{n} errors") },
            dir.display()
        )
    })
}

/// `clutch config check`: loads `dir` and prints one summary line per file on stderr.
pub fn check(dir: &Path) -> anyhow::Result<()> {
    let policy = load(dir)?;
    for line in summary(dir, &policy) {
        eprintln!("{line}");
    }
    Ok(())
}

/// One line per file: what it configures, or that it is absent.
pub fn summary(dir: &Path, policy: &Policy) -> [String; 2] {
    let org_file = dir.join(ORG_FILE);
    let org = &policy.org;
    let org_line = if org_file.is_file() {
        let signers = org.agents.keys().filter(|id| policy.requires_signature(id)).count();
        let signatures = match org.signatures {
            SignaturePolicy::All => "every agent must sign".to_owned(),
            SignaturePolicy::None => format!("{signers} must sign"),
        };
        format!(
            "{}: {}, {} ({signatures}), {}",
            org_file.display(),
            count(org.roles.len(), "role"),
            count(org.agents.len(), "agent"),
            count(org.tokens.len(), "token"),
        )
    } else {
        format!("{}: absent (no roles, agents or tokens)", org_file.display())
    };
    let workflows_file = dir.join(WORKFLOWS_FILE);
    let workflows = &policy.workflows;
    let schemas = workflows.schemas.list().count();
    let workflows_line = if workflows_file.is_file() {
        let own = workflows.schemas.list().filter(|s| !s.is_builtin()).count();
        format!(
            "{}: {}, {}, {} of its own ({schemas} in all)",
            workflows_file.display(),
            count(workflows.workflows.len(), "workflow"),
            count(workflows.workflows.values().map(|w| w.steps.len()).sum(), "step"),
            count(own, "payload schema"),
        )
    } else {
        format!("{}: absent (no workflows; the {schemas} built-in payload schemas)", workflows_file.display())
    };
    [org_line, workflows_line]
}

fn count(n: usize, what: &str) -> String {
    if n == 1 { format!("1 {what}") } else { format!("{n} {what}s") }
}
