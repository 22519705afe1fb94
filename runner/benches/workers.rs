//! What a process worker costs to start, and whether restarting workers each
//! epoch still costs much. Two measurements, each interleaved with its
//! baseline in this one process:
//!
//! 1. start: one process worker, from `start_epoch` to its first batch (a
//!    1-sample tensor batch, so this is start-up plus one round trip),
//!    beside starting the libtorch-linked `stallscope --version` — what every
//!    worker paid when workers were the runner's own binary;
//! 2. a whole-run training epoch of 512 samples × 5 ms (synthetic latency),
//!    batch 32, the linear model, 4 process workers restarted every epoch
//!    vs persistent, rounds alternating which goes first.
//!
//! `cargo xtask bench workers [-- ROUNDS]` (default 7 rounds; CPU).

use std::process::Command;
use std::sync::atomic::AtomicBool;
use std::time::Instant;

use stallscope_bundle::TimingMode;
use stallscope_core::{EpochSlot, ModelSpec};
use stallscope_loader::{Loader, LoaderConfig, SourceSpec, WorkerKind};
use stallscope_torch::{CopyMode, DeviceCtx, NativeFeed, Pinning, Trainer, train_epoch, warm_up};

const BATCH: usize = 32;
const SAMPLES: usize = 512;
const FEATURES: usize = 64;
const CLASSES: usize = 4;

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

/// Seconds from `start_epoch` to the first batch of one fresh process worker.
fn worker_start() -> f64 {
    let config = LoaderConfig {
        batch_size: 1,
        workers: 1,
        kind: WorkerKind::Processes,
        prefetch: 1,
        ..LoaderConfig::default()
    };
    let spec = SourceSpec::Tensor {
        samples: 1,
        features: 8,
        classes: 2,
        seed: 0,
    };
    let mut loader = Loader::new(config, spec).expect("loader");
    let t0 = Instant::now();
    let mut epoch = loader.start_epoch(0).expect("epoch");
    epoch.next_batch().expect("a batch").expect("batch");
    t0.elapsed().as_secs_f64()
}

/// Seconds to run `stallscope --version` (the libtorch-linked runner).
fn runner_start(exe: &str) -> f64 {
    let t0 = Instant::now();
    let out = Command::new(exe)
        .arg("--version")
        .output()
        .expect("stallscope");
    assert!(out.status.success(), "stallscope --version failed");
    t0.elapsed().as_secs_f64()
}

/// Whole-run seconds of one training epoch over the synthetic source.
fn epoch_seconds(feed: &mut NativeFeed, trainer: &mut Trainer, ctx: &DeviceCtx, epoch: u32) -> f64 {
    let stop = AtomicBool::new(false);
    let slot = EpochSlot {
        mode: TimingMode::WholeRun,
        repeat: 0,
        epoch,
    };
    let run = train_epoch(trainer, feed, ctx, CopyMode::default(), slot, &stop).expect("epoch");
    run.whole_run
        .and_then(|w| w.seconds)
        .expect("whole-run seconds")
}

fn synthetic_feed(persistent: bool) -> NativeFeed {
    let config = LoaderConfig {
        batch_size: BATCH,
        workers: 4,
        kind: WorkerKind::Processes,
        prefetch: 2,
        persistent,
        ..LoaderConfig::default()
    };
    let spec = SourceSpec::Synthetic {
        samples: SAMPLES,
        features: FEATURES,
        classes: CLASSES,
        latency_us: 5_000,
        cpu_work_rounds: 0,
    };
    NativeFeed::new(config, spec, Pinning::Off).expect("loader")
}

fn main() {
    let rounds: usize = std::env::args()
        .skip(1)
        .find_map(|a| a.parse().ok())
        .unwrap_or(7);
    let exe = env!("CARGO_BIN_EXE_stallscope");
    let worker = stallscope_loader::worker_program().expect("the worker binary");
    println!("worker binary: {}", worker.display());
    println!(
        "1. process start, median of {} interleaved trials",
        rounds * 4
    );
    // One of each first: page cache and dynamic loader warmed for both.
    worker_start();
    runner_start(exe);
    let (mut w, mut r) = (Vec::new(), Vec::new());
    for i in 0..rounds * 4 {
        if i % 2 == 0 {
            w.push(worker_start());
            r.push(runner_start(exe));
        } else {
            r.push(runner_start(exe));
            w.push(worker_start());
        }
    }
    let (wm, rm) = (median(w), median(r));
    println!(
        "  worker start to first batch   {:>8.2} ms   (target: at most 10 ms)",
        wm * 1e3
    );
    println!(
        "  libtorch-linked runner start  {:>8.2} ms   worker/runner {:.3}",
        rm * 1e3,
        wm / rm
    );

    println!(
        "2. whole-run epochs: {SAMPLES} samples × 5 ms, batch {BATCH}, linear model, \
         4 process workers; median of {rounds}"
    );
    let ctx = DeviceCtx::cpu();
    let model = ModelSpec::Linear {
        features: FEATURES as i64,
        classes: CLASSES as i64,
    };
    let (mut restarted, mut persistent) = (Vec::new(), Vec::new());
    let mut feeds = [synthetic_feed(false), synthetic_feed(true)];
    let mut trainers: Vec<Trainer> = (0..2)
        .map(|_| {
            let mut t =
                Trainer::new(model, model.default_optimizer(), ctx.device, 0).expect("model");
            warm_up(&mut t, &ctx, BATCH as i64).expect("warm-up");
            t
        })
        .collect();
    // Untimed first epoch of each: the persistent workers start here.
    for k in 0..2 {
        epoch_seconds(&mut feeds[k], &mut trainers[k], &ctx, 0);
    }
    for round in 0..rounds {
        let order = if round % 2 == 0 { [0, 1] } else { [1, 0] };
        for k in order {
            let s = epoch_seconds(&mut feeds[k], &mut trainers[k], &ctx, round as u32 + 1);
            if k == 0 {
                &mut restarted
            } else {
                &mut persistent
            }
            .push(s);
        }
    }
    let (rs, ps) = (median(restarted), median(persistent));
    println!("  restarted every epoch  {:>8.1} ms", rs * 1e3);
    println!("  persistent             {:>8.1} ms", ps * 1e3);
    println!(
        "  restarted/persistent   {:>8.3}   (target: at most 1.15)",
        rs / ps
    );
}
