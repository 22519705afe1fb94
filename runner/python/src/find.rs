//! Finding the Python of the peer engines: `--python`, then
//! `$STALLSCOPE_PYTHON`, then the environment `cargo xtask setup --peers`
//! makes in the cache; probed once per run for its torch, spdl, DALI and
//! torchdata versions.

use std::path::PathBuf;
use std::sync::OnceLock;

/// The command that installs the peers environment.
pub const INSTALL: &str = "cargo xtask setup --peers";
/// The environment's folder name inside `<cache>/peers/` (torch pinned).
pub const VENV: &str = "venv-2.11.0";

static OVERRIDE: OnceLock<PathBuf> = OnceLock::new();
static PROBED: OnceLock<Result<PythonEnv, String>> = OnceLock::new();

/// `--python`: use this interpreter for the peers (set once, before a run).
pub fn set_python(path: PathBuf) {
    let _ = OVERRIDE.set(path);
}

/// The cache root of xtask's downloads (`$STALLSCOPE_CACHE`,
/// `$XDG_CACHE_HOME/stallscope`, `~/.cache/stallscope`).
pub fn cache_root() -> Option<PathBuf> {
    let var = |k: &str| {
        std::env::var_os(k)
            .filter(|v| !v.is_empty())
            .map(PathBuf::from)
    };
    var("STALLSCOPE_CACHE")
        .or_else(|| var("XDG_CACHE_HOME").map(|d| d.join("stallscope")))
        .or_else(|| var("HOME").map(|h| h.join(".cache/stallscope")))
}

/// The interpreter of the cached peers environment.
pub fn cached_python() -> Option<PathBuf> {
    cache_root().map(|c| c.join("peers").join(VENV).join("bin/python"))
}

/// A working Python and what it has.
#[derive(Debug, Clone)]
pub struct PythonEnv {
    pub python: PathBuf,
    /// Where it came from: `--python`, `STALLSCOPE_PYTHON` or the cache.
    pub from: &'static str,
    pub python_version: String,
    pub torch: String,
    /// The reason when `import spdl.pipeline` failed.
    pub spdl: Result<String, String>,
    /// The reason when `import nvidia.dali` failed.
    pub dali: Result<String, String>,
    /// The reason when `import torchdata.nodes` failed.
    pub torchdata: Result<String, String>,
}

fn choose() -> Result<(PathBuf, &'static str), String> {
    if let Some(p) = OVERRIDE.get() {
        return Ok((p.clone(), "--python"));
    }
    if let Some(p) = std::env::var_os("STALLSCOPE_PYTHON").filter(|v| !v.is_empty()) {
        return Ok((PathBuf::from(p), "STALLSCOPE_PYTHON"));
    }
    match cached_python() {
        Some(p) if p.exists() => Ok((p, "the peers environment in the cache")),
        Some(p) => Err(format!(
            "no Python peers environment: {} does not exist; install it with `{INSTALL}` (or pass --python / set STALLSCOPE_PYTHON)",
            p.display()
        )),
        None => Err(format!(
            "no Python peers environment (HOME is not set); install it with `{INSTALL}` or pass --python"
        )),
    }
}

const PROBE: &str = r#"
import json, platform, importlib.metadata as md
d = {"python": platform.python_version()}
try:
    import torch
    d["torch"] = torch.__version__
except Exception as e:
    d["torch_error"] = repr(e)
try:
    import spdl.pipeline
    d["spdl"] = md.version("spdl")
except Exception as e:
    d["spdl_error"] = repr(e)
try:
    import nvidia.dali
    d["dali"] = nvidia.dali.__version__
except Exception as e:
    d["dali_error"] = repr(e)
try:
    import torchdata.nodes
    d["torchdata"] = md.version("torchdata")
except Exception as e:
    d["torchdata_error"] = repr(e)
print(json.dumps(d))
"#;

fn probe_now() -> Result<PythonEnv, String> {
    let (python, from) = choose()?;
    let out = crate::process::output(python.as_os_str(), &["-c", PROBE]).map_err(|e| {
        format!(
            "cannot start the peers' Python {} (from {from}): {e}; install it with `{INSTALL}`",
            python.display()
        )
    })?;
    let text = String::from_utf8_lossy(&out.stdout);
    let v: serde_json::Value = serde_json::from_str(text.trim()).map_err(|_| {
        format!(
            "the peers' Python {} (from {from}) did not answer its probe ({}): {}; install the environment with `{INSTALL}`",
            python.display(),
            out.status,
            String::from_utf8_lossy(&out.stderr).trim()
        )
    })?;
    let s = |k: &str| v.get(k).and_then(|x| x.as_str()).map(str::to_owned);
    let torch = s("torch").ok_or_else(|| {
        format!(
            "the peers' Python {} (from {from}) cannot import torch: {}; install the environment with `{INSTALL}`",
            python.display(),
            s("torch_error").unwrap_or_default()
        )
    })?;
    Ok(PythonEnv {
        python,
        from,
        python_version: s("python").unwrap_or_default(),
        torch,
        spdl: s("spdl").ok_or_else(|| s("spdl_error").unwrap_or_default()),
        dali: s("dali").ok_or_else(|| s("dali_error").unwrap_or_default()),
        torchdata: s("torchdata").ok_or_else(|| s("torchdata_error").unwrap_or_default()),
    })
}

/// The peers' Python, probed once per process.
pub fn env() -> &'static Result<PythonEnv, String> {
    PROBED.get_or_init(probe_now)
}

impl PythonEnv {
    /// The version of `module` (`spdl.pipeline`, `nvidia.dali` or
    /// `torchdata.nodes`) when it imports, else why not, with the command
    /// that installs it; `torch` always imports in a probed environment.
    pub fn module(&self, module: &str) -> Result<&str, String> {
        let found = match module {
            "spdl.pipeline" => &self.spdl,
            "nvidia.dali" => &self.dali,
            "torchdata.nodes" => &self.torchdata,
            "torch" => return Ok(&self.torch),
            other => return Err(format!("{other} is not probed")),
        };
        found.as_deref().map_err(|why| {
            format!(
                "the peers' Python {} cannot import {module} ({why}); install it with `{INSTALL}`",
                self.python.display()
            )
        })
    }
}
