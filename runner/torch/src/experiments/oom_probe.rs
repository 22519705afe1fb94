//! `oom_probe`: under a per-process memory fraction, raise the batch (doubling,
//! then bisecting) until one training step fails with an out-of-memory error;
//! record the error as a result (with its numbers checked against the
//! device), recover, and keep everything that fit. CUDA only: on the CPU the
//! experiment is recorded as not applicable, with the reason.

use std::panic::{AssertUnwindSafe, catch_unwind};
use std::time::Instant;

use stallscope_bundle::{
    Configuration, Experiment, ExperimentKind, Failure, OomFailure, ParamValue, Run, TimingMode,
    WholeRun, analysis,
};

use super::common::batch_label;
use crate::models::{ModelSpec, Trainer, synthetic_batch};
use crate::shim;
use stallscope_core::{
    Driven, EpochSlot, UnitCtx, UnitError, panic_message,
    suite::{ExperimentPlan, ExperimentSpec},
};

/// The OOM probe as an adaptive experiment of the driver: it asks for its
/// next batch from what it measured (doubling, then bisecting) and runs each
/// once. On the CPU it is not applicable, with the reason.
pub struct OomProbe<'a> {
    plan: &'a ExperimentPlan,
    device: &'a crate::device::DeviceCtx,
    model: ModelSpec,
    memory_fraction: f64,
    start_batch: i64,
    max_batch: i64,
    /// Why it cannot run here, if it cannot.
    not_applicable: Option<String>,
    /// Batch size of each configuration, by index.
    batches: Vec<i64>,
    weight_seed: u64,
}

impl<'a> OomProbe<'a> {
    pub fn new(
        plan: &'a ExperimentPlan,
        device: &'a crate::device::DeviceCtx,
        weight_seed: u64,
    ) -> Self {
        let ExperimentSpec::OomProbe {
            model,
            memory_fraction,
            start_batch,
            max_batch,
        } = plan.spec
        else {
            unreachable!("OomProbe::new is called for oom_probe plans only")
        };
        let not_applicable = if !device.is_cuda() {
            Some("needs a CUDA device: the CPU has no caching allocator with a memory cap, so an out-of-memory error cannot be provoked and recovered from safely".to_string())
        } else {
            shim::set_allocator_settings(&format!("per_process_memory_fraction:{memory_fraction}"))
                .err()
                .map(|e| format!("could not set the per-process memory fraction: {e}"))
        };
        OomProbe {
            plan,
            device,
            model,
            memory_fraction,
            start_batch,
            max_batch,
            not_applicable,
            batches: Vec::new(),
            weight_seed,
        }
    }
}

