//! End-to-end tests of `stallscope run`, `env` and `trace` through the real
//! binary on the CPU with real libtorch: both timing modes for every
//! configuration, the sums and rates the format promises, located errors for
//! bad suites and bad IDX files, and valid partial bundles after a panic and
//! after Ctrl-C.

// Shared with the other end-to-end tests; not every helper is used here.
#[allow(dead_code)]
mod util;

use stallscope_bundle::{Configuration, Failure, Phase, Run, RunState, TimingMode};
use util::*;

#[test]
fn a_tiny_suite_gives_both_modes_for_every_configuration() {
    let dir = temp_dir("tiny");
    let suite = write_suite(dir.path(), "tiny.toml", TINY_SUITE);
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
        &[],
    );
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
    let stdout = String::from_utf8_lossy(&o.stdout);
    assert!(stdout.contains("bundle: "), "{}", text(&o));
    // The report fits a terminal (the bundle's own path aside).
    for line in stdout.lines().filter(|l| !l.starts_with("bundle: ")) {
        assert!(
            line.chars().count() <= 100,
            "{} columns: {line}",
            line.chars().count()
        );
    }
    let b = valid_bundle(&out.join("bundle.json"));
    assert_eq!(b.status.state, RunState::Complete);
    assert_eq!(b.environment.suite.as_ref().unwrap().toml, TINY_SUITE);
    assert!(
        b.environment
            .precision
            .as_ref()
            .is_some_and(|p| !p.tf32_matmul && !p.tf32_cudnn)
    );

    let oom = b.experiment("oom_probe").unwrap();
    assert!(oom.not_applicable.is_some() && oom.configurations.is_empty());

    for id in ["compute", "batch_sweep", "transfer"] {
        let e = b.experiment(id).unwrap();
        assert!(!e.configurations.is_empty(), "{id}");
        for c in &e.configurations {
            check_configuration(id, c);
        }
    }
    let sweep = b.experiment("batch_sweep").unwrap();
    let w = sweep.configurations[0]
        .runs
        .iter()
        .find_map(|r| r.whole_run.as_ref())
        .unwrap();
    assert_eq!((w.samples, w.steps), (Some(1024), Some(16)));

    check_trace(dir.path(), &out);
}

/// Every configuration of a grid experiment: no failure, 2 repeats × 2
/// modes × 2 epochs, cold and steady in each mode, and each run's figures.
fn check_configuration(id: &str, c: &Configuration) {
    assert!(c.failure.is_none(), "{id}/{}", c.id);
    assert_eq!(c.runs.len(), 8, "{id}/{}", c.id);
    for mode in [TimingMode::WholeRun, TimingMode::Diagnostic] {
        for phase in [Phase::Cold, Phase::Steady] {
            assert_eq!(
                c.runs
                    .iter()
                    .filter(|r| r.timing_mode == mode && r.phase == phase)
                    .count(),
                2,
                "{id}/{} {mode:?} {phase:?}",
                c.id
            );
        }
    }
    for r in &c.runs {
        check_run(id, &c.id, r);
    }
}

/// One run: its host peak, a whole-run rate that is samples ÷ seconds, and
/// diagnostic stages that add up to the step.
fn check_run(id: &str, config: &str, r: &Run) {
    assert!(
        r.memory
            .as_ref()
            .and_then(|m| m.host_peak_rss_bytes)
            .is_some()
    );
    if let Some(w) = &r.whole_run {
        let (s, n) = (w.seconds.unwrap(), w.samples.unwrap());
        assert!(s > 0.0 && n > 0);
        // Equal up to JSON's decimal round trip.
        let rate = w.samples_per_s.unwrap();
        assert!(
            (rate - n as f64 / s).abs() <= 1e-12 * rate,
            "{id}/{config}/{}",
            r.id
        );
    }
    if let Some(d) = &r.diagnostic {
        let step = d.step.as_ref().unwrap().mean_s.unwrap();
        let sum: f64 = [&d.next_wait, &d.transfer, &d.compute]
            .iter()
            .filter_map(|s| s.as_ref().and_then(|s| s.mean_s))
            .sum();
        assert!(
            (sum - step).abs() <= 0.05 * step,
            "{id}/{config}/{}: {sum} vs {step}",
            r.id
        );
        let steps = r.steps.as_ref().unwrap();
        assert_eq!(steps.compute_ns.len() as u64, d.steps.unwrap());
        assert!(d.first_next_wait_s.is_some());
    }
}

