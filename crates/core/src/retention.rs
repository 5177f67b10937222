//! Retention of the log: the operator's policy for runs that ended long ago. A run whose newest event
//! is older than its age (`[retention] after` in `clutch.toml`, or its workflow's own in
//! org.yaml's `retention.workflows`) and that has no work in flight is archived to a gzip-compressed
//! NDJSON file (one event per line as clients receive it, `seq` first: what `clutch runs replay
//! --file` reads) and/or removed from the log, in the background, in bounded chunks.
//!
//! **Finding the runs.** Each age has a walk: a store cursor (`retention:<seconds>s`) through the log
//! in `seq` order, moved up to the newest event older than the age, at most `scan_max` events per
//! pass. Every run the walk meets is decided once: a run with an event after the walk's end is still
//! active (the walk meets it again there); a run of another age is another walk's; a run with work in
//! flight is noted (`in_flight/<run>` in the `retention` records) and looked at again by each pass;
//! the system run and runs holding an agent's registration or a schema registration are kept (a
//! rebuild of the engine from the log needs them). So every event is read about once per age, and a
//! pass costs the same whatever the log's length.
//!
//! **Removing.** A run's events go oldest first, at most `chunk` per transaction, and only those the
//! decision saw (up to the walk's end: a message appended to the run meanwhile stays). The archive
//! is complete and flushed (written beside, then renamed) before anything is removed, and a
//! `pruning/<run>` record says removal began, so a crash mid-removal leaves the newest events of the
//! run, which the next pass removes first. `seq` never goes back (see
//! [`clutch_store::Backend::remove_run`]); the dedup of what remains, cursors and other runs' replays
//! are untouched. A removed run's ids may be used again: its dedup went with it.

use std::collections::{BTreeSet, HashMap, HashSet};
use std::io::Write;
use std::path::{Path, PathBuf};
use std::time::Duration;

use clutch_proto::MessageType;
use clutch_store::{Event, Filter};
use flate2::write::GzEncoder;

use crate::engine::{Engine, SCHEMA_PAYLOAD, SYSTEM_RUN};
use crate::view::{RetainedRun, Retention};
use crate::workflow::WORKFLOW_PAYLOAD;
use crate::{Error, Result};

pub use crate::retention_policy::Options;

/// The `retention` record space: notes that must survive a restart.
const RECORDS: &str = "retention";
/// Events read per page.
const PAGE: usize = 1000;
/// Runs listed in a report at most.
const LISTED: usize = 1000;

/// The fields of a stored event a walk looks at.
#[derive(serde::Deserialize)]
struct Head<'a> {
    #[serde(borrow)]
    run_id: std::borrow::Cow<'a, str>,
    #[serde(borrow)]
    ts: std::borrow::Cow<'a, str>,
}

/// The fields that say what a run is (its first event) or whether it must be kept.
#[derive(serde::Deserialize)]
struct Kind<'a> {
    #[serde(rename = "type")]
    kind: &'a str,
    #[serde(borrow)]
    ts: std::borrow::Cow<'a, str>,
    #[serde(default, borrow)]
    payload_type: Option<std::borrow::Cow<'a, str>>,
}

/// A workflow's request, for its name.
#[derive(serde::Deserialize)]
struct WorkflowRequest {
    payload: WorkflowName,
}

#[derive(serde::Deserialize)]
struct WorkflowName {
    name: String,
}

/// The longest the first pass waits after the start: the start stays quick, and what a client sends
/// right after it is not raced by a pass.
const FIRST_PASS_AFTER: Duration = Duration::from_secs(60);

/// Runs a pass every `interval` until `stop` resolves (only when a policy is set), the first a minute
/// after the start (or after `interval`, when shorter).
pub async fn run(engine: Engine, stop: impl std::future::Future<Output = ()>) {
    if !enabled(&engine) {
        return;
    }
    let interval = engine.options().retention.interval.max(Duration::from_secs(1));
    tokio::pin!(stop);
    let mut wait = interval.min(FIRST_PASS_AFTER);
    loop {
        tokio::select! {
            _ = &mut stop => return,
            _ = tokio::time::sleep(wait) => {}
        }
        wait = interval;
        match pass(&engine, false).await {
            Ok(report) if report.runs_total > 0 => tracing::info!(
                runs = report.runs_total,
                events = report.events_total,
                in_flight = report.in_flight.len(),
                more = report.more,
                "retention pass"
            ),
            Ok(_) => {}
            Err(e) => tracing::warn!(error = %e, "retention pass failed; trying again at the next"),
        }
    }
}

