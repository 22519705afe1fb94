//! The pooled run of a merged multi-rank configuration: its ranks' runs of
//! one (timing mode, repeat, epoch) as one training run.
//!
//! - whole-run: samples of every rank ÷ the slowest rank's wall time (the
//!   run is done when its last rank is), the step time the largest of the
//!   ranks', the sampled timeline the slowest rank's;
//! - diagnostic: the stage figures of the rank with the most work per step
//!   (the one the others waited for), samples of every rank, the longest
//!   epoch; its comm is that rank's own synchronisation overhead.
//!
//! Both carry the pooled CPU cost (every rank's CPU-seconds over the longest
//! epoch) and each memory peak's largest value over the ranks. A (repeat,
//! epoch) some rank did not measure makes no pooled run (said in a note).
//! Every figure read off a configuration of pooled runs (the tables,
//! `compare`) is then the pooled run's, not one rank's.
//!
//! The format names a pooled run `Run.job` (`JobOf`, format 1.3) and its id
//! `job-…`; those names stay (the format only grows). Everywhere else "job"
//! is the user's training command under `stallscope job`.

use std::collections::BTreeMap;

use crate::analysis::metric::{Metric, MetricKey, metric_summary, run_mode_known};
use crate::analysis::summary::Summary;
use crate::format::{
    Configuration, CpuCost, Diagnostic, JobOf, Memory, Phase, Run, StageStat, TimingMode,
};

/// The pooled runs of a configuration whose runs carry ranks, and notes on
/// the (repeat, epoch) pairs left out. `world`: the ranks pooled (`None`:
/// the ranks the configuration's runs name).
pub fn pooled_runs(c: &Configuration, world: Option<u32>) -> (Vec<Run>, Vec<String>) {
    let mut groups: BTreeMap<(u8, u32, u32), BTreeMap<u32, &Run>> = BTreeMap::new();
    let mut ranks = std::collections::BTreeSet::new();
    for r in c.runs.iter().filter(|r| run_mode_known(r)) {
        let Some(rank) = r.rank else { continue };
        ranks.insert(rank);
        let mode = u8::from(r.timing_mode == TimingMode::Diagnostic);
        // One run per rank and key; a duplicate keeps the first by id.
        let slot = groups.entry((mode, r.repeat, r.epoch)).or_default();
        match slot.get(&rank) {
            Some(old) if old.id <= r.id => {}
            _ => {
                slot.insert(rank, r);
            }
        }
    }
    let world = world.unwrap_or(ranks.len() as u32);
    let mut out = Vec::new();
    let mut left_out = Vec::new();
    for ((mode, repeat, epoch), runs) in &groups {
        let runs: Vec<&Run> = runs.values().copied().collect();
        if runs.len() != world as usize {
            left_out.push(format!(
                "{} repeat {repeat} epoch {epoch} ({} of {world} ranks)",
                if *mode == 1 {
                    "diagnostic"
                } else {
                    "whole-run"
                },
                runs.len()
            ));
            continue;
        }
        let run = if *mode == 1 {
            pooled_diagnostic(&runs, world)
        } else {
            pooled_whole_run(&runs, world)
        };
        out.extend(run);
    }
    let mut notes = Vec::new();
    if !left_out.is_empty() {
        notes.push(format!(
            "no pooled figure for the epochs not every rank measured: {}.",
            left_out.join(", ")
        ));
    }
    (out, notes)
}

/// The run id without the merge's `rank{R}-` prefix.
fn plain_id(r: &Run) -> &str {
    let id = r.id.as_str();
    match (r.rank, id.strip_prefix("rank")) {
        (Some(rank), Some(rest)) => rest
            .strip_prefix(&rank.to_string())
            .and_then(|t| t.strip_prefix('-'))
            .unwrap_or(id),
        _ => id,
    }
}

