//! How a turn ended, as the runner reads it back from the log: its text or its failure, and the
//! structured answer a turn was asked for (a verdict, a vote), read and checked against its schema.
//!
//! Verdicts and votes are read from structure only ([`Outcome::read`]: the turn's `structured`, a text
//! that is the JSON, or a text that is nothing but the word or number), validated against the turn's
//! `output_schema`; an unreadable one is asked for once more in a new turn (`turns`), then counts as a
//! discrepancy or an abstention.

use clutch_proto::{Message, MessageType};
use serde_json::{Map, Value};

/// What reads a structured answer in a text that is nothing but one (a person typing `CONSENSUS`).
pub(super) type Bare = fn(&str) -> Option<Value>;

/// How a turn ended.
#[derive(Debug, Clone)]
pub(super) enum Outcome {
    Done { text: String, payload: Map<String, Value> },
    Failed { code: String, message: String },
}

impl Outcome {
    pub(super) fn of(message: &Message) -> Option<Outcome> {
        let p = &message.payload;
        let text = |k: &str| p.get(k).and_then(Value::as_str).map(str::to_owned);
        match message.kind {
            MessageType::TaskResult => Some(Outcome::Done {
                text: ["text", "summary", "answer", "result"]
                    .iter()
                    .find_map(|k| text(k))
                    .unwrap_or_else(|| Value::Object(p.clone()).to_string()),
                payload: p.clone(),
            }),
            MessageType::TaskError | MessageType::TaskTimeout | MessageType::TaskCancel => Some(Outcome::Failed {
                code: text("code").unwrap_or_else(|| message.kind.as_str().to_uppercase().replace('.', "_")),
                message: text("message").or_else(|| text("reason")).unwrap_or_default(),
            }),
            _ => None,
        }
    }

    pub(super) fn text(&self) -> Option<&str> {
        match self {
            Outcome::Done { text, .. } => Some(text),
            Outcome::Failed { .. } => None,
        }
    }

    /// The answer as the value `schema` describes, validated: the turn's `structured` result (an
    /// LLM agent's `answer` tool), else its text when it is that JSON, else what `bare` reads in a
    /// text that is nothing but one answer (a person typing `CONSENSUS`, `VOTE 2`). Prose around a
    /// word is never read.
    pub(super) fn read(&self, schema: &Value, bare: Bare) -> Read {
        let Outcome::Done { text, payload } = self else { return Read::Missing { timed_out: false } };
        let given = payload
            .get("structured")
            .cloned()
            .or_else(|| crate::work::json_in(text).filter(Value::is_object))
            .or_else(|| bare(text));
        let Some(value) = given else {
            let why = payload.get("structured_error").and_then(Value::as_str).map_or_else(
                || "it is prose, not the JSON asked for".to_owned(),
                |e| format!("it did not fit the schema ({e})"),
            );
            return Read::Unreadable(why);
        };
        match crate::work::fits(schema, &value) {
            Ok(()) => Read::Given(value),
            Err(why) => Read::Unreadable(format!("it did not fit the schema ({why})")),
        }
    }
}

/// A structured answer, as read.
#[derive(Debug, Clone)]
pub(super) enum Read {
    Given(Value),
    /// An answer came that does not parse or fit, and why.
    Unreadable(String),
    /// No answer: the turn failed, or (`timed_out`) was not waited for any longer.
    Missing {
        timed_out: bool,
    },
}
