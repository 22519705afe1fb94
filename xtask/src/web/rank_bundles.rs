//! Generated (not measured) multi-rank bundles for `cargo xtask bench ranks`
//! and the per-rank browser check: one bundle per rank as a torchrun rank
//! of `stallscope run` writes it (`Environment.rank` set), and the merged
//! bundle the shared crate's `merge` (the one `stallscope merge` calls) makes
//! of them (`Bundle.ranks`, `Run.rank`).
//! Titles, descriptions and hosts say they are generated.
//!
//! Each rank runs a loader experiment over `workers` 1, 2, 4: per
//! configuration one whole-run epoch (with a sampled timeline and its CPU
//! cost, no GPU) and one diagnostic epoch with per-step next-wait,
//! transfer, compute and comm. Every rank waits at the per-step barrier for
//! the slowest, so a rank's comm is the slowest rank's work that step minus
//! its own; the slowed rank computes 1.6× as long and so barely waits.
use stallscope_bundle::analysis::diagnostic_from_series;
use stallscope_bundle::*;

/// What to generate.
#[derive(Debug, Clone, Copy)]
pub(crate) struct RankSpec {
    pub world: u32,
    /// Steps per epoch (per-step series of the diagnostic runs).
    pub steps: usize,
    /// The rank whose compute is 1.6× the others'.
    pub slow_rank: u32,
}

const WORKERS: [i64; 3] = [1, 2, 4];
const BATCH: u64 = 32;
const BARRIER_NS: u64 = 40_000;
const SAMPLE_MS: u32 = 50;
pub(crate) const EXPERIMENT: &str = "loader";
pub(crate) const NO_GPU: &str = "generated: no GPU was sampled (this bundle is not a measurement)";

/// A deterministic hash → 0..1 (SplitMix64 of the coordinates).
fn unit(a: u64, b: u64, c: u64, d: u64) -> f64 {
    let mut z = a
        .wrapping_mul(0x9E37_79B9_7F4A_7C15)
        .wrapping_add(b.wrapping_mul(0xBF58_476D_1CE4_E5B9))
        .wrapping_add(c.wrapping_mul(0x94D0_49BB_1331_11EB))
        .wrapping_add(d);
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^= z >> 31;
    (z >> 11) as f64 / (1u64 << 53) as f64
}

/// (next_wait, transfer, compute) of one rank's step, ns.
fn work(spec: &RankSpec, rank: u32, config: usize, step: usize) -> [u64; 3] {
    let (r, k, i) = (rank as u64, config as u64, step as u64);
    let wait = 2_400_000.0 / WORKERS[config] as f64 * (0.5 + unit(r, k, i, 1));
    let transfer = 150_000.0 * (0.8 + 0.4 * unit(r, k, i, 2));
    let slow = if rank == spec.slow_rank { 1.6 } else { 1.0 };
    let compute = 4_000_000.0 * slow * (0.9 + 0.2 * unit(r, k, i, 3));
    [wait as u64, transfer as u64, compute as u64]
}

/// The slowest rank's work per step of one configuration (what every rank waits for).
fn slowest(spec: &RankSpec, config: usize) -> Vec<u64> {
    (0..spec.steps)
        .map(|i| {
            (0..spec.world)
                .map(|r| work(spec, r, config, i).iter().sum::<u64>())
                .max()
                .unwrap_or(0)
        })
        .collect()
}

fn series(spec: &RankSpec, rank: u32, config: usize, slowest: &[u64]) -> StepSeries {
    let mut s = StepSeries::default();
    for (i, top) in slowest.iter().enumerate() {
        let [w, t, c] = work(spec, rank, config, i);
        s.next_wait_ns.push(w);
        s.transfer_ns.push(t);
        s.compute_ns.push(c);
        s.comm_ns.push(top - (w + t + c) + BARRIER_NS);
    }
    s
}

fn run(id: &str, mode: TimingMode) -> Run {
    Run::new(id, mode, 0, 1, Phase::Steady)
}

