//! `cargo xtask setup`: installs what the project needs when it is missing; one line when nothing is.
use crate::cmd::{Cmd, cargo};
use crate::libtorch;
use anyhow::{Context, Result, bail};
use std::path::Path;
use std::time::Instant;

/// The `wasm-bindgen` crate version the viewer pins; the CLI must match it exactly.
pub(crate) const WASM_BINDGEN_VERSION: &str = "0.2.130";
const WASM_TARGET: &str = "wasm32-unknown-unknown";
/// What a setup is for: the demo needs less than the tests.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Setup {
    /// `cargo xtask demo`: build the runner and the viewer, run on the CPU
    /// or CUDA, serve the site.
    Demo,
    /// `cargo xtask setup`: everything the tests need but the peers.
    Tests,
    /// `cargo xtask setup --peers` (what `cargo xtask test` runs): the peer
    /// engines' Python too.
    Peers,
}

/// Debian packages, why each is needed, and whether the demo needs it.
const DEBIAN_PACKAGES: [(&str, &str, bool); 7] = [
    ("chromium", "the viewer's browser tests", false),
    ("chromium-driver", "WebDriver for the browser tests", false),
    (
        "mesa-vulkan-drivers",
        "a software Vulkan device (lavapipe) for the wgpu runner without a GPU",
        false,
    ),
    ("binaryen", "wasm-opt for the viewer's release build", true),
    (
        "g++",
        "torch-sys compiles its C++ wrapper of libtorch",
        true,
    ),
    (
        "libturbojpeg0",
        "libjpeg-turbo's TurboJPEG API: the native loader's JPEG decoder (loaded at run time)",
        false,
    ),
    (
        "shellcheck",
        "lints scripts/gpu-check.sh, which only a GPU machine runs",
        false,
    ),
];

/// Runs every step `what` needs; prints one line when there was nothing
/// to do.
pub(crate) fn run(repo: &Path, what: Setup) -> Result<()> {
    let start = Instant::now();
    let mut done = Vec::new();
    let peers = what == Setup::Peers;
    debian_packages(&mut done, what)?;
    // The demo's first figure needs no viewer: its tools come after it.
    if what != Setup::Demo {
        wasm_target(&mut done)?;
        wasm_bindgen(&mut done)?;
    }
    let dir = libtorch_dir(repo, &mut done)?;
    let python = if peers {
        Some(crate::peers::ensure(&mut done)?)
    } else {
        None
    };
    if done.is_empty() {
        println!(
            "setup: nothing to do (libtorch {} at {}, {WASM_TARGET}, wasm-bindgen {WASM_BINDGEN_VERSION}, Debian packages present{})",
            libtorch::TORCH_VERSION,
            dir.display(),
            python.map_or(String::new(), |p| format!(
                ", peers' Python {}",
                p.display()
            ))
        );
    } else {
        println!(
            "setup: done in {:.0} s: {}",
            start.elapsed().as_secs_f64(),
            done.join("; ")
        );
    }
    Ok(())
}

/// The viewer's tools (the wasm32 target, wasm-bindgen-cli), which the
/// demo installs once its first figure is printed.
pub(crate) fn viewer_tools() -> Result<()> {
    let mut done = Vec::new();
    wasm_target(&mut done)?;
    wasm_bindgen(&mut done)?;
    if !done.is_empty() {
        println!("setup: {}", done.join("; "));
    }
    Ok(())
}

