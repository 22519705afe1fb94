//! The scaling part of `stallscope compare` when the two bundles ran on
//! different numbers of ranks: per configuration the job rates of BASE and
//! NEW, the scaling efficiency and where the loss went (data wait on the
//! slowest rank, the barrier or collective, the rest), all from
//! `analysis::compare_scaling`.

use std::path::Path;

use stallscope_bundle::analysis::{
    BundleComparison, Quantity, Scaling, ScalingRow, Unit, show_percent,
};

use super::text::{Column, WIDTH, compact_table, wrap};
use super::{Style, render_comparison};

/// [`render_comparison`] followed by the scaling (when the worlds differ):
/// a table in the text styles, a `scaling` member in JSON; CSV stays the
/// comparison's rows.
pub fn render_comparison_with_scaling(
    c: &BundleComparison,
    scaling: Option<&Scaling>,
    base: &Path,
    new: &Path,
    style: Style,
) -> String {
    let out = render_comparison(c, base, new, style);
    let Some(s) = scaling else { return out };
    match style {
        Style::Json => {
            let mut v: serde_json::Value =
                serde_json::from_str(&out).expect("the comparison is JSON");
            v["scaling"] = scaling_json(s);
            let mut text = serde_json::to_string_pretty(&v).expect("a JSON value serializes");
            text.push('\n');
            text
        }
        Style::Csv => out,
        Style::Markdown => out + &render_scaling_markdown(s),
        Style::Compact | Style::Wide => out + &render_scaling_text(s),
    }
}

fn pct(v: Option<f64>) -> String {
    v.map(show_percent).unwrap_or_else(|| "—".into())
}

fn rate(v: Option<f64>) -> String {
    v.map(|r| Unit::for_values(Quantity::Rate, &[r]).show(r))
        .unwrap_or_else(|| "—".into())
}

/// Below this loss (either way) there is nothing to split: the parts would
/// only move between themselves (as the viewer shows it).
const NO_LOSS: f64 = 0.01;

/// The cells of a row: label, BASE, NEW, efficiency, loss, data, comm, rest.
fn cells(r: &ScalingRow) -> Vec<String> {
    let split = |f: fn(&stallscope_bundle::analysis::LossSplit) -> f64| {
        let shown = r
            .split
            .as_ref()
            .filter(|_| r.loss.is_some_and(|l| l.abs() >= NO_LOSS));
        pct(shown.map(f))
    };
    vec![
        r.label.clone(),
        rate(r.base_rate),
        rate(r.new_rate),
        pct(r.efficiency),
        pct(r.loss),
        split(|s| s.data),
        split(|s| s.comm),
        split(|s| s.rest),
    ]
}

fn heading(s: &Scaling) -> String {
    format!(
        "SCALING from {} to {} rank(s): efficiency = (job samples/s NEW ÷ BASE) ÷ ({} ÷ {}); the \
         loss (1 − efficiency) split by the diagnostic shares of the slowest rank's step into \
         data wait, comm (the slowest rank's barrier or collective: it waits least; the other \
         ranks' wait is in their rank section) and the rest (its copy and compute beyond BASE's, \
         the barrier's own cost); under 1% of loss, nothing to split (—).",
        s.base_world, s.new_world, s.new_world, s.base_world
    )
}

/// The scaling as text within 100 columns.
pub fn render_scaling_text(s: &Scaling) -> String {
    let mut out = wrap(&heading(s), "", "  ", WIDTH);
    for e in &s.experiments {
        let phase = e.phase.map_or("none", |p| p.as_str());
        out.push_str(&wrap(
            &format!(
                "[ {} — {}: job samples/s (whole-run, {phase}) ]",
                e.experiment_id, e.title
            ),
            "",
            "  ",
            WIDTH,
        ));
        if e.rows.is_empty() {
            out.push_str("  no whole-run figures of one phase on both sides\n\n");
            continue;
        }
        let cols = [
            Column::left("configuration", ""),
            Column::right("BASE", &format!("{} rank(s)", s.base_world)),
            Column::right("NEW", &format!("{} rank(s)", s.new_world)),
            Column::right("efficiency", ""),
            Column::right("loss", ""),
            Column::right("data", "wait"),
            Column::right("comm", "sync"),
            Column::right("rest", ""),
        ];
        let rows: Vec<Vec<String>> = e.rows.iter().map(cells).collect();
        out.push_str(&compact_table(&cols, &rows, false));
        for r in e.rows.iter().filter(|r| r.note.is_some()) {
            let note = format!("{}: {}", r.label, r.note.as_deref().unwrap_or_default());
            out.push_str(&wrap(&note, "  ", "    ", WIDTH));
        }
        out.push('\n');
    }
    out
}

/// The scaling as Markdown.
pub fn render_scaling_markdown(s: &Scaling) -> String {
    let mut out = format!("### Scaling\n\n{}\n\n", heading(s));
    for e in &s.experiments {
        out.push_str(&format!(
            "**{} — {}**\n\n| configuration | BASE ({}) | NEW ({}) | efficiency | loss | data \
             | comm | rest |\n|---|---:|---:|---:|---:|---:|---:|---:|\n",
            e.experiment_id, e.title, s.base_world, s.new_world
        ));
        for r in &e.rows {
            let row: Vec<String> = cells(r).iter().map(|c| c.replace('|', "\\|")).collect();
            out.push_str(&format!("| {} |\n", row.join(" | ")));
        }
        out.push('\n');
    }
    out
}

/// The scaling as JSON.
pub fn scaling_json(s: &Scaling) -> serde_json::Value {
    serde_json::json!({
        "base_world": s.base_world,
        "new_world": s.new_world,
        "timing_mode": "whole_run",
        "experiments": s.experiments.iter().map(|e| serde_json::json!({
            "id": e.experiment_id,
            "phase": e.phase.map(|p| p.as_str()),
            "rows": e.rows.iter().map(|r| serde_json::json!({
                "configuration": r.config_id,
                "base_samples_per_s": r.base_rate,
                "new_samples_per_s": r.new_rate,
                "efficiency": r.efficiency,
                "loss": r.loss,
                "loss_data": r.split.map(|s| s.data),
                "loss_comm": r.split.map(|s| s.comm),
                "loss_rest": r.split.map(|s| s.rest),
                "note": r.note,
            })).collect::<Vec<_>>(),
        })).collect::<Vec<_>>(),
    })
}
