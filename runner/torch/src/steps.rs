//! The training loop in the two timing modes of methodology.md, each epoch
//! filling one bundle [`Run`]:
//! - whole-run: synchronize once before and once after the epoch; nothing in
//!   the loop reads a device value back;
//! - diagnostic: synchronize at every stage boundary (next-wait, transfer,
//!   compute) of every step, and time iterator creation and the first wait.

use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Instant;

use stallscope_bundle::{Diagnostic, Phase, Run, StepSeries, TimingMode, WholeRun};
use tch::{Kind, Tensor};

use crate::device::DeviceCtx;
use crate::feed::{EpochIter, Feed, FeedError, HostBatch, labels_i64};
use crate::models::Trainer;

/// Why an epoch stopped.
#[derive(Debug, thiserror::Error)]
pub enum LoopError {
    #[error("feed: {0}")]
    Feed(#[from] FeedError),
    #[error("libtorch: {0}")]
    Torch(#[from] tch::TchError),
    #[error("interrupted (Ctrl-C)")]
    Interrupted,
    #[error("{0}")]
    Other(String),
    /// The ranks' per-step barrier failed (`crate::ranks`): a
    /// `Failure::CommTimeout` naming the missing ranks.
    #[error("comm: {0:?}")]
    Comm(Box<stallscope_bundle::Failure>),
}

/// How the loop copies a batch to the device.
#[derive(Debug, Clone, Copy, Default)]
pub struct CopyMode {
    /// `non_blocking=True` (only overlaps with compute from pinned memory).
    pub non_blocking: bool,
    /// Copy the next batch on a side stream while this one computes
    /// (`prefetch_to_device`, CUDA only; `crate::prefetch`).
    pub prefetch_to_device: bool,
}

/// Where one epoch sits in the sweep.
#[derive(Debug, Clone)]
pub struct EpochSlot {
    pub mode: TimingMode,
    pub repeat: u32,
    pub epoch: u32,
}

impl EpochSlot {
    pub fn phase(&self) -> Phase {
        if self.epoch == 0 {
            Phase::Cold
        } else {
            Phase::Steady
        }
    }
    pub fn run_id(&self) -> String {
        format!("{}-r{}-e{}", self.mode.as_str(), self.repeat, self.epoch)
    }
}

/// Copy a host batch to the device (the `transfer` stage).
pub fn to_device(
    batch: &HostBatch,
    ctx: &DeviceCtx,
    copy: CopyMode,
) -> Result<(Tensor, Tensor), LoopError> {
    let x = batch
        .inputs
        .f_to_device_(ctx.device, Kind::Float, copy.non_blocking, false)?;
    let y = labels_i64(&batch.labels)?.f_to_device_(
        ctx.device,
        Kind::Int64,
        copy.non_blocking,
        false,
    )?;
    Ok((x, y))
}

/// One warm-up step on a synthetic batch of the measured shape (seeds/003),
/// outside any timed region, so kernel selection and allocation are not
/// measured.
pub fn warm_up(trainer: &mut Trainer, ctx: &DeviceCtx, batch_size: i64) -> Result<(), LoopError> {
    let (x, y) = crate::models::synthetic_batch(trainer.spec, batch_size, ctx.device);
    trainer.step(&x, &y)?;
    ctx.synchronize();
    Ok(())
}

/// Run one epoch in `slot.mode` and return its [`Run`] (memory counters
/// included; the caller resets the peaks before).
pub fn run_epoch(
    trainer: &mut Trainer,
    feed: &mut dyn Feed,
    ctx: &DeviceCtx,
    copy: CopyMode,
    slot: EpochSlot,
    stop: &AtomicBool,
) -> Result<Run, LoopError> {
    let mut run = Run::new(
        slot.run_id(),
        slot.mode.clone(),
        slot.repeat,
        slot.epoch,
        slot.phase(),
    );
    let ahead = copy.prefetch_to_device;
    // CPU cost of every epoch; a sampled timeline for whole-run epochs only
    // (a diagnostic epoch's per-step syncs distort utilisation anyway).
    let watch = crate::cost::EpochWatch::start(
        &*feed,
        crate::cost::GpuTarget::of(ctx),
        slot.mode == TimingMode::WholeRun,
    );
    let mut counted = watch.count(feed);
    let feed: &mut dyn Feed = &mut counted;
    match slot.mode {
        TimingMode::WholeRun if ahead => {
            run.whole_run = Some(crate::prefetch::whole_run_epoch(
                trainer, feed, ctx, slot.epoch, stop,
            )?)
        }
        TimingMode::Diagnostic if ahead => {
            let (d, s) = crate::prefetch::diagnostic_epoch(trainer, feed, ctx, slot.epoch, stop)?;
            run.diagnostic = Some(d);
            run.steps = Some(s);
        }
        TimingMode::WholeRun => {
            run.whole_run = Some(whole_run_epoch(trainer, feed, ctx, copy, slot.epoch, stop)?)
        }
        TimingMode::Diagnostic => {
            let (d, s) = diagnostic_epoch(trainer, feed, ctx, copy, slot.epoch, stop)?;
            run.diagnostic = Some(d);
            run.steps = Some(s);
        }
        TimingMode::Unknown(_) => unreachable!("the runner times whole_run and diagnostic only"),
    }
    run.loader = feed.loader_stats();
    run.memory = Some(ctx.memory());
    watch.finish(&mut run);
    Ok(run)
}

fn whole_run_epoch(
    trainer: &mut Trainer,
    feed: &mut dyn Feed,
    ctx: &DeviceCtx,
    copy: CopyMode,
    epoch: u32,
    stop: &AtomicBool,
) -> Result<WholeRun, LoopError> {
    let (mut samples, mut steps, mut bytes) = (0u64, 0u64, 0u64);
    ctx.synchronize();
    let started = Instant::now();
    {
        let mut it = feed.start_epoch(epoch)?;
        while let Some(batch) = it.next_batch() {
            let batch = batch?;
            crate::ranks::slow_batch();
            let (x, y) = to_device(&batch, ctx, copy)?;
            trainer.step(&x, &y)?;
            crate::ranks::step_barrier(steps, epoch)?;
            samples += batch.len() as u64;
            bytes += batch.bytes();
            steps += 1;
            if stop.load(Ordering::Relaxed) {
                return Err(LoopError::Interrupted);
            }
        }
    }
    ctx.synchronize();
    let seconds = started.elapsed().as_secs_f64();
    Ok(WholeRun::measured(seconds, samples, steps, bytes))
}

fn diagnostic_epoch(
    trainer: &mut Trainer,
    feed: &mut dyn Feed,
    ctx: &DeviceCtx,
    copy: CopyMode,
    epoch: u32,
    stop: &AtomicBool,
) -> Result<(Diagnostic, StepSeries), LoopError> {
    let mut series = StepSeries::default();
    let (mut samples, mut bytes) = (0u64, 0u64);
    ctx.synchronize();
    let started = Instant::now();
    let iterator_creation_s;
    {
        let mut it: Box<dyn EpochIter + '_> = feed.start_epoch(epoch)?;
        iterator_creation_s = started.elapsed().as_secs_f64();
        loop {
            let t0 = Instant::now();
            let Some(batch) = it.next_batch() else { break };
            let batch = batch?;
            crate::ranks::slow_batch();
            ctx.synchronize();
            let t1 = Instant::now();
            let (x, y) = to_device(&batch, ctx, copy)?;
            ctx.synchronize();
            let t2 = Instant::now();
            trainer.step(&x, &y)?;
            ctx.synchronize();
            let t3 = Instant::now();
            // The ranks' barrier after compute: its own `comm` stage.
            let step = series.compute_ns.len() as u64;
            if let Some(ns) = crate::ranks::timed_step_barrier(step, epoch)? {
                series.comm_ns.push(ns);
            }
            series.next_wait_ns.push((t1 - t0).as_nanos() as u64);
            series.transfer_ns.push((t2 - t1).as_nanos() as u64);
            series.compute_ns.push((t3 - t2).as_nanos() as u64);
            samples += batch.len() as u64;
            bytes += batch.bytes();
            if stop.load(Ordering::Relaxed) {
                return Err(LoopError::Interrupted);
            }
        }
    }
    let seconds = started.elapsed().as_secs_f64();
    let diagnostic =
        diagnostic_from_series(&series, seconds, samples, bytes, Some(iterator_creation_s));
    Ok((diagnostic, series))
}

/// One epoch of `model = "none"`: the loop only takes each batch from the
/// feed (seeds/002's first check): no copy, no step. Diagnostic runs time
/// the wait per step; their transfer and compute are 0.
pub fn loader_only_epoch(
    feed: &mut dyn Feed,
    slot: EpochSlot,
    stop: &AtomicBool,
) -> Result<Run, LoopError> {
    let mut run = Run::new(
        slot.run_id(),
        slot.mode.clone(),
        slot.repeat,
        slot.epoch,
        slot.phase(),
    );
    let watch = crate::cost::EpochWatch::start(
        &*feed,
        crate::cost::GpuTarget::None("the loop runs no model (model = \"none\")".into()),
        slot.mode == TimingMode::WholeRun,
    );
    let mut counted = watch.count(feed);
    let feed: &mut dyn Feed = &mut counted;
    let mut series = StepSeries::default();
    let (mut samples, mut steps, mut bytes) = (0u64, 0u64, 0u64);
    let started = Instant::now();
    let iterator_creation_s;
    {
        let mut it = feed.start_epoch(slot.epoch)?;
        iterator_creation_s = started.elapsed().as_secs_f64();
        // Whole-run epochs read no clock inside the loop.
        let diagnostic = slot.mode == TimingMode::Diagnostic;
        loop {
            let t0 = diagnostic.then(Instant::now);
            let Some(batch) = it.next_batch() else { break };
            let batch = batch?;
            crate::ranks::slow_batch();
            if let Some(t0) = t0 {
                series.next_wait_ns.push(t0.elapsed().as_nanos() as u64);
                series.transfer_ns.push(0);
                series.compute_ns.push(0);
                if let Some(ns) = crate::ranks::timed_step_barrier(steps, slot.epoch)? {
                    series.comm_ns.push(ns);
                }
            } else {
                crate::ranks::step_barrier(steps, slot.epoch)?;
            }
            samples += batch.len() as u64;
            bytes += batch.bytes();
            steps += 1;
            if stop.load(Ordering::Relaxed) {
                return Err(LoopError::Interrupted);
            }
        }
    }
    let seconds = started.elapsed().as_secs_f64();
    match slot.mode {
        TimingMode::WholeRun => {
            run.whole_run = Some(WholeRun::measured(seconds, samples, steps, bytes))
        }
        _ => {
            run.diagnostic = Some(diagnostic_from_series(
                &series,
                seconds,
                samples,
                bytes,
                Some(iterator_creation_s),
            ));
            run.steps = Some(series);
        }
    }
    run.loader = feed.loader_stats();
    watch.finish(&mut run);
    Ok(run)
}

pub use stallscope_bundle::analysis::{diagnostic_from_series, stage_stat};

#[cfg(test)]
mod tests {
    use super::*;
    use crate::data::tensor_data;
    use crate::feed::{InLoopConfig, InLoopLoader, Order};
    use crate::models::ModelSpec;

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
        let w = run_epoch(&mut t, &mut f, &ctx, CopyMode::default(), slot, &stop).unwrap();
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
        let d = run_epoch(&mut t, &mut f, &ctx, CopyMode::default(), slot, &stop).unwrap();
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
        let e = run_epoch(&mut t, &mut f, &ctx, CopyMode::default(), slot, &stop).unwrap_err();
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
