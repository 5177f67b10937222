//! `clutch bench fanout`: the live stream to many subscribers. N subscribers to `GET /v1/stream` of
//! a `clutch serve` child process (over WebSocket, then over SSE) and one writer posting messages
//! at a fixed pace; then the same subscriber and writer code on Redis pub/sub (`SUBSCRIBE` and
//! `PUBLISH` of the same bytes) when a `redis-server` binary is on the machine. For each: latency
//! from the writer's send to each receive, whether every subscriber got every message once and in
//! order, the writer's acknowledgement time while it fans out, and the server's CPU per delivery
//! (read from `/proc`, so the load driver's own CPU is left out).

use std::path::PathBuf;
use std::time::{Duration, Instant, SystemTime};

use anyhow::{Context, bail};
use axum::body::Bytes;
use clap::{Args, ValueEnum};
use clutch_proto::id::{self, Kind};
use serde_json::json;
use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt, BufReader};
use tokio::net::TcpStream;

use super::process::Server;
use super::{http1, thousands};

#[derive(Debug, Args)]
pub struct FanoutArgs {
    /// Subscribers per transport, each on its own connection.
    #[arg(long, default_value_t = 100)]
    pub subscribers: usize,
    /// Messages per second from the one writer.
    #[arg(long, default_value_t = 200)]
    pub rate: u32,
    /// Seconds of writing per transport; the first second's messages are warm-up (checked for
    /// completeness and order, left out of the latencies).
    #[arg(long, default_value_t = 10)]
    pub duration: u32,
    /// Bytes of text per message.
    #[arg(long, default_value_t = 200)]
    pub payload_bytes: usize,
    /// Transports to measure, in this order.
    #[arg(long, value_delimiter = ',', default_values_t = [Transport::Ws, Transport::Sse, Transport::Redis])]
    pub transports: Vec<Transport>,
    /// The Redis server binary run for the anchor (on a free port, nothing saved); skipped with a
    /// note when it cannot be started.
    #[arg(long, default_value = "redis-server", value_name = "PATH")]
    pub redis_server: String,
    /// Where the daemon's SQLite files go.
    #[arg(long, default_value = ".clutch-bench", value_name = "DIR")]
    pub dir: PathBuf,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum Transport {
    /// `GET /v1/stream` upgraded to a WebSocket.
    Ws,
    /// `GET /v1/stream` as Server-Sent Events.
    Sse,
    /// Redis pub/sub: the anchor.
    Redis,
}

impl std::fmt::Display for Transport {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Transport::Ws => "ws",
            Transport::Sse => "sse",
            Transport::Redis => "redis",
        })
    }
}

/// What marks a message's text: `fanout:INDEX:NANOS:` (nanoseconds since the run's start).
const MARK: &[u8] = b"fanout:";
const CHANNEL: &str = "clutch-fanout";

