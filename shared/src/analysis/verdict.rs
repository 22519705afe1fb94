//! Conclusions: the sweet spot of a sweep, stall attribution by the
//! differential method with the input-bound verdict, the overlap the
//! diagnostic barriers removed, the OOM plausibility check, and one verdict
//! per experiment with the figure it rests on.

use crate::analysis::metric::*;
use crate::analysis::units::{group_thousands, show_bytes, show_percent, show_ratio};
use crate::format::*;

/// Default sweet-spot threshold: 95% of the best whole-run throughput.
pub const DEFAULT_SWEET_SPOT_THRESHOLD: f64 = 0.95;

/// The smallest swept value whose whole-run throughput reaches a threshold of
/// the best.
#[derive(Debug, Clone, PartialEq)]
pub struct SweetSpot {
    pub param: String,
    pub threshold: f64,
    pub phase: Phase,
    pub config_id: String,
    pub value: f64,
    pub rate: f64,
    /// rate ÷ best rate.
    pub fraction_of_best: f64,
    pub best_config_id: String,
    pub best_value: f64,
    pub best_rate: f64,
    /// Peak allocated (device) or, without one, host peak RSS, at the sweet spot and at the best.
    pub memory_bytes: Option<f64>,
    pub best_memory_bytes: Option<f64>,
    pub memory_metric: Option<Metric>,
}

/// Sweet spot of an experiment over its first swept parameter (`None` when
/// the parameter is not numeric or there are no whole-run figures).
pub fn sweet_spot(e: &Experiment, threshold: f64) -> Option<SweetSpot> {
    let param = e.swept.first()?.clone();
    let phase = preferred_phase(e);
    let key = MetricKey::new(throughput_metric(e), TimingMode::WholeRun, phase);
    let points: Vec<(&Configuration, f64, f64)> = e
        .configurations
        .iter()
        .filter_map(|c| Some((c, c.params.get(&param)?.as_f64()?, metric_value(c, &key)?)))
        .collect();
    let (best_c, best_value, best_rate) =
        points.iter().copied().max_by(|a, b| a.2.total_cmp(&b.2))?;
    let (c, value, rate) = points
        .iter()
        .copied()
        .filter(|p| p.2 >= threshold * best_rate)
        .min_by(|a, b| a.1.total_cmp(&b.1))?;
    let memory_metric = [Metric::PeakAllocatedBytes, Metric::HostPeakRssBytes]
        .into_iter()
        .find(|m| has_metric(e, &MetricKey::new(*m, TimingMode::WholeRun, phase)));
    let mem = |c: &Configuration| {
        memory_metric.and_then(|m| metric_value(c, &MetricKey::new(m, TimingMode::WholeRun, phase)))
    };
    Some(SweetSpot {
        param,
        threshold,
        phase,
        config_id: c.id.clone(),
        value,
        rate,
        fraction_of_best: rate / best_rate,
        best_config_id: best_c.id.clone(),
        best_value,
        best_rate,
        memory_bytes: mem(c),
        best_memory_bytes: mem(best_c),
        memory_metric,
    })
}

/// TensorFlow's input-pipeline analyzer thresholds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum InputBound {
    /// Under 5% of the time waiting on input.
    Not,
    /// 5–20%.
    Moderately,
    /// 20% or more.
    Highly,
}

impl InputBound {
    pub fn of_share(share: f64) -> InputBound {
        if share >= 0.20 {
            InputBound::Highly
        } else if share >= 0.05 {
            InputBound::Moderately
        } else {
            InputBound::Not
        }
    }
    pub fn label(self) -> &'static str {
        match self {
            InputBound::Not => "not input-bound",
            InputBound::Moderately => "moderately input-bound",
            InputBound::Highly => "input-bound",
        }
    }
}

/// Differential stall attribution (compute-only vs from host vs full pipeline).
#[derive(Debug, Clone, PartialEq)]
pub struct StallAttribution {
    pub phase: Phase,
    /// Whole-run samples/s of each way.
    pub compute_only: f64,
    pub from_host: f64,
    pub full_pipeline: f64,
    /// 1 − from_host / compute_only.
    pub transfer_stall: f64,
    /// 1 − full_pipeline / from_host.
    pub data_stall: f64,
    /// Share of the full pipeline's epoch spent waiting on input: 1 − full / compute-only.
    pub waiting_share: f64,
    pub verdict: InputBound,
}

