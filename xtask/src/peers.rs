//! `cargo xtask setup --peers`: the Python environment of the peer engines
//! (PyTorch's DataLoader, SPDL, NVIDIA DALI and torchdata.nodes) and of the
//! job catalog's training loops (Lightning, MONAI, accelerate, transformers)
//! in the cache, pinned, and Debian's FFmpeg 5 libraries that `spdl.io`
//! loads; one line when it is already there.
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
/// The packages whose loops the ground-truth catalog of `stallscope job`
/// trains (fixtures/job/catalog, python/tests/test_catalog.py), pinned too and
/// added the same way: about 33 MiB to download (and torch's triton again,
/// dropped after), 227 MiB more on disk (monai 1.6.1 16 MiB, accelerate
/// 1.16.0 4 MiB, transformers 5.25.0 131 MiB, their dependencies the rest). Checked to install beside
/// torch==2.11.0 from PyPI.
const JOB_PACKAGES: [&str; 3] = [
    // `ThreadDataLoader`: a background thread fills a buffer from the DataLoader.
    "monai==1.6.1",
    // `Accelerator.prepare`: a DataLoader that fetches one batch ahead.
    "accelerate==1.16.0",
    // `Trainer` on a tiny model built from a config (no download).
    "transformers==5.25.0",
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
/// What must import, and the versions that must answer (PACKAGES; the tiers have theirs).
const CHECK: &str = "import torch, torchvision, spdl.pipeline, spdl.io, PIL, numpy; \
import importlib.metadata as m; \
print(torch.__version__.split('+')[0], torchvision.__version__.split('+')[0], m.version('spdl'))";
const ENGINE_CHECK: &str = "import nvidia.dali, nvidia.dali.plugin.pytorch, torchdata.nodes, lightning; \
import importlib.metadata as m; \
print(m.version('nvidia-dali-cuda130'), m.version('torchdata'), m.version('lightning'))";
/// JOB_PACKAGES: their distributions are found at the pinned versions (importing
/// monai takes seconds; the catalog's test imports each where it runs).
const JOB_CHECK: &str = "import importlib.metadata as m; \
print(m.version('monai'), m.version('accelerate'), m.version('transformers'))";

/// Packages installed over a working base environment instead of remaking it.
struct Tier {
    packages: &'static [&'static str],
    /// Prints the versions that must answer.
    check: &'static str,
    versions: [&'static str; 3],
    cost: &'static str,
}

const TIERS: [Tier; 2] = [
    Tier {
        packages: &ENGINE_PACKAGES,
        check: ENGINE_CHECK,
        versions: ["2.4.0", "0.11.0", "2.6.6"],
        cost: "about 630 MB and a minute",
    },
    Tier {
        packages: &JOB_PACKAGES,
        check: JOB_CHECK,
        versions: ["1.6.1", "1.16.0", "5.25.0"],
        cost: "about 230 MB and a minute",
    },
];

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

fn tier_works(python: &Path, tier: &Tier) -> bool {
    answers(python, tier.check, &tier.versions)
}

fn works(python: &Path) -> bool {
    base_works(python) && TIERS.iter().all(|t| tier_works(python, t))
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
        add_tiers(&python, &venv, done)?;
        return Ok(python);
    }
    eprintln!(
        "setup: making the peers' Python environment in {} ({}): about 5 GB and 2 minutes",
        venv.display(),
        all_packages().join(" ")
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
    pip_install(&venv, &all_packages())?;
    drop_triton(&venv)?;
    check(&python, &venv)?;
    done.push(format!(
        "made the peers' Python environment {}",
        venv.display()
    ));
    Ok(python)
}

fn all_packages() -> Vec<&'static str> {
    let tiers = TIERS.iter().flat_map(|t| t.packages.iter());
    PACKAGES.iter().chain(tiers).copied().collect()
}

/// Install each tier the working base environment lacks (engines, then the
/// catalog's packages) instead of remaking it.
fn add_tiers(python: &Path, venv: &Path, done: &mut Vec<String>) -> Result<()> {
    for tier in TIERS.iter().filter(|t| !tier_works(python, t)) {
        let packages = tier.packages.join(" ");
        eprintln!(
            "setup: adding {packages} to {}: {}",
            venv.display(),
            tier.cost
        );
        pip_install(venv, tier.packages)?;
        // torchdata and accelerate require torch, and pip brings torch's triton back.
        drop_triton(venv)?;
        done.push(format!(
            "added {packages} to the peers' Python environment {}",
            venv.display()
        ));
    }
    check(python, venv)
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
    let why = [CHECK, ENGINE_CHECK, JOB_CHECK]
        .iter()
        .find_map(|c| Cmd::new(python).args(["-c", c]).read().err())
        .map_or_else(|| "wrong versions".to_string(), |e| format!("{e:#}"));
    bail!(
        "the peers' environment {} was made but does not import torch, torchvision, spdl.pipeline, \
spdl.io, nvidia.dali, torchdata.nodes, lightning, monai, accelerate and transformers at the \
pinned versions: {why}",
        venv.display()
    );
}
