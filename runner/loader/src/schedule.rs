//! The loader's consumer side: hands batches of sample indices to workers
//! round-robin within the prefetch limit, puts finished batches back in
//! sampler order (reorder buffer), measures the consumer's waits, and keeps
//! or stops the workers between epochs.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use stallscope_bundle::{BadSample, LoaderStats, WorkerTracks};

use super::batch::{Batch, BatchBuilder, Host, Task};
use super::os::{WorkerOs, WorkerRegistry};
use super::pool::BufferPool;
use super::process::ProcessPool;
use super::rng::{Rng, worker_seed};
use super::sample::Source;
use super::sampler::epoch_batches;
use super::source::{SourceSpec, open_source};
use super::stats::{EpochStats, Stage};
use super::threads::ThreadPool;
use super::trace::{TrackRecorder, monotonic_ns};
use super::worker_pool::{Event, Pool};
use super::{LoaderConfig, LoaderError, WorkerKind};

/// The loader: a source, its knobs and (when persistent) its workers.
pub struct Loader {
    config: LoaderConfig,
    spec: SourceSpec,
    source: Arc<dyn Source>,
    pool: Arc<Mutex<Option<Box<dyn Pool>>>>,
    last_stats: Arc<Mutex<Option<EpochStats>>>,
    buffers: Arc<BufferPool>,
    workers: WorkerRegistry,
    /// Record worker tracks in the epochs started from now on.
    tracing: bool,
    last_tracks: Arc<Mutex<Option<WorkerTracks>>>,
}

impl Loader {
    /// Open the source and check the knobs; workers start with the first epoch.
    pub fn new(config: LoaderConfig, spec: SourceSpec) -> Result<Self, LoaderError> {
        if config.batch_size == 0 {
            return Err(LoaderError::Config("batch_size must be at least 1".into()));
        }
        if config.workers > 0 && config.prefetch == 0 {
            return Err(LoaderError::Config(
                "prefetch must be at least 1 when workers > 0".into(),
            ));
        }
        let source: Arc<dyn Source> =
            Arc::from(open_source(&spec).map_err(|e| LoaderError::Source(e.to_string()))?);
        Ok(Loader {
            spec,
            source,
            pool: Arc::new(Mutex::new(None)),
            last_stats: Arc::new(Mutex::new(None)),
            // Every batch in flight (prefetch per worker, the one being
            // consumed, the one the training step still holds), plus slack.
            buffers: BufferPool::new(config.workers.max(1) * (config.prefetch + 1) + 3),
            config,
            workers: WorkerRegistry::default(),
            tracing: false,
            last_tracks: Arc::new(Mutex::new(None)),
        })
    }

    /// Record worker tracks (each batch's worker, samples and stages, and
    /// when the consumer took it) in the epochs started from now on: the
    /// runner's diagnostic epochs, never its whole-run ones. Bounded by
    /// `trace::MAX_TRACKED_BATCHES` and
    /// `trace::MAX_TRACKED_SAMPLES`; nothing
    /// is recorded with workers = 0.
    pub fn set_tracing(&mut self, on: bool) {
        self.tracing = on;
    }

    /// The worker tracks of the most recent epoch, if it recorded them
    /// (taken: asked again, `None`).
    pub fn take_worker_tracks(&self) -> Option<WorkerTracks> {
        self.last_tracks.lock().expect("tracks lock").take()
    }

    pub fn config(&self) -> &LoaderConfig {
        &self.config
    }
    pub fn samples(&self) -> usize {
        self.source.len()
    }
    pub fn sample_dims(&self) -> Vec<usize> {
        self.source.sample_dims()
    }
    /// The pool batch inputs come from; hand them back here when done
    /// (see [`Pooled`](crate::Pooled)).
    pub fn buffers(&self) -> &Arc<BufferPool> {
        &self.buffers
    }

