//! Server-Sent Events read from a response body as they arrive, for `clutch tail` and `clutch a2a
//! send --follow`: the WHATWG event-stream format as the `sse-stream` crate parses it (the providers'
//! parser too), each event with its name, data and id. Comments (the daemon's keep-alives) and events
//! without data yield nothing; an event cut off by the end of the body is dropped.

use std::io;
use std::time::Duration;

use futures_util::{Stream, StreamExt, stream};
use sse_stream::{Sse, SseStream};

/// One dispatched event.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Event {
    /// The `event:` field; `message` when absent.
    pub name: String,
    pub data: String,
    /// The `id:` field of this event, if it had one.
    pub id: Option<String>,
}

/// The events of `body` (a response's `bytes_stream()`), in order. The stream ends when the body
/// does, and yields an error when the body breaks off, when it is not an event stream, or when
/// nothing at all (not even a keep-alive comment) arrived for `idle`: the caller stops there.
pub fn events<S, D, E>(body: S, idle: Option<Duration>) -> impl Stream<Item = anyhow::Result<Event>>
where
    S: Stream<Item = Result<D, E>> + Unpin,
    D: AsRef<[u8]>,
    E: std::error::Error + Send + Sync + 'static,
{
    let chunks = stream::unfold(body, move |mut body| async move {
        let next = match idle {
            None => body.next().await,
            Some(idle) => match tokio::time::timeout(idle, body.next()).await {
                Ok(next) => next,
                Err(_) => {
                    let silent = format!("nothing arrived for {idle:?}");
                    return Some((Err(io::Error::new(io::ErrorKind::TimedOut, silent)), body));
                }
            },
        };
        Some((next?.map(io::Cursor::new).map_err(io::Error::other), body))
    });
    SseStream::from_bytes_stream(chunks).filter_map(|item| async move {
        match item {
            Ok(Sse { event, data, id, .. }) => {
                let name = event.filter(|name| !name.is_empty()).unwrap_or_else(|| "message".into());
                data.map(|data| Ok(Event { name, data, id }))
            }
            // The body's own error (the connection broke, or went silent), with its causes.
            Err(sse_stream::Error::Body(e)) => Some(Err(anyhow::anyhow!(e))),
            Err(e) => Some(Err(anyhow::anyhow!("not an event stream: {e}"))),
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every item of the stream `chunks` make, read to its end (or its first error, as the callers
    /// stop there).
    async fn read(
        chunks: Vec<&'static [u8]>,
        end: impl Stream<Item = Result<Vec<u8>, io::Error>> + Unpin,
    ) -> Vec<Result<Event, String>> {
        let body = stream::iter(chunks.into_iter().map(|c| Ok(c.to_vec()))).chain(end);
        let mut events = std::pin::pin!(events(body, Some(Duration::from_millis(50))));
        let mut got = Vec::new();
        while let Some(item) = events.next().await {
            let failed = item.is_err();
            got.push(item.map_err(|e| format!("{e:#}")));
            if failed {
                break;
            }
        }
        got
    }

    fn event(name: &str, data: &str, id: Option<&str>) -> Result<Event, String> {
        Ok(Event { name: name.into(), data: data.into(), id: id.map(Into::into) })
    }

    #[tokio::test]
    async fn events_split_across_chunks_and_line_endings() {
        let got = read(
            vec![
                b"id: 1\ndata: {\"a\"",
                b":1}\n\n: keepalive\n\nid: 2\r",
                b"\ndata: x\r\ndata: y\r\n\r\nevent: end\ndata: {\"frame\":\"lagged\"}\n\n",
            ],
            stream::empty(),
        )
        .await;
        assert_eq!(
            got,
            vec![
                event("message", "{\"a\":1}", Some("1")),
                event("message", "x\ny", Some("2")),
                event("end", "{\"frame\":\"lagged\"}", None),
            ]
        );
    }

    #[tokio::test]
    async fn a_stream_that_breaks_off_ends_with_an_error_after_its_whole_events() {
        let broke = stream::iter([Err(io::Error::new(io::ErrorKind::ConnectionReset, "connection reset"))]);
        let got = read(vec![b"id: 7\ndata: a\n\nid: 8\ndata: b"], broke).await;
        assert_eq!(got, vec![event("message", "a", Some("7")), Err("connection reset".into())]);

        // The body ending in the middle of an event drops that event, without an error.
        let got = read(vec![b"data: a\n\nid: 8\ndata: b\n"], stream::empty()).await;
        assert_eq!(got, vec![event("message", "a", None)]);
    }

    #[tokio::test]
    async fn a_silent_stream_is_an_error_and_keep_alives_are_not_events() {
        let got = read(vec![b": keepalive\n\n", b"data: a\n\n", b": keepalive\n\n"], stream::pending()).await;
        assert_eq!(got, vec![event("message", "a", None), Err("nothing arrived for 50ms".into())]);
    }
}
