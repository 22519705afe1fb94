//! Build script: compiles the C++ shim against the libtorch headers (no CUDA
//! at build time), and lets this crate's tests find libtorch at run time.
use std::path::PathBuf;

fn main() {
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
    // This crate's tests find libtorch without LD_LIBRARY_PATH (the command's
    // build script does the same for the binary).
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
}
