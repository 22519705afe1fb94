//! `stallscope job` end to end: real training scripts (fixtures/job/, plain
//! PyTorch from the peers venv) run unmodified under the real binary; the
//! bundle validates with both timing modes per configuration, the settings
//! the DataLoader really used, every process's RSS, PSS and USS, and a
//! script's failure recorded with its exception.

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
        .args(["--max-repeats", "1", "--sweep", "num_workers=2", "--out"])
        .arg(&out)
        .args(["--", py.to_str().unwrap(), &script, "--samples", "512"])
        .args(["--delay-ms", "2"])
        .env("OMP_NUM_THREADS", "1")
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
    let b = valid_bundle(&out.join("bundle.json"));
    let e = b.experiment("job").unwrap();
    // Your settings, again as the A/A pair, and the sweep's point.
    let ids: Vec<&str> = e.configurations.iter().map(|c| c.id.as_str()).collect();
    assert_eq!(ids, ["script", "script-again", "num_workers=2"]);
    for (c, workers) in e.configurations.iter().zip([0i64, 0, 2]) {
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
            // Every process at the window's end, with its PSS and USS
            // (`smaps_rollup` is readable here): the training process and
            // each worker by its id.
            let ps = &r.memory.as_ref().unwrap().processes;
            let mut roles: Vec<(&str, Option<u32>)> = ps
                .iter()
                .filter(|p| p.role != "child")
                .map(|p| (p.role.as_str(), p.worker_id))
                .collect();
            roles.sort();
            let want: Vec<(&str, Option<u32>)> = std::iter::once(("main", None))
                .chain((0..workers as u32).map(|w| ("worker", Some(w))))
                .collect();
            assert_eq!(roles, want, "{} {mode:?}", c.id);
            for p in ps.iter().filter(|p| p.role != "child") {
                assert!(p.uss_bytes.is_some() && p.pss_bytes.is_some(), "{p:?}");
            }
        }
    }
    // The script's own output reached the terminal untouched, the records
    // did not.
    assert!(!String::from_utf8_lossy(&o.stdout).contains("\"type\""));
    assert_report_matches(&o, &out.join("bundle.json"));
}

/// A sweep point that is what the script already uses is one
/// configuration, your settings, run twice as the A/A pair; the two are
/// reported as no measurable difference, never as "fastest".
#[test]
fn a_sweep_point_that_is_your_settings_is_no_measurable_difference() {
    let dir = temp_dir("job-aa");
    let out = dir.path().join("out");
    let o = stallscope()
        .args(["job", "--steps", "6", "--warmup", "2", "--repeats", "2"])
        .args(["--max-repeats", "2", "--sweep", "num_workers=0", "--out"])
        .arg(&out)
        .args(["--", peers_python().to_str().unwrap()])
        .arg(job_fixture("train_slow_dataset.py"))
        .args(["--samples", "256", "--delay-ms", "1"])
        .env("OMP_NUM_THREADS", "1")
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
    let b = valid_bundle(&out.join("bundle.json"));
    let e = b.experiment("job").unwrap();
    let ids: Vec<&str> = e.configurations.iter().map(|c| c.id.as_str()).collect();
    assert_eq!(
        ids,
        ["script", "script-again"],
        "num_workers=0 is the script's own"
    );
    assert!(e.noise_floor.is_some(), "two A/A repeats give a floor");
    let printed = String::from_utf8_lossy(&o.stdout);
    let flat = printed.split_whitespace().collect::<Vec<_>>().join(" ");
    assert!(flat.contains("No measurable difference"), "{printed}");
    assert!(!flat.contains("Fastest"), "{printed}");
    assert!(
        String::from_utf8_lossy(&o.stderr).contains("is what your script already uses"),
        "{}",
        text(&o)
    );
    assert!(
        b.notes
            .iter()
            .any(|n| n.contains("is what your script already uses"))
    );
    assert_report_matches(&o, &out.join("bundle.json"));
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

/// `stallscope job -- torchrun --nproc-per-node 2 train_ddp.py` (DDP over
/// gloo, a DistributedSampler): every rank measured in both modes, a bundle
/// per rank with its launcher's layout, and the merged one, whose job
/// figure is both ranks' samples over the slower rank's seconds.
#[test]
fn two_ranks_under_torchrun_give_per_rank_bundles_and_a_merged_one() {
    let dir = temp_dir("job-ranks");
    let out = dir.path().join("out");
    let py = peers_python();
    let torchrun = py.with_file_name("torchrun");
    let port = free_port();
    let mut c = stallscope();
    for v in [
        "RANK",
        "WORLD_SIZE",
        "LOCAL_RANK",
        "MASTER_ADDR",
        "MASTER_PORT",
    ] {
        c.env_remove(v);
    }
    let o = c
        .args([
            "job",
            "--steps",
            "6",
            "--warmup",
            "2",
            "--repeats",
            "1",
            "--out",
        ])
        .arg(&out)
        .arg("--")
        .arg(&torchrun)
        .args(["--nproc-per-node", "2", "--master-port", &port.to_string()])
        .arg(job_fixture("train_ddp.py"))
        .args(["--samples", "512"])
        .env("OMP_NUM_THREADS", "1")
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
    assert!(text(&o).contains("bundle.merged.json"), "{}", text(&o));
    let parts: Vec<_> = (0..2u32)
        .map(|r| {
            let b = valid_bundle(&out.join(format!("bundle.rank-{r}.json")));
            let l = b.environment.rank.clone().expect("a rank layout");
            assert_eq!(
                (l.rank, l.world_size, l.launcher.as_str()),
                (r, 2, "torchrun")
            );
            let c = &b.experiment("job").unwrap().configurations[0];
            assert!(c.failure.is_none(), "rank {r}: {:?}", c.failure);
            for mode in [TimingMode::WholeRun, TimingMode::Diagnostic] {
                let run = c.runs.iter().find(|x| x.timing_mode == mode);
                assert!(run.is_some(), "rank {r} has no {mode:?} run");
            }
            b
        })
        .collect();
    let lowest = valid_bundle(&out.join("bundle.json"));
    assert_eq!(
        lowest.experiments[0].configurations[0].runs,
        parts[0].experiments[0].configurations[0].runs
    );
    let m = valid_bundle(&out.join("bundle.merged.json"));
    assert_eq!(m.ranks.len(), 2);
    let c = &m.experiment("job").unwrap().configurations[0];
    let job = c
        .runs
        .iter()
        .find(|r| r.whole_run.is_some())
        .expect("a job run");
    let (samples, slowest) = parts
        .iter()
        .map(|b| {
            let r = b.experiment("job").unwrap().configurations[0]
                .runs
                .iter()
                .find(|r| r.timing_mode == TimingMode::WholeRun)
                .unwrap();
            let w = r.whole_run.as_ref().unwrap();
            assert_eq!((w.steps, w.samples), (Some(6), Some(6 * 16)));
            (w.samples.unwrap(), w.seconds.unwrap())
        })
        .fold((0, 0.0f64), |(n, s), (m, t)| (n + m, s.max(t)));
    let rate = job.whole_run.as_ref().unwrap().samples_per_s.unwrap();
    let want = samples as f64 / slowest;
    assert!((rate - want).abs() <= 1e-9 * want, "{rate} vs {want}");
    // The job of ranks printed the lowest rank's report, as `report` does.
    assert_report_matches(&o, &out.join("bundle.json"));
}
