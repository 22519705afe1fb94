//! A host batch's way to the device, shared by both step paths (the plain
//! one in `steps`, the side-stream one in `prefetch`): how it is copied
//! ([`CopyMode`]), the copy itself and the batch's counts for the loop. A
//! leaf, so neither path depends on the other for it.

use stallscope_core::{LoopError, Taken};
use tch::{Kind, Tensor};

use crate::device::DeviceCtx;
use crate::feed::{HostBatch, labels_i64};

/// How the loop copies a batch to the device.
#[derive(Debug, Clone, Copy, Default)]
pub struct CopyMode {
    /// `non_blocking=True` (only overlaps with compute from pinned memory).
    pub non_blocking: bool,
    /// Copy the next batch on a side stream while this one computes
    /// (`prefetch_to_device`, CUDA only; `crate::prefetch`).
    pub prefetch_to_device: bool,
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

/// The sizes of a host batch, for the loop's counts.
pub fn taken(batch: &HostBatch) -> Taken {
    Taken {
        samples: batch.len() as u64,
        bytes: batch.bytes(),
    }
}
