//! The sampler: which sample indices form which batch in one epoch
//! (sequential or shuffled with a seed; batch size; drop-last; one rank's
//! share, as `DistributedSampler` takes it).

use std::sync::OnceLock;

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

/// Which share of every epoch one process takes: rank `rank` of `world`
/// (one process is [`Shard::WHOLE`]). A ranked run sets its process's shard
/// once ([`Shard::set_for_process`]) and every feed's [`epoch_batches`]
/// takes it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct Shard {
    pub rank: usize,
    pub world: usize,
}

static PROCESS_SHARD: OnceLock<Shard> = OnceLock::new();

impl Shard {
    /// The whole epoch: rank 0 of 1.
    pub const WHOLE: Shard = Shard { rank: 0, world: 1 };

    /// Make `self` the share every [`epoch_batches`] of this process takes
    /// (once, before any feed starts); false when one was set already.
    pub fn set_for_process(self) -> bool {
        PROCESS_SHARD.set(self).is_ok()
    }

    /// This process's share ([`Shard::WHOLE`] unless a ranked run set one).
    pub fn of_process() -> Shard {
        PROCESS_SHARD.get().copied().unwrap_or(Shard::WHOLE)
    }

    /// This rank's part of one epoch's `order` (the same on every rank), as
    /// `DistributedSampler` with its own `drop_last` off: padded by
    /// repeating its start to a multiple of `world`, then every `world`-th
    /// sample from position `rank`.
    pub fn take(self, order: Vec<u64>) -> Vec<u64> {
        let world = self.world.max(1);
        if world == 1 || order.is_empty() {
            return order;
        }
        let total = order.len().div_ceil(world) * world;
        let padded: Vec<u64> = order.iter().copied().cycle().take(total).collect();
        padded
            .into_iter()
            .skip(self.rank.min(world - 1))
            .step_by(world)
            .collect()
    }
}

/// The batches of one epoch, each a list of sample indices: this process's
/// share ([`Shard::of_process`]; the whole epoch for one process).
pub fn epoch_batches(
    sampler: Sampler,
    samples: usize,
    batch_size: usize,
    drop_last: bool,
    epoch: u32,
) -> Vec<Vec<u64>> {
    shard_batches(
        sampler,
        samples,
        batch_size,
        drop_last,
        epoch,
        Shard::of_process(),
    )
}

/// One rank's batches of one epoch, as PyTorch's `DistributedSampler` (with
/// its own `drop_last` off) shares an epoch: the epoch's order (the same on
/// every rank, from the seed and the epoch) is padded by repeating its start
/// to a multiple of `world`, and rank `r` takes every `world`-th sample from
/// position `r`; then batches as usual.
pub fn shard_batches(
    sampler: Sampler,
    samples: usize,
    batch_size: usize,
    drop_last: bool,
    epoch: u32,
    shard: Shard,
) -> Vec<Vec<u64>> {
    let mut order: Vec<u64> = (0..samples as u64).collect();
    if let Sampler::Shuffled { seed } = sampler {
        Rng::new(shuffle_seed(seed, epoch)).shuffle(&mut order);
    }
    order = shard.take(order);
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

    #[test]
    fn shards_are_equal_strided_shares_of_one_padded_order() {
        let s = Sampler::Shuffled { seed: 7 };
        let whole = epoch_batches(s, 10, 100, false, 3).concat();
        assert_eq!(
            shard_batches(s, 10, 100, false, 3, Shard::WHOLE).concat(),
            whole
        );
        // 10 samples over 4 ranks: padded to 12 with the order's first two.
        let mut padded = whole.clone();
        padded.extend_from_slice(&whole[..2]);
        for rank in 0..4 {
            let mine = shard_batches(s, 10, 100, false, 3, Shard { rank, world: 4 }).concat();
            let expected: Vec<u64> = padded.iter().copied().skip(rank).step_by(4).collect();
            assert_eq!(mine, expected, "rank {rank}");
            assert_eq!(mine.len(), 3);
        }
        // Divisible: the ranks' shares are disjoint and cover the epoch.
        let mut all: Vec<u64> = (0..5)
            .flat_map(|rank| shard_batches(s, 20, 3, false, 0, Shard { rank, world: 5 }).concat())
            .collect();
        all.sort();
        assert_eq!(all, (0..20).collect::<Vec<_>>());
    }
}
