//! The key figures of an experiment, for a compact report: the whole-run
//! figure that judges a change (throughput) and the figure that says where
//! the step's time goes (a diagnostic one, or memory where an experiment has
//! no diagnostic runs). Which metric that is depends on the experiment kind.
//! Beside them, the cost columns of format 1.2 runs (CPU, memory, GPU).

use crate::analysis::metric::*;
use crate::format::{Experiment, ExperimentKind, Phase, TimingMode};

/// The two columns of a compact table; each `None` when no configuration has
/// a value for any of its candidates.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KeyColumns {
    /// Whole-run throughput (samples/s, or bytes/s for transfers).
    pub whole_run: Option<MetricKey>,
    /// Where the time goes: the wait share for loaders and stalls, the
    /// median step / compute / copy for sweeps, compute and transfers (all
    /// diagnostic); peak memory for the OOM probe and for experiments
    /// without diagnostic runs.
    pub detail: Option<MetricKey>,
}

impl KeyColumns {
    /// The present keys, whole-run first (for [`crate::analysis::TableOptions::columns`]).
    pub fn keys(&self) -> Vec<MetricKey> {
        self.whole_run.iter().chain(&self.detail).cloned().collect()
    }
}

/// The key columns of an experiment in a phase (see [`preferred_phase`]).
pub fn key_columns(e: &Experiment, phase: Phase) -> KeyColumns {
    use Metric::*;
    let w = |m| MetricKey::new(m, TimingMode::WholeRun, phase);
    let d = |m| MetricKey::new(m, TimingMode::Diagnostic, phase);
    let memory = [w(PeakAllocatedBytes), w(HostPeakRssBytes)];
    let whole_run = [w(throughput_metric(e)), w(EpochS)];
    let detail: Vec<MetricKey> = match &e.kind {
        ExperimentKind::Loader | ExperimentKind::Stall => {
            vec![d(WaitShare), d(NextWaitMeanS)]
        }
        ExperimentKind::BatchSweep => [d(StepMedianS)].into_iter().chain(memory).collect(),
        ExperimentKind::Compute => [d(ComputeMedianS)].into_iter().chain(memory).collect(),
        ExperimentKind::Transfer => vec![d(TransferMedianS)],
        ExperimentKind::OomProbe => vec![
            w(PeakAllocatedBytes),
            w(PeakReservedBytes),
            w(HostPeakRssBytes),
        ],
        // A kind from a newer format: its step median or memory, if any.
        ExperimentKind::Unknown(_) => [d(StepMedianS)].into_iter().chain(memory).collect(),
    };
    let first = |keys: &[MetricKey]| keys.iter().find(|k| has_metric(e, k)).cloned();
    KeyColumns {
        whole_run: first(&whole_run),
        detail: first(&detail),
    }
}

/// The cost metrics, in the order tables show them (read from whole-run
/// runs: a diagnostic epoch's CPU also pays for its barriers).
pub const COST_METRICS: [Metric; 6] = [
    Metric::CpuSPer1000Samples,
    Metric::CpuCoresMean,
    Metric::PeakRssAllBytes,
    Metric::WorkerUssBytes,
    Metric::WorkerPssBytes,
    Metric::GpuUtilizationMean,
];

/// The cost columns of an experiment that any configuration has (format
/// 1.2 runs), whole-run, for the compact report's cost table; empty for a
/// bundle without cost figures. The largest worker's USS stands for the
/// memory per worker there (its PSS is in the full table), so the table
/// fits in 100 columns.
pub fn cost_columns(e: &Experiment, phase: Phase) -> Vec<MetricKey> {
    COST_METRICS
        .into_iter()
        .filter(|m| *m != Metric::WorkerPssBytes)
        .map(|m| MetricKey::new(m, TimingMode::WholeRun, phase))
        .filter(|k| has_metric(e, k))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::read_bundle;

    fn keys_of(json: &str, experiment: &str) -> KeyColumns {
        let b = read_bundle(json.as_bytes()).unwrap();
        let e = b.experiment(experiment).unwrap();
        key_columns(e, preferred_phase(e))
    }

    const MEASURED: &str = include_str!("../../../fixtures/measured/cpu-quickstart-quick.json");
    const SWEEP: &str = include_str!("../../../fixtures/published/fashionmnist-batch-sweep.json");
    const TUTORIAL: &str =
        include_str!("../../../fixtures/published/pytorch-data-loading-tutorial.json");

    fn key(metric: Metric, mode: TimingMode, phase: Phase) -> Option<MetricKey> {
        Some(MetricKey::new(metric, mode, phase))
    }

    #[test]
    fn measured_experiments_pair_throughput_with_a_diagnostic_figure() {
        use Metric::*;
        use Phase::Steady;
        use TimingMode::{Diagnostic, WholeRun};
        let cases = [
            ("loader", SamplesPerS, WaitShare),
            ("batch_sweep", SamplesPerS, StepMedianS),
            ("compute", SamplesPerS, ComputeMedianS),
            ("transfer", BytesPerS, TransferMedianS),
        ];
        for (id, whole, detail) in cases {
            assert_eq!(
                keys_of(MEASURED, id),
                KeyColumns {
                    whole_run: key(whole, WholeRun, Steady),
                    detail: key(detail, Diagnostic, Steady),
                },
                "{id}"
            );
        }
        // Not applicable on the CPU: nothing to show.
        let oom = keys_of(MEASURED, "oom_probe");
        assert_eq!(oom.keys(), []);
    }

    #[test]
    fn without_diagnostic_runs_the_detail_is_memory_or_nothing() {
        use Metric::*;
        use Phase::Cold;
        use TimingMode::WholeRun;
        let sweep = keys_of(SWEEP, "batch_sweep");
        assert_eq!(sweep.whole_run, key(SamplesPerS, WholeRun, Cold));
        assert_eq!(sweep.detail, key(PeakAllocatedBytes, WholeRun, Cold));
        let oom = keys_of(SWEEP, "oom_probe");
        assert_eq!(oom.detail, key(PeakAllocatedBytes, WholeRun, Cold));
        // The tutorial's figures are throughput only: no second column is made up.
        let tutorial = keys_of(TUTORIAL, "loader_tutorial");
        assert_eq!(
            tutorial.keys(),
            [MetricKey::new(SamplesPerS, WholeRun, Cold)]
        );
    }
}
