//! A Markdown reader for position files: pulldown-cmark's events turned into the blocks the format
//! is made of (headings, paragraphs, lists of items with nested lists), each at its line of the
//! whole file, with inline text kept only as plain, bold or code.

use std::ops::Range;

use pulldown_cmark::{Event, HeadingLevel, Options, Parser, Tag};

/// Byte offsets to 1-based line numbers.
pub(super) struct LineIndex {
    starts: Vec<usize>,
}

impl LineIndex {
    pub(super) fn new(text: &str) -> LineIndex {
        let starts = std::iter::once(0).chain(text.match_indices('\n').map(|(i, _)| i + 1)).collect();
        LineIndex { starts }
    }

    pub(super) fn line(&self, offset: usize) -> usize {
        self.starts.partition_point(|&start| start <= offset)
    }
}

/// A Markdown block, at its line.
pub(super) struct Block {
    pub line: usize,
    pub kind: Kind,
}

pub(super) enum Kind {
    Heading(HeadingLevel, String),
    Paragraph(Vec<Span>),
    List(List),
    Other,
}

pub(super) struct List {
    pub ordered: bool,
    pub items: Vec<Item>,
}

/// A list item: its own text (the first paragraph and any after it, joined by a space) and its
/// nested lists.
pub(super) struct Item {
    pub line: usize,
    pub head: Vec<Span>,
    pub lists: Vec<List>,
}

/// Inline text as far as this format cares: plain, bold or code.
#[derive(Debug, Clone, PartialEq)]
pub(super) enum Span {
    Plain(String),
    Strong(String),
    Code(String),
}

/// Spans as text: bold without its markers, code with its backticks.
pub(super) fn flatten(spans: &[Span]) -> String {
    spans
        .iter()
        .map(|s| match s {
            Span::Plain(t) | Span::Strong(t) => t.clone(),
            Span::Code(t) => format!("`{t}`"),
        })
        .collect()
}

fn push_plain(spans: &mut Vec<Span>, text: &str) {
    match spans.last_mut() {
        Some(Span::Plain(last)) => last.push_str(text),
        _ => spans.push(Span::Plain(text.to_owned())),
    }
}

/// pulldown-cmark's events, with their offsets in the whole file, turned into blocks.
pub(super) struct Reader<'a> {
    events: std::vec::IntoIter<(Event<'a>, Range<usize>)>,
    /// Where the parsed text starts in the file.
    base: usize,
    lines: &'a LineIndex,
}

impl<'a> Reader<'a> {
    pub(super) fn new(markdown: &'a str, base: usize, lines: &'a LineIndex) -> Reader<'a> {
        let events: Vec<_> = Parser::new_ext(markdown, Options::empty()).into_offset_iter().collect();
        Reader { events: events.into_iter(), base, lines }
    }

    fn line(&self, range: &Range<usize>) -> usize {
        self.lines.line(self.base + range.start)
    }

    pub(super) fn blocks(&mut self) -> Vec<Block> {
        let mut blocks = Vec::new();
        while let Some((event, range)) = self.events.next() {
            let line = self.line(&range);
            let kind = match event {
                Event::Start(Tag::Heading { level, .. }) => {
                    Kind::Heading(level, flatten(&self.inline()).trim().to_owned())
                }
                Event::Start(Tag::Paragraph) => Kind::Paragraph(self.inline()),
                Event::Start(Tag::List(start)) => Kind::List(self.list(start.is_some())),
                Event::Start(_) => {
                    self.skip();
                    Kind::Other
                }
                _ => Kind::Other,
            };
            blocks.push(Block { line, kind });
        }
        blocks
    }

    /// After `Start(List)`: its items, up to its end.
    fn list(&mut self, ordered: bool) -> List {
        let mut items = Vec::new();
        while let Some((event, range)) = self.events.next() {
            match event {
                Event::Start(Tag::Item) => {
                    let line = self.line(&range);
                    items.push(self.item(line));
                }
                Event::Start(_) => self.skip(),
                Event::End(_) => break,
                _ => {}
            }
        }
        List { ordered, items }
    }

    /// After `Start(Item)`: its text and nested lists, up to its end.
    fn item(&mut self, line: usize) -> Item {
        let mut item = Item { line, head: Vec::new(), lists: Vec::new() };
        while let Some((event, _)) = self.events.next() {
            match event {
                Event::End(_) => break,
                Event::Start(Tag::Paragraph) => {
                    let spans = self.inline();
                    if !item.head.is_empty() {
                        push_plain(&mut item.head, " ");
                    }
                    for span in spans {
                        match span {
                            Span::Plain(t) => push_plain(&mut item.head, &t),
                            span => item.head.push(span),
                        }
                    }
                }
                Event::Start(Tag::List(start)) => item.lists.push(self.list(start.is_some())),
                // Text, or a block that is neither a paragraph nor a list (skipped whole).
                event => self.inline_event(event, &mut item.head),
            }
        }
        item
    }

    /// Inline events up to the end of the element they are in.
    fn inline(&mut self) -> Vec<Span> {
        let mut spans = Vec::new();
        while let Some((event, _)) = self.events.next() {
            if let Event::End(_) = event {
                break;
            }
            self.inline_event(event, &mut spans);
        }
        spans
    }

    /// Adds one inline event's text to `spans`; any other element is skipped whole.
    fn inline_event(&mut self, event: Event<'a>, spans: &mut Vec<Span>) {
        match event {
            Event::Text(t) | Event::InlineHtml(t) | Event::Html(t) | Event::InlineMath(t) => push_plain(spans, &t),
            Event::Code(t) => spans.push(Span::Code(t.into_string())),
            Event::SoftBreak | Event::HardBreak => push_plain(spans, " "),
            Event::Start(Tag::Strong) => {
                let inner = flatten(&self.inline());
                spans.push(Span::Strong(inner));
            }
            Event::Start(Tag::Emphasis | Tag::Strikethrough | Tag::Link { .. } | Tag::Superscript | Tag::Subscript) => {
                for span in self.inline() {
                    match span {
                        Span::Plain(t) => push_plain(spans, &t),
                        span => spans.push(span),
                    }
                }
            }
            Event::Start(_) => self.skip(),
            _ => {}
        }
    }

    /// After a `Start`: everything up to its matching `End`.
    fn skip(&mut self) {
        let mut depth = 1;
        for (event, _) in self.events.by_ref() {
            match event {
                Event::Start(_) => depth += 1,
                Event::End(_) => depth -= 1,
                _ => {}
            }
            if depth == 0 {
                break;
            }
        }
    }
}

/// The text of every item of the lists among `blocks`.
pub(super) fn list_texts(blocks: &[Block]) -> Vec<String> {
    lists(blocks).flat_map(|list| texts(&list.items)).collect()
}

/// The text of every item of `lists`.
pub(super) fn item_texts(lists: &[List]) -> Vec<String> {
    lists.iter().flat_map(|list| texts(&list.items)).collect()
}

/// The items' own texts, the empty ones left out.
fn texts(items: &[Item]) -> impl Iterator<Item = String> + '_ {
    items.iter().map(|i| flatten(&i.head).trim().to_owned()).filter(|t| !t.is_empty())
}

pub(super) fn lists<'a>(blocks: impl IntoIterator<Item = &'a Block>) -> impl Iterator<Item = &'a List> {
    blocks.into_iter().filter_map(|b| match &b.kind {
        Kind::List(list) => Some(list),
        _ => None,
    })
}
