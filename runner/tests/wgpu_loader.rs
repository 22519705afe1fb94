//! `--device wgpu` runs the loader and stall presets through the native
//! loader on a real wgpu adapter (software Vulkan here): valid bundles with
//! both timing modes in every configuration, process workers included.

use std::process::Command;

use stallscope_bundle::{Engine, ExperimentKind, ParamValue, TimingMode, parse_bundle, validate};

fn run_preset(preset: &str) -> stallscope_bundle::Bundle {
    let out = tempfile::tempdir().unwrap();
    let o = Command::new(env!("CARGO_BIN_EXE_stallscope"))
        .args([
            "run", "--preset", preset, "--device", "wgpu", "--quick", "--out",
        ])
        .arg(out.path())
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&o.stdout);
    assert!(
        o.status.success(),
        "{stdout}{}",
        String::from_utf8_lossy(&o.stderr)
    );
    assert!(
        stdout.lines().all(|l| l.chars().count() <= 100),
        "a line over 100 columns:\n{stdout}"
    );
    let bundle = parse_bundle(&std::fs::read(out.path().join("bundle.json")).unwrap()).unwrap();
    let problems = validate(&bundle);
    assert!(problems.is_empty(), "{problems:?}");
    bundle
}

fn both_modes(e: &stallscope_bundle::Experiment) {
    assert!(!e.configurations.is_empty(), "{}", e.id);
    for c in &e.configurations {
        assert!(c.failure.is_none(), "{}/{}: {:?}", e.id, c.id, c.failure);
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

#[test]
fn the_loader_preset_runs_on_wgpu_with_threads_and_processes() {
    let b = run_preset("workers-light");
    let e = &b.experiments[0];
    assert_eq!(e.kind, ExperimentKind::Loader);
    both_modes(e);
    let kinds: Vec<&str> = e
        .configurations
        .iter()
        .filter_map(|c| match c.params.get("worker_kind")? {
            ParamValue::Text(k) => Some(k.as_str()),
            _ => None,
        })
        .collect();
    assert!(
        kinds.contains(&"in_loop") && kinds.contains(&"processes"),
        "{kinds:?}"
    );
    assert!(
        e.configurations
            .iter()
            .all(|c| c.engine_or_native() == &Engine::Native)
    );
    // The loader measured itself: time to the first batch of every epoch.
    let with_workers = e
        .configurations
        .iter()
        .find(|c| c.params.get("workers").and_then(|w| w.as_f64()) == Some(2.0))
        .unwrap();
    assert!(
        with_workers.runs.iter().all(|r| r
            .loader
            .as_ref()
            .is_some_and(|l| l.time_to_first_batch_s.is_some())),
        "loader stats missing"
    );
}

#[test]
fn the_stall_preset_attributes_on_wgpu_and_marks_the_image_part_not_applicable() {
    let b = run_preset("stall");
    let image = b.experiment("image_stall").unwrap();
    assert!(
        image.not_applicable.as_deref().unwrap().contains("image"),
        "{image:?}"
    );
    let light = b.experiment("synthetic_stall").unwrap();
    both_modes(light);
    let ids: Vec<&str> = light.configurations.iter().map(|c| c.id.as_str()).collect();
    assert_eq!(ids, ["compute_only", "from_host", "full_pipeline"]);
    let attribution = stallscope_bundle::analysis::stall_attribution(light);
    assert!(attribution.is_some(), "no attribution from the three ways");
}
