//! Worker tracks: what each worker did with each batch and sample, recorded
//! only when the runner asks (its diagnostic epochs) and bounded. Workers
//! stamp raw CLOCK_MONOTONIC nanoseconds, which threads and worker processes
//! share; the consumer subtracts its epoch's start and keeps the columns of
//! the bundle's `WorkerTracks`.

use serde::{Deserialize, Serialize};
use stallscope_bundle::{TrackStage, WorkerTracks};

use super::stats::{Stage, StageTimes};
use super::worker_kind::WorkerKind;

/// Batches an epoch lists at most; later ones are counted as left out.
pub const MAX_TRACKED_BATCHES: usize = 4096;
/// Sample rows an epoch lists at most; a batch that would pass it is listed
/// without its samples (they are counted as left out).
pub const MAX_TRACKED_SAMPLES: usize = 8192;

/// The per-sample stages a source times (in the order a sample passes them).
const SAMPLE_STAGES: [Stage; 3] = [Stage::Read, Stage::Decode, Stage::Transform];

/// Nanoseconds on CLOCK_MONOTONIC: one clock for every process of the host.
pub fn monotonic_ns() -> u64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: `ts` is a valid, writable timespec.
    unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut ts) };
    ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
}

/// How much of one task's work its worker records (sent with the task).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Tracing {
    /// Nothing (whole-run epochs, and batches past the cap).
    #[default]
    Off,
    /// The batch's start and end.
    Batch,
    /// The batch and each of its samples' stages.
    Samples,
}

impl Tracing {
    pub fn is_off(&self) -> bool {
        *self == Tracing::Off
    }
}

/// The samples of one batch as a worker loaded them, as columns (cheap to
/// send over a worker process's pipe): one entry per sample.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct SampleRows {
    pub index: Vec<u64>,
    /// Nanoseconds from the batch's start to the sample's.
    pub start: Vec<u64>,
    /// Read, decode and transform nanoseconds; a stage no sample took time
    /// in travels as an empty column (read back as zeros).
    #[serde(default, skip_serializing_if = "all_zero")]
    pub read: Vec<u64>,
    #[serde(default, skip_serializing_if = "all_zero")]
    pub decode: Vec<u64>,
    #[serde(default, skip_serializing_if = "all_zero")]
    pub transform: Vec<u64>,
    /// Positions (in these columns) of samples left out as bad.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub bad: Vec<u32>,
}

fn all_zero(v: &[u64]) -> bool {
    v.iter().all(|&n| n == 0)
}

impl SampleRows {
    pub fn len(&self) -> usize {
        self.index.len()
    }
    pub fn is_empty(&self) -> bool {
        self.index.is_empty()
    }
    /// Sample `i`'s read, decode and transform nanoseconds.
    fn stages(&self, i: usize) -> [u64; 3] {
        [&self.read, &self.decode, &self.transform].map(|c| c.get(i).copied().unwrap_or(0))
    }
}

/// One batch as a worker built it (CLOCK_MONOTONIC nanoseconds).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct BatchTrace {
    pub start_ns: u64,
    /// When the worker was done with it (a process: written to shared memory).
    pub end_ns: u64,
    /// Samples it loaded (bad ones included), and the first one.
    pub samples: u32,
    pub first_sample: u64,
    /// Its samples, when traced at [`Tracing::Samples`].
    #[serde(default, skip_serializing_if = "SampleRows::is_empty")]
    pub rows: SampleRows,
    /// The consumer's copy out of shared memory: start and nanoseconds.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub handover: Option<(u64, u64)>,
}

/// A worker's record of the batch it is building.
pub(crate) struct BatchClock {
    level: Tracing,
    trace: BatchTrace,
    /// The sample under way: its start and the stage totals before it.
    sample: Option<(u64, [u64; 3])>,
}

fn sample_nanos(times: &StageTimes) -> [u64; 3] {
    SAMPLE_STAGES.map(|s| times.get(s).nanos)
}

