//! Noise you can see (docs/methodology.md, "A job's step, and what a ratio
//! may claim"): the noise floor of an experiment from one configuration run
//! twice (an A/A pair, interleaved with the rest), a ratio's interval over
//! the repeats, and the three-way verdict: higher, lower, or no measurable
//! difference when the interval overlaps the floor.
//!
//! - **Ratios are repeat-wise.** The driver runs repeat r of every
//!   configuration before repeat r + 1, so the runs of one repeat saw the
//!   same machine; b ÷ a is taken within each repeat.
//! - **The floor** is the largest A/A ratio or its reciprocal, less one
//!   (two runs of the same settings were that far apart), never below
//!   [`NOISE_FLOOR`]; it needs [`MIN_FLOOR_PAIRS`] A/A repeats.
//! - **The interval** of a ratio is a distribution-free interval of the
//!   median of its repeat-wise ratios: the order statistics k and n + 1 − k
//!   for the largest k that covers the median with at least
//!   [`INTERVAL_COVERAGE`]; under six repeats no k does, and the interval is
//!   the whole range (its coverage, 1 − 2^(1−n), is reported).
//! - **The verdict**: above the band [1 ÷ (1 + f), 1 + f] (the interval's
//!   low end above 1 + f) is higher, below it lower; any overlap is no
//!   measurable difference, **resolved** when the interval lies inside the
//!   band (a difference, if any, is smaller than the noise) and open when
//!   it straddles an edge (more repeats may tell).

use crate::analysis::summary::median;
use crate::format::{Configuration, Experiment, NoiseFloor, TimingMode};

/// The least share two medians must differ by to count as different, even
/// when the repeats agree closely (one repeat has no spread at all).
pub const NOISE_FLOOR: f64 = 0.02;

/// The configuration a job runs again as the A/A pair of `script`.
pub const JOB_SCRIPT_AGAIN_ID: &str = "script-again";

/// A/A repeats needed before their spread is a floor.
pub const MIN_FLOOR_PAIRS: usize = 2;

/// The coverage the interval of a median asks for, when there are repeats
/// enough to give it.
pub const INTERVAL_COVERAGE: f64 = 0.95;

/// What a repeat-wise ratio compares.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RatioOf {
    /// Whole-run samples/s: higher is faster.
    Rate,
    /// Whole-run CPU-seconds per 1,000 samples: higher costs more.
    CpuCost,
}

/// A run's figure for `of` (whole-run runs only).
fn figure(c: &Configuration, repeat: u32, of: RatioOf) -> Option<f64> {
    c.runs
        .iter()
        .filter(|r| r.repeat == repeat && r.timing_mode == TimingMode::WholeRun)
        .find_map(|r| match of {
            RatioOf::Rate => r.whole_run.as_ref()?.samples_per_s,
            RatioOf::CpuCost => r.cost.as_ref()?.cpu_s_per_1000_samples,
        })
        .filter(|x| x.is_finite() && *x > 0.0)
}

/// `b` over `a` per repeat, in repeat order; a repeat that lacks either is
/// left out.
pub fn repeat_ratios(e: &Experiment, a: &str, b: &str, of: RatioOf) -> Vec<f64> {
    let (Some(ca), Some(cb)) = (e.configuration(a), e.configuration(b)) else {
        return Vec::new();
    };
    let repeats = ca.runs.iter().map(|r| r.repeat).max().map_or(0, |m| m + 1);
    (0..repeats)
        .filter_map(|r| Some(figure(cb, r, of)? / figure(ca, r, of)?))
        .filter(|x| x.is_finite() && *x > 0.0)
        .collect()
}

/// The floor of repeat-wise ratios: the largest ratio or reciprocal, less
/// one, at least [`NOISE_FLOOR`]; `None` under [`MIN_FLOOR_PAIRS`].
pub fn floor_of(ratios: &[f64]) -> Option<f64> {
    (ratios.len() >= MIN_FLOOR_PAIRS).then(|| {
        ratios
            .iter()
            .map(|r| r.max(1.0 / r) - 1.0)
            .fold(NOISE_FLOOR, f64::max)
    })
}

