//! CPU accounting of one epoch: a snapshot of the runner process and every
//! loader worker right before the epoch and one right after; the difference
//! is the epoch's [`CpuCost`]. Thread workers are parts of the runner
//! process's figure (not added to it); worker processes are added.

use std::time::Instant;

use stallscope_bundle::{CpuCost, CpuPart, CpuPartKind};
use stallscope_loader::{WorkerKind, WorkerOs, WorkerRegistry};

use super::proc::{self, CpuTimes};

/// One worker's counters at a snapshot.
#[derive(Debug, Clone, PartialEq)]
pub struct WorkerReading {
    pub os: WorkerOs,
    pub times: CpuTimes,
    /// Processes only: `VmHWM` (live) or the reaped child's `ru_maxrss`.
    pub peak_rss_bytes: Option<u64>,
}

/// The counters at one moment.
#[derive(Debug, Clone)]
pub struct CpuSnapshot {
    pub at: Instant,
    /// The runner process, all its threads.
    pub runner: CpuTimes,
    /// Workers whose counters could be read.
    pub workers: Vec<WorkerReading>,
}

/// Read one worker's counters: what it used if it has ended, else `/proc`.
pub fn read_worker(os: &WorkerOs, with_peak: bool) -> Option<WorkerReading> {
    let (times, peak_rss_bytes) = match (os.ended, os.kind) {
        (Some(u), _) => (
            CpuTimes {
                user_s: u.user_s,
                system_s: u.system_s,
            },
            u.peak_rss_bytes,
        ),
        (None, WorkerKind::Threads) => (proc::thread_stat(os.id)?.times, None),
        (None, WorkerKind::Processes) => (
            proc::process_stat(os.id)?.times,
            with_peak.then(|| proc::peak_rss_bytes(os.id)).flatten(),
        ),
    };
    Some(WorkerReading {
        os: os.clone(),
        times,
        peak_rss_bytes,
    })
}

impl CpuSnapshot {
    /// The runner and the workers `registry` lists, now.
    pub fn take(registry: Option<&WorkerRegistry>) -> Self {
        let workers = registry
            .map(|r| r.snapshot())
            .unwrap_or_default()
            .iter()
            .filter_map(|w| read_worker(w, true))
            .collect();
        CpuSnapshot {
            at: Instant::now(),
            runner: proc::self_times(),
            workers,
        }
    }
}

/// The part's name in the bundle.
pub fn part_name(os: &WorkerOs) -> String {
    match os.kind {
        WorkerKind::Threads => format!("thread worker {}", os.worker),
        WorkerKind::Processes => format!("process worker {} (pid {})", os.worker, os.id),
    }
}

/// The epoch between `before` and `after`, which handed out `samples`:
/// the cost, and the sum of the worker processes' peak RSS (`None` when the
/// epoch had no worker process).
///
/// A worker not in `before` started during the epoch (its whole use counts);
/// one only in `before` belonged to an earlier pool and used nothing here.
pub fn epoch_cost(
    before: &CpuSnapshot,
    after: &CpuSnapshot,
    samples: u64,
) -> (CpuCost, Option<u64>) {
    let runner = after.runner.since(before.runner);
    let mut parts = vec![CpuPart {
        name: "runner".into(),
        kind: CpuPartKind::Process,
        user_s: runner.user_s,
        system_s: runner.system_s,
        peak_rss_bytes: crate::host::peak_rss_bytes(),
    }];
    let mut cpu_s = runner.total();
    let mut workers_peak: Option<u64> = None;
    for w in &after.workers {
        let earlier = before
            .workers
            .iter()
            .find(|b| b.os.generation == w.os.generation && b.os.worker == w.os.worker)
            .map(|b| b.times)
            .unwrap_or_default();
        let used = w.times.since(earlier);
        let kind = match w.os.kind {
            WorkerKind::Threads => CpuPartKind::Thread,
            WorkerKind::Processes => {
                cpu_s += used.total();
                if let Some(p) = w.peak_rss_bytes {
                    *workers_peak.get_or_insert(0) += p;
                }
                CpuPartKind::Process
            }
        };
        parts.push(CpuPart {
            name: part_name(&w.os),
            kind,
            user_s: used.user_s,
            system_s: used.system_s,
            peak_rss_bytes: w.peak_rss_bytes,
        });
    }
    let cost = CpuCost {
        wall_s: after.at.saturating_duration_since(before.at).as_secs_f64(),
        cpu_s,
        cpu_s_per_1000_samples: (samples > 0).then(|| cpu_s / samples as f64 * 1000.0),
        parts,
    };
    (cost, workers_peak)
}

