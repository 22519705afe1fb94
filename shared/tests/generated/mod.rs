//! Generated multi-rank and cost bundles for the property tests: per-rank
//! step series synchronised as a barrier would (each rank's comm is the time
//! it waited for the slowest), whole-run epochs, CPU costs and timelines,
//! all sane, so that they validate; a seeded generator makes a failure
//! reproducible.
#![allow(dead_code)]

use stallscope_bundle::analysis::diagnostic_from_series;
use stallscope_bundle::*;

/// splitmix64.
pub struct Gen(pub u64);

impl Gen {
    pub fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }
    pub fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }
    /// Uniform in lo..hi.
    pub fn range(&mut self, lo: u64, hi: u64) -> u64 {
        lo + self.below(hi - lo)
    }
    pub fn unit(&mut self) -> f64 {
        (self.next() >> 11) as f64 / (1u64 << 53) as f64
    }
    /// Fisher–Yates.
    pub fn shuffle<T>(&mut self, v: &mut [T]) {
        for i in (1..v.len()).rev() {
            let j = self.below(i as u64 + 1) as usize;
            v.swap(i, j);
        }
    }
}

/// Which stage of the slowed rank the delay goes into.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Slow {
    Data,
    Compute,
}

/// How a configuration of a merged bundle is generated.
#[derive(Clone, Debug)]
pub struct Plan {
    pub ranks: u32,
    pub repeats: u32,
    pub epochs: u32,
    pub steps: usize,
    /// The slowed rank, the delay per step (ns) and where it goes.
    pub slowed: Option<(u32, u64, Slow)>,
}

impl Plan {
    pub fn draw(g: &mut Gen) -> Plan {
        let ranks = g.range(2, 7) as u32;
        Plan {
            ranks,
            repeats: g.range(1, 3) as u32,
            epochs: g.range(2, 4) as u32,
            steps: g.range(5, 40) as usize,
            slowed: Some((
                g.below(ranks as u64) as u32,
                g.range(2_000_000, 20_000_000),
                if g.below(2) == 0 {
                    Slow::Data
                } else {
                    Slow::Compute
                },
            )),
        }
    }
}

/// The runs of every rank: per (repeat, epoch) one diagnostic run with
/// per-step series and one whole-run run, each carrying its rank.
pub fn ranked_runs(g: &mut Gen, p: &Plan) -> Vec<Run> {
    let mut runs = Vec::new();
    for repeat in 0..p.repeats {
        for epoch in 0..p.epochs {
            let phase = if epoch == 0 {
                Phase::Cold
            } else {
                Phase::Steady
            };
            // Work per rank and step: next-wait, transfer, compute (ns).
            let work: Vec<Vec<[u64; 3]>> = (0..p.ranks)
                .map(|r| {
                    (0..p.steps)
                        .map(|_| {
                            let mut w = [
                                g.range(50_000, 400_000),
                                g.range(100_000, 300_000),
                                g.range(2_000_000, 3_000_000),
                            ];
                            if let Some((slow, delay, stage)) = p.slowed
                                && slow == r
                            {
                                w[if stage == Slow::Data { 0 } else { 2 }] += delay;
                            }
                            w
                        })
                        .collect()
                })
                .collect();
            let slowest: Vec<u64> = (0..p.steps)
                .map(|i| work.iter().map(|w| w[i].iter().sum::<u64>()).max().unwrap())
                .collect();
            let epoch_ns: u64 = slowest.iter().sum::<u64>() + 20_000 * p.steps as u64;
            for r in 0..p.ranks {
                let w = &work[r as usize];
                let s = StepSeries {
                    next_wait_ns: w.iter().map(|x| x[0]).collect(),
                    transfer_ns: w.iter().map(|x| x[1]).collect(),
                    compute_ns: w.iter().map(|x| x[2]).collect(),
                    comm_ns: (0..p.steps)
                        .map(|i| slowest[i] - w[i].iter().sum::<u64>() + g.range(5_000, 20_000))
                        .collect(),
                };
                let samples = 64 * p.steps as u64;
                let seconds = epoch_ns as f64 * 1e-9;
                let mut d = Run::new(
                    format!("r{r}-rep{repeat}-e{epoch}-diagnostic"),
                    TimingMode::Diagnostic,
                    repeat,
                    epoch,
                    phase,
                );
                d.diagnostic = Some(diagnostic_from_series(&s, seconds * 1.1, samples, 0, None));
                d.steps = Some(s);
                d.rank = Some(r);
                let mut w = Run::new(
                    format!("r{r}-rep{repeat}-e{epoch}-whole_run"),
                    TimingMode::WholeRun,
                    repeat,
                    epoch,
                    phase,
                );
                let wall = seconds * (0.9 + 0.01 * g.unit());
                w.whole_run = Some(WholeRun::measured(wall, samples, p.steps as u64, 0));
                w.rank = Some(r);
                let cores = 1.0 + g.unit();
                w.cost = Some(cost(g, wall, samples, cores));
                w.memory = Some(Memory {
                    host_peak_rss_bytes: Some(g.range(1 << 28, 1 << 30)),
                    workers_peak_rss_bytes: Some(g.range(1 << 26, 1 << 29)),
                    ..Default::default()
                });
                runs.push(d);
                runs.push(w);
            }
        }
    }
    runs
}