/// The trace of one diagnostic run: one event per stage of each step.
fn check_trace(dir: &std::path::Path, out: &std::path::Path) {
    let trace = dir.join("trace.json");
    let o = run(
        &[
            "trace",
            out.join("bundle.json").to_str().unwrap(),
            "--run",
            "batch_sweep/bs64/diagnostic-r0-e1",
            "--out",
            trace.to_str().unwrap(),
        ],
        &[],
    );
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
    let t: serde_json::Value = serde_json::from_slice(&std::fs::read(&trace).unwrap()).unwrap();
    let x = t["traceEvents"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|e| e["ph"] == "X")
        .count();
    assert_eq!(x, 16 * 3);
}

#[test]
fn bad_suites_name_the_file_line_and_key() {
    let dir = temp_dir("bad-suite");
    let suite = write_suite(
        dir.path(),
        "bad.toml",
        "[[experiment]]\nid = \"a\"\nkind = \"batch_sweep\"\nbatch_sizes = [64, -1]\n",
    );
    let o = run(&["run", suite.to_str().unwrap(), "--device", "cpu"], &[]);
    assert_eq!(o.status.code(), Some(2), "{}", text(&o));
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(
        err.contains("bad.toml:4:15: experiment[0].batch_sizes: -1 is out of range; expected integers from 1 to"),
        "{}",
        text(&o)
    );
    let o = run(&["run", "--preset", "nope", "--device", "cpu"], &[]);
    assert_eq!(o.status.code(), Some(2));
    assert!(
        String::from_utf8_lossy(&o.stderr)
            .contains("no preset named \"nope\"; expected one of: quickstart")
    );
}

#[test]
fn bad_idx_files_name_the_file_and_byte() {
    let dir = temp_dir("bad-idx");
    let data = dir.path().join("data");
    std::fs::create_dir_all(&data).unwrap();
    let mut images = 0x0000_0803u32.to_be_bytes().to_vec();
    for d in [10u32, 28, 28] {
        images.extend(d.to_be_bytes());
    }
    images.extend(vec![0u8; 100]); // 7,840 expected
    std::fs::write(data.join("train-images-idx3-ubyte"), &images).unwrap();
    let mut labels = 0x0000_0801u32.to_be_bytes().to_vec();
    labels.extend(10u32.to_be_bytes());
    labels.extend(vec![1u8; 10]);
    std::fs::write(data.join("train-labels-idx1-ubyte"), &labels).unwrap();
    let suite = write_suite(
        dir.path(),
        "s.toml",
        "[[experiment]]\nid = \"batch_sweep\"\nkind = \"batch_sweep\"\nsamples = 10\nbatch_sizes = [5]\n",
    );
    let o = run(
        &[
            "run",
            suite.to_str().unwrap(),
            "--device",
            "cpu",
            "--data-dir",
            data.to_str().unwrap(),
            "--out",
            dir.path().join("out").to_str().unwrap(),
        ],
        &[],
    );
    assert_eq!(o.status.code(), Some(2), "{}", text(&o));
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(
        err.contains("train-images-idx3-ubyte: byte 116: file ends early: expected 7856 bytes in all, found 116"),
        "{}",
        text(&o)
    );

    // A bad magic number in the labels file.
    images.extend(vec![0u8; 7740]);
    std::fs::write(data.join("train-images-idx3-ubyte"), &images).unwrap();
    labels[3] = 0x03;
    std::fs::write(data.join("train-labels-idx1-ubyte"), &labels).unwrap();
    let o = run(
        &[
            "run",
            suite.to_str().unwrap(),
            "--device",
            "cpu",
            "--data-dir",
            data.to_str().unwrap(),
            "--out",
            dir.path().join("out").to_str().unwrap(),
        ],
        &[],
    );
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(
        err.contains(
            "train-labels-idx1-ubyte: byte 0: bad magic number 0x00000803, expected 0x00000801"
        ),
        "{}",
        text(&o)
    );

    // Good files are used and recorded as such.
    labels[3] = 0x01;
    std::fs::write(data.join("train-labels-idx1-ubyte"), &labels).unwrap();
    let out = dir.path().join("out");
    let o = run(
        &[
            "run",
            suite.to_str().unwrap(),
            "--device",
            "cpu",
            "--data-dir",
            data.to_str().unwrap(),
            "--out",
            out.to_str().unwrap(),
        ],
        &[],
    );
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
    let b = valid_bundle(&out.join("bundle.json"));
    let source = b.experiments[0].settings["data_source"].to_string();
    assert!(source.starts_with("idx:"), "{source}");
}

