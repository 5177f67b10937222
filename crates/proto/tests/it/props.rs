//! Property tests: validation never panics and never lets serde find what the checks missed; valid
//! envelopes survive serialize → validate unchanged; the canonical JSON is stable.

use clutch_proto::validate::{self, format_ts};
use clutch_proto::{Message, MessageType};
use proptest::prelude::*;
use proptest::sample::select;
use serde_json::{Map, Value, json};

use crate::{artifact_ref, defaults, minimal, seed_card, seed_envelope};

/// Field names the validators know, so generated objects often hit real rules.
const KEYS: &[&str] = &[
    "v",
    "id",
    "ts",
    "thread_id",
    "run_id",
    "task_id",
    "parent_task_id",
    "trace",
    "trace_id",
    "from",
    "agent_id",
    "role",
    "to",
    "type",
    "payload",
    "requires",
    "prefers",
    "security",
    "auth",
    "scheme",
    "policy",
    "attachments",
    "kind",
    "ref",
    "size",
    "attempt",
    "meta",
    "code",
    "message",
    "retryable",
    "capabilities",
    "limits",
    "max_concurrency",
    "endpoints",
    "url",
    "budget",
    "cost_usd",
];

/// Strings that are valid somewhere, so generated values are sometimes right.
fn interesting_string() -> impl Strategy<Value = String> {
    prop_oneof![
        select(vec![
            "clutch/0.1",
            "agent:ken",
            "user:ada",
            "group:all",
            "skill:research@^1.2",
            "domain:fintech",
            "task.error",
            "tool.error",
            "task.request",
            "ed25519",
            "artifact_ref",
            "url",
            "https://example.com",
            "2026-02-01T13:20:11.123Z",
            "schema://x",
            "research.summary.v1",
            "sandbox",
            "egress-restricted",
        ])
        .prop_map(String::from),
        Just(artifact_ref()),
        ulid()
            .prop_flat_map(|u| select(vec!["msg_", "thr_", "run_", "task_", ""]).prop_map(move |p| format!("{p}{u}"))),
        "\\PC{0,12}",
        ".{0,4}",
    ]
}

/// Any JSON number, floats included (serde_json's `float_roundtrip` makes every finite `f64` survive
/// a write and a read).
fn number() -> impl Strategy<Value = Value> {
    let float = any::<f64>().boxed();
    prop_oneof![
        any::<i64>().prop_map(Value::from),
        any::<u64>().prop_map(Value::from),
        (-3i64..5).prop_map(Value::from),
        float.prop_filter_map("finite", |f| serde_json::Number::from_f64(f).map(Value::Number)),
    ]
}

/// Any JSON value, up to a few levels deep.
fn any_json() -> impl Strategy<Value = Value> {
    json_value()
}

fn json_value() -> impl Strategy<Value = Value> {
    let leaf = prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::Bool),
        number(),
        interesting_string().prop_map(Value::String),
    ];
    leaf.prop_recursive(4, 48, 6, |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..5).prop_map(Value::Array),
            prop::collection::vec((key(), inner), 0..7).prop_map(|kv| Value::Object(kv.into_iter().collect())),
        ]
    })
}

fn key() -> impl Strategy<Value = String> {
    prop_oneof![4 => select(KEYS).prop_map(String::from), 1 => "\\PC{0,8}"]
}

/// A ULID body: 26 Crockford base-32 characters whose value fits 128 bits.
fn ulid() -> impl Strategy<Value = String> {
    "[0-7][0-9A-HJKMNP-TV-Z]{25}"
}

fn name() -> impl Strategy<Value = String> {
    "[A-Za-z0-9][A-Za-z0-9._-]{0,16}"
}

fn capability(extra: &'static [&'static str]) -> impl Strategy<Value = String> {
    let prefixes: Vec<&'static str> = ["skill:", "tool:", "mcp:"].iter().chain(extra).copied().collect();
    let constraint = prop_oneof![
        Just(String::new()),
        select(vec!["@^1.2", "@~1", "@>=1.0, <2", "@*", "@=0.3.1-beta"]).prop_map(String::from),
    ];
    (select(prefixes), name(), constraint).prop_map(|(p, n, c)| format!("{p}{n}{c}"))
}

/// Short text without control characters, at most `max` bytes long.
fn text(max: usize) -> impl Strategy<Value = String> {
    let ascii = proptest::string::string_regex(&format!("[ -~]{{1,{max}}}")).unwrap();
    let wide = proptest::string::string_regex(&format!("[ -~é☃]{{1,{}}}", max / 3)).unwrap();
    prop_oneof![ascii, wide]
}

