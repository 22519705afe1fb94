//! The feed contract: how batches reach the training loop. Experiments take
//! any [`Feed`]; the in-loop loader here (workers = 0) and the multi-worker
//! loader in `crate::loader` both implement it.
//!
//! A feed hands out [`HostBatch`]es: collated CPU tensors (possibly pinned).
//! Copying them to the device is the training loop's job (the `transfer`
//! stage), never the feed's, so the loop can time it apart.

use std::time::Instant;

use stallscope_bundle::{LoaderQueue, LoaderStage, LoaderStats};
use tch::{Device, Kind, Tensor};

/// One collated batch in host memory.
pub struct HostBatch {
    /// `batch × …` inputs (float32), on the CPU, possibly pinned.
    pub inputs: Tensor,
    /// `batch` class indices (int64), on the CPU, possibly pinned.
    pub labels: Tensor,
    /// Dataset indices of the samples, in batch order.
    pub sample_ids: Vec<u64>,
}

impl HostBatch {
    /// Number of samples in the batch.
    pub fn len(&self) -> usize {
        self.sample_ids.len()
    }

    /// Whether the batch holds no sample.
    pub fn is_empty(&self) -> bool {
        self.sample_ids.is_empty()
    }

    /// Bytes of the inputs and labels.
    pub fn bytes(&self) -> u64 {
        tensor_bytes(&self.inputs) + tensor_bytes(&self.labels)
    }
}

/// Bytes held by a tensor's elements.
pub fn tensor_bytes(t: &Tensor) -> u64 {
    (t.numel() * t.kind().elt_size_in_bytes()) as u64
}

