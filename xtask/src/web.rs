//! The viewer's part of `cargo xtask test` and `cargo xtask bench viewer` (owned by the viewer's engineer).
use crate::cmd::cargo;
use anyhow::{Result, bail};

/// Builds the viewer for wasm32.
pub fn test() -> Result<()> {
    cargo()
        .args([
            "build",
            "-p",
            "stallscope-web",
            "--target",
            "wasm32-unknown-unknown",
        ])
        .run()
}

/// The viewer benchmark.
pub fn bench() -> Result<()> {
    bail!("the viewer benchmark is not written yet")
}