impl BatchClock {
    /// Start a batch's record (`None` when the task is not traced).
    pub(crate) fn start(level: Tracing, indices: &[u64]) -> Option<BatchClock> {
        (!level.is_off()).then(|| BatchClock {
            level,
            trace: BatchTrace {
                start_ns: monotonic_ns(),
                samples: indices.len() as u32,
                first_sample: indices.first().copied().unwrap_or(0),
                ..BatchTrace::default()
            },
            sample: None,
        })
    }

    pub(crate) fn sample_start(&mut self, times: &StageTimes) {
        if self.level == Tracing::Samples {
            self.sample = Some((monotonic_ns(), sample_nanos(times)));
        }
    }

    pub(crate) fn sample_end(&mut self, index: u64, times: &StageTimes, bad: bool) {
        let Some((start_ns, before)) = self.sample.take() else {
            return;
        };
        let after = sample_nanos(times);
        let rows = &mut self.trace.rows;
        if bad {
            rows.bad.push(rows.index.len() as u32);
        }
        rows.index.push(index);
        rows.start
            .push(start_ns.saturating_sub(self.trace.start_ns));
        let [read, decode, transform] = [0, 1, 2].map(|i| after[i].saturating_sub(before[i]));
        rows.read.push(read);
        rows.decode.push(decode);
        rows.transform.push(transform);
    }

    pub(crate) fn finish(mut self) -> Box<BatchTrace> {
        self.trace.end_ns = monotonic_ns();
        Box::new(self.trace)
    }
}

/// One epoch's worker tracks as the consumer gathers them.
pub(crate) struct TrackRecorder {
    epoch_start_ns: u64,
    tracks: WorkerTracks,
    stages: [Vec<u64>; 3],
    /// Batches and sample rows promised to workers so far (the cap).
    batches_asked: usize,
    samples_asked: usize,
}

impl TrackRecorder {
    pub(crate) fn new(epoch_start_ns: u64, kind: WorkerKind, workers: usize) -> Self {
        TrackRecorder {
            epoch_start_ns,
            tracks: WorkerTracks {
                kind: kind.as_str().to_string(),
                workers: workers as u32,
                ..WorkerTracks::default()
            },
            stages: Default::default(),
            batches_asked: 0,
            samples_asked: 0,
        }
    }

    /// How much of a task of `samples` samples to trace, within the caps.
    pub(crate) fn level_for(&mut self, samples: usize) -> Tracing {
        if self.batches_asked >= MAX_TRACKED_BATCHES {
            return Tracing::Off;
        }
        self.batches_asked += 1;
        if self.samples_asked + samples > MAX_TRACKED_SAMPLES {
            return Tracing::Batch;
        }
        self.samples_asked += samples;
        Tracing::Samples
    }

    fn rel(&self, ns: u64) -> u64 {
        ns.saturating_sub(self.epoch_start_ns)
    }

    /// A finished batch from `worker`, its collate time, and its trace if
    /// it has one.
    pub(crate) fn batch(
        &mut self,
        index: u64,
        worker: usize,
        collate_ns: u64,
        trace: Option<&BatchTrace>,
    ) {
        let Some(t) = trace else {
            self.tracks.batches_left_out += 1;
            return;
        };
        let b = &mut self.tracks.batches;
        b.batch.push(index);
        b.worker.push(worker as u32);
        b.start_ns
            .push(t.start_ns.saturating_sub(self.epoch_start_ns));
        b.build_ns.push(t.end_ns.saturating_sub(t.start_ns));
        b.collate_ns.push(collate_ns);
        b.samples.push(t.samples);
        b.first_sample.push(t.first_sample);
        b.sample_rows.push(t.rows.len() as u32);
        if let Some((start, ns)) = t.handover {
            b.handover_start_ns
                .push(start.saturating_sub(self.epoch_start_ns));
            b.handover_ns.push(ns);
        }
        self.tracks.samples_left_out += (t.samples as usize).saturating_sub(t.rows.len()) as u64;
        let s = &mut self.tracks.samples;
        let first = s.index.len() as u32;
        s.bad.extend(t.rows.bad.iter().map(|&b| first + b));
        s.index.extend_from_slice(&t.rows.index);
        let start = t.start_ns.saturating_sub(self.epoch_start_ns);
        s.start_ns.extend(t.rows.start.iter().map(|&d| start + d));
        for i in 0..t.rows.len() {
            for (col, ns) in self.stages.iter_mut().zip(t.rows.stages(i)) {
                col.push(ns);
            }
        }
    }

