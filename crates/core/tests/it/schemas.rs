//! The payload schema registry: the built-in payload types accept good payloads and refuse bad ones
//! with precise paths; registration rules; checks of a message against a workflow step's `expects`.

use clutch_core::schemas::{self, Expects, Registry};
use clutch_proto::id::{self, Kind};
use clutch_proto::validate::{self, Defaults};
use clutch_proto::{Message, MessageType, Problem};
use serde_json::{Value, json};

/// Problems as `path: message` lines, the form the tables below are written in.
fn lines(problems: &[Problem]) -> Vec<String> {
    problems.iter().map(|p| format!("{}: {}", p.path, p.message)).collect()
}

fn check(registry: &Registry, payload_type: &str, payload: Value, want: &[&str]) {
    let got = lines(&registry.validate(payload_type, &payload));
    assert_eq!(got, want, "{payload_type} with {payload}");
}

const SHA: &str = "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef";

#[test]
fn builtins_accept_valid_payloads() {
    let r = Registry::with_builtins();
    let valid: &[(&str, Value)] = &[
        // The protocol's own §1.1 example payload.
        (
            "research.summary.v1",
            json!({"title": "Market analysis complete", "findings": ["..."], "citations": ["https://..."]}),
        ),
        (
            "research.summary.v1",
            json!({
                "findings": [{"text": "Prices fell 3%", "confidence": 0.8, "citations": [0]}, "Demand held"],
                "citations": [{"url": "https://example.com/r", "title": "Report"}],
                "extra": {"anything": true}
            }),
        ),
        ("research.summary.v1", json!({"findings": ["only"], "citations": []})),
        ("research.sources.v1", json!({"sources": [], "relevance_scores": {}})),
        (
            "research.sources.v1",
            json!({
                "query": "ev batteries",
                "sources": ["https://a.example", {"id": "s2", "url": "https://b.example", "title": "B"}],
                "relevance_scores": {"https://a.example": 0.9, "s2": 0}
            }),
        ),
        ("code.output.v1", json!({"files": [], "language": "rust", "tests_passed": true})),
        (
            "code.output.v1",
            json!({
                "files": [
                    {"path": "src/lib.rs", "action": "modified", "content": "fn main() {}"},
                    {"path": "big.bin", "ref": format!("artifact:sha256:{SHA}")},
                    {"path": "old.rs", "action": "deleted"}
                ],
                "language": "rust",
                "tests_passed": false,
                "summary": "wip"
            }),
        ),
        ("code.review.v1", json!({"findings": [], "severity": "low"})),
        (
            "code.review.v1",
            json!({
                "findings": ["Unbounded loop", {"text": "SQL built by hand", "path": "src/db.rs", "line": 42, "severity": "high"}],
                "severity": "high",
                "patch_ref": format!("artifact:sha256:{SHA}")
            }),
        ),
        ("code.review.v1", json!({"findings": [], "severity": "critical", "patch_ref": "https://git.example/p/1"})),
        ("review.feedback.v1", json!({"decision": "approve", "comments": "LGTM", "blocking_issues": []})),
        (
            "review.feedback.v1",
            json!({
                "decision": "request_changes",
                "comments": ["tests are missing", "naming"],
                "blocking_issues": ["no tests", {"text": "panics on empty input", "path": "src/a.rs", "line": 3}]
            }),
        ),
    ];
    for (payload_type, payload) in valid {
        check(&r, payload_type, payload.clone(), &[]);
    }
}

