//! The peer engines through the real `stallscope run`: real PyTorch
//! DataLoader and real SPDL in the Python harness (the environment of
//! `cargo xtask setup --peers`), next to the native loader in one bundle;
//! a harness killed mid-epoch, a stop that signals the harness too, one that
//! prints garbage, and a missing or
//! broken Python, each with a clear message and a valid bundle.
//! `STALLSCOPE_PEERS=0` skips them, loudly.

#[allow(dead_code)]
mod util;

use std::path::Path;

use stallscope_bundle::{Bundle, Configuration, Engine, Failure, ParamValue, TimingMode};
use util::*;

const LIGHT: &str = r#"
title = "peers, light"
seed = 7
torch_threads = 1
repeats = 1
epochs = 2

[[experiment]]
id = "light"
kind = "loader"
model = "linear"
features = 16
classes = 4

[experiment.loader]
source = "tensor"
samples = 256
batch_size = 64
workers = [0, 2]
engines = ["native", "pytorch", "spdl"]
"#;

/// Run `suite` and return the bundle (valid) and the output.
fn run_suite(name: &str, suite: &str, envs: &[(&str, &str)]) -> (Bundle, std::process::Output) {
    let dir = temp_dir(name);
    let path = write_suite(dir.path(), "s.toml", suite);
    let out = dir.path().join("out");
    let harness = harness_dir();
    let mut all = vec![("STALLSCOPE_HARNESS_DIR", harness.as_str())];
    all.extend_from_slice(envs);
    let o = run_on_cpu(&path, &out, &all);
    let bundle = valid_bundle(&out.join("bundle.json"));
    (bundle, o)
}

fn config<'a>(b: &'a Bundle, id: &str) -> &'a Configuration {
    b.experiments[0]
        .configurations
        .iter()
        .find(|c| c.id == id)
        .unwrap_or_else(|| panic!("no configuration {id}"))
}

#[test]
fn three_engines_train_the_same_batches_into_one_bundle() {
    let Some(_) = peers_or_skip("the peer engines were") else {
        return;
    };
    let (b, o) = run_suite("peers-light", LIGHT, &[]);
    assert!(o.status.success(), "{}", text(&o));
    let e = &b.experiments[0];
    assert_eq!(e.swept[..2], ["workers", "engine"]);
    assert_eq!(
        e.settings.get("parameters"),
        Some(&ParamValue::Int(16 * 4 + 4))
    );
    let ids: Vec<&str> = e.configurations.iter().map(|c| c.id.as_str()).collect();
    assert_eq!(
        ids,
        [
            "w0-pin0",
            "w2-threads-pf2-pers0-pin0",
            "pytorch-w0-pin0",
            "pytorch-w2-fork-pf2-pers0-pin0",
            "spdl-c2-pf2"
        ]
    );
    for c in &e.configurations {
        assert!(c.failure.is_none(), "{}: {:?}", c.id, c.failure);
        let want = match c.id.split('-').next() {
            Some("pytorch") => Engine::Pytorch,
            Some("spdl") => Engine::Spdl,
            _ => Engine::Native,
        };
        assert_eq!(c.engine.as_ref(), Some(&want), "{}", c.id);
        // Both modes, both epochs, each the same 256 samples in 4 batches.
        assert_eq!(c.runs.len(), 4, "{}", c.id);
        for r in &c.runs {
            match r.timing_mode {
                TimingMode::WholeRun => {
                    let w = r.whole_run.as_ref().unwrap();
                    assert_eq!((w.samples, w.steps), (Some(256), Some(4)), "{}", c.id);
                }
                _ => {
                    let s = r.steps.as_ref().unwrap();
                    assert_eq!(s.next_wait_ns.len(), 4, "{}", c.id);
                    assert!(r.diagnostic.as_ref().unwrap().compute.is_some());
                    // Worker tracks: the native loader's and the DataLoader's workers.
                    let tracks = r.worker_tracks.as_ref();
                    assert_eq!(tracks.is_some(), c.id.contains("w2-"), "{}", c.id);
                    if let Some(t) = tracks {
                        let mut batches = t.batches.batch.clone();
                        batches.sort_unstable();
                        assert_eq!(batches, [0, 1, 2, 3], "{}", c.id);
                        assert!(t.batches.worker.iter().all(|&w| w < 2), "{}", c.id);
                        assert_eq!(t.steps.batch, [0, 1, 2, 3], "{}", c.id);
                    }
                }
            }
            if r.timing_mode == TimingMode::WholeRun {
                assert!(r.worker_tracks.is_none(), "{}", c.id);
            }
            assert!(r.memory.as_ref().unwrap().host_peak_rss_bytes.unwrap() > 1 << 20);
        }
    }
    // SPDL's own stage and queue statistics are kept next to ours.
    let spdl = &config(&b, "spdl-c2-pf2").runs[0];
    let stats = spdl.loader.as_ref().expect("spdl's statistics");
    assert!(stats.stages.iter().any(|s| s.tasks == 256), "{stats:?}");
    assert!(!stats.queues.is_empty());
}

