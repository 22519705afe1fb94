//! The replay's sentence: the step of your loop with the loader free (the
//! DS-Analyzer ceiling) against your settings' step, and the stall read by
//! difference, 1 − samples/s with the real loader ÷ samples/s with replay.

use crate::analysis::metric::Quantity;
use crate::analysis::metric::{Metric, MetricKey, metric_value, preferred_phase};
use crate::analysis::units::{Unit, show_bytes, show_percent, show_step_ms as ms};
use crate::analysis::your_job::{JOB_ID, JOB_SCRIPT_ID, replay_ceiling, replay_stall};
use crate::format::{Bundle, TimingMode};

/// Your settings' whole-run samples/s and step seconds (job experiment).
pub fn script_whole_run(b: &Bundle) -> Option<(f64, f64)> {
    let e = b.experiment(JOB_ID)?;
    let c = e.configuration(JOB_SCRIPT_ID)?;
    let key = |m| MetricKey::new(m, TimingMode::WholeRun, preferred_phase(e));
    Some((
        metric_value(c, &key(Metric::SamplesPerS))?,
        metric_value(c, &key(Metric::StepTimeS))?,
    ))
}

/// One sentence, or `None` without a replay and your settings' figures.
pub fn sentence(b: &Bundle) -> Option<String> {
    let ceil = replay_ceiling(b)?;
    let (rate, step) = script_whole_run(b)?;
    let held = match (ceil.batches, ceil.bytes) {
        (Some(n), Some(bytes)) => format!(", {n} cached batches, {}", show_bytes(bytes as f64)),
        _ => String::new(),
    };
    // The same unit for both rates, so the formula reads at the table's precision.
    let unit = Unit::for_values(Quantity::Rate, &[rate, ceil.rate]);
    let costs = if rate >= ceil.rate {
        "nothing measurable: the replay was no faster than your settings".to_string()
    } else {
        format!("{} of your step", show_percent(replay_stall(rate, &ceil)))
    };
    Some(format!(
        "Replay (the loader free{held}): a step of {} against {} with your settings; the loader \
         costs {costs} (stall by difference: 1 − {} ÷ {}, whole-run).",
        ms(ceil.step_s),
        ms(step),
        unit.show(rate),
        unit.show(ceil.rate)
    ))
}