fn payload() -> impl Strategy<Value = Map<String, Value>> {
    prop::collection::vec(("\\PC{0,8}", json_value()), 0..5).prop_map(|kv| kv.into_iter().collect())
}

fn timestamp() -> impl Strategy<Value = String> {
    prop_oneof![
        (0u64..4_102_444_800_000)
            .prop_map(|ms| format_ts(std::time::UNIX_EPOCH + std::time::Duration::from_millis(ms))),
        select(vec!["2026-02-01T13:20:11Z", "2026-02-01T13:20:11.5+05:30", "1999-12-31T23:59:59.999999-08:00"])
            .prop_map(String::from),
    ]
}

fn security() -> impl Strategy<Value = Value> {
    let auth = (text(64), text(200)).prop_map(|(kid, sig)| json!({ "scheme": "ed25519", "kid": kid, "sig": sig }));
    let policy =
        (proptest::option::of(any::<bool>()), proptest::option::of(prop::collection::vec(capability(&[]), 0..3)))
            .prop_map(|(sandbox, allow)| {
                let mut p = Map::new();
                if let Some(s) = sandbox {
                    p.insert("sandbox".into(), json!(s));
                }
                if let Some(a) = allow {
                    p.insert("tool_allowlist".into(), json!(a));
                }
                Value::Object(p)
            });
    (proptest::option::of(auth), proptest::option::of(policy)).prop_map(|(auth, policy)| {
        let mut s = Map::new();
        if let Some(a) = auth {
            s.insert("auth".into(), a);
        }
        if let Some(p) = policy {
            s.insert("policy".into(), p);
        }
        Value::Object(s)
    })
}

fn attachment() -> impl Strategy<Value = Value> {
    let reference = prop_oneof![
        "[0-9a-f]{64}".prop_map(|h| ("artifact_ref", format!("artifact:sha256:{h}"))),
        "https?://[a-z0-9.]{1,12}(/[a-z0-9._-]{0,12})?".prop_map(|u| ("url", u)),
    ];
    (
        reference,
        proptest::option::of(text(32)),
        proptest::option::of("[a-z]{1,8}/[a-z0-9.+-]{1,12}"),
        proptest::option::of(any::<u64>()),
    )
        .prop_map(|((kind, r), name, media_type, size)| {
            let mut a = Map::new();
            a.insert("kind".into(), json!(kind));
            a.insert("ref".into(), json!(r));
            if let Some(n) = name {
                a.insert("name".into(), json!(n));
            }
            if let Some(m) = media_type {
                a.insert("media_type".into(), json!(m));
            }
            if let Some(s) = size {
                a.insert("size".into(), json!(s));
            }
            Value::Object(a)
        })
}

