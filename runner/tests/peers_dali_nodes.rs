//! DALI and torchdata.nodes through the real `stallscope run`: a peers'
//! Python without one of them (its import blocked, the rest intact) makes
//! only that engine's configurations not applicable, with the install
//! command, while the others run; a harness killed in a DALI epoch keeps
//! the epochs before it. Real harness, real DALI and torchdata.
//! `STALLSCOPE_PEERS=0` skips them, loudly.

#[allow(dead_code)]
mod util;

use std::path::{Path, PathBuf};

use stallscope_bundle::{Bundle, Configuration, Engine, Failure};
use util::*;

const SUITE: &str = r#"
title = "dali and nodes"
seed = 3
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
samples = 192
batch_size = 32
workers = [2]
engines = ["native", "pytorch", "dali", "nodes"]
"#;

/// A `python` in `dir` that runs `real` with `module` unimportable: a
/// `sitecustomize` put first on the path refuses it as a missing module.
fn python_without(dir: &Path, real: &Path, module: &str) -> PathBuf {
    let site = dir.join("block");
    std::fs::create_dir_all(&site).unwrap();
    std::fs::write(
        site.join("sitecustomize.py"),
        format!(
            "import sys\n\
             class _Block:\n    \
                 def find_spec(self, name, path=None, target=None):\n        \
                     if name == {module:?} or name.startswith({module:?} + '.'):\n            \
                         raise ModuleNotFoundError(f'No module named {{name!r}}', name=name)\n        \
                     return None\n\
             sys.meta_path.insert(0, _Block())\n"
        ),
    )
    .unwrap();
    let wrapper = dir.join("python");
    std::fs::write(
        &wrapper,
        format!(
            "#!/bin/sh\nPYTHONPATH=\"{}${{PYTHONPATH:+:$PYTHONPATH}}\" exec \"{}\" \"$@\"\n",
            site.display(),
            real.display()
        ),
    )
    .unwrap();
    let mut perm = std::fs::metadata(&wrapper).unwrap().permissions();
    std::os::unix::fs::PermissionsExt::set_mode(&mut perm, 0o755);
    std::fs::set_permissions(&wrapper, perm).unwrap();
    wrapper
}

/// Run `suite` with `envs` and return the bundle (valid) and the output.
fn run_suite(dir: &Path, suite: &str, envs: &[(&str, &str)]) -> (Bundle, std::process::Output) {
    let path = write_suite(dir, "s.toml", suite);
    let out = dir.join("out");
    let harness = harness_dir();
    let mut all = vec![("STALLSCOPE_HARNESS_DIR", harness.as_str())];
    all.extend_from_slice(envs);
    let o = run_on_cpu(&path, &out, &all);
    (valid_bundle(&out.join("bundle.json")), o)
}

fn engine(c: &Configuration) -> Engine {
    c.engine.clone().unwrap_or(Engine::Native)
}

#[test]
fn a_missing_dali_or_torchdata_leaves_the_other_engines_running() {
    let Some(real) = peers_or_skip("DALI and torchdata.nodes were") else {
        return;
    };
    for (module, missing) in [("nvidia.dali", Engine::Dali), ("torchdata", Engine::Nodes)] {
        let dir = temp_dir("peers-missing-package");
        let python = python_without(dir.path(), &real, module);
        let python = python.to_str().unwrap();
        let (b, o) = run_suite(dir.path(), SUITE, &[("STALLSCOPE_PYTHON", python)]);
        assert!(o.status.success(), "{module}: {}", text(&o));
        let configs = &b.experiments[0].configurations;
        assert_eq!(configs.len(), 4, "{module}");
        for c in configs {
            if engine(c) != missing {
                assert!(c.failure.is_none(), "{module}: {}: {:?}", c.id, c.failure);
                assert_eq!(c.runs.len(), 4, "{module}: {} ran both modes", c.id);
                continue;
            }
            let reason = c.not_applicable.get("engine").expect("a reason");
            let import = module
                .strip_suffix(".dali")
                .map_or("torchdata.nodes", |_| module);
            assert!(
                reason.contains(&format!("cannot import {import}")),
                "{reason}"
            );
            assert!(reason.contains("cargo xtask setup --peers"), "{reason}");
            assert!(c.runs.is_empty() && c.failure.is_none(), "{}", c.id);
        }
    }
}

