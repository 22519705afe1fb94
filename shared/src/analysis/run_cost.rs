//! One run's cost figures, as the metrics read them (a leaf: the cost
//! analysis and the metrics both build on it).

use crate::format::{Run, TimingMode};

/// A run's CPU-seconds per 1,000 samples: as recorded, else `cpu_s` ÷ the
/// run's samples × 1,000.
pub fn cpu_s_per_1000_samples(r: &Run) -> Option<f64> {
    let c = r.cost.as_ref()?;
    if let Some(v) = c.cpu_s_per_1000_samples {
        return Some(v);
    }
    let samples = run_samples(r).filter(|n| *n > 0)?;
    Some(c.cpu_s / samples as f64 * 1000.0)
}

/// The samples of a run's epoch, whatever its mode.
pub fn run_samples(r: &Run) -> Option<u64> {
    match r.timing_mode {
        TimingMode::WholeRun => r.whole_run.as_ref()?.samples,
        TimingMode::Diagnostic => r.diagnostic.as_ref()?.samples,
        TimingMode::Unknown(_) => None,
    }
}

/// The runner's host peak RSS plus its worker processes' (format 1.2). A run
/// without worker processes counts the runner alone, but only when it was
/// measured in format 1.2 (it has a CPU cost): an older run says nothing
/// about its workers, so it gives nothing rather than a partial figure.
pub fn peak_rss_all_bytes(r: &Run) -> Option<u64> {
    let m = r.memory.as_ref()?;
    let host = m.host_peak_rss_bytes?;
    match m.workers_peak_rss_bytes {
        Some(w) => Some(host.saturating_add(w)),
        None => r.cost.as_ref().map(|_| host),
    }
}

/// The mean of a sampled series, each sample weighted by the time since the
/// previous one (the first by its own time since the epoch started); the
/// plain mean when the times do not advance. `None` for an empty series or
/// one whose length is not the timeline's.
pub fn timeline_mean(t_ms: &[u32], values: &[f64]) -> Option<f64> {
    if values.is_empty() || values.len() != t_ms.len() {
        return None;
    }
    let mut prev = 0u32;
    let (mut sum, mut weight) = (0.0, 0.0);
    for (&t, &v) in t_ms.iter().zip(values) {
        let dt = f64::from(t.saturating_sub(prev));
        prev = prev.max(t);
        sum += v * dt;
        weight += dt;
    }
    if weight > 0.0 {
        Some(sum / weight)
    } else {
        Some(values.iter().sum::<f64>() / values.len() as f64)
    }
}
