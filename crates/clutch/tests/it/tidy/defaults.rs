//! No silent defaults where the binary turns its config into the options of the crates it wires: a
//! struct literal there names every field, so that a field added to `clutch_core::engine::Options`
//! (or any other) does not compile silently into its default (`..Default::default()`).

use super::tokens::{self, Kind, Token};

#[test]
fn the_binary_fills_every_field_of_what_it_builds() {
    let mut bad = Vec::new();
    for (path, text) in super::source_files() {
        let file = super::rel(&path);
        if file.starts_with("crates/clutch/src/") {
            bad.extend(default_spreads(&file, &text));
        }
    }
    assert!(
        bad.is_empty(),
        "struct literals in the binary end with a default (`..X::default()`), so a field added later \
         takes its default without anyone deciding it: name every field (write the default out where it \
         is meant):\n{}",
        bad.join("\n")
    );
}

/// One line per struct literal in `text` (outside `#[cfg(test)]` code) that ends with `..` and a
/// call of `default()`: `..Default::default()`, `..Options::default()`, `..<T as Default>::default()`.
fn default_spreads(file: &str, text: &str) -> Vec<String> {
    let tokens = tokens::lex(text);
    let mut bad = Vec::new();
    for (i, t) in tokens.iter().enumerate() {
        if !t.is("..") || t.test || !i.checked_sub(1).is_some_and(|b| tokens[b].is(",") || tokens[b].is("{")) {
            continue;
        }
        // The path, up to the call's `(`.
        let mut j = i + 1;
        let mut last = None;
        while let Some(p) = tokens.get(j).filter(|p| is_path_part(p)) {
            if p.kind == Kind::Ident {
                last = Some(p.text.as_str());
            }
            j += 1;
        }
        let call = tokens.get(j).is_some_and(|p| p.is("(")) && tokens.get(j + 1).is_some_and(|p| p.is(")"));
        if last == Some("default") && call && tokens.get(j + 2).is_some_and(|p| p.is("}")) {
            bad.push(format!("  {file}:{}: {}", t.line, tokens::show(&tokens[i..j + 2])));
        }
    }
    bad
}

fn is_path_part(t: &Token) -> bool {
    t.kind == Kind::Ident || t.is("::") || t.is("<") || t.is(">") || t.is(",")
}

#[test]
fn the_default_check_finds_spreads_outside_tests() {
    let text = r#"//! Planted.
fn engine(c: &Config) -> clutch_core::engine::Options {
    clutch_core::engine::Options {
        max_deliveries: c.engine.max_deliveries,
        ..clutch_core::engine::Options::default()
    }
}

fn gateway() -> Options {
    Options {
        body_limit_bytes: 1,
        ..
            Default::default(
            )
    }
}

fn tokens() -> Access { Access { ..<Access as Default>::default() } }

fn ranges(v: &[u8]) -> &[u8] {
    // ..Default::default() in a comment, and in a string: "..Default::default() }"
    let w = Wrapper { inner: v[..2].to_vec(), ..base };
    &v[..Default::default()]
}

#[cfg(test)]
mod tests {
    fn options() -> Options {
        Options { body_limit_bytes: 1, ..Options::default() }
    }
}
"#;
    assert_eq!(
        default_spreads("src/planted.rs", text),
        [
            "  src/planted.rs:5: ..clutch_core::engine::Options::default()",
            "  src/planted.rs:12: ..Default::default()",
            "  src/planted.rs:18: ..<Access as Default>::default()",
        ]
    );
}