#[test]
fn builtins_refuse_invalid_payloads_with_precise_paths() {
    let r = Registry::with_builtins();
    check(&r, "research.summary.v1", json!({}), &["payload.citations: required", "payload.findings: required"]);
    check(
        &r,
        "research.summary.v1",
        json!({"findings": [], "citations": "https://x"}),
        &["payload.citations: must be an array", "payload.findings: must not be empty"],
    );
    check(
        &r,
        "research.summary.v1",
        json!({
            "findings": [{"confidence": 2}, "", 42, {"text": "ok", "citations": [-1, "a"]}],
            "citations": [{"title": "no url"}, {"url": 7}]
        }),
        &[
            "payload.citations[0].url: required",
            "payload.citations[1].url: must be a string",
            "payload.findings[0].confidence: must be at most 1",
            "payload.findings[0].text: required",
            "payload.findings[1]: must not be empty",
            "payload.findings[2]: must be a string or an object",
            "payload.findings[3].citations[0]: must be at least 0",
            "payload.findings[3].citations[1]: must be a whole number",
        ],
    );
    check(
        &r,
        "research.sources.v1",
        json!({"sources": [{"title": "t"}], "relevance_scores": {"a": 1.5, "b": "high", "c.d": -1}}),
        &[
            "payload.relevance_scores.a: must be at most 1",
            "payload.relevance_scores.b: must be a number",
            "payload.relevance_scores[\"c.d\"]: must be at least 0",
            "payload.sources[0].url: required",
        ],
    );
    check(
        &r,
        "research.sources.v1",
        json!({"sources": {}, "relevance_scores": []}),
        &["payload.relevance_scores: must be an object", "payload.sources: must be an array"],
    );
    check(
        &r,
        "code.output.v1",
        json!({"files": [{"content": "x"}, {"path": "a", "action": "renamed", "ref": "artifact:report"}], "language": "", "tests_passed": "yes"}),
        &[
            "payload.files[0].path: required",
            "payload.files[1].action: must be `created`, `modified` or `deleted`",
            "payload.files[1].ref: must match the pattern `^artifact:sha256:[0-9a-f]{64}$`",
            "payload.language: must not be empty",
            "payload.tests_passed: must be true or false",
        ],
    );
    check(
        &r,
        "code.output.v1",
        json!({"files": []}),
        &["payload.language: required", "payload.tests_passed: required"],
    );
    check(
        &r,
        "code.review.v1",
        json!({"findings": [{"text": "x", "line": 0, "severity": "blocker"}], "severity": "severe", "patch_ref": "ftp://x"}),
        &[
            "payload.findings[0].line: must be at least 1",
            "payload.findings[0].severity: must be `low`, `medium`, `high` or `critical`",
            "payload.patch_ref: must match the pattern `^(artifact:sha256:[0-9a-f]{64}|https?://.+)$`",
            "payload.severity: must be `low`, `medium`, `high` or `critical`",
        ],
    );
    check(&r, "code.review.v1", json!({"severity": "low"}), &["payload.findings: required"]);
    check(
        &r,
        "review.feedback.v1",
        json!({"decision": "maybe", "comments": 3, "blocking_issues": [{}]}),
        &[
            "payload.blocking_issues[0].text: required",
            "payload.comments: must be a string or an array",
            "payload.decision: must be `approve`, `request_changes` or `reject`",
        ],
    );
    check(
        &r,
        "review.feedback.v1",
        json!({"decision": "approve", "comments": ["fine", 1], "blocking_issues": ["but this"]}),
        &["payload.blocking_issues: must be empty", "payload.comments[1]: must be a string"],
    );
    check(
        &r,
        "review.feedback.v1",
        json!({"decision": "reject"}),
        &["payload.blocking_issues: required", "payload.comments: required"],
    );
    // A payload that is not an object at all (validate takes any JSON).
    check(&r, "code.review.v1", json!([1]), &["payload: must be an object"]);
}

#[test]
fn builtins_are_listed_and_found_by_ref() {
    let r = Registry::with_builtins();
    let listed: Vec<(&str, &str)> = r.list().map(|s| (s.payload_type(), s.schema_ref())).collect();
    assert_eq!(
        listed,
        [
            ("code.output.v1", "schema://clutch/code/output@1"),
            ("code.review.v1", "schema://clutch/code/review@1"),
            ("research.sources.v1", "schema://clutch/research/sources@1"),
            ("research.summary.v1", "schema://clutch/research/summary@1"),
            ("review.feedback.v1", "schema://clutch/review/feedback@1"),
        ]
    );
    for s in r.list() {
        assert!(s.is_builtin());
        assert_eq!(s.document()["$id"], s.schema_ref());
        assert_eq!(s.document()["$schema"], schemas::DIALECT);
        assert_eq!(s.document()["title"], s.payload_type());
        assert_eq!(r.by_ref(s.schema_ref()).unwrap().payload_type(), s.payload_type());
        assert_eq!(r.get(s.payload_type()).unwrap().schema_ref(), s.schema_ref());
    }
    // By ref validates the same way; unknown names are one problem.
    check(&r, "schema://clutch/research/summary@1", json!({"findings": ["x"]}), &["payload.citations: required"]);
    check(&r, "research.summary.v9", json!({}), &["payload_type: no schema is registered for `research.summary.v9`"]);
    assert!(Registry::new().list().next().is_none());
    // The daemon shares one registry between tasks.
    fn shareable<T: Send + Sync + Clone + 'static>() {}
    shareable::<Registry>();
}

