//! Build-script part that embeds the viewer (the wasm-bindgen output of
//! `web/`) into the runner for `stallscope site`.
//!
//! Looks in `STALLSCOPE_WEB_DIST` or else `<workspace>/target/web-dist`
//! (where `cargo xtask` builds the viewer before the runner) and writes
//! `$OUT_DIR/web_dist.rs` with `WEB_DIST: &[(&str, &[u8])]` (`include_bytes!`
//! of every file there) and `WEB_DIST_SOURCE`. A folder that is missing gives
//! an empty list, and `stallscope site` then says how to build the viewer.
use std::fmt::Write as _;
use std::path::{Path, PathBuf};

pub fn embed() {
    println!("cargo:rerun-if-env-changed=STALLSCOPE_WEB_DIST");
    let manifest = PathBuf::from(
        std::env::var_os("CARGO_MANIFEST_DIR").expect("cargo sets CARGO_MANIFEST_DIR"),
    );
    let dist = std::env::var_os("STALLSCOPE_WEB_DIST")
        .map(PathBuf::from)
        .unwrap_or_else(|| manifest.join("../target/web-dist"));
    println!("cargo:rerun-if-changed={}", dist.display());
    let mut files = Vec::new();
    if let Ok(entries) = std::fs::read_dir(&dist) {
        for entry in entries.flatten() {
            let path = entry.path();
            let Some(name) = path
                .file_name()
                .and_then(|n| n.to_str())
                .map(str::to_string)
            else {
                continue;
            };
            if path.is_file() && !name.starts_with('.') {
                println!("cargo:rerun-if-changed={}", path.display());
                files.push((name, absolute(&path)));
            }
        }
    }
    files.sort();
    let mut code = String::from(
        "/// The viewer's files, embedded at build time (empty when built without them).\n\
         pub(crate) const WEB_DIST: &[(&str, &[u8])] = &[\n",
    );
    for (name, path) in &files {
        writeln!(
            code,
            "    ({name:?}, include_bytes!({:?})),",
            path.display().to_string()
        )
        .expect("writing to a String");
    }
    code.push_str("];\n");
    writeln!(
        code,
        "/// Where the build looked for the viewer.\npub(crate) const WEB_DIST_SOURCE: &str = {:?};",
        absolute(&dist).display().to_string()
    )
    .expect("writing to a String");
    let out =
        PathBuf::from(std::env::var_os("OUT_DIR").expect("cargo sets OUT_DIR")).join("web_dist.rs");
    std::fs::write(&out, code).expect("OUT_DIR is writable");
}

fn absolute(path: &Path) -> PathBuf {
    path.canonicalize().unwrap_or_else(|_| path.to_path_buf())
}
