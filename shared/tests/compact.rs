//! Property tests of format 1.3's merged shape over generated merged
//! bundles: compacting keeps the per-rank analysis (the same stragglers,
//! verdict and counts; shares to 1e-6), the job's figures, and every rank's
//! every step in the sidecars; the result validates, survives JSON, and is
//! its own job view; a sidecar reads back as written, and a damaged or cut
//! one is refused with a reason, never a panic.

mod generated;

use generated::*;
use stallscope_bundle::analysis::*;
use stallscope_bundle::merge::{Compacted, compact, compact_on, has_ranked_runs, job_view};
use stallscope_bundle::sidecar::{
    Header, MAGIC, RunHeader, SIDECAR_MAJOR, SIDECAR_MINOR, SidecarError, StageSteps, decode,
    decode_for, encode, fnv64, hex64,
};
use stallscope_bundle::*;

fn merged(g: &mut Gen) -> (Plan, Bundle) {
    let mut plan = Plan::draw(g);
    if g.below(4) == 0 {
        plan.slowed = None;
    }
    let c = Configuration::new("w2", "2 workers")
        .with_param("workers", 2)
        .with_runs(ranked_runs(g, &plan));
    (plan.clone(), merged_bundle(plan.ranks, c))
}

fn close(a: Option<f64>, b: Option<f64>, tol: f64) -> bool {
    match (a, b) {
        (Some(x), Some(y)) => (x - y).abs() <= tol * y.abs().max(1.0),
        (None, None) => true,
        _ => false,
    }
}

#[test]
fn compacting_keeps_the_rank_analysis_and_the_job() {
    let mut g = Gen(0x5EED_0030);
    for case in 0..60 {
        let (_, b) = merged(&mut g);
        let c = &b.experiments[0].configurations[0];
        let before = rank_analysis_in(&b, c).unwrap();
        let Compacted { bundle, sidecars } = compact(b.clone());
        let cc = &bundle.experiments[0].configurations[0];
        let after = rank_analysis_in(&bundle, cc).unwrap();
        let ctx = format!("case {case}");
        assert_eq!(after.stragglers, before.stragglers, "{ctx}");
        assert_eq!(after.verdict, before.verdict, "{ctx}");
        assert_eq!(after.steps_compared, before.steps_compared, "{ctx}");
        assert_eq!(after.step_mode, before.step_mode, "{ctx}");
        for (x, y) in after.ranks.iter().zip(&before.ranks) {
            assert_eq!(
                (x.rank, x.steps, x.straggler_steps),
                (y.rank, y.steps, y.straggler_steps)
            );
            assert!(close(x.comm_share, y.comm_share, 2e-6), "{ctx}");
            assert!(close(x.step_median_s, y.step_median_s, 1e-6), "{ctx}");
        }
        assert!(!has_ranked_runs(&bundle) && cc.runs.iter().all(|r| r.job.is_some()));
        assert_eq!(bundle.schema_version, SchemaVersion::CURRENT);
        // The job view of the 1.2 bundle is the compacted bundle.
        let mut plain = bundle.clone();
        plain.experiments[0].configurations[0]
            .ranks
            .as_mut()
            .unwrap()
            .sidecars
            .clear();
        assert!(*job_view(&b) == plain, "{ctx}: the job view differs");
        let problems = validate(&bundle);
        assert!(problems.is_empty(), "{ctx}: {problems:#?}");
        let text = bundle.to_json_pretty();
        assert_eq!(parse_bundle(text.as_bytes()).unwrap(), bundle, "{ctx}");
        // One sidecar per stage, named in the columns with size and checksum.
        let cols = cc.ranks.as_ref().unwrap();
        assert_eq!(sidecars.len(), 4, "{ctx}");
        for (s, (file, bytes)) in cols.sidecars.iter().zip(&sidecars) {
            assert_eq!((&s.file, s.bytes), (file, bytes.len() as u64));
            assert_eq!(s.fnv64, hex64(fnv64(bytes)));
        }
    }
}

#[test]
fn the_sidecars_hold_every_step_of_every_rank() {
    let mut g = Gen(0x5EED_0031);
    for case in 0..40 {
        let (_, b) = merged(&mut g);
        let Compacted { sidecars, .. } = compact(b.clone());
        for (_, bytes) in &sidecars {
            let s = decode(bytes).unwrap_or_else(|e| panic!("case {case}: {e}"));
            assert_eq!(s.bundle_id, b.id);
            for run in &s.runs {
                for (i, &rank) in run.ranks.iter().enumerate() {
                    let orig = b.experiments[0].configurations[0]
                        .runs
                        .iter()
                        .find(|r| {
                            r.rank == Some(rank)
                                && r.repeat == run.repeat
                                && r.epoch == run.epoch
                                && r.steps.is_some()
                        })
                        .unwrap();
                    let st = orig.steps.as_ref().unwrap();
                    let want = match s.stage.as_str() {
                        "next_wait" => &st.next_wait_ns,
                        "transfer" => &st.transfer_ns,
                        "compute" => &st.compute_ns,
                        _ => &st.comm_ns,
                    };
                    let got: Vec<u64> = run.row_ns(i).collect();
                    assert_eq!(&got, want, "case {case} rank {rank} {}", s.stage);
                }
            }
        }
    }
}

