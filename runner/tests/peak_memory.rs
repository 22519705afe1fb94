//! The same meaning of an epoch's host peak on every back end: each epoch's
//! `host_peak_rss_bytes` is its own, not the process's peak so far, because
//! the one loop resets it before every epoch. An epoch that holds a large
//! buffer is followed by one that does not; the second's figure is the small
//! one, on libtorch (the CPU) with the in-loop loader and with the native
//! loader (stallscope's own, worker threads), and on wgpu (lavapipe). Its
//! own process, so no other test's memory moves the peaks. The Python
//! engines (pytorch, spdl, dali, nodes) and the job hold the same rule in
//! python/tests/test_peaks.py and test_job.py (PeakMemory), through the
//! harness and the instrumentation the runner reads.

use std::sync::atomic::AtomicBool;

use stallscope_bundle::{Run, TimingMode};
use stallscope_core::{EpochSlot, ModelSpec, run_epoch};
use stallscope_loader::{LoaderConfig, SourceSpec, WorkerKind};
use stallscope_torch::{
    CopyMode, EpochIter, Feed, FeedError, HostBatch, InLoopConfig, InLoopLoader, NativeFeed, Order,
    Pinning, TensorDataset, Trainer, train_epoch,
};
use stallscope_wgpu::{Batches, HostBatch as WgpuBatch, LinearTrainer, WgpuCtx, WgpuSteps};

const BALLAST: usize = 384 << 20;

/// A feed whose epoch 0 holds a large buffer (every page touched) while it
/// runs.
struct Heavy<F: Feed> {
    inner: F,
}

struct HeavyEpoch<'a> {
    inner: Box<dyn EpochIter + 'a>,
    _ballast: Vec<u8>,
}

impl EpochIter for HeavyEpoch<'_> {
    fn next_batch(&mut self) -> Option<Result<HostBatch, FeedError>> {
        self.inner.next_batch()
    }
}

impl<F: Feed> Feed for Heavy<F> {
    fn name(&self) -> &str {
        "heavy"
    }
    fn samples_per_epoch(&self) -> u64 {
        self.inner.samples_per_epoch()
    }
    fn batches_per_epoch(&self) -> u64 {
        self.inner.batches_per_epoch()
    }
    fn batch_bytes(&self) -> u64 {
        self.inner.batch_bytes()
    }
    fn start_epoch(&mut self, epoch: u32) -> Result<Box<dyn EpochIter + '_>, FeedError> {
        let ballast = if epoch == 0 {
            vec![1u8; BALLAST]
        } else {
            Vec::new()
        };
        Ok(Box::new(HeavyEpoch {
            inner: self.inner.start_epoch(epoch)?,
            _ballast: std::hint::black_box(ballast),
        }))
    }
    fn loader_stats(&mut self) -> Option<stallscope_bundle::LoaderStats> {
        None
    }
}

fn slot(epoch: u32) -> EpochSlot {
    EpochSlot {
        mode: TimingMode::WholeRun,
        repeat: 0,
        epoch,
    }
}

fn peak(run: &Run) -> u64 {
    run.memory.as_ref().unwrap().host_peak_rss_bytes.unwrap()
}

/// Freed memory goes back to the OS (glibc keeps small freed blocks).
fn trim() {
    // SAFETY: malloc_trim only returns free pages; nothing else is touched.
    unsafe { libc::malloc_trim(0) };
}

fn assert_own(backend: &str, peaks: &[u64]) {
    eprintln!("{backend}: epoch peaks {peaks:?}");
    assert!(
        peaks[1] + (256 << 20) < peaks[0],
        "{backend}: epoch 1's peak {} should be far below epoch 0's {}",
        peaks[1],
        peaks[0]
    );
}

fn libtorch(name: &str, feed: impl Feed) {
    let spec = ModelSpec::Linear {
        features: 64,
        classes: 4,
    };
    let ctx = stallscope_torch::DeviceCtx::cpu();
    let mut trainer = Trainer::new(spec, spec.default_optimizer(), ctx.device, 0).unwrap();
    let mut feed = Heavy { inner: feed };
    let stop = AtomicBool::new(false);
    let peaks: Vec<u64> = (0..2)
        .map(|e| {
            let copy = CopyMode::default();
            let run = train_epoch(&mut trainer, &mut feed, &ctx, copy, slot(e), &stop).unwrap();
            trim();
            peak(&run)
        })
        .collect();
    assert_own(name, &peaks);
}

fn in_loop() -> InLoopLoader<TensorDataset> {
    InLoopLoader::new(
        stallscope_torch::tensor_data(512, 64, 4, 1),
        InLoopConfig {
            batch_size: 64,
            order: Order::Shuffled { seed: 42 },
            drop_last: false,
            pin_for: None,
        },
    )
    .unwrap()
}

/// The native loader with two worker threads (their memory is the runner's).
fn native() -> NativeFeed {
    let config = LoaderConfig {
        workers: 2,
        kind: WorkerKind::Threads,
        ..LoaderConfig::default()
    };
    let spec = SourceSpec::Tensor {
        samples: 512,
        features: 64,
        classes: 4,
        seed: 1,
    };
    NativeFeed::new(config, spec, Pinning::Off).unwrap()
}

fn wgpu() {
    let ctx = WgpuCtx::new().expect("a wgpu adapter (software Vulkan: mesa-vulkan-drivers)");
    let (features, rows) = (64usize, 256usize);
    let trainer = LinearTrainer::new(&ctx, features as u32, 4, rows as u32, 0.01).unwrap();
    let stop = AtomicBool::new(false);
    let mut peaks = Vec::new();
    // Epoch 0's host batches hold 384 MiB; epoch 1's one small batch.
    for (epoch, batches) in [(0u32, BALLAST / (rows * features * 4)), (1, 1)] {
        let host: Vec<WgpuBatch> = (0..batches)
            .map(|b| WgpuBatch {
                x: vec![b as f32; rows * features],
                y: vec![0; rows],
            })
            .collect();
        let mut steps = WgpuSteps {
            trainer: &trainer,
            batches: Batches::Host(&host),
        };
        peaks.push(peak(&run_epoch(&mut steps, &slot(epoch), &stop).unwrap()));
        drop(host);
        trim();
    }
    assert_own("wgpu", &peaks);
}

#[test]
fn an_epochs_host_peak_is_its_own_on_every_back_end() {
    assert!(
        std::fs::write("/proc/self/clear_refs", "5").is_ok(),
        "this kernel refuses /proc/self/clear_refs"
    );
    libtorch("libtorch, in-loop loader", in_loop());
    libtorch("libtorch, native loader", native());
    wgpu();
}