/// The configuration parameter naming the three ways of a stall experiment.
pub const STALL_SOURCE_PARAM: &str = "source";

/// Attribute a stall from a `stall` experiment's whole-run rates.
pub fn stall_attribution(e: &Experiment) -> Option<StallAttribution> {
    let phase = preferred_phase(e);
    let key = MetricKey::new(Metric::SamplesPerS, TimingMode::WholeRun, phase);
    let rate = |name: &str| {
        e.configurations
            .iter()
            .find(|c| matches!(c.params.get(STALL_SOURCE_PARAM), Some(ParamValue::Text(s)) if s == name))
            .and_then(|c| metric_value(c, &key))
    };
    let (r1, r2, r3) = (
        rate("compute_only")?,
        rate("from_host")?,
        rate("full_pipeline")?,
    );
    if r1 <= 0.0 || r2 <= 0.0 {
        return None;
    }
    let waiting_share = (1.0 - r3 / r1).max(0.0);
    Some(StallAttribution {
        phase,
        compute_only: r1,
        from_host: r2,
        full_pipeline: r3,
        transfer_stall: 1.0 - r2 / r1,
        data_stall: 1.0 - r3 / r2,
        waiting_share,
        verdict: InputBound::of_share(waiting_share),
    })
}

/// How much overlap the diagnostic barriers removed, for one configuration.
#[derive(Debug, Clone, PartialEq)]
pub struct BarrierOverhead {
    pub phase: Phase,
    pub whole_run_epoch_s: f64,
    pub diagnostic_epoch_s: f64,
    pub steps: f64,
    /// (diagnostic − whole-run) epoch seconds per step.
    pub per_step_s: f64,
    pub whole_run_samples_per_s: Option<f64>,
    pub diagnostic_samples_per_s: Option<f64>,
}

/// Compare the two modes' epoch times of one configuration (medians).
pub fn barrier_overhead(c: &Configuration, phase: Phase) -> Option<BarrierOverhead> {
    let w = metric_value(
        c,
        &MetricKey::new(Metric::EpochS, TimingMode::WholeRun, phase),
    )?;
    let d = metric_value(
        c,
        &MetricKey::new(Metric::EpochS, TimingMode::Diagnostic, phase),
    )?;
    let steps = metric_value(
        c,
        &MetricKey::new(Metric::Steps, TimingMode::WholeRun, phase),
    )
    .or_else(|| {
        metric_value(
            c,
            &MetricKey::new(Metric::Steps, TimingMode::Diagnostic, phase),
        )
    })?;
    (steps > 0.0).then(|| BarrierOverhead {
        phase,
        whole_run_epoch_s: w,
        diagnostic_epoch_s: d,
        steps,
        per_step_s: (d - w) / steps,
        whole_run_samples_per_s: metric_value(
            c,
            &MetricKey::new(Metric::SamplesPerS, TimingMode::WholeRun, phase),
        ),
        diagnostic_samples_per_s: metric_value(
            c,
            &MetricKey::new(Metric::SamplesPerS, TimingMode::Diagnostic, phase),
        ),
    })
}

/// Parse quantities such as `588.00 MiB` or `17179869184.00 GiB` out of text.
pub fn quantities_in(text: &str) -> Vec<(String, f64)> {
    let mut out = Vec::new();
    let tokens: Vec<&str> = text
        .split(|c: char| c.is_whitespace() || c == '(' || c == ')' || c == ';' || c == ',')
        .filter(|t| !t.is_empty())
        .collect();
    for w in tokens.windows(2) {
        let Ok(n) = w[0].parse::<f64>() else { continue };
        let unit = w[1].trim_end_matches(['.', ':']);
        let mult = match unit {
            "B" | "bytes" => 1.0,
            "KiB" => 1024.0,
            "MiB" => 1024.0 * 1024.0,
            "GiB" => 1024.0 * 1024.0 * 1024.0,
            "TiB" => 1024.0f64.powi(4),
            "KB" => 1e3,
            "MB" => 1e6,
            "GB" => 1e9,
            "TB" => 1e12,
            _ => continue,
        };
        if n.is_finite() && n >= 0.0 {
            out.push((format!("{} {}", w[0], unit), n * mult));
        }
    }
    out
}

