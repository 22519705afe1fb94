//! Property-style: any bundle this build writes reads back equal — every
//! variant of the open enums (unknown values only in a bundle of a newer
//! minor, as a 1.1 build re-writing such a bundle would), parameters of every
//! type, knobs that do not apply, engines, failures, both timing modes.
//! 500 bundles from a seeded generator, so a failure is reproducible.

use stallscope_bundle::*;

/// splitmix64: small, seeded, good enough to vary the cases.
struct Gen(u64);

impl Gen {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }
    fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }
    fn chance(&mut self, percent: u64) -> bool {
        self.below(100) < percent
    }
    fn pick<'a, T>(&mut self, items: &'a [T]) -> &'a T {
        &items[self.below(items.len() as u64) as usize]
    }
    fn float(&mut self) -> f64 {
        // Finite, of varied magnitude and sign, with full-precision mantissas.
        let mantissa = (self.next() >> 11) as f64 / (1u64 << 53) as f64;
        let exp = self.below(40) as i32 - 20;
        let sign = if self.chance(20) { -1.0 } else { 1.0 };
        sign * mantissa * 10f64.powi(exp)
    }
    fn text(&mut self) -> String {
        let pieces = [
            "a", "Z", "0", "7", " ", "_", "-", "é", "—", "×", "\"", "\\", "\n", "|", "=", "日",
            "🙂",
        ];
        (0..1 + self.below(12))
            .map(|_| *self.pick(&pieces))
            .collect()
    }
    fn param(&mut self) -> ParamValue {
        match self.below(4) {
            0 => ParamValue::Bool(self.chance(50)),
            1 => ParamValue::Int(self.next() as i64 >> self.below(63)),
            2 => ParamValue::Float(self.float()),
            _ => ParamValue::Text(self.text()),
        }
    }
}

fn stat(g: &mut Gen) -> Option<StageStat> {
    g.chance(80).then(|| StageStat {
        mean_s: Some(g.float().abs()),
        median_s: g.chance(80).then(|| g.float().abs()),
        p95_s: g.chance(50).then(|| g.float().abs()),
        count: g.chance(50).then(|| g.below(1 << 40)),
        ..Default::default()
    })
}

fn run(g: &mut Gen, k: usize, open: bool) -> Run {
    let timing_mode = match g.below(if open { 3 } else { 2 }) {
        0 => TimingMode::WholeRun,
        1 => TimingMode::Diagnostic,
        _ => TimingMode::Unknown(format!("mode_{}", g.below(5))),
    };
    let whole_run = (timing_mode == TimingMode::WholeRun).then(|| WholeRun {
        seconds: Some(g.float().abs()),
        samples: Some(g.below(1 << 50)),
        samples_per_s: g.chance(90).then(|| g.float().abs()),
        steps: g.chance(50).then(|| g.below(100_000)),
        step_s: g.chance(30).then(|| g.float()),
        bytes: g.chance(30).then(|| g.next()),
    });
    let diagnostic = (timing_mode == TimingMode::Diagnostic).then(|| Diagnostic {
        seconds: Some(g.float()),
        first_next_wait_s: g.chance(50).then(|| g.float()),
        next_wait: stat(g),
        transfer: stat(g),
        compute: stat(g),
        comm: stat(g),
        step: stat(g),
        ..Default::default()
    });
    let steps = (timing_mode == TimingMode::Diagnostic && g.chance(50)).then(|| {
        let n = g.below(20) as usize;
        StepSeries {
            next_wait_ns: (0..n).map(|_| g.next()).collect(),
            transfer_ns: (0..n).map(|_| g.below(1 << 30)).collect(),
            compute_ns: (0..n).map(|_| g.below(1 << 30)).collect(),
            comm_ns: if g.chance(50) {
                (0..n).map(|_| g.below(1 << 30)).collect()
            } else {
                vec![]
            },
        }
    });
    Run {
        id: format!("run{k}"),
        timing_mode,
        repeat: g.below(5) as u32,
        epoch: g.below(5) as u32,
        phase: *g.pick(&[Phase::Cold, Phase::Steady]),
        summary_of: g.chance(10).then(|| g.below(10) as u32),
        whole_run,
        diagnostic,
        memory: g.chance(50).then(|| Memory {
            host_peak_rss_bytes: Some(g.next()),
            device_peak_allocated_bytes: g.chance(50).then(|| g.next()),
            ..Default::default()
        }),
        loader: g.chance(20).then(|| LoaderStats {
            time_to_first_batch_s: Some(g.float()),
            queues: vec![LoaderQueue {
                name: g.text(),
                gets: g.below(1000),
                get_wait_s: g.float(),
                readiness: g.float(),
            }],
            ..Default::default()
        }),
        steps,
        rank: g.chance(30).then(|| g.below(1024) as u32),
        cost: g.chance(40).then(|| cost(g)),
        timeline: g.chance(40).then(|| timeline(g)),
        job: g.chance(20).then(|| JobOf {
            ranks: 1 + g.below(1 << 14) as u32,
            slowest_rank: g.below(1 << 14) as u32,
        }),
        worker_tracks: g.chance(20).then(|| worker_tracks(g)),
    }
}

