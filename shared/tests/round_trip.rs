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
        step: stat(g),
        ..Default::default()
    });
    let steps = (timing_mode == TimingMode::Diagnostic && g.chance(50)).then(|| {
        let n = g.below(20) as usize;
        StepSeries {
            next_wait_ns: (0..n).map(|_| g.next()).collect(),
            transfer_ns: (0..n).map(|_| g.below(1 << 30)).collect(),
            compute_ns: (0..n).map(|_| g.below(1 << 30)).collect(),
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
    }
}

fn failure(g: &mut Gen, open: bool) -> Failure {
    match g.below(if open { 6 } else { 5 }) {
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
            ..Default::default()
        },
        experiments: (0..g.below(4) as usize)
            .map(|i| experiment(g, i, open))
            .collect(),
        status: RunStatus {
            state: *g.pick(&[RunState::Complete, RunState::Partial, RunState::Running]),
            message: g.chance(30).then(|| g.text()),
        },
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
