//! The two-bundle comparison (`stallscope compare`) in full: whole-run
//! figures of BASE and NEW side by side with min–max, as aligned text
//! (`--wide`), Markdown, CSV or JSON (the compact default is in `compact`).

use stallscope_bundle::analysis::{
    BeforeAfter, BundleComparison, Change, DifferenceGroups, ExperimentComparison, StepMove,
    Summary, Unit, csv_field, show_ratio,
};

use super::align;
use super::text::{WIDTH, wrap};

pub(super) fn change_text(c: Option<Change>, threshold: f64) -> String {
    match c {
        Some(Change::Faster) => "faster".into(),
        Some(Change::Slower) => format!("SLOWER (beyond {threshold}%)"),
        Some(Change::Same) => format!("within {threshold}%"),
        Some(Change::Noise) => "~ (within noise)".into(),
        None => String::new(),
    }
}

/// One unit for all of an experiment's BASE and NEW medians.
pub(super) fn comparison_unit(e: &ExperimentComparison) -> Unit {
    let values: Vec<f64> = e
        .rows
        .iter()
        .flat_map(|r| [r.base.map(|s| s.median), r.new.map(|s| s.median)])
        .flatten()
        .collect();
    Unit::for_values(e.metric.quantity(), &values)
}

/// Each row of an experiment's comparison: label, BASE, NEW (each figure
/// through `cell`), NEW/BASE and the change against `threshold`.
pub(super) fn comparison_rows(
    e: &ExperimentComparison,
    threshold: f64,
    cell: impl Fn(&Option<Summary>) -> String,
) -> Vec<Vec<String>> {
    e.rows
        .iter()
        .map(|r| {
            vec![
                r.label.clone(),
                cell(&r.base),
                cell(&r.new),
                r.ratio.map(show_ratio).unwrap_or_else(|| "—".into()),
                r.note
                    .clone()
                    .unwrap_or_else(|| change_text(r.change, threshold)),
            ]
        })
        .collect()
}

fn change_key(c: Option<Change>) -> &'static str {
    match c {
        Some(Change::Faster) => "faster",
        Some(Change::Slower) => "slower",
        Some(Change::Same) => "same",
        Some(Change::Noise) => "noise",
        None => "",
    }
}

/// The two-bundle comparison as aligned text.
pub fn render_comparison_text(c: &BundleComparison, base_name: &str, new_name: &str) -> String {
    let mut out = sides_block(c, base_name, new_name);
    out.push_str(&machine_aligned(c, base_name, new_name));
    for e in &c.experiments {
        let phase = e
            .phase
            .map(|p| format!(", {} epochs", p.as_str()))
            .unwrap_or_default();
        out.push_str(&format!(
            "[ {} — {}: {} (whole-run{phase}) ]\n",
            e.experiment_id,
            e.title,
            e.metric.label()
        ));
        for l in e.before_after.iter().flat_map(BeforeAfter::sentences) {
            out.push_str(&format!("  {l}\n"));
        }
        if let Some(note) = &e.note {
            out.push_str(&format!("  {note}\n\n"));
            continue;
        }
        let settings = e.settings().lines("BASE", "NEW", "settings");
        if !settings.is_empty() {
            out.push_str("  settings that differ:\n");
        }
        for l in settings {
            out.push_str(&format!("    {l}\n"));
        }
        let unit = comparison_unit(e);
        let cell = |s: &Option<Summary>| match s {
            None => "—".to_string(),
            Some(s) => {
                let mut t = unit.show(s.median);
                if s.n > 1 {
                    t.push_str(&format!(" [{}–{}]", unit.number(s.min), unit.number(s.max)));
                }
                if s.noisy {
                    t.push_str(&format!(" (! {:.0}%)", s.spread * 100.0));
                }
                t
            }
        };
        let rows = comparison_rows(e, c.threshold_percent, cell);
        out.push_str(&align(
            &[
                "configuration".into(),
                format!("BASE {base_name}"),
                format!("NEW {new_name}"),
                "NEW/BASE".into(),
                "".into(),
            ],
            &rows,
        ));
        out.push('\n');
    }
    out
}