fn debian_packages(done: &mut Vec<String>, what: Setup) -> Result<()> {
    let mut wanted: Vec<(&str, &str)> = DEBIAN_PACKAGES
        .iter()
        .filter(|(_, _, demo)| *demo || what != Setup::Demo)
        .map(|&(p, why, _)| (p, why))
        .collect();
    if what == Setup::Peers {
        for p in crate::peers::FFMPEG {
            wanted.push((p, "FFmpeg 5, which spdl.io loads (the spdl peer engine)"));
        }
        wanted.push(("python3-venv", "the peers' Python environment"));
    }
    if !Cmd::new("python3")
        .args(["-m", "pip", "--version"])
        .succeeds()
    {
        wanted.push(("python3-pip", "pip downloads libtorch from PyPI"));
    }
    if std::env::var_os("STALLSCOPE_SKIP_APT").is_some() {
        return Ok(());
    }
    if !Cmd::new("dpkg-query").arg("--version").succeeds() {
        bail!(
            "this is not a Debian system (no dpkg-query): install the equivalents of {} yourself, then set STALLSCOPE_SKIP_APT=1",
            names(&wanted)
        );
    }
    let missing: Vec<(&str, &str)> = wanted
        .into_iter()
        .filter(|(p, _)| {
            Cmd::new("dpkg-query")
                .args(["-W", "-f=${Status}", p])
                .read()
                .map_or(true, |s| s.trim() != "install ok installed")
        })
        .collect();
    if missing.is_empty() {
        return Ok(());
    }
    for (p, why) in &missing {
        eprintln!("setup: installing Debian package {p}: {why}");
    }
    let root = Cmd::new("id")
        .arg("-u")
        .read()
        .is_ok_and(|u| u.trim() == "0");
    if !root {
        bail!(
            "these Debian packages are missing and installing them needs root: run `sudo apt-get update && sudo apt-get install -y {}`, then setup again",
            names(&missing)
        );
    }
    Cmd::new("apt-get")
        .arg("update")
        .run()
        .context("apt-get update failed")?;
    Cmd::new("apt-get")
        .env("DEBIAN_FRONTEND", "noninteractive")
        .args(["install", "-y"])
        .args(missing.iter().map(|(p, _)| p))
        .run()
        .context("installing the Debian packages failed")?;
    done.push(format!("installed {}", names(&missing)));
    Ok(())
}

fn names(pkgs: &[(&str, &str)]) -> String {
    pkgs.iter().map(|(p, _)| *p).collect::<Vec<_>>().join(" ")
}

fn wasm_target(done: &mut Vec<String>) -> Result<()> {
    let installed = Cmd::new("rustup")
        .args(["target", "list", "--installed"])
        .read()
        .context("rustup is needed to add the wasm32 target (https://rustup.rs)")?;
    if installed.lines().any(|l| l.trim() == WASM_TARGET) {
        return Ok(());
    }
    eprintln!("setup: adding the Rust target {WASM_TARGET}: shared/ and the viewer build for it");
    Cmd::new("rustup")
        .args(["target", "add", WASM_TARGET])
        .run()?;
    done.push(format!("added {WASM_TARGET}"));
    Ok(())
}

fn wasm_bindgen(done: &mut Vec<String>) -> Result<()> {
    let have = Cmd::new("wasm-bindgen").arg("--version").read().ok();
    let want = format!("wasm-bindgen {WASM_BINDGEN_VERSION}");
    if have.as_deref().map(str::trim) == Some(want.as_str()) {
        return Ok(());
    }
    eprintln!(
        "setup: installing wasm-bindgen-cli {WASM_BINDGEN_VERSION} (found: {}): it must match the viewer's wasm-bindgen crate exactly; about 3 minutes on 2 cores",
        have.as_deref().map_or("none", str::trim)
    );
    // No `--locked`: the registry lacks one of its locked dependencies (toolchain.md).
    cargo()
        .args([
            "install",
            "wasm-bindgen-cli",
            "--version",
            WASM_BINDGEN_VERSION,
        ])
        .run()
        .context("installing wasm-bindgen-cli failed")?;
    let now = Cmd::new("wasm-bindgen")
        .arg("--version")
        .read()
        .unwrap_or_default();
    if now.trim() != want {
        bail!(
            "wasm-bindgen-cli was installed but `wasm-bindgen --version` says {:?}: is ~/.cargo/bin first on PATH?",
            now.trim()
        );
    }
    done.push(format!("installed wasm-bindgen-cli {WASM_BINDGEN_VERSION}"));
    Ok(())
}

fn libtorch_dir(repo: &Path, done: &mut Vec<String>) -> Result<std::path::PathBuf> {
    let cache = libtorch::cache_root()?;
    let dir = libtorch::install_dir(&cache);
    if !libtorch::is_complete(&dir) {
        libtorch::install(&cache).context("setting up libtorch failed")?;
        done.push(format!(
            "unpacked libtorch {} into {}",
            libtorch::TORCH_VERSION,
            dir.display()
        ));
    }
    if libtorch::link(&repo.join(".libtorch"), &dir)? {
        done.push(format!("linked .libtorch -> {}", dir.display()));
    }
    Ok(dir)
}
