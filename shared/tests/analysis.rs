//! Analysis on the fixtures: the published seeds/003 table gives the article's
//! own conclusions; comparison tables and bundle comparisons behave.

use std::path::Path;

use stallscope_bundle::analysis::*;
use stallscope_bundle::{Bundle, Phase, TimingMode, read_bundle};

fn fixture(rel: &str) -> Bundle {
    let p = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../fixtures")
        .join(rel);
    read_bundle(&std::fs::read(&p).unwrap()).unwrap()
}

#[test]
fn published_sweet_spot_matches_the_article() {
    let b = fixture("published/fashionmnist-batch-sweep.json");
    let e = b.experiment("batch_sweep").unwrap();
    // At the default 95%, batch 1024 (99.4% of the best) is the smallest that qualifies.
    let s = sweet_spot(e, DEFAULT_SWEET_SPOT_THRESHOLD).unwrap();
    assert_eq!(
        (s.config_id.as_str(), s.best_config_id.as_str()),
        ("bs1024", "bs2048")
    );
    // The article: batch 256 reaches about 93% of the best (34,738 / 37,332).
    let s = sweet_spot(e, 0.93).unwrap();
    assert_eq!(s.config_id, "bs256");
    assert!((s.fraction_of_best - 34738.0 / 37332.0).abs() < 1e-12);
    let mib = s.memory_bytes.unwrap() / 1048576.0;
    assert!((mib - 106.2).abs() < 0.01, "{mib}");
}

#[test]
fn published_table_shows_the_articles_numbers() {
    let b = fixture("published/fashionmnist-batch-sweep.json");
    let e = b.experiment("batch_sweep").unwrap();
    let t = comparison_table(e, &TableOptions::default());
    assert_eq!(t.phase, Phase::Cold, "the article times one epoch per run");
    let rate = t
        .column(&MetricKey::new(
            Metric::SamplesPerS,
            TimingMode::WholeRun,
            Phase::Cold,
        ))
        .unwrap();
    let cell = |row: usize| t.rows[row].cells[rate].as_ref().unwrap();
    assert_eq!(t.columns[rate].unit.show(cell(0).value), "16,062/s");
    assert!(cell(6).best, "batch 2048 is the best");
    assert!((cell(3).ratio_to_baseline.unwrap() - 34738.0 / 16062.0).abs() < 1e-12);
    let step = t
        .column(&MetricKey::new(
            Metric::StepTimeS,
            TimingMode::WholeRun,
            Phase::Cold,
        ))
        .unwrap();
    assert_eq!(
        t.columns[step]
            .unit
            .show(t.rows[0].cells[step].as_ref().unwrap().value),
        "1.99 ms"
    );
    let md = t.to_markdown();
    assert!(
        // One time unit per table: the epoch reads in the step's ms.
        md.contains("**37,332/s (2.32×)**") && md.contains("| epoch (whole-run, cold) [ms] |"),
        "{md}"
    );
    let csv = t.to_csv();
    assert!(csv.lines().count() == 10, "{csv}");
}

#[test]
fn published_oom_message_is_flagged_implausible() {
    let b = fixture("published/fashionmnist-batch-sweep.json");
    let v = verdict(b.experiment("oom_probe").unwrap()).unwrap();
    assert!(
        v.headline.contains("Largest batch_size that fit: 16384"),
        "{}",
        v.headline
    );
    assert!(
        v.headline.contains("17179869184.00 GiB") && v.headline.contains("impossible"),
        "{}",
        v.headline
    );
}

/// A copy of `b` in which one configuration's whole-run epochs took `factor`
/// times as long (a synthetic regression made in the test, never a fixture).
fn slowed(b: &Bundle, experiment: &str, config: &str, factor: f64) -> Bundle {
    let mut b = b.clone();
    let c = b
        .experiments
        .iter_mut()
        .find(|e| e.id == experiment)
        .and_then(|e| e.configurations.iter_mut().find(|c| c.id == config))
        .unwrap();
    for r in &mut c.runs {
        if let Some(w) = &mut r.whole_run {
            let s = w.seconds.unwrap() * factor;
            w.seconds = Some(s);
            w.samples_per_s = Some(w.samples.unwrap() as f64 / s);
            w.step_s = w.step_s.map(|x| x * factor);
        }
    }
    b
}

const MEASURED: &str = "measured/cpu-quickstart-quick.json";

