//! The web UI's types of what the daemon serves (`ui/js/api-types.js`) are generated from the
//! published JSON Schemas (core's views and payloads, proto's envelope and card), so the UI's
//! `tsc --checkJs` holds it to the shapes the engine really builds. This test regenerates the file
//! in memory and compares; `UPDATE_SCHEMAS=1 cargo test -p clutch-gateway --test it ui_types`
//! rewrites it.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::path::PathBuf;

use serde_json::Value;

const HEADER: &str = "\
// The shapes the daemon serves and writes, as JSDoc types for `tsc --checkJs`. Generated from the
// published JSON Schemas (docs/schemas/) by crates/gateway/tests/it/ui_types.rs: do not edit;
// `UPDATE_SCHEMAS=1 cargo test -p clutch-gateway --test it ui_types` regenerates it.
";

fn path() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("ui/js/api-types.js")
}

#[test]
fn ui_types_match_the_published_schemas() {
    let want = generate();
    let have = std::fs::read_to_string(path()).unwrap_or_default();
    if have == want {
        return;
    }
    if std::env::var("UPDATE_SCHEMAS").is_ok_and(|v| v == "1") {
        std::fs::write(path(), &want).unwrap();
        eprintln!("updated {}", path().display());
        return;
    }
    panic!(
        "crates/gateway/ui/js/api-types.js is out of date with the published schemas; regenerate it with\n  \
         UPDATE_SCHEMAS=1 cargo test -p clutch-gateway --test it ui_types\nand commit the result."
    );
}

/// A name for a published shape whose title another shape already has: `clutch.checkpoint.v1` →
/// `CheckpointPayload`, `task.error` → `TaskErrorPayload`, `agent-view` → `AgentView`.
fn fallback_name(published: &str) -> String {
    let payload = published.contains('.');
    let bare = published.strip_prefix("clutch.").unwrap_or(published);
    let bare = bare.strip_suffix(".v1").unwrap_or(bare);
    let mut name: String = bare
        .split(['.', '-', '_'])
        .map(|w| {
            let mut c = w.chars();
            c.next().map(|f| f.to_uppercase().chain(c).collect::<String>()).unwrap_or_default()
        })
        .collect();
    if payload {
        name.push_str("Payload");
    }
    name
}