pub async fn run(args: FanoutArgs) -> anyhow::Result<()> {
    if args.subscribers == 0 || args.rate == 0 || args.duration == 0 {
        bail!("--subscribers, --rate and --duration must be at least 1");
    }
    let stamp = SystemTime::now().duration_since(SystemTime::UNIX_EPOCH)?.as_millis();
    let dir = args.dir.join(format!("fanout-{stamp}"));
    let clutch_wanted = args.transports.iter().any(|t| *t != Transport::Redis);
    let daemon = if clutch_wanted { Some(Server::clutch(&dir).await?) } else { None };
    let start = Instant::now();
    let mut results = Vec::new();
    for &transport in &args.transports {
        // Redis runs for its own measurement only; the daemon serves both of its transports.
        let redis = match transport {
            Transport::Redis => match Server::redis(&args.redis_server).await {
                Ok(server) => Some(server),
                Err(e) => {
                    eprintln!("bench: no Redis anchor: {e:#}");
                    continue;
                }
            },
            _ => None,
        };
        let server = redis.as_ref().or(daemon.as_ref()).context("no server for this transport")?;
        eprintln!(
            "bench: {transport}: {} subscribers, {} msgs/s for {} s …",
            args.subscribers, args.rate, args.duration
        );
        let mut outcome = measure(&args, transport, server, start).await?;
        // The same writer with nobody listening: what a message costs the server before any fan-out.
        let alone = args.duration.min(5);
        eprintln!("bench: {transport}: the writer alone for {alone} s …");
        let before = server.cpu();
        let total = u64::from(args.rate) * u64::from(alone);
        write(&args, transport, &server.addr, total, start).await?;
        let cpu = server.cpu_since(before).unwrap_or_default();
        outcome.writer_us = cpu.as_secs_f64() * 1e6 / total.max(1) as f64;
        results.push((transport, outcome));
        if let Some(redis) = redis {
            redis.stop().await;
        }
    }
    if let Some(daemon) = daemon {
        daemon.stop().await;
        let _ = std::fs::remove_dir_all(&dir);
    }

    println!(
        "live fan-out: {} subscribers, one writer at {} msgs/s for {} s, {} bytes of text per message \
         (latency: send → each receive, first second left out; cpu: the server process's, per delivery)",
        args.subscribers, args.rate, args.duration, args.payload_bytes
    );
    for (transport, r) in &results {
        println!("{}", r.line(&transport.to_string()));
    }
    let redis = results.iter().find(|(t, _)| *t == Transport::Redis).map(|(_, r)| r);
    if let Some(redis) = redis {
        for (transport, r) in results.iter().filter(|(t, _)| *t != Transport::Redis) {
            println!(
                "  ratio    {transport}: p99 {:.2}× Redis pub/sub's, cpu per delivery {:.2}× ({:.2}× past the writer)",
                r.p99_ms / redis.p99_ms.max(1e-3),
                r.cpu_us / redis.cpu_us.max(1e-3),
                r.fanout_us() / redis.fanout_us().max(1e-3)
            );
        }
    }
    if results.iter().any(|(_, r)| r.lost + r.out_of_order > 0) {
        bail!("some subscriber lost, repeated or reordered messages");
    }
    Ok(())
}

/// One transport's figures.
struct Outcome {
    subscribers: usize,
    sent: u64,
    received: u64,
    lost: u64,
    out_of_order: u64,
    p50_ms: f64,
    p99_ms: f64,
    max_ms: f64,
    cpu_us: f64,
    /// The server's CPU per message with no subscriber: the writer's part of `cpu_us`, spread over
    /// the subscribers.
    writer_us: f64,
    ack_p50_ms: f64,
    ack_p99_ms: f64,
}

impl Outcome {
    /// CPU per delivery less the writer's share: the fan-out's own cost.
    fn fanout_us(&self) -> f64 {
        (self.cpu_us - self.writer_us / self.subscribers.max(1) as f64).max(0.0)
    }

    fn line(&self, label: &str) -> String {
        let expected = self.sent * self.subscribers as u64;
        format!(
            "  {label:<8} p50 {:>6.2} ms   p99 {:>6.2} ms   max {:>7.2} ms   cpu {:>5.1} µs/delivery \
             ({:.1} past the writer's {:.0} µs/message)   writer's ack p50 {:.2} ms p99 {:.2} ms   \
             {}/{} delivered, {} lost, {} out of order",
            self.p50_ms,
            self.p99_ms,
            self.max_ms,
            self.cpu_us,
            self.fanout_us(),
            self.writer_us,
            self.ack_p50_ms,
            self.ack_p99_ms,
            thousands(self.received),
            thousands(expected),
            self.lost,
            self.out_of_order
        )
    }
}

