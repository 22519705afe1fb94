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
