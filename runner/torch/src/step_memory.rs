//! A memory timeline over one step on CUDA, for the OOM probe and the
//! batch sweep: the caching allocator's allocated and reserved bytes and the
//! device's used memory (`cudaMemGetInfo`), read every millisecond on a side
//! thread while the step runs. Reading them does not synchronise, so the step
//! is timed as before. On the CPU there is nothing to read: the reason comes
//! back instead and the step runs alone.

use std::time::Duration;

use stallscope_bundle::Timeline;

use stallscope_core::{
    cost::GpuTarget,
    cost::{Sampler, SamplerSpec},
};

/// The interval over a step.
pub const STEP_INTERVAL: Duration = Duration::from_millis(1);

/// Run `step` with the allocator sampled beside it on `target`: its result,
/// and the timeline or why there is none (e.g. "the device is the CPU").
pub fn with_step_memory<R>(
    target: &GpuTarget,
    step: impl FnOnce() -> R,
) -> (R, Result<Timeline, String>) {
    if let GpuTarget::None(why) = target {
        return (step(), Err(why.clone()));
    }
    let sampler = Sampler::start(SamplerSpec {
        interval: STEP_INTERVAL,
        workers: None,
        steps: None,
        tree: None,
        gpu: target.clone(),
        allocator_only: true,
    });
    let out = step();
    let timeline = match sampler {
        Ok(s) => {
            // Over one step a step counter says nothing: there is none.
            Ok(s.finish())
        }
        Err(e) => Err(format!("the memory sampler did not start: {e}")),
    };
    (out, timeline)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn on_the_cpu_the_step_runs_alone_and_the_reason_comes_back() {
        let target = crate::device::DeviceCtx::cpu().gpu_target();
        let mut ran = 0;
        let (out, tl) = with_step_memory(&target, || {
            ran += 1;
            7
        });
        assert_eq!((out, ran), (7, 1));
        assert_eq!(tl.unwrap_err(), "the device is the CPU");
    }

    /// A CUDA target without CUDA (this machine): the allocator cannot be
    /// read, so the timeline holds host series only and no GPU part; with a
    /// GPU the allocator series are aligned with the samples.
    #[test]
    fn a_cuda_target_keeps_its_series_aligned_whatever_can_be_read() {
        let (_, tl) = with_step_memory(&GpuTarget::Cuda(0), || {
            std::thread::sleep(Duration::from_millis(20))
        });
        let tl = tl.unwrap();
        let n = tl.t_ms.len();
        assert!(n >= 1 && tl.host_rss_bytes.len() == n && tl.steps.is_empty());
        if let Some(g) = &tl.gpu {
            assert_eq!(g.allocated_bytes.len(), n);
            assert_eq!(g.reserved_bytes.len(), n);
            assert!(g.utilization_percent.is_empty(), "no NVML at this interval");
        }
    }
}
