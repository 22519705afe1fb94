//! The loader's self-measurement, as SPDL reports it: per stage the task
//! count, failures and average task time; per queue the consumer's get-wait
//! and data readiness; the time to the first batch. Converted to the bundle's
//! `LoaderStats` at the edge.

use std::time::Duration;

use serde::{Deserialize, Serialize};
use stallscope_bundle::{BadSample, LoaderQueue, LoaderStage, LoaderStats};

/// The stages a sample or batch passes through in the loader.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Stage {
    Read,
    Decode,
    Transform,
    Collate,
    /// Copying a finished batch out of a worker process's shared memory
    /// (what the process kind pays to hand a batch over).
    Handover,
    Pin,
}

impl Stage {
    pub const ALL: [Stage; 6] = [
        Stage::Read,
        Stage::Decode,
        Stage::Transform,
        Stage::Collate,
        Stage::Handover,
        Stage::Pin,
    ];
    pub fn as_str(self) -> &'static str {
        match self {
            Stage::Read => "read",
            Stage::Decode => "decode",
            Stage::Transform => "transform",
            Stage::Collate => "collate",
            Stage::Handover => "handover",
            Stage::Pin => "pin",
        }
    }
    fn slot(self) -> usize {
        self as usize
    }
}

/// Totals of one stage.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct StageTotal {
    pub tasks: u64,
    pub failures: u64,
    pub nanos: u64,
}

/// Stage totals gathered while building one or more batches (crosses the
/// process boundary with each batch).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct StageTimes {
    totals: [StageTotal; 6],
}

impl StageTimes {
    pub fn add(&mut self, stage: Stage, took: Duration) {
        let t = &mut self.totals[stage.slot()];
        t.tasks += 1;
        t.nanos += took.as_nanos() as u64;
    }
    /// More time for a task already counted (a stage done in two parts).
    pub fn extend(&mut self, stage: Stage, took: Duration) {
        self.totals[stage.slot()].nanos += took.as_nanos() as u64;
    }
    pub fn fail(&mut self, stage: Stage, took: Duration) {
        let t = &mut self.totals[stage.slot()];
        t.failures += 1;
        t.nanos += took.as_nanos() as u64;
    }
    pub fn get(&self, stage: Stage) -> StageTotal {
        self.totals[stage.slot()]
    }
    pub fn merge(&mut self, other: &StageTimes) {
        for (a, b) in self.totals.iter_mut().zip(other.totals.iter()) {
            a.tasks += b.tasks;
            a.failures += b.failures;
            a.nanos += b.nanos;
        }
    }
}

/// What the consumer saw at one queue.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct QueueTotals {
    pub gets: u64,
    pub ready_gets: u64,
    pub wait: Duration,
}

impl QueueTotals {
    pub fn record(&mut self, was_ready: bool, waited: Duration) {
        self.gets += 1;
        if was_ready {
            self.ready_gets += 1;
        }
        self.wait += waited;
    }
}

/// Everything the loader measured in one epoch.
#[derive(Debug, Clone, Default)]
pub struct EpochStats {
    pub stages: StageTimes,
    /// The queue of finished batches between the workers and the consumer.
    pub to_consumer: QueueTotals,
    pub time_to_first_batch: Option<Duration>,
    pub bad_samples: Vec<BadSample>,
}

impl EpochStats {
    /// The bundle's form. Stages with no tasks and no failures are left out
    /// (a tensor source has no decode stage).
    pub fn to_bundle(&self) -> LoaderStats {
        let stages = Stage::ALL
            .iter()
            .filter_map(|&stage| {
                let t = self.stages.get(stage);
                let n = t.tasks + t.failures;
                (n > 0).then(|| LoaderStage {
                    name: stage.as_str().to_string(),
                    tasks: t.tasks,
                    failures: t.failures,
                    mean_task_s: t.nanos as f64 / 1e9 / n as f64,
                })
            })
            .collect();
        let q = &self.to_consumer;
        let queues = if q.gets > 0 {
            vec![LoaderQueue {
                name: "batches_to_consumer".to_string(),
                gets: q.gets,
                get_wait_s: q.wait.as_secs_f64(),
                readiness: q.ready_gets as f64 / q.gets as f64,
            }]
        } else {
            Vec::new()
        };
        LoaderStats {
            time_to_first_batch_s: self.time_to_first_batch.map(|d| d.as_secs_f64()),
            stages,
            queues,
            bad_samples: self.bad_samples.clone(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bundle_form_averages_per_task_and_skips_idle_stages() {
        let mut s = EpochStats::default();
        s.stages.add(Stage::Read, Duration::from_millis(2));
        s.stages.add(Stage::Read, Duration::from_millis(4));
        s.to_consumer.record(true, Duration::ZERO);
        s.to_consumer.record(false, Duration::from_millis(10));
        let b = s.to_bundle();
        assert_eq!(b.stages.len(), 1);
        assert_eq!(b.stages[0].name, "read");
        assert!((b.stages[0].mean_task_s - 0.003).abs() < 1e-9);
        assert_eq!(b.queues[0].gets, 2);
        assert!((b.queues[0].readiness - 0.5).abs() < 1e-12);
        assert!((b.queues[0].get_wait_s - 0.010).abs() < 1e-9);
    }
}
