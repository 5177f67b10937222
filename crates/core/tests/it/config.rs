//! The policy configuration: the documented example loads and answers the lead's questions; every kind
//! of mistake is reported with file:line:column, the field path and why; no files at all is empty.

use std::path::{Path, PathBuf};

use clutch_core::access::{self, Grant};
use clutch_core::config::{Budget, OnExceed, Policy, SignaturePolicy};
use clutch_proto::MessageType;

fn example_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../docs/config")
}

/// Writes the given files into a fresh directory and loads it; errors come back one per line with the
/// directory written `DIR`.
fn load(org: Option<&str>, workflows: Option<&str>) -> Result<Policy, Vec<String>> {
    let dir = tempfile::tempdir().unwrap();
    if let Some(text) = org {
        std::fs::write(dir.path().join("org.yaml"), text).unwrap();
    }
    if let Some(text) = workflows {
        std::fs::write(dir.path().join("workflows.yaml"), text).unwrap();
    }
    Policy::load(dir.path()).map_err(|e| {
        let prefix = format!("{}/", dir.path().display());
        e.to_string().lines().map(|l| l.replace(&prefix, "DIR/")).collect()
    })
}

fn org_errors(org: &str) -> Vec<String> {
    load(Some(org), None).expect_err("errors expected")
}

fn workflow_errors(workflows: &str) -> Vec<String> {
    load(None, Some(workflows)).expect_err("errors expected")
}

const KEY: &str = "XlK93Sz6r5r3-SiJNc7QhxqTExhuDXVYn_KdD8ABTEE";

#[test]
fn the_documented_example_loads() {
    let config = Policy::load(&example_dir()).unwrap_or_else(|e| panic!("{e}"));
    let org = &config.org;
    assert_eq!(org.roles.keys().collect::<Vec<_>>(), ["researcher", "reviewer"]);
    assert_eq!(org.agents.keys().collect::<Vec<_>>(), ["agent:ken", "agent:rita"]);
    assert_eq!(org.tokens.len(), 4);
    assert_eq!(org.tokens[3].role, access::Role::Approver);
    assert_eq!(org.approvals.tools, ["mcp:shell", "mcp:files/write_file"]);
    assert_eq!(org.approvals.timeout, std::time::Duration::from_secs(900));
    assert_eq!(
        org.retention.iter().map(|(k, v)| (k.as_str(), v.as_secs())).collect::<Vec<_>>(),
        [("nightly-build", 7 * 86_400)]
    );
    assert_eq!(org.signatures, SignaturePolicy::None);
    assert_eq!(org.budgets.on_exceed, OnExceed::Exclude);
    assert_eq!(
        org.budgets.run,
        Some(Budget { tokens: Some(1_000_000), cost_usd: Some(20.0), requests: Some(1000), wall_time_sec: Some(3600) })
    );

    let ken = config.agent("agent:ken").unwrap();
    assert_eq!(ken.display.as_deref(), Some("Ken"));
    assert_eq!(ken.capabilities.len(), 1);
    assert_eq!(ken.capabilities[0].id, "skill:research");
    assert_eq!(ken.capabilities[0].version.as_deref(), Some("1.2.0"));
    assert_eq!(ken.limits.as_ref().unwrap().max_concurrency, Some(2));

    // The agent's own allowlist replaces the role's; without one, the role's applies.
    assert_eq!(config.tool_allowlist("agent:ken"), Some(&["mcp:browser".to_owned()][..]));
    assert_eq!(config.tool_allowlist("agent:rita"), Some(&["mcp:files".to_owned()][..]));
    assert_eq!(config.tool_allowlist("agent:nobody"), None);

    // Budgets merge measure by measure.
    assert_eq!(
        config.budget("agent:ken"),
        Some(Budget { tokens: Some(100_000), cost_usd: Some(5.0), requests: Some(500), wall_time_sec: Some(3600) })
    );
    assert_eq!(config.budget("agent:nobody"), None);

    assert_eq!(config.keys("agent:ken").len(), 1);
    assert_eq!(config.key("agent:ken", "ken-2026").unwrap().to_string(), KEY);
    assert!(config.key("agent:ken", "other").is_none());
    assert!(config.keys("agent:nobody").is_empty());
    assert!(config.requires_signature("agent:ken"));
    assert!(!config.requires_signature("agent:rita"));
    assert!(!config.requires_signature("agent:nobody"));

    assert!(config.tokens_required());
    assert_eq!(
        config.authenticate("ops-token-change-me"),
        Some(Grant { name: "ops".into(), role: access::Role::Admin, agent_id: None })
    );
    assert_eq!(
        config.authenticate("replace with a long random secret"),
        Some(Grant { name: "ken".into(), role: access::Role::Agent, agent_id: Some("agent:ken".into()) })
    );
    assert_eq!(config.authenticate("dashboard-token-change-me").unwrap().role, access::Role::Observer);
    assert_eq!(config.authenticate("ops-token-change-m"), None);
    assert_eq!(config.authenticate(""), None);

    let workflow = config.workflow("product-research").unwrap();
    assert_eq!(workflow.steps.iter().map(|s| s.id.as_str()).collect::<Vec<_>>(), ["research", "brief", "review"]);
    let research = config.step("product-research", "research").unwrap();
    assert_eq!(research.requires, ["skill:research"]);
    let expects = research.expects.as_ref().unwrap();
    assert_eq!(expects.kind, MessageType::TaskResult);
    assert_eq!(expects.payload_type.as_deref(), Some("research.summary.v1"));
    assert_eq!(expects.required, ["findings", "citations"]);
    assert!(config.step("product-research", "nope").is_none());
    assert!(config.step("nope", "research").is_none());

    let brief = config.schemas().get("market.brief.v1").unwrap();
    assert_eq!(brief.schema_ref(), "schema://acme/market/brief@1");
    assert_eq!(config.schemas().list().count(), 6);
    // Token secrets never show in debug output.
    let debug = format!("{config:?}");
    assert!(!debug.contains("replace with") && !debug.contains("ca09ca7d"), "{debug}");
}

