//! Every error code the crates write is one of proto's table (`crates/proto/src/error.rs`, the
//! `codes!` macro): a string literal is a code where the code goes (the value of a field, key or
//! binding named `code` or `*_code`, a comparison with one, a `match` on one, an argument of a
//! function whose parameter is named `code`, a call of `code()` or `*_code()`), and there it must be
//! in the table. Elsewhere upper-case literals are other things (environment variables, A2A's and
//! gRPC's reasons, clap's value names) and are not looked at.

use std::collections::{BTreeMap, BTreeSet};
use std::fs;
use std::ops::Range;

use super::tokens::{self, Kind, Token, matching};

#[test]
fn every_error_code_is_in_the_table() {
    let table_path = super::root().join("crates/proto/src/error.rs");
    let table = table(&fs::read_to_string(&table_path).unwrap_or_else(|e| panic!("{}: {e}", table_path.display())));
    assert!(table.len() >= 20, "the codes of `codes!` were not found in crates/proto/src/error.rs: {table:?}");
    let files: Vec<(String, String)> = super::source_files()
        .into_iter()
        .map(|(path, text)| (super::rel(&path), text))
        .filter(|(file, _)| !file.starts_with("crates/proto/"))
        .collect();
    let bad = unknown_codes(&files, &table);
    assert!(
        bad.is_empty(),
        "error codes that are not in proto's table (crates/proto/src/error.rs): add each to `codes!` (with its \
         HTTP status, JSON-RPC code and retryability) and write it as `ErrorCode::X`, or use the code the \
         table has for it:\n{}",
        bad.join("\n")
    );
}

/// The string names of the codes in `codes! { Variant = "NAME", ... }`.
fn table(error_rs: &str) -> BTreeSet<String> {
    let tokens = tokens::lex(error_rs);
    let Some(open) = tokens.windows(3).position(|w| w[0].is("codes") && w[1].is("!") && w[2].is("{")).map(|at| at + 2)
    else {
        return BTreeSet::new();
    };
    let close = matching(&tokens, open).unwrap_or(tokens.len());
    (open..close)
        .filter(|&i| tokens[i].kind == Kind::Str && tokens[i - 1].is("="))
        .map(|i| tokens[i].text.clone())
        .collect()
}

/// One line per code-like literal in a code position (outside `#[cfg(test)]` code) of `files` that
/// `table` does not hold.
fn unknown_codes(files: &[(String, String)], table: &BTreeSet<String>) -> Vec<String> {
    let lexed: Vec<(&str, Vec<Token>)> = files.iter().map(|(f, t)| (f.as_str(), tokens::lex(t))).collect();
    let params = code_parameters(&lexed);
    let mut bad = Vec::new();
    for (file, tokens) in &lexed {
        let impls = impl_types(tokens);
        for (i, t) in tokens.iter().enumerate() {
            if t.kind != Kind::Str || t.test || !looks_like_code(&t.text) || table.contains(&t.text) {
                continue;
            }
            if let Some(how) = code_position(tokens, i, &params, &impls) {
                bad.push(format!("  {file}:{}: {:?} ({how})", t.line, t.text));
            }
        }
    }
    bad
}

/// `VALIDATION_FAILED`, `INTERNAL`: upper-case words joined by `_`.
fn looks_like_code(s: &str) -> bool {
    s.len() >= 2
        && s.starts_with(|c: char| c.is_ascii_uppercase())
        && s.split('_').all(|w| !w.is_empty() && w.chars().all(|c| c.is_ascii_uppercase() || c.is_ascii_digit()))
}

/// A name that holds a code: `code`, `error_code`; or the key `"code"`.
fn names_code(t: &Token) -> bool {
    match t.kind {
        Kind::Ident => t.text == "code" || t.text.ends_with("_code"),
        Kind::Str => t.text == "code",
        _ => false,
    }
}

/// Functions with a parameter named `code`: (the type of their `impl` block, if any; name) → the
/// parameter's index (`self` not counted).
type Parameters = BTreeMap<(Option<String>, String), usize>;

fn code_parameters(files: &[(&str, Vec<Token>)]) -> Parameters {
    let mut out = Parameters::new();
    for (_, tokens) in files {
        let impls = impl_types(tokens);
        for (i, t) in tokens.iter().enumerate() {
            let Some(name) = t.is("fn").then(|| tokens.get(i + 1).and_then(Token::ident)).flatten() else { continue };
            let Some(open) = (i + 2..tokens.len()).find(|&j| tokens[j].is("(")) else { continue };
            let Some(close) = matching(tokens, open) else { continue };
            let params: Vec<&[Token]> =
                arguments(tokens, open, close, true).into_iter().map(|r| &tokens[r]).filter(|p| !is_self(p)).collect();
            if let Some(at) = params.iter().position(|p| {
                let pattern: Vec<&Token> = p.iter().take_while(|t| !t.is(":")).filter(|t| !t.is("mut")).collect();
                pattern.len() == 1 && names_code(pattern[0])
            }) {
                out.insert((impls.get(&i).cloned(), name.to_owned()), at);
            }
        }
    }
    out
}

