//! Fuzzing the envelope parser and validators (proptest: only the stable toolchain is at hand, so no
//! `cargo fuzz`): arbitrary bytes, JSON-like text, and valid envelopes and cards mutated (fields
//! removed, replaced by other JSON types, huge strings, unknown and huge keys, nesting deep up to
//! serde_json's recursion limit) go through `serde_json::from_slice` and then `validate::message` and
//! `validate::agent_card`. Neither may panic; a refusal's error body, as written, stays within the
//! bounds of `clutch_proto::error`; an accepted message or card validates again to itself.
//!
//! Each target runs 256 cases by default (about a second each in a debug build). For a longer run set
//! `CLUTCH_FUZZ_CASES` (or proptest's own `PROPTEST_CASES`), e.g.
//! `CLUTCH_FUZZ_CASES=100000 cargo test -p clutch-proto --release --test it fuzz`.

use clutch_proto::error::{ErrorBody, MESSAGE_MAX, PATH_MAX, PROBLEM_MAX, PROBLEMS_MAX};
use clutch_proto::validate;
use proptest::prelude::*;
use proptest::sample::select;
use serde_json::{Map, Value};

use crate::{defaults, seed_card, seed_envelope};

/// Cases per target: `CLUTCH_FUZZ_CASES`, else `PROPTEST_CASES`, else `default`.
fn cases(default: u32) -> u32 {
    ["CLUTCH_FUZZ_CASES", "PROPTEST_CASES"]
        .iter()
        .find_map(|name| std::env::var(name).ok()?.parse().ok())
        .unwrap_or(default)
}

fn config() -> ProptestConfig {
    ProptestConfig { cases: cases(256), failure_persistence: None, ..ProptestConfig::default() }
}

/// serde_json refuses nesting deeper than this when it parses text.
const RECURSION_LIMIT: usize = 128;

/// Strings as clients might get them wrong: empty, ordinary, control characters, four-byte
/// characters, quote characters, and long or huge runs.
fn string() -> impl Strategy<Value = String> {
    prop_oneof![
        4 => "\\PC{0,16}",
        2 => select(vec!["agent:ken", "task.request", "clutch/0.1", "msg_", "skill:x", "`", "\"", "\\", ""])
            .prop_map(String::from),
        1 => "[\\x00-\\x1f`\"]{0,8}",
        1 => ("[a-z`\"😀\\x01]", 100usize..400).prop_map(|(c, n)| c.repeat(n)),
        1 => ("[a-z😀\\x01]", prop_oneof![Just(4096usize), Just(65_536), Just(300_000)]).prop_map(|(c, n)| c.repeat(n)),
    ]
}

fn leaf() -> impl Strategy<Value = Value> {
    prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::Bool),
        any::<i64>().prop_map(Value::from),
        any::<u64>().prop_map(Value::from),
        any::<f64>().prop_filter_map("finite", |f| serde_json::Number::from_f64(f).map(Value::Number)),
        string().prop_map(Value::String),
    ]
}

/// Any JSON value a few levels deep, or one nested as deep as serde_json reads.
fn json() -> impl Strategy<Value = Value> {
    let shallow = leaf().prop_recursive(3, 24, 4, |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..4).prop_map(Value::Array),
            prop::collection::vec((string(), inner), 0..4).prop_map(|kv| Value::Object(kv.into_iter().collect())),
        ]
    });
    prop_oneof![8 => shallow, 1 => (1usize..RECURSION_LIMIT - 8, any::<bool>()).prop_map(|(d, o)| deep(d, o))]
}

/// A value nested `depth` levels: arrays, or objects with one member.
fn deep(depth: usize, objects: bool) -> Value {
    let mut v = Value::from(1);
    for _ in 0..depth {
        v = if objects { Value::Object(Map::from_iter([("k".to_string(), v)])) } else { Value::Array(vec![v]) };
    }
    v
}

/// One change to a document.
#[derive(Debug, Clone)]
enum Mutation {
    /// Remove the member at this spot.
    Remove(usize),
    /// Replace the value at this spot.
    Replace(usize, Value),
    /// Add a member under this key to the object at this spot (or the root).
    Insert(usize, String, Value),
}

fn mutations() -> impl Strategy<Value = Vec<Mutation>> {
    let one = prop_oneof![
        any::<usize>().prop_map(Mutation::Remove),
        (any::<usize>(), json()).prop_map(|(at, v)| Mutation::Replace(at, v)),
        (any::<usize>(), string(), json()).prop_map(|(at, k, v)| Mutation::Insert(at, k, v)),
    ];
    prop::collection::vec(one, 1..5)
}

/// Every place in `value` as a JSON pointer, the root first.
fn spots(value: &Value) -> Vec<String> {
    fn walk(v: &Value, at: String, out: &mut Vec<String>) {
        out.push(at.clone());
        match v {
            Value::Object(o) => {
                for (k, v) in o {
                    walk(v, format!("{at}/{}", k.replace('~', "~0").replace('/', "~1")), out);
                }
            }
            Value::Array(a) => a.iter().enumerate().for_each(|(i, v)| walk(v, format!("{at}/{i}"), out)),
            _ => {}
        }
    }
    let mut out = Vec::new();
    walk(value, String::new(), &mut out);
    out
}

