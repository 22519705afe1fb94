//! `cargo xtask <task>`: setup, test, demo, bench, schema.
mod cmd;
mod libtorch;
mod setup;

use anyhow::{Result, bail};
use std::path::PathBuf;

const USAGE: &str = "usage: cargo xtask <task>
  setup             install what the project needs (libtorch, wasm tooling, Chromium, Vulkan); quiet when present
  test              setup, then fmt, clippy, tests, the wasm builds and the browser tests";

fn main() -> Result<()> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let repo = repo_root();
    match args.first().map(String::as_str) {
        Some("setup") => setup::run(&repo),
        Some("help" | "--help" | "-h") => {
            println!("{USAGE}");
            Ok(())
        }
        Some(other) => bail!("unknown task `{other}`\n{USAGE}"),
        None => bail!("no task given\n{USAGE}"),
    }
}

/// The workspace root: the folder above this crate's manifest.
fn repo_root() -> PathBuf {
    let manifest = std::env::var_os("CARGO_MANIFEST_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(env!("CARGO_MANIFEST_DIR")));
    manifest.parent().map(PathBuf::from).unwrap_or(manifest)
}
