//! `workflows.yaml`: workflows and their steps, what each step expects of its result (§3.4), and
//! payload schemas beyond the built-in ones. Raw YAML types with locations, checked into the public
//! types.

use std::collections::{BTreeMap, BTreeSet};

use clutch_proto::{MessageType, id};
use serde::Deserialize;
use serde_json::Value;
use serde_saphyr::Spanned;

use super::yaml::{Entries, Report};
use crate::schemas::{Expects, Registry};

/// Everything `workflows.yaml` says. Without the file: no workflows, the built-in schemas.
#[derive(Debug, Clone)]
pub struct Workflows {
    /// Workflows by name.
    pub workflows: BTreeMap<String, Workflow>,
    /// The built-in payload schemas and those the file's `schemas:` adds.
    pub schemas: Registry,
}

impl Default for Workflows {
    fn default() -> Self {
        Workflows { workflows: BTreeMap::new(), schemas: Registry::with_builtins() }
    }
}

#[derive(Debug, Clone, PartialEq)]
pub struct Workflow {
    pub name: String,
    pub description: Option<String>,
    /// In file order.
    pub steps: Vec<Step>,
}

#[derive(Debug, Clone, PartialEq)]
pub struct Step {
    pub id: String,
    /// Default `requires` for the tasks of this step, e.g. `skill:research@^1.2`.
    pub requires: Vec<String>,
    /// What the message completing the step must satisfy; see [`crate::schemas::check_expects`].
    pub expects: Option<Expects>,
}

// ---- the YAML as written ----

#[derive(Deserialize, Default)]
#[serde(deny_unknown_fields)]
pub(super) struct RawWorkflows {
    #[serde(default)]
    schemas: Option<Entries<RawSchema>>,
    #[serde(default)]
    workflows: Option<Vec<RawWorkflow>>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawSchema {
    schema_ref: Option<Spanned<String>>,
    schema: Spanned<Value>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawWorkflow {
    workflow: Spanned<String>,
    description: Option<String>,
    steps: Option<Vec<RawStep>>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawStep {
    id: Spanned<String>,
    requires: Option<Vec<Spanned<String>>>,
    expects: Option<RawExpects>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawExpects {
    #[serde(rename = "type")]
    kind: Spanned<String>,
    payload_type: Option<Spanned<String>>,
    required: Option<Vec<Spanned<String>>>,
}

// ---- checks ----

/// Registers the file's schemas, then checks the workflows against them, recording every error.
pub(super) fn check(raw: RawWorkflows, report: &mut Report<'_>) -> Workflows {
    let mut out = Workflows::default();

    for (payload_type, schema) in raw.schemas.unwrap_or_default().0 {
        let path = format!("schemas.{}", payload_type.value);
        let schema_ref = schema.schema_ref.as_ref().map(|r| r.value.as_str());
        if let Err(problems) = out.schemas.register(&payload_type.value, schema_ref, schema.schema.value.clone()) {
            for p in problems {
                let (at, field) = match p.path.as_str() {
                    "payload_type" => (payload_type.referenced, path.clone()),
                    "schema_ref" => (
                        schema.schema_ref.as_ref().map_or(payload_type.referenced, |r| r.referenced),
                        format!("{path}.schema_ref"),
                    ),
                    other => (schema.schema.referenced, format!("{path}.{other}")),
                };
                report.at(&at, field, p.message);
            }
        }
    }

    for (i, raw) in raw.workflows.unwrap_or_default().into_iter().enumerate() {
        let path = format!("workflows[{i}]");
        let name = &raw.workflow;
        if let Err(e) = id::check_name(&name.value) {
            report.at(&name.referenced, format!("{path}.workflow"), format!("not a valid workflow name: {e}"));
        } else if out.workflows.contains_key(&name.value) {
            report.at(
                &name.referenced,
                format!("{path}.workflow"),
                format!("`{}` names another workflow too", name.value),
            );
        }
        let raw_steps = raw.steps.unwrap_or_default();
        if raw_steps.is_empty() {
            report.at(&name.referenced, format!("{path}.steps"), "a workflow needs at least one step");
        }
        let mut ids = BTreeSet::new();
        let steps = raw_steps
            .into_iter()
            .enumerate()
            .map(|(j, s)| step(s, &format!("{path}.steps[{j}]"), &mut ids, &out.schemas, report))
            .collect();
        out.workflows.entry(name.value.clone()).or_insert(Workflow {
            name: name.value.clone(),
            description: raw.description,
            steps,
        });
    }
    out
}

fn step(raw: RawStep, path: &str, ids: &mut BTreeSet<String>, schemas: &Registry, report: &mut Report<'_>) -> Step {
    if let Err(e) = id::check_name(&raw.id.value) {
        report.at(&raw.id.referenced, format!("{path}.id"), format!("not a valid step id: {e}"));
    } else if !ids.insert(raw.id.value.clone()) {
        report.at(
            &raw.id.referenced,
            format!("{path}.id"),
            format!("`{}` names another step of this workflow", raw.id.value),
        );
    }
    let requires = raw
        .requires
        .unwrap_or_default()
        .into_iter()
        .enumerate()
        .map(|(k, r)| {
            if let Err(e) = id::check_capability(&r.value, &[]) {
                report.at(&r.referenced, format!("{path}.requires[{k}]"), e);
            }
            r.value
        })
        .collect();
    let expects = raw.expects.and_then(|e| expects(e, &format!("{path}.expects"), schemas, report));
    Step { id: raw.id.value, requires, expects }
}

fn expects(raw: RawExpects, path: &str, schemas: &Registry, report: &mut Report<'_>) -> Option<Expects> {
    let kind = match raw.kind.value.parse::<MessageType>() {
        Ok(kind) => Some(kind),
        Err(e) => {
            let all: Vec<&str> = MessageType::ALL.iter().map(|t| t.as_str()).collect();
            report.at(&raw.kind.referenced, format!("{path}.type"), format!("{e}; expected one of {}", all.join(", ")));
            None
        }
    };
    if let Some(pt) = &raw.payload_type
        && schemas.get(&pt.value).is_none()
    {
        let known: Vec<&str> = schemas.list().map(|s| s.payload_type()).collect();
        report.at(
            &pt.referenced,
            format!("{path}.payload_type"),
            format!(
                "no schema is registered for `{}` (known: {}); add it under `schemas:`",
                pt.value,
                known.join(", ")
            ),
        );
    }
    let required = raw
        .required
        .unwrap_or_default()
        .into_iter()
        .enumerate()
        .map(|(k, f)| {
            if f.value.is_empty() {
                report.at(&f.referenced, format!("{path}.required[{k}]"), "must name a payload member");
            }
            f.value
        })
        .collect();
    Some(Expects { kind: kind?, payload_type: raw.payload_type.map(|p| p.value), required })
}