/// A valid envelope as a client might send it: the required fields and a random choice of the
/// optional ones, each with a random valid value.
fn valid_message() -> impl Strategy<Value = Value> {
    let ids = (ulid(), ulid(), ulid(), ulid(), ulid());
    let parties = (
        select(vec!["agent:", "user:"]),
        name(),
        proptest::option::of(text(64)),
        prop::collection::vec((select(vec!["agent:", "user:", "group:"]), name()), 0..4),
    );
    let kind = (select(MessageType::ALL), payload(), any::<bool>());
    let optional_a = (
        proptest::option::of(Just("clutch/0.1")),
        proptest::option::of(any::<bool>()), // id
        proptest::option::of(timestamp()),
        proptest::option::of(proptest::option::of(any::<bool>())), // parent_task_id: absent, null or an id
        proptest::option::of((text(128), proptest::option::of(text(128)), proptest::option::of(text(128)))),
        proptest::option::of("[a-z0-9][a-z0-9_.-]{0,63}"),
        proptest::option::of("[a-z0-9_]{1,10}(\\.[a-z0-9_]{1,10}){0,3}\\.v[0-9]{1,3}"),
        proptest::option::of("schema://[a-z0-9/@._-]{1,40}"),
    );
    let optional_b = (
        proptest::option::of(prop::collection::vec(capability(&[]), 0..4)),
        proptest::option::of(prop::collection::vec(capability(&["domain:", "tag:"]), 0..4)),
        proptest::option::of(security()),
        proptest::option::of(prop::collection::vec(attachment(), 0..3)),
        proptest::option::of(text(256)),
        proptest::option::of(1u32..=u32::MAX),
        proptest::option::of(payload()),
    );
    (ids, parties, kind, optional_a, optional_b).prop_map(
        |(
            (msg, thr, run, task, parent),
            (from_prefix, from_name, role, to),
            (kind, mut payload, retryable),
            (v, id, ts, parent_task_id, trace, domain, payload_type, schema_ref),
            (requires, prefers, security, attachments, idempotency_key, attempt, meta),
        )| {
            if matches!(kind, MessageType::TaskError | MessageType::ToolError) {
                payload.insert("code".into(), json!("E_GENERATED"));
                payload.insert("message".into(), json!("generated failure"));
                payload.insert("retryable".into(), json!(retryable));
            }
            let mut from = json!({ "agent_id": format!("{from_prefix}{from_name}") });
            if let Some(r) = role {
                from["role"] = json!(r);
            }
            let to: Vec<Value> = to.into_iter().map(|(p, n)| json!({ "agent_id": format!("{p}{n}") })).collect();
            let mut m = json!({
                "thread_id": format!("thr_{thr}"),
                "run_id": format!("run_{run}"),
                "task_id": format!("task_{task}"),
                "from": from,
                "to": to,
                "type": kind.as_str(),
                "payload": payload,
            });
            let o = m.as_object_mut().unwrap();
            let mut put = |k: &str, v: Option<Value>| {
                if let Some(v) = v {
                    o.insert(k.into(), v);
                }
            };
            put("v", v.map(Value::from));
            put("id", id.map(|_| json!(format!("msg_{msg}"))));
            put("ts", ts.map(Value::from));
            put("parent_task_id", parent_task_id.map(|p| p.map_or(Value::Null, |_| json!(format!("task_{parent}")))));
            put(
                "trace",
                trace.map(|(t, s, p)| {
                    let mut tr = json!({ "trace_id": t });
                    if let Some(s) = s {
                        tr["span_id"] = json!(s);
                    }
                    if let Some(p) = p {
                        tr["parent_span_id"] = json!(p);
                    }
                    tr
                }),
            );
            put("domain", domain.map(Value::from));
            put("payload_type", payload_type.map(Value::from));
            put("schema_ref", schema_ref.map(Value::from));
            put("requires", requires.map(|r| json!(r)));
            put("prefers", prefers.map(|p| json!(p)));
            put("security", security);
            put("attachments", attachments.map(Value::Array));
            put("idempotency_key", idempotency_key.map(Value::from));
            put("attempt", attempt.map(Value::from));
            put("meta", meta.map(Value::Object));
            m
        },
    )
}

/// What the daemon stores for a valid `input`: defaults filled, `null` parent and empty lists and
/// maps dropped, `attempt` always written.
fn normalized(input: &Value, msg: &Message) -> Value {
    let mut out = input.as_object().unwrap().clone();
    out.entry("v").or_insert_with(|| json!("clutch/0.1"));
    out.entry("id").or_insert_with(|| json!(msg.id));
    out.entry("ts").or_insert_with(|| json!(format_ts(crate::now())));
    out.entry("attempt").or_insert_with(|| json!(1));
    if out.get("parent_task_id") == Some(&Value::Null) {
        out.remove("parent_task_id");
    }
    for k in ["requires", "prefers", "attachments", "meta"] {
        let empty = match out.get(k) {
            Some(Value::Array(a)) => a.is_empty(),
            Some(Value::Object(o)) => o.is_empty(),
            _ => false,
        };
        if empty {
            out.remove(k);
        }
    }
    Value::Object(out)
}

/// `base` with the value at the JSON pointer `at` replaced by `value` (the parent must exist).
fn replace(mut base: Value, at: &str, value: Value) -> Value {
    let (parent, last) = at.rsplit_once('/').unwrap();
    match base.pointer_mut(parent) {
        Some(Value::Object(o)) => {
            o.insert(last.into(), value);
        }
        Some(Value::Array(a)) => {
            let i: usize = last.parse().unwrap();
            a[i] = value;
        }
        _ => panic!("no parent at {at}"),
    }
    base
}

/// Where in the seed envelope a mutation may land.
const ENVELOPE_SPOTS: &[&str] = &[
    "/v",
    "/id",
    "/ts",
    "/thread_id",
    "/run_id",
    "/task_id",
    "/parent_task_id",
    "/trace",
    "/trace/trace_id",
    "/trace/span_id",
    "/from",
    "/from/agent_id",
    "/from/role",
    "/to",
    "/to/0",
    "/to/0/agent_id",
    "/type",
    "/domain",
    "/payload_type",
    "/schema_ref",
    "/payload",
    "/payload/code",
    "/requires",
    "/requires/0",
    "/prefers",
    "/prefers/1",
    "/security",
    "/security/auth",
    "/security/auth/scheme",
    "/security/auth/kid",
    "/security/policy",
    "/security/policy/sandbox",
    "/security/policy/tool_allowlist",
    "/security/policy/tool_allowlist/0",
    "/attachments",
    "/attachments/0",
    "/attachments/0/kind",
    "/attachments/0/ref",
    "/attachments/0/size",
    "/idempotency_key",
    "/attempt",
    "/meta",
    "/extra",
];

