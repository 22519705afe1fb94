//! When your own settings crash (a worker out of shared memory, the OOM
//! killer...), `--tune` searches from there; its answer is the fastest
//! configuration that ran and fits, with why yours did not: the cause, and
//! for shared memory the batches in flight against `/dev/shm`. It cannot
//! be verified against yours, which do not run here, and says so.

use crate::analysis::change::change_of;
use crate::analysis::noise::JOB_SCRIPT_AGAIN_ID;
use crate::analysis::tune::tune_candidate;
use crate::analysis::units::{group_thousands, show_bytes};
use crate::analysis::your_job::JOB_SCRIPT_ID;
use crate::format::{Bundle, Configuration, CrashCause, Experiment, Failure, ParamValue};

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

/// Your settings' batches in flight through `/dev/shm` against its size.
fn in_flight(b: &Bundle, e: &Experiment, own: &Configuration) -> Option<String> {
    let int = |c: &Configuration, k: &str| match c.params.get(k) {
        Some(ParamValue::Int(n)) => u64::try_from(*n).ok(),
        _ => None,
    };
    let workers = int(own, "actual_num_workers").filter(|w| *w > 0)?;
    let prefetch = int(own, "actual_prefetch_factor").unwrap_or(2);
    let batch = own
        .batch_bytes
        .or_else(|| e.configurations.iter().find_map(|c| c.batch_bytes))?;
    let need = workers * prefetch * batch;
    let shm = b.environment.limits.as_ref()?;
    let size = shm.shm_total_bytes.map_or(String::new(), |t| {
        format!(" against the {} of /dev/shm", show_bytes(t as f64))
    });
    Some(format!(
        "They hold {workers} workers × {prefetch} batches ahead × {} a batch = {} of batches in \
         flight through /dev/shm{size}: give the container more shared memory (docker run \
         --shm-size=...), or take the recommendation below.",
        show_bytes(batch as f64),
        show_bytes(need as f64)
    ))
}
