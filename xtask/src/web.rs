//! The viewer's part of `cargo xtask test` and `cargo xtask bench viewer`:
//! build the viewer (wasm32, `wasm-release` profile, wasm-bindgen, wasm-opt)
//! into `target/web-dist`, build the runner with it embedded, export a site
//! with the real `stallscope site`, serve it with `stallscope serve`, and
//! drive headless Chromium over WebDriver.
//!
//! How a fresh checkout gets the viewer into the runner: `build_dist` writes
//! `target/web-dist`, then the runner is built with `STALLSCOPE_WEB_DIST`
//! pointing there (runner/build_web_dist.rs embeds every file). A runner
//! built without it refuses `stallscope site` with a message saying this.
mod bench_viewer;
mod checks;
pub(crate) mod rank_bundles;
mod site;

use crate::cmd::{Cmd, cargo};
use anyhow::{Context, Result, bail};
pub(crate) use site::{Server, export_site};
use std::path::{Path, PathBuf};

/// Lints the viewer, builds it, then runs the browser tests (`cargo xtask test-viewer`).
pub fn test() -> Result<()> {
    let repo = crate::repo_root();
    lint_and_unit_tests()?;
    let dist = build_dist(&repo)?;
    browser_tests(&repo, &dist)
}

/// The viewer stage of `cargo xtask test`, whose `viewer-dist` stage built `dist`
/// before the tests stage (the end-to-end test needs the runner with it embedded).
pub(crate) fn test_built(repo: &Path, dist: &Path) -> Result<()> {
    lint_and_unit_tests()?;
    browser_tests(repo, dist)
}

/// Clippy for wasm32, then the viewer's unit tests (URL state), which run natively.
fn lint_and_unit_tests() -> Result<()> {
    cargo()
        .args([
            "clippy",
            "-p",
            "stallscope-web",
            "--target",
            "wasm32-unknown-unknown",
            "--",
            "-D",
            "warnings",
        ])
        .run()?;
    cargo()
        .args(["test", "-p", "stallscope-web", "--lib"])
        .run()
}

/// The runner with `dist` embedded, then xtask's browser checks against it.
fn browser_tests(repo: &Path, dist: &Path) -> Result<()> {
    let runner = build_runner(repo, dist)?;
    checks::run(repo, &runner)
}

/// The viewer benchmark: wasm size, and time to a rendered experiment page.
pub fn bench() -> Result<()> {
    let repo = crate::repo_root();
    let dist = build_dist(&repo)?;
    let runner = build_runner(&repo, &dist)?;
    bench_viewer::run(&repo, &dist, &runner)
}

/// Build the viewer into `target/web-dist`; returns that folder.
pub(crate) fn build_dist(repo: &Path) -> Result<PathBuf> {
    let target = crate::demo::target_dir(repo);
    cargo()
        .args([
            "build",
            "--profile",
            "wasm-release",
            "-p",
            "stallscope-web",
            "--target",
            "wasm32-unknown-unknown",
        ])
        .run()?;
    let built = target.join("wasm32-unknown-unknown/wasm-release/stallscope-web.wasm");
    let dist = target.join("web-dist");
    if dist.exists() {
        std::fs::remove_dir_all(&dist)
            .with_context(|| format!("cannot clear {}", dist.display()))?;
    }
    // wasm-opt runs before wasm-bindgen: binaryen 108 (Debian 12) run after it
    // breaks wasm-bindgen's externref table ("function-typed object must be null").
    let wasm = if Cmd::new("wasm-opt").arg("--version").succeeds() {
        let optimized = target.join("wasm32-unknown-unknown/wasm-release/stallscope_web.opt.wasm");
        Cmd::new("wasm-opt")
            .args([
                "-Oz",
                "--enable-reference-types",
                "--enable-bulk-memory",
                "--enable-nontrapping-float-to-int",
                "--enable-sign-ext",
                "--enable-mutable-globals",
                "--enable-multivalue",
                "-o",
            ])
            .arg(&optimized)
            .arg(&built)
            .run()?;
        optimized
    } else {
        eprintln!(
            "wasm-opt (Debian's binaryen) not found: the viewer's wasm is not size-optimised"
        );
        built
    };
    Cmd::new("wasm-bindgen")
        .args([
            "--target",
            "web",
            "--no-typescript",
            "--out-name",
            "stallscope_web",
            "--out-dir",
        ])
        .arg(&dist)
        .arg(&wasm)
        .run()
        .context("wasm-bindgen 0.2.130 is needed (cargo xtask setup installs it)")?;
    for entry in std::fs::read_dir(repo.join("web/static"))? {
        let entry = entry?;
        std::fs::copy(entry.path(), dist.join(entry.file_name()))?;
    }
    Ok(dist)
}

/// Build the runner with the viewer embedded; returns the binary.
pub(crate) fn build_runner(repo: &Path, dist: &Path) -> Result<PathBuf> {
    cargo()
        .args(["build", "-p", "stallscope", "-p", "stallscope-loader"])
        .env("STALLSCOPE_WEB_DIST", dist)
        .run()?;
    let bin = crate::demo::target_dir(repo).join("debug/stallscope");
    if !bin.is_file() {
        bail!("{} was not built", bin.display());
    }
    Ok(bin)
}
