//! The invariant: every suite that `run` accepts yields a bundle that
//! `validate` accepts. Suites are generated from a seed — every kind, knobs
//! combined (workers 0 beside prefetch, persistent and pinned; threads and
//! processes), one sample, batches larger than the data, drop_last, several
//! epochs and repeats — run in this process through the same `run_plan` the
//! command uses (real libtorch on the CPU, real worker threads and
//! processes; every fifth suite also on the wgpu back end, lavapipe without a
//! GPU), and the bundle is read back from disk and validated.
//!
//! `STALLSCOPE_SUITES=N` sets how many suites (default 400, of which at
//! least 300 are accepted);
//! `STALLSCOPE_SUITE_SEED=S` the first seed.

// Shared with the runner's end-to-end tests; not every helper is used here.
#[allow(dead_code)]
mod util;

use std::fmt::Write as _;
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::sync::atomic::AtomicBool;

use stallscope_bundle::{parse_bundle, validate};
use stallscope_core::{Backend, NoProgress, RunOptions, run_plan, seeds, suite::parse_suite};
use stallscope_loader::Rng;
use stallscope_torch::{DeviceCtx, TorchBackend};
use stallscope_wgpu::WgpuBackend;
use util::{pick, subset};

/// Samples: often tiny (1, fewer than a batch), sometimes a few batches.
fn samples(rng: &mut Rng) -> u64 {
    *pick(rng, &[1, 2, 3, 7, 16, 33, 64])
}

fn loader_table(rng: &mut Rng, out: &mut String, stall: bool, source: &str) {
    let n = samples(rng);
    let batch = *pick(rng, &[1, 4, 16, 50, 100]);
    writeln!(out, "[experiment.loader]").unwrap();
    writeln!(
        out,
        "source = \"{source}\"\nsamples = {n}\nbatch_size = {batch}"
    )
    .unwrap();
    match source {
        "synthetic" => {
            writeln!(out, "latency_ms = {}", pick(rng, &[0.0, 0.05, 0.2])).unwrap();
            writeln!(out, "cpu_work_rounds = {}", pick(rng, &[0, 10])).unwrap();
        }
        "images" => {
            writeln!(out, "image_width = 20\nimage_height = 15\nresize = 18").unwrap();
            writeln!(out, "flip = {}\nrandom_crop = {}", rng.coin(), rng.coin()).unwrap();
            let decoder = pick(rng, &["auto", "libjpeg-turbo", "zune-jpeg"]);
            writeln!(
                out,
                "decoder = \"{decoder}\"\nscaled_decode = {}",
                rng.coin()
            )
            .unwrap();
        }
        _ => {}
    }
    if stall {
        writeln!(out, "workers = [{}]", pick(rng, &[0, 1, 2])).unwrap();
        writeln!(
            out,
            "worker_kinds = [\"{}\"]",
            pick(rng, &["threads", "processes"])
        )
        .unwrap();
        writeln!(out, "prefetch = [{}]", pick(rng, &[1, 2])).unwrap();
        writeln!(out, "persistent = [{}]", rng.coin()).unwrap();
        writeln!(out, "pinned = [{}]", rng.coin()).unwrap();
    } else {
        writeln!(
            out,
            "workers = {}",
            subset(rng, &["0", "1", "2", "\"auto\""])
        )
        .unwrap();
        writeln!(
            out,
            "worker_kinds = {}",
            subset(rng, &["\"threads\"", "\"processes\""])
        )
        .unwrap();
        writeln!(out, "prefetch = {}", subset(rng, &[1, 2])).unwrap();
        writeln!(out, "persistent = {}", subset(rng, &[false, true])).unwrap();
        writeln!(out, "pinned = {}", subset(rng, &[false, true])).unwrap();
    }
    for key in ["shuffle", "drop_last", "in_order"] {
        if rng.coin() {
            writeln!(out, "{key} = {}", rng.coin()).unwrap();
        }
    }
}

