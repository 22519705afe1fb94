//! The forecasts over windows whose answers are worked out by hand.

use super::*;
use crate::format::WorkerWindow;

const KIB: u64 = 1024;
const MIB: u64 = 1024 * KIB;
const GIB: u64 = 1024 * MIB;

fn limits(shm_free: u64, memory: u64, source: &str) -> HostLimits {
    HostLimits {
        usable_cpus: 2,
        affinity_cpus: Some(2),
        shm_total_bytes: Some(shm_free),
        shm_free_bytes: Some(shm_free),
        memory_limit_bytes: Some(memory),
        memory_limit_source: Some(source.into()),
        ..HostLimits::default()
    }
}

/// Two forked workers that each read 320 samples in the window (160
/// before it) and grew 610 KiB per sample, of a 10,000-sample dataset.
fn copy_on_read_window() -> ForecastInputs {
    let open = 100 * MIB;
    let close = open + 320 * 610 * KIB;
    ForecastInputs {
        workers: 2,
        prefetch_factor: Some(2),
        batch_bytes: Some(MIB),
        start_method: Some("fork".into()),
        shuffle: Some(true),
        dataset_len: Some(10_000),
        samples_before_window: 320,
        samples_in_window: 640,
        main_rss_bytes: Some(500 * MIB),
        workers_uss: (0..2)
            .map(|w| WorkerWindow {
                worker_id: w,
                uss_at_open_bytes: open,
                uss_bytes: close,
            })
            .collect(),
        ..ForecastInputs::default()
    }
}

#[test]
fn shared_memory_in_flight_against_a_small_dev_shm() {
    let inputs = ForecastInputs {
        workers: 2,
        prefetch_factor: None,
        batch_bytes: Some(25 * MIB),
        samples_in_window: 64,
        ..ForecastInputs::default()
    };
    let f = forecast(
        &inputs,
        Some(&limits(32 * MIB, 8 * GIB, "/sys/fs/cgroup/memory.max")),
    );
    let shm = f.shm_in_flight.as_ref().unwrap();
    // 2 workers × the default prefetch_factor 2 × 25 MiB + the step's batch.
    assert_eq!(shm.bytes, 125 * MIB);
    assert_eq!(shm.limit_bytes, Some(32 * MIB));
    assert_eq!(f.fits, Some(false));
    assert_eq!(
        f.verdict,
        "would not fit: 125.0 MiB of shared memory in flight (2 workers × prefetch_factor 2 × \
         25.0 MiB batches, plus the batch the step holds), against 32.0 MiB free of 32.0 MiB in \
         /dev/shm"
    );
    let Some(Failure::WouldNotFit {
        resource,
        needed_bytes,
        available_bytes,
        message,
    }) = would_not_fit(&f)
    else {
        panic!("a misfit");
    };
    assert_eq!(resource, Resource::SharedMemory);
    assert_eq!((needed_bytes, available_bytes), (125 * MIB, 32 * MIB));
    assert!(message.contains("/dev/shm"), "{message}");

    // Pinned: the step's batch is a pinned copy, not in /dev/shm.
    let pinned = ForecastInputs {
        pin_memory: true,
        ..inputs.clone()
    };
    let f = forecast(&pinned, None);
    assert_eq!(f.shm_in_flight.as_ref().unwrap().bytes, 100 * MIB);
    assert_eq!(f.pinned.as_ref().unwrap().bytes, 125 * MIB);
    assert_eq!(f.fits, None, "no limits known");
    // No workers: the main process loads, nothing is handed over.
    let none = ForecastInputs {
        workers: 0,
        ..inputs
    };
    assert_eq!(forecast(&none, None).shm_in_flight, None);
}

