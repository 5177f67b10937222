//! How events look on a terminal: one line each (`seq  time  type  from → to  summary`), coloured
//! with plain ANSI codes only when the output is a terminal and `NO_COLOR` is unset.

use std::io::{IsTerminal, Write};

use serde_json::Value;

/// Longest summary shown, in characters.
const SUMMARY_MAX: usize = 80;

/// Whether to colour what goes to stdout.
pub fn stdout_color() -> bool {
    std::io::stdout().is_terminal() && no_color_unset()
}

/// Whether to colour what goes to stderr.
pub fn stderr_color() -> bool {
    std::io::stderr().is_terminal() && no_color_unset()
}

/// Writes `text` to stdout as it is, and flushes.
pub fn print(text: &str) -> anyhow::Result<()> {
    let mut stdout = std::io::stdout().lock();
    stdout.write_all(text.as_bytes())?;
    stdout.flush()?;
    Ok(())
}

/// `NO_COLOR` counts when present and not empty (no-color.org).
fn no_color_unset() -> bool {
    std::env::var_os("NO_COLOR").is_none_or(|v| v.is_empty())
}

/// One event (the wire JSON, `seq` first) as one human-readable line, without the newline.
pub fn event_line(event: &Value, color: bool) -> String {
    let seq = event.get("seq").and_then(Value::as_u64).map_or_else(|| "?".to_owned(), |s| s.to_string());
    let time = event.get("ts").and_then(Value::as_str).map_or("", clock);
    let kind = event.get("type").and_then(Value::as_str).unwrap_or("?");
    let from = event.pointer("/from/agent_id").and_then(Value::as_str).unwrap_or("?");
    let to: Vec<&str> = event
        .get("to")
        .and_then(Value::as_array)
        .map(|to| to.iter().filter_map(|r| r.get("agent_id").and_then(Value::as_str)).collect())
        .unwrap_or_default();
    let to = if to.is_empty() { "*".to_owned() } else { to.join(",") };
    let summary = event.get("payload").map(summary).unwrap_or_default();

    let seq = format!("{seq:>6}");
    let kind_padded = format!("{kind:<16}");
    if color {
        let code = kind_color(kind);
        format!("\x1b[2m{seq}  {time:<12}\x1b[0m  \x1b[{code}m{kind_padded}\x1b[0m  {from} → {to}  {summary}")
    } else {
        format!("{seq}  {time:<12}  {kind_padded}  {from} → {to}  {summary}")
    }
    .trim_end()
    .to_owned()
}

/// `2026-04-01T12:34:56.789Z` → `12:34:56.789`.
pub fn clock(ts: &str) -> &str {
    let Some((_, time)) = ts.split_once('T') else { return ts };
    let end = time.find(['Z', 'z', '+', '-']).unwrap_or(time.len());
    let time = &time[..end];
    time.get(..12).unwrap_or(time)
}

/// The payload in a few words: a well-known text field, else its compact JSON.
fn summary(payload: &Value) -> String {
    const TEXT_FIELDS: &[&str] = &["text", "message", "summary", "goal", "status", "error", "reason"];
    let text = TEXT_FIELDS
        .iter()
        .find_map(|f| payload.get(*f).and_then(Value::as_str).map(str::to_owned))
        .unwrap_or_else(|| match payload {
            Value::Object(map) if map.is_empty() => String::new(),
            other => other.to_string(),
        });
    one_line(&text, SUMMARY_MAX)
}

/// `text` on one line (control characters as spaces), cut to `max` characters with `…`.
pub fn one_line(text: &str, max: usize) -> String {
    let flat: String = text.chars().map(|c| if c.is_control() { ' ' } else { c }).collect();
    if flat.chars().count() > max {
        let cut: String = flat.chars().take(max.saturating_sub(1)).collect();
        format!("{cut}…")
    } else {
        flat
    }
}

/// How long before `now_ms` (ms since the epoch) the RFC 3339 time `ts` was: `12s ago`, `3m ago`,
/// `5h ago`, `4d ago`; `ts` itself when it does not parse.
pub fn age(ts: &str, now_ms: i64) -> String {
    let at = clutch_store::lists::ts_ms(ts);
    if at == 0 {
        return ts.to_owned();
    }
    let secs = (now_ms - at).max(0) / 1000;
    match secs {
        0..60 => format!("{secs}s ago"),
        60..3600 => format!("{}m ago", secs / 60),
        3600..172_800 => format!("{}h ago", secs / 3600),
        _ => format!("{}d ago", secs / 86_400),
    }
}

/// The ANSI colour of a message type's family.
pub fn kind_color(kind: &str) -> &'static str {
    if kind.ends_with(".error") || kind.ends_with(".failure") || kind.ends_with(".timeout") {
        return "31";
    }
    match kind.split('.').next().unwrap_or("") {
        "task" => "33",
        "chat" => "36",
        "tool" => "35",
        "agent" => "32",
        "routing" => "34",
        _ => "0",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_line_per_event() {
        let e = serde_json::json!({
            "seq": 42, "ts": "2026-04-01T12:34:56.789123Z", "type": "task.request",
            "from": {"agent_id": "user:ada"}, "to": [{"agent_id": "agent:ken"}, {"agent_id": "group:ops"}],
            "payload": {"goal": "summarise\nthe report"}
        });
        assert_eq!(
            event_line(&e, false),
            "    42  12:34:56.789  task.request      user:ada → agent:ken,group:ops  summarise the report"
        );
        let colored = event_line(&e, true);
        assert!(colored.contains("\x1b[33mtask.request"), "{colored:?}");
    }

    #[test]
    fn ages_in_the_largest_whole_unit() {
        let now = clutch_store::lists::ts_ms("2026-04-03T12:00:00Z");
        let age = |ts: &str| age(ts, now);
        assert_eq!(age("2026-04-03T11:59:48.500Z"), "11s ago");
        assert_eq!(age("2026-04-03T11:57:00Z"), "3m ago");
        assert_eq!(age("2026-04-03T07:00:00Z"), "5h ago");
        assert_eq!(age("2026-04-01T11:00:00Z"), "2d ago");
        assert_eq!(age("2026-04-03T12:00:05Z"), "0s ago", "a clock a little ahead");
        assert_eq!(age("yesterday"), "yesterday");
    }

    #[test]
    fn summaries_fall_back_to_json_and_truncate() {
        assert_eq!(summary(&serde_json::json!({"n": 1})), r#"{"n":1}"#);
        assert_eq!(summary(&serde_json::json!({})), "");
        let long = summary(&serde_json::json!({"text": "x".repeat(200)}));
        assert_eq!(long.chars().count(), SUMMARY_MAX);
        assert!(long.ends_with('…'));
    }
}
