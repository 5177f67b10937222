//! The body of a position file, as the format has it: the title, the known `##` sections, and what
//! each holds (the overview's text, the roles, the workflow's phases, the protocol's message types),
//! each checked and refused at its line.

use pulldown_cmark::HeadingLevel;

use super::error::{Problem, clip};
use super::markdown::{Block, Item, Kind, Span, flatten, item_texts, lists};
use super::model::{MessageKind, Role, Stage, same_role};

/// The sections this format knows, by their lowercase heading (and the key they are found by).
const SECTIONS: [(&str, &str); 7] = [
    ("overview", "overview"),
    ("agents", "agents"),
    ("workflow", "workflow"),
    ("communication protocol", "communication protocol"),
    ("protocol", "communication protocol"),
    ("success criteria", "success criteria"),
    ("error handling", "error handling"),
];

/// The document: its title and its known `##` sections.
pub(super) struct Doc {
    pub title: Option<(String, usize)>,
    sections: Vec<(&'static str, Section)>,
}

pub(super) struct Section {
    /// The heading's line.
    pub line: usize,
    pub blocks: Vec<Block>,
}

impl Doc {
    pub(super) fn new(blocks: Vec<Block>) -> Result<Doc, Problem> {
        let mut doc = Doc { title: None, sections: Vec::new() };
        // The section the blocks go to: an index into `sections`, or none (before the first known
        // section, in an unknown one, after a second title).
        let mut current: Option<usize> = None;
        for block in blocks {
            match &block.kind {
                Kind::Heading(HeadingLevel::H1, text) => {
                    if doc.title.is_none() {
                        doc.title = Some((text.clone(), block.line));
                    }
                    current = None;
                }
                Kind::Heading(HeadingLevel::H2, text) => {
                    let heading = text.to_lowercase();
                    current = None;
                    if let Some((_, key)) = SECTIONS.iter().find(|(h, _)| *h == heading) {
                        if let Some((_, first)) = doc.sections.iter().find(|(k, _)| k == key) {
                            return Err((
                                block.line,
                                format!("one \"## {text}\" section (one is at line {})", first.line),
                            ));
                        }
                        doc.sections.push((key, Section { line: block.line, blocks: Vec::new() }));
                        current = Some(doc.sections.len() - 1);
                    }
                }
                _ => {
                    if let Some(i) = current {
                        doc.sections[i].1.blocks.push(block);
                    }
                }
            }
        }
        Ok(doc)
    }

