//! The comparison table of one experiment, in the manner of
//! `torch.utils.benchmark.Compare`: configurations as rows, one metric (and
//! one unit) per column, the best cell marked, every other cell as a ratio to
//! a baseline the reader picks, median with min–max, and noise flags. A
//! swept knob that does not apply to a configuration is "—" with its reason
//! in the footnotes; an experiment of a kind from a newer format gets the
//! plain columns of whatever it measured.

mod settings;

pub use settings::*;

use crate::analysis::metric::*;
use crate::analysis::summary::Summary;
use crate::analysis::units::Unit;
use crate::format::{Experiment, ExperimentKind, Failure, Phase, TimingMode};

/// One column: a metric of one mode and phase, with its unit.
#[derive(Debug, Clone, PartialEq)]
pub struct Column {
    pub key: MetricKey,
    pub heading: String,
    pub unit: Unit,
    pub higher_is_better: bool,
    pub explanation: &'static str,
}

/// How close a cell is to the best of its column (Compare's colours).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Closeness {
    /// Within 1.01× of the best (the best included).
    Best,
    /// Within 1.1×.
    Near,
    Middle,
    /// 2× or more off the best.
    Far,
    /// 5× or more off the best.
    VeryFar,
}

/// One cell: a summary of repeated runs.
#[derive(Debug, Clone, PartialEq)]
pub struct Cell {
    pub summary: Summary,
    /// The figure shown (median, or max for peaks).
    pub value: f64,
    /// value ÷ the baseline row's value, when the baseline has one.
    pub ratio_to_baseline: Option<f64>,
    /// The best value of the column (exactly).
    pub best: bool,
    pub closeness: Closeness,
}

/// One configuration.
#[derive(Debug, Clone, PartialEq)]
pub struct Row {
    pub config_id: String,
    pub label: String,
    /// The swept parameters' values, in `swept` order; one that does not
    /// apply to this configuration (or is absent) is [`NOT_APPLICABLE`].
    pub params: Vec<(String, String)>,
    /// The swept parameters that do not apply here, with the reason.
    pub not_applicable: Vec<(String, String)>,
    /// The failure recorded for the configuration, as text.
    pub failure: Option<String>,
    pub cells: Vec<Option<Cell>>,
}

/// The table.
#[derive(Debug, Clone, PartialEq)]
pub struct ComparisonTable {
    pub experiment_id: String,
    pub title: String,
    pub phase: Phase,
    pub baseline: Option<String>,
    pub columns: Vec<Column>,
    pub rows: Vec<Row>,
    /// What a reader must know to read the table: runs left out because
    /// their timing mode is from a newer format.
    pub notes: Vec<String>,
}

/// The text of a cell that does not apply.
pub const NOT_APPLICABLE: &str = "—";

/// Options of [`comparison_table`].
#[derive(Debug, Clone, Default)]
pub struct TableOptions {
    /// Baseline configuration id; default: the experiment's, else the first row.
    pub baseline: Option<String>,
    /// Phase of the timing columns; default: [`preferred_phase`].
    pub phase: Option<Phase>,
    /// Explicit columns; default: [`default_columns`].
    pub columns: Option<Vec<MetricKey>>,
}