impl Driven for OomProbe<'_> {
    fn skeleton(&self) -> Experiment {
        let (model, memory_fraction) = (self.model, self.memory_fraction);
        let (start_batch, max_batch) = (self.start_batch, self.max_batch);
        Experiment {
            description: Some(format!(
                "The caching allocator is capped at {memory_fraction} of the device's memory (per-process memory fraction). One training step of the {} on a synthetic batch is timed whole-run at batch sizes doubling from {start_batch} (at most {max_batch}), then bisecting between the last that fit and the first that failed. The failure is recorded with the error text, the cap, free/total and the allocator's counters; the process frees the failed step's tensors, empties the cache and goes on.",
                model.name()
            )),
            swept: vec!["batch_size".into()],
            settings: [
                ("model".to_string(), ParamValue::from(model.name())),
                (
                    "parameters".to_string(),
                    ParamValue::from(model.parameters() as i64),
                ),
                ("data".to_string(), "synthetic".into()),
                ("memory_fraction".to_string(), memory_fraction.into()),
            ]
            .into(),
            baseline: None,
            not_applicable: self.not_applicable.clone(),
            configurations: Vec::new(),
            ..Experiment::new(
                self.plan.id.clone(),
                ExperimentKind::OomProbe,
                self.plan
                    .title
                    .clone()
                    .unwrap_or_else(|| "Largest batch under a memory cap".into()),
            )
        }
    }

    fn epochs_per_unit(&self) -> u64 {
        1
    }

    fn next_configuration(&mut self, measured: &Experiment) -> Option<Configuration> {
        let batch_of = |c: &Configuration| {
            c.params
                .get("batch_size")
                .and_then(ParamValue::as_f64)
                .map(|b| b as i64)
        };
        let mut last_fit = None;
        let mut first_fail: Option<i64> = None;
        for c in &measured.configurations {
            match &c.failure {
                None => last_fit = last_fit.max(batch_of(c)),
                Some(Failure::OutOfMemory(_)) => {
                    first_fail = match (first_fail, batch_of(c)) {
                        (Some(a), Some(b)) => Some(a.min(b)),
                        (a, b) => a.or(b),
                    }
                }
                // Any other failure (an unenforced cap, an error) ends it.
                Some(_) => return None,
            }
        }
        let batch = if measured.configurations.is_empty() {
            self.start_batch
        } else {
            next_batch(last_fit, first_fail, self.max_batch)?
        };
        self.batches.push(batch);
        let bytes =
            (self.model.input_shape().iter().product::<i64>() * 4 + 8) as u64 * batch as u64;
        Some(
            Configuration::new(format!("bs{batch}"), batch_label(batch))
                .with_param("batch_size", ParamValue::Int(batch))
                .with_batch_bytes(bytes),
        )
    }

    fn run_unit(
        &mut self,
        index: usize,
        _repeat: u32,
        cx: &UnitCtx,
    ) -> Result<Vec<Run>, UnitError> {
        let batch = self.batches[index];
        let cuda = self
            .device
            .cuda_index()
            .expect("not applicable without CUDA");
        cx.progress.epoch(
            &self.plan.id,
            &format!("bs{batch}"),
            0,
            TimingMode::WholeRun,
            0,
        );
        let probe = probe(
            self.model,
            batch,
            cuda,
            self.memory_fraction,
            self.device,
            self.weight_seed,
        );
        cx.progress.epoch_done();
        match probe {
            Probe::Fit(run) => {
                // The cap is applied through the allocator's settings at run
                // time; if a step reserved more than the cap, it was not
                // enforced and nothing this probe finds means anything.
                let cap = shim::cuda_mem_info(cuda)
                    .ok()
                    .map(|(_, total)| (total as f64 * self.memory_fraction) as u64);
                let reserved = run
                    .memory
                    .as_ref()
                    .and_then(|m| m.device_peak_reserved_bytes);
                if let (Some(cap), Some(reserved)) = (cap, reserved)
                    && reserved > cap
                {
                    return Err(UnitError::Failed(format!(
                        "the memory cap was not enforced: this step reserved {reserved} bytes, above the cap of {cap} bytes ({} of the device); the probe stops here",
                        self.memory_fraction
                    )));
                }
                Ok(vec![*run])
            }
            Probe::Oom(oom) => Err(UnitError::Recorded(Box::new(Failure::OutOfMemory(*oom)))),
            Probe::Failed(message) => Err(UnitError::Failed(message)),
        }
    }

    fn arrange(&self, experiment: &mut Experiment) {
        experiment.configurations.sort_by_key(|c| {
            c.params
                .get("batch_size")
                .and_then(ParamValue::as_f64)
                .map(|b| b as i64)
        });
    }

    fn recover(&self) {
        self.device.empty_cache();
    }
}

enum Probe {
    Fit(Box<Run>),
    Oom(Box<OomFailure>),
    Failed(String),
}

/// The next batch to try: double until the first failure (or the maximum),
/// then bisect between the last that fit and the first that failed, in
/// steps of 256, until the gap is within an eighth of the batch that fit.
/// `None` when the probe is done.
pub fn next_batch(last_fit: Option<i64>, first_fail: Option<i64>, max_batch: i64) -> Option<i64> {
    match (last_fit, first_fail) {
        (Some(lo), None) if lo < max_batch => Some((lo * 2).min(max_batch)),
        (Some(lo), Some(hi)) if hi - lo > (lo / 8).max(256) => {
            let mid = lo + (hi - lo) / 2;
            Some(mid - mid % 256).filter(|&m| m > lo)
        }
        _ => None,
    }
}