/// A CPU cost of `cores` busy over `wall` seconds, runner plus one worker.
pub fn cost(g: &mut Gen, wall: f64, samples: u64, cores: f64) -> CpuCost {
    let cpu = wall * cores;
    let worker = cpu * 0.3 * g.unit();
    CpuCost {
        wall_s: wall,
        cpu_s: cpu,
        cpu_s_per_1000_samples: Some(cpu / samples as f64 * 1000.0),
        parts: vec![
            CpuPart {
                name: "runner".into(),
                kind: CpuPartKind::Process,
                user_s: (cpu - worker) * 0.8,
                system_s: (cpu - worker) * 0.2,
                peak_rss_bytes: Some(1 << 28),
            },
            CpuPart {
                name: "worker 0".into(),
                kind: CpuPartKind::Process,
                user_s: worker,
                system_s: 0.0,
                peak_rss_bytes: Some(1 << 26),
            },
        ],
    }
}

/// A sampled timeline of `n` samples at 50 ms with GPU utilisation `util`%.
pub fn timeline(g: &mut Gen, n: usize, util: u32) -> Timeline {
    Timeline {
        interval_s: 0.05,
        t_ms: (0..n).map(|i| 50 * (i as u32 + 1)).collect(),
        steps: (0..n).map(|i| 3 * i as u64).collect(),
        host_cpu_cores: (0..n).map(|_| (g.below(400) as f32) / 100.0).collect(),
        host_rss_bytes: (0..n).map(|_| g.range(1 << 28, 1 << 29)).collect(),
        gpu: Some(GpuTimeline {
            utilization_percent: vec![util; n],
            memory_used_bytes: vec![1 << 30; n],
            ..Default::default()
        }),
        gpu_not_available: None,
        sampler_cpu_s: Some(0.001),
    }
}

/// The layout of rank `r` of `world` under torchrun with a TCPStore barrier.
pub fn layout(r: u32, world: u32) -> RankLayout {
    RankLayout {
        launcher: "torchrun".into(),
        rank: r,
        world_size: world,
        local_rank: r,
        local_world_size: Some(world),
        master_addr: "127.0.0.1".into(),
        master_port: 29500,
        sync: "tcpstore_barrier".into(),
        timeout_s: Some(300.0),
        ..Default::default()
    }
}

/// A complete, measured, merged bundle of one loader experiment holding
/// `config`.
pub fn merged_bundle(world: u32, config: Configuration) -> Bundle {
    let mut b = Bundle {
        schema_version: SchemaVersion::CURRENT,
        id: "merged".into(),
        title: "two ranks".into(),
        created_at: "2026-12-01T00:00:00Z".into(),
        provenance: Provenance::Measured,
        environment: Environment {
            runner: Some(RunnerInfo {
                name: "stallscope".into(),
                version: "0".into(),
                commit: None,
            }),
            host: Some(HostInfo::default()),
            device: Some(DeviceInfo::new(DeviceKind::Cpu, "cpu")),
            ..Default::default()
        },
        experiments: vec![
            Experiment::new("loader", ExperimentKind::Loader, "Loader")
                .with_configurations(vec![config]),
        ],
        status: RunStatus {
            state: RunState::Complete,
            message: None,
        },
        ranks: (0..world)
            .map(|r| RankHost {
                rank: r,
                layout: layout(r, world),
                host: None,
                bundle_id: Some(format!("rank-{r}")),
                status: None,
            })
            .collect(),
        notes: vec![],
    };
    b.environment.rank = None;
    b
}
