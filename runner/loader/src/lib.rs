//! The native data loader: a sampler, batches built by workers (none, threads
//! or processes), prefetch, persistent workers, in-order delivery, and
//! SPDL-style self-measurement. It works on typed host buffers ([`Batch`])
//! and knows no device: no libtorch, tch or wgpu. The back ends turn
//! batches into tensors or buffers at their edge.
//!
//! Its face is the root: what other crates use is re-exported here and
//! every module is private, except two namespaces whose names mean
//! something only under them:
//! - `idx`: FashionMNIST's IDX files (`idx::read_pair`, `idx::IMAGES_FILE`),
//!   which the libtorch back end reads as tensors and the peers by name;
//! - `pipeline`: the image pipeline's stages and the independent
//!   `pipeline::reference` it is compared with, stage by stage, in
//!   `tests/pipeline.rs`.

mod bare;
mod batch;
mod generate;
pub mod idx;
mod image_spec;
mod images;
mod jpeg;
mod os;
pub mod pipeline;
mod pool;
mod process;
mod rng;
mod sample;
mod sampler;
mod schedule;
mod shm;
mod source;
mod stats;
mod threads;
mod trace;
mod worker;
mod worker_kind;
mod worker_pool;

use std::path::PathBuf;

use serde::{Deserialize, Serialize};

pub use bare::{BarePass, bare_pass};
pub use batch::{Batch, OnBadSample, full_batch_bytes};
pub use generate::{GenerateError, ImageSetSpec, default_cache_root, ensure_image_set};
pub use image_spec::{IMAGENET_MEAN, IMAGENET_STD, ImageSpec, JpegDecoder};
pub use images::ImageDirSource;
pub use os::{WorkerOs, WorkerRegistry, WorkerUsage, current_tid, thread_usage};
pub use pool::{BufferPool, Pooled};
pub use process::{PARENT_ENV, beside_running_program, worker_program};
pub use rng::{Rng, tensor_data};
pub use sample::{SampleError, Source, SourceOpenError};
pub use sampler::{Sampler, Shard, epoch_batches, shard_batches};
pub use schedule::{Loader, LoaderEpoch};
pub use shm::SEGMENT_PREFIX;
pub use source::{Fault, SourceSpec, open_source};
pub use stats::{Stage, StageTimes, StageTotal};
pub use worker::worker_main;
pub use worker_kind::WorkerKind;

/// The loader's knobs (those of a PyTorch `DataLoader`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct LoaderConfig {
    pub batch_size: usize,
    pub drop_last: bool,
    pub sampler: Sampler,
    /// 0 = build batches in the consumer's own thread.
    pub workers: usize,
    pub kind: WorkerKind,
    /// Batches each worker may hold ahead of the consumer (≥ 1).
    pub prefetch: usize,
    /// Keep workers across epochs instead of starting them each epoch.
    pub persistent: bool,
    /// Deliver batches in sampler order (a reorder buffer) or as they finish.
    pub in_order: bool,
    pub on_bad_sample: OnBadSample,
    /// Base seed of the workers' generators (augmentation).
    pub seed: u64,
    /// A fault to inject (tests, demonstrations of the failure path).
    pub fault: Option<Fault>,
    /// The program started for process workers (default: [`worker_program`]).
    pub worker_program: Option<PathBuf>,
}

impl Default for LoaderConfig {
    fn default() -> Self {
        LoaderConfig {
            batch_size: 64,
            drop_last: false,
            sampler: Sampler::Sequential,
            workers: 0,
            kind: WorkerKind::Threads,
            prefetch: 2,
            persistent: false,
            in_order: true,
            on_bad_sample: OnBadSample::Skip,
            seed: 0,
            fault: None,
            worker_program: None,
        }
    }
}

/// Why the loader could not deliver.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum LoaderError {
    /// A worker failed; names the worker and the sample it was loading.
    #[error("{worker} failed{}: {message}", sample.map(|s| format!(" on sample {s}")).unwrap_or_default())]
    Worker {
        worker: String,
        sample: Option<u64>,
        message: String,
    },
    #[error("{0}")]
    Source(String),
    #[error("could not start {worker}: {message}")]
    Spawn { worker: String, message: String },
    #[error("loader settings: {0}")]
    Config(String),
}

impl LoaderError {
    /// The bundle's record of this failure.
    pub fn to_failure(&self) -> stallscope_bundle::Failure {
        match self {
            LoaderError::Worker {
                worker,
                sample,
                message,
            } => stallscope_bundle::Failure::WorkerError {
                worker: Some(worker.clone()),
                sample: *sample,
                message: message.clone(),
            },
            LoaderError::Spawn { worker, message } => stallscope_bundle::Failure::WorkerError {
                worker: Some(worker.clone()),
                sample: None,
                message: format!("could not start: {message}"),
            },
            other => stallscope_bundle::Failure::Error {
                message: other.to_string(),
            },
        }
    }
}
