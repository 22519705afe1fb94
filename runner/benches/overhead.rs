//! The cost of the runner's whole-run instrumentation: the same training
//! epochs run bare (a plain loop over the feed) and through
//! `train::run_epoch` in whole-run mode, interleaved in one process for
//! several rounds (alternating which goes first); prints the medians and the
//! ratio. Target: under 1% overhead.
//!
//! `cargo xtask bench overhead [-- ROUNDS]` (default 15 rounds), on the CPU
//! with one libtorch thread.

use std::sync::atomic::AtomicBool;
use std::time::Instant;

use stallscope::data::{FashionMnist, tensor_data};
use stallscope::device::DeviceCtx;
use stallscope::feed::{Dataset, Feed, InLoopConfig, InLoopLoader, Order};
use stallscope::models::{ModelSpec, Trainer};
use stallscope::train::{CopyMode, EpochSlot, run_epoch, to_device, warm_up};
use stallscope_bundle::TimingMode;

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
    let cases = [
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
    ];
    println!(
        "whole-run instrumentation overhead, {rounds} rounds (×10 for the short epochs), CPU (libtorch threads: {})",
        tch::get_num_threads()
    );
    for case in &cases {
        let config = InLoopConfig {
            batch_size: case.batch,
            order: Order::Shuffled { seed: 42 },
            drop_last: false,
            pin_for: None,
        };
        let mut feed = InLoopLoader::new(case.dataset.clone(), config).expect("feed");
        let mut trainer = Trainer::new(case.model, case.model.default_optimizer(), ctx.device, 42)
            .expect("model");
        warm_up(&mut trainer, &ctx, case.batch as i64).expect("warm-up");
        // One untimed epoch of each so caches and the allocator settle.
        bare_epoch(&mut trainer, &mut feed, &ctx, 0);
        let (mut bare, mut instrumented) = (Vec::new(), Vec::new());
        for round in 0..rounds * case.rounds_factor {
            let slot = EpochSlot {
                mode: TimingMode::WholeRun,
                repeat: 0,
                epoch: round as u32 + 1,
            };
            let timed = |trainer: &mut Trainer, feed: &mut dyn Feed| {
                // The epoch seconds the runner records (synchronized before
                // and after, counting inside): the same region bare_epoch times.
                let run = run_epoch(
                    trainer,
                    feed,
                    &ctx,
                    CopyMode::default(),
                    slot.clone(),
                    &stop,
                )
                .expect("epoch");
                run.whole_run
                    .and_then(|w| w.seconds)
                    .expect("whole-run seconds")
            };
            if round % 2 == 0 {
                bare.push(bare_epoch(&mut trainer, &mut feed, &ctx, slot.epoch));
                instrumented.push(timed(&mut trainer, &mut feed));
            } else {
                instrumented.push(timed(&mut trainer, &mut feed));
                bare.push(bare_epoch(&mut trainer, &mut feed, &ctx, slot.epoch));
            }
        }
        let mut paired: Vec<f64> = instrumented.iter().zip(&bare).map(|(i, b)| i / b).collect();
        let paired = median(&mut paired);
        let (b, i) = (median(&mut bare), median(&mut instrumented));
        println!(
            "{}\n  bare median {:.3} ms [{:.3}–{:.3}]  instrumented median {:.3} ms [{:.3}–{:.3}]  ratio of medians {:.4} ({:+.2}%)  median of paired ratios {:.4} ({:+.2}%)",
            case.name,
            b * 1e3,
            bare[0] * 1e3,
            bare[bare.len() - 1] * 1e3,
            i * 1e3,
            instrumented[0] * 1e3,
            instrumented[instrumented.len() - 1] * 1e3,
            i / b,
            (i / b - 1.0) * 100.0,
            paired,
            (paired - 1.0) * 100.0
        );
    }
}