/// Check the numbers of an OOM error against the hardware: any quantity in
/// the message larger than the device's total memory is impossible.
pub fn oom_plausibility(oom: &OomFailure) -> Plausibility {
    let mut quantities = oom
        .message
        .as_deref()
        .map(quantities_in)
        .unwrap_or_default();
    for q in &oom.message_quantities {
        quantities.extend(quantities_in(q));
    }
    let Some(total) = oom.device_total_bytes.filter(|t| *t > 0) else {
        return Plausibility {
            verdict: PlausibilityVerdict::Unknown,
            findings: vec!["the device's total memory is not known, so the message's numbers cannot be checked".into()],
        };
    };
    let total = total as f64;
    let mut findings = Vec::new();
    for (text, bytes) in &quantities {
        if *bytes > total * 1.01 {
            findings.push(format!(
                "{text} in the message is more than the device's total memory ({}): impossible",
                show_bytes(total)
            ));
        }
    }
    if let (Some(cap), Some(frac)) = (oom.cap_bytes, oom.memory_fraction) {
        let expect = frac * total;
        if (cap as f64 - expect).abs() > 0.05 * expect {
            findings.push(format!(
                "the cap {} is not {:.2} × the device total {}",
                show_bytes(cap as f64),
                frac,
                show_bytes(total)
            ));
        }
    }
    if quantities.is_empty() && oom.cap_bytes.is_none() {
        return Plausibility {
            verdict: PlausibilityVerdict::Unknown,
            findings: vec!["the message has no quantities to check".into()],
        };
    }
    let verdict = if findings.is_empty() {
        PlausibilityVerdict::Plausible
    } else {
        PlausibilityVerdict::Implausible
    };
    if findings.is_empty() {
        findings.push(format!(
            "every quantity in the message fits the device's {}",
            show_bytes(total)
        ));
    }
    Plausibility { verdict, findings }
}

/// One verdict per experiment, with the figure it rests on.
#[derive(Debug, Clone, PartialEq)]
pub struct Verdict {
    /// One sentence.
    pub headline: String,
    /// The figure(s) it rests on, with their mode.
    pub figure: String,
    /// The timing mode of the figure (`None` for memory or failures).
    pub mode: Option<TimingMode>,
}

fn param_text(c: &Configuration, swept: &[String]) -> String {
    if swept.is_empty() {
        return c.label.clone();
    }
    swept
        .iter()
        .filter_map(|p| c.params.get(p).map(|v| format!("{p} {v}")))
        .collect::<Vec<_>>()
        .join(", ")
}

/// A configuration named by its swept values, or by its label where another
/// configuration of the experiment has the same values (a job's own
/// settings read back as `num_workers 0` beside a sweep point of 0) or it
/// has none.
fn config_name(e: &Experiment, c: &Configuration) -> String {
    let text = param_text(c, &e.swept);
    let shared = e
        .configurations
        .iter()
        .any(|o| o.id != c.id && param_text(o, &e.swept) == text);
    if shared || text.is_empty() {
        c.label.clone()
    } else {
        text
    }
}

fn rate_text(e: &Experiment, v: f64) -> String {
    if throughput_metric(e) == Metric::BytesPerS {
        // IEC, as every byte figure (units.rs).
        crate::analysis::units::Unit::for_values(Metric::BytesPerS.quantity(), &[v]).show(v)
    } else {
        format!("{} samples/s", group_thousands(&format!("{v:.0}")))
    }
}

/// For an experiment of a kind from a newer format: the note that says so,
/// with the bundle's version when the caller has it. `None` for a known kind.
pub fn unknown_kind_note(e: &Experiment, version: Option<SchemaVersion>) -> Option<String> {
    let kind = e.kind.unknown()?;
    let version = match version {
        Some(v) => v.to_string(),
        None => format!("newer than {}", SchemaVersion::CURRENT),
    };
    Some(format!(
        "experiment kind {kind:?} is from a newer format ({version}); shown as a plain table"
    ))
}

/// The verdict of an experiment (`None` when it has nothing to conclude from;
/// a kind from a newer format gets [`unknown_kind_note`] and its fastest
/// configuration).
pub fn verdict(e: &Experiment) -> Option<Verdict> {
    verdict_at(e, None)
}

/// [`verdict`], naming the bundle's format version for a kind from a newer
/// format (the viewer and the CLI have the bundle at hand).
pub fn verdict_in(e: &Experiment, version: SchemaVersion) -> Option<Verdict> {
    verdict_at(e, Some(version))
}

