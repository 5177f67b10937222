//! `clutch runs replay`: prints every event of one run, in `seq` order, streamed from the daemon as
//! NDJSON so that a long run never sits in memory.

use std::io::{BufWriter, Write};

use anyhow::Context;
use futures_util::StreamExt;
use serde_json::Value;

use crate::cli::ReplayArgs;
use crate::client::{self, Client};
use crate::render;

pub async fn run(args: ReplayArgs) -> anyhow::Result<()> {
    let client = Client::connect(&args.client)?;
    let mut request = client.get(&format!("/v1/runs/{}/events", client::path_segment(&args.run)));
    if let Some(after) = args.after {
        request = request.query(&[("after", after)]);
    }
    let response = client.send(request).await?;
    let color = render::stdout_color();
    let mut out = BufWriter::new(std::io::stdout());
    let mut body = response.bytes_stream();
    let mut pending: Vec<u8> = Vec::new();
    while let Some(chunk) = body.next().await {
        let chunk = chunk.map_err(client::Error::Http).context("the run's event stream broke off")?;
        pending.extend_from_slice(&chunk);
        while let Some(end) = pending.iter().position(|&b| b == b'\n') {
            let line: Vec<u8> = pending.drain(..=end).collect();
            print_line(&mut out, &line[..end], args.json, color)?;
        }
        out.flush()?;
    }
    print_line(&mut out, &pending, args.json, color)?;
    out.flush()?;
    Ok(())
}

fn print_line(out: &mut impl Write, line: &[u8], json: bool, color: bool) -> anyhow::Result<()> {
    let line = std::str::from_utf8(line).context("the daemon sent an event that is not UTF-8")?.trim();
    if line.is_empty() {
        return Ok(());
    }
    if json {
        writeln!(out, "{line}")?;
    } else {
        let event: Value =
            serde_json::from_str(line).with_context(|| format!("the daemon sent a bad event: {line}"))?;
        writeln!(out, "{}", render::event_line(&event, color))?;
    }
    Ok(())
}
