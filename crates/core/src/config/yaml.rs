//! Reading one YAML file into typed (raw) structs with locations, and collecting errors that name
//! the file, line, column and field path, bounded as the protocol's errors are (each key in a path
//! quoted to 128 characters, the path to 256, the message to 1,024), however long the text.

use std::cell::RefCell;
use std::fmt;
use std::path::Path;

use clutch_proto::error::{MESSAGE_MAX, PATH_MAX, bound_text, quote};
use serde::de::{Deserialize, Deserializer, MapAccess, Visitor};
use serde_saphyr::{Location, MessageFormatter as _, Spanned};

use super::Error;

/// A YAML mapping kept in file order with the location of each key, so that errors about a key (an
/// agent id, a role name) point at the key itself. `null` (a key with nothing after it) is empty.
#[derive(Debug)]
pub struct Entries<V>(pub Vec<(Spanned<String>, V)>);

impl<V> Default for Entries<V> {
    fn default() -> Self {
        Entries(Vec::new())
    }
}

thread_local! {
    /// The keys of the [`Entries`] a failed deserialization unwound through, innermost first. The
    /// path tracker cannot see keys read with their location, so it writes `?` for them; these fill
    /// the gaps.
    static UNWOUND_KEYS: RefCell<Vec<String>> = const { RefCell::new(Vec::new()) };
}

impl<'de, V: Deserialize<'de>> Deserialize<'de> for Entries<V> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct EntriesVisitor<V>(std::marker::PhantomData<V>);

        impl<'de, V: Deserialize<'de>> Visitor<'de> for EntriesVisitor<V> {
            type Value = Entries<V>;

            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a mapping")
            }

            fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Entries<V>, A::Error> {
                let mut entries = Vec::new();
                while let Some(key) = map.next_key::<Spanned<String>>()? {
                    match map.next_value() {
                        Ok(value) => entries.push((key, value)),
                        Err(e) => {
                            UNWOUND_KEYS.with(|k| k.borrow_mut().push(key.value));
                            return Err(e);
                        }
                    }
                }
                Ok(Entries(entries))
            }

            fn visit_unit<E>(self) -> Result<Entries<V>, E> {
                Ok(Entries::default())
            }

            fn visit_none<E>(self) -> Result<Entries<V>, E> {
                Ok(Entries::default())
            }
        }

        d.deserialize_map(EntriesVisitor(std::marker::PhantomData))
    }
}

/// Parses `text` (the contents of `file`) into `T`. The first structural error (bad YAML, an unknown
/// field, a wrong type) ends the parse; it is returned with its location and field path.
pub fn parse<T: for<'de> Deserialize<'de>>(file: &Path, text: &str) -> Result<T, Error> {
    UNWOUND_KEYS.with(|k| k.borrow_mut().clear());
    let path = RefCell::new(None);
    let options = serde_saphyr::options! { with_snippet: false };
    let result = serde_saphyr::with_deserializer_from_str_with_options(text, options, |de| {
        serde_path_to_error::deserialize::<_, T>(de).map_err(|e| {
            *path.borrow_mut() = Some(e.path().clone());
            e.into_inner()
        })
    });
    let e = match result {
        Ok(value) => return Ok(value),
        Err(e) => e,
    };
    let mut keys = UNWOUND_KEYS.with(|k| std::mem::take(&mut *k.borrow_mut()));
    let mut field = String::new();
    if let Some(path) = path.into_inner() {
        for segment in path.iter() {
            use serde_path_to_error::Segment;
            let name = match segment {
                Segment::Seq { index } => {
                    field.push_str(&format!("[{index}]"));
                    continue;
                }
                // A located value (`Spanned`) is read as a map whose `value` member holds the value.
                Segment::Map { key } if key == "value" => continue,
                Segment::Map { key } => key.clone(),
                Segment::Enum { variant } => variant.clone(),
                Segment::Unknown => match keys.pop() {
                    Some(key) => key,
                    None => continue,
                },
            };
            if !field.is_empty() {
                field.push('.');
            }
            field.push_str(&quote(&name));
        }
    }
    // One line per error: control characters (none are expected) become spaces.
    let message: String = serde_saphyr::UserMessageFormatter
        .format_message(e.without_snippet())
        .chars()
        .map(|c| if c.is_control() { ' ' } else { c })
        .collect();
    let location = e.location();
    Err(Error {
        file: file.to_path_buf(),
        line: location.map_or(0, |l| l.line()),
        column: location.map_or(0, |l| l.column()),
        path: bound_text(&field, PATH_MAX).into_owned(),
        message: bound_text(&friendlier(&message), MESSAGE_MAX).into_owned(),
    })
}

/// Rewords the few deserializer messages that name Rust types.
fn friendlier(message: &str) -> String {
    match message {
        "invalid u64" | "invalid u32" | "invalid u16" | "invalid usize" => "must be a whole number from 0".into(),
        "invalid f64" | "invalid f32" | "invalid floating point" => "must be a number".into(),
        "invalid boolean" | "invalid bool" => "must be true or false".into(),
        "expected string scalar" => "must be a string".into(),
        "expected mapping start" => "must be a mapping (`key: value` lines or `{key: value}`)".into(),
        "expected sequence start" => "must be a list (`- item` lines or `[item, item]`)".into(),
        other => other.to_owned(),
    }
}

/// Collects the errors of one file.
pub struct Report<'a> {
    pub file: &'a Path,
    pub errors: Vec<Error>,
}

impl<'a> Report<'a> {
    pub fn new(file: &'a Path) -> Self {
        Report { file, errors: Vec::new() }
    }

    /// An error at `location` about the field at `path`.
    pub fn at(&mut self, location: &Location, path: impl fmt::Display, message: impl fmt::Display) {
        self.errors.push(Error {
            file: self.file.to_path_buf(),
            line: location.line(),
            column: location.column(),
            path: bound_text(&path.to_string(), PATH_MAX).into_owned(),
            message: bound_text(&message.to_string(), MESSAGE_MAX).into_owned(),
        });
    }
}