#[test]
fn registration_rules() {
    let mut r = Registry::with_builtins();
    let schema = json!({"type": "object", "required": ["n"], "properties": {"n": {"type": "integer"}}});

    // A new payload type: its ref is derived, `$id` set; registering it again is a no-op.
    r.register("acme.count.v2", None, schema.clone()).unwrap();
    let s = r.get("acme.count.v2").unwrap();
    assert_eq!(s.schema_ref(), "schema://clutch/acme/count@2");
    assert_eq!(s.document()["$id"], "schema://clutch/acme/count@2");
    assert!(!s.is_builtin());
    r.register("acme.count.v2", None, schema.clone()).unwrap();
    r.register("acme.count.v2", Some("schema://clutch/acme/count@2"), schema.clone()).unwrap();
    check(&r, "acme.count.v2", json!({"n": "x"}), &["payload.n: must be a whole number"]);

    let err = |r: &mut Registry, payload_type: &str, schema_ref: Option<&str>, schema: Value| {
        let shown = schema.to_string();
        lines(&r.register(payload_type, schema_ref, schema).expect_err(&shown))
    };
    assert_eq!(
        err(&mut r, "acme.count.v2", None, json!({"type": "object"})),
        ["payload_type: `acme.count.v2` is already registered with a different schema; register a new version instead"]
    );
    assert_eq!(
        err(&mut r, "acme.other.v1", Some("schema://clutch/acme/count@2"), json!({})),
        ["schema_ref: `schema://clutch/acme/count@2` already names `acme.count.v2`"]
    );
    // Built-ins can be registered again unchanged, never replaced.
    let builtin = r.get("code.review.v1").unwrap().document().clone();
    r.register("code.review.v1", None, builtin).unwrap();
    assert_eq!(
        err(&mut r, "code.review.v1", None, json!({})),
        ["payload_type: `code.review.v1` is built in and cannot be replaced; register a new version instead"]
    );
    // A schema's own `schema://` $id is its ref; another $id, a foreign dialect and a bad ref are refused.
    r.register("acme.thing.v1", None, json!({"$id": "schema://acme/thing@1"})).unwrap();
    assert_eq!(r.by_ref("schema://acme/thing@1").unwrap().payload_type(), "acme.thing.v1");
    assert_eq!(
        err(
            &mut r,
            "Acme.x",
            Some("http://acme/x"),
            json!({"$id": "schema://other", "$schema": "http://json-schema.org/draft-07/schema#"})
        ),
        [
            "payload_type: must look like `research.summary.v1`: dotted lower-case words ending in `.v<N>`",
            "schema_ref: must start with `schema://`, e.g. schema://clutch/research/summary@1",
            "schema.$schema: must be absent or `https://json-schema.org/draft/2020-12/schema` (2020-12)",
            "schema.$id: must be absent or equal the schema ref `http://acme/x`",
        ]
    );
    assert_eq!(err(&mut r, "acme.x.v1", None, json!("string")), ["schema: must be a JSON Schema object"]);
    // Schemas that do not compile say where.
    let bad = err(&mut r, "acme.x.v1", None, json!({"properties": {"n": {"type": "strin"}}}));
    assert_eq!(bad.len(), 1, "{bad:?}");
    assert_eq!(bad[0], "schema.properties.n.type: is not a valid value for this JSON Schema (2020-12) keyword");
    let bad = err(&mut r, "acme.x.v1", None, json!({"minLength": -1}));
    assert_eq!(bad, ["schema.minLength: must be at least 0"]);
    // Nothing is fetched: references outside the schema do not resolve.
    for reference in ["https://example.com/schema.json", "file:///etc/passwd", "schema://clutch/code/review@1"] {
        let bad = err(&mut r, "acme.x.v1", None, json!({"$ref": reference}));
        assert_eq!(
            bad,
            [format!(
                "schema: `$ref` to `{reference}` does not resolve: references are followed only within the schema \
                 itself, nothing is fetched"
            )]
        );
    }
    assert_eq!(
        err(&mut r, "acme.x.v1", None, json!({"$ref": "#/$defs/missing"})),
        ["schema: `$ref` to `#/$defs/missing` does not resolve: there is nothing at `/$defs/missing` in the schema"]
    );
    assert!(r.get("acme.x.v1").is_none());
    // Formats are asserted.
    r.register("acme.when.v1", None, json!({"properties": {"at": {"type": "string", "format": "date-time"}}})).unwrap();
    check(&r, "acme.when.v1", json!({"at": "yesterday"}), &["payload.at: must be a valid `date-time`"]);
    check(&r, "acme.when.v1", json!({"at": "2026-02-01T13:20:11Z"}), &[]);
}

