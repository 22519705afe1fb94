//! What a configuration's throughput costs besides time (format 1.2): CPU-
//! seconds per 1,000 samples, cores busy, peak memory of every process and
//! the sampled GPU utilisation, and the cost verdict of an experiment against
//! its baseline (with the warning that a higher GPU utilisation without a
//! shorter whole-run epoch is not an improvement).

use crate::analysis::metric::{Metric, MetricKey, metric_summary, metric_value, preferred_phase};
use crate::analysis::noise::{RatioDifference, RatioOf, compare_configurations, job_noise_floor};
pub use crate::analysis::run_cost::{
    cpu_s_per_1000_samples, peak_rss_all_bytes, run_samples, timeline_mean,
};
use crate::analysis::summary::Summary;
use crate::analysis::units::{show_percent, show_ratio};
use crate::format::{Configuration, Experiment, NoiseFloor, Phase, Run, TimingMode};

/// A rise of the mean GPU utilisation smaller than this (a share, 5 points)
/// is not called a rise.
pub const GPU_UTILIZATION_RISE: f64 = 0.05;

/// The cost figures of one configuration, read from runs of one timing mode
/// and phase (whole-run by default: diagnostic runs pay for their barriers).
#[derive(Debug, Clone, PartialEq)]
pub struct CostSummary {
    pub mode: TimingMode,
    pub phase: Phase,
    /// CPU-seconds of every process per 1,000 samples, over the runs.
    pub cpu_s_per_1000_samples: Option<Summary>,
    /// CPU-seconds ÷ wall seconds per run (cores busy on average), over the runs.
    pub cpu_cores_mean: Option<Summary>,
    /// The largest of the runs' host peak RSS + worker processes' peak RSS.
    pub peak_rss_all_bytes: Option<f64>,
    /// Median over the runs of the mean sampled GPU utilisation, in percent.
    pub gpu_utilization_mean_percent: Option<f64>,
    /// Median over the runs of the mean sampled host CPU, in cores (the
    /// timeline's view; `cpu_cores_mean` is the counters' over the epoch).
    pub host_cpu_mean_cores: Option<f64>,
}

/// [`cost_summary_at`] of a configuration's whole-run runs in its
/// experiment's phase ([`preferred_phase`]), as the cost columns and the
/// cost verdict read them: every row of a table in one phase.
pub fn cost_summary(e: &Experiment, c: &Configuration) -> CostSummary {
    cost_summary_at(c, TimingMode::WholeRun, preferred_phase(e))
}

/// The cost figures of a configuration's runs of one mode and phase.
pub fn cost_summary_at(c: &Configuration, mode: TimingMode, phase: Phase) -> CostSummary {
    let key = |m| MetricKey::new(m, mode.clone(), phase);
    let host_cores: Vec<f64> = c
        .runs
        .iter()
        .filter(|r| r.phase == phase && r.timing_mode == mode)
        .filter_map(timeline_cpu_cores_mean)
        .collect();
    CostSummary {
        cpu_s_per_1000_samples: metric_summary(c, &key(Metric::CpuSPer1000Samples)),
        cpu_cores_mean: metric_summary(c, &key(Metric::CpuCoresMean)),
        peak_rss_all_bytes: metric_value(c, &key(Metric::PeakRssAllBytes)),
        gpu_utilization_mean_percent: metric_value(c, &key(Metric::GpuUtilizationMean))
            .map(|s| s * 100.0),
        host_cpu_mean_cores: Summary::of(&host_cores).map(|s| s.median),
        mode,
        phase,
    }
}

/// The timeline's mean host CPU of a run, in cores.
pub fn timeline_cpu_cores_mean(r: &Run) -> Option<f64> {
    let t = r.timeline.as_ref()?;
    let v: Vec<f64> = t.host_cpu_cores.iter().map(|&c| f64::from(c)).collect();
    timeline_mean(&t.t_ms, &v)
}

