//! The loader at the edge of libtorch: turns its host batches into CPU
//! tensors with no copy (the tensor owns the batch's pooled buffer and
//! hands it back when freed), pinned when the device is CUDA, and
//! implements the training loop's [`Feed`] contract.

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use stallscope_bundle::{LoaderStage, LoaderStats};
use tch::Device;

use crate::feed::{EpochIter, Feed, FeedError, HostBatch};
use crate::shim;
use stallscope_loader::{
    BufferPool, Loader, LoaderConfig, LoaderEpoch, LoaderError, Pooled, SourceSpec, StageTotal,
    WorkerKind, epoch_batches, full_batch_bytes,
};

/// Whether batches are pinned, and why not when they were asked to be.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Pinning {
    /// Not asked for.
    Off,
    /// Each batch is copied into page-locked memory for this CUDA device.
    On(Device),
    /// Asked for but not possible here; the reason is recorded in the bundle.
    Skipped(String),
}

impl Pinning {
    /// Decide from the request and the device the model runs on.
    pub fn for_device(pin: bool, device: Device) -> Pinning {
        match (pin, device) {
            (false, _) => Pinning::Off,
            (true, Device::Cuda(_)) => Pinning::On(device),
            (true, other) => Pinning::Skipped(format!(
                "pinned host memory needs a CUDA device; the model runs on {other:?}, so batches stay in pageable memory"
            )),
        }
    }
}

/// The native loader as a [`Feed`].
pub struct NativeFeed {
    loader: Loader,
    pinning: Pinning,
    name: String,
    samples_per_epoch: u64,
    batches_per_epoch: u64,
    edge: EdgeTotals,
    error_slot: Option<ErrorSlot>,
}

/// Where a feed leaves its last loader error (worker and sample intact).
pub type ErrorSlot = Arc<Mutex<Option<LoaderError>>>;

#[derive(Default, Clone, Copy)]
struct EdgeTotals {
    to_tensor: StageTotal,
    pin: StageTotal,
}

impl NativeFeed {
    pub fn new(
        config: LoaderConfig,
        spec: SourceSpec,
        pinning: Pinning,
    ) -> Result<Self, LoaderError> {
        let name = if config.workers == 0 {
            "in_loop".to_string()
        } else {
            config.kind.as_str().to_string()
        };
        let loader = Loader::new(config, spec)?;
        let cfg = loader.config();
        let plan = epoch_batches(
            cfg.sampler,
            loader.samples(),
            cfg.batch_size,
            cfg.drop_last,
            0,
        );
        Ok(NativeFeed {
            samples_per_epoch: plan.iter().map(|b| b.len() as u64).sum(),
            batches_per_epoch: plan.len() as u64,
            loader,
            pinning,
            name,
            edge: EdgeTotals::default(),
            error_slot: None,
        })
    }

    /// Keep the last loader error here as well as returning it as a
    /// [`FeedError`] (which carries only text).
    pub fn with_error_slot(mut self, slot: ErrorSlot) -> Self {
        self.error_slot = Some(slot);
        self
    }

    pub fn loader(&self) -> &Loader {
        &self.loader
    }
    pub fn pinning(&self) -> &Pinning {
        &self.pinning
    }
    pub fn kind(&self) -> WorkerKind {
        self.loader.config().kind
    }
}

/// The training loop's error for a loader failure (worker, sample, message).
pub fn feed_error(err: LoaderError) -> FeedError {
    match err {
        LoaderError::Worker {
            worker,
            sample,
            message,
        } => FeedError::Worker {
            worker,
            message: match sample {
                Some(s) => format!("on sample {s}: {message}"),
                None => message,
            },
        },
        LoaderError::Spawn { worker, message } => FeedError::Worker {
            worker,
            message: format!("could not start: {message}"),
        },
        other => FeedError::Other(other.to_string()),
    }
}

fn add(total: &mut StageTotal, took: Duration) {
    total.tasks += 1;
    total.nanos += took.as_nanos() as u64;
}

