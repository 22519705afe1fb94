//! Metrics: what can be read off a configuration's runs, keyed by timing mode
//! and phase so a diagnostic figure is never taken for a whole-run one. Runs
//! of a timing mode from a newer format (`TimingMode::Unknown`) are in no
//! metric ([`unknown_mode_note`]).

use crate::analysis::run_cost::{cpu_s_per_1000_samples, peak_rss_all_bytes, timeline_mean};
use crate::analysis::summary::Summary;
use crate::format::{Configuration, Experiment, OpenEnum, Phase, Run, StageStat, TimingMode};

/// What kind of quantity a metric is (drives units and formatting).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Quantity {
    /// Seconds.
    Duration,
    /// Samples per second.
    Rate,
    /// Bytes per second.
    Bandwidth,
    /// Bytes.
    Bytes,
    /// A share, 0..=1.
    Share,
    /// A plain count.
    Count,
    /// CPU-seconds (user + system), summed over processes.
    CpuTime,
    /// CPU cores busy on average (CPU-seconds ÷ wall seconds).
    Cores,
}

/// A metric of one configuration.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Metric {
    /// Samples per second: whole-run is performance; diagnostic is not.
    SamplesPerS,
    /// Epoch wall seconds.
    EpochS,
    /// Bytes per second moved (transfer experiments).
    BytesPerS,
    /// Optimizer steps in the epoch.
    Steps,
    /// Whole-run mean step time (seconds ÷ steps): no barriers inside.
    StepTimeS,
    NextWaitMeanS,
    NextWaitMedianS,
    NextWaitP95S,
    TransferMeanS,
    TransferMedianS,
    ComputeMeanS,
    ComputeMedianS,
    /// The ranks' per-step synchronisation (multi-rank diagnostic runs).
    CommMeanS,
    CommMedianS,
    StepMeanS,
    StepMedianS,
    StepP95S,
    /// The first `next()` wait, apart from the mean.
    FirstNextWaitS,
    IteratorCreationS,
    /// Share of the step spent waiting for the next batch (diagnostic).
    WaitShare,
    /// Share of the step spent in the ranks' synchronisation (diagnostic).
    CommShare,
    TimeToFirstBatchS,
    /// Share of the consumer's gets that found a batch ready.
    Readiness,
    PeakAllocatedBytes,
    PeakReservedBytes,
    HostPeakRssBytes,
    DeviceUsedBytes,
    /// Batches held ahead × batch bytes: an estimate of batch contents only.
    PrefetchEstimateBytes,
    /// CPU-seconds of every process of the run per 1,000 samples.
    CpuSPer1000Samples,
    /// CPU-seconds ÷ wall seconds: cores busy on average, every process.
    CpuCoresMean,
    /// Host peak RSS of the runner plus its worker processes' peaks.
    PeakRssAllBytes,
    /// The largest unique set size of one DataLoader worker process at the
    /// window's end (`stallscope job`): its private pages.
    WorkerUssBytes,
    /// The largest proportional set size of one worker process.
    WorkerPssBytes,
    /// Mean of the sampled GPU utilisation (NVML), as a share.
    GpuUtilizationMean,
}

/// How repeated values of a metric are combined into one figure.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Aggregate {
    Median,
    /// Peaks: the largest of the runs.
    Max,
}

/// A metric read from runs of one timing mode and one phase.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct MetricKey {
    pub metric: Metric,
    pub mode: TimingMode,
    pub phase: Phase,
}

impl MetricKey {
    pub fn new(metric: Metric, mode: TimingMode, phase: Phase) -> Self {
        MetricKey {
            metric,
            mode,
            phase,
        }
    }

    /// Short column heading, with the mode and phase made explicit.
    pub fn heading(&self) -> String {
        let mode = match (self.metric.is_memory(), &self.mode) {
            (true, _) => String::new(),
            (false, TimingMode::WholeRun) => " (whole-run".to_string(),
            (false, TimingMode::Diagnostic) => " (diagnostic".to_string(),
            (false, TimingMode::Unknown(name)) => format!(" ({name}"),
        };
        if mode.is_empty() {
            self.metric.label().to_string()
        } else {
            format!("{}{}, {})", self.metric.label(), mode, self.phase.as_str())
        }
    }

