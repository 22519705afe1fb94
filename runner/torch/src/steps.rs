//! The libtorch back end's step, in the parts the one loop
//! (`stallscope_core::run_epoch`) times: the next batch from a [`Feed`], its
//! copy to the device, the model's train step, and a device synchronisation.
//! With `prefetch_to_device` the copy runs on a side stream
//! (`crate::prefetch`). The loop itself (clocks, modes, memory, ranks, cost)
//! is not here.

use stallscope_bundle::{LoaderStats, Memory, TimingMode, WorkerTracks};
use stallscope_loader::WorkerRegistry;
use tch::Tensor;

pub use crate::batch_copy::{CopyMode, taken, to_device};
use crate::device::DeviceCtx;
use crate::feed::{EpochIter, Feed, HostBatch};
use crate::models::Trainer;
pub use stallscope_core::{EpochSlot, LoopError};
use stallscope_core::{EpochSteps, Stages, Steps, Taken, cost::GpuTarget};

/// One warm-up step on a synthetic batch of the measured shape (seeds/003),
/// outside any timed region, so kernel selection and allocation are not
/// measured.
pub fn warm_up(trainer: &mut Trainer, ctx: &DeviceCtx, batch_size: i64) -> Result<(), LoopError> {
    let (x, y) = crate::models::synthetic_batch(trainer.spec, batch_size, ctx.device);
    trainer.step(&x, &y)?;
    ctx.synchronize();
    Ok(())
}

/// One training epoch of `trainer` on `feed` through the one loop
/// (`stallscope_core::run_epoch` over [`TorchSteps`]).
pub fn train_epoch(
    trainer: &mut Trainer,
    feed: &mut dyn Feed,
    ctx: &DeviceCtx,
    copy: CopyMode,
    slot: EpochSlot,
    stop: &std::sync::atomic::AtomicBool,
) -> Result<stallscope_bundle::Run, LoopError> {
    let mut steps = TorchSteps {
        trainer: Some(trainer),
        feed,
        ctx,
        copy,
    };
    stallscope_core::run_epoch(&mut steps, &slot, stop)
}

/// The libtorch back end's side of the loop: a model trained on a feed's
/// batches, or (`trainer` absent: `model = "none"`) the feed alone.
pub struct TorchSteps<'a> {
    pub trainer: Option<&'a mut Trainer>,
    pub feed: &'a mut dyn Feed,
    pub ctx: &'a DeviceCtx,
    pub copy: CopyMode,
}

impl Steps for TorchSteps<'_> {
    fn synchronize(&mut self) -> Result<(), LoopError> {
        self.ctx.synchronize();
        Ok(())
    }

    fn start_epoch(
        &mut self,
        epoch: u32,
        mode: &TimingMode,
    ) -> Result<Box<dyn EpochSteps + '_>, LoopError> {
        let it = self.feed.start_epoch(epoch)?;
        let (ctx, copy) = (self.ctx, self.copy);
        match self.trainer.as_deref_mut() {
            Some(trainer) if copy.prefetch_to_device => {
                let fused = *mode == TimingMode::WholeRun;
                crate::prefetch::PrefetchEpoch::new(it, trainer, ctx, fused)
                    .map(|e| Box::new(e) as Box<dyn EpochSteps>)
            }
            trainer => Ok(Box::new(TorchEpoch {
                it,
                trainer,
                ctx,
                copy,
                batch: None,
                on_device: None,
            })),
        }
    }

    fn stages(&self) -> Stages {
        if self.trainer.is_some() {
            Stages::ALL
        } else {
            Stages::LOADER_ONLY
        }
    }

    fn reset_device_peaks(&mut self) {
        self.ctx.reset_device_peaks();
    }

    fn device_memory(&mut self, memory: &mut Memory) {
        self.ctx.device_memory(memory);
    }

    fn loader_stats(&mut self) -> Option<LoaderStats> {
        self.feed.loader_stats()
    }

    fn workers(&self) -> Option<WorkerRegistry> {
        self.feed.workers()
    }

    fn trace_workers(&mut self, on: bool) {
        self.feed.set_tracing(on);
    }

    fn worker_tracks(&mut self) -> Option<WorkerTracks> {
        self.feed.worker_tracks()
    }

    fn gpu(&self) -> GpuTarget {
        if self.trainer.is_none() {
            return GpuTarget::None("the loop runs no model (model = \"none\")".into());
        }
        self.ctx.gpu_target()
    }
}

/// One epoch of [`TorchSteps`] without a side stream.
struct TorchEpoch<'a> {
    it: Box<dyn EpochIter + 'a>,
    trainer: Option<&'a mut Trainer>,
    ctx: &'a DeviceCtx,
    copy: CopyMode,
    batch: Option<HostBatch>,
    on_device: Option<(Tensor, Tensor)>,
}

