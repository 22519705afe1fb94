//! The loader's small deterministic random generator (SplitMix64) and the
//! derivation of per-worker, per-epoch seeds.
//!
//! A dependency-free generator keeps the exact sequence stable across crate
//! upgrades, so a bundle's augmentations repeat between runs and releases.

/// SplitMix64: fast, tiny state, good enough for shuffles and augmentation.
#[derive(Debug, Clone)]
pub struct Rng {
    state: u64,
}

impl Rng {
    pub fn new(seed: u64) -> Self {
        Rng { state: seed }
    }

    pub fn next_u64(&mut self) -> u64 {
        self.state = self.state.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.state;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    /// Uniform in `0..n` (`n > 0`), by Lemire's multiply-shift.
    pub fn below(&mut self, n: u64) -> u64 {
        ((self.next_u64() as u128 * n as u128) >> 64) as u64
    }

    /// Uniform in `[0, 1)`.
    pub fn unit_f64(&mut self) -> f64 {
        (self.next_u64() >> 11) as f64 / (1u64 << 53) as f64
    }

    pub fn coin(&mut self) -> bool {
        self.next_u64() >> 63 == 1
    }

    /// Standard normal (Box–Muller), as `torch.randn` draws.
    pub fn normal(&mut self) -> f64 {
        let u1 = 1.0 - self.unit_f64();
        let u2 = self.unit_f64();
        (-2.0 * u1.ln()).sqrt() * (std::f64::consts::TAU * u2).cos()
    }

    /// Fisher–Yates shuffle.
    pub fn shuffle<T>(&mut self, items: &mut [T]) {
        for i in (1..items.len()).rev() {
            let j = self.below(i as u64 + 1) as usize;
            items.swap(i, j);
        }
    }
}

/// seeds/000's data, the one generator every back end and engine uses:
/// `samples × features` float32 from N(0, 1) (Box–Muller over SplitMix64),
/// then labels in `0..classes`, all drawn from `seed`. The same seed gives
/// the same bytes in the loop, in thread and process workers, on libtorch and
/// on wgpu.
pub fn tensor_data(
    samples: usize,
    features: usize,
    classes: usize,
    seed: u64,
) -> (Vec<f32>, Vec<i64>) {
    let mut rng = Rng::new(seed);
    let values = (0..samples * features)
        .map(|_| rng.normal() as f32)
        .collect();
    let labels = (0..samples)
        .map(|_| rng.below(classes.max(1) as u64) as i64)
        .collect();
    (values, labels)
}

/// Seed of one worker's generator in one epoch: the base seed, the worker id
/// and the epoch mixed together, so augmentations differ between workers and
/// epochs and repeat exactly between runs with the same settings. (A plain
/// sum `base + worker + epoch` would give worker 1 of epoch 0 the stream of
/// worker 0 of epoch 1.)
pub fn worker_seed(base: u64, worker: usize, epoch: u32) -> u64 {
    let mut mix = Rng::new(base ^ 0x5354_414C_4C53_434F);
    let a = mix.next_u64();
    Rng::new(a ^ (worker as u64).wrapping_mul(0xA24B_AED4_963E_E407) ^ ((epoch as u64) << 32))
        .next_u64()
}

/// Seed of the sampler's shuffle in one epoch.
pub fn shuffle_seed(base: u64, epoch: u32) -> u64 {
    Rng::new(
        base.wrapping_add(epoch as u64)
            .wrapping_mul(0x9E37_79B9_7F4A_7C15),
    )
    .next_u64()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn seeds_differ_across_workers_and_epochs_and_repeat() {
        let s = |w, e| worker_seed(7, w, e);
        assert_ne!(s(0, 0), s(1, 0));
        assert_ne!(s(1, 0), s(0, 1));
        assert_eq!(s(3, 2), worker_seed(7, 3, 2));
        assert_ne!(worker_seed(7, 0, 0), worker_seed(8, 0, 0));
    }

    #[test]
    fn below_stays_in_range_and_shuffle_is_a_permutation() {
        let mut r = Rng::new(1);
        assert!((0..1000).all(|_| r.below(7) < 7));
        let mut v: Vec<u32> = (0..100).collect();
        r.shuffle(&mut v);
        assert_ne!(v, (0..100).collect::<Vec<_>>());
        v.sort();
        assert_eq!(v, (0..100).collect::<Vec<_>>());
    }
}
