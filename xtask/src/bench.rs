//! `cargo xtask bench NAME` and `cargo xtask schema`: dispatch to the benches and the schema test.
use crate::cmd::cargo;
use crate::{bench_compute, bench_image_cnn, bench_job, bench_peers, bench_ranks, web};
use anyhow::{Result, bail};
use std::path::Path;

/// Benchmarks by name and what each measures.
pub(crate) const BENCHES: [(&str, &str); 10] = [
    (
        "overhead",
        "the runner's timing overhead; the timeline sampler on vs off",
    ),
    (
        "loader",
        "the runner's data loader (cargo bench -p stallscope --bench loader)",
    ),
    (
        "workers",
        "process-worker start and restarted vs persistent workers (--bench workers)",
    ),
    (
        "loader-peers",
        "native loader vs DataLoader vs SPDL vs the bare per-image rate, JPEG",
    ),
    (
        "compute-peers",
        "the seeds/003 CNN train step in tch vs Python PyTorch, batches 32 and 256",
    ),
    (
        "image-cnn",
        "images into the image CNN, whole run: this build vs --baseline BIN",
    ),
    (
        "decode",
        "a 1,024-rank merged bundle: typed vs located decode, and validation",
    ),
    (
        "job-overhead",
        "a script under `stallscope job` vs the same script plain, interleaved",
    ),
    ("viewer", "the viewer in a real browser"),
    (
        "ranks",
        "1,024 rank bundles: stallscope merge, then the merged summary in a real browser",
    ),
];

pub(crate) fn run(repo: &Path, args: &[String]) -> Result<()> {
    let Some(name) = args.first() else {
        bail!("`cargo xtask bench` needs a benchmark name: {}", names());
    };
    match name.as_str() {
        "overhead" | "loader" | "workers" => {
            // Process workers run the loader's own small binary: build it
            // beside the bench (release, like `cargo bench`).
            cargo()
                .args(["build", "--release", "-p", "stallscope-loader"])
                .run()?;
            let mut bench = cargo().args(["bench", "-p", "stallscope", "--bench", name]);
            // Anything after the name goes to the bench binary.
            if args.len() > 1 {
                bench = bench.arg("--").args(&args[1..]);
            }
            bench.run()
        }
        "decode" => {
            let mut bench = cargo().args(["bench", "-p", "stallscope-bundle", "--bench", "decode"]);
            if args.len() > 1 {
                bench = bench.arg("--").args(&args[1..]);
            }
            bench.run()
        }
        "loader-peers" => bench_peers::run(repo),
        "compute-peers" => bench_compute::run(repo),
        "image-cnn" => bench_image_cnn::run(repo, &args[1..]),
        "job-overhead" => bench_job::run(repo, &args[1..]),
        "viewer" => web::bench(),
        "ranks" => bench_ranks::run(repo, &args[1..]),
        other => bail!(
            "unknown benchmark `{other}`; the benchmarks are: {}",
            names()
        ),
    }
}

/// Each benchmark on a line of its own: its name and what it measures.
fn names() -> String {
    BENCHES
        .iter()
        .map(|(n, what)| format!("\n  {n:<14} {what}"))
        .collect()
}

/// Regenerates `fixtures/schema/bundle.schema.json` from the format's types.
pub(crate) fn schema() -> Result<()> {
    cargo()
        .env("STALLSCOPE_BLESS", "1")
        .args([
            "test",
            "-p",
            "stallscope-bundle",
            "--features",
            "schema",
            "--test",
            "schema",
        ])
        .run()
}
