//! A merged bundle on disk: the per-rank bundles of a folder
//! (`*.rank-R.json`) read in parallel, merged by `stallscope_bundle::merge`
//! and written in format 1.3's compact shape (`merge::compact_on`): the
//! job's runs and the ranks' summary column-wise in the bundle, every rank's
//! per-step series in sidecar files (`*.ssrs`) beside it, each written
//! atomically before the bundle that names them. `stallscope merge` and a
//! job of ranks both write through here.

use std::path::{Path, PathBuf};

use stallscope_bundle::Bundle;
use stallscope_bundle::merge::{Compacted, MergeError, compact_on};

use crate::bundle_file::{self, write_atomic_compact};

/// Why a merged bundle could not be made or written.
#[derive(Debug, thiserror::Error)]
pub enum MergedFileError {
    #[error(transparent)]
    Merge(#[from] MergeError),
    #[error("{0}")]
    Io(String),
}

/// The rank a per-rank bundle's file name carries: `X.rank-R.json` → R.
pub fn rank_of_file(name: &str) -> Option<u32> {
    let stem = name.strip_suffix(".json")?;
    let (_, rank) = stem.rsplit_once(".rank-")?;
    (!rank.is_empty() && rank.bytes().all(|b| b.is_ascii_digit()))
        .then(|| rank.parse().ok())
        .flatten()
}

/// The per-rank bundles of `dir`, sorted by rank.
pub fn rank_files(dir: &Path) -> Result<Vec<(u32, PathBuf)>, MergedFileError> {
    let cannot = |e: std::io::Error| {
        MergedFileError::Io(format!("{}: cannot list the folder: {e}", dir.display()))
    };
    let entries = std::fs::read_dir(dir).map_err(cannot)?;
    let mut files = Vec::new();
    for entry in entries {
        let entry = entry.map_err(cannot)?;
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
pub fn read_rank_bundles(files: &[(u32, PathBuf)]) -> Result<Vec<Bundle>, MergedFileError> {
    on_threads(files, |(_, p)| {
        bundle_file::read_bundle_file(p).map_err(|e| MergedFileError::Io(e.paragraphs().join("\n")))
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
fn write_out(
    out: &Path,
    merged: &Bundle,
    sidecars: &[(String, Vec<u8>)],
) -> Result<(), MergedFileError> {
    let folder = out
        .parent()
        .filter(|p| !p.as_os_str().is_empty())
        .unwrap_or(Path::new("."));
    std::fs::create_dir_all(folder)
        .map_err(|e| MergedFileError::Io(format!("creating {}: {e}", folder.display())))?;
    on_threads(sidecars, |(name, bytes)| {
        let path = folder.join(name);
        write_bytes_atomic(&path, bytes)
            .map_err(|e| MergedFileError::Io(format!("writing {}: {e}", path.display())))
    })
    .into_iter()
    .collect::<Result<Vec<()>, _>>()?;
    write_atomic_compact(out, merged)
        .map_err(|e| MergedFileError::Io(format!("writing {}: {e}", out.display())))
}

/// A merged bundle as written, and its sidecars'.
pub struct MergedWritten {
    pub bundle: Bundle,
    pub sidecars: usize,
    pub sidecar_bytes: u64,
}

/// Merge the per-rank `bundles` (`stallscope_bundle::merge`, whose
/// [`MergeError`] the error carries) and write the compact bundle to `out`,
/// its sidecars beside it first.
pub fn merge_into(bundles: Vec<Bundle>, out: &Path) -> Result<MergedWritten, MergedFileError> {
    let merged = stallscope_bundle::merge::merge(bundles)?;
    let Compacted {
        bundle: merged,
        sidecars,
    } = compact_on(merged, threads());
    write_out(out, &merged, &sidecars)?;
    Ok(MergedWritten {
        bundle: merged,
        sidecars: sidecars.len(),
        sidecar_bytes: sidecars.iter().map(|(_, b)| b.len() as u64).sum(),
    })
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