fn stage(name: &str, t: StageTotal) -> Option<LoaderStage> {
    (t.tasks > 0).then(|| LoaderStage {
        name: name.to_string(),
        tasks: t.tasks,
        failures: t.failures,
        mean_task_s: t.nanos as f64 / 1e9 / t.tasks as f64,
    })
}

impl Feed for NativeFeed {
    fn name(&self) -> &str {
        &self.name
    }
    fn samples_per_epoch(&self) -> u64 {
        self.samples_per_epoch
    }
    fn batches_per_epoch(&self) -> u64 {
        self.batches_per_epoch
    }
    fn batch_bytes(&self) -> u64 {
        full_batch_bytes(&self.loader.sample_dims(), self.loader.config().batch_size)
    }
    fn start_epoch(&mut self, epoch: u32) -> Result<Box<dyn EpochIter + '_>, FeedError> {
        self.edge = EdgeTotals::default();
        let inner = match self.loader.start_epoch(epoch) {
            Ok(inner) => inner,
            Err(e) => {
                keep(&self.error_slot, &e);
                return Err(feed_error(e));
            }
        };
        Ok(Box::new(NativeEpoch {
            buffers: Arc::clone(self.loader.buffers()),
            inner,
            pin_for: match &self.pinning {
                Pinning::On(d) => Some(*d),
                _ => None,
            },
            edge: &mut self.edge,
            error_slot: self.error_slot.clone(),
        }))
    }
    fn workers(&self) -> Option<stallscope_loader::WorkerRegistry> {
        Some(self.loader.worker_registry())
    }
    fn set_tracing(&mut self, on: bool) {
        self.loader.set_tracing(on);
    }
    fn worker_tracks(&mut self) -> Option<stallscope_bundle::WorkerTracks> {
        self.loader.take_worker_tracks()
    }
    fn loader_stats(&mut self) -> Option<LoaderStats> {
        let mut stats = self.loader.last_stats()?;
        stats.stages.extend(stage("to_tensor", self.edge.to_tensor));
        stats.stages.extend(stage("pin", self.edge.pin));
        Some(stats)
    }
}

struct NativeEpoch<'a> {
    inner: LoaderEpoch,
    buffers: Arc<BufferPool>,
    pin_for: Option<Device>,
    edge: &'a mut EdgeTotals,
    error_slot: Option<ErrorSlot>,
}

fn keep(slot: &Option<ErrorSlot>, err: &LoaderError) {
    if let Some(slot) = slot {
        *slot.lock().expect("error slot") = Some(err.clone());
    }
}

impl EpochIter for NativeEpoch<'_> {
    fn next_batch(&mut self) -> Option<Result<HostBatch, FeedError>> {
        let batch = match self.inner.next_batch()? {
            Ok(b) => b,
            Err(e) => {
                keep(&self.error_slot, &e);
                return Some(Err(feed_error(e)));
            }
        };
        let start = Instant::now();
        let shape: Vec<i64> = batch.input_shape().iter().map(|&d| d as i64).collect();
        let owner = Box::new(Pooled::new(batch.inputs, Arc::clone(&self.buffers)));
        let n = batch.labels.len() as i64;
        let tensors = shim::tensor_from_owned(owner, &shape).and_then(|inputs| {
            Ok((
                inputs,
                shim::tensor_from_owned(Box::new(batch.labels), &[n])?,
            ))
        });
        let (inputs, labels) = match tensors {
            Ok(t) => t,
            Err(e) => return Some(Err(FeedError::Other(e.to_string()))),
        };
        add(&mut self.edge.to_tensor, start.elapsed());
        let host = HostBatch {
            inputs,
            labels,
            sample_ids: batch.sample_ids,
        };
        Some(match self.pin_for {
            Some(device) => {
                let start = Instant::now();
                let pinned = crate::feed::pin(host, device);
                add(&mut self.edge.pin, start.elapsed());
                pinned
            }
            None => Ok(host),
        })
    }
}
