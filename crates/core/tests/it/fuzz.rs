//! Fuzzing the policy loaders (proptest; `cargo fuzz` needs a nightly toolchain): `org.yaml` and
//! `workflows.yaml` as arbitrary text, YAML-like text, and the documented examples mutated line by
//! line (lines removed, repeated, re-indented, cut short, replaced by YAML fragments: anchors and
//! aliases, flow collections, tags, huge keys and values), loaded with `Policy::load`. It may not
//! panic, and each error it reports stays bounded (`clutch_proto::error`'s limits for a path and a
//! message), however large the text it is about.
//!
//! Each target runs 128 cases by default (about a second each in a debug build); set `CLUTCH_FUZZ_CASES`
//! (or `PROPTEST_CASES`) for more, e.g. `CLUTCH_FUZZ_CASES=20000 cargo test -p clutch-core --release
//! --test it fuzz`.

use std::path::Path;

use clutch_core::config::Policy;
use clutch_proto::error::{MESSAGE_MAX, PATH_MAX};
use proptest::prelude::*;
use proptest::sample::select;

fn config() -> ProptestConfig {
    clutch_proto::fuzz::config(128)
}

fn example(file: &str) -> String {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../docs/config");
    std::fs::read_to_string(dir.join(file)).unwrap()
}

/// Lines and pieces of YAML that parsers and checkers trip on.
fn fragment() -> impl Strategy<Value = String> {
    let long = ("[a-z:`\"😀]", prop_oneof![Just(300usize), Just(20_000), Just(300_000)]).prop_map(|(c, n)| c.repeat(n));
    prop_oneof![
        4 => select(vec![
            "  x: y", "- a", "a: &a [*a, *a]", "b: &b {k: 1}", "c: *b", "d: *undefined", "{", "}", "[", "]", ":",
            "  ", "\t", "? complex", ": value", "!!binary aGk=", "!custom x", "--- ", "...", "'unclosed", "\"unclosed",
            "|", ">-", "null", "~", "0x1F", "1e400", "-1", "18446744073709551616", "true", "<<: *b", "%YAML 1.2",
            "agents:", "roles:", "tokens:", "workflows:", "steps:", "schemas:", "budgets:", "signatures:",
            "  agent:x:", "    role: nobody", "  - {name: t, role: admin}", "    keys: [{kid: k, public_key: x}]",
        ])
        .prop_map(String::from),
        2 => "\\PC{0,20}",
        1 => long.clone().prop_map(|s| format!("{s}: 1")),
        1 => long.prop_map(|s| format!("k: {s}")),
    ]
}

#[derive(Debug, Clone)]
enum Edit {
    Remove(usize),
    Repeat(usize),
    Indent(usize, usize),
    Insert(usize, String),
    Replace(usize, String),
    Cut(usize),
}

fn edits() -> impl Strategy<Value = Vec<Edit>> {
    let one = prop_oneof![
        any::<usize>().prop_map(Edit::Remove),
        any::<usize>().prop_map(Edit::Repeat),
        (any::<usize>(), 0usize..6).prop_map(|(at, n)| Edit::Indent(at, n)),
        (any::<usize>(), fragment()).prop_map(|(at, f)| Edit::Insert(at, f)),
        (any::<usize>(), fragment()).prop_map(|(at, f)| Edit::Replace(at, f)),
        any::<usize>().prop_map(Edit::Cut),
    ];
    prop::collection::vec(one, 0..5)
}

fn edit(text: &str, edits: &[Edit]) -> String {
    let mut lines: Vec<String> = text.lines().map(String::from).collect();
    for e in edits {
        if lines.is_empty() {
            lines.push(String::new());
        }
        let n = lines.len();
        match e {
            Edit::Remove(i) => {
                lines.remove(i % n);
            }
            Edit::Repeat(i) => lines.insert(i % n, lines[i % n].clone()),
            Edit::Indent(i, by) => lines[i % n] = format!("{}{}", " ".repeat(*by), lines[i % n].trim_start()),
            Edit::Insert(i, f) => lines.insert(i % (n + 1), f.clone()),
            Edit::Replace(i, f) => lines[i % n] = f.clone(),
            Edit::Cut(i) => {
                let line = &lines[i % n];
                let at = line.char_indices().nth(i % (line.chars().count() + 1)).map_or(line.len(), |(b, _)| b);
                lines[i % n] = line[..at].to_string();
            }
        }
    }
    lines.join("\n")
}

/// Loads `org` and `workflows` (absent when `None`) from `dir`: no panic, and every error bounded.
/// Answers the errors, one per line.
fn check(dir: &Path, org: Option<&[u8]>, workflows: Option<&[u8]>) -> Result<String, TestCaseError> {
    for (file, text) in [("org.yaml", org), ("workflows.yaml", workflows)] {
        let path = dir.join(file);
        match text {
            Some(text) => std::fs::write(&path, text).unwrap(),
            None => {
                let _ = std::fs::remove_file(&path);
            }
        }
    }
    let Err(errors) = Policy::load(dir) else { return Ok(String::new()) };
    prop_assert!(!errors.as_slice().is_empty());
    for e in errors.as_slice() {
        let (path, message) = (e.path.chars().count(), e.message.chars().count());
        prop_assert!(path <= PATH_MAX && message <= MESSAGE_MAX, "an error of {path} + {message} characters: {e:.600}");
    }
    Ok(errors.to_string())
}

proptest! {
    #![proptest_config(config())]

    #[test]
    fn arbitrary_text(org in prop::collection::vec(any::<u8>(), 0..300), workflows in "\\PC{0,300}") {
        let dir = tempfile::tempdir().unwrap();
        check(dir.path(), Some(&org), Some(workflows.as_bytes()))?;
    }

    #[test]
    fn yaml_like_text(text in "[a-z:\\-\\[\\]{}&*!|>'\"#%@?,. \\n\\t0-9_]{0,300}", org in any::<bool>()) {
        let dir = tempfile::tempdir().unwrap();
        let (a, b) = if org { (Some(text.as_bytes()), None) } else { (None, Some(text.as_bytes())) };
        check(dir.path(), a, b)?;
    }

    #[test]
    fn mutated_examples(org in edits(), workflows in edits()) {
        let dir = tempfile::tempdir().unwrap();
        let (org, workflows) = (edit(&example("org.yaml"), &org), edit(&example("workflows.yaml"), &workflows));
        check(dir.path(), Some(org.as_bytes()), Some(workflows.as_bytes()))?;
    }
}

#[test]
fn alias_bombs_and_deep_nesting_are_refused() {
    let dir = tempfile::tempdir().unwrap();
    // Ten to the twelfth strings, where workflows.yaml takes any value: a payload schema.
    let mut bomb = String::from("a0: &a0 [x, x, x, x, x, x, x, x, x, x]\n");
    for i in 1..12 {
        let p = i - 1;
        bomb.push_str(&format!("a{i}: &a{i} [*a{p}, *a{p}, *a{p}, *a{p}, *a{p}, *a{p}, *a{p}, *a{p}, *a{p}, *a{p}]\n"));
    }
    let bomb = format!("schemas:\n  bomb.v1:\n    schema: {{{}}}\n", bomb.lines().collect::<Vec<_>>().join(", "));
    let deep = format!("schemas:\n  deep.v1:\n    schema: {}{}", "[".repeat(10_000), "]".repeat(10_000));
    for text in [bomb, deep] {
        let errors = check(dir.path(), None, Some(text.as_bytes())).unwrap();
        assert!(errors.contains("budget") || errors.contains("nesting") || errors.contains("limit"), "{errors:.500}");
    }
}
