//! `clutch tail`: follows the daemon's live event stream over SSE, printing one line per event, and
//! reconnects after the last event printed when the daemon cuts the stream or goes away.

use std::io::Write;
use std::time::Duration;

use anyhow::Context;
use clap::Args;
use futures_util::StreamExt;
use serde_json::Value;

use crate::args::{ClientArgs, message_types};
use crate::client::{self, Client};
use crate::{render, sse};

/// With the daemon's keep-alives every 15 s by default, this much silence means a dead connection.
const IDLE_TIMEOUT: Duration = Duration::from_secs(60);
const BACKOFF_MIN: Duration = Duration::from_millis(200);
const BACKOFF_MAX: Duration = Duration::from_secs(5);

/// Which events to select; every flag given must match.
#[derive(Debug, Clone, Default, Args)]
pub struct FilterArgs {
    /// Only events of this run.
    #[arg(long, value_name = "RUN_ID")]
    pub run: Option<String>,
    /// Only events of this thread.
    #[arg(long, value_name = "THREAD_ID")]
    pub thread: Option<String>,
    /// Only events about this task.
    #[arg(long, value_name = "TASK_ID")]
    pub task: Option<String>,
    /// Only events sent by this agent or user (`agent:NAME`).
    #[arg(long, value_name = "SENDER")]
    pub agent: Option<String>,
    /// Only events of this type.
    #[arg(long = "type", value_name = "TYPE", value_parser = message_types())]
    pub kind: Option<String>,
    /// Only events addressed to this agent (its inbox).
    #[arg(long, value_name = "AGENT")]
    pub to: Option<String>,
}

#[derive(Debug, Args)]
pub struct TailArgs {
    #[command(flatten)]
    pub client: ClientArgs,
    #[command(flatten)]
    pub filter: FilterArgs,
    /// Start after this seq (0 = from the beginning) instead of with new events only.
    #[arg(long, value_name = "SEQ")]
    pub after: Option<u64>,
    /// Print each event as one JSON line (NDJSON).
    #[arg(long)]
    pub json: bool,
}

pub const EXAMPLES: &str = "EXAMPLES:
  clutch tail                                    new events, one line each
  clutch tail --run run_01J... --type task.result
  clutch tail --after 0 --json | jq .type        every event from the start, as NDJSON

  Reconnects after the daemon restarts or cuts a slow reader off, resuming after the last event
  printed. Ctrl-C stops.";

pub async fn run(args: TailArgs) -> anyhow::Result<()> {
    let mut tail = Tail {
        client: Client::connect(&args.client)?,
        query: query(&args.filter),
        json: args.json,
        color: render::stdout_color(),
        cursor: args.after,
        connected: false,
    };
    let ctrl_c = tokio::signal::ctrl_c();
    tokio::pin!(ctrl_c);
    let mut backoff = BACKOFF_MIN;
    let mut outage = false;
    loop {
        let ended = tokio::select! {
            _ = &mut ctrl_c => return Ok(()),
            ended = tail.follow() => ended?,
        };
        let after = tail.cursor.map_or_else(|| "now".to_owned(), |c| format!("seq {c}"));
        let delay = match &ended {
            Ended::Lagged => {
                eprintln!("clutch: fell behind the live stream; catching up after {after}");
                Duration::ZERO
            }
            Ended::Shutdown | Ended::Failed(_) | Ended::Dropped => {
                let why = match &ended {
                    Ended::Shutdown => "the daemon is shutting down".to_owned(),
                    Ended::Failed(message) => format!("the daemon's stream failed ({message})"),
                    _ => "lost the connection to the daemon".to_owned(),
                };
                eprintln!("clutch: {why}; will resume after {after}");
                backoff = BACKOFF_MIN;
                BACKOFF_MIN
            }
            Ended::Unavailable => {
                if !outage {
                    eprintln!("clutch: no Clutch daemon at {}; retrying until it is back", tail.client.base());
                }
                let delay = backoff;
                backoff = (backoff * 2).min(BACKOFF_MAX);
                delay
            }
        };
        outage = matches!(ended, Ended::Unavailable);
        if !delay.is_zero() {
            tokio::select! {
                _ = &mut ctrl_c => return Ok(()),
                () = tokio::time::sleep(delay) => {}
            }
        }
    }
}

/// Why one connection's stream ended, when that is worth a reconnect.
enum Ended {
    /// The daemon cut us off for reading too slowly.
    Lagged,
    Shutdown,
    Failed(String),
    /// The connection broke or went silent without a final frame.
    Dropped,
    /// The daemon could not be reached (after it had been once).
    Unavailable,
}