    /// Start one epoch: (re)start workers when needed and return the
    /// iterator over its batches.
    pub fn start_epoch(&mut self, epoch: u32) -> Result<LoaderEpoch, LoaderError> {
        let started = Instant::now();
        let tracks = (self.tracing && self.config.workers > 0)
            .then(|| TrackRecorder::new(monotonic_ns(), self.config.kind, self.config.workers));
        *self.last_tracks.lock().expect("tracks lock") = None;
        let cfg = &self.config;
        let tasks: Vec<Task> = epoch_batches(
            cfg.sampler,
            self.source.len(),
            cfg.batch_size,
            cfg.drop_last,
            epoch,
        )
        .into_iter()
        .enumerate()
        .map(|(i, indices)| Task {
            epoch,
            batch: i as u64,
            indices,
            trace: Default::default(),
        })
        .collect();
        let pool = if cfg.workers == 0 {
            None
        } else {
            let kept = self.pool.lock().expect("pool lock").take();
            match kept {
                Some(pool) => Some(pool),
                None => Some(self.start_pool()?),
            }
        };
        Ok(LoaderEpoch {
            config: self.config.clone(),
            source: Arc::clone(&self.source),
            buffers: Arc::clone(&self.buffers),
            epoch,
            tasks,
            pool,
            home: Arc::clone(&self.pool),
            stats_home: Arc::clone(&self.last_stats),
            tracks,
            tracks_home: Arc::clone(&self.last_tracks),
            started,
            next_submit: 0,
            delivered: 0,
            next_index: 0,
            outstanding: vec![0; self.config.workers],
            reorder: BTreeMap::new(),
            stats: EpochStats::default(),
            inline_rng: Rng::new(worker_seed(self.config.seed, 0, epoch)),
            state: EpochState::Running,
            failure: None,
        })
    }

    fn start_pool(&self) -> Result<Box<dyn Pool>, LoaderError> {
        let generation = self.workers.new_pool();
        let os = (&self.workers, generation);
        Ok(match self.config.kind {
            WorkerKind::Threads => Box::new(ThreadPool::start(
                &self.config,
                &self.source,
                &self.buffers,
                os,
            )),
            WorkerKind::Processes => Box::new(ProcessPool::start(
                &self.config,
                &self.spec,
                &self.source.sample_dims(),
                &self.buffers,
                os,
            )?),
        })
    }

    /// The OS identity of each worker of the current (or most recent) pool,
    /// with what it used if it has ended. Empty with workers = 0.
    pub fn worker_ids(&self) -> Vec<WorkerOs> {
        self.workers.snapshot()
    }

    /// A handle on the same list that stays live while an epoch runs (a
    /// side thread can read it without borrowing the loader).
    pub fn worker_registry(&self) -> WorkerRegistry {
        self.workers.clone()
    }

    /// What the loader measured in the most recent epoch (finished, failed
    /// or dropped early).
    pub fn last_stats(&self) -> Option<LoaderStats> {
        self.last_stats
            .lock()
            .expect("stats lock")
            .as_ref()
            .map(EpochStats::to_bundle)
    }

