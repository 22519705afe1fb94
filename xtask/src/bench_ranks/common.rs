//! What the ranks bench's two halves (the merge, in `bench_ranks.rs`, and
//! the viewer, in `viewer.rs`) share: the report being written, the
//! experiment's id, the repeats and how a spread prints. A leaf, so the
//! viewer half does not reach back into its parent.
use crate::bench_goals::Spread;
use anyhow::{Context, Result};
use std::path::{Path, PathBuf};

pub(super) const ID: &str = "bench-ranks";
pub(super) const REPEATS: usize = 3;

/// The report: printed as it goes, saved at the end.
pub(crate) struct Out(pub(super) Vec<String>);

impl Out {
    pub(super) fn line(&mut self, s: impl Into<String>) {
        let s = s.into();
        println!("{s}");
        self.0.push(s);
    }
}

/// "label 1.23 s (median of 3: 1.23, 1.30, 1.20)", `d` decimals.
pub(super) fn spread(label: &str, unit: &str, d: usize, v: &[f64]) -> Result<String> {
    let s = Spread::of(v)?;
    let all: Vec<String> = v.iter().map(|x| format!("{x:.d$}")).collect();
    Ok(format!(
        "{label} {:.d$} {unit} (median of {}: {})",
        s.median,
        s.n,
        all.join(", ")
    ))
}

/// The sidecar files `merge` wrote beside the merged bundle.
pub(super) fn sidecars_of(merged: &Path) -> Result<Vec<PathBuf>> {
    let dir = merged.parent().context("the merged bundle has no folder")?;
    let mut files: Vec<PathBuf> = std::fs::read_dir(dir)?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|x| x == "ssrs"))
        .collect();
    files.sort();
    Ok(files)
}