fn worker_tracks(g: &mut Gen) -> WorkerTracks {
    let n = g.below(6) as usize;
    let col = |g: &mut Gen| (0..n).map(|_| g.below(1 << 40)).collect::<Vec<_>>();
    let rows = g.below(9) as usize;
    WorkerTracks {
        kind: g.pick(&["threads", "processes"]).to_string(),
        workers: 1 + g.below(64) as u32,
        batches_left_out: g.below(3),
        samples_left_out: g.below(3),
        batches: TrackBatches {
            batch: col(g),
            worker: (0..n).map(|_| g.below(64) as u32).collect(),
            start_ns: col(g),
            build_ns: col(g),
            collate_ns: col(g),
            handover_start_ns: if g.chance(50) { col(g) } else { vec![] },
            handover_ns: if g.chance(50) { col(g) } else { vec![] },
            samples: (0..n).map(|_| g.below(512) as u32).collect(),
            first_sample: col(g),
            sample_rows: (0..n).map(|_| g.below(512) as u32).collect(),
        },
        samples: TrackSamples {
            index: (0..rows).map(|_| g.next()).collect(),
            start_ns: (0..rows).map(|_| g.next()).collect(),
            stages: (0..g.below(4))
                .map(|_| TrackStage {
                    name: g.text(),
                    ns: (0..rows).map(|_| g.next()).collect(),
                })
                .collect(),
            bad: (0..g.below(3)).map(|_| g.below(9) as u32).collect(),
        },
        steps: TrackSteps {
            batch: col(g),
            delivered_ns: col(g),
        },
    }
}

fn cost(g: &mut Gen) -> CpuCost {
    let parts = (0..g.below(4))
        .map(|_| CpuPart {
            name: g.text(),
            kind: *g.pick(&[CpuPartKind::Process, CpuPartKind::Thread]),
            user_s: g.float().abs(),
            system_s: g.float().abs(),
            peak_rss_bytes: g.chance(50).then(|| g.next()),
        })
        .collect();
    CpuCost {
        wall_s: g.float().abs(),
        cpu_s: g.float().abs(),
        cpu_s_per_1000_samples: g.chance(70).then(|| g.float().abs()),
        parts,
    }
}

fn timeline(g: &mut Gen) -> Timeline {
    let n = g.below(30) as usize;
    // f32 values survive JSON exactly only when they are f32s to begin with.
    let cores = (0..n).map(|_| (g.below(6400) as f32) / 100.0).collect();
    let gpu = g.chance(50).then(|| GpuTimeline {
        utilization_percent: (0..n).map(|_| g.below(101) as u32).collect(),
        memory_used_bytes: (0..n).map(|_| g.next()).collect(),
        sm_clock_mhz: if g.chance(50) {
            (0..n).map(|_| g.below(3000) as u32).collect()
        } else {
            vec![]
        },
        pcie_rx_bytes_per_s: (0..n).map(|_| g.next()).collect(),
        pcie_tx_bytes_per_s: vec![],
        allocated_bytes: (0..n).map(|_| g.next()).collect(),
        reserved_bytes: (0..n).map(|_| g.next()).collect(),
    });
    Timeline {
        interval_s: 0.05,
        t_ms: (0..n).map(|i| 50 * i as u32).collect(),
        steps: (0..n).map(|i| i as u64).collect(),
        host_cpu_cores: cores,
        host_rss_bytes: (0..n).map(|_| g.next()).collect(),
        gpu_not_available: gpu.is_none().then(|| g.text()),
        gpu,
        sampler_cpu_s: g.chance(50).then(|| g.float().abs()),
    }
}

