//! Build script: embeds the Python packages the runner runs (every
//! `python/stallscope_*` folder: the peers harness, the job instrumentation
//! with its `boot/`, and what they share), so the runner can run them from
//! any folder.
use std::path::{Path, PathBuf};

/// Every `.py` file under `dir`, recursively, and the `.c` source the job
/// compiles (`stallscope_job/fastpath.c`), sorted.
fn python_files(dir: &Path, out: &mut Vec<PathBuf>) {
    let Ok(rd) = std::fs::read_dir(dir) else {
        return;
    };
    for entry in rd.flatten() {
        let p = entry.path();
        if p.is_dir() {
            if p.file_name().is_some_and(|n| n != "__pycache__") {
                python_files(&p, out);
            }
        } else if p.extension().is_some_and(|x| x == "py" || x == "c") {
            out.push(p);
        }
    }
}

fn main() {
    let manifest = PathBuf::from(std::env::var_os("CARGO_MANIFEST_DIR").expect("cargo sets it"));
    let python = manifest.join("../../python");
    println!("cargo:rerun-if-changed={}", python.display());
    let mut packages: Vec<PathBuf> = std::fs::read_dir(&python)
        .expect("python/ exists")
        .flatten()
        .map(|e| e.path())
        .filter(|p| {
            p.is_dir()
                && p.file_name()
                    .and_then(|n| n.to_str())
                    .is_some_and(|n| n.starts_with("stallscope_"))
        })
        .collect();
    packages.sort();
    let mut files = Vec::new();
    for dir in &packages {
        println!("cargo:rerun-if-changed={}", dir.display());
        python_files(dir, &mut files);
    }
    files.sort();
    let mut out = String::from(
        "/// The embedded packages' files: (path under `python/`, text).\n\
         pub const FILES: &[(&str, &str)] = &[\n",
    );
    for f in &files {
        println!("cargo:rerun-if-changed={}", f.display());
        let abs = f.canonicalize().expect("the package file exists");
        let name = abs
            .strip_prefix(python.canonicalize().expect("python/ exists"))
            .expect("under python/")
            .to_str()
            .expect("a UTF-8 path")
            .to_string();
        out.push_str(&format!(
            "    ({name:?}, include_str!({:?})),\n",
            abs.display().to_string()
        ));
    }
    out.push_str("];\n");
    let dest =
        PathBuf::from(std::env::var_os("OUT_DIR").expect("cargo sets it")).join("harness_files.rs");
    std::fs::write(dest, out).expect("write harness_files.rs");
}
