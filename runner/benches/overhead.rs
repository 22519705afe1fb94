//! The cost of the runner's whole-run instrumentation and of the timeline
//! sampler: the same training epochs run bare (a plain loop over the feed),
//! through `stallscope_torch::train_epoch` in whole-run mode with the
//! sampler off, and with it on, interleaved in one process for several
//! rounds (the order rotated each round); prints the medians and the
//! ratios. Target: under 1% for each.
//!
//! `cargo xtask bench overhead [-- ROUNDS]` (default 15 rounds), on the CPU
//! with one libtorch thread.

use std::sync::atomic::AtomicBool;
use std::time::Instant;

use stallscope_bundle::TimingMode;
use stallscope_core::{EpochSlot, ModelSpec};
use stallscope_torch::{
    CopyMode, Dataset, DeviceCtx, FashionMnist, Feed, InLoopConfig, InLoopLoader, Order, Trainer,
    tensor_data, to_device, train_epoch, warm_up,
};

struct Case {
    name: &'static str,
    /// Rounds relative to the command-line count (short epochs get more).
    rounds_factor: usize,
    model: ModelSpec,
    batch: usize,
    dataset: std::sync::Arc<dyn Dataset>,
}

fn bare_epoch(trainer: &mut Trainer, feed: &mut dyn Feed, ctx: &DeviceCtx, epoch: u32) -> f64 {
    ctx.synchronize();
    let t0 = Instant::now();
    {
        let mut it = feed.start_epoch(epoch).expect("epoch");
        while let Some(batch) = it.next_batch() {
            let batch = batch.expect("batch");
            let (x, y) = to_device(&batch, ctx, CopyMode::default()).expect("copy");
            trainer.step(&x, &y).expect("step");
        }
    }
    ctx.synchronize();
    t0.elapsed().as_secs_f64()
}

/// One arm's epochs: the runner's epoch seconds and the wall time of the
/// whole call (sampler start and join included).
#[derive(Default)]
struct Arm {
    inner: Vec<f64>,
    outer: Vec<f64>,
    samples: Vec<f64>,
    sampler_cpu: Vec<f64>,
}

impl Arm {
    fn range(&self) -> (f64, f64) {
        let lo = self.inner.iter().copied().fold(f64::INFINITY, f64::min);
        let hi = self.inner.iter().copied().fold(0.0, f64::max);
        (lo * 1e3, hi * 1e3)
    }
}

/// The ratio of medians and the median of paired (same-round) ratios.
fn ratio_line(what: &str, a: &[f64], b: &[f64]) {
    let mut paired: Vec<f64> = a.iter().zip(b).map(|(x, y)| x / y).collect();
    let paired = median(&mut paired);
    let of_medians = median(&mut a.to_vec()) / median(&mut b.to_vec());
    println!("  {what}:");
    println!(
        "    ratio of medians {of_medians:.4} ({:+.2}%), median paired ratio {paired:.4} ({:+.2}%)",
        (of_medians - 1.0) * 100.0,
        (paired - 1.0) * 100.0
    );
}

fn median(v: &mut [f64]) -> f64 {
    v.sort_by(f64::total_cmp);
    let n = v.len();
    if n % 2 == 1 {
        v[n / 2]
    } else {
        (v[n / 2 - 1] + v[n / 2]) / 2.0
    }
}

fn main() {
    let rounds: usize = std::env::args()
        .skip(1)
        .find_map(|a| a.parse().ok())
        .unwrap_or(15);
    // One intra-op thread: on a shared 2-core machine, libtorch's spinning
    // worker threads turn other processes' load into large swings.
    tch::set_num_threads(1);
    let ctx = DeviceCtx::cpu();
    let stop = AtomicBool::new(false);
    println!(
        "whole-run instrumentation and timeline sampler overhead, {rounds} rounds \
         (×10 for short epochs)"
    );
    println!(
        "CPU, libtorch threads: {}; arms interleaved, order rotated each round",
        tch::get_num_threads()
    );
    for case in &cases() {
        let mut arms = measure(case, &ctx, &stop, rounds);
        stallscope_core::cost::set_timeline(true);
        report(case, &mut arms);
    }
}