fn failure(g: &mut Gen, open: bool) -> Failure {
    match g.below(if open { 7 } else { 6 }) {
        0 => Failure::OutOfMemory(OomFailure {
            cap_bytes: g.chance(50).then(|| g.next()),
            memory_fraction: g.chance(50).then(|| g.float()),
            message: g.chance(50).then(|| g.text()),
            message_quantities: if g.chance(30) { vec![g.text()] } else { vec![] },
            ..Default::default()
        }),
        1 => Failure::WorkerError {
            worker: g.chance(50).then(|| g.text()),
            sample: g.chance(50).then(|| g.next()),
            message: g.text(),
        },
        2 => Failure::Panic { message: g.text() },
        3 => Failure::Interrupted { message: g.text() },
        4 => Failure::Error { message: g.text() },
        5 => Failure::CommTimeout {
            operation: g.text(),
            timeout_s: g.chance(50).then(|| g.float().abs()),
            missing_ranks: (0..g.below(3)).map(|_| g.below(64) as u32).collect(),
            message: g.text(),
        },
        _ => Failure::Unknown {
            kind: format!("kind_{}", g.below(5)),
            message: g.chance(50).then(|| g.text()),
        },
    }
}

fn engine(g: &mut Gen, open: bool) -> Engine {
    match g.below(if open { 4 } else { 3 }) {
        0 => Engine::Native,
        1 => Engine::Pytorch,
        2 => Engine::Spdl,
        _ => Engine::Unknown(format!("engine_{}", g.below(5))),
    }
}

fn experiment(g: &mut Gen, i: usize, open: bool) -> Experiment {
    let kinds = [
        ExperimentKind::Loader,
        ExperimentKind::Transfer,
        ExperimentKind::Compute,
        ExperimentKind::BatchSweep,
        ExperimentKind::OomProbe,
        ExperimentKind::Stall,
    ];
    let kind = if open && g.chance(30) {
        ExperimentKind::Unknown(format!("kind_{}", g.below(5)))
    } else {
        g.pick(&kinds).clone()
    };
    let swept: Vec<String> = (0..g.below(3)).map(|j| format!("knob{j}")).collect();
    let mut e = Experiment::new(format!("exp{i}"), kind, g.text()).with_swept(swept.clone());
    if g.chance(50) {
        e = e.with_description(g.text());
    }
    for _ in 0..g.below(3) {
        e = e.with_setting(g.text(), g.param());
    }
    let configurations = (0..g.below(4))
        .map(|j| {
            let mut c = Configuration::new(format!("c{j}"), g.text());
            for name in &swept {
                c = if g.chance(25) {
                    c.with_not_applicable(name, g.text())
                } else {
                    c.with_param(name, g.param())
                };
            }
            if g.chance(50) {
                c = c.with_batch_bytes(g.next());
            }
            if g.chance(60) {
                c = c.with_engine(engine(g, open));
            }
            if g.chance(20) {
                c = c.with_failure(failure(g, open));
            }
            c.with_runs((0..g.below(5)).map(|k| run(g, k as usize, open)).collect())
        })
        .collect::<Vec<_>>();
    if let Some(first) = configurations.first()
        && g.chance(50)
    {
        e = e.with_baseline(first.id.clone());
    }
    e.with_configurations(configurations)
}