/// Why a feed could not produce a batch.
#[derive(Debug, thiserror::Error)]
pub enum FeedError {
    /// One sample could not be read or decoded.
    #[error("sample {index}: {message}")]
    Sample { index: u64, message: String },
    /// A loader worker failed (panicked, exited, or reported an error).
    #[error("loader worker {worker}: {message}")]
    Worker { worker: String, message: String },
    /// libtorch refused an operation (collate, pin).
    #[error("libtorch: {0}")]
    Torch(#[from] tch::TchError),
    /// Anything else, with what was expected.
    #[error("{0}")]
    Other(String),
}

/// A source of batches for the training loop, epoch after epoch.
pub trait Feed: Send {
    /// Short name for tables and bundles (e.g. `in_loop`, `threads`).
    fn name(&self) -> &str;
    /// Samples in one epoch (after drop-last).
    fn samples_per_epoch(&self) -> u64;
    /// Batches in one epoch.
    fn batches_per_epoch(&self) -> u64;
    /// Bytes of one full collated batch (inputs and labels).
    fn batch_bytes(&self) -> u64;
    /// Begin an epoch; the returned iterator yields its batches in order.
    /// Creating it is timed as `iterator_creation_s`.
    fn start_epoch(&mut self, epoch: u32) -> Result<Box<dyn EpochIter + '_>, FeedError>;
    /// What the loader measured about itself during the last epoch, if
    /// anything.
    fn loader_stats(&mut self) -> Option<LoaderStats>;
    /// The loader's workers as the OS knows them (TIDs, PIDs), live while an
    /// epoch runs, for CPU and memory accounting; `None` when the feed has
    /// no workers of its own.
    fn workers(&self) -> Option<stallscope_loader::WorkerRegistry> {
        None
    }
    /// Record worker tracks in the epochs started from now on (the loop's
    /// diagnostic epochs); nothing to do for a feed without workers.
    fn set_tracing(&mut self, _on: bool) {}
    /// The worker tracks of the last epoch, if the feed recorded them.
    fn worker_tracks(&mut self) -> Option<stallscope_bundle::WorkerTracks> {
        None
    }
}

/// The batches of one epoch.
pub trait EpochIter {
    /// The next batch, `None` at the end of the epoch.
    fn next_batch(&mut self) -> Option<Result<HostBatch, FeedError>>;
}

/// A dataset whose samples can be gathered into a batch by index.
pub trait Dataset: Send + Sync {
    /// Number of samples.
    fn len(&self) -> usize;
    /// Whether the dataset is empty.
    fn is_empty(&self) -> bool {
        self.len() == 0
    }
    /// Shape of one input sample (without the batch dimension).
    fn sample_shape(&self) -> Vec<i64>;
    /// Gather the samples `indices` into one CPU batch.
    fn collate(&self, indices: &[u64]) -> Result<HostBatch, FeedError>;
}

impl<D: Dataset + ?Sized> Dataset for std::sync::Arc<D> {
    fn len(&self) -> usize {
        (**self).len()
    }
    fn sample_shape(&self) -> Vec<i64> {
        (**self).sample_shape()
    }
    fn collate(&self, indices: &[u64]) -> Result<HostBatch, FeedError> {
        (**self).collate(indices)
    }
}

/// A dataset held in host memory as plain values: inputs `N × shape`
/// (float32, row-major) and labels `N` (class indices).
pub struct TensorDataset {
    pub inputs: Vec<f32>,
    pub labels: Vec<i64>,
    /// Shape of one sample.
    pub shape: Vec<i64>,
}

impl Dataset for TensorDataset {
    fn len(&self) -> usize {
        self.labels.len()
    }
    fn sample_shape(&self) -> Vec<i64> {
        self.shape.clone()
    }
    fn collate(&self, indices: &[u64]) -> Result<HostBatch, FeedError> {
        let per: usize = self.shape.iter().product::<i64>() as usize;
        let mut inputs = Vec::with_capacity(per * indices.len());
        let mut labels = Vec::with_capacity(indices.len());
        for &i in indices {
            let i = i as usize;
            let row = self
                .inputs
                .get(i * per..(i + 1) * per)
                .ok_or_else(|| FeedError::Sample {
                    index: i as u64,
                    message: format!("index out of range, expected < {}", self.len()),
                })?;
            inputs.extend_from_slice(row);
            labels.push(self.labels[i]);
        }
        let mut shape = vec![indices.len() as i64];
        shape.extend(&self.shape);
        owned_batch(inputs, &shape, labels, indices)
    }
}

/// A host batch whose tensors own `inputs` and `labels` (no zero fill, no
/// copy: the vectors are handed to libtorch).
pub fn owned_batch(
    inputs: Vec<f32>,
    shape: &[i64],
    labels: Vec<i64>,
    sample_ids: &[u64],
) -> Result<HostBatch, FeedError> {
    let n = labels.len() as i64;
    let own = |e: crate::shim::ShimError| FeedError::Other(e.to_string());
    Ok(HostBatch {
        inputs: crate::shim::tensor_from_owned(Box::new(inputs), shape).map_err(own)?,
        labels: crate::shim::tensor_from_owned(Box::new(labels), &[n]).map_err(own)?,
        sample_ids: sample_ids.to_vec(),
    })
}

/// Sample order within an epoch: the loader crate's one sampler, so the
/// in-loop loader, thread and process workers, libtorch and wgpu all visit
/// the samples in the same order for the same seed.
pub use stallscope_loader::{Sampler as Order, epoch_batches as epoch_indices};

/// Settings of the in-loop loader.
#[derive(Debug, Clone, Copy)]
pub struct InLoopConfig {
    pub batch_size: usize,
    pub order: Order,
    pub drop_last: bool,
    /// Pin each collated batch for this CUDA device (page-locked host memory).
    pub pin_for: Option<Device>,
}

/// The loader with no workers: the training loop's own thread samples,
/// gathers and (optionally) pins each batch when it asks for it.
pub struct InLoopLoader<D: Dataset> {
    dataset: D,
    config: InLoopConfig,
    batch_bytes: u64,
    last: Option<EpochCounters>,
}

#[derive(Default, Clone, Copy)]
struct EpochCounters {
    started: Option<Instant>,
    first_batch_s: Option<f64>,
    batches: u64,
    collate_s: f64,
    pin_s: f64,
}

impl<D: Dataset> InLoopLoader<D> {
    pub fn new(dataset: D, config: InLoopConfig) -> Result<Self, FeedError> {
        if dataset.is_empty() {
            return Err(FeedError::Other("the dataset has no samples".into()));
        }
        let n = config.batch_size.min(dataset.len());
        let probe = dataset.collate(&(0..n as u64).collect::<Vec<_>>())?;
        let per_sample = probe.bytes() as f64 / n as f64;
        let batch_bytes = (per_sample * config.batch_size as f64).round() as u64;
        Ok(InLoopLoader {
            dataset,
            config,
            batch_bytes,
            last: None,
        })
    }

    pub fn dataset(&self) -> &D {
        &self.dataset
    }
}

impl<D: Dataset> Feed for InLoopLoader<D> {
    fn name(&self) -> &str {
        "in_loop"
    }
    fn samples_per_epoch(&self) -> u64 {
        let n = self.dataset.len() as u64;
        let b = self.config.batch_size.max(1) as u64;
        if self.config.drop_last { n / b * b } else { n }
    }
    fn batches_per_epoch(&self) -> u64 {
        let n = self.dataset.len() as u64;
        let b = self.config.batch_size.max(1) as u64;
        if self.config.drop_last {
            n / b
        } else {
            n.div_ceil(b)
        }
    }
    fn batch_bytes(&self) -> u64 {
        self.batch_bytes
    }
    fn start_epoch(&mut self, epoch: u32) -> Result<Box<dyn EpochIter + '_>, FeedError> {
        let batches = epoch_indices(
            self.config.order,
            self.dataset.len(),
            self.config.batch_size,
            self.config.drop_last,
            epoch,
        );
        let counters = self.last.insert(EpochCounters {
            started: Some(Instant::now()),
            ..EpochCounters::default()
        });
        Ok(Box::new(InLoopIter {
            dataset: &self.dataset,
            pin_for: self.config.pin_for,
            batches: batches.into_iter(),
            counters,
        }))
    }
    fn loader_stats(&mut self) -> Option<LoaderStats> {
        let c = self.last?;
        let mut stages = vec![LoaderStage {
            name: "collate".into(),
            tasks: c.batches,
            failures: 0,
            mean_task_s: c.collate_s / c.batches.max(1) as f64,
        }];
        if self.config.pin_for.is_some() {
            stages.push(LoaderStage {
                name: "pin".into(),
                tasks: c.batches,
                failures: 0,
                mean_task_s: c.pin_s / c.batches.max(1) as f64,
            });
        }
        Some(LoaderStats {
            time_to_first_batch_s: c.first_batch_s,
            stages,
            queues: Vec::<LoaderQueue>::new(),
            bad_samples: Vec::new(),
        })
    }
}

