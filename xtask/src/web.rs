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

use crate::cmd::{Cmd, cargo};
use anyhow::{Context, Result, bail};
use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};

/// Builds the viewer, then runs the browser tests.
pub fn test() -> Result<()> {
    let repo = crate::repo_root();
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
    // The viewer's unit tests (URL state) run natively.
    cargo()
        .args(["test", "-p", "stallscope-web", "--lib"])
        .run()?;
    let dist = build_dist(&repo)?;
    let runner = build_runner(&repo, &dist)?;
    checks::run(&repo, &runner)
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

/// Export a site with the real `stallscope site`.
pub(crate) fn export_site(runner: &Path, bundles: &[PathBuf], out: &Path) -> Result<()> {
    let mut c = Cmd::new(runner).arg("site");
    for b in bundles {
        c = c.arg(b);
    }
    c.arg("--out").arg(out).run()
}

/// `stallscope serve DIR --port 0`, running until dropped.
pub(crate) struct Server {
    child: Child,
    /// `http://127.0.0.1:PORT/`
    pub(crate) url: String,
}

impl Server {
    pub(crate) fn start(runner: &Path, dir: &Path) -> Result<Server> {
        let mut child = Command::new(runner)
            .arg("serve")
            .arg(dir)
            .args(["--port", "0"])
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .with_context(|| format!("cannot start {} serve", runner.display()))?;
        let stdout = child
            .stdout
            .take()
            .context("no stdout from stallscope serve")?;
        let mut reader = BufReader::new(stdout);
        let mut line = String::new();
        reader.read_line(&mut line)?;
        // Keep reading, so the server never writes into a closed pipe.
        std::thread::spawn(move || std::io::copy(&mut reader, &mut std::io::sink()));
        let url = line
            .split_whitespace()
            .find(|w| w.starts_with("http://127.0.0.1:"))
            .with_context(|| format!("stallscope serve printed no URL: {line:?}"))?
            .to_string();
        Ok(Server { child, url })
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