/// The whole-run epoch: the barrier-synchronised steps without the
/// diagnostic's own synchronisation (10% shorter), a timeline, its cost.
fn whole_run(spec: &RankSpec, rank: u32, config: usize, slowest: &[u64]) -> Run {
    let step_ns: Vec<u64> = slowest.iter().map(|t| (t + BARRIER_NS) * 9 / 10).collect();
    let seconds = step_ns.iter().sum::<u64>() as f64 * 1e-9;
    let samples = spec.steps as u64 * BATCH;
    let workers = WORKERS[config] as f64;
    let mut t = Timeline {
        interval_s: SAMPLE_MS as f64 / 1e3,
        gpu_not_available: Some(NO_GPU.into()),
        sampler_cpu_s: Some(seconds * 0.004),
        ..Default::default()
    };
    let (mut done, mut elapsed) = (0u64, 0u64);
    let end_ms = (seconds * 1e3) as u32;
    for (k, ms) in (0..=end_ms).step_by(SAMPLE_MS as usize).enumerate() {
        while (done as usize) < step_ns.len()
            && elapsed + step_ns[done as usize] <= ms as u64 * 1_000_000
        {
            elapsed += step_ns[done as usize];
            done += 1;
        }
        let u = unit(rank as u64, config as u64, k as u64, 7);
        t.t_ms.push(ms);
        t.steps.push(done);
        t.host_cpu_cores
            .push((1.0 + 0.7 * workers * (0.85 + 0.3 * u)) as f32);
        t.host_rss_bytes
            .push(((600.0 + 140.0 * workers + 20.0 * u) * 1e6) as u64 + k as u64 * 100_000);
    }
    let cores = 1.0 + 0.7 * workers;
    let cpu_s = seconds * cores;
    let mut parts = vec![CpuPart {
        name: "runner".into(),
        kind: CpuPartKind::Process,
        user_s: seconds * 0.9,
        system_s: seconds * 0.1,
        peak_rss_bytes: Some(620_000_000),
    }];
    for w in 0..WORKERS[config] {
        parts.push(CpuPart {
            name: format!("worker {w}"),
            kind: CpuPartKind::Process,
            user_s: seconds * 0.63,
            system_s: seconds * 0.07,
            peak_rss_bytes: Some(140_000_000),
        });
    }
    let mut r = run("r0-e1-whole_run", TimingMode::WholeRun);
    r.whole_run = Some(WholeRun::measured(
        seconds,
        samples,
        spec.steps as u64,
        samples * 3_136,
    ));
    r.memory = Some(Memory {
        host_peak_rss_bytes: Some(620_000_000),
        workers_peak_rss_bytes: Some(140_000_000 * WORKERS[config] as u64),
        ..Default::default()
    });
    r.cost = Some(CpuCost {
        wall_s: seconds,
        cpu_s,
        cpu_s_per_1000_samples: Some(cpu_s / samples as f64 * 1e3),
        parts,
    });
    r.timeline = Some(t);
    r
}

fn runs(spec: &RankSpec, rank: u32, config: usize, slowest: &[u64]) -> Vec<Run> {
    let s = series(spec, rank, config, slowest);
    let seconds = (0..spec.steps)
        .map(|i| s.next_wait_ns[i] + s.transfer_ns[i] + s.compute_ns[i] + s.comm_ns[i])
        .sum::<u64>() as f64
        * 1e-9;
    let samples = spec.steps as u64 * BATCH;
    let mut d = run("r0-e1-diagnostic", TimingMode::Diagnostic);
    d.diagnostic = Some(diagnostic_from_series(
        &s,
        seconds,
        samples,
        samples * 3_136,
        Some(0.002),
    ));
    d.steps = Some(s);
    vec![whole_run(spec, rank, config, slowest), d]
}

fn layout(spec: &RankSpec, rank: u32) -> RankLayout {
    RankLayout {
        launcher: "torchrun".into(),
        rank,
        world_size: spec.world,
        local_rank: rank % 8,
        local_world_size: Some(8.min(spec.world)),
        node: Some(rank / 8),
        job_id: Some("generated".into()),
        master_addr: "10.0.0.1".into(),
        master_port: 29_500,
        hostname: Some(format!("gen-node-{:03}", rank / 8)),
        sync: "tcpstore_barrier".into(),
        timeout_s: Some(300.0),
    }
}

fn host() -> HostInfo {
    HostInfo {
        cpu_model: Some("generated: no CPU was measured".into()),
        logical_cores: Some(64),
        memory_bytes: Some(512 << 30),
        os: Some("generated".into()),
        kernel: None,
    }
}

