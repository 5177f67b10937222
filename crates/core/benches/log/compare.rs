//! How Clutch is set beside its anchor: each contender measured by criterion, then all of them again in
//! interleaved blocks. On a shared virtual disk whose fsync latency drifts by 2× over seconds, two
//! criterion measurements taken one after the other can disagree by more than the difference sought;
//! blocks alternated within seconds of each other see the same disk, so their paired ratio is the
//! figure to read.

use std::fmt::Write;
use std::time::Duration;

use criterion::{Criterion, SamplingMode, Throughput};

/// One contender: its name, and a routine that runs `n` iterations and returns the time they took
/// (criterion's `iter_custom` shape, so the same closure serves both measurements).
pub type Contender<'a> = (&'static str, &'a mut dyn FnMut(u64) -> Duration);

/// How a comparison is measured.
pub struct Plan {
    /// Elements one iteration handles, for throughput.
    pub elements: u64,
    /// Interleaved rounds; in each, every contender runs `iters` iterations.
    pub rounds: usize,
    pub iters: u64,
    /// An iteration takes a good part of a second: sample flat, and for longer.
    pub slow: bool,
}

/// Measures each contender in one criterion group (so they print together), then, unless the command
/// line's filter selected none of them, interleaved. The first contender is Clutch. Returns whether
/// anything ran.
pub fn compare(c: &mut Criterion, group: &str, plan: &Plan, contenders: &mut [Contender<'_>]) -> bool {
    let mut ran = false;
    let mut g = c.benchmark_group(group);
    g.throughput(Throughput::Elements(plan.elements));
    if plan.slow {
        g.sampling_mode(SamplingMode::Flat);
        g.measurement_time(Duration::from_secs(8));
    }
    for (name, routine) in contenders.iter_mut() {
        g.bench_function(*name, |b| {
            ran = true;
            b.iter_custom(&mut **routine)
        });
    }
    g.finish();
    if ran {
        interleave(group, plan, contenders);
    }
    ran
}

/// Runs `plan.rounds` blocks of each contender, rotating which goes first, and prints each one's
/// median time per iteration and throughput, and the median over rounds of the first contender's
/// throughput relative to each other's, with its range.
fn interleave(group: &str, plan: &Plan, contenders: &mut [Contender<'_>]) {
    let mut times: Vec<Vec<f64>> = vec![Vec::with_capacity(plan.rounds); contenders.len()];
    for round in 0..plan.rounds {
        for j in 0..contenders.len() {
            let i = (round + j) % contenders.len();
            let took = (contenders[i].1)(plan.iters);
            times[i].push(took.as_secs_f64() / plan.iters as f64);
        }
    }
    let mut line = format!("{group}: interleaved, {} rounds of {} iterations:", plan.rounds, plan.iters);
    for ((name, _), t) in contenders.iter().zip(&times) {
        let per_iter = median(t);
        let _ = write!(line, " {name} {} ({:.0} elem/s);", seconds(per_iter), plan.elements as f64 / per_iter);
    }
    let first = contenders[0].0;
    for ((name, _), t) in contenders.iter().zip(&times).skip(1) {
        let ratios: Vec<f64> = t.iter().zip(&times[0]).map(|(other, ours)| other / ours).collect();
        let (lo, hi) = ratios.iter().fold((f64::MAX, f64::MIN), |(lo, hi), r| (lo.min(*r), hi.max(*r)));
        let _ = write!(line, " throughput {first}/{name} = {:.2} (rounds {lo:.2}..{hi:.2});", median(&ratios));
    }
    eprintln!("{}", line.trim_end_matches(';'));
}

fn median(values: &[f64]) -> f64 {
    let mut sorted = values.to_vec();
    sorted.sort_by(f64::total_cmp);
    let mid = sorted.len() / 2;
    if sorted.len().is_multiple_of(2) { (sorted[mid - 1] + sorted[mid]) / 2.0 } else { sorted[mid] }
}

fn seconds(s: f64) -> String {
    match s {
        s if s >= 1.0 => format!("{s:.2} s"),
        s if s >= 1e-3 => format!("{:.2} ms", s * 1e3),
        s => format!("{:.1} µs", s * 1e6),
    }
}
