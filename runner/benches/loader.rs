//! Images/s of the native loader on the image-pipeline source (a generated
//! JPEG set, 500×375 → resize 128 → random crop 112 + flip → normalise,
//! batch 32), best of 1, 2 and 4 worker threads, beside the in-loop loader
//! (workers 0), as a ratio; once for the loader alone (no model) and once
//! training the image CNN through the runner's whole-run loop. Worker
//! processes (2) are shown for reference.
//!
//! `cargo xtask bench loader [-- IMAGES]` (default 256 images; CPU).

use std::sync::atomic::AtomicBool;
use std::time::Instant;

use stallscope_bundle::TimingMode;
use stallscope_core::{EpochSlot, ModelSpec};
use stallscope_loader::{
    ImageSetSpec, ImageSpec, LoaderConfig, Sampler, SourceSpec, WorkerKind, default_cache_root,
    ensure_image_set,
};
use stallscope_torch::{
    CopyMode, DeviceCtx, Feed, NativeFeed, Pinning, Trainer, train_epoch, warm_up,
};

const BATCH: usize = 32;
const CROP: u32 = 112;
/// Timed epochs per configuration (after one untimed epoch that starts the
/// persistent workers and warms the page cache).
const EPOCHS: u32 = 3;

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

fn feed(spec: &SourceSpec, workers: usize, kind: WorkerKind) -> NativeFeed {
    let config = LoaderConfig {
        batch_size: BATCH,
        sampler: Sampler::Shuffled { seed: 42 },
        workers,
        kind,
        prefetch: 2,
        persistent: true,
        // Worker processes run the runner's own binary (this bench is another).
        worker_program: None,
        ..LoaderConfig::default()
    };
    NativeFeed::new(config, spec.clone(), Pinning::Off).expect("loader")
}

/// Median images/s of the loader alone (every batch materialised as tensors).
fn loader_alone(spec: &SourceSpec, workers: usize, kind: WorkerKind) -> f64 {
    let mut f = feed(spec, workers, kind);
    let mut rates = Vec::new();
    for epoch in 0..=EPOCHS {
        let t0 = Instant::now();
        let mut images = 0;
        let mut it = f.start_epoch(epoch).expect("epoch");
        while let Some(b) = it.next_batch() {
            images += b.expect("batch").len();
        }
        drop(it);
        if epoch > 0 {
            rates.push(images as f64 / t0.elapsed().as_secs_f64());
        }
    }
    median(rates)
}

/// Median whole-run images/s training the image CNN through the runner's loop.
fn with_model(spec: &SourceSpec, workers: usize, kind: WorkerKind, ctx: &DeviceCtx) -> f64 {
    let model = ModelSpec::ImageCnn {
        size: CROP as i64,
        classes: 10,
    };
    let mut trainer = Trainer::new(model, model.default_optimizer(), ctx.device, 0).expect("model");
    warm_up(&mut trainer, ctx, BATCH as i64).expect("warm-up");
    let mut f = feed(spec, workers, kind);
    let stop = AtomicBool::new(false);
    let mut rates = Vec::new();
    for epoch in 0..=EPOCHS {
        let slot = EpochSlot {
            mode: TimingMode::WholeRun,
            repeat: 0,
            epoch,
        };
        let run = train_epoch(&mut trainer, &mut f, ctx, CopyMode::default(), slot, &stop)
            .expect("epoch");
        if epoch > 0 {
            rates.push(run.whole_run_samples_per_s().expect("whole-run rate"));
        }
    }
    median(rates)
}

fn row(name: &str, rate: f64, base: f64) {
    println!(
        "  {name:<22} {rate:>9.1} images/s   {:>5.2}× in-loop",
        rate / base
    );
}

fn main() {
    let images: usize = std::env::args()
        .skip(1)
        .find_map(|a| a.parse().ok())
        .unwrap_or(256);
    let set = ImageSetSpec {
        count: images,
        width: 500,
        height: 375,
        classes: 10,
        seed: 0,
        quality: 90,
    };
    let dir = ensure_image_set(&default_cache_root(), &set).expect("image set");
    let spec = SourceSpec::Images(ImageSpec::new(dir.clone(), 128, CROP));
    let cores = std::thread::available_parallelism().map_or(0, |n| n.get());
    println!(
        "native loader on {images} JPEGs of 500×375 ({}), resize 128, random crop {CROP}, flip, normalise, batch {BATCH}",
        dir.display()
    );
    println!(
        "{cores} logical cores; libtorch intra-op threads: {}; median of {EPOCHS} epochs after one untimed epoch; persistent workers, prefetch 2",
        tch::get_num_threads()
    );
    let ctx = DeviceCtx::cpu();
    let threads = [1usize, 2, 4];
    for (title, measure) in [
        (
            "loader alone (no model)",
            &(|w, k| loader_alone(&spec, w, k)) as &dyn Fn(usize, WorkerKind) -> f64,
        ),
        (
            "with the image CNN (whole-run training epochs, CPU)",
            &|w, k| with_model(&spec, w, k, &ctx),
        ),
    ] {
        println!("\n{title}");
        let base = measure(0, WorkerKind::Threads);
        row("in-loop (workers 0)", base, base);
        let mut best = (0, 0.0);
        for &w in &threads {
            let r = measure(w, WorkerKind::Threads);
            row(
                &format!("{w} thread{}", if w == 1 { "" } else { "s" }),
                r,
                base,
            );
            if r > best.1 {
                best = (w, r);
            }
        }
        row("2 processes", measure(2, WorkerKind::Processes), base);
        println!(
            "  best threads ({}) / in-loop: {:.2}×",
            best.0,
            best.1 / base
        );
    }
}