fn enabled(engine: &Engine) -> bool {
    engine.options().retention.after.is_some() || !engine.options().policy.org.retention.is_empty()
}

/// One retention pass: finishes removals a crash interrupted, then walks the log for each age.
/// With `dry_run`, reads the same and changes nothing: the report says what would go.
pub async fn pass(engine: &Engine, dry_run: bool) -> Result<Retention> {
    let _one = engine.retention_lock().lock().await;
    let mut report = Retention {
        enabled: enabled(engine),
        dry_run,
        runs: Vec::new(),
        runs_total: 0,
        events_total: 0,
        in_flight: Vec::new(),
        scanned: 0,
        more: false,
    };
    if !report.enabled {
        return Ok(report);
    }
    let pass = Pass { engine, options: &engine.options().retention, dry_run, now_ms: engine.now_ms() };
    let records = engine.log().records(RECORDS).await?;
    if !dry_run {
        for (key, _) in &records {
            if let Some(run) = key.strip_prefix("pruning/") {
                pass.finish_removal(run, u64::MAX).await?;
            }
        }
    }
    let deferred: HashMap<&str, u64> = records
        .iter()
        .filter_map(|(k, v)| Some((k.strip_prefix("in_flight/")?, std::str::from_utf8(v).ok()?.parse().ok()?)))
        .collect();
    for age in pass.ages() {
        pass.walk(age, &deferred, &mut report).await?;
    }
    Ok(report)
}

/// What a pass knows while it runs.
struct Pass<'a> {
    engine: &'a Engine,
    options: &'a Options,
    dry_run: bool,
    now_ms: i64,
}

/// How one run was decided.
enum Decision {
    /// It has events after the walk's end, or belongs to another age: not this walk's to decide.
    NotYet,
    /// Work in flight: noted, looked at again by the next pass.
    InFlight,
    /// It holds what the engine needs from the log forever (registrations): kept.
    Kept,
    /// It goes: its events up to the `seq` the decision read to.
    Gone(RetainedRun, u64),
}