fn experiment(spec: &RankSpec, rank: u32, slowest: &[Vec<u64>]) -> Experiment {
    let configs = (0..WORKERS.len())
        .map(|k| {
            let w = WORKERS[k];
            let runs = runs(spec, rank, k, &slowest[k]);
            Configuration::new(
                format!("w{w}"),
                format!("{w} worker{}", if w == 1 { "" } else { "s" }),
            )
            .with_param("workers", w)
            .with_runs(runs)
        })
        .collect();
    Experiment::new(
        EXPERIMENT,
        ExperimentKind::Loader,
        "Generated multi-rank loader run",
    )
    .with_description(format!(
        "Generated per-step times of {} ranks (rank {} computes 1.6× as long); not a measurement.",
        spec.world, spec.slow_rank
    ))
    .with_swept(["workers"])
    .with_configurations(configs)
}

fn bundle(
    id: String,
    title: String,
    environment: Environment,
    experiments: Vec<Experiment>,
) -> Bundle {
    Bundle {
        schema_version: SchemaVersion::CURRENT,
        id,
        title,
        created_at: "2026-12-01T00:00:00Z".into(),
        provenance: Provenance::Measured,
        environment,
        experiments,
        status: RunStatus {
            state: RunState::Complete,
            message: None,
        },
        ranks: Vec::new(),
        notes: vec![
            "Generated by xtask for the multi-rank viewer checks; not a measurement.".into(),
        ],
    }
}

fn environment(rank: Option<RankLayout>) -> Environment {
    Environment {
        rank,
        ..super::bench_viewer::generated_environment("cargo xtask (generated ranks)", host())
    }
}

/// Every rank's own bundle, as each rank's `stallscope run` writes it (one
/// run id for every rank, as a ranked run shares it).
pub(crate) fn per_rank_bundles(spec: &RankSpec, id: &str) -> impl Iterator<Item = Bundle> {
    let spec = *spec;
    let slowest: Vec<Vec<u64>> = (0..WORKERS.len())
        .map(|k| self::slowest(&spec, k))
        .collect();
    let id = id.to_string();
    (0..spec.world).map(move |r| {
        bundle(
            id.clone(),
            "Generated multi-rank loader run".into(),
            environment(Some(layout(&spec, r))),
            vec![experiment(&spec, r, &slowest)],
        )
    })
}

/// The id `merge` gives the merged bundle of [`per_rank_bundles`]`(_, id)`.
pub(crate) fn merged_id(id: &str) -> String {
    format!("{id}-merged")
}

/// The merged bundle of every rank, by the shared crate's `merge` (what
/// `stallscope merge` writes).
pub(crate) fn merged_bundle(spec: &RankSpec, id: &str) -> anyhow::Result<Bundle> {
    let merged = stallscope_bundle::merge::merge(per_rank_bundles(spec, id).collect())?;
    anyhow::ensure!(
        merged.id == merged_id(id),
        "merge named the bundle {:?}, expected {:?}",
        merged.id,
        merged_id(id)
    );
    Ok(merged)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every generated bundle validates, each rank waits at most as long as
    /// the slowest rank's work, and the slowed rank waits least.
    #[test]
    fn generated_ranks_are_valid_and_the_slow_rank_waits_least() {
        for (world, slow) in [(2, 1), (5, 0), (9, 7)] {
            let spec = RankSpec {
                world,
                steps: 40,
                slow_rank: slow,
            };
            let merged = merged_bundle(&spec, "t").unwrap();
            assert_eq!(validate(&merged), vec![], "merged {world}");
            for b in per_rank_bundles(&spec, "t") {
                assert_eq!(validate(&b), vec![], "{:?}", b.environment.rank);
            }
            let c = &merged.experiments[0].configurations[0];
            let comm = |r: u32| -> u64 {
                c.runs
                    .iter()
                    .filter(|x| x.rank == Some(r))
                    .filter_map(|x| x.steps.as_ref())
                    .map(|s| s.comm_ns.iter().sum::<u64>())
                    .sum()
            };
            let least = (0..world).min_by_key(|r| comm(*r)).unwrap();
            assert_eq!(least, slow, "world {world}");
            let a = stallscope_bundle::analysis::rank_analysis_in(&merged, c).unwrap();
            assert_eq!(
                a.stragglers.first().map(|s| s.0),
                Some(slow),
                "world {world}"
            );
        }
    }
}
