//! A small Rust lexer for the rules that read code rather than lines: comments (doc comments and
//! their doc-tests included) are dropped and every string literal is one token, so that neither can
//! pass for code, and the tokens of `#[cfg(test)]` items are marked.

/// What a token is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Kind {
    /// A name or a keyword (`crate`, `use`, `r#type` as `type`).
    Ident,
    /// A string literal of any form (`"..."`, `r#"..."#`, `b"..."`), its text unescaped only as far
    /// as dropping the quotes.
    Str,
    /// A number or a character literal.
    Literal,
    Lifetime,
    /// Punctuation: `::`, `=>`, `==`, `!=`, `->`, `..`, `&&`, `||` as one token each, else one
    /// character.
    Punct,
}

#[derive(Debug, Clone)]
pub(super) struct Token {
    pub(super) kind: Kind,
    pub(super) text: String,
    /// 1-based.
    pub(super) line: usize,
    /// Inside an item under `#[cfg(test)]` (or a file that is all test code).
    pub(super) test: bool,
}

impl Token {
    pub(super) fn is(&self, text: &str) -> bool {
        matches!(self.kind, Kind::Ident | Kind::Punct) && self.text == text
    }

    pub(super) fn ident(&self) -> Option<&str> {
        (self.kind == Kind::Ident).then_some(self.text.as_str())
    }
}

/// The tokens of `text`, with the items under `#[cfg(test)]` marked.
pub(super) fn lex(text: &str) -> Vec<Token> {
    let mut tokens = Lexer { chars: text.chars().collect(), at: 0, line: 1, out: Vec::new() }.run();
    mark_tests(&mut tokens);
    tokens
}

struct Lexer {
    chars: Vec<char>,
    at: usize,
    line: usize,
    out: Vec<Token>,
}

impl Lexer {
    fn run(mut self) -> Vec<Token> {
        while let Some(c) = self.peek(0) {
            let line = self.line;
            match c {
                '\n' => {
                    self.line += 1;
                    self.at += 1;
                }
                c if c.is_whitespace() => self.at += 1,
                '/' if self.peek(1) == Some('/') => {
                    while self.peek(0).is_some_and(|c| c != '\n') {
                        self.at += 1;
                    }
                }
                '/' if self.peek(1) == Some('*') => self.block_comment(),
                '"' => {
                    self.at += 1;
                    let text = self.string();
                    self.push(Kind::Str, text, line);
                }
                '\'' => self.quote(line),
                c if c.is_alphabetic() || c == '_' => self.word(line),
                c if c.is_ascii_digit() => {
                    let start = self.at;
                    self.take_while(|c| c.is_alphanumeric() || c == '_');
                    if self.peek(0) == Some('.') && self.peek(1).is_some_and(|c| c.is_ascii_digit()) {
                        self.at += 1;
                        self.take_while(|c| c.is_alphanumeric() || c == '_');
                    }
                    let text = self.chars[start..self.at].iter().collect();
                    self.push(Kind::Literal, text, line);
                }
                _ => {
                    let pair: String = self.chars[self.at..(self.at + 2).min(self.chars.len())].iter().collect();
                    let text = if ["::", "=>", "==", "!=", "->", "..", "&&", "||"].contains(&pair.as_str()) {
                        pair
                    } else {
                        c.to_string()
                    };
                    self.at += text.chars().count();
                    self.push(Kind::Punct, text, line);
                }
            }
        }
        self.out
    }

    fn peek(&self, ahead: usize) -> Option<char> {
        self.chars.get(self.at + ahead).copied()
    }

    fn push(&mut self, kind: Kind, text: String, line: usize) {
        self.out.push(Token { kind, text, line, test: false });
    }

    fn take_while(&mut self, keep: impl Fn(char) -> bool) {
        while self.peek(0).is_some_and(&keep) {
            self.at += 1;
        }
    }

    fn bump(&mut self) {
        if self.peek(0) == Some('\n') {
            self.line += 1;
        }
        self.at += 1;
    }

    /// `/* ... */`, nested ones included.
    fn block_comment(&mut self) {
        let mut depth = 0;
        while let Some(c) = self.peek(0) {
            if c == '/' && self.peek(1) == Some('*') {
                depth += 1;
                self.at += 2;
            } else if c == '*' && self.peek(1) == Some('/') {
                depth -= 1;
                self.at += 2;
                if depth == 0 {
                    return;
                }
            } else {
                self.bump();
            }
        }
    }

