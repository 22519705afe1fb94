//! `stallscope run --device wgpu` end to end on a real wgpu adapter (software
//! Vulkan here): a valid bundle whose configurations all have both timing
//! modes, and libtorch-only experiments recorded as not applicable.

use std::process::Command;

use stallscope_bundle::{DeviceKind, ExperimentKind, RunState, TimingMode, read_bundle};

#[test]
fn the_wgpu_preset_runs_in_both_modes_and_writes_a_valid_bundle() {
    let tmp = tempfile::Builder::new()
        .prefix("stallscope-wgpu-")
        .tempdir()
        .unwrap();
    let out = tmp.path().join("out");
    let o = Command::new(env!("CARGO_BIN_EXE_stallscope"))
        .args([
            "run", "--preset", "wgpu", "--device", "wgpu", "--quick", "--out",
        ])
        .arg(&out)
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&o.stderr);
    assert!(o.status.success(), "{stderr}");
    let bundle = read_bundle(&std::fs::read(out.join("bundle.json")).unwrap()).unwrap();
    assert_eq!(bundle.status.state, RunState::Complete);
    assert_eq!(
        bundle.environment.device.as_ref().unwrap().kind,
        DeviceKind::Wgpu
    );
    assert!(bundle.environment.wgpu.is_some());
    let kinds: Vec<ExperimentKind> = bundle.experiments.iter().map(|e| e.kind.clone()).collect();
    assert_eq!(
        kinds,
        [ExperimentKind::BatchSweep, ExperimentKind::Transfer]
    );
    for e in &bundle.experiments {
        assert!(!e.configurations.is_empty(), "{}", e.id);
        for c in &e.configurations {
            for mode in [TimingMode::WholeRun, TimingMode::Diagnostic] {
                assert!(
                    c.runs.iter().any(|r| r.timing_mode == mode),
                    "{}/{} lacks {mode:?}",
                    e.id,
                    c.id
                );
            }
        }
    }
}

#[test]
fn a_libtorch_only_experiment_is_not_applicable_on_wgpu() {
    let tmp = tempfile::Builder::new()
        .prefix("stallscope-wgpu-na-")
        .tempdir()
        .unwrap();
    let dir = tmp.path();
    let suite = dir.join("suite.toml");
    std::fs::write(
        &suite,
        "title = \"cnn on wgpu\"\nrepeats = 1\nepochs = 1\n\n[[experiment]]\nid = \"compute\"\nkind = \"compute\"\nmodel = \"fashion_cnn\"\nbatch_sizes = [8]\nsteps = 2\n",
    )
    .unwrap();
    let o = Command::new(env!("CARGO_BIN_EXE_stallscope"))
        .arg("run")
        .arg(&suite)
        .args(["--device", "wgpu", "--out"])
        .arg(dir.join("out"))
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let bundle = read_bundle(&std::fs::read(dir.join("out/bundle.json")).unwrap()).unwrap();
    let reason = bundle.experiments[0].not_applicable.as_deref().unwrap();
    assert!(reason.contains("needs libtorch"), "{reason}");
}
