//! The OpenAI Chat Completions wire format (OpenAI, vLLM, llama.cpp, Ollama): the request body, a
//! whole answer, and the stream's chunks (string fields concatenated, tool calls told apart by
//! `index`, usage in the last chunk with no choices, an `error` key mid-stream, `[DONE]`).

use serde_json::{Map, Value, json};

use super::{ErrorKind, Failure, Finish, OnText, Part, Request, Response, Role, Usage};

pub(super) fn body(request: &Request, stream: bool) -> Value {
    let mut messages = Vec::new();
    if !request.system.is_empty() {
        messages.push(json!({"role": "system", "content": request.system}));
    }
    for turn in &request.messages {
        match turn.role {
            Role::User => {
                // Tool results are messages of their own, first, right after the assistant's calls.
                for p in &turn.content {
                    if let Part::ToolResult { tool_use_id, content, is_error } = p {
                        let content = if *is_error { format!("error: {content}") } else { content.clone() };
                        messages.push(json!({"role": "tool", "tool_call_id": tool_use_id, "content": content}));
                    }
                }
                let text = texts(&turn.content);
                if !text.is_empty() {
                    messages.push(json!({"role": "user", "content": text}));
                }
            }
            Role::Assistant => {
                let calls: Vec<Value> = turn
                    .content
                    .iter()
                    .filter_map(|p| match p {
                        Part::ToolUse { id, name, input } => Some(json!({
                            "id": id, "type": "function",
                            "function": {"name": name, "arguments": input.to_string()},
                        })),
                        _ => None,
                    })
                    .collect();
                let text = texts(&turn.content);
                let mut m =
                    json!({"role": "assistant", "content": if text.is_empty() { Value::Null } else { json!(text) }});
                if !calls.is_empty() {
                    m["tool_calls"] = Value::Array(calls);
                }
                messages.push(m);
            }
        }
    }
    let mut body = json!({"model": request.model, "messages": messages, "max_tokens": request.max_tokens});
    let map = body.as_object_mut().expect("an object");
    if let Some(t) = request.temperature {
        map.insert("temperature".into(), json!(t));
    }
    if !request.tools.is_empty() {
        let tools: Vec<Value> = request
            .tools
            .iter()
            .map(|t| json!({"type": "function", "function": {"name": t.name, "description": t.description, "parameters": t.input_schema}}))
            .collect();
        map.insert("tools".into(), Value::Array(tools));
        if let Some(name) = &request.tool_choice {
            map.insert("tool_choice".into(), json!({"type": "function", "function": {"name": name}}));
        }
    }
    if stream {
        map.insert("stream".into(), json!(true));
        map.insert("stream_options".into(), json!({"include_usage": true}));
    }
    body
}

fn texts(parts: &[Part]) -> String {
    parts
        .iter()
        .filter_map(|p| match p {
            Part::Text { text } => Some(text.as_str()),
            _ => None,
        })
        .collect()
}

fn malformed(what: impl std::fmt::Display) -> Failure {
    Failure::new(ErrorKind::Malformed, format!("a Chat Completions answer that does not parse: {what}"))
}

fn stop_of(reason: Option<&str>) -> Finish {
    match reason {
        Some("stop") | None => Finish::EndTurn,
        Some("tool_calls") | Some("function_call") => Finish::ToolUse,
        Some("length") => Finish::MaxTokens,
        Some(other) => Finish::Other(other.to_owned()),
    }
}

fn usage_of(usage: &Map<String, Value>) -> Usage {
    let num = |p: &str| Value::Object(usage.clone()).pointer(p).and_then(Value::as_u64).unwrap_or(0);
    let cached = num("/prompt_tokens_details/cached_tokens");
    Usage {
        // Cached prompt tokens are part of prompt_tokens here; kept apart as Anthropic counts them.
        input_tokens: num("/prompt_tokens").saturating_sub(cached),
        output_tokens: num("/completion_tokens"),
        cache_read_tokens: cached,
        cache_write_tokens: 0,
    }
}

/// An `{"error": {...}}` body or chunk: classified by its code or type.
fn error_of(error: &Value) -> Failure {
    let message = error.get("message").and_then(Value::as_str).unwrap_or("no message");
    let code =
        error.get("code").map(|c| c.as_str().map(str::to_owned).unwrap_or_else(|| c.to_string())).unwrap_or_default();
    let kind = error.get("type").and_then(Value::as_str).unwrap_or("");
    let class = match (kind, code.as_str()) {
        (_, "rate_limit_exceeded") | ("rate_limit_error", _) | (_, "429") => ErrorKind::RateLimited,
        (_, "overloaded") | ("overloaded_error", _) | (_, "529") | (_, "503") => ErrorKind::Overloaded,
        ("server_error", _) | (_, "500") | (_, "502") => ErrorKind::Server,
        _ => ErrorKind::Invalid,
    };
    Failure::new(class, format!("{kind} {code}: {message}").trim().to_owned())
}

