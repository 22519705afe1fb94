//! The native loader end to end, with real worker threads and real worker
//! processes (the `stallscope-loader-worker` binary), real JPEG files
//! and real shared memory.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::sync::Mutex;

use stallscope_loader::{
    Batch, Fault, ImageSetSpec, ImageSpec, Loader, LoaderConfig, LoaderError, OnBadSample,
    SEGMENT_PREFIX, Sampler, SourceSpec, WorkerKind, ensure_image_set,
};

/// Process-kind tests count this process's children: run them one at a time.
static PROCESSES: Mutex<()> = Mutex::new(());

fn tensor_spec(samples: usize) -> SourceSpec {
    SourceSpec::Tensor {
        samples,
        features: 8,
        classes: 4,
        seed: 3,
    }
}

fn config(workers: usize, kind: WorkerKind) -> LoaderConfig {
    LoaderConfig {
        batch_size: 16,
        workers,
        kind,
        prefetch: 2,
        worker_program: Some(PathBuf::from(env!(
            "CARGO_BIN_EXE_stallscope-loader-worker"
        ))),
        ..LoaderConfig::default()
    }
}

fn epoch(loader: &mut Loader, e: u32) -> Result<Vec<Batch>, LoaderError> {
    loader.start_epoch(e)?.collect()
}

fn temp_root(tag: &str) -> PathBuf {
    std::env::temp_dir().join(format!(
        "stallscope-loader-test-{}-{tag}",
        std::process::id()
    ))
}

/// This process's live children (pids), from /proc.
fn children() -> Vec<u32> {
    let me = std::process::id();
    let mut found = Vec::new();
    for entry in std::fs::read_dir("/proc").unwrap().flatten() {
        let Ok(pid) = entry.file_name().to_string_lossy().parse::<u32>() else {
            continue;
        };
        let Ok(stat) = std::fs::read_to_string(entry.path().join("stat")) else {
            continue;
        };
        // Fields after the command name (which may hold spaces): state, ppid.
        let rest = &stat[stat.rfind(')').unwrap() + 2..];
        let mut fields = rest.split_whitespace();
        let _state = fields.next();
        if fields.next().and_then(|p| p.parse::<u32>().ok()) == Some(me) {
            found.push(pid);
        }
    }
    found
}

/// Shared-memory segments this process created that still have a name.
fn segments() -> Vec<String> {
    let mine = format!("{SEGMENT_PREFIX}{}-", std::process::id());
    std::fs::read_dir("/dev/shm")
        .unwrap()
        .flatten()
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|n| n.starts_with(&mine))
        .collect()
}

#[test]
fn every_sample_arrives_exactly_once_per_epoch_in_every_worker_kind_and_count() {
    let _guard = PROCESSES.lock().unwrap_or_else(|e| e.into_inner());
    let cases = [
        (0, WorkerKind::Threads),
        (1, WorkerKind::Threads),
        (2, WorkerKind::Threads),
        (3, WorkerKind::Threads),
        (1, WorkerKind::Processes),
        (2, WorkerKind::Processes),
        (3, WorkerKind::Processes),
    ];
    for (workers, kind) in cases {
        for sampler in [Sampler::Sequential, Sampler::Shuffled { seed: 9 }] {
            for persistent in [false, true] {
                let mut cfg = config(workers, kind);
                cfg.sampler = sampler;
                cfg.persistent = persistent;
                let mut loader = Loader::new(cfg.clone(), tensor_spec(100)).unwrap();
                for e in 0..2 {
                    let batches = epoch(&mut loader, e).unwrap();
                    let what =
                        format!("{workers} {kind:?} {sampler:?} persistent={persistent} epoch {e}");
                    let expected = stallscope_loader::epoch_batches(sampler, 100, 16, false, e);
                    let got: Vec<Vec<u64>> = batches.iter().map(|b| b.sample_ids.clone()).collect();
                    // In order: the sampler's batches, in its order.
                    assert_eq!(got, expected, "{what}");
                    assert_eq!(
                        batches.iter().map(|b| b.index).collect::<Vec<_>>(),
                        (0..7).collect::<Vec<_>>()
                    );
                    let all: BTreeSet<u64> = got.concat().into_iter().collect();
                    assert_eq!(all.len(), 100, "{what}");
                    assert!(
                        batches
                            .iter()
                            .all(|b| b.inputs.len() == b.sample_ids.len() * 8)
                    );
                }
                let stats = loader.last_stats().unwrap();
                assert_eq!(stats.queues[0].gets, 7);
                assert_eq!(
                    stats
                        .stages
                        .iter()
                        .find(|s| s.name == "read")
                        .unwrap()
                        .tasks,
                    100
                );
                if kind == WorkerKind::Processes && workers > 0 {
                    assert!(stats.stages.iter().any(|s| s.name == "handover"));
                }
                assert!(stats.time_to_first_batch_s.unwrap() > 0.0);
            }
        }
    }
}

