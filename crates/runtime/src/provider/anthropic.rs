//! The Anthropic Messages API's wire format: the request body, a whole answer, and the stream's
//! events (`message_start`, `content_block_*` by index, `message_delta` with the final usage,
//! `message_stop`, `ping`, and `error`, which arrives with HTTP 200 and is classified by its type).

use serde_json::{Map, Value, json};

use super::{ErrorKind, Failure, Finish, OnText, Part, Request, Response, Role, Usage};

pub(super) fn body(request: &Request, stream: bool) -> Value {
    let messages: Vec<Value> = request
        .messages
        .iter()
        .map(|turn| {
            let role = match turn.role {
                Role::User => "user",
                Role::Assistant => "assistant",
            };
            // A turn's tool results come first in it, as the API requires.
            let mut parts: Vec<&Part> = turn.content.iter().filter(|p| matches!(p, Part::ToolResult { .. })).collect();
            parts.extend(turn.content.iter().filter(|p| !matches!(p, Part::ToolResult { .. })));
            let content: Vec<Value> = parts
                .into_iter()
                .map(|p| match p {
                    Part::Text { text } => json!({"type": "text", "text": text}),
                    Part::ToolUse { id, name, input } => json!({"type": "tool_use", "id": id, "name": name, "input": input}),
                    Part::ToolResult { tool_use_id, content, is_error } => {
                        json!({"type": "tool_result", "tool_use_id": tool_use_id, "content": content, "is_error": is_error})
                    }
                })
                .collect();
            json!({"role": role, "content": content})
        })
        .collect();
    let mut body = json!({
        "model": request.model,
        "max_tokens": request.max_tokens,
        "messages": messages,
    });
    let map = body.as_object_mut().expect("an object");
    if !request.system.is_empty() {
        map.insert("system".into(), json!(request.system));
    }
    if let Some(t) = request.temperature {
        map.insert("temperature".into(), json!(t));
    }
    if !request.tools.is_empty() {
        let tools: Vec<Value> = request
            .tools
            .iter()
            .map(|t| json!({"name": t.name, "description": t.description, "input_schema": t.input_schema}))
            .collect();
        map.insert("tools".into(), Value::Array(tools));
        if let Some(name) = &request.tool_choice {
            map.insert("tool_choice".into(), json!({"type": "tool", "name": name}));
        }
    }
    if stream {
        map.insert("stream".into(), json!(true));
    }
    body
}

fn malformed(what: impl std::fmt::Display) -> Failure {
    Failure::new(ErrorKind::Malformed, format!("an Anthropic answer that does not parse: {what}"))
}

fn stop_of(reason: Option<&str>) -> Finish {
    match reason {
        Some("end_turn") | None => Finish::EndTurn,
        Some("tool_use") => Finish::ToolUse,
        Some("max_tokens") => Finish::MaxTokens,
        Some("stop_sequence") => Finish::StopSequence,
        Some(other) => Finish::Other(other.to_owned()),
    }
}

fn usage_into(usage: &Map<String, Value>, into: &mut Usage) {
    let num = |k: &str| usage.get(k).and_then(Value::as_u64);
    if let Some(n) = num("input_tokens") {
        into.input_tokens = n;
    }
    if let Some(n) = num("output_tokens") {
        into.output_tokens = n;
    }
    if let Some(n) = num("cache_read_input_tokens") {
        into.cache_read_tokens = n;
    }
    if let Some(n) = num("cache_creation_input_tokens") {
        into.cache_write_tokens = n;
    }
}

fn part_of(block: &Value) -> Result<Option<Part>, Failure> {
    match block.get("type").and_then(Value::as_str) {
        Some("text") => Ok(Some(Part::Text {
            text: block
                .get("text")
                .and_then(Value::as_str)
                .ok_or_else(|| malformed("a text block without text"))?
                .to_owned(),
        })),
        Some("tool_use") => Ok(Some(Part::ToolUse {
            id: block
                .get("id")
                .and_then(Value::as_str)
                .ok_or_else(|| malformed("a tool_use block without id"))?
                .to_owned(),
            name: block
                .get("name")
                .and_then(Value::as_str)
                .ok_or_else(|| malformed("a tool_use block without name"))?
                .to_owned(),
            input: block.get("input").cloned().unwrap_or_else(|| json!({})),
        })),
        // Thinking and other blocks are not part of the conversation this client keeps.
        Some(_) => Ok(None),
        None => Err(malformed("a content block without a type")),
    }
}

/// A whole (non-streamed) answer.
pub(super) fn parse(value: Value) -> Result<Response, Failure> {
    if value.get("type").and_then(Value::as_str) == Some("error") {
        return Err(error_event(&value));
    }
    let content = value.get("content").and_then(Value::as_array).ok_or_else(|| malformed("no `content` list"))?;
    let mut parts = Vec::new();
    for block in content {
        parts.extend(part_of(block)?);
    }
    let mut usage = Usage::default();
    if let Some(u) = value.get("usage").and_then(Value::as_object) {
        usage_into(u, &mut usage);
    }
    Ok(Response {
        id: value.get("id").and_then(Value::as_str).unwrap_or_default().to_owned(),
        model: value.get("model").and_then(Value::as_str).unwrap_or_default().to_owned(),
        content: parts,
        stop: stop_of(value.get("stop_reason").and_then(Value::as_str)),
        usage,
    })
}

/// An `error` event or body: classified by the error's type, whatever the HTTP status said.
fn error_event(value: &Value) -> Failure {
    let kind = value.pointer("/error/type").and_then(Value::as_str).unwrap_or("");
    let message = value.pointer("/error/message").and_then(Value::as_str).unwrap_or("no message");
    let class = match kind {
        "overloaded_error" => ErrorKind::Overloaded,
        "rate_limit_error" => ErrorKind::RateLimited,
        "api_error" | "timeout_error" => ErrorKind::Server,
        "authentication_error" | "permission_error" => ErrorKind::Auth,
        _ => ErrorKind::Invalid,
    };
    Failure::new(class, format!("{kind}: {message}"))
}

