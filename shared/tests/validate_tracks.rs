//! Validation of worker tracks (format 1.4): a consistent set validates and
//! round-trips; each way of breaking one (a column of another length, a
//! worker past the count, a batch twice, sample rows that do not add up, a
//! step whose batch is missing, tracks on a whole-run run) is a problem
//! located at that field.

use stallscope_bundle::*;

const FIXTURE: &str = concat!(
    env!("CARGO_MANIFEST_DIR"),
    "/../fixtures/measured/cpu-quickstart-quick.json"
);

/// Two workers, four batches of two samples, every sample listed.
fn tracks() -> WorkerTracks {
    WorkerTracks {
        kind: "processes".into(),
        workers: 2,
        batches: TrackBatches {
            batch: vec![0, 1, 2, 3],
            worker: vec![0, 1, 0, 1],
            start_ns: vec![100, 120, 900, 950],
            build_ns: vec![700, 720, 650, 600],
            collate_ns: vec![50, 40, 45, 44],
            handover_start_ns: vec![850, 870, 1600, 1610],
            handover_ns: vec![30, 31, 29, 28],
            samples: vec![2; 4],
            first_sample: vec![0, 2, 4, 6],
            sample_rows: vec![2; 4],
        },
        samples: TrackSamples {
            index: (0..8).collect(),
            start_ns: vec![100, 400, 120, 420, 900, 1200, 950, 1250],
            stages: vec![TrackStage {
                name: "read".into(),
                ns: vec![300; 8],
            }],
            bad: vec![5],
        },
        steps: TrackSteps {
            batch: vec![0, 1, 2, 3],
            delivered_ns: vec![900, 910, 1700, 1710],
        },
        ..WorkerTracks::default()
    }
}

/// The fixture with `tracks` on its first diagnostic run: that run's path.
fn with_tracks(tracks: WorkerTracks) -> (Bundle, String) {
    let mut b = read_bundle(&std::fs::read(FIXTURE).unwrap()).unwrap();
    for (i, e) in b.experiments.iter_mut().enumerate() {
        for (j, c) in e.configurations.iter_mut().enumerate() {
            for (k, r) in c.runs.iter_mut().enumerate() {
                if r.timing_mode == TimingMode::Diagnostic {
                    r.worker_tracks = Some(tracks);
                    let path = format!("$.experiments[{i}].configurations[{j}].runs[{k}]");
                    return (b, format!("{path}.worker_tracks"));
                }
            }
        }
    }
    panic!("the fixture has a diagnostic run");
}

fn problems_after(break_it: impl FnOnce(&mut WorkerTracks)) -> (Vec<String>, String) {
    let mut t = tracks();
    break_it(&mut t);
    let (b, path) = with_tracks(t);
    let paths = validate(&b).into_iter().map(|p| p.path).collect();
    (paths, path)
}

#[test]
fn consistent_tracks_validate_and_round_trip() {
    let (b, _) = with_tracks(tracks());
    assert_eq!(validate(&b), vec![]);
    let again = read_bundle(b.to_json_pretty().as_bytes()).unwrap();
    assert_eq!(again, b);
}

#[test]
fn thread_tracks_need_no_handover_columns() {
    let (paths, _) = problems_after(|t| {
        t.kind = "threads".into();
        t.batches.handover_start_ns.clear();
        t.batches.handover_ns.clear();
    });
    assert_eq!(paths, Vec::<String>::new());
}

#[test]
fn each_break_is_located() {
    type Break = fn(&mut WorkerTracks);
    let cases: [(Break, &str); 10] = [
        (
            |t| t.batches.build_ns.pop().map(drop).unwrap(),
            ".batches.build_ns",
        ),
        (
            |t| t.batches.handover_ns.truncate(1),
            ".batches.handover_ns",
        ),
        (|t| t.batches.worker[2] = 2, ".batches.worker[2]"),
        (|t| t.batches.batch[3] = 1, ".batches.batch[3]"),
        (
            |t| t.batches.collate_ns[1] = 10_000,
            ".batches.collate_ns[1]",
        ),
        (
            |t| t.samples.stages[0].ns.truncate(3),
            ".samples.stages[0].ns",
        ),
        (|t| t.batches.sample_rows[0] = 3, ".batches.sample_rows[0]"),
        (|t| t.samples.bad = vec![8], ".samples.bad"),
        (|t| t.steps.batch[1] = 9, ".steps.batch[1]"),
        (|t| t.kind = "fibres".into(), ".kind"),
    ];
    for (break_it, at) in cases {
        let (paths, path) = problems_after(break_it);
        let want = format!("{path}{at}");
        assert!(paths.contains(&want), "{want} not in {paths:?}");
    }
}

#[test]
fn tracks_on_a_whole_run_run_are_refused() {
    let (mut b, _) = with_tracks(tracks());
    let run = b.experiments.iter_mut().flat_map(|e| &mut e.configurations);
    let r = run
        .flat_map(|c| &mut c.runs)
        .find(|r| r.timing_mode == TimingMode::WholeRun)
        .unwrap();
    r.worker_tracks = Some(tracks());
    let problems = validate(&b);
    assert_eq!(problems.len(), 1, "{problems:?}");
    assert!(problems[0].path.ends_with(".worker_tracks"));
    assert!(problems[0].expected.contains("only in diagnostic runs"));
}

#[test]
fn a_step_batch_may_be_missing_only_when_batches_were_left_out() {
    let (paths, _) = problems_after(|t| {
        t.batches_left_out = 1;
        t.steps.batch[1] = 9;
    });
    assert_eq!(paths, Vec::<String>::new());
}