/// The columns an experiment's table shows by default (only those with data).
pub fn default_columns(e: &Experiment, phase: Phase) -> Vec<MetricKey> {
    use Metric::*;
    let w = |m| MetricKey::new(m, TimingMode::WholeRun, phase);
    let d = |m| MetricKey::new(m, TimingMode::Diagnostic, phase);
    let cold = |m| MetricKey::new(m, TimingMode::WholeRun, Phase::Cold);
    let mem = |m| MetricKey::new(m, TimingMode::WholeRun, phase);
    let mut keys = match e.kind {
        ExperimentKind::BatchSweep => vec![
            w(SamplesPerS),
            w(EpochS),
            cold(EpochS),
            w(StepTimeS),
            d(StepMedianS),
            w(Steps),
            mem(PeakAllocatedBytes),
            mem(PeakReservedBytes),
            mem(HostPeakRssBytes),
        ],
        ExperimentKind::Compute => vec![
            w(SamplesPerS),
            w(EpochS),
            d(ComputeMedianS),
            mem(PeakAllocatedBytes),
            mem(HostPeakRssBytes),
        ],
        ExperimentKind::Transfer => vec![w(BytesPerS), d(TransferMedianS), d(BytesPerS)],
        ExperimentKind::Loader => vec![
            w(SamplesPerS),
            w(EpochS),
            cold(EpochS),
            d(NextWaitMeanS),
            d(WaitShare),
            d(FirstNextWaitS),
            w(TimeToFirstBatchS),
            w(Readiness),
            mem(PrefetchEstimateBytes),
            mem(HostPeakRssBytes),
        ],
        ExperimentKind::Stall => vec![
            w(SamplesPerS),
            w(EpochS),
            d(NextWaitMeanS),
            d(TransferMeanS),
            d(ComputeMeanS),
        ],
        ExperimentKind::OomProbe => vec![
            w(SamplesPerS),
            mem(PeakAllocatedBytes),
            mem(PeakReservedBytes),
        ],
        // A kind from a newer format: the plain figures it has.
        ExperimentKind::Unknown(_) => vec![
            w(SamplesPerS),
            w(EpochS),
            w(StepTimeS),
            d(StepMedianS),
            d(NextWaitMeanS),
            mem(PeakAllocatedBytes),
            mem(HostPeakRssBytes),
        ],
    };
    // Every kind: the comm stage of multi-rank runs, then what it cost.
    keys.extend([d(CommMeanS), d(CommShare)]);
    keys.extend(crate::analysis::key::COST_METRICS.map(w));
    keys.dedup();
    keys.retain(|k| has_metric(e, k));
    keys
}

/// Build the comparison table of an experiment.
pub fn comparison_table(e: &Experiment, opts: &TableOptions) -> ComparisonTable {
    let phase = opts.phase.unwrap_or_else(|| preferred_phase(e));
    let keys = opts
        .columns
        .clone()
        .unwrap_or_else(|| default_columns(e, phase));
    let baseline = opts
        .baseline
        .clone()
        .filter(|b| e.configuration(b).is_some())
        .or_else(|| e.baseline.clone().filter(|b| e.configuration(b).is_some()))
        .or_else(|| e.configurations.first().map(|c| c.id.clone()));

    let mut columns = Vec::new();
    let mut rows: Vec<Row> = e.configurations.iter().map(|c| row_of(e, c)).collect();
    for key in keys {
        columns.push(add_column(e, key, baseline.as_deref(), &mut rows));
    }
    one_time_unit(&mut columns, &rows);
    // (An unknown experiment kind is said by its verdict, `unknown_kind_note`.)
    let notes = unknown_mode_note(e)
        .into_iter()
        .chain(per_rank_note(e))
        .collect();
    ComparisonTable {
        experiment_id: e.id.clone(),
        title: e.title.clone(),
        phase,
        baseline,
        columns,
        rows,
        notes,
    }
}

/// A configuration's row, without its cells yet.
fn row_of(e: &Experiment, c: &crate::format::Configuration) -> Row {
    Row {
        config_id: c.id.clone(),
        label: c.label.clone(),
        params: e
            .swept
            .iter()
            .map(|p| {
                let v = c.params.get(p).map(|v| v.to_string());
                (p.clone(), v.unwrap_or_else(|| NOT_APPLICABLE.to_string()))
            })
            .collect(),
        not_applicable: e
            .swept
            .iter()
            .filter_map(|p| Some((p.clone(), c.not_applicable.get(p)?.clone())))
            .collect(),
        failure: c.failure.as_ref().map(failure_text),
        cells: Vec::new(),
    }
}

