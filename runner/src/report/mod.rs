//! Terminal rendering of the shared analysis: a bundle's report (printed by
//! `run` at its end and by `report`) and the two-bundle comparison (printed
//! by `compare`), compact within 100 columns by default, or in full as
//! aligned text (`--wide`), Markdown, CSV or JSON. No figure is computed
//! here: everything comes from `stallscope_bundle::analysis`. A merged
//! bundle is shown as its job (`merge::job_view`), with its ranks below.

mod compact;
mod comparison;
mod full;
mod ranks;
mod scaling;
pub mod text;

pub use compact::{render_bundle_compact, render_comparison_compact, render_experiment};
pub use comparison::*;
pub use full::*;
pub use ranks::{render_cost_table, render_rank_analysis, render_ranks};
pub use scaling::render_comparison_with_scaling;

use stallscope_bundle::Bundle;

/// How a report is printed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Style {
    /// Within 100 columns: verdicts and the key figures (the default).
    Compact,
    /// Every column, with min–max, as aligned text (`--wide`).
    Wide,
    Markdown,
    Csv,
    Json,
}

/// A bundle's report in a style (JSON pretty-printed), ending with a newline.
pub fn render_bundle(b: &Bundle, style: Style) -> String {
    // A merged bundle of format 1.2 is read as its job, as 1.3 is written.
    let b = &*stallscope_bundle::merge::job_view(b);
    match style {
        Style::Compact => render_bundle_compact(b),
        Style::Wide => render_bundle_wide(b),
        Style::Markdown => render_bundle_markdown(b),
        Style::Csv => render_bundle_csv(b),
        Style::Json => pretty(&render_bundle_json(b)),
    }
}

/// The comparison of two bundles in a style; `base`/`new` are the files'
/// paths (JSON names them), the tables use their stems.
pub fn render_comparison(
    c: &stallscope_bundle::analysis::BundleComparison,
    base: &std::path::Path,
    new: &std::path::Path,
    style: Style,
) -> String {
    let name = |p: &std::path::Path| {
        p.file_stem()
            .map(|s| s.to_string_lossy().into_owned())
            .unwrap_or_default()
    };
    let (base_name, new_name) = (name(base), name(new));
    match style {
        Style::Compact => render_comparison_compact(c, &base_name, &new_name),
        Style::Wide => render_comparison_text(c, &base_name, &new_name),
        Style::Markdown => render_comparison_markdown(c, &base_name, &new_name),
        Style::Csv => render_comparison_csv(c),
        Style::Json => pretty(&render_comparison_json(
            c,
            &base.display().to_string(),
            &new.display().to_string(),
        )),
    }
}

fn pretty(v: &serde_json::Value) -> String {
    let mut s = serde_json::to_string_pretty(v).expect("a JSON value serializes");
    s.push('\n');
    s
}

/// Align rows of cells into a text table with a header rule.
pub fn align(header: &[String], rows: &[Vec<String>]) -> String {
    let cols = header.len();
    let mut width = vec![0usize; cols];
    for row in std::iter::once(header).chain(rows.iter().map(|r| r.as_slice())) {
        for (i, cell) in row.iter().enumerate().take(cols) {
            width[i] = width[i].max(cell.chars().count());
        }
    }
    let line = |row: &[String]| {
        let mut s = String::new();
        for (i, cell) in row.iter().enumerate().take(cols) {
            let pad = width[i] - cell.chars().count();
            if i == 0 {
                s.push_str(&format!("  {cell}{}", " ".repeat(pad)));
            } else {
                s.push_str(&format!(" | {}{cell}", " ".repeat(pad)));
            }
        }
        s.trim_end().to_string()
    };
    let mut out = line(header);
    out.push('\n');
    out.push_str(&format!(
        "  {}\n",
        "-".repeat(width.iter().sum::<usize>() + 3 * (cols - 1))
    ));
    for r in rows {
        out.push_str(&line(r));
        out.push('\n');
    }
    out
}

#[cfg(test)]
mod tests;

#[cfg(test)]
mod tests_ranks;