/// The experiment's verdict followed by its cost verdict
/// ([`crate::analysis::cost_verdict`]), when the runs have cost figures.
fn verdict_at(e: &Experiment, version: Option<SchemaVersion>) -> Option<Verdict> {
    let v = verdict_of_kind(e, version);
    if e.not_applicable.is_some() {
        return v;
    }
    let Some(cost) = crate::analysis::cost_verdict(e) else {
        return v;
    };
    Some(match v {
        Some(mut v) => {
            v.headline = format!("{} {cost}", v.headline);
            v
        }
        None => Verdict {
            headline: cost,
            figure: format!("whole-run {} epochs: CPU cost", preferred_phase(e).as_str()),
            mode: Some(TimingMode::WholeRun),
        },
    })
}

fn verdict_of_kind(e: &Experiment, version: Option<SchemaVersion>) -> Option<Verdict> {
    if let Some(reason) = &e.not_applicable {
        return Some(Verdict {
            headline: format!("Not applicable here: {reason}"),
            figure: "no measurement".into(),
            mode: None,
        });
    }
    let phase = preferred_phase(e);
    if let Some((mut headline, figure, base)) = crate::analysis::floored::floored_verdict(e, phase)
    {
        if let Some(c) = e.configuration(&base) {
            headline.push_str(&wait_note(e, c, phase));
        }
        return Some(Verdict {
            headline,
            figure,
            mode: Some(TimingMode::WholeRun),
        });
    }
    match e.kind {
        ExperimentKind::Unknown(_) => {
            let fastest = fastest_verdict(e, phase);
            Some(Verdict {
                headline: unknown_kind_note(e, version)?,
                figure: fastest.as_ref().map_or_else(
                    || "no figure this build can judge".to_string(),
                    |v| v.figure.clone(),
                ),
                mode: fastest.and_then(|v| v.mode),
            })
        }
        ExperimentKind::Stall => stall_verdict(e, phase),
        ExperimentKind::OomProbe => oom_verdict(e),
        ExperimentKind::BatchSweep | ExperimentKind::Transfer => {
            sweet_spot_verdict(e, phase).or_else(|| fastest_verdict(e, phase))
        }
        _ => fastest_verdict(e, phase),
    }
}

/// The stall experiment's attribution by difference.
fn stall_verdict(e: &Experiment, phase: Phase) -> Option<Verdict> {
    let s = stall_attribution(e)?;
    Some(Verdict {
        headline: format!(
            "{}: the loop waited for input {} of the epoch (transfer {}, data {}).",
            capitalize(s.verdict.label()),
            show_percent(s.waiting_share),
            show_percent(s.transfer_stall.max(0.0)),
            show_percent(s.data_stall.max(0.0))
        ),
        figure: format!(
            "whole-run {} epochs: compute-only {}, from host {}, full pipeline {} samples/s",
            phase.as_str(),
            group_thousands(&format!("{:.0}", s.compute_only)),
            group_thousands(&format!("{:.0}", s.from_host)),
            group_thousands(&format!("{:.0}", s.full_pipeline))
        ),
        mode: Some(TimingMode::WholeRun),
    })
}

/// A batch sweep's (or a transfer's) sweet spot, when it has one.
fn sweet_spot_verdict(e: &Experiment, phase: Phase) -> Option<Verdict> {
    let s = sweet_spot(e, DEFAULT_SWEET_SPOT_THRESHOLD)?;
    let mem = match (s.memory_bytes, s.best_memory_bytes, s.memory_metric) {
        (Some(a), Some(b), Some(m))
            if s.config_id != s.best_config_id && (a - b).abs() > 0.01 * b.abs() =>
        {
            format!(
                " with {} {} instead of {}",
                show_bytes(a),
                m.label(),
                show_bytes(b)
            )
        }
        _ => String::new(),
    };
    let best = s.config_id == s.best_config_id;
    let headline = if best {
        format!(
            "Best at {} {}; no smaller value reaches {:.0}% of it.",
            s.param,
            s.value,
            s.threshold * 100.0
        )
    } else {
        format!(
            "Sweet spot: {} {} reaches {} of the best whole-run throughput ({} {}){mem}.",
            s.param,
            s.value,
            show_percent(s.fraction_of_best),
            s.param,
            s.best_value
        )
    };
    let figure = if best {
        format!(
            "whole-run {}: {} at {} {}, the best of {} configurations",
            phase.as_str(),
            rate_text(e, s.best_rate),
            s.param,
            s.best_value,
            e.configurations.len()
        )
    } else {
        format!(
            "whole-run {}: {} at {} {} vs {} at {} {} (threshold {:.0}%)",
            phase.as_str(),
            rate_text(e, s.rate),
            s.param,
            s.value,
            rate_text(e, s.best_rate),
            s.param,
            s.best_value,
            s.threshold * 100.0
        )
    };
    Some(Verdict {
        headline,
        figure,
        mode: Some(TimingMode::WholeRun),
    })
}

