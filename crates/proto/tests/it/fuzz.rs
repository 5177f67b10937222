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
use clutch_proto::fuzz::{self, RECURSION_LIMIT, deep, mutate};
use clutch_proto::validate;
use proptest::prelude::*;

use serde_json::Value;

use crate::{defaults, seed_card, seed_envelope};

/// Names the validators know, so generated strings often hit real rules.
const WORDS: &[&str] = &["agent:ken", "task.request", "clutch/0.1", "msg_", "skill:x", "`", "\"", "\\", ""];

fn config() -> ProptestConfig {
    fuzz::config(256)
}

fn json() -> impl Strategy<Value = Value> {
    fuzz::json(WORDS)
}

fn mutations() -> impl Strategy<Value = Vec<fuzz::Mutation>> {
    fuzz::mutations(WORDS)
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