/// A whole (non-streamed) answer.
pub(super) fn parse(value: Value) -> Result<Response, Failure> {
    if let Some(error) = value.get("error").filter(|e| !e.is_null()) {
        return Err(error_of(error));
    }
    let choice = value.pointer("/choices/0").ok_or_else(|| malformed("no choices"))?;
    let message = choice.get("message").ok_or_else(|| malformed("a choice without a message"))?;
    let mut content = Vec::new();
    if let Some(text) = message.get("content").and_then(Value::as_str).filter(|t| !t.is_empty()) {
        content.push(Part::Text { text: text.to_owned() });
    }
    for call in message.get("tool_calls").and_then(Value::as_array).into_iter().flatten() {
        let id = call.get("id").and_then(Value::as_str).ok_or_else(|| malformed("a tool call without id"))?;
        let name = call
            .pointer("/function/name")
            .and_then(Value::as_str)
            .ok_or_else(|| malformed("a tool call without a name"))?;
        let arguments = call.pointer("/function/arguments").and_then(Value::as_str).unwrap_or("{}");
        content.push(Part::ToolUse { id: id.to_owned(), name: name.to_owned(), input: arguments_of(name, arguments)? });
    }
    Ok(Response {
        id: value.get("id").and_then(Value::as_str).unwrap_or_default().to_owned(),
        model: value.get("model").and_then(Value::as_str).unwrap_or_default().to_owned(),
        content,
        stop: stop_of(choice.get("finish_reason").and_then(Value::as_str)),
        usage: value.get("usage").and_then(Value::as_object).map(usage_of).unwrap_or_default(),
    })
}

fn arguments_of(name: &str, arguments: &str) -> Result<Value, Failure> {
    if arguments.trim().is_empty() {
        return Ok(json!({}));
    }
    serde_json::from_str(arguments).map_err(|e| malformed(format!("the arguments of {name} are not JSON: {e}")))
}

#[derive(Default)]
struct Call {
    id: String,
    name: String,
    arguments: String,
}

/// The state of one streamed answer.
#[derive(Default)]
pub(super) struct Stream {
    id: String,
    model: String,
    text: String,
    calls: Vec<Call>,
    finish: Option<String>,
    usage: Usage,
    done: bool,
}

impl Stream {
    /// Takes one event; true once `[DONE]` came.
    pub(super) fn event(&mut self, event: sse_stream::Sse, on_text: OnText<'_>) -> Result<bool, Failure> {
        let Some(data) = event.data.as_deref() else { return Ok(false) };
        if data.trim() == "[DONE]" {
            self.done = true;
            return Ok(true);
        }
        let chunk: Value = serde_json::from_str(data).map_err(|e| malformed(format!("a chunk is not JSON: {e}")))?;
        if let Some(error) = chunk.get("error").filter(|e| !e.is_null()) {
            return Err(error_of(error));
        }
        if self.id.is_empty()
            && let Some(id) = chunk.get("id").and_then(Value::as_str)
        {
            self.id = id.to_owned();
        }
        if self.model.is_empty()
            && let Some(model) = chunk.get("model").and_then(Value::as_str)
        {
            self.model = model.to_owned();
        }
        if let Some(usage) = chunk.get("usage").and_then(Value::as_object) {
            self.usage = usage_of(usage);
        }
        for choice in chunk.get("choices").and_then(Value::as_array).into_iter().flatten() {
            if choice.get("index").and_then(Value::as_u64).unwrap_or(0) != 0 {
                continue;
            }
            if let Some(reason) = choice.get("finish_reason").and_then(Value::as_str) {
                self.finish = Some(reason.to_owned());
            }
            let Some(delta) = choice.get("delta") else { continue };
            if let Some(piece) = delta.get("content").and_then(Value::as_str).filter(|p| !p.is_empty()) {
                on_text(piece);
                self.text.push_str(piece);
            }
            for call in delta.get("tool_calls").and_then(Value::as_array).into_iter().flatten() {
                let index =
                    call.get("index")
                        .and_then(Value::as_u64)
                        .ok_or_else(|| malformed("a tool call delta without an index"))? as usize;
                if index > self.calls.len() {
                    return Err(malformed(format!("tool call {index} before call {}", self.calls.len())));
                }
                if index == self.calls.len() {
                    self.calls.push(Call::default());
                }
                let c = &mut self.calls[index];
                let piece = |p: &str| call.pointer(p).and_then(Value::as_str).unwrap_or_default();
                c.id.push_str(piece("/id"));
                c.name.push_str(piece("/function/name"));
                c.arguments.push_str(piece("/function/arguments"));
            }
        }
        Ok(false)
    }

    pub(super) fn finish(self) -> Result<Response, Failure> {
        if !self.done {
            return Err(Failure::new(ErrorKind::Malformed, "the stream ended before [DONE]"));
        }
        let mut content = Vec::new();
        if !self.text.is_empty() {
            content.push(Part::Text { text: self.text });
        }
        for call in self.calls {
            if call.id.is_empty() || call.name.is_empty() {
                return Err(malformed("a streamed tool call without its id or name"));
            }
            let input = arguments_of(&call.name, &call.arguments)?;
            content.push(Part::ToolUse { id: call.id, name: call.name, input });
        }
        Ok(Response {
            id: self.id,
            model: self.model,
            content,
            stop: stop_of(self.finish.as_deref()),
            usage: self.usage,
        })
    }
}
