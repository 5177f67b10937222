//! One position file read whole: its size checked, its front matter and body read, and the
//! position checked against its pattern's rules (each pattern's own, from its module in
//! `positions`).

use super::error::{Error, Problem};
use super::front::{self, Front};
use super::markdown::{LineIndex, Reader, list_texts};
use super::model::{MessageKind, Pattern, Role, Skill};
use super::sections::{Doc, overview, protocol, roles, workflow};

/// The largest position file read: 256 KiB.
pub const MAX_BYTES: usize = 256 * 1024;

/// Parses one position file. `file` names it in errors; `default_name` is the name when the front
/// matter gives none (the file's stem, or its directory's name for `NAME/SKILL.md`). The skill's
/// `source` is `file`.
pub fn parse(text: &str, file: &str, default_name: &str) -> Result<Skill, Error> {
    let fail = |line: usize, expected: String| Error { file: file.to_owned(), line, expected };
    if text.len() > MAX_BYTES {
        return Err(fail(1, format!("a file of at most {} KiB, found {} bytes", MAX_BYTES / 1024, text.len())));
    }
    let lines = LineIndex::new(text);
    let front = front::read(text, file).map_err(|(line, expected)| fail(line, expected))?;
    let skill = body(text, front, default_name, &lines).map_err(|(line, expected)| fail(line, expected))?;
    Ok(Skill { source: file.to_owned(), ..skill })
}

/// The Markdown after the front matter, checked against the format and the pattern.
fn body(text: &str, front: Front, default_name: &str, lines: &LineIndex) -> Result<Skill, Problem> {
    let (name, pattern) = identity(&front, default_name)?;
    let blocks = Reader::new(&text[front.body..], front.body, lines).blocks();
    // Where a missing title was expected: the first block, or the first line after the front matter.
    let first_line = blocks.first().map_or(if front.end_line == 1 { 1 } else { front.end_line + 1 }, |b| b.line);
    let doc = Doc::new(blocks)?;
    let Some((title, title_line)) = doc.title.clone() else {
        return Err((first_line, "a title line \"# ...\"".to_owned()));
    };
    if title.is_empty() {
        return Err((title_line, "a title after \"#\"".to_owned()));
    }
    let section =
        |key: &str, heading: &str| doc.section(key).ok_or_else(|| (title_line, format!("a \"## {heading}\" section")));

    let overview_section = section("overview", "Overview")?;
    let overview = overview(&overview_section.blocks);
    if overview.is_empty() {
        return Err((overview_section.line, "text under \"## Overview\"".to_owned()));
    }
    let agents_section = section("agents", "Agents")?;
    let agents = roles(agents_section)?;
    let workflow = workflow(section("workflow", "Workflow")?)?;
    let protocol_section = section("communication protocol", "Communication Protocol")?;
    let protocol = protocol(protocol_section)?;

    fits(pattern, &agents, agents_section.line, &protocol, protocol_section.line)?;

    let items = |key: &str| doc.section(key).map(|s| list_texts(&s.blocks)).unwrap_or_default();
    Ok(Skill {
        name,
        title,
        pattern,
        description: front.description,
        overview,
        agents,
        workflow,
        protocol,
        success_criteria: items("success criteria"),
        error_handling: items("error handling"),
        params: front.params,
        source: String::new(),
    })
}

/// The position's name and pattern, from the front matter (and the file's name), and whether the
/// numbers given are the pattern's.
fn identity(front: &Front, default_name: &str) -> Result<(String, Pattern), Problem> {
    let name = match &front.name {
        Some((name, line)) => check_name(name).map_err(|why| (*line, format!("name to be {why}, found {name:?}")))?,
        None => check_name(default_name).map_err(|why| {
            (1, format!("a \"name:\" in the front matter: the default, {default_name:?}, is not {why}"))
        })?,
    };
    let names: Vec<&str> = Pattern::ALL.iter().map(|p| p.as_str()).collect();
    let pattern = front
        .pattern
        .ok_or_else(|| (front.end_line, format!("\"pattern: ...\" in the front matter ({})", names.join(", "))))?;
    for (key, line) in &front.param_lines {
        if !pattern.rules().params.contains(key) {
            let used_by = Pattern::ALL.into_iter().filter(|p| p.rules().params.contains(key));
            let used_by: Vec<&str> = used_by.map(Pattern::as_str).collect();
            let used_by = used_by.join(" or ");
            return Err((*line, format!("{key} only with the {used_by} pattern (this position's is {pattern})")));
        }
    }
    Ok((name, pattern))
}

/// Whether the roles and the protocol are what the pattern needs.
fn fits(
    pattern: Pattern,
    agents: &[Role],
    agents_line: usize,
    protocol: &[MessageKind],
    protocol_line: usize,
) -> Result<(), Problem> {
    let roles = agents.len();
    let rules = pattern.rules();
    let (least, most) = rules.roles;
    if roles < least || most.is_some_and(|most| roles > most) {
        let wanted = match most {
            Some(most) if most == least => format!("exactly {}", count(least, "role")),
            _ => format!("at least {}", count(least, "role")),
        };
        return Err((agents_line, format!("{wanted} for the {pattern} pattern, found {roles}")));
    }
    match rules.needs.iter().find(|need| !protocol.iter().any(|k| k.name == **need)) {
        Some(need) => {
            Err((protocol_line, format!("a \"- {need}: ...\" message type, which the {pattern} pattern needs")))
        }
        None => Ok(()),
    }
}

fn check_name(name: &str) -> Result<String, &'static str> {
    let ok = (1..=64).contains(&name.len())
        && name.bytes().all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-');
    if ok { Ok(name.to_owned()) } else { Err("1 to 64 characters a-z, 0-9 or -") }
}

fn count(n: usize, what: &str) -> String {
    if n == 1 { format!("1 {what}") } else { format!("{n} {what}s") }
}
