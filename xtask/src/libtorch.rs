//! libtorch 2.11.0 for `tch`, CPU-loadable, unpacked from PyPI wheels into a cache and linked as `.libtorch`.
//!
//! Recipe: `../shared/docs/toolchain.md`. The torch wheel holds libtorch; its
//! `libtorch_cpu.so` needs `libcudart.so.13` and `libcupti.so.13` to load even
//! without a GPU, so those come from the CUDA runtime wheels. `libtorch_cuda.so`
//! is left out on purpose: with it absent, torch-sys does not link CUDA and the
//! binaries run on machines without one.
use crate::cmd::Cmd;
use anyhow::{Context, Result, bail, ensure};
use std::fs;
use std::io::{self, BufRead, Read, Write};
use std::path::{Path, PathBuf};

/// The PyTorch release `tch = "=0.24.0"` expects (its build script checks `build-version`).
pub(crate) const TORCH_VERSION: &str = "2.11.0";
const CUDA_TOOLKIT_REQ: &str = "cuda-toolkit[cudart,cupti]==13.0.2";
/// Wheels that `cuda-toolkit[cudart,cupti]==13.0.2` resolves to.
const CUDA_WHEELS: [&str; 2] = ["nvidia_cuda_runtime-13.0.96-", "nvidia_cuda_cupti-13.0.85-"];
/// What `lib/` holds from the torch wheel (`torch/lib/`).
const TORCH_LIBS: [&str; 5] = [
    "libtorch_cpu.so",
    "libtorch.so",
    "libc10.so",
    "libgomp.so.1",
    "libshm.so",
];
/// What `lib/` holds from the CUDA runtime wheels (`nvidia/cu13/lib/`).
const CUDA_LIBS: [&str; 2] = ["libcudart.so.13", "libcupti.so.13"];
const MARKER: &str = ".stallscope-complete";
/// A header the build of torch-sys includes; its presence shows `include/` was unpacked.
const PROBE_HEADER: &str = "include/torch/csrc/api/include/torch/torch.h";

/// Where the cache lives: `$STALLSCOPE_CACHE`, else `$XDG_CACHE_HOME/stallscope`, else `~/.cache/stallscope`.
pub(crate) fn cache_root() -> Result<PathBuf> {
    cache_root_from(|k| std::env::var_os(k))
}

fn cache_root_from(var: impl Fn(&str) -> Option<std::ffi::OsString>) -> Result<PathBuf> {
    let nonempty = |k: &str| var(k).filter(|v| !v.is_empty()).map(PathBuf::from);
    if let Some(dir) = nonempty("STALLSCOPE_CACHE") {
        return Ok(dir);
    }
    if let Some(dir) = nonempty("XDG_CACHE_HOME") {
        return Ok(dir.join("stallscope"));
    }
    let home = nonempty("HOME").context(
        "neither STALLSCOPE_CACHE, XDG_CACHE_HOME nor HOME is set: no place for the download cache",
    )?;
    Ok(home.join(".cache").join("stallscope"))
}

/// The unpacked libtorch folder inside the cache.
pub(crate) fn install_dir(cache: &Path) -> PathBuf {
    cache.join(format!("libtorch-{TORCH_VERSION}-cpu"))
}

/// Whether `dir` holds a complete unpack: its marker lists every library with its size, and they match.
pub(crate) fn is_complete(dir: &Path) -> bool {
    check_marker(dir).is_ok()
}