impl EpochSteps for TorchEpoch<'_> {
    fn next(&mut self) -> Result<Option<Taken>, LoopError> {
        // The previous batch is released before the next is taken, as a
        // training loop's variables are rebound.
        self.batch = None;
        self.on_device = None;
        let Some(batch) = self.it.next_batch() else {
            return Ok(None);
        };
        let batch = batch?;
        let t = taken(&batch);
        self.batch = Some(batch);
        Ok(Some(t))
    }

    fn copy(&mut self) -> Result<(), LoopError> {
        let batch = self.batch.as_ref().expect("copy after next");
        self.on_device = Some(to_device(batch, self.ctx, self.copy)?);
        Ok(())
    }

    fn compute(&mut self) -> Result<(), LoopError> {
        let (x, y) = self.on_device.as_ref().expect("compute after copy");
        let trainer = self.trainer.as_deref_mut().expect("compute with a model");
        trainer.step(x, y)?;
        Ok(())
    }

    fn synchronize(&mut self) -> Result<(), LoopError> {
        self.ctx.synchronize();
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use stallscope_bundle::analysis::stage_stat;
    use std::sync::atomic::AtomicBool;

    use stallscope_bundle::Phase;

    use super::*;
    use crate::data::tensor_data;
    use crate::feed::{InLoopConfig, InLoopLoader, Order};
    use stallscope_core::ModelSpec;

    fn setup() -> (Trainer, InLoopLoader<crate::feed::TensorDataset>, DeviceCtx) {
        let spec = ModelSpec::Linear {
            features: 64,
            classes: 4,
        };
        let ctx = DeviceCtx::cpu();
        let trainer = Trainer::new(spec, spec.default_optimizer(), ctx.device, 0).unwrap();
        let feed = InLoopLoader::new(
            tensor_data(512, 64, 4, 1),
            InLoopConfig {
                batch_size: 64,
                order: Order::Shuffled { seed: 42 },
                drop_last: false,
                pin_for: None,
            },
        )
        .unwrap();
        (trainer, feed, ctx)
    }

    #[test]
    fn both_modes_fill_their_part_and_only_it() {
        let (mut t, mut f, ctx) = setup();
        let stop = AtomicBool::new(false);
        warm_up(&mut t, &ctx, 64).unwrap();
        let slot = EpochSlot {
            mode: TimingMode::WholeRun,
            repeat: 0,
            epoch: 0,
        };
        let w = train_epoch(&mut t, &mut f, &ctx, CopyMode::default(), slot, &stop).unwrap();
        let wr = w.whole_run.as_ref().unwrap();
        assert!(w.diagnostic.is_none() && w.steps.is_none());
        assert_eq!(wr.samples, Some(512));
        assert_eq!(wr.steps, Some(8));
        assert_eq!(wr.samples_per_s, Some(512.0 / wr.seconds.unwrap()));
        assert_eq!(w.phase, Phase::Cold);

        let slot = EpochSlot {
            mode: TimingMode::Diagnostic,
            repeat: 0,
            epoch: 1,
        };
        let d = train_epoch(&mut t, &mut f, &ctx, CopyMode::default(), slot, &stop).unwrap();
        assert!(d.whole_run.is_none());
        assert_eq!(d.phase, Phase::Steady);
        let diag = d.diagnostic.unwrap();
        assert_eq!(d.steps.unwrap().compute_ns.len(), 8);
        assert_eq!(diag.step.as_ref().unwrap().count, Some(7));
        let sum = diag.next_wait.unwrap().mean_s.unwrap()
            + diag.transfer.unwrap().mean_s.unwrap()
            + diag.compute.unwrap().mean_s.unwrap();
        let step = diag.step.unwrap().mean_s.unwrap();
        assert!(
            (sum - step).abs() <= 1e-9 * step.max(1.0) + 1e-12,
            "{sum} vs {step}"
        );
    }

    #[test]
    fn a_stop_request_interrupts_the_epoch() {
        let (mut t, mut f, ctx) = setup();
        let stop = AtomicBool::new(true);
        let slot = EpochSlot {
            mode: TimingMode::WholeRun,
            repeat: 0,
            epoch: 0,
        };
        let e = train_epoch(&mut t, &mut f, &ctx, CopyMode::default(), slot, &stop).unwrap_err();
        assert!(matches!(e, LoopError::Interrupted));
    }

    #[test]
    fn stage_stat_quantiles() {
        let s = stage_stat(&[4.0, 1.0, 3.0, 2.0, 5.0]).unwrap();
        assert_eq!(s.median_s, Some(3.0));
        assert_eq!(s.mean_s, Some(3.0));
        assert_eq!(s.min_s, Some(1.0));
        assert_eq!(s.max_s, Some(5.0));
        assert!((s.p95_s.unwrap() - 4.8).abs() < 1e-12);
        assert!(stage_stat(&[]).is_none());
    }
}
