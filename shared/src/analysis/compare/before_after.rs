//! Before and after, as `traceml compare` does for two runs of one training
//! job: whether the diagnosis changed (input-bound → compute-bound), read
//! from each side's diagnostic runs, and how far the whole-run step moved,
//! with the noise of its repeats. Each side is read at its job's own
//! settings (the experiment's baseline: `stallscope job`'s `script`).
//!
//! The diagnosis is where the time went (diagnostic runs, synchronized at
//! every stage); the step is whether the change helped (whole-run runs):
//! the two modes are never mixed (methodology.md).

use crate::analysis::metric::{Metric, MetricKey, Quantity, metric_summary, metric_value};
use crate::analysis::summary::Summary;
use crate::analysis::tune::NOISE_FLOOR;
use crate::analysis::units::{Unit, show_percent, show_ratio};
use crate::analysis::verdict::InputBound;
use crate::format::{Configuration, Experiment, Phase, TimingMode};

/// The experiment id `stallscope job` writes.
pub const JOB_EXPERIMENT: &str = "job";

/// What a step waits on, from the diagnostic split.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Bound {
    /// 20% or more of the step waiting in `next()`.
    Input,
    /// 5–20% waiting in `next()`.
    ModeratelyInput,
    /// Under 5% waiting, the host-to-device copy longer than compute.
    Transfer,
    /// Under 5% waiting, compute the longest stage.
    Compute,
}

impl Bound {
    pub fn label(self) -> &'static str {
        match self {
            Bound::Input => "input-bound",
            Bound::ModeratelyInput => "moderately input-bound",
            Bound::Transfer => "transfer-bound",
            Bound::Compute => "compute-bound",
        }
    }

    /// TensorFlow's thresholds on the wait share; under 5%, the longer of
    /// transfer and compute (compute when the run copies nothing).
    pub fn of(wait_share: f64, transfer_s: Option<f64>, compute_s: Option<f64>) -> Bound {
        match InputBound::of_share(wait_share) {
            InputBound::Highly => Bound::Input,
            InputBound::Moderately => Bound::ModeratelyInput,
            InputBound::Not => match (transfer_s, compute_s) {
                (Some(t), Some(c)) if t > c => Bound::Transfer,
                (Some(_), None) => Bound::Transfer,
                _ => Bound::Compute,
            },
        }
    }
}

/// One side's diagnosis at its job's own settings.
#[derive(Debug, Clone, PartialEq)]
pub struct Diagnosis {
    pub config_id: String,
    pub phase: Phase,
    /// Median over the diagnostic runs of the share of a step in `next()`.
    pub wait_share: f64,
    pub bound: Bound,
}

/// How the whole-run step moved against the noise.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StepMove {
    Faster,
    Slower,
    WithinNoise,
}

/// The whole-run step time of the two sides.
#[derive(Debug, Clone, PartialEq)]
pub struct StepChange {
    pub phase: Phase,
    /// Seconds per step over the repeats.
    pub base: Summary,
    pub new: Summary,
    /// NEW ÷ BASE of the medians.
    pub ratio: f64,
    /// The larger spread of the two, [`NOISE_FLOOR`] at least.
    pub noise: f64,
    pub moved: StepMove,
}

/// Before and after of two bundles of one job.
#[derive(Debug, Clone, PartialEq)]
pub struct BeforeAfter {
    pub base: Option<Diagnosis>,
    pub new: Option<Diagnosis>,
    pub step: Option<StepChange>,
}

/// The configuration a side is read at: the baseline, else the first.
fn own_settings(e: &Experiment) -> Option<&Configuration> {
    e.baseline
        .as_deref()
        .and_then(|id| e.configuration(id))
        .or_else(|| e.configurations.first())
}

const PHASES: [Phase; 2] = [Phase::Steady, Phase::Cold];

/// A configuration's diagnosis, steady epochs first.
pub fn diagnosis(c: &Configuration) -> Option<Diagnosis> {
    PHASES.into_iter().find_map(|phase| {
        let key = |m| MetricKey::new(m, TimingMode::Diagnostic, phase);
        let wait_share = metric_value(c, &key(Metric::WaitShare))?;
        let transfer = metric_value(c, &key(Metric::TransferMeanS));
        let compute = metric_value(c, &key(Metric::ComputeMeanS));
        Some(Diagnosis {
            config_id: c.id.clone(),
            phase,
            wait_share,
            bound: Bound::of(wait_share, transfer, compute),
        })
    })
}

