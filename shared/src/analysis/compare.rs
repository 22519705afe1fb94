//! Two bundles side by side: experiments matched by id, configurations by id,
//! whole-run throughput compared (never a diagnostic figure against a
//! whole-run one), regressions beyond a threshold, the differences of
//! machine and settings listed (grouped for reading in `differences`), and
//! for two bundles of one training job the diagnosis and whole-run step
//! before and after (`before_after`). A merged bundle is read as its job
//! (`merge::job_view`); its scaling against the other side is
//! `analysis::compare_scaling`.

use crate::analysis::metric::*;
use crate::analysis::summary::Summary;
use crate::format::*;
use crate::merge::job_view;

mod before_after;
mod differences;
mod sides;

pub use before_after::*;
pub use differences::*;
pub use sides::*;

/// How a configuration moved from BASE to NEW.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Change {
    /// Faster beyond the threshold.
    Faster,
    /// Within the threshold either way.
    Same,
    /// Slower beyond the threshold: a regression.
    Slower,
    /// Within the noise of either side (spread over 10%) — shown as `~`.
    Noise,
}

/// One configuration present in either bundle.
#[derive(Debug, Clone, PartialEq)]
pub struct CompareRow {
    pub config_id: String,
    pub label: String,
    pub base: Option<Summary>,
    pub new: Option<Summary>,
    /// new ÷ base of the medians.
    pub ratio: Option<f64>,
    pub change: Option<Change>,
    /// Why a side is missing or not comparable.
    pub note: Option<String>,
}

/// One experiment present in either bundle.
#[derive(Debug, Clone, PartialEq)]
pub struct ExperimentComparison {
    pub experiment_id: String,
    pub title: String,
    pub metric: Metric,
    pub phase: Option<Phase>,
    pub rows: Vec<CompareRow>,
    /// Why the experiment as a whole could not be compared.
    pub note: Option<String>,
    /// Settings that differ between the two (name, base, new); read them
    /// grouped with [`ExperimentComparison::settings`].
    pub setting_differences: Vec<Difference>,
    /// Two bundles of one training job: the diagnosis and the whole-run
    /// step, before and after.
    pub before_after: Option<BeforeAfter>,
}

impl ExperimentComparison {
    /// The settings that differ, grouped: both sides' values, then the
    /// names only one side states.
    pub fn settings(&self) -> DifferenceGroups {
        DifferenceGroups::of(&self.setting_differences)
    }
}

/// The whole comparison.
#[derive(Debug, Clone, PartialEq)]
pub struct BundleComparison {
    pub threshold_percent: f64,
    pub experiments: Vec<ExperimentComparison>,
    /// Machine and software differences; read them grouped with
    /// [`BundleComparison::machine`].
    pub environment_differences: Vec<Difference>,
    /// The job's own differences (its world size): not the machine's.
    pub job_differences: Vec<Difference>,
    /// Which is which: both sides' titles, dates, runners and commits.
    pub sides: Sides,
}

impl BundleComparison {
    /// The machine and software differences, grouped.
    pub fn machine(&self) -> DifferenceGroups {
        DifferenceGroups::of(&self.environment_differences)
    }

    /// The job's own differences, grouped.
    pub fn job(&self) -> DifferenceGroups {
        DifferenceGroups::of(&self.job_differences)
    }

    /// Rows slower than BASE beyond the threshold (the CI gate).
    pub fn regressions(&self) -> Vec<(&ExperimentComparison, &CompareRow)> {
        self.experiments
            .iter()
            .flat_map(|e| e.rows.iter().map(move |r| (e, r)))
            .filter(|(_, r)| r.change == Some(Change::Slower))
            .collect()
    }
}

/// Compare NEW against BASE; `threshold_percent` of whole-run throughput.
pub fn compare_bundles(base: &Bundle, new: &Bundle, threshold_percent: f64) -> BundleComparison {
    let differences = environment_differences(base, new);
    let job = job_differences(base, new);
    let sides = compare_sides(base, new);
    // A merged bundle's figures are its job's, never one rank's pooled.
    let (base, new) = (job_view(base), job_view(new));
    let mut experiments = Vec::new();
    let mut ids: Vec<&str> = base.experiments.iter().map(|e| e.id.as_str()).collect();
    for e in &new.experiments {
        if !ids.contains(&e.id.as_str()) {
            ids.push(&e.id);
        }
    }
    for id in ids {
        experiments.push(compare_experiment(
            base.experiment(id),
            new.experiment(id),
            threshold_percent,
        ));
    }
    BundleComparison {
        threshold_percent,
        experiments,
        environment_differences: differences,
        job_differences: job,
        sides,
    }
}