struct Tail {
    client: Client,
    query: Vec<(&'static str, String)>,
    json: bool,
    color: bool,
    /// The last seq printed, the daemon's cursor from a final frame, or the head when tailing began;
    /// `None` only until the first connection (or if the daemon does not report its head).
    cursor: Option<u64>,
    /// Whether a stream was ever opened: until then, an unreachable daemon is an error, not an outage.
    connected: bool,
}

impl Tail {
    /// Opens one stream and prints it until it ends.
    async fn follow(&mut self) -> anyhow::Result<Ended> {
        if self.cursor.is_none() {
            match self.head().await {
                Ok(head) => self.cursor = head,
                // The stream request below reports what is wrong, if anything.
                Err(client::Error::Api(_)) => {}
                Err(client::Error::NoDaemon { .. } | client::Error::Http(_)) if self.connected => {
                    return Ok(Ended::Unavailable);
                }
                Err(e) => return Err(e.into()),
            }
        }
        let mut request = self.client.get("/v1/stream").header("accept", "text/event-stream").query(&self.query);
        if let Some(after) = self.cursor {
            request = request.query(&[("after", after)]);
        }
        let response = match self.client.send(request).await {
            Ok(response) => response,
            Err(client::Error::NoDaemon { .. } | client::Error::Http(_)) if self.connected => {
                return Ok(Ended::Unavailable);
            }
            Err(e) => return Err(e.into()),
        };
        if !self.connected {
            eprintln!("clutch: following {} (Ctrl-C to stop)", self.client.base());
        } else {
            eprintln!("clutch: reconnected");
        }
        self.connected = true;

        let mut events = std::pin::pin!(sse::events(response.bytes_stream(), Some(IDLE_TIMEOUT)));
        // The connection broke or went silent, or the body is no event stream: a reconnect resumes
        // after the last event printed.
        while let Some(Ok(event)) = events.next().await {
            if event.name == "end" {
                return Ok(self.end(&event.data));
            }
            self.print(&event.data)?;
        }
        Ok(Ended::Dropped)
    }

    /// The log's current head, from `/healthz`, so that "new events only" is a cursor like any other
    /// and a reconnect resumes without a gap even when nothing was printed yet.
    async fn head(&self) -> Result<Option<u64>, client::Error> {
        let response = self.client.send(self.client.get("/healthz")).await?;
        let health: Value = response.json().await.map_err(client::Error::Http)?;
        Ok(health.get("head_seq").and_then(Value::as_u64))
    }

    fn print(&mut self, data: &str) -> anyhow::Result<()> {
        let event: Value =
            serde_json::from_str(data).with_context(|| format!("the daemon sent a bad event: {data}"))?;
        let mut stdout = std::io::stdout();
        if self.json {
            if data.contains('\n') {
                writeln!(stdout, "{event}")?;
            } else {
                writeln!(stdout, "{data}")?;
            }
        } else {
            writeln!(stdout, "{}", render::event_line(&event, self.color))?;
        }
        stdout.flush()?;
        if let Some(seq) = event.get("seq").and_then(Value::as_u64) {
            self.cursor = Some(seq);
        }
        Ok(())
    }

    /// Reads a final frame `{"frame": "lagged" | "shutdown" | "error", "last_seq": N, ...}`.
    fn end(&mut self, data: &str) -> Ended {
        let frame: Value = serde_json::from_str(data).unwrap_or(Value::Null);
        if let Some(last) = frame.get("last_seq").and_then(Value::as_u64) {
            self.cursor = Some(last);
        }
        match frame.get("frame").and_then(Value::as_str) {
            Some("lagged") => Ended::Lagged,
            Some("shutdown") => Ended::Shutdown,
            _ => {
                let message = frame.get("message").and_then(Value::as_str).unwrap_or(data);
                Ended::Failed(message.to_owned())
            }
        }
    }
}

/// The filter flags as query parameters.
pub fn query(filter: &FilterArgs) -> Vec<(&'static str, String)> {
    [
        ("run_id", &filter.run),
        ("thread_id", &filter.thread),
        ("task_id", &filter.task),
        ("agent_id", &filter.agent),
        ("type", &filter.kind),
        ("to", &filter.to),
    ]
    .into_iter()
    .filter_map(|(name, value)| Some((name, value.clone()?)))
    .collect()
}
