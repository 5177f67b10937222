//! Envelope validation: what a client may send, what the daemon fills in, and the problem reported
//! (path and message) for each kind of mistake.

use clutch_proto::id::{self, Kind};
use clutch_proto::validate::{self, format_ts};
use clutch_proto::{Message, MessageType};
use serde_json::{Value, json};

use crate::{artifact_ref, check, defaults, minimal, new_id, now, seed_envelope, with, without};

fn valid(input: &Value) -> Message {
    validate::message(input, &defaults()).unwrap_or_else(|p| panic!("expected valid, got {p}\n{input:#}"))
}

#[test]
fn timestamps_are_written_with_every_digit_in_place() {
    use std::time::{Duration, UNIX_EPOCH};
    let at = |ms: u64| UNIX_EPOCH + Duration::from_millis(ms);
    assert_eq!(format_ts(UNIX_EPOCH), "1970-01-01T00:00:00.000Z");
    assert_eq!(format_ts(at(946_684_799_999)), "1999-12-31T23:59:59.999Z");
    assert_eq!(format_ts(at(1_709_210_096_007)), "2024-02-29T12:34:56.007Z");
    assert_eq!(format_ts(at(253_402_300_799_999)), "9999-12-31T23:59:59.999Z");
    // Before the epoch, and in a year of fewer than four digits.
    assert_eq!(format_ts(UNIX_EPOCH - Duration::from_millis(1)), "1969-12-31T23:59:59.999Z");
    assert_eq!(format_ts(UNIX_EPOCH - Duration::from_secs(31_556_908_800)), "0970-01-01T00:00:00.000Z");
}

#[test]
fn minimal_message_is_valid_and_gets_id_ts_and_v() {
    let input = minimal();
    let msg = valid(&input);

    assert_eq!(msg.v, "clutch/0.1");
    assert_eq!(msg.v, clutch_proto::VERSION);
    assert!(msg.id.starts_with("msg_"), "{}", msg.id);
    id::check(Kind::Message, &msg.id).unwrap();
    // The id's time part is the validation time: the first 10 ULID characters are the milliseconds.
    let at_now = id::generate_at(Kind::Message, now());
    assert_eq!(msg.id[..14], at_now[..14], "id {} is not stamped with now", msg.id);
    assert_eq!(msg.ts, "2023-11-14T22:13:20.123Z");
    assert_eq!(msg.ts, format_ts(now()));
    // The filled timestamp is itself valid input.
    check(with(minimal(), json!({ "ts": msg.ts })), &[]);

    assert_eq!(msg.thread_id, input["thread_id"]);
    assert_eq!(msg.run_id, input["run_id"]);
    assert_eq!(msg.task_id, input["task_id"]);
    assert_eq!(msg.parent_task_id, None);
    assert_eq!(msg.from.agent_id, "agent:ken");
    assert!(msg.to.is_empty());
    assert_eq!(msg.kind, MessageType::TaskRequest);
    assert!(msg.payload.is_empty());
    assert_eq!(msg.attempt, 1);
    assert!(msg.requires.is_empty() && msg.prefers.is_empty() && msg.attachments.is_empty() && msg.meta.is_empty());
}

#[test]
fn each_filled_id_is_new() {
    let a = valid(&minimal());
    let b = valid(&minimal());
    assert_ne!(a.id, b.id);
}

#[test]
fn given_id_ts_and_v_are_kept() {
    let id = new_id(Kind::Message);
    let input = with(minimal(), json!({ "id": id, "ts": "2026-02-01T13:20:11+02:00", "v": "clutch/0.1" }));
    let msg = valid(&input);
    assert_eq!(msg.id, id);
    assert_eq!(msg.ts, "2026-02-01T13:20:11+02:00");
}

#[test]
fn seed_example_round_trips_to_identical_json() {
    let input = seed_envelope();
    let msg = valid(&input);

    // `parent_task_id: null` means "no parent": it is accepted and not written back.
    assert_eq!(msg.parent_task_id, None);
    let out = serde_json::to_value(&msg).unwrap();
    assert_eq!(out, without(input.clone(), &["parent_task_id"]));

    // With a parent, every field comes back exactly as sent.
    let input = with(input, json!({ "parent_task_id": new_id(Kind::Task) }));
    let msg = valid(&input);
    let out = serde_json::to_value(&msg).unwrap();
    assert_eq!(out, input);

    // Through text, through serde alone, and through validation again.
    let text = msg.to_canonical_json();
    let back: Message = serde_json::from_str(&text).unwrap();
    assert_eq!(back, msg);
    assert_eq!(back.to_canonical_json(), text);
    assert_eq!(valid(&serde_json::from_str(&text).unwrap()), msg);
}

