//! When your own settings crash (a worker out of shared memory, the OOM
//! killer...), `--tune` searches from there; its answer is the fastest
//! configuration that ran and fits, with why yours did not: the cause, and
//! for shared memory the batches in flight against `/dev/shm`. It cannot
//! be verified against yours, which do not run here, and says so.

use crate::analysis::change::change_of;
use crate::analysis::forecast::forecast;
use crate::analysis::noise::JOB_SCRIPT_AGAIN_ID;
use crate::analysis::tune::tune_candidate;
use crate::analysis::units::group_thousands;
use crate::analysis::your_job::JOB_SCRIPT_ID;
use crate::format::{
    Bundle, Configuration, CrashCause, Experiment, Failure, ForecastInputs, ParamValue,
};

/// The fastest configuration other than yours that ran (median whole-run
/// samples/s), when yours crashed.
pub fn fallback_pick(e: &Experiment) -> Option<&Configuration> {
    let own = e.configuration(JOB_SCRIPT_ID)?;
    if !matches!(own.failure, Some(Failure::Crashed { .. })) {
        return None;
    }
    e.configurations
        .iter()
        .filter(|c| c.id != JOB_SCRIPT_ID && c.id != JOB_SCRIPT_AGAIN_ID)
        .filter_map(|c| Some((c, tune_candidate(e, c)?.rate.median)))
        .max_by(|a, b| a.1.total_cmp(&b.1))
        .map(|(c, _)| c)
}

/// The closing paragraphs when your settings crashed; `None` when they did
/// not.
pub(crate) fn text(b: &Bundle, e: &Experiment) -> Option<Vec<String>> {
    let own = e.configuration(JOB_SCRIPT_ID)?;
    let Some(Failure::Crashed { cause, message, .. }) = &own.failure else {
        return None;
    };
    let mut out = vec![format!("Your settings crashed: {message}.")];
    if *cause == CrashCause::SharedMemory {
        out.extend(in_flight(b, e, own));
    }
    out.push(match fallback_pick(e) {
        Some(pick) => {
            let rate = tune_candidate(e, pick).map_or(0.0, |c| c.rate.median);
            let what = change_of(e, &pick.id).unwrap_or_else(|| pick.label.clone());
            format!(
                "Recommendation: {what}: the fastest configuration that ran here ({}/s, \
                 whole-run median); not verified against yours, which do not run here.",
                group_thousands(&format!("{rate:.0}"))
            )
        }
        None => "No recommendation: no configuration of the search ran.".into(),
    });
    Some(out)
}

/// Your settings' batches in flight through `/dev/shm` against its size,
/// as the forecast reckons them (the same figure a configuration that would
/// not fit is refused with).
fn in_flight(b: &Bundle, e: &Experiment, own: &Configuration) -> Option<String> {
    let int = |k: &str| match own.params.get(k) {
        Some(ParamValue::Int(n)) => u64::try_from(*n).ok(),
        _ => None,
    };
    let workers = u32::try_from(int("actual_num_workers").filter(|w| *w > 0)?).ok()?;
    let batch = own
        .batch_bytes
        .or_else(|| e.configurations.iter().find_map(|c| c.batch_bytes))?;
    let inputs = ForecastInputs {
        workers,
        prefetch_factor: int("actual_prefetch_factor").and_then(|p| u32::try_from(p).ok()),
        batch_bytes: Some(batch),
        ..ForecastInputs::default()
    };
    let f = forecast(&inputs, b.environment.limits.as_ref()).shm_in_flight?;
    Some(format!(
        "Your settings hold {}: give the container more shared memory (docker run \
         --shm-size=...), or take the recommendation below.",
        f.basis
    ))
}
