//! `stallscope job` end to end: real training scripts (fixtures/job/, plain
//! PyTorch from the peers venv) run unmodified under the real binary; the
//! bundle validates with both timing modes per configuration, the settings
//! the DataLoader really used, and a script's failure recorded with its
//! exception.

#[allow(dead_code)]
mod util;

use stallscope_bundle::{ParamValue, TimingMode};
use util::*;

/// The script's own settings (no workers) and a sweep to 2 workers: both
/// modes, every step counted, the DataLoader's real arguments recorded.
#[test]
fn a_training_script_is_measured_and_swept_unmodified() {
    let dir = temp_dir("job");
    let out = dir.path().join("out");
    let py = peers_python();
    let script = job_fixture("train_slow_dataset.py");
    let o = stallscope()
        .args(["job", "--steps", "8", "--warmup", "2", "--repeats", "1"])
        .args(["--sweep", "num_workers=2", "--out"])
        .arg(&out)
        .args(["--", py.to_str().unwrap(), &script, "--samples", "512"])
        .args(["--delay-ms", "2"])
        .env("OMP_NUM_THREADS", "1")
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
    let b = valid_bundle(&out.join("bundle.json"));
    let e = b.experiment("job").unwrap();
    assert_eq!(e.configurations.len(), 2);
    for (c, workers) in e.configurations.iter().zip([0i64, 2]) {
        assert!(c.failure.is_none(), "{}: {:?}", c.id, c.failure);
        assert_eq!(
            c.params.get("actual_num_workers"),
            Some(&ParamValue::Int(workers)),
            "{}",
            c.id
        );
        for mode in [TimingMode::WholeRun, TimingMode::Diagnostic] {
            let r = c.runs.iter().find(|r| r.timing_mode == mode).unwrap();
            match mode {
                TimingMode::WholeRun => {
                    let w = r.whole_run.as_ref().unwrap();
                    assert_eq!((w.steps, w.samples), (Some(8), Some(8 * 32)), "{}", c.id);
                }
                _ => {
                    let s = r.steps.as_ref().unwrap();
                    assert_eq!(s.next_wait_ns.len(), 8, "{}", c.id);
                }
            }
        }
    }
    // The script's own output reached the terminal untouched, the records
    // did not.
    assert!(!String::from_utf8_lossy(&o.stdout).contains("\"type\""));
}

/// A script that fails before its first step: the configuration records
/// the exception, the bundle stays valid, the exit status says a failure.
#[test]
fn a_script_that_fails_first_is_one_clear_failure() {
    let dir = temp_dir("job-fails");
    let script = dir.path().join("train.py");
    std::fs::write(
        &script,
        "import torch\nfrom torch.utils.data import DataLoader\n\
         loader = DataLoader(list(range(100)), batch_size=4)\n\
         raise RuntimeError('the data folder is missing')\n",
    )
    .unwrap();
    let out = dir.path().join("out");
    let py = peers_python();
    let o = stallscope()
        .args(["job", "--steps", "4", "--repeats", "1", "--out"])
        .arg(&out)
        .args(["--", py.to_str().unwrap(), script.to_str().unwrap()])
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(1), "{}", text(&o));
    let b = valid_bundle(&out.join("bundle.json"));
    let c = &b.experiment("job").unwrap().configurations[0];
    let f = format!("{:?}", c.failure.as_ref().expect("a failure"));
    assert!(
        f.contains("RuntimeError") && f.contains("the data folder is missing"),
        "{f}"
    );
    assert!(f.contains("exit status 1"), "{f}");
}