#[test]
fn canonical_json_follows_declaration_order_and_sorts_payload_and_meta() {
    let mut input = with(minimal(), json!({ "id": new_id(Kind::Message), "ts": "2026-02-01T13:20:11.123Z" }));
    // Build the objects by hand, in reverse order, so the test does not rely on `json!`.
    let mut payload = serde_json::Map::new();
    payload.insert("zeta".into(), json!(1));
    payload.insert("alpha".into(), json!({ "y": 1, "b": 2 }));
    input["payload"] = Value::Object(payload);
    let mut meta = serde_json::Map::new();
    meta.insert("z".into(), json!(true));
    meta.insert("a".into(), json!(false));
    input["meta"] = Value::Object(meta);

    let text = valid(&input).to_canonical_json();
    let order = ["\"v\"", "\"id\"", "\"ts\"", "\"thread_id\"", "\"run_id\"", "\"task_id\"", "\"from\"", "\"to\""];
    let at: Vec<usize> =
        order.iter().map(|k| text.find(k).unwrap_or_else(|| panic!("{k} missing in {text}"))).collect();
    assert!(at.windows(2).all(|w| w[0] < w[1]), "envelope fields out of order: {text}");
    assert!(text.contains(r#""payload":{"alpha":{"b":2,"y":1},"zeta":1}"#), "{text}");
    assert!(text.contains(r#""meta":{"a":false,"z":true}"#), "{text}");
    assert!(!text.contains(' ') && !text.contains('\n'), "canonical JSON is compact: {text}");
}

#[test]
fn every_missing_required_field_is_reported_at_once() {
    let all = [
        ("thread_id", "required"),
        ("run_id", "required"),
        ("task_id", "required"),
        ("from", "required"),
        ("to", "required"),
        ("type", "required"),
        ("payload", "required"),
    ];
    check(json!({}), &all);
    // Optional fields being present, and valid, changes nothing.
    check(json!({ "v": "clutch/0.1", "meta": { "k": 1 }, "attempt": 2 }), &all);
    // Each one alone.
    for (field, _) in all {
        check(without(minimal(), &[field]), &[(field, "required")]);
    }
    // `null` is not a value for a required field.
    for field in ["thread_id", "run_id", "task_id", "type"] {
        check(with(minimal(), json!({ field: null })), &[(field, "required")]);
    }
}

#[test]
fn wrong_types_are_reported_per_field() {
    let cases: &[(&str, Value, &str, &str)] = &[
        ("v", json!(1), "v", "must be a string"),
        ("id", json!(7), "id", "must be a string"),
        ("ts", json!(true), "ts", "must be a string"),
        ("ts", json!(1_700_000_000), "ts", "must be a string"),
        ("thread_id", json!(1), "thread_id", "must be a string"),
        ("run_id", json!([]), "run_id", "must be a string"),
        ("task_id", json!({}), "task_id", "must be a string"),
        ("parent_task_id", json!(5), "parent_task_id", "must be a string or null"),
        ("trace", json!("tr_1"), "trace", "must be a JSON object"),
        ("from", json!("agent:ken"), "from", "must be an object {agent_id, role?}"),
        ("from", json!(null), "from", "must be an object"),
        ("to", json!({ "agent_id": "agent:a" }), "to", "must be an array"),
        ("to", json!("agent:a"), "to", "must be an array"),
        ("to", json!(["agent:a"]), "to[0]", "must be an object {agent_id}"),
        ("type", json!(3), "type", "must be a string"),
        ("type", json!(["task.request"]), "type", "must be a string"),
        ("domain", json!(1), "domain", "must be a string"),
        ("payload_type", json!(false), "payload_type", "must be a string"),
        ("schema_ref", json!({}), "schema_ref", "must be a string"),
        ("payload", json!([]), "payload", "must be a JSON object"),
        ("payload", json!("hello"), "payload", "must be a JSON object"),
        ("payload", json!(null), "payload", "must be a JSON object"),
        ("requires", json!("skill:research"), "requires", "must be an array"),
        ("requires", json!([1]), "requires[0]", "must be a string"),
        ("prefers", json!({}), "prefers", "must be an array"),
        ("prefers", json!([null]), "prefers[0]", "must be a string"),
        ("security", json!("ed25519"), "security", "must be a JSON object"),
        ("attachments", json!({}), "attachments", "must be an array"),
        ("attachments", json!(["artifact:sha256:00"]), "attachments[0]", "must be an object {kind, ref}"),
        ("idempotency_key", json!(42), "idempotency_key", "must be a string"),
        ("attempt", json!("1"), "attempt", "must be a whole number from 1"),
        ("attempt", json!(true), "attempt", "must be a whole number from 1"),
        ("meta", json!([]), "meta", "must be a JSON object"),
        ("meta", json!("x"), "meta", "must be a JSON object"),
    ];
    for (field, value, path, message) in cases {
        check(with(minimal(), json!({ *field: value })), &[(path, message)]);
    }
}

#[test]
fn wrong_types_in_nested_objects() {
    let trace = |t: Value| with(minimal(), json!({ "trace": t }));
    check(trace(json!({})), &[("trace.trace_id", "required")]);
    check(trace(json!({ "trace_id": 1 })), &[("trace.trace_id", "must be a string")]);
    check(
        trace(json!({ "trace_id": "t", "span_id": 2, "parent_span_id": [] })),
        &[("trace.span_id", "must be a string"), ("trace.parent_span_id", "must be a string")],
    );
    check(trace(json!({ "trace_id": "" })), &[("trace.trace_id", "1 to 128 characters")]);
    check(trace(json!({ "trace_id": "a\nb" })), &[("trace.trace_id", "without control characters")]);
    check(trace(json!({ "trace_id": "t".repeat(129) })), &[("trace.trace_id", "1 to 128")]);
    check(trace(json!({ "trace_id": "t".repeat(128), "span_id": "s", "parent_span_id": "p" })), &[]);

    let from = |f: Value| with(minimal(), json!({ "from": f }));
    check(from(json!({})), &[("from.agent_id", "required")]);
    check(from(json!({ "agent_id": 1 })), &[("from.agent_id", "must be a string")]);
    check(from(json!({ "agent_id": "agent:ken", "role": 1 })), &[("from.role", "must be a string")]);
    check(from(json!({ "agent_id": "agent:ken", "role": "" })), &[("from.role", "1 to 64 characters")]);
    check(from(json!({ "agent_id": "agent:ken", "role": "r".repeat(65) })), &[("from.role", "1 to 64")]);

    check(with(minimal(), json!({ "to": [{}] })), &[("to[0].agent_id", "required")]);
    check(with(minimal(), json!({ "to": [{ "agent_id": null }] })), &[("to[0].agent_id", "required")]);
}

#[test]
fn unknown_top_level_field_points_to_meta() {
    check(with(minimal(), json!({ "priority": "high" })), &[("priority", "unknown field (put extensions in `meta`)")]);
    // Several at once, each reported; and the same data in `meta` is fine.
    check(
        with(minimal(), json!({ "priority": 1, "Type": "x", "": 0 })),
        &[("priority", "unknown field"), ("Type", "unknown field"), ("", "unknown field")],
    );
    check(with(minimal(), json!({ "meta": { "priority": "high", "nested": { "any": [1, null] } } })), &[]);
}

#[test]
fn unknown_nested_fields_are_reported_with_their_path() {
    let cases: &[(Value, &str)] = &[
        (json!({ "from": { "agent_id": "agent:ken", "name": "Ken" } }), "from.name"),
        (json!({ "to": [{ "agent_id": "agent:a", "role": "x" }] }), "to[0].role"),
        (json!({ "trace": { "trace_id": "t", "sampled": true } }), "trace.sampled"),
        (json!({ "security": { "mode": "strict" } }), "security.mode"),
        (
            json!({ "security": { "auth": { "scheme": "ed25519", "kid": "k", "sig": "s", "alg": "x" } } }),
            "security.auth.alg",
        ),
        (json!({ "security": { "policy": { "network": "none" } } }), "security.policy.network"),
        (json!({ "attachments": [{ "kind": "url", "ref": "https://a.example", "sha": "x" }] }), "attachments[0].sha"),
    ];
    for (patch, path) in cases {
        check(with(minimal(), patch.clone()), &[(path, "unknown field")]);
    }
    // The payload is the sender's business: anything goes inside it.
    check(with(minimal(), json!({ "payload": { "anything": { "deeply": [{ "nested": null }] } } })), &[]);
}

/// `(bad value, part of the message)` for an id of `kind` that is wrong in each possible way.
fn bad_ids(kind: Kind) -> Vec<(String, String)> {
    let good = new_id(kind);
    let prefix = kind.prefix();
    let body = &good[prefix.len()..];
    let other = if kind == Kind::Run { Kind::Task } else { Kind::Run };
    vec![
        (new_id(other), format!("must start with `{prefix}`")),
        (body.to_string(), format!("must start with `{prefix}`")),
        (format!("{}{body}", prefix.to_uppercase()), format!("must start with `{prefix}`")),
        (String::new(), format!("must start with `{prefix}`")),
        (format!("{prefix}01HX"), "26-character ULID, got 4".into()),
        (format!("{prefix}{body}0"), "got 27 characters".into()),
        (prefix.to_string(), "got 0 characters".into()),
        (format!("{prefix}{}", body.to_lowercase()), "not a Crockford base-32 character".into()),
        (format!("{prefix}{}U", &body[..25]), "`U` is not a Crockford".into()),
        (format!("{prefix}{}I", &body[..25]), "`I` is not a Crockford".into()),
        (format!("{prefix}{}-", &body[..25]), "`-` is not a Crockford".into()),
        (format!("{prefix}8{}", &body[1..]), "overflows 128 bits".into()),
        (format!("{prefix}Z{}", &body[1..]), "overflows 128 bits".into()),
    ]
}

#[test]
fn bad_ids_are_reported_per_id_field() {
    for (field, kind) in [
        ("id", Kind::Message),
        ("thread_id", Kind::Thread),
        ("run_id", Kind::Run),
        ("task_id", Kind::Task),
        ("parent_task_id", Kind::Task),
    ] {
        for (bad, message) in bad_ids(kind) {
            check(with(minimal(), json!({ field: bad })), &[(field, &message)]);
        }
        // The largest value that fits is fine.
        check(with(minimal(), json!({ field: format!("{}7ZZZZZZZZZZZZZZZZZZZZZZZZZ", kind.prefix()) })), &[]);
    }
    // Several bad ids are all reported.
    check(
        with(minimal(), json!({ "thread_id": "t", "run_id": "r", "task_id": "x" })),
        &[("thread_id", "thr_"), ("run_id", "run_"), ("task_id", "task_")],
    );
}

#[test]
fn bad_senders() {
    let from = |agent_id: &str| with(minimal(), json!({ "from": { "agent_id": agent_id } }));
    for ok in ["agent:ken", "user:ada", "agent:K3n.v2_beta-1", "user:0", &format!("agent:{}", "a".repeat(128))] {
        check(from(ok), &[]);
    }
    let cases: &[(&str, &str)] = &[
        ("ken", "must start with one of agent:, user:"),
        ("", "must start with one of agent:, user:"),
        ("Agent:ken", "must start with one of agent:, user:"),
        ("agent_ken", "must start with one of agent:, user:"),
        ("group:reviewers", "must start with one of agent:, user:"),
        ("skill:research", "must start with one of agent:, user:"),
        ("agent:", "the name must have 1 to 128 characters"),
        ("user:", "the name must have 1 to 128 characters"),
        ("agent:-ken", "must start with a letter or digit"),
        ("agent:.ken", "must start with a letter or digit"),
        ("agent:ken smith", "` ` is not allowed in a name"),
        ("agent:ken/1", "`/` is not allowed"),
        ("agent:kén", "`é` is not allowed"),
        ("agent:ken:2", "`:` is not allowed"),
    ];
    for (bad, message) in cases {
        check(from(bad), &[("from.agent_id", message)]);
    }
    check(from(&format!("agent:{}", "a".repeat(129))), &[("from.agent_id", "1 to 128 characters")]);
}

#[test]
fn recipients_are_checked_one_by_one_with_their_index() {
    let to = |to: Value| with(minimal(), json!({ "to": to }));
    check(to(json!([{ "agent_id": "agent:a" }, { "agent_id": "user:b" }, { "agent_id": "group:reviewers" }])), &[]);
    check(
        to(json!([{ "agent_id": "agent:a" }, { "agent_id": "robot:b" }])),
        &[("to[1].agent_id", "must start with one of agent:, user:, group:")],
    );
    check(
        to(json!([{ "agent_id": "agent:a" }, { "agent_id": "group:" }, 7, {}])),
        &[
            ("to[1].agent_id", "1 to 128 characters"),
            ("to[2]", "must be an object {agent_id}"),
            ("to[3].agent_id", "required"),
        ],
    );
    check(to(json!([{ "agent_id": "agent:a" }, { "agent_id": "agent:b", "x": 1 }])), &[("to[1].x", "unknown field")]);
}

#[test]
fn every_message_type_is_accepted() {
    assert_eq!(MessageType::ALL.len(), 17);
    for t in MessageType::ALL {
        let payload = match t {
            MessageType::TaskError | MessageType::ToolError => {
                json!({ "code": "X", "message": "m", "retryable": false })
            }
            _ => json!({}),
        };
        let msg = valid(&with(minimal(), json!({ "type": t.as_str(), "payload": payload })));
        assert_eq!(msg.kind, *t);
        assert_eq!(t.as_str().parse::<MessageType>(), Ok(*t));
        assert_eq!(serde_json::to_value(t).unwrap(), json!(t.as_str()));
    }
}

#[test]
fn unknown_type_lists_the_allowed_ones() {
    for bad in ["task.frobnicate", "TASK.REQUEST", "task_request", "", "PLAN"] {
        let input = with(minimal(), json!({ "type": bad }));
        check(input.clone(), &[("type", &format!("unknown message type `{bad}`"))]);
        let problems = validate::message(&input, &defaults()).unwrap_err().into_vec();
        for t in MessageType::ALL {
            assert!(problems[0].message.contains(t.as_str()), "{} not listed in {:?}", t, problems[0].message);
        }
    }
    // The payload rules of a type only apply once the type is known.
    check(with(minimal(), json!({ "type": "task.err" })), &[("type", "expected one of task.request, task.accept")]);
}

#[test]
fn requires_takes_skills_tools_and_mcp_servers_with_optional_versions() {
    let requires = |items: Value| with(minimal(), json!({ "requires": items }));
    check(
        requires(json!([
            "skill:research",
            "tool:browser",
            "mcp:files",
            "skill:research@^1.2",
            "skill:research@~1.2.3",
            "tool:browser@>=1.0, <2",
            "skill:x@*",
            "skill:x@=1.0.0-beta.1"
        ])),
        &[],
    );
    check(requires(json!([])), &[]);
    let cases: &[(&str, &str)] = &[
        ("domain:fintech", "must start with one of skill:, tool:, mcp:"),
        ("tag:fast", "must start with one of skill:, tool:, mcp:"),
        ("agent:ken", "must start with one of skill:, tool:, mcp:"),
        ("research", "must start with one of skill:, tool:, mcp:"),
        ("Skill:research", "must start with one of skill:, tool:, mcp:"),
        ("skill:", "1 to 128 characters"),
        ("skill:@^1", "1 to 128 characters"),
        ("skill:re search", "` ` is not allowed"),
        ("skill:research@", "version constraint after `@`"),
        ("skill:research@latest!", "version constraint after `@`"),
        ("skill:research@1@2", "version constraint after `@`"),
        ("skill:research@^1;rm", "version constraint after `@`"),
    ];
    for (bad, message) in cases {
        check(requires(json!(["skill:ok", bad])), &[("requires[1]", message)]);
    }
    check(requires(json!(["skill:x@".to_string() + &"1".repeat(65)])), &[("requires[0]", "version constraint")]);
}

#[test]
fn prefers_also_takes_domains_and_tags() {
    let prefers = |items: Value| with(minimal(), json!({ "prefers": items }));
    check(prefers(json!(["tool:browser", "domain:fintech", "tag:fast", "skill:research@^1.2", "mcp:files"])), &[]);
    let all = "must start with one of skill:, tool:, mcp:, domain:, tag:";
    check(
        prefers(json!(["agent:ken", "group:x", "fintech", "domain:"])),
        &[("prefers[0]", all), ("prefers[1]", all), ("prefers[2]", all), ("prefers[3]", "1 to 128 characters")],
    );
    // ...which `requires` does not.
    check(with(minimal(), json!({ "requires": ["domain:fintech"] })), &[("requires[0]", "skill:, tool:, mcp:")]);
}

#[test]
fn security_auth_and_policy() {
    let security = |s: Value| with(minimal(), json!({ "security": s }));
    let auth = |scheme: &str| json!({ "auth": { "scheme": scheme, "kid": "key_01", "sig": "c2ln" } });
    check(security(auth("ed25519")), &[]);
    check(security(json!({})), &[]);
    for bad in ["rsa", "ED25519", "ed25519 ", "", "hmac-sha256"] {
        check(security(auth(bad)), &[("security.auth.scheme", "the only supported scheme is `ed25519`")]);
    }
    check(
        security(json!({ "auth": {} })),
        &[("security.auth.scheme", "required"), ("security.auth.kid", "required"), ("security.auth.sig", "required")],
    );
    check(
        security(json!({ "auth": { "scheme": 1, "kid": "", "sig": "s".repeat(513) } })),
        &[
            ("security.auth.scheme", "must be a string"),
            ("security.auth.kid", "1 to 128"),
            ("security.auth.sig", "1 to 512"),
        ],
    );
    check(security(json!({ "auth": "ed25519" })), &[("security.auth", "must be a JSON object")]);
    check(security(json!({ "policy": { "sandbox": false, "tool_allowlist": [] } })), &[]);
    check(
        security(json!({ "policy": { "sandbox": "yes", "tool_allowlist": ["mcp:files", 3] } })),
        &[
            ("security.policy.sandbox", "must be true or false"),
            ("security.policy.tool_allowlist[1]", "must be a string"),
        ],
    );
    check(
        security(json!({ "policy": { "tool_allowlist": "mcp:files" } })),
        &[("security.policy.tool_allowlist", "must be an array")],
    );
    check(security(json!({ "policy": [] })), &[("security.policy", "must be a JSON object")]);
}

#[test]
fn attachment_kinds_and_references() {
    let attach = |items: Value| with(minimal(), json!({ "attachments": items }));
    let digest = "0123456789abcdef".repeat(4);
    check(
        attach(json!([
            { "kind": "artifact_ref", "ref": artifact_ref() },
            { "kind": "url", "ref": "https://example.com/report.pdf", "name": "report.pdf",
              "media_type": "application/pdf", "size": 1234 },
            { "kind": "url", "ref": "http://localhost:8080/x", "size": 0 }
        ])),
        &[],
    );
    let one = |a: Value| attach(json!([a]));
    let cases: &[(Value, &str, &str)] = &[
        (
            json!({ "kind": "file", "ref": "x" }),
            "attachments[0].kind",
            "unknown attachment kind `file`; expected artifact_ref or url",
        ),
        (json!({ "kind": "ArtifactRef", "ref": artifact_ref() }), "attachments[0].kind", "unknown attachment kind"),
        (
            json!({ "kind": "artifact_ref", "ref": "artifact:report_456" }),
            "attachments[0].ref",
            "must be `artifact:sha256:` followed by 64 hex digits",
        ),
        (json!({ "kind": "artifact_ref", "ref": "https://example.com/a" }), "attachments[0].ref", "artifact:sha256:"),
        (
            json!({ "kind": "artifact_ref", "ref": format!("artifact:sha256:{}", digest.to_uppercase()) }),
            "attachments[0].ref",
            "64 lower-case hex digits",
        ),
        (
            json!({ "kind": "artifact_ref", "ref": format!("artifact:sha256:{}", &digest[..63]) }),
            "attachments[0].ref",
            "64 lower-case hex digits",
        ),
        (
            json!({ "kind": "artifact_ref", "ref": format!("artifact:sha256:{digest}0") }),
            "attachments[0].ref",
            "64 lower-case hex digits",
        ),
        (
            json!({ "kind": "artifact_ref", "ref": format!("artifact:sha256:{}g", &digest[..63]) }),
            "attachments[0].ref",
            "64 lower-case hex digits",
        ),
        (
            json!({ "kind": "url", "ref": "ftp://example.com/a" }),
            "attachments[0].ref",
            "must be an http:// or https:// URL",
        ),
        (json!({ "kind": "url", "ref": artifact_ref() }), "attachments[0].ref", "http:// or https://"),
        (json!({ "ref": artifact_ref() }), "attachments[0].kind", "required"),
        (json!({ "kind": "url" }), "attachments[0].ref", "required"),
        (json!({ "kind": 1, "ref": "x" }), "attachments[0].kind", "must be a string"),
        (
            json!({ "kind": "url", "ref": "https://a.example", "size": -1 }),
            "attachments[0].size",
            "whole number of bytes",
        ),
        (
            json!({ "kind": "url", "ref": "https://a.example", "size": 1.5 }),
            "attachments[0].size",
            "whole number of bytes",
        ),
        (json!({ "kind": "url", "ref": "https://a.example", "name": 1 }), "attachments[0].name", "must be a string"),
        (
            json!({ "kind": "url", "ref": "https://a.example", "media_type": [] }),
            "attachments[0].media_type",
            "must be a string",
        ),
    ];
    for (a, path, message) in cases {
        check(one(a.clone()), &[(path, message)]);
    }
    check(
        attach(json!([{ "kind": "url", "ref": "https://a.example" }, {}])),
        &[("attachments[1].kind", "required"), ("attachments[1].ref", "required")],
    );
}

#[test]
fn attempt_is_a_whole_number_from_one() {
    for ok in [1u64, 2, 7, u32::MAX as u64] {
        let msg = valid(&with(minimal(), json!({ "attempt": ok })));
        assert_eq!(msg.attempt as u64, ok);
    }
    for bad in [json!(0), json!(-1), json!(1.5), json!(1.0), json!(u32::MAX as u64 + 1), json!("2")] {
        check(with(minimal(), json!({ "attempt": bad })), &[("attempt", "must be a whole number from 1")]);
    }
}

#[test]
fn error_payloads_carry_code_message_and_retryable() {
    for t in ["task.error", "tool.error"] {
        let error = |p: Value| with(minimal(), json!({ "type": t, "payload": p }));
        check(error(json!({ "code": "TIMEOUT", "message": "took too long", "retryable": true })), &[]);
        check(error(json!({ "code": "X", "message": "m", "retryable": false, "detail": { "any": 1 } })), &[]);
        check(
            error(json!({})),
            &[
                ("payload.code", "required"),
                ("payload.message", "required"),
                ("payload.retryable", "required (true or false)"),
            ],
        );
        check(
            error(json!({ "code": 500, "message": null, "retryable": "no" })),
            &[
                ("payload.code", "must be a string"),
                ("payload.message", "required"),
                ("payload.retryable", "must be true or false"),
            ],
        );
    }
    // Other types put no rule on the payload.
    for t in ["task.result", "task.request", "chat.message", "tool.result"] {
        check(with(minimal(), json!({ "type": t, "payload": {} })), &[]);
    }
}

#[test]
fn null_optional_fields_are_absent() {
    let msg = valid(&with(
        minimal(),
        json!({ "id": null, "ts": null, "v": null, "domain": null, "trace": null, "security": null,
                "requires": null, "attempt": null, "meta": null, "idempotency_key": null }),
    ));
    assert!(msg.id.starts_with("msg_"));
    assert_eq!((msg.domain, msg.attempt, msg.requires.len()), (None, 1, 0));
}

#[test]
fn parent_task_id_may_be_null_absent_or_a_task_id() {
    let msg = valid(&with(minimal(), json!({ "parent_task_id": null })));
    assert_eq!(msg.parent_task_id, None);
    assert!(!msg.to_canonical_json().contains("parent_task_id"));

    let parent = new_id(Kind::Task);
    let msg = valid(&with(minimal(), json!({ "parent_task_id": parent })));
    assert_eq!(msg.parent_task_id.as_deref(), Some(parent.as_str()));

    check(
        with(minimal(), json!({ "parent_task_id": new_id(Kind::Run) })),
        &[("parent_task_id", "must start with `task_`")],
    );
}

#[test]
fn the_body_must_be_an_object() {
    for body in [json!(null), json!([]), json!([minimal()]), json!("msg"), json!(1), json!(true)] {
        check(body, &[("$", "a message must be a JSON object")]);
    }
}

#[test]
fn version_timestamp_and_the_other_strings() {
    let m = |patch: Value| with(minimal(), patch);
    check(
        m(json!({ "v": "clutch/0.2" })),
        &[("v", "unsupported protocol version `clutch/0.2`, expected `clutch/0.1`")],
    );
    check(m(json!({ "v": "" })), &[("v", "unsupported protocol version")]);

    for ok in ["2026-02-01T13:20:11.123Z", "2026-02-01T13:20:11Z", "2026-02-01T13:20:11.123456789+05:30"] {
        check(m(json!({ "ts": ok })), &[]);
    }
    for bad in ["yesterday", "2026-02-01", "2026-02-01T13:20:11", "2026-02-01T13:20Z", "2026-13-01T00:00:00Z", ""] {
        check(m(json!({ "ts": bad })), &[("ts", "must be an RFC 3339 timestamp with a time zone")]);
    }

    for ok in ["research", "code_review", "ops", "a", "fin-tech.v2", &"d".repeat(64)] {
        check(m(json!({ "domain": ok })), &[]);
    }
    for bad in ["Research", "", "code review", "ops/1", &"d".repeat(65)] {
        check(m(json!({ "domain": bad })), &[("domain", "must be 1-64 characters of a-z 0-9 _ . -")]);
    }

    for ok in ["research.summary.v1", "review.feedback.v12", "a.v0", "x_1.y_2.z.v3"] {
        check(m(json!({ "payload_type": ok })), &[]);
    }
    for bad in [
        "research.summary",
        "research",
        "Research.summary.v1",
        "research..v1",
        ".v1",
        "research.v",
        "research.vx",
        "v1",
    ] {
        check(m(json!({ "payload_type": bad })), &[("payload_type", "must look like `research.summary.v1`")]);
    }

    check(m(json!({ "schema_ref": "schema://clutch/research/summary@1" })), &[]);
    for bad in
        ["schema://", "http://clutch/research", "clutch/research/summary@1", &format!("schema://{}", "s".repeat(248))]
    {
        check(m(json!({ "schema_ref": bad })), &[("schema_ref", "must start with `schema://`")]);
    }

    check(m(json!({ "idempotency_key": "idem_01HX..." })), &[]);
    check(m(json!({ "idempotency_key": "k".repeat(256) })), &[]);
    for bad in [String::new(), "k".repeat(257), "a\tb".into()] {
        check(m(json!({ "idempotency_key": bad })), &[("idempotency_key", "1 to 256 characters without control")]);
    }
}

#[test]
fn many_problems_in_one_document_are_all_reported() {
    let input = json!({
        "v": "clutch/9",
        "id": "msg_1",
        "ts": "noon",
        "thread_id": 1,
        "task_id": "task_",
        "from": { "agent_id": "group:all" },
        "to": [{ "agent_id": "agent:" }],
        "type": "task.error",
        "payload": {},
        "requires": ["domain:x"],
        "attempt": 0,
        "colour": "blue"
    });
    check(
        input,
        &[
            ("v", "unsupported protocol version"),
            ("id", "26-character"),
            ("ts", "RFC 3339"),
            ("thread_id", "must be a string"),
            ("run_id", "required"),
            ("task_id", "26-character"),
            ("from.agent_id", "agent:, user:"),
            ("to[0].agent_id", "1 to 128"),
            ("payload.code", "required"),
            ("payload.message", "required"),
            ("payload.retryable", "required"),
            ("requires[0]", "skill:, tool:, mcp:"),
            ("attempt", "whole number"),
            ("colour", "unknown field"),
        ],
    );
}

#[test]
fn dedup_body_ignores_only_the_timestamp() {
    let input = with(minimal(), json!({ "id": new_id(Kind::Message) }));
    let a = valid(&with(input.clone(), json!({ "ts": "2026-02-01T13:20:11.123Z" })));
    let b = valid(&with(input.clone(), json!({ "ts": "2026-02-01T13:20:12.000Z" })));
    assert_ne!(a.to_canonical_json(), b.to_canonical_json());
    assert_eq!(a.dedup_body(), b.dedup_body());
    let c = valid(&with(input, json!({ "ts": "2026-02-01T13:20:11.123Z", "attempt": 2 })));
    assert_ne!(a.dedup_body(), c.dedup_body());
}
