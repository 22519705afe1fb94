//! Building one batch from a source inside a worker (load every sample,
//! apply the bad-sample policy, collate), and the batch as a typed buffer.

use std::panic::{AssertUnwindSafe, catch_unwind};
use std::time::Instant;

use serde::{Deserialize, Serialize};

use super::pool::BufferPool;
use super::rng::Rng;
use super::sample::{SampleError, Source};
use super::source::Fault;
use super::stats::{Stage, StageTimes};
use super::trace::{BatchClock, BatchTrace, Tracing};

/// What to do with a sample that cannot be read or decoded.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum OnBadSample {
    /// Leave it out of its batch; it is counted and reported with its path.
    #[default]
    Skip,
    /// Stop the epoch with an error naming the sample.
    Fail,
}

/// One unit of work for a worker: the samples of one batch.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Task {
    pub epoch: u32,
    /// Position of the batch in the epoch.
    pub batch: u64,
    pub indices: Vec<u64>,
    /// What the worker records of it (diagnostic epochs only).
    #[serde(default, skip_serializing_if = "Tracing::is_off")]
    pub trace: Tracing,
}

/// A collated batch in host memory, NCHW (or N×features) float32.
#[derive(Debug, Clone, PartialEq)]
pub struct Batch {
    pub epoch: u32,
    /// Position in the epoch.
    pub index: u64,
    /// Dimensions of one sample; the batch is `[sample_ids.len(), ..dims]`.
    pub sample_dims: Vec<usize>,
    pub sample_ids: Vec<u64>,
    pub labels: Vec<i64>,
    pub inputs: Vec<f32>,
    /// Which worker built it (`None` for the in-loop loader).
    pub worker: Option<usize>,
    pub times: StageTimes,
    /// Samples left out under [`OnBadSample::Skip`].
    pub bad: Vec<SampleError>,
    /// When it and its samples were built, if its task was traced.
    pub trace: Option<Box<BatchTrace>>,
}

impl Batch {
    /// Shape of the collated inputs.
    pub fn input_shape(&self) -> Vec<usize> {
        let mut shape = vec![self.sample_ids.len()];
        shape.extend_from_slice(&self.sample_dims);
        shape
    }
    /// Bytes of the batch contents (inputs and labels).
    pub fn bytes(&self) -> u64 {
        (self.inputs.len() * 4 + self.labels.len() * 8) as u64
    }
}

/// Bytes of one full collated batch (inputs float32 + labels int64): the
/// basis of the prefetch memory estimate.
pub fn full_batch_bytes(sample_dims: &[usize], batch_size: usize) -> u64 {
    let per_sample: usize = sample_dims.iter().product();
    (batch_size * (per_sample * 4 + 8)) as u64
}

/// Why a worker could not deliver a batch.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[error("{message}")]
pub struct BuildError {
    /// The sample being loaded when it failed.
    pub sample: Option<u64>,
    pub message: String,
}

/// Where a worker is: the place the runner reads when a process dies.
pub trait Progress {
    fn loading(&self, sample: Option<u64>);
}

impl Progress for () {
    fn loading(&self, _sample: Option<u64>) {}
}

/// Whether a panic fault may end the process (only in a worker process).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Host {
    Thread,
    Process,
}

/// Everything a worker needs to turn tasks into batches.
pub struct BatchBuilder<'a> {
    pub source: &'a dyn Source,
    pub on_bad: OnBadSample,
    pub fault: Option<Fault>,
    pub host: Host,
    pub worker: Option<usize>,
    /// Where the batch's input buffer comes from (reused memory).
    pub buffers: &'a BufferPool,
}

impl BatchBuilder<'_> {
    /// Load every sample of `task` and collate them.
    pub fn build(
        &self,
        task: &Task,
        rng: &mut Rng,
        progress: &dyn Progress,
    ) -> Result<Batch, BuildError> {
        let dims = self.source.sample_dims();
        let per_sample: usize = dims.iter().product();
        let mut times = StageTimes::default();
        // Each sample is loaded straight into its place in the batch: no
        // per-sample copy; a bad sample's place is taken by the next one.
        let mut inputs = self.buffers.take(per_sample * task.indices.len());
        let mut labels = Vec::with_capacity(task.indices.len());
        let mut sample_ids = Vec::with_capacity(task.indices.len());
        let mut bad = Vec::new();
        let mut collate = std::time::Duration::ZERO;
        let mut clock = BatchClock::start(task.trace, &task.indices);
        for &index in &task.indices {
            progress.loading(Some(index));
            if let Some(c) = &mut clock {
                c.sample_start(&times);
            }
            let at = sample_ids.len() * per_sample;
            let place = &mut inputs[at..at + per_sample];
            let loaded = catch_unwind(AssertUnwindSafe(|| {
                self.inject_fault(index);
                self.source.load(index, rng, place, &mut times)
            }));
            match loaded {
                Ok(Ok(label)) => {
                    let start = Instant::now();
                    labels.push(label);
                    sample_ids.push(index);
                    collate += start.elapsed();
                    if let Some(c) = &mut clock {
                        c.sample_end(index, &times, false);
                    }
                }
                Ok(Err(err)) => match self.on_bad {
                    OnBadSample::Skip => {
                        bad.push(err);
                        if let Some(c) = &mut clock {
                            c.sample_end(index, &times, true);
                        }
                    }
                    OnBadSample::Fail => {
                        progress.loading(None);
                        self.buffers.give(inputs);
                        return Err(BuildError {
                            sample: Some(index),
                            message: format!("bad sample (on_bad_sample = \"fail\"): {err}"),
                        });
                    }
                },
                Err(panic) => {
                    progress.loading(None);
                    self.buffers.give(inputs);
                    return Err(BuildError {
                        sample: Some(index),
                        message: format!("panicked: {}", panic_text(&*panic)),
                    });
                }
            }
        }
        inputs.truncate(sample_ids.len() * per_sample);
        progress.loading(None);
        times.add(Stage::Collate, collate);
        Ok(Batch {
            epoch: task.epoch,
            index: task.batch,
            sample_dims: dims,
            sample_ids,
            labels,
            inputs,
            worker: self.worker,
            times,
            bad,
            trace: clock.map(BatchClock::finish),
        })
    }

    fn inject_fault(&self, index: u64) {
        match self.fault {
            Some(Fault::PanicAt { sample }) if sample == index => {
                panic!("injected fault: panic while loading sample {index}")
            }
            Some(Fault::AbortAt { sample }) if sample == index => {
                if self.host == Host::Process {
                    eprintln!("stallscope loader worker: injected fault: abort at sample {index}");
                    std::process::abort();
                }
                panic!("injected fault: abort at sample {index} (a thread worker panics instead)")
            }
            _ => {}
        }
    }
}

/// The text of a panic payload.
pub fn panic_text(payload: &(dyn std::any::Any + Send)) -> String {
    if let Some(s) = payload.downcast_ref::<&str>() {
        (*s).to_string()
    } else if let Some(s) = payload.downcast_ref::<String>() {
        s.clone()
    } else {
        "a panic with a non-text payload".to_string()
    }
}