/// The diagnostic wait of the baseline `c` in a loader experiment, as a
/// sentence to follow a headline (empty when unknown).
fn wait_note(e: &Experiment, c: &Configuration, phase: Phase) -> String {
    let wait_key = MetricKey::new(Metric::WaitShare, TimingMode::Diagnostic, phase);
    match metric_value(c, &wait_key) {
        Some(share) if e.kind == ExperimentKind::Loader => format!(
            " Diagnostic runs (synchronized at every stage): at {} the loop waited for data {} \
             of each step ({}).",
            config_name(e, c),
            show_percent(share),
            InputBound::of_share(share).label()
        ),
        _ => String::new(),
    }
}

fn fastest_verdict(e: &Experiment, phase: Phase) -> Option<Verdict> {
    let key = MetricKey::new(throughput_metric(e), TimingMode::WholeRun, phase);
    let rates: Vec<(&Configuration, f64)> = e
        .configurations
        .iter()
        .filter_map(|c| Some((c, metric_value(c, &key)?)))
        .collect();
    let (best, best_rate) = rates.iter().copied().max_by(|a, b| a.1.total_cmp(&b.1))?;
    let base = e
        .baseline
        .as_deref()
        .and_then(|b| rates.iter().find(|(c, _)| c.id == b))
        .or_else(|| rates.first())
        .copied();
    // "Fastest" only where there was a choice.
    let mut headline = if rates.len() == 1 {
        let of = if e.configurations.len() > 1 {
            format!(
                ", the only one of {} configurations with a figure",
                e.configurations.len()
            )
        } else {
            String::new()
        };
        format!(
            "{} ran at {}{of}",
            config_name(e, best),
            rate_text(e, best_rate)
        )
    } else {
        format!(
            "Fastest: {} at {}",
            config_name(e, best),
            rate_text(e, best_rate)
        )
    };
    if let Some((bc, br)) = base.filter(|(bc, _)| bc.id != best.id) {
        headline.push_str(&format!(
            " ({} {})",
            show_ratio(best_rate / br),
            config_name(e, bc)
        ));
    }
    headline.push('.');
    if let Some((bc, _)) = base {
        headline.push_str(&wait_note(e, bc, phase));
    }
    Some(Verdict {
        headline,
        figure: format!(
            "whole-run {} median of {} configuration{}",
            phase.as_str(),
            rates.len(),
            if rates.len() == 1 { "" } else { "s" }
        ),
        mode: Some(TimingMode::WholeRun),
    })
}

fn oom_verdict(e: &Experiment) -> Option<Verdict> {
    let param = e
        .swept
        .first()
        .cloned()
        .unwrap_or_else(|| "batch_size".into());
    let value = |c: &Configuration| c.params.get(&param).and_then(ParamValue::as_f64);
    let largest_ok = e
        .configurations
        .iter()
        .filter(|c| c.failure.is_none() && !c.runs.is_empty())
        .filter_map(|c| Some((c, value(c)?)))
        .max_by(|a, b| a.1.total_cmp(&b.1));
    let first_fail = e
        .configurations
        .iter()
        .filter_map(|c| match &c.failure {
            Some(Failure::OutOfMemory(o)) => Some((c, value(c)?, o)),
            _ => None,
        })
        .min_by(|a, b| a.1.total_cmp(&b.1));
    let mut headline = String::new();
    if let Some((c, v)) = largest_ok {
        headline.push_str(&format!("Largest {param} that fit: {v}"));
        let key = MetricKey::new(
            Metric::PeakAllocatedBytes,
            TimingMode::WholeRun,
            preferred_phase(e),
        );
        if let Some(m) = metric_value(c, &key) {
            headline.push_str(&format!(" ({} peak allocated)", show_bytes(m)));
        }
        headline.push_str(". ");
    }
    let mut figure = String::from("controlled OOM");
    if let Some((_, v, o)) = first_fail {
        headline.push_str(&format!("{param} {v} ran out of memory"));
        if let Some(r) = o.requested_bytes {
            headline.push_str(&format!(" asking {} more", show_bytes(r as f64)));
        }
        if let Some(cap) = o.cap_bytes {
            headline.push_str(&format!(" under a cap of {}", show_bytes(cap as f64)));
            figure = format!("allocator cap {}", show_bytes(cap as f64));
            if let Some(f) = o.memory_fraction {
                figure.push_str(&format!(" (memory fraction {f})"));
            }
        }
        headline.push('.');
        let p = o
            .plausibility
            .clone()
            .unwrap_or_else(|| oom_plausibility(o));
        if p.verdict == PlausibilityVerdict::Implausible {
            headline.push_str(&format!(
                " The error message is implausible: {}.",
                p.findings.join("; ")
            ));
        }
    }
    if headline.is_empty() {
        return None;
    }
    Some(Verdict {
        headline: headline.trim().to_string(),
        figure,
        mode: None,
    })
}