#[test]
fn the_readme_shows_the_examples_as_they_are() {
    let readme = std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("../../README.md")).unwrap();
    for file in ["org.yaml", "workflows.yaml"] {
        let example = std::fs::read_to_string(example_dir().join(file)).unwrap();
        assert!(
            readme.contains(&format!("```yaml\n{example}```")),
            "README.md's policy section must show docs/config/{file} verbatim"
        );
    }
}

#[test]
fn no_files_is_an_empty_config() {
    let config = load(None, None).unwrap();
    assert!(config.org.agents.is_empty() && config.org.roles.is_empty());
    assert!(!config.tokens_required());
    assert_eq!(config.authenticate("anything"), None);
    assert!(!config.requires_signature("agent:ken"));
    assert!(config.workflows.workflows.is_empty());
    assert_eq!(config.schemas().list().count(), 5, "the built-in schemas");
    // Empty files and files of comments only are empty too.
    let config = load(Some(""), Some("# nothing yet\n")).unwrap();
    assert!(config.org.agents.is_empty() && config.workflows.workflows.is_empty());
    let config = load(Some("roles:\nagents:\ntokens:\n"), Some("workflows:\n")).unwrap();
    assert!(config.org.agents.is_empty());
    assert_eq!(Policy::default().schemas().list().count(), 5);
}

#[test]
fn a_missing_directory_is_an_error() {
    let dir = tempfile::tempdir().unwrap();
    let missing = dir.path().join("nope");
    let e = Policy::load(&missing).unwrap_err().to_string();
    assert_eq!(e, format!("{}: does not exist (expected a directory of YAML files)", missing.display()));
    let file = dir.path().join("file");
    std::fs::write(&file, "").unwrap();
    assert_eq!(Policy::load(&file).unwrap_err().to_string(), format!("{}: is not a directory", file.display()));
    // A file that is there but cannot be read.
    std::fs::create_dir(dir.path().join("org.yaml")).unwrap();
    let e = Policy::load(dir.path()).unwrap_err().to_string();
    assert!(e.starts_with(&format!("{}: cannot be read: ", dir.path().join("org.yaml").display())), "{e}");
}

