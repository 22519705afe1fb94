//! A job's tuning (`stallscope job --tune`): which configuration of a
//! measured grid to recommend, and what the verification's interleaved
//! whole-run A/B pairs say about it.
//!
//! The rule: the fastest configuration by median whole-run samples/s; the
//! ones **within the noise** of it are those whose median is at least the
//! fastest's × (1 − n), n the larger of the two configurations' spreads
//! ((max − min) / median over the repeats) and never less than
//! [`NOISE_FLOOR`]; among those the cheapest, by median CPU-seconds per 1,000
//! samples, then by peak memory of every process, then by speed. When the
//! baseline (the job's own settings) is within the noise of the fastest,
//! nothing beats it beyond noise: keep it.

use crate::analysis::metric::{Metric, MetricKey, metric_summary, metric_value, preferred_phase};
use crate::analysis::summary::Summary;
use crate::format::{Configuration, Experiment, TimingMode};

/// The least share two medians must differ by to count as different, even
/// when the repeats agree closely (one repeat has no spread at all).
pub const NOISE_FLOOR: f64 = 0.02;

/// One configuration as the choice reads it.
#[derive(Debug, Clone, PartialEq)]
pub struct TuneCandidate {
    pub id: String,
    /// Whole-run samples/s over the repeats.
    pub rate: Summary,
    /// Median CPU-seconds of every process per 1,000 samples (whole-run).
    pub cpu_s_per_1000_samples: Option<f64>,
    /// The largest peak resident memory of every process (whole-run).
    pub peak_rss_bytes: Option<f64>,
}

/// What to recommend from a grid.
#[derive(Debug, Clone, PartialEq)]
pub struct TuneChoice {
    pub fastest: TuneCandidate,
    /// The recommendation: the baseline itself when `keep`.
    pub chosen: TuneCandidate,
    pub baseline: TuneCandidate,
    /// Every configuration within the noise of the fastest, fastest first.
    pub near: Vec<String>,
    /// The baseline is within the noise of the fastest: nothing beats it.
    pub keep: bool,
}

impl TuneChoice {
    /// The chosen configuration's median samples/s over the baseline's.
    pub fn speedup(&self) -> f64 {
        self.chosen.rate.median / self.baseline.rate.median
    }
}

/// Whether `other` is within the noise of `fastest` (the module's rule).
pub fn within_noise(fastest: &Summary, other: &Summary) -> bool {
    let noise = fastest.spread.max(other.spread).max(NOISE_FLOOR);
    other.median >= fastest.median * (1.0 - noise)
}

/// A configuration's figures, when it has whole-run samples/s and no failure.
pub fn tune_candidate(e: &Experiment, c: &Configuration) -> Option<TuneCandidate> {
    if c.failure.is_some() {
        return None;
    }
    let key = |m| MetricKey::new(m, TimingMode::WholeRun, preferred_phase(e));
    let rate = metric_summary(c, &key(Metric::SamplesPerS)).filter(|s| s.median > 0.0)?;
    Some(TuneCandidate {
        id: c.id.clone(),
        rate,
        cpu_s_per_1000_samples: metric_value(c, &key(Metric::CpuSPer1000Samples)),
        peak_rss_bytes: metric_value(c, &key(Metric::PeakRssAllBytes)),
    })
}

/// The recommendation among `e`'s configurations other than `exclude`,
/// against `baseline`; `None` when the baseline has no whole-run figure.
pub fn tune_choice(e: &Experiment, baseline: &str, exclude: &[&str]) -> Option<TuneChoice> {
    let all: Vec<TuneCandidate> = e
        .configurations
        .iter()
        .filter(|c| !exclude.contains(&c.id.as_str()))
        .filter_map(|c| tune_candidate(e, c))
        .collect();
    let base = all.iter().find(|c| c.id == baseline)?.clone();
    let fastest = all
        .iter()
        .max_by(|a, b| a.rate.median.total_cmp(&b.rate.median))?
        .clone();
    let mut near: Vec<&TuneCandidate> = all
        .iter()
        .filter(|c| within_noise(&fastest.rate, &c.rate))
        .collect();
    near.sort_by(|a, b| b.rate.median.total_cmp(&a.rate.median));
    let keep = near.iter().any(|c| c.id == base.id);
    let chosen = if keep {
        base.clone()
    } else {
        cheapest(&near).clone()
    };
    Some(TuneChoice {
        near: near.iter().map(|c| c.id.clone()).collect(),
        fastest,
        chosen,
        baseline: base,
        keep,
    })
}