#[test]
fn copy_on_read_is_extrapolated_to_the_epoch_and_across_epochs() {
    let inputs = copy_on_read_window();
    let f = forecast(
        &inputs,
        Some(&limits(GIB, 8 * GIB, "/sys/fs/cgroup/memory.max")),
    );
    let g = f.worker_growth_per_sample_bytes.unwrap();
    assert!((g - 610.0 * 1024.0).abs() < 1e-6, "{g}");
    assert!(f.copy_on_read.as_ref().unwrap().advice.contains("NumPy"));
    // Each worker reads 5,000 samples an epoch; it had read 160 when the
    // window opened at 100 MiB (the warm-up's growth is in that figure).
    let end = 100 * MIB + (5_000 - 160) * 610 * KIB;
    let w = f.worker_epoch_end.as_ref().unwrap();
    assert_eq!(w.bytes, end);
    assert_eq!(
        w.basis,
        "workers reach ~2.91 GiB each by the epoch's end: +610.0 KiB per sample read, \
         copy-on-read (an upper bound: shuffled reads touch pages already copied as the epoch \
         goes on)"
    );
    // Persistent workers under a shuffling sampler come to read all 10,000.
    let across = ForecastInputs {
        persistent_workers: true,
        ..inputs.clone()
    };
    let fa = forecast(
        &across,
        Some(&limits(GIB, 8 * GIB, "/sys/fs/cgroup/memory.max")),
    );
    let across_bytes = 100 * MIB + (10_000 - 160) * 610 * KIB;
    assert_eq!(
        fa.worker_across_epochs.as_ref().unwrap().bytes,
        across_bytes
    );
    let total = fa.memory_across_epochs.as_ref().unwrap();
    let shm = 5 * MIB;
    assert_eq!(total.bytes, 500 * MIB + 2 * across_bytes + shm);
    assert_eq!(fa.fits, Some(false), "{}", fa.verdict);
    assert!(
        fa.verdict.contains("across epochs") && fa.verdict.contains("the 8.00 GiB memory limit"),
        "{}",
        fa.verdict
    );
    // Restarted workers are forked afresh each epoch: no across-epochs figure.
    assert_eq!(f.worker_across_epochs, None);
    assert_eq!(f.fits, Some(true), "{}", f.verdict);
    assert_eq!(
        f.memory_epoch_end.as_ref().unwrap().bytes,
        500 * MIB + 2 * end + shm
    );
}

#[test]
fn growth_inside_the_noise_or_under_spawn_is_not_copy_on_read() {
    let mut small = copy_on_read_window();
    for w in &mut small.workers_uss {
        w.uss_bytes = w.uss_at_open_bytes + 3 * MIB;
    }
    let f = forecast(&small, None);
    assert!(f.worker_growth_per_sample_bytes.unwrap() > 0.0);
    assert_eq!(f.copy_on_read, None, "3 MiB over a window is noise");
    assert!(!f.worker_epoch_end.unwrap().basis.contains("copy-on-read"));

    let spawn = ForecastInputs {
        start_method: Some("spawn".into()),
        ..copy_on_read_window()
    };
    assert_eq!(forecast(&spawn, None).copy_on_read, None);

    let mut one_flat = copy_on_read_window();
    one_flat.workers_uss[1].uss_bytes = one_flat.workers_uss[1].uss_at_open_bytes;
    assert_eq!(forecast(&one_flat, None).copy_on_read, None);

    let mut shrinking = copy_on_read_window();
    for w in &mut shrinking.workers_uss {
        w.uss_bytes = w.uss_at_open_bytes - MIB;
    }
    let f = forecast(&shrinking, None);
    let w = f.worker_epoch_end.unwrap();
    assert_eq!(
        w.bytes,
        99 * MIB,
        "a shrinking worker is not extrapolated down"
    );
    assert!(
        w.basis.ends_with("no growth per sample read"),
        "{}",
        w.basis
    );
}

