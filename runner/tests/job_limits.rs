//! `stallscope job --tune` under the machine's real limits (issue "before
//! it crashes"): a `/dev/shm` too small for the script's own settings (a
//! mount namespace with a 32 MiB tmpfs, as an unprivileged user namespace
//! allows), and an affinity of one CPU. The tuner finds what fits: it
//! exits 0 with a recommendation that ran, names `/dev/shm` and the bytes
//! in flight, and never recommends more workers than the CPUs allow.

#[allow(dead_code)]
mod util;

use std::process::Command;

use stallscope_bundle::{CrashCause, Failure, ParamValue};
use util::*;

/// The job, options first, then the script under the peers' Python.
fn job_args(out: &std::path::Path, options: &[&str], script: &str, args: &[&str]) -> Vec<String> {
    let mut v: Vec<String> = vec![env!("CARGO_BIN_EXE_stallscope").into(), "job".into()];
    v.extend(options.iter().map(|s| s.to_string()));
    v.extend(["--out".into(), out.display().to_string(), "--".into()]);
    v.push(peers_python().display().to_string());
    v.push(job_fixture(script));
    v.extend(args.iter().map(|s| s.to_string()));
    v
}

const TUNE: [&str; 13] = [
    "--tune",
    "--steps",
    "4",
    "--warmup",
    "1",
    "--repeats",
    "1",
    "--max-repeats",
    "1",
    "--verify-pairs",
    "1",
    "--replay-mib",
    "64",
];

#[test]
fn a_dev_shm_too_small_for_your_settings_gets_a_recommendation_that_runs() {
    let dir = temp_dir("job-small-shm");
    let out = dir.path().join("out");
    let job = job_args(&out, &TUNE, "limits/big_batches.py", &["--samples", "64"]);
    let quoted: Vec<String> = job.iter().map(|a| format!("'{a}'")).collect();
    let script = format!(
        "mount -t tmpfs -o size=32m tmpfs /dev/shm && exec {}",
        quoted.join(" ")
    );
    let o = Command::new("unshare")
        .args(["-rm", "sh", "-c", &script])
        .env("OMP_NUM_THREADS", "1")
        .output()
        .expect("unshare (util-linux) runs the job in a mount namespace");
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
    let b = valid_bundle(&out.join("bundle.json"));
    let limits = b.environment.limits.as_ref().expect("the machine's limits");
    assert_eq!(limits.shm_total_bytes, Some(32 << 20), "{limits:?}");
    let e = b.experiment("job").unwrap();
    let own = e.configuration("script").unwrap();
    assert!(
        matches!(
            own.failure,
            Some(Failure::Crashed {
                cause: CrashCause::SharedMemory,
                ..
            })
        ),
        "{:?}",
        own.failure
    );
    let Some(ParamValue::Text(change)) = e.settings.get("tune_change") else {
        panic!("no change stored: {:?}", e.settings);
    };
    assert!(
        change.starts_with("DataLoader(..., num_workers="),
        "{change}"
    );
    // The recommendation ran here: its configuration has runs, no failure.
    let ran = e
        .configurations
        .iter()
        .filter(|c| c.failure.is_none() && !c.runs.is_empty())
        .count();
    assert!(ran > 0, "{:?}", e.configurations);
    let printed = String::from_utf8_lossy(&o.stdout);
    let flat = printed.split_whitespace().collect::<Vec<_>>().join(" ");
    assert!(flat.contains("/dev/shm"), "{printed}");
    assert!(flat.contains("in flight"), "{printed}");
    assert!(
        flat.contains(&format!("Recommendation: {change}")),
        "{printed}"
    );
}

#[test]
fn under_one_cpu_no_recommendation_exceeds_it() {
    let dir = temp_dir("job-one-cpu");
    let out = dir.path().join("out");
    let job = job_args(&out, &TUNE, "train_light.py", &["--workers", "0"]);
    let o = Command::new("taskset")
        .args(["-c", "0"])
        .args(&job)
        .env("OMP_NUM_THREADS", "1")
        .output()
        .expect("taskset (util-linux) runs the job on one CPU");
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
    let b = valid_bundle(&out.join("bundle.json"));
    let limits = b.environment.limits.as_ref().expect("the machine's limits");
    assert_eq!(limits.usable_cpus, 1, "{limits:?}");
    let e = b.experiment("job").unwrap();
    for c in &e.configurations {
        if let Some(ParamValue::Int(w)) = c.params.get("num_workers") {
            assert!(*w <= 1, "{} asks for {w} workers on one CPU", c.id);
        }
    }
    let tune_grid = format!("{:?}", e.settings.get("tune_grid"));
    assert!(tune_grid.contains("1 usable CPU,"), "{tune_grid}");
}

/// A job of `train_python_objects.py` (a Dataset of Python lists, read in
/// order by 2 forked workers: copy-on-read) over `samples`, the window
/// `steps` steps after 10 warm-up steps; its bundle.
fn python_objects(out: &std::path::Path, samples: u32, steps: u32) -> stallscope_bundle::Bundle {
    let options = [
        "--steps".to_string(),
        steps.to_string(),
        "--warmup".into(),
        "10".into(),
        "--repeats".into(),
        "1".into(),
    ];
    let options: Vec<&str> = options.iter().map(String::as_str).collect();
    let n = samples.to_string();
    let script_args = ["--samples", n.as_str(), "--no-shuffle"];
    let job = job_args(out, &options, "train_python_objects.py", &script_args);
    let o = Command::new(&job[0])
        .args(&job[1..])
        .env("OMP_NUM_THREADS", "1")
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
    valid_bundle(&out.join("bundle.json"))
}

/// The largest worker's USS at the end of the configuration's whole-run
/// window.
fn largest_worker_uss(b: &stallscope_bundle::Bundle) -> u64 {
    let c = &b.experiment("job").unwrap().configurations[0];
    c.runs
        .iter()
        .filter(|r| r.whole_run.is_some())
        .flat_map(|r| r.memory.iter().flat_map(|m| m.processes.iter()))
        .filter(|p| p.role == "worker")
        .filter_map(|p| p.uss_bytes)
        .max()
        .expect("a worker's USS")
}

/// The forecast of a full epoch's per-worker memory from a 20-step window
/// is within 20% of that memory measured at the epoch's end (a window that
/// runs to it), for two dataset sizes.
#[test]
fn the_copy_on_read_forecast_of_a_full_epoch_holds_within_20_percent() {
    let dir = temp_dir("job-copy-on-read");
    for samples in [20_000u32, 40_000] {
        let short = python_objects(&dir.path().join(format!("short-{samples}")), samples, 20);
        let c = &short.experiment("job").unwrap().configurations[0];
        let f = c
            .forecast
            .as_ref()
            .expect("a forecast of the configuration");
        let figure = f
            .worker_epoch_end
            .as_ref()
            .expect("the workers at the epoch's end");
        // The whole epoch: its batches less the warm-up and one more.
        let full_steps = samples / 256 - 11;
        let full = python_objects(
            &dir.path().join(format!("full-{samples}")),
            samples,
            full_steps,
        );
        let measured = largest_worker_uss(&full) as f64;
        let error = figure.bytes as f64 / measured - 1.0;
        eprintln!(
            "{samples} samples: forecast {:.1} MiB ({}), measured {:.1} MiB, error {:+.1}%",
            figure.bytes as f64 / 1048576.0,
            figure.basis,
            measured / 1048576.0,
            error * 100.0
        );
        assert!(
            error.abs() <= 0.20,
            "{samples} samples: error {:+.1}%",
            error * 100.0
        );
    }
}