fn compare_experiment(
    base: Option<&Experiment>,
    new: Option<&Experiment>,
    threshold: f64,
) -> ExperimentComparison {
    let any = base.or(new).expect("one side exists");
    let metric = throughput_metric(any);
    let mut out = ExperimentComparison {
        experiment_id: any.id.clone(),
        title: any.title.clone(),
        metric,
        phase: None,
        rows: Vec::new(),
        note: None,
        setting_differences: Vec::new(),
        before_after: None,
    };
    let (Some(b), Some(n)) = (base, new) else {
        out.note = Some(format!(
            "only in {}",
            if base.is_some() { "BASE" } else { "NEW" }
        ));
        return out;
    };
    if let Some(reason) = b.not_applicable.as_ref().or(n.not_applicable.as_ref()) {
        out.note = Some(format!("not applicable: {reason}"));
        return out;
    }
    out.setting_differences = setting_differences(b, n);
    out.before_after = before_after(b, n);
    // The phase both sides have whole-run figures for: steady first.
    let has =
        |e: &Experiment, p: Phase| has_metric(e, &MetricKey::new(metric, TimingMode::WholeRun, p));
    let phase = [Phase::Steady, Phase::Cold]
        .into_iter()
        .find(|p| has(b, *p) && has(n, *p));
    out.phase = phase;
    let Some(phase) = phase else {
        out.note = Some(not_comparable_note(b, n, metric));
        return out;
    };
    let key = MetricKey::new(metric, TimingMode::WholeRun, phase);
    let mut config_ids: Vec<&str> = b.configurations.iter().map(|c| c.id.as_str()).collect();
    for c in &n.configurations {
        if !config_ids.contains(&c.id.as_str()) {
            config_ids.push(&c.id);
        }
    }
    for cid in config_ids {
        let bc = b.configuration(cid);
        let nc = n.configuration(cid);
        let label = bc.or(nc).map(|c| c.label.clone()).unwrap_or_default();
        let bs = bc.and_then(|c| metric_summary(c, &key));
        let ns = nc.and_then(|c| metric_summary(c, &key));
        let mut row = CompareRow {
            config_id: cid.to_string(),
            label,
            base: bs,
            new: ns,
            ratio: None,
            change: None,
            note: None,
        };
        match (bs, ns) {
            (Some(bs), Some(ns)) => {
                let ratio = ns.median / bs.median;
                row.ratio = Some(ratio);
                let t = threshold / 100.0;
                let higher = metric.higher_is_better();
                let worse = if higher {
                    ratio < 1.0 - t
                } else {
                    ratio > 1.0 + t
                };
                let better = if higher {
                    ratio > 1.0 + t
                } else {
                    ratio < 1.0 - t
                };
                row.change = Some(if worse {
                    Change::Slower
                } else if better {
                    Change::Faster
                } else if bs.noisy || ns.noisy {
                    Change::Noise
                } else {
                    Change::Same
                });
            }
            _ => {
                row.note = Some(side_note(bc, nc, &key));
            }
        }
        out.rows.push(row);
    }
    out
}

/// The settings that differ, results left out ([`is_result_setting`]);
/// for two job experiments, the script's own DataLoader settings as read
/// back, which is the change a before/after made.
fn setting_differences(b: &Experiment, n: &Experiment) -> Vec<Difference> {
    let mut out: Vec<Difference> = map_differences(&b.settings, &n.settings)
        .into_iter()
        .filter(|d| !is_result_setting(&d.field))
        .collect();
    let script = crate::analysis::your_job::JOB_SCRIPT_ID;
    if let (Some(x), Some(y)) = (b.configuration(script), n.configuration(script)) {
        let read_back = |c: &Configuration| {
            c.params
                .iter()
                .filter_map(|(k, v)| Some((k.strip_prefix("actual_")?.to_string(), v.clone())))
                .collect()
        };
        out.extend(
            map_differences(&read_back(x), &read_back(y))
                .into_iter()
                .map(|d| Difference {
                    field: format!("{} (the script's own, as run)", d.field),
                    ..d
                }),
        );
    }
    out
}

fn side_note(bc: Option<&Configuration>, nc: Option<&Configuration>, key: &MetricKey) -> String {
    let describe = |c: Option<&Configuration>, side: &str| -> Option<String> {
        let c = match c {
            None => return Some(format!("{side} has no such configuration")),
            Some(c) => c,
        };
        if let Some(f) = &c.failure
            && metric_values(c, key).is_empty()
        {
            return Some(format!(
                "{side}: {}",
                crate::analysis::table::failure_text(f)
            ));
        }
        if metric_values(c, key).is_empty() {
            let diag = MetricKey {
                mode: TimingMode::Diagnostic,
                ..key.clone()
            };
            if !metric_values(c, &diag).is_empty() {
                let reason = key
                    .comparable_with(&diag)
                    .err()
                    .map(|e| e.reason)
                    .unwrap_or_default();
                return Some(format!("{side} has only diagnostic runs here; {reason}"));
            }
            return Some(format!(
                "{side} has no whole-run {} figure",
                key.phase.as_str()
            ));
        }
        None
    };
    [describe(bc, "BASE"), describe(nc, "NEW")]
        .into_iter()
        .flatten()
        .collect::<Vec<_>>()
        .join("; ")
}

fn not_comparable_note(b: &Experiment, n: &Experiment, metric: Metric) -> String {
    let whole = |e: &Experiment| {
        [Phase::Steady, Phase::Cold]
            .into_iter()
            .any(|p| has_metric(e, &MetricKey::new(metric, TimingMode::WholeRun, p)))
    };
    let diag = |e: &Experiment| {
        [Phase::Steady, Phase::Cold]
            .into_iter()
            .any(|p| has_metric(e, &MetricKey::new(metric, TimingMode::Diagnostic, p)))
    };
    if whole(b) != whole(n) && (diag(b) || diag(n)) {
        let a = MetricKey::new(metric, TimingMode::WholeRun, Phase::Steady);
        let d = MetricKey::new(metric, TimingMode::Diagnostic, Phase::Steady);
        return format!(
            "refused: one side has only diagnostic figures; {}",
            a.comparable_with(&d)
                .err()
                .map(|e| e.reason)
                .unwrap_or_default()
        );
    }
    if whole(b) && whole(n) {
        return "the two sides have whole-run figures of different phases (one cold only, one steady only); a first epoch is not compared with a steady one".into();
    }
    "no whole-run figures on one side".into()
}