#[test]
fn the_memory_limit_names_its_kind() {
    let f = forecast(
        &copy_on_read_window(),
        Some(&limits(GIB, 2 * GIB, "/sys/fs/cgroup/memory.max")),
    );
    assert_eq!(f.fits, Some(false));
    assert!(
        f.verdict.contains("against the 2.00 GiB memory limit"),
        "{}",
        f.verdict
    );
    let Some(Failure::WouldNotFit { resource, .. }) = would_not_fit(&f) else {
        panic!("a misfit");
    };
    assert_eq!(resource, Resource::Memory);
    let f = forecast(
        &copy_on_read_window(),
        Some(&limits(GIB, 64 * GIB, "/proc/meminfo MemTotal")),
    );
    assert_eq!(f.fits, Some(true));
    assert!(f.verdict.starts_with("fits: "), "{}", f.verdict);
    assert!(
        f.verdict.contains("64.00 GiB of physical memory"),
        "{}",
        f.verdict
    );
    assert_eq!(would_not_fit(&f), None);
}

#[test]
fn a_main_process_alone_is_held_to_the_limit() {
    let inputs = ForecastInputs {
        workers: 0,
        samples_in_window: 640,
        main_rss_bytes: Some(3 * GIB),
        ..ForecastInputs::default()
    };
    let f = forecast(
        &inputs,
        Some(&limits(GIB, 2 * GIB, "/sys/fs/cgroup/memory.max")),
    );
    let m = f.memory_epoch_end.as_ref().unwrap();
    assert_eq!(m.bytes, 3 * GIB);
    assert!(m.basis.contains("in the window"), "{}", m.basis);
    assert_eq!(f.fits, Some(false));
}

/// FakeData's shape (pytorch/examples' imagenet `--dummy`): two workers, 240 samples in the
/// window, +30 KiB per sample read (3.5 MiB each, inside the 4 MiB noise), of a 1.28 M-sample
/// epoch.
fn fake_data_window() -> ForecastInputs {
    let open = 200 * MIB;
    ForecastInputs {
        workers: 2,
        prefetch_factor: Some(2),
        batch_bytes: Some(600 * KIB),
        start_method: Some("fork".into()),
        shuffle: Some(false),
        dataset_len: Some(1_281_167),
        samples_before_window: 80,
        samples_in_window: 240,
        main_rss_bytes: Some(GIB),
        workers_uss: (0..2)
            .map(|w| WorkerWindow {
                worker_id: w,
                uss_at_open_bytes: open,
                uss_bytes: open + 120 * 30 * KIB,
            })
            .collect(),
        ..ForecastInputs::default()
    }
}

#[test]
fn a_misfit_by_a_growth_inside_the_noise_does_not_skip_the_configuration() {
    let l = limits(8 * GIB, 24 * GIB, "/proc/meminfo MemTotal");
    let f = forecast(&fake_data_window(), Some(&l));
    // The figure is the extrapolation, as before (and as `validate` recomputes it) ...
    assert!(f.memory_epoch_end.as_ref().unwrap().bytes > 24 * GIB);
    assert_eq!(f.fits, Some(false));
    // ... but it rests on 3.5 MiB per worker, which the window cannot tell from no growth.
    assert_eq!(would_not_fit(&f), None, "{}", f.verdict);
    assert!(f.verdict.starts_with("may not fit: "), "{}", f.verdict);
    assert!(
        f.verdict.ends_with(
            "; but the workers' growth over the window (3.5 MiB each over 120 samples) is \
             within the 4.0 MiB a worker's memory moves anyway: the window cannot tell it from \
             no growth (a longer window, `--steps`, would)"
        ),
        "{}",
        f.verdict
    );
    // Past the noise the misfit stands: 7 MiB each over the same window.
    let mut real = fake_data_window();
    for w in &mut real.workers_uss {
        w.uss_bytes = w.uss_at_open_bytes + 120 * 60 * KIB;
    }
    let f = forecast(&real, Some(&l));
    assert!(matches!(
        would_not_fit(&f),
        Some(Failure::WouldNotFit {
            resource: Resource::Memory,
            ..
        })
    ));
    assert!(f.verdict.starts_with("would not fit: "), "{}", f.verdict);
    assert!(!f.verdict.contains("cannot tell"), "{}", f.verdict);
}