/// The noise floor of `e` from the A/A pair `a`, `b`; `None` when the pair
/// has fewer than [`MIN_FLOOR_PAIRS`] repeats of whole-run samples/s.
pub fn noise_floor_of(e: &Experiment, a: &str, b: &str) -> Option<NoiseFloor> {
    let rate_ratios = repeat_ratios(e, a, b, RatioOf::Rate);
    let rate_floor = floor_of(&rate_ratios)?;
    let cpu_ratios = repeat_ratios(e, a, b, RatioOf::CpuCost);
    Some(NoiseFloor {
        a: a.to_string(),
        b: b.to_string(),
        cpu_floor: floor_of(&cpu_ratios),
        cpu_ratios,
        rate_ratios,
        rate_floor,
    })
}

/// A job experiment's floor: `script` against `script-again`.
pub fn job_noise_floor(e: &Experiment) -> Option<NoiseFloor> {
    noise_floor_of(e, crate::analysis::JOB_SCRIPT_ID, JOB_SCRIPT_AGAIN_ID)
}

/// An interval of the median of repeat-wise ratios.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct RatioInterval {
    pub n: usize,
    pub median: f64,
    pub low: f64,
    pub high: f64,
    /// The chance the interval holds the true median (order statistics).
    pub coverage: f64,
}

/// P(X ≤ k) for X ~ Binomial(n, ½). Each term is carried as its logarithm: ½ⁿ itself is 0 in
/// an f64 from n = 1,075 on, which made every interval of that many ratios the median alone.
fn binomial_half_cdf(n: usize, k: usize) -> f64 {
    let mut log_term = n as f64 * 0.5f64.ln();
    let mut sum = 0.0;
    for i in 0..=k.min(n) {
        sum += log_term.exp();
        if i < n {
            log_term += ((n - i) as f64 / (i + 1) as f64).ln();
        }
    }
    sum
}

/// The interval of the median of `ratios` (module rule); `None` when there
/// are none.
pub fn ratio_interval(ratios: &[f64]) -> Option<RatioInterval> {
    let mut v: Vec<f64> = ratios.iter().copied().filter(|x| x.is_finite()).collect();
    if v.is_empty() {
        return None;
    }
    v.sort_by(f64::total_cmp);
    let n = v.len();
    let coverage = |k: usize| 1.0 - 2.0 * binomial_half_cdf(n, k - 1);
    let k = (1..=n.div_ceil(2))
        .rev()
        .find(|&k| coverage(k) >= INTERVAL_COVERAGE)
        .unwrap_or(1);
    Some(RatioInterval {
        n,
        median: median(&v)?,
        low: v[k - 1],
        high: v[n - k],
        coverage: coverage(k),
    })
}

/// Where a ratio stands against the floor.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RatioDifference {
    /// Measurably higher: faster for a rate, costlier for a CPU cost.
    Higher,
    /// Measurably lower: slower for a rate, cheaper for a CPU cost.
    Lower,
    /// The interval overlaps the floor.
    NoMeasurableDifference,
}

impl RatioDifference {
    /// For a rate: `faster`, `slower`, `no measurable difference`.
    pub fn rate_word(self) -> &'static str {
        match self {
            RatioDifference::Higher => "faster",
            RatioDifference::Lower => "slower",
            RatioDifference::NoMeasurableDifference => "no measurable difference",
        }
    }
    /// For a CPU cost.
    pub fn cost_word(self) -> &'static str {
        match self {
            RatioDifference::Higher => "costs more CPU",
            RatioDifference::Lower => "costs less CPU",
            RatioDifference::NoMeasurableDifference => "no measurable difference in CPU",
        }
    }
}

/// A ratio judged against a floor.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct RatioVerdict {
    pub interval: RatioInterval,
    /// The floor `f` it was judged against: the band [1 ÷ (1 + f), 1 + f].
    pub floor: f64,
    pub difference: RatioDifference,
    /// Whether more repeats could not change the verdict's kind: the
    /// interval is clear of the band, or inside it.
    pub resolved: bool,
}