#[test]
fn a_sidecar_reads_back_and_a_damaged_one_is_refused() {
    let mut g = Gen(0x5EED_0032);
    for case in 0..60 {
        let (_, b) = merged(&mut g);
        let id = b.id.clone();
        let Compacted { bundle, sidecars } = compact(b);
        let k = g.below(sidecars.len() as u64) as usize;
        let (_, bytes) = &sidecars[k];
        let record = &bundle.experiments[0].configurations[0]
            .ranks
            .as_ref()
            .unwrap()
            .sidecars[k];
        let s = decode_for(bytes, record, &id).unwrap();
        assert_eq!(&encode(&s), bytes, "case {case}");
        // Any one bit flipped: refused against the bundle's record; in the
        // data, refused by the file's own checksum too.
        let mut bad = bytes.clone();
        let at = g.below(bad.len() as u64) as usize;
        bad[at] ^= 1 << g.below(8);
        assert!(
            decode_for(&bad, record, &id).is_err(),
            "case {case}: byte {at}"
        );
        let data = bytes.len() - record_data_len(&s);
        if at >= data {
            assert!(
                matches!(decode(&bad), Err(SidecarError::Checksum { .. })),
                "case {case}"
            );
        }
        assert!(decode_for(bytes, record, "another").is_err());
        // Cut anywhere: refused, saying how long it should be.
        let cut = g.below(bytes.len() as u64) as usize;
        match decode(&bytes[..cut]) {
            Err(SidecarError::Short { expected, .. }) => assert!(expected > cut),
            Err(SidecarError::Checksum { .. }) | Err(SidecarError::Magic) => {}
            Err(SidecarError::Header(_)) => {}
            other => panic!("case {case}: cut at {cut}: {other:?}"),
        }
    }
}

/// Bytes after the header: per run ranks, lens and values, 4 bytes each.
fn record_data_len(s: &StageSteps) -> usize {
    s.runs
        .iter()
        .map(|r| 4 * (2 * r.ranks.len() + r.values.len()))
        .sum()
}

#[test]
fn a_large_step_keeps_its_magnitude() {
    use stallscope_bundle::sidecar::RunSteps;
    let mut g = Gen(0x5EED_0033);
    for _ in 0..200 {
        let rows: Vec<Vec<u64>> = (0..g.range(1, 6))
            .map(|_| {
                (0..g.below(30))
                    .map(|_| g.next() >> g.range(0, 64))
                    .collect()
            })
            .collect();
        let with: Vec<(u32, &[u64])> = rows
            .iter()
            .enumerate()
            .map(|(i, r)| (i as u32, &r[..]))
            .collect();
        let r = RunSteps::from_rows(0, 1, Phase::Steady, &with);
        for (i, row) in rows.iter().enumerate() {
            for (got, &want) in r.row_ns(i).zip(row) {
                let err = got.abs_diff(want);
                assert!(
                    err <= r.unit_ns / 2 + 1,
                    "{got} vs {want} (unit {})",
                    r.unit_ns
                );
            }
        }
        assert!(r.unit_ns == 1 || rows.iter().flatten().any(|&v| v > u64::from(u32::MAX)));
    }
}

const FIXTURE_12: &str = "../fixtures/bench/ranks-merged-1.2.json";

