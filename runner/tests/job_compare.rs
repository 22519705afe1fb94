//! `stallscope compare` of two real job bundles, before and after a change
//! to the training script (its Dataset's per-sample wait removed): the
//! diagnosis of each side and whether it changed, and the whole-run step
//! before → after with its ratio and the spread of its repeats, in the
//! default report and in JSON.

#[allow(dead_code)]
mod util;

use std::path::{Path, PathBuf};

use util::*;

/// `train_slow_dataset.py` with `delay_ms` per sample, two repeats.
fn job(out: &Path, delay_ms: &str) {
    let script =
        PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../fixtures/job/train_slow_dataset.py");
    let o = stallscope()
        .args([
            "job",
            "--steps",
            "6",
            "--warmup",
            "2",
            "--repeats",
            "2",
            "--out",
        ])
        .arg(out)
        .arg("--")
        .arg(peers_python())
        .arg(script)
        .args(["--samples", "512", "--delay-ms", delay_ms])
        .env("OMP_NUM_THREADS", "1")
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
}

#[test]
fn two_jobs_compare_before_and_after() {
    let dir = temp_dir("job-compare");
    let (before, after) = (dir.path().join("before"), dir.path().join("after"));
    // 10 ms a sample, 32 a batch, no workers: the loop waits ~320 ms a step.
    job(&before, "10");
    job(&after, "0");
    let (a, b) = (before.join("bundle.json"), after.join("bundle.json"));
    let o = stallscope()
        .arg("compare")
        .arg(&a)
        .arg(&b)
        .output()
        .unwrap();
    let out = String::from_utf8_lossy(&o.stdout).to_string();
    // The sentences as words, wherever the 100 columns wrapped them.
    let flat = out.split_whitespace().collect::<Vec<_>>().join(" ");
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
    assert!(
        flat.contains("Diagnosis (diagnostic runs, the job's own settings)"),
        "{out}"
    );
    // The slow side is input-bound; the other side's diagnosis is named
    // after an arrow, changed or not.
    let from = flat.find("Diagnosis").unwrap();
    let to = flat.find("Whole-run step").unwrap();
    let diagnosis = &flat[from..to];
    assert!(
        diagnosis.contains(": input-bound (wait ") || diagnosis.contains("unchanged: input-bound"),
        "{diagnosis}"
    );
    assert!(diagnosis.contains(" → "), "{diagnosis}");
    // The step fell by far more than any noise: ~320 ms of sleep is gone.
    assert!(flat.contains("Whole-run step (steady): "), "{out}");
    assert!(
        flat.contains(" faster; beyond the noise: repeats spread "),
        "{out}"
    );
    assert!(
        out.contains("settings that differ:\n    command: BASE "),
        "{out}"
    );
    for l in out.lines() {
        assert!(l.chars().count() <= 100, "over 100 columns: {l}");
    }
    let o = stallscope()
        .args(["compare", "--json"])
        .arg(&a)
        .arg(&b)
        .output()
        .unwrap();
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    let ba = &v["before_after"][0];
    assert_eq!(ba["experiment"], "job");
    assert_eq!(ba["base"]["bound"], "input-bound", "{ba}");
    assert_eq!(ba["step"]["moved"], "faster", "{ba}");
    let ratio = ba["step"]["ratio"].as_f64().unwrap();
    assert!(ratio > 0.0 && ratio < 0.5, "{ba}");
}
