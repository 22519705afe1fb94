//! Worker tracks from real worker threads and processes: recorded only when
//! asked, every batch on the worker it was given to with its samples and
//! their stages, on the epoch's clock, and each delivery in step order.

use std::collections::BTreeSet;
use std::path::PathBuf;

use stallscope_bundle::WorkerTracks;
use stallscope_loader::{
    ImageSetSpec, ImageSpec, Loader, LoaderConfig, SourceSpec, WorkerKind, ensure_image_set,
};

fn config(kind: WorkerKind) -> LoaderConfig {
    LoaderConfig {
        batch_size: 4,
        workers: 2,
        kind,
        prefetch: 2,
        worker_program: Some(PathBuf::from(env!(
            "CARGO_BIN_EXE_stallscope-loader-worker"
        ))),
        ..LoaderConfig::default()
    }
}

/// A small JPEG set in a fresh folder (removed when the guard drops).
fn images() -> (SourceSpec, tempfile::TempDir) {
    let root = tempfile::tempdir().unwrap();
    let spec = ImageSetSpec {
        count: 14,
        width: 40,
        height: 32,
        classes: 2,
        seed: 5,
        quality: 90,
    };
    let dir = ensure_image_set(root.path(), &spec).unwrap();
    (SourceSpec::Images(ImageSpec::new(dir, 24, 16)), root)
}

/// Run one epoch; the tracks and the batches in delivery order (index, ids).
fn traced_epoch(loader: &mut Loader, e: u32) -> (Option<WorkerTracks>, Vec<(u64, Vec<u64>)>) {
    let got = loader
        .start_epoch(e)
        .unwrap()
        .map(|b| b.map(|b| (b.index, b.sample_ids)))
        .collect::<Result<Vec<_>, _>>()
        .unwrap();
    (loader.take_worker_tracks(), got)
}

fn check(t: &WorkerTracks, got: &[(u64, Vec<u64>)], kind: WorkerKind) {
    assert_eq!((t.kind.as_str(), t.workers), (kind.as_str(), 2));
    assert_eq!((t.batches_left_out, t.samples_left_out), (0, 0));
    let b = &t.batches;
    let listed: BTreeSet<u64> = b.batch.iter().copied().collect();
    assert_eq!(listed.len(), got.len(), "every batch once");
    assert_eq!(listed, got.iter().map(|g| g.0).collect());
    // Round-robin: batch k goes to worker k mod 2.
    for (batch, worker) in b.batch.iter().zip(&b.worker) {
        assert_eq!(*batch % 2, *worker as u64);
    }
    assert_eq!(
        b.handover_ns.len(),
        if kind == WorkerKind::Processes {
            got.len()
        } else {
            0
        }
    );
    // Each batch's sample rows are its samples, in its order.
    let mut row = 0;
    for (k, &batch) in b.batch.iter().enumerate() {
        let n = b.sample_rows[k] as usize;
        let ids = &got.iter().find(|g| g.0 == batch).unwrap().1;
        assert_eq!(&t.samples.index[row..row + n], &ids[..], "batch {batch}");
        assert_eq!(b.first_sample[k], ids[0]);
        assert!(t.samples.start_ns[row] >= b.start_ns[k]);
        row += n;
    }
    assert_eq!(row, t.samples.index.len());
    let names: Vec<&str> = t.samples.stages.iter().map(|s| s.name.as_str()).collect();
    assert_eq!(names, ["read", "decode", "transform"]);
    // Steps: the batches in sampler order, each delivered after it was built.
    let order: Vec<u64> = got.iter().map(|g| g.0).collect();
    assert_eq!(t.steps.batch, order);
    for (step, &batch) in t.steps.batch.iter().enumerate() {
        let k = b.batch.iter().position(|&x| x == batch).unwrap();
        assert!(b.start_ns[k] + b.build_ns[k] <= t.steps.delivered_ns[step]);
        assert!(b.collate_ns[k] <= b.build_ns[k]);
    }
}

#[test]
fn threads_and_processes_record_tracks_only_when_asked() {
    let (spec, _dir) = images();
    for kind in [WorkerKind::Threads, WorkerKind::Processes] {
        let mut loader = Loader::new(config(kind), spec.clone()).unwrap();
        let (none, _) = traced_epoch(&mut loader, 0);
        assert_eq!(none, None, "{kind:?}: nothing recorded unless asked");
        loader.set_tracing(true);
        let (tracks, got) = traced_epoch(&mut loader, 1);
        assert_eq!(got.len(), 4);
        check(&tracks.expect("tracks when asked"), &got, kind);
        loader.set_tracing(false);
        assert_eq!(traced_epoch(&mut loader, 2).0, None, "{kind:?}: off again");
    }
}

#[test]
fn no_workers_no_tracks() {
    let mut cfg = config(WorkerKind::Threads);
    cfg.workers = 0;
    let (spec, _dir) = images();
    let mut loader = Loader::new(cfg, spec).unwrap();
    loader.set_tracing(true);
    assert_eq!(traced_epoch(&mut loader, 0).0, None);
}