const CARD_SPOTS: &[&str] = &[
    "/v",
    "/agent_id",
    "/display",
    "/display/name",
    "/display/desc",
    "/endpoints",
    "/endpoints/a2a",
    "/endpoints/a2a/url",
    "/capabilities",
    "/capabilities/0",
    "/capabilities/0/id",
    "/capabilities/0/version",
    "/capabilities/0/tags",
    "/capabilities/0/tools/0",
    "/capabilities/0/trust_level",
    "/capabilities/0/cost_hint",
    "/capabilities/1/servers",
    "/limits",
    "/limits/max_concurrency",
    "/limits/max_runtime_sec",
    "/budget",
    "/security",
    "/security/sandbox",
    "/security/network",
    "/meta",
    "/extra",
];

/// Checks the contract of a validator's answer for object input: success yields a value, failure
/// names real paths. A `$` problem on an object means the hand-written checks let through something
/// serde then refused.
fn no_fallthrough<T>(input: &Value, result: &Result<T, clutch_proto::Problems>) -> Result<(), TestCaseError> {
    if let (Value::Object(_), Err(problems)) = (input, result) {
        // (A top-level field named `$` is reported, legitimately, as an unknown field at `$`.)
        let fell_through = problems.as_slice().iter().any(|p| p.path == "$" && !p.message.starts_with("unknown field"));
        prop_assert!(!fell_through, "serde refused what validation accepted: {problems}\ninput: {input}");
        prop_assert!(!problems.as_slice().is_empty());
    }
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 512, ..ProptestConfig::default() })]

    #[test]
    fn validating_any_json_never_panics(input in any_json()) {
        let result = validate::message(&input, &defaults());
        no_fallthrough(&input, &result)?;
        let card = validate::agent_card(&input);
        no_fallthrough(&input, &card)?;
    }

    #[test]
    fn any_object_with_the_required_fields_never_panics(extra in prop::collection::vec((key(), any_json()), 0..6)) {
        let mut input = minimal();
        input.as_object_mut().unwrap().extend(extra);
        let result = validate::message(&input, &defaults());
        no_fallthrough(&input, &result)?;
        if let Ok(msg) = result {
            prop_assert_eq!(validate::message(&serde_json::to_value(&msg).unwrap(), &defaults()).unwrap(), msg);
        }
    }

    #[test]
    fn one_broken_spot_in_the_seed_envelope_is_caught_or_harmless(at in select(ENVELOPE_SPOTS), value in any_json()) {
        let input = replace(seed_envelope(), at, value);
        let result = validate::message(&input, &defaults());
        no_fallthrough(&input, &result)?;
        if let Ok(msg) = result {
            prop_assert_eq!(validate::message(&serde_json::to_value(&msg).unwrap(), &defaults()).unwrap(), msg);
        }
    }

    #[test]
    fn one_broken_spot_in_the_seed_card_is_caught_or_harmless(at in select(CARD_SPOTS), value in any_json()) {
        let input = replace(seed_card(), at, value);
        let result = validate::agent_card(&input);
        no_fallthrough(&input, &result)?;
        if let Ok(card) = result {
            prop_assert_eq!(validate::agent_card(&serde_json::to_value(&card).unwrap()).unwrap(), card);
        }
    }

    #[test]
    fn valid_messages_validate_and_revalidate_to_the_same_message(input in valid_message()) {
        let msg = validate::message(&input, &defaults())
            .map_err(|p| TestCaseError::fail(format!("generated message refused: {p}\n{input:#}")))?;
        let out = serde_json::to_value(&msg).unwrap();
        prop_assert_eq!(&out, &normalized(&input, &msg));
        let again = validate::message(&out, &defaults()).unwrap();
        prop_assert_eq!(again, msg);
    }

    #[test]
    fn canonical_json_is_stable(input in valid_message()) {
        let msg = validate::message(&input, &defaults()).unwrap();
        let text = msg.to_canonical_json();
        prop_assert_eq!(&msg.to_canonical_json(), &text);

        // Parsed back as a typed message or as plain JSON, and written again: the same text.
        let typed: Message = serde_json::from_str(&text).unwrap();
        prop_assert_eq!(&typed.to_canonical_json(), &text);
        let value: Value = serde_json::from_str(&text).unwrap();
        let revalidated = validate::message(&value, &defaults()).unwrap();
        prop_assert_eq!(&revalidated.to_canonical_json(), &text);

        let mut copy = msg.clone();
        copy.ts = "2000-01-01T00:00:00Z".into();
        prop_assert_eq!(copy.dedup_body(), msg.dedup_body());
    }
}