fn check_marker(dir: &Path) -> Result<()> {
    let marker = dir.join(MARKER);
    let text = fs::read_to_string(&marker).with_context(|| format!("no {}", marker.display()))?;
    let mut seen = 0;
    for line in text
        .lines()
        .filter(|l| !l.starts_with('#') && !l.trim().is_empty())
    {
        let (size, name) = line
            .split_once(' ')
            .with_context(|| format!("{}: line {line:?} is not `SIZE NAME`", marker.display()))?;
        let size: u64 = size
            .parse()
            .with_context(|| format!("{}: bad size in {line:?}", marker.display()))?;
        let path = dir.join(name);
        let actual = fs::metadata(&path)
            .with_context(|| format!("{} is missing", path.display()))?
            .len();
        ensure!(
            actual == size,
            "{} has {actual} bytes, the marker says {size}",
            path.display()
        );
        seen += 1;
    }
    ensure!(
        seen == TORCH_LIBS.len() + CUDA_LIBS.len(),
        "{} lists {seen} libraries",
        marker.display()
    );
    ensure!(
        dir.join(PROBE_HEADER).is_file(),
        "{} is missing",
        dir.join(PROBE_HEADER).display()
    );
    ensure!(
        dir.join("lib/libgomp.so").exists(),
        "lib/libgomp.so is missing"
    );
    ensure!(
        !dir.join("lib/libtorch_cuda.so").exists(),
        "lib/libtorch_cuda.so must not be there"
    );
    Ok(())
}

/// Downloads (when not cached) and unpacks libtorch into `install_dir(cache)`.
pub(crate) fn install(cache: &Path) -> Result<PathBuf> {
    let wheels = cache.join("wheels");
    fs::create_dir_all(&wheels).with_context(|| format!("cannot create {}", wheels.display()))?;
    let torch = match find_wheel(&wheels, &format!("torch-{TORCH_VERSION}-"))? {
        Some(w) => w,
        None => {
            eprintln!(
                "setup: downloading the torch {TORCH_VERSION} wheel from PyPI (about 530 MB) into {}: it holds libtorch",
                wheels.display()
            );
            pip_download(&wheels, &["--no-deps", &format!("torch=={TORCH_VERSION}")])?;
            find_wheel(&wheels, &format!("torch-{TORCH_VERSION}-"))?
                .context("pip finished but no torch wheel is in the cache")?
        }
    };
    let mut cuda = Vec::new();
    for prefix in CUDA_WHEELS {
        if find_wheel(&wheels, prefix)?.is_none() {
            eprintln!(
                "setup: downloading {CUDA_TOOLKIT_REQ} from PyPI (about 13 MB): libtorch_cpu.so needs libcudart.so.13 and libcupti.so.13 to load, even without a GPU"
            );
            pip_download(&wheels, &[CUDA_TOOLKIT_REQ])?;
        }
        cuda.push(find_wheel(&wheels, prefix)?.with_context(|| {
            format!(
                "pip finished but no {prefix}*.whl is in {}",
                wheels.display()
            )
        })?);
    }

    let dest = install_dir(cache);
    // Unpacked beside its destination (one rename away), removed on any failure.
    let partial = tempfile::Builder::new()
        .prefix(&format!("libtorch-{TORCH_VERSION}-cpu.partial-"))
        .tempdir_in(cache)
        .with_context(|| format!("cannot create a folder in {}", cache.display()))?;
    eprintln!("setup: unpacking libtorch into {}", dest.display());
    unpack(&torch, &cuda, partial.path())?;
    // Unless another setup finished first (then its copy is kept and ours removed).
    if !is_complete(&dest) {
        if dest.exists() {
            fs::remove_dir_all(&dest)
                .with_context(|| format!("cannot remove the incomplete {}", dest.display()))?;
        }
        let partial = partial.keep();
        fs::rename(&partial, &dest)
            .with_context(|| format!("cannot move {} to {}", partial.display(), dest.display()))?;
    }
    check_marker(&dest).context("the unpacked libtorch does not verify")?;
    Ok(dest)
}

