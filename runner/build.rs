//! Build script: embeds the viewer, and lets the binary, tests and benches
//! find libtorch at run time (torch-sys's own rpath flag does not reach
//! downstream binaries).
use std::path::PathBuf;

#[path = "build_web_dist.rs"]
mod build_web_dist;

fn main() {
    build_web_dist::embed();
    println!("cargo:rerun-if-env-changed=LIBTORCH");
    if let Some(lib) = std::env::var_os("LIBTORCH_LIB")
        .map(PathBuf::from)
        .or_else(|| std::env::var_os("LIBTORCH").map(|p| PathBuf::from(p).join("lib")))
    {
        println!("cargo:rustc-link-arg=-Wl,-rpath,{}", lib.display());
    }
}