/// A pooled run's skeleton: the first rank's identity, no rank, no per-rank
/// parts (steps and loader statistics stay with the ranks).
fn pooled_shell(first: &Run, world: u32, slowest: u32) -> Run {
    let mut run = Run::new(
        format!("job-{}", plain_id(first)),
        first.timing_mode.clone(),
        first.repeat,
        first.epoch,
        first.phase,
    );
    run.job = Some(JobOf {
        ranks: world,
        slowest_rank: slowest,
    });
    run
}

/// The index of the largest value; ties go to the first (lowest rank).
fn argmax(values: impl Iterator<Item = f64>) -> Option<usize> {
    let mut best: Option<(usize, f64)> = None;
    for (i, v) in values.enumerate() {
        if best.is_none_or(|(_, b)| v > b) {
            best = Some((i, v));
        }
    }
    best.map(|(i, _)| i)
}

fn pooled_whole_run(runs: &[&Run], world: u32) -> Option<Run> {
    let wholes: Vec<_> = runs.iter().map(|r| r.whole_run.as_ref()).collect();
    let seconds: Vec<f64> = wholes
        .iter()
        .map(|w| w.and_then(|w| w.seconds))
        .collect::<Option<_>>()?;
    let samples: u64 = wholes
        .iter()
        .map(|w| w.and_then(|w| w.samples))
        .sum::<Option<u64>>()?;
    let slow = argmax(seconds.iter().copied())?;
    let wall = seconds[slow];
    let mut run = pooled_shell(runs[0], world, runs[slow].rank.unwrap_or(0));
    let w = run.whole_run.insert(Default::default());
    w.seconds = Some(wall);
    w.samples = Some(samples);
    w.samples_per_s = (wall > 0.0).then(|| samples as f64 / wall);
    w.steps = wholes.iter().filter_map(|w| w.and_then(|w| w.steps)).max();
    let steps: Vec<f64> = runs
        .iter()
        .filter_map(|r| Metric::StepTimeS.of_run(r))
        .collect();
    w.step_s = (steps.len() == runs.len())
        .then(|| steps.iter().copied().fold(f64::NEG_INFINITY, f64::max));
    w.bytes = wholes.iter().map(|w| w.and_then(|w| w.bytes)).sum();
    run.memory = max_memory(runs);
    run.cost = pooled_cost(runs, samples);
    run.timeline = runs[slow].timeline.clone();
    Some(run)
}

/// Work per step of a diagnostic run: its mean step without comm.
fn work_per_step(r: &Run) -> Option<f64> {
    let d = r.diagnostic.as_ref()?;
    let mean = |s: &Option<StageStat>| s.as_ref().and_then(|s| s.mean_s);
    Some(mean(&d.next_wait)? + mean(&d.transfer)? + mean(&d.compute)?)
}

fn pooled_diagnostic(runs: &[&Run], world: u32) -> Option<Run> {
    let work: Vec<f64> = runs
        .iter()
        .map(|r| work_per_step(r))
        .collect::<Option<_>>()?;
    let slow = argmax(work.iter().copied())?;
    let diags: Vec<&Diagnostic> = runs
        .iter()
        .map(|r| r.diagnostic.as_ref())
        .collect::<Option<_>>()?;
    let mut run = pooled_shell(runs[0], world, runs[slow].rank.unwrap_or(0));
    let mut d = diags[slow].clone();
    d.seconds = diags
        .iter()
        .filter_map(|d| d.seconds)
        .reduce(f64::max)
        .or(d.seconds);
    d.samples = diags.iter().map(|d| d.samples).sum();
    d.steps = diags.iter().filter_map(|d| d.steps).max();
    d.bytes = diags.iter().map(|d| d.bytes).sum();
    let samples = d.samples;
    run.diagnostic = Some(d);
    run.memory = max_memory(runs);
    run.cost = samples.and_then(|n| pooled_cost(runs, n));
    Some(run)
}

