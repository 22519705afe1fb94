//! `stallscope job --tune` and `--replay` end to end: the fixture training
//! scripts (fixtures/job/, plain PyTorch from the peers venv) tuned under
//! the real binary. On the slow dataset (4 ms per sample, no workers) the
//! recommendation has workers and its verified whole-run ratio is at least
//! 1.5× (about 2× on 2 cores); on the light in-memory data (2 workers) it
//! has fewer workers or none; replay's step is faster than the loader's.
//! The tests take turns (they time the machine's cores), with two repeats
//! (the A/A pair needs two for a noise floor), at most three, and two A/B
//! pairs to stay short.

#[allow(dead_code)]
mod util;

use std::path::Path;
use std::process::Output;
use std::sync::Mutex;

use stallscope_bundle::analysis::{JOB_SCRIPT_ID, Metric, MetricKey, metric_value};
use stallscope_bundle::{Bundle, Configuration, ParamValue, Phase, TimingMode};
use util::*;

/// One measuring test at a time.
static MACHINE: Mutex<()> = Mutex::new(());

/// `stallscope job OPTIONS --out OUT -- python SCRIPT ARGS`, its output
/// and its bundle, checked by `stallscope validate` too.
fn job(out: &Path, options: &[&str], script: &str, args: &[&str]) -> (Output, Bundle) {
    let _turn = MACHINE.lock().unwrap_or_else(|e| e.into_inner());
    let py = peers_python();
    let o = stallscope()
        .arg("job")
        .args(options)
        .arg("--out")
        .arg(out)
        .args(["--", py.to_str().unwrap(), &job_fixture(script)])
        .args(args)
        .env("OMP_NUM_THREADS", "1")
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
    let path = out.join("bundle.json");
    let v = stallscope().arg("validate").arg(&path).output().unwrap();
    assert_eq!(v.status.code(), Some(0), "{}", text(&v));
    (o, valid_bundle(&path))
}

const TUNE: [&str; 13] = [
    "--tune",
    "--steps",
    "12",
    "--warmup",
    "3",
    "--repeats",
    "2",
    "--max-repeats",
    "3",
    "--verify-pairs",
    "2",
    "--replay-mib",
    "64",
];

/// Whether the printed text says `phrase`, wherever its lines wrap it (the closing wraps at 100
/// columns, so a phrase may straddle two lines: "did not hold up in the A/B\n  pairs").
fn says(text: &str, phrase: &str) -> bool {
    let flat = |s: &str| s.split_whitespace().collect::<Vec<_>>().join(" ");
    flat(text).contains(&flat(phrase))
}

fn setting<'a>(b: &'a Bundle, experiment: &str, key: &str) -> &'a ParamValue {
    let e = b.experiment(experiment).unwrap();
    e.settings
        .get(key)
        .unwrap_or_else(|| panic!("{experiment}: no setting {key}: {:?}", e.settings))
}

fn chosen_workers(b: &Bundle) -> i64 {
    let ParamValue::Text(id) = setting(b, "job", "tune_chosen") else {
        panic!("tune_chosen is not text");
    };
    let c = b.experiment("job").unwrap().configuration(id).unwrap();
    match c.params.get("actual_num_workers") {
        Some(ParamValue::Int(n)) => *n,
        other => panic!("{id}: actual_num_workers {other:?}"),
    }
}

fn ratio(b: &Bundle, key: &str) -> f64 {
    setting(b, "job-verify", key).as_f64().unwrap()
}

#[test]
fn tune_gives_a_starved_loader_workers_and_verifies_the_speed_up() {
    let dir = temp_dir("job-tune-slow");
    let out = dir.path().join("out");
    let (o, b) = job(&out, &TUNE, "train_slow_dataset.py", &["--samples", "512"]);
    let stdout = String::from_utf8_lossy(&o.stdout);
    assert!(chosen_workers(&b) > 0, "{stdout}");
    let (median, min, max) = (
        ratio(&b, "ratio_median"),
        ratio(&b, "ratio_min"),
        ratio(&b, "ratio_max"),
    );
    eprintln!("slow dataset: verified {median:.2}× ({min:.2}–{max:.2}×)");
    assert!(
        median >= 1.5,
        "verified {median:.2}× ({min:.2}–{max:.2}×)\n{stdout}"
    );
    assert_eq!(setting(&b, "job-verify", "pairs"), &ParamValue::Int(2));
    assert_eq!(
        setting(&b, "job-verify", "confirmed"),
        &ParamValue::Bool(true)
    );
    let change = setting(&b, "job", "tune_change").to_string();
    assert!(
        change.starts_with("DataLoader(..., num_workers="),
        "{change}"
    );
    assert!(
        says(&stdout, &format!("Recommendation: {change}")),
        "{stdout}"
    );
    assert!(stdout.contains("Verified: "), "{stdout}");
    assert!(stdout.lines().all(|l| l.chars().count() <= 100), "{stdout}");
    // Every configuration carries the window's CPU cost over the process tree.
    let e = b.experiment("job").unwrap();
    for c in &e.configurations {
        let cpu = MetricKey::new(
            Metric::CpuSPer1000Samples,
            TimingMode::WholeRun,
            Phase::Steady,
        );
        assert!(metric_value(c, &cpu).is_some_and(|v| v > 0.0), "{}", c.id);
    }
    assert!(b.notes.iter().any(|n| n.contains(&change)));
    assert_report_matches(&o, &out.join("bundle.json"));
}