/// The two-bundle comparison as Markdown.
pub fn render_comparison_markdown(c: &BundleComparison, base_name: &str, new_name: &str) -> String {
    let mut out = String::new();
    for (side, name, s) in [
        ("BASE", base_name, &c.sides.base),
        ("NEW", new_name, &c.sides.new),
    ] {
        out.push_str(&format!("**{side}** {}: {}  \n", md(name), md(&s.line())));
    }
    out.push('\n');
    for f in &c.sides.flags {
        out.push_str(&format!("**Warning:** {}\n\n", md(f)));
    }
    for l in c.job().lines("BASE", "NEW", "fields") {
        out.push_str(&format!("- the jobs differ: {}\n", md(&l)));
    }
    out.push_str(&machine_markdown(c));
    for e in &c.experiments {
        out.push_str(&format!(
            "### {} — {} ({}, whole-run)\n\n",
            md(&e.experiment_id),
            md(&e.title),
            e.metric.label()
        ));
        if let Some(b) = &e.before_after {
            for l in b.sentences() {
                out.push_str(&format!("{}\n\n", md(&l)));
            }
        }
        if let Some(note) = &e.note {
            out.push_str(&format!("{}\n\n", md(note)));
            continue;
        }
        let settings = e.settings().lines("BASE", "NEW", "settings");
        if !settings.is_empty() {
            out.push_str("Settings that differ:\n\n");
            for l in settings {
                out.push_str(&format!("- {}\n", md(&l)));
            }
            out.push('\n');
        }
        out.push_str(&format!(
            "| configuration | BASE {} | NEW {} | NEW/BASE | |\n|---|---:|---:|---:|---|\n",
            md(base_name),
            md(new_name)
        ));
        let unit = comparison_unit(e);
        let show =
            |s: &Option<Summary>| s.map(|s| unit.show(s.median)).unwrap_or_else(|| "—".into());
        for row in comparison_rows(e, c.threshold_percent, show) {
            let cells: Vec<String> = row.iter().map(|t| md(t)).collect();
            out.push_str(&format!("| {} |\n", cells.join(" | ")));
        }
        out.push('\n');
    }
    out
}

/// The two-bundle comparison as CSV (raw numbers in base units).
pub fn render_comparison_csv(c: &BundleComparison) -> String {
    let mut out = String::from(
        "experiment,configuration,metric,phase,base_median,base_min,base_max,new_median,new_min,new_max,ratio,change,note\n",
    );
    for e in &c.experiments {
        for r in &e.rows {
            let num = |s: &Option<Summary>| match s {
                Some(s) => format!("{},{},{}", s.median, s.min, s.max),
                None => ",,".into(),
            };
            out.push_str(&format!(
                "{},{},{},{},{},{},{},{},{}\n",
                csv_field(&e.experiment_id),
                csv_field(&r.config_id),
                csv_field(e.metric.label()),
                e.phase.map(|p| p.as_str()).unwrap_or(""),
                num(&r.base),
                num(&r.new),
                r.ratio.map(|x| x.to_string()).unwrap_or_default(),
                change_key(r.change),
                csv_field(r.note.as_deref().unwrap_or(""))
            ));
        }
    }
    out
}

/// The two-bundle comparison as JSON.
pub fn render_comparison_json(c: &BundleComparison, base: &str, new: &str) -> serde_json::Value {
    let summary = |s: &Option<Summary>| {
        s.map(|s| serde_json::json!({"median": s.median, "min": s.min, "max": s.max, "n": s.n, "noisy": s.noisy}))
    };
    serde_json::json!({
        "base": base,
        "new": new,
        "threshold_percent": c.threshold_percent,
        "sides": sides_json(c),
        "environment_differences": c.environment_differences.iter().map(|d| serde_json::json!({"field": d.field, "base": d.base, "new": d.new})).collect::<Vec<_>>(),
        "job_differences": c.job_differences.iter().map(|d| serde_json::json!({"field": d.field, "base": d.base, "new": d.new})).collect::<Vec<_>>(),
        "before_after": c.experiments.iter().filter_map(|e| Some((e, e.before_after.as_ref()?))).map(|(e, b)| before_after_json(&e.experiment_id, b)).collect::<Vec<_>>(),
        "experiments": c.experiments.iter().map(|e| serde_json::json!({
            "id": e.experiment_id,
            "title": e.title,
            "metric": e.metric.label(),
            "timing_mode": "whole_run",
            "phase": e.phase.map(|p| p.as_str()),
            "note": e.note,
            "rows": e.rows.iter().map(|r| serde_json::json!({
                "configuration": r.config_id,
                "label": r.label,
                "base": summary(&r.base),
                "new": summary(&r.new),
                "ratio": r.ratio,
                "change": change_key(r.change),
                "note": r.note,
            })).collect::<Vec<_>>(),
        })).collect::<Vec<_>>(),
        "regressions": c.regressions().len(),
    })
}

/// The machine and software differences, those both sides state aligned in
/// a table however wide (`--wide`), those one side states alone folded.
fn machine_aligned(c: &BundleComparison, base_name: &str, new_name: &str) -> String {
    let machine = c.machine();
    if machine.is_empty() {
        return String::new();
    }
    let mut out = String::from("WARNING: the two bundles differ in machine or settings:\n");
    let rows: Vec<Vec<String>> = machine
        .both
        .iter()
        .map(|d| vec![d.field.clone(), d.base.clone(), d.new.clone()])
        .collect();
    if !rows.is_empty() {
        let header = [
            String::new(),
            format!("BASE {base_name}"),
            format!("NEW {new_name}"),
        ];
        out.push_str(&align(&header, &rows));
    }
    for side in [("BASE", &machine.only_base), ("NEW", &machine.only_new)] {
        if let Some(l) = DifferenceGroups::only_line(side.0, side.1, "fields") {
            out.push_str(&format!("{l}\n"));
        }
    }
    out.push('\n');
    out
}