/// The pooled CPU cost when every rank has one: the CPU-seconds of every
/// rank's processes over the longest epoch, per 1,000 pooled samples.
fn pooled_cost(runs: &[&Run], samples: u64) -> Option<CpuCost> {
    let costs: Vec<&CpuCost> = runs
        .iter()
        .map(|r| r.cost.as_ref())
        .collect::<Option<_>>()?;
    let cpu_s: f64 = costs.iter().map(|c| c.cpu_s).sum();
    Some(CpuCost {
        wall_s: costs.iter().map(|c| c.wall_s).fold(0.0, f64::max),
        cpu_s,
        cpu_s_per_1000_samples: (samples > 0).then(|| cpu_s / samples as f64 * 1000.0),
        parts: Vec::new(),
    })
}

/// Each memory counter's largest value over the ranks (a peak is a peak);
/// the process list is one rank's, so `validate` does not hold the two to
/// each other in a pooled configuration.
fn max_memory(runs: &[&Run]) -> Option<Memory> {
    let mems: Vec<&Memory> = runs.iter().filter_map(|r| r.memory.as_ref()).collect();
    if mems.is_empty() {
        return None;
    }
    let max = |f: fn(&Memory) -> Option<u64>| mems.iter().filter_map(|m| f(m)).max();
    Some(Memory {
        host_peak_rss_bytes: max(|m| m.host_peak_rss_bytes),
        workers_peak_rss_bytes: max(|m| m.workers_peak_rss_bytes),
        device_peak_allocated_bytes: max(|m| m.device_peak_allocated_bytes),
        device_peak_reserved_bytes: max(|m| m.device_peak_reserved_bytes),
        device_used_bytes: max(|m| m.device_used_bytes),
        device_total_bytes: max(|m| m.device_total_bytes),
        // The processes of the rank whose largest worker holds the most
        // private memory (a pooled figure per worker is its worst rank's).
        processes: mems
            .iter()
            .max_by_key(|m| {
                let workers = m.processes.iter().filter(|p| p.role == "worker");
                workers.filter_map(|p| p.uss_bytes).max()
            })
            .map(|m| m.processes.clone())
            .unwrap_or_default(),
    })
}

/// Whether a configuration's runs are pooled (format 1.3) or carry ranks
/// (format 1.2): the world size either way, else `None` (one process).
pub fn pooled_world(c: &Configuration) -> Option<u32> {
    if let Some(cols) = &c.ranks {
        return Some(cols.world);
    }
    let mut ranks: Vec<u32> = c.runs.iter().filter_map(|r| r.rank).collect();
    ranks.sort_unstable();
    ranks.dedup();
    (!ranks.is_empty()).then_some(ranks.len() as u32)
}

/// A pooled configuration's figures as a report states them.
#[derive(Debug, Clone, PartialEq)]
pub struct PooledSummary {
    pub world: u32,
    pub phase: Phase,
    /// Pooled samples/s over the whole-run pooled runs of the phase.
    pub samples_per_s: Option<Summary>,
    /// The pooled step time: per epoch the largest of the ranks'.
    pub step_s: Option<Summary>,
    /// The ranks that finished last, with how many whole-run epochs each.
    pub slowest: Vec<(u32, u64)>,
}

/// The pooled figures of a configuration of pooled runs (format 1.3, or a
/// 1.2 one through `merge::job_view`); `None` for one process.
pub fn pooled_summary(c: &Configuration, phase: Phase) -> Option<PooledSummary> {
    let world = c.ranks.as_ref()?.world;
    let key = |m| MetricKey::new(m, TimingMode::WholeRun, phase);
    let mut slowest: BTreeMap<u32, u64> = BTreeMap::new();
    for r in c
        .runs
        .iter()
        .filter(|r| r.phase == phase && r.whole_run.is_some())
    {
        if let Some(j) = &r.job {
            *slowest.entry(j.slowest_rank).or_default() += 1;
        }
    }
    let mut slowest: Vec<(u32, u64)> = slowest.into_iter().collect();
    slowest.sort_by(|a, b| b.1.cmp(&a.1).then(a.0.cmp(&b.0)));
    Some(PooledSummary {
        world,
        phase,
        samples_per_s: metric_summary(c, &key(Metric::SamplesPerS)),
        step_s: metric_summary(c, &key(Metric::StepTimeS)),
        slowest,
    })
}
