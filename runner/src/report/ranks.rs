//! The per-rank section of a merged bundle's report (the job's figures,
//! then each rank's) and the cost table of an experiment, within 100
//! columns; every figure is shared's (`analysis::pooled_summary`,
//! `analysis::rank_analysis_in`, `analysis::cost_columns`).

use stallscope_bundle::analysis::{
    Quantity, RankAnalysis, TableOptions, Unit, comparison_table, cost_columns, group_thousands,
    pooled_summary, preferred_phase, rank_analysis_in, show_percent, show_ratio,
};
use stallscope_bundle::{Bundle, Configuration, Experiment, Phase, TimingMode};

use super::text::{Column, WIDTH, compact_table, mode_and_phase, short_mode, wrap};

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
            out.push_str(&render_job(c, a.phase));
            out.push_str(&render_rank_analysis(&c.label, &a));
        }
    }
    out
}

/// `job of N ranks of LABEL: R samples/s (whole-run, steady), step S`: the
/// figures the experiment's table shows for a merged configuration, said
/// to be the job's, with the rank that finished last.
pub fn render_job(c: &Configuration, phase: Phase) -> String {
    let Some(j) = pooled_summary(c, phase) else {
        return String::new();
    };
    let rate = j.samples_per_s.map(|s| {
        let unit = Unit::for_values(Quantity::Rate, &[s.median]);
        format!("{} (whole-run, {})", unit.show(s.median), phase.as_str())
    });
    let step = j.step_s.map(|s| format!("step {:.2} ms", s.median * 1e3));
    let slowest = match j.slowest.first() {
        Some((r, n)) => format!("; rank {r} finished last in {n} epoch(s)"),
        None => String::new(),
    };
    let figures: Vec<String> = rate.into_iter().chain(step).collect();
    let figures = if figures.is_empty() {
        "no whole-run figure".to_string()
    } else {
        figures.join(", ")
    };
    wrap(
        &format!(
            "job of {} ranks, {}: {figures} — every rank's samples ÷ the slowest rank's epoch, \
             the step the slowest rank's{slowest}.",
            j.world, c.label
        ),
        "  ",
        "    ",
        WIDTH,
    )
}

/// The job figures of a configuration as JSON (`null` for one process).
pub fn job_json(c: &Configuration, phase: Phase) -> serde_json::Value {
    let Some(j) = pooled_summary(c, phase) else {
        return serde_json::Value::Null;
    };
    let summary = |s: Option<stallscope_bundle::analysis::Summary>| {
        s.map(|s| serde_json::json!({"median": s.median, "min": s.min, "max": s.max, "n": s.n}))
    };
    serde_json::json!({
        "world": j.world,
        "timing_mode": "whole_run",
        "phase": phase.as_str(),
        "samples_per_s": summary(j.samples_per_s),
        "step_s": summary(j.step_s),
        "slowest": j.slowest.iter().map(|(r, n)| serde_json::json!({"rank": r, "epochs": n})).collect::<Vec<_>>(),
    })
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
        Column::right("samples/s", "rank's own"),
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
