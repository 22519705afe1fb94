//! `cargo xtask setup --peers`: the Python environment of the peer engines
//! (PyTorch's DataLoader and SPDL) in the cache, pinned, and Debian's FFmpeg
//! 5 libraries that `spdl.io` loads; one line when it is already there.
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
/// What must import, and the versions that must answer.
const CHECK: &str = "import torch, torchvision, spdl.pipeline, spdl.io, PIL, numpy; \
import importlib.metadata as m; \
print(torch.__version__.split('+')[0], torchvision.__version__.split('+')[0], m.version('spdl'))";

/// The environment's interpreter.
pub(crate) fn python() -> Result<PathBuf> {
    Ok(libtorch::cache_root()?
        .join("peers")
        .join(VENV)
        .join("bin/python"))
}

fn works(python: &Path) -> bool {
    python.exists()
        && Cmd::new(python).args(["-c", CHECK]).read().is_ok_and(|v| {
            v.split_whitespace().collect::<Vec<_>>() == ["2.11.0", "0.26.0", "0.8.0"]
        })
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
    eprintln!(
        "setup: making the peers' Python environment in {} ({}): about 5 GB and 2 minutes",
        venv.display(),
        PACKAGES.join(" ")
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
    Cmd::new(venv.join("bin/pip"))
        .args(["install", "--quiet", "--disable-pip-version-check"])
        .args(PACKAGES)
        .run()
        .context("installing the peers' packages from PyPI failed")?;
    // Triton (~640 MB) serves torch.compile's GPU kernels only; neither the
    // DataLoader, SPDL nor eager training imports it.
    Cmd::new(venv.join("bin/pip"))
        .args(["uninstall", "--quiet", "-y", "triton"])
        .run()
        .context("removing triton failed")?;
    if !works(&python) {
        let why = Cmd::new(&python)
            .args(["-c", CHECK])
            .read()
            .err()
            .map_or_else(|| "wrong versions".to_string(), |e| format!("{e:#}"));
        bail!(
            "the peers' environment {} was made but does not import torch, torchvision, spdl.pipeline and spdl.io: {why}",
            venv.display()
        );
    }
    done.push(format!(
        "made the peers' Python environment {}",
        venv.display()
    ));
    Ok(python)
}
