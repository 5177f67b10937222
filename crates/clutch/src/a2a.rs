//! `clutch a2a card|send`: any A2A agent (a Clutch hub included) from the terminal. The card says
//! which protocol version and endpoint to use (JSON-RPC, 1.0 preferred, else 0.3) and whether the
//! agent streams; `send --follow` streams the task's progress as it comes.

use anyhow::{Context, bail};
use clap::{Args, Subcommand};
use futures_util::StreamExt;
use serde_json::{Value, json};

use crate::render;
use crate::sse;

#[derive(Debug, Subcommand)]
pub enum A2aCommand {
    /// Show an agent's card: its name, endpoints and versions, and skills.
    Card(CardArgs),
    /// Send an agent a message and print the task it becomes (its state and result).
    Send(SendArgs),
}

pub const EXAMPLES: &str = "Examples:
  clutch a2a card http://127.0.0.1:7700
  clutch a2a send http://127.0.0.1:7700 --skill skill:review 'Is this migration safe?'
  clutch a2a send https://agent.example.com 'Summarise the report' --follow";

#[derive(Debug, Args)]
pub struct CardArgs {
    /// The agent: its base URL (the card is read from /.well-known/agent-card.json) or the card's URL.
    #[arg(value_name = "URL")]
    pub url: String,
    /// Print the card as JSON.
    #[arg(long)]
    pub json: bool,
}

#[derive(Debug, Args)]
pub struct SendArgs {
    /// The agent: its base URL or its card's URL.
    #[arg(value_name = "URL")]
    pub url: String,
    /// What to say (`-` reads it from stdin, `@PATH` from a file).
    #[arg(value_name = "TEXT")]
    pub text: String,
    /// The skill to ask for (put in the message's metadata; a Clutch hub routes by it).
    #[arg(long, value_name = "SKILL")]
    pub skill: Option<String>,
    /// Stream the task's progress as it comes (when the agent streams), until it ends.
    #[arg(long)]
    pub follow: bool,
    /// Send `Authorization: Bearer TOKEN`.
    #[arg(long, value_name = "TOKEN", env = "CLUTCH_A2A_TOKEN", hide_env_values = true)]
    pub token: Option<String>,
    /// Print each answer as JSON (one per line).
    #[arg(long)]
    pub json: bool,
}

pub async fn run(command: A2aCommand) -> anyhow::Result<()> {
    match command {
        A2aCommand::Card(args) => {
            let (card, _) = card(&args.url).await?;
            if args.json {
                return render::print(&format!("{card}\n"));
            }
            render::print(&describe(&card))
        }
        A2aCommand::Send(args) => send(args).await,
    }
}

/// The card at `url` (or at its well-known path), and the URL it was read from.
async fn card(url: &str) -> anyhow::Result<(Value, String)> {
    let url = url.trim_end_matches('/');
    let at = if url.ends_with(".json") { url.to_owned() } else { format!("{url}/.well-known/agent-card.json") };
    // A 1.0 client says so (an agent that speaks only 0.3 ignores it and answers its 0.3 card).
    let request = reqwest::Client::new().get(&at).header("A2A-Version", "1.0");
    let response = request.send().await.with_context(|| format!("cannot reach {at}"))?;
    if !response.status().is_success() {
        bail!("{at} answered HTTP {}: is it an A2A agent?", response.status().as_u16());
    }
    let card: Value = response.json().await.with_context(|| format!("{at} is not an agent card (not JSON)"))?;
    Ok((card, at))
}

/// The JSON-RPC endpoint and version to use: a 1.0 JSON-RPC interface first, else 0.3's.
fn endpoint(card: &Value) -> anyhow::Result<(String, &'static str)> {
    let interfaces = card["supportedInterfaces"].as_array().cloned().unwrap_or_default();
    let jsonrpc = |version: &str| {
        interfaces.iter().find(|i| {
            i["protocolBinding"] == "JSONRPC" && i["protocolVersion"].as_str().is_some_and(|v| v.starts_with(version))
        })
    };
    if let Some(i) = jsonrpc("1.") {
        return Ok((i["url"].as_str().unwrap_or_default().to_owned(), "1.0"));
    }
    if let Some(i) = jsonrpc("0.3") {
        return Ok((i["url"].as_str().unwrap_or_default().to_owned(), "0.3"));
    }
    match (card["url"].as_str(), card["preferredTransport"].as_str()) {
        (Some(url), None | Some("JSONRPC")) => Ok((url.to_owned(), "0.3")),
        _ => bail!("the card names no JSON-RPC endpoint (the only binding this client speaks)"),
    }
}

fn describe(card: &Value) -> String {
    let text = |v: &Value| v.as_str().unwrap_or("-").to_owned();
    let mut out = format!("{}  {}\n{}\n", text(&card["name"]), text(&card["version"]), text(&card["description"]));
    out.push_str("\nENDPOINTS\n");
    for i in card["supportedInterfaces"].as_array().into_iter().flatten() {
        out.push_str(&format!(
            "  {}  {} {}\n",
            text(&i["url"]),
            text(&i["protocolBinding"]),
            text(&i["protocolVersion"])
        ));
    }
    let streaming = card["capabilities"]["streaming"].as_bool().unwrap_or(false);
    out.push_str(&format!("  streaming: {}\n", if streaming { "yes" } else { "no" }));
    out.push_str("\nSKILLS\n");
    for s in card["skills"].as_array().into_iter().flatten() {
        out.push_str(&format!("  {}  {}\n", text(&s["id"]), text(&s["description"])));
    }
    out
}

