//! The live stream over WebSocket and SSE: catch-up without gaps while appends continue, filters,
//! resume by cursor, the slow-subscriber cut-off, and the final frame on shutdown.

use std::time::Duration;

use futures_util::StreamExt;
use serde_json::{Value, json};
use tokio_tungstenite::tungstenite::Message as Ws;

use crate::{Daemon, msg, run_id, start, start_with};

async fn ws(
    d: &Daemon,
    query: &str,
) -> tokio_tungstenite::WebSocketStream<tokio_tungstenite::MaybeTlsStream<tokio::net::TcpStream>> {
    let (socket, _) = tokio_tungstenite::connect_async(format!("ws://{}/v1/stream?{query}", d.addr)).await.unwrap();
    socket
}

/// The next JSON text frame, skipping pings.
pub(crate) async fn next_json(
    socket: &mut tokio_tungstenite::WebSocketStream<tokio_tungstenite::MaybeTlsStream<tokio::net::TcpStream>>,
) -> Value {
    loop {
        let frame = tokio::time::timeout(Duration::from_secs(20), socket.next()).await.expect("a frame in time");
        match frame.expect("stream open").expect("frame ok") {
            Ws::Text(t) => return serde_json::from_str(&t).unwrap(),
            Ws::Ping(_) | Ws::Pong(_) => {}
            other => panic!("unexpected frame {other:?}"),
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn websocket_catches_up_without_gaps_while_appends_continue() {
    let d = start().await;
    let run = run_id();
    let batch: Vec<Value> = (0..3000).map(|_| msg(&run, "task.progress")).collect();
    d.post(&Value::Array(batch)).await;
    let writer = {
        let (http, url, run) = (d.http.clone(), d.url.clone(), run.clone());
        tokio::spawn(async move {
            for _ in 0..40 {
                let batch: Vec<Value> = (0..50).map(|_| msg(&run, "task.progress")).collect();
                let r = http.post(format!("{url}/v1/messages")).json(&batch).send().await.unwrap();
                assert_eq!(r.status(), 200);
            }
        })
    };
    let mut socket = ws(&d, &format!("run_id={run}&after=10")).await;
    for expected in 11..=5000u64 {
        let e = next_json(&mut socket).await;
        assert_eq!(e["seq"].as_u64(), Some(expected), "no gap, no repeat");
    }
    writer.await.unwrap();
    d.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn websocket_without_cursor_starts_live_and_filters() {
    let d = start().await;
    let (run, other) = (run_id(), run_id());
    d.post(&msg(&run, "task.result")).await;
    let mut socket = ws(&d, &format!("run_id={run}&type=task.result")).await;
    // The subscription is registered once the upgrade completes; a marker proves it is live.
    d.post(&msg(&other, "task.result")).await;
    d.post(&msg(&run, "chat.message")).await;
    let (_, ack) = d.post(&msg(&run, "task.result")).await;
    let e = next_json(&mut socket).await;
    assert_eq!(e["seq"], ack["seq"]);
    assert_eq!(e["type"], "task.result");
    d.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sse_streams_and_resumes_from_last_event_id() {
    let d = start().await;
    let run = run_id();
    for _ in 0..3 {
        d.post(&msg(&run, "chat.message")).await;
    }
    let read_events = |resp: reqwest::Response, n: usize| async move {
        let mut body = resp.bytes_stream();
        let mut text = String::new();
        let mut events = Vec::new();
        while events.len() < n {
            let chunk = tokio::time::timeout(Duration::from_secs(20), body.next()).await.unwrap().unwrap().unwrap();
            text.push_str(std::str::from_utf8(&chunk).unwrap());
            while let Some(end) = text.find("\n\n") {
                let block: String = text.drain(..end + 2).collect();
                let id = block.lines().find_map(|l| l.strip_prefix("id: ")).map(str::to_string);
                if let Some(data) = block.lines().find_map(|l| l.strip_prefix("data: ")) {
                    events.push((id, serde_json::from_str::<Value>(data).unwrap()));
                }
            }
        }
        events
    };
    let resp = d
        .http
        .get(format!("{}/v1/stream?run_id={run}&after=0", d.url))
        .header("accept", "text/event-stream")
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), 200);
    assert!(resp.headers()["content-type"].to_str().unwrap().starts_with("text/event-stream"));
    let events = read_events(resp, 3).await;
    assert_eq!(events.iter().map(|(id, _)| id.clone().unwrap()).collect::<Vec<_>>(), ["1", "2", "3"]);
    assert_eq!(events[2].1["seq"], 3);

    d.post(&msg(&run, "chat.message")).await;
    let resp = d
        .http
        .get(format!("{}/v1/stream?run_id={run}", d.url))
        .header("accept", "text/event-stream")
        .header("last-event-id", "2")
        .send()
        .await
        .unwrap();
    let events = read_events(resp, 2).await;
    assert_eq!(events.iter().map(|(_, e)| e["seq"].as_u64().unwrap()).collect::<Vec<_>>(), [3, 4]);
    d.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn slow_websocket_subscriber_is_cut_off_with_its_cursor() {
    let d = start_with(
        clutch_core::log::Options { subscriber_buffer: 16, ..Default::default() },
        clutch_gateway::Options::default(),
    )
    .await;
    let run = run_id();
    let mut socket = ws(&d, "").await;
    d.post(&msg(&run, "chat.message")).await;
    assert_eq!(next_json(&mut socket).await["seq"], 1);
    d.post(&msg(&run, "chat.message")).await;
    assert_eq!(next_json(&mut socket).await["seq"], 2);
    // Now the client stops reading while far more than the buffer and the socket buffers is published.
    let mut big = msg(&run, "chat.message");
    big["payload"]["text"] = json!("x".repeat(16_000));
    for _ in 0..20 {
        let batch: Vec<Value> = (0..100).map(|_| big.clone()).collect();
        d.post(&Value::Array(batch)).await;
    }
    let mut last = 2;
    let end = loop {
        let frame = next_json(&mut socket).await;
        if frame.get("frame").is_some() {
            break frame;
        }
        let seq = frame["seq"].as_u64().unwrap();
        assert_eq!(seq, last + 1, "events before the cut-off have no gap");
        last = seq;
    };
    assert_eq!(end["frame"], "lagged");
    assert_eq!(end["code"], "SLOW_CONSUMER");
    assert_eq!(end["last_seq"].as_u64(), Some(last));
    assert!(last < 2002, "the subscriber was cut off before the end");
    let text = d.http.get(format!("{}/metrics", d.url)).send().await.unwrap().text().await.unwrap();
    assert!(text.contains("clutch_stream_lagged_drops_total 1"), "{text}");

    // Resuming with after=last_seq continues exactly where it stopped.
    let mut again = ws(&d, &format!("after={last}")).await;
    assert_eq!(next_json(&mut again).await["seq"].as_u64(), Some(last + 1));
    d.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn shutdown_sends_a_final_frame_with_the_cursor() {
    let d = start().await;
    let run = run_id();
    d.post(&msg(&run, "chat.message")).await;
    let mut socket = ws(&d, "after=0").await;
    assert_eq!(next_json(&mut socket).await["seq"], 1);
    let mut sse = RawSse::open(&d, "after=0").await;
    assert_eq!(sse.event().await.1, Some(1));
    let reader = tokio::spawn(async move { next_json(&mut socket).await });
    let sse_reader = tokio::spawn(async move {
        let end = sse.event().await;
        (end, sse.chunk().await)
    });
    d.shutdown().await;
    let end = reader.await.unwrap();
    assert_eq!((end["frame"].as_str(), end["last_seq"].as_u64()), (Some("shutdown"), Some(1)));
    let ((name, _, end), last_chunk) = sse_reader.await.unwrap();
    assert_eq!(name.as_deref(), Some("end"));
    assert_eq!((end["frame"].as_str(), end["last_seq"].as_u64()), (Some("shutdown"), Some(1)));
    assert_eq!(last_chunk, None, "the SSE body ends with its last chunk");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_stream_filters_are_refused_before_upgrade() {
    let d = start().await;
    let (status, e) = d.get("/v1/stream?type=nope").await;
    assert_eq!((status, e["error"]["field"].as_str()), (400, Some("type")));
    let (status, e) = d.get("/v1/stream?after=abc").await;
    assert_eq!((status, e["error"]["code"].as_str()), (400, Some("VALIDATION_FAILED")));
    d.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn many_websocket_and_sse_subscribers_each_get_every_event_once_in_order() {
    // Subscribers join at different cursors while a writer appends: each catches up from the store,
    // then the fan-out writes to it directly, with no gap and no repeat at the hand-over.
    let d = start().await;
    let run = run_id();
    let first: Vec<Value> = (0..200).map(|_| msg(&run, "task.progress")).collect();
    d.post(&Value::Array(first)).await;
    let writer = {
        let (http, url, run) = (d.http.clone(), d.url.clone(), run.clone());
        tokio::spawn(async move {
            for _ in 0..100 {
                let batch: Vec<Value> = (0..3).map(|_| msg(&run, "task.progress")).collect();
                let r = http.post(format!("{url}/v1/messages")).json(&batch).send().await.unwrap();
                assert_eq!(r.status(), 200);
            }
        })
    };
    // Half over WebSocket, half over SSE on raw connections that check the chunked framing.
    let mut readers = Vec::new();
    for i in 0..20u64 {
        let after = i * 10;
        let query = format!("run_id={run}&after={after}");
        if i % 2 == 0 {
            let mut socket = ws(&d, &query).await;
            readers.push(tokio::spawn(async move {
                for expected in after + 1..=500 {
                    let e = next_json(&mut socket).await;
                    assert_eq!(e["seq"].as_u64(), Some(expected), "subscriber from {after}: no gap, no repeat");
                }
                Box::new(socket) as Box<dyn Send>
            }));
        } else {
            let mut sse = RawSse::open(&d, &query).await;
            readers.push(tokio::spawn(async move {
                for expected in after + 1..=500 {
                    let (name, id, e) = sse.event().await;
                    assert_eq!((name, id), (None, Some(expected)), "SSE subscriber from {after}");
                    assert_eq!(e["seq"].as_u64(), Some(expected), "SSE subscriber from {after}: no gap, no repeat");
                }
                Box::new(sse) as Box<dyn Send>
            }));
        }
    }
    writer.await.unwrap();
    let mut sockets = Vec::new();
    for reader in readers {
        sockets.push(reader.await.unwrap());
    }
    let text = d.http.get(format!("{}/metrics", d.url)).send().await.unwrap().text().await.unwrap();
    assert!(text.contains("clutch_stream_subscribers 20"), "{text}");
    // Once they leave, the gauge comes back to zero.
    drop(sockets);
    let mut gauge = String::new();
    for _ in 0..100 {
        let text = d.http.get(format!("{}/metrics", d.url)).send().await.unwrap().text().await.unwrap();
        gauge = text.lines().find(|l| l.starts_with("clutch_stream_subscribers ")).unwrap().to_owned();
        if gauge == "clutch_stream_subscribers 0" {
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert_eq!(gauge, "clutch_stream_subscribers 0");
    d.shutdown().await;
}

/// A WebSocket client written by hand, to send what a library would not: an unmasked frame.
async fn raw_websocket(d: &Daemon) -> tokio::net::TcpStream {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let mut tcp = tokio::net::TcpStream::connect(d.addr).await.unwrap();
    let request = format!(
        "GET /v1/stream HTTP/1.1\r\nHost: {}\r\nConnection: keep-alive, Upgrade\r\nUpgrade: websocket\r\n\
         Sec-WebSocket-Version: 13\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n\r\n",
        d.addr
    );
    tcp.write_all(request.as_bytes()).await.unwrap();
    let mut head = Vec::new();
    while !head.ends_with(b"\r\n\r\n") {
        head.push(tcp.read_u8().await.unwrap());
    }
    let head = String::from_utf8(head).unwrap().to_ascii_lowercase();
    assert!(head.starts_with("http/1.1 101"), "{head}");
    // RFC 6455 §1.3's example key and its accept value.
    assert!(head.contains("sec-websocket-accept: s3pplmbitxaq9kygzzhzrbk+xoo="), "{head}");
    tcp
}

/// The next frame from the server: its first byte (FIN and opcode) and its payload.
async fn raw_frame(tcp: &mut tokio::net::TcpStream) -> (u8, Vec<u8>) {
    use tokio::io::AsyncReadExt;
    let read = async {
        let first = tcp.read_u8().await.unwrap();
        let len = match tcp.read_u8().await.unwrap() {
            126 => u64::from(tcp.read_u16().await.unwrap()),
            127 => tcp.read_u64().await.unwrap(),
            n => u64::from(n),
        };
        let mut payload = vec![0; len as usize];
        tcp.read_exact(&mut payload).await.unwrap();
        (first, payload)
    };
    tokio::time::timeout(Duration::from_secs(20), read).await.expect("a frame in time")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn websocket_answers_pings_closes_and_refuses_unmasked_frames() {
    use tokio::io::AsyncWriteExt;
    let d = start().await;
    let run = run_id();

    // A masked ping is answered with a pong carrying its payload, in order with the events.
    let mut tcp = raw_websocket(&d).await;
    let (_, ack) = d.post(&msg(&run, "chat.message")).await;
    let (first, payload) = raw_frame(&mut tcp).await;
    assert_eq!(first, 0x81, "a final text frame");
    assert_eq!(serde_json::from_slice::<Value>(&payload).unwrap()["seq"], ack["seq"]);
    let mask = [1u8, 2, 3, 4];
    let ping: Vec<u8> = b"hi".iter().enumerate().map(|(i, b)| b ^ mask[i % 4]).collect();
    tcp.write_all(&[&[0x89, 0x80 | 2][..], &mask, &ping].concat()).await.unwrap();
    assert_eq!(raw_frame(&mut tcp).await, (0x8A, b"hi".to_vec()), "a pong with the ping's payload");

    // A close is echoed with its code, and the connection ends.
    let code: Vec<u8> = 1000u16.to_be_bytes().iter().enumerate().map(|(i, b)| b ^ mask[i % 4]).collect();
    tcp.write_all(&[&[0x88, 0x80 | 2][..], &mask, &code].concat()).await.unwrap();
    assert_eq!(raw_frame(&mut tcp).await, (0x88, 1000u16.to_be_bytes().to_vec()));

    // An unmasked frame from a client is a protocol error (1002).
    let mut tcp = raw_websocket(&d).await;
    tcp.write_all(&[0x89, 0x00]).await.unwrap();
    let (first, payload) = raw_frame(&mut tcp).await;
    assert_eq!((first, &payload[..2]), (0x88, &1002u16.to_be_bytes()[..]));

    // So is a frame longer than a subscriber may send (1009), refused from its head alone.
    let mut tcp = raw_websocket(&d).await;
    tcp.write_all(&[&[0x82, 0x80 | 127][..], &(1u64 << 20).to_be_bytes(), &mask].concat()).await.unwrap();
    let (first, payload) = raw_frame(&mut tcp).await;
    assert_eq!((first, &payload[..2]), (0x88, &1009u16.to_be_bytes()[..]));
    d.shutdown().await;
}

/// An SSE client on a raw connection, reading the chunked body chunk by chunk, strictly.
struct RawSse {
    tcp: tokio::io::BufReader<tokio::net::TcpStream>,
    text: String,
}

impl RawSse {
    async fn open(d: &Daemon, query: &str) -> RawSse {
        use tokio::io::AsyncWriteExt;
        let mut tcp = tokio::net::TcpStream::connect(d.addr).await.unwrap();
        let request =
            format!("GET /v1/stream?{query} HTTP/1.1\r\nHost: {}\r\nAccept: text/event-stream\r\n\r\n", d.addr);
        tcp.write_all(request.as_bytes()).await.unwrap();
        let mut sse = RawSse { tcp: tokio::io::BufReader::new(tcp), text: String::new() };
        let head = sse.head().await;
        assert!(head.starts_with("http/1.1 200"), "{head}");
        assert!(head.contains("content-type: text/event-stream"), "{head}");
        assert!(head.contains("transfer-encoding: chunked"), "{head}");
        sse
    }

    /// A response's head, lowercased.
    async fn head(&mut self) -> String {
        use tokio::io::AsyncBufReadExt;
        let mut head = String::new();
        while !head.ends_with("\r\n\r\n") {
            let read = tokio::time::timeout(Duration::from_secs(20), self.tcp.read_line(&mut head)).await;
            assert!(read.expect("a head in time").unwrap() > 0, "the connection closed in a head: {head}");
        }
        head.to_ascii_lowercase()
    }

    /// The next chunk of the body, `None` for the last (empty) one.
    async fn chunk(&mut self) -> Option<String> {
        use tokio::io::{AsyncBufReadExt, AsyncReadExt};
        let read = async {
            let mut size = String::new();
            self.tcp.read_line(&mut size).await.unwrap();
            let size = usize::from_str_radix(size.strip_suffix("\r\n").expect("a chunk size line"), 16).unwrap();
            let mut data = vec![0; size + 2];
            self.tcp.read_exact(&mut data).await.unwrap();
            assert!(data.ends_with(b"\r\n"), "a chunk ends with CRLF");
            data.truncate(size);
            (size > 0).then(|| String::from_utf8(data).unwrap())
        };
        tokio::time::timeout(Duration::from_secs(20), read).await.expect("a chunk in time")
    }

    /// The next event that carries data: its name, its id and its data; keep-alives skipped.
    async fn event(&mut self) -> (Option<String>, Option<u64>, Value) {
        loop {
            if let Some(end) = self.text.find("\n\n") {
                let block: String = self.text.drain(..end + 2).collect();
                let Some(data) = block.lines().find_map(|l| l.strip_prefix("data: ")) else { continue };
                let name = block.lines().find_map(|l| l.strip_prefix("event: ")).map(str::to_owned);
                let id = block.lines().find_map(|l| l.strip_prefix("id: ")).map(|id| id.parse().unwrap());
                return (name, id, serde_json::from_str(data).unwrap());
            }
            let chunk = self.chunk().await.expect("the body goes on");
            self.text.push_str(&chunk);
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sse_is_chunked_on_its_connection_cut_off_when_slow_and_the_connection_serves_on() {
    // The head is hyper's, the catch-up the subscriber's task's, the live events the fan-out's, the
    // last chunk hyper's again: one well-formed chunked body, and the connection serves on after it.
    use tokio::io::AsyncWriteExt;
    let d = start_with(
        clutch_core::log::Options { subscriber_buffer: 16, ..Default::default() },
        clutch_gateway::Options::default(),
    )
    .await;
    let run = run_id();
    for _ in 0..3 {
        d.post(&msg(&run, "chat.message")).await;
    }
    let mut sse = RawSse::open(&d, "after=0").await;
    for seq in 1..=3 {
        assert_eq!(sse.event().await.1, Some(seq), "caught up from the store");
    }
    d.post(&msg(&run, "chat.message")).await;
    assert_eq!(sse.event().await.1, Some(4), "live");
    // Now the client stops reading while far more than the buffer and the socket buffers is published.
    let mut big = msg(&run, "chat.message");
    big["payload"]["text"] = json!("x".repeat(16_000));
    for _ in 0..20 {
        let batch: Vec<Value> = (0..100).map(|_| big.clone()).collect();
        d.post(&Value::Array(batch)).await;
    }
    let mut last = 4;
    let end = loop {
        let (name, id, data) = sse.event().await;
        if name.is_some() {
            assert_eq!((name.as_deref(), id), (Some("end"), None));
            break data;
        }
        assert_eq!(id, Some(last + 1), "events before the cut-off have no gap");
        last += 1;
    };
    assert_eq!((end["frame"].as_str(), end["code"].as_str()), (Some("lagged"), Some("SLOW_CONSUMER")));
    assert_eq!(end["last_seq"].as_u64(), Some(last));
    assert!(last < 2004, "the subscriber was cut off before the end");
    assert_eq!(sse.chunk().await, None, "hyper ends the body");

    let request = format!("GET /healthz HTTP/1.1\r\nHost: {}\r\n\r\n", d.addr);
    sse.tcp.get_mut().write_all(request.as_bytes()).await.unwrap();
    let head = sse.head().await;
    assert!(head.starts_with("http/1.1 200"), "the same connection serves the next request: {head}");

    // HEAD has no body to stream on: the head alone, and the connection serves on.
    let mut tcp = tokio::net::TcpStream::connect(d.addr).await.unwrap();
    let requests = format!(
        "HEAD /v1/stream HTTP/1.1\r\nHost: {0}\r\nAccept: text/event-stream\r\n\r\n\
         GET /healthz HTTP/1.1\r\nHost: {0}\r\n\r\n",
        d.addr
    );
    tcp.write_all(requests.as_bytes()).await.unwrap();
    let mut raw = RawSse { tcp: tokio::io::BufReader::new(tcp), text: String::new() };
    let head = raw.head().await;
    assert!(head.starts_with("http/1.1 200") && head.contains("text/event-stream"), "{head}");
    let head = raw.head().await;
    assert!(head.starts_with("http/1.1 200"), "after HEAD the connection serves on: {head}");
    d.shutdown().await;
}