fn pip_download(dir: &Path, what: &[&str]) -> Result<()> {
    if !Cmd::new("python3")
        .args(["-m", "pip", "--version"])
        .succeeds()
    {
        bail!(
            "`python3 -m pip` is not available; it downloads libtorch from PyPI (Debian: apt-get install python3-pip)"
        );
    }
    Cmd::new("python3")
        .args([
            "-m",
            "pip",
            "download",
            "--disable-pip-version-check",
            "--progress-bar",
            "off",
            "-d",
        ])
        .arg(dir)
        .args(what)
        .run()
        .context("downloading from PyPI failed (is https://pypi.org reachable?)")
}

/// The cached wheel whose file name starts with `prefix`, if any.
fn find_wheel(dir: &Path, prefix: &str) -> Result<Option<PathBuf>> {
    let mut found: Vec<PathBuf> = fs::read_dir(dir)
        .with_context(|| format!("cannot list {}", dir.display()))?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| {
            p.file_name()
                .and_then(|n| n.to_str())
                .is_some_and(|n| n.starts_with(prefix) && n.ends_with(".whl"))
        })
        .collect();
    found.sort();
    Ok(found.pop())
}

/// Unpacks the needed parts of the wheels into `out` and writes the marker last.
fn unpack(torch: &Path, cuda: &[PathBuf], out: &Path) -> Result<()> {
    let lib = out.join("lib");
    fs::create_dir_all(&lib)?;
    let mut listed = Vec::new();

    let mut zip = open_wheel(torch)?;
    let mut version = None;
    for i in 0..zip.len() {
        let mut entry = zip
            .by_index(i)
            .with_context(|| format!("{}: entry {i}", torch.display()))?;
        let name = entry_name(&entry, torch)?;
        if name == "torch/version.py" {
            let mut text = String::new();
            entry.read_to_string(&mut text)?;
            version = Some(
                parse_version_py(&text).with_context(|| format!("{}: {name}", torch.display()))?,
            );
        } else if let Some(rest) = name.strip_prefix("torch/include/") {
            if !name.ends_with('/') {
                let target = out.join("include").join(safe_relative(rest, torch)?);
                extract(&mut entry, &target, torch)?;
            }
        } else if let Some(file) = name.strip_prefix("torch/lib/")
            && TORCH_LIBS.contains(&file)
        {
            listed.push((
                extract(&mut entry, &lib.join(file), torch)?,
                format!("lib/{file}"),
            ));
        }
    }
    let version = version.with_context(|| format!("{}: no torch/version.py", torch.display()))?;
    ensure!(
        version.split('+').next() == Some(TORCH_VERSION),
        "{} is torch {version}; tch 0.24 needs {TORCH_VERSION}",
        torch.display()
    );
    for wheel in cuda {
        let mut zip = open_wheel(wheel)?;
        for file in CUDA_LIBS {
            let name = format!("nvidia/cu13/lib/{file}");
            if let Ok(mut entry) = zip.by_name(&name) {
                listed.push((
                    extract(&mut entry, &lib.join(file), wheel)?,
                    format!("lib/{file}"),
                ));
            }
        }
    }
    for want in TORCH_LIBS.iter().chain(&CUDA_LIBS) {
        ensure!(
            listed.iter().any(|(_, n)| n == &format!("lib/{want}")),
            "the wheels hold no {want} (torch/lib/ or nvidia/cu13/lib/)"
        );
    }
    ensure!(
        out.join(PROBE_HEADER).is_file(),
        "the torch wheel has no torch/{PROBE_HEADER}"
    );
    // torch-sys links `-lgomp`; the wheel only has the versioned name.
    std::os::unix::fs::symlink("libgomp.so.1", lib.join("libgomp.so"))?;
    // torch-sys compares this with the version it expects.
    fs::write(out.join("build-version"), format!("{version}\n"))?;

    let mut marker = format!(
        "# libtorch {version} unpacked by `cargo xtask setup` from {}; SIZE NAME per library\n",
        torch.file_name().unwrap_or_default().to_string_lossy()
    );
    for (size, name) in &listed {
        marker.push_str(&format!("{size} {name}\n"));
    }
    let mut f = fs::File::create(out.join(MARKER))?;
    f.write_all(marker.as_bytes())?;
    f.sync_all()?;
    Ok(())
}