#[test]
fn structural_errors_name_file_line_column_and_path() {
    assert_eq!(
        org_errors("agents:\n  agent:ken:\n    keys:\n      - {kid: k, public_key: abc, extra: 1}\n"),
        ["DIR/org.yaml:4:35: agents.agent:ken.keys[0].extra: unknown field `extra`, expected one of kid, public_key"]
    );
    assert_eq!(
        org_errors("roles:\n  researcher:\n    budget: {tokens: lots}\n"),
        ["DIR/org.yaml:3:22: roles.researcher.budget.tokens: must be a whole number from 0"]
    );
    assert_eq!(
        org_errors("roles:\n  researcher:\n    tool_allowlst: [mcp:a]\n"),
        [
            "DIR/org.yaml:3:5: roles.researcher.tool_allowlst: unknown field `tool_allowlst`, expected one of tool_allowlist, budget"
        ]
    );
    assert_eq!(
        org_errors("agents:\n  agent:ken: {}\n  agent:ken: {}\n"),
        ["DIR/org.yaml:3:3: agents: duplicate mapping key `agent:ken` is not allowed here"]
    );
    assert_eq!(
        org_errors("agents: [agent:ken]\n"),
        ["DIR/org.yaml:1:9: agents: must be a mapping (`key: value` lines or `{key: value}`)"]
    );
    assert_eq!(
        org_errors("agents:\n  agent:ken:\n    budget: {cost_usd: lots}\n"),
        ["DIR/org.yaml:3:24: agents.agent:ken.budget.cost_usd: must be a number"]
    );
    assert_eq!(
        org_errors("agents:\n  agent:ken:\n    keys: [{kid: [1], public_key: x}]\n"),
        ["DIR/org.yaml:3:18: agents.agent:ken.keys[0].kid: must be a string"]
    );
    assert_eq!(
        workflow_errors("schemas:\n  a.b.v1:\n    schema: {}\n    extra: 1\n"),
        ["DIR/workflows.yaml:4:5: schemas.a.b.v1.extra: unknown field `extra`, expected one of schema_ref, schema"]
    );
    assert_eq!(org_errors("tokens:\n  - {name: a\n"), ["DIR/org.yaml:2:5: tokens: unclosed bracket '{'"]);
    assert_eq!(
        workflow_errors(
            "workflows:\n  - workflow: w\n    steps:\n      - id: s\n        expects: {payload_type: x.v1}\n"
        ),
        ["DIR/workflows.yaml:5:19: workflows[0].steps[0].expects: missing field `type`"]
    );
}

