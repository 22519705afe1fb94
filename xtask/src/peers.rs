//! `cargo xtask setup --peers`: the Python environment of the peer engines
//! (PyTorch's DataLoader, SPDL, NVIDIA DALI and torchdata.nodes) in the
//! cache, pinned, and Debian's FFmpeg 5 libraries that `spdl.io` loads; one
//! line when it is already there.
use crate::cmd::Cmd;
use crate::libtorch;
use anyhow::{Context, Result, bail};
use std::path::{Path, PathBuf};

/// The environment's folder inside `<cache>/peers/` (the runner looks there).
pub(crate) const VENV: &str = "venv-2.11.0";
/// Pinned packages: what the harness was written and tested against.
const PACKAGES: [&str; 5] = [
    "torch==2.11.0",
    "torchvision==0.26.0",
    "spdl==0.8.0",
    "pillow==13.0.0",
    "numpy==2.4.6",
];
/// The engines added later, pinned too: installed into an environment that
/// has PACKAGES already instead of remaking it (about 280 MB to download,
/// 630 MB more on disk, a minute).
const ENGINE_PACKAGES: [&str; 3] = [
    // The `dali` engine (its CPU pipelines need no GPU: `device_id=None`).
    "nvidia-dali-cuda130==2.4.0",
    // The `nodes` engine.
    "torchdata==0.11.0",
    // `stallscope job` is tested on a script that trains with Lightning's
    // Trainer, as users' scripts do.
    "lightning==2.6.6",
];
/// Debian's FFmpeg 5 libraries (spdl 0.8 accepts FFmpeg 5).
pub(crate) const FFMPEG: [&str; 7] = [
    "libavutil57",
    "libavcodec59",
    "libavformat59",
    "libavfilter8",
    "libswscale6",
    "libswresample4",
    "libavdevice59",
];
/// What must import, and the versions that must answer (PACKAGES, then ENGINE_PACKAGES).
const CHECK: &str = "import torch, torchvision, spdl.pipeline, spdl.io, PIL, numpy; \
import importlib.metadata as m; \
print(torch.__version__.split('+')[0], torchvision.__version__.split('+')[0], m.version('spdl'))";
const ENGINE_CHECK: &str = "import nvidia.dali, nvidia.dali.plugin.pytorch, torchdata.nodes, lightning; \
import importlib.metadata as m; \
print(m.version('nvidia-dali-cuda130'), m.version('torchdata'), m.version('lightning'))";

/// The environment's interpreter.
pub(crate) fn python() -> Result<PathBuf> {
    Ok(libtorch::cache_root()?
        .join("peers")
        .join(VENV)
        .join("bin/python"))
}

fn answers(python: &Path, check: &str, versions: &[&str]) -> bool {
    python.exists()
        && Cmd::new(python)
            .args(["-c", check])
            .read()
            .is_ok_and(|v| v.split_whitespace().collect::<Vec<_>>() == versions)
}

fn base_works(python: &Path) -> bool {
    answers(python, CHECK, &["2.11.0", "0.26.0", "0.8.0"])
}

fn engines_work(python: &Path) -> bool {
    answers(python, ENGINE_CHECK, &["2.4.0", "0.11.0", "2.6.6"])
}

fn works(python: &Path) -> bool {
    base_works(python) && engines_work(python)
}

fn pip_install(venv: &Path, packages: &[&str]) -> Result<()> {
    Cmd::new(venv.join("bin/pip"))
        .args(["install", "--quiet", "--disable-pip-version-check"])
        .args(packages)
        .run()
        .with_context(|| format!("installing {} from PyPI failed", packages.join(" ")))
}

/// Make the environment unless it works; returns what was done.
pub(crate) fn ensure(done: &mut Vec<String>) -> Result<PathBuf> {
    let python = python()?;
    if works(&python) {
        return Ok(python);
    }
    let venv = python
        .parent()
        .and_then(Path::parent)
        .context("the environment's folder")?
        .to_path_buf();
    if base_works(&python) {
        eprintln!(
            "setup: adding the dali and nodes engines to {} ({}): about 630 MB and a minute",
            venv.display(),
            ENGINE_PACKAGES.join(" ")
        );
        pip_install(&venv, &ENGINE_PACKAGES)?;
        // torchdata requires torch, and pip brings torch's triton back.
        drop_triton(&venv)?;
        check(&python, &venv)?;
        done.push(format!(
            "added {} to the peers' Python environment {}",
            ENGINE_PACKAGES.join(" "),
            venv.display()
        ));
        return Ok(python);
    }
    eprintln!(
        "setup: making the peers' Python environment in {} ({}): about 5 GB and 2 minutes",
        venv.display(),
        PACKAGES
            .iter()
            .chain(&ENGINE_PACKAGES)
            .copied()
            .collect::<Vec<_>>()
            .join(" ")
    );
    if venv.exists() {
        std::fs::remove_dir_all(&venv)
            .with_context(|| format!("removing the broken environment {}", venv.display()))?;
    }
    if let Some(parent) = venv.parent() {
        std::fs::create_dir_all(parent)?;
    }
    Cmd::new("python3")
        .args(["-m", "venv"])
        .arg(&venv)
        .run()
        .context("python3 -m venv failed (Debian: apt-get install python3-venv)")?;
    let all: Vec<&str> = PACKAGES.iter().chain(&ENGINE_PACKAGES).copied().collect();
    pip_install(&venv, &all)?;
    drop_triton(&venv)?;
    check(&python, &venv)?;
    done.push(format!(
        "made the peers' Python environment {}",
        venv.display()
    ));
    Ok(python)
}

/// Triton (~640 MB) serves torch.compile's GPU kernels only; neither the
/// DataLoader, SPDL, DALI, torchdata.nodes nor eager training imports it.
fn drop_triton(venv: &Path) -> Result<()> {
    Cmd::new(venv.join("bin/pip"))
        .args(["uninstall", "--quiet", "-y", "triton"])
        .run()
        .context("removing triton failed")
}

/// Fail with what does not import when the environment does not answer the pinned versions.
fn check(python: &Path, venv: &Path) -> Result<()> {
    if works(python) {
        return Ok(());
    }
    let why = [CHECK, ENGINE_CHECK]
        .iter()
        .find_map(|c| Cmd::new(python).args(["-c", c]).read().err())
        .map_or_else(|| "wrong versions".to_string(), |e| format!("{e:#}"));
    bail!(
        "the peers' environment {} was made but does not import torch, torchvision, spdl.pipeline, \
spdl.io, nvidia.dali and torchdata.nodes at the pinned versions: {why}",
        venv.display()
    );
}
