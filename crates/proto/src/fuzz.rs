//! Property-test strategies the crates' fuzz targets share (feature `fuzz`, for tests only; `cargo
//! fuzz` needs a nightly toolchain): how many cases to run, strings and JSON values as clients get
//! them wrong (control and quote characters, four-byte characters, huge runs, deep nesting), and
//! mutations of a valid document (members removed, replaced by other JSON, added under odd keys).
//!
//! Each target runs a few hundred cases in the test command; `CLUTCH_FUZZ_CASES` (or proptest's own
//! `PROPTEST_CASES`) runs more, e.g. `CLUTCH_FUZZ_CASES=100000 cargo test --release --test it fuzz`.

use proptest::prelude::*;
use proptest::sample::select;
use serde_json::{Map, Value};

/// serde_json refuses nesting deeper than this when it parses text.
pub const RECURSION_LIMIT: usize = 128;

/// Cases per target: `CLUTCH_FUZZ_CASES`, else `PROPTEST_CASES`, else `default`.
pub fn cases(default: u32) -> u32 {
    ["CLUTCH_FUZZ_CASES", "PROPTEST_CASES"]
        .iter()
        .find_map(|name| std::env::var(name).ok()?.parse().ok())
        .unwrap_or(default)
}

/// A proptest config of [`cases`]`(default)` that saves no regression files.
pub fn config(default: u32) -> ProptestConfig {
    ProptestConfig { cases: cases(default), failure_persistence: None, ..ProptestConfig::default() }
}

/// Strings as clients get them wrong: ordinary text, the target's own `words` (names its parser
/// knows, so generated documents often hit real rules), control and quote characters, four-byte
/// characters, and long or huge runs.
pub fn string(words: &'static [&'static str]) -> impl Strategy<Value = String> + Clone {
    prop_oneof![
        4 => "\\PC{0,16}",
        3 => select(words).prop_map(String::from),
        1 => "[\\x00-\\x1f`\"\\\\]{0,8}",
        1 => ("[a-z`\"😀\\x01]", 100usize..400).prop_map(|(c, n)| c.repeat(n)),
        1 => ("[a-z😀\\x01]", prop_oneof![Just(4096usize), Just(65_536), Just(300_000)]).prop_map(|(c, n)| c.repeat(n)),
    ]
}

/// Any JSON value a few levels deep, or one nested almost as deep as serde_json reads.
pub fn json(words: &'static [&'static str]) -> impl Strategy<Value = Value> + Clone {
    let leaf = prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::Bool),
        any::<i64>().prop_map(Value::from),
        any::<u64>().prop_map(Value::from),
        any::<f64>().prop_filter_map("finite", |f| serde_json::Number::from_f64(f).map(Value::Number)),
        string(words).prop_map(Value::String),
    ];
    let shallow = leaf.prop_recursive(3, 24, 4, move |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..4).prop_map(Value::Array),
            prop::collection::vec((string(words), inner), 0..4).prop_map(|kv| Value::Object(kv.into_iter().collect())),
        ]
    });
    prop_oneof![8 => shallow, 1 => (1usize..RECURSION_LIMIT - 8, any::<bool>()).prop_map(|(d, o)| deep(d, o))]
}

/// A value nested `depth` levels: arrays, or objects of one member.
pub fn deep(depth: usize, objects: bool) -> Value {
    let mut v = Value::from(1);
    for _ in 0..depth {
        v = if objects { Value::Object(Map::from_iter([("k".to_string(), v)])) } else { Value::Array(vec![v]) };
    }
    v
}

/// One change to a document, at a spot picked by index among all its spots (see [`mutate`]).
#[derive(Debug, Clone)]
pub enum Mutation {
    /// Remove the member at this spot.
    Remove(usize),
    /// Replace the value at this spot.
    Replace(usize, Value),
    /// Add a member under this key to the object at this spot (or the root).
    Insert(usize, String, Value),
}

/// A few mutations in a row.
pub fn mutations(words: &'static [&'static str]) -> impl Strategy<Value = Vec<Mutation>> {
    let one = prop_oneof![
        any::<usize>().prop_map(Mutation::Remove),
        (any::<usize>(), json(words)).prop_map(|(at, v)| Mutation::Replace(at, v)),
        (any::<usize>(), string(words), json(words)).prop_map(|(at, k, v)| Mutation::Insert(at, k, v)),
    ];
    prop::collection::vec(one, 1..5)
}

/// `doc` with `mutations` applied in order.
pub fn mutate(mut doc: Value, mutations: &[Mutation]) -> Value {
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
                            if let Ok(i) = last.parse::<usize>() {
                                a.remove(i);
                            }
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