#[test]
fn a_harness_killed_in_a_dali_epoch_keeps_the_epochs_before_it() {
    let Some(_) = peers_or_skip("DALI and torchdata.nodes were") else {
        return;
    };
    let dir = temp_dir("peers-dali-kill");
    let suite = SUITE.replace(
        "\"native\", \"pytorch\", \"dali\", \"nodes\"",
        "\"native\", \"dali\"",
    );
    let (b, o) = run_suite(
        dir.path(),
        &suite,
        &[("STALLSCOPE_HARNESS_FAULT", "kill@1:2")],
    );
    assert_eq!(o.status.code(), Some(1), "{}", text(&o));
    let configs = &b.experiments[0].configurations;
    let native = configs
        .iter()
        .find(|c| engine(c) == Engine::Native)
        .unwrap();
    assert!(native.failure.is_none() && native.runs.len() == 4);
    let dali = configs.iter().find(|c| engine(c) == Engine::Dali).unwrap();
    // Epoch 0 of the whole-run mode finished before the kill in epoch 1.
    assert_eq!(dali.runs.len(), 1, "{:?}", dali.runs);
    let Some(Failure::Error { message }) = &dali.failure else {
        panic!("{:?}", dali.failure)
    };
    assert!(
        message.contains("dali harness ended by signal 9 (killed)"),
        "{message}"
    );
    assert!(message.contains("after 1 of 4 epochs"), "{message}");
}

/// All five engines on an image source, DALI's decoder swept: on the CPU
/// the mixed decoder is not run, with its reason, the bundle is valid, and
/// every engine that ran took the same samples and steps in every epoch.
#[test]
fn five_engines_on_images_with_dali_mixed_recorded_as_not_applicable_on_the_cpu() {
    let Some(_) = peers_or_skip("DALI and torchdata.nodes were") else {
        return;
    };
    let dir = temp_dir("peers-five-images");
    let suite = r#"
title = "five engines, images"
seed = 5
torch_threads = 1
repeats = 1
epochs = 2

[[experiment]]
id = "images"
kind = "loader"
model = "image_cnn"
image_size = 16
classes = 4

[experiment.loader]
source = "images"
samples = 40
batch_size = 8
image_width = 32
image_height = 24
resize = 18
engines = ["native", "pytorch", "spdl", "dali", "nodes"]
workers = [2]
dali_device = ["cpu", "mixed"]
"#;
    let (b, o) = run_suite(dir.path(), suite, &[]);
    assert!(o.status.success(), "{}", text(&o));
    assert!(text(&o).contains("not run here: dali"), "{}", text(&o));
    let mut took = None;
    for c in &b.experiments[0].configurations {
        if c.id.ends_with("-mixed") {
            let why = c.not_applicable.get("dali_device").expect("a reason");
            assert!(why.contains("needs a CUDA device"), "{why}");
            assert!(c.runs.is_empty() && c.failure.is_none());
            continue;
        }
        assert!(c.failure.is_none(), "{}: {:?}", c.id, c.failure);
        assert_eq!(c.runs.len(), 4, "{}", c.id);
        let per_epoch: Vec<(u64, u64)> = c
            .runs
            .iter()
            .map(|r| match (&r.whole_run, &r.diagnostic) {
                (Some(w), _) => (w.samples.unwrap(), w.steps.unwrap()),
                (_, Some(d)) => (d.samples.unwrap(), d.steps.unwrap()),
                _ => panic!("{}: a run without figures", c.id),
            })
            .collect();
        match &took {
            None => took = Some(per_epoch),
            Some(t) => assert_eq!(t, &per_epoch, "{}", c.id),
        }
    }
}