impl Pass<'_> {
    /// The distinct ages, in seconds: the default's and each workflow's.
    fn ages(&self) -> BTreeSet<u64> {
        let org = &self.engine.options().policy.org.retention;
        self.options.after.iter().chain(org.values()).map(Duration::as_secs).collect()
    }

    /// The age a run is kept for: its workflow's, or the default.
    fn age_of(&self, workflow: Option<&str>) -> Option<u64> {
        let org = &self.engine.options().policy.org.retention;
        workflow.and_then(|w| org.get(w)).or(self.options.after.as_ref()).map(Duration::as_secs)
    }

    async fn walk(&self, age: u64, deferred: &HashMap<&str, u64>, report: &mut Retention) -> Result<()> {
        let log = self.engine.log();
        let cursor = format!("retention:{age}s");
        let start = log.cursor(&cursor).await?.unwrap_or(0);
        let cutoff = self.now_ms.saturating_sub((age as i64).saturating_mul(1000));
        // Runs noted as in flight by an earlier pass of this age come first; one with events since
        // is decided again where the walk meets them.
        let mut settled = HashSet::new();
        for (&run, _) in deferred.iter().filter(|(_, a)| **a == age) {
            let decision = self.decide(run, age, start).await?;
            if !matches!(decision, Decision::NotYet) {
                settled.insert(run);
            }
            self.settle(run, age, decision, report).await?;
        }
        let (mut after, mut end, mut read) = (start, start, 0usize);
        let mut runs: Vec<String> = Vec::new();
        let mut seen: HashSet<String> = HashSet::new();
        'pages: while read < self.options.scan_max {
            let page = log.read(&Filter::default(), after, PAGE.min(self.options.scan_max - read)).await?;
            let Some(last) = page.last() else { break };
            after = last.seq;
            read += page.len();
            for event in &page {
                let Ok(head) = serde_json::from_str::<Head<'_>>(&event.json) else { break 'pages };
                if crate::clock::ts_ms(&head.ts).is_none_or(|ms| ms > cutoff) {
                    break 'pages;
                }
                end = event.seq;
                if seen.insert(head.run_id.to_string()) {
                    runs.push(head.run_id.into_owned());
                }
            }
            if read >= self.options.scan_max {
                report.more = true;
            }
        }
        report.scanned += read as u64;
        for run in &runs {
            if settled.contains(run.as_str()) {
                continue;
            }
            let decision = self.decide(run, age, end).await?;
            self.settle(run, age, decision, report).await?;
        }
        if !self.dry_run && end > start {
            log.set_cursor(&cursor, end).await?;
        }
        Ok(())
    }

    /// Decides run `run` for the walk of `age` that has read up to `end`.
    async fn decide(&self, run: &str, age: u64, end: u64) -> Result<Decision> {
        let log = self.engine.log();
        let filter = Filter { run_id: Some(run.to_owned()), ..Filter::default() };
        if run == SYSTEM_RUN || !log.read(&filter, end, 1).await?.is_empty() {
            return Ok(Decision::NotYet);
        }
        let first = log.read(&filter, 0, 1).await?;
        let Some(first) = first.first() else { return Ok(Decision::NotYet) };
        let workflow = workflow_name(first);
        if self.age_of(workflow.as_deref()) != Some(age) {
            return Ok(Decision::NotYet);
        }
        if self.engine.run_busy(run) {
            return Ok(Decision::InFlight);
        }
        let mut archive = match (self.options.archive_to(), self.dry_run) {
            (Some(dir), false) => Some(Archive::create(dir, run).await?),
            _ => None,
        };
        let (mut after, mut events, mut last_ts) = (0u64, 0u64, String::new());
        loop {
            let mut page = log.read(&filter, after, PAGE).await?;
            page.retain(|e| e.seq <= end);
            let Some(last) = page.last() else { break };
            after = last.seq;
            for event in &page {
                // An event that does not read is kept, with its run: retention removes only what
                // it understands.
                match serde_json::from_str::<Kind<'_>>(&event.json) {
                    Ok(kind) if !must_keep(&kind) => last_ts = kind.ts.into_owned(),
                    _ => {
                        if let Some(archive) = archive {
                            archive.abandon().await;
                        }
                        return Ok(Decision::Kept);
                    }
                }
            }
            events += page.len() as u64;
            if let Some(a) = archive.as_mut() {
                a.write(page).await?;
            }
        }
        let path = match archive {
            Some(archive) => Some(archive.finish(&last_ts).await?),
            None => self.options.archive_to().map(|dir| Archive::path(dir, run, &last_ts)),
        };
        let gone = RetainedRun {
            run_id: run.to_owned(),
            workflow,
            last_activity: last_ts,
            events,
            archive: path.map(|p| p.display().to_string()),
            removed: self.options.remove,
        };
        Ok(Decision::Gone(gone, end))
    }

    /// Acts on a decision and reports it.
    async fn settle(&self, run: &str, age: u64, decision: Decision, report: &mut Retention) -> Result<()> {
        let log = self.engine.log();
        let note = format!("in_flight/{run}");
        match decision {
            Decision::NotYet | Decision::Kept => {
                if !self.dry_run {
                    log.delete_record(RECORDS, &note).await?;
                }
            }
            Decision::InFlight => {
                report.in_flight.push(run.to_owned());
                if !self.dry_run {
                    log.put_record(RECORDS, &note, bytes::Bytes::from(age.to_string())).await?;
                }
            }
            Decision::Gone(gone, upto) => {
                if !self.dry_run {
                    if self.options.remove {
                        log.put_record(RECORDS, &format!("pruning/{run}"), bytes::Bytes::from(upto.to_string()))
                            .await?;
                        self.finish_removal(run, upto).await?;
                    }
                    log.delete_record(RECORDS, &note).await?;
                }
                report.runs_total += 1;
                report.events_total += gone.events;
                if report.runs.len() < LISTED {
                    report.runs.push(gone);
                }
            }
        }
        Ok(())
    }

    /// Removes what is left of run `run` up to `upto` (the bound its `pruning/` record names wins),
    /// a chunk per transaction, then drops the record and what memory holds of the run.
    async fn finish_removal(&self, run: &str, upto: u64) -> Result<()> {
        let log = self.engine.log();
        let key = format!("pruning/{run}");
        let upto = match log.record(RECORDS, &key).await? {
            Some(body) => std::str::from_utf8(&body).ok().and_then(|s| s.parse().ok()).unwrap_or(upto).min(upto),
            None => upto,
        };
        while log.remove_run(run, upto, self.options.chunk.max(1)).await? > 0 {}
        log.delete_record(RECORDS, &key).await?;
        self.engine.forget_run(run);
        Ok(())
    }
}