#[test]
fn the_same_rows_arrive_through_threads_and_processes() {
    let _guard = PROCESSES.lock().unwrap_or_else(|e| e.into_inner());
    let contents = |workers, kind| {
        let mut loader = Loader::new(config(workers, kind), tensor_spec(50)).unwrap();
        epoch(&mut loader, 0)
            .unwrap()
            .into_iter()
            .map(|b| (b.sample_ids, b.labels, b.inputs))
            .collect::<Vec<_>>()
    };
    let in_loop = contents(0, WorkerKind::Threads);
    assert_eq!(in_loop, contents(2, WorkerKind::Threads));
    assert_eq!(in_loop, contents(2, WorkerKind::Processes));
}

#[test]
fn out_of_order_delivery_still_covers_every_sample_once() {
    let mut cfg = config(3, WorkerKind::Threads);
    cfg.in_order = false;
    let spec = SourceSpec::Synthetic {
        samples: 64,
        features: 4,
        classes: 2,
        latency_us: 200,
        cpu_work_rounds: 0,
    };
    let mut loader = Loader::new(cfg, spec).unwrap();
    let ids: Vec<u64> = epoch(&mut loader, 0)
        .unwrap()
        .iter()
        .flat_map(|b| b.sample_ids.clone())
        .collect();
    let set: BTreeSet<u64> = ids.iter().copied().collect();
    assert_eq!((ids.len(), set.len()), (64, 64));
}

#[test]
fn a_panicking_thread_worker_is_named_with_its_sample_and_stats_are_kept() {
    let mut cfg = config(2, WorkerKind::Threads);
    cfg.fault = Some(Fault::PanicAt { sample: 37 });
    let mut loader = Loader::new(cfg, tensor_spec(100)).unwrap();
    let mut delivered = 0;
    let mut error = None;
    for item in loader.start_epoch(0).unwrap() {
        match item {
            Ok(_) => delivered += 1,
            Err(e) => error = Some(e),
        }
    }
    let err = error.expect("the epoch fails");
    // Batch 2 (samples 32..48) belongs to worker 0 of 2.
    match &err {
        LoaderError::Worker {
            worker,
            sample,
            message,
        } => {
            assert_eq!(worker, "thread worker 0");
            assert_eq!(*sample, Some(37));
            assert!(message.contains("panic"), "{message}");
        }
        other => panic!("unexpected {other:?}"),
    }
    assert!(err.to_string().contains("sample 37"));
    assert_eq!(delivered, 2);
    let stats = loader.last_stats().expect("what was measured is kept");
    assert!(
        stats
            .stages
            .iter()
            .any(|s| s.name == "read" && s.tasks >= 32)
    );
    let failure = err.to_failure();
    assert!(matches!(
        failure,
        stallscope_bundle::Failure::WorkerError {
            sample: Some(37),
            ..
        }
    ));
}

#[test]
fn a_dying_worker_process_is_named_with_its_sample_and_leaves_nothing_behind() {
    let _guard = PROCESSES.lock().unwrap_or_else(|e| e.into_inner());
    for fault in [Fault::AbortAt { sample: 53 }, Fault::PanicAt { sample: 53 }] {
        let mut cfg = config(2, WorkerKind::Processes);
        cfg.fault = Some(fault);
        cfg.persistent = true;
        let mut loader = Loader::new(cfg, tensor_spec(100)).unwrap();
        let mut it = loader.start_epoch(0).unwrap();
        assert_eq!(children().len(), 2, "two workers run");
        assert!(
            segments().is_empty(),
            "names are unlinked once workers are ready"
        );
        let mut delivered = 0;
        let err = loop {
            match it.next().expect("fails before the end") {
                Ok(_) => delivered += 1,
                Err(e) => break e,
            }
        };
        assert!(it.next().is_none());
        drop(it);
        // Sample 53 is in batch 3 (48..64), worker 1 of 2.
        let LoaderError::Worker {
            worker,
            sample,
            message,
        } = &err
        else {
            panic!("unexpected {err:?}")
        };
        assert!(worker.starts_with("process worker 1 (pid "), "{worker}");
        assert_eq!(*sample, Some(53), "{fault:?}: {message}");
        match fault {
            Fault::AbortAt { .. } => assert!(message.contains("SIGABRT"), "{message}"),
            _ => assert!(message.contains("panic"), "{message}"),
        }
        assert_eq!(delivered, 3);
        assert!(loader.last_stats().is_some());
        // After a failure: no child process and no segment is left.
        assert!(children().is_empty(), "orphans: {:?}", children());
        assert!(segments().is_empty());
    }
}