    /// Refuse to compare figures of different timing modes.
    pub fn comparable_with(&self, other: &MetricKey) -> Result<(), NotComparable> {
        if self.metric != other.metric {
            return Err(NotComparable {
                reason: format!(
                    "{} and {} are different metrics",
                    self.metric.label(),
                    other.metric.label()
                ),
            });
        }
        if self.mode != other.mode && !self.metric.is_memory() {
            return Err(NotComparable {
                reason: format!(
                    "a {} figure is not comparable with a {} one: the diagnostic run synchronizes at every stage boundary, which removes the overlap of loading, copying and computing that the whole run has, so its {} measures a different thing",
                    self.mode.as_str(),
                    other.mode.as_str(),
                    self.metric.label()
                ),
            });
        }
        Ok(())
    }
}

/// Why two figures must not be put side by side.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("not comparable: {reason}")]
pub struct NotComparable {
    pub reason: String,
}

impl Metric {
    pub fn label(self) -> &'static str {
        use Metric::*;
        match self {
            SamplesPerS => "samples/s",
            EpochS => "epoch",
            BytesPerS => "bandwidth",
            Steps => "steps",
            StepTimeS => "step time",
            NextWaitMeanS => "next-wait mean",
            NextWaitMedianS => "next-wait median",
            NextWaitP95S => "next-wait p95",
            TransferMeanS => "transfer mean",
            TransferMedianS => "transfer median",
            ComputeMeanS => "compute mean",
            ComputeMedianS => "compute median",
            CommMeanS => "comm mean",
            CommMedianS => "comm median",
            StepMeanS => "step mean",
            StepMedianS => "step median",
            StepP95S => "step p95",
            FirstNextWaitS => "first next-wait",
            IteratorCreationS => "iterator creation",
            WaitShare => "wait share",
            CommShare => "comm share",
            TimeToFirstBatchS => "time to first batch",
            Readiness => "data readiness",
            PeakAllocatedBytes => "peak allocated",
            PeakReservedBytes => "peak reserved",
            HostPeakRssBytes => "host peak RSS",
            DeviceUsedBytes => "device used",
            PrefetchEstimateBytes => "prefetch estimate",
            CpuSPer1000Samples => "CPU per 1k samples",
            CpuCoresMean => "CPU cores",
            PeakRssAllBytes => "peak RSS (all)",
            WorkerUssBytes => "worker USS (largest)",
            WorkerPssBytes => "worker PSS (largest)",
            GpuUtilizationMean => "GPU util",
        }
    }

    /// A short explanation for people, shown next to the figure.
    pub fn explanation(self) -> &'static str {
        use Metric::*;
        match self {
            SamplesPerS => {
                "Samples processed per second over the epoch. Whole-run: synchronized only before and after the epoch — this is performance. Diagnostic: barriers at every stage remove overlap — never compare it with whole-run."
            }
            EpochS => {
                "Wall seconds of one epoch, from iterator creation to the last optimizer step, synchronized before and after."
            }
            BytesPerS => "Bytes copied per second (host to device), over the timed copies.",
            Steps => {
                "Optimizer steps in the epoch: fewer, larger steps as the batch grows; not the same optimisation."
            }
            StepTimeS => {
                "Epoch seconds ÷ steps of the whole run: the average time one step really took with loading, copying and computing overlapping as they do in training."
            }
            NextWaitMeanS | NextWaitMedianS | NextWaitP95S => {
                "Time the training loop waited in next() for a batch, per step (diagnostic, the first step excluded). It is the wait, not the cost of preparing a batch: workers ahead of the loop hide that cost."
            }
            TransferMeanS | TransferMedianS => {
                "Host-to-device copy time per step, synchronized after the copy (diagnostic)."
            }
            ComputeMeanS | ComputeMedianS => {
                "Forward, loss, backward and optimizer step per step, synchronized after (diagnostic)."
            }
            CommMeanS | CommMedianS => {
                "Time per step in the ranks' synchronisation after compute (the barrier or all-reduce), diagnostic: a rank waits here for the slowest rank."
            }
            StepMeanS | StepMedianS | StepP95S => {
                "Next-wait + transfer + compute (+ comm with several ranks) of one step with a barrier between each (diagnostic); the sum is not the whole-run step time."
            }
            FirstNextWaitS => {
                "The first next() wait of the epoch: worker start-up and first reads, reported apart from the mean."
            }
            IteratorCreationS => {
                "Time to create the loader's iterator (starting workers when they are not persistent)."
            }
            WaitShare => {
                "Share of each synchronized step spent waiting for the next batch (diagnostic): where the loop waits, not how fast it is."
            }
            CommShare => {
                "Share of each synchronized step spent in the ranks' synchronisation (diagnostic): time a rank waited for the slowest rank."
            }
            TimeToFirstBatchS => {
                "From iterator creation until the first batch reached the training loop."
            }
            Readiness => {
                "Share of the loop's gets that found a batch already waiting (SPDL's data readiness): 100% means the feed kept ahead."
            }
            PeakAllocatedBytes => {
                "The caching allocator's peak of memory handed to tensors (device)."
            }
            PeakReservedBytes => {
                "The caching allocator's peak of memory held from the driver, allocated or not (device)."
            }
            HostPeakRssBytes => {
                "Peak resident memory of the runner process on the host (all workers' shared batches included when threads)."
            }
            DeviceUsedBytes => {
                "The device's own view of used memory (total − free), all processes."
            }
            PrefetchEstimateBytes => {
                "An estimate, not a measurement: batch bytes × workers × prefetch per worker (the batches held ahead). It counts batch contents only — not the data set's copies, work in progress or shared-memory slots — so read it beside the measured host peak RSS."
            }
            CpuSPer1000Samples => {
                "CPU-seconds (user + system) of every process of the run — the runner with its threads and each worker process — per 1,000 samples: what the throughput costs in CPU."
            }
            CpuCoresMean => {
                "CPU-seconds of every process of the run ÷ the epoch's wall seconds: how many cores were busy on average."
            }
            PeakRssAllBytes => {
                "The runner's host peak RSS plus each worker process's peak (an upper bound: pages they share count in each)."
            }
            WorkerUssBytes => {
                "The private memory (USS: pages no other process holds) of the largest DataLoader worker at the window's end. Under fork a worker starts sharing its parent's pages; a Python-object dataset read by the worker copies them (copy-on-read), and that growth shows here, per worker."
            }
            WorkerPssBytes => {
                "The proportional memory (PSS: each shared page divided among the processes sharing it) of the largest DataLoader worker at the window's end. The workers' PSS sum to what they really cost together."
            }
            GpuUtilizationMean => {
                "Mean of NVML's utilisation sampled during the epoch: the share of time any kernel ran. A clue, not performance: a higher utilisation without a shorter whole-run epoch is not an improvement."
            }
        }
    }

    pub fn quantity(self) -> Quantity {
        use Metric::*;
        match self {
            SamplesPerS => Quantity::Rate,
            BytesPerS => Quantity::Bandwidth,
            Steps => Quantity::Count,
            WaitShare | CommShare | Readiness | GpuUtilizationMean => Quantity::Share,
            PeakAllocatedBytes
            | PeakReservedBytes
            | HostPeakRssBytes
            | DeviceUsedBytes
            | PrefetchEstimateBytes
            | PeakRssAllBytes
            | WorkerUssBytes
            | WorkerPssBytes => Quantity::Bytes,
            CpuSPer1000Samples => Quantity::CpuTime,
            CpuCoresMean => Quantity::Cores,
            _ => Quantity::Duration,
        }
    }

    /// Whether the best cell of a column is marked (not for plain counts,
    /// nor for cores busy or GPU utilisation: more of either is neither
    /// better nor worse by itself).
    pub fn ranked(self) -> bool {
        self.quantity() != Quantity::Count
            && !matches!(self, Metric::CpuCoresMean | Metric::GpuUtilizationMean)
    }

    pub fn higher_is_better(self) -> bool {
        matches!(
            self,
            Metric::SamplesPerS | Metric::BytesPerS | Metric::Readiness
        )
    }

    /// Whether lower/higher is a judgement at all (steps and memory are costs
    /// but not "worse" in a ranking of speed; memory is still marked lowest).
    pub fn is_memory(self) -> bool {
        self.quantity() == Quantity::Bytes
    }

    pub fn aggregate(self) -> Aggregate {
        if self.is_memory() {
            Aggregate::Max
        } else {
            Aggregate::Median
        }
    }

    /// The timing mode a metric exists in (`None`: either, e.g. memory).
    pub fn native_mode(self) -> Option<TimingMode> {
        use Metric::*;
        match self {
            SamplesPerS | EpochS | BytesPerS | Steps | StepTimeS => None,
            PeakAllocatedBytes
            | PeakReservedBytes
            | HostPeakRssBytes
            | DeviceUsedBytes
            | PrefetchEstimateBytes
            | PeakRssAllBytes
            | WorkerUssBytes
            | WorkerPssBytes => None,
            TimeToFirstBatchS | Readiness => None,
            CpuSPer1000Samples | CpuCoresMean | GpuUtilizationMean => None,
            _ => Some(TimingMode::Diagnostic),
        }
    }

    /// Read the metric off one run (already filtered by mode and phase; a
    /// run of an unknown mode gives nothing).
    pub fn of_run(self, r: &Run) -> Option<f64> {
        if r.timing_mode.unknown().is_some() {
            return None;
        }
        use Metric::*;
        let stat = |s: &Option<StageStat>, f: fn(&StageStat) -> Option<f64>| s.as_ref().and_then(f);
        let d = r.diagnostic.as_ref();
        let w = r.whole_run.as_ref();
        match self {
            SamplesPerS => match r.timing_mode {
                TimingMode::WholeRun => w?.samples_per_s,
                TimingMode::Diagnostic => {
                    let d = d?;
                    Some(d.samples? as f64 / d.seconds.filter(|s| *s > 0.0)?)
                }
                TimingMode::Unknown(_) => None,
            },
            EpochS => match r.timing_mode {
                TimingMode::WholeRun => w?.seconds,
                TimingMode::Diagnostic => d?.seconds,
                TimingMode::Unknown(_) => None,
            },
            BytesPerS => match r.timing_mode {
                TimingMode::WholeRun => Some(w?.bytes? as f64 / w?.seconds.filter(|s| *s > 0.0)?),
                TimingMode::Diagnostic => Some(d?.bytes? as f64 / d?.seconds.filter(|s| *s > 0.0)?),
                TimingMode::Unknown(_) => None,
            },
            Steps => match r.timing_mode {
                TimingMode::WholeRun => w?.steps.map(|s| s as f64),
                TimingMode::Diagnostic => d?.steps.map(|s| s as f64),
                TimingMode::Unknown(_) => None,
            },
            StepTimeS => match r.timing_mode {
                TimingMode::WholeRun => {
                    let w = w?;
                    w.step_s
                        .or_else(|| Some(w.seconds? / w.steps.filter(|n| *n > 0)? as f64))
                }
                TimingMode::Diagnostic | TimingMode::Unknown(_) => None,
            },
            NextWaitMeanS => stat(&d?.next_wait, |s| s.mean_s),
            NextWaitMedianS => stat(&d?.next_wait, |s| s.median_s),
            NextWaitP95S => stat(&d?.next_wait, |s| s.p95_s),
            TransferMeanS => stat(&d?.transfer, |s| s.mean_s),
            TransferMedianS => stat(&d?.transfer, |s| s.median_s),
            ComputeMeanS => stat(&d?.compute, |s| s.mean_s),
            ComputeMedianS => stat(&d?.compute, |s| s.median_s),
            StepMeanS => stat(&d?.step, |s| s.mean_s),
            StepMedianS => stat(&d?.step, |s| s.median_s),
            StepP95S => stat(&d?.step, |s| s.p95_s),
            FirstNextWaitS => d?.first_next_wait_s,
            IteratorCreationS => d?.iterator_creation_s,
            CommMeanS => stat(&d?.comm, |s| s.mean_s),
            CommMedianS => stat(&d?.comm, |s| s.median_s),
            WaitShare => stage_share(d?, d?.next_wait.as_ref()?.mean_s?),
            CommShare => stage_share(d?, d?.comm.as_ref()?.mean_s?),
            TimeToFirstBatchS => r.loader.as_ref()?.time_to_first_batch_s,
            Readiness => {
                let q = r.loader.as_ref()?.queues.last()?;
                Some(q.readiness)
            }
            PeakAllocatedBytes => r
                .memory
                .as_ref()?
                .device_peak_allocated_bytes
                .map(|b| b as f64),
            PeakReservedBytes => r
                .memory
                .as_ref()?
                .device_peak_reserved_bytes
                .map(|b| b as f64),
            HostPeakRssBytes => r.memory.as_ref()?.host_peak_rss_bytes.map(|b| b as f64),
            DeviceUsedBytes => r.memory.as_ref()?.device_used_bytes.map(|b| b as f64),
            // Read from the configuration, not from a run: see `metric_values`.
            PrefetchEstimateBytes => None,
            CpuSPer1000Samples => cpu_s_per_1000_samples(r),
            CpuCoresMean => {
                let c = r.cost.as_ref()?;
                (c.wall_s > 0.0 && c.cpu_s.is_finite()).then(|| c.cpu_s / c.wall_s)
            }
            PeakRssAllBytes => peak_rss_all_bytes(r).map(|b| b as f64),
            WorkerUssBytes => largest_worker(r, |p| p.uss_bytes),
            WorkerPssBytes => largest_worker(r, |p| p.pss_bytes),
            GpuUtilizationMean => {
                let t = r.timeline.as_ref()?;
                let u: Vec<f64> = t
                    .gpu
                    .as_ref()?
                    .utilization_percent
                    .iter()
                    .map(|&p| f64::from(p) / 100.0)
                    .collect();
                timeline_mean(&t.t_ms, &u)
            }
        }
    }
}