fn capitalize(s: &str) -> String {
    let mut c = s.chars();
    match c.next() {
        Some(f) => f.to_uppercase().collect::<String>() + c.as_str(),
        None => String::new(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_configuration_sharing_its_swept_values_is_named_by_its_label() {
        use crate::format::{ExperimentKind, Run, WholeRun};
        let config = |id: &str, label: &str, workers: i64, rate: u64| {
            let mut r = Run::new(format!("{id}-r"), TimingMode::WholeRun, 0, 1, Phase::Steady);
            r.whole_run = Some(WholeRun::measured(1.0, rate, 10, 0));
            Configuration::new(id, label)
                .with_param("num_workers", workers)
                .with_runs(vec![r])
        };
        let mut e = Experiment::new("job", ExperimentKind::Loader, "Your training job");
        e.swept = vec!["num_workers".into()];
        e.baseline = Some("script".into());
        e.configurations = vec![
            config("script", "the script's own settings", 0, 443),
            config("w0", "num_workers=0", 0, 433),
            config("w2", "num_workers=2", 2, 981),
        ];
        let v = fastest_verdict(&e, Phase::Steady).unwrap();
        assert_eq!(
            v.headline,
            "Fastest: num_workers 2 at 981 samples/s (2.21× the script's own settings)."
        );
        // Without the duplicate the swept values name it, as before.
        e.configurations.remove(1);
        let v = fastest_verdict(&e, Phase::Steady).unwrap();
        assert!(
            v.headline.ends_with("(2.21× num_workers 0)."),
            "{}",
            v.headline
        );
    }

    #[test]
    fn input_bound_thresholds() {
        assert_eq!(InputBound::of_share(0.049), InputBound::Not);
        assert_eq!(InputBound::of_share(0.05), InputBound::Moderately);
        assert_eq!(InputBound::of_share(0.199), InputBound::Moderately);
        assert_eq!(InputBound::of_share(0.20), InputBound::Highly);
    }

    #[test]
    fn quantities_are_parsed() {
        let q = quantities_in(
            "Tried to allocate 588.00 MiB. GPU 0 has a total capacity of 15.92 GiB; this process has 17179869184.00 GiB memory in use.",
        );
        let texts: Vec<&str> = q.iter().map(|(t, _)| t.as_str()).collect();
        assert_eq!(texts, ["588.00 MiB", "15.92 GiB", "17179869184.00 GiB"]);
        assert_eq!(q[0].1, 588.0 * 1024.0 * 1024.0);
    }

    #[test]
    fn impossible_quantity_is_flagged() {
        let mut oom = OomFailure {
            device_total_bytes: Some((16_302.6 * 1048576.0) as u64),
            message: Some(
                "Tried to allocate 588.00 MiB; this process has 17179869184.00 GiB memory in use"
                    .into(),
            ),
            ..Default::default()
        };
        let p = oom_plausibility(&oom);
        assert_eq!(p.verdict, PlausibilityVerdict::Implausible);
        assert!(
            p.findings[0].contains("17179869184.00 GiB"),
            "{:?}",
            p.findings
        );
        oom.message =
            Some("Tried to allocate 588.00 MiB; this process has 3.15 GiB memory in use".into());
        assert_eq!(
            oom_plausibility(&oom).verdict,
            PlausibilityVerdict::Plausible
        );
        oom.device_total_bytes = None;
        assert_eq!(oom_plausibility(&oom).verdict, PlausibilityVerdict::Unknown);
    }
}