/// The two models: the seeds/000 linear classifier (short epochs, more
/// rounds) and the seeds/003 CNN.
fn cases() -> [Case; 2] {
    [
        Case {
            name: "seeds/000 linear 64→4, 4096 samples, batch 64",
            rounds_factor: 10,
            model: ModelSpec::Linear {
                features: 64,
                classes: 4,
            },
            batch: 64,
            dataset: std::sync::Arc::new(tensor_data(4096, 64, 4, 0)),
        },
        Case {
            name: "seeds/003 CNN, 2048 FashionMNIST-shape samples, batch 256",
            rounds_factor: 1,
            model: ModelSpec::FashionCnn,
            batch: 256,
            dataset: std::sync::Arc::new(FashionMnist::synthetic(2048, 0)),
        },
    ]
}

/// Every round of one case: the three arms (bare, the runner's epoch with
/// the timeline sampler off, and with it on), their order rotated.
fn measure(case: &Case, ctx: &DeviceCtx, stop: &AtomicBool, rounds: usize) -> [Arm; 3] {
    let config = InLoopConfig {
        batch_size: case.batch,
        order: Order::Shuffled { seed: 42 },
        drop_last: false,
        pin_for: None,
    };
    let mut feed = InLoopLoader::new(case.dataset.clone(), config).expect("feed");
    let mut trainer =
        Trainer::new(case.model, case.model.default_optimizer(), ctx.device, 42).expect("model");
    warm_up(&mut trainer, ctx, case.batch as i64).expect("warm-up");
    // One untimed epoch of each so caches and the allocator settle.
    bare_epoch(&mut trainer, &mut feed, ctx, 0);
    // Three arms, their order rotated every round: bare, the runner's
    // epoch with the timeline sampler off, and with it on.
    let mut arms: [Arm; 3] = Default::default();
    for round in 0..rounds * case.rounds_factor {
        let slot = EpochSlot {
            mode: TimingMode::WholeRun,
            repeat: 0,
            epoch: round as u32 + 1,
        };
        for k in 0..3 {
            let arm = (round + k) % 3;
            let t0 = Instant::now();
            let inner = if arm == 0 {
                bare_epoch(&mut trainer, &mut feed, ctx, slot.epoch)
            } else {
                stallscope_core::cost::set_timeline(arm == 2);
                // The epoch seconds the runner records (synchronized
                // before and after, counting inside): the region
                // bare_epoch times.
                let run = train_epoch(
                    &mut trainer,
                    &mut feed,
                    ctx,
                    CopyMode::default(),
                    slot.clone(),
                    stop,
                )
                .expect("epoch");
                if let Some(tl) = &run.timeline {
                    arms[arm].samples.push(tl.t_ms.len() as f64);
                    arms[arm].sampler_cpu.push(tl.sampler_cpu_s.unwrap_or(0.0));
                }
                run.whole_run
                    .and_then(|w| w.seconds)
                    .expect("whole-run seconds")
            };
            arms[arm].inner.push(inner);
            arms[arm].outer.push(t0.elapsed().as_secs_f64());
        }
    }
    arms
}

/// One case's medians, ranges and ratios.
fn report(case: &Case, arms: &mut [Arm; 3]) {
    println!("{}", case.name);
    let [bare, off, on] = arms;
    for (name, arm) in [
        ("bare", &mut *bare),
        ("sampler off", &mut *off),
        ("sampler on", &mut *on),
    ] {
        let (lo, hi) = arm.range();
        let mut outside: Vec<f64> = arm
            .outer
            .iter()
            .zip(&arm.inner)
            .map(|(o, i)| o - i)
            .collect();
        println!(
            "  {name:<12} epoch median {:9.3} ms [{lo:.3}–{hi:.3}], outside the clock {:.3} ms",
            median(&mut arm.inner.clone()) * 1e3,
            median(&mut outside) * 1e3,
        );
    }
    ratio_line(
        "instrumentation (sampler off ÷ bare), epoch",
        &off.inner,
        &bare.inner,
    );
    ratio_line("sampler (on ÷ off), epoch", &on.inner, &off.inner);
    ratio_line(
        "sampler (on ÷ off), with start/finish",
        &on.outer,
        &off.outer,
    );
    let cpu: f64 = on.sampler_cpu.iter().sum();
    let wall: f64 = on.outer.iter().sum();
    println!(
        "  sampler thread: {:.1} samples per epoch, {:.3}% of one core over the epochs",
        median(&mut on.samples.clone()),
        cpu / wall * 100.0
    );
}
