//! Plain-text tables for the client commands' human output: each column padded to its widest cell,
//! two spaces between columns; headers dimmed and cells coloured only when colour is on.

/// A table being filled row by row.
#[derive(Debug, Default)]
pub struct Table {
    header: Vec<&'static str>,
    rows: Vec<Vec<Cell>>,
}

/// One cell: its text and, when colour is on, an ANSI SGR code to show it in.
#[derive(Debug, Clone)]
pub struct Cell {
    text: String,
    color: Option<&'static str>,
}

impl Cell {
    pub fn new(text: impl Into<String>) -> Cell {
        Cell { text: text.into(), color: None }
    }

    pub fn colored(text: impl Into<String>, color: Option<&'static str>) -> Cell {
        Cell { text: text.into(), color }
    }
}

impl<T: Into<String>> From<T> for Cell {
    fn from(text: T) -> Cell {
        Cell::new(text)
    }
}

impl Table {
    /// A table with these column titles; none for a table without a header line.
    pub fn new(header: &[&'static str]) -> Table {
        Table { header: header.to_vec(), rows: Vec::new() }
    }

    pub fn row(&mut self, cells: Vec<Cell>) {
        self.rows.push(cells);
    }

    /// The lines of the table, each ending with a newline, without trailing spaces.
    pub fn render(&self, color: bool) -> String {
        let columns = self.rows.iter().map(Vec::len).chain([self.header.len()]).max().unwrap_or(0);
        let mut widths = vec![0; columns];
        let header: Vec<Cell> = self.header.iter().map(|h| Cell::colored(*h, Some("2"))).collect();
        let lines = (!header.is_empty()).then_some(&header).into_iter().chain(&self.rows);
        for row in lines.clone() {
            for (i, cell) in row.iter().enumerate() {
                widths[i] = widths[i].max(width(&cell.text));
            }
        }
        let mut out = String::new();
        for row in lines {
            let mut line = String::new();
            for (i, cell) in row.iter().enumerate() {
                if i > 0 {
                    line.push_str("  ");
                }
                let pad = if i + 1 == row.len() { 0 } else { widths[i] - width(&cell.text) };
                line.push_str(&paint(&cell.text, cell.color, color));
                line.extend(std::iter::repeat_n(' ', pad));
            }
            out.push_str(line.trim_end());
            out.push('\n');
        }
        out
    }
}

/// `text` in the ANSI SGR `code` when colour is on.
pub fn paint(text: &str, code: Option<&str>, color: bool) -> String {
    match code {
        Some(code) if color && !text.is_empty() => format!("\x1b[{code}m{text}\x1b[0m"),
        _ => text.to_owned(),
    }
}

/// Columns `text` takes on a terminal (every character we print is one column wide).
pub fn width(text: &str) -> usize {
    text.chars().count()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn columns_are_padded_to_the_widest_cell() {
        let mut t = Table::new(&["NAME", "STATE"]);
        t.row(vec!["agent:ken".into(), Cell::colored("online", Some("32"))]);
        t.row(vec!["└── x".into(), "".into()]);
        assert_eq!(t.render(false), "NAME       STATE\nagent:ken  online\n└── x\n");
        let colored = t.render(true);
        assert!(colored.starts_with("\x1b[2mNAME\x1b[0m       \x1b[2mSTATE\x1b[0m\n"), "{colored:?}");
        assert!(colored.contains("agent:ken  \x1b[32monline\x1b[0m\n"), "{colored:?}");
    }

    #[test]
    fn a_table_without_header() {
        let mut t = Table::new(&[]);
        t.row(vec!["a".into(), "b".into()]);
        t.row(vec!["ccc".into(), "d".into()]);
        assert_eq!(t.render(false), "a    b\nccc  d\n");
    }
}
