//! The `loader` and `stall` experiments through the real `stallscope run`
//! (real libtorch on the CPU, real worker processes): both timing modes, cold
//! and steady epochs, the loader's own statistics, a dying worker recorded
//! with its worker and sample, and the differential stall attribution.

// Shared with the runner's end-to-end tests; not every helper is used here.
#[allow(dead_code)]
mod util;

use std::sync::Mutex;

use stallscope_bundle::analysis::stall_attribution;
use stallscope_bundle::{Failure, ParamValue, Phase, RunState, TimingMode};
use util::*;

/// These tests look for stray worker processes: one at a time.
static SERIAL: Mutex<()> = Mutex::new(());

const LOADER_SUITE: &str = r#"
title = "loader, tiny"
seed = 7
repeats = 1
epochs = 2

[[experiment]]
id = "loader"
kind = "loader"
model = "linear"
features = 16
classes = 4

[experiment.loader]
source = "tensor"
samples = 512
batch_size = 64
workers = [0, 2]
worker_kinds = ["threads", "processes"]
pinned = [true]
"#;

/// Live worker processes started by the runner with pid `parent`.
fn loader_workers(parent: u32) -> Vec<u32> {
    let tag = format!("{}={parent}", stallscope_loader::PARENT_ENV);
    std::fs::read_dir("/proc")
        .unwrap()
        .flatten()
        .filter_map(|e| {
            let pid = e.file_name().to_string_lossy().parse::<u32>().ok()?;
            let env = std::fs::read(e.path().join("environ")).ok()?;
            env.split(|&b| b == 0)
                .any(|kv| kv == tag.as_bytes())
                .then_some(pid)
        })
        .collect()
}

/// Run `stallscope` to the end; its pid and output.
fn run_with_pid(args: &[&str], envs: &[(&str, &str)]) -> (u32, std::process::Output) {
    let mut cmd = stallscope();
    cmd.args(args);
    for (k, v) in envs {
        cmd.env(k, v);
    }
    let child = cmd
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let pid = child.id();
    (pid, child.wait_with_output().unwrap())
}

#[test]
fn a_loader_sweep_records_both_modes_cold_and_steady_and_the_loader_stats() {
    let _g = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let dir = temp_dir("loader-sweep");
    let suite = write_suite(dir.path(), "loader.toml", LOADER_SUITE);
    let out = dir.path().join("out");
    let (pid, o) = run_with_pid(
        &[
            "run",
            suite.to_str().unwrap(),
            "--device",
            "cpu",
            "--out",
            out.to_str().unwrap(),
        ],
        &[],
    );
    assert!(o.status.success(), "{}", text(&o));
    let bundle = valid_bundle(&out.join("bundle.json"));
    let e = bundle.experiment("loader").expect("loader experiment");
    let ids: Vec<&str> = e.configurations.iter().map(|c| c.id.as_str()).collect();
    assert_eq!(
        ids,
        [
            "w0-pin1",
            "w2-threads-pf2-pers0-pin1",
            "w2-processes-pf2-pers0-pin1"
        ]
    );
    assert!(
        matches!(e.settings.get("pinning_skipped"), Some(ParamValue::Text(t)) if t.contains("CUDA")),
        "pinning on the CPU is skipped with its reason: {:?}",
        e.settings
    );
    for c in &e.configurations {
        assert!(c.failure.is_none(), "{}: {:?}", c.id, c.failure);
        assert_eq!(c.batch_bytes, Some(64 * (16 * 4 + 8)));
        for mode in [TimingMode::WholeRun, TimingMode::Diagnostic] {
            let runs: Vec<_> = c.runs.iter().filter(|r| r.timing_mode == mode).collect();
            assert_eq!(runs.len(), 2, "{} {mode:?}", c.id);
            assert_eq!((runs[0].phase, runs[1].phase), (Phase::Cold, Phase::Steady));
            for r in runs {
                let stats = r.loader.as_ref().expect("loader stats in every run");
                let q = &stats.queues[0];
                assert_eq!(q.gets, 8, "{}", c.id);
                assert!((0.0..=1.0).contains(&q.readiness));
                assert!(stats.time_to_first_batch_s.unwrap() > 0.0);
                assert!(
                    stats
                        .stages
                        .iter()
                        .any(|s| s.name == "read" && s.tasks == 512)
                );
                assert!(r.memory.as_ref().unwrap().host_peak_rss_bytes.unwrap() > 0);
            }
        }
        let in_loop = c.id.starts_with("w0");
        let readiness = c.runs[1].loader.as_ref().unwrap().queues[0].readiness;
        if in_loop {
            assert_eq!(
                readiness, 0.0,
                "the in-loop loader never finds a batch ready"
            );
        }
    }
    assert!(loader_workers(pid).is_empty(), "{:?}", loader_workers(pid));
}

