//! A position file's front matter: the `---` fences that hold it, its YAML read by the project's
//! YAML reader (`clutch_core::config::yaml`), and its keys checked, each error at its line of the
//! whole file.

use std::path::Path;

use clutch_core::config::yaml::{self, Entries};
use serde_json::Value;

use super::error::{Problem, clip};
use super::model::{Params, Pattern};

/// The keys a front matter may give.
const KEYS: [&str; 6] = ["name", "pattern", "description", "rounds", "quorum", "workers"];

/// The front matter: its values and where the Markdown starts.
#[derive(Default)]
pub(super) struct Front {
    pub name: Option<(String, usize)>,
    pub pattern: Option<Pattern>,
    pub description: Option<String>,
    pub params: Params,
    /// Where each number was given, to point at one its pattern does not use.
    pub param_lines: Vec<(&'static str, usize)>,
    /// The line of the closing `---` (1 when there is no front matter).
    pub end_line: usize,
    /// The byte offset of the Markdown after it.
    pub body: usize,
}

/// The front matter of `text` (the contents of `file`), if it has one: a first line `---`, YAML,
/// and a closing `---` line.
pub(super) fn read(text: &str, file: &str) -> Result<Front, Problem> {
    // A byte-order mark (some editors write one) is not text.
    let bom = if text.starts_with('\u{feff}') { '\u{feff}'.len_utf8() } else { 0 };
    let after_bom = &text[bom..];
    let mut front = Front { end_line: 1, body: bom, ..Front::default() };
    if after_bom.split_inclusive('\n').next().map(str::trim_end) != Some("---") {
        return Ok(front);
    }
    let start = bom + after_bom.find('\n').map_or(after_bom.len(), |i| i + 1);
    // The closing line, found first: without it, the Markdown would be read as YAML.
    let mut offset = start;
    let mut closing = None;
    for (i, line) in text[start..].split_inclusive('\n').enumerate() {
        if line.trim() == "---" {
            closing = Some((i + 2, offset, offset + line.len()));
            break;
        }
        offset += line.len();
    }
    let Some((end_line, end, body)) = closing else {
        return Err((1, "a closing \"---\" line after the front matter".to_owned()));
    };
    (front.end_line, front.body) = (end_line, body);
    let file = Path::new(file);
    let entries = match yaml::parse::<Option<Entries<Value>>>(file, &text[start..end]) {
        Ok(entries) => entries.unwrap_or_default(),
        Err(e) => return Err(refused(file, &text[start..end], &e)),
    };
    for (key, value) in entries.0 {
        // The YAML's line 1 is the file's line 2, after the opening `---`.
        let line = key.referenced.line() as usize + 1;
        entry(&mut front, &key.value, &value, line)?;
    }
    Ok(front)
}

/// Checks one `key: value` and keeps its value.
fn entry(front: &mut Front, key: &str, value: &Value, line: usize) -> Result<(), Problem> {
    let Some(&key) = KEYS.iter().find(|k| **k == key) else {
        return Err((line, format!("a front-matter key ({}), found {:?}", KEYS.join(", "), clip(key))));
    };
    let value = match value {
        Value::String(s) => s.clone(),
        Value::Number(n) => n.to_string(),
        Value::Bool(b) => b.to_string(),
        Value::Null => String::new(),
        Value::Array(_) | Value::Object(_) => {
            return Err((line, format!("one value after \"{key}:\", found {:?}", clip(&value.to_string()))));
        }
    };
    let value = value.as_str();
    match key {
        "name" => front.name = Some((value.to_owned(), line)),
        "pattern" => {
            let names: Vec<&str> = Pattern::ALL.iter().map(|p| p.as_str()).collect();
            front.pattern = Some(
                Pattern::from_name(value)
                    .ok_or_else(|| (line, format!("a pattern ({}), found {:?}", names.join(", "), clip(value))))?,
            );
        }
        "description" if value.is_empty() => return Err((line, "a text after \"description:\"".to_owned())),
        "description" => front.description = Some(value.to_owned()),
        "quorum" => {
            let quorum = value.parse::<f64>().ok().filter(|q| *q > 0.0 && *q <= 1.0).ok_or_else(|| {
                (line, format!("quorum to be a number greater than 0 and at most 1, found {:?}", clip(value)))
            })?;
            front.params.quorum = Some(quorum);
            front.param_lines.push((key, line));
        }
        _ => {
            let n =
                value.parse::<u32>().ok().filter(|n| *n >= 1).ok_or_else(|| {
                    (line, format!("{key} to be a whole number of at least 1, found {:?}", clip(value)))
                })?;
            if key == "rounds" {
                front.params.rounds = Some(n);
            } else {
                front.params.workers = Some(n);
            }
            front.param_lines.push((key, line));
        }
    }
    Ok(())
}

/// What the YAML reader refused in `yaml` (the front matter of `file`), said as this format says
/// it: a key given twice names the line of the first, a front matter that is one text quotes it.
fn refused(file: &Path, yaml: &str, e: &clutch_core::config::Error) -> Problem {
    let line = e.line as usize;
    // The YAML's line 1 is the file's line 2; an error without a line is the opening `---`'s.
    let at = if line == 0 { 1 } else { line + 1 };
    if let Some((key, first)) = repeated(file, yaml, line) {
        return (at, format!("{key} once in the front matter (it is also at line {})", first + 1));
    }
    if let Ok(Value::String(s)) = yaml::parse::<Value>(file, yaml) {
        return (at, format!("\"key: value\" in the front matter, found {:?}", clip(&s)));
    }
    // A plain value holding `: ` reads as a second mapping: say how to write it.
    let quote =
        if e.message.starts_with("mapping values are not allowed") { "; quote a value that holds \": \"" } else { "" };
    (at, format!("\"key: value\" lines in the front matter ({}, at column {}{quote})", e.message, e.column))
}

/// When the YAML reader refused line `line` of `yaml` for repeating a key: the key, and the line
/// of its first occurrence (both lines of `yaml`).
fn repeated(file: &Path, yaml: &str, line: usize) -> Option<(String, usize)> {
    let before: String = yaml.split_inclusive('\n').take(line.checked_sub(1)?).collect();
    let at = yaml.split_inclusive('\n').nth(line.checked_sub(1)?)?;
    let earlier = yaml::parse::<Option<Entries<Value>>>(file, &before).ok()??;
    let again = yaml::parse::<Option<Entries<Value>>>(file, at.trim_start()).ok()??;
    let (key, _) = again.0.into_iter().next()?;
    let (first, _) = earlier.0.into_iter().find(|(k, _)| k.value == key.value)?;
    Some((key.value, first.referenced.line() as usize))
}