fn is_self(param: &[Token]) -> bool {
    param.iter().take_while(|t| !t.is(":")).any(|t| t.is("self"))
}

/// Where the arguments (or, with `angles`, the parameters, whose types may hold `<A, B>`) between
/// the brackets at `open` and `close` are, split at their top-level commas.
fn arguments(tokens: &[Token], open: usize, close: usize, angles: bool) -> Vec<Range<usize>> {
    let mut out = Vec::new();
    let (mut depth, mut start) = (0usize, open + 1);
    for (j, t) in tokens.iter().enumerate().take(close).skip(open + 1) {
        if t.is("(") || t.is("[") || t.is("{") || (angles && t.is("<")) {
            depth += 1;
        } else if t.is(")") || t.is("]") || t.is("}") || (angles && t.is(">")) {
            depth = depth.saturating_sub(1);
        } else if t.is(",") && depth == 0 {
            out.push(start..j);
            start = j + 1;
        }
    }
    if start < close {
        out.push(start..close);
    }
    out
}

/// For each token inside an `impl` block, the name of the type it is for (`impl Trait for Type<T>`
/// → `Type`).
fn impl_types(tokens: &[Token]) -> BTreeMap<usize, String> {
    let mut out = BTreeMap::new();
    for (i, t) in tokens.iter().enumerate() {
        if !t.is("impl") || tokens.get(i + 1).is_some_and(|n| n.is("(")) {
            continue;
        }
        let Some(open) = (i + 1..tokens.len()).find(|&j| tokens[j].is("{") || tokens[j].is(";")) else { continue };
        if !tokens[open].is("{") {
            continue;
        }
        let header = &tokens[i + 1..open];
        let header = header.iter().position(|t| t.is("where")).map_or(header, |w| &header[..w]);
        let header = header.iter().rposition(|t| t.is("for")).map_or(header, |f| &header[f + 1..]);
        let mut angle = 0usize;
        let mut name = None;
        for t in header {
            match t.text.as_str() {
                "<" => angle += 1,
                ">" => angle = angle.saturating_sub(1),
                _ if angle == 0 && t.kind == Kind::Ident && t.text != "dyn" && t.text != "mut" => name = Some(&t.text),
                _ => {}
            }
        }
        let (Some(name), Some(close)) = (name, matching(tokens, open)) else { continue };
        for j in open..close {
            out.insert(j, name.clone());
        }
    }
    out
}

/// Why the literal at `i` stands where a code goes, if it does.
fn code_position(tokens: &[Token], i: usize, params: &Parameters, impls: &BTreeMap<usize, String>) -> Option<String> {
    let next = tokens.get(i + 1);
    let pattern = next.is_some_and(|n| n.is("=>") || n.is("|") || n.is("if"));
    if pattern {
        return match_on_code(tokens, i).then(|| "a pattern of a `match` on a code".to_owned());
    }
    if let Some(key) = value_of(tokens, i) {
        return Some(format!("the value of `{key}`"));
    }
    let compared = |at: usize| tokens.get(at).is_some_and(|t| t.is("==") || t.is("!="));
    if (i > 0 && compared(i - 1) && operand(tokens, i - 1, -1).iter().any(|t| names_code(t)))
        || (compared(i + 1) && operand(tokens, i + 1, 1).iter().any(|t| names_code(t)))
    {
        return Some("compared with a code".to_owned());
    }
    argument_of(tokens, i, params, impls)
}

/// The name whose value the literal at `i` is part of: `code: "X".into()`, `"code": "X"`,
/// `let code = if ok { "X" } else { "Y" };`, `let code = match s { .. => "X", _ => "Y" };`.
fn value_of(tokens: &[Token], i: usize) -> Option<String> {
    let mut depth = 0usize;
    // Past a `,` or `;` of the block the literal is in: what comes before is another statement
    // (or match arm), until the block's `{`.
    let mut separated = false;
    for j in (0..i).rev() {
        let t = &tokens[j];
        if t.kind != Kind::Punct {
            continue;
        }
        match t.text.as_str() {
            ")" | "]" | "}" => depth += 1,
            "(" | "[" | "{" if depth > 0 => depth -= 1,
            // A block of the value (`if`, `match`) goes on to what is before it; a list (`(`, `[`,
            // a struct literal's `{`) holds the key, if any, after it.
            "{" if j.checked_sub(1).is_some_and(|b| is_block_opener(tokens, b)) => separated = false,
            "(" | "[" | "{" => return None,
            "," | ";" if depth == 0 => separated = true,
            ":" | "=" if depth == 0 && !separated => {
                let key = j.checked_sub(1).map(|k| &tokens[k])?;
                return names_code(key).then(|| key.text.clone());
            }
            _ => {}
        }
    }
    None
}