/// The largest figure of a run's DataLoader worker processes.
fn largest_worker(r: &Run, f: fn(&crate::format::ProcessMemory) -> Option<u64>) -> Option<f64> {
    let m = r.memory.as_ref()?;
    let workers = m.processes.iter().filter(|p| p.role == "worker");
    workers.filter_map(f).max().map(|b| b as f64)
}

/// A stage's mean over the step's mean: the step is the sum of the stages
/// (comm included when present) when the run has no step statistics.
fn stage_share(d: &crate::format::Diagnostic, stage: f64) -> Option<f64> {
    let mean = |s: &Option<StageStat>| s.as_ref().and_then(|s| s.mean_s);
    let step = match mean(&d.step) {
        Some(s) => s,
        None => {
            mean(&d.next_wait)?
                + mean(&d.transfer)?
                + mean(&d.compute)?
                + mean(&d.comm).unwrap_or(0.0)
        }
    };
    (step > 0.0).then(|| stage / step)
}

/// Whether a run's timing mode is one this build knows (whole-run or
/// diagnostic); runs of a newer format's mode are in no figure.
pub fn run_mode_known(r: &Run) -> bool {
    r.timing_mode.unknown().is_none()
}

/// The runs of a configuration that a key reads. Memory metrics read every
/// run of the phase whatever its known mode (a peak is a peak); every other
/// metric reads only runs of its own timing mode. A run of a mode this build
/// does not know is never read.
pub fn runs_for<'a>(
    c: &'a Configuration,
    key: &'a MetricKey,
) -> impl Iterator<Item = &'a Run> + 'a {
    c.runs.iter().filter(move |r| {
        r.phase == key.phase
            && r.timing_mode.unknown().is_none()
            && (key.metric.is_memory() || r.timing_mode == key.mode)
    })
}

