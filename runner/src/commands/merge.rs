//! `stallscope merge DIR`: read every per-rank bundle (`*.rank-R.json`) of a
//! folder and write the one merged bundle (`stallscope_bundle::merge`) to
//! `DIR/bundle.merged.json` or `--out`, without indentation, in format 1.3's
//! shape (`merge::compact_on`): the job's runs and the ranks' summary
//! column-wise in the bundle, every rank's per-step series in sidecar files
//! (`*.ssrs`) beside it, each written atomically before the bundle that
//! names them. Reading, compacting and writing the sidecars each run on
//! every core (16,384 ranks: see docs/ranks.md).
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use anyhow::Context;
use stallscope_bundle::merge::{Compacted, MergeError, compact_on};
use stallscope_bundle::{Bundle, RunState};

use crate::cli::MergeArgs;
use stallscope_core::bundle_file::{self, write_atomic_compact};

/// The rank a per-rank bundle's file name carries: `X.rank-R.json` → R.
pub fn rank_of_file(name: &str) -> Option<u32> {
    let stem = name.strip_suffix(".json")?;
    let (_, rank) = stem.rsplit_once(".rank-")?;
    (!rank.is_empty() && rank.bytes().all(|b| b.is_ascii_digit()))
        .then(|| rank.parse().ok())
        .flatten()
}

/// The per-rank bundles of `dir`, sorted by rank.
pub fn rank_files(dir: &Path) -> anyhow::Result<Vec<(u32, PathBuf)>> {
    let entries = std::fs::read_dir(dir)
        .with_context(|| format!("{}: cannot list the folder", dir.display()))?;
    let mut files = Vec::new();
    for entry in entries {
        let entry = entry.with_context(|| format!("{}: cannot list the folder", dir.display()))?;
        let name = entry.file_name();
        if let Some(rank) = name.to_str().and_then(rank_of_file) {
            files.push((rank, entry.path()));
        }
    }
    files.sort();
    Ok(files)
}

/// The threads `merge` works on: one per core, at most 16.
fn threads() -> usize {
    std::thread::available_parallelism()
        .map_or(4, |n| n.get())
        .min(16)
}

/// `work` of every item on [`threads`] threads, each taking the next item
/// not yet taken (a thread the machine slows holds up no share of the
/// others'); the results in the items' order.
fn on_threads<T: Sync, R: Send>(items: &[T], work: impl Fn(&T) -> R + Sync) -> Vec<R> {
    use std::sync::atomic::{AtomicUsize, Ordering};
    let next = AtomicUsize::new(0);
    let mut done: Vec<(usize, R)> = std::thread::scope(|s| {
        let handles: Vec<_> = (0..threads().min(items.len()))
            .map(|_| {
                s.spawn(|| {
                    let mut mine = Vec::new();
                    loop {
                        let i = next.fetch_add(1, Ordering::Relaxed);
                        let Some(item) = items.get(i) else { break mine };
                        mine.push((i, work(item)));
                    }
                })
            })
            .collect();
        handles
            .into_iter()
            .flat_map(|h| h.join().expect("a merging thread panicked"))
            .collect()
    });
    done.sort_by_key(|(i, _)| *i);
    done.into_iter().map(|(_, r)| r).collect()
}

/// Read the files in parallel; the first error (in file order) names its
/// file.
fn read_all(files: &[(u32, PathBuf)]) -> anyhow::Result<Vec<Bundle>> {
    on_threads(files, |(_, p)| {
        bundle_file::read(p).map_err(|e| anyhow::Error::msg(e.paragraphs().join("\n")))
    })
    .into_iter()
    .collect()
}

/// Write `bytes` to `path` through a temporary file in its folder, synced
/// and renamed (a sidecar is binary: written as is, no newline added).
fn write_bytes_atomic(path: &Path, bytes: &[u8]) -> std::io::Result<()> {
    use std::io::Write;
    let dir = path.parent().unwrap_or(Path::new("."));
    let name = path
        .file_name()
        .and_then(|n| n.to_str())
        .unwrap_or("sidecar");
    let tmp = dir.join(format!(".{name}.tmp-{}", std::process::id()));
    {
        let mut f = std::fs::File::create(&tmp)?;
        f.write_all(bytes)?;
        f.sync_all()?;
    }
    std::fs::rename(&tmp, path)
}

/// The sidecars (in parallel), then the bundle: the bundle never names a
/// file not written yet.
fn write_out(out: &Path, merged: &Bundle, sidecars: &[(String, Vec<u8>)]) -> anyhow::Result<()> {
    let folder = out
        .parent()
        .filter(|p| !p.as_os_str().is_empty())
        .unwrap_or(Path::new("."));
    std::fs::create_dir_all(folder).with_context(|| format!("creating {}", folder.display()))?;
    on_threads(sidecars, |(name, bytes)| {
        let path = folder.join(name);
        write_bytes_atomic(&path, bytes).with_context(|| format!("writing {}", path.display()))
    })
    .into_iter()
    .collect::<anyhow::Result<Vec<()>>>()?;
    write_atomic_compact(out, merged).with_context(|| format!("writing {}", out.display()))
}

/// A merged bundle as written, and its sidecars'.
pub struct Written {
    pub bundle: Bundle,
    pub sidecars: usize,
    pub sidecar_bytes: u64,
}

/// Merge the per-rank `bundles` (`stallscope_bundle::merge`, whose
/// [`MergeError`] the error carries) and write the compact bundle to `out`,
/// its sidecars beside it first.
pub fn merge_into(bundles: Vec<Bundle>, out: &Path) -> anyhow::Result<Written> {
    let merged = stallscope_bundle::merge::merge(bundles)?;
    let Compacted {
        bundle: merged,
        sidecars,
    } = compact_on(merged, threads());
    write_out(out, &merged, &sidecars)?;
    Ok(Written {
        bundle: merged,
        sidecars: sidecars.len(),
        sidecar_bytes: sidecars.iter().map(|(_, b)| b.len() as u64).sum(),
    })
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
    let bundles = read_all(&files)?;
    let ids: Vec<(String, PathBuf)> = bundles
        .iter()
        .zip(&files)
        .map(|(b, (_, p))| (b.id.clone(), p.clone()))
        .collect();
    let out = args
        .out
        .clone()
        .unwrap_or_else(|| args.dir.join("bundle.merged.json"));
    let Written {
        bundle: merged,
        sidecars,
        sidecar_bytes,
    } = merge_into(bundles, &out).map_err(|e| {
        let Some(m) = e.downcast_ref::<MergeError>() else {
            return e;
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
    println!(
        "merged {} ranks ({state}): {}",
        merged.ranks.len(),
        out.display()
    );
    if sidecars > 0 {
        println!(
            "  with {sidecars} sidecar file(s) of per-rank steps beside it, {:.1} MB",
            sidecar_bytes as f64 / 1e6
        );
    }
    if let Some(m) = &merged.status.message {
        println!(
            "{}",
            crate::report::text::fit(m, crate::report::text::WIDTH)
        );
    }
    Ok(ExitCode::SUCCESS)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rank_file_names() {
        assert_eq!(rank_of_file("bundle.rank-0.json"), Some(0));
        assert_eq!(rank_of_file("x.y.rank-1023.json"), Some(1023));
        assert_eq!(rank_of_file("bundle.json"), None);
        assert_eq!(rank_of_file("bundle.merged.json"), None);
        assert_eq!(rank_of_file("bundle.rank-.json"), None);
        assert_eq!(rank_of_file("bundle.rank-1a.json"), None);
        assert_eq!(rank_of_file(".bundle.rank-1.json.tmp-4"), None);
    }
}
