//! The crates' seams hold, by their dependency trees: tch (and torch-sys)
//! reach only the libtorch back end and the command that links it, wgpu only
//! the wgpu back end and the command; the core and the peers' crate depend on
//! neither, so they build and test on a machine without libtorch.

use std::collections::BTreeSet;
use std::process::Command;

/// `cargo tree` with `args`, one package per line, no prefix.
fn tree(args: &[&str]) -> String {
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
    let out = Command::new(cargo)
        .arg("tree")
        .args(args)
        .args(["-e", "normal", "--prefix", "none"])
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .output()
        .expect("cargo tree runs");
    assert!(
        out.status.success(),
        "cargo tree {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// The workspace packages among the dependents of `krate` (lines with a
/// local path).
fn workspace_dependents(krate: &str) -> BTreeSet<String> {
    tree(&["--workspace", "-i", krate])
        .lines()
        .filter(|l| l.contains("(/"))
        .filter_map(|l| l.split_whitespace().next().map(str::to_string))
        .collect()
}

#[test]
fn tch_and_wgpu_reach_only_their_back_end_and_the_command() {
    for (krate, backend) in [
        ("tch", "stallscope-torch"),
        ("torch-sys", "stallscope-torch"),
        ("wgpu", "stallscope-wgpu"),
    ] {
        let got = workspace_dependents(krate);
        let want: BTreeSet<String> = [backend, "stallscope"].map(String::from).into();
        assert_eq!(got, want, "the workspace crates that depend on {krate}");
    }
}

#[test]
fn the_core_and_the_peers_know_no_device_library() {
    for krate in ["stallscope-core", "stallscope-peers"] {
        let t = tree(&["-p", krate]);
        assert!(t.contains(krate), "{t}");
        for line in t.lines() {
            let name = line.split_whitespace().next().unwrap_or("");
            assert!(
                !matches!(
                    name,
                    "tch" | "torch-sys" | "wgpu" | "wgpu-core" | "wgpu-hal" | "stallscope-torch"
                ),
                "{krate} depends on {name}:\n{t}"
            );
        }
    }
}
