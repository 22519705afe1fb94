//! The per-rank section of a merged bundle's report and the cost table of
//! an experiment, within 100 columns; every figure is shared's
//! (`analysis::rank_analysis_in`, `analysis::cost_columns`).

use stallscope_bundle::analysis::{
    RankAnalysis, TableOptions, comparison_table, cost_columns, group_thousands, preferred_phase,
    rank_analysis_in, show_percent, show_ratio,
};
use stallscope_bundle::{Bundle, Experiment, TimingMode};

use super::compact::{mode_and_phase, short_mode};
use super::text::{Column, WIDTH, compact_table, wrap};

/// The cost table of an experiment (CPU per 1,000 samples, cores, peak RSS
/// of every process, GPU utilisation; whole-run), or nothing when its runs
/// carry no cost figures.
pub fn render_cost_table(e: &Experiment) -> String {
    let phase = preferred_phase(e);
    let keys = cost_columns(e, phase);
    if keys.is_empty() {
        return String::new();
    }
    let t = comparison_table(
        e,
        &TableOptions {
            columns: Some(keys),
            ..TableOptions::default()
        },
    );
    let mut cols = vec![Column::left("cost", "")];
    for c in &t.columns {
        cols.push(Column::right(c.key.metric.label(), &mode_and_phase(&c.key)));
    }
    let rows: Vec<Vec<String>> = t
        .rows
        .iter()
        .map(|r| {
            let mut row = vec![r.label.clone()];
            for (cell, col) in r.cells.iter().zip(&t.columns) {
                row.push(match cell {
                    None => "—".into(),
                    Some(c) if c.best => format!("*{}", col.unit.show(c.value)),
                    Some(c) => col.unit.show(c.value),
                });
            }
            row
        })
        .collect();
    compact_table(&cols, &rows, false)
}

/// Every configuration of an experiment whose runs carry ranks: its rank
/// table, imbalance, straggler line and notes; nothing for a single process.
pub fn render_ranks(b: &Bundle, e: &Experiment) -> String {
    let mut out = String::new();
    for c in &e.configurations {
        if let Some(a) = rank_analysis_in(b, c) {
            out.push_str(&render_rank_analysis(&c.label, &a));
        }
    }
    out
}

fn mode_name(m: &Option<TimingMode>) -> &str {
    m.as_ref().map_or("none", short_mode)
}

/// One configuration's ranks.
pub fn render_rank_analysis(label: &str, a: &RankAnalysis) -> String {
    let phase = a.phase.as_str();
    let mut out = wrap(
        &format!(
            "ranks of {label}: shares of the diagnostic {phase} step; step time {}, {phase}",
            mode_name(&a.step_mode)
        ),
        "  ",
        "    ",
        WIDTH,
    );
    let cols = [
        Column::left("rank", ""),
        Column::right("steps", "diagnostic"),
        Column::right("step time", mode_name(&a.step_mode)),
        Column::right("next-wait", "share"),
        Column::right("transfer", "share"),
        Column::right("compute", "share"),
        Column::right("comm", "share"),
        Column::right("slowest", "in steps"),
        Column::right("samples/s", "whole-run"),
    ];
    let pct = |v: Option<f64>| v.map(show_percent).unwrap_or_else(|| "—".into());
    let rows: Vec<Vec<String>> = a
        .ranks
        .iter()
        .map(|r| {
            vec![
                r.rank.to_string(),
                r.steps.to_string(),
                r.step_median_s
                    .map(|s| format!("{:.2} ms", s * 1e3))
                    .unwrap_or_else(|| "—".into()),
                pct(r.next_wait_share),
                pct(r.transfer_share),
                pct(r.compute_share),
                pct(r.comm_share),
                match r.straggler_share {
                    Some(s) => format!("{} ({})", r.straggler_steps, show_percent(s)),
                    None => "—".into(),
                },
                r.samples_per_s
                    .map(|s| format!("{}/s", group_thousands(&format!("{s:.0}"))))
                    .unwrap_or_else(|| "—".into()),
            ]
        })
        .collect();
    out.push_str(&compact_table(&cols, &rows, false));
    let mut imbalance = Vec::new();
    if let Some(i) = a.imbalance {
        imbalance.push(format!(
            "imbalance of the {} step time (largest ÷ median) {}",
            mode_name(&a.step_mode),
            show_ratio(i)
        ));
    }
    if let Some(w) = a.work_imbalance {
        imbalance.push(format!(
            "of the work before the sync (diagnostic, slowest ÷ the others) {}",
            show_ratio(w)
        ));
    }
    if !imbalance.is_empty() {
        out.push_str(&wrap(
            &format!(
                "{}; {} steps compared.",
                imbalance.join(", "),
                a.steps_compared
            ),
            "  ",
            "    ",
            WIDTH,
        ));
    }
    if let Some(v) = &a.verdict {
        out.push_str(&wrap(v, "  ", "    ", WIDTH));
    }
    for n in &a.notes {
        out.push_str(&wrap(&format!("note: {n}"), "  ", "    ", WIDTH));
    }
    out
}
