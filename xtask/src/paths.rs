//! Where things are: the workspace root and cargo's target folder. A leaf
//! every task may use, so no task reaches into the crate root or another
//! task for them.
use std::path::{Path, PathBuf};

/// The workspace root: the folder above this crate's manifest.
pub(crate) fn repo_root() -> PathBuf {
    let manifest = std::env::var_os("CARGO_MANIFEST_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(env!("CARGO_MANIFEST_DIR")));
    manifest.parent().map(PathBuf::from).unwrap_or(manifest)
}

/// Cargo's target folder: `$CARGO_TARGET_DIR` or `target/` in the workspace.
pub(crate) fn target_dir(repo: &Path) -> PathBuf {
    match std::env::var_os("CARGO_TARGET_DIR") {
        Some(dir) if !dir.is_empty() => repo.join(dir),
        _ => repo.join("target"),
    }
}