/// Which is which (title, date, runner and commit of each side), the
/// flags (a different commit) and the job's own differences (world size),
/// within 100 columns.
pub(super) fn sides_block(c: &BundleComparison, base_name: &str, new_name: &str) -> String {
    let mut out = String::new();
    for (side, name, s) in [
        ("BASE", base_name, &c.sides.base),
        ("NEW", new_name, &c.sides.new),
    ] {
        out.push_str(&wrap(
            &format!("{side} {name}: {}", s.line()),
            "",
            "    ",
            WIDTH,
        ));
    }
    for f in &c.sides.flags {
        out.push_str(&wrap(&format!("WARNING: {f}"), "", "  ", WIDTH));
    }
    let job = c.job().lines("BASE", "NEW", "fields");
    if !job.is_empty() {
        out.push_str("The jobs differ (a different job, whatever the machines):\n");
        for l in job {
            out.push_str(&wrap(&l, "  ", "    ", WIDTH));
        }
    }
    out.push('\n');
    out
}

/// The machine and software differences, folded, within 100 columns.
pub(super) fn machine_block(c: &BundleComparison) -> String {
    let lines = c.machine().lines("BASE", "NEW", "fields");
    if lines.is_empty() {
        return String::new();
    }
    let mut out = String::from("WARNING: the two bundles differ in machine or settings:\n");
    for l in lines {
        out.push_str(&wrap(&l, "  ", "    ", WIDTH));
    }
    out.push('\n');
    out
}

/// An experiment's settings box: those both sides state and that differ,
/// one line each, then one line per side for those only it states.
pub(super) fn settings_block(e: &ExperimentComparison) -> String {
    let lines = e.settings().lines("BASE", "NEW", "settings");
    if lines.is_empty() {
        return String::new();
    }
    let mut out = String::from("  settings that differ:\n");
    for l in lines {
        out.push_str(&wrap(&l, "    ", "      ", WIDTH));
    }
    out
}

/// Two bundles of one job: the diagnosis and the whole-run step, before
/// and after.
pub(super) fn before_after_block(e: &ExperimentComparison) -> String {
    e.before_after
        .iter()
        .flat_map(BeforeAfter::sentences)
        .map(|l| wrap(&l, "  ", "    ", WIDTH))
        .collect()
}

fn machine_markdown(c: &BundleComparison) -> String {
    let m = c.machine();
    if m.is_empty() {
        return String::new();
    }
    let mut out = String::from("**The two bundles differ in machine or settings:**\n\n");
    if !m.both.is_empty() {
        out.push_str("| | BASE | NEW |\n|---|---|---|\n");
        for d in &m.both {
            let row = [&d.field, &d.base, &d.new].map(|t| md(t));
            out.push_str(&format!("| {} |\n", row.join(" | ")));
        }
        out.push('\n');
    }
    for side in [("BASE", &m.only_base), ("NEW", &m.only_new)] {
        if let Some(l) = DifferenceGroups::only_line(side.0, side.1, "fields") {
            out.push_str(&format!("{}\n\n", md(&l)));
        }
    }
    out
}

fn sides_json(c: &BundleComparison) -> serde_json::Value {
    let side = |s: &stallscope_bundle::analysis::Side| {
        serde_json::json!({"title": s.title, "created": s.created, "runner": s.runner,
            "commit": s.commit, "published": s.published})
    };
    serde_json::json!({"base": side(&c.sides.base), "new": side(&c.sides.new),
        "flags": c.sides.flags})
}

fn before_after_json(experiment: &str, b: &BeforeAfter) -> serde_json::Value {
    let side = |d: &Option<stallscope_bundle::analysis::Diagnosis>| {
        d.as_ref().map(|d| {
            serde_json::json!({"configuration": d.config_id, "bound": d.bound.label(),
                "wait_share": d.wait_share, "phase": d.phase.as_str()})
        })
    };
    let step = b.step.as_ref().map(|s| {
        let moved = match s.moved {
            StepMove::Faster => "faster",
            StepMove::Slower => "slower",
            StepMove::WithinNoise => "within_noise",
        };
        serde_json::json!({"phase": s.phase.as_str(), "base_median_s": s.base.median,
            "new_median_s": s.new.median, "ratio": s.ratio, "noise": s.noise, "moved": moved})
    });
    serde_json::json!({"experiment": experiment, "base": side(&b.base), "new": side(&b.new),
        "step": step, "sentences": b.sentences()})
}

fn md(s: &str) -> String {
    s.replace('|', "\\|").replace('\n', " ")
}
