//! Prefetch to the device on a side stream (`prefetch_to_device`, CUDA
//! only), as PyTorch's data-loading tutorial does: the next batch is copied
//! on a side stream while the current one computes; before a batch is used
//! the compute stream waits for its copy on the device (an event, not a host
//! sync), and its tensors are recorded on the compute stream so the caching
//! allocator does not reuse their memory while that stream still reads them.

use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Instant;

use stallscope_bundle::{Diagnostic, StepSeries, WholeRun};
use tch::{Device, Tensor};

use crate::device::DeviceCtx;
use crate::feed::{EpochIter, Feed, HostBatch};
use crate::models::Trainer;
use crate::shim::{SideStream, record_on_current_stream};
use crate::train::{CopyMode, LoopError, diagnostic_from_series, to_device};

fn side_stream(ctx: &DeviceCtx) -> Result<SideStream, LoopError> {
    let Device::Cuda(n) = ctx.device else {
        return Err(LoopError::Other(
            "prefetch_to_device copies on a CUDA side stream; this device is not CUDA".into(),
        ));
    };
    SideStream::new(n as u32).map_err(|e| LoopError::Other(e.to_string()))
}

fn shim(e: crate::shim::ShimError) -> LoopError {
    LoopError::Other(e.to_string())
}

/// Take the next batch and queue its copy on `side` (non-blocking).
fn fetch(
    it: &mut (dyn EpochIter + '_),
    side: &SideStream,
    ctx: &DeviceCtx,
) -> Result<Option<(HostBatch, Tensor, Tensor)>, LoopError> {
    let Some(batch) = it.next_batch() else {
        return Ok(None);
    };
    let batch = batch?;
    crate::ranks::slow_batch();
    let _on_side = side.enter().map_err(shim)?;
    let (x, y) = to_device(
        &batch,
        ctx,
        CopyMode {
            non_blocking: true,
            ..CopyMode::default()
        },
    )?;
    Ok(Some((batch, x, y)))
}

/// Before the compute stream uses a prefetched batch.
fn hand_over(side: &SideStream, x: &Tensor, y: &Tensor) -> Result<(), LoopError> {
    side.make_current_wait().map_err(shim)?;
    record_on_current_stream(x).map_err(shim)?;
    record_on_current_stream(y).map_err(shim)
}

/// A whole-run epoch with the next batch's copy overlapping this step.
pub fn whole_run_epoch(
    trainer: &mut Trainer,
    feed: &mut dyn Feed,
    ctx: &DeviceCtx,
    epoch: u32,
    stop: &AtomicBool,
) -> Result<WholeRun, LoopError> {
    let side = side_stream(ctx)?;
    let (mut samples, mut steps, mut bytes) = (0u64, 0u64, 0u64);
    ctx.synchronize();
    let started = Instant::now();
    {
        let mut it = feed.start_epoch(epoch)?;
        let mut next = fetch(&mut *it, &side, ctx)?;
        while let Some((batch, x, y)) = next.take() {
            hand_over(&side, &x, &y)?;
            next = fetch(&mut *it, &side, ctx)?;
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

/// A diagnostic epoch of the same loop: the copy on the side stream is
/// timed alone (synchronized), so the overlap shows in whole-run runs only.
pub fn diagnostic_epoch(
    trainer: &mut Trainer,
    feed: &mut dyn Feed,
    ctx: &DeviceCtx,
    epoch: u32,
    stop: &AtomicBool,
) -> Result<(Diagnostic, StepSeries), LoopError> {
    let side = side_stream(ctx)?;
    let mut series = StepSeries::default();
    let (mut samples, mut bytes) = (0u64, 0u64);
    ctx.synchronize();
    let started = Instant::now();
    let iterator_creation_s;
    {
        let mut it = feed.start_epoch(epoch)?;
        iterator_creation_s = started.elapsed().as_secs_f64();
        loop {
            let t0 = Instant::now();
            let Some(batch) = it.next_batch() else { break };
            let batch = batch?;
            crate::ranks::slow_batch();
            let t1 = Instant::now();
            let (x, y) = {
                let _on_side = side.enter().map_err(shim)?;
                to_device(
                    &batch,
                    ctx,
                    CopyMode {
                        non_blocking: true,
                        ..CopyMode::default()
                    },
                )?
            };
            side.synchronize().map_err(shim)?;
            hand_over(&side, &x, &y)?;
            let t2 = Instant::now();
            trainer.step(&x, &y)?;
            ctx.synchronize();
            let t3 = Instant::now();
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
    let d = diagnostic_from_series(&series, seconds, samples, bytes, Some(iterator_creation_s));
    Ok((d, series))
}
