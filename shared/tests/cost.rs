//! Property tests of the cost analysis over generated experiments: the cost
//! figures are what the runs say (CPU per sample, cores, the peak of every
//! process, the time-weighted GPU utilisation), the cost verdict states the
//! generated speed and CPU ratios, a higher utilisation without a shorter
//! epoch is called no improvement, and a bundle without cost figures gets
//! no cost column and no cost sentence.

mod generated;

use generated::*;
use stallscope_bundle::analysis::*;
use stallscope_bundle::*;

/// Three steady whole-run repeats of a configuration running at `rate`
/// samples/s with `cores` busy and GPU utilisation `util`%.
fn config(g: &mut Gen, id: &str, rate: f64, cores: f64, util: Option<u32>) -> Configuration {
    let runs = (0..3)
        .map(|k| {
            let samples = 6_400;
            let seconds = samples as f64 / rate * (1.0 + 0.02 * g.unit());
            let mut r = Run::new(
                format!("{id}-{k}"),
                TimingMode::WholeRun,
                k,
                1,
                Phase::Steady,
            );
            r.whole_run = Some(WholeRun::measured(seconds, samples, 100, 0));
            r.cost = Some(cost(g, seconds, samples, cores));
            r.memory = Some(Memory {
                host_peak_rss_bytes: Some(g.range(1 << 28, 1 << 30)),
                workers_peak_rss_bytes: g.below(2).eq(&0).then(|| g.range(1 << 26, 1 << 29)),
                ..Default::default()
            });
            if let Some(u) = util {
                r.timeline = Some(timeline(g, 20, u));
            }
            r
        })
        .collect();
    Configuration::new(id, id).with_runs(runs)
}

#[test]
fn the_cost_summary_is_what_the_runs_say() {
    let mut g = Gen(0x5EED_0030);
    for case in 0..200 {
        let cores = 0.5 + 4.0 * g.unit();
        let util = g.below(101) as u32;
        let rate = 1000.0 + 9000.0 * g.unit();
        let c = config(&mut g, "c", rate, cores, Some(util));
        let e =
            Experiment::new("x", ExperimentKind::Loader, "x").with_configurations(vec![c.clone()]);
        let s = cost_summary(&e, &c);
        assert_eq!(
            (s.mode.clone(), s.phase),
            (TimingMode::WholeRun, Phase::Steady)
        );
        let cpu: Vec<f64> = c
            .runs
            .iter()
            .map(|r| {
                let c = r.cost.as_ref().unwrap();
                c.cpu_s / r.whole_run.as_ref().unwrap().samples.unwrap() as f64 * 1000.0
            })
            .collect();
        let want = median(&cpu).unwrap();
        let got = s.cpu_s_per_1000_samples.unwrap().median;
        assert!(
            (got - want).abs() <= 1e-12 * want,
            "case {case}: {got} vs {want}"
        );
        assert!(
            (s.cpu_cores_mean.unwrap().median - cores).abs() < 1e-9,
            "case {case}"
        );
        let peak = c
            .runs
            .iter()
            .map(|r| {
                let m = r.memory.as_ref().unwrap();
                m.host_peak_rss_bytes.unwrap() + m.workers_peak_rss_bytes.unwrap_or(0)
            })
            .max()
            .unwrap();
        assert_eq!(s.peak_rss_all_bytes, Some(peak as f64), "case {case}");
        assert!((s.gpu_utilization_mean_percent.unwrap() - util as f64).abs() < 1e-9);
        let host = s.host_cpu_mean_cores.unwrap();
        assert!((0.0..4.0).contains(&host), "case {case}: {host}");
    }
}

#[test]
fn the_timeline_mean_weighs_each_sample_by_its_interval() {
    // 10% for 100 ms, then 90% for 300 ms: 70% over the 400 ms.
    assert_eq!(timeline_mean(&[100, 400], &[0.1, 0.9]), Some(0.7));
    assert_eq!(
        timeline_mean(&[0, 0], &[0.2, 0.4]),
        Some(0.30000000000000004)
    );
    assert_eq!(timeline_mean(&[1, 2], &[0.2]), None);
    assert_eq!(timeline_mean(&[], &[]), None);
}