async fn measure(args: &FanoutArgs, transport: Transport, server: &Server, start: Instant) -> anyhow::Result<Outcome> {
    let total = u64::from(args.rate) * u64::from(args.duration);
    let warm = u64::from(args.rate);
    // Subscribers first, each ready (handshake done, subscription confirmed) before the writer starts.
    let mut subscribers = Vec::new();
    for _ in 0..args.subscribers {
        let frames = Frames::open(transport, &server.addr).await?;
        subscribers.push(tokio::spawn(consume(frames, total, warm, start)));
    }
    let cpu_before = server.cpu();
    let acks = write(args, transport, &server.addr, total, start).await?;
    let mut latencies = Vec::new();
    let (mut received, mut lost, mut out_of_order) = (0, 0, 0);
    for s in subscribers {
        let tally = s.await??;
        received += tally.received;
        lost += total.saturating_sub(tally.received);
        out_of_order += tally.out_of_order;
        latencies.extend(tally.latencies);
    }
    let cpu = server.cpu_since(cpu_before).unwrap_or_default();
    latencies.sort_unstable();
    let mut acks = acks;
    acks.sort_unstable();
    let at =
        |v: &[u32], q: f64| if v.is_empty() { 0.0 } else { v[((v.len() - 1) as f64 * q) as usize] as f64 / 1000.0 };
    Ok(Outcome {
        subscribers: args.subscribers,
        sent: total,
        received,
        lost,
        out_of_order,
        p50_ms: at(&latencies, 0.50),
        p99_ms: at(&latencies, 0.99),
        max_ms: at(&latencies, 1.0),
        cpu_us: cpu.as_secs_f64() * 1e6 / (total * args.subscribers as u64).max(1) as f64,
        writer_us: 0.0,
        ack_p50_ms: at(&acks, 0.50),
        ack_p99_ms: at(&acks, 0.99),
    })
}

/// The writer: `total` messages at `--rate`, each marked with its index and send time; answers the
/// acknowledgement times in microseconds.
async fn write(
    args: &FanoutArgs,
    transport: Transport,
    addr: &str,
    total: u64,
    start: Instant,
) -> anyhow::Result<Vec<u32>> {
    let run = id::generate(Kind::Run);
    let thread = id::generate(Kind::Thread);
    let task = id::generate(Kind::Task);
    let padding = "x".repeat(args.payload_bytes.saturating_sub(32));
    let mut pace = tokio::time::interval(Duration::from_secs_f64(1.0 / f64::from(args.rate)));
    pace.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Burst);
    let mut acks = Vec::with_capacity(total as usize);
    let body = |i: u64| {
        let text = format!("fanout:{i}:{}:{padding}", start.elapsed().as_nanos());
        json!({
            "thread_id": thread, "run_id": run, "task_id": task, "from": {"agent_id": "agent:bench"},
            "to": [{"agent_id": "agent:watchers"}], "type": "chat.message", "payload": {"text": text},
        })
        .to_string()
    };
    match transport {
        Transport::Redis => {
            let mut conn = BufReader::new(TcpStream::connect(addr).await?);
            conn.get_ref().set_nodelay(true)?;
            for i in 0..total {
                pace.tick().await;
                let sent = Instant::now();
                let payload = body(i);
                let command = format!(
                    "*3\r\n$7\r\nPUBLISH\r\n${}\r\n{CHANNEL}\r\n${}\r\n{payload}\r\n",
                    CHANNEL.len(),
                    payload.len()
                );
                conn.get_mut().write_all(command.as_bytes()).await?;
                let mut reply = String::new();
                conn.read_line(&mut reply).await?;
                if !reply.starts_with(':') {
                    bail!("PUBLISH answered {reply:?}");
                }
                acks.push(sent.elapsed().as_micros().min(u32::MAX as u128) as u32);
            }
        }
        Transport::Ws | Transport::Sse => {
            let target = http1::Target::new(&format!("http://{addr}"))?;
            let endpoint = target.post("/v1/messages", &[])?;
            let mut conn = target.connect().await?;
            for i in 0..total {
                pace.tick().await;
                let sent = Instant::now();
                conn.ok(&endpoint, Bytes::from(body(i))).await.context("the daemon refused a message")?;
                acks.push(sent.elapsed().as_micros().min(u32::MAX as u128) as u32);
            }
        }
    }
    Ok(acks)
}

