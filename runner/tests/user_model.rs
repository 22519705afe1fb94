//! The user's own model (`model = "python"`) on the user's own Dataset,
//! through the real `stallscope run` and the Python harness (the
//! environment of `cargo xtask setup --peers`): the example factory of
//! `fixtures/user_dataset/my_model.py` swept over workers, both timing
//! modes, the three stages, the parameter count the harness built; and a
//! model that cannot take the Dataset's samples, one clear failure per
//! configuration naming both shapes. `STALLSCOPE_PEERS=0` skips them,
//! loudly.

#[allow(dead_code)]
mod util;

use std::path::Path;

use stallscope_bundle::{Bundle, Engine, Failure, ParamValue, TimingMode};
use util::*;

/// The example's folder (my_dataset.py and my_model.py).
fn example_dir() -> String {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../fixtures/user_dataset")
        .display()
        .to_string()
}

/// A sweep of workers 0 and 2 on the example model built with `model_args`.
fn suite(model_args: &str) -> String {
    format!(
        r#"
title = "your model"
seed = 7
torch_threads = 1
repeats = 1
epochs = 1

[[experiment]]
id = "mine"
kind = "loader"
model = "python"
model_factory = "my_model:make_model"
model_args = {model_args}

[experiment.loader]
source = "python"
factory = "my_dataset:make_dataset"
python_path = "{}"
args = {{ samples = 96, features = 64, classes = 4 }}
batch_size = 32
workers = [0, 2]
"#,
        example_dir()
    )
}

/// Run `suite` and return the bundle (valid) and the output.
fn run_suite(name: &str, suite: &str) -> (Bundle, std::process::Output) {
    let dir = temp_dir(name);
    let path = write_suite(dir.path(), "s.toml", suite);
    let out = dir.path().join("out");
    let harness = Path::new(env!("CARGO_MANIFEST_DIR")).join("../python");
    let harness = harness.display().to_string();
    let o = run_on_cpu(&path, &out, &[("STALLSCOPE_HARNESS_DIR", harness.as_str())]);
    (valid_bundle(&out.join("bundle.json")), o)
}

#[test]
fn a_users_model_trains_on_a_users_dataset_in_both_modes_and_three_stages() {
    let Some(_) = peers_or_skip("the user's model was") else {
        return;
    };
    let (b, o) = run_suite(
        "user-model",
        &suite("{ features = 64, hidden = 32, classes = 4 }"),
    );
    assert!(o.status.success(), "{}", text(&o));
    let e = &b.experiments[0];
    let setting = |k: &str| e.settings.get(k).cloned();
    // my_model.py's MyNet(64, 32, 4): 64·32 + 32 + 32·4 + 4.
    assert_eq!(setting("parameters"), Some(ParamValue::Int(2212)));
    assert_eq!(setting("model"), Some(ParamValue::from("python")));
    assert_eq!(
        setting("model_factory"),
        Some(ParamValue::from("my_model:make_model"))
    );
    assert_eq!(setting("model_class"), Some(ParamValue::from("MyNet")));
    assert_eq!(setting("loss"), Some(ParamValue::from("cross_entropy")));
    assert_eq!(setting("optimizer"), Some(ParamValue::from("SGD")));
    assert_eq!(setting("lr"), Some(ParamValue::from(0.01)));
    assert_eq!(e.configurations.len(), 2);
    for c in &e.configurations {
        assert_eq!(c.engine, Some(Engine::Pytorch));
        assert!(c.failure.is_none(), "{}: {:?}", c.id, c.failure);
        let modes: Vec<&TimingMode> = c.runs.iter().map(|r| &r.timing_mode).collect();
        assert_eq!(
            modes,
            [&TimingMode::WholeRun, &TimingMode::Diagnostic],
            "{}",
            c.id
        );
        let w = c.runs[0].whole_run.as_ref().unwrap();
        assert_eq!((w.samples, w.steps), (Some(96), Some(3)), "{}", c.id);
        let d = c.runs[1].diagnostic.as_ref().unwrap();
        for (stage, stat) in [
            ("next_wait", &d.next_wait),
            ("transfer", &d.transfer),
            ("compute", &d.compute),
        ] {
            assert!(stat.is_some(), "{}: no {stage}", c.id);
        }
        let s = c.runs[1].steps.as_ref().unwrap();
        assert_eq!(s.next_wait_ns.len(), 3, "{}", c.id);
        assert!(s.compute_ns.iter().all(|&n| n > 0), "{}: {s:?}", c.id);
    }
}

#[test]
fn a_users_model_that_cannot_take_the_samples_is_one_clear_failure() {
    let Some(_) = peers_or_skip("the user's model was") else {
        return;
    };
    let (b, o) = run_suite(
        "user-model-mismatch",
        &suite("{ features = 784, hidden = 32, classes = 4 }"),
    );
    assert_eq!(o.status.code(), Some(1), "{}", text(&o));
    let e = &b.experiments[0];
    assert_eq!(e.configurations.len(), 2);
    let want = "pytorch harness (setup): model my_model:make_model (MyNet) cannot take the \
                Dataset's batch: input float32[32, 64], labels int64[32]; its first layer \
                Linear takes [N, 784]; RuntimeError: mat1 and mat2 shapes cannot be \
                multiplied (32x64 and 784x32)";
    for c in &e.configurations {
        assert!(c.runs.is_empty(), "{}: nothing is timed", c.id);
        let Some(Failure::Error { message }) = &c.failure else {
            panic!("{}: {:?}", c.id, c.failure)
        };
        assert!(message.starts_with(want), "{}: {message}", c.id);
        assert!(!message.contains("Traceback"), "{message}");
    }
    // Nothing was built: no parameter count is claimed.
    assert_eq!(e.settings.get("parameters"), None);
}