#[test]
fn a_harness_killed_mid_epoch_keeps_the_epochs_before_it() {
    let Some(_) = peers_or_skip("the peer engines were") else {
        return;
    };
    let suite = LIGHT.replace("workers = [0, 2]", "workers = [2]").replace(
        "\"native\", \"pytorch\", \"spdl\"",
        "\"native\", \"pytorch\"",
    );
    let (b, o) = run_suite(
        "peers-kill",
        &suite,
        &[("STALLSCOPE_HARNESS_FAULT", "kill@1:2")],
    );
    assert_eq!(o.status.code(), Some(1), "{}", text(&o));
    let native = config(&b, "w2-threads-pf2-pers0-pin0");
    assert!(native.failure.is_none() && native.runs.len() == 4);
    let peer = config(&b, "pytorch-w2-fork-pf2-pers0-pin0");
    // Epoch 0 of the whole-run mode finished before the kill in epoch 1.
    assert_eq!(peer.runs.len(), 1, "{:?}", peer.runs);
    let Some(Failure::Error { message }) = &peer.failure else {
        panic!("{:?}", peer.failure)
    };
    assert!(
        message.contains("pytorch harness ended by signal 9 (killed)"),
        "{message}"
    );
    assert!(message.contains("after 1 of 4 epochs"), "{message}");
}

/// SIGTERM to the runner and its harness at once, as Slurm's `scancel`
/// signals every process of the step: a stop (exit 130, the configuration
/// interrupted, a valid partial bundle), not a harness that "ended by
/// signal 15". The harness is signalled 30 ms first, so its death is what
/// the runner sees before its own stop flag.
#[test]
fn a_signal_to_the_runner_and_its_harness_is_a_stop() {
    let Some(_) = peers_or_skip("the peer engines were") else {
        return;
    };
    let suite = LIGHT
        .replace("epochs = 2", "epochs = 40")
        .replace("samples = 256", "samples = 4096")
        .replace("\"native\", \"pytorch\", \"spdl\"", "\"pytorch\"");
    let dir = temp_dir("peers-term");
    let path = write_suite(dir.path(), "s.toml", &suite);
    let out = dir.path().join("out");
    let mut child = stallscope()
        .args(["run", path.to_str().unwrap(), "--device", "cpu", "--out"])
        .arg(&out)
        .env("STALLSCOPE_HARNESS_DIR", harness_dir())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let bundle = out.join("bundle.json");
    wait_for_a_saved_configuration(&bundle, std::slice::from_mut(&mut child));
    // The second configuration's harness (it may still be starting).
    let harness = loop {
        let kids = std::fs::read_to_string(format!("/proc/{0}/task/{0}/children", child.id()))
            .unwrap_or_default();
        if let Some(pid) = kids.split_whitespace().next() {
            break pid.parse::<i32>().unwrap();
        }
        assert!(child.try_wait().unwrap().is_none(), "the run ended first");
        std::thread::sleep(std::time::Duration::from_millis(10));
    };
    // SAFETY: signals to our own child and its child.
    assert_eq!(unsafe { libc::kill(harness, libc::SIGTERM) }, 0);
    std::thread::sleep(std::time::Duration::from_millis(30));
    // SAFETY: as above.
    assert_eq!(unsafe { libc::kill(child.id() as i32, libc::SIGTERM) }, 0);
    let o = child.wait_with_output().unwrap();
    assert_eq!(o.status.code(), Some(130), "{}", text(&o));
    let b = valid_bundle(&bundle);
    let failures: Vec<&Failure> = b.experiments[0]
        .configurations
        .iter()
        .filter_map(|c| c.failure.as_ref())
        .collect();
    assert!(
        matches!(failures.as_slice(), [Failure::Interrupted { .. }]),
        "{failures:?}"
    );
}