/// What one subscriber saw.
struct Tally {
    received: u64,
    out_of_order: u64,
    latencies: Vec<u32>,
}

/// Reads marked messages until the last one (or until none comes for 10 s), checking each index is
/// the next one expected.
async fn consume(mut frames: Frames, total: u64, warm: u64, start: Instant) -> anyhow::Result<Tally> {
    let mut tally = Tally { received: 0, out_of_order: 0, latencies: Vec::with_capacity(total as usize) };
    let mut next = 0u64;
    while next < total {
        let Ok(frame) = tokio::time::timeout(Duration::from_secs(10), frames.next()).await else { break };
        let Some(frame) = frame? else { break };
        let Some((index, sent_nanos)) = marked(&frame) else { continue };
        let now = start.elapsed().as_nanos() as u64;
        tally.received += 1;
        if index != next {
            tally.out_of_order += 1;
        }
        next = index + 1;
        if index >= warm {
            tally.latencies.push((now.saturating_sub(sent_nanos) / 1000).min(u64::from(u32::MAX)) as u32);
        }
    }
    Ok(tally)
}

/// The index and send time marked in a frame's text.
fn marked(frame: &[u8]) -> Option<(u64, u64)> {
    let at = frame.windows(MARK.len()).position(|w| w == MARK)? + MARK.len();
    let mut fields = frame[at..].split(|b| *b == b':');
    let number = |f: Option<&[u8]>| std::str::from_utf8(f?).ok()?.parse::<u64>().ok();
    Some((number(fields.next())?, number(fields.next())?))
}

/// A subscriber's connection: the frames it receives, whatever the transport. Each reads its
/// protocol by hand from a buffered socket, as a lean client would: the same shape of client code for
/// all three, so that what differs is the server.
enum Frames {
    /// Frames after the upgrade.
    Ws(BufReader<TcpStream>),
    /// The chunked body, and the events' bytes read from it so far.
    Sse(BufReader<TcpStream>, Vec<u8>),
    /// RESP after `SUBSCRIBE`.
    Redis(BufReader<TcpStream>),
}

impl Frames {
    async fn open(transport: Transport, addr: &str) -> anyhow::Result<Frames> {
        let stream = TcpStream::connect(addr).await?;
        stream.set_nodelay(true)?;
        let mut conn = BufReader::new(stream);
        Ok(match transport {
            Transport::Ws => {
                let request = format!(
                    "GET /v1/stream HTTP/1.1\r\nHost: {addr}\r\nConnection: Upgrade\r\nUpgrade: websocket\r\n\
                     Sec-WebSocket-Version: 13\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n\r\n"
                );
                conn.get_mut().write_all(request.as_bytes()).await?;
                let head = response_head(&mut conn).await?;
                if !head.starts_with("http/1.1 101") {
                    bail!("GET /v1/stream did not upgrade to a WebSocket: {head}");
                }
                Frames::Ws(conn)
            }
            Transport::Sse => {
                let request = format!("GET /v1/stream HTTP/1.1\r\nHost: {addr}\r\nAccept: text/event-stream\r\n\r\n");
                conn.get_mut().write_all(request.as_bytes()).await?;
                let head = response_head(&mut conn).await?;
                if !head.starts_with("http/1.1 200") || !head.contains("transfer-encoding: chunked") {
                    bail!("GET /v1/stream did not answer a chunked event stream: {head}");
                }
                Frames::Sse(conn, Vec::new())
            }
            Transport::Redis => {
                let command = format!("*2\r\n$9\r\nSUBSCRIBE\r\n${}\r\n{CHANNEL}\r\n", CHANNEL.len());
                conn.get_mut().write_all(command.as_bytes()).await?;
                let mut frames = Frames::Redis(conn);
                // The confirmation: ["subscribe", channel, 1].
                frames.next().await?.context("Redis closed before confirming SUBSCRIBE")?;
                frames
            }
        })
    }