/// Whether the `{` after `tokens[b]` opens a block of an expression (`else {`, `match x {`,
/// `if c {`, `=> {`) rather than a struct literal or a macro's braces.
fn is_block_opener(tokens: &[Token], b: usize) -> bool {
    let t = &tokens[b];
    if t.is("else") || t.is("=>") || t.is("=") || t.is(":") {
        return true;
    }
    // `match x {`, `if c {`: a keyword earlier on the same statement.
    let start = (0..=b).rev().find(|&k| tokens[k].is(";") || tokens[k].is("{") || tokens[k].is("}")).unwrap_or(0);
    tokens[start..=b].iter().any(|t| t.is("match") || t.is("if") || t.is("while"))
}

/// The tokens of the operand next to the operator at `op`, walking `step` (-1: to its left).
fn operand(tokens: &[Token], op: usize, step: isize) -> Vec<&Token> {
    let mut out = Vec::new();
    let mut depth = 0isize;
    let mut j = op as isize + step;
    while j >= 0 && (j as usize) < tokens.len() {
        let t = &tokens[j as usize];
        let (opens, closes) =
            if step < 0 { (["(", "[", "{"], [")", "]", "}"]) } else { ([")", "]", "}"], ["(", "[", "{"]) };
        if step > 0 && depth == 0 && t.is("{") {
            // `if "X" == code {`: the block is not the operand.
            break;
        }
        if t.kind == Kind::Punct && closes.contains(&t.text.as_str()) {
            depth += 1;
        } else if t.kind == Kind::Punct && opens.contains(&t.text.as_str()) {
            if depth == 0 {
                break;
            }
            depth -= 1;
        } else if depth == 0
            && (matches!(t.text.as_str(), "," | ";" | "=" | "=>" | "&&" | "||" | "==" | "!=")
                || ["if", "while", "let", "return", "match"].iter().any(|k| t.is(k)))
        {
            break;
        }
        out.push(t);
        j += step;
    }
    out
}

/// Whether the pattern literal at `i` is an arm of `match <something naming a code> {`.
fn match_on_code(tokens: &[Token], i: usize) -> bool {
    let mut depth = 0usize;
    for j in (0..i).rev() {
        let t = &tokens[j];
        if t.is(")") || t.is("]") || t.is("}") {
            depth += 1;
        } else if t.is("(") || t.is("[") || t.is("{") {
            if depth > 0 {
                depth -= 1;
                continue;
            }
            if !t.is("{") {
                return false;
            }
            let start = (0..j).rev().find(|&k| tokens[k].is("match"));
            return start.is_some_and(|s| tokens[s + 1..j].iter().any(names_code));
        }
    }
    false
}

/// `refuse(&log, &request, "X", &why)` where `refuse`'s third parameter is `code`, or
/// `.code("X")`, `error_code("X")`.
fn argument_of(tokens: &[Token], i: usize, params: &Parameters, impls: &BTreeMap<usize, String>) -> Option<String> {
    let mut depth = 0usize;
    let open = (0..i).rev().find(|&j| {
        let t = &tokens[j];
        if t.is(")") || t.is("]") || t.is("}") {
            depth += 1;
        } else if t.is("(") || t.is("[") || t.is("{") {
            if depth == 0 {
                return true;
            }
            depth -= 1;
        }
        false
    })?;
    if !tokens[open].is("(") {
        return None;
    }
    let callee = tokens.get(open.checked_sub(1)?).and_then(Token::ident)?;
    let close = matching(tokens, open)?;
    let index = arguments(tokens, open, close, false).iter().position(|a| a.contains(&i))?;
    if names_code(&tokens[open - 1]) && index == 0 {
        return Some(format!("the argument of `{callee}()`"));
    }
    let before = open.checked_sub(2).map(|b| &tokens[b]);
    let (found, shown) = match before {
        Some(b) if b.is("::") => {
            let owner = tokens.get(open.checked_sub(3)?).and_then(Token::ident)?;
            let owner = if owner == "Self" { impls.get(&i)?.as_str() } else { owner };
            (params.get(&(Some(owner.to_owned()), callee.to_owned())).copied(), format!("{owner}::{callee}"))
        }
        Some(b) if b.is(".") => (
            params.iter().find(|((owner, name), _)| owner.is_some() && name == callee).map(|(_, at)| *at),
            format!(".{callee}()"),
        ),
        _ => (params.get(&(None, callee.to_owned())).copied(), callee.to_owned()),
    };
    (found == Some(index)).then(|| format!("the `code` argument of `{shown}`"))
}