/// The verdict of `interval` against the floor `floor` (module rule).
pub fn judge(interval: RatioInterval, floor: f64) -> RatioVerdict {
    // The band's edges widened by rounding's width: an A/A ratio sits on
    // the edge of its own floor, on one side of it or the other.
    const ROUNDING: f64 = 1e-12;
    let (lo, hi) = (
        (1.0 - ROUNDING) / (1.0 + floor),
        (1.0 + floor) * (1.0 + ROUNDING),
    );
    let (difference, resolved) = if interval.low > hi {
        (RatioDifference::Higher, true)
    } else if interval.high < lo {
        (RatioDifference::Lower, true)
    } else {
        let inside = interval.low >= lo && interval.high <= hi;
        (RatioDifference::NoMeasurableDifference, inside)
    };
    RatioVerdict {
        interval,
        floor,
        difference,
        resolved,
    }
}

/// `b` against `a` in `e`, judged against the floor of `of`; `None`
/// without ratios or without that floor.
pub fn compare_configurations(
    e: &Experiment,
    a: &str,
    b: &str,
    floor: &NoiseFloor,
    of: RatioOf,
) -> Option<RatioVerdict> {
    let f = match of {
        RatioOf::Rate => floor.rate_floor,
        RatioOf::CpuCost => floor.cpu_floor?,
    };
    Some(judge(ratio_interval(&repeat_ratios(e, a, b, of))?, f))
}

/// Whether an A/B verification confirms the change: with the job's A/A
/// floor, when the interval of its pairs' ratios (B ÷ A) is clear above the
/// floor; without one (bundles before format 1.5), when every pair was
/// faster.
pub fn verification_confirmed(ratios: &[f64], floor: Option<&NoiseFloor>) -> bool {
    match (floor, ratio_interval(ratios)) {
        (_, None) => false,
        (None, Some(i)) => i.n > 0 && ratios.iter().all(|r| *r > 1.0),
        (Some(f), Some(i)) => judge(i, f.rate_floor).difference == RatioDifference::Higher,
    }
}

/// The order of `pairs` A/B pairs as the driver runs them (ascending,
/// descending, ...): `AB, BA, AB`.
pub fn pair_order(pairs: usize) -> String {
    let v: Vec<&str> = (0..pairs)
        .map(|i| if i % 2 == 0 { "AB" } else { "BA" })
        .collect();
    v.join(", ")
}

/// Whether a job's answer is resolved after a round of repeats.
#[derive(Debug, Clone, PartialEq)]
pub struct Resolution {
    pub resolved: bool,
    /// The configurations whose verdict against the baseline is still
    /// open (more repeats may tell).
    pub open: Vec<String>,
    /// One sentence: why it is or is not resolved.
    pub reason: String,
}

/// After a round of repeats: the answer of `e` against `baseline` is
/// resolved when the A/A floor exists and every other configuration (but
/// those in `exclude` and the A/A copy) is measurably faster, slower, or
/// inside the floor. The job repeats until it is, or its budget is spent.
pub fn resolution(e: &Experiment, baseline: &str, exclude: &[&str]) -> Resolution {
    let Some(floor) = job_noise_floor(e) else {
        return Resolution {
            resolved: false,
            open: Vec::new(),
            reason: format!(
                "no noise floor yet: the A/A pair needs {MIN_FLOOR_PAIRS} repeats of \
                 whole-run samples/s"
            ),
        };
    };
    let open: Vec<String> = e
        .configurations
        .iter()
        .map(|c| c.id.as_str())
        .filter(|id| *id != baseline && *id != floor.b && !exclude.contains(id))
        .filter(|id| {
            compare_configurations(e, baseline, id, &floor, RatioOf::Rate)
                .is_some_and(|v| !v.resolved)
        })
        .map(str::to_string)
        .collect();
    let pct = crate::analysis::units::show_percent(floor.rate_floor);
    let reason = if open.is_empty() {
        format!("resolved: every configuration is clear of the {pct} noise floor or inside it")
    } else {
        format!(
            "not resolved: {} straddle{} the {pct} noise floor",
            open.join(", "),
            if open.len() == 1 { "s" } else { "" }
        )
    };
    Resolution {
        resolved: open.is_empty(),
        open,
        reason,
    }
}

#[cfg(test)]
#[path = "noise_tests.rs"]
pub(crate) mod tests;