    /// Stop persistent workers now (they also stop when the loader drops).
    pub fn shutdown(&mut self) {
        self.pool.lock().expect("pool lock").take();
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum EpochState {
    Running,
    Finished,
    Failed,
}

/// One epoch's batches, in sampler order unless `in_order` is off.
pub struct LoaderEpoch {
    config: LoaderConfig,
    source: Arc<dyn Source>,
    buffers: Arc<BufferPool>,
    epoch: u32,
    tasks: Vec<Task>,
    pool: Option<Box<dyn Pool>>,
    home: Arc<Mutex<Option<Box<dyn Pool>>>>,
    stats_home: Arc<Mutex<Option<EpochStats>>>,
    tracks: Option<TrackRecorder>,
    tracks_home: Arc<Mutex<Option<WorkerTracks>>>,
    started: Instant,
    next_submit: usize,
    delivered: usize,
    next_index: u64,
    outstanding: Vec<usize>,
    reorder: BTreeMap<u64, Batch>,
    stats: EpochStats,
    inline_rng: Rng,
    state: EpochState,
    /// A worker's failure on batch `.0`: raised when the consumer reaches
    /// that batch, so the batches before it (some from healthy workers,
    /// still arriving) are delivered first, as PyTorch re-raises a worker's
    /// exception at its batch.
    failure: Option<(u64, LoaderError)>,
}

impl LoaderEpoch {
    /// Number of batches the sampler planned for this epoch.
    pub fn planned_batches(&self) -> usize {
        self.tasks.len()
    }

    /// The next batch, `None` at the end of the epoch or after a failure.
    pub fn next_batch(&mut self) -> Option<Result<Batch, LoaderError>> {
        loop {
            if self.state != EpochState::Running {
                return None;
            }
            if self.delivered == self.tasks.len() {
                self.finish(EpochState::Finished);
                return None;
            }
            let got = if self.pool.is_some() {
                self.next_from_pool()
            } else {
                self.next_inline()
            };
            match got {
                Ok(batch) => {
                    self.delivered += 1;
                    if batch.sample_ids.is_empty() {
                        continue; // every sample of it was bad and skipped
                    }
                    if self.stats.time_to_first_batch.is_none() {
                        self.stats.time_to_first_batch = Some(self.started.elapsed());
                    }
                    if let Some(tracks) = &mut self.tracks {
                        tracks.delivered(batch.index);
                    }
                    return Some(Ok(batch));
                }
                Err(err) => {
                    self.finish(EpochState::Failed);
                    return Some(Err(err));
                }
            }
        }
    }

    /// Live statistics of this epoch so far.
    pub fn stats(&self) -> LoaderStats {
        self.stats.to_bundle()
    }

    fn next_inline(&mut self) -> Result<Batch, LoaderError> {
        let start = Instant::now();
        let builder = BatchBuilder {
            source: &*self.source,
            on_bad: self.config.on_bad_sample,
            fault: self.config.fault,
            host: Host::Thread,
            worker: None,
            buffers: &self.buffers,
        };
        let task = &self.tasks[self.delivered];
        let built = builder.build(task, &mut self.inline_rng, &());
        // The consumer does the work itself: it never finds a batch ready.
        self.stats.to_consumer.record(false, start.elapsed());
        match built {
            Ok(batch) => {
                self.absorb_stats(&batch);
                Ok(batch)
            }
            Err(e) => Err(LoaderError::Worker {
                worker: "in-loop loader (workers = 0)".into(),
                sample: e.sample,
                message: e.message,
            }),
        }
    }

    fn next_from_pool(&mut self) -> Result<Batch, LoaderError> {
        if self.failure.is_none() {
            self.fill()?;
        }
        while let Some(event) = self.pool.as_mut().and_then(|p| p.next_event(false)) {
            self.absorb(event)?;
        }
        let mut ready = self.take_ready();
        let was_ready = ready.is_some();
        let start = Instant::now();
        while ready.is_none() {
            if let Some(err) = self.failure_due() {
                return Err(err);
            }
            let event = self
                .pool
                .as_mut()
                .and_then(|p| p.next_event(true))
                .ok_or_else(|| LoaderError::Worker {
                    worker: "worker pool".into(),
                    sample: None,
                    message: "every worker is gone".into(),
                })?;
            self.absorb(event)?;
            ready = self.take_ready();
        }
        let waited = if was_ready {
            Duration::ZERO
        } else {
            start.elapsed()
        };
        self.stats.to_consumer.record(was_ready, waited);
        let batch = ready.expect("loop ends with a batch");
        if let Some(w) = batch.worker {
            self.outstanding[w] -= 1;
        }
        if self.failure.is_none() {
            self.fill()?;
        }
        Ok(batch)
    }

    /// The pending failure, once nothing before its batch is still owed.
    fn failure_due(&mut self) -> Option<LoaderError> {
        let (index, _) = self.failure.as_ref()?;
        if !self.config.in_order || *index <= self.next_index {
            return self.failure.take().map(|(_, e)| e);
        }
        None
    }

    /// The submitted, undelivered batch holding `sample`.
    fn batch_of(&self, sample: u64) -> Option<u64> {
        self.tasks[..self.next_submit]
            .iter()
            .find(|t| t.batch >= self.next_index && t.indices.contains(&sample))
            .map(|t| t.batch)
    }

    /// Submit tasks round-robin while each worker is under its prefetch.
    fn fill(&mut self) -> Result<(), LoaderError> {
        let workers = self.config.workers;
        while self.next_submit < self.tasks.len() {
            let w = self.next_submit % workers;
            if self.outstanding[w] >= self.config.prefetch {
                break;
            }
            let mut task = self.tasks[self.next_submit].clone();
            if let Some(tracks) = &mut self.tracks {
                task.trace = tracks.level_for(task.indices.len());
            }
            self.pool
                .as_mut()
                .expect("fill runs with a pool")
                .submit(w, task)?;
            self.outstanding[w] += 1;
            self.next_submit += 1;
        }
        Ok(())
    }

    fn absorb(&mut self, event: Event) -> Result<(), LoaderError> {
        match event {
            Event::Done(mut batch) => {
                self.absorb_stats(&batch);
                if let Some(tracks) = &mut self.tracks {
                    let collate = batch.times.get(Stage::Collate).nanos;
                    let trace = batch.trace.take();
                    tracks.batch(
                        batch.index,
                        batch.worker.unwrap_or(0),
                        collate,
                        trace.as_deref(),
                    );
                }
                self.reorder.insert(batch.index, *batch);
                Ok(())
            }
            Event::Failed {
                worker,
                sample,
                message,
            } => {
                let err = LoaderError::Worker {
                    worker,
                    sample,
                    message,
                };
                match (&self.failure, sample.and_then(|s| self.batch_of(s))) {
                    (None, Some(index)) => {
                        self.failure = Some((index, err));
                        Ok(())
                    }
                    (None, None) => Err(err),
                    // The same worker ending after its failure: nothing new.
                    (Some((_, LoaderError::Worker { worker: first, .. })), _) if matches!(&err, LoaderError::Worker { worker, .. } if worker == first) => {
                        Ok(())
                    }
                    // Another worker failed too: the first failure is the
                    // cause to report, now.
                    (Some(_), _) => Err(self.failure.take().map_or(err, |(_, first)| first)),
                }
            }
        }
    }

    fn absorb_stats(&mut self, batch: &Batch) {
        self.stats.stages.merge(&batch.times);
        self.stats
            .bad_samples
            .extend(batch.bad.iter().map(|b| BadSample {
                index: Some(b.index),
                path: b.path.clone(),
                message: b.message.clone(),
            }));
    }

    fn take_ready(&mut self) -> Option<Batch> {
        if self.config.in_order {
            let batch = self.reorder.remove(&self.next_index)?;
            self.next_index += 1;
            Some(batch)
        } else {
            self.reorder.pop_first().map(|(_, b)| b)
        }
    }

    fn finish(&mut self, state: EpochState) {
        self.state = state;
        let pool = self.pool.take();
        // Keep workers only when persistent and the epoch ended cleanly, so
        // no stale batch of this epoch can surface in the next one.
        if state == EpochState::Finished && self.config.persistent {
            *self.home.lock().expect("pool lock") = pool;
        } else {
            drop(pool);
        }
        *self.stats_home.lock().expect("stats lock") = Some(self.stats.clone());
        *self.tracks_home.lock().expect("tracks lock") = self.tracks.take().map(|t| t.finish());
    }

    pub fn epoch(&self) -> u32 {
        self.epoch
    }
}

impl Iterator for LoaderEpoch {
    type Item = Result<Batch, LoaderError>;
    fn next(&mut self) -> Option<Self::Item> {
        self.next_batch()
    }
}

impl Drop for LoaderEpoch {
    fn drop(&mut self) {
        if self.state == EpochState::Running {
            // Dropped early: stop the workers (their in-flight batches belong
            // to this epoch) and keep what was measured.
            self.finish(EpochState::Failed);
        }
    }
}