#[test]
fn the_code_check_finds_codes_where_codes_go() {
    let table: BTreeSet<String> = table(concat!(
        "macro_rules! codes { ($( $v:ident = $name:literal, )*) => {} }\n",
        "codes! {\n    Internal = \"INTERNAL\", 500;\n    ValidationFailed = \"VALIDATION_FAILED\", 400;\n}\n",
    ));
    assert_eq!(table, BTreeSet::from(["INTERNAL".to_owned(), "VALIDATION_FAILED".to_owned()]));

    let planted = r#"//! Planted.
fn task_error(task: &Task, code: &str, why: &str) -> Message { todo() }
struct Failed;
impl Failed {
    fn new(code: &str, message: String, retryable: bool) -> Failed { Failed }
    fn other() -> Failed { Self::new("SELF_CODE", String::new(), false) }
}
fn run() {
    let view = TaskError { code: "TASK_FAILED".into(), message };
    let payload = json!({"code": "A2A_REFUSED", "message": why, "retryable": false});
    let code = if retryable { "LLM_UNAVAILABLE" } else { "LLM_FAILD" };
    let code = match state {
        "TASK_STATE_REJECTED" => "A2A_REJECTED",
        "X" => "VALIDATION_FAILED",
        _ => "A2A_FAILED",
    };
    if f.code == "BUDGET_EXCEDED" {}
    if body["error"]["code"] != "NOT_A_CODE" {}
    out.push(task_error(task, "NO_ELIGIBLE_AGENT", &decision.reason, false));
    let e = Err(Failed::new("MAX_TURNS", format!("{} calls", n), false));
    body.code("BARE_CODE");
    match e.code.as_str() {
        "GONE_CODE" | "INTERNAL" => {}
        _ => {}
    }
    // Not codes, or not where a code goes:
    let url = std::env::var("CLUTCH_URL");
    let level = env::var_os("RUST_LOG");
    let fine = ErrorBody { code: ErrorCode::Internal, message: "VALIDATION_FAILED is fine".into() };
    let reason = if denied { "PERMISSION_DENIED" } else { "UNAUTHENTICATED" };
    RpcError::new(-32001, "TASK_NOT_FOUND", why);
    match state { "TASK_STATE_FAILED" => "A2A_FAILED_BUT_NOT_A_CODE_HERE", _ => "" };
    let phase = "SPAWNING_AGENTS";
    // code: "IN_A_COMMENT"
    let text = "code: \"IN_A_STRING\"";
    let ok = Failed::new("INTERNAL", String::new(), true);
}
#[cfg(test)]
mod tests {
    fn t() { let e = TaskError { code: "ONLY_IN_TESTS".into() }; }
}
"#;
    let found = unknown_codes(&[("src/planted.rs".to_owned(), planted.to_owned())], &table);
    assert_eq!(
        found,
        [
            "  src/planted.rs:6: \"SELF_CODE\" (the `code` argument of `Failed::new`)",
            "  src/planted.rs:9: \"TASK_FAILED\" (the value of `code`)",
            "  src/planted.rs:10: \"A2A_REFUSED\" (the value of `code`)",
            "  src/planted.rs:11: \"LLM_UNAVAILABLE\" (the value of `code`)",
            "  src/planted.rs:11: \"LLM_FAILD\" (the value of `code`)",
            "  src/planted.rs:13: \"A2A_REJECTED\" (the value of `code`)",
            "  src/planted.rs:15: \"A2A_FAILED\" (the value of `code`)",
            "  src/planted.rs:17: \"BUDGET_EXCEDED\" (compared with a code)",
            "  src/planted.rs:18: \"NOT_A_CODE\" (compared with a code)",
            "  src/planted.rs:19: \"NO_ELIGIBLE_AGENT\" (the `code` argument of `task_error`)",
            "  src/planted.rs:20: \"MAX_TURNS\" (the `code` argument of `Failed::new`)",
            "  src/planted.rs:21: \"BARE_CODE\" (the argument of `code()`)",
            "  src/planted.rs:23: \"GONE_CODE\" (a pattern of a `match` on a code)",
        ]
    );
}