#[test]
fn the_cost_verdict_states_the_speed_and_cpu_ratios_against_the_baseline() {
    let mut g = Gen(0x5EED_0031);
    for case in 0..150 {
        let (rate, cores) = (2000.0 + 1000.0 * g.unit(), 1.0 + g.unit());
        let (speed, more) = (1.2 + 2.0 * g.unit(), 1.0 + 3.0 * g.unit());
        let base = config(&mut g, "1 thread", rate, cores, None);
        let fast = config(&mut g, "4 threads", rate * speed, cores * more, None);
        let slow = config(&mut g, "2 threads", rate * 1.05, cores, None);
        let mut configs = vec![base, slow, fast];
        g.shuffle(&mut configs[1..]);
        let e = Experiment::new("loader", ExperimentKind::Loader, "Loader")
            .with_configurations(configs)
            .with_baseline("1 thread");
        let v = cost_verdict(&e).unwrap();
        let key = |m| MetricKey::new(m, TimingMode::WholeRun, Phase::Steady);
        let value = |id: &str, m| metric_value(e.configuration(id).unwrap(), &key(m)).unwrap();
        let r = value("4 threads", Metric::SamplesPerS) / value("1 thread", Metric::SamplesPerS);
        let c = value("4 threads", Metric::CpuSPer1000Samples)
            / value("1 thread", Metric::CpuSPer1000Samples);
        let want = format!(
            "4 threads: {} the samples/s for {} the CPU-seconds per sample of 1 thread.",
            show_ratio(r),
            show_ratio(c)
        );
        assert_eq!(v, want, "case {case}");
        // CPU per sample grows as cores ÷ speed: the ratios say so.
        assert!(
            (c - more / speed).abs() < 0.1 * more / speed,
            "case {case}: {c}"
        );
        // It is the experiment's verdict's last sentence too.
        let headline = verdict(&e).unwrap().headline;
        assert!(
            headline.starts_with("Fastest: ") && headline.ends_with(&want),
            "{headline}"
        );
    }
}

#[test]
fn a_higher_utilisation_without_a_shorter_epoch_is_no_improvement() {
    let mut g = Gen(0x5EED_0032);
    for case in 0..150 {
        let rate = 3000.0;
        let (lo, hi) = (20 + g.below(30) as u32, 60 + g.below(40) as u32);
        // Clearly faster, or slower (by 3–15%, beyond the 2% jitter).
        let faster = g.below(2) == 0;
        let new_rate = if faster {
            rate * 1.5
        } else {
            rate * (0.85 + 0.12 * g.unit())
        };
        let e = Experiment::new("x", ExperimentKind::Loader, "x").with_configurations(vec![
            config(&mut g, "base", rate, 1.0, Some(lo)),
            config(&mut g, "pinned", new_rate, 1.0, Some(hi)),
        ]);
        let v = cost_verdict(&e).unwrap_or_default();
        let warned = v.contains(&format!(
            "pinned: GPU utilisation rose from {lo}% to {hi}% but the whole-run epoch did not get shorter"
        ));
        assert_eq!(warned, !faster, "case {case}: {v}");
        assert_eq!(
            v.contains("not an improvement"),
            !faster,
            "case {case}: {v}"
        );
    }
}

#[test]
fn without_cost_figures_there_is_no_cost_column_nor_sentence() {
    let mut g = Gen(0x5EED_0033);
    let mut configs = vec![
        config(&mut g, "a", 1000.0, 1.0, Some(40)),
        config(&mut g, "b", 2000.0, 2.0, None),
    ];
    let e = Experiment::new("x", ExperimentKind::Loader, "x").with_configurations(configs.clone());
    let cols = cost_columns(&e, Phase::Steady);
    let metrics: Vec<Metric> = cols.iter().map(|k| k.metric).collect();
    use Metric::*;
    assert_eq!(
        metrics,
        [
            CpuSPer1000Samples,
            CpuCoresMean,
            PeakRssAllBytes,
            GpuUtilizationMean
        ]
    );
    let t = comparison_table(&e, &TableOptions::default());
    for k in &cols {
        let i = t
            .column(k)
            .unwrap_or_else(|| panic!("{k:?} not in the table"));
        assert_eq!(t.columns[i].heading, k.heading());
    }
    // Configuration b has no timeline: its GPU cell is empty, not zero.
    let gpu = t.column(&cols[3]).unwrap();
    assert!(t.rows[1].cells[gpu].is_none());
    for c in &mut configs {
        for r in &mut c.runs {
            r.cost = None;
            r.timeline = None;
        }
    }
    let workers = configs
        .iter()
        .flat_map(|c| &c.runs)
        .any(|r| r.memory.as_ref().unwrap().workers_peak_rss_bytes.is_some());
    let e = Experiment::new("x", ExperimentKind::Loader, "x").with_configurations(configs);
    // Measured worker processes still make an all-process peak; the runner
    // alone without a 1.2 cost says nothing about workers: no column.
    let left: Vec<Metric> = cost_columns(&e, Phase::Steady)
        .iter()
        .map(|k| k.metric)
        .collect();
    assert_eq!(
        left,
        if workers {
            vec![PeakRssAllBytes]
        } else {
            vec![]
        }
    );
    assert_eq!(cost_verdict(&e), None);
    let t = comparison_table(&e, &TableOptions::default());
    assert!(t.columns.iter().all(|c| !matches!(
        c.key.metric,
        CpuSPer1000Samples | CpuCoresMean | GpuUtilizationMean
    )));
}