async fn send(args: SendArgs) -> anyhow::Result<()> {
    let (card, _) = card(&args.url).await?;
    let (url, version) = endpoint(&card)?;
    let text = crate::input::text_arg(&args.text)?;
    let v10 = version == "1.0";
    let id = clutch_proto::id::generate(clutch_proto::id::Kind::Message);
    let mut message = if v10 {
        json!({"messageId": id, "role": "ROLE_USER", "parts": [{"text": text}]})
    } else {
        json!({"kind": "message", "messageId": id, "role": "user", "parts": [{"kind": "text", "text": text}]})
    };
    if let Some(skill) = &args.skill {
        message["metadata"] = json!({"skill": skill});
    }
    let streams = card["capabilities"]["streaming"].as_bool().unwrap_or(false);
    let method = match (args.follow && streams, v10) {
        (true, true) => "SendStreamingMessage",
        (true, false) => "message/stream",
        (false, true) => "SendMessage",
        (false, false) => "message/send",
    };
    let configuration = if v10 { json!({}) } else { json!({"blocking": true}) };
    let body = json!({"jsonrpc": "2.0", "id": 1, "method": method, "params": {"message": message, "configuration": configuration}});
    let mut request = reqwest::Client::new().post(&url).header("A2A-Version", version).json(&body);
    if let Some(token) = &args.token {
        request = request.bearer_auth(token);
    }
    let response = request.send().await.with_context(|| format!("cannot reach {url}"))?;
    if !response.status().is_success() {
        bail!("{url} answered HTTP {}", response.status().as_u16());
    }
    let color = render::stdout_color();
    let is_sse = response
        .headers()
        .get(reqwest::header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|t| t.starts_with("text/event-stream"));
    if !is_sse {
        let answer: Value = response.json().await.context("the answer is not JSON")?;
        show(&answer, args.json, color)?;
        return ended_well(&answer);
    }
    let mut events = std::pin::pin!(sse::events(response.bytes_stream(), None));
    let mut last = None;
    // Until the stream ends, or the agent asks for input (a 1.0 stream stays open then; this
    // client has nothing to answer with).
    while let Some(event) = events.next().await {
        let event = event.context("the stream broke off")?;
        let answer: Value = serde_json::from_str(&event.data).context("a streamed answer is not JSON")?;
        show(&answer, args.json, color)?;
        let asks = ["input_required", "input-required", "auth_required", "auth-required"]
            .iter()
            .any(|s| state_of(&answer).ends_with(s));
        last = Some(answer);
        if asks {
            break;
        }
    }
    match last {
        Some(answer) => ended_well(&answer),
        None => bail!("the stream ended with nothing in it"),
    }
}

/// The task's state an answer tells, lower-case (`task_state_completed`, `completed`); empty when none.
fn state_of(answer: &Value) -> String {
    let result = &answer["result"];
    let status = [result.pointer("/task/status"), result.pointer("/statusUpdate/status"), result.get("status")]
        .into_iter()
        .flatten()
        .next();
    status.and_then(|s| s["state"].as_str()).unwrap_or_default().to_lowercase()
}

/// Exit 1 when the task failed, was cancelled or rejected.
fn ended_well(answer: &Value) -> anyhow::Result<()> {
    let state = state_of(answer);
    if ["failed", "canceled", "rejected"].iter().any(|bad| state.ends_with(bad)) {
        bail!("the task ended {}", state.trim_start_matches("task_state_"));
    }
    Ok(())
}

/// Prints one answer: an error (and fails), the task's state and result, or an update.
fn show(answer: &Value, json: bool, color: bool) -> anyhow::Result<()> {
    if json {
        render::print(&format!("{answer}\n"))?;
    }
    if let Some(e) = answer.get("error") {
        bail!("the agent refused: {} {}", e["code"], e["message"].as_str().unwrap_or_default());
    }
    if json {
        return Ok(());
    }
    let result = &answer["result"];
    // 1.0 wraps (task, statusUpdate, artifactUpdate, message); 0.3 says its kind.
    let (kind, body) = ["task", "statusUpdate", "artifactUpdate", "message"]
        .iter()
        .find_map(|k| result.get(*k).map(|b| (*k, b)))
        .unwrap_or_else(|| match result["kind"].as_str() {
            Some("status-update") => ("statusUpdate", result),
            Some("artifact-update") => ("artifactUpdate", result),
            Some("message") => ("message", result),
            _ => ("task", result),
        });
    let parts_text = |parts: &Value| -> String {
        parts.as_array().into_iter().flatten().filter_map(|p| p["text"].as_str()).collect::<Vec<_>>().join("\n")
    };
    let state = |status: &Value| -> String {
        let s = status["state"].as_str().unwrap_or("-");
        s.strip_prefix("TASK_STATE_").map(|s| s.to_lowercase().replace('_', "-")).unwrap_or_else(|| s.to_owned())
    };
    let mut out = String::new();
    match kind {
        "task" => {
            out.push_str(&format!(
                "{}  {}\n",
                crate::table::paint(body["id"].as_str().unwrap_or("-"), Some("1"), color),
                state(&body["status"])
            ));
            let said = parts_text(&body["status"]["message"]["parts"]);
            if !said.is_empty() {
                out.push_str(&format!("{said}\n"));
            }
            for a in body["artifacts"].as_array().into_iter().flatten() {
                out.push_str(&format!("{}\n", parts_text(&a["parts"])));
            }
        }
        "statusUpdate" => {
            let said = parts_text(&body["status"]["message"]["parts"]);
            out.push_str(&format!(
                "{}{}\n",
                state(&body["status"]),
                if said.is_empty() { String::new() } else { format!("  {said}") }
            ));
        }
        "artifactUpdate" => out.push_str(&format!("{}\n", parts_text(&body["artifact"]["parts"]))),
        _ => out.push_str(&format!("{}\n", parts_text(&body["parts"]))),
    }
    render::print(&out)
}
