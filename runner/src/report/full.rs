//! The full report of a bundle: every default column of the shared
//! comparison table, as aligned text (`--wide`), Markdown, CSV or JSON.

use stallscope_bundle::analysis::{
    ComparisonTable, TableOptions, comparison_table, csv_field, rank_analysis_in, show_ratio,
    verdict,
};
use stallscope_bundle::{Bundle, Experiment, Provenance, TimingMode};

use super::align;

/// One experiment's table as aligned text: median [min–max], `*` best,
/// ratio to the baseline, `(! N%)` noise flags.
pub fn render_table(t: &ComparisonTable) -> String {
    let mut header = vec!["configuration".to_string()];
    header.extend(t.columns.iter().map(|c| c.heading_with_unit()));
    let rows: Vec<Vec<String>> = t
        .rows
        .iter()
        .map(|r| {
            let mut row = vec![r.label.clone()];
            for (cell, col) in r.cells.iter().zip(&t.columns) {
                row.push(match cell {
                    None => "—".into(),
                    Some(c) => {
                        let mut s = c.text(&col.unit, true);
                        if Some(&r.config_id) != t.baseline.as_ref()
                            && let Some(ratio) = c.ratio_to_baseline
                        {
                            s.push_str(&format!(" ({})", show_ratio(ratio)));
                        }
                        if c.best {
                            s = format!("*{s}");
                        }
                        s
                    }
                });
            }
            if let Some(f) = &r.failure {
                row.push(f.clone());
            }
            row
        })
        .collect();
    let mut out = align(&header, &rows);
    if let Some(b) = &t.baseline {
        out.push_str(&format!(
            "  * best of the column; (N×) ratio to the baseline {b}; [min–max] over runs; (! N%) spread over median above 10%.\n"
        ));
    }
    out
}

/// The experiments that have a table (configurations and columns).
fn tables(b: &Bundle) -> impl Iterator<Item = (&Experiment, ComparisonTable)> {
    b.experiments.iter().filter_map(|e| {
        let t = comparison_table(e, &TableOptions::default());
        (!t.rows.is_empty() && !t.columns.is_empty()).then_some((e, t))
    })
}

fn published_title(b: &Bundle) -> Option<&str> {
    match &b.provenance {
        Provenance::Published { citation, .. } => Some(&citation.title),
        Provenance::Measured => None,
    }
}

/// Every experiment of a bundle with its full table: title, verdict, table.
pub fn render_bundle_wide(b: &Bundle) -> String {
    let mut out = String::new();
    if let Some(title) = published_title(b) {
        out.push_str(&format!(
            "PUBLISHED figures (not measured here): {title}\n\n"
        ));
    }
    for e in &b.experiments {
        out.push_str(&format!("[ {} — {} ]\n", e.id, e.title));
        if let Some(v) = verdict(e) {
            out.push_str(&format!("  {}\n  ({})\n", v.headline, v.figure));
        }
        if !e.configurations.is_empty() {
            let t = comparison_table(e, &TableOptions::default());
            if !t.columns.is_empty() {
                out.push_str(&render_table(&t));
            }
        }
        out.push_str(&super::ranks::render_ranks(b, e));
        out.push('\n');
    }
    out
}

/// The bundle's report as Markdown: a section per experiment, its verdict
/// and the shared table's Markdown.
pub fn render_bundle_markdown(b: &Bundle) -> String {
    let mut out = format!(
        "## {}\n\n",
        md(&stallscope_bundle::analysis::bundle_title(b))
    );
    if let Some(title) = published_title(b) {
        out.push_str(&format!(
            "**Published figures (not measured here):** {}\n\n",
            md(title)
        ));
    }
    for e in &b.experiments {
        out.push_str(&format!("### {} — {}\n\n", md(&e.id), md(&e.title)));
        if let Some(v) = verdict(e) {
            out.push_str(&format!("{}\n\n({})\n\n", md(&v.headline), md(&v.figure)));
        }
        if !e.configurations.is_empty() {
            let t = comparison_table(e, &TableOptions::default());
            if !t.columns.is_empty() {
                out.push_str(&t.to_markdown());
                out.push('\n');
            }
        }
        for c in &e.configurations {
            if let Some(a) = rank_analysis_in(b, c) {
                out.push_str(&format!(
                    "**Ranks of {}** (diagnostic {} shares):\n\n```\n{}```\n\n",
                    md(&c.label),
                    a.phase.as_str(),
                    super::ranks::render_rank_analysis(&c.label, &a)
                ));
            }
        }
    }
    out
}

