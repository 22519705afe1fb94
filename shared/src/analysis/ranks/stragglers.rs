//! Each step's straggler among every rank of a (repeat, epoch): the rank
//! with the most work (a tie to the lowest), when the others' median comm
//! share is material. A step of 16,384 ranks is read a block of steps at a
//! time into two step-major rows (work, comm share), so each rank's series
//! is read in runs and nothing is allocated per step.

use std::cmp::Ordering::{Equal, Greater};
use std::collections::BTreeMap;

use super::model::{MATERIAL_COMM_SHARE, median_in_place, step_parts};
use crate::format::StepSeries;

/// Steps a block reads together: 32 steps of a stage are four cache lines
/// of a rank's series, read in a run.
const STEP_BLOCK: usize = 32;

/// For each of the first `n` steps of every rank in `series`, the step's
/// straggler if it has one, in step order.
pub(super) fn stragglers(series: &BTreeMap<u32, &StepSeries>, n: usize) -> Vec<Option<u32>> {
    let ranks: Vec<(u32, &StepSeries)> = series.iter().map(|(&r, &s)| (r, s)).collect();
    let width = ranks.len();
    let mut work = vec![0.0; STEP_BLOCK * width];
    let mut share = vec![0.0; STEP_BLOCK * width];
    let mut others = Vec::with_capacity(width);
    let mut out = Vec::with_capacity(n);
    for start in (0..n).step_by(STEP_BLOCK) {
        let end = (start + STEP_BLOCK).min(n);
        for (j, (_, s)) in ranks.iter().enumerate() {
            for (k, i) in (start..end).enumerate() {
                let p = step_parts(s, i);
                work[k * width + j] = p[0] + p[1] + p[2];
                let step: f64 = p.iter().sum();
                share[k * width + j] = if step > 0.0 { p[3] / step } else { 0.0 };
            }
        }
        for k in 0..end - start {
            let row = k * width..(k + 1) * width;
            out.push(
                straggler_of(&work[row.clone()], &share[row], &mut others).map(|j| ranks[j].0),
            );
        }
    }
    out
}

/// The index of the step's straggler: the largest work (the first of a
/// tie), when the median of the others' comm shares is material.
fn straggler_of(work: &[f64], share: &[f64], others: &mut Vec<f64>) -> Option<usize> {
    let mut slow = 0;
    for (j, w) in work.iter().enumerate().skip(1) {
        // Kept while it is at least as large: the comparison the analysis
        // always made (so a NaN fares as before).
        if !matches!(work[slow].partial_cmp(w), Some(Greater | Equal)) {
            slow = j;
        }
    }
    if work.is_empty() {
        return None;
    }
    others.clear();
    others.extend_from_slice(&share[..slow]);
    others.extend_from_slice(&share[slow + 1..]);
    median_in_place(others)
        .is_some_and(|m| m > MATERIAL_COMM_SHARE)
        .then_some(slow)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Each step as the analysis read it before: every rank's (rank, stages)
    /// collected, the largest work folded, the others' shares collected.
    fn one_step_at_a_time(series: &BTreeMap<u32, &StepSeries>, n: usize) -> Vec<Option<u32>> {
        (0..n)
            .map(|i| {
                let steps: Vec<(u32, [f64; 4])> =
                    series.iter().map(|(&r, s)| (r, step_parts(s, i))).collect();
                let work = |p: &[f64; 4]| p[0] + p[1] + p[2];
                let (slow, _) =
                    steps
                        .iter()
                        .fold(None::<(u32, f64)>, |best, (r, p)| match best {
                            Some((_, w)) if w >= work(p) => best,
                            _ => Some((*r, work(p))),
                        })?;
                let mut shares: Vec<f64> = steps
                    .iter()
                    .filter(|(r, _)| *r != slow)
                    .map(|(_, p)| {
                        let step: f64 = p.iter().sum();
                        if step > 0.0 { p[3] / step } else { 0.0 }
                    })
                    .collect();
                median_in_place(&mut shares)
                    .is_some_and(|m| m > MATERIAL_COMM_SHARE)
                    .then_some(slow)
            })
            .collect()
    }

    /// The blocks find every step's straggler the step-by-step reading
    /// found, for generated worlds, lengths across block edges, ties and
    /// idle steps.
    #[test]
    fn blocks_find_what_one_step_at_a_time_found() {
        let mut x: u64 = 0x5EED_0051;
        let mut next = move |m: u64| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x % m
        };
        for case in 0..200 {
            let world = 1 + next(40) as u32;
            let n = next(100) as usize;
            let coarse = next(3) == 0;
            let mut series: Vec<StepSeries> = Vec::new();
            for _ in 0..world {
                let mut v = || -> Vec<u64> {
                    (0..n)
                        .map(|_| {
                            if coarse {
                                next(3) * 1000
                            } else {
                                next(9_000_000)
                            }
                        })
                        .collect()
                };
                series.push(StepSeries {
                    next_wait_ns: v(),
                    transfer_ns: v(),
                    compute_ns: v(),
                    comm_ns: v(),
                });
            }
            let by_rank: BTreeMap<u32, &StepSeries> = series
                .iter()
                .enumerate()
                .map(|(r, s)| (r as u32 * 3, s))
                .collect();
            assert_eq!(
                stragglers(&by_rank, n),
                one_step_at_a_time(&by_rank, n),
                "case {case}"
            );
        }
    }
}
