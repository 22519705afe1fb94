//! Prefetch to the device on a side stream (`prefetch_to_device`, CUDA
//! only), as PyTorch's data-loading tutorial does: the next batch is copied
//! on a side stream while the current one computes; before a batch is used
//! the compute stream waits for its copy on the device (an event, not a host
//! sync), and its tensors are recorded on the compute stream so the caching
//! allocator does not reuse their memory while that stream still reads them.
//!
//! These are the parts of the libtorch step the one loop
//! (`stallscope_core::run_epoch`) times. In whole-run epochs the copy is
//! fused with taking the batch: the next batch is taken and its copy queued
//! before this one's step, so the copy overlaps compute. In diagnostic epochs
//! the copy is timed alone (the side stream synchronized), so the overlap
//! shows in whole-run runs only.

use tch::{Device, Tensor};

use crate::batch_copy::{CopyMode, taken, to_device};
use crate::device::DeviceCtx;
use crate::feed::{EpochIter, HostBatch};
use crate::models::Trainer;
use crate::shim::{SideStream, record_on_current_stream};
use stallscope_core::{EpochSteps, LoopError, Taken};

fn side_stream(ctx: &DeviceCtx) -> Result<SideStream, LoopError> {
    let Device::Cuda(n) = ctx.device else {
        return Err(LoopError::Failed(
            "prefetch_to_device copies on a CUDA side stream; this device is not CUDA".into(),
        ));
    };
    SideStream::new(n as u32).map_err(|e| LoopError::Failed(e.to_string()))
}

fn shim(e: crate::shim::ShimError) -> LoopError {
    LoopError::Failed(e.to_string())
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

/// A batch taken, with its copy queued on the side stream.
type Fetched = (HostBatch, Tensor, Tensor);

/// One epoch of the libtorch step with `prefetch_to_device`.
pub struct PrefetchEpoch<'a> {
    it: Box<dyn EpochIter + 'a>,
    trainer: &'a mut Trainer,
    ctx: &'a DeviceCtx,
    side: SideStream,
    /// Whole-run: take-and-copy the next batch before this one's step.
    fused: bool,
    /// The batch the step uses.
    current: Option<Fetched>,
    /// Whole-run: the next batch, its copy in flight.
    ahead: Option<Fetched>,
    started: bool,
    /// Diagnostic: the batch taken, not yet copied.
    taken: Option<HostBatch>,
}

impl<'a> PrefetchEpoch<'a> {
    pub fn new(
        it: Box<dyn EpochIter + 'a>,
        trainer: &'a mut Trainer,
        ctx: &'a DeviceCtx,
        fused: bool,
    ) -> Result<Self, LoopError> {
        Ok(PrefetchEpoch {
            it,
            trainer,
            ctx,
            side: side_stream(ctx)?,
            fused,
            current: None,
            ahead: None,
            started: false,
            taken: None,
        })
    }

    /// Whole-run: the batch fetched ahead becomes current, handed over to
    /// the compute stream, and the next one is fetched (its copy queued).
    fn next_fused(&mut self) -> Result<Option<Taken>, LoopError> {
        self.current = None;
        let next = if self.started {
            self.ahead.take()
        } else {
            self.started = true;
            fetch(&mut *self.it, &self.side, self.ctx)?
        };
        let Some((batch, x, y)) = next else {
            return Ok(None);
        };
        hand_over(&self.side, &x, &y)?;
        self.ahead = fetch(&mut *self.it, &self.side, self.ctx)?;
        let t = taken(&batch);
        self.current = Some((batch, x, y));
        Ok(Some(t))
    }
}

impl EpochSteps for PrefetchEpoch<'_> {
    fn next(&mut self) -> Result<Option<Taken>, LoopError> {
        if self.fused {
            return self.next_fused();
        }
        self.current = None;
        let Some(batch) = self.it.next_batch() else {
            return Ok(None);
        };
        let batch = batch?;
        let t = taken(&batch);
        self.taken = Some(batch);
        Ok(Some(t))
    }

    fn copy(&mut self) -> Result<(), LoopError> {
        if self.fused {
            return Ok(()); // queued on the side stream by `next`
        }
        let batch = self.taken.take().expect("copy after next");
        let (x, y) = {
            let _on_side = self.side.enter().map_err(shim)?;
            to_device(
                &batch,
                self.ctx,
                CopyMode {
                    non_blocking: true,
                    ..CopyMode::default()
                },
            )?
        };
        self.side.synchronize().map_err(shim)?;
        hand_over(&self.side, &x, &y)?;
        self.current = Some((batch, x, y));
        Ok(())
    }

    fn compute(&mut self) -> Result<(), LoopError> {
        let (_, x, y) = self.current.as_ref().expect("compute after copy");
        self.trainer.step(x, y)?;
        Ok(())
    }

    fn synchronize(&mut self) -> Result<(), LoopError> {
        self.ctx.synchronize();
        Ok(())
    }
}
