//! A job's tuning (`stallscope job --tune`): which configuration of a
//! measured grid to recommend, and what the verification's interleaved
//! whole-run A/B pairs say about it.
//!
//! With an A/A pair in the grid (the script's own settings run twice,
//! `script` and `script-again`: [`crate::analysis::job_noise_floor`]), the
//! rule is the noise module's: a configuration beats the baseline only when
//! its repeat-wise ratio's interval is clear above the floor; among those
//! that do, the ones the fastest of them does not measurably beat are
//! **near**, and the recommendation is the cheapest of them by CPU-seconds
//! per 1,000 samples, where a CPU difference inside the CPU floor is no
//! difference, then by peak memory of every process, then by speed. None
//! beats the baseline: keep it.
//!
//! Without an A/A pair (bundles before format 1.5), the old rule: the
//! fastest configuration by median whole-run samples/s; the ones **within
//! the noise** of it are those whose median is at least the fastest's × (1
//! − n), n the larger of the two configurations' spreads ((max − min) /
//! median over the repeats) and never less than [`NOISE_FLOOR`]; among
//! those the cheapest, by median CPU-seconds per 1,000 samples, then by
//! peak memory, then by speed; the baseline within the noise: keep it.
//!
//! Neither rule calls a configuration the fastest unless there is another
//! it measurably beats ([`TuneChoice::fastest_claim`]).

use crate::analysis::metric::{Metric, MetricKey, metric_summary, metric_value, preferred_phase};
use crate::analysis::noise::{
    JOB_SCRIPT_AGAIN_ID, RatioDifference, RatioOf, RatioVerdict, compare_configurations,
    job_noise_floor,
};
use crate::analysis::summary::Summary;
use crate::format::{Configuration, Experiment, NoiseFloor, TimingMode};

pub use crate::analysis::noise::NOISE_FLOOR;

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
    /// How many configurations the choice read (the baseline among them).
    pub candidates: usize,
    /// The fastest measurably beats every other configuration.
    pub fastest_clear: bool,
    /// The A/A floor the choice was made with; `None`: the old rule.
    pub floor: Option<NoiseFloor>,
    /// With a floor: the chosen (when keeping, the fastest) against the
    /// baseline, in samples/s and in CPU-seconds per 1,000 samples; `None`
    /// where it is the baseline itself or a figure is missing.
    pub verdict: Option<RatioVerdict>,
    pub cpu_verdict: Option<RatioVerdict>,
}

impl TuneChoice {
    /// The chosen configuration's median samples/s over the baseline's.
    pub fn speedup(&self) -> f64 {
        self.chosen.rate.median / self.baseline.rate.median
    }

