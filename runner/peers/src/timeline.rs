//! Timelines of the peer engines' whole-run epochs: the same 20 Hz sampler
//! as the native loops, following the harness's process tree (the harness,
//! its DataLoader workers or SPDL threads) beside the runner itself, and, on
//! CUDA, the device's NVML counters. The runner sees only the harness's
//! lines, so an epoch's window runs from the line before it (hello, or the
//! previous epoch's line) to its own; the harness reports no progress, so
//! the steps series is empty.

use stallscope_bundle::{Timeline, TimingMode};

use stallscope_core::cost::{GpuTarget, INTERVAL, Sampler, SamplerSpec, timeline_enabled};

/// The sampler of one epoch's window, or why it did not start.
pub struct EpochTimeline(Result<Sampler, String>);

/// Start sampling before the harness's next epoch when that is a whole-run
/// one (and timelines are on); `None` otherwise.
pub fn start(next: Option<&TimingMode>, harness: u32, device: &str) -> Option<EpochTimeline> {
    if next != Some(&TimingMode::WholeRun) || !timeline_enabled() {
        return None;
    }
    let sampler = Sampler::start(SamplerSpec {
        interval: INTERVAL,
        workers: None,
        steps: None,
        tree: Some(harness),
        gpu: target(device),
        allocator_only: false,
    });
    Some(EpochTimeline(sampler.map_err(|e| {
        format!("the sampler thread did not start: {e}")
    })))
}

impl EpochTimeline {
    /// Stop at the epoch's line: the timeline, or one that says why not.
    pub fn finish(self) -> Timeline {
        match self.0 {
            Ok(s) => s.finish(),
            Err(why) => Timeline {
                interval_s: INTERVAL.as_secs_f64(),
                gpu_not_available: Some(why),
                ..Timeline::default()
            },
        }
    }
}

/// The GPU to sample for the harness's device (`cpu`, `cuda`, `cuda:N`).
fn target(device: &str) -> GpuTarget {
    match device.strip_prefix("cuda") {
        Some("") => GpuTarget::Cuda(0),
        Some(i) => match i.strip_prefix(':').and_then(|n| n.parse().ok()) {
            Some(n) => GpuTarget::Cuda(n),
            None => GpuTarget::None(format!("the peer's device {device:?} is not read as CUDA")),
        },
        None if device == "cpu" => GpuTarget::None("the device is the CPU".into()),
        None => GpuTarget::None(format!("the peer's device {device:?} is not a CUDA device")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_harness_device_names_the_gpu_to_sample() {
        assert_eq!(target("cuda:3"), GpuTarget::Cuda(3));
        assert_eq!(target("cuda"), GpuTarget::Cuda(0));
        assert_eq!(
            target("cpu"),
            GpuTarget::None("the device is the CPU".into())
        );
        assert!(matches!(target("cuda:x"), GpuTarget::None(_)));
        assert!(matches!(target("mps"), GpuTarget::None(_)));
    }

    #[test]
    fn only_a_whole_run_epoch_is_sampled() {
        let me = std::process::id();
        assert!(start(Some(&TimingMode::Diagnostic), me, "cpu").is_none());
        assert!(start(None, me, "cpu").is_none());
        let tl = start(Some(&TimingMode::WholeRun), me, "cpu")
            .expect("a whole-run epoch is sampled")
            .finish();
        assert!(!tl.t_ms.is_empty() && tl.steps.is_empty());
        assert_eq!(tl.host_cpu_cores.len(), tl.t_ms.len());
        assert_eq!(
            tl.gpu_not_available.as_deref(),
            Some("the device is the CPU")
        );
    }
}
