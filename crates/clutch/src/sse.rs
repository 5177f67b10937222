//! A small Server-Sent Events parser (the WHATWG event-stream format), fed bytes as they arrive.

/// One dispatched event.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Event {
    /// The `event:` field; `message` when absent.
    pub name: String,
    pub data: String,
    /// The `id:` field of this event, if it had one.
    pub id: Option<String>,
}

/// Parser state: a partial line and the fields of the event being read.
#[derive(Debug, Default)]
pub struct Parser {
    line: Vec<u8>,
    /// The previous chunk ended with `\r`: a `\n` starting the next one belongs to it.
    after_cr: bool,
    name: String,
    data: String,
    has_data: bool,
    id: Option<String>,
}

impl Parser {
    /// Feeds `chunk` and returns the events it completed.
    pub fn feed(&mut self, chunk: &[u8]) -> Vec<Event> {
        let mut events = Vec::new();
        for &b in chunk {
            if self.after_cr {
                self.after_cr = false;
                if b == b'\n' {
                    continue;
                }
            }
            match b {
                b'\n' | b'\r' => {
                    self.after_cr = b == b'\r';
                    let line = std::mem::take(&mut self.line);
                    if let Some(event) = self.line_done(&String::from_utf8_lossy(&line)) {
                        events.push(event);
                    }
                }
                _ => self.line.push(b),
            }
        }
        events
    }

    fn line_done(&mut self, line: &str) -> Option<Event> {
        if line.is_empty() {
            return self.dispatch();
        }
        if line.starts_with(':') {
            return None;
        }
        let (field, value) = match line.split_once(':') {
            Some((f, v)) => (f, v.strip_prefix(' ').unwrap_or(v)),
            None => (line, ""),
        };
        match field {
            "event" => self.name = value.to_owned(),
            "data" => {
                if self.has_data {
                    self.data.push('\n');
                }
                self.data.push_str(value);
                self.has_data = true;
            }
            "id" if !value.contains('\0') => self.id = Some(value.to_owned()),
            _ => {}
        }
        None
    }

    fn dispatch(&mut self) -> Option<Event> {
        let name = std::mem::take(&mut self.name);
        let id = self.id.take();
        if !std::mem::take(&mut self.has_data) {
            return None;
        }
        let data = std::mem::take(&mut self.data);
        Some(Event { name: if name.is_empty() { "message".into() } else { name }, data, id })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn events_split_across_chunks_and_line_endings() {
        let mut p = Parser::default();
        let mut got = p.feed(b"id: 1\ndata: {\"a\"");
        assert!(got.is_empty());
        got.extend(p.feed(b":1}\n\n: keepalive\n\nid: 2\r"));
        got.extend(p.feed(b"\ndata: x\r\ndata: y\r\n\r\nevent: end\ndata: {\"frame\":\"lagged\"}\n\n"));
        assert_eq!(
            got,
            vec![
                Event { name: "message".into(), data: "{\"a\":1}".into(), id: Some("1".into()) },
                Event { name: "message".into(), data: "x\ny".into(), id: Some("2".into()) },
                Event { name: "end".into(), data: "{\"frame\":\"lagged\"}".into(), id: None },
            ]
        );
    }
}
