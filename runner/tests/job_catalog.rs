//! The ground-truth catalog through the whole command: `stallscope job` on
//! training scripts that time their own training thread
//! (fixtures/job/catalog/, truth.py), the bundle's figures against the
//! script's own clock. python/tests/test_catalog.py holds every shape and
//! regime at the instrumentation's records; this holds what the runner
//! makes of them (the training thread's wait, validation spans left out of
//! the step, several batches per step) for the shapes that test the reader
//! most: a background-thread buffer, a validation pass, gradient
//! accumulation.

#[allow(dead_code)]
mod util;

use std::path::Path;
use std::sync::Mutex;

use serde_json::Value;
use stallscope_bundle::{Bundle, TimingMode};
use util::*;

const WARMUP: usize = 5;
const STEPS: usize = 20;

/// One job at a time: the stall by difference sets a job's whole-run
/// window against its replay, run later, and two jobs sharing the 2 cores
/// between them move the loader's share of one and not the other (CI,
/// 2026-12-07: 77.7% by difference against the script's 83.6% with the
/// four jobs of this file at once; 85.3/77.9 and 82.1/79.8 alone).
static ONE_JOB: Mutex<()> = Mutex::new(());

/// The script's own steps (truth.py's lines) of the process `pid`.
fn truth_of(dir: &Path, pid: u64) -> Vec<Value> {
    let path = dir.join(format!("truth-{pid}.jsonl"));
    std::fs::read_to_string(&path)
        .unwrap_or_else(|e| panic!("{}: {e}", path.display()))
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

/// The pid of the unit's measured process (its records' `hello`).
fn measured_pid(unit: &Path) -> u64 {
    for entry in std::fs::read_dir(unit).unwrap().flatten() {
        let text = std::fs::read_to_string(entry.path()).unwrap_or_default();
        if text.contains("\"type\":\"window\"") {
            let hello: Value = serde_json::from_str(text.lines().next().unwrap()).unwrap();
            return hello["pid"].as_u64().unwrap();
        }
    }
    panic!("{}: no process opened a window", unit.display());
}

/// (wait share, mean step seconds) of `steps` (ns per step, wait ns per
/// step).
fn share_and_step(steps: &[(f64, f64)]) -> (f64, f64) {
    let total: f64 = steps.iter().map(|s| s.0).sum();
    let wait: f64 = steps.iter().map(|s| s.1).sum();
    (wait / total, total / steps.len() as f64 / 1e9)
}

/// `stallscope job` on catalog script `shape` in `regime`, the script's
/// truth lines going to `truth`: its output (it exited 0) and bundle.
fn job_on(shape: &str, regime: &str, out: &Path, truth: &Path) -> (std::process::Output, Bundle) {
    let _one = ONE_JOB.lock().unwrap_or_else(|e| e.into_inner());
    std::fs::create_dir_all(truth).unwrap();
    let script = job_fixture(&format!("catalog/{shape}.py"));
    let o = stallscope()
        .args(["job", "--repeats", "1", "--warmup", &WARMUP.to_string()])
        .args(["--steps", &STEPS.to_string(), "--out"])
        .arg(out)
        .args(["--", peers_python().to_str().unwrap(), &script])
        .args(["--regime", regime, "--steps", "60"])
        .env("STALLSCOPE_TRUTH", truth)
        .env("OMP_NUM_THREADS", "1")
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
    let b = valid_bundle(&out.join("bundle.json"));
    (o, b)
}

fn check(shape: &str, regime: &str) {
    let dir = temp_dir(&format!("job-catalog-{shape}"));
    let (out, truth) = (dir.path().join("out"), dir.path().join("truth"));
    let (_, b) = job_on(shape, regime, &out, &truth);
    let c = &b.experiment("job").unwrap().configurations[0];
    // Diagnostic: the bundle's step series against the script's steps of
    // the same process, the window's first step left out (stallscope's
    // window-opening work sits in it, off its own clock by design).
    let run = c
        .runs
        .iter()
        .find(|r| r.timing_mode == TimingMode::Diagnostic)
        .unwrap();
    let s = run.steps.as_ref().unwrap();
    assert_eq!(s.next_wait_ns.len(), STEPS, "{shape}: window steps");
    let ours: Vec<(f64, f64)> = (1..STEPS)
        .map(|i| {
            let step = s.next_wait_ns[i] + s.transfer_ns[i] + s.compute_ns[i];
            (step as f64, s.next_wait_ns[i] as f64)
        })
        .collect();
    let pid = measured_pid(&out.join("units/script-r0-diagnostic"));
    let lines = truth_of(&truth, pid);
    let theirs: Vec<(f64, f64)> = lines[WARMUP + 1..WARMUP + STEPS]
        .iter()
        .map(|l| {
            (
                l["step_ns"].as_f64().unwrap(),
                l["wait_ns"].as_f64().unwrap(),
            )
        })
        .collect();
    let ((a, sa), (b_, sb)) = (share_and_step(&ours), share_and_step(&theirs));
    eprintln!(
        "{shape}/{regime} diagnostic: wait {:.1}% against the script's {:.1}%, step {:.2} ms \
         against {:.2} ms",
        a * 100.0,
        b_ * 100.0,
        sa * 1e3,
        sb * 1e3
    );
    assert!(
        (a - b_).abs() <= 0.05,
        "{shape}/{regime}: wait share {a:.3} vs {b_:.3}"
    );
    assert!(
        (sa / sb - 1.0).abs() <= 0.05,
        "{shape}/{regime}: step {sa} s vs {sb} s"
    );
    whole_run(shape, regime, c, &out, &truth);
}

/// Whole-run: the window's training time over its steps (validation spans
/// left out) against the script's own mean step over the same steps.
fn whole_run(
    shape: &str,
    regime: &str,
    c: &stallscope_bundle::Configuration,
    out: &Path,
    truth: &Path,
) {
    let run = c
        .runs
        .iter()
        .find(|r| r.timing_mode == TimingMode::WholeRun)
        .unwrap();
    let w = run.whole_run.as_ref().unwrap();
    let ours = w.seconds.unwrap() / w.steps.unwrap() as f64;
    let pid = measured_pid(&out.join("units/script-r0-whole_run"));
    let lines = truth_of(truth, pid);
    let theirs: f64 = lines[WARMUP..WARMUP + STEPS]
        .iter()
        .map(|l| l["step_ns"].as_f64().unwrap())
        .sum::<f64>()
        / STEPS as f64
        / 1e9;
    eprintln!(
        "{shape}/{regime} whole-run: step {:.2} ms against the script's {:.2} ms",
        ours * 1e3,
        theirs * 1e3
    );
    assert!(
        (ours / theirs - 1.0).abs() <= 0.05,
        "{shape}/{regime}: {ours} s vs {theirs} s"
    );
}

#[test]
fn a_background_thread_buffer_is_the_training_threads_wait() {
    check("thread_buffer", "input");
    check("thread_buffer", "compute");
}

#[test]
fn a_validation_pass_is_left_out_of_the_training_step() {
    check("validation", "input");
}

#[test]
fn accumulated_micro_batches_are_one_step() {
    check("grad_accum", "input");
}

/// A path the hooks do not see (fixtures/job/catalog/deque_feeder.py: a
/// thread fills a `collections.deque` the training thread polls): the
/// bundle says the wait was unseen and gives no wait share, the command
/// says so instead of a wait verdict, and runs the replay on its own. Held
/// to the script's own clock: the whole-run step (its samples counted as
/// the DataLoader delivered them) within 5%, and the stall by difference
/// no lower than the script's own wait share (it also counts the loader
/// slowing compute, so it may be higher).
#[test]
fn a_wait_the_hooks_cannot_see_is_measured_by_difference() {
    let dir = temp_dir("job-catalog-deque");
    let (out, truth) = (dir.path().join("out"), dir.path().join("truth"));
    let (o, b) = job_on("deque_feeder", "input", &out, &truth);
    let stdout = String::from_utf8_lossy(&o.stdout);
    assert!(
        stdout.contains("Not seen: your training thread's batches came through a path"),
        "{}",
        text(&o)
    );
    assert!(!stdout.contains("waited for data"), "{}", text(&o));
    let c = b
        .experiment("job")
        .unwrap()
        .configuration("script")
        .unwrap();
    assert_eq!(
        c.params.get("wait_method"),
        Some(&stallscope_bundle::ParamValue::Text("unseen".into()))
    );
    let ceiling = stallscope_bundle::analysis::replay_ceiling(&b).expect("the replay ran");
    let run = c
        .runs
        .iter()
        .find(|r| r.timing_mode == TimingMode::WholeRun)
        .unwrap();
    let w = run.whole_run.as_ref().unwrap();
    let stall = stallscope_bundle::analysis::replay_stall(w.samples_per_s.unwrap(), &ceiling);
    let pid = measured_pid(&out.join("units/script-r0-whole_run"));
    let lines = truth_of(&truth, pid);
    let window = &lines[WARMUP..WARMUP + STEPS];
    let sum = |k: &str| -> f64 { window.iter().map(|l| l[k].as_f64().unwrap()).sum() };
    let (wait, step) = (
        sum("wait_ns") / sum("step_ns"),
        sum("step_ns") / STEPS as f64 / 1e9,
    );
    let ours = w.seconds.unwrap() / w.steps.unwrap() as f64;
    eprintln!(
        "deque_feeder/input: step {:.2} ms against the script's {:.2} ms; the loader by difference \
         {:.1}% against the script's own wait {:.1}%",
        ours * 1e3,
        step * 1e3,
        stall * 100.0,
        wait * 100.0
    );
    // The feeder runs ahead of the training thread by the deque's 2 batches.
    let samples = w.samples.unwrap() as f64 / (STEPS * 32) as f64;
    assert!(
        (samples - 1.0).abs() <= 0.1,
        "{samples}× the window's samples"
    );
    assert!(
        (ours / step - 1.0).abs() <= 0.05,
        "step {ours} s vs {step} s"
    );
    assert!(
        stall >= wait - 0.05,
        "by difference {stall:.3} vs the wait {wait:.3}"
    );
}