#[test]
fn a_dying_worker_process_is_recorded_with_worker_and_sample_and_the_rest_is_kept() {
    let _g = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let dir = temp_dir("loader-abort");
    let suite = write_suite(dir.path(), "loader.toml", LOADER_SUITE);
    let out = dir.path().join("out");
    let (pid, o) = run_with_pid(
        &[
            "run",
            suite.to_str().unwrap(),
            "--device",
            "cpu",
            "--out",
            out.to_str().unwrap(),
        ],
        &[(
            "STALLSCOPE_LOADER_FAULT",
            "abort@100@w2-processes-pf2-pers0-pin1",
        )],
    );
    assert_eq!(
        o.status.code(),
        Some(1),
        "some configuration failed: {}",
        text(&o)
    );
    let bundle = valid_bundle(&out.join("bundle.json"));
    assert_eq!(bundle.status.state, RunState::Complete);
    let e = bundle.experiment("loader").unwrap();
    for c in &e.configurations[..2] {
        assert!(
            c.failure.is_none() && c.runs.len() == 4,
            "{} keeps its runs",
            c.id
        );
    }
    match &e.configurations[2].failure {
        Some(Failure::WorkerError {
            worker,
            sample,
            message,
        }) => {
            // Sample 100 is in batch 1 (64..128): worker 1 of 2.
            let worker = worker.as_deref().unwrap_or_default();
            assert!(worker.starts_with("process worker 1 (pid "), "{worker}");
            assert_eq!(*sample, Some(100));
            assert!(message.contains("SIGABRT"), "{message}");
        }
        other => panic!("expected a worker error, got {other:?}"),
    }
    assert!(
        loader_workers(pid).is_empty(),
        "orphans: {:?}",
        loader_workers(pid)
    );
    let prefix = format!("{}{pid}-", stallscope_loader::SEGMENT_PREFIX);
    let left: Vec<_> = std::fs::read_dir("/dev/shm")
        .unwrap()
        .flatten()
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|n| n.starts_with(&prefix))
        .collect();
    assert!(left.is_empty(), "segments left: {left:?}");
}

#[test]
fn a_stall_experiment_runs_the_three_ways_and_attributes_the_stall() {
    let _g = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let dir = temp_dir("loader-stall");
    let suite = dir.path().join("stall.toml");
    std::fs::write(
        &suite,
        r#"
title = "stall, tiny"
repeats = 1
epochs = 2

[[experiment]]
id = "stall"
kind = "stall"
model = "image_cnn"
image_size = 32
classes = 4

[experiment.loader]
source = "images"
samples = 48
image_width = 64
image_height = 48
resize = 40
batch_size = 8
workers = [2]
"#,
    )
    .unwrap();
    let out = dir.path().join("out");
    let o = run(
        &[
            "run",
            suite.to_str().unwrap(),
            "--device",
            "cpu",
            "--out",
            out.to_str().unwrap(),
        ],
        &[(
            "STALLSCOPE_DATA_CACHE",
            dir.path().join("data").to_str().unwrap(),
        )],
    );
    assert!(o.status.success(), "{}", text(&o));
    let bundle = valid_bundle(&out.join("bundle.json"));
    let e = bundle.experiment("stall").unwrap();
    let ways: Vec<String> = e
        .configurations
        .iter()
        .map(|c| c.params["source"].to_string())
        .collect();
    assert_eq!(ways, ["compute_only", "from_host", "full_pipeline"]);
    for c in &e.configurations {
        assert_eq!(c.runs.len(), 4, "{}", c.id);
        let whole: Vec<_> = c.runs.iter().filter_map(|r| r.whole_run.as_ref()).collect();
        assert!(
            whole
                .iter()
                .all(|w| w.samples == Some(48) && w.steps == Some(6)),
            "{}",
            c.id
        );
    }
    let full = &e.configurations[2];
    assert!(full.runs.iter().all(|r| {
        r.loader
            .as_ref()
            .is_some_and(|l| l.stages.iter().any(|s| s.name == "decode" && s.tasks == 48))
    }));
    let s = stall_attribution(e).expect("an attribution from the whole-run rates");
    assert!(s.compute_only > 0.0 && s.from_host > 0.0 && s.full_pipeline > 0.0);
    assert!((0.0..=1.0).contains(&s.waiting_share));
}