    /// The loop took batch `index` now.
    pub(crate) fn delivered(&mut self, index: u64) {
        let now = self.rel(monotonic_ns());
        self.tracks.steps.batch.push(index);
        self.tracks.steps.delivered_ns.push(now);
    }

    /// The bundle's columns; stages no sample took time in are left out.
    pub(crate) fn finish(mut self) -> WorkerTracks {
        let stages = SAMPLE_STAGES.iter().zip(std::mem::take(&mut self.stages));
        self.tracks.samples.stages = stages
            .filter(|(_, ns)| ns.iter().any(|&n| n > 0))
            .map(|(stage, ns)| TrackStage {
                name: stage.as_str().to_string(),
                ns,
            })
            .collect();
        self.tracks
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_caps_trace_batches_then_samples_then_nothing() {
        let mut r = TrackRecorder::new(0, WorkerKind::Threads, 2);
        assert_eq!(r.level_for(MAX_TRACKED_SAMPLES - 1), Tracing::Samples);
        assert_eq!(r.level_for(2), Tracing::Batch);
        assert_eq!(r.level_for(1), Tracing::Samples);
        for _ in 3..MAX_TRACKED_BATCHES {
            assert_eq!(r.level_for(1), Tracing::Batch);
        }
        assert_eq!(r.level_for(1), Tracing::Off);
    }

    #[test]
    fn times_are_made_relative_to_the_epoch_and_idle_stages_dropped() {
        let mut r = TrackRecorder::new(1_000, WorkerKind::Processes, 2);
        let t = BatchTrace {
            start_ns: 1_500,
            end_ns: 2_500,
            samples: 2,
            first_sample: 7,
            rows: SampleRows {
                index: vec![7, 3],
                start: vec![10, 200],
                read: vec![100, 90],
                decode: vec![],
                transform: vec![50, 40],
                bad: vec![1],
            },
            handover: Some((2_600, 30)),
        };
        r.batch(4, 1, 20, Some(&t));
        r.batch(5, 0, 0, None);
        let w = r.finish();
        assert_eq!(w.batches.start_ns, vec![500]);
        assert_eq!(w.batches.build_ns, vec![1_000]);
        assert_eq!(w.batches.handover_start_ns, vec![1_600]);
        assert_eq!(w.samples.start_ns, vec![510, 700]);
        assert_eq!(w.samples.bad, vec![1]);
        let names: Vec<&str> = w.samples.stages.iter().map(|s| s.name.as_str()).collect();
        assert_eq!(names, ["read", "transform"]);
        assert_eq!(w.batches_left_out, 1);
    }

    #[test]
    fn a_batch_trace_crosses_the_pipe_without_its_idle_stages() {
        let t = BatchTrace {
            start_ns: 5,
            end_ns: 9,
            samples: 2,
            first_sample: 4,
            rows: SampleRows {
                index: vec![4, 5],
                start: vec![0, 2],
                read: vec![1, 1],
                decode: vec![0, 0],
                transform: vec![0, 0],
                bad: vec![],
            },
            handover: None,
        };
        let line = serde_json::to_string(&t).unwrap();
        assert!(
            !line.contains("decode") && !line.contains("handover"),
            "{line}"
        );
        let back: BatchTrace = serde_json::from_str(&line).unwrap();
        assert_eq!(back.rows.stages(1), [1, 0, 0]);
        assert_eq!((back.rows.index, back.end_ns), (t.rows.index, 9));
    }
}