fn mutate(mut doc: Value, mutations: &[Mutation]) -> Value {
    for m in mutations {
        let all = spots(&doc);
        let pick = |i: usize| all[i % all.len()].clone();
        match m {
            Mutation::Remove(i) => {
                let at = pick(*i);
                if let Some((parent, last)) = at.rsplit_once('/') {
                    match doc.pointer_mut(parent) {
                        Some(Value::Object(o)) => {
                            o.remove(&last.replace("~1", "/").replace("~0", "~"));
                        }
                        Some(Value::Array(a)) => {
                            let i: usize = last.parse().unwrap();
                            a.remove(i);
                        }
                        _ => {}
                    }
                }
            }
            Mutation::Replace(i, v) => {
                if let Some(slot) = doc.pointer_mut(&pick(*i)) {
                    *slot = v.clone();
                }
            }
            Mutation::Insert(i, k, v) => {
                if let Some(Value::Object(o)) = doc.pointer_mut(&pick(*i)) {
                    o.insert(k.clone(), v.clone());
                }
            }
        }
    }
    doc
}

/// The most bytes an error body can take when written: each part at its bound in characters, each
/// character at most six bytes of JSON (`\u0001`), plus the punctuation.
fn error_bytes_max() -> usize {
    let chars = 2 * MESSAGE_MAX + PATH_MAX + PROBLEMS_MAX * (PATH_MAX + PROBLEM_MAX);
    6 * chars + 64 * (PROBLEMS_MAX + 4)
}

/// What may happen to bytes posted as a message or a card: no panic (the test would fail), and a
/// bounded error or a document that validates again to itself.
fn check_bytes(bytes: &[u8]) -> Result<(), TestCaseError> {
    let Ok(value) = serde_json::from_slice::<Value>(bytes) else { return Ok(()) };
    check_value(&value)
}

fn check_value(value: &Value) -> Result<(), TestCaseError> {
    match validate::message(value, &defaults()) {
        Ok(msg) => {
            let again = validate::message(&serde_json::to_value(&msg).unwrap(), &defaults());
            prop_assert_eq!(again.as_ref().ok(), Some(&msg), "an accepted message does not validate to itself");
        }
        Err(problems) => bounded(problems)?,
    }
    match validate::agent_card(value) {
        Ok(card) => {
            let again = validate::agent_card(&serde_json::to_value(&card).unwrap());
            prop_assert_eq!(again.as_ref().ok(), Some(&card), "an accepted card does not validate to itself");
        }
        Err(problems) => bounded(problems)?,
    }
    Ok(())
}

/// The error body of `problems`, as written, keeps every bound.
fn bounded(problems: clutch_proto::Problems) -> Result<(), TestCaseError> {
    let total = problems.total();
    prop_assert!(total >= problems.as_slice().len() && !problems.as_slice().is_empty());
    let text = serde_json::to_string(&ErrorBody::from_problems(problems)).unwrap();
    prop_assert!(text.len() <= error_bytes_max(), "{} bytes", text.len());
    let body: Value = serde_json::from_str(&text).unwrap();
    let chars = |v: &Value| v.as_str().map_or(0, |s| s.chars().count());
    prop_assert!(chars(&body["message"]) <= MESSAGE_MAX);
    prop_assert!(chars(&body["field"]) <= PATH_MAX);
    let listed = body["problems"].as_array().unwrap();
    prop_assert_eq!(listed.len(), total.min(PROBLEMS_MAX));
    for p in listed {
        prop_assert!(chars(&p["path"]) <= PATH_MAX && chars(&p["message"]) <= PROBLEM_MAX, "{}", p);
    }
    Ok(())
}

proptest! {
    #![proptest_config(config())]

    #[test]
    fn arbitrary_bytes(bytes in prop::collection::vec(any::<u8>(), 0..256)) {
        check_bytes(&bytes)?;
    }

    #[test]
    fn json_like_text(text in "[\\[\\]{}\",:0-9a-z_.\\\\ -]{0,200}") {
        check_bytes(text.as_bytes())?;
    }

    #[test]
    fn mutated_envelopes(changes in mutations()) {
        let doc = mutate(seed_envelope(), &changes);
        check_bytes(&serde_json::to_vec(&doc).unwrap())?;
    }

    #[test]
    fn mutated_cards(changes in mutations()) {
        let doc = mutate(seed_card(), &changes);
        check_bytes(&serde_json::to_vec(&doc).unwrap())?;
    }

    #[test]
    fn arbitrary_json(value in json()) {
        check_bytes(&serde_json::to_vec(&value).unwrap())?;
    }
}

#[test]
fn nesting_past_the_recursion_limit_is_refused_by_the_parser() {
    let mut envelope = seed_envelope();
    envelope["payload"]["deep"] = deep(RECURSION_LIMIT + 10, false);
    let text = serde_json::to_vec(&envelope).unwrap();
    let e = serde_json::from_slice::<Value>(&text).unwrap_err();
    assert!(e.to_string().contains("recursion limit"), "{e}");
    envelope["payload"]["deep"] = deep(RECURSION_LIMIT - 8, true);
    check_bytes(&serde_json::to_vec(&envelope).unwrap()).unwrap();
}