#[test]
fn tune_gives_light_data_fewer_workers() {
    let dir = temp_dir("job-tune-light");
    let out = dir.path().join("out");
    let (o, b) = job(&out, &TUNE, "train_light.py", &[]);
    let stdout = String::from_utf8_lossy(&o.stdout);
    let workers = chosen_workers(&b);
    let verified_ratio = b
        .experiment("job-verify")
        .and_then(|v| v.settings.get("ratio_median"));
    eprintln!("light data: {workers} workers, verified {verified_ratio:?}");
    // Fewer workers than the script's 2, or, when nothing in the grid beats
    // your settings beyond the A/A floor (a busy machine), your settings.
    let kept = setting(&b, "job", "tune_chosen") == &ParamValue::from(JOB_SCRIPT_ID);
    if kept {
        assert!(says(&stdout, "Keep your settings"), "{stdout}");
    } else {
        assert!(workers < 2, "{stdout}");
    }
    // The change stored is the pick when the pairs confirmed it beyond the
    // A/A noise floor, else your settings are kept: never a change the
    // pairs did not hold up.
    let change = setting(&b, "job", "tune_change").to_string();
    let verified = b
        .experiment("job-verify")
        .and_then(|v| v.settings.get("confirmed").cloned());
    match verified {
        Some(ParamValue::Bool(true)) => assert!(
            change == format!("DataLoader(..., num_workers={workers})")
                || change.starts_with(&format!("DataLoader(..., num_workers={workers}, ")),
            "{change}\n{stdout}"
        ),
        Some(_) => {
            assert!(
                change.starts_with("none: keep your settings"),
                "{change}\n{stdout}"
            );
            assert!(
                says(&stdout, "did not hold up in the A/B pairs"),
                "{stdout}"
            );
        }
        None => {
            assert_eq!(change, "none: keep your settings", "{stdout}");
            assert!(says(&stdout, "Keep your settings"), "{stdout}");
        }
    }
}

fn whole_run_step_s(c: &Configuration) -> f64 {
    let key = MetricKey::new(Metric::StepTimeS, TimingMode::WholeRun, Phase::Steady);
    metric_value(c, &key).unwrap()
}

#[test]
fn replay_feeds_the_loop_from_cached_batches() {
    let dir = temp_dir("job-replay");
    let out = dir.path().join("out");
    let options = [
        "--replay",
        "--steps",
        "8",
        "--warmup",
        "2",
        "--repeats",
        "1",
    ];
    let args = ["--samples", "512", "--delay-ms", "2"];
    let (o, b) = job(&out, &options, "train_slow_dataset.py", &args);
    let real = &b.experiment("job").unwrap().configurations[0];
    let replay = &b.experiment("job-replay").unwrap().configurations[0];
    assert!(replay.failure.is_none(), "{:?}", replay.failure);
    assert_eq!(replay.params.get("replay"), Some(&ParamValue::Bool(true)));
    // 8 batches of 32 × (32 float32 features + an int64 label).
    assert_eq!(
        replay.params.get("replay_batches"),
        Some(&ParamValue::Int(8))
    );
    let bytes = 8 * 32 * (32 * 4 + 8);
    assert_eq!(
        replay.params.get("replay_bytes"),
        Some(&ParamValue::Int(bytes))
    );
    let (r, s) = (whole_run_step_s(replay), whole_run_step_s(real));
    eprintln!("replay step {:.2} ms, real {:.2} ms", r * 1e3, s * 1e3);
    // A real step sleeps 32 × 2 ms in the Dataset; a replayed one does not.
    assert!(r <= s * 0.5, "replay {r} s against {s} s");
    let stdout = String::from_utf8_lossy(&o.stdout);
    assert!(
        says(&stdout, "Replay (the loader free, 8 cached batches"),
        "{stdout}"
    );
    assert_report_matches(&o, &out.join("bundle.json"));
}