fn open_wheel(path: &Path) -> Result<zip::ZipArchive<io::BufReader<fs::File>>> {
    let f = fs::File::open(path).with_context(|| format!("cannot open {}", path.display()))?;
    zip::ZipArchive::new(io::BufReader::new(f)).with_context(|| {
        format!(
            "{} is not a readable wheel (zip); delete it and run setup again",
            path.display()
        )
    })
}

fn entry_name(
    entry: &zip::read::ZipFile<'_, io::BufReader<fs::File>>,
    wheel: &Path,
) -> Result<String> {
    let name = entry
        .name()
        .with_context(|| format!("{}: an entry name is not readable", wheel.display()))?;
    Ok(name.into_owned())
}

/// Copies one zip entry to `target`; reading it to the end checks its CRC-32. Returns its size.
fn extract(
    entry: &mut zip::read::ZipFile<'_, io::BufReader<fs::File>>,
    target: &Path,
    wheel: &Path,
) -> Result<u64> {
    if let Some(parent) = target.parent() {
        fs::create_dir_all(parent)?;
    }
    let expected = entry.size();
    let name = entry_name(entry, wheel)?;
    let mut out = io::BufWriter::new(
        fs::File::create(target).with_context(|| format!("cannot create {}", target.display()))?,
    );
    let written = io::copy(entry, &mut out).with_context(|| {
        format!(
            "{}: {name} is corrupt (delete the wheel and run setup again)",
            wheel.display()
        )
    })?;
    out.flush()?;
    ensure!(
        written == expected,
        "{}: {name} unpacked to {written} bytes, the archive says {expected}",
        wheel.display()
    );
    Ok(written)
}

/// A path inside the archive, refused if it would leave the target folder.
fn safe_relative<'a>(rest: &'a str, wheel: &Path) -> Result<&'a Path> {
    let p = Path::new(rest);
    ensure!(
        p.components()
            .all(|c| matches!(c, std::path::Component::Normal(_))),
        "{}: entry torch/include/{rest} leaves the include folder",
        wheel.display()
    );
    Ok(p)
}

/// `__version__ = '2.11.0+cu130'` → `2.11.0+cu130`.
fn parse_version_py(text: &str) -> Result<String> {
    for line in io::Cursor::new(text).lines() {
        let line = line?;
        if let Some(rest) = line.trim().strip_prefix("__version__") {
            let v = rest.trim_start().trim_start_matches(':').trim_start();
            let v = v.split_once('=').map_or(v, |(_, r)| r).trim();
            let v = v.trim_matches(|c| c == '\'' || c == '"');
            ensure!(!v.is_empty(), "empty __version__");
            return Ok(v.to_owned());
        }
    }
    bail!("no `__version__ = '…'` line")
}

