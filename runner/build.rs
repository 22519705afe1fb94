//! Build script: compiles the C++ shim against the libtorch headers (no CUDA
//! at build time), embeds the viewer and the Python peers harness, and
//! records the git commit the runner was built from.
use std::path::PathBuf;
use std::process::Command;

#[path = "build_harness.rs"]
mod build_harness;
#[path = "build_web_dist.rs"]
mod build_web_dist;

fn main() {
    build_web_dist::embed();
    build_harness::embed();
    println!("cargo:rerun-if-changed=src/shim/shim.cpp");
    println!("cargo:rerun-if-changed=src/shim/store.cpp");
    println!("cargo:rerun-if-env-changed=LIBTORCH");
    println!("cargo:rerun-if-env-changed=LIBTORCH_INCLUDE");
    let include = std::env::var_os("LIBTORCH_INCLUDE")
        .map(PathBuf::from)
        .or_else(|| std::env::var_os("LIBTORCH").map(|p| PathBuf::from(p).join("include")))
        .expect(
            "LIBTORCH (or LIBTORCH_INCLUDE) must point at libtorch 2.11.0; run `cargo xtask setup`",
        );
    // Let the binary, tests and benches find libtorch without LD_LIBRARY_PATH.
    if let Some(lib) = std::env::var_os("LIBTORCH_LIB")
        .map(PathBuf::from)
        .or_else(|| std::env::var_os("LIBTORCH").map(|p| PathBuf::from(p).join("lib")))
    {
        println!("cargo:rustc-link-arg=-Wl,-rpath,{}", lib.display());
    }
    cc::Build::new()
        .cpp(true)
        .std("c++17")
        .include(&include)
        .include(include.join("torch/csrc/api/include"))
        .define("_GLIBCXX_USE_CXX11_ABI", "1")
        .flag_if_supported("-Wno-unused-parameter")
        .warnings(false)
        .file("src/shim/shim.cpp")
        .file("src/shim/store.cpp")
        .compile("stallscope_shim");

    let commit = Command::new("git")
        .args(["rev-parse", "--short=12", "HEAD"])
        .output()
        .ok()
        .filter(|o| o.status.success())
        .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_string());
    if let Some(commit) = commit {
        println!("cargo:rustc-env=STALLSCOPE_GIT_COMMIT={commit}");
    }
    for p in ["../.git/HEAD", "../.git/refs/heads"] {
        println!("cargo:rerun-if-changed={p}");
    }
}