    pub(super) fn section(&self, key: &str) -> Option<&Section> {
        self.sections.iter().find(|(k, _)| *k == key).map(|(_, s)| s)
    }
}

/// Paragraphs, and lists as `- item` lines, joined by blank lines.
pub(super) fn overview(blocks: &[Block]) -> String {
    let parts: Vec<String> = blocks
        .iter()
        .filter_map(|block| match &block.kind {
            Kind::Paragraph(spans) => Some(flatten(spans).trim().to_owned()),
            Kind::List(list) => {
                Some(list.items.iter().map(|i| format!("- {}", flatten(&i.head).trim())).collect::<Vec<_>>().join("\n"))
            }
            _ => None,
        })
        .filter(|p| !p.is_empty())
        .collect();
    parts.join("\n\n")
}

/// `## Agents`: a role per `###` heading.
pub(super) fn roles(section: &Section) -> Result<Vec<Role>, Problem> {
    let mut headings: Vec<(String, usize, Vec<&Block>)> = Vec::new();
    for block in &section.blocks {
        match &block.kind {
            Kind::Heading(HeadingLevel::H3, text) => headings.push((text.clone(), block.line, Vec::new())),
            _ => {
                if let Some((.., blocks)) = headings.last_mut() {
                    blocks.push(block);
                }
            }
        }
    }
    if headings.is_empty() {
        return Err((section.line, "at least one role, \"### Name\", under \"## Agents\"".to_owned()));
    }
    let mut roles: Vec<(Role, usize)> = Vec::new();
    for (name, line, blocks) in headings {
        check_role_name(&name).map_err(|why| (line, format!("a role name of {why}, found {:?}", clip(&name))))?;
        if let Some((_, first)) = roles.iter().find(|(r, _)| same_role(&r.name, &name)) {
            return Err((line, format!("a role name of its own: {name:?} is also at line {first}")));
        }
        roles.push((role(name, line, &blocks)?, line));
    }
    Ok(roles.into_iter().map(|(role, _)| role).collect())
}

/// One `### Role`: its `**Personality**` and `**Responsibilities**` items.
fn role(name: String, line: usize, blocks: &[&Block]) -> Result<Role, Problem> {
    let items: Vec<&Item> = lists(blocks.iter().copied()).flat_map(|l| &l.items).collect();
    let labelled = |label: &str| {
        items.iter().find_map(|item| {
            let (l, rest) = labelled(&item.head)?;
            l.eq_ignore_ascii_case(label).then_some((*item, rest))
        })
    };
    let under = format!("under \"### {name}\"");
    let personality = match labelled("Personality") {
        Some((_, rest)) if !rest.is_empty() => rest,
        Some((item, _)) => return Err((item.line, format!("a text after \"- **Personality**:\" {under}"))),
        None => return Err((line, format!("\"- **Personality**: ...\" {under}"))),
    };
    let responsibilities = match labelled("Responsibilities") {
        Some((item, rest)) => {
            let nested = item_texts(&item.lists);
            match (nested.is_empty(), rest.is_empty()) {
                (false, _) => nested,
                (true, false) => vec![rest],
                (true, true) => {
                    let expected = format!("a list of responsibilities after \"- **Responsibilities**:\" {under}");
                    return Err((item.line, expected));
                }
            }
        }
        None => return Err((line, format!("\"- **Responsibilities**:\" and a list of them {under}"))),
    };
    Ok(Role { name, personality, responsibilities })
}

/// `## Workflow`: numbered `**PHASE**: description` items.
pub(super) fn workflow(section: &Section) -> Result<Vec<Stage>, Problem> {
    let form = "\"1. **PHASE**: description\"";
    let mut phases = Vec::new();
    for list in lists(&section.blocks) {
        for item in &list.items {
            if !list.ordered {
                return Err((item.line, format!("a numbered item {form} under \"## Workflow\"")));
            }
            let (name, description) = labelled(&item.head)
                .ok_or_else(|| (item.line, format!("an item of the form {form} under \"## Workflow\"")))?;
            check_upper(&name).map_err(|()| {
                (item.line, format!("a phase name in UPPER_SNAKE_CASE like \"DISCOVERY\", found {:?}", clip(&name)))
            })?;
            if description.is_empty() {
                return Err((item.line, format!("a description after \"**{name}**:\"")));
            }
            phases.push(Stage { name, description });
        }
    }
    if phases.is_empty() {
        return Err((section.line, format!("at least one numbered item {form} under \"## Workflow\"")));
    }
    Ok(phases)
}

/// `## Communication Protocol`: `TYPE: description` items.
pub(super) fn protocol(section: &Section) -> Result<Vec<MessageKind>, Problem> {
    let form = "\"- TYPE: description\"";
    let mut kinds: Vec<(MessageKind, usize)> = Vec::new();
    for item in lists(&section.blocks).flat_map(|l| &l.items) {
        let (name, description) = labelled(&item.head)
            .ok_or_else(|| (item.line, format!("an item of the form {form} under \"## Communication Protocol\"")))?;
        check_upper(&name).map_err(|()| {
            (item.line, format!("a message type in UPPER_SNAKE_CASE like \"RESULTS\", found {:?}", clip(&name)))
        })?;
        if let Some((_, first)) = kinds.iter().find(|(k, _)| k.name == name) {
            return Err((item.line, format!("a message type of its own: {name} is also at line {first}")));
        }
        if description.is_empty() {
            return Err((item.line, format!("a description after \"{name}:\"")));
        }
        kinds.push((MessageKind { name, description }, item.line));
    }
    if kinds.is_empty() {
        return Err((section.line, format!("at least one item {form} under \"## Communication Protocol\"")));
    }
    Ok(kinds.into_iter().map(|(k, _)| k).collect())
}

/// `**Label**: rest`, `` `Label`: rest ``, `**Label:** rest` or `Label: rest`, trimmed.
fn labelled(spans: &[Span]) -> Option<(String, String)> {
    let (label, rest) = match spans.first()? {
        Span::Strong(s) | Span::Code(s) => match s.trim().strip_suffix(':') {
            Some(label) => (label.to_owned(), flatten(&spans[1..])),
            None => match spans.get(1) {
                Some(Span::Plain(p)) => {
                    (s.clone(), p.trim_start().strip_prefix(':')?.to_owned() + &flatten(&spans[2..]))
                }
                _ => return None,
            },
        },
        Span::Plain(p) => {
            let (label, rest) = p.split_once(':')?;
            (label.to_owned(), rest.to_owned() + &flatten(&spans[1..]))
        }
    };
    let label = label.trim();
    (!label.is_empty()).then(|| (label.to_owned(), rest.trim().to_owned()))
}

fn check_role_name(name: &str) -> Result<(), &'static str> {
    let ok = (1..=64).contains(&name.chars().count())
        && name.chars().all(|c| c.is_alphanumeric() || c == ' ' || c == '-' || c == '_');
    if ok { Ok(()) } else { Err("1 to 64 letters, digits, spaces, - or _") }
}

/// `[A-Z][A-Z0-9_]*`, at most 64 characters.
fn check_upper(name: &str) -> Result<(), ()> {
    let mut bytes = name.bytes();
    let first = bytes.next().is_some_and(|b| b.is_ascii_uppercase());
    let ok = first && name.len() <= 64 && bytes.all(|b| b.is_ascii_uppercase() || b.is_ascii_digit() || b == b'_');
    if ok { Ok(()) } else { Err(()) }
}