#[cfg(test)]
mod tests {
    use super::*;
    use stallscope_loader::Rng;
    use stallscope_loader::WorkerUsage;
    use std::time::Duration;

    fn times(rng: &mut Rng) -> CpuTimes {
        CpuTimes {
            user_s: rng.below(10_000) as f64 / 100.0,
            system_s: rng.below(1_000) as f64 / 100.0,
        }
    }

    fn reading(worker: usize, kind: WorkerKind, generation: u64, t: CpuTimes) -> WorkerReading {
        WorkerReading {
            os: WorkerOs {
                worker,
                kind,
                id: 100 + worker as u32,
                generation,
                ended: None::<WorkerUsage>,
            },
            times: t,
            peak_rss_bytes: (kind == WorkerKind::Processes).then_some(1 << 20),
        }
    }

    /// Generated epochs: persistent workers (in both snapshots, counters
    /// grown), fresh ones (only after), stale ones (only before, an earlier
    /// pool). The invariants: thread parts are inside the runner figure,
    /// process parts are added; nothing is negative; per 1,000 samples is
    /// cpu_s ÷ samples × 1,000; the peak is the sum over worker processes.
    #[test]
    fn generated_epochs_keep_the_accounting_invariants() {
        let mut rng = Rng::new(3);
        for case in 0..400 {
            let t0 = Instant::now();
            let runner0 = times(&mut rng);
            let runner_used = times(&mut rng);
            let kind = if rng.coin() {
                WorkerKind::Threads
            } else {
                WorkerKind::Processes
            };
            let n = rng.below(5) as usize;
            let persistent = rng.coin();
            let mut before = CpuSnapshot {
                at: t0,
                runner: runner0,
                workers: vec![],
            };
            let mut after = CpuSnapshot {
                at: t0 + Duration::from_millis(rng.below(5000)),
                runner: CpuTimes {
                    user_s: runner0.user_s + runner_used.user_s,
                    system_s: runner0.system_s + runner_used.system_s,
                },
                workers: vec![],
            };
            let mut expected_workers = 0.0;
            for w in 0..n {
                let start = times(&mut rng);
                let used = times(&mut rng);
                let end = CpuTimes {
                    user_s: start.user_s + used.user_s,
                    system_s: start.system_s + used.system_s,
                };
                if persistent {
                    before.workers.push(reading(w, kind, 1, start));
                    after.workers.push(reading(w, kind, 1, end));
                    expected_workers += used.total();
                } else {
                    // An earlier pool's worker, then this epoch's fresh one.
                    before.workers.push(reading(w, kind, 1, start));
                    after.workers.push(reading(w, kind, 2, end));
                    expected_workers += end.total();
                }
            }
            let samples = rng.below(3);
            let (cost, peak) = epoch_cost(&before, &after, samples);
            let want = runner_used.total()
                + if kind == WorkerKind::Processes {
                    expected_workers
                } else {
                    0.0
                };
            assert!(
                (cost.cpu_s - want).abs() < 1e-9,
                "case {case}: {} vs {want}",
                cost.cpu_s
            );
            assert_eq!(cost.parts.len(), n + 1);
            assert_eq!(cost.parts[0].name, "runner");
            let parts_workers: f64 = cost.parts[1..].iter().map(|p| p.user_s + p.system_s).sum();
            assert!(
                (parts_workers - expected_workers).abs() < 1e-9,
                "case {case}"
            );
            assert!(
                cost.parts
                    .iter()
                    .all(|p| p.user_s >= 0.0 && p.system_s >= 0.0)
            );
            match samples {
                0 => assert_eq!(cost.cpu_s_per_1000_samples, None),
                s => assert_eq!(
                    cost.cpu_s_per_1000_samples,
                    Some(cost.cpu_s / s as f64 * 1000.0)
                ),
            }
            let procs = if kind == WorkerKind::Processes { n } else { 0 };
            assert_eq!(peak, (procs > 0).then_some(procs as u64 * (1 << 20)));
            assert_eq!(cost.wall_s, (after.at - before.at).as_secs_f64());
        }
    }

    #[test]
    fn an_ended_worker_reads_from_its_recorded_usage_and_a_gone_one_not_at_all() {
        let mut os = reading(0, WorkerKind::Processes, 1, CpuTimes::default()).os;
        os.id = u32::MAX; // no such process
        assert!(read_worker(&os, true).is_none());
        os.ended = Some(WorkerUsage {
            user_s: 1.5,
            system_s: 0.25,
            peak_rss_bytes: Some(7),
        });
        let r = read_worker(&os, true).unwrap();
        assert_eq!(r.times.total(), 1.75);
        assert_eq!(r.peak_rss_bytes, Some(7));
    }
}
