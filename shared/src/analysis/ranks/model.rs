//! The per-rank analysis's types and the step arithmetic the analysis and
//! the straggler count share (a leaf: it uses nothing of `ranks`).

use crate::format::{Phase, StepSeries, TimingMode};

/// A step counts towards a straggler only when the other ranks' median comm
/// share of that step is above this: they really waited.
pub const MATERIAL_COMM_SHARE: f64 = 0.10;

/// One rank of a configuration.
#[derive(Debug, Clone, PartialEq)]
pub struct RankSummary {
    pub rank: u32,
    /// Diagnostic steps the shares are read from (each epoch's first step
    /// apart, as in the stage statistics; every step of a job's window).
    pub steps: u64,
    /// The median step time in [`RankAnalysis::step_mode`].
    pub step_median_s: Option<f64>,
    /// Shares of the diagnostic step; the four sum to 1.
    pub next_wait_share: Option<f64>,
    pub transfer_share: Option<f64>,
    pub compute_share: Option<f64>,
    pub comm_share: Option<f64>,
    /// Steps compared in which this rank was the one the others waited for.
    pub straggler_steps: u64,
    /// `straggler_steps` ÷ the steps compared.
    pub straggler_share: Option<f64>,
    /// Whole-run samples/s of this rank (median of its runs).
    pub samples_per_s: Option<f64>,
}

/// The per-rank analysis of one configuration.
#[derive(Debug, Clone, PartialEq)]
pub struct RankAnalysis {
    /// The phase of the runs read (steady when there are any).
    pub phase: Phase,
    /// Ascending by rank.
    pub ranks: Vec<RankSummary>,
    /// Largest over median of the ranks' median step time (≥ 1).
    pub imbalance: Option<f64>,
    /// The step time `imbalance` and `step_median_s` are of: whole-run when
    /// every rank has one, else diagnostic.
    pub step_mode: Option<TimingMode>,
    /// The largest of the ranks' median diagnostic work per step
    /// (next-wait + transfer + compute, comm left out) over the median of
    /// the other ranks' (≥ 1; with two ranks the slower over the faster).
    pub work_imbalance: Option<f64>,
    /// Steps aligned across every rank (same repeat, epoch and step index).
    pub steps_compared: u64,
    /// How often each rank was the straggler, most often first.
    pub stragglers: Vec<(u32, u64)>,
    /// One sentence, for two ranks or more with steps to compare.
    pub verdict: Option<String>,
    /// What a reader must know: step counts that differ, epochs left out.
    pub notes: Vec<String>,
}

/// (next-wait, transfer, compute, comm) of step `i`, in seconds.
pub(crate) fn step_parts(s: &StepSeries, i: usize) -> [f64; 4] {
    let ns = |v: &[u64]| v.get(i).copied().unwrap_or(0) as f64 * 1e-9;
    [
        ns(&s.next_wait_ns),
        ns(&s.transfer_ns),
        ns(&s.compute_ns),
        ns(&s.comm_ns),
    ]
}

/// The median of finite values as `summary::median` gives it, to the bit
/// (of an even count, the lower middle value plus half the way to the
/// upper), by selection: a step of 16,384 ranks is not sorted, nor are a
/// rank's steps copied to be.
pub(crate) fn median_in_place(v: &mut [f64]) -> Option<f64> {
    let n = v.len();
    if n == 0 {
        return None;
    }
    let (left, mid, _) = v.select_nth_unstable_by(n / 2, f64::total_cmp);
    let upper = *mid;
    if n % 2 == 1 {
        return Some(upper);
    }
    let lower = left.iter().copied().fold(f64::NEG_INFINITY, f64::max);
    Some(lower + (upper - lower) * 0.5)
}
