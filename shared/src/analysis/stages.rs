//! Per-step series → a diagnostic run's stage statistics (mean, median, p95,
//! min, max, total, count), shared by every engine so each is analysed by the
//! same code.

use crate::{Diagnostic, StageStat, StepSeries};

/// The diagnostic summary of per-step series: stage statistics over every
/// step but the first (whose wait is `first_next_wait_s`, reported apart);
/// `step` is the per-step sum of the stages. An epoch of a single step has
/// nothing after its first, so its statistics are that one step (count 1),
/// and `first_next_wait_s` is the same wait: a one-step epoch is never left
/// without stages. An epoch of no step has no statistics.
pub fn diagnostic_from_series(
    s: &StepSeries,
    seconds: f64,
    samples: u64,
    bytes: u64,
    iterator_creation_s: Option<f64>,
) -> Diagnostic {
    diagnostic_of(s, seconds, samples, bytes, iterator_creation_s, true)
}

/// The diagnostic summary of a window that starts after warm-up steps (a
/// `stallscope job`'s): none of its steps is an epoch's first, so every step
/// is in the statistics and no first next-wait is set apart
/// (`first_next_wait_s` absent, which the rank analysis reads the same way).
pub fn diagnostic_from_window(
    s: &StepSeries,
    seconds: f64,
    samples: u64,
    bytes: u64,
    iterator_creation_s: Option<f64>,
) -> Diagnostic {
    diagnostic_of(s, seconds, samples, bytes, iterator_creation_s, false)
}

fn diagnostic_of(
    s: &StepSeries,
    seconds: f64,
    samples: u64,
    bytes: u64,
    iterator_creation_s: Option<f64>,
    first_apart: bool,
) -> Diagnostic {
    let first = usize::from(first_apart && s.next_wait_ns.len() > 1);
    let skip = |v: &[u64]| -> Vec<f64> { v.iter().skip(first).map(|&n| n as f64 * 1e-9).collect() };
    let comm = |i: usize| s.comm_ns.get(i).copied().unwrap_or(0);
    let sums: Vec<u64> = (0..s.next_wait_ns.len())
        .map(|i| s.next_wait_ns[i] + s.transfer_ns[i] + s.compute_ns[i] + comm(i))
        .collect();
    Diagnostic {
        seconds: Some(seconds),
        samples: Some(samples),
        steps: Some(s.next_wait_ns.len() as u64),
        bytes: Some(bytes),
        iterator_creation_s,
        first_next_wait_s: s
            .next_wait_ns
            .first()
            .filter(|_| first_apart)
            .map(|&n| n as f64 * 1e-9),
        next_wait: stage_stat(&skip(&s.next_wait_ns)),
        transfer: stage_stat(&skip(&s.transfer_ns)),
        compute: stage_stat(&skip(&s.compute_ns)),
        comm: stage_stat(&skip(&s.comm_ns)),
        step: stage_stat(&skip(&sums)),
    }
}

/// Mean, median, p95 (linear interpolation), min, max, total, count.
pub fn stage_stat(values: &[f64]) -> Option<StageStat> {
    if values.is_empty() {
        return None;
    }
    let mut v = values.to_vec();
    v.sort_by(f64::total_cmp);
    let q = |p: f64| {
        let pos = p * (v.len() - 1) as f64;
        let (lo, hi) = (pos.floor() as usize, pos.ceil() as usize);
        v[lo] + (v[hi] - v[lo]) * (pos - lo as f64)
    };
    let total: f64 = v.iter().sum();
    Some(StageStat {
        mean_s: Some(total / v.len() as f64),
        median_s: Some(q(0.5)),
        p95_s: Some(q(0.95)),
        min_s: v.first().copied(),
        max_s: v.last().copied(),
        total_s: Some(total),
        count: Some(v.len() as u64),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn series(waits: &[u64]) -> StepSeries {
        StepSeries {
            next_wait_ns: waits.to_vec(),
            transfer_ns: vec![10; waits.len()],
            compute_ns: vec![100; waits.len()],
            comm_ns: Vec::new(),
        }
    }

    #[test]
    fn the_first_step_is_reported_apart_when_there_are_more() {
        let d = diagnostic_from_series(&series(&[5_000, 20, 40]), 1.0, 3, 0, None);
        assert_eq!(d.first_next_wait_s, Some(5e-6));
        let w = d.next_wait.unwrap();
        assert_eq!(w.count, Some(2));
        assert_eq!(w.max_s, Some(40e-9));
    }

    #[test]
    fn a_window_after_warm_up_counts_every_step() {
        let d = diagnostic_from_window(&series(&[5_000, 20, 40]), 1.0, 3, 0, None);
        assert_eq!(d.first_next_wait_s, None);
        let w = d.next_wait.unwrap();
        assert_eq!((w.count, w.max_s), (Some(3), Some(5e-6)));
        assert_eq!(d.step.unwrap().count, Some(3));
    }

    #[test]
    fn a_one_step_epoch_still_has_stages() {
        let d = diagnostic_from_series(&series(&[7_000]), 1.0, 1, 0, None);
        assert_eq!(d.steps, Some(1));
        assert_eq!(d.next_wait.unwrap().count, Some(1));
        let step = d.step.unwrap().median_s.unwrap();
        assert!((step - 7_110e-9).abs() < 1e-15, "{step}");
    }

    #[test]
    fn an_empty_epoch_has_no_stages() {
        let d = diagnostic_from_series(&series(&[]), 0.0, 0, 0, None);
        assert!(d.next_wait.is_none() && d.step.is_none());
        assert_eq!(d.steps, Some(0));
    }

    #[test]
    fn quantiles_interpolate() {
        let s = stage_stat(&[1.0, 2.0, 3.0, 4.0]).unwrap();
        assert_eq!(s.median_s, Some(2.5));
        assert!((s.p95_s.unwrap() - 3.85).abs() < 1e-12);
        assert_eq!(s.total_s, Some(10.0));
    }
}