/// The bundle's tables as one CSV, one line per configuration and column
/// (raw numbers in SI base units: seconds, bytes, per second).
pub fn render_bundle_csv(b: &Bundle) -> String {
    let mut out = String::from(
        "experiment,configuration,label,metric,timing_mode,phase,value,median,min,max,n,ratio_to_baseline,best,noisy,failure\n",
    );
    for (e, t) in tables(b) {
        for r in &t.rows {
            let failure = csv_field(r.failure.as_deref().unwrap_or(""));
            let start = format!(
                "{},{},{}",
                csv_field(&e.id),
                csv_field(&r.config_id),
                csv_field(&r.label)
            );
            for (cell, col) in r.cells.iter().zip(&t.columns) {
                let k = &col.key;
                out.push_str(&format!(
                    "{start},{},{},{},",
                    csv_field(k.metric.label()),
                    mode_name(k),
                    k.phase.as_str()
                ));
                match cell {
                    Some(c) => out.push_str(&format!(
                        "{},{},{},{},{},{},{},{}",
                        c.value,
                        c.summary.median,
                        c.summary.min,
                        c.summary.max,
                        c.summary.n,
                        c.ratio_to_baseline
                            .map(|x| x.to_string())
                            .unwrap_or_default(),
                        c.best,
                        c.summary.noisy
                    )),
                    None => out.push_str(",,,,,,,"),
                }
                out.push_str(&format!(",{failure}\n"));
            }
        }
    }
    out
}

/// Memory figures are read from runs of either mode.
fn mode_name(k: &stallscope_bundle::analysis::MetricKey) -> &str {
    if k.metric.is_memory() {
        "any"
    } else {
        k.mode.as_str()
    }
}

/// The bundle's report as JSON: per experiment the verdict and the table.
pub fn render_bundle_json(b: &Bundle) -> serde_json::Value {
    let experiments: Vec<serde_json::Value> = b
        .experiments
        .iter()
        .map(|e| {
            let t = comparison_table(e, &TableOptions::default());
            let v = verdict(e);
            serde_json::json!({
                "id": e.id,
                "title": e.title,
                "kind": e.kind.as_str(),
                "not_applicable": e.not_applicable,
                "verdict": v.map(|v| serde_json::json!({
                    "headline": v.headline,
                    "figure": v.figure,
                    "timing_mode": v.mode.as_ref().map(TimingMode::as_str),
                })),
                "phase": t.phase.as_str(),
                "baseline": t.baseline,
                "ranks": ranks_json(b, e),
                "columns": t.columns.iter().map(|c| serde_json::json!({
                    "metric": c.key.metric.label(),
                    "timing_mode": mode_name(&c.key),
                    "phase": c.key.phase.as_str(),
                    "heading": c.heading_with_unit(),
                    "higher_is_better": c.higher_is_better,
                })).collect::<Vec<_>>(),
                "rows": t.rows.iter().map(|r| serde_json::json!({
                    "configuration": r.config_id,
                    "label": r.label,
                    "params": r.params.iter().map(|(k, v)| (k.clone(), serde_json::Value::from(v.clone()))).collect::<serde_json::Map<_, _>>(),
                    "failure": r.failure,
                    "cells": r.cells.iter().map(|c| c.as_ref().map(|c| serde_json::json!({
                        "value": c.value,
                        "median": c.summary.median,
                        "min": c.summary.min,
                        "max": c.summary.max,
                        "n": c.summary.n,
                        "spread": c.summary.spread,
                        "noisy": c.summary.noisy,
                        "ratio_to_baseline": c.ratio_to_baseline,
                        "best": c.best,
                    }))).collect::<Vec<_>>(),
                })).collect::<Vec<_>>(),
            })
        })
        .collect();
    serde_json::json!({
        "bundle": b.id,
        "title": b.title,
        "provenance": match b.provenance { Provenance::Measured => "measured", Provenance::Published { .. } => "published" },
        "experiments": experiments,
    })
}

/// Each configuration's per-rank analysis (merged bundles only).
fn ranks_json(b: &Bundle, e: &Experiment) -> Vec<serde_json::Value> {
    e.configurations
        .iter()
        .filter_map(|c| Some((c, rank_analysis_in(b, c)?)))
        .map(|(c, a)| {
            serde_json::json!({
                "configuration": c.id,
                "job": super::ranks::job_json(c, a.phase),
                "phase": a.phase.as_str(),
                "step_timing_mode": a.step_mode.as_ref().map(TimingMode::as_str),
                "imbalance": a.imbalance,
                "work_imbalance": a.work_imbalance,
                "steps_compared": a.steps_compared,
                "stragglers": a.stragglers.iter().map(|(r, n)| serde_json::json!({"rank": r, "steps": n})).collect::<Vec<_>>(),
                "verdict": a.verdict,
                "notes": a.notes,
                "ranks": a.ranks.iter().map(|r| serde_json::json!({
                    "rank": r.rank,
                    "steps": r.steps,
                    "step_median_s": r.step_median_s,
                    "next_wait_share": r.next_wait_share,
                    "transfer_share": r.transfer_share,
                    "compute_share": r.compute_share,
                    "comm_share": r.comm_share,
                    "straggler_steps": r.straggler_steps,
                    "straggler_share": r.straggler_share,
                    "samples_per_s": r.samples_per_s,
                })).collect::<Vec<_>>(),
            })
        })
        .collect()
}

fn md(s: &str) -> String {
    s.replace('|', "\\|").replace('\n', " ")
}