fn bundle(g: &mut Gen) -> Bundle {
    // A bundle this build writes is of its own minor; one it re-writes after
    // reading a newer minor keeps that minor, and may hold unknown values.
    let open = g.chance(30);
    let minor = if open {
        FORMAT_MINOR + 1 + g.below(50) as u32
    } else {
        FORMAT_MINOR
    };
    let provenance = if g.chance(70) {
        Provenance::Measured
    } else {
        Provenance::Published {
            citation: Citation {
                title: g.text(),
                url: g.chance(50).then(|| "https://example.org/x".to_string()),
                ..Default::default()
            },
            conditions: vec![Condition {
                name: g.text(),
                value: g.text(),
            }],
        }
    };
    Bundle {
        schema_version: SchemaVersion {
            major: FORMAT_MAJOR,
            minor,
        },
        id: g.text(),
        title: g.text(),
        created_at: "2026-12-01T00:00:00Z".into(),
        provenance,
        environment: Environment {
            command_line: (0..g.below(3)).map(|_| g.text()).collect(),
            host: g.chance(50).then(|| HostInfo {
                logical_cores: Some(g.below(512) as u32),
                ..Default::default()
            }),
            rank: g.chance(20).then(|| RankLayout {
                launcher: "slurm".into(),
                rank: 1,
                world_size: 2,
                job_id: Some(g.text()),
                master_addr: "node-1".into(),
                master_port: 29500,
                sync: "tcpstore_barrier".into(),
                ..Default::default()
            }),
            ..Default::default()
        },
        experiments: (0..g.below(4) as usize)
            .map(|i| experiment(g, i, open))
            .collect(),
        status: RunStatus {
            state: *g.pick(&[RunState::Complete, RunState::Partial, RunState::Running]),
            message: g.chance(30).then(|| g.text()),
        },
        ranks: (0..g.below(3) as u32)
            .map(|r| RankHost {
                rank: r,
                layout: RankLayout {
                    launcher: "torchrun".into(),
                    rank: r,
                    world_size: 3,
                    local_rank: r,
                    master_addr: g.text(),
                    master_port: g.below(65536) as u16,
                    sync: "tcpstore_barrier".into(),
                    timeout_s: g.chance(50).then(|| g.float().abs()),
                    ..Default::default()
                },
                host: g.chance(50).then(HostInfo::default),
                bundle_id: g.chance(50).then(|| g.text()),
                status: None,
            })
            .collect(),
        notes: (0..g.below(2)).map(|_| g.text()).collect::<Vec<_>>(),
    }
}

#[test]
fn every_generated_bundle_round_trips() {
    let mut g = Gen(0x5EED_0011);
    let mut unknown_seen = 0;
    for case in 0..500 {
        let b = bundle(&mut g);
        let text = b.to_json_pretty();
        // Decoding only: generated figures need not be sane, only faithful.
        let again =
            parse_bundle(text.as_bytes()).unwrap_or_else(|e| panic!("case {case}: {e}\n{text}"));
        assert_eq!(b, again, "case {case} does not round-trip:\n{text}");
        let compact = serde_json::to_vec(&b).unwrap();
        assert_eq!(parse_bundle(&compact).unwrap(), b, "case {case} (compact)");
        if text.contains("kind_") || text.contains("mode_") || text.contains("engine_") {
            unknown_seen += 1;
        }
    }
    assert!(
        unknown_seen > 20,
        "the generator should cover unknown values: {unknown_seen}"
    );
}

#[test]
fn a_bundle_of_this_builds_minor_with_an_unknown_value_is_not_written_as_readable() {
    // The guard on the other side: the reader refuses what no 1.1 writer
    // should produce, so a bug that writes an unknown value is caught.
    let mut b = read_bundle(
        &std::fs::read(concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/../fixtures/measured/cpu-quickstart-quick.json"
        ))
        .unwrap(),
    )
    .unwrap();
    b.schema_version = SchemaVersion::CURRENT;
    b.experiments[0].configurations[0].engine = Some(Engine::Unknown("mystery".into()));
    let err = parse_bundle(b.to_json_pretty().as_bytes()).unwrap_err();
    assert!(
        err.to_string()
            .contains("configurations[0].engine: unknown variant \"mystery\""),
        "{err}"
    );
}

