//! `clutch send`: builds a message from flags, or reads JSON messages from a file or stdin, appends
//! them through the daemon and prints its answer.

use std::io::Write;
use std::path::Path;

use anyhow::{Context, bail};
use clutch_proto::id::{self, Kind};
use serde_json::{Map, Value, json};

use crate::cli::{BuildArgs, SendArgs};
use crate::client::{ApiError, Client};
use crate::input;

pub async fn run(args: SendArgs) -> anyhow::Result<()> {
    let client = Client::connect(&args.client)?;
    let body = match args.input.as_deref().or(args.file.as_deref()) {
        Some(path) => read_json(path)?,
        None => build(&args.build),
    };
    let response = client.send(client.post("/v1/messages").json(&body)).await?;
    let answer: Value = response.json().await.context("the daemon's answer is not JSON")?;

    let mut stdout = std::io::stdout().lock();
    writeln!(stdout, "{answer}")?;
    stdout.flush()?;

    let refused: Vec<(usize, ApiError)> = answer
        .get("results")
        .and_then(Value::as_array)
        .map(|results| results.iter().enumerate().filter_map(|(i, r)| Some((i, ApiError::from_result(r)?))).collect())
        .unwrap_or_default();
    if refused.is_empty() {
        return Ok(());
    }
    for (i, error) in &refused {
        eprintln!("clutch: message [{i}] refused: {error}");
    }
    let total = answer["results"].as_array().map_or(0, Vec::len);
    bail!("the daemon refused {} of {total} messages", refused.len())
}

/// The JSON in `path` (`-` for stdin): a message object or an array of them.
fn read_json(path: &Path) -> anyhow::Result<Value> {
    let (value, name) = input::json(path)?;
    if !(value.is_object() || value.is_array()) {
        bail!("{name} must hold a message (a JSON object) or an array of messages");
    }
    Ok(value)
}

/// The message the flags describe; the daemon fills `id`, `ts` and `v` and validates it.
fn build(args: &BuildArgs) -> Value {
    let payload = match (&args.payload, &args.text) {
        (Some(payload), _) => payload.clone(),
        (None, Some(text)) => Map::from_iter([("text".to_owned(), Value::String(text.clone()))]),
        (None, None) => Map::new(),
    };
    let mut message = json!({
        "run_id": args.run.clone().unwrap_or_else(|| id::generate(Kind::Run)),
        "thread_id": args.thread.clone().unwrap_or_else(|| id::generate(Kind::Thread)),
        "task_id": args.task.clone().unwrap_or_else(|| id::generate(Kind::Task)),
        "from": {"agent_id": args.from.clone().unwrap_or_default()},
        "to": args.to.iter().map(|to| json!({"agent_id": to})).collect::<Vec<_>>(),
        "type": args.kind.as_deref().unwrap_or("chat.message"),
        "payload": payload,
    });
    let object = message.as_object_mut().expect("built as an object");
    if !args.requires.is_empty() {
        object.insert("requires".into(), json!(args.requires));
    }
    if !args.prefers.is_empty() {
        object.insert("prefers".into(), json!(args.prefers));
    }
    if let Some(key) = &args.idempotency_key {
        object.insert("idempotency_key".into(), json!(key));
    }
    message
}
