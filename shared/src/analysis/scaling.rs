//! Scaling efficiency: how much of the ideal a job of more ranks gained. A
//! merged bundle compared with a one-process bundle (or two merged bundles
//! of different world sizes), configurations paired by id:
//!
//! efficiency = (job rate NEW ÷ job rate BASE) ÷ (world NEW ÷ world BASE),
//!
//! whole-run rates only. The loss, 1 − efficiency, is split by the
//! diagnostic shares of the pooled step (the slowest rank's, `pooled_runs`):
//! with w, c the next-wait and comm shares and E the efficiency,
//! data = w_NEW − E·w_BASE, comm = c_NEW − E·c_BASE and the rest the
//! remainder, so the three sum to the loss. (Per sample, the job's step is
//! 1/E of the base's; a share s of it is s/E of the base step, so the
//! extra time of a stage over the job's step is s_NEW − E·s_BASE.) A part
//! is negative when NEW spent less of its step there than BASE did.

use crate::analysis::metric::{Metric, MetricKey, metric_value, throughput_metric};
use crate::format::{Bundle, Configuration, Experiment, Phase, TimingMode};
use crate::merge::job_view;

/// Where the loss of a configuration's scaling went (shares of the job's
/// step; data + comm + rest = loss).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct LossSplit {
    /// Waiting for data on the slowest rank, beyond BASE's.
    pub data: f64,
    /// In the barrier or collective, beyond BASE's.
    pub comm: f64,
    /// Everything else: transfer, compute, the barrier's own cost.
    pub rest: f64,
}

/// One configuration present in both bundles.
#[derive(Debug, Clone, PartialEq)]
pub struct ScalingRow {
    pub config_id: String,
    pub label: String,
    /// Job whole-run samples/s (medians over repeats).
    pub base_rate: Option<f64>,
    pub new_rate: Option<f64>,
    pub efficiency: Option<f64>,
    /// 1 − efficiency.
    pub loss: Option<f64>,
    /// `None` when a side has no diagnostic shares.
    pub split: Option<LossSplit>,
    /// Why a figure is missing.
    pub note: Option<String>,
}

/// One experiment of the scaling comparison.
#[derive(Debug, Clone, PartialEq)]
pub struct ScalingExperiment {
    pub experiment_id: String,
    pub title: String,
    pub phase: Option<Phase>,
    pub rows: Vec<ScalingRow>,
}

/// The scaling of NEW over BASE; `None` when their world sizes are equal.
#[derive(Debug, Clone, PartialEq)]
pub struct Scaling {
    pub base_world: u32,
    pub new_world: u32,
    pub experiments: Vec<ScalingExperiment>,
}

/// The ranks of a bundle's job (1 for a single process).
pub fn bundle_world(b: &Bundle) -> u32 {
    (b.ranks.len() as u32).max(1)
}

/// Efficiency and its loss split from the two sides' job figures.
pub fn scaling_efficiency(
    base: (f64, u32),
    new: (f64, u32),
    shares: Option<((f64, f64), (f64, f64))>,
) -> Option<(f64, Option<LossSplit>)> {
    let ((rb, wb), (rn, wn)) = (base, new);
    if !(rb > 0.0 && rn.is_finite() && wb > 0 && wn > 0) {
        return None;
    }
    let e = (rn / rb) / (f64::from(wn) / f64::from(wb));
    let split = shares.map(|((wait_b, comm_b), (wait_n, comm_n))| {
        let data = wait_n - e * wait_b;
        let comm = comm_n - e * comm_b;
        LossSplit {
            data,
            comm,
            rest: (1.0 - e) - data - comm,
        }
    });
    Some((e, split))
}

/// Compare the scaling of NEW over BASE (`None` for equal worlds).
pub fn compare_scaling(base: &Bundle, new: &Bundle) -> Option<Scaling> {
    let (wb, wn) = (bundle_world(base), bundle_world(new));
    if wb == wn {
        return None;
    }
    let (base, new) = (job_view(base), job_view(new));
    let experiments = base
        .experiments
        .iter()
        .filter_map(|b| Some((b, new.experiment(&b.id)?)))
        .filter(|(b, n)| b.not_applicable.is_none() && n.not_applicable.is_none())
        .map(|(b, n)| scaling_experiment(b, n, wb, wn))
        .collect();
    Some(Scaling {
        base_world: wb,
        new_world: wn,
        experiments,
    })
}

fn has_rate(e: &Experiment, phase: Phase) -> bool {
    let key = MetricKey::new(throughput_metric(e), TimingMode::WholeRun, phase);
    e.configurations
        .iter()
        .any(|c| metric_value(c, &key).is_some())
}

fn scaling_experiment(b: &Experiment, n: &Experiment, wb: u32, wn: u32) -> ScalingExperiment {
    let phase = [Phase::Steady, Phase::Cold]
        .into_iter()
        .find(|&p| has_rate(b, p) && has_rate(n, p));
    let rows = match phase {
        Some(p) => b
            .configurations
            .iter()
            .filter_map(|bc| Some((bc, n.configuration(&bc.id)?)))
            .map(|(bc, nc)| scaling_row(bc, nc, (wb, wn), p, throughput_metric(b)))
            .collect(),
        None => Vec::new(),
    };
    ScalingExperiment {
        experiment_id: b.id.clone(),
        title: b.title.clone(),
        phase,
        rows,
    }
}

/// (next-wait share, comm share) of a configuration's diagnostic job runs.
fn shares(c: &Configuration, phase: Phase) -> Option<(f64, f64)> {
    let at = |m: Metric| metric_value(c, &MetricKey::new(m, TimingMode::Diagnostic, phase));
    let wait = at(Metric::WaitShare)?;
    Some((wait, at(Metric::CommShare).unwrap_or(0.0)))
}

fn scaling_row(
    bc: &Configuration,
    nc: &Configuration,
    (wb, wn): (u32, u32),
    phase: Phase,
    metric: Metric,
) -> ScalingRow {
    let key = MetricKey::new(metric, TimingMode::WholeRun, phase);
    let (rb, rn) = (metric_value(bc, &key), metric_value(nc, &key));
    let mut row = ScalingRow {
        config_id: bc.id.clone(),
        label: bc.label.clone(),
        base_rate: rb,
        new_rate: rn,
        efficiency: None,
        loss: None,
        split: None,
        note: None,
    };
    let (Some(rb), Some(rn)) = (rb, rn) else {
        row.note = Some(format!(
            "{} has no whole-run {} figure",
            if rb.is_none() { "BASE" } else { "NEW" },
            phase.as_str()
        ));
        return row;
    };
    let s = shares(bc, phase).zip(shares(nc, phase));
    if let Some((e, split)) = scaling_efficiency((rb, wb), (rn, wn), s) {
        row.efficiency = Some(e);
        row.loss = Some(1.0 - e);
        row.split = split;
        if split.is_none() {
            row.note = Some("no diagnostic shares on both sides: the loss is not split".into());
        }
    }
    row
}