/// One training step at `batch`, timed whole-run, or the OOM it raised.
fn probe(
    model: ModelSpec,
    batch: i64,
    device: u32,
    fraction: f64,
    ctx: &crate::device::DeviceCtx,
    weight_seed: u64,
) -> Probe {
    ctx.empty_cache();
    ctx.reset_peaks();
    let result = catch_unwind(AssertUnwindSafe(|| -> Result<Run, tch::TchError> {
        let mut trainer = Trainer::new(model, model.default_optimizer(), ctx.device, weight_seed)?;
        let (x, y) = synthetic_batch(model, batch, ctx.device);
        ctx.synchronize();
        // The allocator's counters over the step, sampled on a side thread
        // (CUDA only; reading them does not synchronise). The clock runs
        // inside, so the sampler's start is not timed.
        let target = ctx.gpu_target();
        let (stepped, timeline) = crate::step_memory::with_step_memory(&target, || {
            let t0 = Instant::now();
            let r = trainer.step(&x, &y);
            ctx.synchronize();
            r.map(|()| t0.elapsed().as_secs_f64())
        });
        let seconds = stepped?;
        // One step, whole-run: the run of slot (whole_run, repeat 0, epoch 0).
        let mut run = EpochSlot {
            mode: TimingMode::WholeRun,
            repeat: 0,
            epoch: 0,
        }
        .run();
        run.whole_run = Some(WholeRun::measured(seconds, batch as u64, 1, 0));
        run.whole_run.as_mut().expect("just set").bytes = None;
        run.memory = Some(ctx.memory());
        run.timeline = timeline.ok();
        Ok(run)
    }));
    let message = match result {
        Ok(Ok(run)) => return Probe::Fit(Box::new(run)),
        Ok(Err(e)) => e.to_string(),
        Err(payload) => panic_message(&payload),
    };
    // Everything the step held is dropped by now; read the counters at the
    // failure, then give the cache back.
    let stats = shim::cuda_memory_stats(device).ok();
    let info = shim::cuda_mem_info(device).ok();
    ctx.empty_cache();
    if !message.to_lowercase().contains("out of memory") {
        return Probe::Failed(message);
    }
    let mut oom = OomFailure {
        memory_fraction: Some(fraction),
        cap_bytes: info.map(|(_, total)| (total as f64 * fraction) as u64),
        requested_bytes: requested_bytes(&message),
        allocated_bytes: stats.map(|s| s.allocated),
        reserved_unallocated_bytes: stats.map(|s| s.reserved.saturating_sub(s.allocated)),
        device_free_bytes: info.map(|(free, _)| free),
        device_total_bytes: info.map(|(_, total)| total),
        message: Some(message),
        ..OomFailure::default()
    };
    oom.plausibility = Some(analysis::oom_plausibility(&oom));
    Probe::Oom(Box::new(oom))
}

/// The size in "Tried to allocate 1.50 GiB" of a CUDA OOM message.
pub fn requested_bytes(message: &str) -> Option<u64> {
    let rest = &message[message.find("Tried to allocate ")? + "Tried to allocate ".len()..];
    let mut parts = rest.split_whitespace();
    let number: f64 = parts.next()?.parse().ok()?;
    let unit = parts.next()?.trim_end_matches(['.', ',', ';']);
    let scale = match unit {
        "B" | "bytes" => 1.0,
        "KiB" => 1024.0,
        "MiB" => 1024.0 * 1024.0,
        "GiB" => 1024.0 * 1024.0 * 1024.0,
        "TiB" => 1024f64.powi(4),
        _ => return None,
    };
    Some((number * scale) as u64)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_probe_doubles_then_bisects() {
        // A device where batches up to 20,000 fit (seeds/003: 16,384 fit,
        // 24,576 failed).
        let fits = |b: i64| b <= 20_000;
        let (mut lo, mut hi, mut b, mut tried) = (None, None, 8192, Vec::new());
        loop {
            tried.push(b);
            if fits(b) {
                lo = Some(b);
            } else {
                hi = Some(b);
            }
            match next_batch(lo, hi, 1 << 20) {
                Some(n) => b = n,
                None => break,
            }
        }
        assert_eq!(tried, vec![8192, 16384, 32768, 24576, 20480, 18432]);
        assert_eq!((lo, hi), (Some(18432), Some(20480)));
        assert_eq!(next_batch(Some(1024), None, 1024), None);
        assert_eq!(next_batch(None, Some(1024), 1 << 20), None);
    }

    #[test]
    fn requested_bytes_are_read_from_the_message() {
        let m = "CUDA out of memory. Tried to allocate 1.50 GiB. GPU 0 has a total capacity of 15.92 GiB";
        assert_eq!(requested_bytes(m), Some(1_610_612_736));
        assert_eq!(
            requested_bytes("Tried to allocate 512.00 MiB."),
            Some(536_870_912)
        );
        assert_eq!(requested_bytes("no numbers here"), None);
    }
}
