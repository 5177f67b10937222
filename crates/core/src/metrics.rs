//! Counters and histograms the daemon exposes at `/metrics` in Prometheus text format. Plain atomics:
//! updating them costs a few nanoseconds on the append path.

use std::fmt::Write;
use std::sync::atomic::{AtomicI64, AtomicU64, Ordering};
use std::time::Duration;

#[derive(Default)]
pub struct Metrics {
    pub appended: AtomicU64,
    pub duplicates: AtomicU64,
    pub conflicts: AtomicU64,
    pub batches: AtomicU64,
    pub batch_failures: AtomicU64,
    /// Batches a caller committed on its own thread, the writer being idle (among `batches`).
    pub inline_batches: AtomicU64,
    /// Time the engine spent vetting a batch before it is stored (on the writer's path).
    pub vet: Histogram,
    /// Time spent committing a batch without its flush, which `sync` measures (SQLite; PostgreSQL
    /// only when the writer falls behind).
    pub commit: Histogram,
    /// Time spent making committed batches durable (SQLite: the WAL's fdatasync); one covers every
    /// batch committed before it.
    pub sync: Histogram,
    /// Time spent committing a batch and flushing it in one call (PostgreSQL, unless the writer falls
    /// behind); such a batch is in neither `commit` nor `sync`.
    pub commit_and_sync: Histogram,
    /// Time the engine spent applying a committed batch to its state (on the writer's path).
    pub apply: Histogram,
    pub batch_size: Histogram,
    pub subscribers: AtomicI64,
    pub lagged_drops: AtomicU64,
    pub http_requests: AtomicU64,
    /// Messages refused by the engine (illegal transition, policy, signature).
    pub refusals: AtomicU64,
    /// Refusals not recorded in the log (nor logged at `warn`): more came than the record budget.
    pub refusals_unrecorded: AtomicU64,
    pub routing_decisions: AtomicU64,
    pub routing_failures: AtomicU64,
    pub redeliveries: AtomicU64,
    pub pushes: AtomicU64,
    pub push_failures: AtomicU64,
}

const BUCKETS: usize = 12;

/// A Prometheus histogram with fixed bucket bounds.
pub struct Histogram {
    bounds: [f64; BUCKETS],
    counts: [AtomicU64; BUCKETS],
    sum_micros: AtomicU64,
    count: AtomicU64,
}

impl Default for Histogram {
    fn default() -> Self {
        Histogram::new([0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.5, 1.0])
    }
}

impl Histogram {
    pub fn new(bounds: [f64; BUCKETS]) -> Self {
        Histogram { bounds, counts: Default::default(), sum_micros: AtomicU64::new(0), count: AtomicU64::new(0) }
    }

    pub fn sizes() -> Self {
        Histogram::new([1.0, 2.0, 4.0, 8.0, 16.0, 32.0, 64.0, 128.0, 256.0, 512.0, 1024.0, 4096.0])
    }

    pub fn observe_duration(&self, d: Duration) {
        self.observe(d.as_secs_f64());
    }

    pub fn observe(&self, v: f64) {
        if let Some(i) = self.bounds.iter().position(|b| v <= *b) {
            self.counts[i].fetch_add(1, Ordering::Relaxed);
        }
        self.sum_micros.fetch_add((v * 1e6) as u64, Ordering::Relaxed);
        self.count.fetch_add(1, Ordering::Relaxed);
    }

    /// Observations so far.
    pub fn count(&self) -> u64 {
        self.count.load(Ordering::Relaxed)
    }

    /// The sum of the observed values (seconds, for durations).
    pub fn sum(&self) -> f64 {
        self.sum_micros.load(Ordering::Relaxed) as f64 / 1e6
    }

    /// The mean observed value (0 before any), in milliseconds for durations.
    pub fn mean_ms(&self) -> f64 {
        self.sum() / self.count().max(1) as f64 * 1000.0
    }

