//! `clutch send`: builds a message from flags, or reads JSON messages from a file or stdin, appends
//! them through the daemon and prints its answer.

use std::io::Write;
use std::path::{Path, PathBuf};

use anyhow::{Context, bail};
use clap::Args;
use clutch_proto::id::{self, Kind};
use serde_json::{Map, Value, json};

use crate::args::{ClientArgs, message_types};
use crate::client::{ApiError, Client};
use crate::input;

#[derive(Debug, Args)]
pub struct SendArgs {
    #[command(flatten)]
    pub client: ClientArgs,

    /// Read the message (a JSON object) or messages (an array) from FILE; `-` reads stdin.
    #[arg(value_name = "FILE", conflicts_with_all = ["file", "build"])]
    pub input: Option<PathBuf>,
    /// Same as the FILE argument.
    #[arg(short, long, value_name = "FILE", conflicts_with = "build")]
    pub file: Option<PathBuf>,

    #[command(flatten)]
    pub build: BuildArgs,
}

/// A message described by flags.
#[derive(Debug, Args)]
#[group(id = "build", multiple = true)]
pub struct BuildArgs {
    /// The message type [default: chat.message].
    #[arg(long = "type", value_name = "TYPE", value_parser = message_types())]
    pub kind: Option<String>,
    /// The sender: `agent:NAME` or `user:NAME`. Required unless the message comes from a file.
    #[arg(long, value_name = "SENDER", required_unless_present_any = ["input", "file"])]
    pub from: Option<String>,
    /// A recipient: `agent:NAME`, `user:NAME` or `group:NAME`; repeat for several.
    #[arg(long, value_name = "RECIPIENT")]
    pub to: Vec<String>,
    /// The run [default: a new run id].
    #[arg(long, value_name = "RUN_ID")]
    pub run: Option<String>,
    /// The thread [default: a new thread id].
    #[arg(long, value_name = "THREAD_ID")]
    pub thread: Option<String>,
    /// The task [default: a new task id].
    #[arg(long, value_name = "TASK_ID")]
    pub task: Option<String>,
    /// The payload, a JSON object [default: {}].
    #[arg(long, value_name = "JSON", value_parser = json_object, conflicts_with = "text")]
    pub payload: Option<Map<String, Value>>,
    /// Shorthand for `--payload '{"text": TEXT}'`.
    #[arg(long, value_name = "TEXT")]
    pub text: Option<String>,
    /// A required capability such as `skill:research@^1.2`; repeat for several.
    #[arg(long, value_name = "CAPABILITY")]
    pub requires: Vec<String>,
    /// A preferred capability, `domain:` or `tag:`; repeat for several.
    #[arg(long, value_name = "PREFERENCE")]
    pub prefers: Vec<String>,
    /// Key that makes a repeated send of the same command a no-op within its run. Needs --run: the
    /// key is scoped to the run, and a send without one is a new run each time.
    #[arg(long, value_name = "KEY", requires = "run")]
    pub idempotency_key: Option<String>,
}

pub const EXAMPLES: &str = "EXAMPLES:
  clutch send --from user:ada --to agent:ken --text 'hello'
  clutch send --type task.request --from user:ada --requires skill:research \\
      --payload '{\"goal\": \"summarise the report\"}' --run run_01J... --idempotency-key job-42
  clutch send message.json
  echo '[{...}, {...}]' | clutch send -

  Prints the daemon's answer on stdout: `{\"id\",\"seq\",\"duplicate\"}`, or
  `{\"results\": [...]}` for an array. Exits 1 when the daemon refuses a message, naming
  each bad field on stderr.";

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

fn json_object(s: &str) -> Result<Map<String, Value>, String> {
    match serde_json::from_str(s) {
        Ok(Value::Object(map)) => Ok(map),
        Ok(_) => Err("the payload must be a JSON object, like '{\"text\": \"hi\"}'".into()),
        Err(e) => Err(format!("not valid JSON: {e}")),
    }
}