/// The workflow's name, when `first` (a run's first event) is a workflow's request.
fn workflow_name(first: &Event) -> Option<String> {
    let kind = serde_json::from_str::<Kind<'_>>(&first.json).ok()?;
    if kind.kind != MessageType::TaskRequest.as_str() || kind.payload_type.as_deref() != Some(WORKFLOW_PAYLOAD) {
        return None;
    }
    serde_json::from_str::<WorkflowRequest>(&first.json).ok().map(|r| r.payload.name)
}

/// Whether an event must stay in the log for the engine to be rebuilt from it: an agent's card or
/// a registered schema.
fn must_keep(kind: &Kind<'_>) -> bool {
    kind.kind == MessageType::AgentRegister.as_str()
        || kind.kind == MessageType::AgentUpdate.as_str()
        || kind.payload_type.as_deref() == Some(SCHEMA_PAYLOAD)
}

/// A run's archive being written: `<dir>/<day of its last activity>/<run>.ndjson.gz`, written to a
/// temporary name beside it and renamed once complete and flushed.
struct Archive {
    dir: PathBuf,
    run: String,
    temp: PathBuf,
    /// Away on the blocking pool while a page is written.
    encoder: Option<GzEncoder<std::io::BufWriter<std::fs::File>>>,
}

impl Archive {
    fn path(dir: &Path, run: &str, last_ts: &str) -> PathBuf {
        let day = last_ts.get(..10).filter(|d| d.bytes().all(|b| b.is_ascii_digit() || b == b'-'));
        dir.join(day.unwrap_or("undated")).join(format!("{run}.ndjson.gz"))
    }

    async fn create(dir: &Path, run: &str) -> Result<Archive> {
        let (dir, run) = (dir.to_path_buf(), run.to_owned());
        blocking(move || {
            std::fs::create_dir_all(&dir)?;
            let temp = dir.join(format!(".{run}.ndjson.gz.partial"));
            let file = std::fs::File::create(&temp)?;
            let encoder = GzEncoder::new(std::io::BufWriter::new(file), flate2::Compression::default());
            Ok(Archive { dir, run, temp, encoder: Some(encoder) })
        })
        .await
    }

    async fn write(&mut self, page: Vec<Event>) -> Result<()> {
        let Some(mut encoder) = self.encoder.take() else {
            return Err(Error::Archive("an earlier write of this archive failed".into()));
        };
        let encoder = blocking(move || {
            for event in &page {
                encoder.write_all(event.to_wire().as_bytes())?;
                encoder.write_all(b"\n")?;
            }
            Ok(encoder)
        })
        .await?;
        self.encoder = Some(encoder);
        Ok(())
    }

    async fn finish(self, last_ts: &str) -> Result<PathBuf> {
        let path = Archive::path(&self.dir, &self.run, last_ts);
        let Archive { temp, encoder, .. } = self;
        let encoder = encoder.ok_or_else(|| Error::Archive("an earlier write of this archive failed".into()))?;
        blocking(move || {
            let file = encoder.finish()?.into_inner().map_err(|e| e.into_error())?;
            file.sync_all()?;
            let parent = path.parent().unwrap_or(Path::new("."));
            std::fs::create_dir_all(parent)?;
            std::fs::rename(&temp, &path)?;
            std::fs::File::open(parent)?.sync_all()?;
            Ok(path)
        })
        .await
    }

    async fn abandon(self) {
        let temp = self.temp;
        let _ = tokio::task::spawn_blocking(move || std::fs::remove_file(temp)).await;
    }
}

async fn blocking<T: Send + 'static>(f: impl FnOnce() -> std::io::Result<T> + Send + 'static) -> Result<T> {
    let archive = |e: std::io::Error| Error::Archive(e.to_string());
    tokio::task::spawn_blocking(f).await.map_err(|e| Error::Archive(e.to_string()))?.map_err(archive)
}

/// Reads an archive (gzip-compressed or plain NDJSON, told apart by gzip's magic bytes), calling
/// `line` with each event's JSON line.
pub fn read_archive(path: &Path, mut line: impl FnMut(&str) -> std::io::Result<()>) -> std::io::Result<()> {
    use std::io::{BufRead, Read};
    let mut file = std::io::BufReader::new(std::fs::File::open(path)?);
    let gzip = file.fill_buf()?.starts_with(&[0x1f, 0x8b]);
    let reader: Box<dyn Read> = if gzip { Box::new(flate2::read::MultiGzDecoder::new(file)) } else { Box::new(file) };
    for l in std::io::BufReader::new(reader).lines() {
        let l = l?;
        if !l.trim().is_empty() {
            line(&l)?;
        }
    }
    Ok(())
}
