//! The loader-peers benchmark's rows: each engine's best configuration of
//! a bundle ([`best_per_engine`]) and how its rates print. A leaf: the
//! bench (`bench_peers`) and its goals (`bench_goals`) both read it.
use anyhow::{Result, bail};
use stallscope_bundle::analysis::{Metric, MetricKey, group_thousands, metric_summary};
use stallscope_bundle::{Bundle, Configuration, Engine, Phase, TimingMode};

/// Native first, then the peers it is held to.
pub(crate) const ENGINES: [Engine; 5] = [
    Engine::Native,
    Engine::Pytorch,
    Engine::Spdl,
    Engine::Dali,
    Engine::Nodes,
];
/// One engine's best configuration by median whole-run steady samples/s.
#[derive(Debug, PartialEq)]
pub(crate) struct Best {
    pub(crate) engine: Engine,
    /// `None` when no configuration of the engine has a steady whole-run figure.
    pub(crate) best: Option<BestConfig>,
}

#[derive(Debug, PartialEq)]
pub(crate) struct BestConfig {
    pub(crate) label: String,
    pub(crate) median: f64,
    pub(crate) min: f64,
    pub(crate) max: f64,
    pub(crate) runs: usize,
    /// The largest `memory.host_peak_rss_bytes` of the configuration's runs (both modes).
    pub(crate) peak_rss: Option<u64>,
}

fn best_config(c: &Configuration) -> Option<BestConfig> {
    let key = MetricKey::new(Metric::SamplesPerS, TimingMode::WholeRun, Phase::Steady);
    let s = metric_summary(c, &key)?;
    Some(BestConfig {
        label: c.label.clone(),
        median: s.median,
        min: s.min,
        max: s.max,
        runs: s.n,
        peak_rss: c
            .runs
            .iter()
            .filter_map(|r| r.memory.as_ref()?.host_peak_rss_bytes)
            .max(),
    })
}

/// Per engine (native, pytorch, spdl, dali, nodes) the best configuration of the bundle's loader experiment.
pub(crate) fn best_per_engine(bundle: &Bundle) -> Result<Vec<Best>> {
    let Some(e) = bundle.experiments.first() else {
        bail!("the bundle has no experiment");
    };
    Ok(ENGINES
        .into_iter()
        .map(|engine| {
            let best = e
                .configurations
                .iter()
                .filter(|c| *c.engine_or_native() == engine)
                .filter_map(best_config)
                .max_by(|a, b| a.median.total_cmp(&b.median));
            Best { engine, best }
        })
        .collect())
}

pub(crate) fn rate(v: f64) -> String {
    group_thousands(&format!("{v:.0}"))
}

pub(crate) fn rate1(v: f64) -> String {
    group_thousands(&format!("{v:.1}"))
}