struct InLoopIter<'a, D: Dataset> {
    dataset: &'a D,
    pin_for: Option<Device>,
    batches: std::vec::IntoIter<Vec<u64>>,
    counters: &'a mut EpochCounters,
}

impl<D: Dataset> EpochIter for InLoopIter<'_, D> {
    fn next_batch(&mut self) -> Option<Result<HostBatch, FeedError>> {
        let ids = self.batches.next()?;
        let t0 = Instant::now();
        let batch = match self.dataset.collate(&ids) {
            Ok(b) => b,
            Err(e) => return Some(Err(e)),
        };
        let t1 = Instant::now();
        self.counters.collate_s += (t1 - t0).as_secs_f64();
        let batch = match self.pin_for {
            Some(device) => match pin(batch, device) {
                Ok(b) => b,
                Err(e) => return Some(Err(e)),
            },
            None => batch,
        };
        self.counters.pin_s += t1.elapsed().as_secs_f64();
        self.counters.batches += 1;
        if self.counters.first_batch_s.is_none() {
            self.counters.first_batch_s = self.counters.started.map(|s| s.elapsed().as_secs_f64());
        }
        Some(Ok(batch))
    }
}

/// Copy a batch into page-locked host memory for `device` (a CUDA device).
pub fn pin(batch: HostBatch, device: Device) -> Result<HostBatch, FeedError> {
    Ok(HostBatch {
        inputs: batch.inputs.f_pin_memory(device)?,
        labels: batch.labels.f_pin_memory(device)?,
        sample_ids: batch.sample_ids,
    })
}

/// Labels as the loss wants them (int64).
pub fn labels_i64(labels: &Tensor) -> Result<Tensor, FeedError> {
    Ok(if labels.kind() == Kind::Int64 {
        labels.shallow_clone()
    } else {
        labels.f_to_kind(Kind::Int64)?
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn dataset(n: i64) -> TensorDataset {
        TensorDataset {
            inputs: (0..n * 2).map(|v| v as f32).collect(),
            labels: (0..n).collect(),
            shape: vec![2],
        }
    }

    #[test]
    fn shuffled_epochs_repeat_per_seed_and_cover_every_sample() {
        let o = Order::Shuffled { seed: 7 };
        let a = epoch_indices(o, 50, 8, false, 0);
        assert_eq!(a, epoch_indices(o, 50, 8, false, 0));
        assert_ne!(a, epoch_indices(o, 50, 8, false, 1));
        let mut all = a.concat();
        all.sort();
        assert_eq!(all, (0..50).collect::<Vec<_>>());
        assert_eq!(epoch_indices(o, 50, 8, true, 0).len(), 6);
    }

    #[test]
    fn in_loop_loader_collates_the_sampled_rows() {
        let config = InLoopConfig {
            batch_size: 4,
            order: Order::Shuffled { seed: 1 },
            drop_last: true,
            pin_for: None,
        };
        let mut feed = InLoopLoader::new(dataset(10), config).unwrap();
        assert_eq!(feed.batches_per_epoch(), 2);
        assert_eq!(feed.samples_per_epoch(), 8);
        assert_eq!(feed.batch_bytes(), 4 * (2 * 4 + 8));
        let mut it = feed.start_epoch(0).unwrap();
        let mut seen = 0;
        while let Some(b) = it.next_batch() {
            let b = b.unwrap();
            let labels = Vec::<i64>::try_from(&b.labels).unwrap();
            let ids: Vec<i64> = b.sample_ids.iter().map(|&i| i as i64).collect();
            assert_eq!(labels, ids);
            let first = Vec::<f32>::try_from(b.inputs.get(0)).unwrap();
            assert_eq!(first, vec![2.0 * ids[0] as f32, 2.0 * ids[0] as f32 + 1.0]);
            seen += 1;
        }
        drop(it);
        assert_eq!(seen, 2);
        let stats = feed.loader_stats().unwrap();
        assert_eq!(stats.stages[0].tasks, 2);
    }
}