fn result_message(payload_type: Option<&str>, payload: Value) -> Message {
    let mut v = json!({
        "thread_id": id::generate(Kind::Thread),
        "run_id": id::generate(Kind::Run),
        "task_id": id::generate(Kind::Task),
        "from": {"agent_id": "agent:ken"},
        "to": [],
        "type": "task.result",
        "payload": payload,
    });
    if let Some(t) = payload_type {
        v["payload_type"] = json!(t);
    }
    validate::message(&v, &Defaults { now: std::time::SystemTime::now() }).unwrap()
}

#[test]
fn messages_are_checked_against_expects() {
    let r = Registry::with_builtins();
    let expects = Expects {
        kind: MessageType::TaskResult,
        payload_type: Some("research.summary.v1".into()),
        required: vec!["findings".into(), "citations".into(), "title".into()],
    };
    let good = json!({"title": "t", "findings": ["x"], "citations": []});
    let check = |msg: &Message, want: &[&str]| {
        assert_eq!(lines(&schemas::check_expects(&r, &expects, msg)), want, "{}", msg.to_canonical_json());
    };

    check(&result_message(Some("research.summary.v1"), good.clone()), &[]);
    // Another phase of the step (here a progress report) is not checked.
    let mut progress = result_message(None, json!({}));
    progress.kind = MessageType::TaskProgress;
    assert!(!expects.applies_to(&progress));
    check(&progress, &[]);
    // Each missing required member once, even when the schema requires it too; schema problems too.
    check(
        &result_message(Some("research.summary.v1"), json!({"findings": [1], "citations": null})),
        &[
            "payload.citations: required by this workflow step",
            "payload.title: required by this workflow step",
            "payload.findings[0]: must be a string or an object",
        ],
    );
    // No payload type: said, and the payload is still held to the expected schema.
    check(
        &result_message(None, json!({"title": "t", "findings": [], "citations": []})),
        &["payload_type: required: this step expects `research.summary.v1`", "payload.findings: must not be empty"],
    );
    // Another payload type: said once, without the schema's complaints about a payload of another shape.
    check(
        &result_message(Some("code.review.v1"), json!({"title": "t", "findings": [], "citations": []})),
        &["payload_type: must be `research.summary.v1` (this step expects it), not `code.review.v1`"],
    );
    // A schema_ref that names another schema.
    let mut other_ref = result_message(Some("research.summary.v1"), good.clone());
    other_ref.schema_ref = Some("schema://clutch/code/review@1".into());
    check(
        &other_ref,
        &[
            "schema_ref: must be `schema://clutch/research/summary@1` for `research.summary.v1`, not `schema://clutch/code/review@1`",
        ],
    );

    // Only required members, no payload type.
    let loose = Expects { kind: MessageType::TaskResult, payload_type: None, required: vec!["answer".into()] };
    let msg = result_message(Some("code.review.v1"), json!({}));
    assert_eq!(lines(&schemas::check_expects(&r, &loose, &msg)), ["payload.answer: required by this workflow step"]);
    // An expected payload type the registry does not know is a problem, not a silent pass.
    let unknown = Expects { kind: MessageType::TaskResult, payload_type: Some("acme.x.v1".into()), required: vec![] };
    let msg = result_message(Some("acme.x.v1"), json!({}));
    assert_eq!(
        lines(&schemas::check_expects(&r, &unknown, &msg)),
        ["payload_type: no schema is registered for `acme.x.v1`"]
    );
}