#[test]
fn worker_processes_end_with_the_loader_after_a_normal_end() {
    let _guard = PROCESSES.lock().unwrap_or_else(|e| e.into_inner());
    let mut cfg = config(3, WorkerKind::Processes);
    cfg.persistent = true;
    let mut loader = Loader::new(cfg, tensor_spec(100)).unwrap();
    epoch(&mut loader, 0).unwrap();
    assert_eq!(
        children().len(),
        3,
        "persistent workers stay between epochs"
    );
    epoch(&mut loader, 1).unwrap();
    drop(loader);
    assert!(children().is_empty(), "orphans: {:?}", children());
    assert!(segments().is_empty());

    // Not persistent: the workers go at the end of each epoch.
    let mut loader = Loader::new(config(2, WorkerKind::Processes), tensor_spec(100)).unwrap();
    epoch(&mut loader, 0).unwrap();
    assert!(children().is_empty());
    assert!(segments().is_empty());
}

fn image_set(tag: &str) -> PathBuf {
    let spec = ImageSetSpec {
        count: 12,
        width: 48,
        height: 40,
        classes: 3,
        seed: 1,
        quality: 90,
    };
    ensure_image_set(&temp_root(tag), &spec).unwrap()
}

fn image_spec(dir: &Path) -> SourceSpec {
    SourceSpec::Images(ImageSpec::new(dir.to_path_buf(), 32, 24))
}

#[test]
fn a_corrupt_image_is_skipped_and_reported_or_fails_the_epoch() {
    let _guard = PROCESSES.lock().unwrap_or_else(|e| e.into_inner());
    let dir = image_set("corrupt");
    let bad = dir.join("class_001").join("zz_corrupt.jpg");
    std::fs::write(&bad, b"\xFF\xD8\xFF this is not a JPEG").unwrap();
    for kind in [WorkerKind::Threads, WorkerKind::Processes] {
        let mut cfg = config(2, kind);
        cfg.batch_size = 4;
        let mut loader = Loader::new(cfg.clone(), image_spec(&dir)).unwrap();
        assert_eq!(loader.samples(), 13);
        let batches = epoch(&mut loader, 0).unwrap();
        let n: usize = batches.iter().map(|b| b.sample_ids.len()).sum();
        assert_eq!(
            n,
            12,
            "{kind:?}: the bad image is left out: {:?}",
            loader.last_stats().unwrap().bad_samples
        );
        assert!(batches.iter().all(|b| b.input_shape()[1..] == [3, 24, 24]));
        let stats = loader.last_stats().unwrap();
        assert_eq!(stats.bad_samples.len(), 1);
        assert_eq!(
            stats.bad_samples[0].path.as_deref(),
            Some(bad.to_str().unwrap())
        );
        let decode = stats.stages.iter().find(|s| s.name == "decode").unwrap();
        assert_eq!((decode.tasks, decode.failures), (12, 1));

        cfg.on_bad_sample = OnBadSample::Fail;
        let mut loader = Loader::new(cfg, image_spec(&dir)).unwrap();
        let err = epoch(&mut loader, 0).unwrap_err();
        let text = err.to_string();
        assert!(
            text.contains("zz_corrupt.jpg") && text.contains("cannot decode"),
            "{text}"
        );
        assert!(matches!(
            err,
            LoaderError::Worker {
                sample: Some(_),
                ..
            }
        ));
    }
    std::fs::remove_dir_all(temp_root("corrupt")).unwrap();
}

#[test]
fn worker_seeds_differ_across_workers_and_repeat_across_runs() {
    let _guard = PROCESSES.lock().unwrap_or_else(|e| e.into_inner());
    // Two copies of one image: any difference between them is augmentation.
    let set = image_set("seeds");
    let dir = temp_root("seeds").join("twins");
    std::fs::create_dir_all(&dir).unwrap();
    let one = set.join("class_000").join("img_000000.jpg");
    for i in 0..8 {
        std::fs::copy(&one, dir.join(format!("copy_{i}.jpg"))).unwrap();
    }
    for kind in [WorkerKind::Threads, WorkerKind::Processes] {
        let mut cfg = config(2, kind);
        cfg.batch_size = 1;
        cfg.seed = 11;
        let run = |cfg: &LoaderConfig| {
            let mut loader = Loader::new(cfg.clone(), image_spec(&dir)).unwrap();
            epoch(&mut loader, 0).unwrap()
        };
        let a = run(&cfg);
        let b = run(&cfg);
        let inputs = |v: &[Batch]| v.iter().map(|b| b.inputs.clone()).collect::<Vec<_>>();
        assert_eq!(
            inputs(&a),
            inputs(&b),
            "{kind:?}: same seed, same augmentations"
        );
        // Batch 0 is worker 0's first draw, batch 1 worker 1's first draw.
        assert_eq!((a[0].worker, a[1].worker), (Some(0), Some(1)));
        assert_ne!(
            a[0].inputs, a[1].inputs,
            "{kind:?}: workers draw differently"
        );
        cfg.seed = 12;
        assert_ne!(
            inputs(&run(&cfg)),
            inputs(&a),
            "{kind:?}: another seed, other draws"
        );
    }
    std::fs::remove_dir_all(temp_root("seeds")).unwrap();
}