/// The column of `key`: each row's cell pushed, ranked and set against the
/// baseline's value.
fn add_column(e: &Experiment, key: MetricKey, baseline: Option<&str>, rows: &mut [Row]) -> Column {
    let summaries: Vec<Option<Summary>> = e
        .configurations
        .iter()
        .map(|c| metric_summary(c, &key))
        .collect();
    let values: Vec<Option<f64>> = e
        .configurations
        .iter()
        .map(|c| metric_value(c, &key))
        .collect();
    let present: Vec<f64> = values.iter().flatten().copied().collect();
    let higher = key.metric.higher_is_better();
    // A best is marked only where there is a choice: two values or more,
    // not all equal.
    let ranked = key.metric.ranked() && present.iter().any(|v| *v != present[0]);
    let best = if higher {
        present.iter().copied().fold(f64::NEG_INFINITY, f64::max)
    } else {
        present.iter().copied().fold(f64::INFINITY, f64::min)
    };
    let base_value = baseline
        .and_then(|b| e.configurations.iter().position(|c| c.id == b))
        .and_then(|i| values[i]);
    for (i, row) in rows.iter_mut().enumerate() {
        let cell = match (summaries[i], values[i]) {
            (Some(summary), Some(value)) => Some(Cell {
                summary,
                value,
                ratio_to_baseline: base_value.filter(|b| *b != 0.0).map(|b| value / b),
                best: ranked && value == best,
                closeness: if ranked {
                    closeness(value, best, higher)
                } else {
                    Closeness::Middle
                },
            }),
            _ => None,
        };
        row.cells.push(cell);
    }
    Column {
        heading: heading(e, &key),
        unit: Unit::for_values(key.metric.quantity(), &present),
        higher_is_better: higher,
        explanation: key.metric.explanation(),
        key,
    }
}

/// A column's heading; an epoch column of runs that each span several
/// epochs (a published table's "10 epochs: 32 s") says how many.
fn heading(e: &Experiment, key: &MetricKey) -> String {
    let h = key.heading();
    match (key.metric, epochs_per_run(e)) {
        (Metric::EpochS, Some(n)) => h.replacen("epoch", &format!("{n} epochs"), 1),
        _ => h,
    }
}

/// How many epochs each whole-run run spans, when more than one: the
/// experiment states `epochs` and `samples` (per epoch) and every whole-run
/// run counts `epochs × samples`.
pub fn epochs_per_run(e: &Experiment) -> Option<i64> {
    let int = |k: &str| match e.settings.get(k) {
        Some(crate::format::ParamValue::Int(n)) => Some(*n),
        _ => None,
    };
    let (epochs, samples) = (int("epochs")?, int("samples")?);
    let mut runs = e
        .configurations
        .iter()
        .flat_map(|c| &c.runs)
        .filter_map(|r| r.whole_run.as_ref())
        .peekable();
    runs.peek()?;
    (epochs > 1 && runs.all(|w| w.samples.map(|n| n as i64) == Some(epochs * samples)))
        .then_some(epochs)
}

/// One time unit per table: every duration column in the unit of the
/// columns' typical durations ([`Unit::for_columns`]; CPU time on the same
/// scale), each value with three significant digits.
fn one_time_unit(columns: &mut [Column], rows: &[Row]) {
    let values = |i: usize| -> Vec<f64> {
        rows.iter()
            .filter_map(|r| r.cells.get(i)?.as_ref().map(|c| c.value))
            .collect()
    };
    let of = |q: Quantity| -> Vec<usize> {
        (0..columns.len())
            .filter(|&i| columns[i].key.metric.quantity() == q)
            .collect()
    };
    let (durations, cpu) = (of(Quantity::Duration), of(Quantity::CpuTime));
    let typicals: Vec<f64> = durations
        .iter()
        .map(|&i| Unit::typical_of(&values(i)))
        .collect();
    if typicals.is_empty() {
        return;
    }
    let time = Unit::for_columns(Quantity::Duration, &typicals);
    let cpu_unit = Unit::for_columns(Quantity::CpuTime, &typicals);
    for (cols, unit) in [(durations, time), (cpu, cpu_unit)] {
        for i in cols {
            columns[i].unit = unit.three_digits();
        }
    }
}

fn closeness(value: f64, best: f64, higher_is_better: bool) -> Closeness {
    let factor = if higher_is_better {
        if value > 0.0 {
            best / value
        } else {
            f64::INFINITY
        }
    } else if best > 0.0 {
        value / best
    } else if value == best {
        1.0
    } else {
        f64::INFINITY
    };
    if factor <= 1.01 {
        Closeness::Best
    } else if factor <= 1.1 {
        Closeness::Near
    } else if factor >= 5.0 {
        Closeness::VeryFar
    } else if factor >= 2.0 {
        Closeness::Far
    } else {
        Closeness::Middle
    }
}

