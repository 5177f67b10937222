//! The configuration reference (`docs/config/reference.md`), written from the config types' JSON
//! Schema and defaults, so that every key `clutch.toml` takes is documented once, by its field: a test
//! fails when the checked-in file differs (`UPDATE_DOCS=1` rewrites it).

use serde_json::Value;

use crate::config::{self, Config};

/// Where the reference is kept, from the workspace root.
#[cfg(test)]
const PATH: &str = "docs/config/reference.md";

/// The reference, as Markdown.
pub fn render() -> String {
    let schema = schemars::schema_for!(Config).to_value();
    let defaults = serde_json::to_value(Config::default()).unwrap_or(Value::Null);
    let env: Vec<String> = config::env_keys();
    let mut doc = Reference { root: &schema, env: &env, out: String::new() };
    doc.out.push_str(
        "# `clutch.toml` reference\n\n\
         <!-- Written from the config types (crates/clutch/src/reference.rs); do not edit. After a change to them:\n     \
         UPDATE_DOCS=1 cargo test -p clutch --bin clutch reference -->\n\n\
         Every key the daemon's configuration takes. Layers, each over the one before: the defaults below, \
         then `clutch.toml` (the working directory's, or `--config FILE`), then `CLUTCH_*` variables (the \
         *env* column; lists are comma-separated, paths separated like `PATH`, an empty value unsets an \
         optional key), then flags (`clutch serve --help`). A *duration* is a number and a unit, or \
         several: `\"500ms\"`, `\"30s\"`, `\"5m\"`, `\"1h 30m\"`, `\"90d\"` (the keys of old in a unit, \
         `accept_timeout_ms = 30000`, are still read, with a warning). `clutch config dump` prints the \
         effective configuration (secrets masked). The policy files (`org.yaml`, \
         `workflows.yaml`) live in the directory `config_dir` (or `--config-dir DIR`) names: see \
         `docs/config/org.yaml` and `docs/config/workflows.yaml`; `clutch config check` checks them.\n",
    );
    doc.section("Top level", &schema, &defaults, "", true);
    doc.out.pop();
    doc.out.push('\n');
    doc.out
}

struct Reference<'a> {
    root: &'a Value,
    env: &'a [String],
    out: String,
}

impl Reference<'_> {
    fn resolve(&self, schema: &Value) -> Value {
        match schema.get("$ref").and_then(Value::as_str).and_then(|r| r.strip_prefix("#/$defs/")) {
            Some(name) => self.root["$defs"][name].clone(),
            None => schema.clone(),
        }
    }

    /// `field` with an optional `anyOf` (a type or null) read as that type, optional.
    fn either(&self, field: &Value) -> Value {
        let Some(options) = field.get("anyOf").and_then(Value::as_array) else { return field.clone() };
        let null = options.iter().any(|o| o["type"] == "null");
        let Some(inner) = options.iter().find(|o| o["type"] != "null") else { return field.clone() };
        let mut inner = self.resolve(inner);
        if inner.get("properties").is_some() {
            inner["type"] = Value::from("object");
        }
        if null && let Some(t) = inner["type"].as_str().map(str::to_owned) {
            inner["type"] = serde_json::json!([t, "null"]);
        }
        inner
    }

    /// A table of `schema`'s plain keys under `prefix`, then a section per nested table and per list
    /// of tables. `defaults`: the section's default values (absent in a list's entries: the field's
    /// own `default`, if any).
    fn section(&mut self, title: &str, schema: &Value, defaults: &Value, prefix: &str, top: bool) {
        let Some(properties) = schema.get("properties").and_then(Value::as_object) else { return };
        let required: Vec<&str> =
            schema["required"].as_array().into_iter().flatten().filter_map(Value::as_str).collect();
        let mut rows = Vec::new();
        let mut nested = Vec::new();
        for (name, field) in properties {
            let path = if prefix.is_empty() { name.clone() } else { format!("{prefix}.{name}") };
            let field = self.resolve(field);
            let items = field.get("items").map(|i| self.resolve(i));
            if field.get("properties").is_some() {
                nested.push((
                    format!("[{path}]"),
                    field,
                    defaults.get(name).cloned().unwrap_or(Value::Null),
                    path,
                    false,
                ));
                continue;
            }
            if let Some(items) = items.clone().filter(|i| i.get("properties").is_some()) {
                let title = format!("[[{path}]]");
                let described = describe(&field);
                nested.push((format!("{title}\n\n{described}"), items, Value::Null, String::new(), false));
                continue;
            }
            let default = defaults.get(name).or_else(|| field.get("default")).filter(|d| !d.is_null());
            let default = match default {
                Some(_) if field.get("x-secret").is_some() => "(secret)".to_owned(),
                Some(d) => format!("`{}`", toml_like(d)),
                None if required.contains(&name.as_str()) => "required".to_owned(),
                None => "—".to_owned(),
            };
            let env = if self.env.contains(&path) { format!("`{}`", config::env_var(&path)) } else { "—".to_owned() };
            let key = if prefix.is_empty() || !top { name.clone() } else { path.clone() };
            let kind = type_of(&self.either(&field), items.as_ref());
            rows.push(format!("| `{key}` | {kind} | {default} | {env} | {} |", describe(&field)));
        }
        if !rows.is_empty() {
            let lead = title.split('\n').next().unwrap_or(title);
            self.out.push_str(&format!("\n## {lead}\n\n"));
            if let Some(rest) = title.split_once("\n\n").map(|(_, r)| r).filter(|r| !r.is_empty()) {
                self.out.push_str(&format!("{rest}\n\n"));
            } else if let Some(d) = schema.get("description").and_then(Value::as_str).filter(|_| !prefix.is_empty()) {
                self.out.push_str(&format!("{}\n\n", one_line(d)));
            }
            self.out.push_str("| key | type | default | env | description |\n|---|---|---|---|---|\n");
            for row in rows {
                self.out.push_str(&row);
                self.out.push('\n');
            }
        }
        for (title, schema, defaults, path, top) in nested {
            self.section(&title, &schema, &defaults, &path, top || !path.is_empty());
        }
    }
}

