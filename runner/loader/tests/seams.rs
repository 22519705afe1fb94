//! The loader's seams hold: its dependency tree has no tch, torch-sys or
//! wgpu, and the worker binary links no libtorch (so a worker process
//! starts in milliseconds, not the ~100 ms of loading libtorch).

use std::process::Command;

#[test]
fn the_loader_depends_on_no_device_crate() {
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
    let out = Command::new(cargo)
        .args([
            "tree",
            "-p",
            "stallscope-loader",
            "-e",
            "normal",
            "--prefix",
            "none",
        ])
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .output()
        .expect("cargo tree runs");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let tree = String::from_utf8_lossy(&out.stdout);
    assert!(tree.contains("stallscope-loader"), "{tree}");
    for line in tree.lines() {
        let name = line.split_whitespace().next().unwrap_or("");
        assert!(
            !matches!(
                name,
                "tch" | "torch-sys" | "wgpu" | "wgpu-core" | "wgpu-hal"
            ),
            "the loader depends on {name}:\n{tree}"
        );
    }
}

#[test]
fn the_worker_binary_links_no_libtorch() {
    let worker = env!("CARGO_BIN_EXE_stallscope-loader-worker");
    let out = Command::new("ldd").arg(worker).output().expect("ldd runs");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let libs = String::from_utf8_lossy(&out.stdout);
    assert!(
        libs.contains("libc.so"),
        "ldd listed nothing useful:\n{libs}"
    );
    for bad in ["libtorch", "libc10", "libvulkan"] {
        assert!(!libs.contains(bad), "{worker} links {bad}:\n{libs}");
    }
}