/// The note for runs left out of every figure because their timing mode is
/// from a newer format (`None` when there are none).
pub fn unknown_mode_note(e: &Experiment) -> Option<String> {
    let mut modes: Vec<&str> = Vec::new();
    let mut count = 0;
    for r in e.configurations.iter().flat_map(|c| &c.runs) {
        if let Some(name) = r.timing_mode.unknown() {
            count += 1;
            if !modes.contains(&name) {
                modes.push(name);
            }
        }
    }
    (count > 0).then(|| {
        let names: Vec<String> = modes.iter().map(|m| format!("{m:?}")).collect();
        format!(
            "{count} run{} of timing mode {} (from a newer format) {} in no figure here: a mode this build does not know is never mixed with whole-run or diagnostic figures.",
            if count == 1 { "" } else { "s" },
            names.join(", "),
            if count == 1 { "is" } else { "are" },
        )
    })
}

/// Every value of a metric across a configuration's matching runs (the
/// prefetch estimate, which no run measures, is one value per configuration).
pub fn metric_values(c: &Configuration, key: &MetricKey) -> Vec<f64> {
    if key.metric == Metric::PrefetchEstimateBytes {
        return prefetch_estimate_bytes(c)
            .map(|b| b as f64)
            .into_iter()
            .collect();
    }
    // A job configuration whose training thread's wait was not seen has no
    // wait figure: its runs' zeros are not the thread's.
    let wait = matches!(
        key.metric,
        Metric::NextWaitMeanS | Metric::NextWaitMedianS | Metric::NextWaitP95S | Metric::WaitShare
    );
    if wait && crate::analysis::wait_unseen(c) {
        return Vec::new();
    }
    runs_for(c, key)
        .filter_map(|r| key.metric.of_run(r))
        .collect()
}

