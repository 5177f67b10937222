//! What the components' `Options` share as configuration: durations as people write them (`"30s"`,
//! `"500ms"`, `"5m"`, `"1h 30m"`, `"90d"`), read and written back the same way, and the error a
//! component's check of its options gives. A component's `Options` is its section of the config
//! file as it is (`[engine]` is `engine::Options`): its fields are the keys, its `Default` the
//! defaults, its doc comments the reference, its `check` the rules beyond types.

use std::time::Duration;

use serde::de::Error as _;
use serde::{Deserialize, Deserializer, Serializer};

/// A rule one option breaks: `offline_after` must be at least `stale_after`.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("`{key}`: {why}")]
pub struct Invalid {
    /// The key within its section (`offline_after`).
    pub key: &'static str,
    pub why: String,
}

impl Invalid {
    pub fn new(key: &'static str, why: impl Into<String>) -> Invalid {
        Invalid { key, why: why.into() }
    }
}

/// `value` must be at least 1.
pub fn positive(key: &'static str, value: u64) -> Result<(), Invalid> {
    if value == 0 { Err(Invalid::new(key, "must be at least 1")) } else { Ok(()) }
}

/// `value` must be longer than zero.
pub fn nonzero(key: &'static str, value: Duration) -> Result<(), Invalid> {
    if value.is_zero() { Err(Invalid::new(key, "must be longer than 0s")) } else { Ok(()) }
}

/// A duration as text (`serde(with = "clutch_core::options::duration")`).
pub mod duration {
    use super::*;

    pub fn serialize<S: Serializer>(value: &Duration, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&text(*value))
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Duration, D::Error> {
        parse(&String::deserialize(d)?).map_err(D::Error::custom)
    }
}

/// An optional duration as text; absent: none.
pub mod optional {
    use super::*;

    pub fn serialize<S: Serializer>(value: &Option<Duration>, s: S) -> Result<S::Ok, S::Error> {
        match value {
            Some(value) => s.serialize_str(&text(*value)),
            None => s.serialize_none(),
        }
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Option<Duration>, D::Error> {
        Option::<String>::deserialize(d)?.map(|t| parse(&t)).transpose().map_err(D::Error::custom)
    }
}

/// The JSON Schema of a duration field (`schemars(with = "clutch_core::options::Text")`): a string
/// with `format: duration`, which the config loader reads for its environment variables and the
/// deprecated `_ms`/`_secs`/`_days` keys.
pub struct Text;

impl schemars::JsonSchema for Text {
    fn schema_name() -> std::borrow::Cow<'static, str> {
        "Duration".into()
    }

    fn json_schema(_: &mut schemars::SchemaGenerator) -> schemars::Schema {
        schemars::json_schema!({
            "type": "string",
            "format": "duration",
            "description": "A duration: a number and a unit (ms, s, m, h, d), e.g. \"30s\", \"500ms\", \"1h 30m\".",
            "examples": ["30s"],
        })
    }

    fn inline_schema() -> bool {
        true
    }
}

/// `30s`, `5m`, `1h 30m`, `500ms`: what [`parse`] reads.
pub fn text(value: Duration) -> String {
    humantime::format_duration(value).to_string()
}

/// A duration people write: a number and a unit, or several (`1h 30m`). The error says why, in
/// words that quote a bounded prefix of `text`.
pub fn parse(text: &str) -> Result<Duration, String> {
    humantime::parse_duration(text.trim()).map_err(|e| {
        let shown = clutch_proto::error::quote(text);
        format!("`{shown}` is not a duration ({e}); write a number and a unit, e.g. \"30s\", \"500ms\", \"5m\"")
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations_read_as_written_and_write_back_the_same() {
        for (written, expected) in [
            ("30s", Duration::from_secs(30)),
            ("500ms", Duration::from_millis(500)),
            ("5m", Duration::from_secs(300)),
            ("1h 30m", Duration::from_secs(5400)),
            ("90d", Duration::from_secs(90 * 86_400)),
            (" 2s ", Duration::from_secs(2)),
        ] {
            assert_eq!(parse(written).unwrap(), expected, "{written}");
            assert_eq!(parse(&text(expected)).unwrap(), expected);
        }
        assert_eq!(text(Duration::from_secs(90)), "1m 30s");
        for bad in ["30", "thirty seconds", "", "5 parsecs"] {
            let e = parse(bad).unwrap_err();
            assert!(e.contains("is not a duration") && e.contains("\"30s\""), "{bad}: {e}");
        }
    }
}
