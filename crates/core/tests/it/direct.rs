//! Direct subscribers (`clutch_core::direct`) over a real socket: the catch-up written by the
//! subscriber's task, the live events by the fan-out thread, the hand-over without a gap or a repeat,
//! a frame a full socket cut short finished by the task, and the cut-off of a subscriber too far behind.

use std::io::{BufRead, BufReader, Write};
use std::os::unix::net::UnixStream;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use bytes::Bytes;
use clutch_core::log::Options;
use clutch_core::{End, Out, Socket, Wire};
use clutch_proto::MessageType;
use clutch_proto::id::{self, Kind};
use clutch_store::Filter;

use crate::{message, start};

/// One event per line: its wire form and a newline.
struct Lines {
    stream: UnixStream,
    /// Frames the fan-out wrote whole.
    whole: AtomicUsize,
    /// Frames the socket cut short.
    cut: AtomicUsize,
}

impl Socket for Lines {
    fn try_send(&self, wire: &Wire) -> std::io::Result<Option<Bytes>> {
        let frame = [&wire.bytes[..], b"\n"].concat();
        let sent = match (&self.stream).write(&frame) {
            Ok(sent) => sent,
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => 0,
            Err(e) => return Err(e),
        };
        if sent == frame.len() {
            self.whole.fetch_add(1, Ordering::Relaxed);
            return Ok(None);
        }
        self.cut.fetch_add(1, Ordering::Relaxed);
        Ok(Some(Bytes::from(frame).slice(sent..)))
    }
}

/// The task's side: writes all of `bytes`, waiting while the socket is full.
async fn write_all(stream: &UnixStream, mut bytes: &[u8]) {
    while !bytes.is_empty() {
        match (&*stream).write(bytes) {
            Ok(n) => bytes = &bytes[n..],
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => tokio::time::sleep(Duration::from_millis(1)).await,
            Err(e) => panic!("write: {e}"),
        }
    }
}

fn pair() -> (Arc<Lines>, UnixStream) {
    let (ours, theirs) = UnixStream::pair().unwrap();
    ours.set_nonblocking(true).unwrap();
    (Arc::new(Lines { stream: ours, whole: AtomicUsize::new(0), cut: AtomicUsize::new(0) }), theirs)
}

/// The `seq` of each line read, until `n` lines (or the end frame, as `0`).
fn read_seqs(theirs: UnixStream, n: usize) -> std::thread::JoinHandle<Vec<u64>> {
    std::thread::spawn(move || {
        let mut seqs = Vec::new();
        for line in BufReader::new(theirs).lines().take(n) {
            let value: serde_json::Value = serde_json::from_str(&line.unwrap()).expect("every line is a whole event");
            seqs.push(value["seq"].as_u64().unwrap_or(0));
        }
        seqs
    })
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_fan_out_writes_live_events_after_the_task_writes_the_catch_up() {
    let d = start(Options::default());
    let run = id::generate(Kind::Run);
    for _ in 0..50 {
        d.handle.append_one(message(&run, MessageType::ChatMessage)).await.unwrap();
    }
    let (socket, theirs) = pair();
    let reader = read_seqs(theirs, 150);
    let mut feed = d.handle.subscribe(Filter::default(), Some(10)).await.unwrap().direct(socket.clone());
    let task = {
        let socket = socket.clone();
        tokio::spawn(async move {
            let mut by_task = Vec::new();
            loop {
                let bytes = match feed.next().await {
                    Ok(Out::Event(wire)) => {
                        by_task.push(wire.seq);
                        [&wire.bytes[..], b"\n"].concat()
                    }
                    Ok(Out::Raw(bytes)) => bytes.to_vec(),
                    Err(end) => return (by_task, end),
                };
                write_all(&socket.stream, &bytes).await;
            }
        })
    };
    // Appended while the subscriber catches up, and after.
    for _ in 0..110 {
        d.handle.append_one(message(&run, MessageType::ChatMessage)).await.unwrap();
        tokio::time::sleep(Duration::from_millis(2)).await;
    }
    let seqs = tokio::task::spawn_blocking(move || reader.join().unwrap()).await.unwrap();
    assert_eq!(seqs, (11..=160).collect::<Vec<_>>(), "no gap, no repeat");
    d.handle.close_streams();
    let (by_task, end) = task.await.unwrap();
    assert_eq!(end, End::Shutdown { last_seq: 160 });
    assert!(by_task.starts_with(&(11..=50).collect::<Vec<_>>()), "the task wrote the catch-up: {by_task:?}");
    let whole = socket.whole.load(Ordering::Relaxed);
    assert_eq!(whole + by_task.len(), 150, "every other event was written whole by the fan-out");
    assert!(whole >= 50, "live events went straight to the socket ({whole})");
    d.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_frame_cut_short_is_finished_by_the_task_and_a_subscriber_too_far_behind_is_cut_off() {
    let d = start(Options { subscriber_buffer: 16, ..Options::default() });
    let run = id::generate(Kind::Run);
    let (socket, theirs) = pair();
    let mut feed = d.handle.subscribe(Filter::default(), None).await.unwrap().direct(socket.clone());
    let task = {
        let socket = socket.clone();
        tokio::spawn(async move {
            loop {
                let bytes = match feed.next().await {
                    Ok(Out::Event(wire)) => [&wire.bytes[..], b"\n"].concat(),
                    Ok(Out::Raw(bytes)) => bytes.to_vec(),
                    Err(end) => return end,
                };
                write_all(&socket.stream, &bytes).await;
            }
        })
    };
    // Nobody reads while far more than the socket holds and the buffer allows is appended.
    let mut big = message(&run, MessageType::ChatMessage);
    big.payload.insert("text".into(), "x".repeat(16_000).into());
    for _ in 0..200 {
        let mut m = big.clone();
        m.id = id::generate(Kind::Message);
        d.handle.append_one(m).await.unwrap();
    }
    // Reading makes room: the task finishes the frame the fan-out began, then the subscription ends.
    let reader = read_seqs(theirs, usize::MAX);
    let end = tokio::time::timeout(Duration::from_secs(20), task).await.expect("the subscriber is cut off");
    let last = match end.unwrap() {
        End::Lagged { last_seq } => last_seq,
        other => panic!("cut off as lagged, not {other:?}"),
    };
    assert!(socket.cut.load(Ordering::Relaxed) >= 1, "a full socket cut a frame short");
    drop(socket);
    let seqs = tokio::task::spawn_blocking(move || reader.join().unwrap()).await.unwrap();
    assert_eq!(seqs, (1..=last).collect::<Vec<_>>(), "whole events, in order, up to the cut-off");
    assert!(last < 200, "cut off before the end ({last})");
    assert_eq!(d.handle.metrics().lagged_drops.load(Ordering::Relaxed), 1);
    d.shutdown().await;
}
