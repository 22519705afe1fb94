//! One seed, one sample order, the same bytes: on every back end and every
//! worker kind. The libtorch in-loop loader, the native loader feeding
//! libtorch (in the loop, threads, processes) and the native loader as the
//! wgpu back end takes it (host batches) must deliver identical batches, and
//! the seeds/000 generator must give libtorch, the loader and wgpu the same
//! floats.

use stallscope_loader::{Loader, LoaderConfig, Sampler, SourceSpec, WorkerKind};
use stallscope_torch::{Feed, InLoopConfig, InLoopLoader, NativeFeed, Order, Pinning, tensor_data};

const SAMPLES: usize = 200;
const FEATURES: usize = 6;
const CLASSES: usize = 5;
const SEED: u64 = 11;
const SHUFFLE: u64 = 42;
const BATCH: usize = 32;

/// (sample ids, inputs, labels) of every batch of two epochs.
type Epochs = Vec<Vec<(Vec<u64>, Vec<f32>, Vec<i64>)>>;

fn from_feed(feed: &mut dyn Feed) -> Epochs {
    (0..2)
        .map(|e| {
            let mut it = feed.start_epoch(e).unwrap();
            let mut out = Vec::new();
            while let Some(b) = it.next_batch() {
                let b = b.unwrap();
                let x = Vec::<f32>::try_from(b.inputs.flatten(0, -1)).unwrap();
                let y = Vec::<i64>::try_from(b.labels.flatten(0, -1)).unwrap();
                out.push((b.sample_ids.clone(), x, y));
            }
            out
        })
        .collect()
}

fn config(workers: usize, kind: WorkerKind) -> LoaderConfig {
    LoaderConfig {
        batch_size: BATCH,
        sampler: Sampler::Shuffled { seed: SHUFFLE },
        workers,
        kind,
        prefetch: 2,
        ..LoaderConfig::default()
    }
}

fn spec() -> SourceSpec {
    SourceSpec::Tensor {
        samples: SAMPLES,
        features: FEATURES,
        classes: CLASSES,
        seed: SEED,
    }
}

#[test]
fn every_back_end_and_worker_kind_sees_the_same_batches() {
    // libtorch's in-loop loader over the libtorch dataset.
    let mut in_loop = InLoopLoader::new(
        tensor_data(SAMPLES, FEATURES, CLASSES as u64, SEED),
        InLoopConfig {
            batch_size: BATCH,
            order: Order::Shuffled { seed: SHUFFLE },
            drop_last: false,
            pin_for: None,
        },
    )
    .unwrap();
    let reference = from_feed(&mut in_loop);
    assert_eq!(reference[0].len(), SAMPLES.div_ceil(BATCH));
    assert_ne!(reference[0][0].0, reference[1][0].0, "epochs reshuffle");

    // The native loader feeding libtorch, every worker kind.
    for (workers, kind) in [
        (0, WorkerKind::Threads),
        (3, WorkerKind::Threads),
        (3, WorkerKind::Processes),
    ] {
        let mut feed = NativeFeed::new(config(workers, kind), spec(), Pinning::Off).unwrap();
        assert_eq!(from_feed(&mut feed), reference, "{workers} {kind:?}");
    }

    // The native loader as the wgpu back end takes it: plain host batches.
    for (workers, kind) in [(0, WorkerKind::Threads), (2, WorkerKind::Processes)] {
        let mut loader = Loader::new(config(workers, kind), spec()).unwrap();
        let got: Epochs = (0..2)
            .map(|e| {
                loader
                    .start_epoch(e)
                    .unwrap()
                    .map(|b| {
                        let b = b.unwrap();
                        (b.sample_ids, b.inputs, b.labels)
                    })
                    .collect()
            })
            .collect();
        assert_eq!(got, reference, "host batches, {workers} {kind:?}");
    }

    // wgpu's in-loop path draws its data and order from the same generator
    // and sampler.
    let (x, y) =
        stallscope_wgpu::generate_data(SAMPLES as u32, FEATURES as u32, CLASSES as u32, SEED);
    let order = stallscope_torch::epoch_indices(
        Order::Shuffled { seed: SHUFFLE },
        SAMPLES,
        BATCH,
        false,
        1,
    );
    for (ids, (ref_ids, ref_x, ref_y)) in order.iter().zip(&reference[1]) {
        assert_eq!(ids, ref_ids);
        let rows: Vec<f32> = ids
            .iter()
            .flat_map(|&i| x[i as usize * FEATURES..(i as usize + 1) * FEATURES].to_vec())
            .collect();
        assert_eq!(&rows, ref_x);
        let labels: Vec<i64> = ids.iter().map(|&i| i64::from(y[i as usize])).collect();
        assert_eq!(&labels, ref_y);
    }
}
