//! The replay reconciled with the training thread's own wait. The replay's
//! stall by difference (whole-run) counts everything the loader costs the
//! step; the diagnostic wait share counts only the time the training thread
//! was blocked getting its batches. When the first is clearly larger, the
//! rest is named: the loader's workers slowing the model's compute by
//! taking the cores it uses (contention), measured as the diagnostic
//! compute time per step with the loader running against the same in
//! replay (docs/methodology.md).

use crate::analysis::metric::{Metric, MetricKey, metric_value, preferred_phase};
use crate::analysis::replay_text::script_whole_run;
use crate::analysis::units::{show_percent, show_ratio, show_step_ms as ms};
use crate::analysis::your_job::{
    JOB_ID, JOB_REPLAY_ID, JOB_SCRIPT_ID, replay_ceiling, replay_stall,
};
use crate::format::{Bundle, ParamValue, TimingMode};

/// The least gap, in points of the step, that this reconciles.
pub const RECONCILE_POINTS: f64 = 0.05;

/// The two loader shares and what lies between them.
#[derive(Debug, Clone, PartialEq)]
pub struct Reconciliation {
    /// The training thread's wait share (diagnostic, your settings).
    pub wait_share: f64,
    /// The replay's stall by difference (whole-run).
    pub replay_stall: f64,
    /// Median compute per step with the loader running, and in replay
    /// (diagnostic).
    pub compute_s: Option<f64>,
    pub replay_compute_s: Option<f64>,
}

impl Reconciliation {
    /// The compute slowed by the loader, as a share of the compute in
    /// replay (`None` without both figures).
    pub fn contention(&self) -> Option<f64> {
        let (with, free) = (self.compute_s?, self.replay_compute_s?);
        (free > 0.0).then(|| with / free - 1.0)
    }
}

/// The two shares of a job bundle with a replay.
pub fn reconcile(b: &Bundle) -> Option<Reconciliation> {
    let job = b.experiment(JOB_ID)?;
    let script = job.configuration(JOB_SCRIPT_ID)?;
    let replay = b.experiment(JOB_REPLAY_ID)?;
    let replayed = replay.configurations.first()?;
    let diag = |m| MetricKey::new(m, TimingMode::Diagnostic, preferred_phase(job));
    let (rate, _) = script_whole_run(b)?;
    Some(Reconciliation {
        wait_share: metric_value(script, &diag(Metric::WaitShare))?,
        replay_stall: replay_stall(rate, &replay_ceiling(b)?),
        compute_s: metric_value(script, &diag(Metric::ComputeMedianS)),
        replay_compute_s: metric_value(replayed, &diag(Metric::ComputeMedianS)),
    })
}

/// One sentence when the replay's stall exceeds the wait by more than
/// [`RECONCILE_POINTS`]; `None` when the two agree.
pub fn sentence(b: &Bundle) -> Option<String> {
    let r = reconcile(b)?;
    if r.replay_stall - r.wait_share <= RECONCILE_POINTS {
        return None;
    }
    let head = format!(
        "The loop with the data free is faster than the training thread's wait explains: it \
         waited {} of its step for batches (diagnostic), the replay says the loader costs {} \
         (whole-run).",
        show_percent(r.wait_share),
        show_percent(r.replay_stall)
    );
    let workers = b
        .experiment(JOB_ID)
        .and_then(|e| e.configuration(JOB_SCRIPT_ID))
        .and_then(|c| match c.params.get("actual_num_workers") {
            Some(ParamValue::Int(n)) => Some(*n),
            _ => None,
        });
    Some(match (r.contention(), r.compute_s, r.replay_compute_s) {
        (Some(_), Some(with), Some(free)) if workers == Some(0) => format!(
            "{head} With no worker processes nothing takes the model's cores: the rest is the \
             training thread's own work with a fresh batch (its compute took {} per step with the \
             loader against {} in replay).",
            ms(with),
            ms(free)
        ),
        (Some(c), Some(with), Some(free)) if c > 0.0 => format!(
            "{head} The rest is contention: the model's compute took {} per step with the loader \
             running against {} in replay ({}), its workers taking the cores the model uses.",
            ms(with),
            ms(free),
            if c >= 1.0 {
                format!("{} as long", show_ratio(c + 1.0))
            } else {
                format!("{} slower", show_percent(c))
            }
        ),
        _ => format!(
            "{head} The model's compute per step was no slower with the loader running, so the \
             rest is outside the step's stages (the loader's start at each epoch, or the \
             instrumentation's view of the wait)."
        ),
    })
}
