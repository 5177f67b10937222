//! Why a position file is refused, and how a refusal quotes what it found.

/// Why a position file was refused: `FILE:LINE: expected ...` (line 0: the file or directory as a
/// whole could not be read, shown as `FILE: expected ...`).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{file}{}: expected {expected}", if *line == 0 { String::new() } else { format!(":{line}") })]
pub struct Error {
    pub file: String,
    pub line: usize,
    pub expected: String,
}

/// A problem: its line and what was expected.
pub(super) type Problem = (usize, String);

/// At most 40 characters of what was found, for an error.
pub(super) fn clip(s: &str) -> String {
    match s.char_indices().nth(40) {
        Some((i, _)) => format!("{}…", &s[..i]),
        None => s.to_owned(),
    }
}