#[test]
fn garbage_from_the_harness_is_refused_with_its_line() {
    let Some(_) = peers_or_skip("the peer engines were") else {
        return;
    };
    let suite = LIGHT
        .replace("workers = [0, 2]", "workers = [0]")
        .replace("\"native\", \"pytorch\", \"spdl\"", "\"pytorch\"");
    let (b, o) = run_suite(
        "peers-garbage",
        &suite,
        &[("STALLSCOPE_HARNESS_FAULT", "garbage@0:1")],
    );
    assert_eq!(o.status.code(), Some(1), "{}", text(&o));
    let Some(Failure::Error { message }) = &config(&b, "pytorch-w0-pin0").failure else {
        panic!("no failure")
    };
    // Line 1 is hello; the garbage comes before epoch 0's line.
    assert!(message.contains("pytorch harness: line 2"), "{message}");
    assert!(
        message.contains("\"this is not json\" is not JSON"),
        "{message}"
    );
}

#[test]
fn without_python_the_peers_are_not_applicable_and_native_still_runs() {
    let Some(_) = peers_or_skip("the peer engines were") else {
        return;
    };
    let dir = temp_dir("peers-broken-python");
    let broken = dir.path().join("python");
    std::fs::write(
        &broken,
        "#!/bin/sh\necho 'Fatal Python error' >&2\nexit 1\n",
    )
    .unwrap();
    let mut perm = std::fs::metadata(&broken).unwrap().permissions();
    std::os::unix::fs::PermissionsExt::set_mode(&mut perm, 0o755);
    std::fs::set_permissions(&broken, perm).unwrap();
    for (python, why) in [
        ("/nonexistent/bin/python", "cannot start the peers' Python"),
        (broken.to_str().unwrap(), "did not answer its probe"),
    ] {
        let (b, o) = run_suite("peers-missing", LIGHT, &[("STALLSCOPE_PYTHON", python)]);
        assert!(o.status.success(), "{}", text(&o));
        for c in &b.experiments[0].configurations {
            if c.engine == Some(Engine::Native) {
                assert_eq!(c.runs.len(), 4, "{}", c.id);
                continue;
            }
            let reason = c.not_applicable.get("engine").expect("a reason");
            assert!(reason.contains(why), "{reason}");
            assert!(reason.contains("cargo xtask setup --peers"), "{reason}");
            assert!(c.runs.is_empty() && c.failure.is_none());
        }
    }
}

#[test]
fn loader_only_images_on_every_engine() {
    let Some(_) = peers_or_skip("the peer engines were") else {
        return;
    };
    let suite = r#"
title = "peers, images"
seed = 7
torch_threads = 1
repeats = 1
epochs = 1

[[experiment]]
id = "images"
kind = "loader"
model = "none"
image_size = 32

[experiment.loader]
source = "images"
samples = 24
image_width = 64
image_height = 48
resize = 40
random_crop = false
flip = false
batch_size = 8
workers = [1]
engines = ["native", "pytorch", "spdl"]
"#;
    let (b, o) = run_suite("peers-images", suite, &[]);
    assert!(o.status.success(), "{}", text(&o));
    let e = &b.experiments[0];
    assert_eq!(e.settings.get("model"), Some(&ParamValue::from("none")));
    assert_eq!(e.configurations.len(), 3);
    for c in &e.configurations {
        assert!(c.failure.is_none(), "{}: {:?}", c.id, c.failure);
        for r in &c.runs {
            if let Some(s) = &r.steps {
                assert!(s.compute_ns.iter().chain(&s.transfer_ns).all(|&n| n == 0));
                assert_eq!(s.next_wait_ns.len(), 3);
            }
        }
    }
}

#[test]
fn a_users_dataset_runs_through_source_python() {
    let Some(_) = peers_or_skip("the peer engines were") else {
        return;
    };
    let fixtures = Path::new(env!("CARGO_MANIFEST_DIR")).join("../fixtures/user_dataset");
    let suite = format!(
        r#"
title = "your Dataset"
repeats = 1
epochs = 1

[[experiment]]
id = "mine"
kind = "loader"
model = "linear"
features = 64
classes = 4

[experiment.loader]
source = "python"
factory = "my_dataset:make_dataset"
python_path = "{}"
args = {{ samples = 96, features = 64, classes = 4 }}
batch_size = 32
workers = [0, 2]
"#,
        fixtures.display()
    );
    let (b, o) = run_suite("peers-mine", &suite, &[]);
    assert!(o.status.success(), "{}", text(&o));
    for c in &b.experiments[0].configurations {
        assert_eq!(c.engine, Some(Engine::Pytorch));
        assert!(c.failure.is_none(), "{}: {:?}", c.id, c.failure);
        let w = c.runs[0].whole_run.as_ref().unwrap();
        assert_eq!(w.samples, Some(96));
    }
}