/// A field's type in words: `integer`, `string, optional`, `list of string`, one of its values.
fn type_of(field: &Value, items: Option<&Value>) -> String {
    let mut types: Vec<&str> = match &field["type"] {
        Value::String(t) => vec![t.as_str()],
        Value::Array(ts) => ts.iter().filter_map(Value::as_str).collect(),
        _ => Vec::new(),
    };
    let optional = types.contains(&"null");
    types.retain(|t| *t != "null");
    let values = field.get("enum").or_else(|| field.get("oneOf")).and_then(Value::as_array).map(|vs| {
        vs.iter()
            .filter_map(|v| v.as_str().or_else(|| v.get("const").and_then(Value::as_str)))
            .map(|v| format!("`{v}`"))
            .collect::<Vec<_>>()
    });
    let duration = field.get("format").and_then(Value::as_str) == Some("duration");
    let mut text = match (types.as_slice(), values) {
        (_, Some(values)) if !values.is_empty() => format!("one of {}", values.join(", ")),
        (["string"], _) if duration => "duration".to_owned(),
        (["array"], _) => {
            let of = items.and_then(|i| i["type"].as_str()).unwrap_or("value");
            format!("list of {of}")
        }
        (["object"], _) => "table".to_owned(),
        ([], _) => "value".to_owned(),
        (ts, _) => ts.join(" or "),
    };
    if optional {
        text.push_str(", optional");
    }
    text
}

fn describe(field: &Value) -> String {
    field.get("description").and_then(Value::as_str).map(one_line).unwrap_or_default()
}

/// A doc comment on one table row: lines joined, pipes escaped.
fn one_line(text: &str) -> String {
    text.split_whitespace().collect::<Vec<_>>().join(" ").replace('|', "\\|")
}

/// A default as TOML writes it: strings quoted, lists bracketed.
fn toml_like(value: &Value) -> String {
    match value {
        Value::String(s) => format!("{s:?}"),
        Value::Array(items) => format!("[{}]", items.iter().map(toml_like).collect::<Vec<_>>().join(", ")),
        Value::Object(map) if map.is_empty() => "{}".to_owned(),
        other => other.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reference_is_current() {
        let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../..").join(PATH);
        let want = render();
        let have = std::fs::read_to_string(&path).unwrap_or_default();
        if have == want {
            return;
        }
        if std::env::var_os("UPDATE_DOCS").is_some() {
            std::fs::write(&path, &want).unwrap();
            return;
        }
        panic!(
            "{PATH} is out of date with the config types; rewrite it with\n  \
             UPDATE_DOCS=1 cargo test -p clutch --bin clutch reference\nand commit the result"
        );
    }

    #[test]
    fn every_key_the_environment_sets_is_in_the_reference() {
        let text = render();
        for key in config::env_keys() {
            let var = config::env_var(&key);
            assert!(text.contains(&format!("`{var}`")), "{var} ({key}) is missing from the reference");
        }
        assert!(!text.contains("|  |\n"), "a key without a description (its field's doc comment):\n{text}");
        // The keys testers found only in `config dump`.
        for key in ["max_tokens", "stream", "timeout_ms", "max_retries", "max_turns", "task_timeout_ms"] {
            assert!(text.contains(&format!("| `{key}` |")), "{key} is missing from the reference");
        }
    }
}
