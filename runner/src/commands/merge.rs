//! `stallscope merge DIR`: every per-rank bundle (`*.rank-R.json`) of a
//! folder into the one merged bundle, `DIR/bundle.merged.json` or `--out`
//! (the core's `rank_files`, `read_rank_bundles` and `merge_into` find,
//! read, merge and write it, sidecars first; on every core: 16,384 ranks in
//! docs/ranks.md).
use std::path::PathBuf;
use std::process::ExitCode;

use stallscope_bundle::RunState;
use stallscope_core::{MergedFileError, MergedWritten, merge_into, rank_files, read_rank_bundles};

#[derive(Debug, clap::Args)]
pub struct MergeArgs {
    /// The folder holding the ranks' bundles (bundle.rank-0.json, bundle.rank-1.json, ...).
    pub dir: PathBuf,
    /// The merged bundle to write (default DIR/bundle.merged.json).
    #[arg(long)]
    pub out: Option<PathBuf>,
}

pub fn run(args: &MergeArgs) -> anyhow::Result<ExitCode> {
    let files = rank_files(&args.dir)?;
    if files.is_empty() {
        anyhow::bail!(
            "{}: no per-rank bundles (*.rank-R.json); expected the folder a ranked `stallscope \
             run` wrote (its --out)",
            args.dir.display()
        );
    }
    let bundles = read_rank_bundles(&files)?;
    let ids: Vec<(String, PathBuf)> = bundles
        .iter()
        .zip(&files)
        .map(|(b, (_, p))| (b.id.clone(), p.clone()))
        .collect();
    let out = args
        .out
        .clone()
        .unwrap_or_else(|| args.dir.join("bundle.merged.json"));
    let MergedWritten {
        bundle: merged,
        sidecars,
        sidecar_bytes,
    } = merge_into(bundles, &out).map_err(|e| {
        let MergedFileError::Merge(m) = &e else {
            return anyhow::Error::new(e);
        };
        let named: Vec<String> = m
            .bundles()
            .iter()
            .filter_map(|id| ids.iter().find(|(i, _)| i == id))
            .map(|(id, p)| format!("{id} is {}", p.display()))
            .collect();
        let mut text = format!("{}: {m}", args.dir.display());
        if !named.is_empty() {
            text.push_str(&format!(" ({})", named.join(", ")));
        }
        anyhow::Error::msg(text)
    })?;
    let state = match merged.status.state {
        RunState::Complete => "complete",
        _ => "partial",
    };
    crate::outln!(
        "merged {} ranks ({state}): {}",
        merged.ranks.len(),
        out.display()
    );
    if sidecars > 0 {
        crate::outln!(
            "  with {sidecars} sidecar file(s) of per-rank steps beside it, {:.1} MB",
            sidecar_bytes as f64 / 1e6
        );
    }
    if let Some(m) = &merged.status.message {
        crate::outln!(
            "{}",
            crate::report::text::fit(m, crate::report::text::WIDTH)
        );
    }
    Ok(ExitCode::SUCCESS)
}