    /// The next frame's bytes (a WebSocket message, an SSE event, a pub/sub message), or `None` at
    /// the end of the stream.
    async fn next(&mut self) -> anyhow::Result<Option<Bytes>> {
        match self {
            Frames::Ws(conn) => loop {
                // RFC 6455 §5.2: the server's frames are unmasked; /v1/stream sends each message whole.
                let mut head = [0u8; 2];
                if let Err(e) = conn.read_exact(&mut head).await {
                    return if e.kind() == std::io::ErrorKind::UnexpectedEof { Ok(None) } else { Err(e.into()) };
                }
                let len = match head[1] & 0x7f {
                    126 => u64::from(conn.read_u16().await?),
                    127 => conn.read_u64().await?,
                    n => u64::from(n),
                };
                let mut payload = vec![0; usize::try_from(len)?];
                conn.read_exact(&mut payload).await?;
                match head[0] & 0x0f {
                    0x1 if head[0] & 0x80 != 0 => return Ok(Some(Bytes::from(payload))),
                    0x0 | 0x1 => bail!("a fragmented WebSocket message"),
                    0x8 => return Ok(None),
                    _ => {}
                }
            },
            Frames::Sse(conn, events) => loop {
                if let Some(end) = events.windows(2).position(|w| w == b"\n\n") {
                    let event: Vec<u8> = events.drain(..end + 2).collect();
                    return Ok(Some(Bytes::from(event)));
                }
                // The next chunk of the body: its size in hex, CRLF, the data, CRLF.
                let mut size = String::new();
                if conn.read_line(&mut size).await? == 0 {
                    return Ok(None);
                }
                let size = usize::from_str_radix(size.trim_end(), 16).context("a chunk's size")?;
                if size == 0 {
                    return Ok(None);
                }
                let at = events.len();
                events.resize(at + size + 2, 0);
                conn.read_exact(&mut events[at..]).await?;
                events.truncate(at + size);
            },
            Frames::Redis(conn) => {
                // A RESP array of bulk strings and integers: ["message", channel, payload].
                let mut line = String::new();
                if conn.read_line(&mut line).await? == 0 {
                    return Ok(None);
                }
                let count: usize = line.trim_end().strip_prefix('*').context("not a RESP array")?.parse()?;
                let mut last = Bytes::new();
                for _ in 0..count {
                    line.clear();
                    conn.read_line(&mut line).await?;
                    let line = line.trim_end();
                    if let Some(len) = line.strip_prefix('$') {
                        let mut data = vec![0; len.parse::<usize>()? + 2];
                        conn.read_exact(&mut data).await?;
                        data.truncate(data.len() - 2);
                        last = Bytes::from(data);
                    }
                }
                Ok(Some(last))
            }
        }
    }
}

/// An HTTP response's head, lowercased; what follows it stays in `conn`'s buffer.
async fn response_head(conn: &mut BufReader<TcpStream>) -> anyhow::Result<String> {
    let mut head = String::new();
    while !head.ends_with("\r\n\r\n") {
        if conn.read_line(&mut head).await? == 0 {
            bail!("the connection closed in the response's head: {head:?}");
        }
    }
    Ok(head.to_ascii_lowercase())
}

#[cfg(test)]
mod tests {
    #[test]
    fn marks_are_read_from_anywhere_in_a_frame() {
        assert_eq!(super::marked(br#"{"payload":{"text":"fanout:12:3456:xxx"}}"#), Some((12, 3456)));
        assert_eq!(super::marked(b"no mark"), None);
        assert_eq!(super::marked(b"fanout:x:1:"), None);
    }
}