/// Points `link` (the repo's `.libtorch`) at `target`, replacing a link that points elsewhere.
pub(crate) fn link(link: &Path, target: &Path) -> Result<bool> {
    match fs::symlink_metadata(link) {
        Ok(meta) if meta.file_type().is_symlink() => {
            if fs::read_link(link)? == target {
                return Ok(false);
            }
            fs::remove_file(link)?;
        }
        Ok(_) => bail!(
            "{} exists and is not a symbolic link; remove it so setup can link it to {}",
            link.display(),
            target.display()
        ),
        Err(e) if e.kind() == io::ErrorKind::NotFound => {}
        Err(e) => return Err(e).with_context(|| format!("cannot inspect {}", link.display())),
    }
    std::os::unix::fs::symlink(target, link)
        .with_context(|| format!("cannot link {} to {}", link.display(), target.display()))?;
    Ok(true)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn env<'a>(pairs: &'a [(&str, &str)]) -> impl Fn(&str) -> Option<std::ffi::OsString> + 'a {
        move |k| pairs.iter().find(|(n, _)| *n == k).map(|(_, v)| v.into())
    }

    #[test]
    fn cache_root_prefers_the_override_then_xdg_then_home() {
        let all = [
            ("STALLSCOPE_CACHE", "/c"),
            ("XDG_CACHE_HOME", "/x"),
            ("HOME", "/h"),
        ];
        assert_eq!(cache_root_from(env(&all)).unwrap(), PathBuf::from("/c"));
        let no_override = [
            ("STALLSCOPE_CACHE", ""),
            ("XDG_CACHE_HOME", "/x"),
            ("HOME", "/h"),
        ];
        assert_eq!(
            cache_root_from(env(&no_override)).unwrap(),
            PathBuf::from("/x/stallscope")
        );
        assert_eq!(
            cache_root_from(env(&[("HOME", "/h")])).unwrap(),
            PathBuf::from("/h/.cache/stallscope")
        );
        assert!(cache_root_from(env(&[])).is_err());
    }

    #[test]
    fn version_py_of_the_wheel_parses() {
        let text = "from typing import Optional\n__version__ = '2.11.0+cu130'\ngit_version = 'x'\n";
        assert_eq!(parse_version_py(text).unwrap(), "2.11.0+cu130");
        assert_eq!(
            parse_version_py("__version__: str = \"2.11.0\"").unwrap(),
            "2.11.0"
        );
        assert!(parse_version_py("version = 1").is_err());
    }

    #[test]
    fn archive_paths_that_climb_out_are_refused() {
        let w = Path::new("w.whl");
        assert!(safe_relative("ATen/ATen.h", w).is_ok());
        assert!(safe_relative("../../etc/passwd", w).is_err());
        assert!(safe_relative("/etc/passwd", w).is_err());
    }

    #[test]
    fn an_incomplete_or_tampered_unpack_is_not_complete() {
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path();
        fs::create_dir_all(dir.join("lib")).unwrap();
        fs::create_dir_all(dir.join(PROBE_HEADER).parent().unwrap()).unwrap();
        fs::write(dir.join(PROBE_HEADER), "").unwrap();
        std::os::unix::fs::symlink("libgomp.so.1", dir.join("lib/libgomp.so")).unwrap();
        assert!(!is_complete(dir), "no marker yet");
        let mut marker = String::from("# test\n");
        for f in TORCH_LIBS.iter().chain(&CUDA_LIBS) {
            fs::write(dir.join("lib").join(f), f.as_bytes()).unwrap();
            marker.push_str(&format!("{} lib/{f}\n", f.len()));
        }
        fs::write(dir.join(MARKER), &marker).unwrap();
        assert!(is_complete(dir), "{:?}", check_marker(dir));
        fs::write(dir.join("lib/libc10.so"), "short").unwrap();
        assert!(!is_complete(dir), "a size that differs from the marker");
        fs::write(dir.join("lib/libc10.so"), "libc10.so").unwrap();
        fs::write(dir.join("lib/libtorch_cuda.so"), "").unwrap();
        assert!(
            !is_complete(dir),
            "libtorch_cuda.so would make torch-sys link CUDA"
        );
    }

    #[test]
    fn link_replaces_a_stale_link_but_not_a_folder() {
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path();
        fs::create_dir_all(dir.join("a")).unwrap();
        fs::create_dir_all(dir.join("b")).unwrap();
        let l = dir.join(".libtorch");
        assert!(link(&l, &dir.join("a")).unwrap());
        assert!(
            !link(&l, &dir.join("a")).unwrap(),
            "already right: nothing to do"
        );
        assert!(link(&l, &dir.join("b")).unwrap());
        assert_eq!(fs::read_link(&l).unwrap(), dir.join("b"));
        let err = link(&dir.join("a"), &dir.join("b")).unwrap_err();
        assert!(err.to_string().contains("is not a symbolic link"), "{err}");
    }
}