/// A merged bundle as `stallscope merge` wrote it in format 1.2 (runs with
/// ranks, steps inline): written by this test under `STALLSCOPE_BLESS`.
fn fixture_12() -> Bundle {
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join(FIXTURE_12);
    if std::env::var_os("STALLSCOPE_BLESS").is_some() {
        let mut g = Gen(0x5EED_0012);
        let plan = Plan {
            ranks: 3,
            repeats: 1,
            epochs: 2,
            steps: 12,
            slowed: Some((2, 8_000_000, Slow::Data)),
        };
        let c = Configuration::new("w2", "2 workers")
            .with_param("workers", 2)
            .with_runs(ranked_runs(&mut g, &plan));
        let mut b = merged_bundle(3, c);
        b.id = "fixture-ranks-1.2-merged".into();
        b.title = "Generated 3-rank merged bundle, format 1.2 (not a measurement)".into();
        b.schema_version = SchemaVersion { major: 1, minor: 2 };
        b.experiments[0].swept = vec!["workers".into()];
        std::fs::write(&path, b.to_json_pretty()).unwrap();
    }
    let bytes = std::fs::read(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    read_bundle(&bytes).unwrap_or_else(|e| panic!("{FIXTURE_12}: {e}"))
}

#[test]
fn a_format_1_2_merged_bundle_still_reads_and_is_read_as_its_job() {
    let b = fixture_12();
    assert_eq!(b.schema_version, SchemaVersion { major: 1, minor: 2 });
    assert!(has_ranked_runs(&b));
    assert_eq!(validate(&b), vec![]);
    let a = rank_analysis_in(&b, &b.experiments[0].configurations[0]).unwrap();
    assert_eq!(a.stragglers[0].0, 2, "{a:?}");
    let job = job_view(&b);
    let c = &job.experiments[0].configurations[0];
    let j = pooled_summary(c, Phase::Steady).unwrap();
    assert_eq!(j.world, 3);
    // The job's rate is the three ranks' samples over the slowest epoch.
    let whole = |r: &Run| r.whole_run.clone().unwrap();
    let steady: Vec<&Run> = b.experiments[0].configurations[0]
        .runs
        .iter()
        .filter(|r| r.phase == Phase::Steady && r.whole_run.is_some())
        .collect();
    let samples: u64 = steady.iter().map(|r| whole(r).samples.unwrap()).sum();
    let wall = steady
        .iter()
        .map(|r| whole(r).seconds.unwrap())
        .fold(0.0, f64::max);
    assert!((j.samples_per_s.unwrap().median - samples as f64 / wall).abs() < 1e-6);
    let Compacted { bundle, sidecars } = compact(b);
    assert_eq!(validate(&bundle), vec![]);
    assert_eq!(sidecars.len(), 4);
}

/// `stallscope merge` compacts on every core: the same bundle and the same
/// files, in the same order, as on one thread, whatever the configurations
/// (several, one without ranks among them).
#[test]
fn compacting_on_threads_gives_what_one_thread_gives() {
    let mut g = Gen(0x5EED_0031);
    for case in 0..12 {
        let (plan, mut b) = merged(&mut g);
        let more = g.below(3) as usize;
        for k in 0..more {
            let c = Configuration::new(format!("w{}", k + 4), "more workers")
                .with_param("workers", k as i64 + 4)
                .with_runs(ranked_runs(&mut g, &plan));
            b.experiments[0].configurations.push(c);
        }
        if g.below(2) == 0 {
            let mut lone = Configuration::new("one", "one process");
            lone.runs = ranked_runs(&mut g, &plan);
            lone.runs.iter_mut().for_each(|r| r.rank = None);
            b.experiments[0].configurations.insert(0, lone);
        }
        let one = compact(b.clone());
        for threads in [2, 3, 16] {
            let many = compact_on(b.clone(), threads);
            assert!(many.bundle == one.bundle, "case {case}, {threads} threads");
            assert_eq!(
                many.sidecars, one.sidecars,
                "case {case}, {threads} threads"
            );
        }
    }
}

/// The sidecar laid out the plain way: the data first, then the header with
/// the data's checksum in it, then the file.
fn plain_encode(s: &StageSteps) -> Vec<u8> {
    let mut data = Vec::new();
    for r in &s.runs {
        for v in [&r.ranks, &r.lens, &r.values] {
            v.iter()
                .for_each(|x| data.extend_from_slice(&x.to_le_bytes()));
        }
    }
    let runs = s.runs.iter().map(|r| RunHeader {
        repeat: r.repeat,
        epoch: r.epoch,
        phase: r.phase,
        ranks: r.ranks.len() as u32,
        steps: r.steps,
        unit_ns: r.unit_ns,
    });
    let header = Header {
        bundle_id: s.bundle_id.clone(),
        experiment: s.experiment.clone(),
        configuration: s.configuration.clone(),
        stage: s.stage.clone(),
        runs: runs.collect(),
        data_fnv64: hex64(fnv64(&data)),
    };
    let mut h = serde_json::to_vec(&header).unwrap();
    while !h.len().is_multiple_of(4) {
        h.push(b' ');
    }
    let mut out = MAGIC.to_vec();
    out.extend_from_slice(&SIDECAR_MAJOR.to_le_bytes());
    out.extend_from_slice(&SIDECAR_MINOR.to_le_bytes());
    out.extend_from_slice(&(h.len() as u32).to_le_bytes());
    out.extend_from_slice(&h);
    out.extend_from_slice(&data);
    out
}

/// `encode` writes the data once and puts the checksum into the header
/// after: byte for byte the plain layout, whatever the ids hold (the
/// checksum's own key among them).
#[test]
fn encode_gives_the_plain_layout_byte_for_byte() {
    let mut g = Gen(0x5EED_0033);
    let ids = [
        "merged",
        "a\"data_fnv64\":\"b",
        "\"data_fnv64\":\"0000000000000000\"}",
        "é ü",
    ];
    for case in 0..24 {
        let (_, mut b) = merged(&mut g);
        b.id = ids[case % ids.len()].to_string();
        b.experiments[0].configurations[0].id = ids[(case / 4) % ids.len()].to_string();
        for (_, bytes) in compact(b).sidecars {
            let s = decode(&bytes).unwrap();
            assert_eq!(encode(&s), plain_encode(&s), "case {case}");
            assert_eq!(encode(&s), bytes, "case {case}");
        }
    }
}