    /// The rest of a string after its opening quote, escapes skipped over.
    fn string(&mut self) -> String {
        let start = self.at;
        while let Some(c) = self.peek(0) {
            match c {
                '"' => break,
                '\\' => {
                    self.bump();
                    self.bump();
                }
                _ => self.bump(),
            }
        }
        let text = self.chars[start..self.at.min(self.chars.len())].iter().collect();
        self.at += 1;
        text
    }

    /// The rest of a raw string after `r`, `#`s included: it ends at `"` and as many `#`s.
    fn raw_string(&mut self) -> String {
        let hashes = self.chars[self.at..].iter().take_while(|c| **c == '#').count();
        self.at += hashes + 1;
        let start = self.at;
        let close: Vec<char> = std::iter::once('"').chain(std::iter::repeat_n('#', hashes)).collect();
        while self.at < self.chars.len() && !self.chars[self.at..].starts_with(&close) {
            self.bump();
        }
        let text = self.chars[start..self.at.min(self.chars.len())].iter().collect();
        self.at += close.len();
        text
    }

    /// A character literal (`'x'`, `'\n'`, `'\u{1F600}'`) or a lifetime (`'a`).
    fn quote(&mut self, line: usize) {
        if self.peek(1) == Some('\\') {
            let start = self.at;
            self.at += 3;
            self.take_while(|c| c != '\'');
            self.at += 1;
            let text = self.chars[start..self.at.min(self.chars.len())].iter().collect();
            self.push(Kind::Literal, text, line);
        } else if self.peek(2) == Some('\'') {
            let text = self.chars[self.at..self.at + 3].iter().collect();
            self.at += 3;
            self.push(Kind::Literal, text, line);
        } else {
            let start = self.at;
            self.at += 1;
            self.take_while(|c| c.is_alphanumeric() || c == '_');
            let text = self.chars[start..self.at].iter().collect();
            self.push(Kind::Lifetime, text, line);
        }
    }

    /// A name, or a string with a prefix (`b"`, `r#"`, `br"`, `c"`), or a raw name (`r#type`).
    fn word(&mut self, line: usize) {
        let start = self.at;
        self.take_while(|c| c.is_alphanumeric() || c == '_');
        let word: String = self.chars[start..self.at].iter().collect();
        let raw = matches!(word.as_str(), "r" | "br" | "cr");
        match self.peek(0) {
            Some('"') if raw => {
                let text = self.raw_string();
                self.push(Kind::Str, text, line);
            }
            Some('"') if matches!(word.as_str(), "b" | "c") => {
                self.at += 1;
                let text = self.string();
                self.push(Kind::Str, text, line);
            }
            Some('#') if raw && self.chars[self.at..].iter().find(|c| **c != '#') == Some(&'"') => {
                let text = self.raw_string();
                self.push(Kind::Str, text, line);
            }
            Some('#') if word == "r" && self.peek(1).is_some_and(|c| c.is_alphabetic() || c == '_') => {
                self.at += 1;
                let start = self.at;
                self.take_while(|c| c.is_alphanumeric() || c == '_');
                let text = self.chars[start..self.at].iter().collect();
                self.push(Kind::Ident, text, line);
            }
            Some('\'') if word == "b" => self.quote(line),
            _ => self.push(Kind::Ident, word, line),
        }
    }
}

/// The tokens as code: joined, with a space only between two names (`..<T as Default>::default()`).
pub(super) fn show(tokens: &[Token]) -> String {
    let mut out = String::new();
    for (i, t) in tokens.iter().enumerate() {
        if i > 0 && t.kind == Kind::Ident && tokens[i - 1].kind == Kind::Ident {
            out.push(' ');
        }
        match t.kind {
            Kind::Str => out.push_str(&format!("{:?}", t.text)),
            _ => out.push_str(&t.text),
        }
    }
    out
}