/// One generated suite's TOML text.
fn suite(seed: u64) -> String {
    let mut rng = Rng::new(seed);
    let mut out = String::new();
    writeln!(
        out,
        "title = \"generated {seed}\"\nseed = {}\ndata_seed = {}",
        seed % 7,
        seed % 5
    )
    .unwrap();
    writeln!(
        out,
        "torch_threads = 1\nrepeats = {}\nepochs = {}",
        1 + rng.below(2),
        1 + rng.below(3)
    )
    .unwrap();
    let experiments = 1 + rng.below(2);
    for e in 0..experiments {
        let kind = *pick(
            &mut rng,
            &[
                "compute",
                "transfer",
                "batch_sweep",
                "oom_probe",
                "loader",
                "loader",
                "loader",
                "stall",
                "stall",
            ],
        );
        writeln!(out, "\n[[experiment]]\nid = \"e{e}\"\nkind = \"{kind}\"").unwrap();
        if rng.coin() {
            writeln!(out, "repeats = {}", 1 + rng.below(2)).unwrap();
        }
        match kind {
            "compute" => {
                writeln!(
                    out,
                    "model = \"{}\"",
                    pick(&mut rng, &["linear", "fashion_cnn"])
                )
                .unwrap();
                writeln!(out, "batch_sizes = {}", subset(&mut rng, &[1, 3, 8])).unwrap();
                writeln!(out, "steps = {}", 1 + rng.below(3)).unwrap();
            }
            "transfer" => {
                writeln!(out, "sizes_kib = {}", subset(&mut rng, &[1, 4, 64])).unwrap();
                writeln!(out, "copies = {}", 1 + rng.below(3)).unwrap();
                writeln!(out, "pinned = {}", subset(&mut rng, &[false, true])).unwrap();
                writeln!(out, "non_blocking = {}", subset(&mut rng, &[false, true])).unwrap();
            }
            "batch_sweep" => {
                if rng.coin() {
                    writeln!(out, "model = \"linear\"\ndata = \"tensor\"\nfeatures = 8").unwrap();
                } else {
                    writeln!(out, "model = \"fashion_cnn\"\ndata = \"fashionmnist\"").unwrap();
                }
                writeln!(out, "samples = {}", samples(&mut rng)).unwrap();
                writeln!(out, "batch_sizes = {}", subset(&mut rng, &[1, 4, 16, 100])).unwrap();
            }
            "oom_probe" => {
                writeln!(
                    out,
                    "model = \"linear\"\nmemory_fraction = 0.25\nstart_batch = 4\nmax_batch = 64"
                )
                .unwrap();
            }
            _ => {
                let source = *pick(&mut rng, &["tensor", "synthetic", "images"]);
                if source == "images" {
                    writeln!(out, "model = \"image_cnn\"\nimage_size = 16\nclasses = 3").unwrap();
                } else {
                    writeln!(out, "model = \"linear\"\nfeatures = 8\nclasses = 3").unwrap();
                }
                loader_table(&mut rng, &mut out, kind == "stall", source);
            }
        }
    }
    out
}

#[test]
fn every_accepted_generated_suite_yields_a_valid_bundle() {
    let count: u64 = std::env::var("STALLSCOPE_SUITES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(400);
    let first: u64 = std::env::var("STALLSCOPE_SUITE_SEED")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(1);
    tch::set_num_threads(1);
    let device = DeviceCtx::cpu();
    let wgpu = WgpuBackend::new().expect("a wgpu adapter (lavapipe: `cargo xtask setup`)");
    let stop = AtomicBool::new(false);
    let root = tempfile::tempdir().unwrap();
    // Generated image sets go to a cache of this test's own.
    // SAFETY: the only test of this binary; no other thread reads the environment yet.
    unsafe { std::env::set_var("STALLSCOPE_DATA_CACHE", root.path().join("cache")) };
    let (mut accepted, mut refused, mut invalid, mut panics) = (0, 0, Vec::new(), Vec::new());
    for seed in first..first + count {
        let text = suite(seed);
        let file = format!("generated-{seed}.toml");
        let plan = match parse_suite(&text, &file, "generated", None, false) {
            Ok(plan) => plan,
            Err(e) => {
                // A refusal names the file, line and column.
                let msg = e.to_string();
                assert!(
                    msg.starts_with(&format!("{file}:")) && msg.split(':').nth(2).is_some(),
                    "refusal without a place: {msg}\n{text}"
                );
                refused += 1;
                continue;
            }
        };
        accepted += 1;
        let torch = TorchBackend {
            device: &device,
            data_dir: None,
            seeds: seeds(&plan),
        };
        let mut backends: Vec<(&str, &dyn Backend)> = vec![("libtorch", &torch)];
        if seed % 5 == 0 {
            backends.push(("wgpu", &wgpu));
        }
        for (name, backend) in backends {
            let out_dir = root.path().join(format!("s{seed}-{name}"));
            let options = RunOptions {
                out_dir: Some(&out_dir),
                stop: &stop,
                progress: &NoProgress,
                inject_panic: None,
            };
            let result = catch_unwind(AssertUnwindSafe(|| run_plan(&plan, backend, &options)));
            let at = format!("seed {seed} on {name}");
            match result {
                Err(_) => panics.push(format!("{at}: run_plan panicked\n{text}")),
                Ok(Err(e)) => invalid.push(format!("{at}: run failed: {e:#}\n{text}")),
                Ok(Ok(finished)) => {
                    let bytes = std::fs::read(&finished.path).unwrap();
                    match parse_bundle(&bytes) {
                        Err(e) => invalid.push(format!("{at}: not readable: {e}\n{text}")),
                        Ok(bundle) => {
                            let problems = validate(&bundle);
                            if !problems.is_empty() {
                                let list: Vec<String> =
                                    problems.iter().map(|p| p.to_string()).collect();
                                invalid.push(format!("{at}: {}\n{text}", list.join("\n")));
                            }
                        }
                    }
                }
            }
            let _ = std::fs::remove_dir_all(&out_dir);
        }
    }
    eprintln!(
        "{accepted} accepted, {refused} refused, {} invalid, {} panics",
        invalid.len(),
        panics.len()
    );
    assert!(panics.is_empty(), "{}", panics.join("\n\n"));
    assert!(
        invalid.is_empty(),
        "{} invalid:\n\n{}",
        invalid.len(),
        invalid.join("\n\n")
    );
    assert!(
        accepted * 4 >= count * 3,
        "only {accepted} of {count} generated suites were accepted: the generator drifted"
    );
}