/// A failure as one line of text.
pub fn failure_text(f: &Failure) -> String {
    match f {
        Failure::OutOfMemory(o) => {
            let mut s = "out of memory".to_string();
            if let Some(r) = o.requested_bytes {
                s.push_str(&format!(
                    " (asked {} more",
                    crate::analysis::units::show_bytes(r as f64)
                ));
                if let Some(c) = o.cap_bytes {
                    s.push_str(&format!(
                        " under a cap of {}",
                        crate::analysis::units::show_bytes(c as f64)
                    ));
                }
                s.push(')');
            }
            s
        }
        Failure::WorkerError {
            worker,
            sample,
            message,
        } => {
            let mut s = "worker error".to_string();
            if let Some(w) = worker {
                s.push_str(&format!(" in worker {w}"));
            }
            if let Some(i) = sample {
                s.push_str(&format!(" at sample {i}"));
            }
            format!("{s}: {message}")
        }
        Failure::Panic { message } => format!("panicked: {message}"),
        Failure::Interrupted { message } => format!("interrupted: {message}"),
        Failure::Error { message } => format!("error: {message}"),
        Failure::Script { message, .. } => format!("your script raised {message}"),
        Failure::CommTimeout {
            operation,
            missing_ranks,
            message,
            timeout_s,
        } => {
            let missing = match missing_ranks.as_slice() {
                [] => String::new(),
                [r] => format!(", waiting for rank {r}"),
                rs => {
                    let list: Vec<String> = rs.iter().map(u32::to_string).collect();
                    format!(", waiting for ranks {}", list.join(", "))
                }
            };
            // No timeout: the ranks went out of step, found while waiting.
            let what = if timeout_s.is_some() {
                "timed out"
            } else {
                "out of step"
            };
            format!("{what} in the {operation}{missing}: {message}")
        }
        Failure::WouldNotFit { .. } | Failure::Crashed { .. } => {
            crate::analysis::fit_failure_text(f)
        }
        Failure::Unknown { kind, message } => match message {
            Some(m) => format!("{kind} (a failure kind from a newer format): {m}"),
            None => format!("{kind} (a failure kind from a newer format)"),
        },
    }
}

impl Cell {
    /// `37,332/s [36,900–37,400] (! 12%)` style text, in the column's unit.
    pub fn text(&self, unit: &Unit, with_range: bool) -> String {
        let mut s = unit.show(self.value);
        if with_range && self.summary.n > 1 {
            s.push_str(&format!(
                " [{}–{}]",
                unit.number(self.summary.min),
                unit.number(self.summary.max)
            ));
        }
        if self.summary.noisy {
            s.push_str(&format!(" (! {:.0}%)", self.summary.spread * 100.0));
        }
        s
    }
}

impl Column {
    /// The heading with the column's unit, e.g. `epoch (whole-run, steady) [s]`;
    /// a rate's heading says its unit already (`samples/s`).
    pub fn heading_with_unit(&self) -> String {
        match self.unit.suffix {
            "" | "/s" => self.heading.clone(),
            s => format!("{} [{s}]", self.heading),
        }
    }
}

/// A merged bundle's cells are per rank (each rank's runs are more runs of
/// the configuration): said under the table, since nothing else does.
fn per_rank_note(e: &Experiment) -> Option<String> {
    let mut ranks: Vec<u32> = e
        .configurations
        .iter()
        .flat_map(|c| &c.runs)
        .filter_map(|r| r.rank)
        .collect();
    ranks.sort_unstable();
    ranks.dedup();
    (ranks.len() > 1).then(|| {
        format!(
            "Figures are per rank: each cell is over the runs of all {} ranks, so its \
             [min–max] and noise include the differences between ranks (the rank section \
             shows them).",
            ranks.len()
        )
    })
}

impl ComparisonTable {
    /// Index of a column by key.
    pub fn column(&self, key: &MetricKey) -> Option<usize> {
        self.columns.iter().position(|c| &c.key == key)
    }

    /// Lines to print under the table: its notes, then one line per swept
    /// knob that does not apply to a configuration, with the reason.
    pub fn footnotes(&self) -> Vec<String> {
        let mut out = self.notes.clone();
        for r in &self.rows {
            for (name, reason) in &r.not_applicable {
                out.push(format!(
                    "{NOT_APPLICABLE} {name} does not apply to {}: {reason}",
                    r.label
                ));
            }
        }
        out
    }
}

mod export;
pub use export::csv_field;

#[cfg(test)]
mod tests;