    fn render(&self, out: &mut String, name: &str, help: &str) {
        let _ = writeln!(out, "# HELP {name} {help}\n# TYPE {name} histogram");
        let mut cumulative = 0;
        for (bound, count) in self.bounds.iter().zip(&self.counts) {
            cumulative += count.load(Ordering::Relaxed);
            let _ = writeln!(out, "{name}_bucket{{le=\"{bound}\"}} {cumulative}");
        }
        let count = self.count.load(Ordering::Relaxed);
        let _ = writeln!(out, "{name}_bucket{{le=\"+Inf\"}} {count}");
        let _ = writeln!(out, "{name}_sum {}", self.sum_micros.load(Ordering::Relaxed) as f64 / 1e6);
        let _ = writeln!(out, "{name}_count {count}");
    }
}

impl Metrics {
    pub fn new() -> Self {
        Metrics { batch_size: Histogram::sizes(), ..Default::default() }
    }

    /// The Prometheus text exposition of every metric.
    pub fn render(&self) -> String {
        let mut out = String::with_capacity(4096);
        let counter = |out: &mut String, name: &str, help: &str, v: u64| {
            let _ = writeln!(out, "# HELP {name} {help}\n# TYPE {name} counter\n{name} {v}");
        };
        let load = |a: &AtomicU64| a.load(Ordering::Relaxed);
        counter(&mut out, "clutch_appends_total", "Messages appended to the event log.", load(&self.appended));
        counter(&mut out, "clutch_append_duplicates_total", "Appends answered as duplicates.", load(&self.duplicates));
        counter(&mut out, "clutch_append_conflicts_total", "Appends refused with ID_CONFLICT.", load(&self.conflicts));
        counter(&mut out, "clutch_append_batches_total", "Group-commit batches written.", load(&self.batches));
        counter(
            &mut out,
            "clutch_append_inline_batches_total",
            "Batches of one caller committed on its own thread while the writer was idle (among the batches).",
            load(&self.inline_batches),
        );
        counter(
            &mut out,
            "clutch_append_batch_failures_total",
            "Batches whose transaction failed.",
            load(&self.batch_failures),
        );
        self.vet.render(&mut out, "clutch_engine_vet_seconds", "Time the engine vets a batch before it is stored.");
        self.commit.render(
            &mut out,
            "clutch_store_commit_seconds",
            "Commit time per batch (on SQLite the flush is apart: clutch_store_sync_seconds).",
        );
        self.sync.render(
            &mut out,
            "clutch_store_sync_seconds",
            "Time to make committed batches durable (fsync), one flush covering every batch before it.",
        );
        self.commit_and_sync.render(
            &mut out,
            "clutch_store_commit_and_sync_seconds",
            "Commit and flush of a batch in one call (PostgreSQL unless the writer falls behind; in neither of the two above).",
        );
        self.apply.render(&mut out, "clutch_engine_apply_seconds", "Time the engine applies a committed batch.");
        self.batch_size.render(&mut out, "clutch_append_batch_size", "Messages per group-commit batch.");
        let _ = writeln!(
            out,
            "# HELP clutch_stream_subscribers Live stream subscribers connected.\n# TYPE clutch_stream_subscribers gauge\nclutch_stream_subscribers {}",
            self.subscribers.load(Ordering::Relaxed)
        );
        counter(
            &mut out,
            "clutch_stream_lagged_drops_total",
            "Subscribers cut off for falling behind.",
            load(&self.lagged_drops),
        );
        counter(&mut out, "clutch_http_requests_total", "HTTP requests served.", load(&self.http_requests));
        counter(
            &mut out,
            "clutch_refusals_total",
            "Messages refused by policy or the task state machine.",
            load(&self.refusals),
        );
        counter(
            &mut out,
            "clutch_refusals_unrecorded_total",
            "Refusals left out of the event log beyond its budget (a flood of bad input).",
            load(&self.refusals_unrecorded),
        );
        counter(&mut out, "clutch_routing_decisions_total", "Tasks routed to an agent.", load(&self.routing_decisions));
        counter(
            &mut out,
            "clutch_routing_failures_total",
            "Routing attempts that found no agent.",
            load(&self.routing_failures),
        );
        counter(
            &mut out,
            "clutch_redeliveries_total",
            "Task requests delivered again after no accept.",
            load(&self.redeliveries),
        );
        counter(&mut out, "clutch_push_deliveries_total", "Messages pushed to agent endpoints.", load(&self.pushes));
        counter(
            &mut out,
            "clutch_push_failures_total",
            "Failed push attempts (each retried).",
            load(&self.push_failures),
        );
        out
    }
}