#[test]
fn validating_generated_bundles_locates_every_problem_and_every_unlisted_rank() {
    // Generated figures need not be sane, so the validator meets every
    // shape of the 1.2 fields: it must not panic, must locate each problem,
    // and must flag each run rank the bundle's `ranks` does not list.
    let mut g = Gen(0x5EED_0019);
    let mut ranked = 0;
    for case in 0..500 {
        let b = bundle(&mut g);
        let problems = validate(&b);
        for p in &problems {
            assert!(
                p.path.starts_with('$') && !p.expected.is_empty(),
                "case {case}: {p}"
            );
        }
        let listed: Vec<u32> = b.ranks.iter().map(|r| r.rank).collect();
        for (i, e) in b.experiments.iter().enumerate() {
            for (j, c) in e.configurations.iter().enumerate() {
                for (k, r) in c.runs.iter().enumerate() {
                    let Some(rank) = r.rank.filter(|r| !listed.contains(r)) else {
                        continue;
                    };
                    ranked += 1;
                    let path = format!("$.experiments[{i}].configurations[{j}].runs[{k}].rank");
                    assert!(
                        problems
                            .iter()
                            .any(|p| p.path == path && p.message.contains(&rank.to_string())),
                        "case {case}: {path}: {problems:#?}"
                    );
                }
            }
        }
    }
    assert!(
        ranked > 50,
        "the generator should give runs unlisted ranks: {ranked}"
    );
}

/// A JSON value of a random shape, for mutations.
fn junk(g: &mut Gen) -> serde_json::Value {
    use serde_json::json;
    match g.below(8) {
        0 => serde_json::Value::Null,
        1 => json!(g.chance(50)),
        2 => json!(-(g.below(1000) as i64)),
        3 => json!(g.float()),
        4 => json!(g.text()),
        5 => json!(["x", 1]),
        6 => json!({"kind": "kind_new", "x": 1}),
        _ => json!("mode_new"),
    }
}

/// One random place in `v`: replace a value there, delete a key, or leave
/// it (`depth` counts down so the walk ends).
fn mutate(g: &mut Gen, v: &mut serde_json::Value, depth: u32) {
    use serde_json::Value;
    let here = depth == 0 || g.chance(15);
    match v {
        Value::Object(map) if !map.is_empty() => {
            let keys: Vec<String> = map.keys().cloned().collect();
            let k = g.pick(&keys).clone();
            if here && g.chance(40) {
                map.remove(&k);
            } else if here {
                map.insert(k, junk(g));
            } else {
                mutate(g, map.get_mut(&k).expect("a key of the map"), depth - 1);
            }
        }
        Value::Array(items) if !items.is_empty() => {
            let i = g.below(items.len() as u64) as usize;
            if here {
                items[i] = junk(g);
            } else {
                mutate(g, &mut items[i], depth - 1);
            }
        }
        _ => *v = junk(g),
    }
}

/// `parse_bundle` decodes straight into the types and falls back to the
/// located decode only when that fails: over generated bundles (of this
/// minor and newer ones, with unknown values) and random mutations of them
/// (wrong types, missing keys, other minors and majors, duplicate keys), the
/// two give the same bundle or the same error, every time.
#[test]
fn the_fast_decode_and_the_located_one_agree() {
    let mut g = Gen(0xFA57_0DEC);
    let (mut oks, mut errs) = (0, 0);
    for case in 0..600 {
        let b = bundle(&mut g);
        let mut v = serde_json::to_value(&b).unwrap();
        if g.chance(15) {
            v["schema_version"]["minor"] = serde_json::json!(g.below(FORMAT_MINOR as u64 + 3));
        }
        if g.chance(5) {
            v["schema_version"]["major"] = serde_json::json!(g.below(3));
        }
        for _ in 0..g.below(4) {
            mutate(&mut g, &mut v, 6);
        }
        let mut text = serde_json::to_string(&v).unwrap();
        if g.chance(5) {
            // A duplicate key, which a `Value` keeps the last of.
            text = text.replacen('{', "{\"id\":\"first\",", 1);
        }
        let fast = parse_bundle(text.as_bytes());
        let located = parse_bundle_located(text.as_bytes());
        match (&fast, &located) {
            (Ok(a), Ok(b)) => {
                assert_eq!(a, b, "case {case}: {text}");
                oks += 1;
            }
            (Err(a), Err(b)) => {
                assert_eq!(a.to_string(), b.to_string(), "case {case}: {text}");
                errs += 1;
            }
            _ => panic!("case {case}: fast {fast:?} but located {located:?}\n{text}"),
        }
    }
    assert!(oks > 100 && errs > 100, "{oks} read, {errs} refused");
}