/// A block being streamed.
enum Block {
    Text(String),
    Tool { id: String, name: String, json: String },
    Other,
}

/// The state of one streamed answer.
#[derive(Default)]
pub(super) struct Stream {
    id: String,
    model: String,
    blocks: Vec<Block>,
    stop: Option<String>,
    usage: Usage,
    started: bool,
    stopped: bool,
}

impl Stream {
    /// Takes one event; true once the answer is complete.
    pub(super) fn event(&mut self, event: sse_stream::Sse, on_text: OnText<'_>) -> Result<bool, Failure> {
        let Some(data) = event.data.as_deref() else { return Ok(false) };
        let value: Value = serde_json::from_str(data).map_err(|e| malformed(format!("event data is not JSON: {e}")))?;
        let kind = value.get("type").and_then(Value::as_str).unwrap_or("");
        if let Some(name) = event.event.as_deref()
            && name != kind
        {
            return Err(malformed(format!("an `{name}` event whose data is of type `{kind}`")));
        }
        match kind {
            "ping" => {}
            "error" => return Err(error_event(&value)),
            "message_start" => {
                let message = value.get("message").ok_or_else(|| malformed("message_start without a message"))?;
                self.id = message.get("id").and_then(Value::as_str).unwrap_or_default().to_owned();
                self.model = message.get("model").and_then(Value::as_str).unwrap_or_default().to_owned();
                if let Some(u) = message.get("usage").and_then(Value::as_object) {
                    usage_into(u, &mut self.usage);
                }
                self.started = true;
            }
            "content_block_start" => {
                let index = index_of(&value)?;
                if index != self.blocks.len() {
                    return Err(malformed(format!("block {index} started after {} blocks", self.blocks.len())));
                }
                let block =
                    value.get("content_block").ok_or_else(|| malformed("content_block_start without a block"))?;
                self.blocks.push(match block.get("type").and_then(Value::as_str) {
                    Some("text") => {
                        let text = block.get("text").and_then(Value::as_str).unwrap_or_default().to_owned();
                        if !text.is_empty() {
                            on_text(&text);
                        }
                        Block::Text(text)
                    }
                    Some("tool_use") => Block::Tool {
                        id: block
                            .get("id")
                            .and_then(Value::as_str)
                            .ok_or_else(|| malformed("a tool_use without id"))?
                            .to_owned(),
                        name: block
                            .get("name")
                            .and_then(Value::as_str)
                            .ok_or_else(|| malformed("a tool_use without name"))?
                            .to_owned(),
                        json: String::new(),
                    },
                    _ => Block::Other,
                });
            }
            "content_block_delta" => {
                let index = index_of(&value)?;
                let delta = value.get("delta").ok_or_else(|| malformed("content_block_delta without a delta"))?;
                let block = self
                    .blocks
                    .get_mut(index)
                    .ok_or_else(|| malformed(format!("a delta for block {index}, not started")))?;
                match (block, delta.get("type").and_then(Value::as_str)) {
                    (Block::Text(text), Some("text_delta")) => {
                        let piece = delta
                            .get("text")
                            .and_then(Value::as_str)
                            .ok_or_else(|| malformed("a text_delta without text"))?;
                        if !piece.is_empty() {
                            on_text(piece);
                        }
                        text.push_str(piece);
                    }
                    (Block::Tool { json, .. }, Some("input_json_delta")) => {
                        json.push_str(delta.get("partial_json").and_then(Value::as_str).unwrap_or_default());
                    }
                    (Block::Other, _) => {}
                    (_, other) => {
                        return Err(malformed(format!("a {other:?} delta for block {index} of another type")));
                    }
                }
            }
            "content_block_stop" => {
                let index = index_of(&value)?;
                if index >= self.blocks.len() {
                    return Err(malformed(format!("block {index} stopped, not started")));
                }
            }
            "message_delta" => {
                if let Some(reason) = value.pointer("/delta/stop_reason").and_then(Value::as_str) {
                    self.stop = Some(reason.to_owned());
                }
                // The final, cumulative totals: they replace what message_start said.
                if let Some(u) = value.get("usage").and_then(Value::as_object) {
                    usage_into(u, &mut self.usage);
                }
            }
            "message_stop" => {
                self.stopped = true;
                return Ok(true);
            }
            // Event types added later are ignored, as the SDKs do.
            _ => {}
        }
        Ok(false)
    }

    pub(super) fn finish(self) -> Result<Response, Failure> {
        if !self.started || !self.stopped {
            return Err(Failure::new(ErrorKind::Malformed, "the stream ended before message_stop"));
        }
        let mut content = Vec::with_capacity(self.blocks.len());
        for block in self.blocks {
            match block {
                Block::Text(text) => content.push(Part::Text { text }),
                Block::Tool { id, name, json } => {
                    let input = if json.trim().is_empty() {
                        json!({})
                    } else {
                        serde_json::from_str(&json)
                            .map_err(|e| malformed(format!("tool input of {name} is not JSON: {e}")))?
                    };
                    content.push(Part::ToolUse { id, name, input });
                }
                Block::Other => {}
            }
        }
        Ok(Response { id: self.id, model: self.model, content, stop: stop_of(self.stop.as_deref()), usage: self.usage })
    }
}

fn index_of(value: &Value) -> Result<usize, Failure> {
    value.get("index").and_then(Value::as_u64).map(|i| i as usize).ok_or_else(|| malformed("an event without an index"))
}
