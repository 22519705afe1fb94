//! The report of generated merged bundles with CPU costs: a table per
//! configuration naming every rank, the straggler line naming the slowed
//! rank and the barrier, the cost table and the cost verdict, all within
//! 100 columns; a bundle without ranks or costs shows neither.

use stallscope_bundle::analysis::diagnostic_from_series;
use stallscope_bundle::*;

use super::text::{WIDTH, width};
use super::*;

use stallscope_loader::Rng;

/// Uniform in `lo..hi`.
fn range(g: &mut Rng, lo: u64, hi: u64) -> u64 {
    lo + g.below(hi - lo)
}

/// One configuration of `world` ranks, rank `slow` waiting `delay_ns` more
/// for data each step; whole-run runs at `rate` samples/s with `cores` busy.
fn configuration(
    g: &mut Rng,
    id: &str,
    world: u32,
    slow: u32,
    delay_ns: u64,
    rate: f64,
    cores: f64,
) -> Configuration {
    let steps = range(g, 10, 30) as usize;
    let mut runs = Vec::new();
    for epoch in 0..3u32 {
        let phase = if epoch == 0 {
            Phase::Cold
        } else {
            Phase::Steady
        };
        let work: Vec<Vec<[u64; 3]>> = (0..world)
            .map(|r| {
                (0..steps)
                    .map(|_| {
                        let extra = if r == slow { delay_ns } else { 0 };
                        [
                            range(g, 10_000, 90_000) + extra,
                            50_000,
                            range(g, 900_000, 1_100_000),
                        ]
                    })
                    .collect()
            })
            .collect();
        let top: Vec<u64> = (0..steps)
            .map(|i| work.iter().map(|w| w[i].iter().sum::<u64>()).max().unwrap())
            .collect();
        for r in 0..world {
            let w = &work[r as usize];
            let s = StepSeries {
                next_wait_ns: w.iter().map(|x| x[0]).collect(),
                transfer_ns: w.iter().map(|x| x[1]).collect(),
                compute_ns: w.iter().map(|x| x[2]).collect(),
                comm_ns: (0..steps)
                    .map(|i| top[i] - w[i].iter().sum::<u64>() + 5_000)
                    .collect(),
            };
            let samples = 32 * steps as u64;
            let seconds = samples as f64 / rate;
            let mut d = Run::new(
                format!("r{r}-e{epoch}-d"),
                TimingMode::Diagnostic,
                0,
                epoch,
                phase,
            );
            d.diagnostic = Some(diagnostic_from_series(&s, seconds, samples, 0, None));
            d.steps = Some(s);
            d.rank = Some(r);
            let mut wr = Run::new(
                format!("r{r}-e{epoch}-w"),
                TimingMode::WholeRun,
                0,
                epoch,
                phase,
            );
            wr.whole_run = Some(WholeRun::measured(seconds, samples, steps as u64, 0));
            wr.rank = Some(r);
            let cpu = seconds * cores;
            wr.cost = Some(CpuCost {
                wall_s: seconds,
                cpu_s: cpu,
                cpu_s_per_1000_samples: Some(cpu / samples as f64 * 1000.0),
                parts: vec![],
            });
            wr.memory = Some(Memory {
                host_peak_rss_bytes: Some(range(g, 1 << 28, 1 << 29)),
                workers_peak_rss_bytes: Some(1 << 27),
                ..Default::default()
            });
            runs.push(d);
            runs.push(wr);
        }
    }
    Configuration::new(id, id)
        .with_param("workers", id.len() as i64)
        .with_runs(runs)
}