/// Marks the tokens of every item under `#[cfg(test)]` (an inner `#![cfg(test)]` marks them all).
fn mark_tests(tokens: &mut [Token]) {
    let mut i = 0;
    while i < tokens.len() {
        match cfg_test(tokens, i) {
            Some((true, _)) => {
                tokens.iter_mut().for_each(|t| t.test = true);
                return;
            }
            Some((false, after)) => {
                let end = item_end(tokens, after);
                tokens[i..end].iter_mut().for_each(|t| t.test = true);
                i = end;
            }
            None => i += 1,
        }
    }
}

/// Whether an attribute `#[cfg(test)]` (or `#[cfg(all(test, ...))]`) starts at `i`: whether it is
/// an inner one, and the index after it.
fn cfg_test(tokens: &[Token], i: usize) -> Option<(bool, usize)> {
    if !tokens[i].is("#") {
        return None;
    }
    let inner = tokens.get(i + 1).is_some_and(|t| t.is("!"));
    let open = i + 1 + usize::from(inner);
    if !tokens.get(open).is_some_and(|t| t.is("[")) {
        return None;
    }
    let close = matching(tokens, open)?;
    let text: String = tokens[open + 1..close].iter().map(|t| t.text.as_str()).collect();
    (text == "cfg(test)" || text.starts_with("cfg(all(test,")).then_some((inner, close + 1))
}

/// The index of the bracket that closes the one at `open`.
pub(super) fn matching(tokens: &[Token], open: usize) -> Option<usize> {
    let mut depth = 0usize;
    for (j, t) in tokens.iter().enumerate().skip(open) {
        if t.kind != Kind::Punct {
            continue;
        }
        match t.text.as_str() {
            "(" | "[" | "{" => depth += 1,
            ")" | "]" | "}" => {
                depth -= 1;
                if depth == 0 {
                    return Some(j);
                }
            }
            _ => {}
        }
    }
    None
}

/// The index after the item that starts at `i` (after its attributes): its `;`, or the `}` of its
/// body, or the end of the block it is the last thing in.
pub(super) fn item_end(tokens: &[Token], mut i: usize) -> usize {
    while tokens.get(i).is_some_and(|t| t.is("#")) && tokens.get(i + 1).is_some_and(|t| t.is("[")) {
        match matching(tokens, i + 1) {
            Some(close) => i = close + 1,
            None => return tokens.len(),
        }
    }
    let mut depth = 0usize;
    for (j, t) in tokens.iter().enumerate().skip(i) {
        if t.kind != Kind::Punct {
            continue;
        }
        match t.text.as_str() {
            "(" | "[" | "{" => depth += 1,
            ")" | "]" | "}" if depth == 0 => return j,
            ")" | "]" => depth -= 1,
            "}" => {
                depth -= 1;
                if depth == 0 {
                    return j + 1;
                }
            }
            ";" if depth == 0 => return j + 1,
            _ => {}
        }
    }
    tokens.len()
}

#[test]
fn the_lexer_drops_comments_and_keeps_literals_whole() {
    let tokens = lex(concat!(
        "//! crate::a::X in a doc line\n",
        "/// ```\n/// use crate::b::Y;\n/// ```\n",
        "fn f<'a>(c: char) -> &'a str { /* crate::c /* nested */ */ let _ = ('\"', '\\'', b'x');\n",
        "  r#\"crate::d \"quoted\"\"# }\n",
        "#[cfg(test)]\nmod tests { use super::*; }\n",
        "const S: &str = \"a \\\" b\"; let r#type = 1..=2;",
    ));
    let text = |keep: &dyn Fn(&Token) -> bool| {
        tokens.iter().filter(|t| keep(t)).map(|t| t.text.as_str()).collect::<Vec<_>>().join(" ")
    };
    assert_eq!(
        text(&|t| t.kind != Kind::Str && !t.test),
        "fn f < 'a > ( c : char ) -> & 'a str { let _ = ( '\"' , '\\'' , 'x' ) ; } const S : & str = ; let type = 1 .. = 2 ;"
    );
    let strings: Vec<(&str, usize)> =
        tokens.iter().filter(|t| t.kind == Kind::Str).map(|t| (t.text.as_str(), t.line)).collect();
    assert_eq!(strings, [(r#"crate::d "quoted""#, 6), (r#"a \" b"#, 9)]);
    assert_eq!(text(&|t| t.test), "# [ cfg ( test ) ] mod tests { use super :: * ; }");
    assert_eq!(show(&lex("..<A as Default>::default()")), "..<A as Default>::default()");
}