/// Summary of a metric over a configuration's matching runs.
pub fn metric_summary(c: &Configuration, key: &MetricKey) -> Option<Summary> {
    Summary::of(&metric_values(c, key))
}

/// The single figure a metric gives for a configuration (median, or max for peaks).
pub fn metric_value(c: &Configuration, key: &MetricKey) -> Option<f64> {
    let s = metric_summary(c, key)?;
    Some(match key.metric.aggregate() {
        Aggregate::Median => s.median,
        Aggregate::Max => s.max,
    })
}

/// The phase whole-run figures are read from: steady epochs when the
/// experiment has any, else the cold first epoch.
pub fn preferred_phase(e: &Experiment) -> Phase {
    let has_steady = e
        .configurations
        .iter()
        .flat_map(|c| &c.runs)
        .any(|r| r.phase == Phase::Steady);
    if has_steady {
        Phase::Steady
    } else {
        Phase::Cold
    }
}

/// The main throughput metric of an experiment (bandwidth for transfers).
pub fn throughput_metric(e: &Experiment) -> Metric {
    if e.kind == crate::format::ExperimentKind::Transfer {
        Metric::BytesPerS
    } else {
        Metric::SamplesPerS
    }
}

/// Whether any configuration has a value for the key.
pub fn has_metric(e: &Experiment, key: &MetricKey) -> bool {
    e.configurations
        .iter()
        .any(|c| !metric_values(c, key).is_empty())
}

/// Batches held ahead (workers × prefetch per worker) × batch bytes, for a
/// configuration with `workers`, `prefetch` and `batch_bytes`; an in-loop
/// configuration (no workers) holds none ahead.
pub fn prefetch_estimate_bytes(c: &Configuration) -> Option<u64> {
    let num = |name: &str| {
        c.params
            .get(name)
            .and_then(crate::format::ParamValue::as_f64)
    };
    let workers = num("workers")?;
    let batch = c.batch_bytes?;
    if workers <= 0.0 {
        return Some(0);
    }
    let prefetch = num("prefetch")?;
    Some((workers * prefetch) as u64 * batch)
}
