//! A configuration's per-rank analysis kept column-wise in a merged bundle
//! of format 1.3 ([`RankColumns`]): made once by the merge from every
//! rank's runs, read back as the [`RankAnalysis`] the report and the viewer
//! show, without the ranks' runs.

use crate::analysis::ranks::{RankAnalysis, RankSummary};
use crate::format::RankColumns;

/// Shares are kept to 1e-6 and times to the nanosecond: a merged bundle of
/// 16,384 ranks stays small and nothing shown changes.
fn round(v: Option<f64>, quantum: f64) -> Option<f64> {
    v.map(|x| (x / quantum).round() * quantum)
}

const SHARE: f64 = 1e-6;
const NANO: f64 = 1e-9;

/// The columns of an analysis; `world`: the ranks of the job.
pub fn rank_columns(a: &RankAnalysis, world: u32) -> RankColumns {
    let col = |f: fn(&RankSummary) -> Option<f64>, q: f64| -> Vec<Option<f64>> {
        a.ranks.iter().map(|r| round(f(r), q)).collect()
    };
    RankColumns {
        world,
        phase: a.phase,
        step_mode: a.step_mode.clone(),
        rank: a.ranks.iter().map(|r| r.rank).collect(),
        steps: a.ranks.iter().map(|r| r.steps).collect(),
        step_median_s: col(|r| r.step_median_s, NANO),
        next_wait_share: col(|r| r.next_wait_share, SHARE),
        transfer_share: col(|r| r.transfer_share, SHARE),
        compute_share: col(|r| r.compute_share, SHARE),
        comm_share: col(|r| r.comm_share, SHARE),
        straggler_steps: a.ranks.iter().map(|r| r.straggler_steps).collect(),
        samples_per_s: col(|r| r.samples_per_s, SHARE),
        steps_compared: a.steps_compared,
        imbalance: a.imbalance,
        work_imbalance: a.work_imbalance,
        verdict: a.verdict.clone(),
        notes: a.notes.clone(),
        sidecars: Vec::new(),
    }
}

/// The analysis the columns hold (a column shorter than `rank` reads as
/// missing figures; validation reports it).
pub fn analysis_of_columns(c: &RankColumns) -> RankAnalysis {
    let at = |v: &[Option<f64>], i: usize| v.get(i).copied().flatten();
    let ranks: Vec<RankSummary> = c
        .rank
        .iter()
        .enumerate()
        .map(|(i, &rank)| {
            let straggler_steps = c.straggler_steps.get(i).copied().unwrap_or(0);
            RankSummary {
                rank,
                steps: c.steps.get(i).copied().unwrap_or(0),
                step_median_s: at(&c.step_median_s, i),
                next_wait_share: at(&c.next_wait_share, i),
                transfer_share: at(&c.transfer_share, i),
                compute_share: at(&c.compute_share, i),
                comm_share: at(&c.comm_share, i),
                straggler_steps,
                straggler_share: (c.steps_compared > 0)
                    .then(|| straggler_steps as f64 / c.steps_compared as f64),
                samples_per_s: at(&c.samples_per_s, i),
            }
        })
        .collect();
    let mut stragglers: Vec<(u32, u64)> = ranks
        .iter()
        .filter(|r| r.straggler_steps > 0)
        .map(|r| (r.rank, r.straggler_steps))
        .collect();
    stragglers.sort_by(|a, b| b.1.cmp(&a.1).then(a.0.cmp(&b.0)));
    RankAnalysis {
        phase: c.phase,
        ranks,
        imbalance: c.imbalance,
        step_mode: c.step_mode.clone(),
        work_imbalance: c.work_imbalance,
        steps_compared: c.steps_compared,
        stragglers,
        verdict: c.verdict.clone(),
        notes: c.notes.clone(),
    }
}