/// Every type, by name: each definition once, and each published shape under its title (or, when
/// a different shape has that title, under [`fallback_name`]). Two different definitions under
/// one name are a conflict to resolve in the Rust types (a `#[schemars(rename)]`).
fn generate() -> String {
    let published: Vec<(&str, Value)> = clutch_proto::schema::NAMES
        .iter()
        .map(|n| (*n, clutch_proto::schema::get(n).unwrap()))
        .chain(clutch_core::published::names().map(|n| (n, clutch_core::published::get(n).unwrap())))
        .collect();
    let mut types: BTreeMap<String, Value> = BTreeMap::new();
    for (name, schema) in &published {
        for (def, body) in schema.get("$defs").and_then(Value::as_object).into_iter().flatten() {
            let mut body = body.clone();
            if let Some(obj) = body.as_object_mut() {
                obj.remove("title");
            }
            match types.get(def) {
                Some(seen) if *seen != body => panic!("two different shapes are named `{def}` (one in {name})"),
                _ => {
                    types.insert(def.clone(), body);
                }
            }
        }
    }
    let mut roots = Vec::new();
    for (name, schema) in &published {
        let mut body = schema.clone();
        let obj = body.as_object_mut().unwrap();
        let title = obj.remove("title").and_then(|t| t.as_str().map(str::to_owned));
        for key in ["$schema", "$id", "$defs"] {
            obj.remove(key);
        }
        // A shape that refers to itself (`#`) refers to its type.
        let named = |type_name: &str| -> Value {
            let text = body.to_string().replace(r##""$ref":"#""##, &format!(r##""$ref":"#/$defs/{type_name}""##));
            serde_json::from_str(&text).unwrap()
        };
        let (type_name, body) = match title {
            Some(t) if types.get(&t).is_none_or(|seen| *seen == named(&t)) => (t.clone(), named(&t)),
            _ => (fallback_name(name), named(&fallback_name(name))),
        };
        assert!(types.get(&type_name).is_none_or(|seen| *seen == body), "`{type_name}` names two shapes");
        roots.push(format!("{name} → {type_name}"));
        types.insert(type_name, body);
    }
    let mut out = String::from(HEADER);
    out.push_str("//\n// The published shapes (docs/schemas/NAME.schema.json) and their types:\n");
    for root in &roots {
        out.push_str(&format!("//   {root}\n"));
    }
    for (name, schema) in &types {
        typedef(&mut out, name, schema);
    }
    out.push_str("\nexport {};\n");
    out
}

/// One `@typedef`, with its description.
fn typedef(out: &mut String, name: &str, schema: &Value) {
    out.push_str("\n/**\n");
    if let Some(d) = schema.get("description").and_then(Value::as_str) {
        for line in d.lines() {
            let _ = writeln!(out, " * {}", line.trim_end());
        }
    }
    let properties = schema.get("properties").and_then(Value::as_object);
    match properties {
        Some(props) => {
            let _ = writeln!(out, " * @typedef {{object}} {name}");
            let required: Vec<&str> = schema
                .get("required")
                .and_then(Value::as_array)
                .into_iter()
                .flatten()
                .filter_map(Value::as_str)
                .collect();
            for (prop, s) in props {
                let ty = js_type(s);
                let key = if required.contains(&prop.as_str()) { prop.clone() } else { format!("[{prop}]") };
                let doc = s.get("description").and_then(Value::as_str).map(one_line).unwrap_or_default();
                let doc = if doc.is_empty() { String::new() } else { format!("  {doc}") };
                let _ = writeln!(out, " * @property {{{ty}}} {key}{doc}");
            }
        }
        _ => {
            let _ = writeln!(out, " * @typedef {{{}}} {name}", js_type(schema));
        }
    }
    out.push_str(" */\n");
}

fn one_line(text: &str) -> String {
    text.split_whitespace().collect::<Vec<_>>().join(" ")
}

/// A schema as a TypeScript type (the subset schemars writes).
fn js_type(s: &Value) -> String {
    if s == &Value::Bool(true) {
        return "any".into();
    }
    if let Some(r) = s.get("$ref").and_then(Value::as_str) {
        return r.rsplit('/').next().unwrap_or("any").to_owned();
    }
    if let Some(c) = s.get("const") {
        return c.to_string().replace('"', "'");
    }
    if let Some(values) = s.get("enum").and_then(Value::as_array) {
        return values.iter().map(|v| v.to_string().replace('"', "'")).collect::<Vec<_>>().join(" | ");
    }
    for key in ["anyOf", "oneOf"] {
        if let Some(options) = s.get(key).and_then(Value::as_array) {
            let mut types: Vec<String> = Vec::new();
            for t in options.iter().map(js_type) {
                if !types.contains(&t) {
                    types.push(t);
                }
            }
            return types.join(" | ");
        }
    }
    let types: Vec<&str> = match s.get("type") {
        Some(Value::String(t)) => vec![t.as_str()],
        Some(Value::Array(ts)) => ts.iter().filter_map(Value::as_str).collect(),
        _ => return "any".into(),
    };
    types
        .iter()
        .map(|t| match *t {
            "string" => "string".to_owned(),
            "integer" | "number" => "number".to_owned(),
            "boolean" => "boolean".to_owned(),
            "null" => "null".to_owned(),
            "array" => match s.get("items") {
                Some(items) => format!("Array<{}>", js_type(items)),
                None => "Array<any>".to_owned(),
            },
            "object" => match s.get("additionalProperties") {
                Some(Value::Bool(false)) | None if s.get("properties").is_some() => "Record<string, any>".to_owned(),
                Some(v @ Value::Object(_)) => format!("Record<string, {}>", js_type(v)),
                _ => "Record<string, any>".to_owned(),
            },
            other => panic!("no JS type for JSON Schema type `{other}`"),
        })
        .collect::<Vec<_>>()
        .join(" | ")
}
