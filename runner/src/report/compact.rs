//! The default reports, within 100 columns. A bundle: per experiment the
//! verdict, then a compact table of the key whole-run figure (with its ratio
//! to the baseline and the noise flag) and the key diagnostic figure, both
//! chosen by `analysis::key_columns`, the cost table when the runs carry
//! CPU costs, and for a merged bundle each configuration's ranks. A
//! comparison: medians of BASE and NEW, NEW/BASE and the change. The full
//! tables are `--wide`.

use stallscope_bundle::analysis::{
    BundleComparison, ComparisonTable, MetricKey, Summary, TableOptions, comparison_table,
    key_columns, preferred_phase, show_ratio, verdict,
};
use stallscope_bundle::{Bundle, Experiment, Provenance};

use super::comparison::{
    before_after_block, comparison_rows, comparison_unit, machine_block, settings_block,
    sides_block,
};
use super::ranks::{render_cost_table, render_ranks};
use super::text::{Column, WIDTH, compact_table, mode_and_phase, wrap};

/// Every experiment of a bundle: title, verdict, compact table.
pub fn render_bundle_compact(b: &Bundle) -> String {
    let mut out = String::new();
    if let Provenance::Published { citation, .. } = &b.provenance {
        out.push_str(&wrap(
            &format!("PUBLISHED figures (not measured here): {}", citation.title),
            "",
            "  ",
            WIDTH,
        ));
        out.push('\n');
    }
    if !b.ranks.is_empty() {
        out.push_str(&wrap(
            &format!(
                "MERGED job of {} ranks: the tables give the job's figures (every rank's samples ÷ \
                 the slowest rank's epoch, the slowest rank's step); each configuration's ranks \
                 follow its experiment.",
                b.ranks.len()
            ),
            "",
            "  ",
            WIDTH,
        ));
        out.push('\n');
    }
    for e in &b.experiments {
        out.push_str(&render_experiment(e));
        out.push_str(&render_ranks(b, e));
        out.push('\n');
    }
    out
}

/// One experiment: `[ id — title ]`, the verdict and its figure, the table.
pub fn render_experiment(e: &Experiment) -> String {
    let mut out = wrap(&format!("[ {} — {} ]", e.id, e.title), "", "  ", WIDTH);
    if let Some(v) = verdict(e) {
        out.push_str(&wrap(&v.headline, "  ", "  ", WIDTH));
        out.push_str(&wrap(&format!("({})", v.figure), "  ", "  ", WIDTH));
    }
    if e.configurations.is_empty() {
        return out;
    }
    let keys = key_columns(e, preferred_phase(e));
    let t = comparison_table(
        e,
        &TableOptions {
            columns: Some(keys.keys()),
            ..TableOptions::default()
        },
    );
    out.push_str(&render_table(&t, keys.whole_run, keys.detail));
    out.push_str(&render_not_run(e));
    out.push_str(&render_cost_table(e));
    out
}

/// The configurations that could not run here (an engine not installed,
/// DALI's mixed decoder without a GPU), grouped by reason: one line each.
fn render_not_run(e: &Experiment) -> String {
    let mut by_reason: Vec<(&str, Vec<&str>)> = Vec::new();
    for c in e.configurations.iter().filter(|c| c.runs.is_empty()) {
        let Some(why) = c.cannot_run_here() else {
            continue;
        };
        match by_reason.iter_mut().find(|(w, _)| *w == why) {
            Some((_, labels)) => labels.push(&c.label),
            None => by_reason.push((why, vec![&c.label])),
        }
    }
    let mut out = String::new();
    for (why, labels) in by_reason {
        let line = format!("not run here: {} ({why})", labels.join("; "));
        out.push_str(&wrap(&line, "  ", "    ", WIDTH));
    }
    out
}