/// The whole-run step of both, in the first phase both have (steady first).
pub fn step_change(base: &Configuration, new: &Configuration) -> Option<StepChange> {
    PHASES.into_iter().find_map(|phase| {
        let key = MetricKey::new(Metric::StepTimeS, TimingMode::WholeRun, phase);
        let b = metric_summary(base, &key).filter(|s| s.median > 0.0)?;
        let n = metric_summary(new, &key).filter(|s| s.median > 0.0)?;
        let ratio = n.median / b.median;
        let noise = b.spread.max(n.spread).max(NOISE_FLOOR);
        let moved = if ratio < 1.0 - noise {
            StepMove::Faster
        } else if ratio > 1.0 + noise {
            StepMove::Slower
        } else {
            StepMove::WithinNoise
        };
        Some(StepChange {
            phase,
            base: b,
            new: n,
            ratio,
            noise,
            moved,
        })
    })
}

/// Before and after of two job experiments (`None` unless both are
/// [`JOB_EXPERIMENT`] and one side has something to say).
pub fn before_after(base: &Experiment, new: &Experiment) -> Option<BeforeAfter> {
    if base.id != JOB_EXPERIMENT || new.id != JOB_EXPERIMENT {
        return None;
    }
    let (b, n) = (own_settings(base)?, own_settings(new)?);
    let out = BeforeAfter {
        base: diagnosis(b),
        new: diagnosis(n),
        step: step_change(b, n),
    };
    (out.base.is_some() || out.new.is_some() || out.step.is_some()).then_some(out)
}

impl Diagnosis {
    /// `input-bound (wait 62%)`.
    pub fn text(&self) -> String {
        format!(
            "{} (wait {})",
            self.bound.label(),
            show_percent(self.wait_share)
        )
    }
}

impl BeforeAfter {
    /// `Diagnosis: input-bound (wait 62%) → compute-bound (wait 3.0%).`, or
    /// unchanged with both waits.
    pub fn diagnosis_sentence(&self) -> Option<String> {
        let side = |d: &Option<Diagnosis>| {
            d.as_ref()
                .map_or_else(|| "no diagnostic runs".to_string(), Diagnosis::text)
        };
        let lead = "Diagnosis (diagnostic runs, the job's own settings)";
        match (&self.base, &self.new) {
            (None, None) => None,
            (Some(b), Some(n)) if b.bound == n.bound => Some(format!(
                "{lead} unchanged: {} (wait {} → {}).",
                b.bound.label(),
                show_percent(b.wait_share),
                show_percent(n.wait_share)
            )),
            _ => Some(format!(
                "{lead}: {} → {}.",
                side(&self.base),
                side(&self.new)
            )),
        }
    }

    /// `Whole-run step (steady): 150 ms [140–160] → 40.1 ms [39.0–41.2],
    /// 0.27× (3.7× faster; beyond the noise, spreads 13% and 5.0%).`
    pub fn step_sentence(&self) -> Option<String> {
        let s = self.step.as_ref()?;
        let unit = Unit::for_values(Quantity::Duration, &[s.base.median, s.new.median]);
        let show = |x: &Summary| {
            let mut t = unit.show(x.median);
            if x.n > 1 {
                t += &format!(" [{}–{}]", unit.number(x.min), unit.number(x.max));
            }
            t
        };
        let how = match s.moved {
            StepMove::Faster => format!("{} faster; beyond the noise", show_ratio(1.0 / s.ratio)),
            StepMove::Slower => format!("{} slower; beyond the noise", show_ratio(s.ratio)),
            StepMove::WithinNoise => "within the noise".to_string(),
        };
        let floor = if s.base.spread.max(s.new.spread) < NOISE_FLOOR {
            format!(", {} floor", show_percent(NOISE_FLOOR))
        } else {
            String::new()
        };
        Some(format!(
            "Whole-run step ({}): {} → {}, {} ({how}: repeats spread {} and {}{floor}).",
            s.phase.as_str(),
            show(&s.base),
            show(&s.new),
            show_ratio(s.ratio),
            show_percent(s.base.spread),
            show_percent(s.new.spread)
        ))
    }

    /// The sentences to show, diagnosis first.
    pub fn sentences(&self) -> Vec<String> {
        [self.diagnosis_sentence(), self.step_sentence()]
            .into_iter()
            .flatten()
            .collect()
    }
}