#[test]
fn an_injected_panic_is_recorded_and_the_rest_still_runs() {
    let dir = temp_dir("panic");
    let suite = write_suite(dir.path(), "tiny.toml", TINY_SUITE);
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
        &[("STALLSCOPE_INJECT_PANIC", "bs64")],
    );
    assert_eq!(o.status.code(), Some(1), "{}", text(&o));
    let b = valid_bundle(&out.join("bundle.json"));
    assert_eq!(b.status.state, RunState::Complete);
    for id in ["compute", "batch_sweep"] {
        let e = b.experiment(id).unwrap();
        let c = e.configuration("bs64").unwrap();
        match &c.failure {
            Some(Failure::Panic { message }) => {
                assert!(message.contains("injected panic"), "{message}")
            }
            other => panic!("{id}: expected a panic record, got {other:?}"),
        }
        assert!(
            e.configurations
                .iter()
                .filter(|c| c.id != "bs64")
                .all(|c| c.runs.len() == 8)
        );
    }
}

#[test]
fn ctrl_c_leaves_a_valid_partial_bundle() {
    stopped_by(libc::SIGINT);
}

/// SIGTERM (what torchrun's agent and Slurm send first) is a stop like
/// Ctrl-C, not a kill that loses the configuration in progress.
#[test]
fn sigterm_leaves_a_valid_partial_bundle() {
    stopped_by(libc::SIGTERM);
}

fn stopped_by(signal: i32) {
    let dir = temp_dir("ctrlc");
    let suite = write_suite(
        dir.path(),
        "long.toml",
        "repeats = 3\nepochs = 50\n[[experiment]]\nid = \"batch_sweep\"\nkind = \"batch_sweep\"\nmodel = \"linear\"\ndata = \"tensor\"\nsamples = 4096\nbatch_sizes = [64, 128, 256]\n",
    );
    let out = dir.path().join("out");
    let bundle = out.join("bundle.json");
    let mut child = stallscope()
        .args([
            "run",
            suite.to_str().unwrap(),
            "--device",
            "cpu",
            "--out",
            out.to_str().unwrap(),
        ])
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    wait_for_a_saved_configuration(&bundle, std::slice::from_mut(&mut child));
    // SAFETY: sending a signal to our own child process.
    assert_eq!(unsafe { libc::kill(child.id() as i32, signal) }, 0);
    let status = child.wait().unwrap();
    assert_eq!(status.code(), Some(130));
    let b = valid_bundle(&bundle);
    assert_eq!(b.status.state, RunState::Partial);
    let e = &b.experiments[0];
    assert!(e.configurations.iter().any(|c| c.runs.len() == 100));
    assert!(
        e.configurations
            .iter()
            .any(|c| matches!(c.failure, Some(Failure::Interrupted { .. }))),
        "{:?}",
        e.configurations
            .iter()
            .map(|c| &c.failure)
            .collect::<Vec<_>>()
    );
}

#[test]
fn env_prints_the_environment_as_json() {
    let o = run(&["env", "--json", "--device", "cpu"], &[]);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
    let env: stallscope_bundle::Environment = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(env.libtorch.unwrap().version, "2.11.0");
    assert!(env.host.unwrap().logical_cores.unwrap() >= 1);
    assert_eq!(env.device.unwrap().kind, stallscope_bundle::DeviceKind::Cpu);
}