fn render_table(
    t: &ComparisonTable,
    whole_run: Option<MetricKey>,
    detail: Option<MetricKey>,
) -> String {
    let whole = whole_run.and_then(|k| t.column(&k));
    let detail = detail.and_then(|k| t.column(&k));
    let mut cols = vec![Column::left("configuration", "")];
    if let Some(i) = whole {
        let key = &t.columns[i].key;
        cols.push(Column::right(key.metric.label(), &mode_and_phase(key)));
        cols.push(Column::right("ratio", "to base"));
        cols.push(Column::left("noise", ""));
    }
    if let Some(i) = detail {
        let key = &t.columns[i].key;
        cols.push(Column::right(key.metric.label(), &mode_and_phase(key)));
    }
    let is_base = |id: &String| Some(id) == t.baseline.as_ref();
    let mut rows = Vec::new();
    let mut failures = Vec::new();
    for r in &t.rows {
        let mut row = vec![r.label.clone()];
        if let Some(i) = whole {
            let (value, ratio, noise) = match &r.cells[i] {
                None => ("—".to_string(), String::new(), String::new()),
                Some(c) => (
                    format!(
                        "{}{}",
                        if c.best { "*" } else { "" },
                        t.columns[i].unit.show(c.value)
                    ),
                    if is_base(&r.config_id) {
                        "base".into()
                    } else {
                        c.ratio_to_baseline.map(show_ratio).unwrap_or_default()
                    },
                    if c.summary.noisy {
                        format!("! {:.0}%", c.summary.spread * 100.0)
                    } else {
                        String::new()
                    },
                ),
            };
            row.extend([value, ratio, noise]);
        }
        if let Some(i) = detail {
            row.push(match &r.cells[i] {
                None => "—".into(),
                Some(c) => t.columns[i].unit.show(c.value),
            });
        }
        if let Some(f) = &r.failure {
            failures.push(format!("failed: {}: {f}", r.label));
        }
        rows.push(row);
    }
    let mut out = String::new();
    if cols.len() > 1 {
        out.push_str(&compact_table(&cols, &rows, false));
    }
    for f in failures {
        out.push_str(&wrap(&f, "  ", "    ", WIDTH));
    }
    if whole.is_some() {
        let base = t
            .baseline
            .as_ref()
            .and_then(|b| t.rows.iter().find(|r| &r.config_id == b))
            .map(|r| r.label.as_str())
            .unwrap_or("the first row");
        out.push_str(&wrap(
            &format!(
                "* best; ratio to the baseline ({base}); ! spread over median above 10%; --wide: all columns."
            ),
            "  ",
            "  ",
            WIDTH,
        ));
    }
    out
}

/// The two-bundle comparison within 100 columns: medians of BASE and NEW,
/// NEW/BASE and the change (noise flags on the figures); `--wide` adds the
/// min–max of each.
pub fn render_comparison_compact(c: &BundleComparison, base_name: &str, new_name: &str) -> String {
    let mut out = sides_block(c, base_name, new_name);
    out.push_str(&machine_block(c));
    for e in &c.experiments {
        let phase = e
            .phase
            .map(|p| format!(", {} epochs", p.as_str()))
            .unwrap_or_default();
        out.push_str(&wrap(
            &format!(
                "[ {} — {}: {} (whole-run{phase}) ]",
                e.experiment_id,
                e.title,
                e.metric.label()
            ),
            "",
            "  ",
            WIDTH,
        ));
        out.push_str(&before_after_block(e));
        if let Some(note) = &e.note {
            out.push_str(&wrap(note, "  ", "  ", WIDTH));
            out.push('\n');
            continue;
        }
        out.push_str(&settings_block(e));
        let unit = comparison_unit(e);
        let cell = |s: &Option<Summary>| match s {
            None => "—".to_string(),
            Some(s) if s.noisy => format!("{} (! {:.0}%)", unit.show(s.median), s.spread * 100.0),
            Some(s) => unit.show(s.median),
        };
        let rows = comparison_rows(e, c.threshold_percent, cell);
        let cols = [
            Column::left("configuration", ""),
            Column::right("BASE", "median"),
            Column::right("NEW", "median"),
            Column::right("NEW/BASE", ""),
            Column::left("", ""),
        ];
        out.push_str(&compact_table(&cols, &rows, true));
        out.push('\n');
    }
    out
}