/// The cheapest of candidates (never empty): CPU per sample, then memory,
/// then speed; an unknown cost counts as the highest.
fn cheapest<'a>(near: &[&'a TuneCandidate]) -> &'a TuneCandidate {
    let key = |v: Option<f64>| v.unwrap_or(f64::INFINITY);
    near.iter()
        .copied()
        .min_by(|a, b| {
            key(a.cpu_s_per_1000_samples)
                .total_cmp(&key(b.cpu_s_per_1000_samples))
                .then(key(a.peak_rss_bytes).total_cmp(&key(b.peak_rss_bytes)))
                .then(b.rate.median.total_cmp(&a.rate.median))
        })
        .expect("the fastest is within its own noise")
}

/// The verification of a recommendation: per pair (the runs of one repeat),
/// `b`'s whole-run samples/s over `a`'s, in the order of the repeats; a
/// repeat that lacks either is left out.
pub fn pair_ratios(e: &Experiment, a: &str, b: &str) -> Vec<f64> {
    let rate = |id: &str, repeat: u32| {
        let c = e.configuration(id)?;
        c.runs
            .iter()
            .filter(|r| r.repeat == repeat && r.timing_mode == TimingMode::WholeRun)
            .find_map(|r| r.whole_run.as_ref()?.samples_per_s)
    };
    let repeats = e
        .configuration(a)
        .map(|c| c.runs.iter().map(|r| r.repeat).max().map_or(0, |m| m + 1))
        .unwrap_or(0);
    (0..repeats)
        .filter_map(|r| Some(rate(b, r)? / rate(a, r)?))
        .filter(|x| x.is_finite() && *x > 0.0)
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::format::{CpuCost, ExperimentKind, Phase, Run, WholeRun};

    fn config(id: &str, rates: &[f64], cpu_s: f64) -> Configuration {
        let runs = rates
            .iter()
            .enumerate()
            .map(|(i, &rate)| {
                let mut r = Run::new(
                    format!("w{i}"),
                    TimingMode::WholeRun,
                    i as u32,
                    1,
                    Phase::Steady,
                );
                r.whole_run = Some(WholeRun::measured(1000.0 / rate, 1000, 10, 0));
                r.cost = Some(CpuCost {
                    wall_s: 1000.0 / rate,
                    cpu_s,
                    cpu_s_per_1000_samples: Some(cpu_s),
                    parts: Vec::new(),
                });
                r
            })
            .collect();
        Configuration::new(id, id).with_runs(runs)
    }

    fn grid(configs: Vec<Configuration>) -> Experiment {
        Experiment::new("job", ExperimentKind::Loader, "job").with_configurations(configs)
    }

    #[test]
    fn the_cheapest_within_the_noise_of_the_fastest_is_chosen() {
        let e = grid(vec![
            config("script", &[100.0, 101.0, 99.0], 1.0),
            config("w4", &[300.0, 330.0, 310.0], 4.0),
            config("w2", &[295.0, 300.0, 305.0], 2.0),
            config("w1", &[200.0, 200.0, 200.0], 1.5),
            config("replay", &[5000.0], 0.1),
        ]);
        let c = tune_choice(&e, "script", &["replay"]).unwrap();
        assert_eq!(c.fastest.id, "w4");
        // w4's spread is 30/310 ≈ 9.7%: w2 (300) is within it, w1 is not.
        assert_eq!(c.near, ["w4", "w2"]);
        assert_eq!((c.chosen.id.as_str(), c.keep), ("w2", false));
        assert!((c.speedup() - 3.0).abs() < 1e-9);
    }

    #[test]
    fn a_baseline_within_the_noise_is_kept() {
        let e = grid(vec![
            config("script", &[100.0, 99.0, 101.0], 1.0),
            config("w2", &[101.5, 101.0, 102.0], 0.5),
        ]);
        let c = tune_choice(&e, "script", &[]).unwrap();
        assert!(c.keep, "1.5% faster is within the 2% floor");
        assert_eq!(c.chosen.id, "script");
        let e = grid(vec![
            config("script", &[100.0], 1.0),
            config("w2", &[103.0], 2.0),
        ]);
        let c = tune_choice(&e, "script", &[]).unwrap();
        assert!(
            !c.keep,
            "3% is beyond the floor when one repeat has no spread"
        );
    }

    #[test]
    fn pair_ratios_follow_the_repeats() {
        let e = grid(vec![
            config("original", &[100.0, 110.0, 90.0], 1.0),
            config("recommended", &[200.0, 198.0, 189.0], 1.0),
        ]);
        let r = pair_ratios(&e, "original", "recommended");
        assert_eq!(r.len(), 3);
        assert!(
            (r[0] - 2.0).abs() < 1e-9 && (r[1] - 1.8).abs() < 1e-9 && (r[2] - 2.1).abs() < 1e-9
        );
        assert!(pair_ratios(&e, "original", "missing").is_empty());
    }
}