/// ` (samples/s within the 15% noise floor; costs less CPU beyond the 13%
/// CPU floor)`: both ratios of `b` against `a` judged against the job's A/A
/// floor, the rule its throughput verdict follows.
fn against_floor(e: &Experiment, a: &str, b: &str, floor: &NoiseFloor) -> String {
    let rate = compare_configurations(e, a, b, floor, RatioOf::Rate);
    let cpu = compare_configurations(e, a, b, floor, RatioOf::CpuCost);
    let rate = match rate.map(|v| v.difference) {
        Some(RatioDifference::NoMeasurableDifference) => {
            format!(
                "samples/s within the {} noise floor",
                show_percent(floor.rate_floor)
            )
        }
        Some(_) => format!(
            "samples/s beyond the {} noise floor",
            show_percent(floor.rate_floor)
        ),
        None => "samples/s not judged (too few repeats)".to_string(),
    };
    let cpu = match (cpu, floor.cpu_floor) {
        (Some(v), Some(f)) => {
            let side = match v.difference {
                RatioDifference::NoMeasurableDifference => "within",
                _ => "beyond",
            };
            format!(
                "{} {side} the {} CPU floor",
                v.difference.cost_word(),
                show_percent(f)
            )
        }
        _ => "CPU not judged (no CPU floor)".to_string(),
    };
    format!(" ({rate}; {cpu})")
}

/// The cost verdict of an experiment against its baseline (the experiment's,
/// else its first configuration), from whole-run runs of the preferred
/// phase: the fastest other configuration's throughput against its CPU per
/// sample ("4 threads: 1.90× the samples/s for 2.10× the CPU-seconds per
/// sample"), and for every configuration whose mean GPU utilisation rose by
/// [`GPU_UTILIZATION_RISE`] or more while its whole-run epoch did not get
/// shorter beyond the noise (the larger spread of the two), a warning.
/// `None` when the experiment has no such figures.
pub fn cost_verdict(e: &Experiment) -> Option<String> {
    let phase = preferred_phase(e);
    let key = |m| MetricKey::new(m, TimingMode::WholeRun, phase);
    let base = e
        .baseline
        .as_deref()
        .and_then(|b| e.configuration(b))
        .or_else(|| e.configurations.first())?;
    let mut out: Vec<String> = Vec::new();
    let (rate, cpu) = (key(Metric::SamplesPerS), key(Metric::CpuSPer1000Samples));
    if let (Some(br), Some(bc)) = (metric_value(base, &rate), metric_value(base, &cpu))
        && br > 0.0
        && bc > 0.0
    {
        let floor = job_noise_floor(e);
        let fastest = e
            .configurations
            .iter()
            .filter(|c| c.id != base.id && floor.as_ref().is_none_or(|f| c.id != f.b))
            .filter_map(|c| Some((c, metric_value(c, &rate)?, metric_value(c, &cpu)?)))
            .max_by(|a, b| a.1.total_cmp(&b.1));
        if let Some((c, r, cs)) = fastest {
            let judged = floor
                .as_ref()
                .map_or(String::new(), |f| against_floor(e, &base.id, &c.id, f));
            out.push(format!(
                "{}: {} the samples/s for {} the CPU-seconds per sample of {}{judged}.",
                c.label,
                show_ratio(r / br),
                show_ratio(cs / bc),
                base.label
            ));
        }
    }
    let (util, epoch) = (key(Metric::GpuUtilizationMean), key(Metric::EpochS));
    if let (Some(bu), Some(be)) = (metric_value(base, &util), metric_summary(base, &epoch)) {
        for c in e.configurations.iter().filter(|c| c.id != base.id) {
            let (Some(u), Some(ce)) = (metric_value(c, &util), metric_summary(c, &epoch)) else {
                continue;
            };
            let noise = be.spread.max(ce.spread);
            let shorter = ce.median < be.median * (1.0 - noise);
            if u - bu >= GPU_UTILIZATION_RISE && !shorter {
                out.push(format!(
                    "{}: GPU utilisation rose from {} to {} but the whole-run epoch did not get shorter ({:.3} s against {:.3} s): not an improvement.",
                    c.label,
                    show_percent(bu),
                    show_percent(u),
                    ce.median,
                    be.median
                ));
            }
        }
    }
    (!out.is_empty()).then(|| out.join(" "))
}