#[test]
fn org_errors_are_all_reported_with_their_place() {
    let org = format!(
        "\
roles:
  researcher:
    tool_allowlist: [mcp:browser, browser]
    budget: {{cost_usd: -1}}
  bad role: {{}}
agents:
  agent:ken:
    role: reseacher
    display: Ken
    capabilities:
      - {{id: research, version: \"1.0\"}}
    limits: {{max_concurrency: 0}}
    keys:
      - {{kid: k1, public_key: {short}}}
      - {{kid: k1, public_key: {KEY}=}}
      - {{kid: k2, public_key: {KEY}}}
  ken:
    require_signature: true
tokens:
  - {{name: ops, role: admin, sha256: xyz}}
  - {{name: ops, role: root, token: a}}
  - {{name: ken, role: agent, token: b}}
  - {{name: dash, role: observer, agent_id: agent:ken, token: c}}
  - {{name: both, role: admin, token: d, sha256: {sha}}}
  - {{name: none, role: admin}}
  - {{name: good, role: admin, token: g}}
  - {{name: twin, role: observer, token: g}}
  - {{name: bot, role: agent, agent_id: bot, token: e}}
signatures: {{require: some}}
budgets: {{on_exceed: panic}}
",
        short = &KEY[..40],
        sha = "0".repeat(64),
    );
    assert_eq!(
        org_errors(&org),
        [
            "DIR/org.yaml:29:23: signatures.require: must be none or all, not `some`",
            "DIR/org.yaml:30:22: budgets.on_exceed: must be exclude or fail_run, not `panic`",
            "DIR/org.yaml:3:35: roles.researcher.tool_allowlist[1]: must be a tool id such as `mcp:browser`, `mcp:files/read_file` or `tool:search`",
            "DIR/org.yaml:4:24: roles.researcher.budget.cost_usd: must be a number from 0",
            "DIR/org.yaml:5:3: roles.bad role: not a valid role name: ` ` is not allowed in a name (use letters, digits, `.`, `_`, `-`)",
            "DIR/org.yaml:8:11: agents.agent:ken.role: unknown role `reseacher` (roles: bad role, researcher)",
            "DIR/org.yaml:11:9: agents.agent:ken.capabilities[0].id: must start with one of skill:, tool:, mcp:",
            "DIR/org.yaml:12:13: agents.agent:ken.limits.max_concurrency: must be a whole number from 1",
            "DIR/org.yaml:14:31: agents.agent:ken.keys[0].public_key: not 32 bytes of base64url (it decodes to 30 bytes)",
            "DIR/org.yaml:15:15: agents.agent:ken.keys[1].kid: `k1` is used by another key of this agent",
            "DIR/org.yaml:15:31: agents.agent:ken.keys[1].public_key: not base64url: it has `=` padding; write base64url without padding",
            "DIR/org.yaml:17:3: agents.ken: an agent id must look like `agent:NAME`",
            "DIR/org.yaml:18:24: agents.ken.require_signature: the agent has no `keys` to sign with",
            "DIR/org.yaml:20:38: tokens[0].sha256: must be 64 hex digits (the SHA-256 of the token)",
            "DIR/org.yaml:21:12: tokens[1].name: `ops` names another token too",
            "DIR/org.yaml:21:23: tokens[1].role: must be admin, agent, approver or observer, not `root`",
            "DIR/org.yaml:22:23: tokens[2].agent_id: required: an agent token names the agent it acts as",
            "DIR/org.yaml:23:44: tokens[3].agent_id: only agent tokens name an agent; this one is `observer`",
            "DIR/org.yaml:24:49: tokens[4].sha256: give either `token` or `sha256`, not both",
            "DIR/org.yaml:25:12: tokens[5]: needs its secret: `token` (the secret itself) or `sha256` (its digest)",
            "DIR/org.yaml:27:12: tokens[7]: has the same secret as token `good`; each token needs its own",
            "DIR/org.yaml:28:40: tokens[8].agent_id: must look like `agent:NAME`",
        ]
    );
}

#[test]
fn signatures_required_for_all_need_keys_everywhere() {
    let org = format!(
        "signatures: {{require: all}}\nagents:\n  agent:ken:\n    keys: [{{kid: k, public_key: {KEY}}}]\n  agent:rita: {{}}\n"
    );
    assert_eq!(
        org_errors(&org),
        [
            "DIR/org.yaml:5:3: agents.agent:rita: has no `keys`, but `signatures.require` is `all`: the agent could not send"
        ]
    );
    let org =
        format!("signatures: {{require: all}}\nagents:\n  agent:ken:\n    keys: [{{kid: k, public_key: {KEY}}}]\n");
    let config = load(Some(&org), None).unwrap();
    assert!(config.requires_signature("agent:ken"));
    assert!(config.requires_signature("agent:unconfigured"), "all means every agent");
    assert!(!config.requires_signature("user:ada"), "humans authenticate with tokens");
}

#[test]
fn workflow_errors_are_all_reported_with_their_place() {
    let workflows = "\
schemas:
  acme.count.v1:
    schema: {type: object, properties: {n: {type: strin}}}
  Bad:
    schema: {}
  acme.ok.v1:
    schema_ref: http://acme/ok
    schema: {}
workflows:
  - workflow: w
    steps:
      - id: a
        requires: [research, skill:ok@^1]
        expects: {type: task.done, payload_type: acme.count.v1, required: ['']}
      - id: a
        expects: {type: task.result, payload_type: research.summary.v1}
  - workflow: w
    steps: []
  - workflow: bad name
    steps:
      - id: s
";
    assert_eq!(
        workflow_errors(workflows),
        [
            "DIR/workflows.yaml:3:13: schemas.acme.count.v1.schema.properties.n.type: is not a valid value for this JSON Schema (2020-12) keyword",
            "DIR/workflows.yaml:4:3: schemas.Bad: must look like `research.summary.v1`: dotted lower-case words ending in `.v<N>`",
            "DIR/workflows.yaml:7:17: schemas.acme.ok.v1.schema_ref: must start with `schema://`, e.g. schema://clutch/research/summary@1",
            "DIR/workflows.yaml:13:20: workflows[0].steps[0].requires[0]: must start with one of skill:, tool:, mcp:",
            "DIR/workflows.yaml:14:25: workflows[0].steps[0].expects.type: unknown message type `task.done`; expected one of task.request, task.accept, task.progress, task.result, task.error, task.cancel, task.timeout, chat.message, chat.system, tool.call, tool.result, tool.error, agent.register, agent.heartbeat, agent.update, routing.decision, routing.failure",
            "DIR/workflows.yaml:14:50: workflows[0].steps[0].expects.payload_type: no schema is registered for `acme.count.v1` (known: code.output.v1, code.review.v1, research.sources.v1, research.summary.v1, review.feedback.v1); add it under `schemas:`",
            "DIR/workflows.yaml:14:76: workflows[0].steps[0].expects.required[0]: must name a payload member",
            "DIR/workflows.yaml:15:13: workflows[0].steps[1].id: `a` names another step of this workflow",
            "DIR/workflows.yaml:17:15: workflows[1].workflow: `w` names another workflow too",
            "DIR/workflows.yaml:17:15: workflows[1].steps: a workflow needs at least one step",
            "DIR/workflows.yaml:19:15: workflows[2].workflow: not a valid workflow name: ` ` is not allowed in a name (use letters, digits, `.`, `_`, `-`)",
        ]
    );
}

#[test]
fn errors_in_both_files_are_reported_together() {
    let errors = load(Some("agents:\n  agent:ken: {role: x}\n"), Some("workflows: {}\n")).unwrap_err();
    assert_eq!(
        errors,
        [
            "DIR/org.yaml:2:21: agents.agent:ken.role: unknown role `x` (no roles are defined)",
            "DIR/workflows.yaml:1:12: workflows: must be a list (`- item` lines or `[item, item]`)",
        ]
    );
}

#[test]
fn roles_merge_into_agents() {
    let org = "\
roles:
  worker:
    tool_allowlist: [tool:search]
    budget: {tokens: 10, cost_usd: 1.5, requests: 3}
agents:
  agent:a: {role: worker}
  agent:b: {role: worker, budget: {cost_usd: 0, wall_time_sec: 60}, tool_allowlist: []}
  agent:c:
";
    let config = load(Some(org), None).unwrap();
    assert_eq!(config.tool_allowlist("agent:a"), Some(&["tool:search".to_owned()][..]));
    assert_eq!(config.tool_allowlist("agent:b"), Some(&[][..]), "an empty list is a list: no tools");
    assert_eq!(config.tool_allowlist("agent:c"), None, "no role, no list");
    assert_eq!(
        config.budget("agent:a"),
        Some(Budget { tokens: Some(10), cost_usd: Some(1.5), requests: Some(3), wall_time_sec: None })
    );
    assert_eq!(
        config.budget("agent:b"),
        Some(Budget { tokens: Some(10), cost_usd: Some(0.0), requests: Some(3), wall_time_sec: Some(60) })
    );
    assert!(config.budget("agent:c").unwrap().is_unlimited());
}

#[test]
fn tokens_authenticate_by_secret_or_digest() {
    let digest = "9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08"; // sha256("test")
    let org = format!(
        "tokens:\n  - {{name: plain, role: agent, agent_id: agent:ken, token: s3cret}}\n  - {{name: hashed, role: observer, sha256: {}}}\n",
        digest.to_uppercase()
    );
    let config = load(Some(&org), None).unwrap();
    assert_eq!(
        config.authenticate("s3cret"),
        Some(Grant { name: "plain".into(), role: access::Role::Agent, agent_id: Some("agent:ken".into()) })
    );
    assert_eq!(
        config.authenticate("test"),
        Some(Grant { name: "hashed".into(), role: access::Role::Observer, agent_id: None })
    );
    assert_eq!(config.authenticate("s3cret "), None);
    assert_eq!(config.authenticate(digest), None, "the digest itself is no token");
}

/// `approvals:` names tools or whole servers that wait for a person, and exempts others; a
/// destructive tool that is not read-only waits unless exempt.
#[test]
fn approvals_name_tools_and_servers() {
    let policy = load(
        Some(
            "approvals:\n  tools: [mcp:shell, mcp:files/write_file]\n  exempt: [mcp:files/edit_file]\n  timeout_sec: 60\n\
             roles:\n  w:\n    tool_allowlist: [mcp:files/read_file]\n",
        ),
        None,
    )
    .unwrap();
    let a = &policy.org.approvals;
    assert_eq!(a.timeout, std::time::Duration::from_secs(60));
    let destructive = clutch_core::view::ToolAnnotations {
        read_only: false,
        destructive: true,
        idempotent: false,
        open_world: false,
    };
    let harmless = clutch_core::view::ToolAnnotations { destructive: false, ..destructive };
    assert_eq!(a.needed("mcp:shell/run", Some(harmless)), Some("policy"), "a whole server");
    assert_eq!(a.needed("mcp:files/write_file", None), Some("policy"));
    assert_eq!(a.needed("mcp:files/edit_file", Some(destructive)), None, "exempt");
    assert_eq!(a.needed("mcp:files/move_file", Some(destructive)), Some("destructive"));
    assert_eq!(a.needed("mcp:files/read_file", Some(harmless)), None);
    assert_eq!(a.needed("mcp:files/unknown", None), None, "nothing known, nothing listed");
    let default = load(None, None).unwrap().org.approvals;
    assert_eq!(default.timeout, std::time::Duration::from_secs(900));
    assert_eq!(
        org_errors("approvals:\n  tools: [files, mcp:a/b/c]\n  timeout_sec: 0\n"),
        [
            "DIR/org.yaml:2:11: approvals.tools[0]: must be a tool id such as `mcp:browser`, `mcp:files/read_file` or `tool:search`",
            "DIR/org.yaml:2:18: approvals.tools[1]: at most one `/`: server/tool",
            "DIR/org.yaml:3:16: approvals.timeout_sec: must be 1 second to 7 days (604800)",
        ]
    );
}

/// `retention.workflows` gives workflows ages of their own, in whole days, 1 to 36500.
#[test]
fn retention_ages_are_checked() {
    let errors = org_errors("retention:\n  workflows:\n    nightly: {after_days: 0}\n    weekly: {after_days: 7}\n");
    assert_eq!(errors.len(), 1, "{errors:?}");
    assert!(errors[0].contains("retention.workflows.nightly.after_days: must be 1 to 36500 days"), "{errors:?}");
    assert!(!org_errors("retention:\n  workflows:\n    w: {after_days: 3, keep: 1}\n").is_empty());
}