    /// The fastest, when it may be called so: there is another
    /// configuration and it measurably beats every other one.
    pub fn fastest_claim(&self) -> Option<&TuneCandidate> {
        (self.candidates >= 2 && self.fastest_clear).then_some(&self.fastest)
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

/// The recommendation among `e`'s configurations other than `exclude` (and
/// the A/A copy), against `baseline`; `None` when the baseline has no
/// whole-run figure.
pub fn tune_choice(e: &Experiment, baseline: &str, exclude: &[&str]) -> Option<TuneChoice> {
    let floor = job_noise_floor(e).filter(|f| f.a == baseline);
    let own = e.configuration(baseline);
    let all: Vec<TuneCandidate> = e
        .configurations
        .iter()
        .filter(|c| !exclude.contains(&c.id.as_str()))
        .filter(|c| floor.is_none() || c.id != JOB_SCRIPT_AGAIN_ID)
        .filter(|c| c.id == baseline || !own.is_some_and(|own| same_settings(e, own, c)))
        .filter_map(|c| tune_candidate(e, c))
        .collect();
    let base = all.iter().find(|c| c.id == baseline)?.clone();
    let fastest = all
        .iter()
        .max_by(|a, b| a.rate.median.total_cmp(&b.rate.median))?
        .clone();
    Some(match floor {
        Some(floor) => floored_choice(e, &all, base, fastest, floor),
        None => spread_choice(&all, base, fastest),
    })
}

/// Whether `c` sets every swept parameter it has as `own` does: a grid point
/// that is the script's own settings again (no change to recommend; what it
/// measured against `own` is the noise between two runs of one thing).
fn same_settings(e: &Experiment, own: &Configuration, c: &Configuration) -> bool {
    !e.swept.is_empty()
        && e.swept
            .iter()
            .all(|k| c.params.get(k).is_none_or(|v| own.params.get(k) == Some(v)))
}

/// The old rule: within the larger spread of the fastest's.
fn spread_choice(all: &[TuneCandidate], base: TuneCandidate, fastest: TuneCandidate) -> TuneChoice {
    let mut near: Vec<&TuneCandidate> = all
        .iter()
        .filter(|c| within_noise(&fastest.rate, &c.rate))
        .collect();
    near.sort_by(|a, b| b.rate.median.total_cmp(&a.rate.median));
    let keep = near.iter().any(|c| c.id == base.id);
    let chosen = if keep {
        base.clone()
    } else {
        cheapest(&near, true).clone()
    };
    TuneChoice {
        near: near.iter().map(|c| c.id.clone()).collect(),
        candidates: all.len(),
        fastest_clear: near.len() == 1,
        fastest,
        chosen,
        baseline: base,
        keep,
        floor: None,
        verdict: None,
        cpu_verdict: None,
    }
}

/// The A/A rule (the module's): beat the baseline beyond the floor, then
/// the cheapest of those the fastest of them does not measurably beat.
fn floored_choice(
    e: &Experiment,
    all: &[TuneCandidate],
    base: TuneCandidate,
    fastest: TuneCandidate,
    floor: NoiseFloor,
) -> TuneChoice {
    let beats = |a: &str, b: &str| {
        compare_configurations(e, a, b, &floor, RatioOf::Rate)
            .is_some_and(|v| v.difference == RatioDifference::Higher)
    };
    let better: Vec<&TuneCandidate> = all
        .iter()
        .filter(|c| c.id != base.id && beats(&base.id, &c.id))
        .collect();
    let leader = better
        .iter()
        .copied()
        .max_by(|a, b| a.rate.median.total_cmp(&b.rate.median));
    let mut near: Vec<&TuneCandidate> = match leader {
        Some(l) => better
            .iter()
            .copied()
            .filter(|c| c.id == l.id || !beats(&c.id, &l.id))
            .collect(),
        None => all
            .iter()
            .filter(|c| c.id == base.id || !beats(&base.id, &c.id) && !beats(&c.id, &base.id))
            .collect(),
    };
    near.sort_by(|a, b| b.rate.median.total_cmp(&a.rate.median));
    let keep = leader.is_none();
    let chosen = if keep {
        base.clone()
    } else {
        cheapest_floored(e, &near, &floor).clone()
    };
    let against = if keep { &fastest } else { &chosen };
    let verdict_of = |of| {
        (against.id != base.id)
            .then(|| compare_configurations(e, &base.id, &against.id, &floor, of))
            .flatten()
    };
    TuneChoice {
        near: near.iter().map(|c| c.id.clone()).collect(),
        candidates: all.len(),
        fastest_clear: all
            .iter()
            .all(|c| c.id == fastest.id || beats(&c.id, &fastest.id)),
        verdict: verdict_of(RatioOf::Rate),
        cpu_verdict: verdict_of(RatioOf::CpuCost),
        fastest,
        chosen,
        baseline: base,
        keep,
        floor: Some(floor),
    }
}

/// The cheapest of `near` where a CPU difference inside the CPU floor is
/// none: those not measurably costlier than the least CPU, then by memory,
/// then by speed.
fn cheapest_floored<'a>(
    e: &Experiment,
    near: &[&'a TuneCandidate],
    floor: &NoiseFloor,
) -> &'a TuneCandidate {
    let cpu = |c: &TuneCandidate| c.cpu_s_per_1000_samples.unwrap_or(f64::INFINITY);
    let least = near
        .iter()
        .filter(|c| c.cpu_s_per_1000_samples.is_some())
        .min_by(|a, b| cpu(a).total_cmp(&cpu(b)));
    let (Some(least), Some(_)) = (least, floor.cpu_floor) else {
        return cheapest(near, true);
    };
    let ties: Vec<&TuneCandidate> = near
        .iter()
        .copied()
        .filter(|c| c.cpu_s_per_1000_samples.is_some())
        .filter(|c| {
            c.id == least.id
                || compare_configurations(e, &least.id, &c.id, floor, RatioOf::CpuCost)
                    .is_some_and(|v| v.difference != RatioDifference::Higher)
        })
        .collect();
    cheapest(&ties, false)
}

/// The cheapest of candidates (never empty): CPU per sample (when `cpu`),
/// then memory, then speed; an unknown cost counts as the highest.
fn cheapest<'a>(near: &[&'a TuneCandidate], cpu: bool) -> &'a TuneCandidate {
    let key = |v: Option<f64>| v.unwrap_or(f64::INFINITY);
    let cpu_key = |c: &TuneCandidate| {
        if cpu {
            key(c.cpu_s_per_1000_samples)
        } else {
            0.0
        }
    };
    near.iter()
        .copied()
        .min_by(|a, b| {
            cpu_key(a)
                .total_cmp(&cpu_key(b))
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
#[path = "tune_floor_tests.rs"]
mod floor_tests;

#[cfg(test)]
mod tests {
    use super::*;
    use crate::format::{CpuCost, ExperimentKind, ParamValue, Phase, Run, WholeRun};

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
    fn a_grid_point_with_the_scripts_own_settings_is_never_the_pick() {
        let with = |c: Configuration, w: i64| c.with_param("num_workers", ParamValue::Int(w));
        let mut e = grid(vec![
            with(config("script", &[100.0], 1.0), 0),
            with(config("w0", &[150.0], 1.0), 0),
            with(config("w1", &[90.0], 1.0), 1),
        ]);
        e.swept = vec!["num_workers".into()];
        let c = tune_choice(&e, "script", &[]).unwrap();
        assert!(c.keep, "w0 is the script's settings: {c:?}");
        assert_eq!((c.chosen.id.as_str(), c.candidates), ("script", 2));
        e.configurations[1]
            .params
            .insert("num_workers".into(), ParamValue::Int(2));
        let c = tune_choice(&e, "script", &[]).unwrap();
        assert_eq!((c.chosen.id.as_str(), c.keep), ("w0", false));
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
