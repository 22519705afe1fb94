//! The ceiling the loader is held to: the per-image function (read, decode,
//! resize, crop, normalise) in a plain loop on one thread, no loader, no
//! queue, no collate. Each pass takes every image once, alternately with
//! and without the loader's stage clocks (image by image, so both modes see
//! the same machine from one millisecond to the next); the two halves'
//! rates measure what the clocks cost.

use std::time::{Duration, Instant};

use serde::Serialize;

use super::images::ImageDirSource;
use super::rng::Rng;
use super::sample::{SampleError, Source};
use super::stats::StageTimes;

/// One pass over every image.
#[derive(Debug, Clone, Serialize)]
pub struct BarePass {
    pub images: u64,
    pub seconds: f64,
    /// Images loaded without the stage clocks, and their summed time.
    pub untimed_images: u64,
    pub untimed_seconds: f64,
    /// Images loaded as the loader does, clocks on.
    pub timed_images: u64,
    pub timed_seconds: f64,
}

impl BarePass {
    pub fn untimed_images_per_s(&self) -> f64 {
        self.untimed_images as f64 / self.untimed_seconds
    }
    pub fn timed_images_per_s(&self) -> f64 {
        self.timed_images as f64 / self.timed_seconds
    }
}

/// Every image once, in order, on this thread; image `i` runs with the
/// clocks when `i + parity` is odd (alternate the parity between passes).
pub fn bare_pass(source: &ImageDirSource, seed: u64, parity: u64) -> Result<BarePass, SampleError> {
    let mut out = vec![0.0f32; source.sample_dims().iter().product()];
    let mut rng = Rng::new(seed);
    let mut times = StageTimes::default();
    let n = source.len() as u64;
    let (mut untimed, mut timed) = (Duration::ZERO, Duration::ZERO);
    let (mut n_untimed, mut n_timed) = (0, 0);
    let start = Instant::now();
    for index in 0..n {
        let t0 = Instant::now();
        if (index + parity) % 2 == 1 {
            source.load(index, &mut rng, &mut out, &mut times)?;
            timed += t0.elapsed();
            n_timed += 1;
        } else {
            source.load_untimed(index, &mut rng, &mut out)?;
            untimed += t0.elapsed();
            n_untimed += 1;
        }
        std::hint::black_box(&out);
    }
    Ok(BarePass {
        images: n,
        seconds: start.elapsed().as_secs_f64(),
        untimed_images: n_untimed,
        untimed_seconds: untimed.as_secs_f64(),
        timed_images: n_timed,
        timed_seconds: timed.as_secs_f64(),
    })
}
