//! The sampler: which sample indices form which batch in one epoch
//! (sequential or shuffled with a seed; batch size; drop-last).

use serde::{Deserialize, Serialize};

use super::rng::{Rng, shuffle_seed};

/// Order of the samples within an epoch.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case", tag = "order")]
pub enum Sampler {
    /// 0, 1, 2, … (PyTorch `shuffle=False`).
    Sequential,
    /// A permutation drawn from the seed and the epoch (`shuffle=True` with a
    /// seeded generator): the same seed gives the same order in every run.
    Shuffled { seed: u64 },
}

/// The batches of one epoch, each a list of sample indices.
pub fn epoch_batches(
    sampler: Sampler,
    samples: usize,
    batch_size: usize,
    drop_last: bool,
    epoch: u32,
) -> Vec<Vec<u64>> {
    let mut order: Vec<u64> = (0..samples as u64).collect();
    if let Sampler::Shuffled { seed } = sampler {
        Rng::new(shuffle_seed(seed, epoch)).shuffle(&mut order);
    }
    let batch_size = batch_size.max(1);
    order
        .chunks(batch_size)
        .filter(|chunk| !drop_last || chunk.len() == batch_size)
        .map(<[u64]>::to_vec)
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn drop_last_drops_only_the_partial_batch() {
        let keep = epoch_batches(Sampler::Sequential, 10, 4, false, 0);
        assert_eq!(keep.len(), 3);
        assert_eq!(keep[2], vec![8, 9]);
        let drop = epoch_batches(Sampler::Sequential, 10, 4, true, 0);
        assert_eq!(drop.len(), 2);
    }

    #[test]
    fn shuffle_repeats_per_seed_and_changes_per_epoch() {
        let s = Sampler::Shuffled { seed: 42 };
        let a = epoch_batches(s, 100, 10, false, 0);
        assert_eq!(a, epoch_batches(s, 100, 10, false, 0));
        assert_ne!(a, epoch_batches(s, 100, 10, false, 1));
        let mut all: Vec<u64> = a.concat();
        all.sort();
        assert_eq!(all, (0..100).collect::<Vec<_>>());
    }
}
