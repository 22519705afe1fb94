//! Generated (not measured) data for the browser tests; titles and
//! descriptions say so.

/// A stall experiment with generated whole-run rates 1000 / 900 / 600
/// samples/s: transfer stall 10%, data stall 33%, waiting 40% (input-bound).
pub(super) fn generated_stall_experiment() -> stallscope_bundle::Experiment {
    use stallscope_bundle::*;
    let config = |source: &str, rate: f64| {
        let samples = 6_000u64;
        let seconds = samples as f64 / rate;
        Configuration::new(source, source.replace('_', " "))
            .with_param("source", source)
            .with_runs(vec![Run {
                whole_run: Some(WholeRun {
                    seconds: Some(seconds),
                    samples: Some(samples),
                    samples_per_s: Some(samples as f64 / seconds),
                    steps: Some(100),
                    ..Default::default()
                }),
                ..Run::new("r0-e0-whole_run", TimingMode::WholeRun, 0, 0, Phase::Cold)
            }])
    };
    Experiment::new(
        "stall",
        ExperimentKind::Stall,
        "Generated stall attribution",
    )
    .with_description("Generated rates for the browser tests; not a measurement.")
    .with_swept(["source"])
    .with_configurations(vec![
        config("compute_only", 1000.0),
        config("from_host", 900.0),
        config("full_pipeline", 600.0),
    ])
}
