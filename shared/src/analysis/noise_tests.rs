//! The noise floor, intervals and verdicts over generated rates: two runs
//! of one configuration are no measurable difference, a real difference
//! well past the noise is found.

use super::*;
use crate::format::{CpuCost, ExperimentKind, Phase, Run, WholeRun};

/// SplitMix64: the same numbers on every machine.
struct Gen(u64);

impl Gen {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }
    fn uniform(&mut self) -> f64 {
        (self.next() >> 11) as f64 / (1u64 << 53) as f64
    }
    /// About N(0, 1): the sum of 12 uniforms less 6.
    fn normal(&mut self) -> f64 {
        (0..12).map(|_| self.uniform()).sum::<f64>() - 6.0
    }
}

/// A configuration whose repeat r ran at `rates[r]` samples/s and
/// `cpu[r]` CPU-seconds per 1,000 samples.
pub(crate) fn config(id: &str, rates: &[f64], cpu: &[f64]) -> Configuration {
    let runs = rates
        .iter()
        .zip(cpu)
        .enumerate()
        .map(|(i, (&rate, &cpu_s))| {
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

fn experiment(configs: Vec<Configuration>) -> Experiment {
    Experiment::new("job", ExperimentKind::Loader, "job").with_configurations(configs)
}

/// `repeats` of `script`, `script-again` and each of `others` (id, true
/// speed-up): each repeat shares a machine drift of ±10%, and each run its
/// own noise of `sigma`.
fn generated(g: &mut Gen, repeats: usize, sigma: f64, others: &[(&str, f64)]) -> Experiment {
    let mut ids = vec![("script", 1.0), ("script-again", 1.0)];
    ids.extend_from_slice(others);
    let drift: Vec<f64> = (0..repeats)
        .map(|_| 1.0 + 0.1 * (2.0 * g.uniform() - 1.0))
        .collect();
    let configs = ids
        .iter()
        .map(|(id, speed)| {
            let rates: Vec<f64> = drift
                .iter()
                .map(|d| 100.0 * speed * d * (1.0 + sigma * g.normal()).max(0.5))
                .collect();
            let cpu: Vec<f64> = (0..repeats).map(|_| 1.0 + 0.03 * g.normal()).collect();
            config(id, &rates, &cpu)
        })
        .collect();
    experiment(configs)
}

#[test]
fn the_interval_is_the_range_under_six_repeats_then_order_statistics() {
    let i = ratio_interval(&[1.2, 0.9, 1.0]).unwrap();
    assert_eq!((i.n, i.median, i.low, i.high), (3, 1.0, 0.9, 1.2));
    assert!((i.coverage - 0.75).abs() < 1e-12);
    let ten: Vec<f64> = (1..=10).map(f64::from).collect();
    let i = ratio_interval(&ten).unwrap();
    // P(X ≤ 1) = 11/1024 for n = 10: k = 2 covers 97.9%, k = 3 only 89%.
    assert_eq!((i.low, i.high), (2.0, 9.0));
    assert!((i.coverage - (1.0 - 22.0 / 1024.0)).abs() < 1e-12);
    assert_eq!(ratio_interval(&[]), None);
}

#[test]
fn many_ratios_keep_an_interval() {
    // ½ⁿ underflows an f64 past n = 1,074: the interval must still be the order statistics
    // around n/2 ± 1.96·√n/2, not the median alone.
    for n in [1_200usize, 5_000] {
        let v: Vec<f64> = (0..n).map(|i| i as f64).collect();
        let i = ratio_interval(&v).unwrap();
        let half = 1.96 * (n as f64).sqrt() / 2.0;
        let k = i.low as usize + 1;
        assert!(
            ((n as f64 / 2.0 - half) - k as f64).abs() <= 2.0,
            "n {n}: k {k}"
        );
        assert_eq!(i.high as usize, n - k, "n {n}");
        assert!(
            i.coverage >= 0.95 && i.coverage < 0.96,
            "n {n}: {}",
            i.coverage
        );
    }
}

#[test]
fn the_floor_is_the_largest_a_a_deviation_at_least_two_percent() {
    assert!((floor_of(&[1.05, 0.97]).unwrap() - 0.05).abs() < 1e-12);
    assert!((floor_of(&[0.9, 1.01]).unwrap() - (1.0 / 0.9 - 1.0)).abs() < 1e-12);
    assert_eq!(floor_of(&[1.001, 0.999]), Some(NOISE_FLOOR));
    assert_eq!(floor_of(&[1.3]), None, "one pair is no floor");
}

#[test]
fn verdicts_are_three_way_and_say_whether_they_are_resolved() {
    let at = |low: f64, high: f64| RatioInterval {
        n: 3,
        median: (low + high) / 2.0,
        low,
        high,
        coverage: 0.75,
    };
    let v = |low, high| {
        let j = judge(at(low, high), 0.05);
        (j.difference, j.resolved)
    };
    assert_eq!(v(1.1, 1.3), (RatioDifference::Higher, true));
    assert_eq!(v(0.7, 0.9), (RatioDifference::Lower, true));
    assert_eq!(
        v(1.0, 1.02),
        (RatioDifference::NoMeasurableDifference, true)
    );
    assert_eq!(
        v(1.03, 1.2),
        (RatioDifference::NoMeasurableDifference, false)
    );
    assert_eq!(
        v(0.9, 1.2),
        (RatioDifference::NoMeasurableDifference, false)
    );
    assert_eq!(RatioDifference::Higher.rate_word(), "faster");
    assert_eq!(RatioDifference::Lower.cost_word(), "costs less CPU");
}

#[test]
fn the_a_a_pair_itself_is_always_no_measurable_difference() {
    let mut g = Gen(7);
    for _ in 0..200 {
        let repeats = 2 + (g.next() % 7) as usize;
        let e = generated(&mut g, repeats, 0.08, &[]);
        let floor = job_noise_floor(&e).unwrap();
        for of in [RatioOf::Rate, RatioOf::CpuCost] {
            let v = compare_configurations(&e, "script", "script-again", &floor, of).unwrap();
            assert_eq!(v.difference, RatioDifference::NoMeasurableDifference);
            assert!(v.resolved, "every A/A ratio is inside its own floor");
        }
    }
}

/// How often a configuration of the given true speed-up is called each
/// way, over `trials` generated experiments of `repeats`.
fn calls(seed: u64, repeats: usize, speed: f64, trials: usize) -> [usize; 3] {
    let mut g = Gen(seed);
    let mut n = [0; 3];
    for _ in 0..trials {
        let e = generated(&mut g, repeats, 0.05, &[("other", speed)]);
        let floor = job_noise_floor(&e).unwrap();
        let v = compare_configurations(&e, "script", "other", &floor, RatioOf::Rate).unwrap();
        n[match v.difference {
            RatioDifference::Higher => 0,
            RatioDifference::Lower => 1,
            RatioDifference::NoMeasurableDifference => 2,
        }] += 1;
    }
    n
}

#[test]
fn a_third_run_of_the_same_settings_is_no_measurable_difference() {
    for repeats in [3, 5, 8] {
        let [faster, slower, same] = calls(11, repeats, 1.0, 500);
        // Measured: 9 of 500 called either way with 3 repeats (4 faster, 5
        // slower), none with 5 or 8.
        assert!(
            faster + slower <= 25,
            "{repeats} repeats: {faster} faster, {slower} slower, {same} same of 500"
        );
    }
}

#[test]
fn a_real_difference_past_the_noise_is_found() {
    for repeats in [3, 5] {
        let [faster, _, _] = calls(12, repeats, 1.4, 500);
        assert!(faster >= 475, "{repeats} repeats: {faster} of 500 faster");
        let [_, slower, _] = calls(13, repeats, 1.0 / 1.4, 500);
        assert!(slower >= 475, "{repeats} repeats: {slower} of 500 slower");
    }
}

#[test]
fn resolution_waits_for_a_floor_and_for_every_comparison() {
    let e = experiment(vec![
        config("script", &[100.0], &[1.0]),
        config("script-again", &[101.0], &[1.0]),
    ]);
    let r = resolution(&e, "script", &[]);
    assert!(
        !r.resolved && r.reason.starts_with("no noise floor yet"),
        "{r:?}"
    );

    let cpu = [1.0; 3];
    let e = experiment(vec![
        config("script", &[100.0, 100.0, 100.0], &cpu),
        config("script-again", &[103.0, 98.0, 100.0], &cpu),
        config("w2", &[200.0, 210.0, 190.0], &cpu),
        config("w1", &[101.0, 99.0, 100.5], &cpu),
    ]);
    let r = resolution(&e, "script", &[]);
    assert!(r.resolved, "{r:?}");
    // 3% floor: a configuration 1–6% faster straddles its edge.
    let e = experiment(vec![
        config("script", &[100.0, 100.0, 100.0], &cpu),
        config("script-again", &[103.0, 98.0, 100.0], &cpu),
        config("w4", &[101.0, 106.0, 104.0], &cpu),
        config("replay", &[9000.0, 9000.0, 9000.0], &cpu),
    ]);
    let r = resolution(&e, "script", &["replay"]);
    assert_eq!(
        (r.resolved, r.open.as_slice()),
        (false, &["w4".to_string()][..])
    );
    assert!(
        r.reason.contains("w4 straddles the 3.0% noise floor"),
        "{}",
        r.reason
    );
}