fn merged(world: u32, configs: Vec<Configuration>) -> Bundle {
    let mut b: Bundle = stallscope_core::read_bundle_file(
        &std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("../fixtures/measured/cpu-quickstart-quick.json"),
    )
    .unwrap();
    b.experiments = vec![
        Experiment::new("loader", ExperimentKind::Loader, "Loader on every rank")
            .with_swept(["workers"])
            .with_baseline(configs[0].id.clone())
            .with_configurations(configs),
    ];
    b.ranks = (0..world)
        .map(|r| RankHost {
            rank: r,
            layout: RankLayout {
                launcher: "torchrun".into(),
                rank: r,
                world_size: world,
                local_rank: r,
                master_addr: "127.0.0.1".into(),
                master_port: 29500,
                sync: "tcpstore_barrier".into(),
                ..Default::default()
            },
            host: None,
            bundle_id: None,
            status: None,
        })
        .collect();
    b
}

#[test]
fn a_merged_bundle_shows_its_ranks_straggler_and_cost_within_100_columns() {
    let mut g = Rng::new(0x5EED_0040);
    for case in 0..30 {
        let world = range(&mut g, 2, 9) as u32;
        let slow = range(&mut g, 0, world as u64) as u32;
        let base = configuration(&mut g, "in loop", world, slow, 2_000_000, 1000.0, 1.0);
        let fast = configuration(&mut g, "4 threads", world, slow, 2_000_000, 1900.0, 4.0);
        let b = merged(world, vec![base, fast]);
        assert_eq!(validate(&b), vec![], "case {case}");
        for style in [Style::Compact, Style::Wide] {
            let out = render_bundle(&b, style);
            if style == Style::Compact {
                let long: Vec<&str> = out.lines().filter(|l| width(l) > WIDTH).collect();
                assert!(long.is_empty(), "case {case}: {long:#?}");
            }
            for label in ["in loop", "4 threads"] {
                let head = format!("ranks of {label}: shares of the diagnostic steady step");
                assert!(out.contains(&head), "case {case}:\n{out}");
            }
            // A row per rank in each configuration's table.
            for r in 0..world {
                let rows = out
                    .lines()
                    .filter(|l| l.trim_start().starts_with(&format!("{r} ")))
                    .count();
                assert!(rows >= 2, "case {case}: rank {r}:\n{out}");
            }
            // Sentences wrap: read them with the line breaks as spaces.
            let flat = out.split_whitespace().collect::<Vec<_>>().join(" ");
            let straggler = format!("Rank {slow} waited for data");
            assert_eq!(flat.matches(&straggler).count(), 2, "case {case}:\n{out}");
            assert!(flat.contains("in the barrier waiting for it"), "{out}");
            assert!(
                flat.contains("4 threads: 1.90× the samples/s for 2.11× the CPU-seconds"),
                "case {case}:\n{out}"
            );
        }
        let out = render_bundle(&b, Style::Compact);
        for head in ["CPU per 1k samples", "CPU cores", "peak RSS (all)"] {
            assert!(out.contains(head), "case {case}:\n{out}");
        }
        // No timeline: no GPU column, not a column of zeros.
        assert!(!out.contains("GPU util"), "{out}");
        let md = render_bundle(&b, Style::Markdown);
        assert!(
            md.contains("**Ranks of in loop**") && md.contains(&format!("Rank {slow} ")),
            "{md}"
        );
        let json: serde_json::Value =
            serde_json::from_str(&render_bundle(&b, Style::Json)).unwrap();
        let ranks = &json["experiments"][0]["ranks"];
        assert_eq!(ranks.as_array().unwrap().len(), 2);
        assert_eq!(ranks[0]["stragglers"][0]["rank"], slow);
    }
}

#[test]
fn a_bundle_without_ranks_or_costs_shows_neither() {
    let b: Bundle = stallscope_core::read_bundle_file(
        &std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("../fixtures/measured/cpu-quickstart-quick.json"),
    )
    .unwrap();
    for style in [Style::Compact, Style::Wide] {
        let out = render_bundle(&b, style);
        assert!(
            !out.contains("ranks of ") && !out.contains("CPU per 1k"),
            "{out}"
        );
    }
}