#[test]
fn compare_gates_on_whole_run_regressions_only() {
    let before = fixture(MEASURED);
    let after = slowed(&before, "batch_sweep", "bs64", 1.25);
    assert!(stallscope_bundle::validate(&after).is_empty());
    let c = compare_bundles(&before, &after, 5.0);
    let reg = c.regressions();
    assert_eq!(reg.len(), 1, "{reg:#?}");
    assert_eq!(
        (reg[0].0.experiment_id.as_str(), reg[0].1.config_id.as_str()),
        ("batch_sweep", "bs64")
    );
    assert!((reg[0].1.ratio.unwrap() - 0.8).abs() < 1e-9);
    assert!(
        compare_bundles(&before, &after, 30.0)
            .regressions()
            .is_empty()
    );
    assert!(
        compare_bundles(&before, &before, 0.0)
            .regressions()
            .is_empty()
    );
}

#[test]
fn published_and_measured_are_listed_as_different() {
    let published = fixture("published/fashionmnist-batch-sweep.json");
    let measured = fixture(MEASURED);
    let c = compare_bundles(&published, &measured, 5.0);
    assert!(
        c.environment_differences
            .iter()
            .any(|d| d.field == "provenance")
    );
    assert!(
        c.environment_differences
            .iter()
            .any(|d| d.field == "device")
    );
}

#[test]
fn a_diagnostic_figure_is_never_compared_with_a_whole_run_one() {
    let a = MetricKey::new(Metric::SamplesPerS, TimingMode::WholeRun, Phase::Steady);
    let d = MetricKey::new(Metric::SamplesPerS, TimingMode::Diagnostic, Phase::Steady);
    let err = a.comparable_with(&d).unwrap_err();
    assert!(
        err.reason.contains("synchronizes at every stage boundary"),
        "{}",
        err.reason
    );
    // A bundle whose runs are all diagnostic is refused, with that reason.
    let before = fixture(MEASURED);
    let mut diag_only = before.clone();
    for c in &mut diag_only.experiments[0].configurations {
        c.runs.retain(|r| r.timing_mode == TimingMode::Diagnostic);
    }
    let c = compare_bundles(&before, &diag_only, 5.0);
    let e = &c.experiments[0];
    assert!(e.rows.is_empty());
    assert!(
        e.note
            .as_deref()
            .unwrap()
            .starts_with("refused: one side has only diagnostic figures"),
        "{:?}",
        e.note
    );
}

#[test]
fn barrier_overhead_is_read_per_step() {
    // Known numbers: whole-run epochs of 0.9, 1.0 and 1.2 s (median 1.0),
    // diagnostic epochs of 1.5 s, 10 steps each → 0.05 s of barriers a step.
    let whole = |id: &str, s: f64| {
        serde_json::json!({"id": id, "timing_mode": "whole_run", "repeat": 0, "epoch": 1,
            "phase": "steady", "whole_run": {"seconds": s, "samples": 640,
            "samples_per_s": 640.0 / s, "steps": 10}})
    };
    let config: stallscope_bundle::Configuration = serde_json::from_value(serde_json::json!({
        "id": "c", "label": "c",
        "runs": [whole("w0", 0.9), whole("w1", 1.2), whole("w2", 1.0),
            {"id": "d0", "timing_mode": "diagnostic", "repeat": 0, "epoch": 1, "phase": "steady",
             "diagnostic": {"seconds": 1.5, "samples": 640, "steps": 10}}]
    }))
    .unwrap();
    let o = barrier_overhead(&config, Phase::Steady).unwrap();
    assert_eq!(
        (o.whole_run_epoch_s, o.diagnostic_epoch_s, o.steps),
        (1.0, 1.5, 10.0)
    );
    assert!((o.per_step_s - 0.05).abs() < 1e-12, "{}", o.per_step_s);
    assert!(
        barrier_overhead(&config, Phase::Cold).is_none(),
        "no cold runs"
    );
}

#[test]
fn prefetch_estimate_is_batch_bytes_times_batches_held_ahead() {
    use stallscope_bundle::{Configuration, ParamValue};
    // methodology.md: 32 MiB × 2 workers × 2 prefetch = 128 MiB.
    let mut c = Configuration::new("w2", "2 workers")
        .with_param("workers", 2)
        .with_param("prefetch", 2)
        .with_batch_bytes(32 << 20);
    assert_eq!(prefetch_estimate_bytes(&c), Some(128 << 20));
    let key = MetricKey::new(
        Metric::PrefetchEstimateBytes,
        TimingMode::WholeRun,
        Phase::Steady,
    );
    assert_eq!(metric_value(&c, &key), Some((128u64 << 20) as f64));
    c.params.insert("workers".into(), ParamValue::Int(0));
    assert_eq!(
        prefetch_estimate_bytes(&c),
        Some(0),
        "an in-loop loader holds nothing ahead"
    );
    c.batch_bytes = None;
    assert_eq!(prefetch_estimate_bytes(&c), None);
}
