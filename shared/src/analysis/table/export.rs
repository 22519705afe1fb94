//! A comparison table as text to take away: GitHub Markdown (medians,
//! ratios to the baseline, the best in bold) and CSV (raw numbers in SI base
//! units).

use super::ComparisonTable;

impl ComparisonTable {
    /// The table as GitHub Markdown (medians, ratios to the baseline, best in bold).
    pub fn to_markdown(&self) -> String {
        let mut out = String::new();
        out.push_str("| configuration |");
        for c in &self.columns {
            out.push_str(&format!(" {} |", c.heading_with_unit()));
        }
        out.push_str("\n|---|");
        for _ in &self.columns {
            out.push_str("---:|");
        }
        out.push('\n');
        for r in &self.rows {
            out.push_str(&format!("| {} |", escape_md(&r.label)));
            for (cell, col) in r.cells.iter().zip(&self.columns) {
                match cell {
                    Some(cell) => {
                        let mut t = cell.text(&col.unit, true);
                        if let Some(ratio) = cell
                            .ratio_to_baseline
                            .filter(|_| Some(&r.config_id) != self.baseline.as_ref())
                        {
                            t.push_str(&format!(
                                " ({})",
                                crate::analysis::units::show_ratio(ratio)
                            ));
                        }
                        if cell.best {
                            t = format!("**{t}**");
                        }
                        out.push_str(&format!(" {t} |"));
                    }
                    None => out.push_str(" — |"),
                }
            }
            if let Some(f) = &r.failure {
                out.push_str(&format!(" {} |", escape_md(f)));
            }
            out.push('\n');
        }
        let footnotes = self.footnotes();
        if !footnotes.is_empty() {
            out.push('\n');
            for f in footnotes {
                out.push_str(&format!("{}  \n", escape_md(&f)));
            }
        }
        out
    }

    /// The table as CSV: raw numbers in SI base units (seconds, bytes, /s).
    pub fn to_csv(&self) -> String {
        let mut out = String::from("configuration");
        for p in self
            .rows
            .first()
            .map(|r| r.params.clone())
            .unwrap_or_default()
        {
            out.push(',');
            out.push_str(&csv_field(&p.0));
        }
        for c in &self.columns {
            let name = format!(
                "{} {} {}",
                c.key.metric.label(),
                c.key.mode.as_str(),
                c.key.phase.as_str()
            );
            for suffix in ["median", "min", "max", "n", "ratio_to_baseline"] {
                out.push(',');
                out.push_str(&csv_field(&format!("{name} {suffix}")));
            }
        }
        out.push_str(",failure\n");
        for r in &self.rows {
            out.push_str(&csv_field(&r.label));
            for p in &r.params {
                out.push(',');
                out.push_str(&csv_field(&p.1));
            }
            for cell in &r.cells {
                match cell {
                    Some(c) => out.push_str(&format!(
                        ",{},{},{},{},{}",
                        c.value,
                        c.summary.min,
                        c.summary.max,
                        c.summary.n,
                        c.ratio_to_baseline
                            .map(|x| x.to_string())
                            .unwrap_or_default()
                    )),
                    None => out.push_str(",,,,,"),
                }
            }
            out.push(',');
            out.push_str(&csv_field(r.failure.as_deref().unwrap_or("")));
            out.push('\n');
        }
        out
    }
}

fn escape_md(s: &str) -> String {
    s.replace('|', "\\|").replace('\n', " ")
}

/// Quote a CSV field when needed (RFC 4180); also defuse spreadsheet formulas.
pub fn csv_field(s: &str) -> String {
    let s = if s.starts_with(['=', '+', '-', '@']) && s.parse::<f64>().is_err() {
        format!("'{s}")
    } else {
        s.to_string()
    };
    if s.contains([',', '"', '\n', '\r']) {
        format!("\"{}\"", s.replace('"', "\"\""))
    } else {
        s
    }
}
